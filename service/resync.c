/* resync.c -- copy fencing counters to a master that lost its data (see resync.h). */
#include "resync.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH "500"

struct resync {
    master_conn *masters;
    size_t n, quorum, target;
    size_t peer;          /* the peer being copied from */
    size_t peers_done;    /* peers copied to the end in this run */
    int running, done;
    unsigned gen;         /* bumps on restart: stale callbacks are ignored */
    int64_t first_start_us; /* when the repair was first asked for */
    char cursor[32];
    loop_timer retry;
};

struct step {
    resync *r;
    unsigned gen;
};

static void next_peer(resync *r);
static void scan(resync *r);

/* A batch is merged: on to the next one, or the next peer. */
static void batch_done(resync *r)
{
    if (strcmp(r->cursor, "0") == 0) {
        r->peers_done++;
        r->peer++;
        next_peer(r);
    } else {
        scan(r);
    }
}

static struct step *step_new(resync *r)
{
    struct step *s = malloc(sizeof *s);
    if (s) {
        s->r = r;
        s->gen = r->gen;
    }
    return s;
}

static void fail(resync *r)
{
    /* A peer or the target went away: try the whole copy again a little later. */
    r->running = 0;
    r->gen++;
    loop_timer_start(r->masters[0].loop, &r->retry, clock_now_us() + 500 * 1000);
}

static void on_merged(redisAsyncContext *ac, void *reply, void *priv)
{
    struct step *s = priv;
    resync *r = s->r;
    int stale = s->gen != r->gen;
    redisReply *rep = reply;
    (void)ac;
    free(s);
    if (stale)
        return;
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        fail(r);
        return;
    }
    batch_done(r);
}

/* The keys and their values from the peer: merge them into the target. */
static void on_values(redisAsyncContext *ac, void *reply, void *priv);

struct values_step {
    resync *r;
    unsigned gen;
    size_t nkeys;
    char **keys;
    size_t *lens;
};

static void free_values_step(struct values_step *v)
{
    for (size_t i = 0; i < v->nkeys; i++)
        free(v->keys[i]);
    free(v->keys);
    free(v->lens);
    free(v);
}

static const char merge_script[] =
    "for i = 1, #KEYS do\n"
    "  local v = tonumber(ARGV[i])\n"
    "  if v and v > tonumber(redis.call('GET', KEYS[i]) or '0') then\n"
    "    redis.call('SET', KEYS[i], ARGV[i])\n"
    "  end\n"
    "end\n"
    "return 1\n";

static void on_values(redisAsyncContext *ac, void *reply, void *priv)
{
    struct values_step *v = priv;
    resync *r = v->r;
    redisReply *rep = reply;
    (void)ac;
    if (v->gen != r->gen) {
        free_values_step(v);
        return;
    }
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != v->nkeys) {
        free_values_step(v);
        fail(r);
        return;
    }
    size_t k = v->nkeys;
    const char **argv = malloc((3 + 2 * k) * sizeof *argv);
    size_t *lens = malloc((3 + 2 * k) * sizeof *lens);
    char nk[24];
    struct step *s = step_new(r);
    if (!argv || !lens || !s) {
        free(argv);
        free(lens);
        free(s);
        free_values_step(v);
        fail(r);
        return;
    }
    snprintf(nk, sizeof nk, "%zu", k);
    argv[0] = "EVAL"; lens[0] = 4;
    argv[1] = merge_script; lens[1] = sizeof merge_script - 1;
    argv[2] = nk; lens[2] = strlen(nk);
    for (size_t i = 0; i < k; i++) {
        argv[3 + i] = v->keys[i];
        lens[3 + i] = v->lens[i];
        redisReply *e = rep->element[i];
        int ok = e->type == REDIS_REPLY_STRING;
        argv[3 + k + i] = ok ? e->str : "0";
        lens[3 + k + i] = ok ? e->len : 1;
    }
    int rc = master_command(&r->masters[r->target], (int)(3 + 2 * k), argv, lens, on_merged, s);
    free(argv);
    free(lens);
    free_values_step(v);
    if (rc != 0) {
        free(s);
        fail(r);
    }
}

