/* chaos.c -- the redlockd safety checker: five real redis-server masters behind a fault
 * proxy, the real service, concurrent clients on a few hot names and a fault injector
 * (freeze, kill+restart with or without data, kill+restart with the last writes cut off
 * the AOF, FLUSHALL, slow, drop, cut); then one verdict line per property (judge.h) and
 * exit status 0 only if every property held.
 *
 * Exit status: 0 all held, 1 a property failed, 2 bad usage, 3 the harness itself failed
 * (a master or the proxy would not start); the run directory is kept unless all held. */
#include "clockshim.h"
#include "http.h"
#include "judge.h"
#include "procs.h"
#include "sampler.h"
#include "schedstat.h"

#include <dirent.h>
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
    F_LAG,        /* the master refuses EVALSHA (an ACL): it keeps its data, misses every grant */
    F_HDEL,       /* a fencing counter deleted by hand (HDEL on the record) */
    F_RESTORE,    /* restarted from a copy of its data taken 0.3..3 s before */
    F_COMPOUND,   /* a minority forgets while others lag, freeze or are down (see compound_*) */
    F_CLOCK_JUMP, /* the master's wall clock jumps forward (1 s .. 1 h), back to true at the heal */
    F_CLOCK_FAST, /* ... runs at 1.5x or 2x */
    F_CLOCK_BACK, /* ... steps back (1 s .. 1 h) */
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
    int clock; /* dealt only with clock faults on (--clock-faults) */
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
    [F_LAG] = {"lag", 1, 2, 300, 2000, 0},
    [F_HDEL] = {"hdel_counter", 1, 1, 300, 1500, 1},
    [F_RESTORE] = {"restore_old", 1, 1, 50, 500, 1},
    [F_COMPOUND] = {"compound", 2, 4, 0, 0, 1},
    [F_CLOCK_JUMP] = {"clock_jump", 1, 2, 300, 2000, 0, 1},
    [F_CLOCK_FAST] = {"clock_fast", 1, 2, 300, 2000, 0, 1},
    [F_CLOCK_BACK] = {"clock_back", 1, 2, 300, 2000, 0, 1},
};
#define RESTORE_MIN_AGE_MS 300 /* restore_old: the copy is taken this long before the restart, or more */
#define RESTORE_MAX_AGE_MS 3000

/* A fault kind that makes a master forget what it acknowledged (or, for a clock fault,
 * expire it early): at most a minority of masters may be in such a state at once
 * (docs/DESIGN.md section 8); compound faults and the deck keep to it, and (n) checks it. */
static int forgets(int k)
{
    return fault_table[k].data_loss || fault_table[k].clock;
}

/* A kind that takes a master out of trust (quarantined until repaired from a quorum of
 * proven peers): one that forgets, or a restart with its data.  Fewer than a quorum may be
 * out at once, or no repair can find a quorum of proven peers: two forgotten masters and a
 * third restarted with its data wait for an operator (docs/DESIGN.md section 4, Rule 5). */
static int takes_out(int k)
{
    return forgets(k) || k == F_KILL_AOF;
}
#define COMPOUND_WEIGHT 3
#define AOF_CUT_MIN_TRAFFIC_MS 100 /* traffic between recording the AOF size and the kill */
#define AOF_CUT_MAX_TRAFFIC_MS 600
#define MAX_FAULT_RECORDS 65536

enum master_state { M_UP, M_FROZEN, M_DOWN };

#define MAX_INSTANCES 2
#define MAX_HOLDERS 1
#define MAX_STOPPED 4096

/* One redlockd process. */
struct instance {
    _Atomic pid_t pid;
    int port;
    char log[300];
    int exited, status; /* under svc_mu */
    long long exit_ms;
    _Atomic int frozen; /* SIGSTOPped by a compound fault */
    _Atomic int quiet;  /* its clients send nothing (a compound fault) */
};

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
    /* restore_old: a copy of data/appendonlydir (cut at whole commands) and when it was taken */
    char snap[330];
    long long snap_at;
    int lagging;       /* its ACL refuses EVALSHA */
    int late;          /* not back in the service's quorums by recover_max: still forgetting */
    char clock[330];   /* its clockshim file (clock faults on) */
    int clock_moved;   /* its clock was moved at some point */
    long long clock_step_ms; /* how far its moved clock ran ahead (what it wrote outlives that by) */
    long long forget_since, forget_until; /* out of trust (see takes_out()) since, at least until */
    int span_forgot;                      /* ... and it forgot (see forgets()) */
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
    unsigned targets;           /* the masters it acted on (bit i) */
    int in_compound;            /* a step of a compound fault */
};

/* A stretch of time in which master `master` counted as forgetting, for (n). */
struct forget_span {
    int master;
    long long from, to;
    int forgot; /* it forgot; else it restarted with its data */
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
    int instances;        /* service instances (1 or 2) */
    int stopped_holders;  /* -1 auto (on iff the service answers a duplex hold), 0 off, 1 on */
    int clock_faults;     /* -1 auto (on iff the service has a clock check), 0 off, 1 on */
    const char *clockshim;
    int sample_ms;        /* (l): a pass over the masters every sample_ms */
    long mark_bound_ms;   /* (l): how long a writer mark may outlive its writer */
    int own_lease_pct, reentrant_pct, hangup_pct, hot_share;
    int expect_double_grant; /* a control: the double grant must be found, and that passes */
    int compound;            /* deal compound faults */
    int compound_weight;     /* ... that many times per deck (1..COMPOUND_WEIGHT) */
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
    struct instance svc[MAX_INSTANCES]; /* svc[0]: the service judged by (f); svc[1]: a second
                                         instance on the same masters (--instances 2) */
    int n_svc;
    int quarantine_flag; /* the service has --quarantine-ms */
    int retention_flag;  /* ... --retention-ms (the issue-10 build) */
    int trust_fsync_flag; /* ... --trust-fsync-always */
    int data_loss_on;
    long quarantine_ms; /* what the service was told (or defaults to); 0 without the flag */
    char data_loss_reason[192];
    char svc_flags[256]; /* the flags the checker chose, for the report */
    unsigned svc_san;    /* CHAOS_SAN_* the service binary was built with */

    /* compound faults: what was dealt (the fault records have when) */
    long compound_n, compound_forget[F_NKINDS], compound_impair[F_NKINDS], compound_two, compound_y,
        compound_quiet, compound_all_quiet, compound_full, compound_down, compound_forget_first, compound_skipped;
    long fault_in_compound[F_NKINDS];
    struct forget_span *fspan; /* the injector's, read by main after it */
    long n_fspan;
    int clock_on, clock_check; /* clock faults dealt; the service checks clocks */
    /* (l) what the sampler saw, the pauses (frozen masters and instances) */
    chaos_obs_set obs;
    pthread_mutex_t obs_mu;
    /* (m) stopped holders */
    _Atomic pid_t holder_pid[MAX_HOLDERS];
    chaos_stopped *stopped;
    long n_stopped;
    int duplex; /* the service answered a duplex hold (101) */
    atomic_long reentry_holds_below, reentry_token_above; /* re-entries answered so (see client_reentrant) */
    char holder_bin[PATH_MAX];

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

    pthread_mutex_t svc_mu; /* guards each instance's exited, status, exit_ms */
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
    for (int k = 0; k < MAX_INSTANCES; k++)
        if (cx->svc[k].pid > 0)
            kill(cx->svc[k].pid, SIGKILL);
    for (int k = 0; k < MAX_HOLDERS; k++)
        if (cx->holder_pid[k] > 0)
            kill(cx->holder_pid[k], SIGKILL);
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
    /* clock faults: every master runs under the clock shim, each with a file of its own */
    extern char **environ;
    char pre[PATH_MAX + 16], file[400];
    char *envp[256];
    int ne = 0;
    if (cx->clock_on) {
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", cx->o.clockshim);
        snprintf(file, sizeof file, "CLOCKSHIM_FILE=%s", m->clock);
        envp[ne++] = pre;
        envp[ne++] = file;
        for (char **e = environ; *e && ne < 254; e++)
            if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "CLOCKSHIM_FILE=", 15) != 0)
                envp[ne++] = *e;
        envp[ne] = NULL;
    }
    pid_t pid = proc_spawn_env(cx->redis_bin, argv, cx->clock_on ? envp : NULL, m->log, NULL);
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
        snprintf(m->snap, sizeof m->snap, "%s/snap", m->dir);
        snprintf(m->clock, sizeof m->clock, "%s/clock", m->dir);
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
        /* the clock check of issue 28 comes with options named after it */
        cx->clock_check |= !strncmp(word, "--", 2) && strstr(word, "clock") != NULL;
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

/* GET path from instance k (a frozen one is not asked: -1). */
static int http_get_status_on(struct chaos *cx, int k, const char *path, char *body, size_t bodysz)
{
    http_client hc;
    if (atomic_load(&cx->svc[k].frozen) || http_client_init(&hc, "127.0.0.1", cx->svc[k].port) < 0)
        return -1;
    http_response r;
    int64_t ts, tr;
    int st = http_request(&hc, "GET", path, NULL, "chaos-probe", 2000, &r, &ts, &tr);
    if (st > 0 && body)
        snprintf(body, bodysz, "%s", r.body ? r.body : "");
    http_client_free(&hc);
    return st;
}

static int http_get_status(struct chaos *cx, const char *path, char *body, size_t bodysz)
{
    return http_get_status_on(cx, 0, path, body, bodysz);
}

/* Starts instance k (the flags are the same for every instance). */
static int service_start_one(struct chaos *cx, int k)
{
    struct instance *in = &cx->svc[k];
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
    snprintf(in->log, sizeof in->log, "%s/redlockd%s.log", cx->dir, k ? "-2" : "");
    for (int attempt = 0; attempt < 3; attempt++) {
        in->port = net_free_port();
        snprintf(listen, sizeof listen, "127.0.0.1:%d", in->port);
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
        FILE *lf = fopen(in->log, "ae");
        if (lf) {
            fprintf(lf, "---- chaos: starting:");
            for (int i = 0; argv[i]; i++)
                fprintf(lf, " %s", argv[i]);
            fprintf(lf, "\n");
            fclose(lf);
        }
        pid_t pid = proc_spawn(cx->o.service_bin, argv, in->log, NULL);
        if (pid < 0) {
            fprintf(stderr, "chaos: cannot start %s: %s\n", cx->o.service_bin, strerror(errno));
            return -1;
        }
        in->pid = pid;
        long long deadline = now_ms() + 15000;
        int exited = 0;
        while (now_ms() < deadline) {
            int st;
            if (proc_wait(pid, 0, &st) == 1) {
                exited = 1;
                in->pid = 0;
                break;
            }
            if (file_contains(in->log, "listening on") && http_get_status_on(cx, k, "/healthz", NULL, 0) == 200)
                return 0;
            sleep_ms(20);
        }
        if (!exited) {
            fprintf(stderr, "chaos: redlockd did not become healthy within 15 s; log tail:\n");
            print_log_tail(in->log, 20);
            return -1;
        }
        /* exited: maybe the port was taken between our probe and its bind; try another */
    }
    fprintf(stderr, "chaos: redlockd exited at start (3 tries); log tail:\n");
    print_log_tail(in->log, 20);
    return -1;
}

static int service_start(struct chaos *cx)
{
    for (int k = 0; k < cx->n_svc; k++)
        if (service_start_one(cx, k) < 0)
            return -1;
    return 0;
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
    int inst;       /* the service instance it talks to */
    int expect_holds; /* a reentrant acquire or release: the holds its answer must say (0: none;
                         -1: a reentrant lease's last release, which may find holds left) */
    int released_holds; /* what that release said was left */
    int answered_holds; /* what the last grant said it holds */
};

