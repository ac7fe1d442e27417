/* test_resp.c -- the RESP formatting of resp.h: bulk strings, one EVALSHA, and the
 * batched call built from many operations.  Every command made is checked twice: its
 * bytes against hiredis's own formatter (redisFormatCommandArgv), and parsed back by
 * hiredis's redisReader into the argv it was made from.  Binary-safe and empty
 * arguments, counts and lengths across digit boundaries, growth past the first
 * buffers, a first key larger than the room kept for it, and operations too large to
 * hold (refused, the batch unchanged). */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "resp.h"

TestSuite(resp, .fini = unit_fini, .timeout = 60);

static const char SHA[] = "0123456789abcdef0123456789abcdef01234567";
static const char SHA2[] = "fedcba9876543210fedcba9876543210fedcba98";

/* The command must be the bytes hiredis would send for argv, and parse back to argv. */
static void expect_command(const char *cmd, size_t len, int argc, const char **argv,
                           const size_t *lens)
{
    char *want = NULL;
    int wl = redisFormatCommandArgv(&want, argc, argv, lens);
    cr_assert_gt(wl, 0);
    cr_assert_eq(len, (size_t)wl, "length %zu, hiredis makes %d", len, wl);
    cr_assert(memcmp(cmd, want, len) == 0, "bytes differ from hiredis's:\n%.*s\n--\n%s",
              (int)len, cmd, want);
    redisFreeCommand(want);

    redisReader *rd = redisReaderCreate();
    cr_assert_not_null(rd);
    cr_assert_eq(redisReaderFeed(rd, cmd, len), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK, "RESP parse error: %s", rd->errstr);
    cr_assert_not_null(r, "incomplete command");
    void *more = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &more), REDIS_OK);
    cr_assert_null(more, "bytes past the command");
    redisReply *rep = r;
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(rep->elements, (size_t)argc);
    for (int i = 0; i < argc; i++) {
        redisReply *e = rep->element[i];
        cr_assert_eq(e->type, REDIS_REPLY_STRING, "argument %d", i);
        cr_assert_eq(e->len, lens[i], "argument %d: %zu bytes, want %zu", i, e->len, lens[i]);
        cr_assert(memcmp(e->str, argv[i], lens[i]) == 0, "argument %d differs", i);
    }
    freeReplyObject(rep);
    redisReaderFree(rd);
}

/* One EVALSHA made by resp_evalsha() in a buffer of exactly resp_evalsha_size(),
 * guarded on both sides, checked against hiredis. */
static void check_evalsha(const char *first, size_t first_len, size_t nkeys, size_t nargs,
                          const char **argv, const size_t *lens)
{
    size_t size = resp_evalsha_size(first_len, nkeys + nargs, lens);
    char *buf = malloc(size + 64);
    cr_assert_not_null(buf);
    memset(buf, 0x5a, size + 64);
    size_t len = resp_evalsha(buf + 32, SHA, first, first_len, NULL, 0, nkeys, nargs, argv, lens);
    cr_assert_leq(len, size, "wrote %zu bytes in room for %zu", len, size);
    for (size_t i = 0; i < 32; i++)
        cr_assert_eq(buf[i], 0x5a, "wrote before the buffer");
    for (size_t i = 32 + size; i < size + 64; i++)
        cr_assert_eq(buf[i], 0x5a, "wrote past resp_evalsha_size()");

    size_t argc = 4 + nkeys + nargs;
    const char **av = malloc(argc * sizeof *av);
    size_t *al = malloc(argc * sizeof *al);
    cr_assert(av && al);
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys + 1);
    av[0] = "EVALSHA", al[0] = 7;
    av[1] = SHA, al[1] = 40;
    av[2] = nk, al[2] = strlen(nk);
    av[3] = first, al[3] = first_len;
    for (size_t i = 0; i < nkeys + nargs; i++)
        av[4 + i] = argv[i], al[4 + i] = lens[i];
    expect_command(buf + 32, len, (int)argc, av, al);
    free(av);
    free(al);
    free(buf);
}

Test(resp, a_bulk_string_is_its_length_then_its_bytes)
{
    char b[64];
    char *e = resp_put_bulk(b, "abc", 3);
    cr_assert_eq(e - b, 9);
    cr_assert(memcmp(b, "$3\r\nabc\r\n", 9) == 0);
    e = resp_put_bulk(b, "", 0);
    cr_assert_eq(e - b, 6);
    cr_assert(memcmp(b, "$0\r\n\r\n", 6) == 0);
    e = resp_put_bulk(b, "0123456789", 10);
    cr_assert_eq(e - b, 17);
    cr_assert(memcmp(b, "$10\r\n0123456789\r\n", 17) == 0);
}

