/* test_tls.c -- rediss:// masters: real redis-server processes serving TLS
 * (--tls-port, tls-auth-clients yes) with a CA, server and client certificates made by
 * the test itself (openssl), and the real bin/redlockd.
 *
 * - Every kind of operation over TLS (grants, waits, streams, shared locks, permits,
 *   watches woken by another instance's release through pub/sub); every connection of
 *   the service is on a master's TLS port, and none is made per request (one handshake
 *   per connection: a handful at most across 150 requests, should a busy machine make
 *   the stall check recycle one).
 * - Plain and TLS masters mixed in one list.
 * - A certificate for another name, one of another CA, an expired one: each refused at
 *   the handshake, one log line each, the reason in /readyz, retried seconds apart, and
 *   requests pay nothing for them; a client without its certificate is refused with a
 *   reason that says so; --redis-tls-insecure takes them all, warns and says so.
 * - An ACL user and password over TLS.
 * - A TLS master restarted: quarantined, as over TCP.
 * - A "master" that takes the connection and never answers the handshake costs requests
 *   nothing, and is given up at the connect deadline with the reason.
 * - `redlockd --probe` with rediss:// masters in the environment; a bad CA file stops the
 *   start naming the file.
 *
 * Each master also listens on a plain loopback port, for the test's own commands
 * (FLUSHALL, CLIENT LIST, ACL) only: the service is given the TLS ports. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static h_service S2, S3;
static int tls_port[H_MAX_MASTERS];
static char master_cert[H_MAX_MASTERS][32];  /* each master's certificate (file stem) */
static int silent_fd = -1;                   /* a listener that never answers */
static long long admin_conns[H_MAX_MASTERS]; /* connections this test made to each master */

static void teardown(void)
{
    h_service_stop(&S2);
    h_service_stop(&S3);
    memset(&S2, 0, sizeof S2);
    memset(&S3, 0, sizeof S3);
    if (silent_fd >= 0)
        close(silent_fd);
    silent_fd = -1;
    h_set_redis_password(NULL);
    h_cluster_stop(&C);
}

TestSuite(tls, .fini = teardown, .timeout = 90);

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *bin(void)
{
    const char *b = getenv("REDLOCKD_BIN");
    return b ? b : "bin/redlockd";
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    cr_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- certificates and masters ---- */

/* In C.tmp: ca, other-ca; "good" for redis.example, localhost and 127.0.0.1; "wrongname"
 * for other.example only; "stranger" (good names, other-ca); "expired" (good names,
 * expired yesterday); "client" (ca, clientAuth). */
static void make_certs(void)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd,
             "(cd %s && for ca in ca other-ca; do "
             "openssl ecparam -name prime256v1 -genkey -noout -out $ca-key.pem && "
             "openssl req -x509 -new -key $ca-key.pem -days 2 -subj /CN=test-$ca -out $ca.pem || exit 1; done; "
             "printf 'subjectAltName=DNS:redis.example,DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > good.ext; "
             "printf 'subjectAltName=DNS:other.example\\nextendedKeyUsage=serverAuth\\n' > other.ext; "
             "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext; "
             "mk() { openssl ecparam -name prime256v1 -genkey -noout -out $1-key.pem && "
             "openssl req -new -key $1-key.pem -subj /CN=$2 -out $1.csr && "
             "openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3-key.pem -CAcreateserial -days $4 "
             "-extfile $5 -out $1.pem; }; "
             "mk good redis.example ca 2 good.ext && mk wrongname other.example ca 2 other.ext && "
             "mk stranger redis.example other-ca 2 good.ext && mk expired redis.example ca -1 good.ext && "
             "mk client redlockd ca 2 cli.ext) > %s/openssl.log 2>&1",
             C.tmp, C.tmp);
    cr_assert_eq(sh(cmd), 0, "openssl (see %s/openssl.log)", C.tmp);
}

static pid_t spawn(char *const argv[], const char *log)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setpgid(0, 0);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static const char *password; /* masters' requirepass, if any */

