/* lockop.c -- acquire / release / extend / inspect / readiness and the handoff (see
 * lockop.h, and docs/DESIGN.md for the reasoning behind each step).  The single-name
 * shapes of an acquire (exclusive, shared, a permit) are shapes.c's, and so is every
 * single-name script's list of keys and arguments; the multi-name shape is
 * multilock.c's. */
#include "stat.h"
#include "lockop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "keys.h"
#include "multilock.h"
#include "reply.h"
#include "rnd.h"
#include "scripts.h"
#include "shapes.h"

static uint32_t rnd(lockop_env *env)
{
    return rnd_next(&env->rnd);
}

static lockop *op_of(waiter *w)
{
    return container_of(w, lockop, w);
}

static const waitq_hooks queue_hooks;

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed)
{
    memset(env, 0, sizeof *env);
    env->rounds = rounds;
    env->conf = conf;
    env->owner = owner;
    env->rnd = rnd_seed(seed);
    list_init(&env->finishers);
    env->wq.hooks = &queue_hooks;
    env->wq.loop = rounds->loop;
    env->wq.max_waiters = conf->max_waiters;
    env->wq.waiters_total = waiters_total;
    env->wq.rnd = rnd(env);
    return waitq_env_init(&env->wq);
}

static void finishers_free(lockop_env *env);
static void finisher_cancel(lockop_env *env, const lockop *op);

void lockop_env_fini(lockop_env *env)
{
    finishers_free(env);
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

static void count(lockop_env *env, int c)
{
    stat_inc(&env->counters[c]);
}

/* ---- completion ---- */

/* op no longer counts in its worker's env->waiting (see on_start_op in worker.c). */
static void stop_waiting(lockop *op)
{
    if (op->waiting) {
        op->waiting = 0;
        __atomic_fetch_sub(&op->env->waiting, 1, __ATOMIC_RELAXED);
    }
}

/* An acquire's answer, counted by kind. */
static void count_kind(lockop *op)
{
    int k = op->multi ? 3 : op->mode == LOCKOP_SHARED ? 1 : op->mode == LOCKOP_SEMAPHORE ? 2 : 0;
    if (op->err == RL_OK)
        count(op->env, CNT_KIND_GRANTED + k);
    else if (op->err == RL_E_LOCK_HELD || op->err == RL_E_LOCK_CONTENDED ||
             op->err == RL_E_PERMITS_MISMATCH)
        count(op->env, CNT_KIND_REFUSED + k);
}

static void complete(lockop *op)
{
    if (op->kind == LOCKOP_ACQUIRE || op->kind == LOCKOP_MACQUIRE)
        count_kind(op);
    if (op->intent_mask) /* a waiting writer is answered: its marks go (DESIGN.md §12) */
        shape_send_unwant(op);
    waitq_detach(&op->w);
    stop_waiting(op);
    op->done(op); /* api.c's op_done, hold.c's op_done, or worker.c's foreign_done */
}

/* op->done_timer's callback (finish() arms it): the answer, from the loop. */
static void on_done_timer(loop_timer *t)
{
    complete(container_of(t, lockop, done_timer));
}

/* Answer op from the loop, never under a caller still using it: done_timer ->
 * on_done_timer -> complete -> op->done. */
static void finish(lockop *op)
{
    waitq_detach(&op->w);
    loop_timer_start(op->env->rounds->loop, &op->done_timer, 0);
}

/* Let go of op's round reference (op->rd's one rule, op.h). */
static void drop_round(lockop *op)
{
    if (op->rd) {
        round_unref(op->rd);
        op->rd = NULL;
    }
}

void lockop_init(lockop *op, lockop_env *env, int kind, const char *name, size_t name_len,
                 lockop_done_cb done, void *owner)
{
    memset(op, 0, sizeof *op);
    op->env = env;
    op->kind = kind;
    if (name_len > NAME_MAX_LEN)
        name_len = NAME_MAX_LEN;
    memcpy(op->name, name, name_len);
    op->name[name_len] = '\0';
    op->name_len = name_len;
    op->done = done;
    op->owner = owner;
    op->done_timer.cb = on_done_timer;
    op->err = RL_E_INTERNAL;
    op->start_us = clock_now_us();
    op->release_mask = ~(uint64_t)0;
    op->answered = SIZE_MAX;
    op->bound_ms = -1;
}

int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n)
{
    if (multilock_set(op, names, lens, n) != 0)
        return -1;
    op->shape = &multilock_shape;
    return 0;
}

void lockop_fini_rounds(lockop *op)
{
    stop_waiting(op);
    drop_round(op);
}

void lockop_fini(lockop *op)
{
    lockop_fini_rounds(op);
    multilock_free(op);
}

