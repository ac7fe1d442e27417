/* test_safety.c -- the safety redesign (issue 10), each item with real processes and
 * real faults: masters that restart having lost acknowledged writes or all their
 * data, a master wiped under a running service, a deleted fencing counter, bounded
 * keys, a client's retry undone by the attempt it retries, scoped release of a set
 * of names, and what /readyz and /metrics show of a quarantine.
 *
 * Several tests need a grant that reaches exactly three of the five masters.  They
 * freeze two masters (SIGSTOP) and ask /readyz until the service has taken them out
 * (stall detection), so that the grant is never sent to them; after SIGCONT they
 * reconnect as the same Redis processes (same run id, same data).  Those tests run
 * the service with --threads 1, and so do the second instances they start: every
 * request then sees the one worker's view of the masters (with several workers,
 * /readyz answers for one worker while an operation may run on another). */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static h_service S2; /* a second instance, when a test starts one */
static void *s2_curl;
static h_proxy *P[5];
static char tokdir[128];

static void teardown(void)
{
    unsetenv("REDLOCK_TEST_TOKEN");
    if (S2.pid > 0)
        h_service_stop(&S2);
    if (s2_curl)
        curl_easy_cleanup(s2_curl);
    s2_curl = NULL;
    for (int i = 0; i < 5; i++) {
        h_proxy_stop(P[i]);
        P[i] = NULL;
    }
    h_cluster_stop(&C);
    if (tokdir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tokdir);
        if (system(cmd) != 0) {
        }
    }
}

TestSuite(safety, .fini = teardown, .timeout = 90);

/* ---- helpers ---- */

static void http_on(h_service *svc, const char *method, const char *path, const char *body, h_resp *r)
{
    if (!svc || svc == &C.svc)
        h_http(&C, method, path, body, r);
    else
        h_http_to(svc->url, &s2_curl, method, path, body, r);
}

/* POST /locks/<name> with a JSON body (NULL: none); lease and token copied on 201. */
static long acquire_on(h_service *svc, const char *name, const char *body, char *lease, size_t leaselen,
                       long long *token, long long *validity)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s", name);
    h_resp r;
    http_on(svc, "POST", path, body, &r);
    if (r.status == 201) {
        if (lease)
            snprintf(lease, leaselen, "%s", h_str(&r, "lease"));
        if (token)
            *token = h_int(&r, "fencing_token");
        if (validity)
            *validity = h_int(&r, "validity_ms");
    } else if (token) {
        *token = 0;
    }
    h_resp_free(&r);
    return r.status;
}

static long release_on(h_service *svc, const char *name, const char *lease)
{
    char path[400];
    snprintf(path, sizeof path, "/locks/%s?lease=%s", name, lease);
    h_resp r;
    http_on(svc, "DELETE", path, NULL, &r);
    h_resp_free(&r);
    return r.status;
}

/* Acquire and release once; returns the token. */
static long long grant_once(h_service *svc, const char *name)
{
    char lease[200];
    long long tok = 0;
    long st = acquire_on(svc, name, "{\"ttl_ms\":1000}", lease, sizeof lease, &tok, NULL);
    cr_assert_eq(st, 201, "acquire %s: %ld", name, st);
    cr_assert_eq(release_on(svc, name, lease), 200, "release %s", name);
    return tok;
}

/* /readyz once: each master's ok flag and state. */
static int readyz(h_service *svc, int ok[5], char state[5][32])
{
    h_resp r;
    http_on(svc, "GET", "/readyz", NULL, &r);
    json_t *ms = json_object_get(r.json, "masters");
    int n = (int)json_array_size(ms);
    for (int i = 0; i < n && i < 5; i++) {
        json_t *m = json_array_get(ms, (size_t)i);
        ok[i] = json_is_true(json_object_get(m, "ok"));
        const char *s = json_string_value(json_object_get(m, "state"));
        snprintf(state[i], 32, "%s", s ? s : "");
    }
    h_resp_free(&r);
    return n;
}

struct sel {
    h_service *svc;
    int a, b;    /* masters to look at (b may be -1) */
    int want_in; /* 1: both ok and "ready"; 0: both out of quorums */
};

/* In quorums: "ready" (a /readyz round that times out on a frozen master shows it
 * not ok while the service still sends it everything: only the state tells). */
static int is_in(const int ok[5], char st[5][32], int i)
{
    return ok[i] && strcmp(st[i], "ready") == 0;
}

