/* loadgen.c -- closed-loop HTTP/1.1 load generator for redlockd's lock API.
 *
 * Many keep-alive connections to one 127.0.0.1 port, driven by one epoll
 * loop per thread (-t).  Each connection has one request in flight and sends
 * the next as soon as the answer is in (closed loop).  Latency is taken per
 * request with CLOCK_MONOTONIC, from the first byte written to the last byte
 * of the answer parsed, into a log-linear histogram (HdrHistogram's idea:
 * 2^HIST_SUB_BITS linear buckets per power of two, so every value is kept
 * within 1/256 of itself).
 *
 * Modes (-m):
 *   cycle         POST /locks/<random of --keyspace>, then DELETE it with the
 *                 lease from the 201's JSON; one cycle = grant + release.
 *   contention    every connection POSTs one --name with no wait; 409s are
 *                 counted as "conflict", grants are released at once.
 *   handoff       every connection POSTs one --name with ?wait_ms=, holds it
 *                 --hold-ms, releases, repeats; "gap" is the time from a
 *                 DELETE written to the next grant read by any connection.
 *   acquire-only  POST random names, never release (use a short --ttl-ms).
 * --proto etcd runs cycle against etcd's v3 JSON gateway instead: one lease
 * per connection (POST /v3/lease/grant, as etcd's concurrency.Session does),
 * then /v3/lock/lock and /v3/lock/unlock per cycle.
 *
 * Bounds: --duration seconds (after --warmup), --requests in total, and a
 * per-request --timeout-ms.  Only loopback addresses are accepted.  At the
 * end, held locks are released (not counted) for at most --drain-ms.
 *
 * Limits: one request in flight per connection (no pipelining); answers up
 * to 1 MiB; the JSON reader finds a top-level string member and nothing else.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Histogram                                                            */
/* ------------------------------------------------------------------ */

#define HIST_SUB_BITS 8
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MAX_BITS 40 /* 2^40 ns = 18 minutes; larger values are clamped */
#define HIST_BUCKETS ((HIST_MAX_BITS - HIST_SUB_BITS + 2) * HIST_SUB)

struct hist {
    uint64_t count;
    uint64_t min, max; /* ns */
    double sum;        /* ns */
    uint64_t b[HIST_BUCKETS];
};

static unsigned hist_index(uint64_t v)
{
    if (v < HIST_SUB)
        return (unsigned)v;
    if (v >= (1ull << HIST_MAX_BITS))
        v = (1ull << HIST_MAX_BITS) - 1;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned g = msb - HIST_SUB_BITS + 1;
    unsigned sub = (unsigned)(v >> (g - 1)) - HIST_SUB;
    return g * HIST_SUB + sub;
}

/* Highest value that lands in bucket i (HdrHistogram reports the same). */
static uint64_t hist_bucket_high(unsigned i)
{
    unsigned g = i / HIST_SUB, sub = i % HIST_SUB;
    if (g == 0)
        return sub;
    uint64_t lo = (uint64_t)(HIST_SUB + sub) << (g - 1);
    return lo + (1ull << (g - 1)) - 1;
}

static void hist_record(struct hist *h, uint64_t v)
{
    if (h->count == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->count++;
    h->sum += (double)v;
    h->b[hist_index(v)]++;
}

static void hist_merge(struct hist *into, const struct hist *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    into->count += from->count;
    into->sum += from->sum;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        into->b[i] += from->b[i];
}

/* Value at quantile q (0..1), in ns; exact max for q == 1. */
static uint64_t hist_quantile(const struct hist *h, double q)
{
    if (h->count == 0)
        return 0;
    if (q >= 1.0)
        return h->max;
    uint64_t rank = (uint64_t)ceil(q * (double)h->count);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = hist_bucket_high(i);
            return v > h->max ? h->max : v;
        }
    }
    return h->max;
}

/* ------------------------------------------------------------------ */
/* HTTP/1.1 answer parsing                                             */
/* ------------------------------------------------------------------ */

struct http_resp {
    int status;
    size_t hdr_len;  /* bytes up to and including the blank line */
    size_t body_off; /* body as found in the buffer (decoded in place if chunked) */
    size_t body_len;
    size_t total;    /* bytes of the buffer this answer used */
    bool close;      /* Connection: close, or HTTP/1.0 without keep-alive */
};

static bool hdr_is(const char *line, size_t len, const char *name, const char **val, size_t *vlen)
{
    size_t n = strlen(name);
    if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
        return false;
    const char *v = line + n + 1, *e = line + len;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return true;
}

static bool token_in(const char *v, size_t n, const char *tok)
{
    size_t t = strlen(tok);
    for (size_t i = 0; i + t <= n; i++)
        if (strncasecmp(v + i, tok, t) == 0)
            return true;
    return false;
}

/* Chunked body at b[0..n): 1 complete (decoded in place, *out_len, *used
 * set), 0 incomplete, -1 malformed. */
static int http_dechunk(char *b, size_t n, size_t *out_len, size_t *used)
{
    for (int pass = 0; pass < 2; pass++) {
        size_t i = 0, o = 0;
        for (;;) {
            size_t sz = 0;
            int digits = 0;
            while (i < n) {
                char ch = b[i];
                int d = (ch >= '0' && ch <= '9') ? ch - '0'
                        : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
                        : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
                if (d < 0)
                    break;
                if (++digits > 8)
                    return -1;
                sz = sz * 16 + (size_t)d;
                i++;
            }
            if (i >= n)
                return 0;
            if (digits == 0)
                return -1;
            while (i < n && b[i] != '\n') /* chunk extensions */
                i++;
            if (i >= n)
                return 0;
            i++;
            if (sz == 0) {
                /* trailers up to an empty line */
                for (;;) {
                    size_t ls = i;
                    while (i < n && b[i] != '\n')
                        i++;
                    if (i >= n)
                        return 0;
                    size_t ll = i - ls;
                    i++;
                    if (ll == 0 || (ll == 1 && b[ls] == '\r'))
                        break;
                }
                if (pass == 1) {
                    *out_len = o;
                    *used = i;
                }
                break;
            }
            if (n - i < sz + 2)
                return 0;
            if (pass == 1)
                memmove(b + o, b + i, sz);
            o += sz;
            i += sz;
            if (b[i] == '\r')
                i++;
            if (b[i] != '\n')
                return -1;
            i++;
        }
    }
    return 1;
}

/* Parses one answer at buf[0..len).  eof: the peer closed after these
 * bytes.  Returns 1 with *r filled, 0 when more bytes are needed, -1 when
 * the bytes are not HTTP/1.x. */
static int http_parse(char *buf, size_t len, bool eof, struct http_resp *r)
{
    memset(r, 0, sizeof *r);
    char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (!end)
        return len > 16384 ? -1 : 0;
    r->hdr_len = (size_t)(end - buf) + 4;
    if (r->hdr_len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return -1;
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return -1;
        st = st * 10 + (buf[i] - '0');
    }
    r->status = st;
    bool http10 = buf[7] == '0', keepalive = false, chunked = false;
    long long clen = -1;
    char *line = memchr(buf, '\n', r->hdr_len);
    while (line && line + 1 < end) {
        line++;
        char *nl = memchr(line, '\n', (size_t)(end + 2 - line));
        if (!nl)
            break;
        size_t ll = (size_t)(nl - line);
        if (ll && line[ll - 1] == '\r')
            ll--;
        const char *v;
        size_t vl;
        if (hdr_is(line, ll, "content-length", &v, &vl)) {
            if (vl == 0 || vl > 12)
                return -1;
            clen = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return -1;
                clen = clen * 10 + (v[i] - '0');
            }
        } else if (hdr_is(line, ll, "transfer-encoding", &v, &vl)) {
            chunked = token_in(v, vl, "chunked");
        } else if (hdr_is(line, ll, "connection", &v, &vl)) {
            if (token_in(v, vl, "close"))
                r->close = true;
            if (token_in(v, vl, "keep-alive"))
                keepalive = true;
        }
        line = nl;
    }
    if (http10 && !keepalive)
        r->close = true;
    r->body_off = r->hdr_len;
    if (st / 100 == 1 || st == 204 || st == 304) {
        r->total = r->hdr_len;
        return 1;
    }
    if (chunked) {
        size_t used = 0, out = 0;
        int c = http_dechunk(buf + r->hdr_len, len - r->hdr_len, &out, &used);
        if (c <= 0)
            return c;
        r->body_len = out;
        r->total = r->hdr_len + used;
        return 1;
    }
    if (clen >= 0) {
        if (len - r->hdr_len < (size_t)clen)
            return 0;
        r->body_len = (size_t)clen;
        r->total = r->hdr_len + (size_t)clen;
        return 1;
    }
    /* No length: the body runs to the close. */
    if (!eof)
        return 0;
    r->body_len = len - r->hdr_len;
    r->total = len;
    r->close = true;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Minimal JSON: one top-level string member                           */
/* ------------------------------------------------------------------ */

static size_t json_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* String at s[i] == '"'; returns the index after it or 0 on error.  When
 * out is given, copies the raw content (escapes kept as is) if it fits. */
static size_t json_string(const char *s, size_t i, size_t n, char *out, size_t cap, size_t *olen)
{
    if (i >= n || s[i] != '"')
        return 0;
    size_t st = ++i;
    while (i < n && s[i] != '"') {
        if (s[i] == '\\')
            i++;
        i++;
    }
    if (i >= n)
        return 0;
    if (out) {
        size_t l = i - st;
        if (l + 1 > cap)
            return 0;
        memcpy(out, s + st, l);
        out[l] = '\0';
        *olen = l;
    }
    return i + 1;
}

/* Skips any JSON value at s[i]; returns the index after it or 0. */
static size_t json_skip(const char *s, size_t i, size_t n)
{
    i = json_ws(s, i, n);
    if (i >= n)
        return 0;
    if (s[i] == '"')
        return json_string(s, i, n, NULL, 0, NULL);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        while (i < n) {
            char ch = s[i];
            if (ch == '"') {
                i = json_string(s, i, n, NULL, 0, NULL);
                if (!i)
                    return 0;
                continue;
            }
            if (ch == '{' || ch == '[')
                depth++;
            else if (ch == '}' || ch == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return 0;
    }
    size_t st = i;
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n'
           && s[i] != '\r' && s[i] != '\t')
        i++;
    return i > st ? i : 0;
}

/* Finds top-level member `key` of the object in s[0..n): its value spans
 * s[*vs..*ve).  Returns false when the object or the member is not there. */
