/* test_streams.c -- locks held for as long as their connection is open
 * (POST /locks/{name}?hold=stream, service/hold.h).
 *
 * - A streamed hold outlives its ttl three times over while nobody else can take the
 *   name, announcing each extension with a validity within (0, ttl].
 * - The client closing the connection frees the lock at once, handed to a parked
 *   waiter.
 * - Three of five masters frozen: "lost" arrives before the validity last announced
 *   ends, and the stream ends.
 * - A DELETE with the lease, here or through another instance, ends the stream with
 *   "released"; SIGTERM ends it with "released" ("shutting_down") after letting the
 *   lock go on every master.
 * - Not granted: the usual 409, no stream; --max-streams bounds them (503); hold other
 *   than "stream", or on another method or on POST /locks, is 400 invalid_hold.
 * - The lease appears in the grant line only.
 *
 * The stream is read on a raw socket by a small HTTP/1.1 client (chunked transfer
 * coding, one JSON object a line), each line stamped with the monotonic time it was
 * received; every read has a deadline, and every wait is on a condition. */
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

static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }

static void teardown(void)
{
    /* A test that failed with masters frozen: never leave them stopped (the cluster's
     * stop continues them too, before it kills them). */
    if (!C.external)
        for (int i = 0; i < C.n; i++)
            if (C.masters[i].pid > 0)
                h_redis_thaw(&C.masters[i]);
    h_cluster_stop(&C);
}

TestSuite(streams, .init = setup, .fini = teardown, .timeout = 90);

/* ---- a streaming HTTP/1.1 client on a raw socket ---- */

#define ST_MAX_LINES 1024

typedef struct st_line {
    char *text;
    json_t *json; /* NULL if the line is not JSON */
    double t;     /* monotonic ms when the bytes that completed it were received */
} st_line;

typedef struct stream {
    int fd;
    long status;
    char content_type[128];
    char cache_control[128];
    int chunked;
    long content_length; /* -1: none */
    /* chunked decoding */
    enum { CH_SIZE, CH_DATA, CH_DATA_CRLF, CH_TRAILER, CH_DONE } state;
    size_t chunk_left;
    char raw[65536]; /* received, not yet decoded */
    size_t raw_len;
    char part[4096]; /* a line not yet complete */
    size_t part_len;
    char body[32768]; /* the whole decoded body (as far as it fits) */
    size_t body_len;
    json_t *json;     /* a non-streamed body, parsed */
    st_line lines[ST_MAX_LINES];
    int n, next;      /* lines received; the next one st_next() returns */
    int done;         /* the terminal chunk (or the whole Content-Length) came */
    int eof;          /* the service closed the connection */
    int closed;       /* we closed it */
    double rx_t;      /* when the last bytes were received */
} stream;

/* host and port of a service URL ("http://127.0.0.1:PORT"); skips the test for https. */
static void url_port(const char *url, char *host, size_t hostlen, int *port)
{
    if (strncmp(url, "https://", 8) == 0)
        cr_skip_test("the raw streaming client speaks plain HTTP only");
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *colon = strrchr(h, ':');
    size_t hl = colon ? (size_t)(colon - h) : strcspn(h, "/");
    if (hl >= hostlen)
        hl = hostlen - 1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = colon ? atoi(colon + 1) : 80;
}

static void push_line(stream *s, const char *p, size_t n, double t)
{
    cr_assert_lt(s->n, ST_MAX_LINES, "too many lines on one stream");
    st_line *l = &s->lines[s->n++];
    l->text = strndup(p, n);
    cr_assert(l->text);
    l->t = t;
    json_error_t e;
    l->json = json_loads(l->text, 0, &e);
}

/* Decoded body bytes: kept whole in body, and cut into lines. */
static void body_bytes(stream *s, const char *p, size_t n, double t)
{
    size_t room = sizeof s->body - 1 - s->body_len;
    size_t k = n < room ? n : room;
    memcpy(s->body + s->body_len, p, k);
    s->body_len += k;
    s->body[s->body_len] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            push_line(s, s->part, s->part_len, t);
            s->part_len = 0;
        } else {
            cr_assert_lt(s->part_len, sizeof s->part - 1, "a line longer than %zu bytes", sizeof s->part);
            s->part[s->part_len++] = p[i];
        }
    }
}

/* Decode what raw holds (chunked, or up to Content-Length). */
static void decode(stream *s, double t)
{
    size_t off = 0;
    if (!s->chunked) {
        size_t take = s->raw_len;
        if (s->content_length >= 0 && take > (size_t)s->content_length - s->body_len)
            take = (size_t)s->content_length - s->body_len;
        body_bytes(s, s->raw, take, t);
        s->raw_len = 0;
        if (s->content_length >= 0 && s->body_len >= (size_t)s->content_length)
            s->done = 1;
        return;
    }
    while (s->state != CH_DONE && off < s->raw_len) {
        char *p = s->raw + off;
        size_t avail = s->raw_len - off;
        if (s->state == CH_SIZE || s->state == CH_TRAILER) {
            char *crlf = memmem(p, avail, "\r\n", 2);
            if (!crlf)
                break;
            size_t ll = (size_t)(crlf - p);
            if (s->state == CH_SIZE) {
                char hex[32];
                cr_assert(ll > 0 && ll < sizeof hex, "bad chunk size line");
                memcpy(hex, p, ll);
                hex[ll] = '\0';
                char *end;
                unsigned long sz = strtoul(hex, &end, 16);
                cr_assert(end != hex && (*end == '\0' || *end == ';' || *end == ' '), "bad chunk size '%s'", hex);
                s->chunk_left = sz;
                s->state = sz ? CH_DATA : CH_TRAILER;
            } else if (ll == 0) {
                s->state = CH_DONE; /* the terminal chunk's empty trailer */
                s->done = 1;
            }
            off += ll + 2;
        } else if (s->state == CH_DATA) {
            size_t k = avail < s->chunk_left ? avail : s->chunk_left;
            body_bytes(s, p, k, t);
            s->chunk_left -= k;
            off += k;
            if (!s->chunk_left)
                s->state = CH_DATA_CRLF;
        } else { /* CH_DATA_CRLF */
            if (avail < 2)
                break;
            cr_assert(p[0] == '\r' && p[1] == '\n', "no CRLF after a chunk's data");
            off += 2;
            s->state = CH_SIZE;
        }
    }
    memmove(s->raw, s->raw + off, s->raw_len - off);
    s->raw_len -= off;
}

