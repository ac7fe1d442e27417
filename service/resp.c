/* resp.c -- RESP formatting of the hot path's commands (see resp.h). */
#include "resp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Room the keys buffer keeps in front for the head and the first key, so that
 * resp_batch_join() moves bytes without reallocating (a first key of up to 250 bytes). */
#define JOIN_ROOM 400
#define CODE_BULK_LEN 7 /* "$1\r\nX\r\n": an operation's code among the arguments */

/* Sizes add up saturated: a sum past SIZE_MAX stays too large to allocate. */
static size_t add_sat(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static char *put_decimal(char *p, size_t v)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *p++ = tmp[--k];
    return p;
}

char *resp_put_bulk(char *p, const char *s, size_t n)
{
    *p++ = '$';
    p = put_decimal(p, n);
    *p++ = '\r';
    *p++ = '\n';
    if (n)
        memcpy(p, s, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char *resp_put_evalsha_head(char *p, size_t nkeys, size_t nargs, const char *sha)
{
    char nk[24];
    *p++ = '*';
    p = put_decimal(p, 3 + nkeys + nargs);
    *p++ = '\r';
    *p++ = '\n';
    p = resp_put_bulk(p, "EVALSHA", 7);
    p = resp_put_bulk(p, sha, RESP_SHA_LEN);
    return resp_put_bulk(p, nk, (size_t)(put_decimal(nk, nkeys) - nk));
}

/* Room for the bulk strings of argc arguments. */
static size_t bulks_size(size_t argc, const size_t *lens)
{
    size_t n = 0;
    for (size_t i = 0; i < argc; i++)
        n = add_sat(n, add_sat(lens[i], RESP_BULK_EXTRA));
    return n;
}

size_t resp_evalsha_size(size_t first_len, size_t argc, const size_t *lens)
{
    return add_sat(RESP_HEAD_MAX + RESP_BULK_EXTRA, add_sat(first_len, bulks_size(argc, lens)));
}

size_t resp_evalsha(char *buf, const char *sha, const char *first, size_t first_len,
                    const char *lead, size_t lead_len, size_t nkeys, size_t nargs,
                    const char *const *argv, const size_t *lens)
{
    char *p = resp_put_evalsha_head(buf, nkeys + 1, nargs + (lead ? 1 : 0), sha);
    p = resp_put_bulk(p, first, first_len);
    for (size_t i = 0; i < nkeys; i++)
        p = resp_put_bulk(p, argv[i], lens[i]);
    if (lead)
        p = resp_put_bulk(p, lead, lead_len);
    for (size_t i = nkeys; i < nkeys + nargs; i++)
        p = resp_put_bulk(p, argv[i], lens[i]);
    return (size_t)(p - buf);
}

/* Make *buf hold need bytes, doubling from 1 KiB.  0 or -1 (out of memory, or a size
 * that doubling could not reach). */
static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / 2)
        return -1;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

int resp_batch_add(resp_batch *b, char code, size_t nkeys, size_t nargs, const char *const *argv,
                   const size_t *lens)
{
    size_t kneed = bulks_size(nkeys, lens);
    size_t aneed = add_sat(CODE_BULK_LEN, bulks_size(nargs, lens + nkeys));
    /* The keys buffer holds the whole command at join: room for the head, the first
     * key, every key and every argument. */
    size_t all = add_sat(add_sat(JOIN_ROOM, b->keys_len), add_sat(kneed, add_sat(b->args_len, aneed)));
    if (grow(&b->keys, &b->keys_cap, all) != 0 ||
        grow(&b->args, &b->args_cap, add_sat(b->args_len, aneed)) != 0)
        return -1;
    char *k = b->keys + b->keys_len, *a = b->args + b->args_len;
    for (size_t i = 0; i < nkeys; i++)
        k = resp_put_bulk(k, argv[i], lens[i]);
    a = resp_put_bulk(a, &code, 1);
    for (size_t i = nkeys; i < nkeys + nargs; i++)
        a = resp_put_bulk(a, argv[i], lens[i]);
    b->keys_len = (size_t)(k - b->keys);
    b->args_len = (size_t)(a - b->args);
    b->nkeys += (unsigned)nkeys;
    b->nargs += (unsigned)nargs + 1;
    return 0;
}

size_t resp_op_size(size_t nkeys, size_t nargs, const size_t *lens)
{
    return add_sat(CODE_BULK_LEN, bulks_size(nkeys + nargs, lens));
}

void resp_op_format(resp_op *op, char *buf, char code, size_t nkeys, size_t nargs,
                    const char *const *argv, const size_t *lens)
{
    char *p = buf;
    for (size_t i = 0; i < nkeys; i++)
        p = resp_put_bulk(p, argv[i], lens[i]);
    op->keys = buf;
    op->keys_len = (size_t)(p - buf);
    op->args = p;
    p = resp_put_bulk(p, &code, 1);
    for (size_t i = nkeys; i < nkeys + nargs; i++)
        p = resp_put_bulk(p, argv[i], lens[i]);
    op->args_len = (size_t)(p - op->args);
    op->nkeys = nkeys;
    op->nargs = nargs + 1;
}

int resp_batch_add_op(resp_batch *b, const resp_op *op)
{
    size_t all = add_sat(add_sat(JOIN_ROOM, b->keys_len), add_sat(op->keys_len, add_sat(b->args_len, op->args_len)));
    if (grow(&b->keys, &b->keys_cap, all) != 0 || grow(&b->args, &b->args_cap, add_sat(b->args_len, op->args_len)) != 0)
        return -1;
    memcpy(b->keys + b->keys_len, op->keys, op->keys_len);
    memcpy(b->args + b->args_len, op->args, op->args_len);
    b->keys_len += op->keys_len;
    b->args_len += op->args_len;
    b->nkeys += (unsigned)op->nkeys;
    b->nargs += (unsigned)op->nargs;
    return 0;
}

const char *resp_batch_join(resp_batch *b, const char *sha, const char *first, size_t first_len,
                            const char *lead, size_t lead_len, int skip_code, size_t *len)
{
    size_t skip = skip_code && b->args_len >= CODE_BULK_LEN ? CODE_BULK_LEN : 0;
    char head[RESP_HEAD_MAX];
    size_t hl = (size_t)(resp_put_evalsha_head(head, (size_t)b->nkeys + 1,
                                               b->nargs - (skip ? 1 : 0) + (lead ? 1 : 0), sha) - head);
    char digits[24];
    size_t fl = 5 + (size_t)(put_decimal(digits, first_len) - digits) + first_len; /* its bulk */
    size_t ll = lead ? 5 + (size_t)(put_decimal(digits, lead_len) - digits) + lead_len : 0;
    size_t n = add_sat(add_sat(hl + fl, ll), b->keys_len + b->args_len - skip);
    /* The head and the first key go in front of the keys, the lead after them. */
    if (grow(&b->keys, &b->keys_cap, n) != 0)
        return NULL;
    memmove(b->keys + hl + fl, b->keys, b->keys_len);
    memcpy(b->keys, head, hl);
    resp_put_bulk(b->keys + hl, first, first_len);
    if (lead)
        resp_put_bulk(b->keys + hl + fl + b->keys_len, lead, lead_len);
    if (b->args_len > skip)
        memcpy(b->keys + hl + fl + b->keys_len + ll, b->args + skip, b->args_len - skip);
    resp_batch_clear(b);
    *len = n;
    return b->keys;
}

void resp_batch_clear(resp_batch *b)
{
    b->keys_len = b->args_len = 0;
    b->nkeys = b->nargs = 0;
}

void resp_batch_free(resp_batch *b)
{
    free(b->keys);
    free(b->args);
    memset(b, 0, sizeof *b);
}
