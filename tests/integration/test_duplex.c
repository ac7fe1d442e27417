/* test_duplex.c -- duplex streamed holds (POST ?hold=stream with Upgrade: redlock-hold,
 * docs/DESIGN.md section 10), and the instance-wide connection cap.
 *
 * - 101, the grant line with ping_ms and silence_ms, each ping answered with its
 *   number; {"release":true} frees the lock at once.
 * - A holder that stops pinging, and a holder process that is SIGSTOPped, lose the
 *   lock within the bound (silence_ms = the ttl, plus a release round), never before
 *   the validity they were last told has run out; another client gets it.
 * - A live holder behind a relay that delays each direction by a third of the ttl
 *   keeps the lock.
 * - An answer's validity, counted from the ping's send, never outlasts what GET and
 *   the masters' own expiry say.
 * - A hang-up without a release lets go only once the validity told has run out; a bad
 *   line ends the hold; a DELETE with the lease, SIGTERM; refusals are ordinary
 *   answers; the TLS listener.
 * - --max-connections is the instance's: no request refused below it, whatever the
 *   workers' share.
 *
 * The client is a small one on a raw socket; every read has a deadline, every wait is
 * on a condition. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;

static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }

static void teardown(void)
{
    if (!C.external)
        for (int i = 0; i < C.n; i++)
            if (C.masters[i].pid > 0)
                h_redis_thaw(&C.masters[i]);
    h_cluster_stop(&C);
}

TestSuite(duplex, .init = setup, .fini = teardown, .timeout = 90);

/* ---- a duplex client on a raw socket ---- */

typedef struct dx {
    int fd;
    long status;
    char head[4096];    /* the answer's header */
    char body[8192];    /* a non-101 answer's body */
    json_t *json;       /* that body, parsed */
    char buf[65536];    /* received after the header, not yet taken as lines */
    size_t len;
    int eof;
    double sent_ms;     /* when the request was sent */
    json_t *grant;      /* the grant line (101) */
    double valid_until; /* what the client may believe: the latest end it was told */
} dx;

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s", strerror(errno));
    return fd;
}

static int url_port(const char *url)
{
    const char *c = strrchr(url, ':');
    return c ? atoi(c + 1) : 80;
}

/* Wait up to until (monotonic ms) for bytes into d->buf: 1, 0 on timeout, -1 at EOF. */
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
        cr_assert_lt(d->len, sizeof d->buf - 1, "receive buffer full");
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

/* The next line as JSON (the caller frees it), waiting up to timeout_ms; NULL on
 * timeout or at EOF (d->eof). */
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

static int is_event(json_t *o, const char *event, const char *reason)
{
    return o && strcmp(jstr(o, "event"), event) == 0 &&
           (!reason || strcmp(jstr(o, "reason"), reason) == 0);
}

/* POST path to port with the upgrade headers (upgrade 0: without), and read the
 * answer's header (and a non-101 body, or the grant line of a 101). */
static void dx_open_h(dx *d, int port, const char *path, const char *headers, int timeout_ms)
{
    memset(d, 0, sizeof *d);
    d->fd = dial(port);
    char req[2048], auth[300] = "";
    const char *tok = getenv("REDLOCK_TEST_TOKEN");
    if (tok && *tok)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", tok);
    int n = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%sContent-Length: 0\r\n\r\n",
                     path, port, auth, headers);
    d->sent_ms = h_now_ms();
    cr_assert_eq(send(d->fd, req, (size_t)n, MSG_NOSIGNAL), n);
    double until = h_now_ms() + timeout_ms;
    char *end;
    while (!(end = memmem(d->buf, d->len, "\r\n\r\n", 4))) {
        int f = dx_fill(d, until);
        cr_assert(f != 0, "POST %s: no answer within %d ms", path, timeout_ms);
        cr_assert(f > 0, "POST %s: closed before the header", path);
    }
    size_t hl = (size_t)(end - d->buf) + 4;
    cr_assert_lt(hl, sizeof d->head);
    memcpy(d->head, d->buf, hl);
    d->head[hl] = '\0';
    memmove(d->buf, d->buf + hl, d->len - hl);
    d->len -= hl;
    cr_assert(sscanf(d->head, "HTTP/1.1 %ld", &d->status) == 1, "%s", d->head);
    if (d->status == 101) {
        d->grant = dx_line(d, timeout_ms);
        cr_assert(d->grant, "101 without a grant line (eof %d)", d->eof);
        d->valid_until = d->sent_ms + (double)jint(d->grant, "validity_ms");
        return;
    }
    const char *cl = strcasestr(d->head, "\r\nContent-Length:");
    size_t want = cl ? (size_t)atol(cl + 17) : 0;
    while (d->len < want && dx_fill(d, until) > 0)
        ;
    cr_assert_geq(d->len, want, "the body came whole");
    cr_assert_lt(want, sizeof d->body);
    memcpy(d->body, d->buf, want);
    d->body[want] = '\0';
    json_error_t e;
    d->json = json_loads(d->body, 0, &e);
}