/* The names op is about (one, or the names of a multi-name lock). */
static size_t op_names(const lockop *op, const char (**names)[NAME_MAX_LEN + 1],
                       const size_t **lens)
{
    if (op->multi) {
        *names = (const char(*)[NAME_MAX_LEN + 1])op->multi->names;
        *lens = op->multi->lens;
        return op->multi->n;
    }
    *names = (const char(*)[NAME_MAX_LEN + 1])&op->name;
    *lens = &op->name_len;
    return 1;
}

/* A release of op's name(s) went through here: wake their waiters, here and on the
 * other workers. */
static void announce_release(lockop *op)
{
    const char(*names)[NAME_MAX_LEN + 1];
    const size_t *lens;
    size_t n = op_names(op, &names, &lens);
    for (size_t j = 0; j < n; j++) {
        waitq_wake(&op->env->wq, names[j], lens[j]);
        if (op->env->released)
            op->env->released(op->env, names[j], lens[j]); /* worker.c: on_released */
    }
}

/* ---- acquire ---- */

static void release_everywhere(lockop *op)
{
    /* Fire and forget: a master that timed out may still have set the key.  On each
     * connection it goes after our acquire, so it cannot overtake it.  Masters that
     * refused wrote nothing (the scripts refuse before any write) and are skipped: a
     * refused attempt then costs the masters one operation, as a grant does. */
    uint64_t mask = op->release_mask & round_all(op->env->rounds);
    if (!mask)
        return;
    round *rd = round_new(op->env->rounds, NULL, NULL);
    if (!rd)
        return; /* out of memory: the keys expire with their ttl */
    op->shape->send_release(op, rd, mask);
    round_unref(rd);
}

static void acquire_done(round *rd);

/* op's attempt goes out in rd (an acquire round, or a handoff), writing its own
 * value: the lease and a tag no other attempt has. */
static void attempt_begin(lockop *op, round *rd)
{
    static const char hex[] = "0123456789abcdef";
    memcpy(op->value, op->lease, op->lease_len);
    op->value_len = op->lease_len;
    if (!op->lease_fresh || op->attempts || op->holder_len || op->delay_ms || op->max_hold_ms) {
        /* A lease the client chose (or a second attempt, or an owner, a lock-delay or a
         * bound to keep): another attempt may carry it too, so this one writes its own
         * tag.  A lease made for this request and tried once without any of those is
         * its own tag, and the masters compare it whole (cheaper). */
        uint64_t tag = ((uint64_t)rnd(op->env) << 32) | rnd(op->env);
        op->value[op->lease_len] = '.';
        for (int i = 0; i < 16; i++)
            op->value[op->lease_len + 1 + i] = hex[(tag >> (60 - 4 * i)) & 15];
        op->value_len = op->lease_len + 17;
    }
    /* "~<delay>" and "^<bound>" after the tag (docs/DESIGN.md section 14): the masters
     * keep the name this long past a hold that ends without a release, and refuse to
     * extend it past the bound, which the grant's script makes a deadline of its own
     * clock.  The tag is there whenever they are. */
    if (op->delay_ms > 0)
        op->value_len += (size_t)snprintf(op->value + op->value_len, sizeof op->value - op->value_len,
                                          "~%ld", op->delay_ms);
    if (op->max_hold_ms > 0)
        op->value_len += (size_t)snprintf(op->value + op->value_len, sizeof op->value - op->value_len,
                                          "^%ld", op->max_hold_ms);
    if (op->holder_len) {
        /* "<lease>.<tag>\n<owner>": the owner never goes without a tag (untag() and
         * mine() read the lease before the '.'; adopted() marks before the '\n') */
        op->value[op->value_len++] = '\n';
        memcpy(op->value + op->value_len, op->holder, op->holder_len);
        op->value_len += op->holder_len;
    }
    op->value[op->value_len] = '\0';
    op->release_mask = ~(uint64_t)0; /* until the round says who refused */
    op->reentry_short = 0;
    waitq_begin(&op->env->wq, &op->w);
    op->attempts++;
    op->w.in_flight = 1;
    op->rd = rd;
}

/* An acquire round for op: the shape sends it (op->shape->send_acquire: shapes.c's
 * one_send_acquire, shared_send_acquire, sem_send_acquire; multilock.c's), the round
 * decides, and its done() is acquire_done. */
static void attempt(lockop *op)
{
    round *rd = round_new(op->env->rounds, acquire_done, op);
    if (!rd) {
        op->err = RL_E_INTERNAL;
        waitq_leave(&op->w, -1);
        finish(op);
        return;
    }
    attempt_begin(op, rd);
    if (op->reentrant)
        rd->wait_all = 1; /* a re-entry is judged by where it added a hold: hear them all */
    op->shape->send_acquire(op, rd);
}

