/* test_body.c -- the answer bodies of body.h, parsed back with jansson: each body has
 * exactly its documented members with the values given, bytes stay as the API has
 * always written them, errors carry retry_after_ms or nodes_ok/quorum only where
 * their code calls for them, Retry-After rounds up to whole seconds, the health body
 * shows quarantine and failed masters, and the largest bodies fit the sizes body.h
 * names for them. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "body.h"

TestSuite(body, .fini = unit_fini, .timeout = 30);

static char buf[BODY_MAX_MULTI];

/* The writer over the test's buffer, cut to cap. */
static jw *writer(size_t cap)
{
    static jw j;
    cr_assert_leq(cap, sizeof buf);
    jw_init(&j, buf, cap);
    return &j;
}

/* Parse what was written: it must be whole, valid JSON, an object of n members. */
static json_t *parsed(const jw *j, size_t n)
{
    cr_assert(!jw_overflowed(j), "the body outgrew its writer (%zu bytes)", jw_len(j));
    cr_assert_eq(strlen(buf), jw_len(j));
    json_error_t e;
    json_t *o = json_loadb(buf, jw_len(j), 0, &e);
    cr_assert_not_null(o, "not JSON: %s (%s)", buf, e.text);
    cr_assert(json_is_object(o));
    cr_assert_eq(json_object_size(o), n, "%zu members, not %zu: %s", json_object_size(o), n, buf);
    return o;
}

static const char *str(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_string(v), "%s is not a string", k);
    return json_string_value(v);
}

static long long num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_integer(v), "%s is not an integer", k);
    return json_integer_value(v);
}

static const body_lock lock = {"jobs/nightly", 12, "leaseAAAAAAAAAAAAAAAA", 21, 42, 9897, 10000, 1,
                               NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0};

/* The body fn writes for l: exactly want, and an object of n members once parsed. */
static json_t *lock_body(void (*fn)(jw *, const body_lock *), const body_lock *l, const char *want,
                         size_t n)
{
    jw *j = writer(BODY_MAX_LOCK);
    fn(j, l);
    cr_assert_str_eq(buf, want);
    return parsed(j, n);
}

Test(body, a_grant_has_name_lease_token_validity_and_ttl)
{
    json_t *o = lock_body(body_granted, &lock,
                          "{\"name\":\"jobs/nightly\",\"lease\":\"leaseAAAAAAAAAAAAAAAA\","
                          "\"fencing_token\":42,\"validity_ms\":9897,\"ttl_ms\":10000}", 5);
    cr_assert_str_eq(str(o, "name"), "jobs/nightly");
    cr_assert_str_eq(str(o, "lease"), "leaseAAAAAAAAAAAAAAAA");
    cr_assert_eq(num(o, "fencing_token"), 42);
    json_decref(o);
}

Test(body, a_release_has_the_name_and_released_true_only)
{
    json_t *o = lock_body(body_released, &lock, "{\"name\":\"jobs/nightly\",\"released\":true}", 2);
    cr_assert(json_is_true(json_object_get(o, "released")));
    json_decref(o);
}

Test(body, an_extension_has_token_validity_and_ttl_but_never_the_lease)
{
    json_t *o = lock_body(body_extended, &lock,
                          "{\"name\":\"jobs/nightly\",\"fencing_token\":42,\"validity_ms\":9897,"
                          "\"ttl_ms\":10000}", 4);
    cr_assert_null(json_object_get(o, "lease"), "the lease is a secret of its holder");
    json_decref(o);
}

Test(body, an_inspection_says_held_validity_and_token_never_the_lease)
{
    body_lock free_lock = lock;
    free_lock.held = 0;
    free_lock.validity_ms = 0;
    json_t *o = lock_body(body_inspected, &free_lock,
                          "{\"name\":\"jobs/nightly\",\"held\":false,\"owner\":null,\"validity_ms\":0,"
                          "\"fencing_token\":42,\"index\":\"84\"}", 6);
    cr_assert(json_is_false(json_object_get(o, "held")));
    cr_assert_null(json_object_get(o, "lease"));
    json_decref(o);
}

