/* test_delayfault.c -- lock-delay and bounded holds (docs/DESIGN.md section 14) under a
 * holder that comes back late and masters that lost a key, with real masters and the
 * real service: the reproducers of a hostile tester's four holes, each of which failed
 * every time on the build before the fix (14 of 14 runs).
 *
 * - late_release_*: a holder whose hold ended by expiry (the name rests for its
 *   lock-delay) sends its DELETE late, inside the rest: the release (and the handoff to
 *   a parked waiter) must not take a key that rests -- it is not the lease's any more.
 * - reacquire_*: a hold with max_hold_ms whose key is missing on some masters is
 *   re-acquired with its own lease: the masters that had no key stamp a fresh deadline;
 *   the extension must still end at the first bound (any master past it refuses it).
 * - a_multi_name_set_*: a set by the resting lock's own lease must not adopt the key
 *   that rests, nor its release free the name. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;

#define SLACK_MS 5.0

static void teardown(void) { h_cluster_stop(&C); }

TestSuite(delayfault, .fini = teardown, .timeout = 180);

static long call(const char *method, const char *path, const char *body, h_resp *out)
{
    return h_call(&C, method, path, body, out);
}

static long long jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

static int jtrue(json_t *o, const char *key) { return json_is_true(json_object_get(o, key)); }

static int held(const char *name, long long *resting_ms)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s", name);
    h_resp r;
    cr_assert_eq(call("GET", path, NULL, &r), 200, "%s", r.body);
    int h = jtrue(r.json, "held");
    if (resting_ms)
        *resting_ms = jint(r.json, "resting_ms");
    h_resp_free(&r);
    return h;
}

static int not_held(void *arg) { return !held((const char *)arg, NULL); }

/* ---- a late release ends the rest ---- */

Test(delayfault, late_release_by_an_expired_holder_ends_its_rest)
{
    h_cluster_start(&C, 5, 0, NULL);
    char lease[200];
    double sent = h_now_ms();
    cr_assert_eq(h_acquire(&C, "a.late", "ttl_ms=800&lock_delay_ms=5000", lease, sizeof lease, NULL), 201);
    /* The holder stalls (a GC pause): its validity ends, the name rests for 5 s. */
    cr_assert(h_wait_until(not_held, "a.late", 3000), "the holder's part ends with its ttl");
    double ended = h_now_ms();
    long long rest = -1;
    held("a.late", &rest);
    cr_assert(rest > 0, "it rests now: resting_ms %lld", rest);
    /* The stalled holder wakes and sends its release, as any client does at the end. */
    h_resp r;
    char path[300];
    snprintf(path, sizeof path, "/locks/a.late?lease=%s", lease);
    long st = call("DELETE", path, NULL, &r);
    fprintf(stderr, "delayfault: late DELETE %.0f ms after the grant's request: %ld %s\n", h_now_ms() - sent, st,
            r.body);
    cr_assert_eq(st, 404, "a lease whose hold is over is not found, not released: %ld %s", st, r.body);
    h_resp_free(&r);
    /* Another client: DESIGN §14's claim says nobody before ended + 5000. */
    st = call("POST", "/locks/a.late?ttl_ms=5000", NULL, &r);
    double got = h_now_ms();
    fprintf(stderr, "delayfault: another client's POST %.0f ms after the holder's part ended: %ld %s\n",
            got - ended, st, r.body);
    h_resp_free(&r);
    cr_assert(st != 201 || got >= ended + 5000 - SLACK_MS,
              "a grant %.0f ms into a 5000 ms rest: the expired holder's late DELETE ended the rest",
              got - ended);
}

