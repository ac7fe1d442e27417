/* test_http.c -- HTTP as clients expect it, on raw sockets where curl would not send
 * the request: a raw NUL byte in the path, Content-Length values libmicrohttpd refuses
 * before any handler runs (one answer per connection, the documented JSON error), a
 * chunked body over the limit, a header over the connection's memory. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }
static void teardown(void) { h_cluster_stop(&C); }

TestSuite(http, .init = setup, .fini = teardown, .timeout = 60);

/* Send len bytes of req on a new connection, read until the service closes it (or 3 s
 * pass); the answer, NUL-terminated, in out.  Returns the bytes read. */
static size_t exchange(const char *req, size_t len, char *out, size_t cap)
{
    cr_assert(!C.external || strncmp(C.svc.url, "http:", 5) == 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)C.svc.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the service may close before reading everything */
        off += (size_t)w;
    }
    size_t got = 0;
    double end = h_now_ms() + 3000;
    while (got + 1 < cap && h_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) != 1)
            continue;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break; /* closed (or reset) */
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
    return got;
}

/* How many status lines the answer holds. */
static int answers_in(const char *s)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, "HTTP/1.1 ")); p++)
        n++;
    return n;
}

/* The JSON body of a single answer (after the blank line), parsed. */
static json_t *body_of(const char *s)
{
    const char *b = strstr(s, "\r\n\r\n");
    cr_assert_not_null(b, "no header end in: %s", s);
    json_t *j = json_loads(b + 4, 0, NULL);
    cr_assert_not_null(j, "not JSON: %s", b + 4);
    return j;
}

static void assert_one_json_error(const char *out, int status, const char *error)
{
    char line[32];
    snprintf(line, sizeof line, "HTTP/1.1 %d ", status);
    cr_assert_eq(answers_in(out), 1, "exactly one answer on the connection:\n%s", out);
    cr_assert(strncmp(out, line, strlen(line)) == 0, "%s", out);
    cr_assert(strstr(out, "Content-Type: application/json"), "%s", out);
    json_t *j = body_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "error")), error, "%s", out);
    cr_assert(json_string_length(json_object_get(j, "message")) > 0);
    json_decref(j);
}

Test(http, a_raw_nul_in_the_path_is_invalid_name_and_locks_nothing)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    static const char req[] = "POST /locks/nul\0zzz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char out[4096];
    exchange(req, sizeof req - 1, out, sizeof out);
    assert_one_json_error(out, 400, "invalid_name");
    h_resp r;
    h_http(&C, "GET", "/locks/nul", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(json_is_false(json_object_get(r.json, "held")), "the name cut at the NUL was locked: %s", r.body);
    h_resp_free(&r);
}

Test(http, a_raw_nul_in_the_query_is_invalid_query)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    static const char req[] = "POST /locks/qnul?ttl_ms=5\0000 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char out[4096];
    exchange(req, sizeof req - 1, out, sizeof out);
    assert_one_json_error(out, 400, "invalid_query");
}

Test(http, a_content_length_that_is_no_length_gets_one_json_answer)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    const char *values[] = {"-1", "abc", "1 2"};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        char req[256], out[4096];
        int n = snprintf(req, sizeof req, "POST /locks/cl HTTP/1.1\r\nHost: a\r\nContent-Length: %s\r\n\r\n",
                         values[i]);
        exchange(req, (size_t)n, out, sizeof out);
        assert_one_json_error(out, 400, "invalid_json");
    }
    /* ... and the service still serves. */
    h_resp r;
    h_http(&C, "POST", "/locks/cl", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
}

Test(http, a_content_length_past_64_bits_gets_one_json_413)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    static const char req[] = "POST /locks/cl2 HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n";
    char out[4096];
    exchange(req, sizeof req - 1, out, sizeof out);
    assert_one_json_error(out, 413, "body_too_large");
}

