/* holder.c -- a client process that holds one lock with hold=stream, for the chaos
 * checker's stopped holders (verdict (m)): the checker starts it, SIGSTOPs it while it
 * holds, and measures how soon the lock is free again.
 *
 *   chaos_holder --port P --name NAME --ttl MS --lease LEASE [--wait MS]
 *
 * It asks for a duplex hold (Upgrade: redlock-hold, docs/DESIGN.md section 10) and
 * follows that protocol: one ping right after the grant line, then one every ping_ms,
 * never while the answer to the last one is unread.  A service that answers 201 instead
 * (a one-way stream) gets no pings; its lines are read as they come.  What happens goes to
 * stdout, one line each, times CLOCK_MONOTONIC ns (the same clock as the checker's):
 *   G <status> <t_send> <t_recv> <token> <validity_ms> <ping_ms> <silence_ms> <duplex> <error>
 *   P <n> <t>            just before ping n is written
 *   A <n> <t> <v>        the answer to ping n read at t, validity v
 *   E <t> <v>            a one-way stream's extended line
 *   F <t> <event> <reason>  a last line (lost, released), then it exits
 *   C <t>                the stream ended without a last line, then it exits
 * Exit status 0; 2 on bad usage. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int fd = -1;
static char buf[65536];
static size_t have; /* bytes in buf not yet consumed */
static int chunked; /* a one-way stream: the body is chunked */

/* Reads more into buf until deadline (ns; 0: wait as long as it takes).  1 read, 0
 * timeout, -1 the connection ended. */
