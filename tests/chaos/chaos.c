/* chaos.c -- the redlockd safety checker: five real redis-server masters behind a fault
 * proxy, the real service, concurrent clients on a few hot names and a fault injector
 * (freeze, kill+restart with or without data, kill+restart with the last writes cut off
 * the AOF, FLUSHALL, slow, drop, cut); then one verdict line per property (judge.h) and
 * exit status 0 only if every property held.
 *
 * Exit status: 0 all held, 1 a property failed, 2 bad usage, 3 the harness itself failed
 * (a master or the proxy would not start); the run directory is kept unless all held. */
#include "http.h"
#include "judge.h"
#include "procs.h"
#include "schedstat.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#define N_MASTERS 5
#define QUORUM (N_MASTERS / 2 + 1)
#define MAX_CLIENTS 64
#define MAX_EXTRA_ARGS 16

enum fault_kind {
    F_FREEZE_MINORITY,
    F_FREEZE_MAJORITY,
    F_KILL_AOF,
    F_KILL_EMPTY,
    F_SLOW,
    F_DROP,
    F_CUT,
    F_AOF_CUT,
    F_FLUSHALL,
    F_NKINDS
};

/* What each fault does to how many masters, and for how long (ms); data_loss: the master
 * forgets acknowledged writes (lock keys and fencing counters), which only a service that
 * quarantines such masters survives (--data-loss).  aof_cut: the AOF size is recorded, then
 * 100..600 ms of traffic, then SIGKILL and the AOF is cut back to that size; min_ms..max_ms
 * is the time it then stays down.  flushall: FLUSHALL straight to the master (not through
 * the proxy), the process keeps running; min_ms..max_ms is how long the master counts as
 * impaired afterwards. */
static const struct {
    const char *name;
    int min_targets, max_targets;
    int min_ms, max_ms;
    int data_loss;
} fault_table[F_NKINDS] = {
    [F_FREEZE_MINORITY] = {"freeze_minority", 1, 2, 200, 1500, 0},
    [F_FREEZE_MAJORITY] = {"freeze_majority", 3, 3, 200, 1000, 0},
    [F_KILL_AOF] = {"kill_restart_aof", 1, 1, 50, 1000, 0},
    [F_KILL_EMPTY] = {"kill_restart_empty", 1, 1, 50, 1000, 1},
    [F_SLOW] = {"slow", 1, 3, 300, 1500, 0},
    [F_DROP] = {"drop", 1, 3, 200, 1200, 0},
    [F_CUT] = {"cut", 1, 3, 200, 1200, 0},
    [F_AOF_CUT] = {"aof_cut", 1, 2, 50, 1000, 1},
    [F_FLUSHALL] = {"flushall", 1, 2, 300, 1500, 1},
};
#define AOF_CUT_MIN_TRAFFIC_MS 100 /* traffic between recording the AOF size and the kill */
#define AOF_CUT_MAX_TRAFFIC_MS 600
#define MAX_FAULT_RECORDS 65536

enum master_state { M_UP, M_FROZEN, M_DOWN };

struct master {
    int idx;
    int port;       /* the redis-server's own port (the checker's questions) */
    int tls_port;   /* --tls: its TLS port, which the proxy relays to; 0 without */
    int proxy_port; /* the port the service talks to */
    _Atomic pid_t pid; /* read by the signal handler and the monitor */
    enum master_state state;
    int busy; /* targeted by an active fault */
    char dir[300], data[320], log[320];
    /* aof_cut: the incr AOF and its size when recorded */
    char cut_file[400];
    long long cut_size, cut_at_ms;
    /* after a restart or a wipe: still impaired (busy) until the service has it back in
     * its quorums (/readyz), and at least until recover_min; at most until recover_max */
    int recovering;
    long long recover_min, recover_max, lost_at;
};

struct active_fault {
    enum fault_kind kind;
    int targets[N_MASTERS], n;
    long long start;
    long long mid; /* aof_cut: when to kill and cut (0: no middle step) */
    int mid_done;
    long long end;
    long rec; /* index of its fault_record, -1 if none */
};

/* One injected fault, for relating violations to the faults around them. */
struct fault_record {
    enum fault_kind kind;
    long long start_ms, end_ms; /* end_ms 0 while active */
};

struct options {
    const char *service_bin;
    char proxy_bin[PATH_MAX];
    int duration_s;
    int clients;
    int shared_clients; /* more client threads taking shared locks on the same names */
    int sem_clients;    /* more client threads taking semaphore permits */
    int stream_clients; /* more client threads that hold with hold=stream (all three kinds) */
    int names;      /* hot names: every client picks among them */
    int sem_names;  /* semaphore names (the semaphore clients' and streamers') */
    int permits;    /* the first semaphore's permits; the i-th one's is permits + i */
    int cold_names; /* cold names: picked rarely, so masters can lose their state between grants */
    int node_timeout_ms;
    int margin_ms;
    int data_loss;      /* -1 auto, 0 off, 1 on: kill_restart_empty, aof_cut, flushall */
    unsigned fault_mask; /* kinds that may be dealt (--faults) */
    int faults_given;
    long retention_ms;   /* -1: 2 x max ttl if the service has --retention-ms; 0: not passed */
    uint64_t seed;
    const char *extra_args[MAX_EXTRA_ARGS];
    int n_extra;
    int keep;    /* keep the run directory even if all held */
    int discard; /* remove it even if something failed (a planted failure) */
    const char *dir_root;
    int fd_slack;
    long rss_slack_kb;
    int rss_slack_pct;
    int min_ttl, max_ttl, max_wait, max_hold;
    int warmup_ms, cooldown_ms;
    const char *scenario; /* NULL: the random run; else a directed scenario */
    int tls;              /* masters serve TLS (tls-auth-clients yes), the service uses rediss:// */
};

/* The checker's whole state: main builds it and hands it to every thread. */
struct chaos {
    struct options o;
    char redis_bin[PATH_MAX];
    char dir[256]; /* the run directory; every other path is built under it */
    struct master m[N_MASTERS];
    _Atomic pid_t proxy_pid;
    char proxy_ctl[300];
    pthread_mutex_t proxy_mu;
    _Atomic pid_t svc_pid;
    int svc_port;
    char svc_log[300];
    int quarantine_flag; /* the service has --quarantine-ms */
    int retention_flag;  /* ... --retention-ms (the issue-10 build) */
    int trust_fsync_flag; /* ... --trust-fsync-always */
    int data_loss_on;
    long quarantine_ms; /* what the service was told (or defaults to); 0 without the flag */
    char data_loss_reason[192];
    char svc_flags[256]; /* the flags the checker chose, for the report */
    unsigned svc_san;    /* CHAOS_SAN_* the service binary was built with */

    chaos_history hist; /* appended to by main only, after joining the clients */
    int64_t t0;

    atomic_int abort_run;        /* stop clients now: the service died or the harness broke */
    atomic_int injector_stop;    /* the fault phase is over: heal everything */
    atomic_int injector_healed;  /* everything healed */
    atomic_int injector_exit;    /* leave the thread (its children are gone by then) */
    long long run_end_ms;
    long fault_count[F_NKINDS];
    struct fault_record *frec; /* written by the injector (or a scenario) only */
    long n_frec;
    FILE *fault_log;
    char harness_err[512];
    pthread_mutex_t err_mu;

    pthread_mutex_t svc_mu; /* guards the four below */
    int svc_exited;
    int svc_status;
    long long svc_exit_ms;
};

/* The signal handlers need the children's pids; this is the only process-wide pointer. */
static struct chaos *g_for_signals;

/* ---- small helpers ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static long rng_range(uint64_t *s, long lo, long hi) /* inclusive */
{
    if (hi <= lo)
        return lo;
    return lo + (long)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static double rel_s(struct chaos *cx, long long ms)
{
    return (double)(ms * 1000000LL - cx->t0) / 1e9;
}

static void harness_fail(struct chaos *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void harness_fail(struct chaos *cx, const char *fmt, ...)
{
    pthread_mutex_lock(&cx->err_mu);
    if (!cx->harness_err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cx->harness_err, sizeof cx->harness_err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&cx->err_mu);
    atomic_store(&cx->abort_run, 1);
}

static void fault_logf(struct chaos *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fault_logf(struct chaos *cx, const char *fmt, ...)
{
    if (!cx->fault_log)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(cx->fault_log, "%9.3f ", rel_s(cx, now_ms()));
    vfprintf(cx->fault_log, fmt, ap);
    fputc('\n', cx->fault_log);
    fflush(cx->fault_log);
    va_end(ap);
}

static void kill_children_now(void)
{
    struct chaos *cx = g_for_signals;
    if (!cx)
        return;
    for (int i = 0; i < N_MASTERS; i++)
        if (cx->m[i].pid > 0)
            kill(cx->m[i].pid, SIGKILL);
    if (cx->proxy_pid > 0)
        kill(cx->proxy_pid, SIGKILL);
    if (cx->svc_pid > 0)
        kill(cx->svc_pid, SIGKILL);
}

static void on_fatal_signal(int sig)
{
    static const char msg[] = "chaos: interrupted or over its time budget; children killed\n";
    kill_children_now();
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(sig == SIGALRM ? 3 : 130);
}

/* ---- masters ---------------------------------------------------------------------- */

/* --tls: a CA, a certificate for 127.0.0.1 (the masters') and a client certificate (the
 * service's), made by openssl in the run directory.  0 or -1. */
static int tls_certs(struct chaos *cx)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/tls' && cd '%s/tls' && "
             "openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem && "
             "openssl req -x509 -new -key ca-key.pem -days 2 -subj /CN=chaos-ca -out ca.pem && "
             "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > server.ext && "
             "printf 'extendedKeyUsage=clientAuth\\n' > client.ext && "
             "for n in server client; do openssl ecparam -name prime256v1 -genkey -noout -out $n-key.pem && "
             "openssl req -new -key $n-key.pem -subj /CN=chaos-$n -out $n.csr && "
             "openssl x509 -req -in $n.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 "
             "-extfile $n.ext -out $n.pem || exit 1; done > openssl.log 2>&1",
             cx->dir, cx->dir);
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr, "chaos: --tls: openssl could not make the certificates (see %s/tls/openssl.log)\n", cx->dir);
        return -1;
    }
    return 0;
}

