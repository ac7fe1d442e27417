/* faultproxy.c -- a TCP fault proxy for the chaos checker: one epoll process relays
 * several listen->upstream pairs and, on command, delays, blackholes or cuts each
 * pair's traffic.
 *
 * Usage: faultproxy --ctl PATH [--max-seconds N] LISTEN=UPSTREAM ...
 *   LISTEN and UPSTREAM are IPv4 host:port; a listen port of 0 picks a free port.
 *   Once every listener is bound it prints "ready PORT..." (one port per pair, in
 *   order) on stdout.  It exits by itself after --max-seconds (default 3600).
 *
 * Control: a unix stream socket at PATH, one command per line, one reply line each:
 *   mode <pair|all> pass            relay bytes as they come
 *   mode <pair|all> delay <ms>      hold every chunk <ms> before relaying it (order kept)
 *   mode <pair|all> drop            blackhole: read and discard both directions
 *   mode <pair|all> cut             close every connection; new ones are reset at once
 *   stats                           "ok" then per pair idx:mode:conns:accepted:refused:fwd:dropped
 *   quit                            reply "ok" and exit
 *
 * Known limit, on purpose: TCP never loses bytes inside a live connection, so a
 * connection that had bytes discarded by `drop` is closed when the pair leaves drop
 * mode (the network "gave up" on it); resuming it would desynchronise any Redis client
 * in a way no real network can. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 16
#define READ_CHUNK 65536
#define QUEUE_LIMIT (4u << 20) /* stop reading a side while this much waits to be sent */

enum mode { M_PASS, M_DELAY, M_DROP, M_CUT };
static const char *const mode_names[] = {"pass", "delay", "drop", "cut"};

enum kind { K_LISTEN, K_CTL_LISTEN, K_CTL, K_SIDE };

struct handle {
    enum kind kind;
    void *ptr;
    int side;
};

struct chunk {
    struct chunk *next;
    int64_t due;
    size_t len, off;
    char data[];
};

struct queue {
    struct chunk *head, *tail;
    size_t bytes;
};

struct pair;

/* One relayed connection.  Side 0 is the accepted client, side 1 the upstream.
 * q[s] holds bytes read from side s that still have to be written to side 1-s. */
struct conn {
    struct conn *next, *prev;
    struct pair *pair;
    int fd[2];
    struct handle h[2];
    struct queue q[2];
    uint32_t ev[2];
    int connecting;
    int eof[2];
    int wblocked[2];
    int lost;
    int dead;
};

struct pair {
    int idx;
    int lfd;
    struct handle h;
    struct sockaddr_in listen_addr, up;
    enum mode mode;
    int delay_ms;
    struct conn *conns;
    long nconns;
    unsigned long accepted, refused, fwd, dropped;
};

struct ctl {
    struct ctl *next;
    int fd;
    struct handle h;
    char buf[1024];
    size_t len;
    int dead;
};