/* Wait up to until (monotonic ms) for bytes; 1 if some came, 0 on timeout, -1 at EOF. */
static int fill(stream *s, double until)
{
    if (s->eof || s->closed)
        return -1;
    for (;;) {
        double left = until - h_now_ms();
        if (left < 0)
            left = 0;
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        cr_assert(pr >= 0, "poll: %s", strerror(errno));
        if (pr == 0)
            return 0;
        cr_assert_lt(s->raw_len, sizeof s->raw, "receive buffer full");
        ssize_t r = recv(s->fd, s->raw + s->raw_len, sizeof s->raw - s->raw_len, 0);
        double t = h_now_ms();
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) { /* a reset counts as the end too */
            s->eof = 1;
            return -1;
        }
        s->raw_len += (size_t)r;
        s->rx_t = t;
        return 1;
    }
}

/* Send a request (body: JSON or NULL) and read the status line and headers (and a
 * non-streamed body whole).  Asserts on failure, within timeout_ms. */
static void st_open(stream *s, const char *url, const char *method, const char *path, const char *body,
                    int timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->content_length = -1;
    char host[64];
    int port;
    url_port(url, host, sizeof host, &port);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(s->fd >= 0);
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    cr_assert(inet_pton(AF_INET, host, &sa.sin_addr) == 1, "host %s", host);
    cr_assert(connect(s->fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    char req[2048], auth[300] = "";
    const char *tok = getenv("REDLOCK_TEST_TOKEN");
    if (tok && *tok)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", tok);
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s%sContent-Length: %zu\r\n\r\n%s", method, path,
                     host, port, auth, body ? "Content-Type: application/json\r\n" : "",
                     body ? strlen(body) : 0, body ? body : "");
    cr_assert(n > 0 && (size_t)n < sizeof req);
    cr_assert_eq(send(s->fd, req, (size_t)n, MSG_NOSIGNAL), n, "send: %s", strerror(errno));

    double until = h_now_ms() + timeout_ms;
    char *end;
    while (!(end = memmem(s->raw, s->raw_len, "\r\n\r\n", 4))) {
        int f = fill(s, until);
        cr_assert(f != 0, "%s %s: no answer within %d ms", method, path, timeout_ms);
        cr_assert(f > 0, "%s %s: connection closed before the headers", method, path);
    }
    *end = '\0';
    cr_assert(sscanf(s->raw, "HTTP/1.%*d %ld", &s->status) == 1, "status line: %.80s", s->raw);
    for (char *line = strstr(s->raw, "\r\n"); line && line < end; line = strstr(line, "\r\n")) {
        line += 2;
        char *eol = strstr(line, "\r\n");
        size_t ll = eol ? (size_t)(eol - line) : strlen(line);
        char *colon = memchr(line, ':', ll);
        if (!colon)
            continue;
        size_t kl = (size_t)(colon - line);
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        size_t vl = (size_t)(line + ll - v);
        char val[128];
        snprintf(val, sizeof val, "%.*s", (int)vl, v);
        if (kl == 12 && strncasecmp(line, "Content-Type", kl) == 0)
            snprintf(s->content_type, sizeof s->content_type, "%s", val);
        else if (kl == 13 && strncasecmp(line, "Cache-Control", kl) == 0)
            snprintf(s->cache_control, sizeof s->cache_control, "%s", val);
        else if (kl == 17 && strncasecmp(line, "Transfer-Encoding", kl) == 0)
            s->chunked = strcasestr(val, "chunked") != NULL;
        else if (kl == 14 && strncasecmp(line, "Content-Length", kl) == 0)
            s->content_length = atol(val);
    }
    size_t hl = (size_t)(end - s->raw) + 4;
    memmove(s->raw, s->raw + hl, s->raw_len - hl);
    s->raw_len -= hl;
    if (!s->chunked && s->content_length < 0)
        s->content_length = 0; /* neither: no body (these tests never see one) */
    decode(s, s->rx_t);
    if (!s->chunked) { /* an ordinary answer: read it whole */
        while (!s->done) {
            int f = fill(s, until);
            cr_assert(f > 0, "%s %s: the body did not come whole", method, path);
            decode(s, s->rx_t);
        }
        json_error_t e;
        s->json = json_loads(s->body, 0, &e);
    }
}

/* The next line, waiting up to timeout_ms for it; NULL on timeout or at the end of the
 * stream (s->done or s->eof tell which). */
static st_line *st_next(stream *s, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    while (s->next >= s->n) {
        if (s->done || s->eof || s->closed)
            return NULL;
        int f = fill(s, until);
        if (f <= 0)
            return NULL;
        decode(s, s->rx_t);
    }
    return &s->lines[s->next++];
}

/* Wait up to timeout_ms for the end of the stream (terminal chunk or EOF), collecting
 * any lines on the way; 1 if it ended. */
static int st_wait_end(stream *s, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    while (!s->done && !s->eof) {
        if (fill(s, until) <= 0)
            break;
        decode(s, s->rx_t);
    }
    return s->done || s->eof;
}

/* Close our side (the client hangs up). */
static void st_hangup(stream *s)
{
    if (!s->closed && s->fd >= 0)
        close(s->fd);
    s->closed = 1;
}

static void st_free(stream *s)
{
    st_hangup(s);
    for (int i = 0; i < s->n; i++) {
        free(s->lines[i].text);
        if (s->lines[i].json)
            json_decref(s->lines[i].json);
    }
    if (s->json)
        json_decref(s->json);
    s->n = s->next = 0;
    s->json = NULL;
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* The grant line of a stream just opened (201): checked, its lease copied out. */
static st_line *granted(stream *s, const char *name, long ttl_ms, char *lease, size_t leaselen)
{
    cr_assert_eq(s->status, 201, "streamed POST of %s: %ld %s", name, s->status, s->body);
    cr_assert(strncmp(s->content_type, "application/x-ndjson", 20) == 0, "Content-Type %s", s->content_type);
    cr_assert(s->chunked, "a streamed body is chunked");
    st_line *g = st_next(s, 5000);
    cr_assert(g, "the grant line comes");
    cr_assert(g->json, "the grant line is JSON: %s", g->text);
    cr_assert_str_eq(jstr(g->json, "name"), name);
    cr_assert(*jstr(g->json, "lease"), "the grant carries the lease: %s", g->text);
    cr_assert_gt(jint(g->json, "fencing_token"), 0);
    cr_assert_eq(jint(g->json, "ttl_ms"), ttl_ms, "%s", g->text);
    long long v = jint(g->json, "validity_ms");
    cr_assert(v > 0 && v <= ttl_ms, "grant validity %lld of ttl %ld", v, ttl_ms);
    if (lease)
        snprintf(lease, leaselen, "%s", jstr(g->json, "lease"));
    return g;
}

/* Open a streamed hold of name (ttl_ms) on base and check its grant. */
static st_line *hold_stream(stream *s, const char *base, const char *name, long ttl_ms, char *lease,
                            size_t leaselen)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?hold=stream&ttl_ms=%ld", name, ttl_ms);
    st_open(s, base, "POST", path, NULL, 10000);
    return granted(s, name, ttl_ms, lease, leaselen);
}

static int is_event(const st_line *l, const char *event)
{
    return l && l->json && strcmp(jstr(l->json, "event"), event) == 0;
}

/* ---- other helpers ---- */

/* The service's redlockd_parked_waiters gauge is at least *arg. */
static int parked(void *arg)
{
    h_resp r;
    h_http(&C, "GET", "/metrics", NULL, &r);
    const char *p = strstr(r.body, "\nredlockd_parked_waiters ");
    long n = p ? atol(p + strlen("\nredlockd_parked_waiters ")) : -1;
    h_resp_free(&r);
    return n >= *(long *)arg;
}

/* A no-wait plain POST of name on the default service is granted (then let go). */
static int takeable(void *arg)
{
    const char *name = arg;
    char lease[200];
    if (h_acquire(&C, name, "ttl_ms=10000", lease, sizeof lease, NULL) != 201)
        return 0;
    cr_assert_eq(h_release(&C, name, lease), 200);
    return 1;
}

/* Every master has a subscriber on the release channel of name (the instance
 * holding a stream of name hears of its release through another instance). */
static int subscribed_everywhere(void *arg)
{
    long long fewest, most;
    h_release_subscribers(&C, arg, &fewest, &most);
    return fewest >= 1;
}

struct waiter {
    const char *url;
    const char *path;
    long status;
    long long token;
    double done_ms;
    pthread_t th;
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

/* Start w (a POST that waits) and wait until it parks on the default service; s, the
 * stream that holds the name, is let go if it does not. */
static void park_waiter(struct waiter *w, stream *s)
{
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
    long one = 1;
    int ok = h_wait_until(parked, &one, 5000);
    if (!ok) {
        st_free(s);
        pthread_join(w->th, NULL);
    }
    cr_assert(ok, "the waiter parks");
}

/* ---- the tests ---- */

Test(streams, a_streamed_hold_outlives_its_ttl_and_keeps_others_out)
{
    const long ttl = 1000;
    stream s;
    st_line *g = hold_stream(&s, C.svc.url, "st.long", ttl, NULL, 0);
    long long token = jint(g->json, "fencing_token");
    double t0 = g->t, last_ext = 0;
    int extended = 0, refused = 0;
    /* Three ttls and more, and at least four extensions, each announced. */
    while (h_now_ms() < t0 + 3 * ttl + 300 || extended < 4) {
        cr_assert(h_now_ms() < t0 + 20000, "only %d extensions in 20 s", extended);
        h_resp r;
        h_http(&C, "POST", "/locks/st.long", NULL, &r);
        cr_assert_eq(r.status, 409, "a no-wait POST %.0f ms into the hold: %ld %s", h_now_ms() - t0, r.status,
                     r.body);
        cr_assert_str_eq(h_str(&r, "error"), "lock_held");
        h_resp_free(&r);
        refused++;
        st_line *l;
        while ((l = st_next(&s, 50))) {
            cr_assert(is_event(l, "extended"), "only extensions while it is held: %s", l->text);
            long long v = jint(l->json, "validity_ms");
            cr_assert(v > 0 && v <= ttl, "announced validity %lld of ttl %ld: %s", v, ttl, l->text);
            extended++;
            last_ext = l->t;
        }
        cr_assert(!s.done && !s.eof, "the stream stays open (%d lines)", s.n);
    }
    cr_assert_geq(extended, 4);
    cr_assert_gt(last_ext, t0 + 2 * ttl, "still extended after two ttls");
    /* Still the same grant: the fencing token did not move. */
    h_resp r;
    h_http(&C, "GET", "/locks/st.long", NULL, &r);
    cr_assert(json_is_true(json_object_get(r.json, "held")), "%s", r.body);
    cr_assert_eq(h_int(&r, "fencing_token"), token, "%s", r.body);
    h_resp_free(&r);
    fprintf(stderr, "streams: held %.0f ms with ttl %ld: %d extensions, %d refusals\n", h_now_ms() - t0, ttl,
            extended, refused);
    st_free(&s);
    cr_assert(h_wait_until(takeable, "st.long", 1000), "free within 1 s of the hang-up");
}

Test(streams, hanging_up_hands_the_lock_to_a_parked_waiter)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    stream s;
    st_line *g = hold_stream(&s, C.svc.url, "st.hand", 10000, NULL, 0);
    long long token = jint(g->json, "fencing_token");
    struct waiter w = {C.svc.url, "/locks/st.hand?wait_ms=5000&ttl_ms=10000", 0, 0, 0, 0};
    park_waiter(&w, &s);
    double closed = h_now_ms();
    st_hangup(&s);
    pthread_join(w.th, NULL);
    st_free(&s);
    cr_assert_eq(w.status, 201, "the waiter gets the lock (ttl 10 s: not by expiry): %ld", w.status);
    cr_assert(w.done_ms - closed < 1000, "granted %.0f ms after the hang-up", w.done_ms - closed);
    cr_assert_gt(w.token, token);
}

Test(streams, three_of_five_masters_frozen_says_lost_before_the_validity_ends)
{
    h_require_local(&C);
    const long ttl = 5000; /* "lost" is said ttl/10 (500 ms) before the validity ends */
    stream s;
    st_line *g = hold_stream(&s, C.svc.url, "st.lost", ttl, NULL, 0);
    double valid_t = g->t, valid_v = (double)jint(g->json, "validity_ms");
    /* The hold runs: one extension first. */
    st_line *l = st_next(&s, 5000);
    cr_assert(is_event(l, "extended"), "an extension: %s", l ? l->text : "(none)");
    valid_t = l->t;
    valid_v = (double)jint(l->json, "validity_ms");
    for (int i = 0; i < 3; i++)
        h_redis_freeze(&C.masters[i]);
    double frozen = h_now_ms();
    st_line *lost = NULL;
    while ((l = st_next(&s, (int)ttl * 3))) {
        if (is_event(l, "extended")) { /* one that was under way */
            valid_t = l->t;
            valid_v = (double)jint(l->json, "validity_ms");
            continue;
        }
        lost = l;
        break;
    }
    int ended = lost && st_wait_end(&s, 2000);
    for (int i = 0; i < 3; i++)
        h_redis_thaw(&C.masters[i]);
    cr_assert(lost, "a last word within 3 ttls of the freeze (done %d, eof %d)", s.done, s.eof);
    cr_assert(is_event(lost, "lost"), "lost: %s", lost->text);
    cr_assert_str_eq(jstr(lost->json, "reason"), "no_quorum", "%s", lost->text);
    fprintf(stderr, "streams: lost %.0f ms after the freeze, %.0f ms before the announced validity ends\n",
            lost->t - frozen, valid_t + valid_v - lost->t);
    cr_assert_lt(lost->t, valid_t + valid_v,
                 "lost received %.0f ms after the validity announced at %.0f (%.0f ms) ended", lost->t - valid_t - valid_v,
                 valid_t, valid_v);
    cr_assert(ended, "the stream ends after lost");
    cr_assert_eq(s.next, s.n, "nothing after lost: %s", s.n ? s.lines[s.n - 1].text : "");
    st_free(&s);
}

/* The line after the extensions: the stream's last word (NULL if none within
 * timeout_ms).  Extensions may come at any time, one also right after the grant (when
 * the service starts following the name's release announcements). */
static st_line *last_word(stream *s, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    st_line *l;
    while ((l = st_next(s, (int)(until - h_now_ms()) > 0 ? (int)(until - h_now_ms()) : 0)))
        if (!is_event(l, "extended"))
            return l;
    return NULL;
}

/* Before a DELETE, so that the stream does not learn of it by chance: the holding
 * instance follows the name's release announcements, and the extension it makes when
 * it starts following them (on the first subscription's confirmation) came. */
static void settled(stream *s, const char *name)
{
    cr_assert(h_wait_until(subscribed_everywhere, (void *)name, 5000), "%s: the holding instance subscribes", name);
    st_line *first = st_next(s, 2000);
    cr_assert(!first || is_event(first, "extended"), "%s: %s", name, first->text);
}

/* DELETE of name with lease through base: 200, and the stream s (holding name, ttl
 * 30 s: no periodic extension in between) says exactly {"event":"released"} within
 * 1 s and ends right after. */
static void delete_ends_it(stream *s, const char *base, const char *name, const char *lease)
{
    settled(s, name);
    void *curl = NULL;
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?lease=%s", name, lease);
    h_resp r;
    h_http_to(base, &curl, "DELETE", path, NULL, &r);
    double deleted = h_now_ms();
    cr_assert_eq(r.status, 200, "DELETE %s: %s", name, r.body);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    st_line *l = last_word(s, 15000);
    cr_assert(l, "%s: a last word after the DELETE (done %d, eof %d)", name, s->done, s->eof);
    fprintf(stderr, "streams: %s: %s %.0f ms after the DELETE\n", name, l->text, l->t - deleted);
    cr_assert(is_event(l, "released"), "%s: released, %.0f ms after the DELETE: %s", name, l->t - deleted,
              l->text);
    cr_assert_eq(json_object_size(l->json), 1, "%s: just {\"event\":\"released\"}: %s", name, l->text);
    cr_assert(l->t - deleted < 1000, "%s: released %.0f ms after the DELETE", name, l->t - deleted);
    cr_assert(st_wait_end(s, 1000), "%s: the stream ends right after released", name);
    cr_assert_eq(s->next, s->n, "%s: nothing after released: %s", name, s->lines[s->n - 1].text);
}

Test(streams, delete_with_the_lease_ends_the_stream_with_released)
{
    /* On the default instance (the DELETE lands on any of its worker threads), and on
     * one with a single worker (the DELETE's release runs on the thread that keeps the
     * stream's hold). */
    stream s;
    char lease[200];
    hold_stream(&s, C.svc.url, "st.del", 30000, lease, sizeof lease);
    delete_ends_it(&s, C.svc.url, "st.del", lease);
    st_free(&s);
    cr_assert(takeable("st.del"), "the name is free");
    h_require_local(&C);
    h_service b;
    h_service_start(&C, &b, "--threads 1");
    hold_stream(&s, b.url, "st.del1", 30000, lease, sizeof lease);
    delete_ends_it(&s, b.url, "st.del1", lease);
    st_free(&s);
    cr_assert(takeable("st.del1"), "the name is free");
    h_service_stop(&b);
}

Test(streams, delete_with_a_parked_waiter_ends_the_stream_with_released)
{
    h_require_local(&C); /* against the compose stack: see the closing note */
    /* The DELETE hands the lock straight to the waiter: the stream still ends with
     * released. */
    stream s;
    char lease[200];
    st_line *g = hold_stream(&s, C.svc.url, "st.delw", 30000, lease, sizeof lease);
    long long token = jint(g->json, "fencing_token");
    settled(&s, "st.delw");
    struct waiter w = {C.svc.url, "/locks/st.delw?wait_ms=10000&ttl_ms=10000", 0, 0, 0, 0};
    park_waiter(&w, &s);
    double t0 = h_now_ms();
    long del_status = h_release(&C, "st.delw", lease);
    pthread_join(w.th, NULL);
    cr_assert_eq(del_status, 200);
    cr_assert_eq(w.status, 201, "the waiter gets the lock: %ld", w.status);
    cr_assert(w.done_ms - t0 < 1000, "granted %.0f ms after the DELETE", w.done_ms - t0);
    cr_assert_gt(w.token, token);
    st_line *l = last_word(&s, 15000);
    cr_assert(l, "a last word after the DELETE (done %d, eof %d)", s.done, s.eof);
    fprintf(stderr, "streams: st.delw: %s %.0f ms after the DELETE\n", l->text, l->t - t0);
    cr_assert(is_event(l, "released"), "released, %.0f ms after the DELETE: %s", l->t - t0, l->text);
    cr_assert(l->t - t0 < 1000, "released %.0f ms after the DELETE", l->t - t0);
    cr_assert(st_wait_end(&s, 1000), "the stream ends right after released");
    st_free(&s);
}

Test(streams, delete_through_another_instance_ends_the_stream_with_released)
{
    h_require_local(&C);
    h_service b;
    h_service_start(&C, &b, NULL);
    stream s;
    char lease[200];
    hold_stream(&s, C.svc.url, "st.far", 30000, lease, sizeof lease);
    delete_ends_it(&s, b.url, "st.far", lease);
    st_free(&s);
    h_service_stop(&b);
}

static int held_everywhere(void *key)
{
    for (int i = 0; i < C.n; i++)
        if (h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS %s", (const char *)key) != 1)
            return 0;
    return 1;
}

struct term_arg {
    h_service *svc;
    int rc;
};

static void *term_main(void *arg)
{
    struct term_arg *a = arg;
    a->rc = h_service_term(a->svc, 30000);
    return NULL;
}

Test(streams, sigterm_releases_the_lock_and_says_shutting_down)
{
    h_require_local(&C);
    stream s;
    hold_stream(&s, C.svc.url, "st.term", 30000, NULL, 0);
    /* The grant was decided on a quorum: the last master may still be writing it. */
    cr_assert(h_wait_until(held_everywhere, "redlock:st.term", 5000), "held on every master");
    struct term_arg ta = {&C.svc, -2};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, term_main, &ta), 0);
    st_wait_end(&s, 30000); /* read while it shuts down, as a client would */
    pthread_join(th, NULL);
    cr_assert(s.done || s.eof, "the stream ends");
    cr_assert_gt(s.n, 1, "a last word after the grant: %s", s.body);
    st_line *last = &s.lines[s.n - 1];
    cr_assert(is_event(last, "released"), "released at the end: %s", last->text);
    cr_assert_str_eq(jstr(last->json, "reason"), "shutting_down", "%s", last->text);
    cr_assert(s.done, "the terminal chunk, not just a closed connection");
    for (int i = 1; i < s.n - 1; i++)
        cr_assert(is_event(&s.lines[i], "extended"), "%s", s.lines[i].text);
    cr_assert_eq(ta.rc, 0, "redlockd exits 0 on SIGTERM (see %s)", C.svc.log);
    for (int i = 0; i < C.n; i++)
        cr_assert_eq(h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS redlock:st.term"), 0,
                     "released on master %d before the exit", i);
    st_free(&s);
}