static int masters_are(void *arg)
{
    struct sel *s = arg;
    int ok[5] = {0};
    char st[5][32];
    if (readyz(s->svc, ok, st) != 5)
        return 0;
    if (s->want_in)
        return is_in(ok, st, s->a) && (s->b < 0 || is_in(ok, st, s->b));
    return strcmp(st[s->a], "ready") != 0 && (s->b < 0 || strcmp(st[s->b], "ready") != 0);
}

/* Freeze masters a and b and wait until the service has taken them out of quorums:
 * nothing it sends from now on reaches them. */
static void take_out(h_service *svc, int a, int b)
{
    h_redis_freeze(&C.masters[a]);
    h_redis_freeze(&C.masters[b]);
    struct sel s = {svc, a, b, 0};
    cr_assert(h_wait_until(masters_are, &s, 15000), "the frozen masters %d and %d are taken out", a, b);
}

static void bring_back(h_service *svc, int a, int b)
{
    h_redis_thaw(&C.masters[a]);
    h_redis_thaw(&C.masters[b]);
    struct sel s = {svc, a, b, 1};
    cr_assert(h_wait_until(masters_are, &s, 15000), "the thawed masters %d and %d come back", a, b);
}

struct judged_arg {
    h_service *svc;
    int i;
};

/* The service has looked at master i since it came back: ready or quarantined. */
static int judged(void *arg)
{
    struct judged_arg *j = arg;
    char st[5][32];
    int ok[5];
    if (readyz(j->svc, ok, st) != 5)
        return 0;
    return strcmp(st[j->i], "ready") == 0 || strcmp(st[j->i], "quarantined") == 0;
}

static void wait_judged(h_service *svc, int i)
{
    struct judged_arg j = {svc, i};
    cr_assert(h_wait_until(judged, &j, 10000), "the service judges master %d", i);
}

static const char *state_of(h_service *svc, int i)
{
    static char st[5][32];
    int ok[5];
    cr_assert_eq(readyz(svc, ok, st), 5);
    return st[i];
}

struct state_arg {
    h_service *svc;
    int i;
    const char *want;
};

static int state_is(void *arg)
{
    struct state_arg *s = arg;
    return strcmp(state_of(s->svc, s->i), s->want) == 0;
}

static long long exists(int i, const char *key)
{
    return h_redis_cmd(&C.masters[i], NULL, 0, "EXISTS %s", key);
}

/* While the holder (token holder_tok) is valid, a competitor is refused, again and
 * again. */
static void competitor_refused(h_service *svc, const char *name, long long holder_tok,
                               double holder_valid_until)
{
    for (int k = 0; k < 10; k++) {
        long long tok = 0;
        char lease[200];
        long st = acquire_on(svc, name, NULL, lease, sizeof lease, &tok, NULL);
        cr_assert_neq(st, 201,
                      "a competitor got %s (token %lld) while the holder (token %lld) is valid "
                      "for %.0f ms more",
                      name, tok, holder_tok, holder_valid_until - h_now_ms());
        cr_assert(st == 409 || st == 503, "competitor: status %ld", st);
        usleep(100 * 1000);
    }
    cr_assert_lt(h_now_ms(), holder_valid_until, "the holder was valid throughout");
}

/* The holder lets go (wherever its lease still is), and the next grant of the name
 * carries a larger token. */
static void later_token_is_larger(h_service *svc, const char *name, const char *holder_lease,
                                  long long holder_tok)
{
    release_on(svc, name, holder_lease); /* 200 or 404: some masters forgot the lease */
    long long tok = 0;
    char lease[200];
    long st = acquire_on(svc, name, "{\"wait_ms\":3000}", lease, sizeof lease, &tok, NULL);
    cr_assert_eq(st, 201, "the lock is free again: status %ld", st);
    cr_assert_gt(tok, holder_tok, "token %lld issued after token %lld", tok, holder_tok);
}

/* ---- 1. a master that restarts having lost its last acknowledged writes ---- */

/* Grant "lost.writes" (ttl 30 s) on masters 0, 1 and 2 only, then master 2 is killed
 * and restarted from an AOF cut back to before the grant: its marker survives, the
 * grant does not.  Masters 3 and 4 are back and free.  Returns the holder's token. */
