/* test_reply.c -- reply_decode of reply.h fed with real RESP bytes parsed by hiredis's
 * redisReader: every script's reply shapes, and malformed ones (wrong types, wrong
 * element counts, negative fences, error replies, NULL). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <hiredis/hiredis.h>
#include <string.h>

#include "unit.h"
#include "reply.h"
#include "scripts.h"

TestSuite(reply, .fini = unit_fini, .timeout = 60);

/* Parse exactly one RESP reply from bytes (which must be complete). */
static redisReply *resp(const char *bytes, size_t len)
{
    redisReader *rd = redisReaderCreate();
    cr_assert_not_null(rd);
    cr_assert_eq(redisReaderFeed(rd, bytes, len), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK, "RESP parse error: %s", rd->errstr);
    cr_assert_not_null(r, "incomplete RESP in test: %.*s", (int)len, bytes);
    redisReaderFree(rd);
    return r;
}

/* Decode with out pre-filled with noise so that stale fields show. */
static redlock_reply decode(int script, const char *bytes, size_t len)
{
    redisReply *r = resp(bytes, len);
    redlock_reply out;
    memset(&out, 0, sizeof out);
    out.state = RL_SLOT_PENDING;
    out.has_value = 1;
    out.released = 1;
    reply_decode(script, r, &out);
    freeReplyObject(r);
    return out;
}

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct reply_case {
    int script;
    char resp[80];
    size_t len;
    int state;
    uint64_t fence;
    int check_pttl;
    int64_t pttl;
};

#define R(script, lit, state) {script, lit, sizeof(lit) - 1, state, 0, 0, 0}
#define RF(script, lit, state, fence) {script, lit, sizeof(lit) - 1, state, fence, 0, 0}
#define RP(script, lit, state, fence, pttl) {script, lit, sizeof(lit) - 1, state, fence, 1, pttl}

enum { OK = RL_SLOT_OK, NO = RL_SLOT_REFUSED, FAIL = RL_SLOT_FAILED };