static void acquire_start(lockop *op)
{
    int64_t now = clock_now_us(), ra = 0;
    rl_err err = RL_E_INTERNAL;
    switch (waitq_admit(&op->env->wq, &op->w, op->wait_deadline_us, now, &ra, &err)) {
    case WAITQ_ATTEMPT:
        attempt(op);
        return;
    case WAITQ_FOLLOWING:
        return;
    case WAITQ_PARKED:
        op->err = RL_E_LOCK_HELD; /* until its own attempt says otherwise */
        op->retry_after_ms = ra;
        return;
    case WAITQ_HELD:
        op->err = RL_E_LOCK_HELD;
        op->retry_after_ms = ra;
        count(op->env, CNT_HELD_LOCAL);
        count(op->env, CNT_ACQ_HELD);
        finish(op);
        return;
    default:
        op->err = err;
        finish(op);
        return;
    }
}

static void acquire_failed(lockop *op, rl_err err)
{
    lockop_env *env = op->env;
    op->err = err;
    op->w.in_flight = 0;
    release_everywhere(op);
    if (op->partial) {
        /* It held some masters and lets them go now: whoever those keys refused
         * meanwhile may get the lock.  That is a release of the name(s) here. */
        op->partial = 0;
        const char(*names)[NAME_MAX_LEN + 1];
        const size_t *lens;
        size_t n = op_names(op, &names, &lens);
        for (size_t j = 0; j < n; j++)
            waitq_wake(&env->wq, names[j], lens[j]);
    }
    int64_t now = clock_now_us();
    if (err == RL_E_LOCK_CONTENDED) {
        /* Votes split between attempts: nobody holds the lock.  Even without a wait,
         * try again after a random delay, within a small budget (Redlock's retry). */
        count(env, CNT_SPLITS);
        if (!op->w.multi)
            waitq_heat_up(&env->wq, op->name, op->name_len);
        /* Retries start within four node timeouts, so that the last one (a round and a
         * raise, two node timeouts at most) is answered within six. */
        if (!op->split_deadline_us)
            op->split_deadline_us = op->start_us + env->conf->node_timeout_ms * 1000 * 4;
        if (op->split_deadline_us > op->wait_deadline_us) {
            op->wait_deadline_us = op->split_deadline_us;
            /* Split retries go on even after a shutdown's cut-off: kept as it was when
             * the cut-off was a wait deadline of 1, which this replaced. */
            op->cut_by_shutdown = 0;
        }
        op->retry_after_ms = 1 + (int64_t)(rnd(env) % (uint32_t)(env->conf->node_timeout_ms + 1));
        if (op->mode == LOCKOP_SEMAPHORE)
            op->retry_after_ms = 1; /* a free slot was named: no other attempt to dodge */
    }
    if (err == RL_E_PERMITS_MISMATCH)
        op->wait_deadline_us = 0; /* waiting would not change the masters' number */
    if (err == RL_E_QUORUM_UNAVAILABLE)
        waitq_unavailable(&op->w, op->nodes_ok);
    if (__atomic_load_n(&op->gone, __ATOMIC_RELAXED)) {
        op->wait_deadline_us = 0; /* nobody to answer: stop here */
        op->err = RL_E_CLIENT_CLOSED;
        count(env, CNT_GONE);
    }
    if (op->wait_deadline_us > now + 1000) {
        int64_t remaining_ms = (op->wait_deadline_us - now) / 1000;
        int64_t delay = err == RL_E_LOCK_CONTENDED
                            ? (op->retry_after_ms < remaining_ms ? op->retry_after_ms : remaining_ms)
                            : redlock_retry_delay_ms(err == RL_E_LOCK_HELD, op->retry_after_ms,
                                                     remaining_ms, rnd(env));
        if (waitq_released_since(&env->wq, &op->w))
            delay = 0; /* released while this attempt was in flight */
        if (op->intent_mask && delay > SHAPE_INTENT_RENEW_MS)
            delay = SHAPE_INTENT_RENEW_MS; /* its next try renews its marks before they expire */
        /* Park even when the lock outlives the wait: a release through this
         * instance wakes the waiter, and its deadline answers otherwise. */
        rl_err parked = waitq_park(&env->wq, &op->w, delay, op->wait_deadline_us);
        if (parked == RL_OK) {
            waitq_attempt_ended(&op->w);
            return;
        }
        if (parked == RL_E_TOO_MANY_WAITERS)
            op->err = parked;
    }
    /* Out of time (or cannot wait): answer with this attempt's result -- unless the
     * shutdown cut off a waiter while it tried (on_answer): then, as for the parked. */
    if (op->cut_by_shutdown && (op->err == RL_E_LOCK_HELD || op->err == RL_E_LOCK_CONTENDED))
        op->err = RL_E_SHUTTING_DOWN;
    if (op->err == RL_E_LOCK_HELD || op->err == RL_E_LOCK_CONTENDED)
        count(env, CNT_ACQ_HELD);
    else if (op->err == RL_E_VALIDITY_EXHAUSTED)
        count(env, CNT_ACQ_VALIDITY);
    else if (op->err != RL_E_CLIENT_CLOSED)
        count(env, CNT_ACQ_UNAVAILABLE);
    waitq_leave(&op->w, 0);
    waitq_attempt_ended(&op->w);
    finish(op);
}

