/* test_api.c -- every route and status of the HTTP API against five real masters. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }
static void teardown(void) { h_cluster_stop(&C); }

TestSuite(api, .init = setup, .fini = teardown, .timeout = 60);

static int lease_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 22 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-", s[i]))
            return 0;
    return 1;
}

Test(api, acquire_returns_lease_token_and_validity)
{
    h_resp r;
    h_http(&C, "POST", "/locks/api.acquire?ttl_ms=5000", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "name"), "api.acquire");
    cr_assert(lease_ok(h_str(&r, "lease")), "lease %s", h_str(&r, "lease"));
    cr_assert_geq(h_int(&r, "fencing_token"), 1);
    cr_assert_eq(h_int(&r, "ttl_ms"), 5000);
    long long v = h_int(&r, "validity_ms");
    cr_assert(v > 4000 && v < 5000, "validity %lld", v);
    cr_assert(strstr(r.content_type, "application/json"));
    cr_assert(r.request_id[0]);
    h_resp_free(&r);
}

Test(api, second_acquire_is_409_with_retry_after)
{
    cr_assert_eq(h_acquire(&C, "api.held", "ttl_ms=10000", NULL, 0, NULL), 201);
    h_resp r;
    h_http(&C, "POST", "/locks/api.held", NULL, &r);
    cr_assert_eq(r.status, 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "lock_held");
    cr_assert(h_str(&r, "message")[0]);
    long long ra = h_int(&r, "retry_after_ms");
    cr_assert(ra > 8000 && ra <= 10000, "retry_after_ms %lld", ra);
    cr_assert_str_eq(r.retry_after, "10"); /* seconds, rounded up */
    h_resp_free(&r);
}

