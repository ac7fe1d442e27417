/* test_deploy.c -- what a locked-down deployment relies on: masters behind Redis ACL users
 * (redis://user:password@host:port authenticates as that user, with the least
 * permissions deploy/README.md lists; a wrong password is refused), a rediss:// master
 * whose TLS files cannot be read stopping the start with the reason (TLS itself:
 * test_tls.c), `redlockd --probe` against an https:// listener (the container
 * HEALTHCHECK), and the exit status of a listen address in use (the systemd unit's
 * RestartPreventExitStatus). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static h_service S2;
static void *cl; /* keep-alive client for S2 */
static char dir[128];

static void teardown(void)
{
    if (cl)
        curl_easy_cleanup(cl);
    cl = NULL;
    h_service_stop(&S2);
    memset(&S2, 0, sizeof S2);
    h_cluster_stop(&C);
    if (dir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
        }
    }
}

TestSuite(deploy, .fini = teardown, .timeout = 90);

static const char *bin(void)
{
    const char *b = getenv("REDLOCKD_BIN");
    return b ? b : "bin/redlockd";
}

static void make_dir(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/redlockd-deploy-XXXXXX");
        cr_assert(mkdtemp(dir));
    }
}

/* Run a shell command line; its exit status (or -1 if it did not exit). */
static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* ---- ACL users ------------------------------------------------------------------ */

#define DEFAULT_PW "default-user-secret-pw"
#define USER_PW "locker-user-secret-pw"
#define WRONG_PW "not-the-locker-password"

/* The permissions deploy/README.md gives the redlockd user: the commands the service
 * sends and its scripts call, on its own keys and channels (the default prefix). */
#define LOCKER_ACL                                                                         \
    "on >" USER_PW " resetkeys ~redlock:* resetchannels &redlock:* -@all "                \
    "+evalsha +script|load +info +ping +subscribe +unsubscribe +select +config|get "      \
    "+get +set +del +pttl +pexpire +hget +hset +hdel +hgetall +hincrby +hlen +hmget "     \
    "+publish +scan +time +exists +zadd +zrem +zscore +zcard +zrange +zremrangebyscore"

/* Masters with a default-user password (so that a bare AUTH of the user's password, the
 * old behaviour, is refused) and an ACL user "locker". */
static void start_acl_cluster(void)
{
    h_set_redis_password(DEFAULT_PW);
    setenv("REDLOCK_TEST_URL_PASSWORD", DEFAULT_PW, 1); /* the cluster's own service */
    h_cluster_start(&C, 5, 0, NULL);
    unsetenv("REDLOCK_TEST_URL_PASSWORD");
    h_require_local(&C);
    for (int i = 0; i < C.n; i++) {
        char out[64];
        char cmd[600];
        snprintf(cmd, sizeof cmd, "ACL SETUSER locker %s", LOCKER_ACL);
        h_redis_cmd(&C.masters[i], out, sizeof out, cmd);
        cr_assert_str_eq(out, "OK", "ACL SETUSER on master %d", i);
    }
}

static void user_masters(char *out, size_t cap, const char *pw)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < C.n; i++)
        len += (size_t)snprintf(out + len, cap - len, "%sredis://locker:%s@127.0.0.1:%d",
                                i ? "," : "", pw, C.masters[i].port);
}

