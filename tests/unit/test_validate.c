/* test_validate.c -- request validation of validate.h: lock names, leases, strict
 * unsigned integers, query parameters, JSON bodies and the range checks. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "jw.h"
#include "validate.h"

TestSuite(validate, .fini = unit_fini, .timeout = 60);

static const char NAME_CHARS[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-";
static const char LEASE_CHARS[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

/* A 16-character lease and longer ones built on demand. */
#define LEASE16 "abcdefghij_-0123"

static void fill(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
}

/* ---- names ------------------------------------------------------------------ */

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct len_case {
    size_t len;
    int valid;
};

ParameterizedTestParameters(validate, name_length_is_1_to_255)
{
    static struct len_case cases[] = {{0, 0}, {1, 1}, {2, 1}, {254, 1}, {255, 1}, {256, 0},
                                      {1000, 0}};
    return cr_make_param_array(struct len_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct len_case *c, validate, name_length_is_1_to_255)
{
    char buf[1001];
    fill(buf, 'a', c->len);
    cr_assert_eq(validate_name(buf, c->len), c->valid, "length %zu", c->len);
}

Test(validate, name_accepts_exactly_the_documented_bytes)
{
    for (int c = 0; c < 256; c++) {
        char s[3] = {'a', (char)c, 'z'};
        int want = c != 0 && strchr(NAME_CHARS, c) != NULL;
        cr_assert_eq(validate_name(s, 3), want, "byte 0x%02x: got %d", c, !want);
        cr_assert_eq(validate_name(s + 1, 1), want, "byte 0x%02x alone", c);
    }
}

struct str_case {
    char s[32];
    int valid;
};

ParameterizedTestParameters(validate, name_examples)
{
    static struct str_case cases[] = {
        {"orders", 1},          {"a", 1},            {"jobs/nightly:2024-01-01", 1},
        {"A.b_c:d/e-f", 1},     {"..", 1},           {"/", 1},
        {"with space", 0},      {"per%20cent", 0},   {"hash#tag", 0},
        {"q?x=1", 0},           {"amp&x", 0},        {"plus+", 0},
        {"eq=", 0},             {"at@", 0},          {"comma,", 0},
        {"quote\"", 0},         {"back\\slash", 0},  {"del\x7f", 0},
        {"tab\t", 0},           {"nl\n", 0},         {"caf\xc3\xa9", 0},
        {"\xe2\x82\xac", 0},    {"\xff", 0},         {"star*", 0},
        {"brace{}", 0},         {"semi;", 0},        {"tilde~", 0},
    };
    return cr_make_param_array(struct str_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct str_case *c, validate, name_examples)
{
    cr_assert_eq(validate_name(c->s, strlen(c->s)), c->valid, "'%s'", c->s);
}

Test(validate, name_with_embedded_nul_is_refused)
{
    cr_assert_eq(validate_name("ab\0cd", 5), 0);
}

Test(validate, name_reads_only_len_bytes)
{
    cr_assert_eq(validate_name("good name", 4), 1);
}

/* ---- leases ----------------------------------------------------------------- */

ParameterizedTestParameters(validate, lease_length_is_16_to_128)
{
    static struct len_case cases[] = {{0, 0},   {1, 0},   {15, 0},  {16, 1},
                                      {17, 1},  {32, 1},  {127, 1}, {128, 1},
                                      {129, 0}, {200, 0}, {1000, 0}};
    return cr_make_param_array(struct len_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct len_case *c, validate, lease_length_is_16_to_128)
{
    char buf[1001];
    fill(buf, 'Q', c->len);
    cr_assert_eq(validate_lease(buf, c->len), c->valid, "length %zu", c->len);
}

Test(validate, lease_accepts_exactly_the_documented_bytes)
{
    for (int c = 0; c < 256; c++) {
        char s[LEASE_MIN_LEN];
        memset(s, 'a', sizeof s);
        s[7] = (char)c;
        int want = c != 0 && strchr(LEASE_CHARS, c) != NULL;
        cr_assert_eq(validate_lease(s, sizeof s), want, "byte 0x%02x", c);
    }
}

Test(validate, lease_refuses_name_only_characters)
{
    /* '.', ':' and '/' are fine in names but not in leases */
    cr_assert_eq(validate_lease("abcdefghijklmno.", 16), 0);
    cr_assert_eq(validate_lease("abcdefghijklmno:", 16), 0);
    cr_assert_eq(validate_lease("abcdefghijklmno/", 16), 0);
    cr_assert_eq(validate_lease("abcdefghijklmno=", 16), 0); /* base64 padding */
    cr_assert_eq(validate_lease("abcdefghijklmno+", 16), 0);
}

/* ---- strict unsigned integers ----------------------------------------------- */

struct uint_case {
    char s[32];
    long max;
    int rc;
    long value;
};

ParameterizedTestParameters(validate, uint_is_strict_decimal_up_to_max)
{
    static struct uint_case cases[] = {
        {"0", 100, 0, 0},
        {"100", 100, 0, 100},
        {"101", 100, -1, 0},
        {"007", 100, 0, 7},
        {"", 100, -1, 0},
        {"-1", 100, -1, 0},
        {"+1", 100, -1, 0},
        {" 1", 100, -1, 0},
        {"1 ", 100, -1, 0},
        {"1.0", 100, -1, 0},
        {"1e2", 100, -1, 0},
        {"0x10", 100, -1, 0},
        {"9223372036854775807", 9223372036854775807L, 0, 9223372036854775807L},
        {"9223372036854775808", 9223372036854775807L, -1, 0},
        {"99999999999999999999999", 9223372036854775807L, -1, 0},
        {"31622400000", 31622400000L, 0, 31622400000L},
        {"31622400001", 31622400000L, -1, 0},
        {"65536", 65536, 0, 65536},
        {"65537", 65536, -1, 0},
        {"19", 15, -1, 0},
        {"16", 15, -1, 0},
        {"15", 15, 0, 15},
        {"7", 5, -1, 0},  /* a digit above a one-digit max */
        {"07", 5, -1, 0},
        {"1", 0, -1, 0},
        {"0", 0, 0, 0},
    };
    return cr_make_param_array(struct uint_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct uint_case *c, validate, uint_is_strict_decimal_up_to_max)
{
    long v = -12345;
    int rc = validate_uint(c->s, c->max, &v);
    cr_assert_eq(rc, c->rc, "'%s' max %ld: rc %d", c->s, c->max, rc);
    if (rc == 0)
        cr_assert_eq(v, c->value, "'%s': %ld", c->s, v);
    else
        cr_assert_eq(v, -12345, "'%s': out written on failure", c->s);
}

Test(validate, uint_refuses_null)
{
    long v;
    cr_assert_eq(validate_uint(NULL, 10, &v), -1);
}

Test(validate, uint_never_returns_a_value_above_max)
{
    /* Exhaustive over small maxima and values: rc 0 iff value <= max. */
    for (long max = 0; max <= 120; max++)
        for (long x = 0; x <= 200; x++) {
            char s[16];
            snprintf(s, sizeof s, "%ld", x);
            long v = -1;
            int rc = validate_uint(s, max, &v);
            cr_assert_eq(rc, x <= max ? 0 : -1, "'%s' max %ld: rc %d", s, max, rc);
            if (rc == 0)
                cr_assert_eq(v, x);
        }
}

/* ---- query parameters -------------------------------------------------------- */

struct query_case {
    char key[16], value[40];
    rl_err rc;
    int has_ttl, has_wait, has_lease;
    long ttl, wait;
};

ParameterizedTestParameters(validate, params_from_query_table)
{
    static struct query_case cases[] = {
        {"ttl_ms", "1000", RL_OK, 1, 0, 0, 1000, 0},
        {"ttl_ms", "0", RL_OK, 1, 0, 0, 0, 0}, /* range is params_check's job */
        {"ttl_ms", "31622400000", RL_OK, 1, 0, 0, 31622400000L, 0},
        {"ttl_ms", "31622400001", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "-1", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "+1", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "1.5", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "1e3", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", " 10", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"ttl_ms", "10\x7f", RL_E_INVALID_TTL, 0, 0, 0, 0, 0}, /* decoded %00 */
        {"ttl_ms", "99999999999999999999999999", RL_E_INVALID_TTL, 0, 0, 0, 0, 0},
        {"wait_ms", "0", RL_OK, 0, 1, 0, 0, 0},
        {"wait_ms", "2500", RL_OK, 0, 1, 0, 0, 2500},
        {"wait_ms", "", RL_E_INVALID_WAIT, 0, 0, 0, 0, 0},
        {"wait_ms", "-5", RL_E_INVALID_WAIT, 0, 0, 0, 0, 0},
        {"wait_ms", "abc", RL_E_INVALID_WAIT, 0, 0, 0, 0, 0},
        {"wait_ms", "31622400001", RL_E_INVALID_WAIT, 0, 0, 0, 0, 0},
        {"lease", LEASE16, RL_OK, 0, 0, 1, 0, 0},
        {"lease", "short", RL_E_INVALID_LEASE, 0, 0, 0, 0, 0},
        {"lease", "", RL_E_INVALID_LEASE, 0, 0, 0, 0, 0},
        {"lease", "abcdefghij_-012.", RL_E_INVALID_LEASE, 0, 0, 0, 0, 0},
        {"lease", "abcdefghij_-01 3", RL_E_INVALID_LEASE, 0, 0, 0, 0, 0},
        {"unknown", "whatever", RL_OK, 0, 0, 0, 0, 0},
        {"TTL_MS", "-1", RL_OK, 0, 0, 0, 0, 0}, /* keys are case-sensitive; unknown ignored */
        {"ttl", "x", RL_OK, 0, 0, 0, 0, 0},
    };
    return cr_make_param_array(struct query_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct query_case *c, validate, params_from_query_table)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    rl_err rc = params_from_query(&p, c->key, c->value);
    cr_assert_eq(rc, c->rc, "%s=%s: rc %d", c->key, c->value, rc);
    cr_assert_eq(p.has_ttl, c->has_ttl);
    cr_assert_eq(p.has_wait, c->has_wait);
    cr_assert_eq(p.has_lease, c->has_lease);
    cr_assert_eq(p.ttl_ms, c->ttl);
    cr_assert_eq(p.wait_ms, c->wait);
    if (c->has_lease)
        cr_assert_str_eq(p.lease, c->value);
}

Test(validate, query_lease_of_128_chars_is_copied_whole)
{
    char lease[LEASE_MAX_LEN + 1];
    fill(lease, 'z', LEASE_MAX_LEN);
    lock_params p;
    memset(&p, 0x55, sizeof p);
    p.has_lease = 0;
    cr_assert_eq(params_from_query(&p, "lease", lease), RL_OK);
    cr_assert_eq(p.has_lease, 1);
    cr_assert_str_eq(p.lease, lease);
    char too_long[LEASE_MAX_LEN + 2];
    fill(too_long, 'z', LEASE_MAX_LEN + 1);
    cr_assert_eq(params_from_query(&p, "lease", too_long), RL_E_INVALID_LEASE);
}

/* ---- JSON bodies -------------------------------------------------------------- */

struct body_case {
    char body[160];
    rl_err rc;
    char msg_has[32]; /* substring the message must contain, or empty */
};

ParameterizedTestParameters(validate, params_from_body_table)
{
    static struct body_case cases[] = {
        {"{}", RL_OK, ""},
        {" { } ", RL_OK, ""},
        {"{\"ttl_ms\":1000}", RL_OK, ""},
        {"{\"ttl_ms\":0}", RL_OK, ""},
        {"{\"ttl_ms\":31622400000}", RL_OK, ""},
        {"{\"wait_ms\":0}", RL_OK, ""},
        {"{\"lease\":\"" LEASE16 "\"}", RL_OK, ""},
        {"{\"ttl_ms\":5000,\"wait_ms\":100,\"lease\":\"" LEASE16 "\"}", RL_OK, ""},
        /* not JSON, or not an object */
        {" ", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{\"ttl_ms\":}", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{} trailing", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{}{}", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{'ttl_ms':1}", RL_E_INVALID_JSON, "invalid JSON body"},
        {"\xff", RL_E_INVALID_JSON, "invalid JSON body"},
        {"[]", RL_E_INVALID_JSON, "must be a JSON object"},
        {"[{\"ttl_ms\":1}]", RL_E_INVALID_JSON, "must be a JSON object"},
        {"1000", RL_E_INVALID_JSON, "invalid JSON body"}, /* jansson: top level must be [ or { */
        {"\"x\"", RL_E_INVALID_JSON, "invalid JSON body"}, /* jansson: top level must be [ or { */
        {"null", RL_E_INVALID_JSON, "invalid JSON body"}, /* jansson: top level must be [ or { */
        {"true", RL_E_INVALID_JSON, "invalid JSON body"}, /* jansson: top level must be [ or { */
        /* duplicates are refused, not last-wins */
        {"{\"ttl_ms\":1,\"ttl_ms\":2}", RL_E_INVALID_JSON, "duplicate"},
        {"{\"lease\":\"" LEASE16 "\",\"lease\":\"" LEASE16 "\"}", RL_E_INVALID_JSON, "duplicate"},
        /* unknown members name themselves */
        {"{\"ttl\":1000}", RL_E_INVALID_JSON, "'ttl'"},
        {"{\"ttl_ms\":1000,\"wait\":5}", RL_E_INVALID_JSON, "'wait'"},
        {"{\"TTL_MS\":1000}", RL_E_INVALID_JSON, "'TTL_MS'"},
        {"{\"\":1}", RL_E_INVALID_JSON, "''"},
        /* wrong types and ranges */
        {"{\"ttl_ms\":\"1000\"}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":1000.0}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":1.5}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":1e3}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":-1}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":true}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":null}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":[1]}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":{}}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":31622400001}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":9223372036854775807}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":-9223372036854775808}", RL_E_INVALID_TTL, ""},
        {"{\"ttl_ms\":99999999999999999999}", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{\"wait_ms\":\"5\"}", RL_E_INVALID_WAIT, ""},
        {"{\"wait_ms\":-1}", RL_E_INVALID_WAIT, ""},
        {"{\"wait_ms\":0.5}", RL_E_INVALID_WAIT, ""},
        {"{\"wait_ms\":false}", RL_E_INVALID_WAIT, ""},
        {"{\"wait_ms\":31622400001}", RL_E_INVALID_WAIT, ""},
        {"{\"lease\":12345678901234567}", RL_E_INVALID_LEASE, ""},
        {"{\"lease\":null}", RL_E_INVALID_LEASE, ""},
        {"{\"lease\":[\"" LEASE16 "\"]}", RL_E_INVALID_LEASE, ""},
        {"{\"lease\":\"short\"}", RL_E_INVALID_LEASE, ""},
        {"{\"lease\":\"abcdefghij_-012.\"}", RL_E_INVALID_LEASE, ""},
        {"{\"lease\":\"abcdefghij_-012\\u0000\"}", RL_E_INVALID_JSON, "\\u0000"}, /* jansson refuses NUL */
        {"{\"lease\":\"abcdefghij_-01\\u00e9\"}", RL_E_INVALID_LEASE, ""},
    };
    return cr_make_param_array(struct body_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct body_case *c, validate, params_from_body_table)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[256] = "";
    rl_err rc = params_from_body(&p, c->body, strlen(c->body), msg, sizeof msg);
    cr_assert_eq(rc, c->rc, "body %s: rc %d (%s), expected %d", c->body, rc, msg, c->rc);
    if (c->msg_has[0])
        cr_assert(strstr(msg, c->msg_has) != NULL, "body %s: message '%s' lacks '%s'", c->body,
                  msg, c->msg_has);
}

Test(validate, empty_body_is_no_body)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[64] = "untouched";
    cr_assert_eq(params_from_body(&p, NULL, 0, msg, sizeof msg), RL_OK);
    cr_assert_eq(params_from_body(&p, "garbage", 0, msg, sizeof msg), RL_OK);
    cr_assert_eq(p.has_ttl + p.has_wait + p.has_lease, 0);
    cr_assert_str_eq(msg, "untouched");
}

Test(validate, body_sets_members_and_flags)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[128] = "";
    const char *b = "{\"ttl_ms\":5000,\"wait_ms\":250,\"lease\":\"" LEASE16 "\"}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK);
    cr_assert_eq(p.has_ttl, 1);
    cr_assert_eq(p.ttl_ms, 5000);
    cr_assert_eq(p.has_wait, 1);
    cr_assert_eq(p.wait_ms, 250);
    cr_assert_eq(p.has_lease, 1);
    cr_assert_str_eq(p.lease, LEASE16);
}

Test(validate, body_wins_over_query)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_query(&p, "ttl_ms", "1000"), RL_OK);
    cr_assert_eq(params_from_query(&p, "wait_ms", "10"), RL_OK);
    cr_assert_eq(params_from_query(&p, "lease", "QQQQQQQQQQQQQQQQ"), RL_OK);
    char msg[128] = "";
    const char *b = "{\"ttl_ms\":2000,\"lease\":\"" LEASE16 "\"}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK);
    cr_assert_eq(p.ttl_ms, 2000);
    cr_assert_eq(p.wait_ms, 10); /* not in the body: the query's stays */
    cr_assert_str_eq(p.lease, LEASE16);
}