Test(http, a_chunked_body_over_the_limit_is_a_json_413)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    size_t chunk = 8192, nchunks = 10; /* 80 KiB > 64 KiB */
    size_t cap = 256 + nchunks * (chunk + 16);
    char *req = malloc(cap), *p = req;
    p += sprintf(p, "POST /locks/chunky HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (size_t i = 0; i < nchunks; i++) {
        p += sprintf(p, "%zx\r\n", chunk);
        memset(p, ' ', chunk);
        p += chunk;
        p += sprintf(p, "\r\n");
    }
    p += sprintf(p, "0\r\n\r\n");
    char out[4096];
    exchange(req, (size_t)(p - req), out, sizeof out);
    free(req);
    cr_assert_eq(answers_in(out), 1, "%s", out);
    cr_assert(strncmp(out, "HTTP/1.1 413 ", 13) == 0, "%s", out);
    json_t *j = body_of(out);
    cr_assert_str_eq(json_string_value(json_object_get(j, "error")), "body_too_large");
    json_decref(j);
}

Test(http, a_header_over_the_connection_memory_gets_at_most_one_answer)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    /* libmicrohttpd answers this itself (431, its own body) and closes: never twice. */
    size_t n = 40000;
    char *req = malloc(n + 128);
    int k = sprintf(req, "GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: ");
    memset(req + k, 'a', n);
    strcpy(req + k + n, "\r\n\r\n");
    char out[8192];
    exchange(req, strlen(req), out, sizeof out);
    free(req);
    cr_assert_leq(answers_in(out), 1, "%s", out);
    if (answers_in(out))
        cr_assert(strncmp(out, "HTTP/1.1 431 ", 13) == 0, "%s", out);
}

/* ---- HEAD, Location, Retry-After ---- */

Test(http, head_answers_like_get_without_a_body)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    cr_assert_eq(h_acquire(&C, "head.x", "ttl_ms=10000", NULL, 0, NULL), 201);
    const char *paths[] = {"/locks/head.x", "/locks", "/healthz", "/readyz", "/metrics"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        char req[256], out[8192];
        int n = snprintf(req, sizeof req, "HEAD %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", paths[i]);
        exchange(req, (size_t)n, out, sizeof out);
        cr_assert(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "HEAD %s: %s", paths[i], out);
        cr_assert_eq(answers_in(out), 1, "%s", out);
        const char *end = strstr(out, "\r\n\r\n");
        cr_assert_not_null(end, "%s", out);
        cr_assert_str_eq(end + 4, "", "HEAD %s has no body: %s", paths[i], end + 4);
        cr_assert(strstr(out, "X-Request-Id: "), "%s", out);
    }
    /* And the 405 says so. */
    h_resp r;
    h_http(&C, "PUT", "/locks/head.x", NULL, &r);
    cr_assert_eq(r.status, 405);
    cr_assert_str_eq(r.allow, "GET, HEAD, POST, PATCH, DELETE");
    h_resp_free(&r);
}