/* How an acquire is asked, beyond name, mode, ttl and wait. */
struct acq_opts {
    const char *lease; /* the client's own lease, or NULL (the service chooses) */
    int reentrant;     /* "reentrant": true */
    int nested;        /* a re-entry of a lease that holds the name */
    long hangup_ms;    /* > 0: the client hangs up after that long if no answer came */
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
            /* a re-entry needs every master to count its hold (docs/DESIGN.md section 12):
             * its 503 says quorum N */
            json_int_t want = e->nested && e->op == CHAOS_ACQUIRE ? N_MASTERS : QUORUM;
            if (!json_int(j, "nodes_ok", &v) || !json_int(j, "quorum", &q) || (q != QUORUM && q != want) ||
                v < 0 || v > N_MASTERS)
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
        /* a re-entry answers the lock's own validity (never shortened: issue 22), which may
         * be longer than the ttl it asked */
        if (json_int(j, "validity_ms", &v) && v > 0 && v <= (e->nested ? cl->cx->o.max_ttl : e->ttl_ms))
            e->validity_ms = v;
        else
            set_shape(e, "201_validity_ms_missing_or_out_of_(0,ttl]");
        if (!e->nested && (!json_int(j, "ttl_ms", &v) || v != e->ttl_ms))
            set_shape(e, "201_ttl_ms_missing_or_not_as_asked");
        /* the holds a quorum of masters counts: a re-entry whose increment reached fewer
         * than a quorum (it found the key gone on some master and took it afresh there)
         * may answer fewer than the client made (counted, shown, not failed) */
        cl->answered_holds = json_int(j, "holds", &v) ? (int)v : 0;
        if (cl->expect_holds > 0 && (!json_int(j, "holds", &v) || v < 1 || v > cl->expect_holds)) {
            char sh[48];
            snprintf(sh, sizeof sh, "201_holds_%lld_not_%d", json_int(j, "holds", &v) ? (long long)v : -1LL,
                     cl->expect_holds);
            set_shape(e, sh);
        } else if (cl->expect_holds > 1 && v < cl->expect_holds) {
            atomic_fetch_add(&cl->cx->reentry_holds_below, 1);
        }
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
    } else if (e->op == CHAOS_RELEASE && st == 200 && e->nested) {
        /* one hold of a reentrant lock given back: the outer one remains */
        if (!json_is_false(json_object_get(j, "released")) || !json_int(j, "holds", &v) ||
            v != cl->expect_holds)
            set_shape(e, "200_reentrant_release_not_released_false_holds");
    } else if (e->op == CHAOS_RELEASE && st == 200 && cl->expect_holds < 0 &&
               json_is_false(json_object_get(j, "released"))) {
        /* a reentrant lease's last release: a re-entry that failed may still have counted
         * a hold on a quorum; the answer says how many remain, and the client goes on */
        if (!json_int(j, "holds", &v) || v < 1)
            set_shape(e, "200_released_false_without_holds");
        e->nested = 1; /* not the release that frees it */
        cl->released_holds = (int)v;
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
static long client_acquire_x(struct client *cl, int op, int nm, int mode, int64_t ttl, int64_t wait, int *status,
                             char *lease, const struct acq_opts *ao)
{
    struct chaos *cx = cl->cx;
    const char *name = cx->hist.names[nm];
    int permits = cx->hist.permits[nm];
    char path[300], body[300], rid[64], extra[160] = "";
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
    e.inst = cl->inst;
    e.nested = ao && ao->nested;
    if (ao && ao->lease)
        snprintf(e.lease, sizeof e.lease, "%s", ao->lease);
    lease[0] = '\0';
    name_path(cx, nm, path, sizeof path - 16);
    if (op == CHAOS_STREAM)
        strcat(path, "?hold=stream");
    size_t xo = 0;
    if (permits > 0)
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", \"permits\": %d", permits);
    else if (e.mode == CHAOS_MODE_SHARED)
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", \"mode\": \"shared\"");
    if (ao && ao->lease)
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", \"lease\": \"%s\"", ao->lease);
    if (ao && ao->reentrant)
        xo += (size_t)snprintf(extra + xo, sizeof extra - xo, ", \"reentrant\": true");
    snprintf(body, sizeof body, "{\"ttl_ms\": %" PRId64 ", \"wait_ms\": %" PRId64 "%s}", ttl, wait, extra);
    snprintf(rid, sizeof rid, "chaos-%d-%ld", cl->thread, cl->seq++);
    int timeout = client_timeout_ms(cx, (int)wait);
    if (ao && ao->hangup_ms > 0 && ao->hangup_ms < timeout)
        timeout = (int)ao->hangup_ms;
    int st = timed_request(cl, &e, "POST", path, body, rid, timeout, &r);
    if (st == CHAOS_ST_TIMEOUT && ao && ao->hangup_ms > 0 && timeout == ao->hangup_ms)
        st = CHAOS_ST_HUNGUP; /* the connection is closed: the service sees the hang-up */
    digest(cl, &e, st, &r, rid, name, lease);
    if (st == 201 && lease[0] && !e.lease[0])
        snprintf(e.lease, sizeof e.lease, "%s", lease);
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