static long long grant_then_lose_it(char *lease, size_t leaselen, double *valid_until, int stop_first)
{
    h_cluster_start(&C, 5, 1, "--threads 1");
    h_require_local(&C);
    take_out(&C.svc, 3, 4);
    long long before = h_redis_aof_size(&C.masters[2]);
    cr_assert_gt(before, 0, "master 2 writes an AOF");
    long long tok = 0, validity = 0;
    double t0 = h_now_ms();
    cr_assert_eq(acquire_on(&C.svc, "lost.writes", "{\"ttl_ms\":30000}", lease, leaselen, &tok, &validity),
                 201);
    *valid_until = t0 + (double)validity;
    cr_assert_gt(h_redis_aof_size(&C.masters[2]), before, "the grant reached master 2's AOF");
    bring_back(&C.svc, 3, 4);
    cr_assert_eq(exists(3, "redlock:lost.writes"), 0, "the grant never reached master 3");
    cr_assert_eq(exists(4, "redlock:lost.writes"), 0, "the grant never reached master 4");
    if (stop_first)
        h_service_stop(&C.svc);
    h_redis_kill(&C.masters[2]);
    h_redis_aof_truncate(&C.masters[2], before);
    h_redis_restart(&C.masters[2], 0);
    cr_assert_eq(exists(2, "redlock:lost.writes"), 0, "master 2 lost the grant");
    cr_assert_gt(h_redis_cmd(&C.masters[2], NULL, 0, "DBSIZE"), 0, "master 2 kept its older data");
    return tok;
}

Test(safety, master_that_lost_its_last_writes_is_kept_out)
{
    char lease[200];
    double valid_until;
    long long tok = grant_then_lose_it(lease, sizeof lease, &valid_until, 0);
    wait_judged(&C.svc, 2);
    competitor_refused(&C.svc, "lost.writes", tok, valid_until);
    later_token_is_larger(&C.svc, "lost.writes", lease, tok);
}

Test(safety, master_that_lost_its_last_writes_is_kept_out_by_a_new_instance)
{
    char lease[200];
    double valid_until;
    long long tok = grant_then_lose_it(lease, sizeof lease, &valid_until, 1);
    /* The first to see the restarted master is an instance started after it. */
    h_service_start_quorum(&C, &S2, "--threads 1");
    wait_judged(&S2, 2);
    competitor_refused(&S2, "lost.writes", tok, valid_until);
    later_token_is_larger(&S2, "lost.writes", lease, tok);
}

/* The same loss, with the timing of a real crash: the grant, the crash and the
 * restart late in one wall-clock second, the service's first look at the restarted
 * master early in the next (the new process is held with SIGSTOP until then, as a
 * slow start would).  Redis's uptime_in_seconds then reads 1 although the master
 * has run ~200 ms: a quarantine computed from it ends ~800 ms early, while the
 * holder (ttl = max ttl = quarantine) is still valid. */
Test(safety, quarantine_is_not_cut_short_by_a_whole_second_uptime)
{
    h_cluster_start(&C, 5, 1, "--threads 1 --max-ttl-ms 5000 --default-ttl-ms 5000");
    h_require_local(&C);
    take_out(&C.svc, 3, 4);
    long long before = h_redis_aof_size(&C.masters[2]);
    cr_assert_gt(before, 0);
    h_align_wall_clock(700, 750);
    char lease[200];
    long long tok = 0, validity = 0;
    double t0 = h_now_ms();
    cr_assert_eq(acquire_on(&C.svc, "late.second", "{\"ttl_ms\":5000}", lease, sizeof lease, &tok, &validity),
                 201);
    double valid_until = t0 + (double)validity;
    h_redis_kill(&C.masters[2]);
    double restarted = h_now_ms();
    h_redis_aof_truncate(&C.masters[2], before);
    h_redis_restart(&C.masters[2], 0);
    h_redis_freeze(&C.masters[2]);
    h_align_wall_clock(30, 80); /* the next second */
    h_redis_thaw(&C.masters[2]);
    cr_assert_eq(exists(2, "redlock:late.second"), 0, "master 2 lost the grant");
    bring_back(&C.svc, 3, 4);
    cr_assert_eq(exists(3, "redlock:late.second"), 0);
    cr_assert_eq(exists(4, "redlock:late.second"), 0);
    /* Until the holder's validity ends, a competitor is refused. */
    int tries = 0;
    while (h_now_ms() < valid_until - 20) {
        long long t = 0;
        long st = acquire_on(&C.svc, "late.second", NULL, NULL, 0, &t, NULL);
        double now = h_now_ms();
        if (now >= valid_until)
            break;
        cr_assert_neq(st, 201,
                      "a competitor got the lock (token %lld, the holder's %lld) %.0f ms after the "
                      "restart, %.0f ms before the holder's validity ends",
                      t, tok, now - restarted, valid_until - now);
        tries++;
        usleep(20 * 1000);
    }
    cr_assert_gt(tries, 20);
}

