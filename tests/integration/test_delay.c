/* test_delay.c -- lock-delay, bounded holds and the token check (issue 28; docs/DESIGN.md
 * section 14), against real masters and the real service:
 *
 * - A hold that ends without its holder's word -- a duplex holder that hangs up, a lock
 *   left to expire, a force -- keeps every other client out for its lock_delay_ms
 *   more (409 lock_held with "resting": true; GET shows resting_ms); a clean release
 *   (DELETE with the lease, a duplex {"release":true}) frees it at once, and a parked
 *   waiter is handed it at once, but only after the rest otherwise.
 * - A hold with max_hold_ms is never extended past it: a one-way and a duplex stream end
 *   with {"event":"expired","reason":"max_hold"} by then, and a PATCH that would pass it
 *   is refused (409 max_hold_exceeded with max_hold_left_ms) through the instance that
 *   granted it and through another one alike.
 * - GET /locks/{name}?token=T says whether T is the current holder's token, from the
 *   masters: before and after a handoff, and after another name of the same bucket of
 *   counters was granted (no false negative there).
 * - Bad parameters are 400 with a JSON body.
 *
 * Every bound is checked from below (nobody gets in before the rest is over: the
 * safety side) with the 5 ms a master's expiry may round by, and from above with room
 * for a loaded machine.  Each test prints its figures on stderr. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static char tokens[200];

#define ADMIN "admin-token-0123456789abcdef"
/* A master's expiry and the test's clock may differ by the rounding of a millisecond. */
#define SLACK_MS 5.0

static void start(const char *flags) { h_cluster_start(&C, 5, 0, flags); }

static void teardown(void)
{
    h_cluster_stop(&C);
    if (tokens[0])
        unlink(tokens);
}

TestSuite(delay, .fini = teardown, .timeout = 120);

/* ---- plain calls ---- */

static long call(const char *method, const char *path, const char *body, h_resp *out)
{
    return h_call(&C, method, path, body, out);
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static int jtrue(json_t *o, const char *key) { return json_is_true(json_object_get(o, key)); }

/* POST name (query) until it is granted, within timeout_ms: the moment of the grant's
 * answer (-1 if never).  Every refusal must be a 409 lock_held; *resting counts those
 * that said the lock rests. */
static double take_when_free(const char *name, const char *query, int timeout_ms, int *resting,
                             char *lease, size_t lcap)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?%s", name, query);
    double until = h_now_ms() + timeout_ms;
    while (h_now_ms() < until) {
        h_resp r;
        call("POST", path, NULL, &r);
        if (r.status == 201) {
            if (lease)
                snprintf(lease, lcap, "%s", h_str(&r, "lease"));
            h_resp_free(&r);
            return h_now_ms();
        }
        cr_assert_eq(r.status, 409, "refused as held, or resting: %ld %s", r.status, r.body);
        cr_assert_str_eq(h_str(&r, "error"), "lock_held", "%s", r.body);
        if (resting && jtrue(r.json, "resting"))
            (*resting)++;
        h_resp_free(&r);
        usleep(20 * 1000);
    }
    return -1;
}

/* ---- a duplex client on a raw socket (docs/DESIGN.md section 10) ---- */

typedef struct dx {
    int fd;
    long status;
    char buf[16384];
    size_t len;
    int eof;
    json_t *grant;
    char body[4096];
} dx;

static int url_port(const char *url)
{
    const char *c = strrchr(url, ':');
    return c ? atoi(c + 1) : 80;
}

static int dx_fill(dx *d, double until)
{
    if (d->eof)
        return -1;
    for (;;) {
        double left = until - h_now_ms();
        struct pollfd p = {.fd = d->fd, .events = POLLIN};
        int pr = poll(&p, 1, left > 0 ? (int)left : 0);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return 0;
        cr_assert_lt(d->len, sizeof d->buf - 1);
        ssize_t k = recv(d->fd, d->buf + d->len, sizeof d->buf - 1 - d->len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            d->eof = 1;
            return -1;
        }
        d->len += (size_t)k;
        return 1;
    }
}

/* The next line as JSON (the caller frees it), within timeout_ms; NULL on timeout or EOF. */
static json_t *dx_line(dx *d, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    char *nl;
    while (!(nl = memchr(d->buf, '\n', d->len)))
        if (dx_fill(d, until) <= 0)
            return NULL;
    size_t n = (size_t)(nl - d->buf);
    json_error_t e;
    json_t *j = json_loadb(d->buf, n, 0, &e);
    cr_assert(j, "a line that is not JSON: %.*s", (int)n, d->buf);
    memmove(d->buf, nl + 1, d->len - n - 1);
    d->len -= n + 1;
    return j;
}

