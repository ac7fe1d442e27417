/* stat.h -- counters one thread writes and others read (for /metrics): relaxed atomic
 * stores by the owner (a plain store on x86, no locked instruction), relaxed loads by
 * readers.  No lock on the hot path, and no data race for the sanitizers. */
#ifndef RL_STAT_H
#define RL_STAT_H

#include <stdint.h>

static inline void stat_inc(uint64_t *p)
{
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

static inline void stat_add(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

static inline void stat_set_i64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void stat_set_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

#endif
