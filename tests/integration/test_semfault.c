/* test_semfault.c -- an extension that misses a quorum never takes a lock from a holder
 * that is still valid (docs/DESIGN.md, sections 1 and 10), against real masters.
 *
 * The chaos checker's finding (k) on 833fc1e: a streamed permit granted on masters
 * {1,2,4} while 0 was quarantined and 3 frozen; 0 and 3 came back without its key, 4
 * was cut off; its next extension was answered "not held" by 0 and 3, "held" by 1 and
 * 2, nothing by 4.  Fewer than a quorum said "held", so the service judged the lease
 * lost and deleted it everywhere it could (1 and 2) -- yet 1, 2 and 4 still held it, a
 * quorum, for the validity the holder had been told.  A second client was granted the
 * same slot on {0,1,2,3}.  Each test here builds that state exactly, with five real
 * masters: frozen (SIGSTOP) during the grant, thawed, then another one frozen.
 *
 * - A permit's PATCH, and a lock's: 503, not 404, and nobody else is granted.
 * - A one-way streamed permit: its extension fails without a "lost" line or a release,
 *   nobody else is granted; its "lost" line (no_quorum) comes before the validity it
 *   announced ends, and the lock is let go only once that validity is over. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
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

static void teardown(void)
{
    if (!C.external)
        for (int i = 0; i < C.n; i++)
            if (C.masters[i].pid > 0)
                h_redis_thaw(&C.masters[i]);
    h_cluster_stop(&C);
}

TestSuite(semfault, .fini = teardown, .timeout = 120);

static long call(const char *method, const char *path, const char *body, h_resp *out)
{
    return h_call(&C, method, path, body, out);
}

static int ready(int i)
{
    char st[32];
    h_master_state(&C, NULL, i, st, sizeof st, NULL);
    return strcmp(st, "ready") == 0;
}

static int m03_down(void *arg)
{
    (void)arg;
    return !ready(0) && !ready(3);
}

static int all_ready(void *arg)
{
    (void)arg;
    for (int i = 0; i < C.n; i++)
        if (!ready(i))
            return 0;
    return 1;
}

/* Which of the masters in ask (bit i for master i; none of them frozen) hold key. */
static unsigned holders_of(const char *key, unsigned ask)
{
    unsigned m = 0;
    for (int i = 0; i < C.n; i++)
        if ((ask >> i & 1) && h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS %s", key) == 1)
            m |= 1u << i;
    return m;
}

/* Which of masters 0-3 hold key (4 is frozen whenever this is asked). */
static unsigned holders(const char *key)
{
    return holders_of(key, 0xfu);
}

/* Five masters, one worker (one connection per master, so the order of what it sends
 * to a master is the order of the requests), masters 0 and 3 frozen and marked down. */
static void start_with_0_and_3_down(void)
{
    h_cluster_start(&C, 5, 0, "--threads 1 --node-timeout-ms 100");
    h_require_local(&C);
    h_redis_freeze(&C.masters[0]);
    h_redis_freeze(&C.masters[3]);
    cr_assert(h_wait_until(m03_down, NULL, 20000), "masters 0 and 3 marked down");
}

/* Masters 0 and 3 back (without key: the grant never reached them), then 4 frozen:
 * key is held on 1, 2 and 4, a quorum, and a round can reach 1 and 2 only with it. */
static void back_0_and_3_then_freeze_4(const char *key)
{
    unsigned m = holders_of(key, 0x16u);
    cr_assert_eq(m, 0x16u, "granted on masters 1, 2 and 4 (mask %#x)", m);
    h_redis_thaw(&C.masters[0]);
    h_redis_thaw(&C.masters[3]);
    cr_assert(h_wait_until(all_ready, NULL, 20000), "masters 0 and 3 back");
    m = holders_of(key, 0x1fu);
    cr_assert_eq(m, 0x16u, "0 and 3 came back without the key (mask %#x)", m);
    h_redis_freeze(&C.masters[4]);
}

/* The PATCH of a holder whose lock is held on {1,2,4}, 4 silent: not lost. */
static void patch_with_4_silent(const char *path, const char *key)
{
    start_with_0_and_3_down();
    h_resp r;
    char q[300];
    snprintf(q, sizeof q, "%s%s", path, strchr(path, '?') ? "&ttl_ms=30000" : "?ttl_ms=30000");
    cr_assert_eq(call("POST", q, NULL, &r), 201, "%s", r.body);
    char lease[200], body[300];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    back_0_and_3_then_freeze_4(key);
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":30000}", lease);
    char plain[300];
    snprintf(plain, sizeof plain, "%.*s", (int)strcspn(path, "?"), path);
    long st = call("PATCH", plain, body, &r);
    fprintf(stderr, "semfault: PATCH %s with 1, 2 holding, 0, 3 without, 4 frozen: %ld %s\n", plain, st,
            r.body);
    h_resp_free(&r);
    /* The holder's grant (30 s) is valid: nobody else may be granted. */
    snprintf(q, sizeof q, "%s%swait_ms=0", path, strchr(path, '?') ? "&" : "?");
    long other = call("POST", q, NULL, &r);
    cr_assert_neq(other, 201, "a second holder while the first is valid (masters 1, 2, 4 hold it): %s",
                  r.body);
    h_resp_free(&r);
    cr_assert_eq(holders(key) & 0x6u, 0x6u, "masters 1 and 2 still hold the key (mask %#x)", holders(key));
    cr_assert_eq(st, 503, "a quorum may hold the lease: unavailable, not lost");
    cr_assert_eq(other, 409, "held");
}

