/* metrics.c -- /metrics rendering (see metrics.h). */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hist.h"
#include "http.h"
#include "lockop.h"
#include "loop.h"
#include "master.h"
#include "route.h"
#include "version.h"
#include "worker.h"

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

static uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

static uint64_t sum_counter(app *a, int c)
{
    uint64_t s = 0;
    for (size_t i = 0; i < a->nworkers; i++)
        s += lockop_counter(worker_ops(a->workers[i]), c);
    return s;
}

/* One histogram series: cumulative buckets, +Inf, sum and count.  A series with no
 * observation is left out unless always. */
static void histogram(sbuf *b, const char *name, const char *labels, const uint64_t *counts,
                      const int64_t *bounds_us, size_t n, uint64_t sum_us, int always)
{
    uint64_t total = 0;
    for (size_t k = 0; k <= n; k++)
        total += counts[k];
    if (!total && !always)
        return;
    uint64_t cum = 0;
    for (size_t k = 0; k < n; k++) {
        cum += counts[k];
        sb_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, (double)bounds_us[k] / 1e6,
                  (unsigned long long)cum);
    }
    sb_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)total);
    sb_printf(b, "%s_sum{%s} %.6f\n", name, labels, (double)sum_us / 1e6);
    sb_printf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)total);
}

/* When this process started, in seconds since the epoch: its start in clock ticks
 * after boot (/proc/self/stat, field 22) plus the boot time (/proc/stat, btime), as
 * Prometheus's own client libraries read it.  0 if /proc says nothing. */
static double metrics_process_start_s(void)
{
    char buf[1024];
    unsigned long long start_ticks = 0, btime = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        for (int field = 2; p && field < 22; field++)
            p = strchr(p + 1, ' ');
        if (p)
            start_ticks = strtoull(p + 1, NULL, 10);
    }
    f = fopen("/proc/stat", "r");
    if (f) {
        while (fgets(buf, sizeof buf, f))
            if (sscanf(buf, "btime %llu", &btime) == 1)
                break;
        fclose(f);
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (!btime || hz <= 0)
        return 0;
    return (double)btime + (double)start_ticks / (double)hz;
}