Test(body, the_index_moves_with_a_grant_a_release_or_an_expiry_and_not_with_an_extension)
{
    body_lock held = lock, later = lock, freed = lock;
    held.held = 1;
    later.held = 1;
    later.validity_ms = held.validity_ms / 2; /* the same holder, extended or not */
    freed.held = 0;
    cr_assert_eq(body_index(&held), body_index(&later));
    cr_assert_neq(body_index(&held), body_index(&freed), "released or expired");
    body_lock next = held;
    next.fencing_token = held.fencing_token + 1; /* the next grant */
    cr_assert_neq(body_index(&next), body_index(&held));
    cr_assert_neq(body_index(&next), body_index(&freed));
    cr_assert_eq(body_index(&freed), 2 * lock.fencing_token);
}

Test(body, an_inspection_shows_the_owner_of_a_held_lock_or_null)
{
    body_lock held = lock;
    held.held = 1;
    held.owner = "host \"7\" pid\\42";
    held.owner_len = strlen(held.owner);
    json_t *o = lock_body(body_inspected, &held,
                          "{\"name\":\"jobs/nightly\",\"held\":true,\"owner\":\"host \\\"7\\\" pid\\\\42\","
                          "\"validity_ms\":9897,\"fencing_token\":42,\"index\":\"85\"}", 6);
    cr_assert_str_eq(json_string_value(json_object_get(o, "owner")), "host \"7\" pid\\42");
    cr_assert_null(json_object_get(o, "lease"));
    json_decref(o);
    held.owner_len = 0;
    o = lock_body(body_inspected, &held,
                  "{\"name\":\"jobs/nightly\",\"held\":true,\"owner\":null,\"validity_ms\":9897,"
                  "\"fencing_token\":42,\"index\":\"85\"}", 6);
    cr_assert(json_is_null(json_object_get(o, "owner")), "held without an owner: null");
    json_decref(o);
}

Test(body, a_forced_release_says_so)
{
    body_lock f = lock;
    f.forced = 1;
    json_t *o = lock_body(body_released, &f, "{\"name\":\"jobs/nightly\",\"released\":true,\"forced\":true}", 3);
    json_decref(o);
}

Test(body, the_largest_single_name_bodies_fit_their_writer)
{
    char name[NAME_MAX_LEN + 1], lease[LEASE_MAX_LEN + 1];
    memset(name, 'n', NAME_MAX_LEN);
    name[NAME_MAX_LEN] = '\0';
    memset(lease, 'l', LEASE_MAX_LEN);
    lease[LEASE_MAX_LEN] = '\0';
    /* fencing tokens are Redis counters: INT64_MAX at the most */
    /* an owner of quotes only: each one escaped to two bytes */
    static char owner[OWNER_MAX_LEN + 1];
    memset(owner, '"', OWNER_MAX_LEN);
    body_lock l = {name, NAME_MAX_LEN, lease, LEASE_MAX_LEN, INT64_MAX, INT64_MIN, -2147483647L, 1,
                   owner, OWNER_MAX_LEN, 1, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0};
    void (*const bodies[])(jw *, const body_lock *) = {body_granted, body_released, body_extended,
                                                       body_inspected};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        jw *j = writer(BODY_MAX_LOCK);
        bodies[i](j, &l);
        json_t *o = parsed(j, i == 0 ? 5 : i == 1 ? 3 : i == 2 ? 4 : 6);
        cr_assert_str_eq(str(o, "name"), name);
        json_decref(o);
    }
}

static char mnames[MULTI_MAX_NAMES][NAME_MAX_LEN + 1];
static size_t mlens[MULTI_MAX_NAMES];
static uint64_t mtokens[MULTI_MAX_NAMES];