static int master_spawn(struct chaos *cx, struct master *m)
{
    char port[16], tport[16], cert[400], key[400], ca[400];
    snprintf(port, sizeof port, "%d", m->port);
    snprintf(tport, sizeof tport, "%d", m->tls_port);
    snprintf(cert, sizeof cert, "%s/tls/server.pem", cx->dir);
    snprintf(key, sizeof key, "%s/tls/server-key.pem", cx->dir);
    snprintf(ca, sizeof ca, "%s/tls/ca.pem", cx->dir);
    char *argv[] = {cx->redis_bin, "--port", port, "--bind", "127.0.0.1", "--dir", m->data,
                    "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                    "--daemonize", "no", "--protected-mode", "no", "--logfile", "",
                    /* --tls: the same process also serves TLS, to the service only */
                    "--tls-port", tport, "--tls-cert-file", cert, "--tls-key-file", key,
                    "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes", NULL};
    if (!cx->o.tls)
        argv[19] = NULL;
    if (mkdir(m->data, 0755) < 0 && errno != EEXIST)
        return -1;
    pid_t pid = proc_spawn(cx->redis_bin, argv, m->log, NULL);
    if (pid < 0)
        return -1;
    m->pid = pid;
    long long deadline = now_ms() + 10000;
    while (now_ms() < deadline) {
        if (redis_ping(m->port, 200)) {
            m->state = M_UP;
            return 0;
        }
        int st;
        if (proc_wait(pid, 0, &st) == 1) {
            m->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    proc_stop(pid, SIGKILL, 1000);
    m->pid = 0;
    return -1;
}

static int masters_start(struct chaos *cx)
{
    if (cx->o.tls && tls_certs(cx) < 0)
        return -1;
    for (int i = 0; i < N_MASTERS; i++) {
        struct master *m = &cx->m[i];
        m->idx = i;
        snprintf(m->dir, sizeof m->dir, "%s/m%d", cx->dir, i);
        snprintf(m->data, sizeof m->data, "%s/data", m->dir);
        snprintf(m->log, sizeof m->log, "%s/redis.log", m->dir);
        if (mkdir(m->dir, 0755) < 0)
            return -1;
        int ok = -1;
        for (int attempt = 0; attempt < 5 && ok < 0; attempt++) {
            m->port = net_free_port(); /* another process may take it first: retry */
            m->tls_port = cx->o.tls ? net_free_port() : 0;
            if (m->port > 0 && (!cx->o.tls || (m->tls_port > 0 && m->tls_port != m->port)))
                ok = master_spawn(cx, m);
        }
        if (ok < 0) {
            fprintf(stderr, "chaos: redis-server %d would not start; see %s\n", i, m->log);
            return -1;
        }
    }
    return 0;
}

/* ---- fault proxy ------------------------------------------------------------------ */

static int proxy_cmd(struct chaos *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int proxy_cmd(struct chaos *cx, const char *fmt, ...)
{
    char line[256], reply[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    pthread_mutex_lock(&cx->proxy_mu);
    int rc = -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    size_t len = 0;
    if (strlen(cx->proxy_ctl) >= sizeof un.sun_path)
        goto out;
    memcpy(un.sun_path, cx->proxy_ctl, strlen(cx->proxy_ctl) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof un) < 0 ||
        send(fd, line, strlen(line), MSG_NOSIGNAL) != (ssize_t)strlen(line))
        goto out;
    long long deadline = now_ms() + 3000;
    while (len < sizeof reply - 1 && !memchr(reply, '\n', len)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            goto out;
        ssize_t n = recv(fd, reply + len, sizeof reply - 1 - len, 0);
        if (n <= 0)
            goto out;
        len += (size_t)n;
    }
    reply[len] = '\0';
    rc = strncmp(reply, "ok", 2) == 0 ? 0 : -1;
out:
    if (fd >= 0)
        close(fd);
    pthread_mutex_unlock(&cx->proxy_mu);
    if (rc < 0)
        harness_fail(cx, "fault proxy did not accept '%.*s'", (int)strlen(line) - 1, line);
    return rc;
}

static int proxy_start(struct chaos *cx)
{
    char *argv[4 + 2 + N_MASTERS + 1];
    char pairs[N_MASTERS][64], maxs[16], log[300];
    int a = 0;
    snprintf(cx->proxy_ctl, sizeof cx->proxy_ctl, "%s/proxy.ctl", cx->dir);
    snprintf(log, sizeof log, "%s/proxy.log", cx->dir);
    snprintf(maxs, sizeof maxs, "%d", cx->o.duration_s + 600);
    argv[a++] = cx->o.proxy_bin;
    argv[a++] = "--ctl";
    argv[a++] = cx->proxy_ctl;
    argv[a++] = "--max-seconds";
    argv[a++] = maxs;
    for (int i = 0; i < N_MASTERS; i++) {
        snprintf(pairs[i], sizeof pairs[i], "127.0.0.1:0=127.0.0.1:%d",
                 cx->o.tls ? cx->m[i].tls_port : cx->m[i].port);
        argv[a++] = pairs[i];
    }
    argv[a] = NULL;
    int out = -1;
    pid_t pid = proc_spawn(cx->o.proxy_bin, argv, log, &out);
    if (pid < 0) {
        fprintf(stderr, "chaos: cannot start %s: %s\n", cx->o.proxy_bin, strerror(errno));
        return -1;
    }
    cx->proxy_pid = pid;
    char buf[256];
    size_t len = 0;
    long long deadline = now_ms() + 5000;
    while (len < sizeof buf - 1 && !memchr(buf, '\n', len)) {
        struct pollfd p = {.fd = out, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = read(out, buf + len, sizeof buf - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(out);
    buf[len] = '\0';
    char *p = buf;
    if (strncmp(p, "ready", 5) != 0) {
        fprintf(stderr, "chaos: fault proxy did not start; see %s\n", log);
        return -1;
    }
    p += 5;
    for (int i = 0; i < N_MASTERS; i++) {
        char *end;
        long port = strtol(p, &end, 10);
        if (end == p || port <= 0) {
            fprintf(stderr, "chaos: fault proxy said '%s'\n", buf);
            return -1;
        }
        cx->m[i].proxy_port = (int)port;
        p = end;
    }
    return 0;
}

/* ---- the service ------------------------------------------------------------------ */

/* Runs `redlockd --help` once and notes which of the flags the checker cares about it
 * documents.  A flag counts only as the first word of a line (an option line), not when
 * another option's text mentions it. */
static void service_probe_flags(struct chaos *cx)
{
    char log[300];
    snprintf(log, sizeof log, "%s/redlockd-help.txt", cx->dir);
    char *argv[] = {(char *)cx->o.service_bin, "--help", NULL};
    pid_t pid = proc_spawn(cx->o.service_bin, argv, log, NULL);
    if (pid < 0)
        return;
    int st;
    if (proc_wait(pid, 5000, &st) != 1) /* --help exits by itself; this only bounds it */
        (void)proc_stop(pid, SIGKILL, 1000);
    FILE *f = fopen(log, "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char word[64];
        if (sscanf(line, " %63s", word) != 1)
            continue;
        cx->quarantine_flag |= !strcmp(word, "--quarantine-ms");
        cx->retention_flag |= !strcmp(word, "--retention-ms");
        cx->trust_fsync_flag |= !strcmp(word, "--trust-fsync-always");
    }
    fclose(f);
}

static int extra_has(struct chaos *cx, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < cx->o.n_extra; i++)
        if (!strncmp(cx->o.extra_args[i], flag, n) && (cx->o.extra_args[i][n] == '\0' || cx->o.extra_args[i][n] == '='))
            return 1;
    return 0;
}

static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static void print_log_tail(const char *path, int lines)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char ring[32][512];
    int n = 0;
    if (lines > 32)
        lines = 32;
    while (fgets(ring[n % lines], sizeof ring[0], f))
        n++;
    fclose(f);
    for (int i = n > lines ? n - lines : 0; i < n; i++)
        fprintf(stderr, "    | %s", ring[i % lines]);
}

/* What LeakSanitizer wrote to the log at path after byte from: its first line and its
 * SUMMARY line ("" if it wrote nothing). */
static void leak_report_since(const char *path, off_t from, char *out, size_t outsz)
{
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char line[512], first[256] = "";
    if (fseeko(f, from, SEEK_SET) == 0)
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = '\0';
            if (!first[0] && strstr(line, "LeakSanitizer"))
                snprintf(first, sizeof first, "%.255s", line);
            else if (first[0] && !strncmp(line, "SUMMARY: ", 9)) {
                snprintf(out, outsz, "%.120s ... %.120s", first, line);
                break;
            }
        }
    fclose(f);
    if (!out[0] && first[0])
        snprintf(out, outsz, "%s", first);
}

static int http_get_status(struct chaos *cx, const char *path, char *body, size_t bodysz)
{
    http_client hc;
    if (http_client_init(&hc, "127.0.0.1", cx->svc_port) < 0)
        return -1;
    http_response r;
    int64_t ts, tr;
    int st = http_request(&hc, "GET", path, NULL, "chaos-probe", 2000, &r, &ts, &tr);
    if (st > 0 && body)
        snprintf(body, bodysz, "%s", r.body ? r.body : "");
    http_client_free(&hc);
    return st;
}

static int service_start(struct chaos *cx)
{
    char masters[N_MASTERS * 40], listen[32], nt[16], maxttl[16], retention[24];
    char tls_ca[400], tls_cert[400], tls_key[400];
    size_t off = 0;
    for (int i = 0; i < N_MASTERS; i++)
        off += (size_t)snprintf(masters + off, sizeof masters - off, "%s%s127.0.0.1:%d", i ? "," : "",
                                cx->o.tls ? "rediss://" : "", cx->m[i].proxy_port);
    snprintf(tls_ca, sizeof tls_ca, "%s/tls/ca.pem", cx->dir);
    snprintf(tls_cert, sizeof tls_cert, "%s/tls/client.pem", cx->dir);
    snprintf(tls_key, sizeof tls_key, "%s/tls/client-key.pem", cx->dir);
    snprintf(nt, sizeof nt, "%d", cx->o.node_timeout_ms);
    snprintf(maxttl, sizeof maxttl, "%d", cx->o.max_ttl);
    long ret = cx->o.retention_ms;
    if (ret < 0)
        ret = cx->retention_flag ? 2L * cx->o.max_ttl : 0;
    snprintf(retention, sizeof retention, "%ld", ret);
    snprintf(cx->svc_log, sizeof cx->svc_log, "%s/redlockd.log", cx->dir);
    for (int attempt = 0; attempt < 3; attempt++) {
        cx->svc_port = net_free_port();
        snprintf(listen, sizeof listen, "127.0.0.1:%d", cx->svc_port);
        char *argv[26 + MAX_EXTRA_ARGS];
        int a = 0;
        argv[a++] = (char *)cx->o.service_bin;
        argv[a++] = "--masters";
        argv[a++] = masters;
        argv[a++] = "--listen";
        argv[a++] = listen;
        argv[a++] = "--node-timeout-ms";
        argv[a++] = nt;
        argv[a++] = "--max-ttl-ms";
        argv[a++] = maxttl;
        argv[a++] = "--default-ttl-ms"; /* must not exceed the max */
        argv[a++] = maxttl;
        /* A master that lost writes (restart, cut AOF, FLUSHALL) must sit out every lock it
         * may have forgotten: at least the longest ttl a client uses, i.e. the max ttl.
         * The service defaults to that; say it anyway, unless the caller chose. */
        if (cx->quarantine_flag && !extra_has(cx, "--quarantine-ms")) {
            argv[a++] = "--quarantine-ms";
            argv[a++] = maxttl;
        }
        /* short-lived fencing counters (>= max ttl), so their expiry and the per-master
         * floor that replaces them are exercised too, not only in a day-long run */
        if (ret > 0 && !extra_has(cx, "--retention-ms")) {
            argv[a++] = "--retention-ms";
            argv[a++] = retention;
        }
        if (cx->o.tls) {
            argv[a++] = "--redis-tls-ca-file";
            argv[a++] = tls_ca;
            argv[a++] = "--redis-tls-cert";
            argv[a++] = tls_cert;
            argv[a++] = "--redis-tls-key";
            argv[a++] = tls_key;
        }
        for (int i = 0; i < cx->o.n_extra; i++)
            argv[a++] = (char *)cx->o.extra_args[i];
        argv[a] = NULL;
        size_t fo = 0;
        cx->svc_flags[0] = '\0';
        for (int i = 5; i < a && fo < sizeof cx->svc_flags; i++) /* after --masters and --listen */
            fo += (size_t)snprintf(cx->svc_flags + fo, sizeof cx->svc_flags - fo, "%s%s", fo ? " " : "", argv[i]);
        FILE *lf = fopen(cx->svc_log, "ae");
        if (lf) {
            fprintf(lf, "---- chaos: starting:");
            for (int i = 0; argv[i]; i++)
                fprintf(lf, " %s", argv[i]);
            fprintf(lf, "\n");
            fclose(lf);
        }
        pid_t pid = proc_spawn(cx->o.service_bin, argv, cx->svc_log, NULL);
        if (pid < 0) {
            fprintf(stderr, "chaos: cannot start %s: %s\n", cx->o.service_bin, strerror(errno));
            return -1;
        }
        cx->svc_pid = pid;
        long long deadline = now_ms() + 15000;
        int exited = 0;
        while (now_ms() < deadline) {
            int st;
            if (proc_wait(pid, 0, &st) == 1) {
                exited = 1;
                cx->svc_pid = 0;
                break;
            }
            if (file_contains(cx->svc_log, "listening on") && http_get_status(cx, "/healthz", NULL, 0) == 200)
                return 0;
            sleep_ms(20);
        }
        if (!exited) {
            fprintf(stderr, "chaos: redlockd did not become healthy within 15 s; log tail:\n");
            print_log_tail(cx->svc_log, 20);
            return -1;
        }
        /* exited: maybe the port was taken between our probe and its bind; try another */
    }
    fprintf(stderr, "chaos: redlockd exited at start (3 tries); log tail:\n");
    print_log_tail(cx->svc_log, 20);
    return -1;
}

/* ---- clients ---------------------------------------------------------------------- */

/* What a client thread takes: exclusive locks, shared ones (on the same hot names),
 * semaphore permits, or any of the three held with hold=stream. */
enum client_role { ROLE_EXCLUSIVE, ROLE_SHARED, ROLE_SEMAPHORE, ROLE_STREAM };

struct client {
    struct chaos *cx;
    int thread;
    int role;     /* enum client_role */
    int64_t end_ns;
    uint64_t rng;
    chaos_history local;
    long seq;
    http_client hc;
    http_client sc; /* a streamer's stream (hc sends its DELETEs meanwhile) */
    int sched_fd;   /* this thread's /proc schedstat, for the starvation allowance */
};

/* Runs one request and records the client thread's own CPU starvation meanwhile.  A
 * streamed one (http_stream_open) goes on the thread's stream connection. */
static int timed_request(struct client *cl, chaos_event *e, const char *method, const char *path, const char *body,
                         const char *rid, int timeout_ms, http_response *r)
{
    int64_t rd0 = sched_self_run_delay(&cl->sched_fd);
    int st = e->op == CHAOS_STREAM
                 ? http_stream_open(&cl->sc, method, path, body, rid, timeout_ms, r, &e->t_send, &e->t_recv)
                 : http_request(&cl->hc, method, path, body, rid, timeout_ms, r, &e->t_send, &e->t_recv);
    int64_t rd1 = sched_self_run_delay(&cl->sched_fd);
    e->allow_ns = rd0 >= 0 && rd1 >= rd0 ? rd1 - rd0 : 0;
    return st;
}

static void set_shape(chaos_event *e, const char *s)
{
    if (!e->shape[0])
        snprintf(e->shape, sizeof e->shape, "%s", s);
}

static int valid_lease(const char *s)
{
    size_t n = strlen(s);
    if (n < 16 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-'))
            return 0;
    }
    return 1;
}

static int json_int(json_t *o, const char *k, json_int_t *out)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        return 0;
    *out = json_integer_value(v);
    return 1;
}

/* Parses the response into e (status, error, shape and the grant fields); for a grant
 * copies the lease to lease (size >= 129). */
static void digest(struct client *cl, chaos_event *e, int st, http_response *r, const char *rid,
                   const char *name, char *lease)
{
    e->status = st;
    if (st <= 0)
        return;
    if (strcmp(r->request_id, rid) != 0)
        set_shape(e, "x-request-id_not_echoed");
    json_error_t jerr;
    json_t *j = r->body_len ? json_loadb(r->body, r->body_len, 0, &jerr) : NULL;
    if (!json_is_object(j)) {
        set_shape(e, "body_not_a_json_object");
        json_decref(j);
        return;
    }
    json_int_t v;
    if (st >= 400) {
        json_t *err = json_object_get(j, "error");
        if (json_is_string(err))
            snprintf(e->error, sizeof e->error, "%s", json_string_value(err));
        else
            set_shape(e, "error_member_missing");
        if (!json_is_string(json_object_get(j, "message")))
            set_shape(e, "message_member_missing");
        if (st == 409) {
            if (!json_int(j, "retry_after_ms", &v) || v < 0)
                set_shape(e, "409_retry_after_ms_missing");
            if (r->retry_after < 1)
                set_shape(e, "409_Retry-After_header_missing_or_<1");
        }
        if (st == 503 && (!strcmp(e->error, "quorum_unavailable") || !strcmp(e->error, "release_unconfirmed"))) {
            json_int_t q;
            if (!json_int(j, "nodes_ok", &v) || !json_int(j, "quorum", &q) || q != QUORUM || v < 0 ||
                v > N_MASTERS)
                set_shape(e, "503_nodes_ok/quorum_missing_or_wrong");
        }
        json_decref(j);
        return;
    }
    json_t *jn = json_object_get(j, "name");
    if (!json_is_string(jn) || strcmp(json_string_value(jn), name) != 0)
        set_shape(e, "name_missing_or_wrong");
    if ((e->op == CHAOS_ACQUIRE || e->op == CHAOS_STREAM) && st == 201) {
        json_t *jl = json_object_get(j, "lease");
        if (json_is_string(jl) && valid_lease(json_string_value(jl)))
            snprintf(lease, 129, "%s", json_string_value(jl));
        else
            set_shape(e, "201_lease_missing_or_invalid");
        /* a reader's token is the name's last writer's: 0 if the name never had one
         * ((j) checks it against the writers seen) */
        int64_t least = e->mode == CHAOS_MODE_SHARED && cl->cx->hist.permits[e->name] == 0 ? 0 : 1;
        if (json_int(j, "fencing_token", &v) && v >= least)
            e->token = v;
        else
            set_shape(e, least ? "201_fencing_token_missing_or_<1" : "201_fencing_token_missing_or_<0");
        if (json_int(j, "validity_ms", &v) && v > 0 && v <= e->ttl_ms)
            e->validity_ms = v;
        else
            set_shape(e, "201_validity_ms_missing_or_out_of_(0,ttl]");
        if (!json_int(j, "ttl_ms", &v) || v != e->ttl_ms)
            set_shape(e, "201_ttl_ms_missing_or_not_as_asked");
        json_t *mode = json_object_get(j, "mode");
        int permits = cl->cx->hist.permits[e->name];
        if (permits > 0) {
            if (!json_int(j, "permits", &v) || v != permits)
                set_shape(e, "201_permits_missing_or_not_as_asked");
            if (json_int(j, "slot", &v) && v >= 0 && v < INT_MAX)
                e->slot = (int)v; /* kept as evidence even when out of range */
            if (e->slot < 0 || e->slot >= permits)
                set_shape(e, "201_slot_missing_or_out_of_[0,permits)");
        } else if (e->mode == CHAOS_MODE_SHARED) {
            if (!json_is_string(mode) || strcmp(json_string_value(mode), "shared") != 0)
                set_shape(e, "201_shared_grant_without_mode_shared");
        } else if (mode) {
            set_shape(e, "201_exclusive_grant_with_a_mode");
        }
    } else if (e->op == CHAOS_RELEASE && st == 200) {
        if (!json_is_true(json_object_get(j, "released")))
            set_shape(e, "200_released_not_true");
    } else if (e->op == CHAOS_INSPECT && st == 200 && cl->cx->hist.permits[e->name] > 0) {
        /* a semaphore: {"name","permits":N|null,"held":k,"free":N-k|null} */
        json_int_t permits = cl->cx->hist.permits[e->name], held, free_;
        json_t *jp = json_object_get(j, "permits");
        if (!json_int(j, "held", &held) || held < 0 || held > permits)
            set_shape(e, "inspect_sem_held_missing_or_out_of_[0,permits]");
        else if (json_is_null(jp) ? !json_is_null(json_object_get(j, "free"))
                                  : !json_int(j, "permits", &v) || v != permits || !json_int(j, "free", &free_) ||
                                        free_ != permits - held)
            set_shape(e, "inspect_sem_permits_or_free_wrong");
        if (json_object_get(j, "lease"))
            set_shape(e, "inspect_shows_the_lease");
        e->slot = json_int(j, "held", &held) ? (int)held : -1; /* evidence: permits held */
    } else if (e->op == CHAOS_INSPECT && st == 200) {
        json_t *held = json_object_get(j, "held");
        if (!json_is_boolean(held))
            set_shape(e, "inspect_held_missing");
        if (json_object_get(j, "lease"))
            set_shape(e, "inspect_shows_the_lease");
        /* kept in the event (history.tsv) as evidence; the judges order grants only */
        if (json_int(j, "fencing_token", &v))
            e->token = v;
        if (json_int(j, "validity_ms", &v))
            e->validity_ms = v;
        if (json_is_true(held) && (!json_int(j, "validity_ms", &v) || v < 0))
            set_shape(e, "inspect_held_without_validity");
        if (json_is_true(held) && (!json_int(j, "fencing_token", &v) || v < 1))
            set_shape(e, "inspect_held_with_token_<1");
        json_t *readers = json_object_get(j, "readers"), *mode = json_object_get(j, "mode");
        if (readers && (!json_int(j, "readers", &v) || v < 1 || !json_is_string(mode) ||
                        strcmp(json_string_value(mode), "shared") != 0))
            set_shape(e, "inspect_readers_<1_or_without_mode_shared");
        else if (!readers && mode)
            set_shape(e, "inspect_mode_without_readers");
    }
    json_decref(j);
}

static long record(struct client *cl, chaos_event *e)
{
    long i = chaos_history_add(&cl->local, e);
    if (i < 0)
        harness_fail(cl->cx, "out of memory recording the history");
    return i;
}

static int client_timeout_ms(struct chaos *cx, int wait_ms)
{
    /* far beyond bound (c), so a timeout here is a verdict, not a guess */
    return wait_ms + 3 * cx->o.node_timeout_ms + cx->o.margin_ms + 5000;
}

/* The path of name nm: a lock's, or a semaphore's. */
static void name_path(struct chaos *cx, int nm, char *path, size_t size)
{
    snprintf(path, size, "/%s/%s", cx->hist.permits[nm] > 0 ? "semaphores" : "locks", cx->hist.names[nm]);
}

/* One acquire of name nm (op: CHAOS_ACQUIRE, or CHAOS_STREAM for hold=stream; mode:
 * CHAOS_MODE_*, for a lock name; a semaphore name's permits go with it), recorded.
 * Returns the event's index in cl->local (-1 on out of memory); *status gets the outcome,
 * lease the lease of a grant ("" otherwise).  A streamed grant's lines are then read from
 * cl->sc; a grant that did not come as a stream has no lease here (its connection closed). */
static long client_acquire(struct client *cl, int op, int nm, int mode, int64_t ttl, int64_t wait, int *status,
                           char *lease)
{
    struct chaos *cx = cl->cx;
    const char *name = cx->hist.names[nm];
    int permits = cx->hist.permits[nm];
    char path[300], body[160], rid[64], extra[48] = "";
    http_response r;
    chaos_event e;
    memset(&e, 0, sizeof e);
    e.op = op;
    e.name = nm;
    e.thread = cl->thread;
    e.link = -1;
    e.ttl_ms = ttl;
    e.wait_ms = wait;
    e.mode = permits > 0 ? CHAOS_MODE_EXCLUSIVE : mode;
    e.slot = -1;
    lease[0] = '\0';
    name_path(cx, nm, path, sizeof path - 16);
    if (op == CHAOS_STREAM)
        strcat(path, "?hold=stream");
    if (permits > 0)
        snprintf(extra, sizeof extra, ", \"permits\": %d", permits);
    else if (e.mode == CHAOS_MODE_SHARED)
        snprintf(extra, sizeof extra, ", \"mode\": \"shared\"");
    snprintf(body, sizeof body, "{\"ttl_ms\": %" PRId64 ", \"wait_ms\": %" PRId64 "%s}", ttl, wait, extra);
    snprintf(rid, sizeof rid, "chaos-%d-%ld", cl->thread, cl->seq++);
    int st = timed_request(cl, &e, "POST", path, body, rid, client_timeout_ms(cx, (int)wait), &r);
    digest(cl, &e, st, &r, rid, name, lease);
    if (op == CHAOS_STREAM && st == 201) {
        if (strncmp(r.content_type, "application/x-ndjson", 20) != 0)
            set_shape(&e, "201_stream_not_application/x-ndjson");
        if (!cl->sc.chunk_state) {
            set_shape(&e, "201_stream_not_chunked");
            http_client_disconnect(&cl->sc); /* closing releases a grant we cannot follow */
            lease[0] = '\0';
        }
    }
    *status = st;
    if (st != 201)
        lease[0] = '\0';
    return record(cl, &e);
}

/* Releases the grant recorded at index gi with lease, in the body or the query. */
static void client_release(struct client *cl, long gi, const char *lease, int in_body)
{
    struct chaos *cx = cl->cx;
    int nm = cl->local.ev[gi].name;
    char path[300], qpath[440], body[200], rid[64], unused[129];
    http_response r;
    chaos_event d;
    memset(&d, 0, sizeof d);
    d.op = CHAOS_RELEASE;
    d.name = nm;
    d.thread = cl->thread;
    d.link = gi;
    d.mode = cl->local.ev[gi].mode;
    d.slot = -1;
    name_path(cx, nm, path, sizeof path);
    snprintf(rid, sizeof rid, "chaos-%d-%ld", cl->thread, cl->seq++);
    int st;
    if (in_body) {
        snprintf(body, sizeof body, "{\"lease\": \"%s\"}", lease);
        st = timed_request(cl, &d, "DELETE", path, body, rid, client_timeout_ms(cx, 0), &r);
    } else {
        snprintf(qpath, sizeof qpath, "%s?lease=%s", path, lease);
        st = timed_request(cl, &d, "DELETE", qpath, NULL, rid, client_timeout_ms(cx, 0), &r);
    }
    digest(cl, &d, st, &r, rid, cx->hist.names[nm], unused);
    long di = record(cl, &d);
    if (di >= 0)
        cl->local.ev[gi].link = di;
}

static void client_inspect(struct client *cl, int nm)
{
    struct chaos *cx = cl->cx;
    char path[300], rid[64], unused[129];
    http_response r;
    chaos_event e;
    memset(&e, 0, sizeof e);
    e.op = CHAOS_INSPECT;
    e.name = nm;
    e.thread = cl->thread;
    e.link = -1;
    e.slot = -1;
    name_path(cx, nm, path, sizeof path);
    snprintf(rid, sizeof rid, "chaos-%d-%ld", cl->thread, cl->seq++);
    int st = timed_request(cl, &e, "GET", path, NULL, rid, client_timeout_ms(cx, 0), &r);
    digest(cl, &e, st, &r, rid, cx->hist.names[nm], unused);
    record(cl, &e);
}

/* A hot name, or (2%) a cold one. */
static int pick_name(struct client *cl)
{
    const struct options *o = &cl->cx->o;
    int nm = (int)rng_range(&cl->rng, 0, o->names - 1);
    if (o->cold_names && rng_range(&cl->rng, 0, 99) < 2)
        nm = o->names + (int)rng_range(&cl->rng, 0, o->cold_names - 1);
    return nm;
}

/* A semaphore name (they follow the hot and cold names). */
static int pick_sem_name(struct client *cl)
{
    const struct options *o = &cl->cx->o;
    return o->names + o->cold_names + (int)rng_range(&cl->rng, 0, o->sem_names - 1);
}

/* What a request of this client is on: *nm a name, *mode the mode for a lock name.  A
 * streamer takes an exclusive lock half the time, else a shared one or a permit. */
static void pick_kind(struct client *cl, int *nm, int *mode)
{
    int role = cl->role;
    *mode = CHAOS_MODE_EXCLUSIVE;
    if (role == ROLE_STREAM) {
        long r = rng_range(&cl->rng, 0, 3);
        role = r < 2 ? ROLE_EXCLUSIVE : r == 2 ? ROLE_SHARED : ROLE_SEMAPHORE;
        if (role == ROLE_SEMAPHORE && cl->cx->o.sem_names == 0)
            role = ROLE_SHARED;
    }
    if (role == ROLE_SEMAPHORE) {
        *nm = pick_sem_name(cl);
        return;
    }
    *nm = pick_name(cl);
    if (role == ROLE_SHARED)
        *mode = CHAOS_MODE_SHARED;
}

/* After an acquire that was not granted (status st): a short pause. */
static void pause_after(struct client *cl, int st)
{
    if (st == 409)
        sleep_ms(rng_range(&cl->rng, 0, 20));
    else if (st == 503)
        sleep_ms(rng_range(&cl->rng, 5, 30));
    else
        sleep_ms(20); /* transport trouble: don't spin */
}

/* How long a grant is held before its release (or its expiry): 0..min(validity/3,
 * max hold); a permit 0..min(validity/2, 4 x max hold), so that permits pile up to N. */
static long hold_ms(struct client *cl, const chaos_event *g)
{
    const struct options *o = &cl->cx->o;
    int sem = cl->cx->hist.permits[g->name] > 0;
    long cap = sem ? 4L * o->max_hold : o->max_hold;
    int64_t part = g->validity_ms / (sem ? 2 : 3);
    return rng_range(&cl->rng, 0, part < cap ? (long)part : cap);
}

static void client_once(struct client *cl)
{
    const struct options *o = &cl->cx->o;
    int nm, mode;
    pick_kind(cl, &nm, &mode);
    if (rng_range(&cl->rng, 0, 99) < 5) {
        client_inspect(cl, nm);
        return;
    }
    int64_t ttl = rng_range(&cl->rng, o->min_ttl, o->max_ttl);
    int64_t wait = rng_range(&cl->rng, 0, 1) ? 0 : rng_range(&cl->rng, 1, o->max_wait);
    char lease[129];
    int st;
    long gi = client_acquire(cl, CHAOS_ACQUIRE, nm, mode, ttl, wait, &st, lease);
    if (gi < 0)
        return;
    if (st == 201 && lease[0]) {
        sleep_ms(hold_ms(cl, &cl->local.ev[gi]));
        if (ttl <= 400 && rng_range(&cl->rng, 0, 3) == 0)
            return; /* let it expire: the hand-over on expiry is the delicate case */
        client_release(cl, gi, lease, (int)rng_range(&cl->rng, 0, 1));
        return;
    }
    pause_after(cl, st);
}

/* ---- streamed holders (hold=stream) ---- */

/* Reads what a line of a stream says into l (status: its CHAOS_LINE_* kind). */
static void parse_line(chaos_event *l, const char *line, int64_t ttl)
{
    json_error_t jerr;
    json_t *j = json_loads(line, 0, &jerr);
    json_t *ev = json_object_get(j, "event"), *reason = json_object_get(j, "reason");
    const char *what = json_is_string(ev) ? json_string_value(ev) : "";
    const char *why = json_is_string(reason) ? json_string_value(reason) : "";
    json_int_t v;
    snprintf(l->error, sizeof l->error, "%s", why);
    if (!strcmp(what, "extended")) {
        l->status = CHAOS_LINE_EXTENDED;
        if (json_int(j, "validity_ms", &v) && v > 0 && v <= ttl)
            l->validity_ms = v;
        else
            set_shape(l, "extended_validity_ms_missing_or_out_of_(0,ttl]");
    } else if (!strcmp(what, "lost")) {
        l->status = CHAOS_LINE_LOST;
        if (strcmp(why, "no_quorum") != 0 && strcmp(why, "lease_lost") != 0)
            set_shape(l, "lost_reason_not_no_quorum_or_lease_lost");
    } else if (!strcmp(what, "released")) {
        l->status = CHAOS_LINE_RELEASED;
        if (reason && strcmp(why, "shutting_down") != 0)
            set_shape(l, "released_reason_not_shutting_down");
    } else {
        l->status = CHAOS_LINE_OTHER;
        set_shape(l, json_is_object(j) ? "line_without_a_documented_event" : "line_not_a_json_object");
    }
    json_decref(j);
}

/* Where a streamer's wait for its next line began, and its own run delay then. */
struct stream_wait {
    long gi; /* the grant, in cl->local */
    int64_t from, rd_from;
};

/* Waits until deadline for the stream's next line and records it (or the stream's end
 * without one).  1 when the stream is over (a final line, its end, or a broken
 * connection), 0 when nothing came by the deadline. */
static int stream_next(struct client *cl, struct stream_wait *w, int64_t deadline)
{
    const chaos_event *g = &cl->local.ev[w->gi];
    int64_t t;
    int rc = http_stream_line(&cl->sc, deadline, &t);
    if (rc == CHAOS_ST_TIMEOUT)
        return 0;
    int64_t rd = sched_self_run_delay(&cl->sched_fd);
    chaos_event l;
    memset(&l, 0, sizeof l);
    l.op = CHAOS_LINE;
    l.name = g->name;
    l.thread = cl->thread;
    l.link = w->gi;
    l.ttl_ms = g->ttl_ms;
    l.mode = g->mode;
    l.slot = -1;
    l.t_send = w->from;
    l.t_recv = t;
    l.allow_ns = w->rd_from >= 0 && rd >= w->rd_from ? rd - w->rd_from : 0;
    if (rc == 1)
        parse_line(&l, cl->sc.line, g->ttl_ms);
    else
        l.status = CHAOS_LINE_CUT;
    if (rc == CHAOS_ST_BADRESP)
        set_shape(&l, "stream_not_chunked_as_http_says");
    w->from = t;
    w->rd_from = rd;
    record(cl, &l);
    if (rc == 1 && (l.status == CHAOS_LINE_LOST || l.status == CHAOS_LINE_RELEASED)) {
        /* the stream must end here: anything more is recorded (and judged out of contract) */
        int64_t until = http_now_ns() + 200 * 1000000LL;
        while (http_stream_line(&cl->sc, until, &t) == 1) {
            chaos_event x = l;
            x.t_send = x.t_recv = t;
            x.error[0] = x.shape[0] = '\0';
            x.validity_ms = 0;
            parse_line(&x, cl->sc.line, g->ttl_ms);
            record(cl, &x);
        }
    }
    return rc != 1 || l.status != CHAOS_LINE_EXTENDED;
}

/* One hold=stream acquire; a grant is held for 0..1.5 x ttl while its lines are read,
 * then the stream is closed, or (half the time) released with a DELETE of its lease
 * (its "released" line awaited up to 1 s) and then closed. */
static void client_stream_once(struct client *cl)
{
    struct chaos *cx = cl->cx;
    const struct options *o = &cx->o;
    int nm, mode;
    pick_kind(cl, &nm, &mode);
    int64_t ttl = rng_range(&cl->rng, o->min_ttl, o->max_ttl);
    int64_t wait = rng_range(&cl->rng, 0, 1) ? 0 : rng_range(&cl->rng, 1, o->max_wait);
    char lease[129];
    int st;
    long gi = client_acquire(cl, CHAOS_STREAM, nm, mode, ttl, wait, &st, lease);
    if (gi < 0 || !lease[0]) {
        http_client_disconnect(&cl->sc);
        if (st != 201)
            pause_after(cl, st);
        return;
    }
    int64_t t_grant = cl->local.ev[gi].t_recv;
    struct stream_wait w = {.gi = gi, .from = t_grant, .rd_from = sched_self_run_delay(&cl->sched_fd)};
    int64_t decide = t_grant + rng_range(&cl->rng, 0, ttl * 3 / 2) * 1000000LL;
    int over = 0;
    while (!over && http_now_ns() < decide && !atomic_load(&cx->abort_run))
        over = stream_next(cl, &w, decide);
    if (!over && lease[0] && rng_range(&cl->rng, 0, 1)) {
        client_release(cl, gi, lease, (int)rng_range(&cl->rng, 0, 1));
        int64_t until = http_now_ns() + 1000 * 1000000LL;
        while (!over && http_now_ns() < until)
            over = stream_next(cl, &w, until);
    }
    if (!over) { /* the client lets go: its hold ends now */
        chaos_event c;
        memset(&c, 0, sizeof c);
        c.op = CHAOS_LINE;
        c.status = CHAOS_LINE_CLOSED;
        c.name = nm;
        c.thread = cl->thread;
        c.link = gi;
        c.ttl_ms = ttl;
        c.mode = mode;
        c.slot = -1;
        c.t_send = http_now_ns();
        http_client_disconnect(&cl->sc);
        c.t_recv = http_now_ns();
        record(cl, &c);
    }
    http_client_disconnect(&cl->sc);
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    if (http_client_init(&cl->hc, "127.0.0.1", cl->cx->svc_port) < 0 ||
        http_client_init(&cl->sc, "127.0.0.1", cl->cx->svc_port) < 0) {
        harness_fail(cl->cx, "client %d: cannot initialise", cl->thread);
        http_client_free(&cl->hc);
        http_client_free(&cl->sc);
        return NULL;
    }
    while (http_now_ns() < cl->end_ns && !atomic_load(&cl->cx->abort_run)) {
        if (cl->role == ROLE_STREAM)
            client_stream_once(cl);
        else
            client_once(cl);
    }
    http_client_free(&cl->hc);
    http_client_free(&cl->sc);
    if (cl->sched_fd >= 0)
        close(cl->sched_fd);
    return NULL;
}

/* Appends a client's events to the history (links renumbered) and empties its own. */
static void merge_local(struct chaos *cx, struct client *cl)
{
    long base = cx->hist.n;
    for (long k = 0; k < cl->local.n; k++) {
        chaos_event e = cl->local.ev[k];
        if (e.link >= 0)
            e.link += base;
        if (chaos_history_add(&cx->hist, &e) < 0)
            harness_fail(cx, "out of memory merging the history");
    }
    chaos_history_free(&cl->local);
}

/* Runs the clients for ms milliseconds and appends their events to the history.
 * Returns the index of the first event added. */
static long run_clients(struct chaos *cx, long ms, uint64_t salt)
{
    const struct options *o = &cx->o;
    /* exclusive, shared, semaphore, streamers: in that order */
    int n = o->clients + o->shared_clients + o->sem_clients + o->stream_clients;
    struct client *cls = calloc((size_t)n, sizeof *cls);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    long first = cx->hist.n;
    if (!cls || !th) {
        harness_fail(cx, "out of memory");
        free(cls);
        free(th);
        return first;
    }
    int64_t end = http_now_ns() + ms * 1000000LL;
    for (int i = 0; i < n; i++) {
        cls[i].cx = cx;
        cls[i].thread = i;
        cls[i].role = i < o->clients                                      ? ROLE_EXCLUSIVE
                      : i < o->clients + o->shared_clients                  ? ROLE_SHARED
                      : i < o->clients + o->shared_clients + o->sem_clients ? ROLE_SEMAPHORE
                                                                            : ROLE_STREAM;
        cls[i].sched_fd = -1;
        cls[i].end_ns = end;
        cls[i].rng = (cx->o.seed ^ (salt * 0x9E3779B97F4A7C15ULL)) + (uint64_t)(i + 1) * 0xD1B54A32D192ED03ULL;
        if (cls[i].rng == 0)
            cls[i].rng = 1;
        if (pthread_create(&th[i], NULL, client_main, &cls[i]) != 0) {
            harness_fail(cx, "pthread_create failed");
            th[i] = 0;
        }
    }
    for (int i = 0; i < n; i++) {
        if (th[i])
            pthread_join(th[i], NULL);
        merge_local(cx, &cls[i]);
    }
    free(cls);
    free(th);
    return first;
}

/* ---- the fault injector ----------------------------------------------------------- */

static void master_signal(struct chaos *cx, struct master *m, int sig)
{
    if (m->pid > 0 && kill(m->pid, sig) < 0)
        harness_fail(cx, "kill(master %d, %d): %s", m->idx, sig, strerror(errno));
}

/* Asks /readyz once; ok[i] = 1 if master i is listed as ok (in quorums), 0 if listed
 * otherwise.  0, or -1 without a usable answer. */
static int readyz_masters(struct chaos *cx, int ok[N_MASTERS])
{
    char body[4096] = "";
    int st = http_get_status(cx, "/readyz", body, sizeof body);
    if (st != 200 && st != 503)
        return -1;
    json_error_t jerr;
    json_t *j = json_loads(body, 0, &jerr);
    if (!j)
        return -1;
    for (int i = 0; i < N_MASTERS; i++)
        ok[i] = 0;
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(j, "masters"), k, v)
    {
        json_t *a = json_object_get(v, "address");
        for (int i = 0; i < N_MASTERS && json_is_string(a); i++) {
            char addr[32];
            snprintf(addr, sizeof addr, "127.0.0.1:%d", cx->m[i].proxy_port);
            if (!strcmp(json_string_value(a), addr))
                ok[i] = json_is_true(json_object_get(v, "ok"));
        }
    }
    json_decref(j);
    return 0;
}

/* A master that restarted or lost its data is out of the service's quorums for its
 * quarantine (>= the max ttl) and until it is repaired: for the "at most 2 masters
 * impaired" rule it stays impaired until the service reports it ok again, so minority
 * faults stay a minority (otherwise the deck would keep most masters quarantined, the
 * service would answer 503 nearly always, and the run would prove little). */
static void master_recovering(struct chaos *cx, struct master *m, long long lost_at)
{
    long long now = now_ms();
    m->recovering = 1;
    m->busy = 1;
    m->lost_at = lost_at;
    m->recover_min = lost_at + cx->quarantine_ms > now ? lost_at + cx->quarantine_ms : now;
    m->recover_max = m->recover_min + 5000;
}

/* Releases recovering masters the service has back (or that are past recover_max). */
static void recovery_poll(struct chaos *cx)
{
    long long now = now_ms();
    int due = 0;
    for (int i = 0; i < N_MASTERS; i++)
        due |= cx->m[i].recovering && now >= cx->m[i].recover_min;
    int ok[N_MASTERS];
    if (!due || readyz_masters(cx, ok) < 0)
        return;
    for (int i = 0; i < N_MASTERS; i++) {
        struct master *m = &cx->m[i];
        if (!m->recovering || now < m->recover_min)
            continue;
        if (ok[i] || now >= m->recover_max) {
            m->recovering = 0;
            m->busy = 0;
            fault_logf(cx, "%s master=%d %lld ms after its loss", ok[i] ? "back " : "late ", i, now - m->lost_at);
        }
    }
}

/* ---- aof_cut: losing the last writes ------------------------------------------------ */

/* The incr AOFs of master m, oldest first, as listed ("type i") by its manifest (Redis 7
 * multi-part AOF).  Returns how many (at most max), -1 if there is no manifest. */
static int aof_incr_files(const struct master *m, char files[][400], int max)
{
    char pat[400];
    snprintf(pat, sizeof pat, "%.360s/appendonlydir/*.manifest", m->data);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc != 1) {
        if (g.gl_pathc)
            globfree(&g);
        return -1;
    }
    FILE *f = fopen(g.gl_pathv[0], "re");
    globfree(&g);
    if (!f)
        return -1;
    char line[600], name[300], type[8];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        /* file <name> seq <n> type <b|h|i> */
        const char *t = strstr(line, " type ");
        if (strncmp(line, "file ", 5) != 0 || !t || sscanf(line + 5, "%299s", name) != 1 ||
            sscanf(t + 6, "%7s", type) != 1)
            continue;
        if (!strcmp(type, "i") && n < max)
            snprintf(files[n++], sizeof files[0], "%.330s/appendonlydir/%.60s", m->data, name);
    }
    fclose(f);
    return n;
}