/* ---- 2. a master restarted empty seconds after the cluster's birth ---- */

Test(safety, master_restarted_empty_at_the_clusters_birth_is_kept_out)
{
    double born = h_now_ms();
    h_cluster_start(&C, 5, 0, "--threads 1");
    h_require_local(&C);
    take_out(&C.svc, 3, 4);
    char lease[200];
    long long tok = 0, validity = 0;
    double t0 = h_now_ms();
    cr_assert_eq(acquire_on(&C.svc, "young.empty", "{\"ttl_ms\":30000}", lease, sizeof lease, &tok, &validity),
                 201);
    double valid_until = t0 + (double)validity;
    h_service_stop(&C.svc);
    h_redis_thaw(&C.masters[3]);
    h_redis_thaw(&C.masters[4]);
    cr_assert_eq(exists(3, "redlock:young.empty"), 0);
    cr_assert_eq(exists(4, "redlock:young.empty"), 0);
    h_redis_kill(&C.masters[2]);
    h_redis_restart(&C.masters[2], 1);
    cr_assert_eq(h_redis_cmd(&C.masters[2], NULL, 0, "DBSIZE"), 0, "master 2 is empty");
    h_service_start_quorum(&C, &S2, "--threads 1");
    wait_judged(&S2, 2);
    cr_log_info("master 2 judged %.0f ms after the cluster started", h_now_ms() - born);
    competitor_refused(&S2, "young.empty", tok, valid_until);
    cr_assert_str_eq(state_of(&S2, 2), "quarantined");
    later_token_is_larger(&S2, "young.empty", lease, tok);
}

/* ---- 3. FLUSHALL under a running service ---- */

Test(safety, flushall_without_restart_is_seen_by_the_next_operation)
{
    h_cluster_start(&C, 5, 0, "--threads 1");
    h_require_local(&C);
    const char *name = "flushed.tok";
    long long t1 = grant_once(&C.svc, name); /* counters 1 on every master */
    take_out(&C.svc, 0, 1);
    long long t2 = grant_once(&C.svc, name);
    long long t3 = grant_once(&C.svc, name); /* counters 3 on masters 2, 3, 4 */
    cr_assert(t1 < t2 && t2 < t3);
    bring_back(&C.svc, 0, 1);
    take_out(&C.svc, 3, 4); /* the next quorum is masters 0, 1, 2 */
    char out[64];
    h_redis_cmd(&C.masters[2], out, sizeof out, "FLUSHALL");
    cr_assert_str_eq(out, "OK");
    char lease[200];
    long long tok = 0;
    long st = acquire_on(&C.svc, name, NULL, lease, sizeof lease, &tok, NULL);
    if (st == 201) {
        cr_assert_gt(tok, t3, "token %lld issued after token %lld", tok, t3);
        release_on(&C.svc, name, lease);
    } else {
        cr_assert_eq(st, 503, "status %ld", st);
    }
    /* That operation saw the wipe: the master is out of quorums at once... */
    const char *now = state_of(&C.svc, 2);
    cr_assert_str_neq(now, "ready", "the long-lived instance still uses the wiped master");
    bring_back(&C.svc, 3, 4);
    /* ... and quarantined, on this instance and on any other. */
    struct state_arg q = {&C.svc, 2, "quarantined"};
    cr_assert(h_wait_until(state_is, &q, 5000), "state %s on the long-lived instance", state_of(&C.svc, 2));
    h_service_start_quorum(&C, &S2, "--threads 1");
    struct state_arg q2 = {&S2, 2, "quarantined"};
    cr_assert(h_wait_until(state_is, &q2, 5000), "state %s on a new instance", state_of(&S2, 2));
    long long a = grant_once(&C.svc, name);
    cr_assert_gt(a, t3, "token %lld after %lld", a, t3);
    long long b = grant_once(&S2, name);
    cr_assert_gt(b, a, "token %lld after %lld", b, a);
}

/* ---- 4. a fencing counter deleted on one master while two others are down ---- */

