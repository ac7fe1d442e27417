/* lockop.c -- the lock operations of one worker: their env (lockop_env_init, its
 * counters), lockop_start, which sends each kind where it goes (an acquire to
 * acquire.c, a release to release.c), and the judgement of the kinds that are one round
 * each: extend, inspect, force and readiness (see lockop.h, and docs/DESIGN.md for the
 * reasoning behind each step).  An op's life and what the machines share are
 * oplife.c's; the finishers of an unconfirmed release finisher.c's.  The single-name
 * shapes of an acquire (exclusive, shared, a permit) are shapes.c's, and so is every
 * single-name script's list of keys and arguments; the multi-name shape is
 * multilock.c's. */
#include "lockop.h"
#include "lockop_int.h"

#include <stdio.h>
#include <string.h>

#include "shapes.h"

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed)
{
    memset(env, 0, sizeof *env);
    env->rounds = rounds;
    env->conf = conf;
    env->owner = owner;
    env->rnd = rnd_seed(seed);
    list_init(&env->finishers);
    env->wq.hooks = &acquire_queue_hooks;
    env->wq.loop = rounds->loop;
    env->wq.max_waiters = conf->max_waiters;
    env->wq.waiters_total = waiters_total;
    env->wq.rnd = rnd(env);
    return waitq_env_init(&env->wq);
}

void lockop_env_fini(lockop_env *env)
{
    finisher_free_all(env);
    waitq_env_fini(&env->wq);
}

uint64_t lockop_counter(const lockop_env *env, int c)
{
    if (c == CNT_WAKEUPS)
        return __atomic_load_n(&env->wq.wakeups, __ATOMIC_RELAXED);
    if (c == CNT_RETRIES)
        return __atomic_load_n(&env->wq.retries, __ATOMIC_RELAXED);
    return c >= 0 && c < CNT__COUNT ? __atomic_load_n(&env->counters[c], __ATOMIC_RELAXED) : 0;
}

/* ---- extend / inspect / ready ---- */

static void extend_done(round *rd)
{
    redlock_tally t;
    lockop *op = lockop_heard(rd, &t);
    int64_t elapsed_ms = (clock_now_us() - rd->start_us + 999) / 1000;
    /* Lost only when at least N - Q + 1 masters said the lease is not there: then at
     * most Q - 1 can hold it.  Fewer than Q that hold it, with others silent, is no
     * quorum this time: the silent ones may hold it too, and the holder's validity
     * still runs (docs/DESIGN.md section 1, "When an extension finds the lease lost"). */
    int lost = t.refused >= rd->env->n - rd->env->quorum + 1;
    /* Any master holding the lease that says its bound has passed ends the hold, even
     * when a quorum renewed: a master that lost the key and took it back by a
     * re-acquire stamped a later deadline than the grant's, and a quorum of such must
     * not carry the hold past the first bound (docs/DESIGN.md section 14). */
    int64_t past_bound = rd->decision == RL_DECIDE_QUORUM || rd->decision == RL_DECIDE_NO_QUORUM
                             ? redlock_bound_left_ms(rd->replies, rd->env->n, rd->env->quorum, 0)
                             : -1;
    if (rd->decision == RL_DECIDE_QUORUM && past_bound < 0) {
        /* the ttl, or less where the masters capped it at the hold's bound (§14) */
        op->hold_ms = redlock_extended_ms(rd->replies, rd->env->n, rd->env->quorum, op->ttl_ms);
        op->bound_ms = redlock_bound_left_ms(rd->replies, rd->env->n, rd->env->quorum, 1);
        if (op->bound_ms >= 0)
            op->bound_ms = op->bound_ms > elapsed_ms ? op->bound_ms - elapsed_ms : 0;
        op->validity_ms = redlock_validity_ms(op->hold_ms, clock_now_us() - rd->start_us,
                                              op->env->conf->drift_factor);
        op->token = redlock_token(rd->replies, rd->env->n);
        if (op->mode == LOCKOP_SEMAPHORE) {
            /* the counter as it stands, on the permit's slot: at least its token */
            int64_t slot = 0;
            for (size_t i = 0; i < rd->env->n; i++)
                if (rd->replies[i].state == RL_SLOT_OK)
                    slot = rd->replies[i].count;
            op->token = op->token * SEM_MAX_PERMITS + (uint64_t)slot;
        }
        if (op->validity_ms > 0) {
            op->err = RL_OK;
            count(op->env, CNT_EXT_OK);
        } else {
            op->validity_ms = 0;
            op->err = RL_E_VALIDITY_EXHAUSTED;
            count(op->env, CNT_EXT_UNAVAILABLE);
        }
    } else if (past_bound >= 0) {
        /* The extension would carry the hold past its bound (§14): refused, and the
         * lock left as it is (it ends at the bound, or before). */
        op->err = RL_E_MAX_HOLD_EXCEEDED;
        op->bound_ms = past_bound > elapsed_ms ? past_bound - elapsed_ms : 0;
        count(op->env, CNT_EXT_NOT_FOUND);
    } else if (rd->decision == RL_DECIDE_NO_QUORUM && lost) {
        /* The lock is lost: free what is left of it (any attempt's value under the
         * lease, as a release by the lease would) so others need not wait -- a lock
         * with a lock-delay that rests keeps resting ('~': its holder did not say it
         * was done). */
        op->err = RL_E_LEASE_NOT_FOUND;
        count(op->env, CNT_EXT_NOT_FOUND);
        op->value_len = (size_t)snprintf(op->value, sizeof op->value, "%s%s", op->lease,
                                         op->mode == LOCKOP_EXCLUSIVE ? "~" : "");
        lockop_release_everywhere(op);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        count(op->env, CNT_EXT_UNAVAILABLE);
    }
    drop_round(op);
    op->done(op);
}

