/* multilock.h -- locks over several names at once, all or nothing: the multi-name
 * shape of an acquire (op.h, lockop_shape), its names and per-name tokens, and the
 * release of a whole set by its lease.  One script call per master takes every name
 * or none, so callers asking for overlapping sets in any order cannot deadlock; the
 * set is kept under its lease (keys.h) so that the lease alone releases it. */
#ifndef RL_MULTILOCK_H
#define RL_MULTILOCK_H

#include <stddef.h>

#include "op.h"

extern const lockop_shape multilock_shape;

/* Give op the names (valid, distinct, 0..MULTI_MAX_NAMES; 0: a release by lease
 * alone, the names come back from the masters).  0 or -1 (allocation, too many). */
int multilock_set(lockop *op, const char *const *names, const size_t *lens, size_t n);

/* Free what multilock_set() allocated (no-op without it). */
void multilock_free(lockop *op);

/* Release the set kept under lease (every name of it, within the token's scope; NULL
 * or "": none) on the masters in mask: the client's release, and its finisher's. */
void multilock_send_release(const lockop_env *env, round *rd, const char *lease, size_t lease_len,
                            const char *scope, uint64_t mask);

#endif