static bool json_find(const char *s, size_t n, const char *key, size_t *vs, size_t *ve)
{
    size_t i = json_ws(s, 0, n), kl = strlen(key);
    if (i >= n || s[i] != '{')
        return false;
    i++;
    for (;;) {
        i = json_ws(s, i, n);
        if (i < n && s[i] == '}')
            return false;
        size_t ks = i + 1;
        size_t after = json_string(s, i, n, NULL, 0, NULL);
        if (!after)
            return false;
        bool match = after - ks - 1 == kl && memcmp(s + ks, key, kl) == 0;
        i = json_ws(s, after, n);
        if (i >= n || s[i] != ':')
            return false;
        i = json_ws(s, i + 1, n);
        size_t end = json_skip(s, i, n);
        if (!end)
            return false;
        if (match) {
            *vs = i;
            *ve = end;
            return true;
        }
        i = json_ws(s, end, n);
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        return false;
    }
}

/* Top-level member `key` whose value is a string without escapes, copied to
 * out.  Returns its length, or -1. */
static long json_get_string(const char *s, size_t n, const char *key, char *out, size_t cap)
{
    size_t vs, ve, ol = 0;
    if (!json_find(s, n, key, &vs, &ve) || s[vs] != '"' || !json_string(s, vs, ve, out, cap, &ol))
        return -1;
    if (memchr(out, '\\', ol))
        return -1;
    return (long)ol;
}

/* Top-level member `key` whose value is a non-negative integer. */
static bool json_get_uint(const char *s, size_t n, const char *key, uint64_t *out)
{
    size_t vs, ve;
    if (!json_find(s, n, key, &vs, &ve) || ve - vs > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = vs; i < ve; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

static bool lease_ok(const char *s, size_t n)
{
    if (n < 1 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
              || c == '-'))
            return false;
    }
    return true;
}

static size_t base64_enc(const char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

/* ------------------------------------------------------------------ */
/* Configuration, stats                                                */
/* ------------------------------------------------------------------ */

enum mode { M_CYCLE, M_CONTENTION, M_HANDOFF, M_ACQUIRE_ONLY, M_PARK };
enum proto { P_REDLOCK, P_ETCD };
static const char *const mode_names[] = {"cycle", "contention", "handoff", "acquire-only", "park"};

/* What is locked (--kind): a plain lock, a reader, a semaphore's permit, a reentrant
 * lock entered --depth times, a set of --set-size names. */
enum lkind { LK_LOCK, LK_SHARED, LK_SEM, LK_REENTRANT, LK_SET };
static const char *const lkind_names[] = {"lock", "shared", "sem", "reentrant", "set"};

/* What a parked connection is (--park): a duplex streamed hold (Upgrade: redlock-hold,
 * pinging), a one-way streamed hold, a watch (GET ?index=&wait_ms=, again at each answer). */
enum park { PK_DUPLEX, PK_ONEWAY, PK_WATCH };
static const char *const park_names[] = {"duplex", "oneway", "watch"};

enum kind { K_ACQUIRE, K_RELEASE, K_CONFLICT, K_GAP, K_PING, K_NKINDS };
static const char *const kind_names[] = {"acquire", "release", "conflict", "gap", "ping"};

struct config {
    enum mode mode;
    enum proto proto;
    struct sockaddr_in addr;
    char host_hdr[64];
    int conns, threads;
    double duration_s, warmup_s;
    uint64_t max_requests; /* 0 = no bound */
    uint32_t keyspace;
    const char *name, *prefix, *label;
    long ttl_ms, wait_ms, hold_ms, timeout_ms, drain_ms;
    long etcd_lease_ttl_s;
    bool lease_in_body, json, quiet, name_given;
    uint64_t seed;
    enum lkind lkind;
    enum park park;
    long permits, depth, set_size;
    long ramp_per_s;             /* connects per second at the start (0: all at once) */
    /* the window's figures (main thread): CPU of these processes, the service's
     * /metrics, the masters' INFO commandstats */
    char cpu_groups[2][16];
    int cpu_pids[2][64], n_cpu_pids[2];
    bool scrape_metrics;
    int redis_ports[32], n_redis_ports;
};

#define ERR_CODES 32 /* distinct (status, error code) pairs kept; more go to "other" */

struct stats {
    struct hist h[K_NKINDS];
    uint64_t status[600]; /* answers that are none of the kinds, by status */
    struct {              /* the same answers by status and JSON "error" code */
        int status;
        char code[40];
        uint64_t n;
    } codes[ERR_CODES];
    uint64_t connect_err, conn_err, timeouts, parse_err, lease_err, server_close;
    /* single-name modes: a grant read while another connection held a grant
     * it had not yet released, and a fencing token not above every earlier one */
    uint64_t overlaps, fence_regress, fence_missing;
    uint64_t requests;
    uint64_t cycles;             /* in the window: a hold taken and given back (all depths) */
    /* park mode */
    uint64_t park_dropped;       /* parked connections that ended before the stop */
    uint64_t park_refused;       /* requests to park answered otherwise (status counted too) */
    uint64_t park_retries;       /* requests to park answered 503, tried again */
    uint64_t park_lines;         /* stream lines read (grant, alive, extended, ...) */
    uint64_t park_ended;         /* streams that said lost/released before the stop */
    uint64_t watch_answers;      /* watch answers (a change or wait_ms over) */
};

enum op { OP_NONE, OP_ACQUIRE, OP_RELEASE, OP_GRANT };
enum cstate { CS_CLOSED, CS_CONNECTING, CS_OPEN };

struct worker;

struct conn {
    struct worker *w;
    int fd;
    enum cstate state;
    enum op op;          /* request in flight, OP_NONE when idle */
    bool wdone;          /* request fully written */
    bool held;           /* we hold lease[] on name[] */
    bool done;           /* stopped: no more requests */
    bool hold_done;      /* this grant's --hold-ms has been served */
    bool holder;         /* counted in g_holders: granted, DELETE not yet sent */
    bool parked;         /* park mode: counted in g_parked */
    bool stream;         /* park mode: the stream (or the upgraded connection) is open */
    bool ping_out;       /* duplex: a ping is unanswered */
    bool releasing;      /* duplex: {"release":true} sent */
    int holds;           /* reentrant: holds taken of the current lease */
    int idx;             /* park mode: the connection's number (its name) */
    unsigned fails;      /* consecutive connect/IO failures */
    uint64_t ping_n, ping_ms, index;
    char carry[40];      /* one-way: the tail of the last read (an event split by a read) */
    size_t carry_len;
    uint64_t t_start;    /* ns: request's first write */
    uint64_t wake_at;    /* ns: reconnect or end of hold, 0 = none */
    char name[300];
    char name2[300];     /* set: the other names, '\n'-separated */
    char lease[512];     /* lease, or etcd lock key (base64) */
    char etcd_id[32];    /* etcd lease ID, "" until granted */
    char wbuf[1536];
    size_t wlen, woff;
    char *rbuf;
    size_t rlen, rcap;
    uint64_t rng;
};

struct worker {
    int id;
    const struct config *cfg;
    int epfd;
    struct conn *conns;
    int nconns;
    uint64_t t_meas, t_end; /* measurement window [t_meas, t_end) */
    uint64_t t_stop;        /* when this worker stopped starting work */
    uint64_t budget;        /* requests it may start, 0 = no bound */
    bool stopping;
    struct stats st;
    pthread_t tid;
};

/* Handoff: the last DELETE written by any connection (0 = already matched). */
static _Atomic uint64_t g_last_release_ns;
/* Single-name modes: connections holding a grant whose DELETE is not yet
 * written, and the largest fencing token seen.  A grant of one name can only
 * follow the release of the one before, so each grant must find no holder
 * and carry a larger token, whichever thread reads it. */
static _Atomic int g_holders;
static _Atomic uint64_t g_max_fence;
/* Park mode: connections parked now (granted stream, or watch in place), and the most. */
static _Atomic int g_parked, g_parked_peak;
static volatile sig_atomic_t g_interrupted;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static bool in_window(const struct worker *w, uint64_t t)
{
    return t >= w->t_meas && t < w->t_end && !w->stopping;
}

/* ------------------------------------------------------------------ */
/* Connection I/O                                                      */
/* ------------------------------------------------------------------ */

static void conn_start_next(struct conn *c, uint64_t now);

static void conn_close(struct conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(c->w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    c->state = CS_CLOSED;
    c->rlen = 0;
    c->wlen = c->woff = 0;
    c->wdone = false;
}

static void park_end(struct conn *c, bool dropped);
static void park_request(struct conn *c, uint64_t now);

/* Drops the connection and schedules a new one; the request in flight is
 * forgotten, except a release, which is sent again on the new connection.  A parked
 * connection is not made again: it counts as dropped. */
static void conn_reset(struct conn *c, uint64_t now, bool failure)
{
    if (c->w->cfg->mode == M_PARK) {
        park_end(c, true);
        return;
    }
    conn_close(c);
    if (c->op == OP_ACQUIRE) {
        c->held = false; /* a grant we never read expires by its TTL */
        c->holds = 0;
        c->releasing = false;
    }
    c->op = OP_NONE;
    if (failure)
        c->fails++;
    uint64_t backoff = 0;
    if (c->fails)
        backoff = (c->fails > 7 ? 128 : (1u << c->fails)) * 1000000ull; /* 2..128 ms */
    c->wake_at = now + backoff + 1;
}

static void conn_connect(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    c->wake_at = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        w->st.connect_err++;
        conn_reset(c, now, true);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    c->state = CS_CONNECTING;
    c->t_start = now;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        w->st.connect_err++;
        conn_reset(c, now, true);
        return;
    }
    if (connect(fd, (const struct sockaddr *)&w->cfg->addr, sizeof w->cfg->addr) < 0
        && errno != EINPROGRESS) {
        w->st.connect_err++;
        conn_reset(c, now, true);
    }
}

static void conn_flush(struct conn *c, uint64_t now)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* EPOLLOUT (edge) will call again */
        c->w->st.conn_err++;
        conn_reset(c, now, true);
        return;
    }
    c->wdone = true;
}

static int fmt_req(struct conn *c, const char *method, const char *path, const char *body)
{
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(c->wbuf, sizeof c->wbuf,
                     "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n\r\n%s", method, path,
                     c->w->cfg->host_hdr, body ? "Content-Type: application/json\r\n" : "", bl,
                     body ? body : "");
    if (n < 0 || (size_t)n >= sizeof c->wbuf)
        return -1;
    c->wlen = (size_t)n;
    return 0;
}