ParameterizedTestParameters(reply, script_reply_table)
{
    static struct reply_case cases[] = {
        /* acquire: {1,F} new, {2,F} same lease, {0,pttl,F} taken */
        RF(SCRIPT_ACQUIRE, "*2\r\n:1\r\n:7\r\n", OK, 7),
        /* handoff: {3,F} old lease replaced by the new one, else as acquire */
        RF(SCRIPT_HANDOFF, "*2\r\n:3\r\n:8\r\n", OK, 8),
        RF(SCRIPT_HANDOFF, "*2\r\n:1\r\n:8\r\n", OK, 8),
        RF(SCRIPT_HANDOFF, "*2\r\n:2\r\n:8\r\n", OK, 8),
        RP(SCRIPT_HANDOFF, "*3\r\n:0\r\n:900\r\n:8\r\n", NO, 8, 900),
        R(SCRIPT_HANDOFF, "*2\r\n:4\r\n:8\r\n", FAIL),
        R(SCRIPT_HANDOFF, "*2\r\n:3\r\n:-8\r\n", FAIL),
        R(SCRIPT_HANDOFF, "*3\r\n:3\r\n:8\r\n:8\r\n", FAIL),
        R(SCRIPT_HANDOFF, "-ERR wrongtype\r\n", FAIL),
        RF(SCRIPT_ACQUIRE, "*2\r\n:2\r\n:7\r\n", OK, 7),
        RF(SCRIPT_ACQUIRE, "*2\r\n:1\r\n:0\r\n", OK, 0),
        RF(SCRIPT_ACQUIRE, "*2\r\n:1\r\n:9223372036854775807\r\n", OK, 9223372036854775807ULL),
        RP(SCRIPT_ACQUIRE, "*3\r\n:0\r\n:1234\r\n:7\r\n", NO, 7, 1234),
        /* taken, naming the holding lease (split votes are told from "held" by it) */
        RP(SCRIPT_ACQUIRE, "*4\r\n:0\r\n:1234\r\n:7\r\n$5\r\nLEASE\r\n", NO, 7, 1234),
        RP(SCRIPT_ACQUIRE, "*3\r\n:0\r\n:-1\r\n:3\r\n", NO, 3, -1),
        RP(SCRIPT_ACQUIRE, "*3\r\n:0\r\n:-2\r\n:0\r\n", NO, 0, -2),
        R(SCRIPT_ACQUIRE, "*2\r\n:1\r\n:-1\r\n", FAIL),        /* negative fence */
        R(SCRIPT_ACQUIRE, "*3\r\n:0\r\n:100\r\n:-5\r\n", FAIL), /* negative fence */
        R(SCRIPT_ACQUIRE, "*3\r\n:1\r\n:5\r\n:5\r\n", FAIL),    /* granted with 3 elements */
        RF(SCRIPT_ACQUIRE, "*3\r\n:2\r\n:5\r\n:3\r\n", OK, 5), /* adopted, with its holds */
        R(SCRIPT_ACQUIRE, "*3\r\n:2\r\n:5\r\n:0\r\n", FAIL),    /* no holds is no holder */
        RF(SCRIPT_SHARED, "*2\r\n:1\r\n:4\r\n", OK, 4),
        RP(SCRIPT_SEM_ACQUIRE, "*4\r\n:0\r\n:700\r\n:9\r\n$7\r\n#free:3\r\n", NO, 9, 700),
        RF(SCRIPT_SEM_RELEASE, ":12\r\n", OK, 0),                 /* a reentrant hold less */
        R(SCRIPT_ACQUIRE, "*2\r\n:0\r\n:5\r\n", FAIL),          /* taken with 2 elements */
        R(SCRIPT_ACQUIRE, "*4\r\n:0\r\n:5\r\n:5\r\n:5\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*1\r\n:1\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*0\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*2\r\n:3\r\n:5\r\n", FAIL),          /* unknown code */
        R(SCRIPT_ACQUIRE, "*2\r\n:-1\r\n:5\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*2\r\n$1\r\n1\r\n:5\r\n", FAIL),     /* code as a string */
        R(SCRIPT_ACQUIRE, "*2\r\n:1\r\n$1\r\n5\r\n", FAIL),     /* fence as a string */
        R(SCRIPT_ACQUIRE, "*2\r\n:1\r\n$-1\r\n", FAIL),         /* fence nil */
        R(SCRIPT_ACQUIRE, "*3\r\n:0\r\n$2\r\n10\r\n:5\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*3\r\n:0\r\n:10\r\n*0\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*2\r\n*2\r\n:1\r\n:1\r\n:5\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "*-1\r\n", FAIL),
        R(SCRIPT_ACQUIRE, ":1\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "+OK\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "$-1\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "$3\r\n1,7\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "-ERR something\r\n", FAIL),
        R(SCRIPT_ACQUIRE, "-NOSCRIPT No matching script. Please use EVAL.\r\n", FAIL),
        /* raise: F after max(F, token) */
        RF(SCRIPT_RAISE, ":9\r\n", OK, 9),
        RF(SCRIPT_RAISE, ":0\r\n", OK, 0),
        R(SCRIPT_RAISE, ":-1\r\n", FAIL),
        R(SCRIPT_RAISE, "$1\r\n9\r\n", FAIL),
        R(SCRIPT_RAISE, "*1\r\n:9\r\n", FAIL),
        R(SCRIPT_RAISE, "$-1\r\n", FAIL),
        R(SCRIPT_RAISE, "+9\r\n", FAIL),
        R(SCRIPT_RAISE, "-BUSY Redis is busy running a script.\r\n", FAIL),
        /* release: 1 deleted, 0 not ours */
        R(SCRIPT_RELEASE, ":1\r\n", OK),
        R(SCRIPT_RELEASE, ":0\r\n", NO),
        R(SCRIPT_RELEASE, "+OK\r\n", FAIL),
        R(SCRIPT_RELEASE, "$1\r\n1\r\n", FAIL),
        R(SCRIPT_RELEASE, "*1\r\n:1\r\n", FAIL),
        R(SCRIPT_RELEASE, "$-1\r\n", FAIL),
        R(SCRIPT_RELEASE, "-READONLY You can't write against a read only replica.\r\n", FAIL),
        /* extend: {1,F} | {0,F} */
        RF(SCRIPT_EXTEND, "*2\r\n:1\r\n:4\r\n", OK, 4),
        RF(SCRIPT_EXTEND, "*2\r\n:0\r\n:4\r\n", NO, 4),
        R(SCRIPT_EXTEND, "*2\r\n:1\r\n:-4\r\n", FAIL),
        RF(SCRIPT_EXTEND, "*3\r\n:1\r\n:4\r\n:4\r\n", OK, 4),   /* with what is left of its bound */
        RF(SCRIPT_EXTEND, "*3\r\n:3\r\n:4\r\n:0\r\n", NO, 4),   /* refused at its bound */
        R(SCRIPT_EXTEND, "*3\r\n:1\r\n:4\r\n:-4\r\n", FAIL),
        R(SCRIPT_EXTEND, "*3\r\n:1\r\n:4\r\n$1\r\n4\r\n", FAIL),
        R(SCRIPT_EXTEND, "*1\r\n:1\r\n", FAIL),
        R(SCRIPT_EXTEND, "*2\r\n$1\r\n1\r\n:4\r\n", FAIL),
        R(SCRIPT_EXTEND, "*2\r\n:1\r\n$-1\r\n", FAIL),
        R(SCRIPT_EXTEND, ":1\r\n", FAIL),
        R(SCRIPT_EXTEND, "-ERR x\r\n", FAIL),
        /* inspect: {value|nil, pttl, F} */
        RP(SCRIPT_INSPECT, "*3\r\n$-1\r\n:-2\r\n:0\r\n", OK, 0, -2),
        RP(SCRIPT_INSPECT, "*3\r\n$-1\r\n:-2\r\n:12\r\n", OK, 12, -2),
        RP(SCRIPT_INSPECT, "*3\r\n$5\r\nhello\r\n:900\r\n:4\r\n", OK, 4, 900),
        RP(SCRIPT_INSPECT, "*3\r\n$0\r\n\r\n:-1\r\n:4\r\n", OK, 4, -1),
        R(SCRIPT_INSPECT, "*3\r\n:5\r\n:1\r\n:1\r\n", FAIL),       /* value as an integer */
        R(SCRIPT_INSPECT, "*3\r\n*0\r\n:1\r\n:1\r\n", FAIL),       /* value as an array */
        R(SCRIPT_INSPECT, "*3\r\n+OK\r\n:1\r\n:1\r\n", FAIL),      /* value as a status */
        R(SCRIPT_INSPECT, "*3\r\n$1\r\nx\r\n:1\r\n:-1\r\n", FAIL), /* negative fence */
        R(SCRIPT_INSPECT, "*3\r\n$1\r\nx\r\n$1\r\n1\r\n:1\r\n", FAIL),
        R(SCRIPT_INSPECT, "*3\r\n$1\r\nx\r\n:1\r\n$1\r\n1\r\n", FAIL),
        R(SCRIPT_INSPECT, "*2\r\n$1\r\nx\r\n:1\r\n", FAIL),
        R(SCRIPT_INSPECT, "*4\r\n$1\r\nx\r\n:1\r\n:1\r\n:1\r\n", FAIL),
        R(SCRIPT_INSPECT, "*0\r\n", FAIL),
        R(SCRIPT_INSPECT, "$-1\r\n", FAIL),
        R(SCRIPT_INSPECT, "-ERR x\r\n", FAIL),
        /* ping */
        R(SCRIPT_PING, "+PONG\r\n", OK),
        R(SCRIPT_PING, "$4\r\nPONG\r\n", FAIL),
        R(SCRIPT_PING, ":1\r\n", FAIL),
        R(SCRIPT_PING, "-LOADING Redis is loading the dataset in memory\r\n", FAIL),
        R(SCRIPT_PING, "-NOAUTH Authentication required.\r\n", FAIL),
        /* the marker script is decoded by master.c, never by reply_decode */
        R(SCRIPT_MARKER, "*2\r\n:1\r\n:-2\r\n", FAIL),
        /* unknown script ids */
        R(SCRIPT__COUNT, ":1\r\n", FAIL),
        R(-1, "+PONG\r\n", FAIL),
        R(999, "*2\r\n:1\r\n:7\r\n", FAIL),
    };
    return cr_make_param_array(struct reply_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct reply_case *c, reply, script_reply_table)
{
    redlock_reply out = decode(c->script, c->resp, c->len);
    cr_assert_eq(out.state, c->state, "script %d, %.*s: state %d, expected %d", c->script,
                 (int)c->len, c->resp, out.state, c->state);
    if (c->state != RL_SLOT_FAILED)
        cr_assert_eq(out.fence, c->fence, "script %d: fence %llu", c->script,
                     (unsigned long long)out.fence);
    if (c->check_pttl)
        cr_assert_eq(out.pttl, c->pttl, "script %d: pttl %lld", c->script, (long long)out.pttl);
    if (c->script == SCRIPT_SEM_ACQUIRE && c->state == RL_SLOT_REFUSED) {
        cr_assert_eq(out.has_value, 1, "a refusal of a permit says why");
        cr_assert_eq(out.value_len, 7);
        cr_assert_eq(memcmp(out.value, "#free:3", 7), 0);
    } else if (c->script == SCRIPT_ACQUIRE && c->len > 3 && memcmp(c->resp, "*4\r\n", 4) == 0 &&
        c->state == RL_SLOT_REFUSED) {
        cr_assert_eq(out.has_value, 1, "a refusal names its holder");
        cr_assert_eq(out.value_len, 5);
        cr_assert_eq(memcmp(out.value, "LEASE", 5), 0);
    } else if (c->script != SCRIPT_INSPECT || c->state == RL_SLOT_FAILED) {
        cr_assert_eq(out.has_value, 0, "has_value left set");
    }
}

Test(reply, null_reply_fails_for_every_script)
{
    for (int s = -1; s <= SCRIPT_PING + 1; s++) {
        redlock_reply out;
        memset(&out, 0, sizeof out);
        out.state = RL_SLOT_OK;
        out.has_value = 1;
        reply_decode(s, NULL, &out);
        cr_assert_eq(out.state, RL_SLOT_FAILED, "script %d", s);
        cr_assert_eq(out.has_value, 0, "script %d", s);
    }
}

Test(reply, error_reply_fails_for_every_script)
{
    static const char err[] = "-ERR unknown\r\n";
    for (int s = 0; s <= SCRIPT_PING; s++) {
        redlock_reply out = decode(s, err, sizeof err - 1);
        cr_assert_eq(out.state, RL_SLOT_FAILED, "script %d", s);
    }
}

Test(reply, inspect_copies_the_value)
{
    static const char r[] = "*3\r\n$18\r\nlease-0123456789AB\r\n:15000\r\n:42\r\n";
    redlock_reply out = decode(SCRIPT_INSPECT, r, sizeof r - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.has_value, 1);
    cr_assert_eq(out.value_len, 18);
    cr_assert_eq(memcmp(out.value, "lease-0123456789AB", 18), 0);
    cr_assert_eq(out.pttl, 15000);
    cr_assert_eq(out.fence, 42);
}

Test(reply, inspect_gives_the_owner_apart_from_the_lease)
{
    static const char r[] = "*4\r\n$5\r\nLEASE\r\n:900\r\n:4\r\n$11\r\nhost-7 pid1\r\n";
    redlock_reply out = decode(SCRIPT_INSPECT, r, sizeof r - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.value_len, 5);
    cr_assert_eq(memcmp(out.value, "LEASE", 5), 0, "the lease alone is compared between masters");
    cr_assert_eq(out.owner_len, 11);
    cr_assert_eq(memcmp(out.owner, "host-7 pid1", 11), 0);
    static const char none[] = "*4\r\n$5\r\nLEASE\r\n:900\r\n:4\r\n$0\r\n\r\n";
    out = decode(SCRIPT_INSPECT, none, sizeof none - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.owner_len, 0, "no owner");
    static const char nil[] = "*4\r\n$5\r\nLEASE\r\n:900\r\n:4\r\n$-1\r\n";
    out = decode(SCRIPT_INSPECT, nil, sizeof nil - 1);
    cr_assert_eq(out.state, RL_SLOT_FAILED, "the owner is a string, never nil");
    /* A foreign value longer than an owner is cut to REDLOCK_OWNER_MAX. */
    char big[600];
    int n = snprintf(big, sizeof big, "*4\r\n$1\r\nL\r\n:9\r\n:1\r\n$300\r\n%0300d\r\n", 0);
    out = decode(SCRIPT_INSPECT, big, (size_t)n);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.owner_len, REDLOCK_OWNER_MAX);
}

Test(reply, force_is_ok_whether_it_deleted_or_found_nothing)
{
    redlock_reply out = decode(SCRIPT_FORCE, ":1\r\n", 4);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.released, 1);
    out = decode(SCRIPT_FORCE, ":0\r\n", 4);
    cr_assert_eq(out.state, RL_SLOT_OK, "free there: the lock is not held on it either way");
    cr_assert_eq(out.released, 0);
    out = decode(SCRIPT_FORCE, "$1\r\n1\r\n", 7);
    cr_assert_eq(out.state, RL_SLOT_FAILED);
}

