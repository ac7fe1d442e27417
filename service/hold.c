/* hold.c -- locks kept alive for their owner (see hold.h). */
#include "hold.h"

#include <stdlib.h>
#include <string.h>

struct hold {
    hold_env *env;
    hold *next, *prev;
    hold_cb cb;                 /* NULL once the owner is gone or told the end */
    void *owner;
    lockop op;                  /* its extension or release */
    int busy;                   /* op is in flight */
    int ending;                 /* release when op is free, then free the hold */
    int shutting;               /* that release is the shutdown's: tell the owner after */
    int recheck;                /* a release of the name was seen while op was in flight */
    int release_seen;           /* ... and the lease may be gone because of it */
    int64_t valid_until_us;     /* the validity last announced ends */
    loop_timer tick;            /* the next extension */
    loop_timer lost;            /* say "lost" at valid_until - margin */
    long ttl_ms;
    int mode;                   /* the grant's (enum lockop_mode): its extensions and
                                 * release go the same way */
    size_t name_len, lease_len;
    char name[NAME_MAX_LEN + 1];
    char lease[LEASE_MAX_LEN + 1];
};

/* The extension period for a ttl: a third of it (at least 1 ms). */
static int64_t hold_period_ms(int64_t ttl_ms)
{
    return ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
}

/* The margin before the announced validity ends by which "lost" is said. */
static int64_t hold_margin_ms(int64_t ttl_ms)
{
    int64_t m = ttl_ms / 10;
    return m < 10 ? 10 : m > 1000 ? 1000 : m;
}

/* After a failed extension: try again this soon (a fraction of the ttl). */
static int64_t retry_ms(int64_t ttl_ms)
{
    int64_t r = ttl_ms / 10;
    return r < 20 ? 20 : r > 1000 ? 1000 : r;
}

static loop *loop_of(const hold *h)
{
    return h->env->ops->rounds->loop;
}

static void tell(hold *h, int event, int64_t validity_ms, const char *reason)
{
    hold_cb cb = h->cb;
    if (!cb)
        return;
    if (event != HOLD_EXTENDED)
        h->cb = NULL; /* the last word */
    cb(h->owner, event, validity_ms, reason);
}

