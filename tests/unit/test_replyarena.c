/* test_replyarena.c -- the reply arena of replyarena.h on a real hiredis redisReader:
 * every reply is parsed twice, by a reader with hiredis's own builders and by one with
 * the arena, and the two trees must agree field by field (types, integers, lengths,
 * string bytes with their NUL, element counts, nesting).  Nested arrays, binary bulk
 * strings, integers, nils, errors, statuses, replies larger than the first block, a
 * reply fed a byte at a time, a protocol error in the middle of an array, a second
 * root while one is alive, a teardown with a reply half read, and many replies in a
 * row (the arena does not grow). */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "replyarena.h"

TestSuite(replyarena, .fini = unit_fini, .timeout = 60);

/* ---- helpers ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    cr_assert(k > 0 && (size_t)k < sizeof tmp);
    put(b, tmp, (size_t)k);
}

static void bulk(buf *b, const char *s, size_t n)
{
    putf(b, "$%zu\r\n", n);
    put(b, s, n);
    put(b, "\r\n", 2);
}

static redisReader *arena_reader(void)
{
    redisReader *r = redisReaderCreate();
    cr_assert_not_null(r);
    cr_assert_eq(replyarena_install(r), 0);
    return r;
}

static void arena_reader_free(redisReader *r)
{
    replyarena_uninstall(r);
    redisReaderFree(r);
}

static void same_tree(const redisReply *want, const redisReply *got, const char *path)
{
    cr_assert_not_null(got, "%s: missing", path);
    cr_assert_eq(got->type, want->type, "%s: type %d, hiredis %d", path, got->type, want->type);
    cr_assert_eq(got->integer, want->integer, "%s: integer", path);
    cr_assert_eq(got->len, want->len, "%s: len %zu, hiredis %zu", path, got->len, want->len);
    cr_assert_eq(got->elements, want->elements, "%s: elements", path);
    if (want->str) {
        cr_assert_not_null(got->str, "%s: no string", path);
        cr_assert(memcmp(got->str, want->str, want->len + 1) == 0, "%s: string bytes (or its NUL) differ", path);
    } else {
        cr_assert_null(got->str, "%s: a string where hiredis has none", path);
    }
    if (!want->element) {
        cr_assert_null(got->element, "%s: an element array where hiredis has none", path);
        return;
    }
    cr_assert_not_null(got->element, "%s: no element array", path);
    for (size_t i = 0; i < want->elements; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        same_tree(want->element[i], got->element[i], sub);
    }
}

/* Feed bytes to both readers (in pieces of `step` bytes; 0: at once) and compare every
 * reply they give; nreplies replies are expected.  The arena must be empty after each
 * freeObject. */
static void check_bytes_on(redisReader *ar, const char *p, size_t n, size_t step, int nreplies)
{
    redisReader *dr = redisReaderCreate();
    cr_assert_not_null(dr);
    if (!step)
        step = n;
    int got = 0;
    for (size_t off = 0; off < n || got < nreplies;) {
        size_t k = n - off < step ? n - off : step;
        if (k) {
            cr_assert_eq(redisReaderFeed(dr, p + off, k), REDIS_OK);
            cr_assert_eq(redisReaderFeed(ar, p + off, k), REDIS_OK);
            off += k;
        }
        for (;;) {
            void *want = NULL, *have = NULL;
            cr_assert_eq(redisReaderGetReply(dr, &want), REDIS_OK, "hiredis: %s", dr->errstr);
            cr_assert_eq(redisReaderGetReply(ar, &have), REDIS_OK, "arena: %s", ar->errstr);
            cr_assert_eq(want == NULL, have == NULL, "one reader has a reply, the other not (at %zu)", off);
            if (!want)
                break;
            char path[32];
            snprintf(path, sizeof path, "reply%d", got);
            same_tree(want, have, path);
            freeReplyObject(want);
            ar->fn->freeObject(have);
            replyarena_stats st;
            cr_assert_eq(replyarena_stats_of(ar, &st), 0);
            cr_assert_eq(st.used, 0);
            cr_assert_eq(st.blocks, 0, "extra blocks kept after the reply was freed");
            got++;
        }
        if (off == n)
            break;
    }
    cr_assert_eq(got, nreplies, "%d replies, %d expected", got, nreplies);
    redisReaderFree(dr);
}

static void check_bytes(const char *p, size_t n, size_t step, int nreplies)
{
    redisReader *ar = arena_reader();
    check_bytes_on(ar, p, n, step, nreplies);
    arena_reader_free(ar);
}

/* A batched script reply as the masters give it: {time, op1, ..., opn}, each op an
 * acquire's {1, F} or a refusal's {0, pttl, F, holder} (proto.h). */