Test(reply, force_says_where_it_left_the_lock_resting)
{
    redlock_reply out = decode(SCRIPT_FORCE, ":2\r\n", sizeof ":2\r\n" - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.released, 1, "broken: the holder's lease is gone there");
    cr_assert_eq(out.rested, 1, "and the name rests for its lock-delay");
    out = decode(SCRIPT_FORCE, ":1\r\n", sizeof ":1\r\n" - 1);
    cr_assert_eq(out.rested, 0);
}

Test(reply, extend_carries_what_is_left_of_the_bound)
{
    redlock_reply out = decode(SCRIPT_EXTEND, "*2\r\n:1\r\n:4\r\n", sizeof "*2\r\n:1\r\n:4\r\n" - 1);
    cr_assert_eq(out.bound_ms, -1, "no bound: none said");
    out = decode(SCRIPT_EXTEND, "*3\r\n:1\r\n:4\r\n:1500\r\n", sizeof "*3\r\n:1\r\n:4\r\n:1500\r\n" - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.bound_ms, 1500);
    out = decode(SCRIPT_EXTEND, "*3\r\n:3\r\n:4\r\n:700\r\n", sizeof "*3\r\n:3\r\n:4\r\n:700\r\n" - 1);
    cr_assert_eq(out.state, RL_SLOT_REFUSED, "past its bound: refused");
    cr_assert_eq(out.bound_ms, 700);
    out = decode(SCRIPT_EXTEND, "*3\r\n:0\r\n:4\r\n:700\r\n", sizeof "*3\r\n:0\r\n:4\r\n:700\r\n" - 1);
    cr_assert_eq(out.state, RL_SLOT_REFUSED);
    cr_assert_eq(out.bound_ms, -1, "not the lease's: no bound to say");
    out = decode(SCRIPT_SEM_EXTEND, "*3\r\n:1\r\n:4\r\n:7\r\n", sizeof "*3\r\n:1\r\n:4\r\n:7\r\n" - 1);
    cr_assert_eq(out.count, 7, "a permit's third element is its slot");
    cr_assert_eq(out.bound_ms, -1);
}

