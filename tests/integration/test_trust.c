/* test_trust.c -- master trust after combined faults (issue 21): a repaired master's
 * tokens never go back, whatever an instance believes of its peers, and a restart
 * costs only the locks outstanding.  Each test reproduces a finding of the issue with
 * real masters and real faults; on the build before it, each fails (a token at or
 * below one already issued, or a quarantine that lasts its whole bound).
 *
 * "Down" here is a master whose ACL forbids EVALSHA for a while: it answers every
 * lock script (and the marker and proof scripts) with an error, so no instance can
 * use it, and it comes back as the same process with the same data (lagging behind
 * whatever was granted meanwhile), which a SIGSTOP cannot promise: commands queued to
 * a frozen master run when it resumes.  Every service runs with --threads 1, so that
 * /readyz and the requests share one worker's view of the masters. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static h_service Y; /* a second instance */
static void *y_curl;

static void teardown(void)
{
    if (Y.pid > 0)
        h_service_stop(&Y);
    memset(&Y, 0, sizeof Y);
    if (y_curl)
        curl_easy_cleanup(y_curl);
    y_curl = NULL;
    h_cluster_stop(&C);
}

TestSuite(trust, .fini = teardown, .timeout = 120);

/* ---- helpers ---- */

static void acl(int i, const char *rule)
{
    char ok[16];
    h_redis_cmd(&C.masters[i], ok, sizeof ok, "ACL SETUSER default %s", rule);
    cr_assert_str_eq(ok, "OK", "ACL SETUSER on master %d", i);
}

static void flushall(int i)
{
    char ok[16];
    h_redis_cmd(&C.masters[i], ok, sizeof ok, "FLUSHALL");
    cr_assert_str_eq(ok, "OK");
}

static void down(int i)
{
    acl(i, "-evalsha");
}

static void up(int i)
{
    acl(i, "+evalsha");
}

/* POST /locks/name through svc (NULL: the cluster's own); the status, the token. */
static long grant(h_service *svc, const char *name, long long *token, h_resp *keep)
{
    h_resp r;
    char path[128];
    snprintf(path, sizeof path, "/locks/%s?ttl_ms=2000", name);
    if (svc)
        h_http_to(svc->url, &y_curl, "POST", path, NULL, &r);
    else
        h_http(&C, "POST", path, NULL, &r);
    long st = r.status;
    if (token)
        *token = st == 201 ? h_int(&r, "fencing_token") : -1;
    if (st == 201) {
        char del[200];
        snprintf(del, sizeof del, "/locks/%s?lease=%s", name, h_str(&r, "lease"));
        h_resp d;
        if (svc)
            h_http_to(svc->url, &y_curl, "DELETE", del, NULL, &d);
        else
            h_http(&C, "DELETE", del, NULL, &d);
        h_resp_free(&d);
    }
    if (keep)
        *keep = r;
    else
        h_resp_free(&r);
    return st;
}

struct want {
    h_service *svc;
    int master;
    const char *state;
};

static int in_state(void *arg)
{
    struct want *w = arg;
    char st[32];
    h_master_state(&C, w->svc, w->master, st, sizeof st, NULL);
    return strcmp(st, w->state) == 0;
}

static void wait_state(h_service *svc, int i, const char *state, int ms)
{
    struct want w = {svc, i, state};
    if (h_wait_until(in_state, &w, ms))
        return;
    h_resp r;
    if (svc)
        h_http_to(svc->url, &y_curl, "GET", "/readyz", NULL, &r);
    else
        h_http(&C, "GET", "/readyz", NULL, &r);
    cr_assert_fail("master %d did not become %s: %s", i, state, r.body);
}

/* Master i's quarantine is over in svc's view: it rejoined, or its repair says what it
 * waits for.  (/readyz sends no script: asking it changes no view.) */
static int decided(void *arg)
{
    struct want *w = arg;
    h_resp r;
    if (w->svc)
        h_http_to(w->svc->url, &y_curl, "GET", "/readyz", NULL, &r);
    else
        h_http(&C, "GET", "/readyz", NULL, &r);
    json_t *m = json_array_get(json_object_get(r.json, "masters"), (size_t)w->master);
    const char *st = json_string_value(json_object_get(m, "state"));
    int done = (st && strcmp(st, "ready") == 0) || json_object_get(m, "waiting_for");
    h_resp_free(&r);
    return done;
}

