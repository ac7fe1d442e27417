/* release.c -- a release as a state machine over rounds (see lockop.h, and
 * docs/DESIGN.md section 1 for when a release is released): the handoff of a released
 * lock to the next waiter, the plain release round and its judgement, and the purge of
 * stale counts; what it could not confirm goes to finisher.c. */
#include "lockop_int.h"

#include <stdio.h>
#include <string.h>

#include "reply.h"
#include "shapes.h"

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

/* Finish a release answered 503 (release_unconfirmed) on the masters that did not
 * answer (silent) only when every master that answered with the key counted it as the
 * lease's last (target 0: the key deleted there).  Not after no answer at all (a *-1
 * could take the outer hold where the release's own request landed: tests/model
 * found-finisher-none), and not when holds are kept (target > 0): "lower to t" is
 * absolute, and a re-entry granted since (through any instance: finisher_cancel sees
 * only this worker's), or the late "one less" of a failed re-entry, would have a hold
 * taken that the release never counted (a hostile tester's finding: another client got
 * the lock inside the outer holder's validity; tests/model old-finisher-reentry, and
 * rejected-finisher-gen for a finisher held to the key's attempt tag).  Those keys keep
 * their holds until the outer release (purge_stale deletes stale counts on a minority)
 * or their ttl (docs/DESIGN.md section 12). */
static void unconfirmed_finish(lockop *op, const round *rd, uint64_t found, uint64_t silent,
                               int64_t target)
{
    if (target != 0)
        return;
    finisher_start(op, rd, found, silent, target);
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
        unconfirmed_finish(op, rd, found, silent, redlock_release_target(left, found, n));
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
    acquire_attempt_begin(h, rd);
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
int release_start(lockop *op)
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
    lockop *op = lockop_heard(rd, NULL);
    if (op->multi && op->multi->out_of_scope) {
        /* A name of the set is outside the token's scope: the masters released
         * nothing (each holds the same set and refuses it whole). */
        op->err = RL_E_FORBIDDEN;
    } else {
        release_judged(op, rd, op->multi ? REL_SET : REL_PLAIN);
        if (op->err == RL_OK && op->holds == 0) /* else a reentrant holder keeps it */
            lockop_announce_release(op);
    }
    drop_round(op);
    op->done(op);
}