/* How many of master r's clients are authenticated as user. */
static int clients_as(h_redis *r, const char *user)
{
    char list[8192];
    h_redis_cmd(r, list, sizeof list, "CLIENT LIST");
    char needle[64];
    snprintf(needle, sizeof needle, " user=%s ", user);
    int n = 0;
    for (const char *p = list; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

static long watch_status;

/* A watched GET of acl.lock through S2 (answers at the release). */
static void *watch_acl_lock(void *arg)
{
    (void)arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(S2.url, &curl, "GET", "/locks/acl.lock", NULL, &r);
    char path[200];
    snprintf(path, sizeof path, "/locks/acl.lock?index=%s&wait_ms=20000", h_str(&r, "index"));
    h_resp_free(&r);
    h_http_to(S2.url, &curl, "GET", path, NULL, &r);
    watch_status = r.status;
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int subscribed_everywhere(void *arg)
{
    (void)arg;
    long long fewest, most;
    h_release_subscribers(&C, "acl.lock", &fewest, &most);
    return fewest >= 1;
}

Test(deploy, acl_user_in_the_master_url_authenticates_as_that_user)
{
    start_acl_cluster();
    static char masters[2048];
    user_masters(masters, sizeof masters, USER_PW);
    C.masters_override = masters;
    /* Ready means every master took the handshake (AUTH, SCRIPT LOAD, the record). */
    h_service_start(&C, &S2, "--log-level debug");
    C.masters_override = NULL;
    char lease[200];
    long long token = 0;
    h_resp r;
    h_http_to(S2.url, &cl, "POST", "/locks/acl.lock?ttl_ms=10000", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    token = h_int(&r, "fencing_token");
    h_resp_free(&r);
    cr_assert_gt(token, 0);
    /* The lock is on the masters, written by the user. */
    for (int i = 0; i < C.n; i++) {
        char v[256];
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:acl.lock");
        cr_assert(strncmp(v, lease, strlen(lease)) == 0, "master %d holds '%s'", i, v);
        cr_assert_geq(clients_as(&C.masters[i], "locker"), 1, "no client of master %d is user locker", i);
    }
    /* The pub/sub connections authenticate as the user too: a watch subscribes to the
     * lock's release channel on every master. */
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, watch_acl_lock, NULL), 0);
    cr_assert(h_wait_until(subscribed_everywhere, NULL, 10000),
              "the watch never subscribed on every master");
    char body[300];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    h_http_to(S2.url, &cl, "DELETE", "/locks/acl.lock", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    h_resp_free(&r);
    pthread_join(t, NULL);
    cr_assert_eq(watch_status, 200);
    /* Every other script runs with the user's permissions too: readers, a writer refused
     * by them, permits (each acquire, extend, inspect and release). */
    static const struct {
        const char *method, *path, *body;
        long status;
    } more[] = {
        {"POST", "/locks/acl.rw?mode=shared", NULL, 201},
        {"POST", "/locks/acl.rw?wait_ms=50", NULL, 409},
        {"GET", "/locks/acl.rw", NULL, 200},
        {"POST", "/semaphores/acl.sem?permits=1", NULL, 201},
        {"POST", "/semaphores/acl.sem?permits=1", NULL, 409},
        {"GET", "/semaphores/acl.sem", NULL, 200},
        {"POST", "/locks", "{\"names\":[\"acl.m1\",\"acl.rw\"],\"modes\":{\"acl.rw\":\"shared\"}}", 201},
        {"DELETE", "/locks/acl.rw?force=false", "{\"lease\":\"0123456789abcdefgh\"}", 404},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        h_http_to(S2.url, &cl, more[i].method, more[i].path, more[i].body, &r);
        cr_assert_eq(r.status, more[i].status, "%s %s: %s", more[i].method, more[i].path, r.body);
        h_resp_free(&r);
    }
    cr_assert(!h_log_contains(&S2, USER_PW), "the user's password reached the log");
    h_set_redis_password(NULL);
}

/* The port a service started by hand reports ("listening on 127.0.0.1:PORT"), 0 until then. */
static int logged_port(const char *log)
{
    FILE *f = fopen(log, "r");
    if (!f)
        return 0;
    char line[4096];
    int port = 0;
    while (!port && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "listening on 127.0.0.1:");
        if (p)
            port = atoi(p + strlen("listening on 127.0.0.1:"));
    }
    fclose(f);
    return port;
}

static pid_t spawn_logged(char *const argv[], const char *log)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

struct refused {
    h_service *s;
    const char *needle;
};

static int log_has(void *arg)
{
    struct refused *x = arg;
    return h_log_contains(x->s, x->needle);
}

static int has_port(void *arg)
{
    h_service *s = arg;
    return (s->port = logged_port(s->log)) != 0;
}

Test(deploy, acl_user_with_a_wrong_password_is_refused)
{
    start_acl_cluster();
    static char masters[2048];
    user_masters(masters, sizeof masters, WRONG_PW);
    make_dir();
    snprintf(S2.log, sizeof S2.log, "%s/wrong.log", dir);
    char *argv[] = {(char *)bin(), "--masters", masters, "--listen", "127.0.0.1:0",
                    "--log-level", "debug", NULL};
    S2.pid = spawn_logged(argv, S2.log);
    cr_assert(h_wait_until(has_port, &S2, 10000), "no port in %s", S2.log);
    snprintf(S2.url, sizeof S2.url, "http://127.0.0.1:%d", S2.port);
    struct refused x = {&S2, "WRONGPASS"};
    cr_assert(h_wait_until(log_has, &x, 10000), "no WRONGPASS refusal in %s", S2.log);
    h_resp r;
    h_http_to(S2.url, &cl, "GET", "/readyz", NULL, &r);
    cr_assert_eq(r.status, 503, "ready with a wrong password: %s", r.body);
    h_resp_free(&r);
    h_http_to(S2.url, &cl, "POST", "/locks/acl.wrong", NULL, &r);
    cr_assert_eq(r.status, 503, "granted with a wrong password: %s", r.body);
    h_resp_free(&r);
    for (int i = 0; i < C.n; i++)
        cr_assert_eq(clients_as(&C.masters[i], "locker"), 0, "master %d let the user in", i);
    cr_assert(!h_log_contains(&S2, WRONG_PW), "the password reached the log");
    h_set_redis_password(NULL);
}

Test(deploy, rediss_master_with_unreadable_tls_files_stops_the_start_saying_why)
{
    if (getenv("REDLOCK_TEST_URL"))
        cr_skip_test("starts its own process (external stack)");
    make_dir();
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "%s --masters rediss://locker:TOPSECRET@127.0.0.1:6380 --redis-tls-ca-file %s/no-ca.pem "
             "--listen 127.0.0.1:0 > %s/rediss.out 2>&1", bin(), dir, dir);
    cr_assert_eq(sh(cmd), 2, "exit status of a rediss:// master without its CA file");
    char path[300];
    snprintf(path, sizeof path, "%s/rediss.out", dir);
    h_service s = {0};
    snprintf(s.log, sizeof s.log, "%s", path);
    cr_assert(h_log_contains(&s, "TLS to masters: cannot use the CA file"), "message lacks the reason");
    cr_assert(h_log_contains(&s, "no-ca.pem"), "message lacks the file");
    cr_assert(!h_log_contains(&s, "TOPSECRET"), "message shows the password");
}

/* ---- --probe and https ---------------------------------------------------------- */

static void make_cert(void)
{
    make_dir();
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=redlockd.example "
             "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1", dir, dir);
    cr_assert_eq(sh(cmd), 0, "openssl");
}