Test(validate, body_reads_only_len_bytes)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[128] = "";
    const char *b = "{\"ttl_ms\":700}{\"bogus\":1}";
    cr_assert_eq(params_from_body(&p, b, 14, msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert_eq(p.ttl_ms, 700);
}

Test(validate, body_with_embedded_nul_is_invalid_json)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[128] = "";
    cr_assert_eq(params_from_body(&p, "{}\0", 3, msg, sizeof msg), RL_E_INVALID_JSON);
    cr_assert_eq(params_from_body(&p, "{\0}", 3, msg, sizeof msg), RL_E_INVALID_JSON);
    cr_assert_eq(params_from_body(&p, "\0{}", 3, msg, sizeof msg), RL_E_INVALID_JSON);
}

Test(validate, body_lease_of_128_chars_fits_and_129_does_not)
{
    char body[300];
    char lease[LEASE_MAX_LEN + 2];
    lock_params p;
    char msg[128] = "";
    fill(lease, 'x', LEASE_MAX_LEN);
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_body(&p, body, strlen(body), msg, sizeof msg), RL_OK);
    cr_assert_str_eq(p.lease, lease);
    fill(lease, 'x', LEASE_MAX_LEN + 1);
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_body(&p, body, strlen(body), msg, sizeof msg), RL_E_INVALID_LEASE);
    cr_assert_eq(p.has_lease, 0);
}