Test(resp, the_evalsha_head_counts_every_argument_and_fits_its_room)
{
    char b[RESP_HEAD_MAX + 1];
    memset(b, 0x5a, sizeof b);
    char *e = resp_put_evalsha_head(b, SIZE_MAX / 2, SIZE_MAX / 2 - 3, SHA);
    cr_assert_leq((size_t)(e - b), (size_t)RESP_HEAD_MAX, "the largest head overflows its room");
    cr_assert_eq(b[RESP_HEAD_MAX], 0x5a);
    e = resp_put_evalsha_head(b, 2, 3, SHA);
    const char want[] = "*8\r\n$7\r\nEVALSHA\r\n$40\r\n0123456789abcdef0123456789abcdef01234567\r\n"
                        "$1\r\n2\r\n";
    cr_assert_eq((size_t)(e - b), sizeof want - 1);
    cr_assert(memcmp(b, want, sizeof want - 1) == 0);
}

Test(resp, an_evalsha_is_the_bytes_hiredis_makes_and_parses_back)
{
    const char *argv[] = {"lock/a", "lease-1", "30000", "tag"};
    const size_t lens[] = {6, 7, 5, 3};
    check_evalsha("p:#master", 9, 1, 3, argv, lens);
    check_evalsha("p:#master", 9, 0, 0, argv, lens); /* only the first key */
    check_evalsha("p:#master", 9, 4, 0, argv, lens); /* keys only */
    check_evalsha("p:#master", 9, 0, 4, argv, lens); /* arguments only */
}

Test(resp, arguments_are_binary_safe)
{
    const char k[] = "a\0b\r\nc";
    const char a[] = "$3\r\nfoo\r\n*2\r\n";
    const char z[] = {0, 0, 0};
    const char hi[] = {(char)0xff, (char)0x80, '\n'};
    const char *argv[] = {k, a, z, hi};
    const size_t lens[] = {sizeof k - 1, sizeof a - 1, sizeof z, sizeof hi};
    check_evalsha("\r\n\0#", 4, 2, 2, argv, lens);
}

Test(resp, empty_arguments_and_an_empty_first_key_are_kept)
{
    const char *argv[] = {"", "x", ""};
    const size_t lens[] = {0, 1, 0};
    check_evalsha("", 0, 1, 2, argv, lens);
}

Test(resp, lengths_and_counts_cross_digit_boundaries)
{
    static char big[100001];
    memset(big, 'q', sizeof big);
    const size_t sizes[] = {9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        const char *argv[] = {big};
        check_evalsha(big, sizes[i], 0, 1, argv, &sizes[i]);
    }
    /* 9 then 10 keys (the key count 10 then 11), 97 arguments (100 in all) */
    const char *argv[120];
    size_t lens[120];
    for (int i = 0; i < 120; i++)
        argv[i] = big, lens[i] = (size_t)i;
    check_evalsha("r", 1, 9, 0, argv, lens);
    check_evalsha("r", 1, 10, 0, argv, lens);
    check_evalsha("r", 1, 3, 94, argv, lens);
    check_evalsha("r", 1, 3, 117, argv, lens);
}

/* ---- batches ---- */

typedef struct op {
    char code;
    size_t nkeys, nargs;
    const char *argv[8];
    size_t lens[8];
} op;

/* What a batch of ops joined with first and sha must be: EVALSHA sha <1+keys> first,
 * every op's keys, then every op's code and arguments (the first op's code left out
 * with skip_code). */
static void expect_batch(const char *cmd, size_t len, const char *sha, const char *first,
                         size_t first_len, const op *ops, size_t n, int skip_code)
{
    size_t cap = 4 + n * 9;
    const char **av = malloc(cap * sizeof *av);
    size_t *al = malloc(cap * sizeof *al);
    char *codes = malloc(n + 1);
    cr_assert(av && al && codes);
    size_t nkeys = 0;
    for (size_t i = 0; i < n; i++)
        nkeys += ops[i].nkeys;
    char nk[24];
    snprintf(nk, sizeof nk, "%zu", nkeys + 1);
    size_t c = 0;
    av[c] = "EVALSHA", al[c++] = 7;
    av[c] = sha, al[c++] = 40;
    av[c] = nk, al[c++] = strlen(nk);
    av[c] = first, al[c++] = first_len;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ops[i].nkeys; k++)
            av[c] = ops[i].argv[k], al[c++] = ops[i].lens[k];
    for (size_t i = 0; i < n; i++) {
        codes[i] = ops[i].code;
        if (!(skip_code && i == 0))
            av[c] = &codes[i], al[c++] = 1;
        for (size_t k = ops[i].nkeys; k < ops[i].nkeys + ops[i].nargs; k++)
            av[c] = ops[i].argv[k], al[c++] = ops[i].lens[k];
    }
    expect_command(cmd, len, (int)c, av, al);
    free(codes);
    free(av);
    free(al);
}

