/* finisher.c -- finishing a release the masters did not all confirm (docs/DESIGN.md
 * section 1): the release sent again to the masters that did not answer, idempotent,
 * until each has or the lock's ttl is over; one per lease and name, on the worker's
 * list (env->finishers), cancelled by a new grant of the same lease.  Started by
 * release.c's release_judged. */
#include "lockop_int.h"
#include "oplife.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "multilock.h"
#include "shapes.h"

#define FINISH_FIRST_MS 200
#define FINISH_MAX_DELAY_MS 2000

/* A release whose masters did not all answer: sent again, idempotent (SCRIPT_RELEASE
 * with "<lease>*<target>", a permit's or a set's by lease), to the masters that did not
 * answer, until each has or the lock's ttl is over.  One per lease and name. */
struct lockop_finisher {
    list link;                  /* in env->finishers */
    lockop op;                  /* kind, name, lease, mode: what the release was */
    char who[LEASE_MAX_LEN + 24];
    size_t who_len;
    char scope[NAME_MAX_LEN + 1]; /* a set's release: the token's scope */
    uint64_t mask;              /* masters still to answer */
    int64_t until_us, delay_ms;
    loop_timer timer;
    round *rd;                  /* in flight */
};

static void finisher_free(lockop_finisher *f)
{
    lockop_env *env = f->op.env;
    list_remove(&f->link);
    env->nfinishers--;
    loop_timer_stop(env->rounds->loop, &f->timer);
    if (f->rd) { /* in flight: its replies go nowhere */
        f->rd->done = NULL;
        f->rd->owner = NULL;
        round_unref(f->rd);
    }
    free(f);
}

void finisher_free_all(lockop_env *env)
{
    for (list *node; (node = list_first(&env->finishers));)
        finisher_free(list_data(node, lockop_finisher, link));
}

/* A grant of op's name and lease through this worker: a finisher of an earlier release
 * of the lease must not delete it (a lease names one hold; README). */
void finisher_cancel(lockop_env *env, const lockop *op)
{
    list_foreach(node, &env->finishers) {
        lockop_finisher *f = list_data(node, lockop_finisher, link);
        if (f->op.lease_len == op->lease_len && memcmp(f->op.lease, op->lease, op->lease_len) == 0 &&
            f->op.name_len == op->name_len && memcmp(f->op.name, op->name, op->name_len) == 0)
            finisher_free(f);
    }
}

/* Whether the master answered at all (an error, a quarantine, counts as not). */
static void finisher_decode(round *rd, size_t i, const struct redisReply *r, redlock_reply *out)
{
    (void)rd;
    (void)i;
    out->state = r && r->type != REDIS_REPLY_ERROR ? RL_SLOT_OK : RL_SLOT_FAILED;
}

static void finisher_done(round *rd)
{
    lockop_finisher *f = rd->owner;
    int answered = 0;
    for (size_t i = 0; i < rd->env->n && i < 64; i++)
        if (rd->replies[i].state == RL_SLOT_OK && (f->mask >> i & 1)) {
            f->mask &= ~((uint64_t)1 << i);
            answered = 1;
        }
    round_unref(f->rd);
    f->rd = NULL;
    if (answered && f->op.kind == LOCKOP_RELEASE)
        lockop_announce_release(&f->op); /* it may be free now: waiters here try */
    if (!f->mask || clock_now_us() >= f->until_us) {
        finisher_free(f);
        return;
    }
    f->delay_ms = f->delay_ms * 2 < FINISH_MAX_DELAY_MS ? f->delay_ms * 2 : FINISH_MAX_DELAY_MS;
    loop_timer_start(f->op.env->rounds->loop, &f->timer, clock_now_us() + f->delay_ms * 1000);
}

static void on_finish_timer(loop_timer *t)
{
    lockop_finisher *f = container_of(t, lockop_finisher, timer);
    lockop_env *env = f->op.env;
    round *rd = round_new(env->rounds, finisher_done, f);
    if (!rd) {
        loop_timer_start(env->rounds->loop, &f->timer, clock_now_us() + f->delay_ms * 1000);
        return;
    }
    f->rd = rd;
    rd->wait_all = 1;
    rd->decode = finisher_decode;
    if (f->op.kind != LOCKOP_MRELEASE)
        shape_send_release(&f->op, rd, f->who, f->who_len, f->mask);
    else
        multilock_send_release(env, rd, f->op.lease, f->op.lease_len, f->scope, f->mask);
}