static void dx_send(dx *d, const char *line)
{
    size_t n = strlen(line);
    cr_assert_eq(send(d->fd, line, n, MSG_NOSIGNAL), (ssize_t)n, "send: %s", strerror(errno));
}

/* POST path with the upgrade headers to the service at url: the status, and the grant
 * line of a 101 (or the body of anything else). */
static void dx_open(dx *d, const char *url, const char *path)
{
    memset(d, 0, sizeof *d);
    d->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(d->fd >= 0);
    int one = 1;
    setsockopt(d->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int port = url_port(url);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(connect(d->fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: Upgrade\r\n"
                     "Upgrade: redlock-hold\r\nContent-Length: 0\r\n\r\n",
                     path, port);
    cr_assert_eq(send(d->fd, req, (size_t)n, MSG_NOSIGNAL), n);
    double until = h_now_ms() + 10000;
    char *end;
    while (!(end = memmem(d->buf, d->len, "\r\n\r\n", 4)))
        cr_assert(dx_fill(d, until) > 0, "POST %s: no header", path);
    size_t hl = (size_t)(end - d->buf) + 4;
    cr_assert(sscanf(d->buf, "HTTP/1.1 %ld", &d->status) == 1);
    char head[4096];
    cr_assert_lt(hl, sizeof head);
    memcpy(head, d->buf, hl);
    head[hl] = '\0';
    memmove(d->buf, d->buf + hl, d->len - hl);
    d->len -= hl;
    if (d->status == 101) {
        d->grant = dx_line(d, 10000);
        cr_assert(d->grant, "101 without a grant line");
        return;
    }
    const char *cl = strcasestr(head, "\r\nContent-Length:");
    size_t want = cl ? (size_t)atol(cl + 17) : 0;
    while (d->len < want && dx_fill(d, until) > 0)
        ;
    cr_assert_lt(want, sizeof d->body);
    memcpy(d->body, d->buf, want);
    d->body[want] = '\0';
}

/* Ping n, the answer (or what came instead; NULL on timeout or EOF). */
static json_t *dx_ping(dx *d, long long n, int timeout_ms)
{
    char line[64];
    snprintf(line, sizeof line, "{\"ping\":%lld}\n", n);
    dx_send(d, line);
    return dx_line(d, timeout_ms);
}

static void dx_free(dx *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    if (d->grant)
        json_decref(d->grant);
    d->grant = NULL;
}

static int is_event(json_t *o, const char *event, const char *reason)
{
    return o && strcmp(jstr(o, "event"), event) == 0 && (!reason || strcmp(jstr(o, "reason"), reason) == 0);
}

/* ---- lock-delay ---- */

/* GET name: held, and how long it still rests (-1: not said). */
static int inspect(const char *name, long long *resting_ms)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s", name);
    h_resp r;
    cr_assert_eq(call("GET", path, NULL, &r), 200, "%s", r.body);
    int held = jtrue(r.json, "held");
    *resting_ms = jint(r.json, "resting_ms");
    h_resp_free(&r);
    return held;
}

struct rest_probe {
    const char *name;
};

static int not_held(void *arg)
{
    long long rest;
    return !inspect(((struct rest_probe *)arg)->name, &rest);
}

Test(delay, a_lock_left_to_expire_rests_for_its_lock_delay)
{
    start(NULL);
    h_resp r;
    double sent = h_now_ms();
    cr_assert_eq(call("POST", "/locks/d.expire?ttl_ms=800&lock_delay_ms=2000", NULL, &r), 201, "%s", r.body);
    cr_assert_eq(jint(r.json, "lock_delay_ms"), 2000, "the grant says its lock-delay: %s", r.body);
    long long v = jint(r.json, "validity_ms");
    cr_assert(v > 0 && v <= 800, "the holder's validity is counted from the ttl alone: %lld", v);
    h_resp_free(&r);
    /* Once its holder's part is over, GET shows it free and resting. */
    struct rest_probe p = {"d.expire"};
    cr_assert(h_wait_until(not_held, &p, 3000), "the holder's part ends with its ttl");
    double seen = h_now_ms();
    long long rest;
    cr_assert_eq(inspect("d.expire", &rest), 0);
    if (seen < sent + 2500) /* else the machine was too slow to see the rest at all */
        cr_assert(rest > 0 && rest <= 2000, "GET says when it frees: resting_ms %lld", rest);
    int resting = 0;
    double got = take_when_free("d.expire", "ttl_ms=5000", 10000, &resting, NULL, 0);
    cr_assert(got > 0, "granted once the rest is over");
    fprintf(stderr, "delay: expiry: ttl 800 + delay 2000: another client granted %.0f ms after the "
                    "grant's request (%d refusals said resting; GET showed resting_ms %lld at %.0f ms)\n",
            got - sent, resting, rest, seen - sent);
    cr_assert_geq(got, sent + 800 + 2000 - SLACK_MS, "nobody before the ttl and the delay: %.0f ms", got - sent);
    cr_assert_gt(resting, 0, "a 409 of a resting lock says so");
}

Test(delay, a_duplex_holder_that_hangs_up_leaves_the_lock_resting)
{
    start(NULL);
    dx d;
    dx_open(&d, C.svc.url, "/locks/d.hangup?hold=stream&ttl_ms=1000&lock_delay_ms=2500");
    cr_assert_eq(d.status, 101, "%s", d.body);
    cr_assert_eq(jint(d.grant, "lock_delay_ms"), 2500);
    json_t *a = dx_ping(&d, 1, 5000);
    cr_assert(is_event(a, "alive", NULL), "%s", a ? json_dumps(a, 0) : "nothing");
    json_decref(a);
    double closed = h_now_ms();
    dx_free(&d); /* gone without {"release":true} */
    int resting = 0;
    double got = take_when_free("d.hangup", "ttl_ms=5000", 15000, &resting, NULL, 0);
    cr_assert(got > 0, "granted once the rest is over");
    fprintf(stderr, "delay: duplex hang-up: ttl 1000, delay 2500: another client granted %.0f ms after "
                    "the hang-up (%d refusals said resting)\n",
            got - closed, resting);
    cr_assert_geq(got, closed + 2500 - SLACK_MS, "nobody within the delay of the hang-up: %.0f ms",
                  got - closed);
    cr_assert_gt(resting, 0);
}

Test(delay, a_clean_release_frees_at_once_and_a_waiter_is_handed_it)
{
    start(NULL);
    /* DELETE with the lease: no rest. */
    char lease[200];
    cr_assert_eq(h_acquire(&C, "d.clean", "ttl_ms=5000&lock_delay_ms=3000", lease, sizeof lease, NULL), 201);
    cr_assert_eq(h_release(&C, "d.clean", lease), 200);
    double t0 = h_now_ms();
    cr_assert_eq(h_acquire(&C, "d.clean", "ttl_ms=5000&lock_delay_ms=3000", lease, sizeof lease, NULL), 201,
                 "a clean release frees it at once");
    /* A duplex {"release":true}: no rest either. */
    cr_assert_eq(h_release(&C, "d.clean", lease), 200);
    dx d;
    dx_open(&d, C.svc.url, "/locks/d.clean?hold=stream&ttl_ms=2000&lock_delay_ms=3000");
    cr_assert_eq(d.status, 101, "%s", d.body);
    json_t *a = dx_ping(&d, 1, 5000);
    cr_assert(is_event(a, "alive", NULL));
    json_decref(a);
    dx_send(&d, "{\"release\":true}\n");
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "released", "requested"), "%s", l ? json_dumps(l, 0) : "nothing");
    json_decref(l);
    dx_free(&d);
    cr_assert_eq(h_acquire(&C, "d.clean", "ttl_ms=5000", lease, sizeof lease, NULL), 201,
                 "a duplex release frees it at once");
    cr_assert_eq(h_release(&C, "d.clean", lease), 200);
    fprintf(stderr, "delay: clean releases: granted again at once (%.0f ms for both)\n", h_now_ms() - t0);
}

