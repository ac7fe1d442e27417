/* resync.c -- repair a quarantined master from its peers' floors (see resync.h). */
#include "resync.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>

struct resync {
    master_conn *masters;
    size_t n, quorum, target;
    int running;
    unsigned gen;            /* bumps on every run: stale replies are ignored */
    size_t pending, ready_ok, any_ok;
    uint64_t largest;
    int64_t first_start_us;  /* when this quarantine's repair was first tried */
};

struct step {
    resync *r;
    unsigned gen;
    int ready;               /* the peer was ready when asked */
};

uint64_t resync_floor(uint64_t largest, size_t ready_peers, size_t quorum, int gap)
{
    if (ready_peers >= quorum || !gap)
        return largest;
    return largest + RESYNC_GAP;
}

int64_t resync_wait_ms(int64_t quarantine_ms)
{
    return quarantine_ms < 1000 ? 1000 : quarantine_ms > 10000 ? 10000 : quarantine_ms;
}

static void finish(resync *r)
{
    master_conn *t = &r->masters[r->target];
    r->running = 0;
    if (r->ready_ok >= r->quorum) {
        r->first_start_us = 0;
        master_rejoin(t, r->largest);
        return;
    }
    /* Too few ready peers: wait for more, then take what answers, with the gap. */
    if (clock_now_us() - r->first_start_us < resync_wait_ms(t->conf->quarantine_ms) * 1000)
        return; /* the master's timer tries again in a second */
    r->first_start_us = 0;
    master_rejoin(t, resync_floor(r->largest, r->ready_ok, r->quorum, 1));
}

static void on_floor(redisAsyncContext *ac, void *reply, void *priv)
{
    struct step *s = priv;
    resync *r = s->r;
    redisReply *rep = reply;
    (void)ac;
    int stale = s->gen != r->gen;
    int ready = s->ready;
    free(s);
    if (stale)
        return;
    if (rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= 0) {
        if ((uint64_t)rep->integer > r->largest)
            r->largest = (uint64_t)rep->integer;
        r->any_ok++;
        r->ready_ok += ready;
    }
    if (--r->pending == 0)
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
    return r;
}

void resync_free(resync *r)
{
    /* Replies still in flight hold steps that point at r: they are failed (NULL
     * replies) when the connections close, which the owner does before freeing. */
    free(r);
}

void resync_start(resync *r)
{
    if (r->running)
        return;
    if (!r->first_start_us)
        r->first_start_us = clock_now_us();
    r->running = 1;
    r->gen++;
    r->pending = 1; /* held until every request is out */
    r->ready_ok = r->any_ok = 0;
    r->largest = 0;
    for (size_t i = 0; i < r->n; i++) {
        /* Its own counters count too (they only add), but never towards the quorum. */
        master_conn *p = &r->masters[i];
        if (p->state != MASTER_READY && p->state != MASTER_QUARANTINED)
            continue;
        struct step *s = malloc(sizeof *s);
        if (!s)
            continue;
        s->r = r;
        s->gen = r->gen;
        s->ready = i != r->target && p->state == MASTER_READY;
        const char *argv[] = {"EVALSHA", p->sha[SCRIPT_TOP], "1", p->mkey};
        if (master_command(p, 4, argv, NULL, on_floor, s) != 0) {
            free(s);
            continue;
        }
        r->pending++;
    }
    if (--r->pending == 0)
        finish(r);
}
