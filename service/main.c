/* main.c -- the redlockd process: configuration, the listening socket, the workers,
 * and an orderly stop on SIGTERM/SIGINT.  Also `redlockd --probe URL`, a dependency-
 * free health probe for container HEALTHCHECKs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "app.h"
#include "config.h"
#include "jw.h"
#include "log.h"
#include "loop.h"
#include "waitq.h"
#include "version.h"
#include "metrics.h"
#include "worker.h"

/* ---- --probe URL ---- */

static int probe(const char *url)
{
    char host[256], path[512] = "/";
    int port = 80;
    if (strncmp(url, "http://", 7) != 0) {
        fprintf(stderr, "redlockd --probe: only http:// URLs\n");
        return 2;
    }
    const char *hp = url + 7;
    const char *slash = strchr(hp, '/');
    char hostport[300];
    size_t hl = slash ? (size_t)(slash - hp) : strlen(hp);
    if (hl == 0 || hl >= sizeof hostport) {
        fprintf(stderr, "redlockd --probe: bad URL '%s'\n", url);
        return 2;
    }
    memcpy(hostport, hp, hl);
    hostport[hl] = '\0';
    if (slash)
        snprintf(path, sizeof path, "%s", slash);
    if (config_parse_hostport(hostport, host, sizeof host, &port) != 0) {
        snprintf(host, sizeof host, "%.255s", hostport);
        port = 80;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
        fprintf(stderr, "redlockd --probe: cannot resolve '%s'\n", host);
        return 1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 1;
    if (fd < 0)
        goto out;
    struct timeval tv = {.tv_sec = 3};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        fprintf(stderr, "redlockd --probe: cannot connect to %s: %s\n", hostport, strerror(errno));
        goto out;
    }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, hostport);
    if (write(fd, req, (size_t)n) != n)
        goto out;
    char resp[64] = "";
    ssize_t k = read(fd, resp, sizeof resp - 1);
    if (k > 0) {
        resp[k] = '\0';
        rc = strncmp(resp, "HTTP/1.1 200", 12) == 0 || strncmp(resp, "HTTP/1.0 200", 12) == 0 ? 0 : 1;
        if (rc)
            fprintf(stderr, "redlockd --probe: %.*s\n", (int)strcspn(resp, "\r\n"), resp);
    }
out:
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return rc;
}

/* ---- listening socket ---- */

static int listen_on(app *a)
{
    config *c = &a->cfg;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", c->listen_port);
    int gai = getaddrinfo(c->listen_host, port, &hints, &res);
    if (gai != 0) {
        log_msg(&a->log, LOG_LEVEL_ERROR, "cannot resolve listen address '%s': %s", c->listen_host, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 4096) == 0)
            break;
        log_msg(&a->log, LOG_LEVEL_ERROR, "cannot listen on %s:%d: %s", c->listen_host, c->listen_port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    int real_port = c->listen_port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
            real_port = ntohs(s6->sin6_port);
            snprintf(a->listen_addr, sizeof a->listen_addr, "[%s]:%d", ip, real_port);
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
            real_port = ntohs(s4->sin_port);
            snprintf(a->listen_addr, sizeof a->listen_addr, "%s:%d", ip, real_port);
        }
    }
    a->listen_fd = fd;
    return 0;
}

static char *slurp(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read '%s'", path);
        return NULL;
    }
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (!buf || n == 0) {
        free(buf);
        snprintf(err, errlen, "'%s' is empty or unreadable", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Secrets from files: tokens, TLS material, the masters' password. */
static int load_secrets(app *a, char *err, size_t errlen)
{
    config *c = &a->cfg;
    if (c->auth_tokens_file[0] && auth_load(&a->auth, c->auth_tokens_file, err, errlen) != 0)
        return -1;
    if (c->tls_cert[0]) {
        if (!(a->tls_cert = slurp(c->tls_cert, err, errlen)) ||
            !(a->tls_key = slurp(c->tls_key, err, errlen)))
            return -1;
    }
    if (c->redis_password_file[0]) {
        char *pw = slurp(c->redis_password_file, err, errlen);
        if (!pw)
            return -1;
        pw[strcspn(pw, "\r\n")] = '\0';
        for (size_t i = 0; i < c->n_masters; i++)
            if (!c->masters[i].password[0])
                snprintf(c->masters[i].password, sizeof c->masters[i].password, "%s", pw);
        memset(pw, 0, strlen(pw));
        free(pw);
    }
    return 0;
}

static void raise_fd_limit(app *a)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)a->cfg.max_connections + 256 + a->cfg.n_masters * 64;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want)
        log_msg(&a->log, LOG_LEVEL_WARN,
                "open-file limit %llu is below what --max-connections %ld needs (%llu): "
                "connections past it are refused",
                (unsigned long long)rl.rlim_cur, a->cfg.max_connections, (unsigned long long)want);
}