static int fill(int64_t deadline)
{
    if (have >= sizeof buf - 1)
        return -1;
    int ms = -1;
    if (deadline) {
        int64_t left = deadline - now_ns();
        if (left <= 0)
            return 0;
        ms = (int)(left / 1000000) + 1;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    if (r == 0)
        return 0;
    if (r < 0)
        return errno == EINTR ? 0 : -1;
    ssize_t n = recv(fd, buf + have, sizeof buf - 1 - have, 0);
    if (n <= 0)
        return -1;
    have += (size_t)n;
    buf[have] = '\0';
    return 1;
}

static void consume(size_t n)
{
    memmove(buf, buf + n, have - n);
    have -= n;
    buf[have] = '\0';
}

/* The next line of the hold into out (without its newline); a chunked body is decoded
 * first.  1, 0 timeout, -1 ended. */
static int next_line(char *out, size_t outsz, int64_t deadline, int64_t *t)
{
    static char dec[65536];
    static size_t dl;
    for (;;) {
        char *nl = memchr(dec, '\n', dl);
        if (nl) {
            size_t l = (size_t)(nl - dec);
            snprintf(out, outsz, "%.*s", (int)l, dec);
            memmove(dec, nl + 1, dl - l - 1);
            dl -= l + 1;
            *t = now_ns();
            return 1;
        }
        if (!chunked) {
            size_t take = have < sizeof dec - dl ? have : sizeof dec - dl;
            memcpy(dec + dl, buf, take);
            dl += take;
            consume(take);
            if (memchr(dec, '\n', dl))
                continue;
        } else {
            char *eol = strstr(buf, "\r\n");
            if (eol) {
                size_t size = strtoul(buf, NULL, 16);
                size_t head = (size_t)(eol + 2 - buf);
                if (size == 0)
                    return -1; /* the last chunk */
                if (have >= head + size + 2) {
                    if (dl + size < sizeof dec) {
                        memcpy(dec + dl, buf + head, size);
                        dl += size;
                    }
                    consume(head + size + 2);
                    continue;
                }
            }
        }
        int r = fill(deadline);
        if (r <= 0)
            return r;
    }
}

static int send_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int port = 0;
    long ttl = 0, wait = 0;
    const char *name = NULL, *lease = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--name"))
            name = argv[i + 1];
        else if (!strcmp(argv[i], "--ttl"))
            ttl = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--wait"))
            wait = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--lease"))
            lease = argv[i + 1];
    }
    if (!port || !name || !lease || ttl <= 0) {
        fprintf(stderr, "usage: chaos_holder --port P --name NAME --ttl MS --lease LEASE [--wait MS]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char body[256], req[1024];
    snprintf(body, sizeof body, "{\"ttl_ms\": %ld, \"wait_ms\": %ld, \"lease\": \"%s\"}", ttl, wait, lease);
    int rl = snprintf(req, sizeof req,
                      "POST /locks/%s?hold=stream HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: Upgrade\r\n"
                      "Upgrade: redlock-hold\r\nContent-Type: application/json\r\nX-Request-Id: chaos-holder-%d\r\n"
                      "Content-Length: %zu\r\n\r\n%s",
                      name, port, (int)getpid(), strlen(body), body);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int64_t t_send = now_ns();
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0 || send_all(req, (size_t)rl) < 0) {
        printf("G -2 %" PRId64 " %" PRId64 " 0 0 0 0 0 connect\n", t_send, now_ns());
        return 0;
    }
    /* the status line and headers */
    char *end;
    while (!(end = strstr(buf, "\r\n\r\n")))
        if (fill(t_send + (wait + 10000) * 1000000LL) <= 0) {
            printf("G -1 %" PRId64 " %" PRId64 " 0 0 0 0 0 no_answer\n", t_send, now_ns());
            return 0;
        }
    int status = atoi(buf + 9);
    size_t head = (size_t)(end + 4 - buf);
    char hdrs[4096];
    snprintf(hdrs, sizeof hdrs, "%.*s", (int)head, buf);
    consume(head);
    int duplex = status == 101;
    for (char *p = hdrs; *p; p++)
        *p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    chunked = !duplex && strstr(hdrs, "transfer-encoding: chunked") != NULL;
    if (status != 101 && !(status == 201 && chunked)) {
        /* an ordinary answer: its body (Content-Length) for the error code */
        const char *cl = strstr(hdrs, "content-length:");
        size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0;
        while (have < want && fill(now_ns() + 2000000000LL) > 0)
            ;
        json_error_t je;
        json_t *j = json_loadb(buf, have, 0, &je);
        const char *err = json_string_value(json_object_get(j, "error"));
        printf("G %d %" PRId64 " %" PRId64 " 0 0 0 0 0 %s\n", status, t_send, now_ns(), err ? err : "-");
        json_decref(j);
        return 0;
    }
    char line[1024];
    int64_t t;
    if (next_line(line, sizeof line, t_send + 10000000000LL, &t) != 1) {
        printf("G -3 %" PRId64 " %" PRId64 " 0 0 0 0 %d no_grant_line\n", t_send, now_ns(), duplex);
        return 0;
    }
    json_error_t je;
    json_t *g = json_loads(line, 0, &je);
    long long token = json_integer_value(json_object_get(g, "fencing_token"));
    long long validity = json_integer_value(json_object_get(g, "validity_ms"));
    long long ping_ms = json_integer_value(json_object_get(g, "ping_ms"));
    long long silence = json_integer_value(json_object_get(g, "silence_ms"));
    json_decref(g);
    if (duplex && ping_ms <= 0)
        ping_ms = ttl / 4 > 0 ? ttl / 4 : 1;
    printf("G 201 %" PRId64 " %" PRId64 " %lld %lld %lld %lld %d -\n", t_send, t, token, validity, ping_ms, silence,
           duplex);
    long n = 0;
    int64_t next_ping = now_ns();
    int waiting = 0; /* a ping's answer is unread */
    for (;;) {
        if (duplex && !waiting && now_ns() >= next_ping) {
            char ping[64];
            int pl = snprintf(ping, sizeof ping, "{\"ping\":%ld}\n", n);
            printf("P %ld %" PRId64 "\n", n, now_ns());
            if (send_all(ping, (size_t)pl) < 0) {
                printf("C %" PRId64 "\n", now_ns());
                return 0;
            }
            next_ping = now_ns() + ping_ms * 1000000LL;
            waiting = 1;
        }
        int r = next_line(line, sizeof line, duplex && !waiting ? next_ping : 0, &t);
        if (r == 0)
            continue;
        if (r < 0) {
            printf("C %" PRId64 "\n", now_ns());
            return 0;
        }
        json_t *j = json_loads(line, 0, &je);
        const char *ev = json_string_value(json_object_get(j, "event"));
        const char *why = json_string_value(json_object_get(j, "reason"));
        long long v = json_integer_value(json_object_get(j, "validity_ms"));
        if (ev && !strcmp(ev, "alive")) {
            printf("A %lld %" PRId64 " %lld\n", (long long)json_integer_value(json_object_get(j, "ping")), t, v);
            waiting = 0;
            n++;
        } else if (ev && !strcmp(ev, "extended")) {
            printf("E %" PRId64 " %lld\n", t, v);
        } else {
            printf("F %" PRId64 " %s %s\n", t, ev ? ev : "?", why ? why : "-");
            json_decref(j);
            return 0;
        }
        json_decref(j);
    }
}