/* Records the size of the incr AOF master m appends to now. */
static int aof_record(struct master *m)
{
    char files[8][400];
    int n = aof_incr_files(m, files, 8);
    struct stat st;
    if (n <= 0 || stat(files[n - 1], &st) < 0)
        return -1;
    snprintf(m->cut_file, sizeof m->cut_file, "%s", files[n - 1]);
    m->cut_size = (long long)st.st_size;
    m->cut_at_ms = now_ms();
    return 0;
}

/* The largest offset <= size in the AOF at path that ends a whole command outside a
 * MULTI/EXEC block (a script's effects are written as one such block), so a file cut
 * there loads as if the process had died at that moment.  -1 if unreadable. */
static long long aof_boundary(const char *path, long long size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = malloc((size_t)size + 1);
    long long len = 0;
    while (buf && len < size) {
        ssize_t r = read(fd, buf + len, (size_t)(size - len));
        if (r <= 0)
            break;
        len += r;
    }
    close(fd);
    if (!buf)
        return -1;
    long long pos = 0, last = 0;
    int in_multi = 0;
    while (pos < len) {
        if (buf[pos] == '#') { /* an annotation line (aof-timestamp-enabled) */
            char *nl = memchr(buf + pos, '\n', (size_t)(len - pos));
            if (!nl)
                break;
            pos = nl - buf + 1;
            if (!in_multi)
                last = pos;
            continue;
        }
        if (buf[pos] != '*')
            break;
        char *end;
        buf[len] = '\0';
        long nargs = strtol(buf + pos + 1, &end, 10);
        if (end + 2 > buf + len || end[0] != '\r' || end[1] != '\n' || nargs < 1)
            break;
        long long p = end + 2 - buf;
        int ok = 1;
        char cmd[8] = "";
        for (long k = 0; k < nargs && ok; k++) {
            if (p >= len || buf[p] != '$') {
                ok = 0;
                break;
            }
            long alen = strtol(buf + p + 1, &end, 10);
            if (end + 2 > buf + len || end[0] != '\r' || end[1] != '\n' || alen < 0) {
                ok = 0;
                break;
            }
            p = end + 2 - buf;
            if (p + alen + 2 > len) {
                ok = 0;
                break;
            }
            if (k == 0 && alen < (long)sizeof cmd) {
                memcpy(cmd, buf + p, (size_t)alen);
                cmd[alen] = '\0';
            }
            p += alen + 2;
        }
        if (!ok)
            break;
        if (!strcasecmp(cmd, "MULTI"))
            in_multi = 1;
        else if (!strcasecmp(cmd, "EXEC"))
            in_multi = 0;
        pos = p;
        if (!in_multi)
            last = pos;
    }
    free(buf);
    return last;
}