Test(reply, inspect_carries_the_stored_token_and_the_rest)
{
    static const char r[] = "*9\r\n$16\r\nleaseAAAAAAAAAAA\r\n:900\r\n:12\r\n$0\r\n\r\n:0\r\n:0\r\n:1\r\n"
                            ":11\r\n:2900\r\n";
    redlock_reply out = decode(SCRIPT_INSPECT, r, sizeof r - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.fence, 12, "the bucket's counter");
    cr_assert_eq(out.stored, 11, "the token the key was granted with");
    cr_assert_eq(out.rest_ms, 2900);
    cr_assert_eq(out.pttl, 900, "the holder's part");
    static const char neg[] = "*9\r\n$-1\r\n:-2\r\n:12\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n:0\r\n:-1\r\n";
    out = decode(SCRIPT_INSPECT, neg, sizeof neg - 1);
    cr_assert_eq(out.state, RL_SLOT_FAILED, "a negative rest");
    static const char eight[] = "*8\r\n$-1\r\n:-2\r\n:12\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n:0\r\n";
    out = decode(SCRIPT_INSPECT, eight, sizeof eight - 1);
    cr_assert_eq(out.state, RL_SLOT_FAILED, "eight elements is no shape of ours");
}

Test(reply, inspect_nil_value_means_free)
{
    static const char r[] = "*3\r\n$-1\r\n:-2\r\n:3\r\n";
    redlock_reply out = decode(SCRIPT_INSPECT, r, sizeof r - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.has_value, 0);
}