/* `redlockd --probe ARGS` with ENV before it (may be ""); its exit status. */
static int probe(const char *env, const char *args)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "env -u REDLOCK_LISTEN -u REDLOCK_TLS_CERT -u REDLOCK_TLS_KEY %s "
             "%s --probe %s > %s/probe.out 2>&1", env, bin(), args, dir);
    return sh(cmd);
}

Test(deploy, probe_answers_for_an_https_listener)
{
    make_cert();
    char flags[600];
    snprintf(flags, sizeof flags, "--tls-cert %s/cert.pem --tls-key %s/key.pem", dir, dir);
    h_cluster_start(&C, 3, 0, flags);
    h_require_local(&C);
    cr_assert(strncmp(C.svc.url, "https://", 8) == 0);
    char args[300], env[700];
    snprintf(args, sizeof args, "https://127.0.0.1:%d/healthz", C.svc.port);
    cr_assert_eq(probe("", args), 0, "--probe %s", args);
    snprintf(args, sizeof args, "https://localhost:%d/healthz", C.svc.port); /* with SNI */
    cr_assert_eq(probe("", args), 0, "--probe %s", args);
    snprintf(args, sizeof args, "https://127.0.0.1:%d/nothing-here", C.svc.port);
    cr_assert_eq(probe("", args), 1, "a 404 is not healthy");
    snprintf(args, sizeof args, "http://127.0.0.1:%d/healthz", C.svc.port);
    cr_assert_eq(probe("", args), 1, "plain HTTP to a TLS listener is not an answer");
    /* No URL: the listener the configuration describes (the container's HEALTHCHECK). */
    snprintf(env, sizeof env, "REDLOCK_LISTEN=0.0.0.0:%d REDLOCK_TLS_CERT=%s/cert.pem "
             "REDLOCK_TLS_KEY=%s/key.pem", C.svc.port, dir, dir);
    cr_assert_eq(probe(env, ""), 0, "--probe from the environment");
    snprintf(env, sizeof env, "REDLOCK_TLS_CERT=%s/cert.pem REDLOCK_TLS_KEY=%s/key.pem", dir, dir);
    snprintf(args, sizeof args, "--listen 127.0.0.1:%d", C.svc.port);
    cr_assert_eq(probe(env, args), 0, "--probe --listen");
    snprintf(env, sizeof env, "REDLOCK_LISTEN=127.0.0.1:%d", C.svc.port);
    cr_assert_eq(probe(env, ""), 1, "a TLS listener probed as plain HTTP");
}