/* A streamed POST refused with 409: an ordinary JSON answer, and nothing after it. */
static void refused_409(const char *path, double min_ms)
{
    stream s;
    double t0 = h_now_ms();
    st_open(&s, C.svc.url, "POST", path, NULL, 10000);
    double took = h_now_ms() - t0;
    cr_assert_eq(s.status, 409, "%s: %ld %s", path, s.status, s.body);
    cr_assert(strncmp(s.content_type, "application/json", 16) == 0, "%s: Content-Type %s", path, s.content_type);
    cr_assert(!s.chunked, "%s: no stream", path);
    cr_assert(s.json, "%s: a JSON body: %s", path, s.body);
    cr_assert_str_eq(jstr(s.json, "error"), "lock_held", "%s", s.body);
    cr_assert(took >= min_ms, "%s: answered after %.0f ms", path, took);
    /* Nothing more comes on the connection. */
    char x;
    struct pollfd pfd = {.fd = s.fd, .events = POLLIN};
    int pr = poll(&pfd, 1, 300);
    cr_assert(pr == 0 || recv(s.fd, &x, 1, MSG_DONTWAIT) == 0, "%s: bytes after the answer", path);
    st_free(&s);
}

Test(streams, not_granted_is_an_ordinary_409_without_a_stream)
{
    cr_assert_eq(h_acquire(&C, "st.busy", "ttl_ms=30000", NULL, 0, NULL), 201);
    refused_409("/locks/st.busy?hold=stream", 0);
    refused_409("/locks/st.busy?hold=stream&wait_ms=300", 250); /* after a wait */
}