Test(safety, deleted_fence_counter_never_sends_tokens_back)
{
    h_cluster_start(&C, 5, 0, "--threads 1");
    h_require_local(&C);
    const char *name = "fence.del";
    long long t1 = grant_once(&C.svc, name);
    take_out(&C.svc, 0, 1);
    grant_once(&C.svc, name);
    long long t3 = grant_once(&C.svc, name); /* from masters 2, 3, 4 */
    cr_assert_gt(t3, t1 + 1);
    bring_back(&C.svc, 0, 1);
    h_redis_kill(&C.masters[3]);
    h_redis_kill(&C.masters[4]);
    struct sel down = {&C.svc, 3, 4, 0};
    cr_assert(h_wait_until(masters_are, &down, 10000), "the killed masters are down");
    /* The name's counter lives in master 2's record, in the name's bucket (FNV-1a of
     * the name modulo 16384, as the service chooses it): delete it by hand. */
    uint64_t h = 1469598103934665603ull;
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    cr_assert_eq(h_redis_cmd(&C.masters[2], NULL, 0, "HDEL redlock:#master b%llu",
                             (unsigned long long)(h % 16384)), 1, "master 2 had the counter");
    char lease[200];
    long long tok = 0;
    long st = acquire_on(&C.svc, name, NULL, lease, sizeof lease, &tok, NULL);
    cr_assert(st != 201 || tok > t3, "token %lld issued after token %lld", tok, t3);
    /* A record missing one of its counters is a damaged record: master 2 is out at
     * once, and with 3 and 4 down there is no quorum. */
    cr_assert_eq(st, 503, "masters 0 and 1 alone are no quorum: status %ld", st);
}

/* ---- 5. bounded keys ---- */

static int dbsize_small(void *arg)
{
    (void)arg;
    for (int i = 0; i < C.n; i++)
        if (h_redis_cmd(&C.masters[i], NULL, 0, "DBSIZE") > 8)
            return 0;
    return 1;
}