#define DX_UPGRADE "Connection: Upgrade\r\nUpgrade: redlock-hold\r\n"

static void dx_open(dx *d, int port, const char *path, int timeout_ms)
{
    dx_open_h(d, port, path, DX_UPGRADE, timeout_ms);
}

/* A duplex hold of name (ttl_ms) on port, granted: its grant line checked. */
static void dx_hold(dx *d, int port, const char *name, long ttl_ms)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?hold=stream&ttl_ms=%ld", name, ttl_ms);
    dx_open(d, port, path, 10000);
    cr_assert_eq(d->status, 101, "a duplex hold of %s: %ld %s", name, d->status, d->body);
    cr_assert(strcasestr(d->head, "\r\nUpgrade: redlock-hold\r\n"), "%s", d->head);
    cr_assert(strcasestr(d->head, "\r\nConnection: Upgrade\r\n"), "%s", d->head);
    json_t *g = d->grant;
    cr_assert_str_eq(jstr(g, "name"), name);
    cr_assert(*jstr(g, "lease"));
    cr_assert_gt(jint(g, "fencing_token"), 0);
    cr_assert_eq(jint(g, "ttl_ms"), ttl_ms);
    long long v = jint(g, "validity_ms");
    cr_assert(v > 0 && v <= ttl_ms, "grant validity %lld", v);
    cr_assert_eq(jint(g, "ping_ms"), ttl_ms / 4 > 0 ? ttl_ms / 4 : 1, "%s", json_dumps(g, 0));
    cr_assert_eq(jint(g, "silence_ms"), ttl_ms);
}

/* Ping n and wait for its answer (up to timeout_ms); *sent: when it was sent.  The
 * answer (the caller frees it), or the line that came instead, or NULL. */
static json_t *dx_ping(dx *d, long long n, int timeout_ms, double *sent)
{
    char line[64];
    snprintf(line, sizeof line, "{\"ping\":%lld}\n", n);
    double t = h_now_ms();
    dx_send(d, line);
    if (sent)
        *sent = t;
    json_t *a = dx_line(d, timeout_ms);
    if (a && is_event(a, "alive", NULL)) {
        cr_assert_eq(jint(a, "ping"), n, "the answer carries its ping's number");
        long long v = jint(a, "validity_ms");
        cr_assert(v >= 1, "validity %lld", v);
        if (t + (double)v > d->valid_until)
            d->valid_until = t + (double)v;
    }
    return a;
}

/* Read until EOF (1) within timeout_ms, dropping lines. */
static int dx_wait_eof(dx *d, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    while (!d->eof) {
        json_t *l = dx_line(d, (int)(until - h_now_ms()) > 0 ? (int)(until - h_now_ms()) : 0);
        if (!l)
            break;
        json_decref(l);
    }
    return d->eof;
}

static void dx_free(dx *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    if (d->grant)
        json_decref(d->grant);
    if (d->json)
        json_decref(d->json);
    d->grant = d->json = NULL;
}

/* ---- other helpers ---- */