Test(validate, huge_body_of_whitespace_and_depth_is_handled)
{
    /* 64 KiB of nesting: jansson has a depth limit; it must be an error, not a crash. */
    size_t n = BODY_MAX_BYTES;
    char *b = malloc(n);
    cr_assert_not_null(b);
    memset(b, '[', n);
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[256] = "";
    cr_assert_eq(params_from_body(&p, b, n, msg, sizeof msg), RL_E_INVALID_JSON);
    memset(b, ' ', n);
    b[n / 2] = '{';
    b[n / 2 + 1] = '}';
    cr_assert_eq(params_from_body(&p, b, n, msg, sizeof msg), RL_OK, "%s", msg);
    free(b);
}

Test(validate, body_message_truncates_to_msglen)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[8];
    memset(msg, 'Z', sizeof msg);
    const char *b = "{\"a_rather_long_unknown_member\":1}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_E_INVALID_JSON);
    cr_assert_eq(msg[7], '\0');
    cr_assert_eq(strlen(msg), 7);
}

/* Is s valid UTF-8 (no overlongs, no surrogates)? */
static int utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        int n = (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || (*p == 0xc0 || *p == 0xc1))
            return 0;
        for (int i = 1; i <= n; i++)
            if ((p[i] & 0xc0) != 0x80)
                return 0;
        p += n + 1;
    }
    return 1;
}