/* Finish op's release on the masters in mask, which did not answer rd: lower the
 * lease's holds there to target (0: delete; -1: one hold only), until each answers or
 * the lock's ttl (the longest any master that had it reported, drift added; the
 * longest a lock may have when none did) is over.  A later release of the same lease
 * and name takes over the finisher of an earlier one. */
void finisher_start(lockop *op, const round *rd, uint64_t found, uint64_t mask,
                           int64_t target)
{
    lockop_env *env = op->env;
    size_t n = rd->env->n;
    int64_t longest = -1;
    for (size_t i = 0; i < n && i < 64; i++)
        if ((found >> i & 1) && rd->replies[i].pttl > longest)
            longest = rd->replies[i].pttl;
    /* The release rd sent may still land where it did not answer, after this
     * finisher: its "one less" and the finisher's "lower to target" would then take two
     * holds for one (tests/model: found-finisher).  So the finisher goes only once the
     * release's clock window has closed on that master (the script's PRELUDE refuses
     * it past the window), and not at all, unless it deletes outright (target 0: the
     * lease released), where the release carried no window. */
    int64_t first_us = clock_now_us() + FINISH_FIRST_MS * 1000;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (!(mask >> i & 1))
            continue;
        int64_t closed = master_window_closed_us(&env->rounds->masters[i], rd->start_us);
        if (closed < 0 && target != 0 && op->kind == LOCKOP_RELEASE && op->mode != LOCKOP_SEMAPHORE)
            mask &= ~((uint64_t)1 << i); /* the keys expire with their ttl */
        else if (closed > first_us)
            first_us = closed;
    }
    if (!mask)
        return;
    int64_t ttl = longest > 0 ? longest + redlock_drift_ms(longest, env->conf->drift_factor)
                              : env->conf->max_ttl_ms;
    lockop_finisher *f = NULL;
    list_foreach(node, &env->finishers) {
        lockop_finisher *g = list_data(node, lockop_finisher, link);
        if (g->op.kind == op->kind && g->op.lease_len == op->lease_len &&
            memcmp(g->op.lease, op->lease, op->lease_len) == 0 &&
            g->op.name_len == op->name_len && memcmp(g->op.name, op->name, op->name_len) == 0) {
            f = g;
            break;
        }
    }
    if (!f) {
        if (env->nfinishers >= FINISHERS_MAX || !(f = calloc(1, sizeof *f)))
            return; /* the keys expire with their ttl */
        lockop_init(&f->op, env, op->kind, op->name, op->name_len, NULL, f);
        memcpy(f->op.lease, op->lease, op->lease_len + 1);
        f->op.lease_len = op->lease_len;
        f->op.mode = op->mode;
        f->timer.cb = on_finish_timer;
        list_insert_head(&env->finishers, &f->link);
        env->nfinishers++;
    }
    if (op->scope)
        snprintf(f->scope, sizeof f->scope, "%s", op->scope);
    if (op->kind == LOCKOP_RELEASE && op->mode != LOCKOP_SEMAPHORE)
        f->who_len = (size_t)snprintf(f->who, sizeof f->who, "%s*%lld%s", op->lease,
                                      (long long)target, op->rest ? "~" : "");
    else
        f->who_len = (size_t)snprintf(f->who, sizeof f->who, "%s", op->lease);
    f->mask |= mask;
    int64_t until = clock_now_us() + ttl * 1000;
    if (until > f->until_us)
        f->until_us = until;
    f->delay_ms = FINISH_FIRST_MS;
    if (!f->rd)
        loop_timer_start(env->rounds->loop, &f->timer, first_us);
}

/* Delete the lease's key, whatever its count, where a master still counts holds for
 * it after a release a quorum counts as the last (a stale count: an increment that
 * reached it alone, or a decrement that missed it). */