struct waiter {
    pthread_t th;
    const char *url;
    char path[200];
    long status;
    long long token;
    double done_ms;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(w->url, &curl, "POST", w->path, NULL, &r);
    w->status = r.status;
    w->token = h_int(&r, "fencing_token");
    w->done_ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static void waiter_start(struct waiter *w, const char *name, long wait_ms)
{
    memset(w, 0, sizeof *w);
    w->url = C.svc.url;
    snprintf(w->path, sizeof w->path, "/locks/%s?ttl_ms=5000&wait_ms=%ld", name, wait_ms);
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

static int one_parked(void *arg)
{
    (void)arg;
    return h_metric(C.svc.url, &C.curl, "redlockd_parked_waiters") >= 1;
}

Test(delay, a_parked_waiter_gets_the_lock_only_after_the_rest)
{
    start(NULL);
    /* The holder's hold ends by expiry: the waiter, parked on the same instance, is
     * granted no sooner than the ttl and the delay after the holder's request. */
    double sent = h_now_ms();
    cr_assert_eq(h_acquire(&C, "d.wait", "ttl_ms=700&lock_delay_ms=1500", NULL, 0, NULL), 201);
    struct waiter w;
    waiter_start(&w, "d.wait", 10000);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the waiter parks");
    pthread_join(w.th, NULL);
    cr_assert_eq(w.status, 201, "the waiter gets it after the rest");
    fprintf(stderr, "delay: a parked waiter: granted %.0f ms after the holder's request (ttl 700 + delay 1500)\n",
            w.done_ms - sent);
    cr_assert_geq(w.done_ms, sent + 700 + 1500 - SLACK_MS);
    /* A clean release hands it over at once. */
    char lease[200];
    cr_assert_eq(h_acquire(&C, "d.wait2", "ttl_ms=10000&lock_delay_ms=5000", lease, sizeof lease, NULL), 201);
    waiter_start(&w, "d.wait2", 10000);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the waiter parks");
    double rel = h_now_ms();
    cr_assert_eq(h_release(&C, "d.wait2", lease), 200);
    pthread_join(w.th, NULL);
    cr_assert_eq(w.status, 201);
    fprintf(stderr, "delay: a clean release with a 5000 ms lock-delay: the waiter granted %.0f ms later\n",
            w.done_ms - rel);
    cr_assert_lt(w.done_ms - rel, 2000, "handed over at once, not after the delay");
}

static const char *write_tokens(void)
{
    snprintf(tokens, sizeof tokens, "/tmp/redlockd-delay-%d.tokens", (int)getpid());
    FILE *f = fopen(tokens, "w");
    cr_assert(f);
    fputs(ADMIN " +admin\n", f);
    fclose(f);
    return tokens;
}

Test(delay, a_force_leaves_the_lock_resting_and_a_second_force_ends_the_rest)
{
    char flags[300];
    snprintf(flags, sizeof flags, "--auth-tokens-file %s", write_tokens());
    start(flags);
    h_require_local(&C);
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "d.force", "ttl_ms=30000&lock_delay_ms=2000", lease, sizeof lease, NULL), 201);
    h_resp r;
    double forced = h_now_ms();
    cr_assert_eq(call("DELETE", "/locks/d.force?force=true", NULL, &r), 200, "%s", r.body);
    cr_assert(jtrue(r.json, "forced") && jtrue(r.json, "resting"), "the answer says it rests: %s", r.body);
    h_resp_free(&r);
    long long rest;
    cr_assert_eq(inspect("d.force", &rest), 0, "broken: nobody holds it");
    cr_assert(rest > 0 && rest <= 2000, "resting_ms %lld", rest);
    char path[300];
    snprintf(path, sizeof path, "/locks/d.force?lease=%s", lease);
    cr_assert_eq(call("PATCH", path, NULL, NULL), 404, "the broken holder cannot extend");
    int resting = 0;
    double got = take_when_free("d.force", "ttl_ms=30000&lock_delay_ms=2000", 10000, &resting, lease, sizeof lease);
    cr_assert(got > 0);
    fprintf(stderr, "delay: force with a 2000 ms lock-delay: another client granted %.0f ms after the force "
                    "(%d refusals said resting)\n", got - forced, resting);
    cr_assert_geq(got, forced + 2000 - SLACK_MS);
    /* A second force ends a rest at once. */
    cr_assert_eq(call("DELETE", "/locks/d.force?force=true", NULL, NULL), 200);
    cr_assert_eq(call("DELETE", "/locks/d.force?force=true", NULL, &r), 200);
    cr_assert(!jtrue(r.json, "resting"), "the rest is over: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(h_acquire(&C, "d.force", "ttl_ms=5000", NULL, 0, NULL), 201, "free at once");
}

/* ---- bounded holds ---- */

/* A one-way stream (curl, in a thread): its lines with the time each came. */
struct oneway {
    pthread_t th;
    char url[300];
    char lines[16][256];
    double at[16];
    int n;
    char part[512];
    size_t plen;
};

static size_t oneway_body(char *p, size_t sz, size_t nm, void *arg)
{
    struct oneway *o = arg;
    size_t n = sz * nm;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            if (o->n < 16) {
                snprintf(o->lines[o->n], sizeof o->lines[0], "%.*s", (int)o->plen, o->part);
                o->at[o->n++] = h_now_ms();
            }
            o->plen = 0;
        } else if (o->plen < sizeof o->part - 1) {
            o->part[o->plen++] = p[i];
        }
    }
    return n;
}