/* A streamed POST of the name in arg on service *svc_for_cond is granted (kept open). */
static h_service *svc_for_cond;
static stream cond_stream;

static int stream_accepted(void *arg)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?hold=stream&ttl_ms=10000", (const char *)arg);
    st_open(&cond_stream, svc_for_cond->url, "POST", path, NULL, 10000);
    if (cond_stream.status == 201)
        return 1;
    cr_assert_eq(cond_stream.status, 503, "%s", cond_stream.body);
    st_free(&cond_stream);
    return 0;
}

Test(streams, max_streams_bounds_them)
{
    h_require_local(&C);
    h_service b;
    h_service_start(&C, &b, "--max-streams 1");
    void *curl = NULL;
    h_resp r;
    /* A refused stream (409) gives its place back. */
    h_http_to(b.url, &curl, "POST", "/locks/st.m0?ttl_ms=30000", NULL, &r);
    cr_assert_eq(r.status, 201);
    h_resp_free(&r);
    stream s0;
    st_open(&s0, b.url, "POST", "/locks/st.m0?hold=stream", NULL, 10000);
    cr_assert_eq(s0.status, 409, "%s", s0.body);
    st_free(&s0);

    stream s1, s2;
    hold_stream(&s1, b.url, "st.m1", 10000, NULL, 0);
    st_open(&s2, b.url, "POST", "/locks/st.m2?hold=stream", NULL, 10000);
    cr_assert_eq(s2.status, 503, "a second stream: %ld %s", s2.status, s2.body);
    cr_assert(s2.json, "%s", s2.body);
    cr_assert_str_eq(jstr(s2.json, "error"), "too_many_streams", "%s", s2.body);
    cr_assert(!s2.chunked);
    st_free(&s2);
    /* The bound is on streams only. */
    h_http_to(b.url, &curl, "POST", "/locks/st.m2?ttl_ms=10000", NULL, &r);
    cr_assert_eq(r.status, 201, "a plain POST: %s", r.body);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    /* The first one goes: a new stream is accepted. */
    double closed = h_now_ms();
    st_free(&s1);
    svc_for_cond = &b;
    cr_assert(h_wait_until(stream_accepted, "st.m3", 2000), "a new stream after the first closed");
    fprintf(stderr, "streams: a new stream accepted %.0f ms after the first closed\n", h_now_ms() - closed);
    granted(&cond_stream, "st.m3", 10000, NULL, 0);
    st_free(&cond_stream);
    h_service_stop(&b);
}