static void add_all(resp_batch *b, const op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(resp_batch_add(b, ops[i].code, ops[i].nkeys, ops[i].nargs, ops[i].argv,
                                    ops[i].lens),
                     0);
}

/* Join b and check the command against ops (see expect_batch). */
static void join_expect(resp_batch *b, const char *sha, const char *first, size_t first_len,
                        const op *ops, size_t n, int skip_code)
{
    size_t len = 0;
    const char *cmd = resp_batch_join(b, sha, first, first_len, NULL, 0, skip_code, &len);
    cr_assert_not_null(cmd);
    expect_batch(cmd, len, sha, first, first_len, ops, n, skip_code);
}

static const op OPS[] = {
    {'a', 1, 3, {"lock/a", "lease-1", "30000", "t"}, {6, 7, 5, 1}},
    {'r', 1, 1, {"lock/b", "lease-2"}, {6, 7}},
    {'x', 2, 0, {"k1", "k2"}, {2, 2}},
    {'e', 0, 2, {"", "\r\n"}, {0, 2}},
};
#define NOPS (sizeof OPS / sizeof *OPS)

Test(resp, a_batch_joins_into_one_evalsha_keys_first_then_codes_and_arguments)
{
    resp_batch b = {0};
    add_all(&b, OPS, NOPS);
    cr_assert_eq(b.nkeys, 4);
    cr_assert_eq(b.nargs, 6 + NOPS, "every operation's code counts as an argument");
    join_expect(&b, SHA, "p:#master", 9, OPS, NOPS, 0);
    resp_batch_free(&b);
}

Test(resp, a_batch_of_one_without_its_code_is_that_operations_own_evalsha)
{
    resp_batch b = {0};
    add_all(&b, OPS, 1);
    size_t len = 0;
    const char *cmd = resp_batch_join(&b, SHA, "p:#master", 9, NULL, 0, 1, &len);
    cr_assert_not_null(cmd);
    char alone[512];
    size_t al = resp_evalsha(alone, SHA, "p:#master", 9, NULL, 0, OPS[0].nkeys, OPS[0].nargs, OPS[0].argv,
                             OPS[0].lens);
    cr_assert_eq(len, al);
    cr_assert(memcmp(cmd, alone, len) == 0);
    expect_batch(cmd, len, SHA, "p:#master", 9, OPS, 1, 1);
    resp_batch_free(&b);
}

Test(resp, a_join_empties_the_batch_and_the_next_one_carries_nothing_of_it)
{
    resp_batch b = {0};
    add_all(&b, OPS, NOPS);
    size_t len = 0;
    cr_assert_not_null(resp_batch_join(&b, SHA, "p:#master", 9, NULL, 0, 0, &len));
    cr_assert_eq(b.keys_len + b.args_len + b.nkeys + b.nargs, 0);
    add_all(&b, OPS + 1, 2);
    join_expect(&b, SHA2, "q:#master", 9, OPS + 1, 2, 0);
    /* cleared without a join: the same */
    add_all(&b, OPS, NOPS);
    resp_batch_clear(&b);
    add_all(&b, OPS + 3, 1);
    join_expect(&b, SHA, "p:#master", 9, OPS + 3, 1, 1);
    resp_batch_free(&b);
}

Test(resp, a_batch_with_no_operation_is_the_first_key_alone)
{
    resp_batch b = {0};
    join_expect(&b, SHA, "p:#master", 9, NULL, 0, 0);
    resp_batch_free(&b);
}

Test(resp, a_batch_grows_past_its_first_buffers)
{
    static char big[70000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)(i * 7);
    static op ops[128];
    for (size_t i = 0; i < 128; i++) {
        ops[i] = (op){(char)('A' + i % 26), 1, 2, {big, big + i, big}, {100 + i, 40, 3 * i}};
        if (i == 77)
            ops[i].lens[2] = sizeof big; /* one argument far past the buffers so far */
    }
    resp_batch b = {0};
    add_all(&b, ops, 128);
    cr_assert_gt(b.keys_cap, 1024);
    cr_assert_gt(b.args_cap, sizeof big);
    join_expect(&b, SHA, "p:#master", 9, ops, 128, 0);
    resp_batch_free(&b);
}

