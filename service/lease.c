/* lease.c -- lease generation and comparison (see lease.h). */
#include "lease.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

void lease_rng_init(lease_rng *r) { r->used = sizeof r->pool; }

int lease_random(lease_rng *r, void *out, size_t n)
{
    uint8_t *o = out;
    while (n) {
        if (r->used == sizeof r->pool) {
            size_t got = 0;
            while (got < sizeof r->pool) {
                ssize_t k = getrandom(r->pool + got, sizeof r->pool - got, 0);
                if (k < 0) {
                    if (errno == EINTR)
                        continue;
                    return -1;
                }
                got += (size_t)k;
            }
            r->used = 0;
        }
        size_t take = sizeof r->pool - r->used;
        if (take > n)
            take = n;
        memcpy(o, r->pool + r->used, take);
        /* Handed-out bytes do not stay in memory longer than needed. */
        memset(r->pool + r->used, 0, take);
        r->used += take;
        o += take;
        n -= take;
    }
    return 0;
}

int lease_generate(lease_rng *r, char out[LEASE_GEN_LEN + 1])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[24];
    if (lease_random(r, raw, sizeof raw) != 0)
        return -1;
    for (size_t i = 0, o = 0; i < sizeof raw; i += 3) {
        uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    out[LEASE_GEN_LEN] = '\0';
    memset(raw, 0, sizeof raw);
    return 0;
}

int lease_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return 0;
    unsigned char d = 0;
    for (size_t i = 0; i < alen; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}