static void invalid_hold(const char *method, const char *path, const char *body)
{
    h_resp r;
    h_http(&C, method, path, body, &r);
    cr_assert_eq(r.status, 400, "%s %s %s: %ld %s", method, path, body ? body : "", r.status, r.body);
    cr_assert_str_eq(h_str(&r, "error"), "invalid_hold", "%s %s %s: %s", method, path, body ? body : "", r.body);
    h_resp_free(&r);
}

Test(streams, hold_other_than_stream_or_elsewhere_is_invalid_hold)
{
    invalid_hold("POST", "/locks/st.bad?hold=forever", NULL);
    invalid_hold("POST", "/locks/st.bad?hold=", NULL);
    invalid_hold("POST", "/locks/st.bad", "{\"hold\":\"forever\"}");
    invalid_hold("POST", "/locks/st.bad", "{\"hold\":true}");
    char lease[200], path[400];
    cr_assert_eq(h_acquire(&C, "st.bad", "ttl_ms=30000", lease, sizeof lease, NULL), 201);
    snprintf(path, sizeof path, "/locks/st.bad?lease=%s&hold=stream", lease);
    invalid_hold("DELETE", path, NULL);
    invalid_hold("PATCH", path, NULL);
    invalid_hold("POST", "/locks", "{\"names\":[\"st.b1\",\"st.b2\"],\"hold\":\"stream\"}");
    invalid_hold("POST", "/locks?hold=stream", "{\"names\":[\"st.b1\",\"st.b2\"]}");
    /* Refused, the DELETE did nothing: still held; and neither set name was taken. */
    cr_assert_eq(h_acquire(&C, "st.bad", NULL, NULL, 0, NULL), 409);
    cr_assert_eq(h_release(&C, "st.bad", lease), 200);
    cr_assert(takeable("st.b1") && takeable("st.b2"));
    invalid_hold("GET", "/locks/st.bad?hold=stream", NULL);
}