/* (Re)start master i on its ports, with its certificate; 0 or -1. */
static int launch(int i)
{
    h_redis *r = &C.masters[i];
    char port[16], tport[16], log[300], cert[300], key[300], ca[300];
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(tport, sizeof tport, "%d", tls_port[i]);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    snprintf(cert, sizeof cert, "%s/%s.pem", C.tmp, master_cert[i]);
    snprintf(key, sizeof key, "%s/%s-key.pem", C.tmp, master_cert[i]);
    snprintf(ca, sizeof ca, "%s/ca.pem", C.tmp);
    char *argv[] = {"redis-server", "--port", port, "--tls-port", tport, "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", r->appendonly ? "yes" : "no", "--appendfsync", "always",
                    "--dir", r->dir, "--daemonize", "no", "--protected-mode", "no",
                    "--maxmemory-policy", "noeviction", "--tls-cert-file", cert, "--tls-key-file", key,
                    "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes", NULL, NULL, NULL};
    if (password) {
        argv[29] = "--requirepass";
        argv[30] = (char *)password;
    }
    r->pid = spawn(argv, log);
    for (double end = h_now_ms() + 10000; h_now_ms() < end; usleep(5000)) {
        if (h_redis_is(r->port, r->pid, password)) /* ours, not another's on a port taken meanwhile */
            return 0;
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;
        }
    }
    return -1;
}

/* Master i serving TLS with certificate `cert` (AOF on if appendonly). */
static void tls_master(int i, const char *cert, int appendonly)
{
    h_redis *r = &C.masters[i];
    snprintf(r->dir, sizeof r->dir, "%s/m%d", C.tmp, i);
    mkdir(r->dir, 0755);
    r->appendonly = appendonly;
    snprintf(master_cert[i], sizeof master_cert[i], "%s", cert);
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = free_port();
        tls_port[i] = free_port();
        if (tls_port[i] != r->port && launch(i) == 0)
            return;
    }
    cr_assert_fail("cannot start TLS master %d", i);
}

/* n masters with these certificates (NULL: "good"); the temporary directory and the
 * certificates first. */
static void masters(int n, const char *const *certs, int appendonly)
{
    if (getenv("REDLOCK_TEST_URL"))
        cr_skip_test("starts its own TLS masters (external stack)");
    memset(&C, 0, sizeof C);
    h_tmpdir(C.tmp, sizeof C.tmp, "redlockd-tls");
    make_certs();
    C.n = n;
    for (int i = 0; i < n; i++)
        tls_master(i, certs && certs[i] ? certs[i] : "good", appendonly);
}

/* The --masters value: master i as form[i] ('t' rediss:// by address, 'l' rediss://
 * localhost, 'n' rediss:// by address with ?server_name=redis.example, 'p' plain redis://
 * to its plain port, 's' rediss:// to the silent listener), with user:pw@ if given. */
static void masters_list(char *out, size_t cap, const char *form, const char *userpw, int silent_port)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; form[i]; i++) {
        const char *sep = i ? "," : "";
        const char *cred = userpw ? userpw : "";
        const char *at = userpw ? "@" : "";
        switch (form[i]) {
        case 't':
            len += (size_t)snprintf(out + len, cap - len, "%srediss://%s%s127.0.0.1:%d", sep, cred, at, tls_port[i]);
            break;
        case 'l':
            len += (size_t)snprintf(out + len, cap - len, "%srediss://%s%slocalhost:%d", sep, cred, at, tls_port[i]);
            break;
        case 'n':
            len += (size_t)snprintf(out + len, cap - len, "%srediss://%s%s127.0.0.1:%d?server_name=redis.example",
                                    sep, cred, at, tls_port[i]);
            break;
        case 'p':
            len += (size_t)snprintf(out + len, cap - len, "%sredis://%s%s127.0.0.1:%d", sep, cred, at,
                                    C.masters[i].port);
            break;
        case 's':
            len += (size_t)snprintf(out + len, cap - len, "%srediss://127.0.0.1:%d", sep, silent_port);
            break;
        }
    }
}

/* Flags for the CA and (with_cert) our client certificate. */
static void tls_flags(char *out, size_t cap, int with_cert, const char *more)
{
    if (with_cert)
        snprintf(out, cap, "--redis-tls-ca-file %s/ca.pem --redis-tls-cert %s/client.pem "
                 "--redis-tls-key %s/client-key.pem --threads 2 %s", C.tmp, C.tmp, C.tmp, more ? more : "");
    else
        snprintf(out, cap, "--redis-tls-ca-file %s/ca.pem --threads 2 %s", C.tmp, more ? more : "");
}