static void batch_reply(buf *b, int n)
{
    putf(b, "*%d\r\n:%lld\r\n", n + 1, 1700000000123LL);
    for (int i = 0; i < n; i++) {
        if (i % 3 == 2) {
            char holder[40];
            int k = snprintf(holder, sizeof holder, "lease-%08d-0123456789abcdef", i);
            putf(b, "*4\r\n:0\r\n:%d\r\n:%d\r\n", 29000 + i, 100 + i);
            bulk(b, holder, (size_t)k);
        } else {
            putf(b, "*2\r\n:1\r\n:%d\r\n", 1000000 + i);
        }
    }
}

/* ---- what it builds ---- */

Test(replyarena, scalars_match_hiredis)
{
    static const char bytes[] = "+OK\r\n"
                                "-ERR something went wrong\r\n"
                                "-REDLOCKD_CLOCK 1 2:3\r\n"
                                ":0\r\n:-1\r\n:9223372036854775807\r\n:-9223372036854775808\r\n"
                                "$0\r\n\r\n"
                                "$-1\r\n"
                                "*-1\r\n"
                                "*0\r\n"
                                "+\r\n"
                                "$5\r\nhello\r\n";
    check_bytes(bytes, sizeof bytes - 1, 0, 13);
}

Test(replyarena, binary_bulk_strings_keep_their_nul_bytes)
{
    buf b = {0};
    static const char bin[] = "a\0b\r\n\0\xff\x01z";
    bulk(&b, bin, sizeof bin - 1);
    put(&b, "*3\r\n", 4);
    bulk(&b, bin, sizeof bin - 1);
    bulk(&b, "\0", 1);
    bulk(&b, "", 0);
    check_bytes(b.p, b.n, 0, 2);
    free(b.p);
}

Test(replyarena, nested_arrays_with_nils_and_errors)
{
    buf b = {0};
    /* depth 7, the deepest hiredis reads, with mixed elements at every level */
    for (int d = 0; d < 6; d++)
        putf(&b, "*4\r\n:%d\r\n$-1\r\n-ERR at %d\r\n", d, d);
    putf(&b, "*3\r\n+deep\r\n*-1\r\n*0\r\n");
    putf(&b, "*2\r\n*1\r\n*1\r\n:5\r\n$3\r\nend\r\n");
    check_bytes(b.p, b.n, 0, 2);
    free(b.p);
}

Test(replyarena, batch_replies_match_hiredis)
{
    buf b = {0};
    for (int n = 1; n <= 128; n *= 2)
        batch_reply(&b, n);
    check_bytes(b.p, b.n, 0, 8);
    free(b.p);
}

Test(replyarena, a_reply_fed_a_byte_at_a_time)
{
    buf b = {0};
    batch_reply(&b, 40);
    put(&b, "$11\r\nhello\0world\r\n", 18);
    check_bytes(b.p, b.n, 1, 2);
    check_bytes(b.p, b.n, 7, 2);
    free(b.p);
}

Test(replyarena, a_reply_larger_than_the_first_block_spills_and_gives_it_back)
{
    buf b = {0};
    /* many small elements: several extra blocks */
    batch_reply(&b, 2000);
    /* one string larger than the first block */
    size_t big = 3 * REPLYARENA_FIRST + 5;
    char *s = malloc(big);
    cr_assert_not_null(s);
    for (size_t i = 0; i < big; i++)
        s[i] = (char)(i * 7);
    put(&b, "*2\r\n:1\r\n", 8);
    bulk(&b, s, big);
    bulk(&b, s, big); /* at the root */
    redisReader *ar = arena_reader();
    check_bytes_on(ar, b.p, b.n, 0, 3);
    replyarena_stats st;
    cr_assert_eq(replyarena_stats_of(ar, &st), 0);
    cr_assert_gt(st.spills, 0);
    cr_assert_eq(st.blocks, 0);
    cr_assert_gt(st.peak, 2000 * 150, "peak %zu", st.peak);
    arena_reader_free(ar);
    free(s);
    free(b.p);
}

/* ---- lifetime ---- */

Test(replyarena, many_replies_in_a_row_do_not_grow_the_arena)
{
    buf one = {0};
    batch_reply(&one, 32);
    redisReader *ar = arena_reader();
    replyarena_stats st;
    for (int i = 0; i < 2000; i++) {
        cr_assert_eq(redisReaderFeed(ar, one.p, one.n), REDIS_OK);
        void *r = NULL;
        cr_assert_eq(redisReaderGetReply(ar, &r), REDIS_OK);
        cr_assert_not_null(r);
        cr_assert_eq(((redisReply *)r)->elements, 33);
        ar->fn->freeObject(r);
    }
    cr_assert_eq(replyarena_stats_of(ar, &st), 0);
    cr_assert_eq(st.replies, 2000);
    cr_assert_eq(st.spills, 0, "a 32-op batch reply spilled out of the first block");
    cr_assert_eq(st.blocks, 0);
    cr_assert_leq(st.peak, st.first);
    /* the same after a reply that spilled */
    buf big = {0};
    batch_reply(&big, 1000);
    check_bytes_on(ar, big.p, big.n, 0, 1);
    uint64_t spills = 0;
    cr_assert_eq(replyarena_stats_of(ar, &st), 0);
    spills = st.spills;
    cr_assert_gt(spills, 0);
    for (int i = 0; i < 100; i++)
        check_bytes_on(ar, one.p, one.n, 0, 1);
    cr_assert_eq(replyarena_stats_of(ar, &st), 0);
    cr_assert_eq(st.spills, spills, "small replies made extra blocks after a large one");
    cr_assert_eq(st.blocks, 0);
    arena_reader_free(ar);
    free(one.p);
    free(big.p);
}