static void *oneway_main(void *arg)
{
    struct oneway *o = arg;
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, o->url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, oneway_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, o);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_perform(c);
    curl_easy_cleanup(c);
    return NULL;
}

Test(delay, a_one_way_stream_ends_expired_at_its_bound)
{
    start(NULL);
    struct oneway o;
    memset(&o, 0, sizeof o);
    snprintf(o.url, sizeof o.url, "%s/locks/d.oneway?hold=stream&ttl_ms=1000&max_hold_ms=3000", C.svc.url);
    double sent = h_now_ms();
    cr_assert_eq(pthread_create(&o.th, NULL, oneway_main, &o), 0);
    pthread_join(o.th, NULL);
    cr_assert_geq(o.n, 3, "the grant, extensions and a last line");
    json_error_t e;
    json_t *g = json_loads(o.lines[0], 0, &e);
    cr_assert(g && jint(g, "max_hold_ms") == 3000, "the grant says its bound: %s", o.lines[0]);
    json_decref(g);
    json_t *last = json_loads(o.lines[o.n - 1], 0, &e);
    cr_assert(is_event(last, "expired", "max_hold"), "the last line: %s", o.lines[o.n - 1]);
    json_decref(last);
    double ended = o.at[o.n - 1];
    /* Every extension's validity, counted from its arrival, ends by the bound. */
    for (int i = 1; i < o.n - 1; i++) {
        json_t *x = json_loads(o.lines[i], 0, &e);
        cr_assert(is_event(x, "extended", NULL), "%s", o.lines[i]);
        cr_assert_leq(o.at[i] + (double)jint(x, "validity_ms"), o.at[0] + 3000 + SLACK_MS + 50,
                      "an extension never outlasts the bound: %s at %.0f ms", o.lines[i], o.at[i] - sent);
        json_decref(x);
    }
    fprintf(stderr, "delay: one-way stream, ttl 1000, max_hold 3000: %d lines, expired at %.0f ms\n", o.n,
            ended - sent);
    /* the bound runs from the grant on the masters: by the grant line's receipt */
    cr_assert_leq(ended, o.at[0] + 3000 + SLACK_MS + 50, "said by the bound");
    cr_assert_geq(ended, sent + 3000 - 1000, "not a ttl before it");
    /* Nothing rests (no lock-delay): free by the bound. */
    cr_assert(take_when_free("d.oneway", "ttl_ms=5000", 5000, NULL, NULL, 0) > 0);
}