/* A random id for this instance (hex): release messages it published come back to
 * it through pub/sub, and it skips them. */
static int make_origin(char *out, size_t cap)
{
    unsigned char b[8];
    if (cap < 2 * sizeof b + 1 || getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return -1;
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--probe") == 0)
        return probe(argv[2]);

    static app a; /* the one application context; everything below gets a pointer */
    char err[600];
    int rc = config_load(&a.cfg, argc, argv, err, sizeof err);
    if (rc == CONFIG_EXIT)
        return 0;
    if (rc == CONFIG_ERROR) {
        fprintf(stderr, "redlockd: %s\n", err);
        return 2;
    }
    if (load_secrets(&a, err, sizeof err) != 0) {
        fprintf(stderr, "redlockd: %s\n", err);
        return 2;
    }
    log_init(&a.log, a.cfg.log_json, a.cfg.log_level, 0);
    a.started_us = clock_now_us();
    a.listen_fd = -1;
    if (make_origin(a.origin, sizeof a.origin) != 0) {
        fprintf(stderr, "redlockd: no random bytes from the kernel\n");
        return 1;
    }

    /* Signals are taken synchronously by this thread; workers never see them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    raise_fd_limit(&a);
    if (listen_on(&a) != 0)
        return 1;

    a.nworkers = (size_t)a.cfg.threads;
    a.workers = calloc(a.nworkers, sizeof *a.workers);
    a.heat = calloc(WAITQ_SLOTS, sizeof *a.heat);
    a.known = calloc(WAITQ_SLOTS, sizeof *a.known);
    if (!a.workers || !a.heat || !a.known)
        return 1;
    for (size_t i = 0; i < a.nworkers; i++) {
        a.workers[i] = worker_new(&a, (int)i, metrics_render);
        if (!a.workers[i])
            return 1;
    }
    for (size_t i = 0; i < a.nworkers; i++)
        if (worker_start(a.workers[i]) != 0) {
            log_msg(&a.log, LOG_LEVEL_ERROR, "cannot start worker threads");
            return 1;
        }

    char fields[2048];
    jw j;
    jw_init(&j, fields, sizeof fields);
    jw_key_str(&j, "version", RL_VERSION);
    jw_key_str(&j, "listen", a.listen_addr);
    jw_key_int(&j, "threads", a.cfg.threads);
    jw_arr_open(&j, "masters");
    for (size_t i = 0; i < a.cfg.n_masters; i++) {
        jw_obj_open(&j);
        jw_key_str(&j, "address", a.cfg.masters[i].address);
        jw_obj_close(&j);
    }
    jw_arr_close(&j);
    jw_key_int(&j, "quorum", (long long)config_quorum(a.cfg.n_masters));
    jw_key_int(&j, "node_timeout_ms", a.cfg.node_timeout_ms);
    jw_key_bool(&j, "tls", a.tls_cert != NULL);
    jw_key_int(&j, "auth_tokens", (long long)a.auth.n);
    char msg[400];
    snprintf(msg, sizeof msg, "listening on %s", a.listen_addr);
    log_event(&a.log, LOG_LEVEL_INFO, msg, fields);

    int sig = 0;
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    log_msg(&a.log, LOG_LEVEL_INFO, "signal %d: stopping (finishing in-flight requests)", sig);
    __atomic_store_n(&a.stopping, 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < a.nworkers; i++)
        worker_stop(a.workers[i]);
    for (size_t i = 0; i < a.nworkers; i++)
        worker_join(a.workers[i]);
    for (size_t i = 0; i < a.nworkers; i++)
        worker_free(a.workers[i]);
    free(a.workers);
    free(a.heat);
    free(a.known);
    if (a.listen_fd >= 0)
        close(a.listen_fd);
    auth_free(&a.auth);
    free(a.tls_cert);
    free(a.tls_key);
    log_msg(&a.log, LOG_LEVEL_INFO, "stopped");
    return 0;
}