Test(validate, body_error_messages_make_valid_json_replies)
{
    /* The message goes into the 400 reply through jw.  It may carry broken UTF-8:
     * "unknown member '%.64s'" can cut a character, and jansson's "invalid escape near
     * '...'" echoes half of one (found by fuzz_body, tests/fuzz/regressions/body/);
     * jw replaces such sequences, so the reply must parse as JSON whatever the body. */
    char body[256] = "{\"a";
    for (int i = 0; i < 40; i++) /* 'a' + 40 two-byte characters: the cut lands inside one */
        strcat(body, "\xc3\xa9");
    strcat(body, "\":1}");
    const char *bodies[] = {body, "\"\\\xd0\x82", "{\"ttl_ms\":\"\\u00\xc3\xa9\"}", "\xff",
                            "{\"\xc3\":1}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        lock_params p;
        memset(&p, 0, sizeof p);
        char msg[256] = "";
        cr_assert_eq(params_from_body(&p, bodies[i], strlen(bodies[i]), msg, sizeof msg),
                     RL_E_INVALID_JSON);
        char reply[1024];
        jw w;
        jw_init(&w, reply, sizeof reply);
        jw_obj_open(&w);
        jw_key_str(&w, "error", "invalid_json");
        jw_key_str(&w, "message", msg);
        jw_obj_close(&w);
        cr_assert_not(jw_overflowed(&w));
        json_error_t e;
        json_t *j = json_loads(reply, 0, &e);
        cr_assert_not_null(j, "body %zu: reply is not JSON (%s): %s", i, e.text, reply);
        json_decref(j);
    }
}