Test(body, a_multi_grant_lists_the_names_in_order_with_a_token_each)
{
    strcpy(mnames[0], "m.b");
    strcpy(mnames[1], "m.a");
    mlens[0] = mlens[1] = 3;
    mtokens[0] = 7;
    mtokens[1] = 3;
    body_multi m = {2, mnames, mlens, mtokens, "leaseCCCCCCCCCCCCCCCC", 21, 4897, 5000, NULL};
    jw *j = writer(BODY_MAX_MULTI);
    body_multi_granted(j, &m);
    cr_assert_str_eq(buf, "{\"names\":[\"m.b\",\"m.a\"],\"lease\":\"leaseCCCCCCCCCCCCCCCC\","
                          "\"fencing_tokens\":{\"m.b\":7,\"m.a\":3},\"validity_ms\":4897,\"ttl_ms\":5000}");
    json_t *o = parsed(j, 5);
    json_t *names = json_object_get(o, "names");
    cr_assert_eq(json_array_size(names), 2);
    cr_assert_str_eq(json_string_value(json_array_get(names, 0)), "m.b");
    json_t *tokens = json_object_get(o, "fencing_tokens");
    cr_assert_eq(num(tokens, "m.b"), 7);
    cr_assert_eq(num(tokens, "m.a"), 3);
    json_decref(o);
}

Test(body, a_multi_release_lists_the_names_and_released_true_only)
{
    strcpy(mnames[0], "m.a");
    mlens[0] = 3;
    body_multi m = {1, mnames, mlens, NULL, NULL, 0, 0, 0, NULL};
    jw *j = writer(BODY_MAX_MULTI);
    body_multi_released(j, &m);
    cr_assert_str_eq(buf, "{\"names\":[\"m.a\"],\"released\":true}");
    json_decref(parsed(j, 2));
}

Test(body, the_largest_multi_grant_fits_body_max_multi)
{
    for (int i = 0; i < MULTI_MAX_NAMES; i++) {
        memset(mnames[i], 'x', NAME_MAX_LEN);
        snprintf(mnames[i], sizeof mnames[i], "%02d", i);
        mnames[i][2] = 'x';
        mnames[i][NAME_MAX_LEN] = '\0';
        mlens[i] = NAME_MAX_LEN;
        mtokens[i] = INT64_MAX; /* Redis counters top out there */
    }
    char lease[LEASE_MAX_LEN + 1];
    memset(lease, 'l', LEASE_MAX_LEN);
    lease[LEASE_MAX_LEN] = '\0';
    body_multi m = {MULTI_MAX_NAMES, mnames, mlens, mtokens, lease, LEASE_MAX_LEN, INT64_MIN, -2147483647L, NULL};
    jw *j = writer(BODY_MAX_MULTI);
    body_multi_granted(j, &m);
    cr_assert_gt(jw_len(j), 16384, "the old 16 KiB buffer cut this body");
    json_t *o = parsed(j, 5);
    cr_assert_eq(json_array_size(json_object_get(o, "names")), MULTI_MAX_NAMES);
    cr_assert_eq(json_object_size(json_object_get(o, "fencing_tokens")), MULTI_MAX_NAMES);
    json_decref(o);
}

Test(body, an_error_is_its_code_and_its_own_message_unless_another_is_given)
{
    body_err e = {RL_E_INVALID_NAME, NULL, 0, 0, 0, 0, 0, -1, 0, 0};
    jw *j = writer(BODY_MAX_LOCK);
    body_error(j, &e);
    cr_assert_str_eq(buf, "{\"error\":\"invalid_name\",\"message\":\"a lock name is 1..255 bytes of "
                          "[A-Za-z0-9._:/-]\"}");
    json_decref(parsed(j, 2));
    e.message = "";
    body_error(j = writer(BODY_MAX_LOCK), &e);
    json_t *o = parsed(j, 2);
    cr_assert_str_eq(str(o, "message"), rl_err_message(RL_E_INVALID_NAME), "empty is no message");
    json_decref(o);
    e.err = RL_E_INVALID_JSON;
    e.message = "invalid JSON body: \"quoted\"\n";
    body_error(j = writer(BODY_MAX_LOCK), &e);
    o = parsed(j, 2);
    cr_assert_str_eq(str(o, "error"), "invalid_json");
    cr_assert_str_eq(str(o, "message"), "invalid JSON body: \"quoted\"\n");
    json_decref(o);
}

/* The error body of e, parsed: it must have n members. */
static json_t *error_body(rl_err err, int64_t retry_after_ms, size_t nodes_ok, size_t quorum, size_t n)
{
    body_err e = {err, NULL, retry_after_ms, nodes_ok, quorum, 0, 0, -1, 0, 0};
    jw *j = writer(BODY_MAX_LOCK);
    body_error(j, &e);
    return parsed(j, n);
}

