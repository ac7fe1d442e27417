/* test_owner.c -- who holds a lock (issue 13, part 2): the owner kept with a grant and
 * shown by GET (never the lease), the owner of a waiter that a release hands the lock
 * to, DELETE ?force=true for admin tokens only, and GET /locks listing the held locks
 * within the caller's scope. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static char tokens[64]; /* the tokens file of the test, if it wrote one */

static void teardown(void)
{
    h_cluster_stop(&C);
    unsetenv("REDLOCK_TEST_TOKEN");
    if (tokens[0])
        unlink(tokens);
    tokens[0] = '\0';
}

TestSuite(owner, .fini = teardown, .timeout = 60);

static int log_contains(const char *needle) { return h_log_contains(&C.svc, needle); }

static long long metric(const char *name) { return h_metric(C.svc.url, &C.curl, name); }

Test(owner, get_shows_the_owner_and_never_the_lease)
{
    h_cluster_start(&C, 5, 0, NULL);
    h_resp r;
    h_http(&C, "POST", "/locks/own.a", "{\"ttl_ms\":10000,\"owner\":\"host-7 pid 4242 (\\\"cron\\\")\"}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    char lease[200];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    cr_assert_null(json_object_get(r.json, "owner"), "the grant is the usual object");
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/own.a", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(h_str(&r, "owner"), "host-7 pid 4242 (\"cron\")", "%s", r.body);
    cr_assert(json_is_true(json_object_get(r.json, "held")));
    cr_assert_null(strstr(r.body, lease), "never the lease: %s", r.body);
    cr_assert_null(json_object_get(r.json, "lease"));
    h_resp_free(&r);
    /* The owner in the query string, with a lease the client chose. */
    h_http(&C, "POST", "/locks/own.b?owner=pod%20b-1&lease=client-lease-0123456789", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/own.b", NULL, &r);
    cr_assert_str_eq(h_str(&r, "owner"), "pod b-1", "%s", r.body);
    cr_assert_null(strstr(r.body, "client-lease-0123456789"));
    h_resp_free(&r);
    /* The owner goes with the lease: a retry with the same lease and a new owner is
     * the same grant (201, same token), now showing the new owner. */
    h_http(&C, "POST", "/locks/own.b?owner=pod%20b-2&lease=client-lease-0123456789", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/own.b", NULL, &r);
    cr_assert_str_eq(h_str(&r, "owner"), "pod b-2", "%s", r.body);
    h_resp_free(&r);
    /* No owner: null; free: null. */
    cr_assert_eq(h_acquire(&C, "own.c", NULL, NULL, 0, NULL), 201);
    h_http(&C, "GET", "/locks/own.c", NULL, &r);
    cr_assert(json_is_null(json_object_get(r.json, "owner")), "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/own.never", NULL, &r);
    cr_assert(json_is_null(json_object_get(r.json, "owner")), "%s", r.body);
    h_resp_free(&r);
    /* Released by the lease alone, owner or not. */
    cr_assert_eq(h_release(&C, "own.a", lease), 200);
    h_http(&C, "GET", "/locks/own.a", NULL, &r);
    cr_assert(json_is_false(json_object_get(r.json, "held")));
    h_resp_free(&r);
    /* The grant's log line names the owner; no line has the lease. */
    h_require_local(&C);
    cr_assert(h_wait_until((int (*)(void *))log_contains, "host-7 pid 4242", 2000), "the owner is logged");
    cr_assert(!log_contains(lease), "never the lease");
    cr_assert(!log_contains("client-lease-0123456789"));
}

Test(owner, an_invalid_owner_is_400_invalid_owner)
{
    h_cluster_start(&C, 3, 0, NULL);
    char big[400];
    snprintf(big, sizeof big, "{\"owner\":\"%0257d\"}", 0);
    const struct {
        const char *method, *path, *body;
    } cases[] = {
        {"POST", "/locks/own.bad", "{\"owner\":\"a\\nb\"}"},
        {"POST", "/locks/own.bad", "{\"owner\":\"caf\\u00e9\"}"},
        {"POST", "/locks/own.bad", "{\"owner\":\"\"}"},
        {"POST", "/locks/own.bad", "{\"owner\":42}"},
        {"POST", "/locks/own.bad", big},
        {"POST", "/locks/own.bad?owner=a%0Ab", NULL},
        {"POST", "/locks", "{\"names\":[\"own.m1\",\"own.m2\"],\"owner\":\"x\"}"},
        {"PATCH", "/locks/own.bad", "{\"lease\":\"client-lease-0123456789\",\"owner\":\"x\"}"},
        {"DELETE", "/locks/own.bad", "{\"lease\":\"client-lease-0123456789\",\"owner\":\"x\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h_resp r;
        h_http(&C, cases[i].method, cases[i].path, cases[i].body, &r);
        cr_assert_eq(r.status, 400, "case %zu: %s", i, r.body);
        cr_assert_str_eq(h_str(&r, "error"), "invalid_owner", "case %zu: %s", i, r.body);
        cr_assert(strlen(h_str(&r, "message")) > 10);
        h_resp_free(&r);
    }
    h_resp r;
    h_http(&C, "GET", "/locks/own.bad", NULL, &r);
    cr_assert(json_is_false(json_object_get(r.json, "held")), "nothing was taken");
    h_resp_free(&r);
}

struct waiter {
    const char *url;
    long status;
    char body[4096];
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(w->url, &curl, "POST", "/locks/own.h?wait_ms=8000",
              "{\"ttl_ms\":10000,\"owner\":\"the waiter\"}", &r);
    w->status = r.status;
    snprintf(w->body, sizeof w->body, "%.4000s", r.body);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int parked(void *arg)
{
    (void)arg;
    return metric("redlockd_parked_waiters") >= 1;
}

Test(owner, a_handoff_gives_the_waiter_its_own_owner)
{
    h_cluster_start(&C, 5, 0, "--threads 1");
    h_resp r;
    h_http(&C, "POST", "/locks/own.h", "{\"ttl_ms\":10000,\"owner\":\"the first\"}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    char lease[200];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    long long t1 = h_int(&r, "fencing_token");
    h_resp_free(&r);
    long long handoffs = metric("redlockd_handoffs_total");
    long long wakeups0 = h_metric(C.svc.url, &C.curl, "redlockd_waiter_wakeups_total");
    unsigned long long replies0 = h_replies_read(C.svc.url, &C.curl);
    struct waiter w = {C.svc.url, 0, ""};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_main, &w), 0);
    cr_assert(h_wait_until(parked, NULL, 5000), "the waiter parks");
    /* Not inside the attempt its subscription's wake makes (there the retry takes the
     * lock, and no handoff is made: 1 of 3 ASan runs under load). */
    h_waiter_settle(C.svc.url, &C.curl, wakeups0, replies0);
    cr_assert_eq(h_release(&C, "own.h", lease), 200);
    pthread_join(th, NULL);
    cr_assert_eq(w.status, 201, "%s", w.body);
    cr_assert_eq(metric("redlockd_handoffs_total"), handoffs + 1, "handed over, not re-acquired");
    h_http(&C, "GET", "/locks/own.h", NULL, &r);
    cr_assert_str_eq(h_str(&r, "owner"), "the waiter", "%s", r.body);
    cr_assert_gt(h_int(&r, "fencing_token"), t1);
    h_resp_free(&r);
}

/* ---- DELETE ?force=true ---- */

static const char *write_tokens(const char *text)
{
    snprintf(tokens, sizeof tokens, "/tmp/redlockd-owner-%d.tokens", (int)getpid());
    FILE *f = fopen(tokens, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    return tokens;
}

#define ADMIN "admin-token-0123456789abcdef"
#define PLAIN "plain-token-0123456789abcdef"
#define TEAM "team-token-0123456789abcdefg"

static void with_tokens(void)
{
    char flags[400];
    snprintf(flags, sizeof flags, "--auth-tokens-file %s",
             write_tokens(ADMIN " +admin name=ops-oncall\n" PLAIN "\n" TEAM " team/ name=team-ci\n"));
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
}

struct fwaiter {
    const char *url, *name;
    long status;
    long long token;
    double ms;
};

static void *fwait_main(void *arg)
{
    struct fwaiter *w = arg;
    void *curl = NULL;
    h_resp r;
    char path[200];
    snprintf(path, sizeof path, "/locks/%s?wait_ms=10000", w->name);
    h_http_to(w->url, &curl, "POST", path, NULL, &r);
    w->status = r.status;
    w->token = h_int(&r, "fencing_token");
    w->ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

Test(owner, force_as_admin_breaks_the_lock_and_a_waiter_gets_it)
{
    with_tokens();
    setenv("REDLOCK_TEST_TOKEN", PLAIN, 1);
    h_resp r;
    h_http(&C, "POST", "/locks/f.x", "{\"ttl_ms\":30000,\"owner\":\"stuck job\"}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    char lease[200];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    long long t1 = h_int(&r, "fencing_token");
    h_resp_free(&r);
    struct fwaiter w = {C.svc.url, "f.x", 0, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, fwait_main, &w), 0); /* PLAIN, from the env */
    cr_assert(h_wait_until(parked, NULL, 5000), "the waiter parks");
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    double t0 = h_now_ms();
    h_http(&C, "DELETE", "/locks/f.x?force=true", NULL, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_true(json_object_get(r.json, "released")));
    cr_assert(json_is_true(json_object_get(r.json, "forced")));
    h_resp_free(&r);
    pthread_join(th, NULL);
    cr_assert_eq(w.status, 201, "the waiter gets the lock");
    cr_assert_lt(w.ms - t0, 2000, "at once, not at the ttl's end (%.0f ms)", w.ms - t0);
    cr_assert_gt(w.token, t1, "a larger fencing token than the broken holder's");
    /* The broken holder finds its lease gone. */
    setenv("REDLOCK_TEST_TOKEN", PLAIN, 1);
    char body[300];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    h_http(&C, "PATCH", "/locks/f.x", body, &r);
    cr_assert_eq(r.status, 404, "%s", r.body);
    h_resp_free(&r);
    /* Forcing a free lock: 200 all the same (it is free on a quorum). */
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    h_http(&C, "DELETE", "/locks/f.free?force=true", NULL, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    h_resp_free(&r);
    /* Logged at warn with the token's label, never the token. */
    cr_assert(h_wait_until((int (*)(void *))log_contains, "lock broken by force", 2000));
    cr_assert(log_contains("ops-oncall"));
    cr_assert(!log_contains(ADMIN) && !log_contains(PLAIN), "tokens never reach the log");
    cr_assert(!log_contains(lease));
}

Test(owner, force_is_403_for_other_tokens_and_without_tokens)
{
    with_tokens();
    setenv("REDLOCK_TEST_TOKEN", PLAIN, 1);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "team/f", "ttl_ms=30000", lease, sizeof lease, NULL), 201);
    const char *who[] = {PLAIN, TEAM};
    for (size_t i = 0; i < 2; i++) {
        setenv("REDLOCK_TEST_TOKEN", who[i], 1);
        h_resp r;
        h_http(&C, "DELETE", "/locks/team/f?force=true", NULL, &r);
        cr_assert_eq(r.status, 403, "%s", r.body);
        cr_assert_str_eq(h_str(&r, "error"), "forbidden");
        cr_assert(strstr(h_str(&r, "message"), "+admin"), "%s", r.body);
        h_resp_free(&r);
    }
    h_resp r;
    h_http(&C, "DELETE", "/locks/team/f?force=yes", NULL, &r);
    cr_assert_eq(r.status, 400, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "invalid_force");
    h_resp_free(&r);
    setenv("REDLOCK_TEST_TOKEN", PLAIN, 1);
    h_http(&C, "GET", "/locks/team/f", NULL, &r);
    cr_assert(json_is_true(json_object_get(r.json, "held")), "still held");
    h_resp_free(&r);
    h_cluster_stop(&C);
    unsetenv("REDLOCK_TEST_TOKEN");
    h_cluster_start(&C, 3, 0, NULL);
    h_http(&C, "DELETE", "/locks/any?force=true", NULL, &r);
    cr_assert_eq(r.status, 403, "no tokens, no admin: %s", r.body);
    cr_assert(strstr(h_str(&r, "message"), "--auth-tokens-file"), "%s", r.body);
    h_resp_free(&r);
}

/* ---- GET /locks ---- */

/* GET path as the token in the env; the names listed, comma-separated, into out. */
static long list(const char *path, char *out, size_t cap, int *truncated, h_resp *keep)
{
    h_resp r;
    h_http(&C, "GET", path, NULL, &r);
    out[0] = '\0';
    json_t *locks = r.json ? json_object_get(r.json, "locks") : NULL;
    for (size_t i = 0; i < json_array_size(locks); i++) {
        json_t *l = json_array_get(locks, i);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s", n ? "," : "", json_string_value(json_object_get(l, "name")));
        cr_assert(json_integer_value(json_object_get(l, "validity_ms")) > 0, "%s", r.body);
        cr_assert(json_integer_value(json_object_get(l, "fencing_token")) >= 1, "%s", r.body);
        cr_assert_null(json_object_get(l, "lease"));
    }
    if (truncated)
        *truncated = json_is_true(json_object_get(r.json, "truncated"));
    long status = r.status;
    if (keep)
        *keep = r;
    else
        h_resp_free(&r);
    return status;
}

Test(owner, list_shows_held_locks_under_a_prefix_within_the_tokens_scope)
{
    with_tokens();
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    char leases[4][200];
    const char *names[] = {"team/c", "team/a", "team/b", "other/x"};
    for (int i = 0; i < 4; i++) {
        char body[100];
        snprintf(body, sizeof body, "{\"ttl_ms\":30000,\"owner\":\"owner of %s\"}", names[i]);
        char path[100];
        snprintf(path, sizeof path, "/locks/%s", names[i]);
        h_resp r;
        h_http(&C, "POST", path, body, &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        snprintf(leases[i], sizeof leases[i], "%s", h_str(&r, "lease"));
        h_resp_free(&r);
    }
    char got[1024];
    int cut;
    h_resp r;
    cr_assert_eq(list("/locks?prefix=team/", got, sizeof got, &cut, &r), 200);
    cr_assert_str_eq(got, "team/a,team/b,team/c", "by name");
    cr_assert_eq(cut, 0);
    cr_assert_str_eq(h_str(&r, "prefix"), "team/");
    json_t *first = json_array_get(json_object_get(r.json, "locks"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(first, "owner")), "owner of team/a");
    for (int i = 0; i < 4; i++)
        cr_assert_null(strstr(r.body, leases[i]), "never a lease: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(list("/locks?prefix=team/&limit=2", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "team/a,team/b");
    cr_assert_eq(cut, 1, "and it says the list was cut");
    cr_assert_eq(list("/locks", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "other/x,team/a,team/b,team/c", "the '#' keys are never listed");
    cr_assert_eq(list("/locks?prefix=nothing", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "");
    /* Released and expired locks are not listed (a key a quorum does not hold). */
    cr_assert_eq(h_release(&C, "team/b", leases[2]), 200);
    cr_assert_eq(list("/locks?prefix=team/", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "team/a,team/c");
    /* A scoped token: its scope is the prefix it lists, and nothing outside it. */
    setenv("REDLOCK_TEST_TOKEN", TEAM, 1);
    cr_assert_eq(list("/locks", got, sizeof got, &cut, &r), 200);
    cr_assert_str_eq(got, "team/a,team/c");
    cr_assert_str_eq(h_str(&r, "prefix"), "team/", "narrowed to the scope");
    h_resp_free(&r);
    cr_assert_eq(list("/locks?prefix=te", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "team/a,team/c");
    cr_assert_eq(list("/locks?prefix=team/c", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "team/c");
    cr_assert_eq(list("/locks?prefix=other/", got, sizeof got, &cut, &r), 403);
    cr_assert_str_eq(h_str(&r, "error"), "forbidden");
    h_resp_free(&r);
    unsetenv("REDLOCK_TEST_TOKEN");
    cr_assert_eq(list("/locks", got, sizeof got, &cut, NULL), 401, "a token is needed");
    /* A master down: still listed from the others. */
    h_redis_kill(&C.masters[0]);
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    cr_assert_eq(list("/locks?prefix=team/", got, sizeof got, &cut, NULL), 200);
    cr_assert_str_eq(got, "team/a,team/c");
}