static void start_service(h_service *s, const char *list, int with_cert, const char *more,
                          void (*how)(h_cluster *, h_service *, const char *))
{
    static char keep[8][2048]; /* masters_override must outlive the start */
    static int k;
    char flags[1024];
    tls_flags(flags, sizeof flags, with_cert, more);
    snprintf(keep[k % 8], sizeof keep[0], "%s", list);
    C.masters_override = keep[k++ % 8];
    how(&C, s, flags);
    C.masters_override = NULL;
}

/* ---- what the masters see ---- */

/* Master i's clients other than the one asking: how many are on its TLS port, how many
 * on its plain port, how many subscribed to something. */
static void clients_by_port(int i, int *on_tls, int *on_plain, int *subscribed)
{
    char list[65536];
    admin_conns[i]++;
    h_redis_cmd(&C.masters[i], list, sizeof list, "CLIENT LIST");
    *on_tls = *on_plain = *subscribed = 0;
    char tls_addr[48], plain_addr[48];
    snprintf(tls_addr, sizeof tls_addr, " laddr=127.0.0.1:%d ", tls_port[i]);
    snprintf(plain_addr, sizeof plain_addr, " laddr=127.0.0.1:%d ", C.masters[i].port);
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "cmd=client|list"))
            continue; /* this very question */
        *on_tls += strstr(line, tls_addr) != NULL;
        *on_plain += strstr(line, plain_addr) != NULL;
        *subscribed += strstr(line, " sub=0 ") == NULL && strstr(line, " sub=") != NULL;
    }
}

static long long connections_received(int i)
{
    char info[8192];
    admin_conns[i]++;
    h_redis_cmd(&C.masters[i], info, sizeof info, "INFO stats");
    const char *p = strstr(info, "total_connections_received:");
    cr_assert(p, "no connection count in INFO");
    return atoll(p + strlen("total_connections_received:"));
}

/* How many connections master i refused in its handshake so far (its log says each). */
static long long refusals_logged(int i)
{
    char path[300], line[1024];
    snprintf(path, sizeof path, "%s/redis.log", C.masters[i].dir);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no %s", path);
    long long n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, "Error accepting a client connection") != NULL;
    fclose(f);
    return n;
}

/* /readyz of s: master i's entry. */
static void master_entry(h_service *s, int i, char *state, size_t sl, char *reason, size_t rl, char *tls,
                         size_t tl, int *ok)
{
    void *curl = NULL;
    h_resp r;
    h_http_to(s->url, &curl, "GET", "/readyz", NULL, &r);
    curl_easy_cleanup(curl);
    json_t *m = json_array_get(json_object_get(r.json, "masters"), (size_t)i);
    cr_assert(m, "/readyz lists no master %d: %s", i, r.body);
    const char *st = json_string_value(json_object_get(m, "state"));
    const char *why = json_string_value(json_object_get(m, "reason"));
    const char *t = json_string_value(json_object_get(m, "tls"));
    snprintf(state, sl, "%s", st ? st : "");
    snprintf(reason, rl, "%s", why ? why : "");
    snprintf(tls, tl, "%s", t ? t : "");
    *ok = json_is_true(json_object_get(m, "ok"));
    h_resp_free(&r);
}

struct why {
    h_service *s;
    int i;
    const char *want;
    char got[300];
};

static int reason_is(void *arg)
{
    struct why *w = arg;
    char state[32], tls[32];
    int ok;
    master_entry(w->s, w->i, state, sizeof state, w->got, sizeof w->got, tls, sizeof tls, &ok);
    return !ok && strstr(w->got, w->want) != NULL;
}

static void expect_refused(h_service *s, int i, const char *want)
{
    struct why w = {s, i, want, ""};
    cr_assert(h_wait_until(reason_is, &w, 10000), "master %d: /readyz reason '%s' lacks '%s'", i, w.got, want);
}

/* Lines of s's log holding every needle given (NULL-terminated). */
static int log_lines(const h_service *s, ...)
{
    FILE *f = fopen(s->log, "r");
    cr_assert(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        va_list ap;
        va_start(ap, s);
        int all = 1;
        for (const char *w; all && (w = va_arg(ap, const char *)) != NULL;)
            all = strstr(line, w) != NULL;
        va_end(ap);
        n += all;
    }
    fclose(f);
    return n;
}