Test(body, a_409_carries_retry_after_ms_never_negative)
{
    rl_err codes[] = {RL_E_LOCK_HELD, RL_E_LOCK_CONTENDED};
    for (size_t i = 0; i < 2; i++) {
        json_t *o = error_body(codes[i], 1234, 9, 9, 3);
        cr_assert_eq(num(o, "retry_after_ms"), 1234);
        json_decref(o);
        o = error_body(codes[i], -5, 9, 9, 3);
        cr_assert_eq(num(o, "retry_after_ms"), 0);
        json_decref(o);
    }
    json_decref(error_body(RL_E_LOCK_HELD, 8000, 0, 0, 3));
    cr_assert_str_eq(buf, "{\"error\":\"lock_held\",\"message\":\"the lock is held by another "
                          "lease\",\"retry_after_ms\":8000}");
}

Test(body, a_round_that_fell_short_says_how_many_masters_answered_of_how_many_needed)
{
    rl_err codes[] = {RL_E_QUORUM_UNAVAILABLE, RL_E_VALIDITY_EXHAUSTED, RL_E_RELEASE_UNCONFIRMED};
    for (size_t i = 0; i < 3; i++) {
        json_t *o = error_body(codes[i], 77, 1, 3, 4);
        cr_assert_eq(num(o, "nodes_ok"), 1);
        cr_assert_eq(num(o, "quorum"), 3);
        cr_assert_null(json_object_get(o, "retry_after_ms"));
        json_decref(o);
    }
    json_decref(error_body(RL_E_QUORUM_UNAVAILABLE, 0, 1, 2, 4));
    cr_assert_str_eq(buf, "{\"error\":\"quorum_unavailable\",\"message\":\"fewer than a quorum of "
                          "masters answered\",\"nodes_ok\":1,\"quorum\":2}");
}

/* Issue 21: a refusal because masters sit out their quarantine says so, not "fewer
 * answered". */
Test(body, masters_quarantined_says_how_many_and_when_the_first_is_back)
{
    body_err e = {RL_E_MASTERS_QUARANTINED, NULL, 0, 5, 3, 0, 3, 1200, 0, 0};
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_error(&j, &e);
    cr_assert_str_eq(buf, "{\"error\":\"masters_quarantined\",\"message\":\"too few masters are "
                          "trusted: the others sit out a restart or a loss of data until every "
                          "lock they may have lost has expired\",\"nodes_ok\":5,\"quorum\":3,"
                          "\"quarantined\":3,\"rejoin_ms\":1200}");
    e.rejoin_ms = -1;
    jw_init(&j, buf, sizeof buf);
    body_error(&j, &e);
    cr_assert(strstr(buf, "\"rejoin_ms\":null}"), "%s", buf);
}

Test(body, other_errors_carry_no_extras_and_every_one_fits_its_writer)
{
    char msg[256];
    memset(msg, '\x01', sizeof msg - 1); /* escaped to six bytes each: the worst case */
    msg[sizeof msg - 1] = '\0';
    for (int c = 0; c < RL_ERR__COUNT; c++) {
        int extras = c == RL_E_LOCK_HELD || c == RL_E_LOCK_CONTENDED || c == RL_E_MAX_HOLD_EXCEEDED ? 1
                   : c == RL_E_QUORUM_UNAVAILABLE || c == RL_E_VALIDITY_EXHAUSTED ||
                         c == RL_E_RELEASE_UNCONFIRMED ? 2
                   : c == RL_E_MASTERS_QUARANTINED ? 4 : 0;
        json_t *o = error_body((rl_err)c, 5, 1, 2, 2 + (size_t)extras);
        cr_assert_str_eq(str(o, "error"), rl_err_code((rl_err)c));
        json_decref(o);
        body_err e = {(rl_err)c, msg, 5, 1, 2, 0, 0, -1, 1, 7};
        jw big;
        static char bigbuf[4 * BODY_MAX_LOCK];
        jw_init(&big, bigbuf, sizeof bigbuf);
        body_error(&big, &e);
        cr_assert(!jw_overflowed(&big));
    }
}