static void conn_send(struct conn *c, enum op op, uint64_t now)
{
    const struct config *cfg = c->w->cfg;
    char path[1024], body[1024];
    int rc = 0;
    if (cfg->proto == P_ETCD) {
        if (op == OP_GRANT) {
            snprintf(body, sizeof body, "{\"TTL\":%ld}", cfg->etcd_lease_ttl_s);
            rc = fmt_req(c, "POST", "/v3/lease/grant", body);
        } else if (op == OP_ACQUIRE) {
            char b64[420];
            base64_enc(c->name, strlen(c->name), b64);
            snprintf(body, sizeof body, "{\"name\":\"%s\",\"lease\":\"%s\"}", b64, c->etcd_id);
            rc = fmt_req(c, "POST", "/v3/lock/lock", body);
        } else {
            snprintf(body, sizeof body, "{\"key\":\"%s\"}", c->lease);
            rc = fmt_req(c, "POST", "/v3/lock/unlock", body);
        }
    } else if (op == OP_ACQUIRE && cfg->lkind == LK_SET) {
        /* POST /locks {"names":[...],"ttl_ms":..}: c->name, then c->name2's lines */
        size_t bl = (size_t)snprintf(body, sizeof body, "{\"names\":[\"%s\"", c->name);
        for (const char *p = c->name2; *p && bl < sizeof body;) {
            const char *e = strchr(p, '\n');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            bl += (size_t)snprintf(body + bl, sizeof body - bl, ",\"%.*s\"", (int)l, p);
            p += l + (e ? 1 : 0);
        }
        if (cfg->ttl_ms > 0 && bl < sizeof body)
            bl += (size_t)snprintf(body + bl, sizeof body - bl, "],\"ttl_ms\":%ld", cfg->ttl_ms);
        else if (bl < sizeof body)
            bl += (size_t)snprintf(body + bl, sizeof body - bl, "]");
        if (cfg->wait_ms > 0 && bl < sizeof body)
            bl += (size_t)snprintf(body + bl, sizeof body - bl, ",\"wait_ms\":%ld", cfg->wait_ms);
        if (bl < sizeof body)
            snprintf(body + bl, sizeof body - bl, "}");
        rc = bl < sizeof body - 1 ? fmt_req(c, "POST", "/locks", body) : -1;
    } else if (op == OP_ACQUIRE) {
        char q[700] = "";
        size_t ql = 0;
#define QADD(...) ql += (size_t)snprintf(q + ql, ql < sizeof q ? sizeof q - ql : 0, __VA_ARGS__)
        if (cfg->ttl_ms > 0)
            QADD("%cttl_ms=%ld", ql ? '&' : '?', cfg->ttl_ms);
        if (cfg->wait_ms > 0)
            QADD("%cwait_ms=%ld", ql ? '&' : '?', cfg->wait_ms);
        if (cfg->lkind == LK_SHARED)
            QADD("%cmode=shared", ql ? '&' : '?');
        if (cfg->lkind == LK_SEM)
            QADD("%cpermits=%ld", ql ? '&' : '?', cfg->permits);
        if (cfg->lkind == LK_REENTRANT) {
            QADD("%creentrant=true", ql ? '&' : '?');
            if (c->holds > 0) /* a re-entry: the lease held */
                QADD("&lease=%s", c->lease);
        }
#undef QADD
        snprintf(path, sizeof path, "/%s/%s%s", cfg->lkind == LK_SEM ? "semaphores" : "locks", c->name,
                 ql < sizeof q ? q : "");
        rc = ql < sizeof q ? fmt_req(c, "POST", path, NULL) : -1;
    } else {
        const char *coll = cfg->lkind == LK_SEM ? "semaphores" : "locks";
        if (cfg->lkind == LK_SET)
            snprintf(path, sizeof path, "/locks?lease=%s", c->lease);
        else if (cfg->lease_in_body)
            snprintf(path, sizeof path, "/%s/%s", coll, c->name);
        else
            snprintf(path, sizeof path, "/%s/%s?lease=%s", coll, c->name, c->lease);
        if (cfg->lease_in_body && cfg->lkind != LK_SET) {
            snprintf(body, sizeof body, "{\"lease\":\"%s\"}", c->lease);
            rc = fmt_req(c, "DELETE", path, body);
        } else {
            rc = fmt_req(c, "DELETE", path, NULL);
        }
    }
    if (rc < 0) { /* cannot happen with the bounded names and leases above */
        c->w->st.parse_err++;
        c->held = false;
        c->done = true;
        return;
    }
    if (op == OP_RELEASE && cfg->mode == M_HANDOFF)
        atomic_store(&g_last_release_ns, now);
    if (op == OP_RELEASE)
        c->releasing = true;
    if (op == OP_RELEASE && c->holder) {
        atomic_fetch_sub(&g_holders, 1);
        c->holder = false;
    }
    c->op = op;
    c->woff = 0;
    c->wdone = false;
    c->rlen = 0;
    c->t_start = now;
    c->w->st.requests++;
    if (c->w->budget)
        c->w->budget--;
    conn_flush(c, now);
}

static void pick_name(struct conn *c)
{
    const struct config *cfg = c->w->cfg;
    if (cfg->mode == M_CONTENTION || cfg->mode == M_HANDOFF || cfg->name_given) {
        snprintf(c->name, sizeof c->name, "%s", cfg->name);
        return;
    }
    uint64_t k = rng_next(&c->rng) % cfg->keyspace;
    snprintf(c->name, sizeof c->name, "%s%" PRIu64, cfg->prefix, k);
    if (cfg->lkind != LK_SET)
        return;
    /* the set's other names: distinct from each other (a set names each once) */
    size_t l = 0;
    c->name2[0] = '\0';
    for (long i = 1; i < cfg->set_size && l < sizeof c->name2; i++)
        l += (size_t)snprintf(c->name2 + l, sizeof c->name2 - l, "%s%s%" PRIu64 "x%ld", l ? "\n" : "",
                              cfg->prefix, (k + (uint64_t)i * 7919) % cfg->keyspace, i);
}

/* Decides and sends a connection's next request, or parks it. */
static void conn_start_next(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    const struct config *cfg = w->cfg;
    if (c->state != CS_OPEN || c->op != OP_NONE || c->done)
        return;
    if (cfg->mode == M_PARK) {
        if (c->wake_at && now < c->wake_at)
            return;
        c->wake_at = 0;
        if (!c->stream && !w->stopping)
            park_request(c, now);
        return;
    }
    if (c->wake_at) { /* a hold, or a pause before retrying an etcd grant */
        if (now < c->wake_at && !w->stopping)
            return;
        c->wake_at = 0;
    }
    if (c->held) {
        if (cfg->lkind == LK_REENTRANT && c->holds < cfg->depth && !c->releasing && !w->stopping) {
            conn_send(c, OP_ACQUIRE, now); /* enter once more, with the lease */
            return;
        }
        if (cfg->hold_ms > 0 && !c->hold_done && !w->stopping) {
            c->hold_done = true;
            c->wake_at = now + (uint64_t)cfg->hold_ms * 1000000ull;
            return;
        }
        conn_send(c, OP_RELEASE, now);
        return;
    }
    if (w->stopping) {
        c->done = true;
        return;
    }
    if (cfg->max_requests && w->budget == 0) {
        w->stopping = true;
        w->t_stop = now;
        c->done = true;
        return;
    }
    if (cfg->proto == P_ETCD && c->etcd_id[0] == '\0') {
        conn_send(c, OP_GRANT, now);
        return;
    }
    pick_name(c);
    conn_send(c, OP_ACQUIRE, now);
}

static void count_code(struct stats *st, int status, const char *code, uint64_t n)
{
    for (int i = 0; i < ERR_CODES; i++) {
        if (st->codes[i].n == 0) {
            st->codes[i].status = status;
            snprintf(st->codes[i].code, sizeof st->codes[i].code, "%s", code);
        }
        if (st->codes[i].status == status && strcmp(st->codes[i].code, code) == 0) {
            st->codes[i].n += n;
            return;
        }
    }
    st->codes[ERR_CODES - 1].n += n; /* table full: lumped into the last entry */
}

/* An answer that is none of the kinds: counted by status and error code. */
static void count_status(struct stats *st, int status, const char *body, size_t len)
{
    char code[40];
    if (json_get_string(body, len, "error", code, sizeof code) <= 0 || !lease_ok(code, strlen(code)))
        snprintf(code, sizeof code, "-");
    st->status[status >= 0 && status < 600 ? status : 0]++;
    count_code(st, status, code, 1);
}

/* Safety checks on a grant of the one name of contention/handoff. */
static void check_single_name_grant(struct conn *c, const char *body, size_t len)
{
    struct stats *st = &c->w->st;
    if (atomic_fetch_add(&g_holders, 1) > 0)
        st->overlaps++;
    c->holder = true;
    uint64_t t;
    if (!json_get_uint(body, len, "fencing_token", &t)) {
        st->fence_missing++;
        return;
    }
    uint64_t prev = atomic_load(&g_max_fence);
    for (;;) {
        if (t <= prev) {
            st->fence_regress++;
            return;
        }
        if (atomic_compare_exchange_weak(&g_max_fence, &prev, t))
            return;
    }
}

/* One complete answer to the request in flight. */
static void conn_answer(struct conn *c, const struct http_resp *r, uint64_t now)
{
    struct worker *w = c->w;
    const struct config *cfg = w->cfg;
    struct stats *st = &w->st;
    const char *body = c->rbuf + r->body_off;
    uint64_t lat = now - c->t_start;
    bool rec = in_window(w, now);
    enum op op = c->op;
    c->op = OP_NONE;
    c->fails = 0;

    if (op == OP_GRANT) {
        long n = json_get_string(body, r->body_len, "ID", c->etcd_id, sizeof c->etcd_id);
        if (r->status != 200 || n <= 0) {
            c->etcd_id[0] = '\0';
            if (r->status != 200)
                count_status(st, r->status, body, r->body_len);
            else
                st->lease_err++;
            c->wake_at = now + 100000000ull; /* retry in 100 ms */
        }
        return;
    }
    if (op == OP_ACQUIRE) {
        int ok = cfg->proto == P_ETCD ? 200 : 201;
        if (r->status == ok) {
            const char *field = cfg->proto == P_ETCD ? "key" : "lease";
            long n = json_get_string(body, r->body_len, field, c->lease, sizeof c->lease);
            if (n <= 0 || (cfg->proto == P_REDLOCK && !lease_ok(c->lease, (size_t)n))) {
                st->lease_err++;
                return;
            }
            if (rec)
                hist_record(&st->h[K_ACQUIRE], lat);
            if (cfg->mode == M_HANDOFF) {
                uint64_t rel = atomic_exchange(&g_last_release_ns, 0);
                if (rel && rel < now && rec)
                    hist_record(&st->h[K_GAP], now - rel);
            }
            bool reentry = c->held && c->holds > 0;
            c->held = cfg->mode != M_ACQUIRE_ONLY;
            c->hold_done = false;
            c->holds++;
            if (cfg->proto == P_REDLOCK && (cfg->mode == M_CONTENTION || cfg->mode == M_HANDOFF) &&
                (cfg->lkind == LK_LOCK || cfg->lkind == LK_REENTRANT) && !reentry)
                check_single_name_grant(c, body, r->body_len);
        } else if (r->status == 409) {
            if (rec)
                hist_record(&st->h[K_CONFLICT], lat);
        } else {
            count_status(st, r->status, body, r->body_len);
        }
        return;
    }
    /* OP_RELEASE: a reentrant lock is held until its last hold is given back */
    if (r->status == 200 && cfg->lkind == LK_REENTRANT && c->holds > 1) {
        c->holds--;
        if (rec)
            hist_record(&st->h[K_RELEASE], lat);
        return;
    }
    c->held = false;
    c->holds = 0;
    c->releasing = false;
    if (r->status == 200) {
        if (rec) {
            hist_record(&st->h[K_RELEASE], lat);
            st->cycles++;
        }
    } else {
        count_status(st, r->status, body, r->body_len);
    }
}