static long client_acquire(struct client *cl, int op, int nm, int mode, int64_t ttl, int64_t wait, int *status,
                           char *lease)
{
    return client_acquire_x(cl, op, nm, mode, ttl, wait, status, lease, NULL);
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
    d.inst = cl->inst;
    d.nested = cl->local.ev[gi].nested;
    snprintf(d.lease, sizeof d.lease, "%s", lease);
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
    e.inst = cl->inst;
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
    /* the hottest name gets --hot-share % of the picks: its counter is then the highest of
     * its masters (a repair that reads a peer's largest counter is judged on it) */
    if (rng_range(&cl->rng, 0, 99) < o->hot_share)
        nm = 0;
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

/* A lease of the client's own (16..128 of [A-Za-z0-9_-]), new for every request, so that
 * (l) can tell whose state a master holds even when the request was refused. */
static void own_lease(struct client *cl, char *out, size_t size)
{
    snprintf(out, size, "chaos%02d-%06lx-%08lx", cl->thread, cl->seq & 0xffffff,
             (unsigned long)(rng_next(&cl->rng) & 0xffffffffUL));
}

/* A reentrant hold: the outer grant, a re-entry with a ttl of its own (often shorter: it
 * must not shorten the outer hold, issue 22), the inner release (released: false, holds
 * 1) and the outer one.  The outer grant's hold is judged by (a) as any grant's, from its
 * own validity; the re-entry is no holder of its own. */
static void client_reentrant(struct client *cl, int nm, int64_t ttl, int64_t wait)
{
    const struct options *o = &cl->cx->o;
    char lease[129], own[48];
    int st;
    own_lease(cl, own, sizeof own);
    struct acq_opts ao = {.lease = own, .reentrant = 1};
    cl->expect_holds = 1;
    long gi = client_acquire_x(cl, CHAOS_ACQUIRE, nm, CHAOS_MODE_EXCLUSIVE, ttl, wait, &st, lease, &ao);
    cl->expect_holds = 0;
    if (gi < 0 || st != 201 || !lease[0]) {
        if (gi >= 0)
            pause_after(cl, st);
        return;
    }
    int64_t outer_token = cl->local.ev[gi].token, validity = cl->local.ev[gi].validity_ms;
    sleep_ms(rng_range(&cl->rng, 0, validity / 6 < o->max_hold ? validity / 6 : o->max_hold));
    ao.nested = 1;
    cl->expect_holds = 2;
    /* half the time a re-entry with a ttl shorter than what the outer hold has left */
    int64_t ttl2 = rng_range(&cl->rng, 0, 1) ? rng_range(&cl->rng, o->min_ttl, o->max_ttl)
                                             : rng_range(&cl->rng, o->min_ttl / 2, o->min_ttl);
    char lease2[129];
    long ni = client_acquire_x(cl, CHAOS_ACQUIRE, nm, CHAOS_MODE_EXCLUSIVE, ttl2, 0, &st, lease2, &ao);
    cl->expect_holds = 0;
    /* OpenAPI says a re-entry answers the outer grant's token; one that took the key afresh
     * on some master answers that master's counter, above it (counted, shown); below it
     * would be a token that went back */
    if (ni >= 0 && st == 201 && cl->local.ev[ni].token < outer_token)
        set_shape(&cl->local.ev[ni], "201_re-entry_token_below_the_outer_grant's");
    else if (ni >= 0 && st == 201 && cl->local.ev[ni].token > outer_token)
        atomic_fetch_add(&cl->cx->reentry_token_above, 1);
    /* a re-entry answered with fewer holds than made (see digest) is let go by the last
     * release's loop below; else one hold is given back first */
    if (ni >= 0 && st == 201 && cl->answered_holds == 2) {
        sleep_ms(rng_range(&cl->rng, 0, validity / 6 < o->max_hold ? validity / 6 : o->max_hold));
        cl->expect_holds = 1;
        client_release(cl, ni, own, (int)rng_range(&cl->rng, 0, 1));
        cl->expect_holds = 0;
    }
    /* the outer code goes on: half the time to 60..90% of the outer grant's validity, past
     * a shorter re-entry's ttl (a re-entry that shortened the hold lets a rival in: (a)) */
    if (rng_range(&cl->rng, 0, 1)) {
        int64_t until = cl->local.ev[gi].t_send + validity * rng_range(&cl->rng, 60, 90) / 100 * 1000000LL;
        int64_t left = (until - http_now_ns()) / 1000000;
        if (left > 0)
            sleep_ms(left);
    }
    /* the last release; again while it says holds are left (a re-entry answered as failed
     * may have counted one anyway), at most three times */
    for (int k = 0; k < 3; k++) {
        cl->expect_holds = -1;
        cl->released_holds = 0;
        client_release(cl, gi, own, (int)rng_range(&cl->rng, 0, 1));
        cl->expect_holds = 0;
        if (cl->released_holds <= 0)
            break;
    }
}

/* A writer that waits long and hangs up early (issue 22, finding 2): its writer-intent
 * mark must go with it, which (l) judges; readers must not stay refused meanwhile. */
static void client_hangup(struct client *cl, int nm, int64_t ttl)
{
    char lease[129], own[48];
    int st;
    own_lease(cl, own, sizeof own);
    struct acq_opts ao = {.lease = own, .hangup_ms = rng_range(&cl->rng, 100, 800)};
    long gi = client_acquire_x(cl, CHAOS_ACQUIRE, nm, CHAOS_MODE_EXCLUSIVE, ttl, rng_range(&cl->rng, 2000, 20000), &st,
                               lease, &ao);
    if (gi >= 0 && st == 201 && lease[0]) { /* granted before it hung up: an ordinary hold */
        sleep_ms(hold_ms(cl, &cl->local.ev[gi]));
        client_release(cl, gi, lease, 1);
    }
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
    int lock_x = cl->role == ROLE_EXCLUSIVE && cl->cx->hist.permits[nm] == 0;
    if (lock_x && rng_range(&cl->rng, 0, 99) < o->reentrant_pct) {
        client_reentrant(cl, nm, ttl, wait);
        return;
    }
    if (lock_x && rng_range(&cl->rng, 0, 99) < o->hangup_pct) {
        client_hangup(cl, nm, ttl);
        return;
    }
    char lease[129], own[48];
    int st;
    struct acq_opts ao = {0};
    /* a waiting writer always names its lease (its mark carries it: (l) needs to know whose) */
    if ((wait > 0 && mode == CHAOS_MODE_EXCLUSIVE) || rng_range(&cl->rng, 0, 99) < o->own_lease_pct) {
        own_lease(cl, own, sizeof own);
        ao.lease = own;
    }
    long gi = client_acquire_x(cl, CHAOS_ACQUIRE, nm, mode, ttl, wait, &st, lease, &ao);
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
    l.inst = cl->inst;
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
    char lease[129], own[48];
    int st;
    struct acq_opts ao = {0};
    if ((wait > 0 && mode == CHAOS_MODE_EXCLUSIVE) || rng_range(&cl->rng, 0, 99) < o->own_lease_pct) {
        own_lease(cl, own, sizeof own);
        ao.lease = own;
    }
    long gi = client_acquire_x(cl, CHAOS_STREAM, nm, mode, ttl, wait, &st, lease, &ao);
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
    /* a quiet instance (a compound fault) must see nothing: its streams end too */
    while (!over && http_now_ns() < decide && !atomic_load(&cx->abort_run) && !atomic_load(&cx->svc[cl->inst].quiet))
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
        c.inst = cl->inst;
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
    if (http_client_init(&cl->hc, "127.0.0.1", cl->cx->svc[cl->inst].port) < 0 ||
        http_client_init(&cl->sc, "127.0.0.1", cl->cx->svc[cl->inst].port) < 0) {
        harness_fail(cl->cx, "client %d: cannot initialise", cl->thread);
        http_client_free(&cl->hc);
        http_client_free(&cl->sc);
        return NULL;
    }
    while (http_now_ns() < cl->end_ns && !atomic_load(&cl->cx->abort_run)) {
        if (atomic_load(&cl->cx->svc[cl->inst].quiet)) { /* its instance must see nothing for a while */
            sleep_ms(10);
            continue;
        }
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
        cls[i].inst = i % cx->n_svc; /* every other thread talks to the second instance */
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
static int readyz_masters_on(struct chaos *cx, int inst, int ok[N_MASTERS])
{
    char body[4096] = "";
    int st = http_get_status_on(cx, inst, "/readyz", body, sizeof body);
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

static void forget_check(struct chaos *cx, struct master *m, long long now);

static int readyz_masters(struct chaos *cx, int ok[N_MASTERS])
{
    return readyz_masters_on(cx, 0, ok);
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
    for (int i = 0; i < N_MASTERS; i++) {
        due |= (cx->m[i].recovering && now >= cx->m[i].recover_min) || cx->m[i].late;
        forget_check(cx, &cx->m[i], now);
    }
    int ok[N_MASTERS];
    if (!due || readyz_masters(cx, ok) < 0)
        return;
    /* back only when every instance has it back (a frozen one is asked after it resumes) */
    for (int k = 1; k < cx->n_svc; k++) {
        int ok2[N_MASTERS];
        if (atomic_load(&cx->svc[k].frozen) || readyz_masters_on(cx, k, ok2) < 0)
            for (int i = 0; i < N_MASTERS; i++)
                ok2[i] = 0;
        for (int i = 0; i < N_MASTERS; i++)
            ok[i] &= ok2[i];
    }
    for (int i = 0; i < N_MASTERS; i++) {
        struct master *m = &cx->m[i];
        if (m->late && ok[i]) {
            m->late = 0;
            fault_logf(cx, "back  master=%d (late) %lld ms after its loss", i, now - m->lost_at);
        }
        if (!m->recovering || now < m->recover_min)
            continue;
        if (ok[i] || now >= m->recover_max) {
            m->recovering = 0;
            m->busy = 0;
            /* late: other faults may go on around it, but it still counts as forgetting
             * until the service has it back (no second minority forgets meanwhile) */
            m->late = !ok[i];
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

/* lag: the master refuses EVALSHA (every lock, marker and proof script) and keeps its
 * data: a master that misses grants and comes back as the same process, behind.  (A
 * SIGSTOP cannot stand in: a frozen master runs its queued commands when it resumes.) */
static int master_lag(struct chaos *cx, struct master *m, int on)
{
    char reply[128];
    if (m->pid <= 0 || m->state == M_DOWN) {
        m->lagging = 0; /* a restart forgets the ACL */
        return 0;
    }
    if (redis_command(m->port, on ? "ACL SETUSER default -evalsha" : "ACL SETUSER default +evalsha", reply,
                      sizeof reply, 3000) < 0 ||
        strcmp(reply, "+OK") != 0) {
        harness_fail(cx, "ACL SETUSER on master %d answered '%s'", m->idx, reply);
        return -1;
    }
    m->lagging = on;
    return 0;
}

/* hdel_counter: the record's largest fencing counter (the hottest bucket) deleted by hand,
 * as an operator or a buggy tool would: HDEL <prefix>#master b<k>. */
static int master_hdel(struct chaos *cx, struct master *m)
{
    static const char script[] =
        "local kv = redis.call('HGETALL', KEYS[1]) local best, bv = nil, -1 "
        "for i = 1, #kv, 2 do local v = tonumber(kv[i + 1]) "
        "  if string.match(kv[i], '^b%d+$') and v and v > bv then best, bv = kv[i], v end end "
        "if best then redis.call('HDEL', KEYS[1], best) return best .. '=' .. bv end return 'none'";
    const char *argv[] = {"EVAL", script, "1", "redlock:#master"};
    size_t len;
    char *r = redis_call(m->port, 4, argv, &len, 3000);
    if (!r || r[0] == '-') {
        harness_fail(cx, "hdel_counter on master %d answered '%s'", m->idx, r ? r : "nothing");
        free(r);
        return -1;
    }
    fault_logf(cx, "      hdel_counter master=%d: HDEL redlock:#master %s", m->idx, r);
    free(r);
    return 0;
}

/* Copies src to dst: the first limit bytes (-1: all).  0, or -1. */
static int copy_file(const char *src, const char *dst, long long limit)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
    char buf[65536];
    if (in < 0)
        return -1;
    out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        goto done;
    long long left = limit;
    for (;;) {
        size_t want = sizeof buf;
        if (limit >= 0 && (long long)want > left)
            want = (size_t)left;
        if (want == 0)
            break;
        ssize_t n = read(in, buf, want);
        if (n < 0)
            goto done;
        if (n == 0)
            break;
        if (write(out, buf, (size_t)n) != n)
            goto done;
        left -= n;
    }
    rc = 0;
done:
    close(in);
    if (out >= 0 && close(out) < 0)
        rc = -1;
    return rc;
}

/* restore_old, part one: a copy of master m's data as it stands (manifest, base, incr
 * files cut at their last whole command), kept in m->snap.  0, or -1 (the copy is left
 * unusable: snap_at 0). */
static int snapshot_take(struct chaos *cx, struct master *m)
{
    char dir[400], man[500], line[600], name[300], type[8];
    m->snap_at = 0;
    snprintf(dir, sizeof dir, "%.320s/appendonlydir", m->data);
    if (rm_rf(m->snap) < 0 || mkdir(m->snap, 0755) < 0)
        return -1;
    glob_t g;
    char pat[500];
    snprintf(pat, sizeof pat, "%s/*.manifest", dir);
    if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc != 1) {
        if (g.gl_pathc)
            globfree(&g);
        return -1;
    }
    snprintf(man, sizeof man, "%s", g.gl_pathv[0]);
    globfree(&g);
    FILE *f = fopen(man, "re");
    if (!f)
        return -1;
    int ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        const char *t = strstr(line, " type ");
        if (strncmp(line, "file ", 5) != 0 || !t || sscanf(line + 5, "%299s", name) != 1 ||
            sscanf(t + 6, "%7s", type) != 1)
            continue;
        char src[720], dst[720];
        snprintf(src, sizeof src, "%s/%s", dir, name);
        snprintf(dst, sizeof dst, "%s/%s", m->snap, name);
        struct stat st;
        if (!strcmp(type, "h"))
            continue; /* history: not loaded */
        if (stat(src, &st) < 0) {
            ok = 0;
            break;
        }
        long long limit = -1;
        if (!strcmp(type, "i"))
            limit = aof_boundary(src, (long long)st.st_size);
        ok = limit >= -1 && copy_file(src, dst, limit) == 0;
    }
    fclose(f);
    char mdst[720];
    snprintf(mdst, sizeof mdst, "%s/%s", m->snap, strrchr(man, '/') + 1);
    if (!ok || copy_file(man, mdst, -1) < 0) {
        fault_logf(cx, "      restore_old master=%d: the copy failed (a rewrite meanwhile?)", m->idx);
        return -1;
    }
    m->snap_at = now_ms();
    return 0;
}

/* restore_old, part two: with master m dead, its data replaced by the copy. */
static int snapshot_restore(struct chaos *cx, struct master *m)
{
    char dir[400], cmd[1200];
    snprintf(dir, sizeof dir, "%.320s/appendonlydir", m->data);
    if (!m->snap_at || rm_rf(dir) < 0 || mkdir(dir, 0755) < 0) {
        harness_fail(cx, "restore_old: no copy of master %d to restore", m->idx);
        return -1;
    }
    DIR *d = opendir(m->snap);
    struct dirent *e;
    int ok = d != NULL;
    while (ok && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char src[720], dst[720];
        snprintf(src, sizeof src, "%s/%s", m->snap, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", dir, e->d_name);
        ok = copy_file(src, dst, -1) == 0;
    }
    if (d)
        closedir(d);
    snprintf(cmd, sizeof cmd, "%lld ms old", now_ms() - m->snap_at);
    if (!ok) {
        harness_fail(cx, "restore_old: cannot restore master %d's copy", m->idx);
        return -1;
    }
    fault_logf(cx, "      restore_old master=%d: data replaced by its copy taken %s", m->idx, cmd);
    return 0;
}

/* Clock faults: master m's clock moved (jump: + ms, back: - ms, fast: a rate in ppm); heal
 * puts it back to the true clock (itself a step). */
static void clock_move(struct chaos *cx, struct master *m, enum fault_kind k, uint64_t *rng, char *what,
                       size_t whatsz)
{
    /* seconds to an hour; the long ones rarer (such a master stays out a long while) */
    static const long long jumps[] = {1000, 1000, 1000, 5000, 5000, 5000, 30000, 30000, 600000, 3600000};
    int rc;
    if (k == F_CLOCK_FAST) {
        long long ppm = rng_range(rng, 0, 1) ? 1500000 : 2000000;
        rc = clockshim_set_rate(m->clock, ppm);
        snprintf(what, whatsz, "rate %.1fx", (double)ppm / 1e6);
        m->clock_step_ms = 2000 * (ppm - 1000000) / 1000000; /* ahead by at most that at the heal */
    } else {
        long long ms = jumps[rng_range(rng, 0, 9)];
        rc = clockshim_jump(m->clock, k == F_CLOCK_JUMP ? ms : -ms);
        snprintf(what, whatsz, "%s %lld ms", k == F_CLOCK_JUMP ? "forward" : "back", ms);
        m->clock_step_ms = k == F_CLOCK_JUMP ? ms : 0;
    }
    if (rc < 0)
        harness_fail(cx, "cannot write %s: %s", m->clock, strerror(errno));
    m->clock_moved = 1;
}

static void clock_true(struct chaos *cx, struct master *m)
{
    if (clockshim_reset(m->clock) < 0)
        harness_fail(cx, "cannot write %s: %s", m->clock, strerror(errno));
}

/* Forgetting (see forgets()): master m counts from now until it is back in the service's
 * quorums (recovery_poll) and at least a max ttl (what it forgot has expired by then). */
static int n_forgetting(struct chaos *cx);

static void out_begin(struct chaos *cx, struct master *m)
{
    long long now = now_ms();
    if (!m->forget_since) {
        m->forget_since = now;
        fault_logf(cx, "      out of trust master=%d (restarted); %d out", m->idx, n_forgetting(cx));
    }
    if (m->forget_until < now + cx->o.max_ttl + 500)
        m->forget_until = now + cx->o.max_ttl + 500;
}

static void forget_begin(struct chaos *cx, struct master *m)
{
    long long now = now_ms();
    m->span_forgot = 1;
    if (!m->forget_since) {
        m->forget_since = now;
        fault_logf(cx, "      out of trust master=%d (forgets); %d out", m->idx, n_forgetting(cx));
    }
    if (m->forget_until < now + cx->o.max_ttl + 500)
        m->forget_until = now + cx->o.max_ttl + 500;
}

/* Ends m's forgetting span if it is over (not recovering, past forget_until). */
static void forget_check(struct chaos *cx, struct master *m, long long now)
{
    if (!m->forget_since || m->recovering || m->late || now < m->forget_until)
        return;
    if (cx->fspan && cx->n_fspan < MAX_FAULT_RECORDS)
        cx->fspan[cx->n_fspan++] = (struct forget_span){m->idx, m->forget_since, now, m->span_forgot};
    fault_logf(cx, "      trusted again master=%d (out since %.3f: %s); %d still out", m->idx,
               rel_s(cx, m->forget_since), m->span_forgot ? "forgot" : "restarted", n_forgetting(cx) - 1);
    m->forget_since = m->forget_until = 0;
    m->span_forgot = 0;
}

static int n_forgetting(struct chaos *cx)
{
    int n = 0;
    for (int i = 0; i < N_MASTERS; i++)
        n += cx->m[i].forget_since != 0;
    return n;
}

static long fault_record_open(struct chaos *cx, enum fault_kind k)
{
    if (!cx->frec || cx->n_frec == MAX_FAULT_RECORDS)
        return -1;
    cx->frec[cx->n_frec] = (struct fault_record){.kind = k, .start_ms = now_ms()};
    return cx->n_frec++;
}

static void fault_record_targets(struct chaos *cx, long rec, const int *targets, int n, int in_compound)
{
    if (rec < 0)
        return;
    for (int i = 0; i < n; i++)
        cx->frec[rec].targets |= 1u << targets[i];
    cx->frec[rec].in_compound = in_compound;
}

/* A frozen master or instance, for (l): commands queued to it ran when it resumed. */
static void note_pause(struct chaos *cx, int who, long long from_ms, long long to_ms)
{
    pthread_mutex_lock(&cx->obs_mu);
    (void)chaos_pause_add(&cx->obs, who, from_ms * 1000000LL, to_ms * 1000000LL);
    pthread_mutex_unlock(&cx->obs_mu);
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
    char what[64] = "";
    int mid_kind = f->kind == F_AOF_CUT || f->kind == F_RESTORE;
    f->rec = mid_kind ? -1 : fault_record_open(cx, f->kind);
    fault_record_targets(cx, f->rec, f->targets, f->n, 0);
    f->start = now_ms();
    f->mid_done = 0;
    for (int i = 0; i < f->n; i++) {
        struct master *m = &cx->m[f->targets[i]];
        m->busy = 1;
        switch (f->kind) {
        case F_LAG:
            (void)master_lag(cx, m, 1);
            break;
        case F_HDEL:
            forget_begin(cx, m);
            (void)master_hdel(cx, m);
            break;
        case F_RESTORE:
            forget_begin(cx, m); /* as aof_cut: from its copy on */
            if (snapshot_take(cx, m) < 0)
                f->mid = 0; /* no copy: nothing to restore, the fault only waits */
            break;
        case F_CLOCK_JUMP:
        case F_CLOCK_FAST:
        case F_CLOCK_BACK:
            forget_begin(cx, m);
            clock_move(cx, m, f->kind, rng, what, sizeof what);
            break;
        case F_COMPOUND:
            break;
        case F_FREEZE_MINORITY:
        case F_FREEZE_MAJORITY:
            master_signal(cx, m, SIGSTOP);
            m->state = M_FROZEN;
            break;
        case F_KILL_AOF:
        case F_KILL_EMPTY:
            master_kill(cx, m);
            out_begin(cx, m);
            if (f->kind == F_KILL_EMPTY) {
                forget_begin(cx, m);
                if (rm_rf(m->data) < 0)
                    harness_fail(cx, "cannot empty %s: %s", m->data, strerror(errno));
            }
            break;
        case F_AOF_CUT:
            /* what it acknowledges from now on, it will have forgotten: it forgets from now */
            forget_begin(cx, m);
            if (aof_record(m) < 0)
                harness_fail(cx, "aof_cut: no incr AOF found for master %d under %s", m->idx, m->data);
            break;
        case F_FLUSHALL:
            forget_begin(cx, m);
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
    /* out of trust until its heal and a max ttl past it at least (then until it is back) */
    for (int i = 0; i < f->n && takes_out(f->kind); i++) {
        struct master *m = &cx->m[f->targets[i]];
        if (m->forget_since && m->forget_until < f->end + cx->o.max_ttl + 500)
            m->forget_until = f->end + cx->o.max_ttl + 500;
    }
    if (!mid_kind) /* counted when the kill and the cut (the restore) happen */
        cx->fault_count[f->kind]++;
    if (what[0])
        fault_logf(cx, "start %s masters=%s %s until=%.3f", fault_table[f->kind].name, who, what, rel_s(cx, f->end));
    else if (f->kind == F_RESTORE)
        fault_logf(cx, "start %s masters=%s (data copied) restore_at=%.3f until=%.3f", fault_table[f->kind].name, who,
                   rel_s(cx, f->mid), rel_s(cx, f->end));
    else if (delay)
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
    if (f->kind != F_AOF_CUT && f->kind != F_RESTORE)
        return;
    f->rec = fault_record_open(cx, f->kind);
    fault_record_targets(cx, f->rec, f->targets, f->n, 0);
    for (int i = 0; i < f->n; i++) {
        forget_begin(cx, &cx->m[f->targets[i]]);
        master_kill(cx, &cx->m[f->targets[i]]);
    }
    for (int i = 0; i < f->n; i++) {
        if (f->kind == F_AOF_CUT)
            aof_cut_apply(cx, &cx->m[f->targets[i]]);
        else
            (void)snapshot_restore(cx, &cx->m[f->targets[i]]);
    }
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
            note_pause(cx, m->idx, f->start, now_ms());
            break;
        case F_LAG:
            (void)master_lag(cx, m, 0);
            break;
        case F_CLOCK_JUMP:
        case F_CLOCK_FAST:
        case F_CLOCK_BACK:
            clock_true(cx, m);
            forget_begin(cx, m); /* the step back to true (a step forward after clock_back) */
            /* (l) leaves its entries alone until what it wrote ahead of time has run out */
            pthread_mutex_lock(&cx->obs_mu);
            (void)chaos_pause_add(&cx->obs, CHAOS_PAUSE_SKIP + m->idx, f->start * 1000000LL,
                                  (now_ms() + m->clock_step_ms + 2L * cx->o.max_ttl + 1000) * 1000000LL);
            pthread_mutex_unlock(&cx->obs_mu);
            m->busy = 0;
            if (recover) /* a service that checks clocks keeps it out until it is steady */
                master_recovering(cx, m, now_ms());
            continue;
        case F_COMPOUND:
            break;
        case F_HDEL:
            m->busy = 0;
            if (recover)
                master_recovering(cx, m, f->start);
            continue;
        case F_KILL_AOF:
        case F_KILL_EMPTY:
        case F_AOF_CUT:
        case F_RESTORE:
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
    if ((f->kind == F_AOF_CUT || f->kind == F_RESTORE) && !f->mid_done)
        fault_logf(cx, "heal  %s (the run ended before the kill: nothing lost)", fault_table[f->kind].name);
    else
        fault_logf(cx, "heal  %s", fault_table[f->kind].name);
}

/* The safety net: whatever happened, leave every master up and every pair passing. */
static void heal_all(struct chaos *cx)
{
    for (int k = 0; k < cx->n_svc; k++)
        atomic_store(&cx->svc[k].quiet, 0);
    for (int k = 0; k < cx->n_svc; k++)
        if (atomic_load(&cx->svc[k].frozen)) {
            if (cx->svc[k].pid > 0)
                kill(cx->svc[k].pid, SIGCONT);
            atomic_store(&cx->svc[k].frozen, 0);
        }
    for (int i = 0; i < N_MASTERS; i++) {
        struct master *m = &cx->m[i];
        if (m->state == M_FROZEN)
            master_signal(cx, m, SIGCONT);
        if (m->state == M_DOWN || m->pid <= 0)
            if (master_spawn(cx, m) < 0)
                harness_fail(cx, "master %d would not restart", i);
        m->state = M_UP;
        if (m->lagging)
            (void)master_lag(cx, m, 0);
        if (cx->clock_on)
            clock_true(cx, m);
        m->busy = 0;
        m->recovering = 0;
        m->late = 0;
    }
    (void)proxy_cmd(cx, "mode all pass");
    fault_logf(cx, "all healed");
}

static int kind_enabled(const struct chaos *cx, int k)
{
    return (cx->o.fault_mask & (1u << k)) && (!fault_table[k].data_loss || cx->data_loss_on) &&
           (!fault_table[k].clock || cx->clock_on) && (k != F_COMPOUND || cx->o.compound);
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

/* ---- compound faults: a minority forgets while others lag, freeze or are down ------- */

/* How an impaired master misses what happens meanwhile (it forgets nothing): its ACL
 * refuses the scripts (lag), SIGSTOP (freeze: its queued commands run when it resumes),
 * the proxy drops its traffic (drop), or it is killed and restarts with its data (kill). */
enum { IMP_LAG, IMP_FREEZE, IMP_DROP, IMP_KILL, IMP_N };
static const enum fault_kind imp_kind[IMP_N] = {F_LAG, F_FREEZE_MINORITY, F_DROP, F_KILL_AOF};
/* How a forgetting master forgets. */
static const enum fault_kind forget_kind[] = {F_KILL_EMPTY, F_AOF_CUT, F_FLUSHALL, F_HDEL, F_RESTORE};
#define N_FORGET_KINDS 5

/* A compound fault has roles, each on masters of its own:
 *   laggers L (1-2): impaired from the start while grants go on without them (their
 *     counters fall behind), back before or around the forgetting;
 *   forgetters F (1-2, never more: a minority): lose data one way or another;
 *   down D (0-1): impaired from just after the forgetting until past the forgetters'
 *     quarantine, so that their repair finds only the laggers and what is left;
 * and the second instance sees none of it: frozen (SIGSTOP) or quiet (its clients send
 * nothing), resumed around the forgetters' repair -- the pattern of issue 21's findings
 * (an instance acting on a view that went stale, a repair from lagging peers).  A quarter
 * of them forget first and impair after (the laggers across the repair, no D). */
struct compound {
    int active;
    int nl, nf, nd;
    int l[2], l_how[2], f[2], d, d_how;
    enum fault_kind fk[2];
    int y_mode; /* 0: the second instance goes on; 1: frozen; 2: quiet */
    int forget_first;
    long long t0, t_impair, t_lag_end, t_forget, t_restart[2], t_down, t_down_end, t_y_resume;
    int impaired, lag_healed, forgot, restarted[2], downed, down_healed, y_resumed;
    long rec, l_rec[2], f_rec[2], d_rec;
};

static const char *imp_name(int how)
{
    static const char *const n[IMP_N] = {"lag", "freeze", "drop", "kill"};
    return n[how];
}

/* Plans a compound fault on the masters (none may be impaired or forgetting) and takes the
 * first steps: the second instance frozen or quiet, AOF sizes recorded, data copied. */
static void compound_start(struct chaos *cx, struct compound *c, uint64_t *rng)
{
    int idx[N_MASTERS];
    for (int i = 0; i < N_MASTERS; i++)
        idx[i] = i;
    shuffle(idx, N_MASTERS, rng);
    memset(c, 0, sizeof *c);
    c->active = 1;
    /* Half of them take the whole cluster, the shape of issue 21's findings 1 and 2: two
     * laggers, two forgetters (the second one keeps running: FLUSHALL or a counter
     * deleted, so that an instance that did not touch it still believes it ready), one
     * down across the repair, and nothing through the instances that should not see it. */
    int full = rng_range(rng, 0, 1);
    c->forget_first = !full && rng_range(rng, 0, 2) == 0;
    c->nf = full ? 2 : (int)rng_range(rng, 1, 2);
    c->nl = full ? 2 : (int)rng_range(rng, 1, 2);
    c->nd = full ? 1 : c->forget_first ? 0 : (int)rng_range(rng, 0, 1);
    int k = 0;
    for (int j = 0; j < c->nl; j++) {
        c->l[j] = idx[k++];
        long r = rng_range(rng, 0, 9); /* mostly the ACL: a lagger that keeps no queue */
        c->l_how[j] = r < 6 ? IMP_LAG : r < 8 ? IMP_FREEZE : IMP_DROP;
    }
    for (int j = 0; j < c->nf; j++) {
        c->f[j] = idx[k++];
        c->fk[j] = forget_kind[rng_range(rng, 0, N_FORGET_KINDS - 1)];
        if (full) /* the first restarts (empty, cut, restored), the second keeps running */
            c->fk[j] = j == 0 ? forget_kind[rng_range(rng, 0, 1)] : rng_range(rng, 0, 1) ? F_FLUSHALL : F_HDEL;
        if (full && j == 0 && rng_range(rng, 0, 2) == 0)
            c->fk[j] = F_RESTORE;
    }
    if (c->nd) { /* down, not restarted: a restart there too would make a majority restart at once */
        c->d = idx[k++];
        c->d_how = (int)rng_range(rng, 0, IMP_KILL - 1);
    }
    /* the second instance frozen, or quiet (its clients send nothing), or every instance
     * quiet from the forgetting to the repair (nothing touches the forgetters before it) */
    long r = rng_range(rng, 0, 9);
    c->y_mode = full ? (r < 6 ? 2 : r < 8 ? 1 : 3) : (r < 4 ? 1 : r < 7 ? 2 : r < 8 ? 3 : 0);
    if (cx->n_svc < 2 && c->y_mode != 3)
        c->y_mode = full ? 3 : 0;
    long long now = now_ms(), q = cx->quarantine_ms > 0 ? cx->quarantine_ms : cx->o.max_ttl;
    int restore = 0;
    for (int j = 0; j < c->nf; j++)
        restore |= c->fk[j] == F_RESTORE;
    c->t0 = now;
    if (c->forget_first) {
        c->t_forget = now + (restore ? rng_range(rng, RESTORE_MIN_AGE_MS, RESTORE_MAX_AGE_MS) : 0);
        c->t_impair = c->t_forget + rng_range(rng, 100, 500);
        c->t_lag_end = c->t_forget + q + rng_range(rng, 300, 1200); /* across the repair */
    } else {
        c->t_impair = now;
        c->t_forget = now + (restore ? rng_range(rng, RESTORE_MIN_AGE_MS, RESTORE_MAX_AGE_MS) : rng_range(rng, 200, 800));
        c->t_lag_end = c->t_forget + rng_range(rng, -100, 400);
    }
    for (int j = 0; j < c->nf; j++)
        c->t_restart[j] = c->t_forget + rng_range(rng, 50, 300);
    c->t_down = c->t_forget + rng_range(rng, 50, 300);
    if (full) {
        /* the one that stays up to date goes down before the laggers come back: no grant
         * through it refreshes them, and the repair finds them as they fell behind */
        c->t_down = c->t_forget + rng_range(rng, 0, 100);
        c->t_lag_end = c->t_down + rng_range(rng, 100, 300);
    }
    /* around the forgetters' repair; a quiet one after it (what it repaired from is then what
     * it believed of the masters) */
    c->t_y_resume = c->t_forget + q + (c->y_mode >= 2 ? rng_range(rng, 400, 900) : rng_range(rng, -200, 300));
    c->t_down_end = c->t_y_resume + rng_range(rng, 300, 1200);
    if (c->y_mode == 1 && c->t_y_resume > now + 4500) /* its clients give up after ~5.4 s */
        c->t_y_resume = now + 4500;
    long long end = c->t_lag_end;
    if (c->nd && c->t_down_end > end)
        end = c->t_down_end;
    if (c->y_mode && c->t_y_resume > end)
        end = c->t_y_resume;
    for (int j = 0; j < c->nf; j++)
        if (c->t_restart[j] > end)
            end = c->t_restart[j];

    c->rec = fault_record_open(cx, F_COMPOUND);
    fault_record_targets(cx, c->rec, c->l, c->nl, 0);
    fault_record_targets(cx, c->rec, c->f, c->nf, 0);
    if (c->nd)
        fault_record_targets(cx, c->rec, &c->d, 1, 0);
    c->d_rec = -1;
    for (int j = 0; j < 2; j++)
        c->l_rec[j] = c->f_rec[j] = -1;
    cx->fault_count[F_COMPOUND]++;
    cx->compound_n++;
    cx->compound_two += c->nf == 2;
    cx->compound_y += c->y_mode == 1;
    cx->compound_quiet += c->y_mode == 2;
    cx->compound_all_quiet += c->y_mode == 3;
    cx->compound_full += full;
    cx->compound_down += c->nd;
    cx->compound_forget_first += c->forget_first;
    char plan[320];
    size_t off = 0;
    for (int j = 0; j < c->nl; j++) {
        cx->compound_impair[imp_kind[c->l_how[j]]]++;
        off += (size_t)snprintf(plan + off, sizeof plan - off, "%s%d:%s", j ? "," : "lag ", c->l[j], imp_name(c->l_how[j]));
    }
    for (int j = 0; j < c->nf; j++) {
        cx->compound_forget[c->fk[j]]++;
        off += (size_t)snprintf(plan + off, sizeof plan - off, "%s%d:%s", j ? "," : "; forget ", c->f[j],
                                fault_table[c->fk[j]].name);
    }
    if (c->nd) {
        cx->compound_impair[imp_kind[c->d_how]]++;
        off += (size_t)snprintf(plan + off, sizeof plan - off, "; down across the repair %d:%s", c->d,
                                imp_name(c->d_how));
    }
    fault_logf(cx, "start compound %s%s; %s first; until=%.3f", plan,
               c->y_mode == 1   ? "; instance 2 frozen"
               : c->y_mode == 2 ? "; instance 2 quiet"
               : c->y_mode == 3 ? "; every instance quiet from the forgetting to the repair"
                                : "",
               c->forget_first ? "forget" : "lag", rel_s(cx, end));
    for (int j = 0; j < c->nf; j++) {
        struct master *m = &cx->m[c->f[j]];
        m->busy = 1;
        if (c->fk[j] == F_AOF_CUT || c->fk[j] == F_RESTORE)
            forget_begin(cx, m); /* from the recording (the copy) on */
        if (c->fk[j] == F_AOF_CUT && aof_record(m) < 0)
            harness_fail(cx, "aof_cut: no incr AOF found for master %d", m->idx);
        if (c->fk[j] == F_RESTORE && snapshot_take(cx, m) < 0)
            c->fk[j] = F_FLUSHALL; /* no copy: forget another way */
    }
    for (int j = 0; j < c->nl; j++)
        cx->m[c->l[j]].busy = 1;
    if (c->nd)
        cx->m[c->d].busy = 1;
    if (c->y_mode == 1 && cx->svc[1].pid > 0) {
        kill(cx->svc[1].pid, SIGSTOP);
        atomic_store(&cx->svc[1].frozen, 1);
        fault_logf(cx, "      compound: instance 2 (pid %d) frozen", (int)cx->svc[1].pid);
    } else if (c->y_mode == 2) {
        atomic_store(&cx->svc[1].quiet, 1);
        fault_logf(cx, "      compound: instance 2 quiet (its clients send nothing)");
    }
}

/* Impairs master m (how: IMP_*); *rec gets its fault record. */
static void impair(struct chaos *cx, int m_idx, int how, long *rec)
{
    struct master *m = &cx->m[m_idx];
    enum fault_kind k = imp_kind[how];
    *rec = fault_record_open(cx, k);
    fault_record_targets(cx, *rec, &m_idx, 1, 1);
    cx->fault_in_compound[k]++;
    switch (how) {
    case IMP_LAG:
        (void)master_lag(cx, m, 1);
        break;
    case IMP_FREEZE:
        master_signal(cx, m, SIGSTOP);
        m->state = M_FROZEN;
        break;
    case IMP_DROP:
        (void)proxy_cmd(cx, "mode %d drop", m->idx);
        break;
    case IMP_KILL:
        master_kill(cx, m);
        break;
    }
    fault_logf(cx, "      compound: master %d %s", m->idx, imp_name(how));
}

static void unimpair(struct chaos *cx, int m_idx, int how, long rec)
{
    struct master *m = &cx->m[m_idx];
    switch (how) {
    case IMP_LAG:
        (void)master_lag(cx, m, 0);
        m->busy = 0;
        break;
    case IMP_FREEZE:
        master_signal(cx, m, SIGCONT);
        m->state = M_UP;
        note_pause(cx, m->idx, cx->frec && rec >= 0 ? cx->frec[rec].start_ms : now_ms(), now_ms());
        m->busy = 0;
        break;
    case IMP_DROP:
        (void)proxy_cmd(cx, "mode %d pass", m->idx);
        m->busy = 0;
        break;
    case IMP_KILL:
        if (master_spawn(cx, m) < 0)
            harness_fail(cx, "master %d would not restart; see %s", m->idx, m->log);
        master_recovering(cx, m, now_ms()); /* a restart: quarantined, though it forgot nothing */
        break;
    }
    fault_record_close(cx, rec);
    fault_logf(cx, "      compound: master %d back (%s)", m->idx, imp_name(how));
}

static void compound_forget(struct chaos *cx, struct compound *c)
{
    c->forgot = 1;
    if (c->y_mode == 3) {
        for (int k = 0; k < cx->n_svc; k++)
            atomic_store(&cx->svc[k].quiet, 1);
        fault_logf(cx, "      compound: every instance quiet");
    }
    for (int j = 0; j < c->nf; j++) {
        struct master *m = &cx->m[c->f[j]];
        enum fault_kind k = c->fk[j];
        c->f_rec[j] = fault_record_open(cx, k);
        fault_record_targets(cx, c->f_rec[j], &c->f[j], 1, 1);
        cx->fault_in_compound[k]++;
        forget_begin(cx, m);
        switch (k) {
        case F_KILL_EMPTY:
            master_kill(cx, m);
            if (rm_rf(m->data) < 0)
                harness_fail(cx, "cannot empty %s: %s", m->data, strerror(errno));
            break;
        case F_AOF_CUT:
            master_kill(cx, m);
            aof_cut_apply(cx, m);
            break;
        case F_RESTORE:
            master_kill(cx, m);
            (void)snapshot_restore(cx, m);
            break;
        case F_FLUSHALL:
            (void)master_flushall(cx, m);
            c->restarted[j] = 1;
            master_recovering(cx, m, now_ms());
            break;
        default: /* F_HDEL */
            (void)master_hdel(cx, m);
            c->restarted[j] = 1;
            master_recovering(cx, m, now_ms());
            break;
        }
        fault_logf(cx, "      compound: master %d %s", m->idx, fault_table[k].name);
    }
}

static void compound_y_resume(struct chaos *cx, struct compound *c)
{
    c->y_resumed = 1;
    if (c->y_mode == 2 || c->y_mode == 3) {
        for (int k = c->y_mode == 3 ? 0 : 1; k < cx->n_svc; k++)
            atomic_store(&cx->svc[k].quiet, 0);
        fault_logf(cx, "      compound: %s busy again after %lld ms", c->y_mode == 3 ? "every instance" : "instance 2",
                   now_ms() - c->t0);
    }
    if (c->y_mode != 1 || !atomic_load(&cx->svc[1].frozen))
        return;
    if (cx->svc[1].pid > 0)
        kill(cx->svc[1].pid, SIGCONT);
    atomic_store(&cx->svc[1].frozen, 0);
    note_pause(cx, CHAOS_PAUSE_INST + 1, c->t0, now_ms());
    fault_logf(cx, "      compound: instance 2 resumed after %lld ms", now_ms() - c->t0);
}

/* Takes the steps that are due (all of them when finish is set); clears c->active once
 * every step is taken. */
static void compound_tick(struct chaos *cx, struct compound *c, long long now, int finish)
{
    if (!c->active)
        return;
    if (!c->forgot && c->forget_first && (finish || now >= c->t_forget))
        compound_forget(cx, c);
    if (!c->impaired && (finish || now >= c->t_impair)) {
        c->impaired = 1;
        for (int j = 0; j < c->nl; j++)
            impair(cx, c->l[j], c->l_how[j], &c->l_rec[j]);
    }
    if (!c->forgot && (finish || now >= c->t_forget))
        compound_forget(cx, c);
    for (int j = 0; j < c->nf; j++) {
        if (c->forgot && !c->restarted[j] && (finish || now >= c->t_restart[j])) {
            struct master *m = &cx->m[c->f[j]];
            c->restarted[j] = 1;
            if (master_spawn(cx, m) < 0)
                harness_fail(cx, "master %d would not restart; see %s", m->idx, m->log);
            master_recovering(cx, m, now_ms());
        }
    }
    if (c->impaired && !c->lag_healed && (finish || now >= c->t_lag_end)) {
        c->lag_healed = 1;
        for (int j = 0; j < c->nl; j++)
            unimpair(cx, c->l[j], c->l_how[j], c->l_rec[j]);
    }
    if (c->nd && c->forgot && !c->downed && (finish || now >= c->t_down)) {
        c->downed = 1;
        impair(cx, c->d, c->d_how, &c->d_rec);
    }
    if (!c->y_resumed && (finish || now >= c->t_y_resume))
        compound_y_resume(cx, c);
    if (c->nd && c->downed && !c->down_healed && (finish || now >= c->t_down_end)) {
        c->down_healed = 1;
        unimpair(cx, c->d, c->d_how, c->d_rec);
    }
    int done = c->impaired && c->forgot && c->lag_healed && c->y_resumed && (!c->nd || c->down_healed);
    for (int j = 0; j < c->nf; j++)
        done &= c->restarted[j];
    if (done) {
        for (int j = 0; j < c->nf; j++)
            fault_record_close(cx, c->f_rec[j]);
        fault_record_close(cx, c->rec);
        c->active = 0;
        fault_logf(cx, "heal  compound");
    }
}

static void *injector_main(void *arg)
{
    struct chaos *cx = arg;
    uint64_t rng = cx->o.seed * 0x9E3779B97F4A7C15ULL + 12345;
    /* compound faults come up COMPOUND_WEIGHT times per deck: they are what the run is for */
    int order[F_NKINDS + COMPOUND_WEIGHT], n_order = 0, pos = 0;
    for (int k = 0; k < F_NKINDS; k++)
        for (int w = 0; w < (k == F_COMPOUND ? cx->o.compound_weight : 1); w++)
            if (kind_enabled(cx, k))
                order[n_order++] = k;
    shuffle(order, n_order, &rng);
    struct active_fault act[2];
    struct compound cp = {0};
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
        if (cp.active) { /* a compound fault runs alone */
            compound_tick(cx, &cp, now, 0);
            if (!cp.active)
                next_start = now_ms() + rng_range(&rng, 100, 700);
            sleep_ms(5);
            continue;
        }
        if (n_act == 0 && now >= next_start && now + 2000 < cx->run_end_ms && order[pos] == F_COMPOUND) {
            /* alone, with every master healthy and none forgetting */
            int all_free = n_forgetting(cx) == 0;
            for (int i = 0; i < N_MASTERS; i++)
                all_free &= !cx->m[i].busy;
            if (all_free) {
                compound_start(cx, &cp, &rng);
                if (++pos == n_order) {
                    pos = 0;
                    shuffle(order, n_order, &rng);
                }
            }
            sleep_ms(5);
            continue;
        }
        if (order[pos] == F_COMPOUND) { /* waits for the masters to be free */
            if (now + 2000 >= cx->run_end_ms) { /* too late to start one */
                cx->compound_skipped++;
                if (++pos == n_order) {
                    pos = 0;
                    shuffle(order, n_order, &rng);
                }
            }
            sleep_ms(10);
            continue;
        }
        /* Minority faults may overlap as long as at most N/2 masters are impaired, so
         * the service keeps working on a quorum while some masters misbehave (where
         * the bugs are); a fault on a majority runs alone, and briefly. */
        int majority_active = 0;
        for (int i = 0; i < n_act; i++)
            majority_active |= act[i].n > N_MASTERS / 2;
        if (n_act < 2 && !majority_active && now >= next_start && now + 300 < cx->run_end_ms) {
            enum fault_kind k = (enum fault_kind)order[pos];
            int free_idx[N_MASTERS], n_free = 0, n_busy = 0;
            for (int i = 0; i < N_MASTERS; i++) {
                n_busy += cx->m[i].busy;
                /* a kind that takes a master out goes only to one that is not out already */
                if (!cx->m[i].busy && (!takes_out(k) || !cx->m[i].forget_since))
                    free_idx[n_free++] = i;
            }
            int lo = fault_table[k].min_targets, hi = fault_table[k].max_targets, n = 0;
            int majority = lo > N_MASTERS / 2 || (hi > N_MASTERS / 2 && rng_range(&rng, 0, 3) == 0);
            if (majority) {
                if (n_act == 0 && n_free == N_MASTERS) /* alone: nothing else impaired */
                    n = (int)rng_range(&rng, lo > QUORUM ? lo : QUORUM, hi);
            } else {
                int room = N_MASTERS / 2 - n_busy;
                if (takes_out(k) && N_MASTERS / 2 - n_forgetting(cx) < room) /* a minority out at once */
                    room = N_MASTERS / 2 - n_forgetting(cx);
                if (room > n_free)
                    room = n_free;
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
                if (k == F_RESTORE) /* a copy, traffic, then the kill and the restore */
                    f->mid = now + rng_range(&rng, RESTORE_MIN_AGE_MS, RESTORE_MAX_AGE_MS);
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
    compound_tick(cx, &cp, now_ms(), 1);
    heal_all(cx);
    /* the forgetting spans still open end now (for (n)) */
    for (int i = 0; i < N_MASTERS; i++) {
        cx->m[i].recovering = 0;
        cx->m[i].forget_until = 0;
        forget_check(cx, &cx->m[i], now_ms());
    }
    atomic_store(&cx->injector_healed, 1);
    /* the masters this thread restarted die with it (PR_SET_PDEATHSIG): wait to be told */
    while (!atomic_load(&cx->injector_exit))
        sleep_ms(10);
    return NULL;
}

/* ---- stopped streamed holders (m) --------------------------------------------------- */

/* A line from the holder process, or 0 at the deadline (ns) or its end (-1). */
static int holder_line(int fd, char *acc, size_t *alen, size_t cap, char *line, size_t linesz, int64_t deadline)
{
    for (;;) {
        char *nl = memchr(acc, '\n', *alen);
        if (nl) {
            size_t l = (size_t)(nl - acc);
            snprintf(line, linesz, "%.*s", (int)l, acc);
            memmove(acc, nl + 1, *alen - l - 1);
            *alen -= l + 1;
            return 1;
        }
        int64_t left = deadline - http_now_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left / 1000000) + 1);
        if (r <= 0)
            continue;
        if (*alen >= cap - 1)
            return -1;
        ssize_t n = read(fd, acc + *alen, cap - 1 - *alen);
        if (n <= 0)
            return -1;
        *alen += (size_t)n;
    }
}

/* Turns a holder's line into history events: its grant (S), answered pings (alive lines);
 * *last_ping: the send of its last ping. */
static void holder_record(struct client *cl, const char *line, long *gi, int nm, int64_t ttl, const char *lease,
                          int64_t *last_ping, int64_t pings[64], int *duplex, int64_t *silence)
{
    chaos_event e;
    memset(&e, 0, sizeof e);
    e.name = nm;
    e.thread = cl->thread;
    e.link = -1;
    e.slot = -1;
    e.ttl_ms = ttl;
    e.inst = cl->inst;
    snprintf(e.lease, sizeof e.lease, "%s", lease);
    long long a, b, c, d, f, g;
    int st, dup;
    char err[64];
    if (line[0] == 'G' && sscanf(line, "G %d %lld %lld %lld %lld %lld %lld %d %63s", &st, &a, &b, &c, &d, &f, &g, &dup,
                                 err) == 9) {
        e.op = CHAOS_STREAM;
        e.status = st;
        e.t_send = a;
        e.t_recv = b;
        e.token = c;
        e.validity_ms = d;
        *silence = g;
        *duplex = dup;
        if (strcmp(err, "-") != 0)
            snprintf(e.error, sizeof e.error, "%.31s", err);
        if (st == 201 && (d <= 0 || d > ttl))
            set_shape(&e, "201_validity_ms_missing_or_out_of_(0,ttl]");
        *gi = record(cl, &e);
        *last_ping = b;
        return;
    }
    if (*gi < 0)
        return;
    e.op = CHAOS_LINE;
    e.link = *gi;
    if (line[0] == 'P' && sscanf(line, "P %lld %lld", &a, &b) == 2) {
        pings[a & 63] = b;
        *last_ping = b;
        return;
    }
    if (line[0] == 'A' && sscanf(line, "A %lld %lld %lld", &a, &b, &c) == 3) {
        e.status = CHAOS_LINE_ALIVE;
        e.t_send = pings[a & 63];
        e.t_recv = b;
        e.validity_ms = c;
        if (c <= 0 || c > ttl)
            set_shape(&e, "alive_validity_ms_missing_or_out_of_(0,ttl]");
    } else if (line[0] == 'E' && sscanf(line, "E %lld %lld", &a, &b) == 2) {
        e.status = CHAOS_LINE_EXTENDED;
        e.t_send = e.t_recv = a;
        e.validity_ms = b;
    } else if (line[0] == 'F' && sscanf(line, "F %lld %63s", &a, err) == 2) {
        e.status = !strcmp(err, "lost") ? CHAOS_LINE_LOST : !strcmp(err, "released") ? CHAOS_LINE_RELEASED
                                                                                   : CHAOS_LINE_OTHER;
        e.t_send = e.t_recv = a;
    } else if (line[0] == 'C' && sscanf(line, "C %lld", &a) == 1) {
        e.status = CHAOS_LINE_CUT;
        e.t_send = e.t_recv = a;
    } else {
        return;
    }
    record(cl, &e);
}

/* 1 if some master was impaired (a fault active on it) */
static int any_fault(struct chaos *cx)
{
    for (int i = 0; i < N_MASTERS; i++)
        if (cx->m[i].busy || cx->m[i].forget_since)
            return 1;
    return 0;
}

/* One cycle: a holder process holds name nm with hold=stream, is SIGSTOPped, and the
 * name is tried every 20 ms until another client gets it (or long past any bound). */
static void stopper_cycle(struct chaos *cx, struct client *cl, int nm)
{
    const struct options *o = &cx->o;
    int64_t ttl = rng_range(&cl->rng, o->min_ttl > 300 ? o->min_ttl : 300, o->max_ttl);
    char lease[48], port[16], ttls[24], logp[300];
    own_lease(cl, lease, sizeof lease);
    cl->seq++;
    snprintf(port, sizeof port, "%d", cx->svc[cl->inst].port);
    snprintf(ttls, sizeof ttls, "%" PRId64, ttl);
    snprintf(logp, sizeof logp, "%s/holder.log", cx->dir);
    char *argv[] = {cx->holder_bin, "--port", port, "--name", cx->hist.names[nm], "--ttl", ttls, "--lease", lease, NULL};
    int out = -1;
    pid_t pid = proc_spawn(cx->holder_bin, argv, logp, &out);
    if (pid < 0) {
        harness_fail(cx, "cannot start %s: %s", cx->holder_bin, strerror(errno));
        return;
    }
    cx->holder_pid[0] = pid;
    char acc[8192], line[512];
    size_t alen = 0;
    long gi = -1;
    int64_t last_ping = 0, pings[64] = {0}, silence = 0;
    int duplex = 0, granted = 0, rc, stopped_it = 0;
    int64_t until = http_now_ns() + 15000 * 1000000LL;
    while (gi < 0 && (rc = holder_line(out, acc, &alen, sizeof acc, line, sizeof line, until)) == 1)
        holder_record(cl, line, &gi, nm, ttl, lease, &last_ping, pings, &duplex, &silence);
    granted = gi >= 0 && cl->local.ev[gi].status == 201;
    if (granted && !duplex && o->stopped_holders < 0) {
        /* a one-way stream cannot tell a stopped reader (docs/DESIGN.md section 10): under
         * auto, stopped holders are for a service with duplex holds */
        cx->duplex = -1;
    }
    if (granted && cx->duplex >= 0) {
        cx->duplex = duplex;
        /* hold a while, reading its lines, then SIGSTOP it */
        int64_t stop_at = cl->local.ev[gi].t_recv + rng_range(&cl->rng, ttl / 4, ttl * 3 / 2) * 1000000LL;
        while ((rc = holder_line(out, acc, &alen, sizeof acc, line, sizeof line, stop_at)) == 1)
            holder_record(cl, line, &gi, nm, ttl, lease, &last_ping, pings, &duplex, &silence);
        if (rc < 0) { /* it ended by itself (lost, released): not a stopped holder */
            granted = 0;
        } else {
            kill(pid, SIGSTOP);
            stopped_it = 1; /* it never acts again: its hold ends where its last answer said */
            int64_t stopped = http_now_ns();
            /* what it wrote before the stop */
            while (holder_line(out, acc, &alen, sizeof acc, line, sizeof line, http_now_ns() + 20000000LL) == 1)
                holder_record(cl, line, &gi, nm, ttl, lease, &last_ping, pings, &duplex, &silence);
            chaos_stopped x = {.name = nm, .duplex = duplex, .ttl_ms = ttl,
                               .silence_ms = silence > 0 ? silence : ttl, .last_ping = last_ping, .stopped = stopped};
            int faults = any_fault(cx);
            int64_t give_up = last_ping + (2 * ttl + x.silence_ms + 3000) * 1000000LL;
            char rl[129];
            int st;
            int64_t token = cl->local.ev[gi].token;
            while (http_now_ns() < give_up && !atomic_load(&cx->abort_run)) {
                /* evidence that it still holds: GET finds a quorum holding the name with the
                 * holder's token (nobody else takes these names; a 409 is no proof under
                 * faults, it counts the masters that did not answer as holding) */
                long ii = cl->local.n;
                client_inspect(cl, nm);
                faults |= any_fault(cx);
                const chaos_event *ie = ii < cl->local.n ? &cl->local.ev[ii] : NULL;
                if (ie && ie->status == 200 && ie->validity_ms > 0 && ie->token >= token) {
                    x.held_last = ie->t_recv;
                    sleep_ms(20);
                    continue;
                }
                long ri = client_acquire(cl, CHAOS_ACQUIRE, nm, CHAOS_MODE_EXCLUSIVE, 200, 0, &st, rl);
                if (ri >= 0 && st == 201) {
                    x.freed = cl->local.ev[ri].t_recv;
                    client_release(cl, ri, rl, 1);
                    break;
                }
                sleep_ms(20);
            }
            x.gave_up = x.freed ? 0 : http_now_ns();
            x.faults = faults;
            if (cx->n_stopped < MAX_STOPPED)
                cx->stopped[cx->n_stopped++] = x;
        }
    }
    kill(pid, SIGKILL);
    int wst;
    proc_wait(pid, 5000, &wst);
    cx->holder_pid[0] = 0;
    if (granted && gi >= 0 && !stopped_it) { /* killed running: its hold ends now at the latest */
        chaos_event c;
        memset(&c, 0, sizeof c);
        c.op = CHAOS_LINE;
        c.status = CHAOS_LINE_CLOSED;
        c.name = nm;
        c.thread = cl->thread;
        c.link = gi;
        c.ttl_ms = ttl;
        c.slot = -1;
        c.inst = cl->inst;
        c.t_send = c.t_recv = http_now_ns();
        record(cl, &c);
    }
    close(out);
}

struct stopper {
    struct chaos *cx;
    struct client cl;
    int64_t end_ns;
    int first_name, n_names;
};

static void *stopper_main(void *arg)
{
    struct stopper *sp = arg;
    struct chaos *cx = sp->cx;
    int k = 0;
    while (http_now_ns() < sp->end_ns && !atomic_load(&cx->abort_run) && cx->duplex >= 0) {
        if (atomic_load(&cx->svc[sp->cl.inst].quiet)) {
            sleep_ms(10);
            continue;
        }
        stopper_cycle(cx, &sp->cl, sp->first_name + k++ % sp->n_names);
        sleep_ms(rng_range(&sp->cl.rng, 100, 600));
    }
    return NULL;
}

/* ---- the run ---------------------------------------------------------------------- */

/* 1 while the service runs; on its exit records how and stops the run.  Called by the
 * monitor thread and by main, hence the lock. */
static int svc_check_alive(struct chaos *cx)
{
    pthread_mutex_lock(&cx->svc_mu);
    int alive = 1;
    for (int k = 0; k < cx->n_svc; k++) {
        struct instance *in = &cx->svc[k];
        int st;
        if (!in->exited && in->pid > 0 && proc_wait(in->pid, 0, &st) == 1) {
            in->exited = 1;
            in->status = st;
            in->exit_ms = now_ms();
            in->pid = 0;
            atomic_store(&cx->abort_run, 1);
        }
        alive &= !in->exited;
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
        if (tick++ % 10 == 0 && cx->svc[0].pid > 0) {
            int fds = proc_fd_count(cx->svc[0].pid);
            long rss = proc_rss_kb(cx->svc[0].pid);
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
        int f = cx->svc[0].pid > 0 ? proc_fd_count(cx->svc[0].pid) : -1;
        *fds = f;
        *rss = cx->svc[0].pid > 0 ? proc_rss_kb(cx->svc[0].pid) : -1;
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
    long unavailable, exhausted, timeouts, connerr, hung_up;
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
        if (e->status != CHAOS_ST_HUNGUP) /* counted apart: a client that hung up on purpose */
            c->by_status[e->op][b]++;
        c->hung_up += e->status == CHAOS_ST_HUNGUP;
        int doc = e->status == CHAOS_ST_HUNGUP ||
                  (e->op == CHAOS_ACQUIRE ? (e->status == 201 || e->status == 409 || e->status == 503)
                  : e->op == CHAOS_RELEASE ? (e->status == 200 || e->status == 404 || e->status == 503)
                                           : (e->status == 200 || e->status == 503));
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
           "inspect %ld (200 %ld, 503 %ld, other %ld); client timeouts %ld, transport errors %ld; waiters that hung up"
           " on purpose %ld\n",
           label, c->op[0], c->by_status[0][0], c->by_status[0][2], c->by_status[0][3], c->unavailable, c->exhausted,
           c->by_status[0][1] + c->by_status[0][4] + c->by_status[0][5], c->op[1], c->by_status[1][0],
           c->by_status[1][1], c->by_status[1][3], c->by_status[1][2] + c->by_status[1][4] + c->by_status[1][5],
           c->op[2], c->by_status[2][0], c->by_status[2][3],
           c->by_status[2][1] + c->by_status[2][2] + c->by_status[2][4] + c->by_status[2][5], c->timeouts, c->connerr,
           c->hung_up);
}

/* Waits until /readyz answers 200 with every master ok.  Milliseconds taken, or -1. */
static long wait_all_ready(struct chaos *cx, int inst, long max_ms, char *last, size_t lastsz)
{
    long long start = now_ms();
    while (now_ms() - start < max_ms) {
        char body[4096] = "";
        int st = http_get_status_on(cx, inst, "/readyz", body, sizeof body);
        snprintf(last, lastsz, "%d %s", st, body);
        if (st == 200) {
            json_error_t jerr;
            json_t *j = json_loads(body, 0, &jerr);
            json_t *ms = json_object_get(j, "masters");
            size_t i, n_ok = 0;
            json_t *v;
            json_array_foreach(ms, i, v)
            {
                /* a master whose clock was moved may be kept out a long while after its
                 * clock is right again (until it is steady, and until a quarantine written
                 * in its moved clock runs out): not waited for */
                int moved = 0;
                json_t *a = json_object_get(v, "address");
                for (int m = 0; m < N_MASTERS && json_is_string(a); m++) {
                    char addr[32];
                    snprintf(addr, sizeof addr, "127.0.0.1:%d", cx->m[m].proxy_port);
                    moved |= cx->m[m].clock_moved && strstr(json_string_value(a), addr) != NULL;
                }
                n_ok += json_is_true(json_object_get(v, "ok")) || moved;
            }
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
    if (http_client_init(&cl->hc, "127.0.0.1", cx->svc[0].port) < 0) {
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
    /* a warm-up client may have left the name to expire (ttl <= 400 ms): wait it out;
     * on a busy machine a round can also miss its node timeout on a master (503): try
     * again, for up to 10 s in all */
    long hi = client_acquire(&holder, CHAOS_ACQUIRE, 0, CHAOS_MODE_EXCLUSIVE, cx->o.max_ttl, 0, &st, hlease);
    long long give_up = now_ms() + 10000;
    while (hi >= 0 && (st == 409 || st == 503) && now_ms() < give_up) {
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
    } else if (loss == F_CLOCK_JUMP) {
        /* two of the holder's three masters: their wall clocks jump an hour forward, and
         * every key they hold expires at once (issue 28) */
        long rec = fault_record_open(cx, F_CLOCK_JUMP);
        for (int i = 0; i < 2; i++) {
            if (clockshim_jump(cx->m[i].clock, 3600 * 1000LL) < 0) {
                harness_fail(cx, "scenario %s: cannot write %s", sc, cx->m[i].clock);
                goto out;
            }
            cx->m[i].clock_moved = 1;
        }
        cx->fault_count[F_CLOCK_JUMP]++;
        fault_record_close(cx, rec);
        cx->m[0].lost_at = now_ms();
        sleep_ms(30); /* the shim reads its file every 10 ms */
        char key[128], reply[64];
        snprintf(key, sizeof key, "EXISTS redlock:%s", cx->hist.names[0]);
        if (redis_command(cx->m[0].port, key, reply, sizeof reply, 2000) == 0 && !strcmp(reply, ":1")) {
            harness_fail(cx, "scenario %s: master 0 still has the holder's key after its clock jumped", sc);
            goto out;
        }
        how = "and master 1 jumped an hour forward";
        fault_logf(cx, "scenario: masters 0 and 1: wall clock +1 h");
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
            if (forgets(cx->frec[r].kind) && cx->frec[r].start_ms <= t &&
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
            "                         aof_cut, flushall, lag, hdel_counter, restore_old, compound,\n"
            "                         clock_jump, clock_fast, clock_back; '-' for '_' is fine);\n"
            "                         all by default (the clock kinds only with clock faults on)\n"
            "  --compound on|off      compound faults (on)\n"
            "  --compound-weight N    compound faults per deck of every other kind once (3)\n"
            "  --instances N          service instances, 1 or 2 (2; a scenario always has 1)\n"
            "  --stopped-holders auto|on|off  client processes holding with hold=stream, stopped\n"
            "                         by SIGSTOP, for (m) (auto: on if the service answers the\n"
            "                         duplex hold with 101)\n"
            "  --clock-faults auto|on|off  masters under the clock shim, clock_* kinds dealt (auto:\n"
            "                         on if the service's --help lists a clock option)\n"
            "  --clockshim PATH       the shim (build/clock/clockshim.so)\n"
            "  --has-clock-check      print yes or no: does the service check clocks; then exit\n"
            "  --expect-double-grant  a positive control: (a) must fail, and that passes\n"
            "  --sample-ms MS         (l): a pass over the masters every MS (150)\n"
            "  --mark-bound-ms MS     (l): how long a writer mark may outlive its writer (3000)\n"
            "  --own-lease-pct P      requests that send a lease of their own (50; waiting\n"
            "                         writers always do)\n"
            "  --reentrant-pct P      exclusive acquires that are reentrant holds (6)\n"
            "  --hangup-pct P         exclusive acquires that wait long and hang up early (3)\n"
            "  --hot-share P          lock-name picks that go to the first name (40)\n"
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
            "     clock-jump-held  the same (ttl 4000), but the wall clocks of masters 0 and 1\n"
            "                   jump an hour forward (the clock shim)\n"
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
    /* (l) too, when the run's samples lie next to its history */
    char spath[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(spath, sizeof spath, "%.*ssamples.tsv", slash ? (int)(slash - path + 1) : 0, path);
    FILE *sf = fopen(spath, "re");
    if (sf) {
        chaos_obs_set s;
        memset(&s, 0, sizeof s);
        if (chaos_obs_load(&s, &h, sf) == 0)
            v += chaos_judge_leftovers(&h, &s, &o, stdout);
        else
            fprintf(stderr, "chaos: %s: not a samples file\n", spath);
        chaos_obs_free(&s);
        fclose(sf);
    }
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
    o->instances = 2;
    o->stopped_holders = -1;
    o->clock_faults = -1;
    o->clockshim = "build/clock/clockshim.so";
    o->sample_ms = 150;
    o->mark_bound_ms = 3000;
    o->own_lease_pct = 50;
    o->reentrant_pct = 6;
    o->hangup_pct = 3;
    o->hot_share = 40;
    o->compound = 1;
    o->compound_weight = COMPOUND_WEIGHT;
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
        INT_OPT("--instances", 1, MAX_INSTANCES, o->instances)
        INT_OPT("--sample-ms", 20, 10000, o->sample_ms)
        INT_OPT("--mark-bound-ms", 0, 600000, o->mark_bound_ms)
        INT_OPT("--own-lease-pct", 0, 100, o->own_lease_pct)
        INT_OPT("--reentrant-pct", 0, 100, o->reentrant_pct)
        INT_OPT("--hangup-pct", 0, 100, o->hangup_pct)
        INT_OPT("--hot-share", 0, 100, o->hot_share)
        INT_OPT("--compound-weight", 1, COMPOUND_WEIGHT, o->compound_weight)
        if (!strcmp(a, "--stopped-holders") || !strcmp(a, "--clock-faults") || !strcmp(a, "--compound")) {
            NEED_VALUE;
            int val = !strcmp(v, "auto") ? -1 : !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -2;
            if (val == -2 || (val == -1 && !strcmp(a, "--compound"))) {
                fprintf(stderr, "chaos: bad %s '%s' (%s)\n", a, v, strcmp(a, "--compound") ? "auto, on, off" : "on, off");
                return -1;
            }
            if (!strcmp(a, "--stopped-holders"))
                o->stopped_holders = val;
            else if (!strcmp(a, "--clock-faults"))
                o->clock_faults = val;
            else
                o->compound = val;
            continue;
        }
        if (!strcmp(a, "--clockshim")) {
            NEED_VALUE;
            o->clockshim = v;
            continue;
        }
        if (!strcmp(a, "--expect-double-grant")) {
            o->expect_double_grant = 1;
            continue;
        }
        if (!strcmp(a, "--has-clock-check")) {
            *judge = "--has-clock-check";
            continue;
        }
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
                strcmp(v, "flushall-held") != 0 && strcmp(v, "clock-jump-held") != 0) {
                fprintf(stderr, "chaos: unknown --scenario '%s' (counter-loss, empty-held, aof-cut-held,"
                                " flushall-held, clock-jump-held)\n", v);
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
    if (judge && !strcmp(judge, "--has-clock-check")) {
        /* for chaos.mk: does this service check its masters' clocks (issue 28)? */
        snprintf(cx->dir, sizeof cx->dir, "%s/redlockd-chaos.XXXXXX", cx->o.dir_root);
        if (!mkdtemp(cx->dir))
            return 3;
        service_probe_flags(cx);
        rm_rf(cx->dir);
        printf("%s\n", cx->clock_check ? "yes" : "no");
        return 0;
    }
    if (judge)
        return judge_file(judge);

    struct options *o = &cx->o;
    pthread_mutex_init(&cx->proxy_mu, NULL);
    pthread_mutex_init(&cx->err_mu, NULL);
    pthread_mutex_init(&cx->svc_mu, NULL);
    pthread_mutex_init(&cx->obs_mu, NULL);
    cx->n_svc = o->scenario ? 1 : o->instances; /* a directed scenario is one instance's */
    snprintf(cx->holder_bin, sizeof cx->holder_bin, "%.*s/chaos_holder",
             (int)(strrchr(o->proxy_bin, '/') ? strrchr(o->proxy_bin, '/') - o->proxy_bin : 1),
             strrchr(o->proxy_bin, '/') ? o->proxy_bin : ".");
    for (int i = 0; i < o->names; i++)
        snprintf(cx->hist.names[i], sizeof cx->hist.names[0], "chaos:%c", 'a' + i);
    for (int i = 0; i < o->cold_names; i++)
        snprintf(cx->hist.names[o->names + i], sizeof cx->hist.names[0], "chaos:cold-%c", 'a' + i);
    for (int i = 0; i < o->sem_names; i++) {
        int k = o->names + o->cold_names + i;
        snprintf(cx->hist.names[k], sizeof cx->hist.names[0], "chaos:sem-%c", 'a' + i);
        cx->hist.permits[k] = o->permits + i;
    }
    int stop_first = o->names + o->cold_names + o->sem_names, stop_names = 2;
    for (int i = 0; i < stop_names; i++) /* the stopped holders' names: nobody else takes them */
        snprintf(cx->hist.names[stop_first + i], sizeof cx->hist.names[0], "chaos:stop-%c", 'a' + i);
    cx->hist.n_names = stop_first + stop_names;

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
    sigaction(SIGHUP, &sa, NULL);
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
    /* Clock faults: with the service's clock check (issue 28), or asked for; each master
     * then runs under the clock shim (tests/clock) */
    int clock_asked = o->scenario && !strcmp(o->scenario, "clock-jump-held");
    for (int k = 0; k < F_NKINDS; k++)
        clock_asked |= o->faults_given && (o->fault_mask & (1u << k)) && fault_table[k].clock;
    cx->clock_on = o->clock_faults == 1 || (o->clock_faults < 0 && (cx->clock_check || clock_asked));
    static char shim_abs[PATH_MAX];
    if (cx->clock_on) {
        if (!realpath(o->clockshim, shim_abs)) {
            fprintf(stderr, "chaos: clock faults need the clock shim %s (make clockshim): %s\n", o->clockshim,
                    strerror(errno));
            rm_rf(cx->dir);
            return 3;
        }
        o->clockshim = shim_abs;
    }
    int n_kinds = 0;
    char kinds[512] = "";
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
    if (!o->scenario) {
        printf("chaos: fault kinds dealt: %s\n", kinds);
        printf("chaos: %d service instance%s (every other client thread on the second; a compound fault freezes it"
               " half the time); compound faults %s; clock faults %s%s; stopped streamed holders %s; own leases"
               " %d%%, reentrant holds %d%%, waiters that hang up %d%% of the exclusive clients' requests; masters"
               " sampled every %d ms for (l), writer marks may outlive their writer %ld ms\n",
               cx->n_svc, cx->n_svc > 1 ? "s" : "", o->compound ? "on" : "off", cx->clock_on ? "on" : "off",
               cx->clock_on ? "" : cx->clock_check ? "" : " (the service has no clock check: see chaos-scenarios' control)",
               o->stopped_holders == 0 ? "off" : o->stopped_holders == 1 ? "on" : "auto (on with duplex holds)",
               o->own_lease_pct, o->reentrant_pct, o->hangup_pct, o->sample_ms, o->mark_bound_ms);
    }
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
    starve_sampler *starve = NULL, *starve_y = NULL;
    chaos_sampler *sampler = NULL;
    static int master_ports[N_MASTERS];
    static struct stopper stp;
    cx->stopped = calloc(MAX_STOPPED, sizeof *cx->stopped);
    cx->fspan = calloc(MAX_FAULT_RECORDS, sizeof *cx->fspan);
    pthread_t mon_th = 0, inj_th = 0, stop_th = 0;
    int base_fds = -1, end_fds = -1;
    long base_rss = -1, end_rss = -1;
    long fault_from = 0, fault_to = 0, cool_from = 0;
    long ready_ms = -1, ready_y_ms = -1;
    char ready_last[4200] = "", ready_y_last[4200] = "";
    int stop_status = -1, stop_status_y = -1;
    long long stop_ms = -1, stop_ms_y = -1;
    off_t log_at_stop = -1; /* the service's log size when it was sent SIGTERM */

    if (masters_start(cx) < 0 || proxy_start(cx) < 0 || service_start(cx) < 0) {
        harness_broken = 1;
        goto cleanup;
    }
    printf("chaos: masters on ports");
    for (int i = 0; i < N_MASTERS; i++)
        printf(" %d(via %d)", cx->m[i].port, cx->m[i].proxy_port);
    printf(", redlockd pid %d on 127.0.0.1:%d", (int)cx->svc[0].pid, cx->svc[0].port);
    if (cx->n_svc > 1)
        printf(", a second one pid %d on 127.0.0.1:%d", (int)cx->svc[1].pid, cx->svc[1].port);
    printf("\nchaos: redlockd flags: %s\n", cx->svc_flags);
    for (int i = 0; i < N_MASTERS; i++)
        master_ports[i] = cx->m[i].port;
    /* (l): what every master holds, straight from its own port, all through the run */
    sampler = chaos_sampler_start(master_ports, N_MASTERS, "redlock:", &cx->hist, &cx->obs, &cx->obs_mu, o->sample_ms);
    if (!sampler) {
        harness_broken = 1;
        goto cleanup;
    }
    if (pthread_create(&mon_th, NULL, monitor_main, &mo) != 0) {
        harness_broken = 1;
        goto cleanup;
    }
    starve = starve_sampler_new(cx->svc[0].pid, 10);
    if (cx->n_svc > 1)
        starve_y = starve_sampler_new(cx->svc[1].pid, 10);
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
        else if (!strcmp(o->scenario, "clock-jump-held"))
            scenario_held(cx, F_CLOCK_JUMP);
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
        /* (m): a client process holding with hold=stream, stopped, again and again */
        if (o->stopped_holders != 0 && access(cx->holder_bin, X_OK) == 0) {
            stp.cx = cx;
            stp.end_ns = http_now_ns() + ((long long)o->duration_s * 1000 - 2500) * 1000000LL;
            stp.first_name = stop_first;
            stp.n_names = stop_names;
            stp.cl.cx = cx;
            stp.cl.thread = o->clients + o->shared_clients + o->sem_clients + o->stream_clients;
            stp.cl.sched_fd = -1;
            stp.cl.rng = o->seed * 0xA24BAED4963EE407ULL + 7;
            if (http_client_init(&stp.cl.hc, "127.0.0.1", cx->svc[0].port) < 0 ||
                pthread_create(&stop_th, NULL, stopper_main, &stp) != 0) {
                harness_broken = 1;
                goto cleanup;
            }
        } else if (o->stopped_holders == 1) {
            fprintf(stderr, "chaos: --stopped-holders on needs %s\n", cx->holder_bin);
            harness_broken = 1;
            goto cleanup;
        }
        run_clients(cx, (long)o->duration_s * 1000, 2);
        if (stop_th) {
            pthread_join(stop_th, NULL);
            stop_th = 0;
            http_client_free(&stp.cl.hc);
            merge_local(cx, &stp.cl);
        }
        fault_to = cx->hist.n;
        atomic_store(&cx->injector_stop, 1);
        while (!atomic_load(&cx->injector_healed) && !atomic_load(&cx->abort_run))
            sleep_ms(10);
    }

    /* recovery: every master back in /readyz (a quarantine may hold one out a while) */
    if (!atomic_load(&cx->abort_run))
        ready_ms = wait_all_ready(cx, 0, o->max_ttl + 15000, ready_last, sizeof ready_last);
    if (cx->n_svc > 1 && !atomic_load(&cx->abort_run))
        ready_y_ms = wait_all_ready(cx, 1, o->max_ttl + 15000, ready_y_last, sizeof ready_y_last);
    cool_from = cx->hist.n;
    if (!atomic_load(&cx->abort_run))
        run_clients(cx, o->cooldown_ms, 3);
    starve_sampler_stop(starve);
    starve_sampler_stop(starve_y);
    if (cx->svc[0].pid > 0)
        settle_reading(cx, &end_fds, &end_rss, base_fds + o->fd_slack, 8000);
    atomic_store(&mo.stop, 1);
    pthread_join(mon_th, NULL);
    mon_th = 0;
    /* (l) looked at the masters until now: the settling above gave the last holders' marks
     * and entries some of their bound to go (a leftover of the last seconds may go unseen) */
    chaos_sampler_stop(sampler);
    sampler = NULL;
    svc_check_alive(cx);
    if (cx->svc[0].pid > 0) {
        struct stat lst;
        log_at_stop = stat(cx->svc[0].log, &lst) == 0 ? lst.st_size : 0;
        long long t = now_ms();
        stop_status = proc_stop(cx->svc[0].pid, SIGTERM, 10000);
        stop_ms = now_ms() - t;
        cx->svc[0].pid = 0;
    }
    if (cx->n_svc > 1 && cx->svc[1].pid > 0) {
        long long t = now_ms();
        stop_status_y = proc_stop(cx->svc[1].pid, SIGTERM, 10000);
        stop_ms_y = now_ms() - t;
        cx->svc[1].pid = 0;
    }

cleanup:
    if (stop_th) {
        atomic_store(&cx->abort_run, 1);
        pthread_join(stop_th, NULL);
        http_client_free(&stp.cl.hc);
        chaos_history_free(&stp.cl.local);
    }
    chaos_sampler_stop(sampler);
    if (cx->n_svc > 1 && cx->svc[1].pid > 0) {
        kill(cx->svc[1].pid, SIGCONT);
        proc_stop(cx->svc[1].pid, SIGKILL, 5000);
        cx->svc[1].pid = 0;
    }
    if (mon_th) {
        atomic_store(&mo.stop, 1);
        pthread_join(mon_th, NULL);
    }
    if (cx->svc[0].pid > 0) {
        proc_stop(cx->svc[0].pid, SIGKILL, 5000);
        cx->svc[0].pid = 0;
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
        starve_sampler_free(starve_y);
        printf("chaos: HARNESS ERROR: setup failed; run directory kept: %s\n", cx->dir);
        chaos_history_free(&cx->hist);
        free(cx->frec);
        return 3;
    }

    /* ---- verdicts ---- */
    starve_sampler_stop(starve);
    starve_sampler_stop(starve_y);
    for (long i = 0; i < cx->hist.n; i++) {
        chaos_event *e = &cx->hist.ev[i];
        int64_t a = starve_sampler_max_delay(starve, e->t_send, e->t_recv);
        int64_t b = starve_y ? starve_sampler_max_delay(starve_y, e->t_send, e->t_recv) : 0;
        e->allow_ns += a > b ? a : b;
        /* the instance it went to was frozen (a compound fault): that time is not its own */
        for (long p = 0; p < cx->obs.n_p; p++) {
            const chaos_pause *pz = &cx->obs.p[p];
            if (pz->who != CHAOS_PAUSE_INST + e->inst)
                continue;
            int64_t from = pz->from > e->t_send ? pz->from : e->t_send, to = pz->to < e->t_recv ? pz->to : e->t_recv;
            if (to > from)
                e->allow_ns += to - from;
        }
    }
    starve_sampler_free(starve);
    starve_sampler_free(starve_y);
    starve = starve_y = NULL;
    for (int i = 0; i < N_MASTERS && o->scenario; i++) /* a random run skips each move's window */
        if (cx->m[i].clock_moved)
            cx->obs.skip_masters |= 1u << i;
    for (long i = 0; i < cx->n_fspan; i++) /* masters that forgot count for no quorum meanwhile */
        (void)chaos_pause_add(&cx->obs, CHAOS_PAUSE_OUT + cx->fspan[i].master, cx->fspan[i].from * 1000000LL,
                              cx->fspan[i].to * 1000000LL);
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
    snprintf(hpath, sizeof hpath, "%.255s/samples.tsv", cx->dir);
    hf = fopen(hpath, "we");
    if (!hf || chaos_obs_save(&cx->obs, &cx->hist, &jo, hf) < 0)
        fprintf(stderr, "chaos: cannot write %s\n", hpath);
    if (hf)
        fclose(hf);
    jo.mark_bound_ms = o->mark_bound_ms;
    jo.quorum = QUORUM;

    char failed[96] = "";
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
    if (!o->scenario && chaos_judge_leftovers(&cx->hist, &cx->obs, &jo, stdout))
        strcat(failed, " (l)");
    if (!o->scenario && o->stopped_holders != 0) {
        if (cx->duplex < 0 || (cx->n_stopped == 0 && o->stopped_holders < 0))
            printf("chaos: ---- (m) a stopped streamed holder lets go: not judged (%s)\n",
                   cx->duplex < 0 ? "the service answers hold=stream one-way only, which cannot tell a stopped reader"
                                    " (docs/DESIGN.md section 10); --stopped-holders on judges it anyway"
                                  : "no holder was granted");
        else if (chaos_judge_stopped(cx->stopped, cx->n_stopped, &jo, stdout))
            strcat(failed, " (m)");
    }
    if (!o->scenario) {
        /* (n) the run stayed within the assumptions: fewer than a quorum forgetting at once */
        long most = 0, most_out = 0, n_forgot = 0;
        long long at = 0;
        for (long i = 0; i < cx->n_fspan; i++) {
            long n = 0, n_out = 0;
            n_forgot += cx->fspan[i].forgot;
            for (long j = 0; j < cx->n_fspan; j++) {
                int over = cx->fspan[j].from <= cx->fspan[i].from && cx->fspan[j].to > cx->fspan[i].from;
                n_out += over;
                n += over && cx->fspan[j].forgot && cx->fspan[i].forgot;
            }
            if (n > most) {
                most = n;
                at = cx->fspan[i].from;
            }
            if (n_out > most_out)
                most_out = n_out;
        }
        printf("chaos: %s (n) within the assumptions: %ld spans of a master forgetting (data lost or clock moved,"
               " until it was back and a max ttl had passed), at most %ld of %d masters at once%s%.3f s"
               " [fewer than a quorum, docs/DESIGN.md section 8]; with the restarts that kept their data, at"
               " most %ld out of trust at once\n",
               most >= QUORUM ? "FAIL" : "PASS", n_forgot, most, N_MASTERS, most ? ", first at " : "",
               most ? rel_s(cx, at) : 0.0, most_out);
        if (most >= QUORUM)
            strcat(failed, " (n)");
    }

    if (cx->svc[0].exited) {
        int st = cx->svc[0].status;
        printf("chaos: FAIL (e) service alive: redlockd exited at %.3f s (%s %d); log tail:\n",
               rel_s(cx, cx->svc[0].exit_ms), WIFSIGNALED(st) ? "signal" : "status",
               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        fflush(stdout);
        print_log_tail(cx->svc[0].log, 15);
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
        leak_report_since(cx->svc[0].log, log_at_stop, res.leak_report, sizeof res.leak_report);
    if (chaos_judge_resources(&res, stdout))
        strcat(failed, " (f)");

    if (ready_ms < 0 && cx->harness_err[0] && !cx->svc[0].exited)
        printf("chaos: ---- (g) recovery: not judged (the run stopped on a harness error)\n");
    else if (ready_ms >= 0)
        printf("chaos: PASS (g) recovery: /readyz reported all %d masters ok %ld ms after the faults were healed%s\n",
               N_MASTERS, ready_ms,
               cx->obs.skip_masters ? " (masters whose clock was moved not waited for: the service keeps them out until"
                                      " steady and until a quarantine written in the moved clock has run)"
                                    : "");
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
            print_log_tail(cx->svc[0].log, 4);
            strcat(failed, " (h)");
        }
    }
    if (cx->n_svc > 1) { /* the second instance: alive, recovered, clean shutdown */
        struct instance *y = &cx->svc[1];
        int clean = stop_status_y >= 0 && WIFEXITED(stop_status_y) && WEXITSTATUS(stop_status_y) == 0;
        int ok = !y->exited && ready_y_ms >= 0 && clean;
        printf("chaos: %s (e, g, h) the second instance: %s; /readyz all ok %ld ms after healing; on SIGTERM stopped"
               " in %lld ms with status %d\n",
               ok ? "PASS" : "FAIL", y->exited ? "EXITED during the run" : "never exited", ready_y_ms, stop_ms_y,
               stop_status_y < 0 ? -1 : WIFEXITED(stop_status_y) ? WEXITSTATUS(stop_status_y) : 128 + WTERMSIG(stop_status_y));
        if (!ok) {
            if (ready_y_ms < 0)
                printf("    last /readyz: %.300s\n", ready_y_last);
            fflush(stdout);
            print_log_tail(y->log, 6);
            strcat(failed, " (e2)");
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
    char missed[256] = "";
    printf("chaos: faults injected:");
    for (int k = 0, mso = 0; k < F_NKINDS; k++) {
        printf(" %s %ld%s", fault_table[k].name, cx->fault_count[k], k + 1 < F_NKINDS ? "," : "");
        total_faults += cx->fault_count[k];
        if (cx->fault_count[k] == 0 && kind_enabled(cx, k) && !o->scenario) {
            missing = 1;
            mso += snprintf(missed + mso, sizeof missed - (size_t)mso, "%s%s", mso ? "," : "", fault_table[k].name);
        }
    }
    printf(" (total %ld); timeline in %s/faults.log\n", total_faults, cx->dir);
    long lag_grants = 0, cp_grants[MAX_INSTANCES] = {0}, y_after = 0;
    if (!o->scenario) {
        /* grants made while some master lagged (missed them), and during compound faults */
        for (long i = 0; i < cx->hist.n; i++) {
            const chaos_event *e = &cx->hist.ev[i];
            if ((e->op != CHAOS_ACQUIRE && e->op != CHAOS_STREAM) || e->status != 201 || e->nested)
                continue;
            long long s0 = e->t_send / 1000000, r0 = e->t_recv / 1000000;
            int lagging = 0, in_cp = 0;
            for (long r = 0; r < cx->n_frec; r++) {
                const struct fault_record *fr = &cx->frec[r];
                long long end = fr->end_ms ? fr->end_ms : LLONG_MAX;
                enum fault_kind k = fr->kind;
                if ((k == F_LAG || k == F_FREEZE_MINORITY || k == F_DROP || k == F_CUT || k == F_KILL_AOF) &&
                    fr->start_ms <= s0 && end >= r0)
                    lagging = 1;
                if (k == F_COMPOUND && fr->start_ms <= r0 && end >= r0)
                    in_cp = 1;
            }
            lag_grants += lagging;
            cp_grants[e->inst] += in_cp;
            for (long p = 0; p < cx->obs.n_p && e->inst == 1; p++) /* the second instance's first grants after a freeze */
                y_after += cx->obs.p[p].who == CHAOS_PAUSE_INST + 1 && e->t_send < cx->obs.p[p].to &&
                           e->t_recv > cx->obs.p[p].to;
        }
        char fk[256] = "", ik[256] = "";
        for (int k = 0, fo = 0, io = 0; k < F_NKINDS; k++) {
            if (cx->compound_forget[k])
                fo += snprintf(fk + fo, sizeof fk - (size_t)fo, "%s%s %ld", fo ? ", " : "", fault_table[k].name,
                               cx->compound_forget[k]);
            if (cx->compound_impair[k])
                io += snprintf(ik + io, sizeof ik - (size_t)io, "%s%s %ld", io ? ", " : "",
                               k == F_FREEZE_MINORITY ? "freeze" : k == F_KILL_AOF ? "kill" : fault_table[k].name,
                               cx->compound_impair[k]);
        }
        printf("chaos: compound faults: %ld (forgetting: %s; lagging, frozen or down meanwhile: %s; two masters"
               " forgetting at once in %ld; one more down across the repair in %ld; forgetting first, then lagging"
               " across the repair, in %ld; the second instance frozen through %ld, quiet through %ld; every instance"
               " quiet from the forgetting to the repair in %ld; the whole cluster in %ld); grants during"
               " them %ld via the first instance, %ld via the second (%ld of them in flight across its freeze);"
               " grants made while a master lagged, was frozen or down: %ld%s\n",
               cx->compound_n, fk[0] ? fk : "none", ik[0] ? ik : "none", cx->compound_two, cx->compound_down,
               cx->compound_forget_first, cx->compound_y, cx->compound_quiet, cx->compound_all_quiet,
               cx->compound_full, cp_grants[0], cp_grants[1], y_after,
               lag_grants,
               cx->compound_skipped ? " (compound faults skipped at the end of the run: too late to start)" : "");
        if (o->compound && kind_enabled(cx, F_COMPOUND) && cx->compound_n == 0)
            missing = 1;
    }
    if (!o->scenario && o->reentrant_pct)
        printf("chaos: INFO reentrant holds: %ld re-entries granted; %ld answered fewer holds than the client made (its"
               " increment reached fewer than a quorum, the quorum's count is answered), %ld a token above the outer"
               " grant's (OpenAPI says the same token)\n",
               js.nested_grants, atomic_load(&cx->reentry_holds_below), atomic_load(&cx->reentry_token_above));
    if (js.n_v)
        print_violations_by_fault(cx, &js);
    if (o->expect_double_grant) {
        /* a positive control: the checker must find the double grant the service lets through */
        if (strstr(failed, "(a)")) {
            printf("chaos: control: %s%s: double grant caught, as it must be\n", o->scenario ? o->scenario : "run",
                   !cx->clock_on             ? ""
                   : !cx->clock_check        ? " without a clock check"
                   : extra_has(cx, "--clock-check") ? " with the clock check off"
                                                   : "");
            char *p = strstr(failed, " (a)");
            memmove(p, p + 4, strlen(p + 4) + 1);
        } else {
            printf("chaos: control: %s: the double grant was NOT caught: the checker is blind\n",
                   o->scenario ? o->scenario : "run");
            strcat(failed, " (control)");
        }
    }

    if (cx->harness_err[0]) {
        printf("chaos: HARNESS ERROR: %s\n", cx->harness_err);
        exit_code = 3;
    } else if (missing && o->duration_s >= 60) {
        printf("chaos: HARNESS ERROR: not every enabled fault kind was injected (run longer): %s\n", missed);
        exit_code = 3;
    } else if (missing) {
        /* a short run gets what its time allows: quarantines, repairs and clocks that must
         * be steady for seconds keep the later kinds of the deck waiting */
        printf("chaos: note: kinds not dealt in this %d s run: %s (every kind must come up in a run of 60 s or"
               " more)\n", o->duration_s, missed);
    }
    if (failed[0]) {
        printf("chaos: RESULT: FAILED%s in %.1f s; history %s/history.tsv (re-judge with --judge)\n", failed,
               (now_ms() - t_start) / 1000.0, cx->dir);
        exit_code = 1;
    } else if (!exit_code && o->expect_double_grant) {
        /* the control line above is the result: a control has no RESULT line of its own */
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
               " at once); %ld permits granted (%ld above N, most at once: %s)",
               js.streams, js.lost, js.late_lost, js.shared_grants, js.reader_writer, js.max_readers, js.sem_grants,
               js.sem_over, most[0] ? most : "no semaphores");
        if (!o->scenario)
            printf("; compound faults %ld (%ld grants during them); nothing held by nobody: %ld live entries judged, 0"
                   " left beyond the bound (a mark at most %.0f ms after its writer); stopped holders: %ld, free again"
                   " within %.0f ms at most",
                   cx->compound_n, cp_grants[0] + cp_grants[1], js.obs_judged, js.mark_after_gone_ms, js.stopped,
                   js.stopped_worst_ms);
        printf("\n");
    }
    if ((exit_code == 0 && !o->keep) || o->discard)
        rm_rf(cx->dir);
    else
        printf("chaos: run directory kept: %s\n", cx->dir);
    chaos_history_free(&cx->hist);
    free(cx->frec);
    return exit_code;
}