static void wait_decided(h_service *svc, int i, int ms)
{
    struct want w = {svc, i, NULL};
    cr_assert(h_wait_until(decided, &w, ms), "master %d: no verdict after its quarantine", i);
}

/* Grants of name through svc for ms: every token granted must exceed floor. */
static int grants_stay_above(h_service *svc, const char *name, long long floor, int ms, long long *last)
{
    double end = h_now_ms() + ms;
    int granted = 0;
    while (h_now_ms() < end) {
        long long t;
        if (grant(svc, name, &t, NULL) == 201) {
            cr_assert_gt(t, floor, "token %lld issued after %lld: a token went back", t, floor);
            floor = t;
            granted++;
        }
        usleep(50 * 1000);
    }
    if (last)
        *last = floor;
    return granted;
}

static long long five_grants_on_a_b_c(const char *name)
{
    down(3);
    down(4);
    long long t = 0;
    for (int k = 1; k <= 5; k++) {
        cr_assert_eq(grant(NULL, name, &t, NULL), 201, "grant %d", k);
    }
    up(3);
    up(4);
    wait_state(NULL, 3, "ready", 5000);
    wait_state(NULL, 4, "ready", 5000);
    return t;
}

/* Finding 1: X (the cluster's instance) and Y see different things.  A restarts
 * empty; B is wiped and X, which touches it, quarantines it, while Y still believes it
 * ready; C is down.  Y must not repair A from B, D and E (whose counters are 0): no
 * token at or below the five X issued. */
Test(trust, a_repair_never_trusts_a_peer_this_instance_only_believes_ready)
{
    const char *flags = "--quarantine-ms 3000 --threads 1";
    h_cluster_start(&C, 5, 1, flags);
    h_require_local(&C);
    h_service_start(&C, &Y, flags);
    long long t5 = five_grants_on_a_b_c("t1.name");
    cr_assert_eq(t5, 5);
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 1);
    wait_state(NULL, 0, "quarantined", 8000);
    wait_state(&Y, 0, "quarantined", 8000);
    flushall(1);
    /* X touches B: its script refuses (no record), X judges it and quarantines it. */
    grant(NULL, "t1.other", NULL, NULL);
    wait_state(NULL, 1, "quarantined", 8000);
    char st[32];
    h_master_state(&C, &Y, 1, st, sizeof st, NULL);
    cr_assert_str_eq(st, "ready", "Y has not looked at B since it was wiped");
    h_service_stop(&C.svc); /* X is gone; only Y repairs */
    down(2);
    /* A's quarantine runs out; Y may repair it only from proven peers.  Nothing goes
     * through Y until then: it must not learn of B's wipe from a lock script. */
    wait_decided(&Y, 0, 10000);
    grants_stay_above(&Y, "t1.name", t5, 3000, NULL);
    /* C is back: A and B are repaired from C, D and E, and tokens go on from 5. */
    up(2);
    wait_state(&Y, 0, "ready", 15000);
    long long last;
    cr_assert_gt(grants_stay_above(&Y, "t1.name", t5, 1000, &last), 0, "granted again once C is back");
}

/* Finding 2: B's record lost a counter (deleted by hand) and nothing touched B since;
 * C is down.  A's repair must not read B's record as a proof. */
Test(trust, a_repair_never_reads_a_damaged_record)
{
    const char *flags = "--quarantine-ms 3000 --threads 1";
    h_cluster_start(&C, 5, 1, flags);
    h_require_local(&C);
    long long t5 = five_grants_on_a_b_c("t2.name");
    /* the bucket of t2.name: the one counter at 5 on B */
    char keys[4096];
    h_redis_cmd(&C.masters[1], keys, sizeof keys, "EVAL %s 1 redlock:#master",
                "local kv = redis.call('HGETALL', KEYS[1]) for i = 1, #kv, 2 do if kv[i + 1] == '5' "
                "and string.byte(kv[i], 1) == 98 then return kv[i] end end return ''");
    cr_assert_neq(keys[0], '\0', "the name's counter on B");
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 1);
    wait_state(NULL, 0, "quarantined", 8000);
    cr_assert_eq(h_redis_cmd(&C.masters[1], NULL, 0, "HDEL redlock:#master %s", keys), 1);
    down(2);
    /* No lock operation touches B before A's repair: it learns nothing of the damage
     * but what its proof shows. */
    wait_decided(NULL, 0, 10000);
    grants_stay_above(NULL, "t2.name", t5, 3000, NULL);
    up(2);
    wait_state(NULL, 0, "ready", 15000);
    long long last;
    cr_assert_gt(grants_stay_above(NULL, "t2.name", t5, 1000, &last), 0, "granted again once C is back");
}