/* Whether s's /readyz shows master i as want says: 'v' ok over verified TLS, 'i' ok
 * over unverified TLS, 'p' ok in plain, '.' anything; asked a few times, so that both
 * workers answer. */
struct shown {
    h_service *s;
    const char *want;
    char last[300];
};

static int masters_shown(void *arg)
{
    struct shown *w = arg;
    for (int k = 0; k < 4; k++)
        for (int i = 0; w->want[i]; i++) {
            if (w->want[i] == '.')
                continue;
            char state[32], reason[200], tls[32];
            int ok;
            master_entry(w->s, i, state, sizeof state, reason, sizeof reason, tls, sizeof tls, &ok);
            const char *t = w->want[i] == 'v' ? "verified" : w->want[i] == 'i' ? "insecure" : "";
            snprintf(w->last, sizeof w->last, "master %d: %s, tls '%s', reason '%s'", i, state, tls, reason);
            if (!ok || strcmp(tls, t) != 0 || reason[0])
                return 0;
        }
    return 1;
}

static void expect_shown(h_service *s, const char *want)
{
    struct shown w = {s, want, ""};
    cr_assert(h_wait_until(masters_shown, &w, 10000), "/readyz: %s (want %s)", w.last, want);
}

/* ---- operations ---- */

static long status_of(const char *base, void **curl, const char *method, const char *path, const char *body,
                      h_resp *keep)
{
    h_resp r;
    h_http_to(base, curl, method, path, body, &r);
    long st = r.status;
    if (keep)
        *keep = r;
    else
        h_resp_free(&r);
    return st;
}

struct watch_arg {
    const char *url;
    char index[64];
    long status;
    double done_ms;
};