static void acquire_succeeded(lockop *op)
{
    lockop_env *env = op->env;
    op->err = RL_OK;
    if (op->mode == LOCKOP_SEMAPHORE) /* distinct for permits held at once (DESIGN.md §12) */
        op->token = op->token * SEM_MAX_PERMITS + (uint64_t)op->slot;
    op->w.in_flight = 0;
    count(env, CNT_ACQ_GRANTED);
    if (__atomic_load_n(&op->gone, __ATOMIC_RELAXED)) {
        /* Granted to a client that left: free it at once, for the next waiter. */
        waitq_leave(&op->w, -1);
        op->err = RL_E_CLIENT_CLOSED;
        count(env, CNT_GONE);
        release_everywhere(op);
        announce_release(op);
    } else {
        if (env->nfinishers) /* a lease granted again: an old release must not take it */
            finisher_cancel(env, op);
        waitq_granted(&env->wq, &op->w, op->validity_ms);
        if (env->granted) {
            const char(*names)[NAME_MAX_LEN + 1];
            const size_t *lens;
            size_t n = op_names(op, &names, &lens);
            for (size_t j = 0; j < n; j++)
                env->granted(env, names[j], lens[j]); /* worker.c: on_granted */
        }
    }
    waitq_attempt_ended(&op->w);
    finish(op);
}

/* The acquire round did not reach a quorum: held by another lease, votes split
 * between attempts (nobody holds it), or masters missing. */
static void acquire_refused(lockop *op, round *rd)
{
    round_env *re = op->env->rounds;
    rl_err err = RL_E_QUORUM_UNAVAILABLE;
    if (rd->decision == RL_DECIDE_NO_QUORUM) {
        op->retry_after_ms = redlock_retry_after_ms(rd->replies, re->n, re->quorum,
                                                    op->env->conf->default_ttl_ms);
        err = op->shape->refused(op, rd);
        if (err == RL_E_LOCK_HELD && op->mode != LOCKOP_SEMAPHORE) {
            const redlock_reply *holder = NULL;
            for (size_t i = 0; i < re->n && !holder; i++)
                if (rd->replies[i].state == RL_SLOT_REFUSED && rd->replies[i].has_value)
                    holder = &rd->replies[i];
            op->resting = holder && holder->value_len == sizeof SCRIPTS_HOLDER_RESTING - 1 &&
                          memcmp(holder->value, SCRIPTS_HOLDER_RESTING, holder->value_len) == 0;
            /* a lock that rests is not known as held here: each 409 says it rests */
            if (!op->resting && op->mode == LOCKOP_EXCLUSIVE)
                waitq_held(&op->env->wq, &op->w, holder ? holder->value : NULL,
                           holder ? holder->value_len : 0, op->retry_after_ms);
        }
    }
    drop_round(op);
    acquire_failed(op, err);
}

/* After the grant (and a raise round if one was needed): issue the token only if
 * `fenced` granting masters (at least a quorum) hold it, and validity, counted from
 * the acquire round's start, is left. */
static void acquire_fenced(lockop *op, int64_t start_us, size_t fenced)
{
    int64_t validity = redlock_validity_ms(op->hold_ms, clock_now_us() - start_us,
                                           op->env->conf->drift_factor);
    drop_round(op);
    if (fenced < op->env->rounds->quorum) {
        op->nodes_ok = fenced;
        acquire_failed(op, RL_E_QUORUM_UNAVAILABLE);
    } else if (validity <= 0) {
        op->validity_ms = 0;
        acquire_failed(op, RL_E_VALIDITY_EXHAUSTED);
    } else {
        op->validity_ms = validity;
        acquire_succeeded(op);
    }
}

/* Reentrant holds a quorum of rd's granting masters count for the granted lease (what
 * a release leaves is release_judged()'s). */
static long quorum_holds(const round *rd)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < rd->env->n && k < 64; i++)
        if (rd->replies[i].state == RL_SLOT_OK) /* a silent master's fields are unset */
            v[k++] = rd->replies[i].holds;
    return (long)redlock_quorum_at_least(v, k, rd->env->quorum);
}