/* Finding 3: a repair's fallback measured its gap against lagging masters.  D and E
 * lag; A restarts (with its data) while they are down; later C goes down, A restarts
 * empty and B is wiped, so that only the laggards answer.  Tokens must only grow
 * through all of it. */
Test(trust, no_fallback_gap_is_measured_against_lagging_masters)
{
    const char *flags = "--quarantine-ms 2000 --threads 1";
    h_cluster_start(&C, 5, 1, flags);
    h_require_local(&C);
    down(3);
    down(4);
    long long top = 0, t;
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(grant(NULL, "t3.name", &t, NULL), 201);
        cr_assert_gt(t, top);
        top = t;
    }
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 0); /* keeps its data */
    wait_state(NULL, 0, "quarantined", 8000);
    /* Only B and C answer: the old fallback fired here (after about 4 s) with a gap of
     * 2^20 over the largest counter. */
    long long last;
    grants_stay_above(NULL, "t3.name", top, 6000, &last);
    top = last;
    up(3);
    up(4);
    down(2);
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 1);
    flushall(1);
    grants_stay_above(NULL, "t3.name", top, 8000, &last);
    top = last;
    up(2);
    wait_state(NULL, 0, "ready", 15000);
    cr_assert_gt(grants_stay_above(NULL, "t3.name", top, 1000, &last), 0, "granted again once C is back");
}

/* Finding 4: a restart costs only what is outstanding.  With a 60 s bound and 1 s
 * locks held, a master restarted with its data rejoins within seconds; while three
 * are out the answer says so. */
Test(trust, a_restarted_master_rejoins_once_the_locks_outstanding_have_expired)
{
    const char *flags = "--quarantine-ms 60000 --threads 1";
    h_cluster_start(&C, 5, 1, flags);
    h_require_local(&C);
    h_resp r;
    h_http(&C, "POST", "/locks/t4.held?ttl_ms=1500", NULL, &r);
    cr_assert_eq(r.status, 201);
    h_resp_free(&r);
    double t0 = h_now_ms();
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 0);
    wait_state(NULL, 0, "quarantined", 8000);
    wait_state(NULL, 0, "ready", 15000);
    double took = h_now_ms() - t0;
    cr_log_info("a restarted master rejoined %.0f ms after its restart (bound 60000, locks of 1500 ms)", took);
    cr_assert_lt(took, 10000, "rejoined after %.0f ms", took);
    /* Three out at once: a majority restarted.  The answer names the quarantine. */
    for (int i = 0; i < 3; i++)
        h_redis_kill(&C.masters[i]);
    for (int i = 0; i < 3; i++)
        h_redis_restart(&C.masters[i], 0);
    for (int i = 0; i < 3; i++)
        wait_state(NULL, i, "quarantined", 8000);
    h_http(&C, "POST", "/locks/t4.other", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "masters_quarantined", "%s", r.body);
    cr_assert_eq(h_int(&r, "quarantined"), 3, "%s", r.body);
    cr_assert_eq(h_int(&r, "nodes_ok"), 2, "the two trusted masters answered: %s", r.body);
    cr_assert_neq(r.retry_after[0], '\0');
    h_resp_free(&r);
}

/* Every master restarts at once (a power loss), each with its data: the service comes
 * back by itself once the delayed restart is over, and tokens still grow. */
Test(trust, after_a_power_loss_the_service_comes_back_by_itself)
{
    const char *flags = "--quarantine-ms 2500 --threads 1";
    h_cluster_start(&C, 5, 1, flags);
    h_require_local(&C);
    long long t, top;
    cr_assert_eq(grant(NULL, "t5.name", &top, NULL), 201);
    for (int i = 0; i < 5; i++)
        h_redis_kill(&C.masters[i]);
    for (int i = 0; i < 5; i++)
        h_redis_restart(&C.masters[i], 0);
    for (int i = 0; i < 5; i++)
        wait_state(NULL, i, "quarantined", 8000);
    for (int i = 0; i < 5; i++)
        wait_state(NULL, i, "ready", 30000);
    cr_assert_eq(grant(NULL, "t5.name", &t, NULL), 201);
    cr_assert_gt(t, top);
}
