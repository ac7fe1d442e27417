/* httpfloor.c -- the HTTP floor for `make bench`: a one-thread epoll server
 * that answers the lock contract with fixed JSON and touches no Redis.
 *
 * POST answers 201 with a fixed lease, DELETE 200, anything else 404.  What
 * the load generator measures against it is the cost of HTTP on loopback
 * plus the load generator itself, the floor under any lock service.
 *
 *   httpfloor PORT        listens on 127.0.0.1:PORT until SIGTERM/SIGINT
 *
 * Limits: requests up to 64 KiB; bodies only by Content-Length.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_CAP 65536

struct client {
    int fd;
    size_t len;
    char buf[BUF_CAP];
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Answers, built once by answers_init() so the lengths are computed. */
static char GRANT[512], RELEASED[512], NOTFOUND[512];

static void answer(char *out, size_t cap, const char *status, const char *body)
{
    snprintf(out, cap, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             status, strlen(body), body);
}

static void answers_init(void)
{
    answer(GRANT, sizeof GRANT, "201 Created",
           "{\"name\":\"floor\",\"lease\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\",\"fencing_token\":1,"
           "\"validity_ms\":29990,\"ttl_ms\":30000}");
    answer(RELEASED, sizeof RELEASED, "200 OK", "{\"name\":\"floor\",\"released\":true}");
    answer(NOTFOUND, sizeof NOTFOUND, "404 Not Found",
           "{\"error\":\"not_found\",\"message\":\"no such route\"}");
}

/* Length of the first complete request in b[0..n), 0 if incomplete, -1 if bad. */
static long request_len(const char *b, size_t n)
{
    const char *end = memmem(b, n, "\r\n\r\n", 4);
    if (!end)
        return n >= BUF_CAP ? -1 : 0;
    size_t hl = (size_t)(end - b) + 4;
    long cl = 0;
    for (const char *p = b; p && p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        p = nl + 1;
        if (strncasecmp(p, "content-length:", 15) == 0) {
            cl = strtol(p + 15, NULL, 10);
            if (cl < 0 || cl > BUF_CAP)
                return -1;
        }
    }
    if (n < hl + (size_t)cl)
        return 0;
    return (long)(hl + (size_t)cl);
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            return false; /* a full socket buffer counts as a failure: answers are tiny */
        }
    }
    return true;
}

/* Reads and answers what is there; false when the client must be dropped. */
static bool client_io(struct client *c)
{
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, BUF_CAP - c->len, 0);
        if (r == 0)
            return false;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return true;
            return false;
        }
        c->len += (size_t)r;
        long q;
        while ((q = request_len(c->buf, c->len)) > 0) {
            const char *a = NOTFOUND;
            if (strncmp(c->buf, "POST ", 5) == 0)
                a = GRANT;
            else if (strncmp(c->buf, "DELETE ", 7) == 0)
                a = RELEASED;
            if (!send_all(c->fd, a, strlen(a)))
                return false;
            memmove(c->buf, c->buf + q, c->len - (size_t)q);
            c->len -= (size_t)q;
        }
        if (q < 0)
            return false;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 65535) {
        fprintf(stderr, "usage: httpfloor PORT\n");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    answers_init();
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
        || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1024) < 0) {
        perror("httpfloor: listen");
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0) {
        perror("httpfloor: epoll");
        return 1;
    }
    fprintf(stderr, "httpfloor: listening on 127.0.0.1:%s\n", argv[1]);
    struct epoll_event evs[128];
    while (!g_stop) {
        int n = epoll_wait(ep, evs, 128, 200);
        for (int i = 0; i < n; i++) {
            struct client *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct client *nc = malloc(sizeof *nc);
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = nc};
                    if (!nc || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) < 0) {
                        free(nc);
                        close(fd);
                        continue;
                    }
                    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    nc->fd = fd;
                    nc->len = 0;
                }
                continue;
            }
            if (!client_io(c)) {
                close(c->fd); /* also leaves the epoll set */
                free(c);
            }
        }
    }
    return 0;
}