/* The op a decided round was for, with the masters that answered (into *t too). */
static lockop *heard(const round *rd, redlock_tally *t)
{
    lockop *op = rd->owner;
    redlock_tally own;
    if (!t)
        t = &own;
    redlock_tally_of(rd->replies, rd->env->n, t);
    op->nodes_ok = t->ok + t->refused;
    op->answered = t->answered;
    return op;
}

/* Masters an attempt may have written to: all but those that refused. */
/* A reentrant acquire that found its lease holding the key on some master is a
 * re-entry: the masters that answered that they added a hold to the lease's key (an
 * adopted key answers what it kept: pttl > 0) into *added, and those where it took a
 * free key (pttl -2: a fresh key) returned; 0 and 0 when it is no re-entry.  A fresh key
 * would count a hold no outer hold knows of, and a nested release could then take the
 * keys that only the outer hold counts (tests/model: old-reentry-count). */
static uint64_t reentry_fresh_keys(const round *rd, uint64_t *added)
{
    uint64_t fresh = 0;
    *added = 0;
    for (size_t i = 0; i < rd->env->n && i < 64; i++) {
        const redlock_reply *r = &rd->replies[i];
        if (r->state != RL_SLOT_OK)
            continue;
        if (r->pttl > 0)
            *added |= (uint64_t)1 << i;
        else
            fresh |= (uint64_t)1 << i;
    }
    return *added ? fresh : 0;
}

static uint64_t maybe_written(const round *rd)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < rd->env->n && i < 64; i++)
        if (rd->replies[i].state != RL_SLOT_REFUSED)
            mask |= (uint64_t)1 << i;
    return mask;
}

static void raise_done(round *rr)
{
    lockop *op = rr->owner;
    acquire_fenced(op, op->rd->start_us, op->shape->fenced(op, op->rd, rr));
}

/* The round's done() of an acquire round (attempt's, or a handoff's through
 * handoff_done): one acquire round, of any shape, was decided. */
static void acquire_done(round *rd)
{
    redlock_tally t;
    lockop *op = heard(rd, &t);
    round_env *re = op->env->rounds;
    op->release_mask = maybe_written(rd);
    uint64_t added = 0;
    uint64_t fresh = op->reentrant && rd->script == SCRIPT_ACQUIRE ? reentry_fresh_keys(rd, &added) : 0;
    if (fresh) {
        /* a re-entry: the free keys it took go at once (its exact value), and count for
         * nothing */
        uint64_t keep = op->release_mask & ~fresh;
        op->release_mask = fresh;
        release_everywhere(op);
        op->release_mask = keep;
        for (size_t i = 0; i < re->n && i < 64; i++)
            if (fresh & ((uint64_t)1 << i))
                rd->replies[i].state = RL_SLOT_FAILED;
        redlock_tally_of(rd->replies, re->n, &t);
    }
    if (added && added != round_all(re)) {
        /* A re-entry is granted only when every master confirmed adding its hold
         * (docs/DESIGN.md section 12): a release takes one hold off every master, so a
         * hold one master never counted would, released, take the outer hold's count
         * there (tests/model: found-two-reentries).  Short of all of them: 503, and the
         * hold is taken back ("one less", by the lease) on exactly the masters that
         * confirmed adding it, never on the others, where "one less" would take an
         * outer hold's count.  Where it landed unconfirmed it stays, a count too high,
         * which only keeps the key until the holder's release or its expiry. */
        round *ur = round_new(re, NULL, NULL);
        if (ur) { /* else out of memory: the holds stay, until the keys' expiry */
            shape_send_release(op, ur, op->lease, op->lease_len, added);
            round_unref(ur);
        }
        rd->decision = RL_DECIDE_UNAVAILABLE;
        op->reentry_short = 1;
        op->answered = (size_t)__builtin_popcountll(added); /* the masters that counted it */
    }
    op->partial = t.ok > 0;
    if (rd->decision != RL_DECIDE_QUORUM) {
        acquire_refused(op, rd);
        return;
    }
    /* The lock's own expiry, as a quorum of granting masters holds it: the ttl for a
     * fresh grant; more for a re-entry, which never shortens a hold (DESIGN.md §12). */
    /* (A lock-delay is kept on top of the ttl; an adopted key answers the holder's part,
     * without it: §14.) */
    op->hold_ms = redlock_granted_ms(rd->replies, re->n, re->quorum, op->ttl_ms);
    if (redlock_validity_ms(op->hold_ms, clock_now_us() - rd->start_us, op->env->conf->drift_factor) <= 0) {
        drop_round(op);
        acquire_failed(op, RL_E_VALIDITY_EXHAUSTED);
        return;
    }
    op->holds = quorum_holds(rd);
    /* A waiting writer's mark went where a script set the key for it (an adopted key
     * answers what it kept: pttl > 0); complete() takes it back from the others. */
    for (size_t i = 0; i < re->n && i < 64; i++)
        if (rd->replies[i].state == RL_SLOT_OK && rd->replies[i].pttl < 0)
            op->intent_mask &= ~((uint64_t)1 << i);
    /* Granted by a quorum.  Counters may differ: the masters that answered below the
     * token are raised, and the token is issued once a quorum of granting masters hold
     * it (docs/DESIGN.md, section 3); none when a quorum already does. */
    uint64_t mask = op->shape->plan_raise(op, rd); /* shapes.c: one_plan_raise; multilock.c */
    if (!mask) {
        acquire_fenced(op, rd->start_us, re->quorum);
        return;
    }
    count(op->env, CNT_RAISE_ROUNDS);
    round *rr = round_new(re, raise_done, op); /* its done(): raise_done -> acquire_fenced */
    if (!rr) {
        drop_round(op);
        acquire_failed(op, RL_E_INTERNAL);
        return;
    }
    rr->wait_all = 1;
    op->shape->send_raise(op, rr, mask); /* op->rd keeps the grant until it is judged */
    round_unref(rr); /* commands in flight or the ready list hold it */
}