Test(delay, a_duplex_hold_ends_expired_at_its_bound_and_then_rests)
{
    start(NULL);
    dx d;
    double sent = h_now_ms();
    dx_open(&d, C.svc.url, "/locks/d.duplex?hold=stream&ttl_ms=1000&max_hold_ms=2500&lock_delay_ms=1500");
    /* The bound runs from the grant on each master (its SET), some time between the
     * request's sending and the grant's receipt: upper bounds count from the receipt,
     * lower ones from the sending (a round on a busy machine took 80 ms). */
    double got_grant = h_now_ms();
    cr_assert_eq(d.status, 101, "%s", d.body);
    cr_assert_eq(jint(d.grant, "max_hold_ms"), 2500);
    double believed = sent + (double)jint(d.grant, "validity_ms");
    json_t *last = NULL;
    for (long long n = 1; n < 100; n++) {
        double ps = h_now_ms();
        json_t *a = dx_ping(&d, n, 5000);
        cr_assert(a, "an answer or a last line");
        if (!is_event(a, "alive", NULL)) {
            last = a;
            break;
        }
        double until = ps + (double)jint(a, "validity_ms");
        cr_assert_leq(until, got_grant + 2500 + SLACK_MS + 50, "no answer outlasts the bound: %.0f ms (the grant "
                      "answered at %.0f ms)", until - sent, got_grant - sent);
        if (until > believed)
            believed = until;
        json_decref(a);
        usleep(200 * 1000);
    }
    double ended = h_now_ms();
    cr_assert(is_event(last, "expired", "max_hold"), "%s", last ? json_dumps(last, 0) : "nothing");
    json_decref(last);
    fprintf(stderr, "delay: duplex, ttl 1000, max_hold 2500, delay 1500: expired at %.0f ms, believed until "
                    "%.0f ms\n", ended - sent, believed - sent);
    /* When the last line was read, not sent: the client reads it at its next ping, up
     * to the 200 ms it sleeps between pings later, and later still on a busy machine
     * (2606 ms, against 2406 to 2463 ms in 10 other runs).  What the holder may count on
     * is bounded above, answer by answer; this only says the hold did end near it. */
    cr_assert_leq(ended, got_grant + 2500 + SLACK_MS + 200 + 500, "the last line read %.0f ms after the grant",
                  ended - got_grant);
    dx_free(&d);
    /* At its bound the hold ended without its holder's word: it rests. */
    double got = take_when_free("d.duplex", "ttl_ms=5000", 10000, NULL, NULL, 0);
    cr_assert(got > 0);
    cr_assert_geq(got, believed + 1500 - SLACK_MS, "the rest follows what the holder was told");
}

