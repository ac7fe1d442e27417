/* lockop.h -- the lock operations as state machines over rounds: acquire (with the
 * fencing raise, release on failure, waiting with parked retries, and the handoff of
 * a released lock to the next waiter), release, extend, inspect and readiness.
 * Owned by one worker; an op belongs to one HTTP request, which is told through
 * done() when the result is ready.  The data is in op.h; waiting is waitq.h's;
 * several names at once are multilock.h's shape of the same acquire.  An op's own
 * functions (prepare, let go, the 409 without a round) are declared in oplife.h, which
 * this header includes. */
#ifndef RL_LOCKOP_H
#define RL_LOCKOP_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"
#include "oplife.h" /* lockop_init, lockop_set_multi, lockop_fini, lockop_held_known */

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed);
void lockop_env_fini(lockop_env *env);

/* A counter of env's (any thread: a relaxed read). */
uint64_t lockop_counter(const lockop_env *env, int counter);

/* Start it; done() is called later from the loop (never from inside this call). */
void lockop_start(lockop *op);

#endif