Test(reply, inspect_value_with_binary_bytes_is_kept_exactly)
{
    static const char r[] = "*3\r\n$4\r\na\0\r\n\r\n:1\r\n:1\r\n";
    redlock_reply out = decode(SCRIPT_INSPECT, r, sizeof r - 1);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.value_len, 4);
    cr_assert_eq(memcmp(out.value, "a\0\r\n", 4), 0);
}

Test(reply, inspect_long_foreign_value_keeps_its_first_128_bytes)
{
    char buf[512];
    char val[300];
    for (size_t i = 0; i < sizeof val; i++)
        val[i] = (char)('A' + i % 26);
    int n = snprintf(buf, sizeof buf, "*3\r\n$%zu\r\n%.*s\r\n:77\r\n:5\r\n", sizeof val,
                     (int)sizeof val, val);
    redlock_reply out = decode(SCRIPT_INSPECT, buf, (size_t)n);
    cr_assert_eq(out.state, RL_SLOT_OK);
    cr_assert_eq(out.has_value, 1);
    cr_assert_eq(out.value_len, REDLOCK_VALUE_MAX);
    cr_assert_eq(memcmp(out.value, val, REDLOCK_VALUE_MAX), 0);
    cr_assert_eq(out.pttl, 77);
}

Test(reply, inspect_value_of_exactly_128_bytes)
{
    char buf[512];
    char val[REDLOCK_VALUE_MAX];
    memset(val, 'v', sizeof val);
    int n = snprintf(buf, sizeof buf, "*3\r\n$%d\r\n%.*s\r\n:1\r\n:1\r\n", REDLOCK_VALUE_MAX,
                     REDLOCK_VALUE_MAX, val);
    redlock_reply out = decode(SCRIPT_INSPECT, buf, (size_t)n);
    cr_assert_eq(out.value_len, REDLOCK_VALUE_MAX);
}

