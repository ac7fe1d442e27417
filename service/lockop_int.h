/* lockop_int.h -- what the files of the lock operations share and nobody else uses.
 * From the top down (each calls only those below it): lockop.c (the env, lockop_start,
 * the one-round kinds), release.c (the release and its handoff), acquire.c (the
 * acquire and its queue's hooks), finisher.c (finishing an unconfirmed release),
 * oplife.c (an op's life and what the machines share).  The interface of the
 * operations is lockop.h. */
#ifndef RL_LOCKOP_INT_H
#define RL_LOCKOP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"
#include "rnd.h"
#include "stat.h"

static inline uint32_t rnd(lockop_env *env)
{
    return rnd_next(&env->rnd);
}

static inline lockop *op_of(waiter *w)
{
    return container_of(w, lockop, w);
}

static inline void count(lockop_env *env, int c)
{
    stat_inc(&env->counters[c]);
}

/* Let go of op's round reference (op->rd's one rule, op.h). */
static inline void drop_round(lockop *op)
{
    if (op->rd) {
        round_unref(op->rd);
        op->rd = NULL;
    }
}

/* Finishers a worker keeps at most; past it, the keys expire with their ttl. */
#define FINISHERS_MAX 1024

/* ---- oplife.c ---- */

/* op is answered now: counted, its queue let go, op->done called.  From the loop
 * (on_done_timer), or by a caller that no longer uses op. */
void lockop_complete(lockop *op);

/* Answer op from the loop, never under a caller still using it: done_timer ->
 * on_done_timer -> lockop_complete -> op->done. */
void lockop_finish(lockop *op);

/* The names op is about (one, or the names of a multi-name lock): their number. */
size_t lockop_names(const lockop *op, const char (**names)[NAME_MAX_LEN + 1],
                    const size_t **lens);

/* A release of op's name(s) went through here: wake their waiters, here and on the
 * other workers. */
void lockop_announce_release(lockop *op);

/* The op a decided round was for, with the masters that answered (into *t too). */
lockop *lockop_heard(const round *rd, redlock_tally *t);

/* Release what op's attempt may have written (op->release_mask), fire and forget. */
void lockop_release_everywhere(lockop *op);

/* ---- finisher.c ---- */

/* Finish op's release on the masters in mask, which did not answer rd: lower the
 * lease's holds there to target (0: delete; -1: one hold only), until each answers or
 * the lock's ttl is over.  A later release of the same lease and name takes over the
 * finisher of an earlier one. */
void finisher_start(lockop *op, const round *rd, uint64_t found, uint64_t mask, int64_t target);

/* A grant of op's name and lease through this worker: a finisher of an earlier release
 * of the lease must not delete it. */
void finisher_cancel(lockop_env *env, const lockop *op);

/* Let go of every finisher of env (lockop_env_fini). */
void finisher_free_all(lockop_env *env);

/* ---- acquire.c ---- */

/* The hooks of every name queue of a worker (lockop_env_init sets them). */
extern const waitq_hooks acquire_queue_hooks;

/* Start an acquire of one name: attempt now, follow the attempt in flight, park, or
 * answer (waitq_admit). */
void acquire_start(lockop *op);

/* An acquire round for op (of any shape); its done() is acquire_done. */
void acquire_attempt(lockop *op);

/* op's attempt goes out in rd (an acquire round, or a handoff), writing its own
 * value: the lease and a tag no other attempt has. */
void acquire_attempt_begin(lockop *op, round *rd);

/* The round's done() of an acquire round (acquire_attempt's, or a handoff's through
 * release.c's handoff_done): one acquire round, of any shape, was decided. */
void acquire_done(round *rd);

/* ---- release.c ---- */

/* A release: handed over to a parked waiter, or one plain round.  0 or -1. */
int release_start(lockop *op);

#endif