/* The proxy's whole state: main builds it and passes it down. */
struct proxy {
    int ep;
    struct pair pairs[MAX_PAIRS];
    int npairs;
    int ctl_fd;
    struct handle ctl_h;
    const char *ctl_path;
    struct ctl *ctls;
    struct conn *graveyard;
    int quit;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("faultproxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return -1;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void ep_set(struct proxy *p, int fd, struct handle *h, uint32_t *cur, uint32_t want)
{
    if (*cur == want)
        return;
    struct epoll_event e = {.events = want, .data.ptr = h};
    int op = *cur == 0 ? EPOLL_CTL_ADD : (want == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD);
    if (epoll_ctl(p->ep, op, fd, &e) < 0)
        die("epoll_ctl: %s", strerror(errno));
    *cur = want;
}

static void queue_clear(struct queue *q)
{
    struct chunk *c = q->head;
    while (c) {
        struct chunk *n = c->next;
        free(c);
        c = n;
    }
    q->head = q->tail = NULL;
    q->bytes = 0;
}

static void set_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

/* Closes both sides (reset: send RST instead of FIN) and moves the conn to the
 * graveyard; it is freed after the current batch of events. */
static void conn_kill(struct proxy *p, struct conn *c, int reset)
{
    if (c->dead)
        return;
    for (int s = 0; s < 2; s++) {
        if (c->fd[s] >= 0) {
            uint32_t none = 0;
            ep_set(p, c->fd[s], &c->h[s], &c->ev[s], none);
            if (reset)
                set_reset(c->fd[s]);
            close(c->fd[s]);
            c->fd[s] = -1;
        }
        queue_clear(&c->q[s]);
    }
    struct pair *pr = c->pair;
    if (c->prev)
        c->prev->next = c->next;
    else
        pr->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pr->nconns--;
    c->dead = 1;
    c->next = p->graveyard;
    p->graveyard = c;
}

static void conn_interest(struct proxy *p, struct conn *c)
{
    if (c->dead)
        return;
    for (int s = 0; s < 2; s++) {
        uint32_t want = 0;
        if (s == 1 && c->connecting) {
            want = EPOLLOUT;
        } else {
            if (!c->eof[s] && c->q[s].bytes < QUEUE_LIMIT)
                want |= EPOLLIN;
            if (c->wblocked[s])
                want |= EPOLLOUT;
        }
        ep_set(p, c->fd[s], &c->h[s], &c->ev[s], want);
    }
}

/* Writes the due part of q[s] to side 1-s.  Returns -1 if the conn died. */
static int conn_flush(struct proxy *p, struct conn *c, int s)
{
    int d = 1 - s;
    struct queue *q = &c->q[s];
    if (d == 1 && c->connecting)
        return 0;
    int64_t now = now_ms();
    c->wblocked[d] = 0;
    while (q->head && q->head->due <= now) {
        struct chunk *ch = q->head;
        ssize_t n = send(c->fd[d], ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->wblocked[d] = 1;
                break;
            }
            if (errno == EINTR)
                continue;
            conn_kill(p, c, 1);
            return -1;
        }
        c->pair->fwd += (unsigned long)n;
        ch->off += (size_t)n;
        q->bytes -= (size_t)n;
        if (ch->off == ch->len) {
            q->head = ch->next;
            if (!q->head)
                q->tail = NULL;
            free(ch);
        }
    }
    if (!q->head && c->eof[s]) {
        conn_kill(p, c, 0);
        return -1;
    }
    return 0;
}

static void conn_read(struct proxy *p, struct conn *c, int s)
{
    static char buf[READ_CHUNK];
    if (c->eof[s] || c->q[s].bytes >= QUEUE_LIMIT)
        return;
    ssize_t n = recv(c->fd[s], buf, sizeof buf, 0);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        conn_kill(p, c, 1);
        return;
    }
    if (n == 0) {
        c->eof[s] = 1;
        if (c->pair->mode == M_DROP || !c->q[s].head)
            conn_kill(p, c, 0);
        return;
    }
    struct pair *pr = c->pair;
    if (pr->mode == M_DROP) {
        pr->dropped += (unsigned long)n;
        c->lost = 1;
        return;
    }
    struct chunk *ch = malloc(sizeof *ch + (size_t)n);
    if (!ch)
        die("out of memory");
    ch->next = NULL;
    ch->due = now_ms() + (pr->mode == M_DELAY ? pr->delay_ms : 0);
    ch->len = (size_t)n;
    ch->off = 0;
    memcpy(ch->data, buf, (size_t)n);
    struct queue *q = &c->q[s];
    if (q->tail)
        q->tail->next = ch;
    else
        q->head = ch;
    q->tail = ch;
    q->bytes += (size_t)n;
    (void)conn_flush(p, c, s);
}

static void on_connected(struct proxy *p, struct conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
        conn_kill(p, c, 1);
        return;
    }
    c->connecting = 0;
    (void)conn_flush(p, c, 0);
}

static void on_side(struct proxy *p, struct conn *c, int s, uint32_t events)
{
    if (c->dead)
        return;
    if (s == 1 && c->connecting) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            on_connected(p, c);
        return;
    }
    if ((events & EPOLLERR) || ((events & EPOLLHUP) && c->eof[s])) {
        /* the peer is gone both ways: nothing more can be read or written there */
        conn_kill(p, c, 1);
        return;
    }
    if (events & EPOLLOUT) {
        if (conn_flush(p, c, 1 - s) < 0)
            return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        conn_read(p, c, s);
}

