/* harness.c -- integration-test fixtures (see harness.h). */
#include "harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

int h_wait_until(int (*cond)(void *), void *arg, int timeout_ms)
{
    double end = h_now_ms() + timeout_ms;
    for (;;) {
        if (cond(arg))
            return 1;
        if (h_now_ms() > end)
            return 0;
        usleep(5000);
    }
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    cr_assert(fd >= 0);
    cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    cr_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* clock_file: for a redis-server, the file that moves its wall clock (tests/clock: its
 * LD_PRELOAD library, when REDLOCK_TEST_CLOCKSHIM names it); NULL for others. */
static pid_t spawn(char *const argv[], const char *log_path, const char *clock_file)
{
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        const char *shim = getenv("REDLOCK_TEST_CLOCKSHIM");
        if (clock_file && shim && access(shim, R_OK) == 0) {
            setenv("LD_PRELOAD", shim, 1);
            setenv("CLOCKSHIM_FILE", clock_file, 1);
        }
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
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

static const char *redis_password;

void h_set_redis_password(const char *pw) { redis_password = pw; }

int h_redis_is(int port, pid_t pid, const char *password)
{
    struct timeval tv = {0, 200000};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (rc && !rc->err) {
        redisSetTimeout(rc, tv);
        if (password) {
            redisReply *a = redisCommand(rc, "AUTH %s", password);
            if (a)
                freeReplyObject(a);
        }
        /* PING first: it answers -LOADING while the server loads its AOF (INFO does
         * not wait for that) */
        redisReply *r = redisCommand(rc, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        r = ok ? redisCommand(rc, "INFO server") : NULL;
        ok = 0;
        if (r && r->type == REDIS_REPLY_STRING) {
            const char *p = strstr(r->str, "\nprocess_id:");
            ok = p && atol(p + strlen("\nprocess_id:")) == (long)pid;
        }
        if (r)
            freeReplyObject(r);
    }
    if (rc)
        redisFree(rc);
    return ok;
}

static int redis_launch(h_redis *r)
{
    char port[16], log[300];
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    char *argv[] = {"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", r->appendonly ? "yes" : "no", "--appendfsync",
                    r->appendfsync ? (char *)r->appendfsync : "always",
                    "--dir", r->dir, "--daemonize", "no", "--protected-mode", "no",
                    "--maxmemory-policy", "noeviction", NULL, NULL, NULL};
    if (redis_password) {
        argv[19] = "--requirepass";
        argv[20] = (char *)redis_password;
    }
    char clock[300];
    snprintf(clock, sizeof clock, "%s/clock", r->dir);
    r->pid = spawn(argv, log, clock);
    double end = h_now_ms() + 10000;
    while (h_now_ms() < end) {
        if (h_redis_is(r->port, r->pid, redis_password))
            return 0;
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1; /* port taken? */
        }
        usleep(5000);
    }
    return -1;
}

static void redis_start(h_cluster *c, int i, int appendonly)
{
    h_redis *r = &c->masters[i];
    snprintf(r->dir, sizeof r->dir, "%s/m%d", c->tmp, i);
    mkdir(r->dir, 0755);
    r->appendonly = appendonly;
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = free_port();
        if (redis_launch(r) == 0)
            return;
    }
    cr_assert_fail("cannot start redis-server for master %d", i);
}

void h_redis_freeze(h_redis *r) { kill(r->pid, SIGSTOP); }
void h_redis_thaw(h_redis *r) { kill(r->pid, SIGCONT); }

void h_redis_kill(h_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = 0;
}

void h_redis_restart(h_redis *r, int empty)
{
    if (empty) {
        char cmd[800];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'/appendonlydir '%s'/*.rdb '%s'/*.aof", r->dir, r->dir, r->dir);
        cr_assert(system(cmd) == 0);
    }
    for (int attempt = 0; attempt < 20; attempt++) {
        if (redis_launch(r) == 0)
            return;
        usleep(50000); /* the old socket may linger an instant */
    }
    cr_assert_fail("cannot restart redis-server on port %d", r->port);
}

int h_redis_clock_file(h_redis *r, char *out, size_t cap)
{
    const char *shim = getenv("REDLOCK_TEST_CLOCKSHIM");
    if (!shim || access(shim, R_OK) != 0)
        return 0;
    snprintf(out, cap, "%s/clock", r->dir);
    return 1;
}

/* The incr file of the master's multi-part AOF (Redis 7: appendonlydir/ *.incr.aof). */
static int aof_incr_path(h_redis *r, char *out, size_t outlen)
{
    char d[300];
    snprintf(d, sizeof d, "%s/appendonlydir", r->dir);
    DIR *dir = opendir(d);
    if (!dir)
        return -1;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n > 9 && strcmp(e->d_name + n - 9, ".incr.aof") == 0) {
            cr_assert(!found, "more than one incr file in %s", d);
            snprintf(out, outlen, "%s/%s", d, e->d_name);
            found = 1;
        }
    }
    closedir(dir);
    return found ? 0 : -1;
}