/* A POST that waits for name on base (another client), in a thread. */
struct waiter {
    pthread_t th;
    const char *base;
    char path[200];
    long status;
    double done_ms;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(w->base, &curl, "POST", w->path, NULL, &r);
    w->status = r.status;
    w->done_ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static void waiter_start(struct waiter *w, const char *base, const char *name, long wait_ms)
{
    w->base = base;
    snprintf(w->path, sizeof w->path, "/locks/%s?ttl_ms=5000&wait_ms=%ld", name, wait_ms);
    cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
}

static int one_parked(void *arg)
{
    (void)arg;
    h_resp r;
    h_http(&C, "GET", "/metrics", NULL, &r);
    const char *p = strstr(r.body, "\nredlockd_parked_waiters ");
    long n = p ? atol(p + strlen("\nredlockd_parked_waiters ")) : -1;
    h_resp_free(&r);
    return n >= 1;
}

/* A no-wait POST of name is granted (and let go again). */
static int takeable(void *arg)
{
    char lease[200];
    if (h_acquire(&C, arg, "ttl_ms=10000", lease, sizeof lease, NULL) != 201)
        return 0;
    cr_assert_eq(h_release(&C, arg, lease), 200);
    return 1;
}

/* ---- the tests ---- */

Test(duplex, pings_are_answered_and_a_release_frees_the_lock_at_once)
{
    h_require_local(&C); /* its own instance's port and metrics */
    dx d;
    dx_hold(&d, C.svc.port, "dx.basic", 1200);
    /* Three ttls and more, one ping in flight every ping_ms: every answer alive, the
     * name refused to others throughout. */
    double t0 = h_now_ms();
    long long n = 0;
    while (h_now_ms() < t0 + 3 * 1200 + 300) {
        double sent;
        json_t *a = dx_ping(&d, ++n, 5000, &sent);
        cr_assert(is_event(a, "alive", NULL), "ping %lld: %s", n, a ? json_dumps(a, 0) : "(none)");
        long long v = jint(a, "validity_ms");
        cr_assert(v <= 1200, "validity %lld of ttl 1200", v);
        json_decref(a);
        cr_assert_eq(h_acquire(&C, "dx.basic", NULL, NULL, 0, NULL), 409);
        double next = sent + 300;
        while (h_now_ms() < next)
            usleep(5000);
    }
    cr_assert(h_now_ms() < d.valid_until, "the belief is continuous with no delay");
    dx_send(&d, "{\"release\":true}\n");
    double asked = h_now_ms();
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "released", "requested"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    cr_assert(dx_wait_eof(&d, 2000), "the service closes after the last line");
    cr_assert(takeable("dx.basic"), "free at once (%.0f ms after the release)", h_now_ms() - asked);
    fprintf(stderr, "duplex: %lld pings answered over %.0f ms\n", n, h_now_ms() - t0);
    dx_free(&d);
}

/* The holder pings once and then never again: another client, waiting, is granted the
 * lock after the silence bound and never before the validity the holder was told. */
Test(duplex, a_holder_that_stops_pinging_loses_the_lock_within_the_bound)
{
    h_require_local(&C); /* parked-waiter counts are per instance */
    const long ttl = 1000;
    dx d;
    dx_hold(&d, C.svc.port, "dx.quiet", ttl);
    double sent;
    json_t *a = dx_ping(&d, 1, 5000, &sent);
    cr_assert(is_event(a, "alive", NULL));
    double answered = h_now_ms();
    json_decref(a);
    struct waiter w = {0};
    waiter_start(&w, C.svc.url, "dx.quiet", 10000);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the other client parks");
    json_t *l = dx_line(&d, 10000); /* the silent holder still reads, for the test */
    pthread_join(w.th, NULL);
    cr_assert_eq(w.status, 201, "the other client is granted: %ld", w.status);
    fprintf(stderr, "duplex: silent holder: other granted %.0f ms after the last answer (ttl %ld), %.0f ms "
            "after the holder's belief ended\n", w.done_ms - answered, ttl, w.done_ms - d.valid_until);
    cr_assert(w.done_ms >= d.valid_until, "granted %.0f ms before the holder's told validity ran out",
              d.valid_until - w.done_ms);
    cr_assert(w.done_ms - answered <= ttl + 700, "granted %.0f ms after the last answer (bound: ttl + a release round)",
              w.done_ms - answered);
    cr_assert(is_event(l, "released", "client_silent"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    cr_assert(dx_wait_eof(&d, 2000));
    dx_free(&d);
}

/* ---- a holder in its own process, stopped with SIGSTOP ---- */

/* The child: hold name (ttl) on port, duplex if the service offers it (else it reads
 * the one-way stream like an old client), ping after reading each answer; report on
 * fd out: "G <token>" at the grant, "A <n>" per answer, "E <line>" for any other line
 * and "X" at the end. */
static void child_holder(int port, const char *name, long ttl, int out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        _exit(2);
    char req[512], buf[8192], msg[600];
    size_t len = 0;
    int n = snprintf(req, sizeof req,
                     "POST /locks/%s?hold=stream&ttl_ms=%ld HTTP/1.1\r\nHost: x\r\n" DX_UPGRADE
                     "Content-Length: 0\r\n\r\n", name, ttl);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        _exit(2);
    char *end = NULL;
    while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
        ssize_t k = recv(fd, buf + len, sizeof buf - len, 0);
        if (k <= 0)
            _exit(3);
        len += (size_t)k;
    }
    int duplex = strncmp(buf, "HTTP/1.1 101", 12) == 0;
    int chunked = !duplex;
    size_t hl = (size_t)(end - buf) + 4;
    memmove(buf, buf + hl, len - hl);
    len -= hl;
    long long ping = 0;
    int granted = 0;
    for (;;) {
        char *nl;
        while (!(nl = memchr(buf, '\n', len))) {
            ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
            if (k <= 0) {
                if (write(out, "X\n", 2) < 0)
                    _exit(4);
                _exit(0);
            }
            len += (size_t)k;
        }
        size_t ll = (size_t)(nl - buf);
        buf[ll] = '\0';
        if (chunked && strchr(buf, '{') == NULL) { /* a chunk-size line of the one-way stream */
            memmove(buf, nl + 1, len - ll - 1);
            len -= ll + 1;
            continue;
        }
        const char *line = strchr(buf, '{') ? strchr(buf, '{') : buf;
        if (!granted) {
            const char *t = strstr(line, "\"fencing_token\":");
            n = snprintf(msg, sizeof msg, "G %lld\n", t ? atoll(t + 16) : -1LL);
            granted = 1;
        } else if (strstr(line, "\"alive\"")) {
            n = snprintf(msg, sizeof msg, "A %lld\n", ping);
        } else {
            n = snprintf(msg, sizeof msg, "E %s\n", line);
        }
        if (write(out, msg, (size_t)n) != n)
            _exit(4);
        memmove(buf, nl + 1, len - ll - 1);
        len -= ll + 1;
        if (duplex && (strstr(line, "\"alive\"") || ping == 0)) {
            if (ping) /* one ping in flight: the next one ping_ms after this answer */
                usleep((useconds_t)(ttl / 4 * 1000));
            n = snprintf(req, sizeof req, "{\"ping\":%lld}\n", ++ping);
            if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
                _exit(5);
        }
    }
}

/* Read one line from fd within timeout_ms into out (without its newline); 1 if one. */
static int read_report(int fd, char *out, size_t cap, int timeout_ms)
{
    double until = h_now_ms() + timeout_ms;
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        double left = until - h_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return 0;
        char c;
        if (read(fd, &c, 1) != 1)
            return 0;
        if (c == '\n')
            break;
        out[n++] = c;
    }
    out[n] = '\0';
    return 1;
}

Test(duplex, a_holder_process_stopped_with_sigstop_loses_the_lock_within_the_bound)
{
    h_require_local(&C);
    const long ttl = 1000;
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        child_holder(C.svc.port, "dx.stopped", ttl, pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    char rep[600];
    cr_assert(read_report(pfd[0], rep, sizeof rep, 10000) && rep[0] == 'G', "the child is granted: %s", rep);
    /* Two answers (or, one-way, two extensions): it runs. */
    for (int i = 0; i < 2; i++)
        cr_assert(read_report(pfd[0], rep, sizeof rep, 5000), "the child's hold runs");
    kill(pid, SIGSTOP);
    double stopped = h_now_ms();
    /* Another client waits for the name: granted once the stopped holder's silence
     * has lasted a ttl (one-way, it never would: wait 8 ttls to say so). */
    struct waiter w = {0};
    waiter_start(&w, C.svc.url, "dx.stopped", 8 * ttl);
    pthread_join(w.th, NULL);
    double took = w.done_ms - stopped;
    kill(pid, SIGCONT);
    fprintf(stderr, "duplex: SIGSTOPped holder: other client %ld %.0f ms after the stop (ttl %ld)\n", w.status, took,
            ttl);
    cr_assert_eq(w.status, 201, "another client is granted the lock of a stopped holder (%ld after %.0f ms)",
                 w.status, took);
    cr_assert(took <= ttl + 1000, "granted %.0f ms after the stop (bound: ttl after the last answer, plus a "
              "release round)", took);
    /* The child, continued, reads what the service said, and the end. */
    int silent = 0, ended = 0;
    while (!ended && read_report(pfd[0], rep, sizeof rep, 5000)) {
        silent |= strstr(rep, "client_silent") != NULL;
        ended = rep[0] == 'X';
    }
    cr_assert(silent && ended, "the continued holder reads released/client_silent, then the end (%s)", rep);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    close(pfd[0]);
}

/* ---- through a relay ---- */

/* A live client behind a relay that holds every chunk a third of the ttl, each way:
 * pings one at a time, the service keeps the lock (no line but alive, the name
 * refused to others) for four ttls. */
Test(duplex, a_live_holder_behind_a_slow_relay_keeps_the_lock)
{
    h_require_local(&C);
    const long ttl = 1500;
    h_proxy *px = h_proxy_start(C.svc.port);
    dx d;
    dx_hold(&d, h_proxy_port(px), "dx.slow", ttl);
    h_proxy_set_delay(px, (int)(ttl / 3)); /* from nothing to a third of the ttl */
    double t0 = h_now_ms(), worst_rtt = 0, lapsed = 0;
    long long n = 0;
    while (h_now_ms() < t0 + 4 * ttl) {
        double sent;
        json_t *a = dx_ping(&d, ++n, 5000, &sent);
        double rtt = h_now_ms() - sent;
        if (rtt > worst_rtt)
            worst_rtt = rtt;
        cr_assert(is_event(a, "alive", NULL), "ping %lld after %.0f ms: %s", n, h_now_ms() - t0,
                  a ? json_dumps(a, 0) : "(none)");
        json_decref(a);
        if (h_now_ms() > d.valid_until)
            lapsed += 1; /* the client's own belief ran out between answers (safe) */
        cr_assert_eq(h_acquire(&C, "dx.slow", NULL, NULL, 0, NULL), 409, "held %.0f ms in", h_now_ms() - t0);
        while (h_now_ms() < sent + ttl / 4)
            usleep(5000);
    }
    fprintf(stderr, "duplex: behind a %ld ms relay: %lld pings over %.0f ms, round trip up to %.0f ms, the "
            "client's belief lapsed at %.0f answers\n", ttl / 3, n, h_now_ms() - t0, worst_rtt, lapsed);
    dx_send(&d, "{\"release\":true}\n");
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "released", "requested"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    dx_free(&d);
    h_proxy_stop(px);
}

/* The largest expiry a quorum of masters still holds the key until: the Q-th largest
 * PTTL, read after *at (ms on the monotonic clock). */
static double quorum_expiry(const char *key, double *at)
{
    long long p[8];
    *at = h_now_ms();
    for (int i = 0; i < C.n; i++)
        p[i] = h_redis_cmd(&C.masters[i], NULL, 0, "PTTL %s", key);
    for (int i = 0; i < C.n; i++) /* descending */
        for (int j = i + 1; j < C.n; j++)
            if (p[j] > p[i]) {
                long long t = p[i];
                p[i] = p[j];
                p[j] = t;
            }
    return *at + (double)p[C.n / 2];
}

/* Through a relay that delays each direction by 150 ms: each answer's validity,
 * counted from the ping's send, ends no later than GET's validity (counted from its
 * send) and the quorum's own expiry say; counted from its receipt it would not. */
Test(duplex, an_answer_never_outlasts_the_lock)
{
    h_require_local(&C);
    const long ttl = 3000;
    h_proxy *px = h_proxy_start(C.svc.port);
    h_proxy_set_delay(px, 150);
    dx d;
    dx_hold(&d, h_proxy_port(px), "dx.true", ttl);
    int receipt_over = 0;
    for (int k = 1; k <= 8; k++) {
        double sent;
        json_t *a = dx_ping(&d, k, 5000, &sent);
        double got = h_now_ms();
        cr_assert(is_event(a, "alive", NULL), "%s", a ? json_dumps(a, 0) : "(none)");
        double v = (double)jint(a, "validity_ms");
        json_decref(a);
        double get_sent = h_now_ms();
        h_resp r;
        h_http(&C, "GET", "/locks/dx.true", NULL, &r);
        cr_assert_eq(r.status, 200);
        double g = (double)h_int(&r, "validity_ms");
        h_resp_free(&r);
        double at, expiry = quorum_expiry("redlock:dx.true", &at);
        cr_assert(sent + v <= get_sent + g + 2, "ping %d: told to %.0f ms after its send, GET says %.0f ms after its "
                  "own: %.0f ms too long", k, v, g, sent + v - get_sent - g);
        cr_assert(sent + v <= expiry, "ping %d: the belief outlasts the quorum's expiry by %.0f ms", k,
                  sent + v - expiry);
        receipt_over += got + v > get_sent + g + 2;
        usleep(ttl / 8 * 1000);
    }
    fprintf(stderr, "duplex: counted from their receipt, %d of 8 answers would have outlasted GET's validity\n",
            receipt_over);
    cr_assert_gt(receipt_over, 0, "the relay's delay shows: an anchor at receipt overstates");
    dx_free(&d);
    h_proxy_stop(px);
}

/* ---- other ends ---- */

Test(duplex, a_hang_up_without_release_lets_go_once_the_validity_told_runs_out)
{
    h_require_local(&C);
    const long ttl = 1000;
    dx d;
    dx_hold(&d, C.svc.port, "dx.cut", ttl);
    json_t *a = dx_ping(&d, 1, 5000, NULL);
    cr_assert(is_event(a, "alive", NULL));
    json_decref(a);
    struct waiter w = {0};
    waiter_start(&w, C.svc.url, "dx.cut", 10000);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the other client parks");
    double closed = h_now_ms();
    dx_free(&d); /* a cut, or a client gone without a word */
    pthread_join(w.th, NULL);
    fprintf(stderr, "duplex: hang-up: other granted %.0f ms after it, %.0f ms after the told validity ended\n",
            w.done_ms - closed, w.done_ms - d.valid_until);
    cr_assert_eq(w.status, 201);
    cr_assert(w.done_ms >= d.valid_until, "granted %.0f ms before the told validity ended",
              d.valid_until - w.done_ms);
    cr_assert(w.done_ms - d.valid_until <= 700, "granted %.0f ms after the told validity ended",
              w.done_ms - d.valid_until);
}

Test(duplex, a_bad_line_ends_the_hold)
{
    h_require_local(&C); /* its own instance's port and metrics */
    dx d;
    dx_hold(&d, C.svc.port, "dx.bad", 30000);
    dx_send(&d, "{\"ping\":-1}\n");
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "lost", "bad_message"), "%s", l ? json_dumps(l, 0) : "(none)");
    cr_assert(*jstr(l, "message"), "with a message");
    json_decref(l);
    /* No more answers; a release lets the lock go at once and closes. */
    dx_send(&d, "{\"ping\":2}\n{\"release\":true}\n");
    cr_assert(dx_wait_eof(&d, 5000), "closed after the release");
    cr_assert(h_wait_until(takeable, "dx.bad", 2000), "free at once (ttl 30 s: not by expiry)");
    dx_free(&d);
}