struct waiter {
    pthread_t th;
    char url[128];
    char path[200];
    long status;
    double done_ms;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(w->url, &curl, "POST", w->path, NULL, &r);
    w->status = r.status;
    w->done_ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int one_parked(void *arg)
{
    (void)arg;
    return h_metric(C.svc.url, &C.curl, "redlockd_parked_waiters") >= 1;
}

Test(delayfault, late_release_hands_a_resting_lock_to_a_parked_waiter)
{
    h_cluster_start(&C, 5, 0, NULL);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "a.hand", "ttl_ms=800&lock_delay_ms=6000", lease, sizeof lease, NULL), 201);
    struct waiter w;
    memset(&w, 0, sizeof w);
    snprintf(w.url, sizeof w.url, "%s", C.svc.url);
    snprintf(w.path, sizeof w.path, "/locks/a.hand?ttl_ms=5000&wait_ms=15000");
    cr_assert_eq(pthread_create(&w.th, NULL, waiter_main, &w), 0);
    cr_assert(h_wait_until(one_parked, NULL, 5000), "the waiter parks");
    cr_assert(h_wait_until(not_held, "a.hand", 3000), "the holder's part ends with its ttl");
    double ended = h_now_ms();
    char path[300];
    snprintf(path, sizeof path, "/locks/a.hand?lease=%s", lease);
    long st = call("DELETE", path, NULL, NULL);
    pthread_join(w.th, NULL);
    fprintf(stderr, "delayfault: late DELETE (%ld) with a parked waiter: the waiter got %ld, %.0f ms after the "
                    "holder's part ended (rest 6000 ms)\n", st, w.status, w.done_ms - ended);
    cr_assert(w.status != 201 || w.done_ms >= ended + 6000 - SLACK_MS,
              "the waiter was handed the lock %.0f ms into a 6000 ms rest", w.done_ms - ended);
}

/* ---- a bounded hold re-acquired with its own lease where masters lost its key ---- */

static char state_buf[32];

static const char *state_of(int i)
{
    h_master_state(&C, NULL, i, state_buf, sizeof state_buf, NULL);
    return state_buf;
}

static long patch(const char *name, const char *lease, long ttl, long long *validity)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?lease=%s&ttl_ms=%ld", name, lease, ttl);
    h_resp r;
    long st = call("PATCH", path, NULL, &r);
    if (validity)
        *validity = jint(r.json, "validity_ms");
    if (st != 200)
        fprintf(stderr, "delayfault: PATCH %ld %s\n", st, r.body);
    h_resp_free(&r);
    return st;
}

static long reacquire(const char *name, const char *lease, const char *query)
{
    char path[300];
    snprintf(path, sizeof path, "/locks/%s?lease=%s&%s", name, lease, query);
    h_resp r;
    long st = call("POST", path, NULL, &r);
    fprintf(stderr, "delayfault: re-acquire with the same lease: %ld %s\n", st, r.body);
    h_resp_free(&r);
    return st;
}

/* Keep the hold alive with PATCHes every 250 ms for ms, or until master i is ready
 * (i >= 0; then at least until it was seen not ready once). */
static void keep_alive(const char *name, const char *lease, int ms, int until_ready)
{
    double until = h_now_ms() + ms;
    int seen_out = 0;
    while (h_now_ms() < until) {
        cr_assert_eq(patch(name, lease, 1000, NULL), 200, "the hold stays alive (%.0f ms left)",
                     until - h_now_ms());
        if (until_ready >= 0) {
            const char *s = state_of(until_ready);
            if (strcmp(s, "ready") != 0)
                seen_out = 1;
            else if (seen_out)
                return;
        }
        usleep(250 * 1000);
    }
    cr_assert(until_ready < 0, "master %d did not come back in %d ms: %s", until_ready, ms, state_of(until_ready));
}

static void show_keys(const char *name, const char *when)
{
    for (int i = 0; i < C.n; i++) {
        char v[512] = "";
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:%s", name);
        long long t = h_redis_cmd(&C.masters[i], NULL, 0, "TIME");
        (void)t;
        fprintf(stderr, "delayfault: %s: master %d: %s\n", when, i, v);
    }
}

