/* acquire.c -- an acquire as a state machine over rounds (see lockop.h, and
 * docs/DESIGN.md for the reasoning behind each step): its attempt and the value it
 * writes, the verdict of its round (re-entry, refusal, split votes), the fencing raise,
 * clean-up after a failed attempt, waiting with parked retries, and the hooks its
 * name's queue (waitq.c) calls.  A handoff's round is an attempt of the waiter's too
 * (release.c starts it, acquire_done judges the waiter's side). */
#include "lockop_int.h"

#include <stdio.h>
#include <string.h>

#include "scripts.h"
#include "shapes.h"


/* op's attempt goes out in rd (an acquire round, or a handoff), writing its own
 * value: the lease and a tag no other attempt has. */
void acquire_attempt_begin(lockop *op, round *rd)
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
void acquire_attempt(lockop *op)
{
    round *rd = round_new(op->env->rounds, acquire_done, op);
    if (!rd) {
        op->err = RL_E_INTERNAL;
        waitq_leave(&op->w, -1);
        lockop_finish(op);
        return;
    }
    acquire_attempt_begin(op, rd);
    if (op->reentrant)
        rd->wait_all = 1; /* a re-entry is judged by where it added a hold: hear them all */
    op->shape->send_acquire(op, rd);
}

void acquire_start(lockop *op)
{
    int64_t now = clock_now_us(), ra = 0;
    rl_err err = RL_E_INTERNAL;
    switch (waitq_admit(&op->env->wq, &op->w, op->wait_deadline_us, now, &ra, &err)) {
    case WAITQ_ATTEMPT:
        acquire_attempt(op);
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
        lockop_finish(op);
        return;
    default:
        op->err = err;
        lockop_finish(op);
        return;
    }
}

static void acquire_failed(lockop *op, rl_err err)
{
    lockop_env *env = op->env;
    op->err = err;
    op->w.in_flight = 0;
    lockop_release_everywhere(op);
    if (op->partial) {
        /* It held some masters and lets them go now: whoever those keys refused
         * meanwhile may get the lock.  That is a release of the name(s) here. */
        op->partial = 0;
        const char(*names)[NAME_MAX_LEN + 1];
        const size_t *lens;
        size_t n = lockop_names(op, &names, &lens);
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
    lockop_finish(op);
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
        lockop_release_everywhere(op);
        lockop_announce_release(op);
    } else {
        if (env->nfinishers) /* a lease granted again: an old release must not take it */
            finisher_cancel(env, op);
        waitq_granted(&env->wq, &op->w, op->validity_ms);
        if (env->granted) {
            const char(*names)[NAME_MAX_LEN + 1];
            const size_t *lens;
            size_t n = lockop_names(op, &names, &lens);
            for (size_t j = 0; j < n; j++)
                env->granted(env, names[j], lens[j]); /* worker.c: on_granted */
        }
    }
    waitq_attempt_ended(&op->w);
    lockop_finish(op);
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
 * a release leaves is release.c's release_judged()'s). */
static long quorum_holds(const round *rd)
{
    int64_t v[64];
    size_t k = 0;
    for (size_t i = 0; i < rd->env->n && k < 64; i++)
        if (rd->replies[i].state == RL_SLOT_OK) /* a silent master's fields are unset */
            v[k++] = rd->replies[i].holds;
    return (long)redlock_quorum_at_least(v, k, rd->env->quorum);
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
void acquire_done(round *rd)
{
    redlock_tally t;
    lockop *op = lockop_heard(rd, &t);
    round_env *re = op->env->rounds;
    op->release_mask = maybe_written(rd);
    uint64_t added = 0;
    uint64_t fresh = op->reentrant && rd->script == SCRIPT_ACQUIRE ? reentry_fresh_keys(rd, &added) : 0;
    if (fresh) {
        /* a re-entry: the free keys it took go at once (its exact value), and count for
         * nothing */
        uint64_t keep = op->release_mask & ~fresh;
        op->release_mask = fresh;
        lockop_release_everywhere(op);
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
     * answers what it kept: pttl > 0); lockop_complete() takes it back from the others. */
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
    acquire_attempt(op_of(w));
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
    lockop_finish(op);
}

static void on_waited_out(waiter *w)
{
    lockop *op = op_of(w);
    count(op->env, CNT_ACQ_WAITED_OUT);
    if (!w->in_flight) /* else the round in flight answers */
        lockop_complete(op);
}

static void on_watch(waitq_env *wq, const char *name, size_t len, int on)
{
    lockop_env *env = container_of(wq, lockop_env, wq);
    if (env->watch)
        env->watch(env, name, len, on);
}

const waitq_hooks acquire_queue_hooks = {on_attempt, on_answer, on_waited_out, on_watch};