long long h_redis_aof_size(h_redis *r)
{
    char path[600];
    struct stat st;
    if (aof_incr_path(r, path, sizeof path) != 0 || stat(path, &st) != 0)
        return -1;
    return (long long)st.st_size;
}

void h_redis_aof_truncate(h_redis *r, long long size)
{
    char path[600];
    cr_assert(r->pid <= 0, "truncate the AOF of a master that is not running");
    cr_assert(aof_incr_path(r, path, sizeof path) == 0, "no AOF incr file in %s", r->dir);
    cr_assert(truncate(path, (off_t)size) == 0, "truncate %s: %s", path, strerror(errno));
}

/* A connection to master r (authenticated if masters need a password). */
static redisContext *redis_connect(h_redis *r)
{
    struct timeval tv = {2, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    cr_assert(rc && !rc->err, "connect to master %d", r->port);
    if (redis_password) {
        redisReply *a = redisCommand(rc, "AUTH %s", redis_password);
        if (a)
            freeReplyObject(a);
    }
    return rc;
}

long long h_redis_cmd(h_redis *r, char *out, size_t outlen, const char *fmt, ...)
{
    redisContext *rc = redis_connect(r);
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(rc, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (out && outlen)
        out[0] = '\0';
    if (rep) {
        if (rep->type == REDIS_REPLY_INTEGER)
            v = rep->integer;
        else if ((rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) && out)
            snprintf(out, outlen, "%s", rep->str);
        freeReplyObject(rep);
    }
    redisFree(rc);
    return v;
}

long long h_redis_numsub(h_redis *r, const char *channel)
{
    redisContext *rc = redis_connect(r);
    redisReply *rep = redisCommand(rc, "PUBSUB NUMSUB %s", channel);
    long long n = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep)
        freeReplyObject(rep);
    redisFree(rc);
    return n;
}

void h_release_subscribers(h_cluster *c, const char *name, long long *fewest, long long *most)
{
    char chan[400];
    snprintf(chan, sizeof chan, "redlock:#released:%s", name);
    *fewest = -1;
    *most = -1;
    for (int i = 0; i < c->n; i++) {
        long long n = h_redis_numsub(&c->masters[i], chan);
        if (*fewest < 0 || n < *fewest)
            *fewest = n;
        if (n > *most)
            *most = n;
    }
}

static int log_port(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int port = 0;
    while (!port && fgets(line, sizeof line, f)) {
        /* {"msg":"listening on 127.0.0.1:PORT",...} */
        char *p = strstr(line, "listening on ");
        if (!p)
            continue;
        char *q = strchr(p, '"');
        if (!q)
            continue;
        *q = '\0';
        char *colon = strrchr(p, ':');
        if (colon)
            port = atoi(colon + 1);
    }
    fclose(f);
    return port;
}

/* Ready, and every master in quorums: tests start from a whole cluster. */
static int svc_ready(void *arg)
{
    h_service *s = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(s->url, &curl, "GET", "/readyz", NULL, &r);
    curl_easy_cleanup(curl);
    int all = r.status == 200;
    json_t *ms = json_object_get(r.json, "masters");
    for (size_t i = 0; all && i < json_array_size(ms); i++)
        all = json_is_true(json_object_get(json_array_get(ms, i), "ok"));
    h_resp_free(&r);
    return all;
}

/* Ready: /readyz answers 200, a quorum of masters in quorums. */
static int svc_quorum(void *arg)
{
    h_service *s = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(s->url, &curl, "GET", "/readyz", NULL, &r);
    curl_easy_cleanup(curl);
    h_resp_free(&r);
    return r.status == 200;
}

static void service_start(h_cluster *c, h_service *s, const char *extra, int (*ready)(void *));

void h_service_start(h_cluster *c, h_service *s, const char *extra)
{
    service_start(c, s, extra, svc_ready);
}

void h_service_start_quorum(h_cluster *c, h_service *s, const char *extra)
{
    service_start(c, s, extra, svc_quorum);
}

static int svc_listening(void *arg)
{
    (void)arg;
    return 1;
}

void h_service_start_nowait(h_cluster *c, h_service *s, const char *extra)
{
    service_start(c, s, extra, svc_listening);
}

int h_node_timeout_ms(void)
{
    const char *nt = getenv("REDLOCK_TEST_NODE_TIMEOUT_MS"); /* e.g. longer under valgrind */
    return nt && atoi(nt) > 0 ? atoi(nt) : 1000;
}

static void service_start(h_cluster *c, h_service *s, const char *extra, int (*ready)(void *))
{
    static int seq;
    char masters[1024] = "";
    const char *pw = getenv("REDLOCK_TEST_URL_PASSWORD");
    for (int i = 0; i < c->n; i++) {
        char one[160];
        if (pw)
            snprintf(one, sizeof one, "%sredis://:%s@127.0.0.1:%d", i ? "," : "", pw, c->masters[i].port);
        else
            snprintf(one, sizeof one, "%s127.0.0.1:%d", i ? "," : "", c->masters[i].port);
        strcat(masters, one);
    }
    snprintf(s->log, sizeof s->log, "%s/redlockd-%d.log", c->tmp, seq++);
    const char *bin = getenv("REDLOCKD_BIN");
    if (!bin)
        bin = "bin/redlockd";
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)bin;
    argv[n++] = "--masters";
    argv[n++] = c->masters_override ? (char *)c->masters_override : masters;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    char extra_copy[1024] = "";
    /* Functional tests run on busy 2-core machines: unless a test sets its own, give
     * masters a node timeout that a descheduled redis-server, or a descheduled service,
     * does not miss.  250 ms was missed there (load ~20: rounds of 252 to 314 ms, a
     * reply read after the deadline counts as none, docs/DESIGN.md §4 R-late), and a
     * test not about faults then saw a 503 quorum_unavailable; the tests that time a
     * round against the node timeout pass their own --node-timeout-ms. */
    char ntflag[64];
    snprintf(ntflag, sizeof ntflag, " --node-timeout-ms %d", h_node_timeout_ms());
    snprintf(extra_copy, sizeof extra_copy, "%s%s", extra ? extra : "",
             extra && strstr(extra, "--node-timeout-ms") ? "" : ntflag);
    {
        for (char *tok = strtok(extra_copy, " "); tok && n < 62; tok = strtok(NULL, " "))
            argv[n++] = tok;
    }
    argv[n] = NULL;
    s->pid = spawn(argv, s->log, NULL);
    double end = h_now_ms() + 10000;
    while (!(s->port = log_port(s->log))) {
        int st;
        cr_assert(waitpid(s->pid, &st, WNOHANG) == 0, "redlockd exited at start (see %s)", s->log);
        cr_assert(h_now_ms() < end, "redlockd did not report its port (see %s)", s->log);
        usleep(5000);
    }
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", extra && strstr(extra, "--tls-cert") ? "https" : "http",
             s->port);
    cr_assert(h_wait_until(ready, s, 10000), "redlockd never became ready (see %s)", s->log);
}