static void *watch_thread(void *p)
{
    struct watch_arg *w = p;
    void *curl = NULL;
    char path[256];
    snprintf(path, sizeof path, "/locks/tls.watched?index=%s&wait_ms=20000", w->index);
    h_resp r;
    h_http_to(w->url, &curl, "GET", path, NULL, &r);
    w->status = r.status;
    w->done_ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int watched_everywhere(void *arg)
{
    (void)arg;
    long long fewest, most;
    for (int i = 0; i < C.n; i++)
        admin_conns[i]++; /* one connection to each */
    h_release_subscribers(&C, "tls.watched", &fewest, &most);
    return fewest >= 1;
}

/* A streamed hold on a raw socket: connect, ask, wait for the grant line. */
static int stream_open(int port, const char *name, long ttl_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    char req[300];
    int n = snprintf(req, sizeof req, "POST /locks/%s?hold=stream&ttl_ms=%ld HTTP/1.1\r\nHost: t\r\n\r\n", name, ttl_ms);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    char buf[8192];
    size_t len = 0;
    for (double end = h_now_ms() + 10000; h_now_ms() < end && len < sizeof buf - 1;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t k = read(fd, buf + len, sizeof buf - 1 - len);
        cr_assert_gt(k, 0, "the stream ended before its grant");
        len += (size_t)k;
        buf[len] = '\0';
        if (strstr(buf, "\"lease\""))
            return fd;
    }
    cr_assert_fail("no grant on the stream: %s", buf);
    return -1;
}

/* ---- the tests ---- */

Test(tls, every_operation_goes_over_tls_with_one_handshake_per_connection)
{
    masters(5, NULL, 0);
    char list[2048];
    masters_list(list, sizeof list, "tlnnt", NULL, 0);
    start_service(&C.svc, list, 1, NULL, h_service_start);
    start_service(&S2, list, 1, NULL, h_service_start); /* announcements cross instances */
    /* every connection made from here on: the service's, and this test's own */
    long long conns[H_MAX_MASTERS];
    for (int i = 0; i < C.n; i++) {
        conns[i] = connections_received(i);
        admin_conns[i] = 0;
    }
    void *cl = NULL, *cl2 = NULL;
    h_resp r;

    /* grants, releases, a wait handed over */
    char lease[128], body[300];
    for (int k = 0; k < 50; k++) {
        cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/locks/tls.a?ttl_ms=5000", NULL, &r), 201, "%s", r.body);
        snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
        h_resp_free(&r);
        snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
        cr_assert_eq(status_of(C.svc.url, &cl, "PATCH", "/locks/tls.a?ttl_ms=5000", body, &r), 200, "%s", r.body);
        h_resp_free(&r);
        cr_assert_eq(status_of(C.svc.url, &cl, "DELETE", "/locks/tls.a", body, &r), 200, "%s", r.body);
        h_resp_free(&r);
    }
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/locks/tls.w?ttl_ms=400", NULL, NULL), 201);
    double t0 = h_now_ms();
    cr_assert_eq(status_of(S2.url, &cl2, "POST", "/locks/tls.w?wait_ms=5000&ttl_ms=1000", NULL, NULL), 201,
                 "the waiter did not get the lock when it expired");
    cr_assert_lt(h_now_ms() - t0, 4000);

    /* shared locks and permits */
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/locks/tls.rw?mode=shared", NULL, NULL), 201);
    cr_assert_eq(status_of(S2.url, &cl2, "POST", "/locks/tls.rw?mode=shared", NULL, NULL), 201);
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/locks/tls.rw?wait_ms=50", NULL, NULL), 409);
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/semaphores/tls.sem?permits=2", NULL, NULL), 201);
    cr_assert_eq(status_of(S2.url, &cl2, "POST", "/semaphores/tls.sem?permits=2", NULL, NULL), 201);
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/semaphores/tls.sem?permits=2", NULL, NULL), 409);
    cr_assert_eq(status_of(C.svc.url, &cl, "GET", "/semaphores/tls.sem", NULL, NULL), 200);

    /* a streamed hold outlives its ttl three times over: its extensions go over TLS */
    int fd = stream_open(C.svc.port, "tls.s", 500);
    double held_from = h_now_ms();
    while (h_now_ms() - held_from < 1600) {
        cr_assert_eq(status_of(S2.url, &cl2, "POST", "/locks/tls.s", NULL, NULL), 409, "the held stream lost its lock");
        usleep(200000);
    }
    close(fd); /* hanging up frees it */
    cr_assert_eq(status_of(S2.url, &cl2, "POST", "/locks/tls.s?wait_ms=3000", NULL, NULL), 201);

    /* a watch on S2 woken by a release through the first instance: the announcement
     * comes over S2's TLS subscriber connections (the lock's ttl is far away) */
    cr_assert_eq(status_of(C.svc.url, &cl, "POST", "/locks/tls.watched?ttl_ms=30000", NULL, &r), 201);
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    struct watch_arg w = {.url = S2.url};
    cr_assert_eq(status_of(S2.url, &cl2, "GET", "/locks/tls.watched", NULL, &r), 200);
    snprintf(w.index, sizeof w.index, "%s", h_str(&r, "index"));
    h_resp_free(&r);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, watch_thread, &w), 0);
    cr_assert(h_wait_until(watched_everywhere, NULL, 10000), "the watch never subscribed on every master");
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    double released = h_now_ms();
    cr_assert_eq(status_of(C.svc.url, &cl, "DELETE", "/locks/tls.watched", body, NULL), 200);
    pthread_join(th, NULL);
    cr_assert_eq(w.status, 200);
    cr_assert_lt(w.done_ms - released, 5000, "the watch was not woken by the announcement");

    /* every connection of both instances is on a TLS port, none came per request */
    for (int i = 0; i < C.n; i++) {
        int on_tls, on_plain, subscribed;
        clients_by_port(i, &on_tls, &on_plain, &subscribed);
        cr_assert_geq(on_tls, 2 * 2 * 2, "master %d: %d TLS connections (2 instances x 2 workers x "
                      "(commands + announcements))", i, on_tls);
        cr_assert_eq(on_plain, 0, "master %d: %d connections on its plain port", i, on_plain);
        cr_assert_geq(subscribed, 2, "master %d: the subscribers are not on TLS", i);
        /* a connection recycled by the stall check on a busy machine may come back; one
         * per request would be hundreds */
        long long now = connections_received(i), made = now - conns[i] - admin_conns[i];
        cr_assert_leq(made, 4, "master %d: the service made %lld connections during the run", i, made);
    }
    curl_easy_cleanup(cl);
    curl_easy_cleanup(cl2);
}