Test(semfault, a_permits_extension_that_misses_a_quorum_does_not_delete_it)
{
    patch_with_4_silent("/semaphores/sf.sem?permits=1", "redlock:#sem:sf.sem#0");
}

Test(semfault, a_locks_extension_that_misses_a_quorum_does_not_delete_it)
{
    patch_with_4_silent("/locks/sf.lock", "redlock:sf.lock");
}

/* ---- a one-way stream, read on a raw socket ---- */

typedef struct oneway {
    int fd;
    char raw[16384];
    size_t raw_len;
    int headers_done, eof;
} oneway;

static void ow_open(oneway *s, const char *path, const char *body)
{
    memset(s, 0, sizeof *s);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s->fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)C.svc.port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(s->fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, strlen(body), body);
    cr_assert_eq(write(s->fd, req, (size_t)n), n);
}

/* Read more bytes until deadline (monotonic ms); 0 on timeout or end. */
static int ow_fill(oneway *s, double deadline)
{
    double left = deadline - h_now_ms();
    if (s->eof || left <= 0)
        return 0;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, (int)left + 1) <= 0)
        return 0;
    cr_assert_lt(s->raw_len, sizeof s->raw - 1, "a stream longer than the buffer");
    ssize_t k = read(s->fd, s->raw + s->raw_len, sizeof s->raw - 1 - s->raw_len);
    if (k <= 0) {
        s->eof = 1;
        return 0;
    }
    s->raw_len += (size_t)k;
    s->raw[s->raw_len] = '\0';
    return 1;
}

/* The next line of the stream's chunked body (one chunk per line, as the service
 * writes them) into out; 0 if none came by deadline or the stream ended. */
static int ow_line(oneway *s, char *out, size_t cap, double deadline)
{
    for (;;) {
        if (!s->headers_done) {
            char *e = strstr(s->raw, "\r\n\r\n");
            if (e) {
                cr_assert(strncmp(s->raw, "HTTP/1.1 201", 12) == 0, "not granted: %s", s->raw);
                size_t used = (size_t)(e + 4 - s->raw);
                memmove(s->raw, e + 4, s->raw_len - used + 1);
                s->raw_len -= used;
                s->headers_done = 1;
                continue;
            }
        } else {
            char *crlf = strstr(s->raw, "\r\n");
            if (crlf) {
                size_t size = strtoul(s->raw, NULL, 16);
                size_t head = (size_t)(crlf + 2 - s->raw);
                if (size == 0)
                    return 0; /* the last chunk */
                if (s->raw_len >= head + size + 2) {
                    size_t n = size < cap ? size : cap - 1;
                    while (n > 0 && (s->raw[head + n - 1] == '\n' || s->raw[head + n - 1] == '\r'))
                        n--; /* the line without its end */
                    memcpy(out, s->raw + head, n);
                    out[n] = '\0';
                    memmove(s->raw, s->raw + head + size + 2, s->raw_len - head - size - 2 + 1);
                    s->raw_len -= head + size + 2;
                    return 1;
                }
            }
        }
        if (!ow_fill(s, deadline))
            return 0;
    }
}