void h_service_stop(h_service *s)
{
    if (s->pid > 0 && getenv("REDLOCK_TEST_GRACEFUL")) {
        /* Under valgrind: a clean exit, whose status carries the leak verdict. */
        int rc = h_service_term(s, 60000);
        if (rc != 0) {
            /* Criterion ignores a failed assertion in a suite's .fini, where the
             * default service of every test stops: a crash it does count. */
            fprintf(stderr, "redlockd exited with %d on SIGTERM (see %s)\n", rc, s->log);
            fflush(stderr);
            abort();
        }
    }
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

int h_service_term(h_service *s, int timeout_ms)
{
    kill(s->pid, SIGTERM);
    double end = h_now_ms() + timeout_ms;
    int st;
    while (h_now_ms() < end) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(5000);
    }
    return -1;
}

void h_tmpdir(char *out, size_t cap, const char *stem)
{
    const char *base = getenv("REDLOCK_TEST_TMPDIR");
    snprintf(out, cap, "%s/%s-XXXXXX", base && *base ? base : "/tmp", stem);
    cr_assert(mkdtemp(out), "mkdtemp %s: %s", out, strerror(errno));
}

int h_open_fds(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

void h_require_local(h_cluster *c)
{
    if (c->external)
        cr_skip_test("needs local processes (external stack)");
}

void h_cluster_start(h_cluster *c, int n, int appendonly, const char *extra)
{
    memset(c, 0, sizeof *c);
    const char *url = getenv("REDLOCK_TEST_URL");
    if (url && *url) {
        c->external = 1;
        snprintf(c->svc.url, sizeof c->svc.url, "%s", url);
        const char *ms = getenv("REDLOCK_TEST_MASTERS");
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", ms ? ms : "");
        for (char *tok = strtok(buf, ","); tok && c->n < H_MAX_MASTERS; tok = strtok(NULL, ",")) {
            char *colon = strrchr(tok, ':');
            c->masters[c->n++].port = colon ? atoi(colon + 1) : 6379;
        }
        if (n != 5 || extra || appendonly)
            cr_skip_test("needs its own masters or flags (external stack)");
        return;
    }
    h_tmpdir(c->tmp, sizeof c->tmp, "redlockd-test");
    c->n = n;
    for (int i = 0; i < n; i++)
        redis_start(c, i, appendonly);
    h_service_start(c, &c->svc, extra);
}

void h_cluster_stop(h_cluster *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    c->curl = NULL;
    if (c->external)
        return;
    h_service_stop(&c->svc);
    for (int i = 0; i < c->n; i++) {
        if (c->masters[i].pid > 0) {
            kill(c->masters[i].pid, SIGCONT);
            h_redis_kill(&c->masters[i]);
        }
    }
    if (c->tmp[0] && !getenv("REDLOCK_TEST_KEEP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->tmp);
        if (system(cmd) != 0) {
            /* best effort */
        }
    }
}

/* ---- HTTP ---- */

struct sink {
    h_resp *r;
    size_t len;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t k = sz * n;
    size_t room = sizeof s->r->body - 1 - s->len;
    size_t take = k < room ? k : room;
    memcpy(s->r->body + s->len, p, take);
    s->len += take;
    s->r->body[s->len] = '\0';
    return k;
}

static void header_value(const char *line, size_t n, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    if (n > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
        const char *v = line + nl + 1;
        while (*v == ' ')
            v++;
        size_t vl = (size_t)(line + n - v);
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
            vl--;
        if (vl >= outlen)
            vl = outlen - 1;
        memcpy(out, v, vl);
        out[vl] = '\0';
    }
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
    h_resp *r = arg;
    size_t k = sz * n;
    header_value(p, k, "Retry-After", r->retry_after, sizeof r->retry_after);
    header_value(p, k, "Allow", r->allow, sizeof r->allow);
    header_value(p, k, "X-Request-Id", r->request_id, sizeof r->request_id);
    header_value(p, k, "Content-Type", r->content_type, sizeof r->content_type);
    header_value(p, k, "WWW-Authenticate", r->www_auth, sizeof r->www_auth);
    header_value(p, k, "Location", r->location, sizeof r->location);
    return k;
}

static void record(const char *method, const char *path, const h_resp *r)
{
    const char *file = getenv("REDLOCK_TEST_RECORD");
    if (!file || !*file || !r->status)
        return;
    json_t *line = json_object();
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    p[strcspn(p, "?")] = '\0';
    json_object_set_new(line, "method", json_string(method));
    json_object_set_new(line, "path", json_string(p));
    json_object_set_new(line, "status", json_integer(r->status));
    json_t *h = json_object();
    if (r->content_type[0])
        json_object_set_new(h, "content-type", json_string(r->content_type));
    if (r->retry_after[0])
        json_object_set_new(h, "retry-after", json_string(r->retry_after));
    if (r->allow[0])
        json_object_set_new(h, "allow", json_string(r->allow));
    if (r->request_id[0])
        json_object_set_new(h, "x-request-id", json_string(r->request_id));
    if (r->www_auth[0])
        json_object_set_new(h, "www-authenticate", json_string(r->www_auth));
    if (r->location[0])
        json_object_set_new(h, "location", json_string(r->location));
    json_object_set_new(line, "headers", h);
    json_object_set_new(line, "body", r->json ? json_incref(r->json) : json_string(r->body));
    char *s = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    if (!s)
        return;
    int fd = open(file, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        size_t len = strlen(s);
        s[len] = '\n';
        if (write(fd, s, len + 1) < 0) {
            /* recording is best effort */
        }
        close(fd);
    }
    free(s);
}

void h_http_to(const char *base, void **curlp, const char *method, const char *path,
               const char *body, h_resp *out)
{
    memset(out, 0, sizeof *out);
    if (!*curlp)
        *curlp = curl_easy_init();
    CURL *curl = *curlp;
    cr_assert(curl);
    curl_easy_reset(curl);
    char url[1024];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct sink s = {out, 0};
    struct curl_slist *hdrs = NULL;
    hdrs = curl_slist_append(hdrs, "Expect:");
    if (body)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L); /* tests use a self-signed cert */
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
    const char *auth = getenv("REDLOCK_TEST_TOKEN");
    if (auth && *auth) {
        static char hdr[300];
        /* A value with a space is the whole header value (scheme and token). */
        snprintf(hdr, sizeof hdr, "Authorization: %s%s", strchr(auth, ' ') ? "" : "Bearer ", auth);
        hdrs = curl_slist_append(hdrs, hdr);
    }
    if (body) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    double t0 = h_now_ms();
    CURLcode rc = curl_easy_perform(curl);
    out->ms = h_now_ms() - t0;
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        out->status = 0;
        snprintf(out->body, sizeof out->body, "curl: %s", curl_easy_strerror(rc));
        return;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
    json_error_t e;
    out->json = json_loads(out->body, 0, &e);
    record(method, path, out);
}

long long h_metric(const char *base, void **curl, const char *metric)
{
    h_resp r;
    h_http_to(base, curl, "GET", "/metrics", NULL, &r);
    char key[160];
    snprintf(key, sizeof key, "\n%s ", metric);
    const char *p = strstr(r.body, key);
    long long v = p ? strtoll(p + strlen(key), NULL, 10) : -1;
    h_resp_free(&r);
    return v;
}

unsigned long long h_replies_read(const char *base, void **curl)
{
    h_resp r;
    h_http_to(base, curl, "GET", "/metrics", NULL, &r);
    unsigned long long n = 0;
    const char *key = "redlockd_master_rtt_seconds_count{";
    for (const char *p = strstr(r.body, key); p; p = strstr(p + 1, key)) {
        const char *v = strchr(p, '}');
        if (v)
            n += strtoull(v + 1, NULL, 10);
    }
    h_resp_free(&r);
    return n;
}

void h_waiter_settle(const char *base, void **curl, long long wakeups0, unsigned long long replies0)
{
    double end = h_now_ms() + 5000;
    while (h_metric(base, curl, "redlockd_waiter_wakeups_total") < wakeups0 + 1)
        if (h_now_ms() > end)
            return; /* no wake (a name already followed): no attempt after it */
        else
            usleep(5000);
    /* its first attempt's 5 replies and 5 of the one after the wake, less the 2 that
     * may be late of each decided round before (the holder's, or the first attempt's) */
    end = h_now_ms() + 3000;
    while (h_replies_read(base, curl) < replies0 + 10 - 2 && h_now_ms() < end)
        usleep(5000);
}

void h_http(h_cluster *c, const char *method, const char *path, const char *body, h_resp *out)
{
    h_http_to(c->svc.url, &c->curl, method, path, body, out);
}

long h_call(h_cluster *c, const char *method, const char *path, const char *body, h_resp *out)
{
    h_resp r;
    h_http(c, method, path, body, &r);
    long st = r.status;
    if (out)
        *out = r;
    else
        h_resp_free(&r);
    return st;
}

void h_resp_free(h_resp *r)
{
    if (r->json)
        json_decref(r->json);
    r->json = NULL;
}

long long h_int(const h_resp *r, const char *key)
{
    json_t *v = r->json ? json_object_get(r->json, key) : NULL;
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

const char *h_str(const h_resp *r, const char *key)
{
    json_t *v = r->json ? json_object_get(r->json, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : "";
}

long h_acquire(h_cluster *c, const char *name, const char *query, char *lease, size_t leaselen,
               long long *token)
{
    char path[512];
    snprintf(path, sizeof path, "/locks/%s%s%s", name, query ? "?" : "", query ? query : "");
    h_resp r;
    h_http(c, "POST", path, NULL, &r);
    if (r.status == 201) {
        if (lease)
            snprintf(lease, leaselen, "%s", h_str(&r, "lease"));
        if (token)
            *token = h_int(&r, "fencing_token");
    }
    h_resp_free(&r);
    return r.status;
}

long h_release(h_cluster *c, const char *name, const char *lease)
{
    char path[512];
    snprintf(path, sizeof path, "/locks/%s?lease=%s", name, lease);
    h_resp r;
    h_http(c, "DELETE", path, NULL, &r);
    h_resp_free(&r);
    return r.status;
}


/* ---- /readyz per master ---- */

int h_master_state(h_cluster *c, h_service *svc, int i, char *state, size_t statelen,
                   long long *remaining)
{
    /* The default service through the cluster's keep-alive connection: one worker
     * thread answers every call, so successive calls see one consistent view. */
    void *curl = NULL;
    h_resp r;
    if (!svc || svc == &c->svc)
        h_http(c, "GET", "/readyz", NULL, &r);
    else
        h_http_to(svc->url, &curl, "GET", "/readyz", NULL, &r);
    if (curl)
        curl_easy_cleanup(curl);
    if (state && statelen)
        state[0] = '\0';
    if (remaining)
        *remaining = -1;
    json_t *m = json_array_get(json_object_get(r.json, "masters"), (size_t)i);
    int ok = -1;
    if (m) {
        ok = json_is_true(json_object_get(m, "ok"));
        json_t *st = json_object_get(m, "state");
        if (state && statelen && json_is_string(st))
            snprintf(state, statelen, "%s", json_string_value(st));
        json_t *q = json_object_get(m, "quarantine_remaining_ms");
        if (remaining && json_is_integer(q))
            *remaining = json_integer_value(q);
    }
    h_resp_free(&r);
    return ok;
}

/* ---- delaying TCP proxy ---- */

struct pchunk {
    struct pchunk *next;
    double due;
    size_t len, off;
    int eof; /* the sending side closed: shut the other side down once it is sent */
    char data[];
};

struct pconn {
    struct pconn *next;
    int fd[2];                      /* 0 the accepted client, 1 the upstream */
    struct pchunk *head[2], *tail[2]; /* q[s]: read from side s, to write to 1-s */
    int rd_eof[2];
    int wr_shut[2];                 /* side s was shut down for writing */
    int dead;
};

struct h_proxy {
    int lfd, port, upstream;
    int wake[2];
    pthread_t th;
    int delay_ms; /* atomic */
    int queued;   /* atomic */
    int stop;     /* atomic */
    struct pconn *conns;
};

static void pconn_free(h_proxy *p, struct pconn *k)
{
    for (int s = 0; s < 2; s++) {
        if (k->fd[s] >= 0)
            close(k->fd[s]);
        while (k->head[s]) {
            struct pchunk *c = k->head[s];
            k->head[s] = c->next;
            if (!c->eof)
                __atomic_sub_fetch(&p->queued, 1, __ATOMIC_RELAXED);
            free(c);
        }
    }
    free(k);
}

static void pconn_push(h_proxy *p, struct pconn *k, int s, const char *buf, size_t n, int eof)
{
    struct pchunk *c = malloc(sizeof *c + n);
    if (!c) {
        k->dead = 1;
        return;
    }
    c->next = NULL;
    c->due = h_now_ms() + __atomic_load_n(&p->delay_ms, __ATOMIC_RELAXED);
    c->len = n;
    c->off = 0;
    c->eof = eof;
    memcpy(c->data, buf, n);
    if (k->tail[s])
        k->tail[s]->next = c;
    else
        k->head[s] = c;
    k->tail[s] = c;
    if (!eof)
        __atomic_add_fetch(&p->queued, 1, __ATOMIC_RELAXED);
}

/* Write what is due from q[s] to side 1-s.  Returns the ms until the next chunk is
 * due (-1: nothing queued, 0: blocked on the socket). */
static double pconn_flush(h_proxy *p, struct pconn *k, int s, int *blocked)
{
    *blocked = 0;
    while (k->head[s]) {
        struct pchunk *c = k->head[s];
        double now = h_now_ms();
        if (c->due > now)
            return c->due - now;
        if (c->eof) {
            shutdown(k->fd[1 - s], SHUT_WR);
            k->wr_shut[1 - s] = 1;
        } else {
            while (c->off < c->len) {
                ssize_t w = send(k->fd[1 - s], c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    *blocked = 1;
                    return 0;
                }
                if (w <= 0) {
                    k->dead = 1;
                    return -1;
                }
                c->off += (size_t)w;
            }
            __atomic_sub_fetch(&p->queued, 1, __ATOMIC_RELAXED);
        }
        k->head[s] = c->next;
        if (!k->head[s])
            k->tail[s] = NULL;
        free(c);
    }
    return -1;
}

static void proxy_accept(h_proxy *p)
{
    int cfd = accept(p->lfd, NULL, NULL);
    if (cfd < 0)
        return;
    int ufd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->upstream),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (ufd < 0 || connect(ufd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(cfd);
        if (ufd >= 0)
            close(ufd);
        return;
    }
    struct pconn *k = calloc(1, sizeof *k);
    if (!k) {
        close(cfd);
        close(ufd);
        return;
    }
    k->fd[0] = cfd;
    k->fd[1] = ufd;
    int one = 1;
    for (int s = 0; s < 2; s++) {
        fcntl(k->fd[s], F_SETFL, fcntl(k->fd[s], F_GETFL) | O_NONBLOCK);
        setsockopt(k->fd[s], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    k->next = p->conns;
    p->conns = k;
}

static void *proxy_main(void *arg)
{
    h_proxy *p = arg;
    struct pollfd *pfd = NULL;
    struct pconn **owner = NULL;
    int *side = NULL;
    size_t cap = 0;
    char buf[65536];
    while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
        /* Pass on what is due; drop finished connections. */
        double next = 100;
        size_t nconn = 0;
        for (struct pconn **pp = &p->conns; *pp;) {
            struct pconn *k = *pp;
            for (int s = 0; s < 2 && !k->dead; s++) {
                int blocked;
                double d = pconn_flush(p, k, s, &blocked);
                if (d > 0 && d < next)
                    next = d;
            }
            int done = k->rd_eof[0] && k->rd_eof[1] && !k->head[0] && !k->head[1];
            if (k->dead || done) {
                *pp = k->next;
                pconn_free(p, k);
                continue;
            }
            nconn++;
            pp = &k->next;
        }
        size_t need = 2 + 2 * nconn;
        if (need > cap) {
            cap = need * 2;
            pfd = realloc(pfd, cap * sizeof *pfd);
            owner = realloc(owner, cap * sizeof *owner);
            side = realloc(side, cap * sizeof *side);
            if (!pfd || !owner || !side)
                break;
        }
        size_t n = 0;
        pfd[n++] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        for (struct pconn *k = p->conns; k; k = k->next)
            for (int s = 0; s < 2; s++) {
                short ev = 0;
                if (!k->rd_eof[s])
                    ev |= POLLIN;
                if (k->head[1 - s] && k->head[1 - s]->due <= h_now_ms())
                    ev |= POLLOUT; /* due but blocked: wait for room */
                owner[n] = k;
                side[n] = s;
                /* Nothing wanted (closed for reading, nothing due): leave it out, or a
                 * hung-up socket would wake poll at once, over and over. */
                pfd[n++] = (struct pollfd){.fd = ev ? k->fd[s] : -1, .events = ev};
            }
        int timeout = (int)next + 1;
        if (poll(pfd, n, timeout) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN) {
            char x[16];
            if (read(p->wake[0], x, sizeof x) < 0) {
                /* a wake-up only */
            }
        }
        if (pfd[1].revents & POLLIN)
            proxy_accept(p); /* p->conns grew at its head: owner[] entries stay valid */
        for (size_t i = 2; i < n; i++) {
            struct pconn *k = owner[i];
            int s = side[i];
            if (k->dead || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) || k->rd_eof[s])
                continue;
            ssize_t r = recv(k->fd[s], buf, sizeof buf, 0);
            if (r > 0) {
                pconn_push(p, k, s, buf, (size_t)r, 0);
            } else if (r == 0) {
                k->rd_eof[s] = 1;
                pconn_push(p, k, s, "", 0, 1);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                k->dead = 1; /* reset: no delay for a broken connection */
            }
        }
    }
    free(pfd);
    free(owner);
    free(side);
    return NULL;
}

h_proxy *h_proxy_start(int upstream_port)
{
    h_proxy *p = calloc(1, sizeof *p);
    cr_assert(p);
    p->upstream = upstream_port;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(p->lfd >= 0);
    int one = 1;
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    cr_assert(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    cr_assert(listen(p->lfd, 64) == 0);
    cr_assert(getsockname(p->lfd, (struct sockaddr *)&sa, &sl) == 0);
    p->port = ntohs(sa.sin_port);
    cr_assert(pipe(p->wake) == 0);
    fcntl(p->wake[0], F_SETFL, O_NONBLOCK);
    cr_assert(pthread_create(&p->th, NULL, proxy_main, p) == 0);
    return p;
}

int h_proxy_port(const h_proxy *p) { return p->port; }

void h_proxy_set_delay(h_proxy *p, int delay_ms)
{
    __atomic_store_n(&p->delay_ms, delay_ms, __ATOMIC_RELAXED);
    if (write(p->wake[1], "x", 1) < 0) {
        /* the loop looks again within 100 ms anyway */
    }
}

int h_proxy_queued(const h_proxy *p) { return __atomic_load_n(&p->queued, __ATOMIC_RELAXED); }

void h_proxy_stop(h_proxy *p)
{
    if (!p)
        return;
    __atomic_store_n(&p->stop, 1, __ATOMIC_RELAXED);
    if (write(p->wake[1], "x", 1) < 0) {
    }
    pthread_join(p->th, NULL);
    while (p->conns) {
        struct pconn *k = p->conns;
        p->conns = k->next;
        pconn_free(p, k);
    }
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
    free(p);
}

void h_align_wall_clock(int from_ms, int to_ms)
{
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ms = ts.tv_nsec / 1000000;
        if (ms >= from_ms && ms < to_ms)
            return;
        usleep(2000);
    }
}

int h_log_contains(const h_service *s, const char *needle)
{
    FILE *f = fopen(s->log, "r");
    cr_assert(f, "cannot read %s", s->log);
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}


long long h_least_pttl(h_cluster *c, const char *key)
{
    long long least = INT64_MAX;
    for (int i = 0; i < c->n; i++) {
        long long p = h_redis_cmd(&c->masters[i], NULL, 0, "PTTL %s", key);
        if (p < least)
            least = p;
    }
    return least;
}