Test(reply, release_counts_only_one_as_deleted)
{
    /* Anything but the script's own answers is no answer: the master may still hold
     * the key (a release counts it so, DESIGN.md section 1). */
    static const char two[] = ":2\r\n", neg[] = ":-1\r\n", bad[] = "*2\r\n:2\r\n:5\r\n",
                      str[] = "*2\r\n$1\r\n1\r\n:5\r\n";
    cr_assert_eq(decode(SCRIPT_RELEASE, two, sizeof two - 1).state, RL_SLOT_FAILED);
    cr_assert_eq(decode(SCRIPT_RELEASE, neg, sizeof neg - 1).state, RL_SLOT_FAILED);
    cr_assert_eq(decode(SCRIPT_RELEASE, bad, sizeof bad - 1).state, RL_SLOT_FAILED);
    cr_assert_eq(decode(SCRIPT_RELEASE, str, sizeof str - 1).state, RL_SLOT_FAILED);
}

Test(reply, a_release_answers_what_is_left_and_for_how_long)
{
    static const char gone[] = "*2\r\n:1\r\n:2900\r\n", kept[] = "*2\r\n:12\r\n:800\r\n",
                      reader[] = ":1\r\n", none[] = ":0\r\n";
    redlock_reply o = decode(SCRIPT_RELEASE, gone, sizeof gone - 1);
    cr_assert(o.state == RL_SLOT_OK && o.left == 0 && o.pttl == 2900);
    o = decode(SCRIPT_RELEASE, kept, sizeof kept - 1);
    cr_assert(o.state == RL_SLOT_OK && o.left == 2 && o.pttl == 800, "two holds left");
    o = decode(SCRIPT_RELEASE, reader, sizeof reader - 1);
    cr_assert(o.state == RL_SLOT_OK && o.left == 0 && o.pttl == -2, "a reader's entry");
    o = decode(SCRIPT_RELEASE, none, sizeof none - 1);
    cr_assert(o.state == RL_SLOT_REFUSED && o.left == 0, "not the lease's");
    o = decode(SCRIPT_SEM_RELEASE, gone, sizeof gone - 1);
    cr_assert(o.state == RL_SLOT_OK && o.pttl == 2900);
}