/* The permit's key on master 1 is gone, or was renewed since the last look (its PTTL
 * went up: an extension's PEXPIRE, even in a round that missed a quorum). */
static int gone_or_renewed(void *arg)
{
    long long *last = arg;
    long long p = h_redis_cmd(&C.masters[1], NULL, 0, "PTTL redlock:#sem:sf.str#0");
    int yes = p < 0 || p > *last;
    *last = p;
    return yes;
}

/* The chaos finding itself: a one-way streamed permit, held on {1,2,4}, 4 silent. */
Test(semfault, a_streamed_permit_is_not_taken_while_a_quorum_may_hold_it)
{
    start_with_0_and_3_down();
    oneway s;
    char line[1024];
    const char *key = "redlock:#sem:sf.str#0";
    ow_open(&s, "/semaphores/sf.str?hold=stream", "{\"permits\":1,\"ttl_ms\":3000}");
    cr_assert(ow_line(&s, line, sizeof line, h_now_ms() + 5000), "the grant line");
    cr_assert_not_null(strstr(line, "\"lease\""), "%s", line);
    back_0_and_3_then_freeze_4(key);
    /* Its next extension (every second) reaches 1 and 2 only. */
    long long last = h_redis_cmd(&C.masters[1], NULL, 0, "PTTL %s", key);
    cr_assert(h_wait_until(gone_or_renewed, &last, 5000), "an extension ran after 4 was frozen");
    h_resp r;
    long other = call("POST", "/semaphores/sf.str?permits=1&wait_ms=0", NULL, &r);
    fprintf(stderr, "semfault: a competitor after the stream's extension with 4 frozen: %ld %s\n", other,
            r.body);
    cr_assert_neq(other, 201, "a second holder while the streamed permit is held on 1, 2 and 4: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(holders(key) & 0x6u, 0x6u, "masters 1 and 2 still hold the key (mask %#x)", holders(key));
    /* Each extension now fails: "lost" comes before the validity announced last ends
     * (a tenth of the ttl before), and nothing else does. */
    double t_lost = 0;
    while (ow_line(&s, line, sizeof line, h_now_ms() + 5000)) {
        fprintf(stderr, "semfault: line %s\n", line);
        if (strstr(line, "\"lost\"")) {
            t_lost = h_now_ms();
            break;
        }
        cr_assert_not_null(strstr(line, "\"extended\""), "only extended lines before lost: %s", line);
    }
    cr_assert_gt(t_lost, 0, "the stream said lost");
    cr_assert_not_null(strstr(line, "no_quorum"), "%s", line);
    /* The client may count on the validity it was told until its end, a tenth of the
     * ttl (300 ms) after the line: the lock is not let go before. */
    other = call("POST", "/semaphores/sf.str?permits=1&wait_ms=0", NULL, &r);
    double at = h_now_ms() - t_lost;
    fprintf(stderr, "semfault: a competitor %.0f ms after the lost line: %ld %s\n", at, other, r.body);
    h_resp_free(&r);
    if (at < 200)
        cr_assert_neq(other, 201, "granted %.0f ms after the lost line, before the validity told ran out", at);
    /* ... and soon after: the hold lets go then (not at the keys' expiry, 3 s later). */
    other = call("POST", "/semaphores/sf.str?permits=1&wait_ms=5000", NULL, &r);
    at = h_now_ms() - t_lost;
    fprintf(stderr, "semfault: a waiting competitor granted %.0f ms after the lost line: %ld\n", at, other);
    h_resp_free(&r);
    cr_assert_eq(other, 201);
    cr_assert_lt(at, 2000, "let go at the end of the validity told, not at the keys' expiry");
    close(s.fd);
}