Test(streams, the_lease_is_in_the_grant_line_only)
{
    const long ttl = 600;
    stream s;
    char lease[200];
    hold_stream(&s, C.svc.url, "st.secret", ttl, lease, sizeof lease);
    cr_assert_str_eq(s.cache_control, "no-store");
    for (int i = 0; i < 3; i++) {
        st_line *l = st_next(&s, 5000);
        cr_assert(is_event(l, "extended"), "extension %d: %s", i, l ? l->text : "(none)");
    }
    cr_assert_eq(h_release(&C, "st.secret", lease), 200);
    cr_assert(st_wait_end(&s, 5000), "the stream ends after the DELETE");
    cr_assert_geq(s.n, 5, "the grant, three extensions and a last word");
    for (int i = 1; i < s.n; i++) {
        st_line *l = &s.lines[i];
        cr_assert(!strstr(l->text, lease), "line %d carries the lease: %s", i, l->text);
        cr_assert(l->json && json_is_object(l->json), "line %d is a JSON object: %s", i, l->text);
        const char *k;
        json_t *v;
        json_object_foreach(l->json, k, v)
        {
            cr_assert(strcmp(k, "event") == 0 || strcmp(k, "validity_ms") == 0 || strcmp(k, "reason") == 0,
                      "line %d: member %s", i, k);
        }
    }
    st_free(&s);
}