static void inspect_done(round *rd)
{
    lockop *op = lockop_heard(rd, NULL);
    round_env *re = rd->env;
    if (op->nodes_ok < re->quorum) {
        op->err = RL_E_QUORUM_UNAVAILABLE;
    } else {
        int64_t valid;
        int h = redlock_inspect_holder(rd->replies, re->n, re->quorum, &valid);
        op->held = h >= 0;
        op->holder_len = h >= 0 ? rd->replies[h].owner_len : 0;
        memcpy(op->holder, h >= 0 ? rd->replies[h].owner : "", op->holder_len);
        op->holder[op->holder_len] = '\0';
        int64_t elapsed_ms = (clock_now_us() - rd->start_us + 999) / 1000;
        op->validity_ms = op->held ? (valid == INT64_MAX ? -1 : valid - elapsed_ms) : 0;
        if (op->held && op->validity_ms < 0 && valid != INT64_MAX)
            op->validity_ms = 0;
        op->token = redlock_max_fence(rd->replies, re->n);
        /* a lock nobody holds may still rest (a lock-delay, §14): until when */
        op->rest_ms = 0;
        if (!op->held && op->mode != LOCKOP_SEMAPHORE) {
            int64_t rest = redlock_resting_ms(rd->replies, re->n, re->quorum);
            op->rest_ms = rest > elapsed_ms ? rest - elapsed_ms : 0;
        }
        op->current = op->check_token && redlock_token_current(rd->replies, re->n, h, op->check_token);
        op->readers = (long)redlock_quorum_count(rd->replies, re->n, re->quorum);
        op->holds = 0;
        if (h >= 0 && op->lease_len && rd->replies[h].value_len == op->lease_len &&
            memcmp(rd->replies[h].value, op->lease, op->lease_len) == 0)
            op->holds = (long)rd->replies[h].holds; /* shown to the holder's own request */
        op->permits_seen = 0;
        for (size_t i = 0; i < re->n && op->mode == LOCKOP_SEMAPHORE; i++)
            if (rd->replies[i].state == RL_SLOT_OK && rd->replies[i].count_pttl > op->permits_seen)
                op->permits_seen = (long)rd->replies[i].count_pttl;
        op->err = RL_OK;
    }
    drop_round(op);
    op->done(op);
}

/* A release whatever the lease (an admin's DELETE ?force=true): broken once a quorum of
 * masters answered, the key gone from each whoever held it (the masters that did not
 * answer are fewer than a quorum, so no lease holds one any more).  op->held: some
 * master had it; then it is announced like any release, and waiters wake. */