Test(resp, a_first_key_longer_than_the_room_kept_for_it_still_joins)
{
    static char first[5000];
    memset(first, 'f', sizeof first);
    resp_batch b = {0};
    add_all(&b, OPS, NOPS);
    join_expect(&b, SHA, first, sizeof first, OPS, NOPS, 0);
    resp_batch_free(&b);
}

Test(resp, an_operation_too_large_to_hold_is_refused_and_the_batch_is_unchanged)
{
    resp_batch b = {0};
    add_all(&b, OPS, 2);
    resp_batch before = b;
    /* Sizes no buffer can hold: refused before any byte is read or written. */
    const char *argv[] = {"k", "a", "b"};
    size_t huge_key[] = {SIZE_MAX / 2, 1, 1};
    size_t huge_args[] = {1, SIZE_MAX - 8, SIZE_MAX - 8}; /* their sum wraps around */
    cr_assert_eq(resp_batch_add(&b, 'z', 1, 2, argv, huge_key), -1);
    cr_assert_eq(resp_batch_add(&b, 'z', 1, 2, argv, huge_args), -1);
    cr_assert_eq(b.keys, before.keys);
    cr_assert_eq(b.keys_len, before.keys_len);
    cr_assert_eq(b.args_len, before.args_len);
    cr_assert_eq(b.nkeys, before.nkeys);
    cr_assert_eq(b.nargs, before.nargs);
    join_expect(&b, SHA, "p:#master", 9, OPS, 2, 0);
    /* one EVALSHA of that size asks for more room than can be allocated */
    cr_assert_eq(resp_evalsha_size(1, 3, huge_args), SIZE_MAX);
    resp_batch_free(&b);
}

Test(resp, a_freed_batch_is_empty_and_can_be_used_again)
{
    resp_batch b = {0};
    add_all(&b, OPS, NOPS);
    resp_batch_free(&b);
    cr_assert_null(b.keys);
    cr_assert_null(b.args);
    cr_assert_eq(b.keys_cap + b.args_cap + b.keys_len + b.args_len + b.nkeys + b.nargs, 0);
    add_all(&b, OPS, 1);
    join_expect(&b, SHA, "p:#master", 9, OPS, 1, 0);
    resp_batch_free(&b);
}

/* An operation formatted once (a round does, for all its masters) adds exactly the
 * bytes resp_batch_add() would write, batched with others or alone. */
Test(resp, an_operation_formatted_once_joins_as_if_added_argument_by_argument)
{
    for (size_t first = 0; first < NOPS; first++) {
        resp_batch a = {0}, b = {0};
        for (size_t i = first; i < NOPS; i++) {
            size_t need = resp_op_size(OPS[i].nkeys, OPS[i].nargs, OPS[i].lens);
            char *buf = malloc(need);
            cr_assert_not_null(buf);
            resp_op fo;
            resp_op_format(&fo, buf, OPS[i].code, OPS[i].nkeys, OPS[i].nargs, OPS[i].argv, OPS[i].lens);
            cr_assert_leq(fo.keys_len + fo.args_len, need);
            cr_assert_eq(resp_batch_add_op(&b, &fo), 0);
            free(buf); /* the batch holds its own copy */
            cr_assert_eq(resp_batch_add(&a, OPS[i].code, OPS[i].nkeys, OPS[i].nargs, OPS[i].argv, OPS[i].lens), 0);
        }
        cr_assert_eq(a.nkeys, b.nkeys);
        cr_assert_eq(a.nargs, b.nargs);
        for (int skip = 0; skip < 2; skip++) {
            resp_batch a2 = {0}, b2 = {0};
            size_t la = 0, lb = 0;
            /* the same contents in fresh batches, joined with and without the first code */
            for (size_t i = first; i < NOPS; i++) {
                resp_op fo;
                char buf[1024];
                resp_op_format(&fo, buf, OPS[i].code, OPS[i].nkeys, OPS[i].nargs, OPS[i].argv, OPS[i].lens);
                resp_batch_add_op(&b2, &fo);
                resp_batch_add(&a2, OPS[i].code, OPS[i].nkeys, OPS[i].nargs, OPS[i].argv, OPS[i].lens);
            }
            const char *ca = resp_batch_join(&a2, SHA, "p:#master", 9, "1:2", 3, skip, &la);
            const char *cb = resp_batch_join(&b2, SHA, "p:#master", 9, "1:2", 3, skip, &lb);
            cr_assert(ca && cb);
            cr_assert_eq(la, lb);
            cr_assert(memcmp(ca, cb, la) == 0);
            resp_batch_free(&a2);
            resp_batch_free(&b2);
        }
        join_expect(&b, SHA, "p:#master", 9, OPS + first, NOPS - first, 0);
        resp_batch_free(&a);
        resp_batch_free(&b);
    }
}
