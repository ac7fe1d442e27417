/* resync.c -- proof rounds for a quarantined master: its delay, its repair (see
 * resync.h). */
#include "resync.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "proto.h"

enum { PHASE_REPAIR, PHASE_SHORTEN };

struct resync {
    master_conn *masters;
    size_t n, quorum, target;
    int running, phase;
    unsigned gen;            /* bumps on every run: stale replies are ignored */
    size_t pending;
    resync_tally t;
    int64_t first_start_us;  /* when this quarantine's repair was first tried */
    loop_timer deadline;     /* a round's answers are awaited one node timeout at most */
    char xkey[KEYS_MAX];     /* the expiry key (the same on every master) */
};

struct step {
    resync *r;
    unsigned gen;
    size_t index;
};

int64_t resync_wait_ms(int64_t quarantine_ms)
{
    return quarantine_ms < 1000 ? 1000 : quarantine_ms > 10000 ? 10000 : quarantine_ms;
}

int resync_decide(const resync_tally *t, size_t quorum, int waited_out, uint64_t *base)
{
    if (t->proven_peers >= quorum) {
        *base = t->top_proven;
        return RESYNC_REJOIN;
    }
    if (waited_out && t->history == t->n && t->n > 0) {
        *base = t->top_all + RESYNC_GAP;
        return RESYNC_FALLBACK;
    }
    return RESYNC_WAIT;
}

int64_t resync_delay_ms(const resync_tally *t, size_t quorum, double drift_factor)
{
    if (t->expiry_peers < quorum)
        return -1;
    int64_t x = t->expiry_ms > 0 ? t->expiry_ms : 0;
    return x + (int64_t)((double)x * drift_factor) + 2;
}

static void why(resync *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(resync *r, const char *fmt, ...)
{
    master_conn *t = &r->masters[r->target];
    va_list ap;
    va_start(ap, fmt);
    char buf[sizeof t->repair_why];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    master_set_repair_why(t, buf);
}

static void finish(resync *r)
{
    master_conn *t = &r->masters[r->target];
    r->running = 0;
    r->gen++; /* what answers after this is not counted */
    loop_timer_stop(t->loop, &r->deadline);
    if (r->phase == PHASE_SHORTEN) {
        int64_t d = resync_delay_ms(&r->t, r->quorum, t->conf->drift_factor);
        if (d < 0 || master_shorten(t, d) != 0)
            t->shorten_asked = 0; /* not proven, or not sent: asked again in a second */
        return;
    }
    uint64_t base = 0;
    int64_t now = clock_now_us();
    int waited = now - r->first_start_us >= resync_wait_ms(t->conf->quarantine_ms) * 1000;
    if (!master_clock_fit(t, now)) {
        why(r, "its clock must be steady for %d s first (%s)", MCLOCK_STEADY_US / 1000000, t->clock_why);
        return;
    }
    switch (resync_decide(&r->t, r->quorum, waited, &base)) {
    case RESYNC_REJOIN:
    case RESYNC_FALLBACK:
        r->first_start_us = 0;
        master_rejoin(t, base);
        return;
    default:
        why(r, "repair waits for a quorum of proven peers: %zu of %zu (%zu of %zu masters kept "
               "their history)", r->t.proven_peers, r->quorum, r->t.history, r->t.n);
        return; /* the master's timer tries again in a second */
    }
}

static void on_proof(redisAsyncContext *ac, void *reply, void *priv)
{
    struct step *s = priv;
    resync *r = s->r;
    redisReply *rep = reply;
    (void)ac;
    int stale = s->gen != r->gen;
    size_t i = s->index;
    free(s);
    if (stale)
        return;
    /* {proven, largest counter, expiry pttl, history, why} */
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 5 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER && rep->element[1]->type == REDIS_REPLY_INTEGER &&
        rep->element[2]->type == REDIS_REPLY_INTEGER && rep->element[3]->type == REDIS_REPLY_INTEGER) {
        int proven = rep->element[0]->integer == PROTO_PROOF_PROVEN;
        uint64_t top = rep->element[1]->integer > 0 ? (uint64_t)rep->element[1]->integer : 0;
        int history = rep->element[3]->integer == PROTO_PROOF_HISTORY;
        if (history) {
            r->t.history++;
            if (top > r->t.top_all)
                r->t.top_all = top;
        }
        int clock_only = rep->element[4]->type == REDIS_REPLY_STRING && strcmp(rep->element[4]->str, PROTO_PROOF_CLOCK) == 0;
        if (proven && i != r->target) {
            r->t.proven_peers++;
            if (top > r->t.top_proven)
                r->t.top_proven = top;
            if (!clock_only) {
                r->t.expiry_peers++;
                if (rep->element[2]->integer > r->t.expiry_ms)
                    r->t.expiry_ms = rep->element[2]->integer;
            }
        } else if (i == r->target && history && top > r->t.top_proven) {
            r->t.top_proven = top; /* its own counters only add */
        }
    }
    if (--r->pending == 0 && r->running)
        finish(r);
}

/* A master that neither answers nor fails (frozen) costs the round one node timeout:
 * it is decided with what came. */
static void on_deadline(loop_timer *lt)
{
    resync *r = container_of(lt, resync, deadline);
    if (r->running)
        finish(r);
}

resync *resync_new(master_conn *masters, size_t n, size_t quorum, size_t target)
{
    resync *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->masters = masters;
    r->n = n;
    r->quorum = quorum;
    r->target = target;
    r->deadline.cb = on_deadline;
    keys_expiry(masters[target].conf->key_prefix, r->xkey, sizeof r->xkey);
    return r;
}

void resync_free(resync *r)
{
    /* Replies still in flight hold steps that point at r: they are failed (NULL
     * replies) when the connections close, which the owner does before freeing. */
    if (r)
        loop_timer_stop(r->masters[r->target].loop, &r->deadline);
    free(r);
}

static void run(resync *r, int phase)
{
    if (r->running) {
        if (phase == PHASE_SHORTEN)
            r->masters[r->target].shorten_asked = 0; /* asked again in a second */
        return;
    }
    r->phase = phase;
    if (phase == PHASE_REPAIR && !r->first_start_us)
        r->first_start_us = clock_now_us();
    r->running = 1;
    r->gen++;
    r->pending = 1; /* held until every request is out */
    loop_timer_start(r->masters[r->target].loop, &r->deadline,
                     clock_now_us() + r->masters[r->target].conf->node_timeout_ms * 1000);
    memset(&r->t, 0, sizeof r->t);
    r->t.n = r->n;
    for (size_t i = 0; i < r->n; i++) {
        /* Every master is asked, whatever this instance believes of it: only what it
         * proves in its answer counts. */
        master_conn *p = &r->masters[i];
        struct step *s = malloc(sizeof *s);
        if (!s)
            continue;
        s->r = r;
        s->gen = r->gen;
        s->index = i;
        const char *argv[] = {"EVALSHA", p->sha[SCRIPT_PROOF], "2", p->mkey, r->xkey};
        if (!p->sha[SCRIPT_PROOF][0] || master_command(p, 5, argv, NULL, on_proof, s) != 0) {
            free(s);
            continue;
        }
        r->pending++;
    }
    if (--r->pending == 0 && r->running)
        finish(r);
}

void resync_start(resync *r)
{
    run(r, PHASE_REPAIR);
}

void resync_shorten(resync *r)
{
    run(r, PHASE_SHORTEN);
}
