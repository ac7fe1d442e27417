/* oplife.h -- the life of one lock operation (oplife.c): prepared, made multi-name,
 * let go, and the 409 answered without a round.  Included by lockop.h, the interface
 * of the lock operations; its own header so that the machines below lockop.c
 * (finisher.c) can prepare an op without lockop.c's declarations. */
#ifndef RL_OPLIFE_H
#define RL_OPLIFE_H

#include <stddef.h>

#include "op.h"

/* Prepare op (no I/O).  name/lease must be valid (validate.h). */
void lockop_init(lockop *op, lockop_env *env, int kind, const char *name, size_t name_len,
                 lockop_done_cb done, void *owner);

/* Make op a multi-name op over names (valid, distinct, 0..MULTI_MAX_NAMES; 0: a
 * release by lease alone, the names come back from the masters).  0 or -1. */
int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n);

/* Let go of what op still holds (LOCKOP_READY keeps its round in op->rd, whose
 * replies say per master whether it answered in quorum state, and its rtt). */
void lockop_fini(lockop *op);

/* Let go of what op holds in its worker's rounds (lockop_fini() does it too): for an
 * op about to be handed to another thread. */
void lockop_fini_rounds(lockop *op);

/* A no-wait acquire of a name another worker's queue knows held by another lease
 * (known: the shared slots, waitq.h), with no announcement waiting unread in that
 * worker's inbox (inboxes: nkeepers of them, by worker; inbox.h): op is answered 409
 * (err, retry_after_ms set, counted) without a round, and 1 is returned; else 0.  Any
 * worker's thread. */
int lockop_held_known(lockop *op, const waitq_known *known, const struct inbox *inboxes,
                      size_t nkeepers);

#endif