static void hold_free(hold *h)
{
    hold_env *env = h->env;
    loop_timer_stop(loop_of(h), &h->tick);
    loop_timer_stop(loop_of(h), &h->lost);
    if (env->ops->watch)
        env->ops->watch(env->ops, h->name, h->name_len, 0);
    if (h->prev)
        h->prev->next = h->next;
    else
        env->head = h->next;
    if (h->next)
        h->next->prev = h->prev;
    __atomic_sub_fetch(&env->n, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(env->holds_total, 1, __ATOMIC_RELAXED);
    free(h);
}

static void op_done(lockop *op);

static void run(hold *h, int kind)
{
    lockop_init(&h->op, h->env->ops, kind, h->name, h->name_len, op_done, h);
    memcpy(h->op.lease, h->lease, h->lease_len + 1);
    h->op.lease_len = h->lease_len;
    h->op.ttl_ms = h->ttl_ms;
    h->op.mode = h->mode; /* a permit's extension and release go by its semaphore */
    h->busy = 1;
    h->env->start_op(h->env->owner, &h->op);
}

/* The hold is over: let the lock go (when op is free), then free the hold. */
static void end(hold *h)
{
    loop_timer_stop(loop_of(h), &h->tick);
    loop_timer_stop(loop_of(h), &h->lost);
    h->ending = 1;
    if (!h->busy)
        run(h, LOCKOP_RELEASE);
}

static void on_tick(loop_timer *t)
{
    hold *h = container_of(t, hold, tick);
    if (!h->busy && !h->ending)
        run(h, LOCKOP_EXTEND);
}

static void arm_tick(hold *h, int64_t in_ms)
{
    loop_timer_start(loop_of(h), &h->tick, clock_now_us() + in_ms * 1000);
}

/* No extension came through in time: say so before the announced validity ends. */
static void on_lost(loop_timer *t)
{
    hold *h = container_of(t, hold, lost);
    tell(h, HOLD_LOST, 0, "no_quorum");
    end(h);
}

/* Extended for validity_ms from now: timers first, then the owner (who may end it). */
static void extended(hold *h, int64_t validity_ms)
{
    int64_t now = clock_now_us();
    h->valid_until_us = now + validity_ms * 1000;
    int64_t at = h->valid_until_us - hold_margin_ms(h->ttl_ms) * 1000;
    loop_timer_start(loop_of(h), &h->lost, at > now ? at : now);
    arm_tick(h, hold_period_ms(h->ttl_ms));
    tell(h, HOLD_EXTENDED, validity_ms, NULL);
}

static void op_done(lockop *op)
{
    hold *h = op->owner;
    int kind = op->kind;
    rl_err err = op->err;
    h->busy = 0;
    if (kind == LOCKOP_RELEASE) {
        lockop_fini(op);
        if (h->shutting)
            tell(h, HOLD_RELEASED, 0, "shutting_down");
        hold_free(h);
        return;
    }
    if (h->ending) {
        lockop_fini(op);
        run(h, LOCKOP_RELEASE);
        return;
    }
    if (err == RL_OK) {
        int64_t validity_ms = op->validity_ms;
        lockop_fini(op);
        extended(h, validity_ms);
        if (h->ending)
            return; /* its owner went meanwhile */
        if (h->recheck) { /* a release came while it was in flight: ask again */
            h->recheck = 0;
            loop_timer_stop(loop_of(h), &h->tick);
            run(h, LOCKOP_EXTEND);
        } else {
            h->release_seen = 0;
        }
        return;
    }
    lockop_fini(op);
    if (err == RL_E_LEASE_NOT_FOUND) {
        /* Gone from a quorum: released with its lease, or lost.  The extension let go
         * of what was left of it already. */
        loop_timer_stop(loop_of(h), &h->tick);
        loop_timer_stop(loop_of(h), &h->lost);
        if (h->release_seen) {
            tell(h, HOLD_RELEASED, 0, NULL);
        } else {
            tell(h, HOLD_LOST, 0, "lease_lost");
        }
        hold_free(h);
        return;
    }
    /* No quorum this time: again soon, until the lost timer says it is too late. */
    arm_tick(h, retry_ms(h->ttl_ms));
}

hold *hold_new(hold_env *env)
{
    if (env->stopping)
        return NULL;
    long total = __atomic_add_fetch(env->holds_total, 1, __ATOMIC_RELAXED);
    hold *h = total > env->max_holds ? NULL : calloc(1, sizeof *h);
    if (!h) {
        __atomic_fetch_sub(env->holds_total, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    h->env = env;
    h->tick.cb = on_tick;
    h->lost.cb = on_lost;
    return h;
}

void hold_discard(hold *h)
{
    __atomic_fetch_sub(h->env->holds_total, 1, __ATOMIC_RELAXED);
    free(h);
}

void hold_start(hold *h, const lockop *g, hold_cb cb, void *owner)
{
    hold_env *env = h->env;
    h->cb = cb;
    h->owner = owner;
    h->ttl_ms = g->ttl_ms;
    h->mode = g->mode;
    h->name_len = g->name_len;
    memcpy(h->name, g->name, g->name_len + 1);
    h->lease_len = g->lease_len;
    memcpy(h->lease, g->lease, g->lease_len + 1);
    h->next = env->head;
    if (env->head)
        env->head->prev = h;
    env->head = h;
    __atomic_add_fetch(&env->n, 1, __ATOMIC_RELAXED);
    /* A release of the name through another instance is announced (notify.h). */
    if (env->ops->watch)
        env->ops->watch(env->ops, h->name, h->name_len, 1);
    int64_t now = clock_now_us();
    h->valid_until_us = now + g->validity_ms * 1000;
    int64_t at = h->valid_until_us - hold_margin_ms(h->ttl_ms) * 1000;
    loop_timer_start(loop_of(h), &h->lost, at > now ? at : now);
    int64_t first = hold_period_ms(h->ttl_ms);
    if (first > g->validity_ms / 2)
        first = g->validity_ms / 2; /* the grant took a good part of its ttl */
    arm_tick(h, first > 0 ? first : 0);
    if (env->stopping) { /* started during the shutdown: let it go at once */
        h->shutting = 1;
        end(h);
    }
}

void hold_close(hold *h)
{
    h->cb = NULL;
    end(h);
}

void hold_check(hold_env *env, const char *name, size_t len)
{
    for (hold *h = env->head; h; h = h->next) {
        if (h->ending || h->name_len != len || memcmp(h->name, name, len) != 0)
            continue;
        h->release_seen = 1;
        if (h->busy) {
            h->recheck = 1;
        } else {
            loop_timer_stop(loop_of(h), &h->tick);
            run(h, LOCKOP_EXTEND);
        }
    }
}

void hold_shutdown(hold_env *env)
{
    env->stopping = 1;
    for (hold *h = env->head; h; h = h->next) {
        if (h->ending)
            continue;
        h->shutting = h->cb != NULL;
        end(h);
    }
}

void hold_env_fini(hold_env *env)
{
    while (env->head) {
        hold *h = env->head;
        if (h->busy)
            lockop_fini(&h->op);
        h->cb = NULL;
        hold_free(h);
    }
}