/* With master m dead: cuts its AOF back to the size recorded by aof_record (at the last
 * whole command at or before it); any incr file opened since (a rewrite began) is emptied.
 * If the recorded file is gone (a rewrite finished meanwhile and the writes since its
 * start are in the new base), every current incr file is emptied instead. */
static void aof_cut_apply(struct chaos *cx, struct master *m)
{
    char files[8][400];
    int n = aof_incr_files(m, files, 8), found = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i], m->cut_file))
            found = i;
    long long lost = 0;
    char what[600];
    struct stat st;
    if (found >= 0) {
        long long cut = aof_boundary(m->cut_file, m->cut_size);
        if (cut < 0 || stat(m->cut_file, &st) < 0 || truncate(m->cut_file, cut) < 0) {
            harness_fail(cx, "aof_cut: cannot cut %s: %s", m->cut_file, strerror(errno));
            return;
        }
        lost = (long long)st.st_size - cut;
        snprintf(what, sizeof what, "%s %lld -> %lld bytes (recorded %lld, %lld ms before the kill)",
                 strrchr(m->cut_file, '/') + 1, (long long)st.st_size, cut, m->cut_size, now_ms() - m->cut_at_ms);
    } else {
        snprintf(what, sizeof what, "a rewrite replaced %s since it was recorded: emptied the current incr file(s)",
                 strrchr(m->cut_file, '/') ? strrchr(m->cut_file, '/') + 1 : m->cut_file);
    }
    for (int i = found + 1; i < n; i++) {
        if (stat(files[i], &st) == 0)
            lost += (long long)st.st_size;
        if (truncate(files[i], 0) < 0)
            harness_fail(cx, "aof_cut: cannot empty %s: %s", files[i], strerror(errno));
    }
    fault_logf(cx, "      aof_cut master=%d: %s; %lld bytes of acknowledged writes lost", m->idx, what, lost);
}

/* Kills master m (SIGKILL, reaped). */
static void master_kill(struct chaos *cx, struct master *m)
{
    if (m->pid > 0) {
        pid_t pid = m->pid;
        if (proc_stop(pid, SIGKILL, 5000) == -1)
            harness_fail(cx, "master %d (pid %d) did not die on SIGKILL", m->idx, (int)pid);
        m->pid = 0;
    }
    m->state = M_DOWN;
}

/* FLUSHALL on master m's own port, not through the proxy: the process keeps running. */
static int master_flushall(struct chaos *cx, struct master *m)
{
    char reply[128];
    if (redis_command(m->port, "FLUSHALL SYNC", reply, sizeof reply, 3000) < 0 || strcmp(reply, "+OK") != 0) {
        harness_fail(cx, "FLUSHALL on master %d (port %d) answered '%s'", m->idx, m->port, reply);
        return -1;
    }
    return 0;
}

static long fault_record_open(struct chaos *cx, enum fault_kind k)
{
    if (!cx->frec || cx->n_frec == MAX_FAULT_RECORDS)
        return -1;
    cx->frec[cx->n_frec] = (struct fault_record){.kind = k, .start_ms = now_ms()};
    return cx->n_frec++;
}

static void fault_record_close(struct chaos *cx, long rec)
{
    if (rec >= 0)
        cx->frec[rec].end_ms = now_ms();
}

static void fault_start(struct chaos *cx, struct active_fault *f, uint64_t *rng)
{
    char who[32] = "";
    size_t off = 0;
    for (int i = 0; i < f->n; i++)
        off += (size_t)snprintf(who + off, sizeof who - off, "%s%d", i ? "," : "", f->targets[i]);
    int delay = 0;
    f->rec = f->kind == F_AOF_CUT ? -1 : fault_record_open(cx, f->kind);
    f->start = now_ms();
    f->mid_done = 0;
    for (int i = 0; i < f->n; i++) {
        struct master *m = &cx->m[f->targets[i]];
        m->busy = 1;
        switch (f->kind) {
        case F_FREEZE_MINORITY:
        case F_FREEZE_MAJORITY:
            master_signal(cx, m, SIGSTOP);
            m->state = M_FROZEN;
            break;
        case F_KILL_AOF:
        case F_KILL_EMPTY:
            master_kill(cx, m);
            if (f->kind == F_KILL_EMPTY && rm_rf(m->data) < 0)
                harness_fail(cx, "cannot empty %s: %s", m->data, strerror(errno));
            break;
        case F_AOF_CUT:
            if (aof_record(m) < 0)
                harness_fail(cx, "aof_cut: no incr AOF found for master %d under %s", m->idx, m->data);
            break;
        case F_FLUSHALL:
            (void)master_flushall(cx, m);
            break;
        case F_SLOW:
            if (!delay)
                delay = (int)rng_range(rng, 5, 150);
            (void)proxy_cmd(cx, "mode %d delay %d", m->idx, delay);
            break;
        case F_DROP:
            (void)proxy_cmd(cx, "mode %d drop", m->idx);
            break;
        case F_CUT:
            (void)proxy_cmd(cx, "mode %d cut", m->idx);
            break;
        case F_NKINDS:
            break;
        }
    }
    if (f->kind != F_AOF_CUT) /* counted when the kill and the cut happen */
        cx->fault_count[f->kind]++;
    if (delay)
        fault_logf(cx, "start %s masters=%s delay_ms=%d until=%.3f", fault_table[f->kind].name, who, delay,
                   rel_s(cx, f->end));
    else if (f->kind == F_AOF_CUT)
        fault_logf(cx, "start %s masters=%s (AOF size recorded) kill_at=%.3f until=%.3f", fault_table[f->kind].name,
                   who, rel_s(cx, f->mid), rel_s(cx, f->end));
    else
        fault_logf(cx, "start %s masters=%s until=%.3f", fault_table[f->kind].name, who, rel_s(cx, f->end));
}