Test(safety, state_on_the_masters_is_bounded_and_tokens_still_grow)
{
    /* Counters live in the master's record, one per bucket of names: nothing per name
     * outlives its lock.  After 2000 names the masters hold the record alone. */
    h_cluster_start(&C, 5, 0, "--max-ttl-ms 1000 --default-ttl-ms 1000");
    h_require_local(&C);
    long long last = 0;
    for (int k = 0; k < 3; k++) {
        long long t = grant_once(&C.svc, "kept");
        cr_assert_gt(t, last);
        last = t;
    }
    /* 2000 other names: 1600 in sets of 25, 400 one by one. */
    for (int b = 0; b < 64; b++) {
        char body[4096];
        int n = snprintf(body, sizeof body, "{\"ttl_ms\":1000,\"names\":[");
        for (int j = 0; j < 25; j++)
            n += snprintf(body + n, sizeof body - (size_t)n, "%s\"bulk.%d\"", j ? "," : "", b * 25 + j);
        snprintf(body + n, sizeof body - (size_t)n, "]}");
        h_resp r;
        h_http(&C, "POST", "/locks", body, &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        char rel[300];
        snprintf(rel, sizeof rel, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
        h_resp_free(&r);
        h_http(&C, "DELETE", "/locks", rel, &r);
        cr_assert_eq(r.status, 200, "%s", r.body);
        h_resp_free(&r);
    }
    for (int k = 0; k < 400; k++) {
        char name[32];
        snprintf(name, sizeof name, "single.%d", k);
        grant_once(&C.svc, name);
    }
    cr_assert(h_wait_until(dbsize_small, NULL, 20000), "the locks' keys go with their ttl (DBSIZE %lld)",
              h_redis_cmd(&C.masters[0], NULL, 0, "DBSIZE"));
    for (int i = 0; i < C.n; i++) {
        if (C.masters[i].pid <= 0)
            continue;
        long long fields = h_redis_cmd(&C.masters[i], NULL, 0, "HLEN redlock:#master");
        cr_assert(fields > 4 && fields <= 4 + 16384 + 1, "master %d's record: %lld fields", i, fields);
    }
    long long t = grant_once(&C.svc, "kept");
    cr_assert_gt(t, last, "token %lld after %lld", t, last);
}

/* ---- 6. a retry with the client's own lease, and the attempt it retries ---- */

struct attempt {
    const char *url;
    char body[200];
    h_resp r;
    double ms_done;
};

static void *attempt_main(void *arg)
{
    struct attempt *a = arg;
    void *curl = NULL;
    h_http_to(a->url, &curl, "POST", "/locks/retried", a->body, &a->r);
    a->ms_done = h_now_ms();
    h_resp_free(&a->r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int landed_everywhere(void *arg)
{
    const char *lease = arg;
    for (int i = 0; i < 5; i++) {
        char v[300];
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:retried");
        if (strncmp(v, lease, strlen(lease)) != 0)
            return 0;
    }
    return 1;
}

#define SLOW_TIMEOUT_MS 1000 /* the slow instance's node timeout */
#define PROXY_DELAY_MS 1500  /* each way, between the slow instance and every master */

Test(safety, retry_with_own_lease_is_not_undone_by_the_attempt_it_retries)
{
    h_cluster_start(&C, 5, 0, NULL); /* C.svc: straight to the masters */
    h_require_local(&C);
    static char via[512];
    int n = 0;
    for (int i = 0; i < 5; i++) {
        P[i] = h_proxy_start(C.masters[i].port);
        n += snprintf(via + n, sizeof via - (size_t)n, "%s127.0.0.1:%d", i ? "," : "", h_proxy_port(P[i]));
    }
    C.masters_override = via;
    char flags[64];
    /* One worker: when /readyz shows every master ready, the connections the
     * attempt will use are ready (not still in their handshake, which the delay
     * would stretch to seconds).  No clock check: with it, a script that reaches its
     * master after its round's deadline refuses itself (its clock window), and this
     * test needs the late write to land, as it would on a service without the check. */
    snprintf(flags, sizeof flags, "--threads 1 --clock-check 0 --node-timeout-ms %d", SLOW_TIMEOUT_MS);
    h_service_start(&C, &S2, flags); /* S2: every master behind a proxy */
    C.masters_override = NULL;
    for (int i = 0; i < 5; i++)
        h_proxy_set_delay(P[i], PROXY_DELAY_MS);

    /* The first attempt, through the slow instance: it times out on every master,
     * and its acquire reaches them only after that, followed by its clean-up. */
    const char *L = "client-lease-retry-0123456789";
    struct attempt a = {.url = S2.url};
    snprintf(a.body, sizeof a.body, "{\"lease\":\"%s\",\"ttl_ms\":5000}", L);
    double t0 = h_now_ms();
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, attempt_main, &a) == 0);
    int landed = h_wait_until(landed_everywhere, (void *)L, 10000);
    pthread_join(th, NULL);
    if (!landed) {
        char seen[600] = "";
        for (int i = 0; i < 5; i++) {
            char v[300];
            h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:retried");
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " [%d] '%s'", i, v);
        }
        cr_assert_fail("the first attempt's acquire reaches every master (status %ld after %.0f ms:%s; see %s)",
                       a.r.status, a.ms_done - t0, seen, S2.log);
    }
    cr_assert_neq(a.r.status, 201, "the first attempt could not be granted in time");

    /* The client retries with the same lease, straight to the masters: granted. */
    char body[200];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":5000}", L);
    double t1 = h_now_ms();
    long long tok = 0, validity = 0;
    char lease[200];
    cr_assert_eq(acquire_on(&C.svc, "retried", body, lease, sizeof lease, &tok, &validity), 201);
    double done = h_now_ms();
    cr_assert_str_eq(lease, L);
    /* The clean-up leaves the slow instance at its node timeout at the earliest and
     * spends PROXY_DELAY_MS in the proxy: the retry came before it. */
    cr_assert_lt(done, t0 + SLOW_TIMEOUT_MS + PROXY_DELAY_MS - 100,
                 "the retry was too late to test anything (%.0f ms after the attempt)", done - t0);
    for (int i = 0; i < 5; i++)
        h_proxy_set_delay(P[i], 0); /* what is queued keeps its delay; later traffic none */

    /* Until the retry's validity ends, a third client is refused, before and after the
     * first attempt's clean-up has reached the masters. */
    double valid_until = t1 + (double)validity - 100;
    double drained = 0; /* when the proxies were first seen empty: the clean-up is through */
    int tries = 0, after = 0;
    while (h_now_ms() < valid_until) {
        int queued = 0;
        for (int i = 0; i < 5; i++)
            queued += h_proxy_queued(P[i]);
        if (!queued && !drained)
            drained = h_now_ms();
        after += drained > 0;
        long long t = 0;
        long st = acquire_on(&C.svc, "retried", NULL, NULL, 0, &t, NULL);
        if (h_now_ms() >= valid_until)
            break;
        cr_assert_neq(st, 201,
                      "a third client got the lock (token %lld) %.0f ms after the retry (token %lld) "
                      "was granted, %.0f ms before its validity ends",
                      t, h_now_ms() - t1, tok, valid_until - h_now_ms());
        cr_assert_eq(st, 409, "third client: status %ld", st);
        tries++;
        usleep(50 * 1000);
    }
    cr_assert(drained > 0 && drained < valid_until - 300,
              "the clean-up reached the masters while the retry was valid");
    cr_assert_gt(after, 3, "the third client tried after the clean-up (%d tries in all)", tries);
}

