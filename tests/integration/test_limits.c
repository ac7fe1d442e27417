/* test_limits.c -- nothing a client does brings the service down: idle connections by
 * the thousand, a byte-a-second client, a connection cap, ten thousand waiters. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static void teardown(void) { h_cluster_stop(&C); }

TestSuite(limits, .fini = teardown, .timeout = 120);

static void raise_nofile(rlim_t want)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max; /* the hard limit may not be raised without privileges */
    cr_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    cr_assert_geq(rl.rlim_cur, want, "need %lu open files, the hard limit is %lu",
                  (unsigned long)want, (unsigned long)rl.rlim_max);
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until the peer closes (1) or the deadline (0). */
static int closed_by_peer(int fd, int timeout_ms)
{
    double end = h_now_ms() + timeout_ms;
    char buf[4096];
    while (h_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) == 1) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno == ECONNRESET))
                return 1;
        }
    }
    return 0;
}

/* The service's open descriptors (/proc/PID/fd) number at least want. */
struct accepted {
    pid_t pid;
    int want, fds;
};

static int accepted_all(void *arg)
{
    struct accepted *a = arg;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)a->pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    a->fds = n;
    return n >= a->want;
}

Test(limits, five_thousand_idle_connections_do_not_stop_normal_requests)
{
    h_cluster_start(&C, 5, 0, NULL);
    h_require_local(&C);
    raise_nofile(5100);
    enum { N = 5000 };
    int *fds = malloc(N * sizeof *fds);
    for (int i = 0; i < N; i++) {
        fds[i] = dial(C.svc.port);
        cr_assert(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
    }
    /* Half of them send half a request header and stop. */
    for (int i = 0; i < N; i += 2)
        cr_assert(write(fds[i], "POST /locks/x HTTP/1.1\r\nHost: a\r\n", 33) == 33);
    /* The kernel completed the connections; the service accepts them at its own pace (on
     * a busy machine, for a second or more after the last connect), and what is asked
     * is that they do not stop requests once they are idle: wait until it has them. */
    struct accepted acc = {C.svc.pid, N, 0};
    cr_assert(h_wait_until(accepted_all, &acc, 30000), "the service holds %d descriptors of %d connections",
              acc.fds, N);
    for (int i = 0; i < 50; i++) {
        char name[32], lease[200];
        snprintf(name, sizeof name, "idle.%d", i);
        h_resp r;
        char path[64];
        snprintf(path, sizeof path, "/locks/%s", name);
        h_http(&C, "POST", path, NULL, &r);
        cr_assert_eq(r.status, 201, "%s: %ld %s", name, r.status, r.body);
        snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
        h_resp_free(&r);
        cr_assert_eq(h_release(&C, name, lease), 200);
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(fds);
}

Test(limits, a_byte_a_second_client_is_cut)
{
    h_cluster_start(&C, 5, 0, "--header-timeout-ms 500");
    h_require_local(&C);
    int fd = dial(C.svc.port);
    cr_assert(fd >= 0);
    const char *req = "POST /locks/slow HTTP/1.1\r\nHost: a\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    double t0 = h_now_ms();
    int cut = 0;
    for (size_t i = 0; i < strlen(req) && !cut; i++) {
        if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1)
            cut = 1;
        else
            cut = closed_by_peer(fd, 100); /* one byte every 100 ms: far above any idle timeout */
    }
    cr_assert(cut, "the trickling client was not cut");
    double took = h_now_ms() - t0;
    cr_assert(took >= 400 && took < 5000, "cut after %.0f ms (limit 500 ms)", took);
    close(fd);
    h_resp r;
    h_http(&C, "GET", "/metrics", NULL, &r);
    cr_assert(strstr(r.body, "redlockd_slow_connections_closed_total 0\n") == NULL, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "POST", "/locks/after.slow", NULL, &r);
    cr_assert_eq(r.status, 201, "%ld %s", r.status, r.body);
    h_resp_free(&r);
}

Test(limits, keep_alive_connection_survives_between_requests)
{
    h_cluster_start(&C, 5, 0, "--header-timeout-ms 500");
    h_require_local(&C);
    /* The same keep-alive connection, requests 200 ms apart for over a second. */
    for (int i = 0; i < 7; i++) {
        h_resp r;
        h_http(&C, "GET", "/healthz", NULL, &r);
        cr_assert_eq(r.status, 200);
        h_resp_free(&r);
        usleep(200 * 1000);
    }
}

Test(limits, connections_past_the_cap_are_refused_and_the_process_stays_up)
{
    h_cluster_start(&C, 5, 0, "--max-connections 100 --threads 1");
    h_require_local(&C);
    enum { N = 150 };
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = dial(C.svc.port);
    /* Past the cap the server closes new connections at once. */
    int refused = 0;
    for (int i = 100; i < N; i++)
        refused += fds[i] < 0 || closed_by_peer(fds[i], 500);
    cr_assert_geq(refused, 40, "connections past the cap were refused: %d of 50", refused);
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* The server notices the closed connections asynchronously: until it has, a new
     * connection may still be refused.  Each try uses its own name. */
    double end = h_now_ms() + 5000;
    long st = 0;
    for (int k = 0; st != 201 && h_now_ms() < end; k++) {
        char name[32];
        snprintf(name, sizeof name, "after.cap.%d", k);
        st = h_acquire(&C, name, NULL, NULL, 0, NULL);
        if (st != 201)
            usleep(20000);
    }
    cr_assert_eq(st, 201);
}

Test(limits, ten_thousand_waiters_are_answered_or_refused)
{
    h_cluster_start(&C, 5, 0, "--max-waiters 2000 --max-connections 30000");
    h_require_local(&C);
    raise_nofile(10100);
    cr_assert_eq(h_acquire(&C, "crowd", "ttl_ms=60000", NULL, 0, NULL), 201);
    enum { N = 10000 };
    int *fds = malloc(N * sizeof *fds);
    const char *req = "POST /locks/crowd?wait_ms=15000 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
    size_t rl = strlen(req);
    for (int i = 0; i < N; i++) {
        fds[i] = dial(C.svc.port);
        cr_assert(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
        cr_assert(write(fds[i], req, rl) == (ssize_t)rl);
    }
    /* The waits (15 s) outlast the sending: every parked waiter is still parked when
     * the last request arrives, so exactly --max-waiters of them park. */
    int n409 = 0, n503 = 0, other = 0, answered = 0;
    char *done = calloc(N, 1);
    struct pollfd *p = malloc(N * sizeof *p);
    double end = h_now_ms() + 40000;
    while (answered < N && h_now_ms() < end) {
        int k = 0;
        int *map = malloc(N * sizeof *map);
        for (int i = 0; i < N; i++)
            if (!done[i]) {
                p[k].fd = fds[i];
                p[k].events = POLLIN;
                map[k++] = i;
            }
        int ready = poll(p, (nfds_t)k, 200);
        for (int j = 0; ready > 0 && j < k; j++) {
            if (!(p[j].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[512];
            ssize_t n = read(p[j].fd, buf, sizeof buf - 1);
            done[map[j]] = 1;
            answered++;
            if (n > 12) {
                buf[n] = '\0';
                if (strncmp(buf, "HTTP/1.1 409", 12) == 0)
                    n409++;
                else if (strncmp(buf, "HTTP/1.1 503", 12) == 0 && strstr(buf, "too_many_waiters"))
                    n503++;
                else {
                    if (!other)
                        fprintf(stderr, "unexpected answer: %.200s\n", buf);
                    other++;
                }
            } else {
                if (!other)
                    fprintf(stderr, "unexpected read: %zd (%s)\n", n, n < 0 ? strerror(errno) : "");
                other++;
            }
        }
        free(map);
    }
    for (int i = 0; i < N; i++)
        close(fds[i]);
    free(fds);
    free(done);
    free(p);
    cr_assert_eq(answered, N, "every waiter is answered (%d)", answered);
    cr_assert_eq(other, 0, "409: %d, 503: %d, other: %d", n409, n503, other);
    cr_assert_eq(n409, 2000, "parked up to --max-waiters, then answered at the end of the wait: 409 %d, 503 %d", n409, n503);
    cr_assert_eq(n503, N - 2000);
    h_resp r;
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "still serving");
    h_resp_free(&r);
}