Test(api, release_frees_the_lock_and_get_shows_it)
{
    char lease[200];
    long long tok;
    cr_assert_eq(h_acquire(&C, "api.rel", NULL, lease, sizeof lease, &tok), 201);
    h_resp r;
    h_http(&C, "GET", "/locks/api.rel", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(json_is_true(json_object_get(r.json, "held")));
    cr_assert_eq(h_int(&r, "fencing_token"), tok);
    cr_assert_null(strstr(r.body, lease), "GET must never show the lease");
    cr_assert_null(json_object_get(r.json, "lease"));
    h_resp_free(&r);

    char body[300];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    h_http(&C, "DELETE", "/locks/api.rel", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_true(json_object_get(r.json, "released")));
    cr_assert_str_eq(h_str(&r, "name"), "api.rel");
    h_resp_free(&r);

    h_http(&C, "GET", "/locks/api.rel", NULL, &r);
    cr_assert(json_is_false(json_object_get(r.json, "held")));
    cr_assert_eq(h_int(&r, "validity_ms"), 0);
    cr_assert_eq(h_int(&r, "fencing_token"), tok, "the counter stays after release");
    h_resp_free(&r);

    /* Released twice: the lease is gone. */
    h_http(&C, "DELETE", "/locks/api.rel", body, &r);
    cr_assert_eq(r.status, 404);
    cr_assert_str_eq(h_str(&r, "error"), "lease_not_found");
    h_resp_free(&r);
}

Test(api, get_of_a_never_locked_name)
{
    h_resp r;
    h_http(&C, "GET", "/locks/api.never", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(json_is_false(json_object_get(r.json, "held")));
    cr_assert_eq(h_int(&r, "fencing_token"), 0);
    h_resp_free(&r);
}

Test(api, release_with_a_wrong_lease_keeps_the_lock)
{
    cr_assert_eq(h_acquire(&C, "api.wrong", NULL, NULL, 0, NULL), 201);
    cr_assert_eq(h_release(&C, "api.wrong", "AAAAAAAAAAAAAAAAAAAAAAAA"), 404);
    cr_assert_eq(h_acquire(&C, "api.wrong", NULL, NULL, 0, NULL), 409);
}

Test(api, extend_keeps_the_token_and_renews_validity)
{
    char lease[200], body[300];
    long long tok;
    cr_assert_eq(h_acquire(&C, "api.ext", "ttl_ms=1000", lease, sizeof lease, &tok), 201);
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", lease);
    h_resp r;
    h_http(&C, "PATCH", "/locks/api.ext", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_eq(h_int(&r, "fencing_token"), tok);
    cr_assert_eq(h_int(&r, "ttl_ms"), 20000);
    cr_assert(h_int(&r, "validity_ms") > 19000);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/api.ext", NULL, &r);
    cr_assert(h_int(&r, "validity_ms") > 15000, "extended on a quorum: %s", r.body);
    h_resp_free(&r);

    h_http(&C, "PATCH", "/locks/api.ext", "{\"lease\":\"BBBBBBBBBBBBBBBBBBBBBBBB\"}", &r);
    cr_assert_eq(r.status, 404);
    cr_assert_str_eq(h_str(&r, "error"), "lease_not_found");
    h_resp_free(&r);
    h_http(&C, "PATCH", "/locks/api.ext", "{}", &r);
    cr_assert_eq(r.status, 400);
    cr_assert_str_eq(h_str(&r, "error"), "invalid_lease");
    h_resp_free(&r);
}

Test(api, client_lease_retry_is_idempotent)
{
    const char *body = "{\"lease\":\"my-own-lease-0123456789\",\"ttl_ms\":5000}";
    h_resp a, b;
    h_http(&C, "POST", "/locks/api.idem", body, &a);
    h_http(&C, "POST", "/locks/api.idem", body, &b);
    cr_assert_eq(a.status, 201);
    cr_assert_eq(b.status, 201, "%s", b.body);
    cr_assert_str_eq(h_str(&b, "lease"), "my-own-lease-0123456789");
    cr_assert_eq(h_int(&a, "fencing_token"), h_int(&b, "fencing_token"));
    h_resp_free(&a);
    h_resp_free(&b);
    cr_assert_eq(h_acquire(&C, "api.idem", NULL, NULL, 0, NULL), 409, "others are still excluded");
}

Test(api, body_wins_over_query)
{
    h_resp r;
    h_http(&C, "POST", "/locks/api.both?ttl_ms=1000", "{\"ttl_ms\":7000}", &r);
    cr_assert_eq(r.status, 201);
    cr_assert_eq(h_int(&r, "ttl_ms"), 7000);
    h_resp_free(&r);
}

Test(api, percent_encoded_names_are_decoded)
{
    h_resp r;
    h_http(&C, "POST", "/locks/a%2Fb%3Ac", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "name"), "a/b:c");
    h_resp_free(&r);
    h_http(&C, "POST", "/locks/a%00b", NULL, &r);
    cr_assert_eq(r.status, 400, "an encoded NUL must not cut the name short");
    h_resp_free(&r);
}

struct interop {
    const char *lease;
    int other;                  /* a master holds the key with another value */
    int holding;                /* how many masters hold the lease, at the last look */
};

/* A lease the service made for the request is stored as it is; one the client chose
 * as "<lease>.<tag>", the tag naming the attempt (docs/DESIGN.md); either followed by
 * "@<F>", the counter of the grant that wrote it (section 14). */
static int holds_lease(const char *val, const char *lease)
{
    size_t n = strlen(lease);
    if (strncmp(val, lease, n) != 0)
        return 0;
    const char *rest = val + n;
    if (rest[0] == '.' && strspn(rest + 1, "0123456789abcdef") == 16)
        rest += 17;
    return rest[0] == '@' && rest[1] && strspn(rest + 1, "0123456789") == strlen(rest + 1);
}

/* Every master holds the lease -- or, if a worker did not use a master yet (one still
 * connecting when the service said it was ready: a quorum is ready), a quorum does and
 * the others hold nothing. */
static int all_hold(void *arg)
{
    struct interop *io = arg;
    char val[256];
    int holding = 0;
    for (int i = 0; i < C.n; i++) {
        val[0] = '\0';
        h_redis_cmd(&C.masters[i], val, sizeof val, "GET redlock:api.interop");
        if (holds_lease(val, io->lease))
            holding++;
        else if (val[0])
            io->other = 1;
    }
    io->holding = holding;
    return holding == C.n || (holding > C.n / 2 && getenv("REDLOCK_TEST_NODE_TIMEOUT_MS"));
}

Test(api, lock_key_is_interoperable)
{
    char lease[200];
    cr_assert_eq(h_acquire(&C, "api.interop", "ttl_ms=10000", lease, sizeof lease, NULL), 201);
    /* The grant needs a quorum; the other masters take the key moments later. */
    struct interop io = {lease, 0, 0};
    /* A master whose command was still queued when the round was decided (a loaded machine:
     * its connection judged stalled and made anew) may never get the key: a quorum holding
     * it, the others holding nothing, is what a grant promises. */
    if (!h_wait_until(all_hold, &io, 5000)) {
        cr_assert(io.holding > C.n / 2, "a quorum of masters holds the lease as a plain string "
                  "(%d of %d do)", io.holding, C.n);
        printf("api.interop: %d of %d masters hold the key 5 s after the grant (the others "
               "hold nothing)\n", io.holding, C.n);
    }
    cr_assert_not(io.other, "no master holds another value");
    for (int i = 0; i < C.n; i++) {
        char val[256] = "";
        h_redis_cmd(&C.masters[i], val, sizeof val, "GET redlock:api.interop");
        if (!val[0])
            continue; /* test-valgrind only (all_hold) */
        long long pttl = h_redis_cmd(&C.masters[i], NULL, 0, "PTTL redlock:api.interop");
        cr_assert(pttl > 0 && pttl <= 10000, "pttl %lld", pttl);
    }
}

/* Criterion copies parameters into the test process: no pointers, only arrays. */
struct bad {
    char method[8], path[64], body[64];
    long status;
    char error[24];
};

static struct bad bad_cases[] = {
    {"POST", "/locks/x", "[1,2]", 400, "invalid_json"},
    {"POST", "/locks/x", "{", 400, "invalid_json"},
    {"POST", "/locks/x", "\"str\"", 400, "invalid_json"},
    {"POST", "/locks/x", "{\"ttl\":5}", 400, "invalid_json"},
    {"POST", "/locks/x", "{\"ttl_ms\":1,\"ttl_ms\":2}", 400, "invalid_json"},
    {"POST", "/locks/", "", 400, "invalid_name"},
    {"POST", "/locks/bad%20name", "", 400, "invalid_name"},
    {"POST", "/locks/bad%23name", "", 400, "invalid_name"},
    {"GET", "/locks/sp%20ace", "", 400, "invalid_name"},
    {"POST", "/locks/x?ttl_ms=0", "", 400, "invalid_ttl"},
    {"POST", "/locks/x?ttl_ms=abc", "", 400, "invalid_ttl"},
    {"POST", "/locks/x?ttl_ms=-1", "", 400, "invalid_ttl"},
    {"POST", "/locks/x?ttl_ms=3600001", "", 400, "invalid_ttl"},
    {"POST", "/locks/x", "{\"ttl_ms\":\"5\"}", 400, "invalid_ttl"},
    {"POST", "/locks/x", "{\"ttl_ms\":1.5}", 400, "invalid_ttl"},
    {"POST", "/locks/x?wait_ms=x", "", 400, "invalid_wait"},
    {"POST", "/locks/x?wait_ms=60001", "", 400, "invalid_wait"},
    {"POST", "/locks/x", "{\"wait_ms\":-3}", 400, "invalid_wait"},
    {"POST", "/locks/x", "{\"lease\":\"short\"}", 400, "invalid_lease"},
    {"POST", "/locks/x", "{\"lease\":\"has space in it 0123\"}", 400, "invalid_lease"},
    {"DELETE", "/locks/x", "", 400, "invalid_lease"},
    {"DELETE", "/locks/x?lease=short", "", 400, "invalid_lease"},
    {"GET", "/nope", "", 404, "not_found"},
    {"PATCH", "/locks", "", 405, "method_not_allowed"},
    {"GET", "/locks?limit=0", "", 400, "invalid_limit"},
    {"GET", "/locks?limit=1001", "", 400, "invalid_limit"},
    {"GET", "/locks?limit=x", "", 400, "invalid_limit"},
    {"GET", "/locks?prefix=a%20b", "", 400, "invalid_name"},
    {"DELETE", "/locks/x?force=1", "", 400, "invalid_force"},
    {"POST", "/locks/x?owner=a%0Ab", "", 400, "invalid_owner"},
    {"POST", "/locks", "", 400, "invalid_json"},
    {"POST", "/locks", "{\"names\":[]}", 400, "invalid_name"},
    {"POST", "/locks", "{\"names\":[\"a\",\"a\"]}", 400, "invalid_name"},
    {"POST", "/locks", "{\"names\":[\"a b\"]}", 400, "invalid_name"},
    {"POST", "/locks", "{\"names\":[\"a\"],\"ttl_ms\":0}", 400, "invalid_ttl"},
    {"DELETE", "/locks", "{}", 400, "invalid_lease"},
    {"PUT", "/locks/x", "", 405, "method_not_allowed"},
    {"POST", "/healthz", "", 405, "method_not_allowed"},
    {"POST", "/locks/x?ttl=5000", "", 400, "invalid_query"},
    {"POST", "/locks/x?ttl_ms=5000&ttl_ms=6000", "", 400, "invalid_query"},
    {"POST", "/locks/x?hold", "", 400, "invalid_query"},
    {"PATCH", "/locks/x?lease=AAAAAAAAAAAAAAAAAAAAAAAA&wait_ms=1", "", 400, "invalid_query"},
    {"DELETE", "/locks/x?lease=AAAAAAAAAAAAAAAAAAAAAAAA&ttl_ms=1", "", 400, "invalid_query"},
    {"GET", "/locks/x?wait=100", "", 400, "invalid_query"},
    {"GET", "/locks?prefix=a&prefix=b", "", 400, "invalid_query"},
    {"POST", "/locks?names=a", "{\"names\":[\"a\"]}", 400, "invalid_query"},
    {"DELETE", "/locks?lease=AAAAAAAAAAAAAAAAAAAAAAAA&force=true", "", 400, "invalid_query"},
};

ParameterizedTestParameters(api, bad_input_gets_a_clear_json_error)
{
    return cr_make_param_array(struct bad, bad_cases, sizeof bad_cases / sizeof bad_cases[0]);
}

ParameterizedTest(struct bad *b, api, bad_input_gets_a_clear_json_error)
{
    h_resp r;
    h_http(&C, b->method, b->path, b->body[0] ? b->body : NULL, &r);
    cr_assert_eq(r.status, b->status, "%s %s -> %ld %s", b->method, b->path, r.status, r.body);
    cr_assert_str_eq(h_str(&r, "error"), b->error, "%s", r.body);
    cr_assert(h_str(&r, "message")[0]);
    if (b->status == 405)
        cr_assert(r.allow[0], "405 carries Allow");
    h_resp_free(&r);
    /* and the service is still there */
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200);
    h_resp_free(&r);
}

Test(api, oversized_body_is_413)
{
    size_t n = 70 * 1024;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    h_resp r;
    h_http(&C, "POST", "/locks/big", big, &r);
    cr_assert_eq(r.status, 413, "%ld %s", r.status, r.body);
    cr_assert_str_eq(h_str(&r, "error"), "body_too_large");
    h_resp_free(&r);
    free(big);
}

Test(api, healthz_and_readyz_list_the_masters)
{
    const char *paths[] = {"/healthz", "/readyz"};
    for (int k = 0; k < 2; k++) {
        h_resp r;
        h_http(&C, "GET", paths[k], NULL, &r);
        cr_assert_eq(r.status, 200, "%s", r.body);
        cr_assert(json_is_true(json_object_get(r.json, "ready")));
        cr_assert_eq(h_int(&r, "quorum"), 3);
        json_t *ms = json_object_get(r.json, "masters");
        cr_assert_eq(json_array_size(ms), 5);
        for (size_t i = 0; i < 5; i++) {
            json_t *m = json_array_get(ms, i);
            cr_assert(json_is_string(json_object_get(m, "address")));
            cr_assert(json_is_true(json_object_get(m, "ok")));
            cr_assert(json_is_number(json_object_get(m, "latency_ms")));
        }
        h_resp_free(&r);
    }
}

Test(api, request_id_is_echoed)
{
    void *curl = NULL;
    h_resp r;
    (void)curl;
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert(strlen(r.request_id) > 0);
    h_resp_free(&r);
}

Test(api, metrics_move_with_requests)
{
    h_require_local(&C); /* counts from zero: needs a service of its own */
    h_resp r;
    cr_assert_eq(h_acquire(&C, "api.metrics", NULL, NULL, 0, NULL), 201);
    cr_assert_eq(h_acquire(&C, "api.metrics", NULL, NULL, 0, NULL), 409);
    h_http(&C, "GET", "/metrics", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(strstr(r.body, "redlockd_acquire_total{outcome=\"granted\"} 1\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_acquire_total{outcome=\"held\"} 1\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_master_up{address=\"127.0.0.1:"));
    cr_assert(strstr(r.body, "redlockd_build_info{version="));
    /* The exact status in `code`; latency histograms; the process's start time. */
    cr_assert(strstr(r.body, "redlockd_http_requests_total{route=\"/locks/{name}\",method=\"POST\",code=\"201\"} 1\n"),
              "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_http_requests_total{route=\"/locks/{name}\",method=\"POST\",code=\"409\"} 1\n"),
              "%s", r.body);
    cr_assert(strstr(r.body, "# TYPE redlockd_request_duration_seconds histogram\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_request_duration_seconds_bucket{route=\"/locks/{name}\",method=\"POST\",le=\"+Inf\"} 2\n"),
              "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_request_duration_seconds_count{route=\"/locks/{name}\",method=\"POST\"} 2\n"),
              "%s", r.body);
    cr_assert(strstr(r.body, "# TYPE redlockd_master_rtt_seconds histogram\n"), "%s", r.body);
    char want[128];
    snprintf(want, sizeof want, "redlockd_master_rtt_seconds_bucket{master=\"127.0.0.1:%d\",le=\"+Inf\"} ",
             C.masters[0].port);
    const char *p = strstr(r.body, want);
    cr_assert(p && atoll(p + strlen(want)) >= 1, "%s", r.body);
    p = strstr(r.body, "\nprocess_start_time_seconds ");
    cr_assert(p, "%s", r.body);
    double started = atof(p + strlen("\nprocess_start_time_seconds "));
    cr_assert(started > (double)time(NULL) - 120 && started <= (double)time(NULL) + 1, "started %.2f", started);
    /* Prometheus's own linter, where it is installed (Debian's prometheus package). */
    if (system("command -v promtool > /dev/null 2>&1") == 0) {
        char path[] = "/tmp/redlockd-metrics-XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, r.body, strlen(r.body)), (ssize_t)strlen(r.body));
        close(fd);
        char cmd[200];
        snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
        int rc = system(cmd);
        unlink(path);
        cr_assert_eq(rc, 0, "promtool check metrics failed on:\n%s", r.body);
    }
    h_resp_free(&r);
}