Test(duplex, a_delete_with_the_lease_ends_it_with_released)
{
    h_require_local(&C); /* its own instance's port and metrics */
    dx d;
    dx_hold(&d, C.svc.port, "dx.del", 30000);
    json_t *a = dx_ping(&d, 1, 5000, NULL);
    cr_assert(is_event(a, "alive", NULL));
    json_decref(a);
    cr_assert_eq(h_release(&C, "dx.del", jstr(d.grant, "lease")), 200);
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "released", NULL) && !json_object_get(l, "reason"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    cr_assert(dx_wait_eof(&d, 2000));
    dx_free(&d);
}

struct term_arg {
    h_service *svc;
    int rc;
};

static void *term_main(void *arg)
{
    struct term_arg *t = arg;
    t->rc = h_service_term(t->svc, 30000);
    return NULL;
}

static int held_nowhere(void *key)
{
    for (int i = 0; i < C.n; i++)
        if (h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS %s", (const char *)key) != 0)
            return 0;
    return 1;
}

Test(duplex, sigterm_says_shutting_down_and_the_client_releases)
{
    h_require_local(&C);
    h_service b;
    h_service_start(&C, &b, NULL);
    dx d;
    dx_hold(&d, b.port, "dx.term", 30000);
    json_t *a = dx_ping(&d, 1, 5000, NULL);
    cr_assert(is_event(a, "alive", NULL));
    json_decref(a);
    struct term_arg t = {&b, -2};
    pthread_t th;
    double t0 = h_now_ms();
    cr_assert_eq(pthread_create(&th, NULL, term_main, &t), 0);
    json_t *l = dx_line(&d, 10000);
    cr_assert(is_event(l, "lost", "shutting_down"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    dx_send(&d, "{\"release\":true}\n");
    cr_assert(dx_wait_eof(&d, 5000), "closed after the release");
    pthread_join(th, NULL);
    cr_assert_eq(t.rc, 0, "exit 0 (see %s)", b.log);
    fprintf(stderr, "duplex: SIGTERM with a duplex holder: exited after %.0f ms\n", h_now_ms() - t0);
    cr_assert(h_wait_until(held_nowhere, "redlock:dx.term", 2000), "released on every master");
    dx_free(&d);
}

/* SIGTERM with a holder that says nothing more (stopped, or cut off): the instance
 * exits within its shutdown bound, and leaves the lock to expire on the masters rather
 * than release it while the holder may still count on what it was told. */
Test(duplex, sigterm_never_releases_before_the_validity_told)
{
    h_require_local(&C);
    h_service b;
    h_service_start(&C, &b, "--node-timeout-ms 100"); /* a shutdown bound of 4 s */
    dx d;
    dx_hold(&d, b.port, "dx.term2", 30000);
    json_t *a = dx_ping(&d, 1, 5000, NULL);
    cr_assert(is_event(a, "alive", NULL));
    json_decref(a);
    double t0 = h_now_ms();
    int rc = h_service_term(&b, 30000);
    double took = h_now_ms() - t0;
    fprintf(stderr, "duplex: SIGTERM with a silent duplex holder: exited after %.0f ms\n", took);
    cr_assert_eq(rc, 0, "exit 0 (see %s)", b.log);
    cr_assert(took < 6000, "exited after %.0f ms (20 node timeouts + 2 s, then 0.5 s)", took);
    json_t *l = dx_line(&d, 2000);
    cr_assert(is_event(l, "lost", "shutting_down"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    cr_assert(h_now_ms() < d.valid_until, "the test ran within the validity told");
    int holding = 0;
    for (int i = 0; i < C.n; i++)
        holding += h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS redlock:dx.term2") == 1;
    cr_assert_geq(holding, C.n / 2 + 1, "still held by a quorum (%d): left to expire", holding);
    cr_assert_eq(h_acquire(&C, "dx.term2", NULL, NULL, 0, NULL), 409, "nobody else gets it meanwhile");
    dx_free(&d);
}

Test(duplex, a_semaphore_permit)
{
    h_require_local(&C); /* its own instance's port and metrics */
    dx d;
    dx_open(&d, C.svc.port, "/semaphores/dx.sem?permits=1&hold=stream&ttl_ms=2000", 10000);
    cr_assert_eq(d.status, 101, "%s %s", d.head, d.body);
    cr_assert_str_eq(jstr(d.grant, "name"), "dx.sem", "%s", json_dumps(d.grant, 0));
    cr_assert_eq(jint(d.grant, "permits"), 1);
    cr_assert_eq(jint(d.grant, "ping_ms"), 500);
    for (int i = 1; i <= 3; i++) {
        json_t *a = dx_ping(&d, i, 5000, NULL);
        cr_assert(is_event(a, "alive", NULL), "%s", a ? json_dumps(a, 0) : "(none)");
        json_decref(a);
        h_resp q;
        h_http(&C, "POST", "/semaphores/dx.sem?permits=1", NULL, &q);
        cr_assert_eq(q.status, 409, "the only permit is held: %s", q.body);
        h_resp_free(&q);
        usleep(500 * 1000);
    }
    dx_send(&d, "{\"release\":true}\n");
    json_t *l = dx_line(&d, 5000);
    cr_assert(is_event(l, "released", "requested"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    h_resp q;
    h_http(&C, "POST", "/semaphores/dx.sem?permits=1", NULL, &q);
    cr_assert_eq(q.status, 201, "the permit is free: %s", q.body);
    h_resp_free(&q);
    dx_free(&d);
}

Test(duplex, refusals_are_ordinary_answers)
{
    cr_assert_eq(h_acquire(&C, "dx.busy", "ttl_ms=30000", NULL, 0, NULL), 201);
    dx d;
    dx_open(&d, url_port(C.svc.url), "/locks/dx.busy?hold=stream", 10000);
    cr_assert_eq(d.status, 409, "%s", d.head);
    cr_assert(d.json, "%s", d.body);
    cr_assert_str_eq(jstr(d.json, "error"), "lock_held");
    dx_free(&d);
    dx_open(&d, url_port(C.svc.url), "/locks/dx.plain", 10000); /* no hold=stream */
    cr_assert_eq(d.status, 400, "%s", d.head);
    cr_assert_str_eq(jstr(d.json, "error"), "invalid_hold", "%s", d.body);
    dx_free(&d);
    dx_open_h(&d, url_port(C.svc.url), "/locks/dx.plain?hold=stream", "Upgrade: redlock-hold\r\n", 10000);
    cr_assert_eq(d.status, 400, "%s", d.head);
    cr_assert_str_eq(jstr(d.json, "error"), "invalid_hold", "%s", d.body);
    dx_free(&d);
    /* Nothing was taken. */
    cr_assert(takeable("dx.plain"));
}

Test(duplex, over_the_tls_listener)
{
    h_require_local(&C);
    if (system("python3 -c 'import ssl' >/dev/null 2>&1") != 0)
        cr_skip_test("needs python3 with ssl");
    char dir[] = "/tmp/dxtlsXXXXXX", cmd[1200];
    cr_assert(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
             "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1", dir, dir);
    cr_assert(system(cmd) == 0, "openssl");
    char flags[600];
    snprintf(flags, sizeof flags, "--tls-cert %s/cert.pem --tls-key %s/key.pem", dir, dir);
    h_service b;
    h_service_start(&C, &b, flags);
    /* The grant, three pings, a release: each line printed, then EOF. */
    snprintf(cmd, sizeof cmd,
             "python3 - %d <<'EOF'\n"
             "import socket, ssl, sys, json\n"
             "c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE\n"
             "s = c.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))))\n"
             "s.settimeout(5)\n"
             "s.sendall(b'POST /locks/dx.tls?hold=stream&ttl_ms=2000 HTTP/1.1\\r\\nHost: x\\r\\n"
             "Connection: Upgrade\\r\\nUpgrade: redlock-hold\\r\\nContent-Length: 0\\r\\n\\r\\n')\n"
             "b = b''\n"
             "def line():\n"
             "    global b\n"
             "    while b'\\n' not in b:\n"
             "        d = s.recv(4096)\n"
             "        if not d: return None\n"
             "        b += d\n"
             "    l, b = b.split(b'\\n', 1); return l.decode()\n"
             "while b'\\r\\n\\r\\n' not in b: b += s.recv(4096)\n"
             "h, b = b.split(b'\\r\\n\\r\\n', 1); print(h.split(b'\\r\\n')[0].decode())\n"
             "print(line())\n"
             "for i in range(3):\n"
             "    s.sendall(b'{\"ping\":%%d}\\n' %% i); print(line())\n"
             "s.sendall(b'{\"release\":true}\\n'); print(line()); print('EOF' if line() is None else 'MORE')\n"
             "EOF\n", b.port);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[8][512];
    int n = 0;
    while (n < 8 && fgets(out[n], sizeof out[n], p))
        n++;
    int rc = pclose(p);
    cr_assert_eq(rc, 0, "the python client failed (%d lines)", n);
    cr_assert_eq(n, 7, "7 lines: %d", n);
    cr_assert(strncmp(out[0], "HTTP/1.1 101", 12) == 0, "%s", out[0]);
    cr_assert(strstr(out[1], "\"ping_ms\":500"), "%s", out[1]);
    for (int i = 0; i < 3; i++)
        cr_assert(strstr(out[2 + i], "\"event\":\"alive\""), "%s", out[2 + i]);
    cr_assert(strstr(out[5], "\"requested\""), "%s", out[5]);
    cr_assert(strncmp(out[6], "EOF", 3) == 0, "the service closes the TLS connection: %s", out[6]);
    h_service_stop(&b);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert(system(cmd) == 0);
}

/* ---- the connection cap ---- */

static void raise_nofile(rlim_t want)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    cr_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    cr_assert_geq(rl.rlim_cur, want);
}

/* With 260 idle connections on an instance capped at 300 over two workers, every one
 * of 40 requests on new connections is answered (each worker capped itself at 150, and
 * the workers take connections unevenly); past the cap, connections are refused. */
struct held_fds {
    pid_t pid;
    int want;
};

static int holds_fds(void *arg)
{
    const struct held_fds *h = arg;
    return h_open_fds(h->pid) >= h->want;
}

Test(duplex, the_connection_cap_is_the_instance_s)
{
    h_require_local(&C);
    raise_nofile(1000);
    h_service b;
    h_service_start(&C, &b, "--max-connections 300 --threads 2 --header-timeout-ms 60000");
    enum { IDLE = 260, ASK = 40 };
    int fds[IDLE + 1];
    /* a few descriptors of the service's own may come and go meanwhile (a master's
     * connection made again, a probe's): wait for all but 4 of the idle ones */
    struct held_fds base = {b.pid, h_open_fds(b.pid) + IDLE - 4};
    for (int i = 0; i < IDLE; i++)
        fds[i] = dial(b.port);
    /* Every idle connection is taken by a worker before the requests (a fixed 300 ms
     * was not always enough on a busy machine). */
    cr_assert(h_wait_until(holds_fds, &base, 10000), "the service accepts the %d idle connections", IDLE);
    int answered = 0;
    for (int i = 0; i < ASK; i++) {
        void *curl = NULL; /* a new connection each */
        h_resp r;
        h_http_to(b.url, &curl, "GET", "/healthz", NULL, &r);
        answered += r.status == 200;
        h_resp_free(&r);
        curl_easy_cleanup(curl);
    }
    fprintf(stderr, "duplex: cap 300, %d idle: %d of %d requests answered\n", IDLE, answered, ASK);
    cr_assert_eq(answered, ASK, "%d of %d requests answered below the cap", answered, ASK);
    /* 40 more idle ones reach the cap: the next connection is refused. */
    int more[40];
    for (int i = 0; i < 40; i++)
        more[i] = dial(b.port);
    base.want += 40; /* ASK's connections are closed: back to the idle ones, then these */
    cr_assert(h_wait_until(holds_fds, &base, 10000), "the service accepts 40 more, to its cap");
    void *curl = NULL;
    h_resp r;
    h_http_to(b.url, &curl, "GET", "/healthz", NULL, &r);
    cr_assert_neq(r.status, 200, "a request past the cap is refused");
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    for (int i = 0; i < 40; i++)
        close(more[i]);
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    h_service_stop(&b);
}

/* What a hold says when its lease is gone: "lost" with reason lease_lost when the keys
 * went behind the service's back (no release heard); "released" when a release of the
 * lease went through the service, even right after the grant, while the hold's first
 * extension (sent at once) may reach the masters after it: an extension that finds the
 * lease gone with no release heard asks once more a node timeout later (hold.c). */
Test(duplex, a_lease_gone_behind_the_service_is_lost_and_one_released_is_released)
{
    h_require_local(&C); /* its own instance's port, and the masters' keys */
    dx d;
    dx_hold(&d, C.svc.port, "dx.gone", 3000);
    json_t *a = dx_ping(&d, 1, 5000, NULL);
    cr_assert(is_event(a, "alive", NULL), "%s", a ? json_dumps(a, 0) : "(none)");
    json_decref(a);
    for (int i = 0; i < C.n; i++)
        h_redis_cmd(&C.masters[i], NULL, 0, "DEL redlock:dx.gone");
    json_t *l = NULL;
    for (int k = 0; k < 20 && !(l && is_event(l, "lost", NULL)); k++) {
        json_decref(l);
        l = dx_line(&d, 3000); /* the next extension (a third of the ttl) finds it gone */
    }
    cr_assert(is_event(l, "lost", "lease_lost"), "%s", l ? json_dumps(l, 0) : "(none)");
    json_decref(l);
    dx_free(&d);

    for (int round = 0; round < 10; round++) {
        char name[32], body[300];
        snprintf(name, sizeof name, "dx.rel%d", round);
        dx_hold(&d, C.svc.port, name, 3000);
        snprintf(body, sizeof body, "{\"lease\":\"%s\"}", jstr(d.grant, "lease"));
        char path[64];
        snprintf(path, sizeof path, "/locks/%s", name);
        h_resp r;
        h_http(&C, "DELETE", path, body, &r);
        cr_assert_eq(r.status, 200, "%s", r.body);
        h_resp_free(&r);
        l = NULL;
        for (int k = 0; k < 20 && !(l && (is_event(l, "lost", NULL) || is_event(l, "released", NULL))); k++) {
            json_decref(l);
            l = dx_line(&d, 3000);
        }
        cr_assert(is_event(l, "released", NULL), "round %d: %s", round, l ? json_dumps(l, 0) : "(none)");
        json_decref(l);
        dx_free(&d);
    }
}