Test(http, every_201_carries_a_location)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    h_resp r;
    h_http(&C, "POST", "/locks/loc%2Fone?ttl_ms=5000", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(r.location, "/locks/loc/one");
    h_resp_free(&r);
    h_http(&C, "POST", "/locks", "{\"names\":[\"loc.b\",\"loc.a\"],\"ttl_ms\":5000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(r.location, "/locks/loc.b", "a set: its first name");
    h_resp_free(&r);
    /* The Location answers a GET of that lock. */
    h_http(&C, "GET", "/locks/loc/one", NULL, &r);
    cr_assert(json_is_true(json_object_get(r.json, "held")), "%s", r.body);
    h_resp_free(&r);
    /* A streamed hold's 201 too (read as a raw answer: the stream stays open). */
    char out[4096] = "";
    static const char req[] = "POST /locks/loc.stream?hold=stream&ttl_ms=3000 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)C.svc.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)(sizeof req - 1));
    size_t got = 0;
    double end = h_now_ms() + 3000;
    while (!strstr(out, "\r\n\r\n") && got + 1 < sizeof out && h_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) == 1) {
            ssize_t n = recv(fd, out + got, sizeof out - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        out[got] = '\0';
    }
    close(fd);
    cr_assert(strncmp(out, "HTTP/1.1 201 ", 13) == 0, "%s", out);
    cr_assert(strstr(out, "\r\nLocation: /locks/loc.stream\r\n"), "%s", out);
}

Test(http, every_503_carries_retry_after)
{
    h_require_local(&C);
    for (int i = 0; i < 3; i++)
        h_redis_kill(&C.masters[i]);
    h_resp r;
    h_http(&C, "POST", "/locks/ra.x", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "quorum_unavailable");
    cr_assert_str_eq(r.retry_after, "1");
    h_resp_free(&r);
    h_http(&C, "GET", "/readyz", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(r.retry_after, "1");
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/ra.x", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(r.retry_after, "1");
    h_resp_free(&r);
}

/* ---- the first connections to the masters ---- */

Test(http, a_request_before_the_first_connections_waits_for_them)
{
    h_require_local(&C);
    /* Masters 300 ms away (150 ms each way): the handshake takes several round trips,
     * far longer than it takes to send a request once the port is known. */
    h_proxy *px[5];
    char masters[512] = "";
    for (int i = 0; i < C.n; i++) {
        px[i] = h_proxy_start(C.masters[i].port);
        h_proxy_set_delay(px[i], 150);
        char one[40];
        snprintf(one, sizeof one, "%s127.0.0.1:%d", i ? "," : "", h_proxy_port(px[i]));
        strcat(masters, one);
    }
    C.masters_override = masters;
    h_service s;
    h_service_start_nowait(&C, &s, "--node-timeout-ms 4000 --threads 1");
    C.masters_override = NULL;
    void *curl = NULL;
    h_resp r;
    double t0 = h_now_ms();
    h_http_to(s.url, &curl, "POST", "/locks/boot.x?ttl_ms=20000", NULL, &r);
    double took = h_now_ms() - t0;
    cr_assert_eq(r.status, 201, "answered %ld after %.0f ms: %s (log %s)", r.status, took, r.body, s.log);
    cr_assert_lt(took, 4000 + 2000);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    h_service_stop(&s);
    for (int i = 0; i < C.n; i++)
        h_proxy_stop(px[i]);
}

/* ---- GET's validity_ms ---- */

Test(http, get_validity_means_what_the_grants_means)
{
    h_require_local(&C);
    /* A large drift factor makes the allowance plain: 2002 ms of a 10 s ttl. */
    h_service s;
    h_service_start(&C, &s, "--drift-factor 0.2");
    void *curl = NULL;
    h_resp r;
    /* Every bound below is of time the client measured: on a busy machine the round,
     * and the wait between the answers, may each take a second or more. */
    double t0 = h_now_ms();
    h_http_to(s.url, &curl, "POST", "/locks/val.x?ttl_ms=10000", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    long long granted = h_int(&r, "validity_ms");
    double r_post_ms = r.ms;
    /* 10000 less 2002 of drift, less the round (at most what the request took). */
    cr_assert(granted >= 7998 - (long long)r.ms - 2 && granted <= 7998, "grant after %.0f ms: %s", r.ms,
              r.body);
    h_resp_free(&r);
    h_http_to(s.url, &curl, "GET", "/locks/val.x", NULL, &r);
    long long got = h_int(&r, "validity_ms");
    /* The masters' expiry, less the round and the drift on it: no less than the grant
     * less the time that passed since its round began (and the rounding), and no more
     * than the grant give or take that rounding -- and the grant's own round: the
     * holder's validity counts from the round's start, a master's expiry from the
     * moment it ran the SET, which on a busy machine is a round later. */
    double since = h_now_ms() - t0, round_ms = r_post_ms;
    cr_assert(got <= granted + (long long)round_ms + 2 && got >= granted - (long long)since - 2,
              "GET %lld, the grant said %lld (its round %.0f ms), %.0f ms before", got, granted, round_ms, since);
    h_resp_free(&r);
    h_http_to(s.url, &curl, "GET", "/locks?prefix=val.", NULL, &r);
    json_t *l = json_array_get(json_object_get(r.json, "locks"), 0);
    long long listed = json_integer_value(json_object_get(l, "validity_ms"));
    since = h_now_ms() - t0;
    cr_assert(listed <= granted + (long long)round_ms + 2 && listed >= granted - (long long)since - 2,
              "GET /locks %lld, the grant said %lld (its round %.0f ms), %.0f ms before", listed, granted,
              round_ms, since);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    h_service_stop(&s);
}

/* ---- request ids and traces ---- */

/* The X-Request-Id of a GET /healthz to base. */
static void id_of(const char *base, char *out, size_t cap)
{
    void *curl = NULL;
    h_resp r;
    h_http_to(base, &curl, "GET", "/healthz", NULL, &r);
    snprintf(out, cap, "%s", r.request_id);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
}

Test(http, request_ids_differ_across_replicas_and_restarts)
{
    h_require_local(&C);
    char a[80], b[80], c[80];
    h_service s1, s2;
    h_service_start(&C, &s1, "--threads 1");
    h_service_start(&C, &s2, "--threads 1");
    id_of(s1.url, a, sizeof a);
    id_of(s2.url, b, sizeof b);
    cr_assert_eq(strlen(a), 32, "%s", a);
    cr_assert_str_neq(a, b, "two replicas' first ids");
    h_service_stop(&s1);
    h_service_start(&C, &s1, "--threads 1");
    id_of(s1.url, c, sizeof c);
    cr_assert_str_neq(a, c, "the first ids before and after a restart");
    h_service_stop(&s1);
    h_service_stop(&s2);
}

Test(http, a_valid_traceparent_is_logged_with_the_request)
{
    h_require_local(&C);
    static const char good[] = "GET /locks/tp.x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
                               "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n";
    static const char bad[] = "GET /locks/tp.y HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
                              "traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01\r\n\r\n";
    char out[4096];
    exchange(good, sizeof good - 1, out, sizeof out);
    cr_assert(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "%s", out);
    exchange(bad, sizeof bad - 1, out, sizeof out);
    cr_assert(strncmp(out, "HTTP/1.1 200 ", 13) == 0, "an invalid traceparent is ignored: %s", out);
    double end = h_now_ms() + 5000;
    while (!(h_log_contains(&C.svc, "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"parent_id\":\"00f067aa0ba902b7\"") &&
             h_log_contains(&C.svc, "\"name\":\"tp.y\"")) &&
           h_now_ms() < end)
        usleep(20000);
    cr_assert(h_log_contains(&C.svc, "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"parent_id\":\"00f067aa0ba902b7\""),
              "see %s", C.svc.log);
    cr_assert(h_log_contains(&C.svc, "\"name\":\"tp.y\""), "see %s", C.svc.log);
    cr_assert_not(h_log_contains(&C.svc, "00000000000000000000000000000000"), "an invalid one is not logged");
}

/* ---- a master that stays down ---- */

/* Lines of s's log holding both needles. */
static int log_count(const h_service *s, const char *a, const char *b)
{
    FILE *f = fopen(s->log, "r");
    cr_assert(f, "cannot read %s", s->log);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, a) && strstr(line, b);
    fclose(f);
    return n;
}

Test(http, a_master_that_stays_down_is_logged_once_not_at_every_attempt)
{
    h_require_local(&C);
    char who[64];
    snprintf(who, sizeof who, "\"master\":\"127.0.0.1:%d\"", C.masters[4].port);
    h_redis_kill(&C.masters[4]);
    /* Reconnect attempts back off to one a second: 4.5 s see several fail. */
    double end = h_now_ms() + 4500;
    while (h_now_ms() < end)
        usleep(50000);
    cr_assert_eq(log_count(&C.svc, who, "\"to\":\"down\""), 1, "one line for the transition (see %s)", C.svc.log);
    cr_assert_eq(log_count(&C.svc, who, "still down"), 0, "the first repeat is due after 10 s (see %s)", C.svc.log);
    /* Its return is logged, with how long it was gone. */
    h_redis_restart(&C.masters[4], 0);
    end = h_now_ms() + 10000;
    while (!log_count(&C.svc, who, "down_for_ms") && h_now_ms() < end)
        usleep(50000);
    cr_assert_eq(log_count(&C.svc, who, "down_for_ms"), 1, "see %s", C.svc.log);
}