static void force_done(round *rd)
{
    lockop *op = lockop_heard(rd, NULL);
    op->held = op->resting = 0;
    for (size_t i = 0; i < rd->env->n; i++) {
        op->held |= rd->replies[i].state == RL_SLOT_OK && rd->replies[i].released;
        op->resting |= rd->replies[i].state == RL_SLOT_OK && rd->replies[i].rested;
    }
    if (op->nodes_ok >= rd->env->quorum) {
        op->err = RL_OK;
        count(op->env, CNT_REL_OK);
        if (op->held)
            lockop_announce_release(op);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        count(op->env, CNT_REL_UNAVAILABLE);
    }
    drop_round(op);
    op->done(op);
}

static void ready_done(round *rd)
{
    lockop *op = rd->owner;
    round_env *re = rd->env;
    size_t ok = 0;
    for (size_t i = 0; i < re->n; i++) {
        if (rd->replies[i].state == RL_SLOT_OK && !master_usable(&re->masters[i]))
            rd->replies[i].state = RL_SLOT_REFUSED; /* answers, but out of quorums */
        if (rd->replies[i].state == RL_SLOT_OK)
            ok++;
    }
    op->nodes_ok = ok;
    op->err = ok >= re->quorum ? RL_OK : RL_E_QUORUM_UNAVAILABLE;
    op->done(op); /* op->rd stays until lockop_fini() */
}

/* A round for op of one of the plain kinds, its reference kept in op->rd. */
static round *op_round(lockop *op, round_cb done)
{
    return op->rd = round_new(op->env->rounds, done, op);
}

void lockop_start(lockop *op)
{
    lockop_env *env = op->env;
    if (!op->shape)
        op->shape = op->kind != LOCKOP_ACQUIRE ? &shape_exclusive
                    : op->mode == LOCKOP_SHARED ? &shape_shared
                    : op->mode == LOCKOP_SEMAPHORE ? &shape_semaphore
                                                   : &shape_exclusive;
    const char(*names)[NAME_MAX_LEN + 1];
    op->w.nnames = lockop_names(op, &names, &op->w.lens);
    op->w.names = names;
    /* Readers and permits do not take turns on a name: each waits in a queue of its
     * own, woken by any release of the name (waitq.h), and never takes a handoff. */
    op->w.multi = op->multi != NULL || op->mode != LOCKOP_EXCLUSIVE;
    op->w.lease = op->lease;
    op->w.lease_len = op->lease_len;
    op->w.gone = &op->gone;
    switch (op->kind) {
    case LOCKOP_ACQUIRE:
    case LOCKOP_MACQUIRE:
        if (op->wait_deadline_us) {
            /* Other workers tell this one of releases while it has any (see worker.c). */
            op->waiting = 1;
            __atomic_fetch_add(&env->waiting, 1, __ATOMIC_RELAXED);
        }
        if (op->w.multi) {
            if (op->mode == LOCKOP_SEMAPHORE)
                op->slot = (int)(rnd(env) % (uint32_t)op->permits);
            acquire_attempt(op);
        } else {
            acquire_start(op);
        }
        return;
    case LOCKOP_RELEASE:
    case LOCKOP_MRELEASE:
        if (release_start(op) == 0)
            return;
        break;
    case LOCKOP_EXTEND:
        if (!op_round(op, extend_done))
            break;
        shape_send_extend(op, op->rd, round_all(env->rounds));
        return;
    case LOCKOP_INSPECT:
        if (!op_round(op, inspect_done))
            break;
        op->rd->wait_all = 1;
        shape_send_inspect(op, op->rd, round_all(env->rounds));
        return;
    case LOCKOP_FORCE:
        if (!op_round(op, force_done))
            break;
        op->rd->wait_all = 1;
        shape_send_force(op, op->rd, round_all(env->rounds));
        return;
    case LOCKOP_READY:
        if (!op_round(op, ready_done))
            break;
        round_ping(op->rd);
        return;
    }
    op->err = RL_E_INTERNAL;
    lockop_finish(op);
}