/* The middle step of a fault that has one: aof_cut kills its masters and cuts their AOF
 * back to the recorded size; they restart when it heals. */
static void fault_mid(struct chaos *cx, struct active_fault *f)
{
    f->mid_done = 1;
    if (f->kind != F_AOF_CUT)
        return;
    f->rec = fault_record_open(cx, f->kind);
    for (int i = 0; i < f->n; i++)
        master_kill(cx, &cx->m[f->targets[i]]);
    for (int i = 0; i < f->n; i++)
        aof_cut_apply(cx, &cx->m[f->targets[i]]);
    cx->fault_count[f->kind]++;
}

/* Heals f; recover: masters that restarted or were wiped stay impaired until the
 * service has them back (see master_recovering). */
static void fault_heal(struct chaos *cx, struct active_fault *f, int recover)
{
    for (int i = 0; i < f->n; i++) {
        struct master *m = &cx->m[f->targets[i]];
        switch (f->kind) {
        case F_FREEZE_MINORITY:
        case F_FREEZE_MAJORITY:
            master_signal(cx, m, SIGCONT);
            m->state = M_UP;
            break;
        case F_KILL_AOF:
        case F_KILL_EMPTY:
        case F_AOF_CUT:
            if (m->state == M_DOWN) {
                if (master_spawn(cx, m) < 0)
                    harness_fail(cx, "master %d would not restart on port %d; see %s", m->idx, m->port, m->log);
                m->busy = 0;
                if (recover)
                    master_recovering(cx, m, now_ms());
                continue;
            }
            break;
        case F_FLUSHALL:
            m->busy = 0;
            if (recover)
                master_recovering(cx, m, f->start);
            continue;
        default:
            (void)proxy_cmd(cx, "mode %d pass", m->idx);
            break;
        }
        m->busy = 0;
    }
    fault_record_close(cx, f->rec);
    if (f->kind == F_AOF_CUT && !f->mid_done)
        fault_logf(cx, "heal  %s (the run ended before the kill: nothing cut)", fault_table[f->kind].name);
    else
        fault_logf(cx, "heal  %s", fault_table[f->kind].name);
}

/* The safety net: whatever happened, leave every master up and every pair passing. */
static void heal_all(struct chaos *cx)
{
    for (int i = 0; i < N_MASTERS; i++) {
        struct master *m = &cx->m[i];
        if (m->state == M_FROZEN)
            master_signal(cx, m, SIGCONT);
        if (m->state == M_DOWN || m->pid <= 0)
            if (master_spawn(cx, m) < 0)
                harness_fail(cx, "master %d would not restart", i);
        m->state = M_UP;
        m->busy = 0;
        m->recovering = 0;
    }
    (void)proxy_cmd(cx, "mode all pass");
    fault_logf(cx, "all healed");
}

static int kind_enabled(const struct chaos *cx, int k)
{
    return (cx->o.fault_mask & (1u << k)) && (!fault_table[k].data_loss || cx->data_loss_on);
}

static void shuffle(int *a, int n, uint64_t *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_range(rng, 0, i);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void *injector_main(void *arg)
{
    struct chaos *cx = arg;
    uint64_t rng = cx->o.seed * 0x9E3779B97F4A7C15ULL + 12345;
    int order[F_NKINDS], n_order = 0, pos = 0;
    for (int k = 0; k < F_NKINDS; k++)
        if (kind_enabled(cx, k))
            order[n_order++] = k;
    shuffle(order, n_order, &rng);
    struct active_fault act[2];
    int n_act = 0;
    long long next_start = now_ms() + rng_range(&rng, 100, 400);

    long long next_poll = 0;
    while (!atomic_load(&cx->injector_stop) && !atomic_load(&cx->abort_run)) {
        long long now = now_ms();
        if (now >= next_poll) {
            recovery_poll(cx);
            next_poll = now + 50;
        }
        for (int i = 0; i < n_act; i++)
            if (act[i].mid && !act[i].mid_done && act[i].mid <= now)
                fault_mid(cx, &act[i]);
        for (int i = 0; i < n_act;) {
            if (act[i].end <= now) {
                fault_heal(cx, &act[i], 1);
                act[i] = act[--n_act];
            } else {
                i++;
            }
        }
        /* Minority faults may overlap as long as at most N/2 masters are impaired, so
         * the service keeps working on a quorum while some masters misbehave (where
         * the bugs are); a fault on a majority runs alone, and briefly. */
        int majority_active = 0;
        for (int i = 0; i < n_act; i++)
            majority_active |= act[i].n > N_MASTERS / 2;
        if (n_act < 2 && !majority_active && now >= next_start && now + 300 < cx->run_end_ms) {
            enum fault_kind k = (enum fault_kind)order[pos];
            int free_idx[N_MASTERS], n_free = 0;
            for (int i = 0; i < N_MASTERS; i++)
                if (!cx->m[i].busy)
                    free_idx[n_free++] = i;
            int lo = fault_table[k].min_targets, hi = fault_table[k].max_targets, n = 0;
            int majority = lo > N_MASTERS / 2 || (hi > N_MASTERS / 2 && rng_range(&rng, 0, 3) == 0);
            if (majority) {
                if (n_act == 0 && n_free == N_MASTERS) /* alone: nothing else impaired */
                    n = (int)rng_range(&rng, lo > QUORUM ? lo : QUORUM, hi);
            } else {
                int room = N_MASTERS / 2 - (N_MASTERS - n_free);
                if (hi > room)
                    hi = room;
                if (hi >= lo)
                    n = (int)rng_range(&rng, lo, hi);
            }
            if (n > 0) {
                struct active_fault *f = &act[n_act++];
                f->kind = k;
                f->n = n;
                shuffle(free_idx, n_free, &rng);
                memcpy(f->targets, free_idx, (size_t)f->n * sizeof(int));
                long dur = rng_range(&rng, fault_table[k].min_ms, fault_table[k].max_ms);
                if (majority && dur > 1000)
                    dur = 1000;
                f->mid = 0;
                if (k == F_AOF_CUT) /* traffic first, then the kill: dur is the time down */
                    f->mid = now + rng_range(&rng, AOF_CUT_MIN_TRAFFIC_MS, AOF_CUT_MAX_TRAFFIC_MS);
                long long from = f->mid ? f->mid : now;
                if (from + dur > cx->run_end_ms)
                    dur = cx->run_end_ms - from > 0 ? cx->run_end_ms - from : 0;
                f->end = from + dur;
                fault_start(cx, f, &rng);
                if (++pos == n_order) {
                    pos = 0;
                    shuffle(order, n_order, &rng);
                }
                next_start = now_ms() + rng_range(&rng, 100, 700);
            }
        }
        sleep_ms(10);
    }
    for (int i = 0; i < n_act; i++)
        fault_heal(cx, &act[i], 0);
    heal_all(cx);
    atomic_store(&cx->injector_healed, 1);
    /* the masters this thread restarted die with it (PR_SET_PDEATHSIG): wait to be told */
    while (!atomic_load(&cx->injector_exit))
        sleep_ms(10);
    return NULL;
}

/* ---- the run ---------------------------------------------------------------------- */

/* 1 while the service runs; on its exit records how and stops the run.  Called by the
 * monitor thread and by main, hence the lock. */
static int svc_check_alive(struct chaos *cx)
{
    pthread_mutex_lock(&cx->svc_mu);
    int alive = !cx->svc_exited;
    int st;
    if (alive && cx->svc_pid > 0 && proc_wait(cx->svc_pid, 0, &st) == 1) {
        cx->svc_exited = 1;
        cx->svc_status = st;
        cx->svc_exit_ms = now_ms();
        cx->svc_pid = 0;
        atomic_store(&cx->abort_run, 1);
        alive = 0;
    }
    pthread_mutex_unlock(&cx->svc_mu);
    return alive;
}

struct monitor {
    struct chaos *cx;
    atomic_int stop;
    int peak_fds;
    long peak_rss;
};

static void *monitor_main(void *arg)
{
    struct monitor *mo = arg;
    struct chaos *cx = mo->cx;
    int tick = 0;
    while (!atomic_load(&mo->stop)) {
        if (!svc_check_alive(cx))
            break;
        if (cx->proxy_pid > 0) {
            int st;
            if (proc_wait(cx->proxy_pid, 0, &st) == 1) {
                cx->proxy_pid = 0;
                harness_fail(cx, "the fault proxy exited (status 0x%x); see %s/proxy.log", st, cx->dir);
            }
        }
        if (tick++ % 10 == 0 && cx->svc_pid > 0) {
            int fds = proc_fd_count(cx->svc_pid);
            long rss = proc_rss_kb(cx->svc_pid);
            if (fds > mo->peak_fds)
                mo->peak_fds = fds;
            if (rss > mo->peak_rss)
                mo->peak_rss = rss;
        }
        sleep_ms(50);
    }
    return NULL;
}

/* Takes a settled reading: two equal fd counts 200 ms apart (at most max_ms). */
static void settle_reading(struct chaos *cx, int *fds, long *rss, int target, long max_ms)
{
    long long deadline = now_ms() + max_ms;
    int prev = -1;
    for (;;) {
        int f = cx->svc_pid > 0 ? proc_fd_count(cx->svc_pid) : -1;
        *fds = f;
        *rss = cx->svc_pid > 0 ? proc_rss_kb(cx->svc_pid) : -1;
        if (f >= 0 && f == prev && (target < 0 || f <= target))
            return;
        if (now_ms() >= deadline || f < 0)
            return;
        prev = f;
        sleep_ms(200);
    }
}

struct counts {
    long op[3], by_status[3][6]; /* 2xx, 404, 409, 503, transport, other; a streamed acquire is an acquire */
    long requests, streams;      /* streams: streamed acquires asked */
    long shared, permits;        /* shared acquires and permit acquires asked (streamed ones too) */
    long unavailable, exhausted, timeouts, connerr;
    long other; /* anything outside the documented statuses */
};

static void count_range(const chaos_history *h, long from, long to, struct counts *c)
{
    memset(c, 0, sizeof *c);
    for (long i = from; i < to; i++) {
        chaos_event ev = h->ev[i];
        const chaos_event *e = &ev;
        if (e->op == CHAOS_LINE)
            continue; /* not a request: (i) counts the lines */
        c->requests++;
        c->streams += e->op == CHAOS_STREAM;
        if (e->op == CHAOS_ACQUIRE || e->op == CHAOS_STREAM) {
            c->permits += h->permits[e->name] > 0;
            c->shared += h->permits[e->name] == 0 && e->mode == CHAOS_MODE_SHARED;
        }
        if (e->op == CHAOS_STREAM)
            ev.op = CHAOS_ACQUIRE;
        c->op[e->op]++;
        int b;
        if (e->status >= 200 && e->status < 300)
            b = 0;
        else if (e->status == 404)
            b = 1;
        else if (e->status == 409)
            b = 2;
        else if (e->status == 503)
            b = 3;
        else if (e->status < 0)
            b = 4;
        else
            b = 5;
        c->by_status[e->op][b]++;
        int doc = e->op == CHAOS_ACQUIRE ? (e->status == 201 || e->status == 409 || e->status == 503)
                  : e->op == CHAOS_RELEASE ? (e->status == 200 || e->status == 404 || e->status == 503)
                                           : (e->status == 200 || e->status == 503);
        c->other += !doc;
        if (e->op == CHAOS_ACQUIRE && e->status == 503 && !strcmp(e->error, "quorum_unavailable"))
            c->unavailable++;
        if (e->op == CHAOS_ACQUIRE && e->status == 503 && !strcmp(e->error, "validity_exhausted"))
            c->exhausted++;
        c->timeouts += e->status == CHAOS_ST_TIMEOUT;
        c->connerr += e->status == CHAOS_ST_CONNERR || e->status == CHAOS_ST_BADRESP;
    }
}

static void print_counts(const char *label, const struct counts *c)
{
    printf("chaos: %s: acquire %ld (201 granted %ld, 409 conflict %ld, 503 %ld [quorum_unavailable %ld, "
           "validity_exhausted %ld], other %ld); release %ld (200 %ld, 404 %ld, 503 %ld, other %ld); "
           "inspect %ld (200 %ld, 503 %ld, other %ld); client timeouts %ld, transport errors %ld\n",
           label, c->op[0], c->by_status[0][0], c->by_status[0][2], c->by_status[0][3], c->unavailable, c->exhausted,
           c->by_status[0][1] + c->by_status[0][4] + c->by_status[0][5], c->op[1], c->by_status[1][0],
           c->by_status[1][1], c->by_status[1][3], c->by_status[1][2] + c->by_status[1][4] + c->by_status[1][5],
           c->op[2], c->by_status[2][0], c->by_status[2][3],
           c->by_status[2][1] + c->by_status[2][2] + c->by_status[2][4] + c->by_status[2][5], c->timeouts, c->connerr);
}

/* Waits until /readyz answers 200 with every master ok.  Milliseconds taken, or -1. */
static long wait_all_ready(struct chaos *cx, long max_ms, char *last, size_t lastsz)
{
    long long start = now_ms();
    while (now_ms() - start < max_ms) {
        char body[4096] = "";
        int st = http_get_status(cx, "/readyz", body, sizeof body);
        snprintf(last, lastsz, "%d %s", st, body);
        if (st == 200) {
            json_error_t jerr;
            json_t *j = json_loads(body, 0, &jerr);
            json_t *ms = json_object_get(j, "masters");
            size_t i, n_ok = 0;
            json_t *v;
            json_array_foreach(ms, i, v) n_ok += json_is_true(json_object_get(v, "ok"));
            size_t n = json_array_size(ms);
            json_decref(j);
            if (n == N_MASTERS && n_ok == N_MASTERS)
                return (long)(now_ms() - start);
        }
        if (!svc_check_alive(cx))
            return -1;
        sleep_ms(50);
    }
    return -1;
}

/* ---- directed scenarios ----------------------------------------------------------- */

/* 1 if /readyz lists master idx as ok, 0 if not, -1 without a usable answer. */
static int readyz_master_ok(struct chaos *cx, int idx)
{
    char body[4096] = "", addr[32];
    int st = http_get_status(cx, "/readyz", body, sizeof body);
    if (st != 200 && st != 503)
        return -1;
    snprintf(addr, sizeof addr, "127.0.0.1:%d", cx->m[idx].proxy_port);
    json_error_t jerr;
    json_t *j = json_loads(body, 0, &jerr);
    int ok = -1;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "masters"), i, v)
    {
        json_t *a = json_object_get(v, "address");
        if (json_is_string(a) && !strcmp(json_string_value(a), addr))
            ok = json_is_true(json_object_get(v, "ok"));
    }
    json_decref(j);
    return ok;
}

static int wait_master_ok(struct chaos *cx, int idx, int want, long max_ms)
{
    long long until = now_ms() + max_ms;
    while (now_ms() < until && !atomic_load(&cx->abort_run)) {
        if (readyz_master_ok(cx, idx) == want)
            return 0;
        sleep_ms(20);
    }
    harness_fail(cx, "scenario: /readyz did not show master %d %s within %ld ms", idx, want ? "ok" : "down", max_ms);
    return -1;
}