/* ---- the queue's hooks ---- */

static void on_attempt(waiter *w)
{
    attempt(op_of(w));
}

static void on_answer(waiter *w, rl_err why, int64_t retry_after_ms)
{
    lockop *op = op_of(w);
    if (why == RL_E_LOCK_HELD) {
        op->err = why;
        op->retry_after_ms = retry_after_ms;
        count(op->env, CNT_HELD_LOCAL);
        count(op->env, CNT_ACQ_HELD);
    } else if (why == RL_E_QUORUM_UNAVAILABLE) {
        op->err = why; /* the attempt it followed found no quorum moments ago */
        op->nodes_ok = (size_t)retry_after_ms;
        count(op->env, CNT_ACQ_UNAVAILABLE);
    } else if (why == RL_E_CLIENT_CLOSED) {
        op->err = why;
        count(op->env, CNT_GONE);
    } else if (w->in_flight) {
        op->wait_deadline_us = 0; /* shutting down: its round answers, without waiting on */
        op->cut_by_shutdown = 1;
        return;
    } else {
        op->err = why; /* shutting down: cut off while parked (not what its last try saw) */
    }
    finish(op);
}

static void on_waited_out(waiter *w)
{
    lockop *op = op_of(w);
    count(op->env, CNT_ACQ_WAITED_OUT);
    if (!w->in_flight) /* else the round in flight answers */
        complete(op);
}

static void on_watch(waitq_env *wq, const char *name, size_t len, int on)
{
    lockop_env *env = container_of(wq, lockop_env, wq);
    if (env->watch)
        env->watch(env, name, len, on);
}

static const waitq_hooks queue_hooks = {on_attempt, on_answer, on_waited_out, on_watch};

/* ---- release and handoff ---- */

/* A release answers only what no master yet to answer can change (docs/DESIGN.md,
 * section 1): released once n - quorum + 1 masters say the lease is gone there, the
 * holds a quorum still counts once the silent masters cannot move that count, and
 * otherwise RL_E_RELEASE_UNCONFIRMED, the service then finishing the release itself. */

enum release_kind { REL_PLAIN, REL_HANDOFF, REL_SET };

/* What each master of rd says the lease keeps after the release: left[i] its holds
 * there, 0 where the key went or never held the lease, -1 where no answer came (it may
 * still hold it).  Returns the masters that had the lease. */
static uint64_t release_left(const round *rd, int kind, int64_t *left)
{
    uint64_t found = 0;
    for (size_t i = 0; i < rd->env->n && i < 64; i++) {
        const redlock_reply *r = &rd->replies[i];
        int answered = r->state == RL_SLOT_OK || r->state == RL_SLOT_REFUSED;
        /* a handoff had it where the old lease went (or counts a hold less), whether
         * the waiter was granted there or not; a set has no counts */
        int had = kind == REL_HANDOFF ? answered && r->released : r->state == RL_SLOT_OK;
        left[i] = !answered ? -1 : had && kind != REL_SET ? r->left : 0;
        found |= (uint64_t)had << i;
    }
    return found;
}

/* A single-name release round's replies: decided as soon as the outcome is known,
 * and until then it waits for every master (or the node timeout). */