Test(body, retry_after_is_whole_seconds_rounded_up_and_at_least_one)
{
    static const struct { int64_t ms; long long s; } cases[] = {
        {-5, 1}, {0, 1}, {1, 1}, {999, 1}, {1000, 1}, {1001, 2}, {9999, 10}, {10000, 10},
        {10001, 11}, {3600000, 3600},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(body_retry_after_s(cases[i].ms), cases[i].s, "%lld ms", (long long)cases[i].ms);
}

Test(body, health_lists_each_master_with_quarantine_and_failed_latency_shown)
{
    body_master ms[3] = {
        {"a:1", 1, "ready", 0, 0, 0, 0.25, NULL, NULL, NULL, NULL},
        {"b:2", 0, "quarantined", 1, -40, 0, 1.5, "a quorum of proven peers", NULL, NULL, NULL},
        {"c:3", 0, "ready", 0, 0, 1, 9.0, NULL, NULL, NULL, NULL},
    };
    jw *j = writer(BODY_MAX_HEALTH);
    body_health(j, 0, 2, ms, 3);
    cr_assert_str_eq(buf, "{\"ready\":false,\"quorum\":2,\"masters\":["
                          "{\"address\":\"a:1\",\"ok\":true,\"state\":\"ready\",\"latency_ms\":0.250},"
                          "{\"address\":\"b:2\",\"ok\":false,\"state\":\"quarantined\","
                          "\"quarantine_remaining_ms\":0,\"waiting_for\":\"a quorum of proven peers\","
                          "\"latency_ms\":1.500},"
                          "{\"address\":\"c:3\",\"ok\":false,\"state\":\"ready\",\"latency_ms\":null}]}");
    json_t *o = parsed(j, 3);
    json_t *arr = json_object_get(o, "masters");
    cr_assert_eq(json_array_size(arr), 3);
    cr_assert_null(json_object_get(json_array_get(arr, 0), "quarantine_remaining_ms"));
    cr_assert(json_is_null(json_object_get(json_array_get(arr, 2), "latency_ms")));
    json_decref(o);
}

Test(body, health_shows_a_tls_masters_verification_and_why_a_master_is_down)
{
    body_master ms[2] = {
        {"a:1", 1, "ready", 0, 0, 0, 0.25, NULL, NULL, "verified", NULL},
        {"b:2", 0, "down", 0, 0, 1, 0, NULL, NULL, "insecure", "TLS: the master's \"certificate\" is refused"},
    };
    jw *j = writer(BODY_MAX_HEALTH);
    body_health(j, 0, 2, ms, 2);
    cr_assert_str_eq(buf, "{\"ready\":false,\"quorum\":2,\"masters\":["
                          "{\"address\":\"a:1\",\"ok\":true,\"state\":\"ready\",\"tls\":\"verified\","
                          "\"latency_ms\":0.250},"
                          "{\"address\":\"b:2\",\"ok\":false,\"state\":\"down\",\"tls\":\"insecure\","
                          "\"reason\":\"TLS: the master's \\\"certificate\\\" is refused\",\"latency_ms\":null}]}");
    json_decref(parsed(j, 3));
}

Test(body, health_of_seven_masters_with_long_addresses_fits_its_writer)
{
    char addr[256], why[160];
    memset(addr, 'h', sizeof addr - 1);
    addr[sizeof addr - 1] = '\0';
    memset(why, '"', sizeof why - 1); /* escaped: twice as long */
    why[sizeof why - 1] = '\0';
    body_master ms[7];
    for (int i = 0; i < 7; i++)
        ms[i] = (body_master){addr, 1, "quarantined", 1, INT64_MAX, 0, 1e9,
                              "repair waits for a quorum of proven peers: 2 of 4 (7 of 7 masters kept their history)",
                              "its clock runs +500000 ppm against ours over 10000 ms (drift factor 0.01 allows 10000 ppm)",
                              "verified", why};
    jw *j = writer(BODY_MAX_HEALTH);
    body_health(j, 1, 4, ms, 7);
    json_t *o = parsed(j, 3);
    cr_assert(json_is_true(json_object_get(o, "ready")));
    cr_assert_eq(json_array_size(json_object_get(o, "masters")), 7);
    json_decref(o);
}

Test(body, a_list_has_the_prefix_each_lock_and_whether_it_was_cut)
{
    body_listed ls[2] = {{"jobs/a", 6, "host-1", 6, 900, 7}, {"jobs/b", 6, NULL, 0, 10, 9}};
    jw *j = writer(BODY_LIST_SIZE(2));
    body_list(j, "jobs/", 5, ls, 2, 1);
    json_t *o = parsed(j, 3);
    cr_assert_str_eq(buf, "{\"prefix\":\"jobs/\",\"locks\":[{\"name\":\"jobs/a\",\"owner\":\"host-1\","
                          "\"validity_ms\":900,\"fencing_token\":7},{\"name\":\"jobs/b\",\"owner\":null,"
                          "\"validity_ms\":10,\"fencing_token\":9}],\"truncated\":true}");
    json_decref(o);
    j = writer(BODY_LIST_SIZE(0));
    body_list(j, "", 0, NULL, 0, 0);
    o = parsed(j, 3);
    cr_assert_eq(json_array_size(json_object_get(o, "locks")), 0);
    json_decref(o);
}

Test(body, the_largest_list_fits_body_list_size)
{
    static char name[NAME_MAX_LEN + 1], owner[OWNER_MAX_LEN + 1];
    memset(name, 'n', NAME_MAX_LEN);
    memset(owner, '"', OWNER_MAX_LEN);
    static body_listed ls[4];
    for (int i = 0; i < 4; i++)
        ls[i] = (body_listed){name, NAME_MAX_LEN, owner, OWNER_MAX_LEN, INT64_MIN, INT64_MAX};
    jw *j = writer(BODY_LIST_SIZE(4));
    body_list(j, name, NAME_MAX_LEN, ls, 4, 1);
    json_decref(parsed(j, 3));
}

Test(body, shared_semaphore_and_reentrant_members)
{
    char out[1024];
    jw j;
    body_lock l = {"s", 1, "leaseAAAAAAAAAAAAAAAA", 21, 4, 900, 1000, 0, NULL, 0, 0, 1, 0, 0, 0, 0,
                   0, 0, -1, 0, 0};
    jw_init(&j, out, sizeof out);
    body_granted(&j, &l);
    cr_assert_str_eq(out, "{\"name\":\"s\",\"lease\":\"leaseAAAAAAAAAAAAAAAA\",\"fencing_token\":4,"
                          "\"validity_ms\":900,\"ttl_ms\":1000,\"mode\":\"shared\"}");
    l.mode = 2;
    l.permits = 3;
    l.slot = 2;
    jw_init(&j, out, sizeof out);
    body_granted(&j, &l);
    cr_assert(strstr(out, "\"permits\":3,\"slot\":2}"), "%s", out);
    l.readers = 2;
    jw_init(&j, out, sizeof out);
    body_inspected(&j, &l);
    cr_assert_str_eq(out, "{\"name\":\"s\",\"permits\":3,\"held\":2,\"free\":1}");
    l.permits = 0;
    jw_init(&j, out, sizeof out);
    body_inspected(&j, &l);
    cr_assert_str_eq(out, "{\"name\":\"s\",\"permits\":null,\"held\":2,\"free\":null}");
    l.mode = 0;
    l.holds = 2;
    jw_init(&j, out, sizeof out);
    body_released(&j, &l);
    cr_assert_str_eq(out, "{\"name\":\"s\",\"released\":false,\"holds\":2}");
    jw_init(&j, out, sizeof out);
    body_inspected(&j, &l);
    cr_assert(strstr(out, "\"mode\":\"shared\",\"readers\":2,\"holds\":2}"), "%s", out);
    body_err e = {RL_E_PERMITS_MISMATCH, NULL, 0, 0, 0, 5, 0, -1, 0, 0};
    jw_init(&j, out, sizeof out);
    body_error(&j, &e);
    cr_assert(strstr(out, "\"permits\":5}"), "%s", out);
}