static void on_scan(redisAsyncContext *ac, void *reply, void *priv)
{
    struct step *s = priv;
    resync *r = s->r;
    int stale = s->gen != r->gen;
    redisReply *rep = reply;
    (void)ac;
    free(s);
    if (stale)
        return;
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[0]->type != REDIS_REPLY_STRING || rep->element[1]->type != REDIS_REPLY_ARRAY) {
        fail(r);
        return;
    }
    snprintf(r->cursor, sizeof r->cursor, "%s", rep->element[0]->str);
    redisReply *keys = rep->element[1];
    if (keys->elements == 0) {
        batch_done(r); /* nothing in this batch */
        return;
    }
    struct values_step *v = calloc(1, sizeof *v);
    if (!v) {
        fail(r);
        return;
    }
    v->r = r;
    v->gen = r->gen;
    v->nkeys = keys->elements;
    v->keys = calloc(v->nkeys, sizeof *v->keys);
    v->lens = calloc(v->nkeys, sizeof *v->lens);
    const char **argv = calloc(v->nkeys + 1, sizeof *argv);
    size_t *lens = calloc(v->nkeys + 1, sizeof *lens);
    int ok = v->keys && v->lens && argv && lens;
    for (size_t i = 0; ok && i < v->nkeys; i++) {
        redisReply *e = keys->element[i];
        v->keys[i] = e->type == REDIS_REPLY_STRING ? malloc(e->len + 1) : NULL;
        if (!v->keys[i]) {
            ok = 0;
            break;
        }
        memcpy(v->keys[i], e->str, e->len + 1);
        v->lens[i] = e->len;
        argv[1 + i] = v->keys[i];
        lens[1 + i] = e->len;
    }
    if (ok) {
        argv[0] = "MGET";
        lens[0] = 4;
        ok = master_command(&r->masters[r->peer], (int)(v->nkeys + 1), argv, lens, on_values, v) == 0;
    }
    free(argv);
    free(lens);
    if (!ok) {
        free_values_step(v);
        fail(r);
    }
}

static void scan(resync *r)
{
    char pattern[200];
    snprintf(pattern, sizeof pattern, "%s#fence:*", r->masters[r->target].conf->key_prefix);
    const char *argv[] = {"SCAN", r->cursor, "MATCH", pattern, "COUNT", BATCH};
    struct step *s = step_new(r);
    if (!s || master_command(&r->masters[r->peer], 6, argv, NULL, on_scan, s) != 0) {
        free(s);
        fail(r);
    }
}

static void next_peer(resync *r)
{
    while (r->peer < r->n &&
           (r->peer == r->target || !master_usable(&r->masters[r->peer])))
        r->peer++;
    if (r->peer >= r->n) {
        r->running = 0;
        /* A quorum of peers meets the quorum behind every issued token.  With fewer
         * (a majority lost its data at once), wait one more quarantine period for the
         * others, then take what the reachable peers have rather than stay out for
         * ever: safety is already gone with the lock keys of such a majority. */
        int64_t waited = clock_now_us() - r->first_start_us;
        if (r->peers_done >= r->quorum ||
            (r->peers_done >= 1 && waited >= r->masters[r->target].conf->quarantine_ms * 1000))
            r->done = 1;
        else
            fail(r);
        return;
    }
    snprintf(r->cursor, sizeof r->cursor, "0");
    scan(r);
}

static void on_retry(loop_timer *t)
{
    resync_start(container_of(t, resync, retry));
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
    r->retry.cb = on_retry;
    return r;
}

void resync_free(resync *r)
{
    if (!r)
        return;
    loop_timer_stop(r->masters[0].loop, &r->retry);
    /* Callbacks still in flight hold steps that point at r: they are failed (NULL
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
    r->done = 0;
    r->gen++;
    r->peer = 0;
    r->peers_done = 0;
    next_peer(r);
}

int resync_done(const resync *r) { return r->done; }