static void release_decode(round *rd, size_t i, const struct redisReply *r, redlock_reply *out)
{
    (void)i;
    reply_decode(rd->script, r, out);
    int64_t left[64], holds;
    release_left(rd, REL_PLAIN, left);
    if (redlock_release_known(left, rd->env->n, rd->env->quorum, &holds))
        rd->wait_all = 0; /* round.c decides on the tally at once */
}

/* ---- finishing what a release could not confirm ---- */

#define FINISHERS_MAX 1024     /* per worker; past it, the keys expire with their ttl */
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

static void finishers_free(lockop_env *env)
{
    for (list *node; (node = list_first(&env->finishers));)
        finisher_free(list_data(node, lockop_finisher, link));
}

/* A grant of op's name and lease through this worker: a finisher of an earlier release
 * of the lease must not delete it (a lease names one hold; README). */
static void finisher_cancel(lockop_env *env, const lockop *op)
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
        announce_release(&f->op); /* it may be free now: waiters here try */
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
    if (f->op.kind != LOCKOP_MRELEASE) {
        shape_send_release(&f->op, rd, f->who, f->who_len, f->mask);
        return;
    }
    const char *prefix = env->conf->key_prefix;
    char key[KEYS_MAX];
    size_t kl = keys_set(prefix, f->op.lease, f->op.lease_len, key, sizeof key);
    const char *argv[] = {key, f->op.lease, prefix, env->origin, f->scope};
    size_t lens[] = {kl, f->op.lease_len, strlen(prefix), env->origin_len, strlen(f->scope)};
    round_send(rd, SCRIPT_MRELEASE, 1, 4, argv, lens, f->mask);
}

/* Finish op's release on the masters in mask, which did not answer rd: lower the
 * lease's holds there to target (0: delete; -1: one hold only), until each answers or
 * the lock's ttl (the longest any master that had it reported, drift added; the
 * longest a lock may have when none did) is over.  A later release of the same lease
 * and name takes over the finisher of an earlier one. */
static void finisher_start(lockop *op, const round *rd, uint64_t found, uint64_t mask,
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
static void purge_stale(lockop *op, const int64_t *left, size_t n)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        if (left[i] > 0)
            mask |= (uint64_t)1 << i;
    round *rd = mask ? round_new(op->env->rounds, NULL, NULL) : NULL;
    if (!rd)
        return;
    char who[LEASE_MAX_LEN + 4];
    int wl = snprintf(who, sizeof who, "%s*0%s", op->lease, op->rest ? "~" : "");
    shape_send_release(op, rd, who, (size_t)wl, mask);
    round_unref(rd);
}

/* The outcome of a release round (or of a handoff's release side) into op. */
static void release_judged(lockop *op, const round *rd, int kind)
{
    size_t n = rd->env->n, q = rd->env->quorum, nfound = 0;
    int64_t left[64], holds;
    uint64_t found = release_left(rd, kind, left);
    for (size_t i = 0; i < n && i < 64; i++)
        nfound += found >> i & 1;
    uint64_t silent = 0, failed = 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        silent |= (uint64_t)(left[i] < 0) << i;
        failed |= (uint64_t)(rd->replies[i].state == RL_SLOT_FAILED) << i;
    }
    if (!redlock_release_known(left, n, q, &holds)) {
        op->err = RL_E_RELEASE_UNCONFIRMED;
        op->holds = 0;
        count(op->env, CNT_REL_UNAVAILABLE);
        finisher_start(op, rd, found, silent, redlock_release_target(left, found, n));
        return;
    }
    op->holds = (long)holds;
    if (holds == 0 && nfound < q) {
        op->err = RL_E_LEASE_NOT_FOUND; /* a quorum did not have it: lost before */
        count(op->env, CNT_REL_NOT_FOUND);
    } else {
        op->err = RL_OK;
        count(op->env, CNT_REL_OK);
    }
    if (holds == 0 && kind != REL_SET)
        purge_stale(op, left, n);
    /* Released: a master that failed (down, or no answer in time: not one still about
     * to answer) may keep the key, a minority of them, until its ttl; finish it there
     * too, so that the next acquirer does not need every other master. */
    if (holds == 0 && op->env->nfinishers < FINISHERS_MAX / 2) /* half kept for the above */
        finisher_start(op, rd, found, failed, 0);
}

static void handoff_done(round *rd);

/* A release through the worker that keeps the name's waiters, with a waiter parked:
 * one round replaces the old lease by the head waiter's on every master that has the
 * old one (SCRIPT_HANDOFF), and acquires for it elsewhere.  The release is judged by
 * the masters that had the old lease, the waiter's grant as any acquire (quorum,
 * validity, fencing).  The round waits for every master, so both verdicts are
 * complete.  Returns 1 if the release went (or will go) that way. */