static void on_accept(struct proxy *p, struct pair *pr)
{
    for (;;) {
        int fd = accept4(pr->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN, or EMFILE: retried on the next readiness */
        }
        if (pr->mode == M_CUT) {
            set_reset(fd);
            close(fd);
            pr->refused++;
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (ufd < 0) {
            set_reset(fd);
            close(fd);
            continue;
        }
        (void)setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int rc = connect(ufd, (struct sockaddr *)&pr->up, sizeof pr->up);
        if (rc < 0 && errno != EINPROGRESS) {
            /* upstream down: the client sees a reset, as if the master were */
            set_reset(fd);
            close(fd);
            close(ufd);
            pr->refused++;
            continue;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
            die("out of memory");
        c->pair = pr;
        c->fd[0] = fd;
        c->fd[1] = ufd;
        c->connecting = rc < 0;
        for (int s = 0; s < 2; s++)
            c->h[s] = (struct handle){.kind = K_SIDE, .ptr = c, .side = s};
        c->next = pr->conns;
        if (pr->conns)
            pr->conns->prev = c;
        pr->conns = c;
        pr->nconns++;
        pr->accepted++;
        conn_interest(p, c);
    }
}

static void set_mode(struct proxy *p, struct pair *pr, enum mode m, int delay)
{
    if (pr->mode == M_DROP && m != M_DROP) {
        for (struct conn *c = pr->conns, *n; c; c = n) {
            n = c->next;
            if (c->lost)
                conn_kill(p, c, 1);
        }
    }
    if (m == M_CUT) {
        while (pr->conns)
            conn_kill(p, pr->conns, 1);
    }
    if (m == M_DROP) {
        for (struct conn *c = pr->conns; c; c = c->next) {
            for (int s = 0; s < 2; s++) {
                if (c->q[s].bytes) {
                    pr->dropped += c->q[s].bytes;
                    c->lost = 1;
                    queue_clear(&c->q[s]);
                    c->wblocked[1 - s] = 0;
                }
            }
        }
    }
    pr->mode = m;
    pr->delay_ms = m == M_DELAY ? delay : 0;
}

/* Runs one control command; writes the reply line (no newline) into out. */
static void ctl_command(struct proxy *p, char *line, char *out, size_t outsz)
{
    char *save = NULL;
    char *verb = strtok_r(line, " \t\r", &save);
    if (!verb) {
        snprintf(out, outsz, "err empty command");
        return;
    }
    if (!strcmp(verb, "quit")) {
        p->quit = 1;
        snprintf(out, outsz, "ok");
        return;
    }
    if (!strcmp(verb, "stats")) {
        size_t off = (size_t)snprintf(out, outsz, "ok");
        for (int i = 0; i < p->npairs && off < outsz; i++) {
            struct pair *pr = &p->pairs[i];
            off += (size_t)snprintf(out + off, outsz - off, " %d:%s%.0d:%ld:%lu:%lu:%lu:%lu", i,
                                    mode_names[pr->mode], pr->delay_ms, pr->nconns, pr->accepted,
                                    pr->refused, pr->fwd, pr->dropped);
        }
        return;
    }
    if (strcmp(verb, "mode") != 0) {
        snprintf(out, outsz, "err unknown command '%s'", verb);
        return;
    }
    char *target = strtok_r(NULL, " \t\r", &save);
    char *mname = strtok_r(NULL, " \t\r", &save);
    char *arg = strtok_r(NULL, " \t\r", &save);
    if (!target || !mname) {
        snprintf(out, outsz, "err usage: mode <pair|all> pass|delay MS|drop|cut");
        return;
    }
    int lo, hi;
    if (!strcmp(target, "all")) {
        lo = 0;
        hi = p->npairs - 1;
    } else {
        char *end;
        long i = strtol(target, &end, 10);
        if (*end || i < 0 || i >= p->npairs) {
            snprintf(out, outsz, "err bad pair '%s'", target);
            return;
        }
        lo = hi = (int)i;
    }
    enum mode m;
    int delay = 0;
    if (!strcmp(mname, "pass"))
        m = M_PASS;
    else if (!strcmp(mname, "drop"))
        m = M_DROP;
    else if (!strcmp(mname, "cut"))
        m = M_CUT;
    else if (!strcmp(mname, "delay")) {
        char *end;
        long d = arg ? strtol(arg, &end, 10) : -1;
        if (!arg || *end || d < 0 || d > 600000) {
            snprintf(out, outsz, "err bad delay");
            return;
        }
        m = M_DELAY;
        delay = (int)d;
    } else {
        snprintf(out, outsz, "err bad mode '%s'", mname);
        return;
    }
    for (int i = lo; i <= hi; i++)
        set_mode(p, &p->pairs[i], m, delay);
    snprintf(out, outsz, "ok");
}

static void ctl_kill(struct proxy *p, struct ctl *c)
{
    if (c->dead)
        return;
    (void)epoll_ctl(p->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = 1;
}

static void on_ctl(struct proxy *p, struct ctl *c)
{
    if (c->dead)
        return;
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len, 0);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        ctl_kill(p, c);
        return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    char *nl;
    while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
        *nl = '\0';
        char reply[2048];
        ctl_command(p, c->buf, reply, sizeof reply - 1);
        size_t rl = strlen(reply);
        reply[rl++] = '\n';
        /* replies are short: a blocking-ish send on a fresh unix socket completes */
        if (send(c->fd, reply, rl, MSG_NOSIGNAL) != (ssize_t)rl) {
            ctl_kill(p, c);
            return;
        }
        size_t used = (size_t)(nl - c->buf) + 1;
        memmove(c->buf, nl + 1, c->len - used);
        c->len -= used;
    }
    if (c->len >= sizeof c->buf - 1)
        ctl_kill(p, c); /* an over-long line */
}

static void on_ctl_accept(struct proxy *p)
{
    for (;;) {
        int fd = accept4(p->ctl_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ctl *c = calloc(1, sizeof *c);
        if (!c)
            die("out of memory");
        c->fd = fd;
        c->h = (struct handle){.kind = K_CTL, .ptr = c};
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->h};
        if (epoll_ctl(p->ep, EPOLL_CTL_ADD, fd, &e) < 0)
            die("epoll_ctl: %s", strerror(errno));
        c->next = p->ctls;
        p->ctls = c;
    }
}

/* Milliseconds until the earliest queued chunk falls due (-1: none). */
static int next_timeout(struct proxy *p)
{
    int64_t best = -1, now = now_ms();
    for (int i = 0; i < p->npairs; i++) {
        for (struct conn *c = p->pairs[i].conns; c; c = c->next) {
            for (int s = 0; s < 2; s++) {
                int d = 1 - s;
                if (!c->q[s].head || c->wblocked[d] || (d == 1 && c->connecting))
                    continue;
                int64_t w = c->q[s].head->due - now;
                if (w < 0)
                    w = 0;
                if (best < 0 || w < best)
                    best = w;
            }
        }
    }
    return best > 600000 ? 600000 : (int)best;
}

static void flush_due(struct proxy *p)
{
    int64_t now = now_ms();
    for (int i = 0; i < p->npairs; i++) {
        for (struct conn *c = p->pairs[i].conns, *n; c; c = n) {
            n = c->next;
            for (int s = 0; s < 2 && !c->dead; s++) {
                if (c->q[s].head && c->q[s].head->due <= now && !c->wblocked[1 - s])
                    (void)conn_flush(p, c, s);
            }
            conn_interest(p, c);
        }
    }
}

static void reap(struct proxy *p)
{
    while (p->graveyard) {
        struct conn *c = p->graveyard;
        p->graveyard = c->next;
        free(c);
    }
    for (struct ctl **pc = &p->ctls; *pc;) {
        if ((*pc)->dead) {
            struct ctl *d = *pc;
            *pc = d->next;
            free(d);
        } else {
            pc = &(*pc)->next;
        }
    }
}

static void usage(void)
{
    fputs("usage: faultproxy --ctl PATH [--max-seconds N] LISTEN=UPSTREAM ...\n"
          "  LISTEN, UPSTREAM: IPv4 host:port (listen port 0 = any free port)\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    struct proxy px;
    memset(&px, 0, sizeof px);
    long max_seconds = 3600;
    signal(SIGPIPE, SIG_IGN);

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ctl") && i + 1 < argc) {
            px.ctl_path = argv[++i];
        } else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
            char *end;
            max_seconds = strtol(argv[++i], &end, 10);
            if (*end || max_seconds <= 0)
                die("bad --max-seconds '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--help")) {
            usage();
        } else {
            char *eq = strchr(argv[i], '=');
            if (!eq || px.npairs == MAX_PAIRS)
                usage();
            *eq = '\0';
            struct pair *pr = &px.pairs[px.npairs];
            if (parse_addr(argv[i], &pr->listen_addr) < 0)
                die("bad listen address '%s'", argv[i]);
            if (parse_addr(eq + 1, &pr->up) < 0)
                die("bad upstream address '%s'", eq + 1);
            pr->idx = px.npairs++;
        }
    }
    if (!px.ctl_path || px.npairs == 0)
        usage();

    px.ep = epoll_create1(EPOLL_CLOEXEC);
    if (px.ep < 0)
        die("epoll_create1: %s", strerror(errno));

    for (int i = 0; i < px.npairs; i++) {
        struct pair *pr = &px.pairs[i];
        pr->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (pr->lfd < 0 || setsockopt(pr->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(pr->lfd, (struct sockaddr *)&pr->listen_addr, sizeof pr->listen_addr) < 0 ||
            listen(pr->lfd, 512) < 0)
            die("listen on pair %d: %s", i, strerror(errno));
        socklen_t len = sizeof pr->listen_addr;
        if (getsockname(pr->lfd, (struct sockaddr *)&pr->listen_addr, &len) < 0)
            die("getsockname: %s", strerror(errno));
        pr->h = (struct handle){.kind = K_LISTEN, .ptr = pr};
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &pr->h};
        if (epoll_ctl(px.ep, EPOLL_CTL_ADD, pr->lfd, &e) < 0)
            die("epoll_ctl: %s", strerror(errno));
    }

    struct sockaddr_un un = {.sun_family = AF_UNIX};
    if (strlen(px.ctl_path) >= sizeof un.sun_path)
        die("control path too long: %s", px.ctl_path);
    strcpy(un.sun_path, px.ctl_path);
    unlink(px.ctl_path);
    px.ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (px.ctl_fd < 0 || bind(px.ctl_fd, (struct sockaddr *)&un, sizeof un) < 0 ||
        listen(px.ctl_fd, 16) < 0)
        die("control socket %s: %s", px.ctl_path, strerror(errno));
    px.ctl_h = (struct handle){.kind = K_CTL_LISTEN, .ptr = NULL};
    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = &px.ctl_h};
    if (epoll_ctl(px.ep, EPOLL_CTL_ADD, px.ctl_fd, &ce) < 0)
        die("epoll_ctl: %s", strerror(errno));

    printf("ready");
    for (int i = 0; i < px.npairs; i++)
        printf(" %u", ntohs(px.pairs[i].listen_addr.sin_port));
    printf("\n");
    fflush(stdout);

    int64_t deadline = now_ms() + max_seconds * 1000;
    while (!px.quit) {
        int64_t now = now_ms();
        if (now >= deadline) {
            fprintf(stderr, "faultproxy: --max-seconds reached, exiting\n");
            break;
        }
        int to = next_timeout(&px);
        int64_t left = deadline - now;
        if (to < 0 || to > left)
            to = (int)(left > 1000 ? 1000 : left);
        struct epoll_event evs[64];
        int n = epoll_wait(px.ep, evs, 64, to);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            struct handle *h = evs[i].data.ptr;
            switch (h->kind) {
            case K_LISTEN:
                on_accept(&px, h->ptr);
                break;
            case K_CTL_LISTEN:
                on_ctl_accept(&px);
                break;
            case K_CTL:
                on_ctl(&px, h->ptr);
                break;
            case K_SIDE:
                on_side(&px, h->ptr, h->side, evs[i].events);
                break;
            }
        }
        flush_due(&px);
        reap(&px);
    }
    unlink(px.ctl_path);
    return 0;
}