struct stream_waiter {
    pthread_t th;
    const char *url;
    char path[200];
    stream s;
};

static void *stream_waiter_main(void *arg)
{
    struct stream_waiter *sw = arg;
    st_open(&sw->s, sw->url, "POST", sw->path, NULL, 20000);
    return NULL;
}

/* The redlockd_parked_waiters gauge of the service at url is at least 1. */
static int one_parked_at(void *arg)
{
    const char *url = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(url, &curl, "GET", "/metrics", NULL, &r);
    const char *p = strstr(r.body, "\nredlockd_parked_waiters ");
    long n = p ? atol(p + strlen("\nredlockd_parked_waiters ")) : -1;
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return n >= 1;
}

/* A stream and a parked waiter of one name follow its release channel together, and
 * the channel is left only when the last of them goes.  (Each used to subscribe and
 * unsubscribe on its own: the hold's unsubscribe left a waiter's channel, and hiredis,
 * out of subscribed mode with a SUBSCRIBE in flight, aborted the process.) */
Test(streams, a_streamed_waiter_takes_over_from_a_stream_that_hangs_up)
{
    h_require_local(&C); /* starts an instance of its own */
    /* One worker: the hold and the waiter share its subscriber connections. */
    h_service one;
    h_service_start(&C, &one, "--threads 1");
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "st.chain%d", i);
        stream a;
        st_line *g = hold_stream(&a, one.url, name, 3000, NULL, 0);
        long long token = jint(g->json, "fencing_token");
        struct stream_waiter sw = {.url = one.url};
        snprintf(sw.path, sizeof sw.path, "/locks/%s?hold=stream&ttl_ms=3000&wait_ms=15000", name);
        pthread_create(&sw.th, NULL, stream_waiter_main, &sw);
        cr_assert(h_wait_until(one_parked_at, (void *)one.url, 5000), "the streamed waiter parks");
        st_hangup(&a);
        st_free(&a);
        pthread_join(sw.th, NULL);
        st_line *g2 = granted(&sw.s, name, 3000, NULL, 0);
        cr_assert_gt(jint(g2->json, "fencing_token"), token, "round %d", i);
        st_line *l = st_next(&sw.s, 3000);
        cr_assert(is_event(l, "extended"), "the new holder's stream runs: %s", l ? l->text : "(none)");
        st_hangup(&sw.s);
        st_free(&sw.s);
    }
    void *curl = NULL;
    h_resp r;
    h_http_to(one.url, &curl, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "the service is still up");
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    h_service_stop(&one);
}

/* The header timeout cuts connections that have not sent a whole request; a stream's
 * has, and it lives on well past that timeout (and past its ttl). */
Test(streams, a_stream_outlives_the_header_timeout)
{
    h_require_local(&C); /* starts an instance of its own */
    h_service b;
    h_service_start(&C, &b, "--header-timeout-ms 200");
    stream s;
    hold_stream(&s, b.url, "st.idle", 600, NULL, 0);
    int extended = 0;
    double until = h_now_ms() + 1500;
    while (h_now_ms() < until) {
        st_line *l = st_next(&s, 1000);
        cr_assert(l, "the stream was cut %.0f ms before the end of the test", until - h_now_ms());
        cr_assert(is_event(l, "extended"), "only extensions: %s", l->text);
        extended++;
    }
    cr_assert_geq(extended, 4, "%d extensions in 1.5 s with ttl 600 ms", extended);
    st_hangup(&s);
    st_free(&s);
    h_service_stop(&b);
}