/* SIGKILLs master idx, waits until the service has noticed, empties it, restarts it. */
static int scenario_kill_empty(struct chaos *cx, int idx)
{
    struct master *m = &cx->m[idx];
    long rec = fault_record_open(cx, F_KILL_EMPTY);
    if (proc_stop(m->pid, SIGKILL, 5000) == -1) {
        harness_fail(cx, "master %d did not die", idx);
        return -1;
    }
    m->pid = 0;
    m->state = M_DOWN;
    cx->fault_count[F_KILL_EMPTY]++;
    fault_logf(cx, "scenario: master %d killed", idx);
    if (wait_master_ok(cx, idx, 0, 5000) < 0)
        return -1;
    if (rm_rf(m->data) < 0 || master_spawn(cx, m) < 0) {
        harness_fail(cx, "master %d would not restart empty", idx);
        return -1;
    }
    m->lost_at = now_ms();
    fault_record_close(cx, rec);
    fault_logf(cx, "scenario: master %d restarted empty", idx);
    return 0;
}

static void scenario_cut_off(struct chaos *cx, int from, int to, const char *mode)
{
    for (int i = from; i <= to; i++)
        (void)proxy_cmd(cx, "mode %d %s", i, mode);
    fault_logf(cx, "scenario: masters %d..%d %s", from, to, mode);
}

static int client_open(struct chaos *cx, struct client *cl, int thread)
{
    memset(cl, 0, sizeof *cl);
    cl->cx = cx;
    cl->thread = thread;
    cl->sched_fd = -1;
    if (http_client_init(&cl->hc, "127.0.0.1", cx->svc_port) < 0) {
        harness_fail(cx, "cannot initialise a client");
        return -1;
    }
    return 0;
}

static void client_close(struct chaos *cx, struct client *cl)
{
    http_client_free(&cl->hc);
    if (cl->sched_fd >= 0)
        close(cl->sched_fd);
    merge_local(cx, cl);
}

static void scenario_counter_loss(struct chaos *cx)
{
    struct client cl;
    char lease[129];
    int st;
    int64_t top = 0;
    if (client_open(cx, &cl, 0) < 0)
        return;
    for (int k = 0; k < 5; k++) {
        long gi = client_acquire(&cl, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, 500, 200, &st, lease);
        if (gi >= 0 && st == 201) {
            top = cl.local.ev[gi].token > top ? cl.local.ev[gi].token : top;
            client_release(&cl, gi, lease, 1);
        }
    }
    printf("chaos: scenario counter-loss: %s granted with tokens up to %" PRId64 "\n", cx->hist.names[0], top);
    for (int m = 0; m < QUORUM && !atomic_load(&cx->abort_run); m++) {
        if (scenario_kill_empty(cx, m) < 0 || wait_master_ok(cx, m, 1, cx->o.max_ttl + 15000L) < 0)
            break;
        for (int k = 0; k < 3; k++) { /* life goes on, on another name */
            long gi = client_acquire(&cl, CHAOS_ACQUIRE, 1, CHAOS_MODE_EXCLUSIVE, 500, 200, &st, lease);
            if (gi >= 0 && st == 201)
                client_release(&cl, gi, lease, 1);
        }
        printf("chaos: scenario counter-loss: master %d lost its data, sat out its quarantine, and is back\n", m);
    }
    if (!atomic_load(&cx->abort_run)) {
        scenario_cut_off(cx, QUORUM, N_MASTERS - 1, "drop");
        cx->fault_count[F_DROP]++;
        long gi = client_acquire(&cl, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, 500, 200, &st, lease);
        int64_t tok = gi >= 0 && st == 201 ? cl.local.ev[gi].token : 0;
        printf("chaos: scenario counter-loss: %s through masters 0..%d only: status %d, token %" PRId64
               " (every earlier token was <= %" PRId64 ")\n",
               cx->hist.names[0], QUORUM - 1, st, tok, top);
        if (st == 201)
            client_release(&cl, gi, lease, 1);
        scenario_cut_off(cx, QUORUM, N_MASTERS - 1, "pass");
    }
    client_close(cx, &cl);
}

/* Master idx lost its data (kill + restart with its AOF cut back to what it held before
 * the holder's grant, or FLUSHALL while it runs); returns 0, or -1 (harness failure). */
/* Sleeps until the wall clock's milliseconds are in [lo, hi). */
static void wait_subsecond(long lo, long hi)
{
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long sub = ts.tv_nsec / 1000000;
        if (sub >= lo && sub < hi)
            return;
        sleep_ms(sub < lo ? lo - sub : 1000 - sub + lo);
    }
}

static int scenario_aof_cut(struct chaos *cx, int idx)
{
    struct master *m = &cx->m[idx];
    long rec = fault_record_open(cx, F_AOF_CUT);
    master_kill(cx, m);
    cx->fault_count[F_AOF_CUT]++;
    fault_logf(cx, "scenario: master %d killed", idx);
    if (wait_master_ok(cx, idx, 0, 5000) < 0)
        return -1;
    aof_cut_apply(cx, m);
    /* The worst moment to come back: just before a wall-clock second turns.  Redis
     * reports uptime_in_seconds as a difference of whole seconds, so right after the
     * turn it says 1 while the process has run some tens of ms: a service that counts a
     * restart's delay from that number ends it up to 1 s early.  The proxy keeps the
     * service out until the master says 1, then lets it in. */
    (void)proxy_cmd(cx, "mode %d cut", idx);
    wait_subsecond(900, 950);
    long long spawned = now_ms();
    if (master_spawn(cx, m) < 0) {
        harness_fail(cx, "master %d would not restart after its AOF was cut; see %s", idx, m->log);
        return -1;
    }
    long long up = -1;
    while (now_ms() - spawned < 3000 && (up = redis_info_field(m->port, "server", "uptime_in_seconds", 1000)) < 1)
        sleep_ms(2);
    long long real = now_ms() - spawned;
    m->lost_at = spawned;
    (void)proxy_cmd(cx, "mode %d pass", idx);
    fault_record_close(cx, rec);
    fault_logf(cx, "scenario: master %d restarted with its last writes cut; let the service in when its"
                   " uptime_in_seconds said %lld after %lld ms", idx, up, real);
    printf("chaos: scenario %s: master %d restarted with its last writes cut; the service let in when it"
           " reported uptime_in_seconds %lld, %lld ms after the restart\n", cx->o.scenario, idx, up, real);
    return 0;
}

static int scenario_flushall(struct chaos *cx, int idx)
{
    long rec = fault_record_open(cx, F_FLUSHALL);
    cx->m[idx].lost_at = now_ms();
    if (master_flushall(cx, &cx->m[idx]) < 0)
        return -1;
    cx->fault_count[F_FLUSHALL]++;
    fault_record_close(cx, rec);
    fault_logf(cx, "scenario: master %d wiped (FLUSHALL), still running", idx);
    return 0;
}

/* empty-held, aof-cut-held, flushall-held: a lock held on exactly masters 0..2, then
 * master 0 forgets it (loss: F_KILL_EMPTY, F_AOF_CUT or F_FLUSHALL); a rival must not get
 * it while the holder's validity lasts (0, 3, 4 would be a quorum if 0 counted). */
static void scenario_held(struct chaos *cx, enum fault_kind loss)
{
    struct client holder, rival;
    char hlease[129], rlease[129];
    const char *sc = cx->o.scenario;
    int st;
    if (client_open(cx, &holder, 0) < 0 || client_open(cx, &rival, 1) < 0)
        return;
    if (loss == F_AOF_CUT && aof_record(&cx->m[0]) < 0) { /* before the holder's write */
        harness_fail(cx, "scenario %s: no incr AOF found for master 0", sc);
        goto out;
    }
    /* aof-cut-held: grant at .6 s of a wall-clock second, kill and cut at once, restart
     * at .9 s (see scenario_aof_cut): a delay counted from uptime_in_seconds then ends
     * ~1 s early while the holder's key, written ~0.3 s before the restart, still lives */
    if (loss == F_AOF_CUT)
        wait_subsecond(600, 650);
    /* the holder's keys go to masters 0..2 only: 3 and 4 never see its script */
    scenario_cut_off(cx, QUORUM, N_MASTERS - 1, "drop");
    cx->fault_count[F_DROP]++;
    /* a warm-up client may have left the name to expire (ttl <= 400 ms): wait it out */
    long hi = client_acquire(&holder, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, cx->o.max_ttl, 0, &st, hlease);
    for (int k = 0; k < 20 && hi >= 0 && st == 409; k++) {
        sleep_ms(100);
        hi = client_acquire(&holder, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, cx->o.max_ttl, 0, &st, hlease);
    }
    scenario_cut_off(cx, QUORUM, N_MASTERS - 1, "pass");
    if (hi < 0 || st != 201) {
        harness_fail(cx, "scenario %s: the holder got status %d, not a grant", sc, st);
        goto out;
    }
    int64_t until = holder.local.ev[hi].t_send + (holder.local.ev[hi].validity_ms - 20) * 1000000LL;
    printf("chaos: scenario %s: %s held with token %" PRId64 " for %" PRId64 " ms on masters 0..%d\n", sc,
           cx->hist.names[0], holder.local.ev[hi].token, holder.local.ev[hi].validity_ms, QUORUM - 1);
    /* the rival needs 3 and 4 back (the service reconnects after the drop); aof-cut-held
     * waits for them after the restart instead, so the restart comes soon after the grant */
    for (int i = QUORUM; i < N_MASTERS && loss != F_AOF_CUT; i++)
        if (wait_master_ok(cx, i, 1, 5000) < 0)
            goto out;
    const char *how = "restarted empty";
    if (loss == F_AOF_CUT) {
        if (scenario_aof_cut(cx, 0) < 0)
            goto out;
        how = "restarted with its last writes cut";
        printf("chaos: scenario %s: the restart came %lld ms after the holder's grant\n", sc,
               cx->m[0].lost_at - holder.local.ev[hi].t_recv / 1000000);
        for (int i = QUORUM; i < N_MASTERS; i++)
            if (wait_master_ok(cx, i, 1, 5000) < 0)
                goto out;
        /* the cut must have taken the holder's key with it, or this proves nothing */
        char key[128], reply[64];
        snprintf(key, sizeof key, "EXISTS redlock:%s", cx->hist.names[0]);
        if (redis_command(cx->m[0].port, key, reply, sizeof reply, 2000) == 0 && !strcmp(reply, ":1")) {
            harness_fail(cx, "scenario %s: master 0 still has the holder's key after the cut", sc);
            goto out;
        }
    } else if (loss == F_FLUSHALL) {
        if (scenario_flushall(cx, 0) < 0)
            goto out;
        how = "was wiped by FLUSHALL";
    } else if (scenario_kill_empty(cx, 0) < 0) {
        goto out;
    }
    long tries = 0, grants = 0, first_after_ms = -1;
    int64_t lost_at = cx->m[0].lost_at * 1000000LL; /* the restart, or the wipe */
    while (http_now_ns() < until && !atomic_load(&cx->abort_run)) {
        long gi = client_acquire(&rival, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, 500, 0, &st, rlease);
        tries++;
        if (gi >= 0 && st == 201) {
            if (!grants++)
                first_after_ms = (long)((rival.local.ev[gi].t_recv - lost_at) / 1000000);
            client_release(&rival, gi, rlease, 1);
        }
        sleep_ms(20);
    }
    printf("chaos: scenario %s: a rival tried %ld times during the holder's validity and was granted %ld"
           " times%s\n",
           sc, tries, grants, grants ? " (a double grant: see (a))" : "");
    if (grants)
        printf("chaos: scenario %s: the first rival grant came %ld ms after master 0 %s\n", sc, first_after_ms, how);
    client_release(&holder, hi, hlease, 1);
out:
    client_close(cx, &holder);
    client_close(cx, &rival);
}

/* For each (a), (b), (j), (k) violation, the most recent data-loss fault (kill_restart_empty,
 * aof_cut, flushall) on any master that began before it, and whether that was within
 * 2 x max ttl + 2 s (what a master forgot expires within a ttl; a quarantine lasts about
 * one).  A violation with no data-loss fault before it came from the other kinds.  An
 * indication of the culprit, not a proof: a wiped fencing counter can bite much later. */
static void print_violations_by_fault(struct chaos *cx, const chaos_judge_stats *js)
{
    static const char props[] = "abjk";
    static const char *const prop_names[] = {"(a) mutual exclusion", "(b) fencing", "(j) no reader with a writer",
                                             "(k) semaphores"};
    enum { NP = sizeof props - 1 };
    long by[NP][F_NKINDS], recent[NP][F_NKINDS], none[NP] = {0}, total[NP] = {0};
    memset(by, 0, sizeof by);
    memset(recent, 0, sizeof recent);
    long long window = 2LL * cx->o.max_ttl + 2000;
    for (long i = 0; i < js->n_v; i++) {
        const char *pp = strchr(props, js->v[i].prop);
        if (!pp || !*pp)
            continue;
        int p = (int)(pp - props);
        long long t = js->v[i].t_ns / 1000000;
        long best = -1;
        for (long r = 0; r < cx->n_frec; r++)
            if (fault_table[cx->frec[r].kind].data_loss && cx->frec[r].start_ms <= t &&
                (best < 0 || cx->frec[r].start_ms > cx->frec[best].start_ms))
                best = r;
        total[p]++;
        if (best < 0) {
            none[p]++;
            continue;
        }
        by[p][cx->frec[best].kind]++;
        recent[p][cx->frec[best].kind] += t - cx->frec[best].start_ms <= window;
    }
    for (int p = 0; p < NP; p++) {
        if (!total[p])
            continue;
        printf("chaos: %s: %ld violations%s; the last data-loss fault before each:", prop_names[p], total[p],
               js->n_v == CHAOS_MAX_VIOLATIONS ? " (first recorded)" : "");
        for (int k = 0; k < F_NKINDS; k++)
            if (by[p][k])
                printf(" %s %ld (%ld within %lld ms),", fault_table[k].name, by[p][k], recent[p][k], window);
        printf(" none %ld\n", none[p]);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: chaos [options]            run the checker against bin/redlockd\n"
            "       chaos --judge HISTORY.tsv  judge a saved history again\n"
            "  --service PATH         redlockd binary (bin/redlockd)\n"
            "  --proxy PATH           faultproxy binary (next to this program)\n"
            "  --duration S           length of the fault phase in seconds (30)\n"
            "  --clients N            client threads taking exclusive locks (8)\n"
            "  --shared-clients N     more client threads taking shared locks on the same names (3)\n"
            "  --sem-clients N        more client threads taking semaphore permits (4)\n"
            "  --stream-clients N     more client threads holding with hold=stream: an exclusive\n"
            "                         lock half the time, else a shared lock or a permit (3)\n"
            "  --names N              hot lock names (4)\n"
            "  --cold-names N         names picked by 2%% of requests only (4)\n"
            "  --sem-names N          semaphore names (2)\n"
            "  --permits N            permits of the first semaphore; the i-th has N + i (2)\n"
            "  --node-timeout-ms MS   the service's node timeout, also used by verdict (c) (50)\n"
            "  --margin-ms MS         allowance added to every latency bound (250)\n"
            "  --data-loss auto|on|off  faults that lose acknowledged writes too:\n"
            "                         kill_restart_empty, aof_cut, flushall (auto: on iff the\n"
            "                         service has --quarantine-ms); --empty-restarts is a synonym\n"
            "  --faults K1,K2,...     deal only these kinds (freeze_minority, freeze_majority,\n"
            "                         kill_restart_aof, kill_restart_empty, slow, drop, cut,\n"
            "                         aof_cut, flushall; '-' for '_' is fine); all by default\n"
            "  --retention-ms MS      the service's --retention-ms (fencing counters expire);\n"
            "                         default 2 x max ttl if it has the flag; 0: don't pass it\n"
            "  --seed N               fault schedule and client choices (random)\n"
            "  --service-arg ARG      one more argument for redlockd (repeatable)\n"
            "  --fd-slack N           fds allowed above baseline after the run (8)\n"
            "  --rss-slack-kb KB, --rss-slack-pct P  RSS allowed above baseline: the larger (16384, 25);\n"
            "                         not judged for an ASan build (LeakSanitizer at exit instead) or a TSan one\n"
            "  --dir-root PATH        where the run directory goes (/dev/shm if writable, else /tmp)\n"
            "  --keep                 keep the run directory even if every property held\n"
            "  --tls                  masters serve TLS (a CA and certificates made by openssl,\n"
            "                         tls-auth-clients yes); the service reaches them with rediss://\n"
            "  --discard              remove it even if a property failed (planted failures)\n"
            "  --scenario NAME        a directed scenario instead of the random run:\n"
            "     empty-held    a lock is held on masters 0-2 (3,4 cut off); master 0 restarts\n"
            "                   empty; a rival tries all through the holder's validity: it must\n"
            "                   never get the lock (issue 4 part 2)\n"
            "     aof-cut-held  the same (ttl 6000), but master 0 restarts with its AOF cut back\n"
            "                   to what it held just before the holder's grant (its marker\n"
            "                   survives), ~0.3 s after it, just before a wall-clock second\n"
            "                   turns (uptime_in_seconds then overstates its uptime by ~0.9 s)\n"
            "     flushall-held the same, but master 0 gets FLUSHALL and keeps running\n"
            "     counter-loss  masters 0, 1, 2 lose their data one after another (each\n"
            "                   quarantined and readmitted); then a grant through masters 0-2\n"
            "                   only must still get a fencing token above every earlier one\n");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* "aof_cut,flushall" (or "aof-cut,...") into a mask of fault kinds. */
static int parse_faults(const char *v, unsigned *mask)
{
    *mask = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *p = buf; *p; p++)
        if (*p == '-')
            *p = '_';
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < F_NKINDS && strcmp(fault_table[k].name, t) != 0)
            k++;
        if (k == F_NKINDS) {
            fprintf(stderr, "chaos: unknown fault kind '%s' in --faults\n", t);
            return -1;
        }
        *mask |= 1u << k;
    }
    if (!*mask) {
        fprintf(stderr, "chaos: --faults needs at least one kind\n");
        return -1;
    }
    return 0;
}

