/* main.c -- the redlockd process: configuration, the listening socket, the workers,
 * and an orderly stop on SIGTERM/SIGINT.  Also `redlockd --probe [URL]`, a health probe
 * (http or https) for container HEALTHCHECKs that needs no curl in the image.
 * Exit status: 2 bad configuration, CONFIG_EXIT_ADDRESS_IN_USE (3) the listen address
 * is taken, 1 other failures at start, 0 after SIGTERM/SIGINT. */
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

#include <gnutls/gnutls.h>

#include "app.h"
#include "config.h"
#include "inbox.h"
#include "jw.h"
#include "log.h"
#include "loop.h"
#include "waitq.h"
#include "version.h"
#include "metrics.h"
#include "redis_tls.h"
#include "worker.h"

/* ---- --probe [URL] ---- */

/* One probe connection: plain TCP, or TLS over it (GnuTLS, which libmicrohttpd's HTTPS
 * already brings).  The probe asks whether the service answers, not who it is: the
 * server's certificate is not verified (it is usually issued for a name other than the
 * loopback address the probe uses), and the probe sends no secret. */
typedef struct probe_conn {
    int fd;
    gnutls_session_t tls; /* NULL: plain */
    gnutls_certificate_credentials_t cred;
} probe_conn;

static int probe_send(probe_conn *c, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t k = c->tls ? gnutls_record_send(c->tls, buf, len) : write(c->fd, buf, len);
        if (k == GNUTLS_E_INTERRUPTED || (k < 0 && !c->tls && errno == EINTR))
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        len -= (size_t)k;
    }
    return 0;
}

static ssize_t probe_recv(probe_conn *c, char *buf, size_t cap)
{
    for (;;) {
        ssize_t k = c->tls ? gnutls_record_recv(c->tls, buf, cap) : read(c->fd, buf, cap);
        if (k == GNUTLS_E_INTERRUPTED || (k < 0 && !c->tls && errno == EINTR))
            continue;
        return k; /* a timeout (SO_RCVTIMEO) ends it as an error */
    }
}

static int probe_tls_start(probe_conn *c, const char *host, char *err, size_t errlen)
{
    int rc = gnutls_certificate_allocate_credentials(&c->cred);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_init(&c->tls, GNUTLS_CLIENT);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_set_default_priority(c->tls);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred);
    struct in6_addr ip;
    if (rc == GNUTLS_E_SUCCESS && inet_pton(AF_INET, host, &ip) != 1 &&
        inet_pton(AF_INET6, host, &ip) != 1) /* SNI takes names, not addresses */
        rc = gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, host, strlen(host));
    if (rc != GNUTLS_E_SUCCESS) {
        snprintf(err, errlen, "TLS set-up: %s", gnutls_strerror(rc));
        return -1;
    }
    gnutls_transport_set_int(c->tls, c->fd);
    gnutls_handshake_set_timeout(c->tls, 3000);
    do
        rc = gnutls_handshake(c->tls);
    while (rc < 0 && !gnutls_error_is_fatal(rc) && rc != GNUTLS_E_AGAIN);
    if (rc < 0) {
        snprintf(err, errlen, "TLS handshake: %s", gnutls_strerror(rc));
        return -1;
    }
    return 0;
}