Test(replyarena, a_protocol_error_mid_array_frees_the_partial_reply)
{
    buf b = {0};
    /* a large array (it spills), cut by a byte no reply starts with */
    putf(&b, "*3000\r\n");
    for (int i = 0; i < 1500; i++)
        putf(&b, "*2\r\n:%d\r\n$10\r\n0123456789\r\n", i);
    put(&b, "?oops\r\n", 7);
    redisReader *ar = arena_reader();
    cr_assert_eq(redisReaderFeed(ar, b.p, b.n), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(ar, &r), REDIS_ERR);
    cr_assert_null(r);
    cr_assert_eq(ar->err, REDIS_ERR_PROTOCOL, "%s", ar->errstr);
    replyarena_stats st;
    cr_assert_eq(replyarena_stats_of(ar, &st), 0);
    cr_assert_eq(st.used, 0, "the partial reply was not freed");
    cr_assert_eq(st.blocks, 0, "its extra blocks were kept");
    cr_assert_gt(st.spills, 0);
    cr_assert_eq(st.replies, 1);
    /* The same arena builds the next replies right (hiredis's reader stays failed after
     * an error, so it is cleared by hand here: its buffer was freed by the error). */
    ar->err = 0;
    ar->errstr[0] = '\0';
    ar->buf = sdsempty();
    ar->pos = ar->len = 0;
    buf ok = {0};
    batch_reply(&ok, 32);
    batch_reply(&ok, 600);
    check_bytes_on(ar, ok.p, ok.n, 0, 2);
    arena_reader_free(ar);
    free(b.p);
    free(ok.p);
}

Test(replyarena, a_second_root_while_one_is_alive_is_refused)
{
    redisReader *ar = arena_reader();
    static const char two[] = "*2\r\n:1\r\n:2\r\n:3\r\n";
    cr_assert_eq(redisReaderFeed(ar, two, sizeof two - 1), REDIS_OK);
    void *first = NULL, *second = NULL;
    cr_assert_eq(redisReaderGetReply(ar, &first), REDIS_OK);
    cr_assert_not_null(first);
    /* not freed: the reader must not build the next reply over it */
    cr_assert_eq(redisReaderGetReply(ar, &second), REDIS_ERR);
    cr_assert_null(second);
    cr_assert_eq(ar->err, REDIS_ERR_OOM);
    redisReply *f = first;
    cr_assert_eq(f->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(f->elements, 2);
    cr_assert_eq(f->element[1]->integer, 2, "the live reply was overwritten");
    ar->fn->freeObject(first);
    ar->fn->freeObject(first); /* a second free of the same reply does nothing */
    arena_reader_free(ar);
}

Test(replyarena, teardown_with_a_reply_half_read)
{
    buf b = {0};
    batch_reply(&b, 3000);
    redisReader *ar = arena_reader();
    cr_assert_eq(redisReaderFeed(ar, b.p, b.n / 2), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(ar, &r), REDIS_OK);
    cr_assert_null(r); /* not complete */
    cr_assert_not_null(ar->reply);
    replyarena_uninstall(ar);
    cr_assert_null(ar->reply);
    cr_assert_neq(replyarena_stats_of(ar, &(replyarena_stats){0}), 0);
    /* after the arena is gone the reader builds nothing and frees nothing */
    cr_assert_eq(redisReaderFeed(ar, b.p + b.n / 2, b.n - b.n / 2), REDIS_OK);
    cr_assert_eq(redisReaderGetReply(ar, &r), REDIS_ERR);
    cr_assert_null(r);
    replyarena_uninstall(ar); /* twice: no-op */
    redisReaderFree(ar);      /* no arena left to touch; leaks show under ASan */
    free(b.p);
}

Test(replyarena, install_refuses_a_reader_in_the_middle_of_a_reply)
{
    redisReader *r = redisReaderCreate();
    cr_assert_not_null(r);
    static const char half[] = "*2\r\n:1\r\n";
    cr_assert_eq(redisReaderFeed(r, half, sizeof half - 1), REDIS_OK);
    void *rep = NULL;
    cr_assert_eq(redisReaderGetReply(r, &rep), REDIS_OK);
    cr_assert_null(rep);
    cr_assert_eq(replyarena_install(r), -1); /* its partial reply is hiredis's */
    cr_assert_eq(replyarena_install(NULL), -1);
    replyarena_uninstall(NULL);
    redisReaderFree(r);
}
