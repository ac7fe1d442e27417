/* lockop.h -- the lock operations as state machines over rounds: acquire (with the
 * fencing raise, release on failure, waiting with parked retries, and the handoff of
 * a released lock to the next waiter), release, extend, inspect and readiness.
 * Owned by one worker; an op belongs to one HTTP request, which is told through
 * done() when the result is ready.  The data is in op.h; waiting is waitq.h's;
 * several names at once are multilock.h's shape of the same acquire. */
#ifndef RL_LOCKOP_H
#define RL_LOCKOP_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed);
void lockop_env_fini(lockop_env *env);

/* A counter of env's (any thread: a relaxed read). */
uint64_t lockop_counter(const lockop_env *env, int counter);

/* Prepare op (no I/O).  name/lease must be valid (validate.h). */
void lockop_init(lockop *op, lockop_env *env, int kind, const char *name, size_t name_len,
                 lockop_done_cb done, void *owner);

/* Make op a multi-name op over names (valid, distinct, 0..MULTI_MAX_NAMES; 0: a
 * release by lease alone, the names come back from the masters).  0 or -1. */
int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n);

/* Start it; done() is called later from the loop (never from inside this call). */
void lockop_start(lockop *op);

/* Let go of what op still holds (LOCKOP_READY keeps its round in op->rd, whose
 * replies say per master whether it answered in quorum state, and its rtt). */
void lockop_fini(lockop *op);

/* Let go of what op holds in its worker's rounds (lockop_fini() does it too): for an
 * op about to be handed to another thread. */
void lockop_fini_rounds(lockop *op);

/* A no-wait acquire of a name another worker's queue knows held by another lease
 * (known: the shared slots, waitq.h): op is answered 409 (err, retry_after_ms set,
 * counted) without a round, and 1 is returned; else 0.  Any worker's thread. */
int lockop_held_known(lockop *op, const waitq_known *known);

#endif