Test(validate, body_error_message_is_valid_utf8_for_invalid_bytes)
{
    const char *bodies[] = {"\xff", "{\"\xc3\":1}", "{\"a\":\"\xe2\x82\"}", "\xc3\xa9", "{\xfe}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        lock_params p;
        memset(&p, 0, sizeof p);
        char msg[256] = "";
        cr_assert_eq(params_from_body(&p, bodies[i], strlen(bodies[i]), msg, sizeof msg),
                     RL_E_INVALID_JSON);
        cr_assert(utf8_ok(msg), "body %zu: message is not valid UTF-8: %s", i, msg);
    }
}

/* ---- range checks ----------------------------------------------------------- */

struct check_case {
    int has_ttl;
    long ttl;
    int has_wait;
    long wait;
    long max_ttl, max_wait;
    double drift;
    rl_err rc;
};

ParameterizedTestParameters(validate, params_check_table)
{
    static struct check_case cases[] = {
        {0, 0, 0, 0, 3600000, 60000, 0.01, RL_OK},         /* nothing given */
        {0, -5, 0, -5, 3600000, 60000, 0.01, RL_OK},       /* unset values are not checked */
        {1, 1000, 1, 0, 3600000, 60000, 0.01, RL_OK},
        {1, 0, 0, 0, 3600000, 60000, 0.01, RL_E_INVALID_TTL},
        {1, -1, 0, 0, 3600000, 60000, 0.01, RL_E_INVALID_TTL},
        {1, 3600000, 0, 0, 3600000, 60000, 0.01, RL_OK},
        {1, 3600001, 0, 0, 3600000, 60000, 0.01, RL_E_INVALID_TTL},
        /* ttl must exceed the drift allowance ceil(ttl*f)+2 */
        {1, 1, 0, 0, 3600000, 60000, 0.01, RL_E_INVALID_TTL},
        {1, 3, 0, 0, 3600000, 60000, 0.01, RL_E_INVALID_TTL},  /* drift 3 */
        {1, 4, 0, 0, 3600000, 60000, 0.01, RL_OK},             /* drift 3 */
        {1, 2, 0, 0, 3600000, 60000, 0.0, RL_E_INVALID_TTL},   /* drift 2 */
        {1, 3, 0, 0, 3600000, 60000, 0.0, RL_OK},
        {1, 5, 0, 0, 3600000, 60000, 0.5, RL_E_INVALID_TTL},   /* drift 5 */
        {1, 6, 0, 0, 3600000, 60000, 0.5, RL_OK},              /* drift 5 */
        {0, 0, 1, 60000, 3600000, 60000, 0.01, RL_OK},
        {0, 0, 1, 60001, 3600000, 60000, 0.01, RL_E_INVALID_WAIT},
        {0, 0, 1, -1, 3600000, 60000, 0.01, RL_E_INVALID_WAIT},
        {0, 0, 1, 0, 3600000, 0, 0.01, RL_OK},
        {0, 0, 1, 1, 3600000, 0, 0.01, RL_E_INVALID_WAIT},
        {1, 0, 1, 60001, 3600000, 60000, 0.01, RL_E_INVALID_TTL}, /* ttl checked first */
    };
    return cr_make_param_array(struct check_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct check_case *c, validate, params_check_table)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    p.has_ttl = c->has_ttl;
    p.ttl_ms = c->ttl;
    p.has_wait = c->has_wait;
    p.wait_ms = c->wait;
    char msg[256] = "";
    rl_err rc = params_check(&p, c->max_ttl, c->max_wait, c->drift, msg, sizeof msg);
    cr_assert_eq(rc, c->rc, "ttl %ld(%d) wait %ld(%d): rc %d (%s)", c->ttl, c->has_ttl, c->wait,
                 c->has_wait, rc, msg);
    if (rc != RL_OK)
        cr_assert_neq(msg[0], '\0', "an error comes with a message");
}

Test(validate, params_check_messages_name_the_limits)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[256];
    p.has_ttl = 1;
    p.ttl_ms = 3600001;
    params_check(&p, 3600000, 60000, 0.01, msg, sizeof msg);
    cr_assert(strstr(msg, "3600000") != NULL, "%s", msg);
    p.ttl_ms = 3;
    params_check(&p, 3600000, 60000, 0.01, msg, sizeof msg);
    cr_assert(strstr(msg, "drift") != NULL && strstr(msg, " 3 ms") != NULL, "%s", msg);
    p.has_ttl = 0;
    p.has_wait = 1;
    p.wait_ms = 99999;
    params_check(&p, 3600000, 60000, 0.01, msg, sizeof msg);
    cr_assert(strstr(msg, "60000") != NULL, "%s", msg);
}