Test(reply, a_re_entry_answers_the_expiry_it_kept)
{
    static const char kept[] = "*4\r\n:2\r\n:7\r\n:3\r\n:29500\r\n",
                      old[] = "*3\r\n:2\r\n:7\r\n:3\r\n", fresh[] = "*2\r\n:1\r\n:8\r\n",
                      zero[] = "*4\r\n:2\r\n:7\r\n:3\r\n:0\r\n";
    redlock_reply o = decode(SCRIPT_ACQUIRE, kept, sizeof kept - 1);
    cr_assert(o.state == RL_SLOT_OK && o.holds == 3 && o.pttl == 29500 && o.fence == 7);
    o = decode(SCRIPT_SHARED, kept, sizeof kept - 1);
    cr_assert(o.state == RL_SLOT_OK && o.pttl == 29500);
    o = decode(SCRIPT_ACQUIRE, old, sizeof old - 1);
    cr_assert(o.state == RL_SLOT_OK && o.holds == 3 && o.pttl == -2, "no expiry said: the ttl");
    o = decode(SCRIPT_ACQUIRE, fresh, sizeof fresh - 1);
    cr_assert(o.state == RL_SLOT_OK && o.pttl == -2, "a fresh grant lives its ttl");
    cr_assert_eq(decode(SCRIPT_ACQUIRE, zero, sizeof zero - 1).state, RL_SLOT_FAILED,
                 "a kept key with nothing left is no grant");
}

Test(reply, decode_leaves_rtt_and_raised_alone)
{
    /* round.c sets rtt_us after decoding and lockop sets raised: decode must not care. */
    static const char r[] = "*2\r\n:1\r\n:7\r\n";
    redisReply *rp = resp(r, sizeof r - 1);
    redlock_reply out;
    memset(&out, 0, sizeof out);
    out.rtt_us = 1234;
    out.raised = 1;
    reply_decode(SCRIPT_ACQUIRE, rp, &out);
    freeReplyObject(rp);
    cr_assert_eq(out.rtt_us, 1234);
    cr_assert_eq(out.raised, 1);
}

Test(reply, hand_built_array_with_null_element_fails)
{
    /* hiredis never builds one, but a NULL element must not be dereferenced. */
    redisReply e1 = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    redisReply *elems[2] = {&e1, NULL};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = elems};
    int scripts[] = {SCRIPT_ACQUIRE, SCRIPT_EXTEND};
    for (size_t i = 0; i < 2; i++) {
        redlock_reply out;
        memset(&out, 0, sizeof out);
        reply_decode(scripts[i], &arr, &out);
        cr_assert_eq(out.state, RL_SLOT_FAILED, "script %d", scripts[i]);
    }
    redisReply *ielems[3] = {NULL, &e1, &e1};
    redisReply iarr = {.type = REDIS_REPLY_ARRAY, .elements = 3, .element = ielems};
    redlock_reply out;
    memset(&out, 0, sizeof out);
    reply_decode(SCRIPT_INSPECT, &iarr, &out);
    cr_assert_eq(out.state, RL_SLOT_FAILED);
}

Test(reply, handoff_marks_only_a_replaced_lease_as_released)
{
    static const char three[] = "*2\r\n:3\r\n:8\r\n", one[] = "*2\r\n:1\r\n:8\r\n";
    redlock_reply a = decode(SCRIPT_HANDOFF, three, sizeof three - 1);
    redlock_reply b = decode(SCRIPT_HANDOFF, one, sizeof one - 1);
    redlock_reply c = decode(SCRIPT_ACQUIRE, one, sizeof one - 1);
    cr_assert_eq(a.released, 1);
    cr_assert_eq(b.released, 0, "granted where the old lease was not: not a release");
    cr_assert_eq(c.released, 0);
}