static long patch(const char *base, void **curl, const char *name, const char *lease, long ttl, h_resp *out)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?lease=%s&ttl_ms=%ld", name, lease, ttl);
    h_http_to(base, curl, "PATCH", path, NULL, out);
    return out->status;
}

Test(delay, a_patch_past_the_bound_is_refused_through_any_instance)
{
    h_require_local(&C); /* a second instance of its own */
    if (getenv("REDLOCK_TEST_URL"))
        cr_skip_test("starts a second redlockd of its own: not against an external stack");
    start(NULL);
    h_service b;
    h_service_start(&C, &b, NULL);
    void *cb = NULL;
    char lease[200];
    double sent = h_now_ms();
    cr_assert_eq(h_acquire(&C, "d.patch", "ttl_ms=1000&max_hold_ms=4000", lease, sizeof lease, NULL), 201);
    double got_grant = h_now_ms(); /* the bound runs from the SETs: by now */
    h_resp r;
    /* Within the bound: granted, with what is left of it. */
    cr_assert_eq(patch(C.svc.url, &C.curl, "d.patch", lease, 1000, &r), 200, "%s", r.body);
    long long left = jint(r.json, "max_hold_left_ms");
    cr_assert(left > 0 && left <= 4000, "max_hold_left_ms %lld", left);
    h_resp_free(&r);
    cr_assert_eq(patch(b.url, &cb, "d.patch", lease, 1000, &r), 200, "the other instance too: %s", r.body);
    h_resp_free(&r);
    /* Past it, through either: 409, and what is left. */
    cr_assert_eq(patch(C.svc.url, &C.curl, "d.patch", lease, 5000, &r), 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "max_hold_exceeded");
    left = jint(r.json, "max_hold_left_ms");
    cr_assert(left > 0 && left < 4000, "%s", r.body);
    h_resp_free(&r);
    cr_assert_eq(patch(b.url, &cb, "d.patch", lease, 5000, &r), 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "max_hold_exceeded");
    h_resp_free(&r);
    /* Keep it through the other instance until the bound stops it. */
    int refused = 0;
    double last_ok = sent, last_end = sent;
    while (h_now_ms() < sent + 6000) {
        double ps = h_now_ms();
        long st = patch(b.url, &cb, "d.patch", lease, 1000, &r);
        if (st == 200) {
            last_ok = ps;
            last_end = ps + (double)jint(r.json, "validity_ms");
        } else {
            cr_assert_eq(st, 409, "%s", r.body);
            cr_assert_str_eq(h_str(&r, "error"), "max_hold_exceeded");
            refused = 1;
            left = jint(r.json, "max_hold_left_ms");
            h_resp_free(&r);
            break;
        }
        h_resp_free(&r);
        usleep(150 * 1000);
    }
    cr_assert(refused, "refused before the bound is passed");
    fprintf(stderr, "delay: PATCH through a second instance: the last one granted at %.0f ms (valid until "
                    "%.0f ms), then 409 with max_hold_left_ms %lld\n", last_ok - sent, last_end - sent, left);
    cr_assert_leq(last_end, got_grant + 4000 + SLACK_MS + 50, "no extension outlasts the bound");
    /* What is left may still be asked for, and no more. */
    if (left > 100) {
        cr_assert_eq(patch(C.svc.url, &C.curl, "d.patch", lease, left - 60, &r), 200, "%s", r.body);
        h_resp_free(&r);
    }
    h_service_stop(&b);
    curl_easy_cleanup(cb);
}