/* ---- 7. releasing a set of names checks every name against the token's scope ---- */

#define ADMIN "admin-token-0123456789abcdef"
#define BILLING "billing-token-0123456789abcd"

static long mpost(const char *token, const char *body, char *lease, size_t leaselen)
{
    setenv("REDLOCK_TEST_TOKEN", token, 1);
    h_resp r;
    h_http(&C, "POST", "/locks", body, &r);
    if (r.status == 201 && lease)
        snprintf(lease, leaselen, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    return r.status;
}

static long mdelete(const char *token, const char *lease, char *error, size_t errlen)
{
    setenv("REDLOCK_TEST_TOKEN", token, 1);
    char body[300];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    h_resp r;
    h_http(&C, "DELETE", "/locks", body, &r);
    if (error)
        snprintf(error, errlen, "%s", h_str(&r, "error"));
    h_resp_free(&r);
    return r.status;
}

static int held(const char *name)
{
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    char path[200];
    snprintf(path, sizeof path, "/locks/%s", name);
    h_resp r;
    h_http(&C, "GET", path, NULL, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    int h = json_is_true(json_object_get(r.json, "held"));
    h_resp_free(&r);
    return h;
}

Test(safety, multi_release_checks_every_name_against_the_token_scope)
{
    snprintf(tokdir, sizeof tokdir, "/tmp/redlockd-safety-XXXXXX");
    cr_assert(mkdtemp(tokdir));
    char path[200], flags[300];
    snprintf(path, sizeof path, "%s/tokens", tokdir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(ADMIN "\n" BILLING " billing/\n", f);
    fclose(f);
    snprintf(flags, sizeof flags, "--auth-tokens-file %s", path);
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);

    char la[200], lm[200], lb[200], err[64];
    cr_assert_eq(mpost(ADMIN, "{\"names\":[\"o1\",\"o2\"],\"ttl_ms\":30000}", la, sizeof la), 201);
    cr_assert_eq(mdelete(BILLING, la, err, sizeof err), 403, "a billing/ token released {o1, o2}");
    cr_assert_str_eq(err, "forbidden");
    cr_assert(held("o1") && held("o2"), "the set stays held");
    cr_assert_eq(mpost(ADMIN, "{\"names\":[\"o1\"]}", NULL, 0), 409);

    /* One name out of scope is enough. */
    cr_assert_eq(mpost(ADMIN, "{\"names\":[\"billing/x\",\"o3\"],\"ttl_ms\":30000}", lm, sizeof lm), 201);
    cr_assert_eq(mdelete(BILLING, lm, err, sizeof err), 403, "a billing/ token released {billing/x, o3}");
    cr_assert(held("billing/x") && held("o3"), "the set stays held");

    /* Its own names, it may. */
    cr_assert_eq(mpost(BILLING, "{\"names\":[\"billing/a\",\"billing/b\"]}", lb, sizeof lb), 201);
    cr_assert_eq(mdelete(BILLING, lb, NULL, 0), 200);
    cr_assert(!held("billing/a") && !held("billing/b"));
    cr_assert_eq(mdelete(ADMIN, la, NULL, 0), 200);
    cr_assert(!held("o1") && !held("o2"));
}

/* ---- /readyz and /metrics for a quarantined master ---- */

static double metric_sum(const char *text, const char *prefix, const char *must_contain)
{
    double sum = 0;
    int found = 0;
    const char *p = text;
    size_t pl = strlen(prefix);
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        if (strncmp(line, prefix, pl) == 0 && (line[pl] == ' ' || line[pl] == '{') &&
            (!must_contain || strstr(line, must_contain))) {
            const char *v = strrchr(line, ' ');
            if (v) {
                sum += atof(v + 1);
                found = 1;
            }
        }
        p += len + (eol ? 1 : 0);
    }
    return found ? sum : -1;
}

/* Any gauge of redlockd's labelled state="quarantined": its value summed. */
static double quarantined_gauge(const char *text)
{
    double sum = -1;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        if (strncmp(line, "redlockd_", 9) == 0 && strstr(line, "state=\"quarantined\"")) {
            const char *v = strrchr(line, ' ');
            if (v)
                sum = (sum < 0 ? 0 : sum) + atof(v + 1);
        }
        p += len + (eol ? 1 : 0);
    }
    return sum;
}