Test(tls, plain_and_tls_masters_mix_in_one_list)
{
    masters(5, NULL, 0);
    char list[2048];
    masters_list(list, sizeof list, "pptnl", NULL, 0);
    start_service(&C.svc, list, 1, NULL, h_service_start);
    expect_shown(&C.svc, "ppvvv");
    char lease[128];
    cr_assert_eq(h_acquire(&C, "tls.mixed", "ttl_ms=5000", lease, sizeof lease, NULL), 201);
    for (int i = 0; i < C.n; i++) {
        char v[256];
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:tls.mixed");
        cr_assert(strncmp(v, lease, strlen(lease)) == 0, "master %d holds '%s'", i, v);
        int on_tls, on_plain, subscribed;
        clients_by_port(i, &on_tls, &on_plain, &subscribed);
        cr_assert(i < 2 ? on_plain >= 2 && !on_tls : on_tls >= 2 && !on_plain, "master %d: %d tls, %d plain", i,
                  on_tls, on_plain);
    }
    cr_assert_eq(h_release(&C, "tls.mixed", lease), 200);
}

Test(tls, wrong_certificates_are_refused_once_with_the_reason_and_cost_requests_nothing)
{
    static const char *const certs[] = {"good", "good", "good", "good", "wrongname", "stranger", "expired"};
    masters(7, certs, 0);
    char list[2048];
    masters_list(list, sizeof list, "tnlnnnn", NULL, 0);
    /* --redis-tls-insecure: every certificate taken, a warning at start, /readyz says so
     * (and the cluster is born: a new one needs every master up once) */
    start_service(&S3, list, 1, "--redis-tls-insecure 1", h_service_start);
    cr_assert(h_log_contains(&S3, "--redis-tls-insecure: the certificates of 7 rediss:// master(s) are not verified"));
    expect_shown(&S3, "iiiiiii");
    h_service_stop(&S3);
    /* a node timeout far above a request's cost: a request that waited on a refused
     * master would show it */
    double started = h_now_ms();
    start_service(&C.svc, list, 1, "--node-timeout-ms 2000", h_service_start_quorum);
    expect_refused(&C.svc, 4, "issued for another name than 'redis.example'");
    expect_refused(&C.svc, 5, "signed by a CA that is not trusted (--redis-tls-ca-file)");
    expect_refused(&C.svc, 6, "expired");
    expect_shown(&C.svc, "vvvv...");
    /* requests pay nothing for the refused masters */
    for (int k = 0; k < 20; k++) {
        char lease[128];
        h_resp r;
        h_http(&C, "POST", "/locks/tls.refused?ttl_ms=5000", NULL, &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        cr_assert_lt(r.ms, 1000, "a grant took %.0f ms", r.ms);
        snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
        h_resp_free(&r);
        cr_assert_eq(h_release(&C, "tls.refused", lease), 200);
    }
    /* retried seconds apart, not tens of times a second: in its first 6 s the service
     * (2 workers x (commands + announcements) connections, 1 s then doubling to 5 s)
     * tries each refused master 3 times per connection; every refusal in the master's
     * log is this service's (the insecure one before it was taken) */
    while (h_now_ms() - started < 5500)
        usleep(20000);
    for (int i = 4; i < 7; i++) {
        long long n = refusals_logged(i);
        cr_assert_geq(n, 4, "master %d: %lld attempts in 6 s", i, n);
        cr_assert_leq(n, 16, "master %d: %lld attempts in 6 s", i, n);
    }
    /* one log line per refused master (worker 0's; the others say it at debug), with the reason */
    char addr[64];
    snprintf(addr, sizeof addr, "\"master\":\"127.0.0.1:%d\"", tls_port[4]);
    cr_assert_eq(log_lines(&C.svc, "\"level\":\"warn\"", addr, "another name", NULL), 1);
    snprintf(addr, sizeof addr, "\"master\":\"127.0.0.1:%d\"", tls_port[5]);
    cr_assert_eq(log_lines(&C.svc, "\"level\":\"warn\"", addr, "not trusted", NULL), 1);
    snprintf(addr, sizeof addr, "\"master\":\"127.0.0.1:%d\"", tls_port[6]);
    cr_assert_eq(log_lines(&C.svc, "\"level\":\"warn\"", addr, "expired", NULL), 1);
    cr_assert_eq(log_lines(&C.svc, "\"level\":\"warn\"", "\"master\"", NULL), 3, "other warnings in %s", C.svc.log);

    /* without our client certificate (tls-auth-clients yes): every master refuses us */
    start_service(&S2, list, 0, NULL, h_service_start_nowait);
    for (int i = 0; i < 4; i++)
        expect_refused(&S2, i, "--redis-tls-cert");

}

#define USER_PW "tls-locker-secret-pw"

Test(tls, an_acl_user_and_password_go_over_tls)
{
    password = "tls-default-secret";
    h_set_redis_password(password); /* for h_redis_cmd's AUTH */
    masters(3, NULL, 0);
    for (int i = 0; i < C.n; i++) {
        char out[64];
        h_redis_cmd(&C.masters[i], out, sizeof out,
                    "ACL SETUSER locker on >" USER_PW " resetkeys ~redlock:* resetchannels &redlock:* -@all "
                    "+evalsha +script|load +info +ping +subscribe +unsubscribe +select +get +set +del +pttl "
                    "+pexpire +hget +hset +hdel +hgetall +hincrby +hlen +hmget +publish +scan +time +exists "
                    "+zadd +zrem +zscore +zcard +zrange +zremrangebyscore");
        cr_assert_str_eq(out, "OK");
    }
    char list[2048];
    masters_list(list, sizeof list, "tnl", "locker:" USER_PW, 0);
    start_service(&C.svc, list, 1, NULL, h_service_start);
    char lease[128];
    cr_assert_eq(h_acquire(&C, "tls.acl", "ttl_ms=5000", lease, sizeof lease, NULL), 201);
    for (int i = 0; i < C.n; i++) {
        char clients[16384];
        h_redis_cmd(&C.masters[i], clients, sizeof clients, "CLIENT LIST");
        char want[64];
        snprintf(want, sizeof want, "laddr=127.0.0.1:%d", tls_port[i]);
        int n = 0;
        for (char *line = strtok(clients, "\n"); line; line = strtok(NULL, "\n"))
            n += strstr(line, want) && strstr(line, " user=locker ");
        cr_assert_geq(n, 2, "master %d: %d TLS connections as user locker", i, n);
    }
    cr_assert_eq(h_release(&C, "tls.acl", lease), 200);
    cr_assert(!h_log_contains(&C.svc, USER_PW), "the password reached the log");
    /* a wrong password is refused over TLS as over TCP */
    masters_list(list, sizeof list, "tnl", "locker:not-the-password", 0);
    start_service(&S2, list, 1, NULL, h_service_start_nowait);
    expect_refused(&S2, 0, "WRONGPASS");
    password = NULL;
}

struct qwait {
    int i;
    long long remaining;
};

static int quarantined(void *arg)
{
    struct qwait *q = arg;
    char state[32];
    h_master_state(&C, NULL, q->i, state, sizeof state, &q->remaining);
    return strcmp(state, "quarantined") == 0;
}

Test(tls, a_tls_master_that_restarts_is_quarantined)
{
    masters(5, NULL, 1);
    char list[2048];
    masters_list(list, sizeof list, "tnnlt", NULL, 0);
    start_service(&C.svc, list, 1, NULL, h_service_start);
    char lease[128];
    cr_assert_eq(h_acquire(&C, "tls.q", "ttl_ms=60000", lease, sizeof lease, NULL), 201);
    h_redis_kill(&C.masters[0]);
    cr_assert_eq(launch(0), 0, "master 0 would not restart");
    struct qwait q = {0, -1};
    cr_assert(h_wait_until(quarantined, &q, 15000), "the restarted TLS master was not quarantined");
    cr_assert_gt(q.remaining, 0);
    /* out of quorums: the lock is still held, and other grants go on without it */
    cr_assert_eq(h_acquire(&C, "tls.q", "wait_ms=0", NULL, 0, NULL), 409);
    cr_assert_eq(h_acquire(&C, "tls.q2", NULL, NULL, 0, NULL), 201);
    char v[64] = "";
    h_redis_cmd(&C.masters[0], v, sizeof v, "GET redlock:tls.q2");
    cr_assert_str_eq(v, "", "a grant went through the quarantined master");
}

static int gave_up(void *arg)
{
    struct why *w = arg;
    char state[32], tls[32];
    int ok;
    master_entry(w->s, w->i, state, sizeof state, w->got, sizeof w->got, tls, sizeof tls, &ok);
    return strstr(w->got, w->want) != NULL;
}

Test(tls, a_master_that_stalls_in_the_handshake_costs_requests_nothing)
{
    masters(4, NULL, 0);
    /* the fifth "master" takes connections (the kernel completes them) and never reads */
    silent_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    cr_assert(bind(silent_fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(silent_fd, 64) == 0);
    cr_assert(getsockname(silent_fd, (struct sockaddr *)&sa, &sl) == 0);
    char list[2048];
    masters_list(list, sizeof list, "tnnl", NULL, 0);
    start_service(&S3, list, 1, NULL, h_service_start); /* the cluster is born with its 4 masters */
    h_service_stop(&S3);
    masters_list(list, sizeof list, "tnnls", NULL, ntohs(sa.sin_port));
    /* node timeout 2 s: a round that waited on the silent master would take that long */
    start_service(&C.svc, list, 1, "--node-timeout-ms 2000", h_service_start_quorum);
    for (int k = 0; k < 20; k++) {
        h_resp r;
        h_http(&C, "POST", "/locks/tls.stall?ttl_ms=5000", NULL, &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        cr_assert_lt(r.ms, 1000, "a grant took %.0f ms", r.ms);
        char body[200];
        snprintf(body, sizeof body, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
        h_resp_free(&r);
        h_http(&C, "DELETE", "/locks/tls.stall", body, &r);
        cr_assert_eq(r.status, 200);
        h_resp_free(&r);
    }
    char state[32], reason[200], tls[32];
    int ok;
    master_entry(&C.svc, 4, state, sizeof state, reason, sizeof reason, tls, sizeof tls, &ok);
    cr_assert(!ok && !strcmp(state, "connecting"), "the silent master is '%s'", state);
    /* with a short node timeout the attempt is given up at its deadline (10 x, >= 1 s) */
    start_service(&S2, list, 1, "--node-timeout-ms 100", h_service_start_quorum);
    struct why w = {&S2, 4, "timed out", ""};
    cr_assert(h_wait_until(gave_up, &w, 5000), "the stalled handshake was never given up: '%s'", w.got);
}

Test(tls, probe_takes_rediss_masters_and_a_bad_ca_file_stops_the_start)
{
    masters(3, NULL, 0);
    char list[2048];
    masters_list(list, sizeof list, "tnl", NULL, 0);
    start_service(&C.svc, list, 1, NULL, h_service_start);
    /* the container HEALTHCHECK: `redlockd --probe` in the service's environment */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "env REDLOCK_MASTERS='%s' REDLOCK_LISTEN=127.0.0.1:%d REDLOCK_REDIS_TLS_CA_FILE=%s/ca.pem "
             "REDLOCK_REDIS_TLS_CERT=%s/client.pem REDLOCK_REDIS_TLS_KEY=%s/client-key.pem %s --probe "
             "> %s/probe.out 2>&1",
             list, C.svc.port, C.tmp, C.tmp, C.tmp, bin(), C.tmp);
    cr_assert_eq(sh(cmd), 0, "--probe with rediss:// masters (see %s/probe.out)", C.tmp);
    /* credentials that cannot be read stop the start, naming the file, never the password */
    snprintf(cmd, sizeof cmd,
             "%s --masters rediss://u:TOPSECRET@127.0.0.1:%d --redis-tls-ca-file %s/nothing.pem "
             "--listen 127.0.0.1:0 > %s/start.out 2>&1", bin(), tls_port[0], C.tmp, C.tmp);
    cr_assert_eq(sh(cmd), 2);
    h_service s = {0};
    snprintf(s.log, sizeof s.log, "%s/start.out", C.tmp);
    cr_assert(h_log_contains(&s, "nothing.pem"), "the message does not name the CA file");
    cr_assert(!h_log_contains(&s, "TOPSECRET"));
    snprintf(cmd, sizeof cmd,
             "%s --masters rediss://127.0.0.1:%d --redis-tls-ca-file %s/ca.pem --redis-tls-cert %s/client.pem "
             "--redis-tls-key %s/ca.pem --listen 127.0.0.1:0 > %s/start.out 2>&1",
             bin(), tls_port[0], C.tmp, C.tmp, C.tmp, C.tmp);
    cr_assert_eq(sh(cmd), 2, "a key that is not the certificate's");
    cr_assert(h_log_contains(&s, "client certificate"));
}