/* A reader and a permit held by streams: kept past their ttl (the extensions go the
 * way their grants went), the lease released when the connection closes. */
Test(streams, a_streamed_reader_and_a_streamed_permit_outlive_their_ttl_and_go_on_close)
{
    stream r, p;
    char wl[200];
    cr_assert_eq(h_acquire(&C, "st.rd", NULL, wl, sizeof wl, NULL), 201); /* a token to share */
    cr_assert_eq(h_release(&C, "st.rd", wl), 200);
    st_open(&r, C.svc.url, "POST", "/locks/st.rd?mode=shared&hold=stream&ttl_ms=600", NULL, 10000);
    st_line *g = granted(&r, "st.rd", 600, NULL, 0);
    cr_assert_str_eq(jstr(g->json, "mode"), "shared", "%s", g->text);
    st_open(&p, C.svc.url, "POST", "/semaphores/st.sem?permits=1&hold=stream&ttl_ms=600", NULL, 10000);
    g = granted(&p, "st.sem", 600, NULL, 0);
    cr_assert_eq(jint(g->json, "permits"), 1, "%s", g->text);
    /* Three ttls later both still hold, each extended: every line an extension. */
    double until = h_now_ms() + 1800;
    int ext_r = 0, ext_p = 0;
    while (h_now_ms() < until) {
        st_line *l = st_next(&r, 50);
        if (l) {
            cr_assert(is_event(l, "extended"), "reader: %s", l->text);
            ext_r++;
        }
        l = st_next(&p, 50);
        if (l) {
            cr_assert(is_event(l, "extended"), "permit: %s", l->text);
            ext_p++;
        }
    }
    cr_assert_geq(ext_r, 4, "reader extensions: %d", ext_r);
    cr_assert_geq(ext_p, 4, "permit extensions: %d", ext_p);
    cr_assert_eq(h_acquire(&C, "st.rd", NULL, NULL, 0, NULL), 409, "a writer beside the reader");
    h_resp q;
    h_http(&C, "POST", "/semaphores/st.sem?permits=1", NULL, &q);
    cr_assert_eq(q.status, 409, "a second permit of one: %s", q.body);
    h_resp_free(&q);
    st_hangup(&r);
    st_hangup(&p);
    st_free(&r);
    st_free(&p);
    /* Closing let both go at once (not at an expiry: the ttl was 600 ms). */
    double t0 = h_now_ms();
    long st = 0;
    while ((st = h_acquire(&C, "st.rd", NULL, NULL, 0, NULL)) != 201 && h_now_ms() - t0 < 400)
        usleep(10000);
    cr_assert_eq(st, 201, "the writer gets the name after the reader's stream closed");
    for (;;) {
        h_http(&C, "POST", "/semaphores/st.sem?permits=1", NULL, &q);
        st = q.status;
        h_resp_free(&q);
        if (st == 201 || h_now_ms() - t0 > 400)
            break;
        usleep(10000);
    }
    cr_assert_eq(st, 201, "the permit is free after its stream closed");
}


/* A reentrant hold entered again by a streamed hold with a shorter ttl: the stream's
 * keeper extends the key every ttl/3, and an extension of a key that counts more than
 * one hold keeps the later of its expiry and the new one (docs/DESIGN.md section 12: a
 * re-entry never shortens a hold).  Before, each extension set the stream's 2 s, the
 * nested hang-up kept it (KEEPTTL), and another client got the lock ~3.4 s into the
 * outer 30 s hold (found by a hostile tester, 8 of 9 runs). */
Test(streams, a_streamed_re_entry_never_shortens_the_hold_it_enters)
{
    h_require_local(&C);
    const char *L = "streamReentryLease0123456789";
    char body[256];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true,\"ttl_ms\":30000}", L);
    h_resp r;
    h_http(&C, "POST", "/locks/st.reenter", body, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    double granted = h_now_ms();
    stream s;
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true}", L);
    st_open(&s, C.svc.url, "POST", "/locks/st.reenter?hold=stream&ttl_ms=2000", body, 10000);
    cr_assert_eq(s.status, 201, "the streamed re-entry: %ld %s", s.status, s.body);
    st_line *g = st_next(&s, 5000);
    cr_assert(g && g->json, "the grant line comes");
    cr_assert_eq(jint(g->json, "holds"), 2, "%s", g->text);
    /* The keeper's extensions (every ~667 ms) have run twice by 1.5 s. */
    while (h_now_ms() < granted + 1500)
        usleep(20 * 1000);
    long long p = h_least_pttl(&C, "redlock:st.reenter");
    cr_assert_gt(p, 25000, "the stream's extensions cut the 30 s hold to %lld ms", p);
    st_free(&s); /* the nested holder hangs up: its hold is let go, the outer one stays */
    while (h_now_ms() < granted + 4000)
        usleep(50 * 1000);
    h_http(&C, "POST", "/locks/st.reenter?wait_ms=0", NULL, &r);
    cr_assert_eq(r.status, 409, "another client got the lock 4 s into a 30 s hold: %s", r.body);
    h_resp_free(&r);
    p = h_least_pttl(&C, "redlock:st.reenter");
    cr_assert_gt(p, 24000, "after the nested hang-up the hold has %lld ms left", p);
}