static int try_handoff(lockop *r)
{
    lockop_env *env = r->env;
    waiter *busy_w;
    waiter *hw = waitq_next_in_line(&env->wq, r->name, r->name_len, &busy_w);
    if (!hw)
        return 0;
    lockop *h = op_of(hw);
    /* With an attempt on the name in flight, a plain release: waiting for that
     * attempt to end before the handoff round would cost the release up to two node
     * timeouts with a slow master.  The attempt, refused, sees the release (waitq.h)
     * and its waiter tries again at once. */
    if (busy_w || h->w.multi || h->handoff_from || h->wait_deadline_us <= clock_now_us() + 1000)
        return 0;
    round *rd = round_new(env->rounds, handoff_done, h);
    if (!rd)
        return 0;
    rd->wait_all = 1;
    attempt_begin(h, rd);
    h->handoff_from = r;
    count(env, CNT_HANDOFFS);
    shape_send_handoff(h, r, rd, round_all(env->rounds));
    return 1;
}

static void handoff_done(round *rd)
{
    lockop *h = rd->owner, *r = h->handoff_from;
    h->handoff_from = NULL;
    redlock_tally t;
    redlock_handoff_tally(rd->replies, rd->env->n, &t);
    r->nodes_ok = t.ok + t.refused;
    r->answered = t.answered;
    release_judged(r, rd, REL_HANDOFF);
    r->done(r);
    /* The waiter's side; if it fails, its keys are released and the name woken. */
    acquire_done(rd);
}

static void release_done(round *rd);

/* A release: handed over to a parked waiter, or one plain round.  0 or -1. */
static int release_start(lockop *op)
{
    lockop_env *env = op->env;
    /* A hold that ended without its holder's word (op->rest) hands nothing over: a lock
     * with a lock-delay rests first (docs/DESIGN.md section 14). */
    if (!op->multi && op->mode != LOCKOP_SEMAPHORE && !op->rest && try_handoff(op))
        return 0;
    round *rd = round_new(env->rounds, release_done, op);
    if (!rd)
        return -1;
    op->rd = rd;
    if (op->multi) {
        op->shape->send_release(op, rd, round_all(env->rounds));
        return 0;
    }
    rd->wait_all = 1; /* until release_decode() knows the outcome */
    rd->decode = release_decode;
    char who[LEASE_MAX_LEN + 2];
    size_t wl = (size_t)snprintf(who, sizeof who, "%s%s", op->lease, op->rest ? "~" : "");
    shape_send_release(op, rd, who, wl, round_all(env->rounds));
    return 0;
}

static void release_done(round *rd)
{
    lockop *op = heard(rd, NULL);
    if (op->multi && op->multi->out_of_scope) {
        /* A name of the set is outside the token's scope: the masters released
         * nothing (each holds the same set and refuses it whole). */
        op->err = RL_E_FORBIDDEN;
    } else {
        release_judged(op, rd, op->multi ? REL_SET : REL_PLAIN);
        if (op->err == RL_OK && op->holds == 0) /* else a reentrant holder keeps it */
            announce_release(op);
    }
    drop_round(op);
    op->done(op);
}

/* ---- extend / inspect / ready ---- */

static void extend_done(round *rd)
{
    redlock_tally t;
    lockop *op = heard(rd, &t);
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
        release_everywhere(op);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        count(op->env, CNT_EXT_UNAVAILABLE);
    }
    drop_round(op);
    op->done(op);
}

static void inspect_done(round *rd)
{
    lockop *op = heard(rd, NULL);
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
    lockop *op = heard(rd, NULL);
    op->held = op->resting = 0;
    for (size_t i = 0; i < rd->env->n; i++) {
        op->held |= rd->replies[i].state == RL_SLOT_OK && rd->replies[i].released;
        op->resting |= rd->replies[i].state == RL_SLOT_OK && rd->replies[i].rested;
    }
    if (op->nodes_ok >= rd->env->quorum) {
        op->err = RL_OK;
        count(op->env, CNT_REL_OK);
        if (op->held)
            announce_release(op);
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
    op->w.nnames = op_names(op, &names, &op->w.lens);
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
            attempt(op);
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
    finish(op);
}

/* ---- answered without a round ---- */

int lockop_held_known(lockop *op, const waitq_known *known)
{
    int64_t ra;
    if (!waitq_known_held(known, op->name, op->name_len, op->lease, op->lease_len, clock_now_us(),
                          &ra))
        return 0;
    op->err = RL_E_LOCK_HELD;
    op->retry_after_ms = ra;
    count(op->env, CNT_HELD_LOCAL);
    count(op->env, CNT_ACQ_HELD);
    count_kind(op);
    return 1;
}
