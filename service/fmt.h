/* fmt.h -- integers to text on the hot path (every request formats a few: keys, the
 * clock window, request ids, JSON numbers, log lines), without printf's formatter:
 * the same digits "%llu", "%lld" and "%0*llx" write.  Pure. */
#ifndef RL_FMT_H
#define RL_FMT_H

#include <stddef.h>
#include <stdint.h>

#define FMT_U64_MAX 21 /* digits of UINT64_MAX, and a sign for the signed form */

/* The decimal digits of v at p (no NUL); returns the end. */
static inline char *fmt_u64(char *p, uint64_t v)
{
    char tmp[FMT_U64_MAX];
    size_t k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *p++ = tmp[--k];
    return p;
}

/* v in decimal, with '-' when negative (INT64_MIN included). */
static inline char *fmt_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return fmt_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return fmt_u64(p, (uint64_t)v);
}

/* The low width hex digits of v, lower case, zero-filled (width <= 16). */
static inline char *fmt_hex(char *p, uint64_t v, int width)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = width - 1; i >= 0; i--) {
        p[i] = digits[v & 15];
        v >>= 4;
    }
    return p + width;
}

#endif