static int judge_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "chaos: cannot open %s: %s\n", path, strerror(errno));
        return 2;
    }
    chaos_history h;
    memset(&h, 0, sizeof h);
    chaos_judge_opts o;
    int rc = chaos_history_load(&h, &o, f);
    fclose(f);
    if (rc < 0) {
        fprintf(stderr, "chaos: %s: not a chaos history\n", path);
        chaos_history_free(&h);
        return 2;
    }
    long v = chaos_judge_mutex(&h, &o, stdout);
    chaos_judge_mutex_client_view(&h, &o, stdout);
    v += chaos_judge_fencing(&h, &o, stdout);
    v += chaos_judge_latency(&h, &o, stdout);
    v += chaos_judge_status(&h, &o, stdout);
    v += chaos_judge_streams(&h, &o, stdout);
    v += chaos_judge_shared(&h, &o, stdout);
    v += chaos_judge_semaphores(&h, &o, stdout);
    chaos_history_free(&h);
    return v ? 1 : 0;
}

static int parse_args(struct chaos *cx, int argc, char **argv, const char **judge)
{
    struct options *o = &cx->o;
    o->service_bin = "bin/redlockd";
    o->duration_s = 30;
    o->clients = 8;
    o->shared_clients = 3;
    o->sem_clients = 4;
    o->stream_clients = 3;
    o->names = 4;
    o->sem_names = 2;
    o->permits = 2;
    o->cold_names = 4;
    o->node_timeout_ms = 50;
    o->margin_ms = 250;
    o->data_loss = -1;
    o->fault_mask = (1u << F_NKINDS) - 1;
    o->retention_ms = -1;
    o->seed = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
    o->fd_slack = 8;
    o->rss_slack_kb = 16384;
    o->rss_slack_pct = 25;
    o->min_ttl = 200;
    o->max_ttl = 1000;
    o->max_wait = 200;
    o->max_hold = 60;
    o->warmup_ms = 1500;
    o->cooldown_ms = 1500;
    o->dir_root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    const char *tmp = getenv("CHAOS_DIR_ROOT");
    if (tmp && *tmp)
        o->dir_root = tmp;

    /* default proxy: next to this program */
    char self[PATH_MAX - 32];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl > 0) {
        self[sl] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(o->proxy_bin, sizeof o->proxy_bin, "%s/faultproxy", self);
    }

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
#define NEED_VALUE                                                                                                     \
    do {                                                                                                               \
        if (!v) {                                                                                                      \
            fprintf(stderr, "chaos: %s needs a value\n", a);                                                          \
            return -1;                                                                                                 \
        }                                                                                                              \
        i++;                                                                                                           \
    } while (0)
#define INT_OPT(flag, lo, hi, dst)                                                                                     \
    if (!strcmp(a, flag)) {                                                                                            \
        NEED_VALUE;                                                                                                    \
        if (parse_int(v, lo, hi, &n) < 0) {                                                                            \
            fprintf(stderr, "chaos: bad %s '%s' (%ld..%ld)\n", a, v, (long)(lo), (long)(hi));                          \
            return -1;                                                                                                 \
        }                                                                                                              \
        dst = n;                                                                                                       \
        continue;                                                                                                      \
    }
        INT_OPT("--duration", 1, 86400, o->duration_s)
        INT_OPT("--clients", 1, MAX_CLIENTS, o->clients)
        INT_OPT("--stream-clients", 0, MAX_CLIENTS, o->stream_clients)
        INT_OPT("--shared-clients", 0, MAX_CLIENTS, o->shared_clients)
        INT_OPT("--sem-clients", 0, MAX_CLIENTS, o->sem_clients)
        INT_OPT("--sem-names", 0, 8, o->sem_names)
        INT_OPT("--permits", 1, 1000, o->permits)
        INT_OPT("--names", 1, 26, o->names)
        INT_OPT("--cold-names", 0, 26, o->cold_names)
        INT_OPT("--node-timeout-ms", 1, 60000, o->node_timeout_ms)
        INT_OPT("--margin-ms", 0, 600000, o->margin_ms)
        INT_OPT("--fd-slack", 0, 100000, o->fd_slack)
        INT_OPT("--rss-slack-kb", 0, 100000000, o->rss_slack_kb)
        INT_OPT("--rss-slack-pct", 0, 10000, o->rss_slack_pct)
        if (!strcmp(a, "--seed")) {
            NEED_VALUE;
            char *end;
            o->seed = strtoull(v, &end, 10);
            if (*end || end == v) {
                fprintf(stderr, "chaos: bad --seed '%s'\n", v);
                return -1;
            }
            continue;
        }
        if (!strcmp(a, "--service")) {
            NEED_VALUE;
            o->service_bin = v;
            continue;
        }
        if (!strcmp(a, "--proxy")) {
            NEED_VALUE;
            snprintf(o->proxy_bin, sizeof o->proxy_bin, "%s", v);
            continue;
        }
        if (!strcmp(a, "--dir-root")) {
            NEED_VALUE;
            o->dir_root = v;
            continue;
        }
        if (!strcmp(a, "--judge")) {
            NEED_VALUE;
            *judge = v;
            continue;
        }
        if (!strcmp(a, "--service-arg")) {
            NEED_VALUE;
            if (o->n_extra == MAX_EXTRA_ARGS) {
                fprintf(stderr, "chaos: too many --service-arg\n");
                return -1;
            }
            o->extra_args[o->n_extra++] = v;
            continue;
        }
        if (!strcmp(a, "--data-loss") || !strcmp(a, "--empty-restarts")) {
            NEED_VALUE;
            if (!strcmp(v, "auto"))
                o->data_loss = -1;
            else if (!strcmp(v, "on"))
                o->data_loss = 1;
            else if (!strcmp(v, "off"))
                o->data_loss = 0;
            else {
                fprintf(stderr, "chaos: bad %s '%s' (auto, on, off)\n", a, v);
                return -1;
            }
            continue;
        }
        if (!strcmp(a, "--faults")) {
            NEED_VALUE;
            if (parse_faults(v, &o->fault_mask) < 0)
                return -1;
            o->faults_given = 1;
            continue;
        }
        if (!strcmp(a, "--retention-ms")) {
            NEED_VALUE;
            if (parse_int(v, 0, 1000L * 86400 * 365, &n) < 0) {
                fprintf(stderr, "chaos: bad --retention-ms '%s'\n", v);
                return -1;
            }
            o->retention_ms = n;
            continue;
        }
        if (!strcmp(a, "--scenario")) {
            NEED_VALUE;
            if (strcmp(v, "counter-loss") != 0 && strcmp(v, "empty-held") != 0 && strcmp(v, "aof-cut-held") != 0 &&
                strcmp(v, "flushall-held") != 0) {
                fprintf(stderr, "chaos: unknown --scenario '%s' (counter-loss, empty-held, aof-cut-held,"
                                " flushall-held)\n", v);
                return -1;
            }
            o->scenario = v;
            if (strstr(v, "-held")) /* the holder's ttl must outlast a kill, restart and reconnect */
                o->max_ttl = !strcmp(v, "aof-cut-held") ? 6000 : 4000;
            continue;
        }
        if (!strcmp(a, "--keep")) {
            o->keep = 1;
            continue;
        }
        if (!strcmp(a, "--tls")) {
            o->tls = 1;
            continue;
        }
        if (!strcmp(a, "--discard")) {
            o->discard = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        fprintf(stderr, "chaos: unknown option '%s'\n", a);
        usage(stderr);
        return -1;
    }
    if (o->seed == 0)
        o->seed = 1;
    if (o->sem_clients && !o->sem_names) {
        fprintf(stderr, "chaos: --sem-clients needs --sem-names >= 1\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct chaos cxs; /* large; main owns it and passes it down */
    struct chaos *cx = &cxs;
    const char *judge = NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(cx, argc, argv, &judge) < 0)
        return 2;
    if (judge)
        return judge_file(judge);

    struct options *o = &cx->o;
    pthread_mutex_init(&cx->proxy_mu, NULL);
    pthread_mutex_init(&cx->err_mu, NULL);
    pthread_mutex_init(&cx->svc_mu, NULL);
    for (int i = 0; i < o->names; i++)
        snprintf(cx->hist.names[i], sizeof cx->hist.names[0], "chaos:%c", 'a' + i);
    for (int i = 0; i < o->cold_names; i++)
        snprintf(cx->hist.names[o->names + i], sizeof cx->hist.names[0], "chaos:cold-%c", 'a' + i);
    for (int i = 0; i < o->sem_names; i++) {
        int k = o->names + o->cold_names + i;
        snprintf(cx->hist.names[k], sizeof cx->hist.names[0], "chaos:sem-%c", 'a' + i);
        cx->hist.permits[k] = o->permits + i;
    }
    cx->hist.n_names = o->names + o->cold_names + o->sem_names;

    if (access(o->service_bin, X_OK) != 0) {
        fprintf(stderr, "chaos: %s is not an executable (build it with `make`)\n", o->service_bin);
        return 3;
    }
    FILE *exe = fopen(o->service_bin, "re");
    if (exe) {
        cx->svc_san = chaos_sanitizers_in(exe);
        fclose(exe);
    }
    /* (f) judges an AddressSanitizer build's leaks by LeakSanitizer's report at exit:
     * make sure it runs whatever ASAN_OPTIONS says (the last setting wins) */
    if (cx->svc_san & CHAOS_SAN_ADDRESS) {
        const char *prev = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%sdetect_leaks=1", prev ? prev : "", prev && *prev ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
    }
    if (access(o->proxy_bin, X_OK) != 0) {
        fprintf(stderr, "chaos: fault proxy %s is not an executable\n", o->proxy_bin);
        return 3;
    }
    if (find_executable("redis-server", cx->redis_bin, sizeof cx->redis_bin) < 0) {
        fprintf(stderr, "chaos: redis-server not found on PATH\n");
        return 3;
    }
    if (strlen(o->dir_root) > 160) {
        fprintf(stderr, "chaos: --dir-root too long (the proxy's unix socket goes under it)\n");
        return 2;
    }
    snprintf(cx->dir, sizeof cx->dir, "%s/redlockd-chaos.XXXXXX", o->dir_root);
    if (!mkdtemp(cx->dir)) {
        fprintf(stderr, "chaos: mkdtemp under %s: %s\n", o->dir_root, strerror(errno));
        return 3;
    }

    /* everything this program starts dies with it, and it dies by itself past its budget */
    g_for_signals = cx;
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)o->duration_s + 180);

    cx->t0 = http_now_ns();
    long long t_start = now_ms();
    char fpath[300];
    snprintf(fpath, sizeof fpath, "%.255s/faults.log", cx->dir);
    cx->fault_log = fopen(fpath, "we");

    /* Faults that lose acknowledged writes (an empty restart, a cut AOF, FLUSHALL) can
     * only be survived by a service that keeps such a master out of quorums until every
     * lock it may have forgotten has expired; a service without --quarantine-ms makes no
     * such claim, so under auto they are dealt only to one that has it.  Asking for a kind
     * by name (--faults) deals it whatever the service claims. */
    service_probe_flags(cx);
    if (o->data_loss < 0 && o->faults_given) {
        for (int k = 0; k < F_NKINDS; k++)
            if ((o->fault_mask & (1u << k)) && fault_table[k].data_loss)
                o->data_loss = 1;
    }
    if (o->data_loss >= 0) {
        cx->data_loss_on = o->data_loss;
        snprintf(cx->data_loss_reason, sizeof cx->data_loss_reason, "%s%s", cx->data_loss_on ? "on" : "off",
                 cx->data_loss_on && !cx->quarantine_flag ? " (the service has no --quarantine-ms, so a double"
                                                            " grant through a master that lost data is possible)"
                                                          : "");
    } else {
        cx->data_loss_on = cx->quarantine_flag;
        snprintf(cx->data_loss_reason, sizeof cx->data_loss_reason, "%s (auto: the service %s --quarantine-ms)",
                 cx->data_loss_on ? "on" : "off", cx->quarantine_flag ? "has" : "lacks");
    }
    int n_kinds = 0;
    char kinds[256] = "";
    for (int k = 0, off = 0; k < F_NKINDS; k++)
        if (kind_enabled(cx, k)) {
            n_kinds++;
            off += snprintf(kinds + off, sizeof kinds - (size_t)off, "%s%s", off ? "," : "", fault_table[k].name);
        }
    if (!o->scenario && n_kinds == 0) {
        fprintf(stderr, "chaos: no fault kind left to deal (--faults and --data-loss off)\n");
        rm_rf(cx->dir);
        return 2;
    }
    cx->frec = calloc(MAX_FAULT_RECORDS, sizeof *cx->frec);
    cx->quarantine_ms = cx->quarantine_flag ? o->max_ttl : 0;
    for (int i = 0; i < o->n_extra; i++) {
        const char *a = o->extra_args[i];
        if (!strncmp(a, "--quarantine-ms=", 16))
            cx->quarantine_ms = strtol(a + 16, NULL, 10);
        else if (!strcmp(a, "--quarantine-ms") && i + 1 < o->n_extra)
            cx->quarantine_ms = strtol(o->extra_args[i + 1], NULL, 10);
    }
    if (o->scenario)
        printf("chaos: scenario %s, max ttl %d ms, the service %s --quarantine-ms\n", o->scenario, o->max_ttl,
               cx->quarantine_flag ? "has" : "lacks");
    else
        printf("chaos: seed %" PRIu64 ", %d s of faults, %d exclusive + %d shared clients + %d streamed holders on %d hot + %d cold names,"
               " %d permit clients on %d semaphores (%d%s permits), ttl %d..%d ms, wait 0..%d ms, "
               "node timeout %d ms, data-loss faults %s\n",
               o->seed, o->duration_s, o->clients, o->shared_clients, o->stream_clients, o->names, o->cold_names,
               o->sem_clients, o->sem_names, o->permits, o->sem_names > 1 ? "+i" : "", o->min_ttl, o->max_ttl,
               o->max_wait, o->node_timeout_ms, cx->data_loss_reason);
    if (!o->scenario)
        printf("chaos: fault kinds dealt: %s\n", kinds);
    if (extra_has(cx, "--trust-fsync-always") && !o->scenario && kind_enabled(cx, F_AOF_CUT))
        printf("chaos: note: --trust-fsync-always readmits a restarted appendfsync-always master at once; aof_cut"
               " breaks that trust (fsynced writes lost), so a double grant is then expected\n");
    if (cx->svc_san)
        printf("chaos: redlockd build: %s (read from its binary); %s\n", chaos_sanitizer_names(cx->svc_san),
               cx->svc_san & CHAOS_SAN_ADDRESS  ? "(f) judges leaks by LeakSanitizer at exit, not RSS growth"
               : cx->svc_san & CHAOS_SAN_THREAD ? "(f) judges fds only, not RSS growth"
                                                : "the allocator is the default one, (f) judges RSS as usual");
    printf("chaos: run directory %s\n", cx->dir);

    int exit_code = 0;
    int harness_broken = 0;
    struct monitor mo = {.cx = cx};
    starve_sampler *starve = NULL;
    pthread_t mon_th = 0, inj_th = 0;
    int base_fds = -1, end_fds = -1;
    long base_rss = -1, end_rss = -1;
    long fault_from = 0, fault_to = 0, cool_from = 0;
    long ready_ms = -1;
    char ready_last[4200] = "";
    int stop_status = -1;
    long long stop_ms = -1;
    off_t log_at_stop = -1; /* the service's log size when it was sent SIGTERM */

    if (masters_start(cx) < 0 || proxy_start(cx) < 0 || service_start(cx) < 0) {
        harness_broken = 1;
        goto cleanup;
    }
    printf("chaos: masters on ports");
    for (int i = 0; i < N_MASTERS; i++)
        printf(" %d(via %d)", cx->m[i].port, cx->m[i].proxy_port);
    printf(", redlockd pid %d on 127.0.0.1:%d\n", (int)cx->svc_pid, cx->svc_port);
    printf("chaos: redlockd flags: %s\n", cx->svc_flags);
    if (pthread_create(&mon_th, NULL, monitor_main, &mo) != 0) {
        harness_broken = 1;
        goto cleanup;
    }
    starve = starve_sampler_new(cx->svc_pid, 10);
    if (!starve)
        printf("chaos: note: no /proc schedstat here: latency bounds get no starvation allowance\n");

    /* warm-up without faults; then the baseline for (f) with our connections closed */
    run_clients(cx, o->warmup_ms, 1);
    settle_reading(cx, &base_fds, &base_rss, -1, 3000);

    fault_from = cx->hist.n;
    if (o->scenario) {
        if (!strcmp(o->scenario, "counter-loss"))
            scenario_counter_loss(cx);
        else if (!strcmp(o->scenario, "aof-cut-held"))
            scenario_held(cx, F_AOF_CUT);
        else if (!strcmp(o->scenario, "flushall-held"))
            scenario_held(cx, F_FLUSHALL);
        else
            scenario_held(cx, F_KILL_EMPTY);
        fault_to = cx->hist.n;
        heal_all(cx);
    } else {
        cx->run_end_ms = now_ms() + (long long)o->duration_s * 1000;
        if (pthread_create(&inj_th, NULL, injector_main, cx) != 0) {
            harness_broken = 1;
            goto cleanup;
        }
        run_clients(cx, (long)o->duration_s * 1000, 2);
        fault_to = cx->hist.n;
        atomic_store(&cx->injector_stop, 1);
        while (!atomic_load(&cx->injector_healed) && !atomic_load(&cx->abort_run))
            sleep_ms(10);
    }

    /* recovery: every master back in /readyz (a quarantine may hold one out a while) */
    if (!atomic_load(&cx->abort_run))
        ready_ms = wait_all_ready(cx, o->max_ttl + 15000, ready_last, sizeof ready_last);
    cool_from = cx->hist.n;
    if (!atomic_load(&cx->abort_run))
        run_clients(cx, o->cooldown_ms, 3);
    starve_sampler_stop(starve);
    if (cx->svc_pid > 0)
        settle_reading(cx, &end_fds, &end_rss, base_fds + o->fd_slack, 8000);
    atomic_store(&mo.stop, 1);
    pthread_join(mon_th, NULL);
    mon_th = 0;
    svc_check_alive(cx);
    if (cx->svc_pid > 0) {
        struct stat lst;
        log_at_stop = stat(cx->svc_log, &lst) == 0 ? lst.st_size : 0;
        long long t = now_ms();
        stop_status = proc_stop(cx->svc_pid, SIGTERM, 10000);
        stop_ms = now_ms() - t;
        cx->svc_pid = 0;
    }