Test(delayfault, reacquire_after_masters_lost_the_key_extends_past_max_hold)
{
    /* The node timeout well below the 800 ms that master 2 stays frozen below. */
    h_cluster_start(&C, 3, 0, "--node-timeout-ms 250");
    const char *name = "a.bound", *lease = "delayfault-bounded-lease-0001";
    const long M = 8000;
    /* 1. Master 2 frozen: the grant is made on masters 0 and 1 (Q = 2), deadline g + M. */
    h_redis_freeze(&C.masters[2]);
    char q[200];
    snprintf(q, sizeof q, "ttl_ms=1000&max_hold_ms=%ld", M);
    double g = h_now_ms();
    cr_assert_eq(reacquire(name, lease, q), 201);
    usleep(800 * 1000); /* past the node timeout: the script queued there runs late, and refuses */
    h_redis_thaw(&C.masters[2]);
    keep_alive(name, lease, 2500, -1);
    show_keys(name, "after the grant");
    cr_assert_str_eq(state_of(2), "ready");
    /* 2. The holder retries its acquire with its own lease (an idempotent retry, §5):
     *    adopted on 0 and 1 (deadline kept), FRESH on 2 (a new deadline, now + M). */
    cr_assert_eq(reacquire(name, lease, q), 201);
    /* 3. Master 1 is wiped; the hold lives on 0 and 2 while 1 sits out its quarantine. */
    char out[64];
    h_redis_cmd(&C.masters[1], out, sizeof out, "FLUSHALL");
    keep_alive(name, lease, 20000, 1);
    /* 4. The same retry once more: fresh on 1 too. Masters 1 and 2 (a quorum) now carry
     *    deadlines later than the grant's. */
    cr_assert_eq(reacquire(name, lease, q), 201);
    show_keys(name, "after the retries");
    fprintf(stderr, "delayfault: steps done %.0f ms after the grant (bound %ld ms)\n", h_now_ms() - g, M);
    /* 5. Extend until refused. */
    double last_end = g;
    for (;;) {
        double ps = h_now_ms();
        long long v = 0;
        long st = patch(name, lease, 1000, &v);
        if (st != 200)
            break;
        last_end = ps + (double)v;
        cr_assert_lt(ps, g + 3 * M, "never refused");
        usleep(250 * 1000);
    }
    fprintf(stderr, "delayfault: the hold was valid until %.0f ms after its grant's request (max_hold_ms %ld)\n",
            last_end - g, M);
    cr_assert_leq(last_end, g + M + 250 + SLACK_MS + 50,
                  "the hold lived %.0f ms past its max_hold_ms", last_end - g - M);
}

/* ---- the same lease re-takes a resting lock through a multi-name set ---- */

Test(delayfault, a_multi_name_set_by_the_same_lease_takes_a_resting_lock)
{
    h_cluster_start(&C, 5, 0, NULL);
    const char *lease = "delayfault-set-lease-000000001";
    char path[300];
    snprintf(path, sizeof path, "/locks/a.setrest?ttl_ms=800&lock_delay_ms=6000&lease=%s", lease);
    cr_assert_eq(call("POST", path, NULL, NULL), 201);
    cr_assert(h_wait_until(not_held, "a.setrest", 3000), "the holder's part ends with its ttl");
    double ended = h_now_ms();
    /* Its own single-name acquire is refused in the rest (DESIGN §14: "its own lease's
     * included")... */
    h_resp r;
    long st = call("POST", path, NULL, &r);
    fprintf(stderr, "delayfault: its own POST /locks/{name} in the rest: %ld %s\n", st, r.body);
    h_resp_free(&r);
    /* ... but a set with the same lease adopts the resting key (SCRIPT_MACQUIRE: mine(),
     * no rests()) ... */
    char body[300];
    snprintf(body, sizeof body, "{\"names\":[\"a.setrest\",\"a.other\"],\"lease\":\"%s\",\"ttl_ms\":3000}", lease);
    long sst = call("POST", "/locks", body, &r);
    fprintf(stderr, "delayfault: POST /locks (a set, same lease) %.0f ms into the rest: %ld %s\n", h_now_ms() - ended,
            sst, r.body);
    h_resp_free(&r);
    /* ... and its clean release frees the name for anyone. */
    if (sst == 201) {
        snprintf(path, sizeof path, "/locks?lease=%s", lease);
        call("DELETE", path, NULL, NULL);
    }
    st = call("POST", "/locks/a.setrest?ttl_ms=5000", NULL, &r);
    double got = h_now_ms();
    fprintf(stderr, "delayfault: another client %.0f ms into a 6000 ms rest: %ld %s\n", got - ended, st, r.body);
    h_resp_free(&r);
    cr_assert(sst != 201, "a set by the resting lock's own lease was granted %.0f ms into its rest",
              got - ended);
    cr_assert(st != 201 || got >= ended + 6000 - SLACK_MS, "another client got in %.0f ms into the rest",
              got - ended);
}