static bool rbuf_reserve(struct conn *c, size_t want)
{
    if (c->rcap - c->rlen >= want)
        return true;
    size_t cap = c->rcap ? c->rcap : 4096;
    while (cap - c->rlen < want)
        cap *= 2;
    if (cap > (1u << 20))
        return false;
    char *p = realloc(c->rbuf, cap);
    if (!p)
        return false;
    c->rbuf = p;
    c->rcap = cap;
    return true;
}

static void conn_readable(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    bool eof = false;
    struct http_resp r;
    int pr = 0; /* http_parse() of the bytes read so far, once it is not 0 */
    for (;;) {
        if (!rbuf_reserve(c, 2048)) {
            w->st.parse_err++;
            conn_reset(c, now, true);
            return;
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
        if (n > 0) {
            c->rlen += (size_t)n;
            /* A complete answer ends the read without the recv() that would
             * only say EAGAIN: one syscall less per request.  Anything the
             * server sends after it arrives as a new edge. */
            if (c->op != OP_NONE && c->rlen < c->rcap) {
                pr = http_parse(c->rbuf, c->rlen, false, &r);
                if (pr != 0)
                    break; /* (a chunked body is now decoded in place) */
            }
            continue;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        w->st.conn_err++;
        conn_reset(c, now, true);
        return;
    }
    if (c->op == OP_NONE) {
        if (c->rlen > 0)
            w->st.parse_err++; /* bytes nobody asked for */
        else if (eof)
            w->st.server_close++; /* idle keep-alive closed by the server */
        if (c->rlen > 0 || eof)
            conn_reset(c, now, c->rlen > 0);
        return;
    }
    if (c->rlen == 0) {
        if (eof) {
            w->st.conn_err++;
            conn_reset(c, now, true);
        }
        return;
    }
    if (pr == 0)
        pr = http_parse(c->rbuf, c->rlen, eof, &r);
    if (pr == 0) {
        if (eof) {
            w->st.conn_err++; /* closed in the middle of an answer */
            conn_reset(c, now, true);
        }
        return;
    }
    if (pr < 0 || r.total != c->rlen) {
        w->st.parse_err++;
        conn_reset(c, now, true);
        return;
    }
    bool early = !c->wdone; /* answered before the request was written out */
    conn_answer(c, &r, now);
    c->rlen = 0;
    if (r.close || eof || early) {
        w->st.server_close++;
        conn_reset(c, now, false);
        return;
    }
    conn_start_next(c, now);
}

/* ------------------------------------------------------------------ */
/* Park mode: connections that stay (streamed holds, watches)          */
/* ------------------------------------------------------------------ */

static void park_count(int delta)
{
    int now = atomic_fetch_add(&g_parked, delta) + delta;
    int peak = atomic_load(&g_parked_peak);
    while (now > peak && !atomic_compare_exchange_weak(&g_parked_peak, &peak, now))
        ;
}

/* The parked connection is over (dropped by the service, refused, or stopped by us). */
static void park_end(struct conn *c, bool dropped)
{
    if (c->parked) {
        park_count(-1);
        c->parked = false;
    }
    if (dropped && !c->w->stopping)
        c->w->st.park_dropped++;
    conn_close(c);
    c->done = true;
    c->stream = false;
}

/* The request that parks c: the hold, or the watch (with the index seen, if any). */
static void park_request(struct conn *c, uint64_t now)
{
    const struct config *cfg = c->w->cfg;
    char path[512];
    int n;
    if (cfg->park == PK_WATCH) {
        if (c->index == UINT64_MAX)
            snprintf(path, sizeof path, "/locks/%s", c->name);
        else
            snprintf(path, sizeof path, "/locks/%s?index=%" PRIu64 "&wait_ms=%ld", c->name, c->index,
                     cfg->wait_ms > 0 ? cfg->wait_ms : 60000);
        n = snprintf(c->wbuf, sizeof c->wbuf, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, cfg->host_hdr);
    } else {
        snprintf(path, sizeof path, "/locks/%s?hold=stream%s%ld", c->name, cfg->ttl_ms > 0 ? "&ttl_ms=" : "",
                 cfg->ttl_ms > 0 ? cfg->ttl_ms : 0L);
        if (cfg->ttl_ms <= 0) /* (the %ld above printed a 0 after nothing: cut it) */
            path[strlen(path) - 1] = '\0';
        n = snprintf(c->wbuf, sizeof c->wbuf,
                     "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: 0\r\n\r\n", path, cfg->host_hdr,
                     cfg->park == PK_DUPLEX ? "Connection: Upgrade\r\nUpgrade: redlock-hold\r\n" : "");
    }
    if (n < 0 || (size_t)n >= sizeof c->wbuf) {
        c->w->st.parse_err++;
        park_end(c, false);
        return;
    }
    c->wlen = (size_t)n;
    c->woff = 0;
    c->wdone = false;
    c->op = OP_ACQUIRE;
    c->t_start = now;
    c->w->st.requests++;
    conn_flush(c, now);
}

static void park_write(struct conn *c, const char *line, uint64_t now)
{
    size_t l = strlen(line);
    if (c->woff < c->wlen || l >= sizeof c->wbuf) /* (never: one line in flight at a time) */
        return;
    memcpy(c->wbuf, line, l);
    c->wlen = l;
    c->woff = 0;
    c->wdone = false;
    conn_flush(c, now);
}

static void park_ping(struct conn *c, uint64_t now)
{
    char line[64];
    snprintf(line, sizeof line, "{\"ping\":%" PRIu64 "}\n", c->ping_n);
    c->ping_out = true;
    c->t_start = now;
    park_write(c, line, now);
}

/* One line of a stream. */
static void park_line(struct conn *c, const char *l, size_t n, uint64_t now)
{
    struct worker *w = c->w;
    char ev[32];
    if (!memchr(l, '{', n))
        return; /* a chunk's size line (one-way streams are chunked) */
    w->st.park_lines++;
    if (json_get_string(l, n, "event", ev, sizeof ev) < 0) {
        /* the grant line: duplex pings from now on */
        uint64_t p = 0;
        c->ping_ms = json_get_uint(l, n, "ping_ms", &p) && p > 0 ? p : 1000;
        if (w->cfg->park == PK_DUPLEX && !w->stopping)
            park_ping(c, now);
        return;
    }
    if (strcmp(ev, "alive") == 0) {
        if (c->ping_out && in_window(w, now))
            hist_record(&w->st.h[K_PING], now - c->t_start);
        c->ping_out = false;
        c->ping_n++;
        c->wake_at = now + c->ping_ms * 1000000ull;
        return;
    }
    if (strcmp(ev, "extended") == 0)
        return;
    /* lost or released: the stream ends */
    if (!c->releasing && !w->stopping)
        w->st.park_ended++;
}

static void park_readable(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    const struct config *cfg = w->cfg;
    bool eof = false;
    for (;;) {
        if (!rbuf_reserve(c, 2048)) {
            w->st.parse_err++;
            park_end(c, true);
            return;
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
        if (n > 0) {
            c->rlen += (size_t)n;
            continue;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        w->st.conn_err++;
        park_end(c, true);
        return;
    }
    while (!c->stream && c->rlen > 0) {
        /* an answer: the hold's header (101 / 201 streamed), or a whole watch answer */
        char *hend = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
        if (!hend)
            break;
        int status = c->rlen >= 12 ? atoi(c->rbuf + 9) : 0;
        size_t hl = (size_t)(hend - c->rbuf) + 4;
        if ((status == 101 && cfg->park == PK_DUPLEX) || (status == 201 && cfg->park == PK_ONEWAY)) {
            if (in_window(w, now))
                hist_record(&w->st.h[K_ACQUIRE], now - c->t_start);
            c->op = OP_NONE;
            c->stream = true;
            c->parked = true;
            park_count(1);
            memmove(c->rbuf, c->rbuf + hl, c->rlen - hl);
            c->rlen -= hl;
            break;
        }
        struct http_resp r;
        int pr = http_parse(c->rbuf, c->rlen, eof, &r);
        if (pr == 0)
            break;
        if (pr < 0) {
            w->st.parse_err++;
            park_end(c, true);
            return;
        }
        const char *body = c->rbuf + r.body_off;
        if (cfg->park == PK_WATCH && status == 200) {
            char idx[32];
            uint64_t v = 0;
            if (json_get_string(body, r.body_len, "index", idx, sizeof idx) <= 0) {
                w->st.parse_err++;
                park_end(c, true);
                return;
            }
            for (const char *p = idx; *p >= '0' && *p <= '9'; p++)
                v = v * 10 + (uint64_t)(*p - '0');
            if (c->index != UINT64_MAX && in_window(w, now))
                w->st.watch_answers++;
            if (!c->parked) {
                c->parked = true;
                park_count(1);
            }
            c->index = v;
            c->op = OP_NONE;
            memmove(c->rbuf, c->rbuf + r.total, c->rlen - r.total);
            c->rlen -= r.total;
            if (r.close) {
                park_end(c, true);
                return;
            }
            if (!w->stopping)
                park_request(c, now);
            continue;
        }
        if (r.status == 503 && !r.close && !w->stopping) {
            /* the service could not answer now (no quorum in time): again in 0.5..1 s,
             * as a client would */
            w->st.park_retries++;
            c->op = OP_NONE;
            c->wake_at = now + 500000000ull + rng_next(&c->rng) % 500000000ull;
            memmove(c->rbuf, c->rbuf + r.total, c->rlen - r.total);
            c->rlen -= r.total;
            continue;
        }
        count_status(&w->st, r.status, body, r.body_len);
        w->st.park_refused++;
        park_end(c, false);
        return;
    }
    if (c->stream) {
        size_t off = 0;
        for (;;) {
            char *nl = memchr(c->rbuf + off, '\n', c->rlen - off);
            if (!nl)
                break;
            size_t ll = (size_t)(nl - (c->rbuf + off));
            park_line(c, c->rbuf + off, ll, now);
            off += ll + 1;
        }
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (eof)
        park_end(c, !c->releasing);
}

/* A parked connection's timers: the next ping (duplex), the stop. */
static void park_tick(struct conn *c, uint64_t now)
{
    struct worker *w = c->w;
    if (c->done || c->state != CS_OPEN)
        return;
    if (w->stopping) {
        if (w->cfg->park == PK_DUPLEX && c->stream && !c->releasing) {
            c->releasing = true; /* the service answers "released" and closes */
            park_write(c, "{\"release\":true}\n", now);
        } else if (!c->stream || w->cfg->park != PK_DUPLEX) {
            park_end(c, false); /* one-way, watches: the hang-up ends them */
        }
        return;
    }
    if (w->cfg->park == PK_DUPLEX && c->stream && !c->ping_out && !c->releasing && c->wake_at &&
        now >= c->wake_at) {
        c->wake_at = 0;
        park_ping(c, now);
    }
}

static void conn_event(struct conn *c, uint32_t ev, uint64_t now)
{
    if (c->state == CS_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err == 0 && !(ev & (EPOLLERR | EPOLLHUP)) && (ev & EPOLLOUT)) {
            c->state = CS_OPEN;
            conn_start_next(c, now);
            return;
        }
        if (err == 0 && !(ev & (EPOLLERR | EPOLLHUP)))
            return;
        c->w->st.connect_err++;
        conn_reset(c, now, true);
        return;
    }
    if (c->state != CS_OPEN)
        return;
    if (c->w->cfg->mode == M_PARK) {
        if ((ev & EPOLLOUT) && !c->wdone && c->wlen) {
            conn_flush(c, now);
            if (c->state != CS_OPEN)
                return;
        }
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            park_readable(c, now);
        return;
    }
    if ((ev & EPOLLOUT) && c->op != OP_NONE && !c->wdone) {
        conn_flush(c, now);
        if (c->state != CS_OPEN)
            return;
    }
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        conn_readable(c, now);
}

/* ------------------------------------------------------------------ */
/* Worker loop                                                         */
/* ------------------------------------------------------------------ */

static void worker_tick(struct worker *w, uint64_t now)
{
    const struct config *cfg = w->cfg;
    uint64_t tmo = (uint64_t)cfg->timeout_ms * 1000000ull;
    if (!w->stopping && (now >= w->t_end || g_interrupted)) {
        w->stopping = true;
        w->t_stop = now < w->t_end ? now : w->t_end;
    }
    for (int i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->done)
            continue;
        if (c->state == CS_CLOSED) {
            if (w->stopping && !c->held) {
                c->done = true;
                continue;
            }
            if (c->wake_at && now >= c->wake_at)
                conn_connect(c, now);
            continue;
        }
        if ((c->state == CS_CONNECTING || c->op != OP_NONE) && now - c->t_start > tmo) {
            c->w->st.timeouts++;
            conn_reset(c, now, true);
            continue;
        }
        if (cfg->mode == M_PARK)
            park_tick(c, now);
        if (c->state == CS_OPEN && c->op == OP_NONE)
            conn_start_next(c, now);
    }
}

static bool worker_idle(const struct worker *w)
{
    for (int i = 0; i < w->nconns; i++) {
        const struct conn *c = &w->conns[i];
        if (w->cfg->mode == M_PARK) {
            if (!c->done && c->state != CS_CLOSED)
                return false;
            continue;
        }
        if (!c->done && (c->op != OP_NONE || c->held || c->state == CS_CONNECTING))
            return false;
    }
    return true;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    const struct config *cfg = w->cfg;
    struct epoll_event evs[256];
    uint64_t now = now_ns(), last_tick = 0;
    uint64_t drain_end = 0;
    /* park mode keeps many connections that rarely speak: a coarser tick */
    uint64_t tick_ns = cfg->mode == M_PARK ? 20000000ull : 1000000ull;
    for (int i = 0; i < w->nconns; i++) {
        if (cfg->ramp_per_s > 0) /* connected by worker_tick, at the ramp's pace */
            w->conns[i].wake_at =
                now + 1 + (uint64_t)(i * cfg->threads + w->id) * 1000000000ull / (uint64_t)cfg->ramp_per_s;
        else
            conn_connect(&w->conns[i], now);
    }
    for (;;) {
        int n = epoll_wait(w->epfd, evs, 256, cfg->mode == M_PARK ? 20 : 2);
        if (n < 0 && errno != EINTR) {
            perror("loadgen: epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++) {
            now = now_ns();
            conn_event(evs[i].data.ptr, evs[i].events, now);
        }
        now = now_ns();
        if (now - last_tick >= tick_ns || n <= 0) {
            worker_tick(w, now);
            last_tick = now;
        }
        if (w->stopping) {
            if (!drain_end)
                drain_end = now + (uint64_t)cfg->drain_ms * 1000000ull;
            if (worker_idle(w) || now >= drain_end)
                break;
        }
    }
    for (int i = 0; i < w->nconns; i++) {
        conn_close(&w->conns[i]);
        free(w->conns[i].rbuf);
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Report                                                              */
/* ------------------------------------------------------------------ */

static double ms(uint64_t ns) { return (double)ns / 1e6; }

/* CPU seconds (user + system) this process has used. */
static double cpu_seconds(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec)
           + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static uint64_t errors_total(const struct stats *st, uint64_t *status_total)
{
    uint64_t s = 0;
    for (int i = 0; i < 600; i++)
        s += st->status[i];
    *status_total = s;
    return s + st->connect_err + st->conn_err + st->timeouts + st->parse_err + st->lease_err;
}

static void report_text(const struct config *cfg, const struct stats *st, double secs)
{
    printf("loadgen %s%s%s: %s:%u conns=%d threads=%d duration=%.2fs warmup=%.1fs\n",
           mode_names[cfg->mode], cfg->proto == P_ETCD ? " (etcd)" : "", cfg->label ? cfg->label : "",
           inet_ntoa(cfg->addr.sin_addr), ntohs(cfg->addr.sin_port), cfg->conns, cfg->threads, secs,
           cfg->warmup_s);
    printf("  %-9s %10s %11s %9s %9s %9s %9s %9s\n", "kind", "count", "per_s", "p50_ms", "p99_ms",
           "p999_ms", "max_ms", "mean_ms");
    for (int k = 0; k < K_NKINDS; k++) {
        const struct hist *h = &st->h[k];
        if (h->count == 0 && k == K_GAP)
            continue;
        printf("  %-9s %10" PRIu64 " %11.1f %9.3f %9.3f %9.3f %9.3f %9.3f\n", kind_names[k], h->count,
               (double)h->count / secs, ms(hist_quantile(h, 0.5)), ms(hist_quantile(h, 0.99)),
               ms(hist_quantile(h, 0.999)), ms(h->max), h->count ? h->sum / (double)h->count / 1e6 : 0.0);
    }
    double cycles = cfg->mode == M_ACQUIRE_ONLY ? (double)st->h[K_ACQUIRE].count : (double)st->cycles;
    printf("  %s/s: %.1f\n", cfg->mode == M_ACQUIRE_ONLY ? "grants" : "cycles", cycles / secs);
    if (cfg->mode == M_PARK)
        printf("  park %s: peak %d parked, %" PRIu64 " dropped, %" PRIu64 " refused, %" PRIu64
               " ended by the service, %" PRIu64 " lines, %" PRIu64 " watch answers\n",
               park_names[cfg->park], atomic_load(&g_parked_peak), st->park_dropped, st->park_refused,
               st->park_ended, st->park_lines, st->watch_answers);
    uint64_t stt;
    uint64_t tot = errors_total(st, &stt);
    printf("  errors (whole run): %" PRIu64, tot);
    for (int i = 0; i < ERR_CODES && st->codes[i].n; i++)
        printf(" %d:%s=%" PRIu64, st->codes[i].status, st->codes[i].code, st->codes[i].n);
    printf(" connect=%" PRIu64 " conn=%" PRIu64 " timeout=%" PRIu64 " parse=%" PRIu64 " lease=%" PRIu64
           " (server_close=%" PRIu64 ", requests=%" PRIu64 ", loadgen cpu %.2fs)\n",
           st->connect_err, st->conn_err, st->timeouts, st->parse_err, st->lease_err, st->server_close,
           st->requests, cpu_seconds());
    if (cfg->proto == P_REDLOCK && (cfg->mode == M_CONTENTION || cfg->mode == M_HANDOFF))
        printf("  safety: overlapping grants %" PRIu64 ", fencing tokens not increasing %" PRIu64
               ", grants without a token %" PRIu64 "\n",
               st->overlaps, st->fence_regress, st->fence_missing);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s < 0x20)
            continue;
        putchar(*s);
    }
    putchar('"');
}

struct wsample;
static void report_window(const struct config *cfg, const struct wsample *a, const struct wsample *b);

static void report_json(const struct config *cfg, const struct stats *st, double secs,
                        const struct wsample *wa, const struct wsample *wb)
{
    printf("{\"mode\":\"%s\",\"kind\":\"%s\",\"proto\":\"%s\",\"label\":", mode_names[cfg->mode],
           cfg->mode == M_PARK ? park_names[cfg->park] : lkind_names[cfg->lkind],
           cfg->proto == P_ETCD ? "etcd" : "redlock");
    json_str(cfg->label ? cfg->label : "");
    printf(",\"port\":%u,\"conns\":%d,\"threads\":%d,\"duration_s\":%.3f,\"warmup_s\":%.3f",
           ntohs(cfg->addr.sin_port), cfg->conns, cfg->threads, secs, cfg->warmup_s);
    if (cfg->lkind == LK_SEM)
        printf(",\"permits\":%ld", cfg->permits);
    if (cfg->lkind == LK_REENTRANT)
        printf(",\"depth\":%ld", cfg->depth);
    if (cfg->lkind == LK_SET)
        printf(",\"set_size\":%ld", cfg->set_size);
    if (cfg->mode == M_PARK)
        printf(",\"park\":{\"peak\":%d,\"dropped\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"retries\":%" PRIu64
               ",\"ended\":%" PRIu64 ",\"lines\":%" PRIu64 ",\"watch_answers\":%" PRIu64 ",\"ttl_ms\":%ld}",
               atomic_load(&g_parked_peak), st->park_dropped, st->park_refused, st->park_retries, st->park_ended,
               st->park_lines, st->watch_answers, cfg->ttl_ms);
    if (wa && wb)
        report_window(cfg, wa, wb);
    double cycles = cfg->mode == M_ACQUIRE_ONLY ? (double)st->h[K_ACQUIRE].count : (double)st->cycles;
    printf(",\"cycles_per_s\":%.1f,\"grants_per_s\":%.1f,\"conflicts_per_s\":%.1f", cycles / secs,
           (double)st->h[K_ACQUIRE].count / secs, (double)st->h[K_CONFLICT].count / secs);
    for (int k = 0; k < K_NKINDS; k++) {
        const struct hist *h = &st->h[k];
        printf(",\"%s\":{\"count\":%" PRIu64 ",\"per_s\":%.1f,\"p50_ms\":%.4f,\"p90_ms\":%.4f,"
               "\"p99_ms\":%.4f,\"p999_ms\":%.4f,\"max_ms\":%.4f,\"mean_ms\":%.4f}",
               kind_names[k], h->count, (double)h->count / secs, ms(hist_quantile(h, 0.5)),
               ms(hist_quantile(h, 0.9)), ms(hist_quantile(h, 0.99)), ms(hist_quantile(h, 0.999)),
               ms(h->max), h->count ? h->sum / (double)h->count / 1e6 : 0.0);
    }
    uint64_t stt;
    uint64_t tot = errors_total(st, &stt);
    printf(",\"errors\":{\"total\":%" PRIu64 ",\"status\":{", tot);
    bool first = true;
    for (int i = 0; i < 600; i++)
        if (st->status[i]) {
            printf("%s\"%d\":%" PRIu64, first ? "" : ",", i, st->status[i]);
            first = false;
        }
    printf("},\"codes\":{");
    for (int i = 0; i < ERR_CODES && st->codes[i].n; i++)
        printf("%s\"%d %s\":%" PRIu64, i ? "," : "", st->codes[i].status, st->codes[i].code, st->codes[i].n);
    printf("},\"connect\":%" PRIu64 ",\"conn\":%" PRIu64 ",\"timeout\":%" PRIu64 ",\"parse\":%" PRIu64
           ",\"lease\":%" PRIu64 ",\"server_close\":%" PRIu64 "},\"requests\":%" PRIu64
           ",\"safety\":{\"overlaps\":%" PRIu64 ",\"fence_regressions\":%" PRIu64
           ",\"fence_missing\":%" PRIu64 "},\"loadgen_cpu_s\":%.3f}\n",
           st->connect_err, st->conn_err, st->timeouts, st->parse_err, st->lease_err, st->server_close,
           st->requests, st->overlaps, st->fence_regress, st->fence_missing, cpu_seconds());
}


/* ------------------------------------------------------------------ */
/* The measurement window's figures (taken by the main thread)         */
/* ------------------------------------------------------------------ */

/* /metrics lines summed: a key with labels matches that line exactly; one without
 * matches the metric whatever its labels. */
static const struct {
    const char *key, *name;
} metric_keys[] = {
    {"redlockd_extend_total{outcome=\"extended\"}", "extended"},
    {"redlockd_held_local_total", "held_local"},
    {"redlockd_master_batches_total", "batches"},
    {"redlockd_master_batched_ops_total", "batched_ops"},
    {"redlockd_grants_total", "grants"},
    {"redlockd_refusals_total", "refusals"},
    {"redlockd_handoffs_total", "handoffs"},
    {"redlockd_split_rounds_total", "splits"},
    {"redlockd_fencing_raise_rounds_total", "raise_rounds"},
    {"redlockd_release_total{outcome=\"released\"}", "released"},
};
#define N_METRICS (sizeof metric_keys / sizeof metric_keys[0])
#define MAX_CMDSTATS 96

struct wsample {
    uint64_t t_ns;
    double cpu_s[2];
    bool metrics_ok;
    double m[N_METRICS];
    int ncs;
    struct {
        char name[48];
        uint64_t calls, usec;
    } cs[MAX_CMDSTATS];
    int parked;
};

/* CPU seconds of a process, all threads: the scheduler's run time (ns) when the
 * kernel keeps it, else utime + stime in clock ticks. */
static double proc_cpu_s(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    double ns = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char f[300];
            snprintf(f, sizeof f, "/proc/%d/task/%s/schedstat", pid, e->d_name);
            FILE *fp = fopen(f, "r");
            unsigned long long v = 0;
            if (fp) {
                if (fscanf(fp, "%llu", &v) == 1)
                    ns += (double)v;
                fclose(fp);
            }
        }
        closedir(d);
    }
    if (ns > 0)
        return ns / 1e9;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2)
        return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

/* A blocking request/answer on loopback with a 3 s bound: what came back, NUL-ended
 * (malloc'd), or NULL. */
static char *fetch(const struct sockaddr_in *a, const char *req, size_t *len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf || connect(fd, (const struct sockaddr *)a, sizeof *a) < 0 ||
        send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        free(buf);
        close(fd);
        return NULL;
    }
    for (;;) {
        if (cap - n < 4096) {
            char *nb = cap < (1u << 24) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        /* Redis: a bulk string "$<len>\r\n...\r\n" is whole once len bytes are in */
        if (buf[0] == '$') {
            buf[n] = '\0';
            char *e = strstr(buf, "\r\n");
            if (e && n >= (size_t)(e - buf) + 2 + strtoul(buf + 1, NULL, 10) + 2)
                break;
        }
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void sample_metrics(const struct config *cfg, struct wsample *ws)
{
    char req[128];
    size_t n;
    snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", cfg->host_hdr);
    char *t = fetch(&cfg->addr, req, &n);
    if (!t)
        return;
    ws->metrics_ok = strstr(t, "HTTP/1.1 200") == t;
    for (char *line = t; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (*line == '#' || *line == '\n')
            continue;
        for (size_t k = 0; k < N_METRICS; k++) {
            size_t kl = strlen(metric_keys[k].key);
            if (strncmp(line, metric_keys[k].key, kl) != 0)
                continue;
            char next = line[kl];
            bool labels = strchr(metric_keys[k].key, '{') != NULL;
            if (next == ' ' || (!labels && next == '{')) {
                char *sp = strchr(line + kl, ' ');
                if (sp)
                    ws->m[k] += strtod(sp + 1, NULL);
            }
        }
    }
    free(t);
}

static void sample_cmdstats(const struct config *cfg, struct wsample *ws)
{
    for (int i = 0; i < cfg->n_redis_ports; i++) {
        struct sockaddr_in a = cfg->addr;
        a.sin_port = htons((uint16_t)cfg->redis_ports[i]);
        size_t n;
        char *t = fetch(&a, "INFO commandstats\r\n", &n);
        if (!t)
            continue;
        for (char *line = strstr(t, "cmdstat_"); line; line = strstr(line + 1, "\ncmdstat_")) {
            if (*line == '\n')
                line++;
            char name[48];
            unsigned long long calls = 0, usec = 0;
            if (sscanf(line, "cmdstat_%47[^:]:calls=%llu,usec=%llu", name, &calls, &usec) != 3)
                continue;
            int k = 0;
            while (k < ws->ncs && strcmp(ws->cs[k].name, name) != 0)
                k++;
            if (k == ws->ncs) {
                if (ws->ncs == MAX_CMDSTATS)
                    continue;
                snprintf(ws->cs[k].name, sizeof ws->cs[k].name, "%s", name);
                ws->ncs++;
            }
            ws->cs[k].calls += calls;
            ws->cs[k].usec += usec;
        }
        free(t);
    }
}

static void take_sample(const struct config *cfg, struct wsample *ws)
{
    memset(ws, 0, sizeof *ws);
    ws->t_ns = now_ns();
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < cfg->n_cpu_pids[g]; i++)
            ws->cpu_s[g] += proc_cpu_s(cfg->cpu_pids[g][i]);
    if (cfg->scrape_metrics)
        sample_metrics(cfg, ws);
    sample_cmdstats(cfg, ws);
    ws->parked = atomic_load(&g_parked);
}

static void sleep_until(uint64_t t)
{
    for (;;) {
        uint64_t now = now_ns();
        if (now >= t || g_interrupted)
            return;
        uint64_t d = t - now;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

static bool window_wanted(const struct config *cfg)
{
    return cfg->n_cpu_pids[0] || cfg->n_cpu_pids[1] || cfg->scrape_metrics || cfg->n_redis_ports;
}

/* "window":{...}: what the window cost (CPU per group), the service's counters and the
 * masters' commands in it. */
static void report_window(const struct config *cfg, const struct wsample *a, const struct wsample *b)
{
    double secs = (double)(b->t_ns - a->t_ns) / 1e9;
    printf(",\"window\":{\"secs\":%.4f,\"parked_start\":%d,\"parked_end\":%d,\"cpu_s\":{", secs, a->parked,
           b->parked);
    bool first = true;
    for (int g = 0; g < 2; g++)
        if (cfg->n_cpu_pids[g]) {
            printf("%s\"%s\":%.6f", first ? "" : ",", cfg->cpu_groups[g], b->cpu_s[g] - a->cpu_s[g]);
            first = false;
        }
    printf("}");
    if (a->metrics_ok && b->metrics_ok) {
        printf(",\"metrics\":{");
        for (size_t k = 0; k < N_METRICS; k++)
            printf("%s\"%s\":%.0f", k ? "," : "", metric_keys[k].name, b->m[k] - a->m[k]);
        printf("}");
    }
    if (cfg->n_redis_ports) {
        printf(",\"redis_commands\":{");
        first = true;
        for (int k = 0; k < b->ncs; k++) {
            uint64_t c0 = 0, u0 = 0;
            for (int j = 0; j < a->ncs; j++)
                if (strcmp(a->cs[j].name, b->cs[k].name) == 0) {
                    c0 = a->cs[j].calls;
                    u0 = a->cs[j].usec;
                }
            if (b->cs[k].calls <= c0)
                continue;
            printf("%s\"%s\":[%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", b->cs[k].name, b->cs[k].calls - c0,
                   b->cs[k].usec - u0);
            first = false;
        }
        printf("}");
    }
    printf("}");
}

/* ------------------------------------------------------------------ */
/* Self-test of the pure parts                                         */
/* ------------------------------------------------------------------ */

static int self_test(void)
{
    int fails = 0;
#define CHECK(c)                                                                      \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "self-test: %s:%d: %s\n", __FILE__, __LINE__, #c);        \
            fails++;                                                                  \
        }                                                                             \
    } while (0)
    /* histogram: bucket bounds contain the value, within 1/256 */
    for (uint64_t v = 1; v < (1ull << 39); v = v * 3 + 7) {
        unsigned i = hist_index(v);
        CHECK(hist_bucket_high(i) >= v);
        CHECK((double)(hist_bucket_high(i) - v) <= (double)v / HIST_SUB + 1);
        CHECK(i < HIST_BUCKETS);
    }
    static struct hist h;
    for (uint64_t v = 1; v <= 100000; v++)
        hist_record(&h, v * 1000);
    uint64_t p50 = hist_quantile(&h, 0.5), p99 = hist_quantile(&h, 0.99);
    CHECK(p50 >= 50000000 && p50 <= 50000000 + 50000000 / 128);
    CHECK(p99 >= 99000000 && p99 <= 99000000 + 99000000 / 128);
    CHECK(hist_quantile(&h, 1.0) == 100000000);
    /* HTTP */
    struct http_resp r;
    char a[] = "HTTP/1.1 201 Created\r\nContent-Length: 5\r\nX: y\r\n\r\nhello";
    CHECK(http_parse(a, sizeof a - 1, false, &r) == 1 && r.status == 201 && r.body_len == 5
          && r.total == sizeof a - 1 && !r.close);
    CHECK(http_parse(a, sizeof a - 3, false, &r) == 0);
    CHECK(http_parse(a, 20, false, &r) == 0);
    char b[] = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
               "3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
    CHECK(http_parse(b, sizeof b - 1, false, &r) == 1 && r.body_len == 5 && r.close
          && memcmp(b + r.body_off, "abcde", 5) == 0 && r.total == sizeof b - 1);
    char b2[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n";
    CHECK(http_parse(b2, sizeof b2 - 1, false, &r) == 0);
    char c[] = "HTTP/1.0 200 OK\r\n\r\nbody";
    CHECK(http_parse(c, sizeof c - 1, false, &r) == 0);
    CHECK(http_parse(c, sizeof c - 1, true, &r) == 1 && r.body_len == 4 && r.close);
    char d[] = "HTTP/1.1 2x1 Created\r\n\r\n";
    CHECK(http_parse(d, sizeof d - 1, false, &r) == -1);
    char e[] = "HTTP/1.1 204 No Content\r\n\r\n";
    CHECK(http_parse(e, sizeof e - 1, false, &r) == 1 && r.body_len == 0);
    /* JSON */
    char out[200];
    const char *j1 = "{\"name\":\"lease\",\"x\":{\"lease\":\"no\"},\"a\":[1,\"}\"],"
                     " \"lease\" : \"AbC_-0123456789abcdefghij\", \"n\":12}";
    CHECK(json_get_string(j1, strlen(j1), "lease", out, sizeof out) == 25
          && strcmp(out, "AbC_-0123456789abcdefghij") == 0);
    CHECK(json_get_string(j1, strlen(j1), "nope", out, sizeof out) == -1);
    const char *j2 = "{\"message\":\"say \\\"lease\\\": \\\"x\\\"\",\"lease\":\"ok12\"}";
    CHECK(json_get_string(j2, strlen(j2), "lease", out, sizeof out) == 4 && strcmp(out, "ok12") == 0);
    const char *j3 = "{\"lease\":12}";
    CHECK(json_get_string(j3, strlen(j3), "lease", out, sizeof out) == -1);
    const char *j4 = "{\"lease\":\"abc";
    CHECK(json_get_string(j4, strlen(j4), "lease", out, sizeof out) == -1);
    const char *j5 = "{\"header\":{\"revision\":\"5\"},\"ID\":\"7587873\",\"TTL\":\"60\"}";
    CHECK(json_get_string(j5, strlen(j5), "ID", out, sizeof out) == 7 && strcmp(out, "7587873") == 0);
    uint64_t u = 0;
    const char *j6 = "{\"name\":\"x\",\"lease\":\"abc\",\"fencing_token\":1234567,\"v\":[1]}";
    CHECK(json_get_uint(j6, strlen(j6), "fencing_token", &u) && u == 1234567);
    CHECK(!json_get_uint(j6, strlen(j6), "lease", &u) && !json_get_uint(j6, strlen(j6), "v", &u));
    CHECK(lease_ok("abcDEF_-09", 10) && !lease_ok("a b", 3) && !lease_ok("", 0));
    char b64[16];
    base64_enc("foo/b", 5, b64);
    CHECK(strcmp(b64, "Zm9vL2I=") == 0);
    printf("self-test: %d passed, %d failed\n", fails ? 0 : 1, fails ? 1 : 0);
    return fails ? 1 : 0;
#undef CHECK
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loadgen -p PORT [options]\n"
            "  -p, --port N          target port on --host (required)\n"
            "      --host ADDR       loopback IPv4 address (default 127.0.0.1; others refused)\n"
            "  -m, --mode M          cycle | contention | handoff | acquire-only (default cycle)\n"
            "  -c, --conns N         connections (default 16)\n"
            "  -t, --threads N       threads, each with its own epoll loop (default 1)\n"
            "  -d, --duration S      measured seconds (default 5)\n"
            "  -w, --warmup S        seconds run before measuring (default 0)\n"
            "  -n, --requests N      stop after N requests in all (default: no bound)\n"
            "      --keyspace N      random names b0..b(N-1) (default 1000000)\n"
            "      --prefix P        name prefix for random names (default 'b')\n"
            "      --name NAME       the one name of contention/handoff (default bench-hot)\n"
            "      --ttl-ms N        ?ttl_ms= on acquires (default: server's default)\n"
            "      --wait-ms N       ?wait_ms= on acquires (handoff default 5000)\n"
            "      --hold-ms N       handoff: hold each grant N ms before releasing (default 0)\n"
            "      --timeout-ms N    per-request timeout (default 10000, handoff wait+5000)\n"
            "      --drain-ms N      time allowed to release held locks at the end (default 3000)\n"
            "      --lease-in-body   DELETE with {\"lease\":...} instead of ?lease=\n"
            "      --proto P         redlock (default) | etcd (v3 JSON gateway lock API)\n"
            "  -k, --kind K          lock (default) | shared (?mode=shared) | sem (/semaphores,\n"
            "                        --permits) | reentrant (?reentrant=true, entered --depth times,\n"
            "                        released as often) | set (POST /locks, --set-size names)\n"
            "      --permits N       sem: permits of the semaphore (default 8)\n"
            "      --depth N         reentrant: holds taken per cycle (default 2)\n"
            "      --set-size N      set: names per set (default 2)\n"
            "      --park P          park mode: duplex | oneway (hold=stream) | watch (GET ?index=&wait_ms=);\n"
            "                        connection i parks on name <prefix><i>; duplex pings as asked\n"
            "      --ramp N          connects per second at the start (default: all at once; park 4000)\n"
            "      --cpu-pids G=P,P  CPU of these processes over the window, as group G (twice at most)\n"
            "      --metrics         the service's /metrics counters over the window\n"
            "      --redis-ports P,P the masters' INFO commandstats over the window\n"
            "      --label S         free text copied into the report\n"
            "      --seed N          random seed (default: time)\n"
            "      --json            one JSON object instead of the text report\n"
            "      --self-test       check the parsers and histogram, then exit\n");
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || e == s || *e || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool parse_double(const char *s, double lo, double hi, double *out)
{
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (errno || e == s || *e || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}

int main(int argc, char **argv)
{
    struct config cfg = {
        .mode = M_CYCLE, .proto = P_REDLOCK, .conns = 16, .threads = 1, .duration_s = 5,
        .keyspace = 1000000, .name = "bench-hot", .prefix = "b", .wait_ms = -1, .timeout_ms = -1,
        .drain_ms = 3000, .etcd_lease_ttl_s = 300, .permits = 8, .depth = 2, .set_size = 2,
    };
    const char *host = "127.0.0.1";
    long port = 0, v;
    enum { O_HOST = 256, O_KEYSPACE, O_PREFIX, O_NAME, O_TTL, O_WAIT, O_HOLD, O_TIMEOUT, O_DRAIN,
           O_BODY, O_PROTO, O_LABEL, O_SEED, O_JSON, O_SELFTEST, O_HELP, O_PERMITS, O_DEPTH, O_SETSIZE,
           O_PARK, O_RAMP, O_CPUPIDS, O_METRICS, O_REDISPORTS };
    static const struct option lo[] = {
        {"port", 1, 0, 'p'}, {"host", 1, 0, O_HOST}, {"mode", 1, 0, 'm'}, {"conns", 1, 0, 'c'},
        {"threads", 1, 0, 't'}, {"duration", 1, 0, 'd'}, {"warmup", 1, 0, 'w'},
        {"requests", 1, 0, 'n'}, {"keyspace", 1, 0, O_KEYSPACE}, {"prefix", 1, 0, O_PREFIX},
        {"name", 1, 0, O_NAME}, {"ttl-ms", 1, 0, O_TTL}, {"wait-ms", 1, 0, O_WAIT},
        {"hold-ms", 1, 0, O_HOLD}, {"timeout-ms", 1, 0, O_TIMEOUT}, {"drain-ms", 1, 0, O_DRAIN},
        {"lease-in-body", 0, 0, O_BODY}, {"proto", 1, 0, O_PROTO}, {"label", 1, 0, O_LABEL},
        {"seed", 1, 0, O_SEED}, {"json", 0, 0, O_JSON}, {"self-test", 0, 0, O_SELFTEST},
        {"help", 0, 0, O_HELP}, {"kind", 1, 0, 'k'}, {"permits", 1, 0, O_PERMITS},
        {"depth", 1, 0, O_DEPTH}, {"set-size", 1, 0, O_SETSIZE}, {"park", 1, 0, O_PARK},
        {"ramp", 1, 0, O_RAMP}, {"cpu-pids", 1, 0, O_CPUPIDS}, {"metrics", 0, 0, O_METRICS},
        {"redis-ports", 1, 0, O_REDISPORTS}, {0, 0, 0, 0}};
    int ncpug = 0;
    bool ramp_given = false;
    int o;
    const char *bad = NULL;
    while ((o = getopt_long(argc, argv, "p:m:c:t:d:w:n:k:", lo, NULL)) != -1) {
        switch (o) {
        case 'p': if (!parse_long(optarg, 1, 65535, &port)) bad = "--port"; break;
        case O_HOST: host = optarg; break;
        case 'm':
            if (!strcmp(optarg, "cycle")) cfg.mode = M_CYCLE;
            else if (!strcmp(optarg, "contention")) cfg.mode = M_CONTENTION;
            else if (!strcmp(optarg, "handoff")) cfg.mode = M_HANDOFF;
            else if (!strcmp(optarg, "acquire-only")) cfg.mode = M_ACQUIRE_ONLY;
            else if (!strcmp(optarg, "park")) cfg.mode = M_PARK;
            else bad = "--mode";
            break;
        case 'k': {
            int k = -1;
            for (int i = 0; i < (int)(sizeof lkind_names / sizeof lkind_names[0]); i++)
                if (!strcmp(optarg, lkind_names[i])) k = i;
            if (k < 0) bad = "--kind"; else cfg.lkind = (enum lkind)k;
            break;
        }
        case O_PARK:
            if (!strcmp(optarg, "duplex")) cfg.park = PK_DUPLEX;
            else if (!strcmp(optarg, "oneway")) cfg.park = PK_ONEWAY;
            else if (!strcmp(optarg, "watch")) cfg.park = PK_WATCH;
            else bad = "--park";
            break;
        case O_PERMITS: if (!parse_long(optarg, 1, 1024, &cfg.permits)) bad = "--permits"; break;
        case O_DEPTH: if (!parse_long(optarg, 1, 64, &cfg.depth)) bad = "--depth"; break;
        case O_SETSIZE: if (!parse_long(optarg, 2, 16, &cfg.set_size)) bad = "--set-size"; break;
        case O_RAMP: if (!parse_long(optarg, 0, 10000000, &cfg.ramp_per_s)) bad = "--ramp"; else ramp_given = true; break;
        case O_METRICS: cfg.scrape_metrics = true; break;
        case O_CPUPIDS: {
            char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || eq - optarg >= 16 || ncpug == 2) { bad = "--cpu-pids"; break; }
            snprintf(cfg.cpu_groups[ncpug], sizeof cfg.cpu_groups[ncpug], "%.*s", (int)(eq - optarg), optarg);
            for (char *q = eq + 1, *e; *q; q = *e ? e + 1 : e) {
                long pid = strtol(q, &e, 10);
                if (e == q || pid <= 0 || (*e && *e != ',' && *e != ' ') || cfg.n_cpu_pids[ncpug] == 64) { bad = "--cpu-pids"; break; }
                cfg.cpu_pids[ncpug][cfg.n_cpu_pids[ncpug]++] = (int)pid;
            }
            ncpug++;
            break;
        }
        case O_REDISPORTS:
            for (char *q = optarg, *e; *q; q = *e ? e + 1 : e) {
                long pt = strtol(q, &e, 10);
                if (e == q || pt <= 0 || pt > 65535 || (*e && *e != ',' && *e != ' ') || cfg.n_redis_ports == 32) { bad = "--redis-ports"; break; }
                cfg.redis_ports[cfg.n_redis_ports++] = (int)pt;
            }
            break;
        case 'c': if (!parse_long(optarg, 1, 100000, &v)) bad = "--conns"; else cfg.conns = (int)v; break;
        case 't': if (!parse_long(optarg, 1, 64, &v)) bad = "--threads"; else cfg.threads = (int)v; break;
        case 'd': if (!parse_double(optarg, 0.01, 3600, &cfg.duration_s)) bad = "--duration"; break;
        case 'w': if (!parse_double(optarg, 0, 600, &cfg.warmup_s)) bad = "--warmup"; break;
        case 'n': if (!parse_long(optarg, 1, LONG_MAX, &v)) bad = "--requests"; else cfg.max_requests = (uint64_t)v; break;
        case O_KEYSPACE: if (!parse_long(optarg, 1, 4000000000L, &v)) bad = "--keyspace"; else cfg.keyspace = (uint32_t)v; break;
        case O_PREFIX: cfg.prefix = optarg; break;
        case O_NAME: cfg.name = optarg; cfg.name_given = true; break;
        case O_TTL: if (!parse_long(optarg, 1, 3600000, &cfg.ttl_ms)) bad = "--ttl-ms"; break;
        case O_WAIT: if (!parse_long(optarg, 0, 3600000, &cfg.wait_ms)) bad = "--wait-ms"; break;
        case O_HOLD: if (!parse_long(optarg, 0, 3600000, &cfg.hold_ms)) bad = "--hold-ms"; break;
        case O_TIMEOUT: if (!parse_long(optarg, 1, 3600000, &cfg.timeout_ms)) bad = "--timeout-ms"; break;
        case O_DRAIN: if (!parse_long(optarg, 0, 600000, &cfg.drain_ms)) bad = "--drain-ms"; break;
        case O_BODY: cfg.lease_in_body = true; break;
        case O_PROTO:
            if (!strcmp(optarg, "redlock")) cfg.proto = P_REDLOCK;
            else if (!strcmp(optarg, "etcd")) cfg.proto = P_ETCD;
            else bad = "--proto";
            break;
        case O_LABEL: cfg.label = optarg; break;
        case O_SEED: if (!parse_long(optarg, 1, LONG_MAX, &v)) bad = "--seed"; else cfg.seed = (uint64_t)v; break;
        case O_JSON: cfg.json = true; break;
        case O_SELFTEST: return self_test();
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "loadgen: bad value for %s: '%s'\n", bad, optarg);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "loadgen: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!port) {
        fprintf(stderr, "loadgen: --port is required\n");
        usage(stderr);
        return 2;
    }
    memset(&cfg.addr, 0, sizeof cfg.addr);
    cfg.addr.sin_family = AF_INET;
    cfg.addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &cfg.addr.sin_addr) != 1
        || (ntohl(cfg.addr.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "loadgen: --host '%s' is not a loopback IPv4 address (127.0.0.0/8)\n", host);
        return 2;
    }
    snprintf(cfg.host_hdr, sizeof cfg.host_hdr, "%s:%ld", host, port);
    if (strlen(cfg.name) > 255 || strlen(cfg.prefix) > 200 || !lease_ok(cfg.name, strlen(cfg.name))
        || (cfg.prefix[0] && !lease_ok(cfg.prefix, strlen(cfg.prefix)))) {
        /* names go into URLs unescaped: keep them to [A-Za-z0-9_-] */
        fprintf(stderr, "loadgen: --name/--prefix must be [A-Za-z0-9_-], at most 255 bytes\n");
        return 2;
    }
    if (cfg.proto == P_ETCD && cfg.mode != M_CYCLE && cfg.mode != M_ACQUIRE_ONLY) {
        fprintf(stderr, "loadgen: --proto etcd supports cycle and acquire-only\n");
        return 2;
    }
    if (cfg.proto == P_ETCD && cfg.lkind != LK_LOCK) {
        fprintf(stderr, "loadgen: --proto etcd takes plain locks only\n");
        return 2;
    }
    if (cfg.mode == M_PARK && !ramp_given)
        cfg.ramp_per_s = 4000;
    if (cfg.wait_ms < 0)
        cfg.wait_ms = cfg.mode == M_HANDOFF ? 5000 : cfg.mode == M_PARK && cfg.park == PK_WATCH ? 60000 : 0;
    if (cfg.timeout_ms < 0)
        cfg.timeout_ms = cfg.wait_ms + (cfg.mode == M_HANDOFF ? 5000 : 10000);
    if (cfg.threads > cfg.conns)
        cfg.threads = cfg.conns;
    if (!cfg.seed)
        cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* many connections (park mode): as many descriptors as the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }

    struct worker *ws = calloc((size_t)cfg.threads, sizeof *ws);
    if (!ws) {
        perror("loadgen: calloc");
        return 1;
    }
    uint64_t t0 = now_ns();
    uint64_t t_meas = t0 + (uint64_t)(cfg.warmup_s * 1e9);
    uint64_t t_end = t_meas + (uint64_t)(cfg.duration_s * 1e9);
    int rc = 0, started = 0;
    for (int i = 0; i < cfg.threads; i++) {
        struct worker *w = &ws[i];
        w->id = i;
        w->cfg = &cfg;
        w->t_meas = t_meas;
        w->t_end = w->t_stop = t_end;
        w->nconns = cfg.conns / cfg.threads + (i < cfg.conns % cfg.threads);
        if (cfg.max_requests)
            w->budget = cfg.max_requests / (uint64_t)cfg.threads
                        + (i < (int)(cfg.max_requests % (uint64_t)cfg.threads));
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->conns = calloc((size_t)w->nconns, sizeof *w->conns);
        if (w->epfd < 0 || !w->conns) {
            perror("loadgen: setup");
            rc = 1;
            break;
        }
        for (int j = 0; j < w->nconns; j++) {
            struct conn *c = &w->conns[j];
            c->w = w;
            c->fd = -1;
            c->rng = cfg.seed * 0x9E3779B97F4A7C15ull + (uint64_t)(i * 100003 + j) * 0xBF58476D1CE4E5B9ull;
            if (!c->rng)
                c->rng = 1;
            for (int k = 0; k < 4; k++)
                rng_next(&c->rng);
            c->idx = j * cfg.threads + i;
            c->index = UINT64_MAX;
            if (cfg.mode == M_PARK)
                snprintf(c->name, sizeof c->name, "%s%d", cfg.prefix, c->idx);
        }
        if (pthread_create(&w->tid, NULL, worker_run, w) != 0) {
            perror("loadgen: pthread_create");
            rc = 1;
            break;
        }
        started++;
    }
    static struct wsample wa, wb;
    bool window = window_wanted(&cfg) && !rc;
    if (window) { /* the window's figures, taken while the workers run */
        sleep_until(t_meas);
        take_sample(&cfg, &wa);
        sleep_until(t_end);
        take_sample(&cfg, &wb);
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].tid, NULL);
    if (rc)
        return rc;

    static struct stats total;
    uint64_t t_stop = t_meas;
    for (int i = 0; i < cfg.threads; i++) {
        struct stats *st = &ws[i].st;
        for (int k = 0; k < K_NKINDS; k++)
            hist_merge(&total.h[k], &st->h[k]);
        for (int s = 0; s < 600; s++)
            total.status[s] += st->status[s];
        for (int k = 0; k < ERR_CODES && st->codes[k].n; k++)
            count_code(&total, st->codes[k].status, st->codes[k].code, st->codes[k].n);
        total.connect_err += st->connect_err;
        total.conn_err += st->conn_err;
        total.timeouts += st->timeouts;
        total.parse_err += st->parse_err;
        total.lease_err += st->lease_err;
        total.server_close += st->server_close;
        total.overlaps += st->overlaps;
        total.fence_regress += st->fence_regress;
        total.fence_missing += st->fence_missing;
        total.requests += st->requests;
        total.cycles += st->cycles;
        total.park_dropped += st->park_dropped;
        total.park_refused += st->park_refused;
        total.park_retries += st->park_retries;
        total.park_ended += st->park_ended;
        total.park_lines += st->park_lines;
        total.watch_answers += st->watch_answers;
        if (ws[i].t_stop > t_stop)
            t_stop = ws[i].t_stop;
        close(ws[i].epfd);
        free(ws[i].conns);
    }
    free(ws);
    double secs = (double)(t_stop - t_meas) / 1e9;
    if (secs <= 0)
        secs = 1e-9;
    if (cfg.json)
        report_json(&cfg, &total, secs, window ? &wa : NULL, window ? &wb : NULL);
    else
        report_text(&cfg, &total, secs);
    return 0;
}