cleanup:
    if (mon_th) {
        atomic_store(&mo.stop, 1);
        pthread_join(mon_th, NULL);
    }
    if (cx->svc_pid > 0) {
        proc_stop(cx->svc_pid, SIGKILL, 5000);
        cx->svc_pid = 0;
    }
    if (inj_th) {
        /* let it finish healing (bounded: each restart waits at most 10 s) so no
         * restart races the kills below */
        atomic_store(&cx->injector_stop, 1);
        long long until = now_ms() + 60000;
        while (!atomic_load(&cx->injector_healed) && now_ms() < until)
            sleep_ms(10);
    }
    for (int i = 0; i < N_MASTERS; i++) {
        if (cx->m[i].pid > 0) {
            proc_stop(cx->m[i].pid, SIGKILL, 5000);
            cx->m[i].pid = 0;
        }
    }
    if (inj_th) {
        atomic_store(&cx->injector_exit, 1);
        pthread_join(inj_th, NULL);
    }
    if (cx->proxy_pid > 0) {
        proc_stop(cx->proxy_pid, SIGTERM, 3000);
        cx->proxy_pid = 0;
    }
    if (cx->fault_log)
        fclose(cx->fault_log);
    alarm(0);

    if (harness_broken) {
        starve_sampler_free(starve);
        printf("chaos: HARNESS ERROR: setup failed; run directory kept: %s\n", cx->dir);
        chaos_history_free(&cx->hist);
        free(cx->frec);
        return 3;
    }

    /* ---- verdicts ---- */
    starve_sampler_stop(starve);
    for (long i = 0; i < cx->hist.n; i++) {
        chaos_event *e = &cx->hist.ev[i];
        e->allow_ns += starve_sampler_max_delay(starve, e->t_send, e->t_recv);
    }
    starve_sampler_free(starve);
    starve = NULL;
    chaos_judge_opts jo;
    chaos_judge_opts_default(&jo);
    jo.node_timeout_ms = o->node_timeout_ms;
    jo.margin_ms = o->margin_ms;
    jo.t0 = cx->t0;
    static chaos_judge_stats js;
    jo.stats = &js;
    char hpath[300];
    snprintf(hpath, sizeof hpath, "%.255s/history.tsv", cx->dir);
    FILE *hf = fopen(hpath, "we");
    if (!hf || chaos_history_save(&cx->hist, &jo, hf) < 0)
        fprintf(stderr, "chaos: cannot write %s\n", hpath);
    if (hf)
        fclose(hf);

    char failed[64] = "";
    int shutdown_judged = 0;
    if (chaos_judge_mutex(&cx->hist, &jo, stdout))
        strcat(failed, " (a)");
    chaos_judge_mutex_client_view(&cx->hist, &jo, stdout);
    if (chaos_judge_fencing(&cx->hist, &jo, stdout))
        strcat(failed, " (b)");
    if (chaos_judge_latency(&cx->hist, &jo, stdout))
        strcat(failed, " (c)");
    if (chaos_judge_status(&cx->hist, &jo, stdout))
        strcat(failed, " (d)");
    if (chaos_judge_streams(&cx->hist, &jo, stdout))
        strcat(failed, " (i)");
    if (chaos_judge_shared(&cx->hist, &jo, stdout))
        strcat(failed, " (j)");
    if (chaos_judge_semaphores(&cx->hist, &jo, stdout))
        strcat(failed, " (k)");

    if (cx->svc_exited) {
        int st = cx->svc_status;
        printf("chaos: FAIL (e) service alive: redlockd exited at %.3f s (%s %d); log tail:\n",
               rel_s(cx, cx->svc_exit_ms), WIFSIGNALED(st) ? "signal" : "status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        fflush(stdout);
        print_log_tail(cx->svc_log, 15);
        strcat(failed, " (e)");
    } else {
        printf("chaos: PASS (e) service alive: redlockd never exited during the run\n");
        shutdown_judged = 1;
    }

    chaos_resources res = {.sanitizers = cx->svc_san,
                           .base_fds = base_fds,
                           .end_fds = end_fds,
                           .fd_slack = o->fd_slack,
                           .base_rss_kb = base_rss,
                           .end_rss_kb = end_rss,
                           .rss_slack_kb = o->rss_slack_kb,
                           .rss_slack_pct = o->rss_slack_pct,
                           .peak_fds = mo.peak_fds,
                           .peak_rss_kb = mo.peak_rss,
                           .exited = stop_status >= 0 && WIFEXITED(stop_status)};
    if (res.exited && log_at_stop >= 0)
        leak_report_since(cx->svc_log, log_at_stop, res.leak_report, sizeof res.leak_report);
    if (chaos_judge_resources(&res, stdout))
        strcat(failed, " (f)");

    if (ready_ms < 0 && cx->harness_err[0] && !cx->svc_exited)
        printf("chaos: ---- (g) recovery: not judged (the run stopped on a harness error)\n");
    else if (ready_ms >= 0)
        printf("chaos: PASS (g) recovery: /readyz reported all %d masters ok %ld ms after the faults were healed\n",
               N_MASTERS, ready_ms);
    else {
        printf("chaos: FAIL (g) recovery: /readyz did not report all masters ok within %d ms of healing; last: %.300s\n",
               o->max_ttl + 15000, ready_last);
        strcat(failed, " (g)");
    }

    if (shutdown_judged) {
        int clean = stop_status >= 0 && WIFEXITED(stop_status) && WEXITSTATUS(stop_status) == 0;
        printf("chaos: %s (h) clean shutdown: on SIGTERM redlockd stopped in %lld ms with %s %d%s\n",
               clean ? "PASS" : "FAIL", stop_ms,
               stop_status < 0 ? "no status (killed after 10 s)" : WIFSIGNALED(stop_status) ? "signal" : "exit status",
               stop_status < 0 ? -1 : WIFSIGNALED(stop_status) ? WTERMSIG(stop_status) : WEXITSTATUS(stop_status),
               clean ? "" : "; log tail:");
        if (!clean) {
            fflush(stdout);
            print_log_tail(cx->svc_log, 4);
            strcat(failed, " (h)");
        }
    }

    struct counts c;
    count_range(&cx->hist, fault_from, fault_to, &c);
    print_counts("counts under faults", &c);
    count_range(&cx->hist, cool_from, cx->hist.n, &c);
    print_counts("counts after healing", &c);
    count_range(&cx->hist, 0, cx->hist.n, &c);
    printf("chaos: totals: %ld requests, %ld grants, %ld conflicts (409), %ld 503s, %ld other (status outside"
           " the documented set, client timeouts, transport errors); streams: %ld asked, %ld granted, %ld extended,"
           " %ld lost (%ld late), %ld released, %ld closed by their client, %ld ended without a final line\n",
           c.requests, c.by_status[0][0], c.by_status[0][2], c.by_status[0][3] + c.by_status[1][3] + c.by_status[2][3],
           c.other, c.streams, js.streams, js.extended, js.lost, js.late_lost, js.released, js.closed, js.cut);
    char most[512] = "";
    for (int k = 0, off = 0; k < cx->hist.n_names && off < (int)sizeof most; k++)
        if (cx->hist.permits[k] > 0)
            off += snprintf(most + off, sizeof most - (size_t)off, "%s%s %ld of %d", off ? ", " : "",
                            cx->hist.names[k], js.max_permits[k], cx->hist.permits[k]);
    printf("chaos: totals of the new primitives: shared locks: %ld asked, %ld granted (%ld streamed), up to %ld readers"
           " of one name at once, %ld reader holds begun beside another reader, %ld beside a writer; semaphores: %ld"
           " asked, %ld permits granted (%ld streamed), most holders at once: %s; %ld above N\n",
           c.shared, js.shared_grants, js.shared_streams, js.max_readers, js.readers_together, js.reader_writer,
           c.permits, js.sem_grants, js.sem_streams, most[0] ? most : "no semaphores", js.sem_over);
    long total_faults = 0;
    int missing = 0;
    printf("chaos: faults injected:");
    for (int k = 0; k < F_NKINDS; k++) {
        printf(" %s %ld%s", fault_table[k].name, cx->fault_count[k], k + 1 < F_NKINDS ? "," : "");
        total_faults += cx->fault_count[k];
        if (cx->fault_count[k] == 0 && kind_enabled(cx, k) && !o->scenario)
            missing = 1;
    }
    printf(" (total %ld); timeline in %s/faults.log\n", total_faults, cx->dir);
    if (js.n_v)
        print_violations_by_fault(cx, &js);

    if (cx->harness_err[0]) {
        printf("chaos: HARNESS ERROR: %s\n", cx->harness_err);
        exit_code = 3;
    } else if (missing) {
        printf("chaos: HARNESS ERROR: not every enabled fault kind was injected (run longer)\n");
        exit_code = 3;
    }
    if (failed[0]) {
        printf("chaos: RESULT: FAILED%s in %.1f s; history %s/history.tsv (re-judge with --judge)\n", failed,
               (now_ms() - t_start) / 1000.0, cx->dir);
        exit_code = 1;
    } else if (!exit_code) {
        printf("chaos: RESULT: all properties held in %.1f s: %ld requests, %ld grants, %ld overlaps, %ld token"
               " inversions, %ld duplicate tokens; %ld faults:",
               (now_ms() - t_start) / 1000.0, c.requests, js.grants, js.overlaps, js.inversions, js.duplicates,
               total_faults);
        for (int k = 0, first = 1; k < F_NKINDS; k++)
            if (cx->fault_count[k] || (kind_enabled(cx, k) && !o->scenario)) {
                printf("%s %s %ld", first ? "" : ",", fault_table[k].name, cx->fault_count[k]);
                first = 0;
            }
        printf("; %ld streams granted, %ld lost (%ld late); %ld shared grants (%ld beside a writer, up to %ld readers"
               " at once); %ld permits granted (%ld above N, most at once: %s)\n",
               js.streams, js.lost, js.late_lost, js.shared_grants, js.reader_writer, js.max_readers, js.sem_grants,
               js.sem_over, most[0] ? most : "no semaphores");
    }
    if ((exit_code == 0 && !o->keep) || o->discard)
        rm_rf(cx->dir);
    else
        printf("chaos: run directory kept: %s\n", cx->dir);
    chaos_history_free(&cx->hist);
    free(cx->frec);
    return exit_code;
}