static char metrics_seen[200];

static int metrics_show_quarantine(void *arg)
{
    (void)arg;
    h_resp r;
    h_http(&C, "GET", "/metrics", NULL, &r);
    double q = metric_sum(r.body, "redlockd_master_quarantines_total", NULL);
    double g = quarantined_gauge(r.body);
    h_resp_free(&r);
    snprintf(metrics_seen, sizeof metrics_seen,
             "/metrics: %ld, redlockd_master_quarantines_total %g (want >= 1), "
             "state=\"quarantined\" gauge %g (want 1)", r.status, q, g);
    return r.status == 200 && q >= 1 && g == 1;
}

Test(safety, readyz_and_metrics_show_a_quarantined_master)
{
    h_cluster_start(&C, 5, 1, "--quarantine-ms 20000");
    h_require_local(&C);
    cr_assert_eq(grant_once(&C.svc, "q.show"), 1);
    h_redis_kill(&C.masters[1]);
    h_redis_restart(&C.masters[1], 0); /* with its AOF: a restart all the same */
    wait_judged(&C.svc, 1);
    char st[32];
    long long rem1 = -1, rem2 = -1;
    int ok = h_master_state(&C, NULL, 1, st, sizeof st, &rem1);
    cr_assert_str_eq(st, "quarantined");
    cr_assert_eq(ok, 0, "a quarantined master is not ok");
    cr_assert(rem1 > 0 && rem1 <= 20000, "quarantine_remaining_ms %lld", rem1);
    usleep(300 * 1000);
    h_master_state(&C, NULL, 1, st, sizeof st, &rem2);
    cr_assert_str_eq(st, "quarantined");
    cr_assert(rem2 > 0 && rem2 < rem1, "quarantine_remaining_ms counts down: %lld then %lld", rem1, rem2);
    for (int i = 0; i < 5; i++)
        if (i != 1)
            cr_assert_eq(h_master_state(&C, NULL, i, st, sizeof st, NULL), 1, "master %d: %s", i, st);
    h_resp r;
    h_http(&C, "GET", "/readyz", NULL, &r);
    cr_assert_eq(r.status, 200, "four masters are a quorum");
    h_resp_free(&r);
    /* (Every worker thread judges its own connections: wait for the metrics to
     * agree, briefly.) */
    cr_assert(h_wait_until(metrics_show_quarantine, NULL, 5000), "%s", metrics_seen);
}

/* ---- a master that answers the handshake but refuses the record's writes ---- */

static long long connections_received(h_redis *r)
{
    char info[8192];
    h_redis_cmd(r, info, sizeof info, "INFO stats");
    const char *p = strstr(info, "total_connections_received:");
    return p ? atoll(p + strlen("total_connections_received:")) : -1;
}

Test(safety, a_master_refusing_the_records_write_is_retried_with_back_off, .timeout = 60)
{
    /* Master 0 comes back empty and read-only (a replica of nothing, as a misconfigured
     * master would be): it answers the handshake and the checks, and the quarantine
     * that must be written on it fails.  The service must back off between attempts
     * (up to a second), not reconnect tens of times a second. */
    h_cluster_start(&C, 5, 0, "--threads 1 --quarantine-ms 60000");
    h_require_local(&C);
    cr_assert_eq(grant_once(&C.svc, "ro.x") > 0, 1);
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 1);
    h_redis_cmd(&C.masters[0], NULL, 0, "FLUSHALL"); /* whatever got written before the next */
    h_redis_cmd(&C.masters[0], NULL, 0, "REPLICAOF 127.0.0.1 1");
    long long c0 = connections_received(&C.masters[0]);
    double t0 = h_now_ms();
    while (h_now_ms() - t0 < 4000)
        usleep(100 * 1000);
    long long c1 = connections_received(&C.masters[0]);
    /* Each of our own INFO calls is a connection too: 2. */
    long long n = c1 - c0 - 1;
    fprintf(stderr, "read-only master: %lld connections in 4 s\n", n);
    cr_assert(n <= 16, "%lld connections in 4 s: no back-off", n);
    cr_assert(n >= 2, "it keeps trying (%lld connections in 4 s)", n);
    char st[32];
    h_master_state(&C, NULL, 0, st, sizeof st, NULL);
    cr_assert(strcmp(st, "ready") != 0, "never trusted while it refuses writes: %s", st);
}
