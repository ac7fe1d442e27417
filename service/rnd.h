/* rnd.h -- a small, fast, non-cryptographic generator (xorshift32) for jitter and for
 * spreading retries: each owner keeps its own state, so there is no global mutable
 * state and no lock.  Never for anything an attacker must not guess (lease.h's
 * lease_random is for that). */
#ifndef RL_RND_H
#define RL_RND_H

#include <stdint.h>

/* A non-zero state from any 64 bits (the splitmix64 finalizer, folded). */
static inline uint32_t rnd_seed(uint64_t v)
{
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    v ^= v >> 31;
    uint32_t s = (uint32_t)(v ^ (v >> 32));
    return s ? s : 0x9e3779b9u;
}

/* The next value; *state must not be 0 (rnd_seed never gives 0). */
static inline uint32_t rnd_next(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x ? x : 0x9e3779b9u;
}

#endif
