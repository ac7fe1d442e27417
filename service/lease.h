/* lease.h -- lease secrets: 192 bits from the OS CSPRNG in URL-safe base64, and a
 * constant-time comparison.  A lease_rng is owned by one thread. */
#ifndef RL_LEASE_H
#define RL_LEASE_H

#include <stddef.h>
#include <stdint.h>

#define LEASE_GEN_LEN 32 /* characters of a generated lease (24 random bytes) */

typedef struct lease_rng {
    uint8_t pool[4096];
    size_t used; /* bytes of pool already handed out */
} lease_rng;

void lease_rng_init(lease_rng *r);

/* Fill n random bytes from getrandom(2) (buffered).  Returns 0, or -1 if the
 * kernel refused (then nothing may be issued). */
int lease_random(lease_rng *r, void *out, size_t n);

/* Write a new lease of LEASE_GEN_LEN characters plus NUL into out.  0 or -1. */
int lease_generate(lease_rng *r, char out[LEASE_GEN_LEN + 1]);

/* Constant-time equality of two byte strings (length is not secret). */
int lease_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