Test(deploy, probe_answers_for_a_plain_listener_and_refuses_other_schemes)
{
    h_cluster_start(&C, 3, 0, NULL);
    h_require_local(&C);
    make_dir();
    char args[300], env[300];
    snprintf(args, sizeof args, "http://127.0.0.1:%d/healthz", C.svc.port);
    cr_assert_eq(probe("", args), 0);
    snprintf(args, sizeof args, "https://127.0.0.1:%d/healthz", C.svc.port);
    cr_assert_eq(probe("", args), 1, "TLS to a plain listener");
    snprintf(env, sizeof env, "REDLOCK_LISTEN=127.0.0.1:%d", C.svc.port);
    cr_assert_eq(probe(env, ""), 0, "--probe from the environment");
    cr_assert_eq(probe("", "ftp://127.0.0.1/"), 2);
    cr_assert_eq(probe("REDLOCK_LISTEN=127.0.0.1:0", ""), 2, "port 0 cannot be probed");
}

/* A standard Debian /etc/hosts maps localhost to ::1 as well as 127.0.0.1, and getaddrinfo
 * answers ::1 first; the service listens on 127.0.0.1 only.  The probe must try the next
 * address, as curl does.  The hosts file is swapped in a private mount namespace (root
 * only: skipped otherwise). */
Test(deploy, probe_tries_every_address_of_the_name)
{
    make_dir();
    if (sh("unshare -m true > /dev/null 2>&1") != 0)
        cr_skip_test("needs unshare -m (root) to give the probe a hosts file with ::1 first");
    h_cluster_start(&C, 3, 0, NULL);
    h_require_local(&C);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "printf '::1\\tlocalhost\\n127.0.0.1\\tlocalhost\\n' > %s/hosts", dir);
    cr_assert_eq(sh(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "unshare -m sh -c 'mount --bind %s/hosts /etc/hosts && getent ahosts localhost | head -1 "
             "| grep -q ^::1 && env -u REDLOCK_LISTEN %s --probe http://localhost:%d/healthz' "
             "> %s/probe.out 2>&1", dir, bin(), C.svc.port, dir);
    cr_assert_eq(sh(cmd), 0, "--probe http://localhost:%d/healthz with ::1 first (see %s/probe.out)",
                 C.svc.port, dir);
}

/* ---- exit status of an address in use ------------------------------------------ */

Test(deploy, listen_address_in_use_exits_3)
{
    if (getenv("REDLOCK_TEST_URL"))
        cr_skip_test("starts its own process (external stack)");
    make_dir();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
    socklen_t al = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s --masters 127.0.0.1:1 --listen 127.0.0.1:%d > %s/inuse.out 2>&1",
             bin(), ntohs(a.sin_port), dir);
    int rc = sh(cmd);
    close(fd);
    cr_assert_eq(rc, 3, "exit status %d for an address in use", rc);
    h_service s = {0};
    snprintf(s.log, sizeof s.log, "%s/inuse.out", dir);
    cr_assert(h_log_contains(&s, "in use"), "the log does not say the address is in use");
    /* Any other failure to listen stays 1 (an address this host does not have). */
    snprintf(cmd, sizeof cmd, "%s --masters 127.0.0.1:1 --listen 192.0.2.1:8080 > %s/noaddr.out 2>&1",
             bin(), dir);
    cr_assert_eq(sh(cmd), 1);
}