Test(validate, body_then_check_end_to_end)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[256] = "";
    const char *b = "{\"ttl_ms\":3}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK);
    cr_assert_eq(params_check(&p, 3600000, 60000, 0.01, msg, sizeof msg), RL_E_INVALID_TTL);
    /* and the produced message is a valid JSON string once escaped by jansson */
    json_t *s = json_string(msg);
    cr_assert_not_null(s, "message is not valid UTF-8: %s", msg);
    json_decref(s);
}

/* ---- POST /locks bodies (several names) ----------------------------------------- */

static multi_params *new_mp(void)
{
    multi_params *mp = calloc(1, sizeof *mp);
    cr_assert_not_null(mp);
    return mp;
}

static rl_err multi(multi_params *mp, const char *body, char *msg, size_t msglen)
{
    msg[0] = '\0';
    return multi_params_from_body(mp, body, strlen(body), msg, msglen);
}

Test(validate, multi_body_gives_names_in_order_and_the_single_lock_members)
{
    multi_params *mp = new_mp();
    char msg[256];
    const char *b = "{\"ttl_ms\":5000,\"names\":[\"jobs/a\",\"b.c\",\"x:y\"],\"wait_ms\":10,"
                    "\"lease\":\"" LEASE16 "\"}";
    cr_assert_eq(multi(mp, b, msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert_eq(mp->n, 3);
    cr_assert_str_eq(mp->names[0], "jobs/a");
    cr_assert_str_eq(mp->names[1], "b.c");
    cr_assert_str_eq(mp->names[2], "x:y");
    cr_assert_eq(mp->lens[0], 6);
    cr_assert_eq(mp->lens[2], 3);
    cr_assert(mp->p.has_ttl && mp->p.ttl_ms == 5000);
    cr_assert(mp->p.has_wait && mp->p.wait_ms == 10);
    cr_assert(mp->p.has_lease);
    cr_assert_str_eq(mp->p.lease, LEASE16);
    free(mp);
}

Test(validate, multi_body_takes_up_to_32_names_of_up_to_255_bytes)
{
    multi_params *mp = new_mp();
    static char b[16384];
    char msg[256];
    strcpy(b, "{\"names\":[");
    for (int i = 0; i < MULTI_MAX_NAMES; i++) {
        char one[300];
        char name[NAME_MAX_LEN + 1];
        memset(name, 'a' + i % 26, NAME_MAX_LEN);
        name[NAME_MAX_LEN] = '\0';
        name[0] = (char)('A' + i % 26); /* distinct */
        name[1] = (char)('0' + i / 26);
        snprintf(one, sizeof one, "%s\"%s\"", i ? "," : "", name);
        strcat(b, one);
    }
    strcat(b, "]}");
    cr_assert_eq(multi(mp, b, msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert_eq(mp->n, MULTI_MAX_NAMES);
    cr_assert_eq(mp->lens[31], NAME_MAX_LEN);
    cr_assert_eq(strlen(mp->names[31]), NAME_MAX_LEN);
    /* one more is too many */
    b[strlen(b) - 2] = '\0';
    strcat(b, ",\"extra\"]}");
    cr_assert_eq(multi(mp, b, msg, sizeof msg), RL_E_INVALID_NAME);
    cr_assert(strstr(msg, "1..32") != NULL, "%s", msg);
    free(mp);
}

struct multi_case {
    char body[96];
    rl_err rc;
    char msg_has[40];
};

ParameterizedTestParameters(validate, multi_body_errors)
{
    static struct multi_case cases[] = {
        {"", RL_E_INVALID_JSON, "\"names\""},
        {"{", RL_E_INVALID_JSON, "invalid JSON body"},
        {"[\"a\"]", RL_E_INVALID_JSON, "must be a JSON object"},
        {"{}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"ttl_ms\":1000}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"names\":[]}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"names\":\"a\"}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"names\":{\"a\":1}}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"names\":null}", RL_E_INVALID_NAME, "\"names\" must be an array"},
        {"{\"names\":[1]}", RL_E_INVALID_NAME, "names[0]"},
        {"{\"names\":[null]}", RL_E_INVALID_NAME, "names[0]"},
        {"{\"names\":[[\"a\"]]}", RL_E_INVALID_NAME, "names[0]"},
        {"{\"names\":[\"\"]}", RL_E_INVALID_NAME, "names[0]"},
        {"{\"names\":[\"ok\",\"bad name\"]}", RL_E_INVALID_NAME, "names[1]"},
        {"{\"names\":[\"ok\",\"hash#\"]}", RL_E_INVALID_NAME, "names[1]"},
        {"{\"names\":[\"a\\u0000b\"]}", RL_E_INVALID_JSON, "invalid JSON body"},
        {"{\"names\":[\"a\",\"b\",\"a\"]}", RL_E_INVALID_NAME, "names[2] repeats 'a'"},
        {"{\"names\":[\"a\"],\"names\":[\"b\"]}", RL_E_INVALID_JSON, "duplicate"},
        {"{\"names\":[\"a\"],\"ttl\":1}", RL_E_INVALID_JSON, "'ttl'"},
        {"{\"names\":[\"a\"],\"name\":\"b\"}", RL_E_INVALID_JSON, "'name'"},
        {"{\"names\":[\"a\"],\"ttl_ms\":\"1\"}", RL_E_INVALID_TTL, ""},
        {"{\"names\":[\"a\"],\"ttl_ms\":1.0}", RL_E_INVALID_TTL, ""},
        {"{\"names\":[\"a\"],\"ttl_ms\":-1}", RL_E_INVALID_TTL, ""},
        {"{\"names\":[\"a\"],\"wait_ms\":true}", RL_E_INVALID_WAIT, ""},
        {"{\"names\":[\"a\"],\"lease\":\"short\"}", RL_E_INVALID_LEASE, ""},
    };
    return cr_make_param_array(struct multi_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct multi_case *c, validate, multi_body_errors)
{
    multi_params *mp = new_mp();
    char msg[256];
    rl_err rc = multi(mp, c->body, msg, sizeof msg);
    cr_assert_eq(rc, c->rc, "body %s: rc %d (%s), expected %d", c->body, rc, msg, c->rc);
    if (c->msg_has[0])
        cr_assert(strstr(msg, c->msg_has) != NULL, "body %s: '%s' lacks '%s'", c->body, msg,
                  c->msg_has);
    free(mp);
}

Test(validate, multi_body_with_only_names_sets_no_lock_members)
{
    multi_params *mp = new_mp();
    char msg[256];
    cr_assert_eq(multi(mp, "{\"names\":[\"a\"]}", msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert_eq(mp->p.has_ttl + mp->p.has_wait + mp->p.has_lease, 0);
    free(mp);
}

Test(validate, names_member_on_a_single_lock_points_to_post_locks)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[256] = "";
    const char *b = "{\"names\":[\"a\"]}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_E_INVALID_JSON);
    cr_assert(strstr(msg, "POST /locks") != NULL, "%s", msg);
}

/* Found by fuzz_query: a digit above a one-digit maximum slipped through. */
Test(validate, uint_refuses_a_digit_above_a_small_max)
{
    long v = -1;
    cr_assert_eq(validate_uint("1", 0, &v), -1);
    cr_assert_eq(validate_uint("9", 8, &v), -1);
    cr_assert_eq(validate_uint("8", 8, &v), 0);
    cr_assert_eq(v, 8);
}

Test(validate, owner_is_1_to_256_printable_ascii_bytes)
{
    char o[300];
    memset(o, 'x', sizeof o);
    cr_assert(validate_owner("a", 1));
    cr_assert(validate_owner(" ~", 2), "0x20 and 0x7e are the ends");
    cr_assert(validate_owner("host-7 pid 42 {pod: \"a.b\"}", 26));
    cr_assert(validate_owner(o, 256));
    cr_assert(!validate_owner(o, 257));
    cr_assert(!validate_owner("", 0));
    cr_assert(!validate_owner("a\nb", 3), "never a newline: it separates the owner on the masters");
    cr_assert(!validate_owner("a\tb", 3));
    cr_assert(!validate_owner("a\x7f", 2));
    cr_assert(!validate_owner("caf\xc3\xa9", 5), "ASCII only");
    cr_assert(!validate_owner("a\0b", 3));
}

Test(validate, owner_from_the_body_and_the_query)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    char msg[128] = "";
    const char *b = "{\"owner\":\"pod-7/pid 42\"}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK);
    cr_assert_eq(p.has_owner, 1);
    cr_assert_str_eq(p.owner, "pod-7/pid 42");
    const char *bad[] = {"{\"owner\":\"\"}", "{\"owner\":\"a\\nb\"}", "{\"owner\":7}",
                         "{\"owner\":null}", "{\"owner\":\"\\u00e9\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&p, 0, sizeof p);
        cr_assert_eq(params_from_body(&p, bad[i], strlen(bad[i]), msg, sizeof msg),
                     RL_E_INVALID_OWNER, "%s", bad[i]);
        cr_assert_eq(p.has_owner, 0);
    }
    char big[400];
    snprintf(big, sizeof big, "{\"owner\":\"%0256d\"}", 0);
    cr_assert_eq(params_from_body(&p, big, strlen(big), msg, sizeof msg), RL_OK);
    cr_assert_eq(strlen(p.owner), 256);
    snprintf(big, sizeof big, "{\"owner\":\"%0257d\"}", 0);
    cr_assert_eq(params_from_body(&p, big, strlen(big), msg, sizeof msg), RL_E_INVALID_OWNER);
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_query(&p, "owner", "cron on host-3"), RL_OK);
    cr_assert_str_eq(p.owner, "cron on host-3");
    cr_assert_eq(params_from_query(&p, "owner", "a\x7f"), RL_E_INVALID_OWNER);
    cr_assert_eq(params_from_query(&p, "owner", ""), RL_E_INVALID_OWNER);
}

Test(validate, mode_permits_and_reentrant_from_the_query_and_the_body)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_query(&p, "mode", "shared"), RL_OK);
    cr_assert(p.shared && p.has_mode);
    cr_assert_eq(params_from_query(&p, "mode", "exclusive"), RL_OK);
    cr_assert_not(p.shared);
    cr_assert_eq(params_from_query(&p, "mode", "Shared"), RL_E_INVALID_MODE, "case matters");
    cr_assert_eq(params_from_query(&p, "mode", ""), RL_E_INVALID_MODE);
    cr_assert_eq(params_from_query(&p, "permits", "1"), RL_OK);
    cr_assert_eq(p.permits, 1);
    cr_assert_eq(params_from_query(&p, "permits", "1024"), RL_OK);
    cr_assert_eq(params_from_query(&p, "permits", "1025"), RL_E_INVALID_PERMITS);
    cr_assert_eq(params_from_query(&p, "permits", "0"), RL_E_INVALID_PERMITS);
    cr_assert_eq(params_from_query(&p, "permits", "-1"), RL_E_INVALID_PERMITS);
    cr_assert_eq(params_from_query(&p, "permits", "2x"), RL_E_INVALID_PERMITS);
    cr_assert_eq(params_from_query(&p, "reentrant", "true"), RL_OK);
    cr_assert(p.reentrant && p.has_reentrant);
    cr_assert_eq(params_from_query(&p, "reentrant", "false"), RL_OK);
    cr_assert_not(p.reentrant);
    cr_assert_eq(params_from_query(&p, "reentrant", "1"), RL_E_INVALID_REENTRANT);
    char msg[256];
    memset(&p, 0, sizeof p);
    const char *b = "{\"mode\":\"shared\",\"permits\":7,\"reentrant\":true}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert(p.shared && p.permits == 7 && p.reentrant);
    static const struct {
        const char *body;
        rl_err e;
    } bad[] = {
        {"{\"mode\":\"read\"}", RL_E_INVALID_MODE},   {"{\"mode\":null}", RL_E_INVALID_MODE},
        {"{\"permits\":0}", RL_E_INVALID_PERMITS},    {"{\"permits\":1025}", RL_E_INVALID_PERMITS},
        {"{\"permits\":2.5}", RL_E_INVALID_PERMITS},  {"{\"permits\":\"2\"}", RL_E_INVALID_PERMITS},
        {"{\"reentrant\":1}", RL_E_INVALID_REENTRANT}, {"{\"reentrant\":\"true\"}", RL_E_INVALID_REENTRANT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&p, 0, sizeof p);
        cr_assert_eq(params_from_body(&p, bad[i].body, strlen(bad[i].body), msg, sizeof msg), bad[i].e,
                     "%s", bad[i].body);
    }
}

Test(validate, lock_delay_max_hold_and_token_from_the_query_and_the_body)
{
    lock_params p;
    memset(&p, 0, sizeof p);
    cr_assert_eq(params_from_query(&p, "lock_delay_ms", "0"), RL_OK);
    cr_assert(p.has_lock_delay && p.lock_delay_ms == 0);
    cr_assert_eq(params_from_query(&p, "lock_delay_ms", "2500"), RL_OK);
    cr_assert_eq(p.lock_delay_ms, 2500);
    cr_assert_eq(params_from_query(&p, "lock_delay_ms", "-1"), RL_E_INVALID_LOCK_DELAY);
    cr_assert_eq(params_from_query(&p, "lock_delay_ms", "1e3"), RL_E_INVALID_LOCK_DELAY);
    cr_assert_eq(params_from_query(&p, "max_hold_ms", "60000"), RL_OK);
    cr_assert(p.has_max_hold && p.max_hold_ms == 60000);
    cr_assert_eq(params_from_query(&p, "max_hold_ms", ""), RL_E_INVALID_MAX_HOLD);
    cr_assert_eq(params_from_query(&p, "token", "18446744073709551615"), RL_OK);
    cr_assert(p.has_token && p.token == 18446744073709551615ull);
    cr_assert_eq(params_from_query(&p, "token", "18446744073709551616"), RL_E_INVALID_TOKEN);
    cr_assert_eq(params_from_query(&p, "token", "0"), RL_E_INVALID_TOKEN, "no token is 0");
    cr_assert_eq(params_from_query(&p, "token", "+5"), RL_E_INVALID_TOKEN);
    char msg[256];
    memset(&p, 0, sizeof p);
    const char *b = "{\"lock_delay_ms\":1000,\"max_hold_ms\":90000}";
    cr_assert_eq(params_from_body(&p, b, strlen(b), msg, sizeof msg), RL_OK, "%s", msg);
    cr_assert(p.lock_delay_ms == 1000 && p.max_hold_ms == 90000);
    /* the lock-delay is at most the max ttl */
    cr_assert_eq(params_check(&p, 1000, 60000, 0.01, msg, sizeof msg), RL_OK, "%s", msg);
    p.lock_delay_ms = 1001;
    cr_assert_eq(params_check(&p, 1000, 60000, 0.01, msg, sizeof msg), RL_E_INVALID_LOCK_DELAY);
    cr_assert(strstr(msg, "1000"), "names the limit: %s", msg);
    static const struct {
        const char *body;
        rl_err e;
    } bad[] = {
        {"{\"lock_delay_ms\":-1}", RL_E_INVALID_LOCK_DELAY}, {"{\"lock_delay_ms\":\"5\"}", RL_E_INVALID_LOCK_DELAY},
        {"{\"lock_delay_ms\":1.5}", RL_E_INVALID_LOCK_DELAY}, {"{\"max_hold_ms\":null}", RL_E_INVALID_MAX_HOLD},
        {"{\"max_hold_ms\":true}", RL_E_INVALID_MAX_HOLD},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&p, 0, sizeof p);
        cr_assert_eq(params_from_body(&p, bad[i].body, strlen(bad[i].body), msg, sizeof msg), bad[i].e,
                     "%s", bad[i].body);
    }
}