static int probe(const char *url)
{
    char host[256], path[512] = "/";
    int tls = strncmp(url, "https://", 8) == 0;
    int port = tls ? 443 : 80;
    if (!tls && strncmp(url, "http://", 7) != 0) {
        fprintf(stderr, "redlockd --probe: only http:// and https:// URLs\n");
        return 2;
    }
    const char *hp = url + (tls ? 8 : 7);
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
        port = tls ? 443 : 80;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
        fprintf(stderr, "redlockd --probe: cannot resolve '%s'\n", host);
        return 1;
    }
    /* Every address the name resolves to, in getaddrinfo's order, as curl does: a standard
     * /etc/hosts maps localhost to ::1 as well as 127.0.0.1, and the service may listen on
     * only one of them. */
    probe_conn c = {.fd = -1};
    int rc = 1;
    char err[200], tried[600] = "";
    size_t tl = 0;
    for (struct addrinfo *ai = res; ai && c.fd < 0; ai = ai->ai_next) {
        char a[INET6_ADDRSTRLEN] = "?";
        getnameinfo(ai->ai_addr, ai->ai_addrlen, a, sizeof a, NULL, 0, NI_NUMERICHOST);
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            struct timeval tv = {.tv_sec = 3};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* bounds connect() too */
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                c.fd = fd;
                break;
            }
        }
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (tl < sizeof tried) {
            int k = snprintf(tried + tl, sizeof tried - tl, "%s%s: %s", tl ? "; " : "", a, strerror(e));
            tl += k > 0 ? (size_t)k : 0;
        }
    }
    if (c.fd < 0) {
        fprintf(stderr, "redlockd --probe: cannot connect to %s (%s)\n", hostport, tried);
        goto out;
    }
    if (tls && probe_tls_start(&c, host, err, sizeof err) != 0) {
        fprintf(stderr, "redlockd --probe: %s: %s\n", hostport, err);
        goto out;
    }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, hostport);
    if (n < 0 || (size_t)n >= sizeof req || probe_send(&c, req, (size_t)n) != 0) {
        fprintf(stderr, "redlockd --probe: cannot send the request to %s\n", hostport);
        goto out;
    }
    /* The status line, however the answer is cut into reads (TLS records). */
    char resp[64] = "";
    size_t got = 0;
    while (got < 12) {
        ssize_t k = probe_recv(&c, resp + got, sizeof resp - 1 - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    resp[got] = '\0';
    if (got < 12) {
        fprintf(stderr, "redlockd --probe: no HTTP answer from %s\n", hostport);
        goto out;
    }
    rc = strncmp(resp, "HTTP/1.1 200", 12) == 0 || strncmp(resp, "HTTP/1.0 200", 12) == 0 ? 0 : 1;
    if (rc)
        fprintf(stderr, "redlockd --probe: %.*s\n", (int)strcspn(resp, "\r\n"), resp);
out:
    if (c.tls)
        gnutls_deinit(c.tls);
    if (c.cred)
        gnutls_certificate_free_credentials(c.cred);
    if (c.fd >= 0)
        close(c.fd);
    freeaddrinfo(res);
    return rc;
}

/* `redlockd --probe [flags]`: GET /healthz on the listener the configuration (the
 * environment, then the flags) describes: https when --tls-cert is set, and a wildcard
 * listen address probed on its loopback. */
static int probe_own(int argc, char **argv)
{
    static config cfg;
    char err[600];
    int rc = config_load(&cfg, argc, argv, err, sizeof err);
    if (rc == CONFIG_EXIT)
        return 0;
    if (rc == CONFIG_ERROR) {
        fprintf(stderr, "redlockd --probe: %s\n", err);
        return 2;
    }
    if (cfg.listen_port == 0) {
        fprintf(stderr, "redlockd --probe: the listener's port is 0 (any free port): give the URL\n");
        return 2;
    }
    const char *host = cfg.listen_host;
    if (strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        host = "::1";
    char url[400];
    snprintf(url, sizeof url, "%s://%s%s%s:%d/healthz", cfg.tls_cert[0] ? "https" : "http",
             strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", cfg.listen_port);
    return probe(url);
}

/* ---- listening socket ---- */

/* Bind and listen on the configured address.  Returns 0, -2 when the address is in use
 * (EADDRINUSE), -1 on another failure (logged). */
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
    int fd = -1, in_use = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 4096) == 0)
            break;
        if (errno == EADDRINUSE)
            in_use = 1;
        log_msg(&a->log, LOG_LEVEL_ERROR, "cannot listen on %s:%d: %s%s", c->listen_host, c->listen_port,
                strerror(errno), errno == EADDRINUSE ? " (another process holds it)" : "");
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return in_use ? -2 : -1;
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
    /* TLS to masters: the CAs and our certificate, read once, shared by every worker. */
    if (config_tls_masters(c)) {
        char why[500];
        c->redis_tls = redis_tls_creds_new(c->redis_tls_ca_file, c->redis_tls_cert, c->redis_tls_key,
                                           !c->redis_tls_insecure, why, sizeof why);
        if (!c->redis_tls) {
            snprintf(err, errlen, "TLS to masters: %s", why);
            return -1;
        }
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
    if (argc >= 2 && strcmp(argv[1], "--probe") == 0) {
        if (argc == 3 && strncmp(argv[2], "--", 2) != 0)
            return probe(argv[2]);
        return probe_own(argc - 1, argv + 1); /* argv[1] stands for the program name */
    }

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
    size_t ntls = config_tls_masters(&a.cfg);
    if (ntls && a.cfg.redis_tls_insecure)
        log_msg(&a.log, LOG_LEVEL_WARN,
                "--redis-tls-insecure: the certificates of %zu rediss:// master(s) are not verified: "
                "anyone on the path can pose as a master, read the passwords and hand out locks",
                ntls);
    else if (!ntls && (a.cfg.redis_tls_ca_file[0] || a.cfg.redis_tls_cert[0] || a.cfg.redis_tls_insecure ||
                       a.cfg.redis_tls_server_name[0]))
        log_msg(&a.log, LOG_LEVEL_WARN, "TLS settings for masters given, but no master is rediss://");
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
    rc = listen_on(&a);
    if (rc != 0)
        return rc == -2 ? CONFIG_EXIT_ADDRESS_IN_USE : 1;

    a.nworkers = (size_t)a.cfg.threads;
    a.workers = calloc(a.nworkers, sizeof *a.workers);
    a.heat = calloc(WAITQ_SLOTS, sizeof *a.heat);
    a.known = calloc(WAITQ_SLOTS, sizeof *a.known);
    a.inboxes = calloc(a.nworkers, sizeof *a.inboxes);
    if (!a.workers || !a.heat || !a.known || !a.inboxes)
        return 1;
    for (size_t i = 0; i < a.nworkers; i++)
        inbox_init(&a.inboxes[i], (int)a.cfg.n_masters);
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
        if (a.cfg.masters[i].tls) /* the name its certificate must carry, or unverified */
            jw_key_str(&j, "tls", a.cfg.redis_tls_insecure ? "insecure"
                                                           : config_master_tls_name(&a.cfg, &a.cfg.masters[i]));
        jw_obj_close(&j);
    }
    jw_arr_close(&j);
    jw_key_int(&j, "quorum", (long long)config_quorum(a.cfg.n_masters));
    jw_key_int(&j, "node_timeout_ms", a.cfg.node_timeout_ms);
    jw_key_bool(&j, "tls", a.tls_cert != NULL);
    jw_key_int(&j, "auth_tokens", (long long)a.auth.n);
    /* Which REDLOCK_* variables the environment gave (names only: values may hold secrets):
     * what reached the service from a shell, beside its flags (`--help` lists them). */
    jw_arr_open(&j, "environment");
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "REDLOCK_", 8) == 0)
            jw_key_strn(&j, NULL, *e, strcspn(*e, "="));
    jw_arr_close(&j);
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
    free(a.inboxes);
    if (a.listen_fd >= 0)
        close(a.listen_fd);
    auth_free(&a.auth);
    free(a.tls_cert);
    free(a.tls_key);
    redis_tls_creds_free(a.cfg.redis_tls);
    log_msg(&a.log, LOG_LEVEL_INFO, "stopped");
    return 0;
}