Test(delay, a_reacquire_with_the_same_lease_keeps_the_bound)
{
    start(NULL);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "d.re", "ttl_ms=1000&max_hold_ms=1500&reentrant=true", lease, sizeof lease, NULL), 201);
    double got_grant = h_now_ms(); /* the bound runs from the SETs: by now */
    usleep(600 * 1000);
    char q[300];
    snprintf(q, sizeof q, "ttl_ms=1000&reentrant=true&lease=%s", lease);
    h_resp r;
    char path[400];
    snprintf(path, sizeof path, "/locks/d.re?%s", q);
    cr_assert_eq(call("POST", path, NULL, &r), 201, "%s", r.body);
    double v = (double)jint(r.json, "validity_ms");
    h_resp_free(&r);
    cr_assert_leq(h_now_ms() + v, got_grant + 1500 + SLACK_MS + 50, "a re-entry never passes the hold's bound");
}

/* ---- the token check ---- */

static int check(const char *name, long long token, int *held)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?token=%lld", name, token);
    h_resp r;
    cr_assert_eq(call("GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert_eq(jint(r.json, "token"), token);
    int cur = jtrue(r.json, "current");
    if (held)
        *held = jtrue(r.json, "held");
    cr_assert(json_is_boolean(json_object_get(r.json, "current")), "%s", r.body);
    h_resp_free(&r);
    return cur;
}

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

Test(delay, the_token_check_follows_a_handoff_and_ignores_the_buckets_other_names)
{
    start(NULL);
    char lease[200];
    long long t1;
    cr_assert_eq(h_acquire(&C, "d.tok", "ttl_ms=20000", lease, sizeof lease, &t1), 201);
    int held;
    cr_assert_eq(check("d.tok", t1, &held), 1, "the holder's token is current");
    cr_assert(held);
    cr_assert_eq(check("d.tok", t1 + 1, NULL), 0, "a token nobody holds is not");
    /* Another name of the same bucket of counters, granted since: the holder's token
     * stays current (it is stored with its keys, not read from the counter). */
    char other[64] = "";
    for (int i = 0; i < 2000000 && !other[0]; i++) {
        char cand[64];
        snprintf(cand, sizeof cand, "d.tok.%d", i);
        if (fnv(cand) % 16384 == fnv("d.tok") % 16384)
            snprintf(other, sizeof other, "%s", cand);
    }
    cr_assert(other[0], "a name of the same bucket");
    long long to;
    cr_assert_eq(h_acquire(&C, other, "ttl_ms=20000", NULL, 0, &to), 201);
    cr_assert_gt(to, t1, "the bucket's counter moved");
    h_resp r;
    char path[300];
    snprintf(path, sizeof path, "/locks/d.tok");
    cr_assert_eq(call("GET", path, NULL, &r), 200);
    cr_assert_gt(jint(r.json, "fencing_token"), t1, "GET answers the bucket's counter: above the holder's");
    h_resp_free(&r);
    cr_assert_eq(check("d.tok", t1, NULL), 1, "no false negative after another name of the bucket");
    cr_assert_eq(check("d.tok", to, NULL), 0, "nor a false positive for the other name's token");
    /* A handoff: the waiter's token is current, the old one is not. */
    struct waiter w;
    waiter_start(&w, "d.tok", 10000);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the waiter parks");
    cr_assert_eq(h_release(&C, "d.tok", lease), 200);
    pthread_join(w.th, NULL);
    cr_assert_eq(w.status, 201);
    fprintf(stderr, "delay: token check: %lld current, then handed over: %lld\n", t1, w.token);
    cr_assert_gt(w.token, t1);
    cr_assert_eq(check("d.tok", t1, &held), 0, "the old holder's token is not current after the handoff");
    cr_assert(held);
    cr_assert_eq(check("d.tok", w.token, NULL), 1, "the new holder's is");
    /* A reentrant acquire keeps its token: still current. */
    cr_assert_eq(h_acquire(&C, "d.tok2", "ttl_ms=20000&reentrant=true", lease, sizeof lease, &t1), 201);
    char q[300];
    snprintf(q, sizeof q, "ttl_ms=20000&reentrant=true&lease=%s", lease);
    long long t2;
    cr_assert_eq(h_acquire(&C, "d.tok2", q, NULL, 0, &t2), 201);
    cr_assert_eq(t2, t1, "a re-entry answers the hold's own token");
    cr_assert_eq(check("d.tok2", t1, NULL), 1);
    /* Free: nothing is current. */
    cr_assert_eq(h_release(&C, "d.tok2", lease), 200);
    cr_assert_eq(h_release(&C, "d.tok2", lease), 200);
    cr_assert_eq(check("d.tok2", t1, &held), 0);
    cr_assert(!held);
}

/* ---- bad parameters ---- */

struct bad {
    const char *method, *path, *body;
    long status;
    const char *code;
};

Test(delay, bad_parameters_are_400_with_a_json_body)
{
    start(NULL);
    static const struct bad cases[] = {
        {"POST", "/locks/b?lock_delay_ms=-1", NULL, 400, "invalid_lock_delay"},
        {"POST", "/locks/b?lock_delay_ms=abc", NULL, 400, "invalid_lock_delay"},
        {"POST", "/locks/b?lock_delay_ms=3600001", NULL, 400, "invalid_lock_delay"},
        {"POST", "/locks/b", "{\"lock_delay_ms\":\"5\"}", 400, "invalid_lock_delay"},
        {"POST", "/locks/b?mode=shared&lock_delay_ms=5", NULL, 400, "invalid_lock_delay"},
        {"POST", "/semaphores/b?permits=2&lock_delay_ms=5", NULL, 400, "invalid_lock_delay"},
        {"POST", "/locks", "{\"names\":[\"a\",\"b\"],\"lock_delay_ms\":5}", 400, "invalid_lock_delay"},
        {"PATCH", "/locks/b?lease=AAAAAAAAAAAAAAAAAAAA&lock_delay_ms=5", NULL, 400, "invalid_query"},
        {"POST", "/locks/b?ttl_ms=2000&max_hold_ms=1000", NULL, 400, "invalid_max_hold"},
        {"POST", "/locks/b?max_hold_ms=x", NULL, 400, "invalid_max_hold"},
        {"POST", "/locks/b", "{\"max_hold_ms\":-3}", 400, "invalid_max_hold"},
        {"POST", "/locks/b?mode=shared&max_hold_ms=50000", NULL, 400, "invalid_max_hold"},
        {"POST", "/semaphores/b?permits=2&max_hold_ms=50000", NULL, 400, "invalid_max_hold"},
        {"DELETE", "/locks/b?lease=AAAAAAAAAAAAAAAAAAAA", "{\"max_hold_ms\":50000}", 400, "invalid_max_hold"},
        {"GET", "/locks/b?token=0", NULL, 400, "invalid_token"},
        {"GET", "/locks/b?token=-4", NULL, 400, "invalid_token"},
        {"GET", "/locks/b?token=18446744073709551616", NULL, 400, "invalid_token"},
        {"GET", "/locks/b?token=4&index=2", NULL, 400, "invalid_query"},
        {"GET", "/semaphores/b?token=4", NULL, 400, "invalid_query"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h_resp r;
        call(cases[i].method, cases[i].path, cases[i].body, &r);
        cr_assert_eq(r.status, cases[i].status, "%s %s: %ld %s", cases[i].method, cases[i].path, r.status, r.body);
        cr_assert(r.json, "%s %s: a JSON body: %s", cases[i].method, cases[i].path, r.body);
        cr_assert_str_eq(h_str(&r, "error"), cases[i].code, "%s %s: %s", cases[i].method, cases[i].path, r.body);
        cr_assert(*h_str(&r, "message"));
        h_resp_free(&r);
    }
    /* At the limits: accepted. */
    cr_assert_eq(call("POST", "/locks/b.ok?ttl_ms=2000&max_hold_ms=2000&lock_delay_ms=3600000", NULL, NULL), 201);
    cr_assert_eq(call("POST", "/locks/b.ok2?max_hold_ms=0&lock_delay_ms=0", NULL, NULL), 201);
}