char *metrics_render(app *a, size_t *len)
{
    sbuf b = {malloc(8192), 0, 8192, 0};
    if (!b.p)
        return NULL;
    sb_printf(&b, "# HELP redlockd_build_info Build information.\n# TYPE redlockd_build_info gauge\n"
                  "redlockd_build_info{version=\"%s\"} 1\n", RL_VERSION);
    sb_printf(&b, "# HELP redlockd_uptime_seconds Seconds since start.\n# TYPE redlockd_uptime_seconds gauge\n"
                  "redlockd_uptime_seconds %.3f\n", (double)(clock_now_us() - a->started_us) / 1e6);

    sb_printf(&b, "# HELP process_start_time_seconds Start time of the process since the Unix epoch, in seconds.\n"
                  "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
              metrics_process_start_s());

    sb_printf(&b, "# HELP redlockd_http_requests_total HTTP requests by route, method and status.\n"
                  "# TYPE redlockd_http_requests_total counter\n");
    http_stats *hs = calloc(1, sizeof *hs);
    if (!hs) {
        free(b.p);
        return NULL;
    }
    for (size_t i = 0; i < a->nworkers; i++)
        http_server_stats(worker_http(a->workers[i]), hs);
    for (int r = 0; r < ROUTE__COUNT; r++)
        for (int m = 0; m < ROUTE_M__COUNT; m++)
            for (int c = 0; c < HIST_STATUS_N; c++) {
                uint64_t s = hs->requests[r][m][c];
                char code[16] = "other";
                if (c != HIST_STATUS_OTHER)
                    snprintf(code, sizeof code, "%d", hist_statuses[c]);
                if (s)
                    sb_printf(&b, "redlockd_http_requests_total{route=\"%s\",method=\"%s\",code=\"%s\"} %llu\n",
                              route_get(r)->label, route_method_name(m), code, (unsigned long long)s);
            }
    sb_printf(&b, "# HELP redlockd_request_duration_seconds Time from a request's first byte of header to its answer "
                  "(acquire, release, extend, inspect and wait alike; streamed holds not counted), by route and method.\n"
                  "# TYPE redlockd_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE__COUNT; r++)
        for (int m = 0; m < ROUTE_M__COUNT; m++) {
            char labels[128];
            snprintf(labels, sizeof labels, "route=\"%s\",method=\"%s\"", route_get(r)->label, route_method_name(m));
            histogram(&b, "redlockd_request_duration_seconds", labels, hs->dur[r][m], hist_req_bounds_us,
                      HIST_REQ_N, hs->dur_sum_us[r][m], 0);
        }

    static const struct { int c; const char *metric, *label; } outcomes[] = {
        {CNT_ACQ_GRANTED, "redlockd_acquire_total", "granted"},
        {CNT_ACQ_HELD, "redlockd_acquire_total", "held"},
        {CNT_ACQ_UNAVAILABLE, "redlockd_acquire_total", "quorum_unavailable"},
        {CNT_ACQ_VALIDITY, "redlockd_acquire_total", "validity_exhausted"},
        {CNT_ACQ_WAITED_OUT, "redlockd_acquire_total", "wait_timeout"},
        {CNT_REL_OK, "redlockd_release_total", "released"},
        {CNT_REL_NOT_FOUND, "redlockd_release_total", "lease_not_found"},
        {CNT_REL_UNAVAILABLE, "redlockd_release_total", "quorum_unavailable"},
        {CNT_EXT_OK, "redlockd_extend_total", "extended"},
        {CNT_EXT_NOT_FOUND, "redlockd_extend_total", "lease_not_found"},
        {CNT_EXT_UNAVAILABLE, "redlockd_extend_total", "quorum_unavailable"},
    };
    const char *last = "";
    for (size_t k = 0; k < sizeof outcomes / sizeof outcomes[0]; k++) {
        if (strcmp(last, outcomes[k].metric) != 0) {
            sb_printf(&b, "# HELP %s Lock operations by outcome.\n# TYPE %s counter\n",
                      outcomes[k].metric, outcomes[k].metric);
            last = outcomes[k].metric;
        }
        sb_printf(&b, "%s{outcome=\"%s\"} %llu\n", outcomes[k].metric, outcomes[k].label,
                  (unsigned long long)sum_counter(a, outcomes[k].c));
    }
    static const char *const kinds[] = {"exclusive", "shared", "semaphore", "multi"};
    sb_printf(&b, "# HELP redlockd_grants_total Acquires granted, by kind.\n"
                  "# TYPE redlockd_grants_total counter\n");
    for (int k = 0; k < 4; k++)
        sb_printf(&b, "redlockd_grants_total{kind=\"%s\"} %llu\n", kinds[k],
                  (unsigned long long)sum_counter(a, CNT_KIND_GRANTED + k));
    sb_printf(&b, "# HELP redlockd_refusals_total Acquires answered 409 (held, contended, "
                  "permits mismatch), by kind.\n# TYPE redlockd_refusals_total counter\n");
    for (int k = 0; k < 4; k++)
        sb_printf(&b, "redlockd_refusals_total{kind=\"%s\"} %llu\n", kinds[k],
                  (unsigned long long)sum_counter(a, CNT_KIND_REFUSED + k));
    sb_printf(&b, "# HELP redlockd_fencing_raise_rounds_total Extra rounds to raise lagging fencing counters.\n"
                  "# TYPE redlockd_fencing_raise_rounds_total counter\nredlockd_fencing_raise_rounds_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_RAISE_ROUNDS));
    sb_printf(&b, "# HELP redlockd_waiter_wakeups_total Parked waiters woken by a release here.\n"
                  "# TYPE redlockd_waiter_wakeups_total counter\nredlockd_waiter_wakeups_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_WAKEUPS));
    sb_printf(&b, "# HELP redlockd_handoffs_total Releases that handed the lock straight to a parked waiter.\n"
                  "# TYPE redlockd_handoffs_total counter\nredlockd_handoffs_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_HANDOFFS));
    sb_printf(&b, "# HELP redlockd_split_rounds_total Acquire rounds refused while no lease held a quorum (votes split between attempts); retried.\n"
                  "# TYPE redlockd_split_rounds_total counter\nredlockd_split_rounds_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_SPLITS));
    sb_printf(&b, "# HELP redlockd_held_local_total 409s answered from what the instance knew, without asking the masters.\n"
                  "# TYPE redlockd_held_local_total counter\nredlockd_held_local_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_HELD_LOCAL));
    sb_printf(&b, "# HELP redlockd_waiters_gone_total Waiting acquires dropped because their client closed the connection.\n"
                  "# TYPE redlockd_waiters_gone_total counter\nredlockd_waiters_gone_total %llu\n",
              (unsigned long long)sum_counter(a, CNT_GONE));
    sb_printf(&b, "# HELP redlockd_connections_refused_total Connections refused past --max-connections.\n"
                  "# TYPE redlockd_connections_refused_total counter\nredlockd_connections_refused_total %llu\n",
              (unsigned long long)hs->conns_refused);
    sb_printf(&b, "# HELP redlockd_slow_connections_closed_total Connections closed for not sending a whole request header in time.\n"
                  "# TYPE redlockd_slow_connections_closed_total counter\nredlockd_slow_connections_closed_total %llu\n",
              (unsigned long long)hs->conns_cut);
    sb_printf(&b, "# HELP redlockd_parked_waiters Acquirers parked waiting for a lock.\n"
                  "# TYPE redlockd_parked_waiters gauge\nredlockd_parked_waiters %ld\n",
              __atomic_load_n(&a->waiters_total, __ATOMIC_RELAXED));

    /* Per master, as seen by each worker's connection: up if any worker has it ready. */
    sb_printf(&b, "# HELP redlockd_master_up Whether the master is in quorums (1), by address.\n"
                  "# TYPE redlockd_master_up gauge\n");
    size_t quarantined = 0;
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        int up = 0, q = 0;
        for (size_t i = 0; i < a->nworkers; i++) {
            int st = __atomic_load_n(&worker_master(a->workers[i], m)->state, __ATOMIC_RELAXED);
            up |= st == MASTER_READY;
            q |= st == MASTER_QUARANTINED;
        }
        quarantined += q;
        sb_printf(&b, "redlockd_master_up{address=\"%s\"} %d\n", a->cfg.masters[m].address, up);
    }
    sb_printf(&b, "# HELP redlockd_master_errors_total Failed commands and connections, by address.\n"
                  "# TYPE redlockd_master_errors_total counter\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        uint64_t e = 0;
        for (size_t i = 0; i < a->nworkers; i++)
            e += ld(&worker_master(a->workers[i], m)->errors);
        sb_printf(&b, "redlockd_master_errors_total{address=\"%s\"} %llu\n", a->cfg.masters[m].address,
                  (unsigned long long)e);
    }
    sb_printf(&b, "# HELP redlockd_master_clock_faults_total Times a master's clock was found to jump, step "
                  "back, run outside the drift factor or stray from the others' (it is then quarantined), by address.\n"
                  "# TYPE redlockd_master_clock_faults_total counter\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        uint64_t e = 0;
        for (size_t i = 0; i < a->nworkers; i++)
            e += ld(&worker_master(a->workers[i], m)->clock_faults);
        sb_printf(&b, "redlockd_master_clock_faults_total{address=\"%s\"} %llu\n", a->cfg.masters[m].address,
                  (unsigned long long)e);
    }
    sb_printf(&b, "# HELP redlockd_master_clock_rate_ppm How fast a master's clock runs against the "
                  "service's, in parts per million over the last 10 s or more, by address.\n"
                  "# TYPE redlockd_master_clock_rate_ppm gauge\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++)
        sb_printf(&b, "redlockd_master_clock_rate_ppm{address=\"%s\"} %lld\n", a->cfg.masters[m].address,
                  (long long)__atomic_load_n(&worker_master(a->workers[0], m)->clock_rate_ppm, __ATOMIC_RELAXED));
    sb_printf(&b, "# HELP redlockd_master_batches_total Batched script calls sent (several operations each), by address.\n"
                  "# TYPE redlockd_master_batches_total counter\n");
    uint64_t bops[CONFIG_MAX_MASTERS] = {0};
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        uint64_t n = 0;
        for (size_t i = 0; i < a->nworkers; i++) {
            n += ld(&worker_master(a->workers[i], m)->batches);
            bops[m] += ld(&worker_master(a->workers[i], m)->batched_ops);
        }
        sb_printf(&b, "redlockd_master_batches_total{address=\"%s\"} %llu\n", a->cfg.masters[m].address,
                  (unsigned long long)n);
    }
    sb_printf(&b, "# HELP redlockd_master_batched_ops_total Operations those batched calls carried, by address.\n"
                  "# TYPE redlockd_master_batched_ops_total counter\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++)
        sb_printf(&b, "redlockd_master_batched_ops_total{address=\"%s\"} %llu\n", a->cfg.masters[m].address,
                  (unsigned long long)bops[m]);
    sb_printf(&b, "# HELP redlockd_master_last_rtt_seconds Last round-trip time, by address.\n"
                  "# TYPE redlockd_master_last_rtt_seconds gauge\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        int64_t rtt = __atomic_load_n(&worker_master(a->workers[0], m)->last_rtt_us, __ATOMIC_RELAXED);
        sb_printf(&b, "redlockd_master_last_rtt_seconds{address=\"%s\"} %.6f\n", a->cfg.masters[m].address,
                  (double)rtt / 1e6);
    }
    sb_printf(&b, "# HELP redlockd_master_rtt_seconds Round trips of the rounds' commands to each master "
                  "(from the round's start to the reply), by master.\n"
                  "# TYPE redlockd_master_rtt_seconds histogram\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        uint64_t h[HIST_RTT_N + 1] = {0}, sum = 0;
        for (size_t i = 0; i < a->nworkers; i++) {
            const master_conn *mc = worker_master(a->workers[i], m);
            for (size_t k = 0; k <= HIST_RTT_N; k++)
                h[k] += ld(&mc->rtt_hist[k]);
            sum += ld(&mc->rtt_sum_us);
        }
        char labels[200];
        snprintf(labels, sizeof labels, "master=\"%s\"", a->cfg.masters[m].address);
        histogram(&b, "redlockd_master_rtt_seconds", labels, h, hist_rtt_bounds_us, HIST_RTT_N, sum, 1);
    }
    sb_printf(&b, "# HELP redlockd_quarantined_masters Masters kept out of quorums after a restart or a loss of data.\n"
                  "# TYPE redlockd_quarantined_masters gauge\nredlockd_quarantined_masters %zu\n", quarantined);
    /* Every worker judges each master on its own connection and they converge within a
     * tick (worker.c); the first worker's view is the one shown. */
    sb_printf(&b, "# HELP redlockd_master_state The state of each master (1 for its current state).\n"
                  "# TYPE redlockd_master_state gauge\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        int st = __atomic_load_n(&worker_master(a->workers[0], m)->state, __ATOMIC_RELAXED);
        for (int k = MASTER_DOWN; k <= MASTER_READY; k++)
            sb_printf(&b, "redlockd_master_state{address=\"%s\",state=\"%s\"} %d\n",
                      a->cfg.masters[m].address, master_state_name(k), st == k);
    }
    sb_printf(&b, "# HELP redlockd_master_quarantines_total Times a master went into quarantine, by address.\n"
                  "# TYPE redlockd_master_quarantines_total counter\n");
    for (size_t m = 0; m < a->cfg.n_masters; m++) {
        uint64_t q = 0;
        for (size_t i = 0; i < a->nworkers; i++) {
            uint64_t v = ld(&worker_master(a->workers[i], m)->quarantines);
            if (v > q)
                q = v;
        }
        sb_printf(&b, "redlockd_master_quarantines_total{address=\"%s\"} %llu\n", a->cfg.masters[m].address,
                  (unsigned long long)q);
    }
    free(hs);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
