/* test_shared.c -- shared locks, semaphores and reentrant holds against real masters
 * (docs/DESIGN.md, section 12).
 *
 * - Readers share a name and keep a writer out; a writer keeps readers out; a parked
 *   writer makes new readers queue behind it, and gets the lock when the last reader
 *   leaves.  A reader's token is the name's current one.
 * - A multi-name lock is refused while readers hold one of its names.
 * - A semaphore grants at most N permits, across two instances; another N is 409
 *   permits_mismatch; its tokens grow with every grant.
 * - Under contention, with two masters frozen and another restarted empty, a semaphore
 *   never has more than N holders at once.
 * - A master restarted empty under a reader (or a permit) held on exactly a quorum: the
 *   quarantine keeps the writer (the second permit) out; without it the hazard is real
 *   (the control experiments).
 * - Reentrant holds count up and down; the lock goes (and a parked waiter gets it) at
 *   zero, with the first grant's token.
 * - Every status of the new parameters. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;

static void teardown(void)
{
    if (!C.external)
        for (int i = 0; i < C.n; i++)
            if (C.masters[i].pid > 0)
                h_redis_thaw(&C.masters[i]);
    h_cluster_stop(&C);
}

static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }

TestSuite(shared, .init = setup, .fini = teardown, .timeout = 90);
TestSuite(semaphore, .init = setup, .fini = teardown, .timeout = 90);
TestSuite(reentrant, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(shared_faults, .fini = teardown, .timeout = 90);

/* POST path with body; status, and lease/token of a grant. */
static long post(const char *path, const char *body, char *lease, size_t cap, long long *token)
{
    h_resp r;
    h_http(&C, "POST", path, body, &r);
    if (r.status == 201) {
        if (lease)
            snprintf(lease, cap, "%s", h_str(&r, "lease"));
        if (token)
            *token = h_int(&r, "fencing_token");
    }
    h_resp_free(&r);
    return r.status;
}

static long del(const char *path, const char *lease)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    h_resp r;
    h_http(&C, "DELETE", path, body, &r);
    h_resp_free(&r);
    return r.status;
}

/* ---- shared locks ---- */

Test(shared, readers_share_the_name_and_keep_a_writer_out)
{
    char l[3][200], w[200];
    long long t = -1, wt = -1;
    /* A writer first: its token is the one readers see afterwards. */
    cr_assert_eq(post("/locks/rw.a?ttl_ms=10000", NULL, w, sizeof w, &wt), 201);
    cr_assert_eq(del("/locks/rw.a", w), 200);
    for (int i = 0; i < 3; i++) {
        h_resp r;
        h_http(&C, "POST", "/locks/rw.a", "{\"mode\":\"shared\",\"ttl_ms\":10000}", &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        cr_assert_str_eq(h_str(&r, "mode"), "shared");
        cr_assert_eq(h_int(&r, "fencing_token"), wt, "a reader's token is the last writer's");
        snprintf(l[i], sizeof l[i], "%s", h_str(&r, "lease"));
        h_resp_free(&r);
    }
    h_resp r;
    h_http(&C, "POST", "/locks/rw.a?wait_ms=0", NULL, &r);
    cr_assert_eq(r.status, 409, "a writer among readers: %s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "lock_held");
    cr_assert_neq(r.retry_after[0], '\0');
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/rw.a", NULL, &r);
    cr_assert_eq(h_int(&r, "readers"), 3, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "mode"), "shared");
    cr_assert(json_is_false(json_object_get(r.json, "held")), "no exclusive holder: %s", r.body);
    h_resp_free(&r);
    /* A reader extends and releases by its lease alone. */
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", l[0]);
    h_http(&C, "PATCH", "/locks/rw.a", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_gt(h_int(&r, "validity_ms"), 10000);
    h_resp_free(&r);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(del("/locks/rw.a", l[i]), 200);
    cr_assert_eq(del("/locks/rw.a", l[0]), 404, "released once");
    cr_assert_eq(post("/locks/rw.a?ttl_ms=10000", NULL, w, sizeof w, &t), 201, "the last reader left");
    cr_assert_gt(t, wt, "every exclusive grant gets a larger token");
    cr_assert_eq(post("/locks/rw.a?mode=shared", NULL, NULL, 0, NULL), 409, "a reader under a writer");
    /* /metrics counts them by kind (exact counts: this test's own service only) */
    if (C.external)
        return;
    h_http(&C, "GET", "/metrics", NULL, &r);
    cr_assert(strstr(r.body, "redlockd_grants_total{kind=\"shared\"} 3\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_grants_total{kind=\"exclusive\"} 2\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_refusals_total{kind=\"shared\"} 1\n"), "%s", r.body);
    cr_assert(strstr(r.body, "redlockd_refusals_total{kind=\"exclusive\"} 1\n"), "%s", r.body);
    h_resp_free(&r);
}

typedef struct waiting_writer {
    const char *path;
    long status;
    long long token;
    double answered_ms;
} waiting_writer;

static void *writer_main(void *arg)
{
    waiting_writer *ww = arg;
    void *curl = NULL;
    h_resp r;
    h_http_to(C.svc.url, &curl, "POST", ww->path, NULL, &r);
    ww->status = r.status;
    ww->token = h_int(&r, "fencing_token");
    ww->answered_ms = h_now_ms();
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

static int intent_on_a_quorum(void *name)
{
    int n = 0;
    for (int i = 0; i < C.n; i++) {
        n += h_redis_cmd(&C.masters[i], NULL, 0, "ZCARD redlock:#w:%s", (const char *)name) >= 1;
    }
    return n >= 3;
}

Test(shared, a_parked_writer_is_not_starved_by_new_readers)
{
    h_require_local(&C);
    char r1[200], r2[200];
    cr_assert_eq(post("/locks/rw.b?mode=shared&ttl_ms=20000", NULL, r1, sizeof r1, NULL), 201);
    cr_assert_eq(post("/locks/rw.b?mode=shared&ttl_ms=20000", NULL, r2, sizeof r2, NULL), 201);
    waiting_writer ww = {"/locks/rw.b?ttl_ms=5000&wait_ms=15000", 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &ww);
    cr_assert(h_wait_until(intent_on_a_quorum, "rw.b", 5000), "the parked writer is known to the masters");
    /* New readers queue behind the writer. */
    h_resp r;
    h_http(&C, "POST", "/locks/rw.b?mode=shared", NULL, &r);
    cr_assert_eq(r.status, 409, "a new reader while a writer waits: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(ww.status, 0, "the writer still waits");
    cr_assert_eq(del("/locks/rw.b", r1), 200);
    cr_assert_eq(ww.status, 0, "one reader is left");
    double released = h_now_ms();
    cr_assert_eq(del("/locks/rw.b", r2), 200);
    pthread_join(th, NULL);
    cr_assert_eq(ww.status, 201, "the writer gets the lock when the last reader leaves");
    cr_assert_lt(ww.answered_ms - released, 1000, "at the last release, not at an expiry (%.0f ms)",
                 ww.answered_ms - released);
    cr_assert_eq(post("/locks/rw.b?mode=shared", NULL, NULL, 0, NULL), 409, "and keeps readers out");
}

Test(shared, a_multi_name_lock_is_refused_while_readers_hold_one_of_its_names)
{
    char rl[200];
    cr_assert_eq(post("/locks/rw.c?mode=shared&ttl_ms=10000", NULL, rl, sizeof rl, NULL), 201);
    h_resp r;
    h_http(&C, "POST", "/locks", "{\"names\":[\"rw.d\",\"rw.c\"],\"ttl_ms\":10000}", &r);
    cr_assert_eq(r.status, 409, "%s", r.body);
    h_resp_free(&r);
    cr_assert_eq(del("/locks/rw.c", rl), 200);
    h_http(&C, "POST", "/locks", "{\"names\":[\"rw.d\",\"rw.c\"],\"ttl_ms\":10000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    cr_assert_eq(post("/locks/rw.c?mode=shared", NULL, NULL, 0, NULL), 409, "the set's name keeps readers out");
}

Test(shared, the_new_parameters_are_checked)
{
    static const struct {
        const char *method, *path, *body, *code;
    } bad[] = {
        {"POST", "/locks/p.a?mode=read", NULL, "invalid_mode"},
        {"POST", "/locks/p.a", "{\"mode\":1}", "invalid_mode"},
        {"PATCH", "/locks/p.a", "{\"lease\":\"0123456789abcdef\",\"mode\":\"shared\"}", "invalid_mode"},
        {"PATCH", "/locks/p.a?mode=shared", "{\"lease\":\"0123456789abcdef\"}", "invalid_query"},
        {"POST", "/locks/p.a?mode=shared&owner=me", NULL, "invalid_owner"},
        {"POST", "/locks/p.a?permits=2", NULL, "invalid_permits"},
        {"POST", "/locks/p.a", "{\"reentrant\":\"yes\"}", "invalid_reentrant"},
        {"POST", "/locks/p.a?reentrant=true&mode=shared", NULL, "invalid_reentrant"},
        {"POST", "/semaphores/p.s", NULL, "invalid_permits"},
        {"POST", "/semaphores/p.s?permits=0", NULL, "invalid_permits"},
        {"POST", "/semaphores/p.s?permits=1025", NULL, "invalid_permits"},
        {"POST", "/semaphores/p.s", "{\"permits\":\"2\"}", "invalid_permits"},
        {"POST", "/semaphores/p.s?permits=2&mode=shared", NULL, "invalid_mode"},
        {"POST", "/semaphores/p.s?permits=2&reentrant=true", NULL, "invalid_reentrant"},
        {"POST", "/semaphores/p%20s?permits=2", NULL, "invalid_name"},
        {"DELETE", "/semaphores/p.s?force=true", "{\"lease\":\"0123456789abcdef\"}", "invalid_force"},
        {"DELETE", "/semaphores/p.s", NULL, "invalid_lease"},
        {"GET", "/semaphores/p.s?index=3", NULL, "invalid_index"},
        {"GET", "/locks/p.a?lease=short", NULL, "invalid_lease"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h_resp r;
        h_http(&C, bad[i].method, bad[i].path, bad[i].body, &r);
        cr_assert_eq(r.status, 400, "%s %s: %ld %s", bad[i].method, bad[i].path, r.status, r.body);
        cr_assert_str_eq(h_str(&r, "error"), bad[i].code, "%s %s: %s", bad[i].method, bad[i].path, r.body);
        h_resp_free(&r);
    }
    /* A semaphore name leaves room for the service's own prefix: 247 bytes at most. */
    char path[400], name[260];
    memset(name, 'n', 248);
    name[248] = '\0';
    snprintf(path, sizeof path, "/semaphores/%s?permits=1", name);
    h_resp r;
    h_http(&C, "POST", path, NULL, &r);
    cr_assert_eq(r.status, 400, "%s", r.body);
    h_resp_free(&r);
    name[247] = '\0';
    snprintf(path, sizeof path, "/semaphores/%s?permits=1", name);
    h_http(&C, "POST", path, NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "name"), name);
    h_resp_free(&r);
}

/* ---- semaphores ---- */

Test(semaphore, at_most_n_permits_with_growing_tokens_and_one_number_of_permits)
{
    char l[3][200];
    long long t[3] = {0};
    for (int i = 0; i < 3; i++) {
        h_resp r;
        h_http(&C, "POST", "/semaphores/pool.a", "{\"permits\":3,\"ttl_ms\":10000}", &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        cr_assert_eq(h_int(&r, "permits"), 3);
        cr_assert_str_eq(h_str(&r, "name"), "pool.a");
        snprintf(l[i], sizeof l[i], "%s", h_str(&r, "lease"));
        t[i] = h_int(&r, "fencing_token");
        if (i)
            cr_assert_gt(t[i], t[i - 1], "tokens grow per semaphore");
        h_resp_free(&r);
    }
    h_resp r;
    h_http(&C, "POST", "/semaphores/pool.a?permits=3", NULL, &r);
    cr_assert_eq(r.status, 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "lock_held");
    cr_assert_neq(r.retry_after[0], '\0');
    h_resp_free(&r);
    h_http(&C, "POST", "/semaphores/pool.a?permits=4", NULL, &r);
    cr_assert_eq(r.status, 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "permits_mismatch");
    cr_assert_eq(h_int(&r, "permits"), 3, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/semaphores/pool.a", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert_eq(h_int(&r, "permits"), 3, "%s", r.body);
    cr_assert_eq(h_int(&r, "held"), 3, "%s", r.body);
    cr_assert_eq(h_int(&r, "free"), 0, "%s", r.body);
    h_resp_free(&r);
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":20000}", l[1]);
    h_http(&C, "PATCH", "/semaphores/pool.a", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert_gt(h_int(&r, "validity_ms"), 10000);
    h_resp_free(&r);
    cr_assert_eq(del("/semaphores/pool.a", l[1]), 200);
    cr_assert_eq(del("/semaphores/pool.a", l[1]), 404, "released once");
    long long t4 = 0;
    cr_assert_eq(post("/semaphores/pool.a?permits=3", NULL, NULL, 0, &t4), 201, "a permit came free");
    cr_assert_gt(t4, t[2]);
    h_http(&C, "GET", "/semaphores/pool.none", NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(json_is_null(json_object_get(r.json, "permits")), "%s", r.body);
    cr_assert_eq(h_int(&r, "held"), 0);
    h_resp_free(&r);
}

Test(semaphore, a_waiter_gets_the_permit_a_release_frees_on_another_instance)
{
    h_require_local(&C);
    h_service other;
    h_service_start(&C, &other, NULL);
    char l[200];
    cr_assert_eq(post("/semaphores/pool.b?permits=1&ttl_ms=20000", NULL, l, sizeof l, NULL), 201);
    waiting_writer ww = {"/semaphores/pool.b?permits=1&ttl_ms=5000&wait_ms=15000", 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &ww);
    usleep(200 * 1000); /* not needed for correctness: a release before it parks is fine too */
    void *curl = NULL;
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", l);
    h_resp r;
    double released = h_now_ms();
    h_http_to(other.url, &curl, "DELETE", "/semaphores/pool.b", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    h_resp_free(&r);
    h_http_to(other.url, &curl, "POST", "/semaphores/pool.b?permits=1", NULL, &r);
    long other_status = r.status;
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    pthread_join(th, NULL);
    cr_assert(ww.status == 201 || other_status == 201, "someone got the freed permit");
    cr_assert(!(ww.status == 201 && other_status == 201), "not both: one permit");
    if (ww.status == 201)
        cr_assert_lt(ww.answered_ms - released, 2000, "woken by the release on the other instance");
    h_service_stop(&other);
}

/* Contention: threads take permits of one semaphore and let them go while masters
 * freeze and one restarts empty; each records when it held its permit (from the
 * answer to the earlier of its release being sent and the validity's end, counted
 * from the request's send). */
#define SEM_THREADS 8
#define SEM_MAX_HOLDS 4096

typedef struct hold_rec {
    double from, to;
    long long token;
} hold_rec;

static pthread_mutex_t holds_mu = PTHREAD_MUTEX_INITIALIZER;
static hold_rec holds[SEM_MAX_HOLDS];
static size_t nholds;
static volatile int sem_stop;

static void *permit_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *curl = NULL;
    while (!sem_stop) {
        h_resp r;
        double sent = h_now_ms();
        h_http_to(C.svc.url, &curl, "POST", "/semaphores/pool.c",
                  "{\"permits\":3,\"ttl_ms\":800,\"wait_ms\":300}", &r);
        double got = h_now_ms();
        if (r.status != 201) {
            h_resp_free(&r);
            continue;
        }
        double until = sent + (double)h_int(&r, "validity_ms");
        long long token = h_int(&r, "fencing_token");
        char body[1024];
        snprintf(body, sizeof body, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
        h_resp_free(&r);
        usleep((useconds_t)(rand_r(&seed) % 40) * 1000);
        double rel = h_now_ms();
        if (rand_r(&seed) % 4) {
            h_http_to(C.svc.url, &curl, "DELETE", "/semaphores/pool.c", body, &r);
            h_resp_free(&r);
        } else {
            rel = until; /* left to expire */
        }
        pthread_mutex_lock(&holds_mu);
        if (nholds < SEM_MAX_HOLDS)
            holds[nholds++] = (hold_rec){got, rel < until ? rel : until, token};
        pthread_mutex_unlock(&holds_mu);
    }
    curl_easy_cleanup(curl);
    return NULL;
}

static int most_at_once(const hold_rec *h, size_t n)
{
    int most = 0;
    for (size_t i = 0; i < n; i++) {
        int at = 0; /* holders at the instant h[i] began */
        for (size_t j = 0; j < n; j++)
            at += h[j].from <= h[i].from && h[i].from < h[j].to;
        if (at > most)
            most = at;
    }
    return most;
}

Test(semaphore, never_more_than_n_holders_with_two_masters_frozen_and_one_restarted_empty)
{
    h_require_local(&C);
    nholds = 0;
    sem_stop = 0;
    pthread_t th[SEM_THREADS];
    for (int i = 0; i < SEM_THREADS; i++)
        pthread_create(&th[i], NULL, permit_main, (void *)(uintptr_t)(i + 1));
    usleep(800 * 1000);
    h_redis_freeze(&C.masters[3]);
    h_redis_freeze(&C.masters[4]);
    usleep(800 * 1000);
    h_redis_kill(&C.masters[2]);
    h_redis_restart(&C.masters[2], 1);
    usleep(800 * 1000);
    h_redis_thaw(&C.masters[3]);
    h_redis_thaw(&C.masters[4]);
    usleep(1500 * 1000);
    sem_stop = 1;
    for (int i = 0; i < SEM_THREADS; i++)
        pthread_join(th[i], NULL);
    cr_assert_gt(nholds, 20, "enough permits were granted to judge (%zu)", nholds);
    int most = most_at_once(holds, nholds);
    cr_assert_leq(most, 3, "%d holders at once of a 3-permit semaphore", most);
    for (size_t i = 0; i < nholds; i++)
        for (size_t j = i + 1; j < nholds; j++)
            cr_assert_neq(holds[i].token, holds[j].token, "two grants share token %lld", holds[i].token);
    fprintf(stderr, "semaphore: %zu permits granted under faults, at most %d at once (3 permits)\n",
            nholds, most);
}

/* ---- reentrant holds ---- */

Test(reentrant, holds_count_up_and_down_with_the_first_token)
{
    const char *L = "reentrantLease0123456789";
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true,\"ttl_ms\":10000}", L);
    h_resp r;
    h_http(&C, "POST", "/locks/re.a", body, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    cr_assert_eq(h_int(&r, "holds"), 1);
    long long token = h_int(&r, "fencing_token");
    h_resp_free(&r);
    for (int n = 2; n <= 3; n++) {
        h_http(&C, "POST", "/locks/re.a", body, &r);
        cr_assert_eq(r.status, 201, "%s", r.body);
        cr_assert_eq(h_int(&r, "holds"), n, "%s", r.body);
        cr_assert_eq(h_int(&r, "fencing_token"), token, "the first grant's token");
        h_resp_free(&r);
    }
    /* Without reentrant, a repeated lease stays an idempotent retry (the count kept). */
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":10000}", L);
    h_http(&C, "POST", "/locks/re.a", body, &r);
    cr_assert_eq(r.status, 201);
    cr_assert_null(json_object_get(r.json, "holds"), "%s", r.body);
    h_resp_free(&r);
    char path[256];
    snprintf(path, sizeof path, "/locks/re.a?lease=%s", L);
    h_http(&C, "GET", path, NULL, &r);
    cr_assert_eq(h_int(&r, "holds"), 3, "the holder sees its count: %s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/re.a", NULL, &r);
    cr_assert_null(json_object_get(r.json, "holds"), "others do not: %s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/re.a?lease=someoneElse0123456789", NULL, &r);
    cr_assert_null(json_object_get(r.json, "holds"), "nor another lease: %s", r.body);
    h_resp_free(&r);
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", L);
    for (int left = 2; left >= 1; left--) {
        h_http(&C, "DELETE", "/locks/re.a", body, &r);
        cr_assert_eq(r.status, 200, "%s", r.body);
        cr_assert(json_is_false(json_object_get(r.json, "released")), "%s", r.body);
        cr_assert_eq(h_int(&r, "holds"), left);
        h_resp_free(&r);
        cr_assert_eq(post("/locks/re.a", NULL, NULL, 0, NULL), 409, "still held");
    }
    h_http(&C, "DELETE", "/locks/re.a", body, &r);
    cr_assert(json_is_true(json_object_get(r.json, "released")), "%s", r.body);
    h_resp_free(&r);
    long long t2 = 0;
    cr_assert_eq(post("/locks/re.a", NULL, NULL, 0, &t2), 201, "released at zero");
    cr_assert_gt(t2, token);
}

Test(reentrant, a_parked_waiter_gets_the_lock_at_the_last_release_only)
{
    h_require_local(&C);
    const char *L = "reentrantLeaseABCDEFGHIJ";
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true,\"ttl_ms\":20000}", L);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(post("/locks/re.b", body, NULL, 0, NULL), 201);
    waiting_writer ww = {"/locks/re.b?ttl_ms=5000&wait_ms=15000", 0, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, writer_main, &ww);
    usleep(300 * 1000); /* let it park: the release then goes through the handoff */
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", L);
    h_resp r;
    h_http(&C, "DELETE", "/locks/re.b", body, &r);
    cr_assert_eq(h_int(&r, "holds"), 1, "%s", r.body);
    h_resp_free(&r);
    usleep(300 * 1000);
    cr_assert_eq(ww.status, 0, "a hold is left: the waiter waits");
    double released = h_now_ms();
    h_http(&C, "DELETE", "/locks/re.b", body, &r);
    cr_assert(json_is_true(json_object_get(r.json, "released")), "%s", r.body);
    h_resp_free(&r);
    pthread_join(th, NULL);
    cr_assert_eq(ww.status, 201);
    cr_assert_lt(ww.answered_ms - released, 1000, "at the last release");
}

/* ---- a master restarted empty under a reader or a permit held on exactly a quorum ---- */

static int all_judged(void *arg)
{
    (void)arg;
    h_resp r;
    h_http(&C, "GET", "/readyz", NULL, &r);
    int judged = 1;
    json_t *ms = json_object_get(r.json, "masters");
    for (size_t i = 0; i < json_array_size(ms); i++) {
        const char *st = json_string_value(json_object_get(json_array_get(ms, i), "state"));
        judged &= st && (strcmp(st, "ready") == 0 || strcmp(st, "quarantined") == 0);
    }
    judged &= json_array_size(ms) == 5;
    h_resp_free(&r);
    return judged;
}

static int all_ready(void *arg)
{
    (void)arg;
    h_resp r;
    h_http(&C, "GET", "/readyz", NULL, &r);
    int ready = !strstr(r.body, "quarantined") && !strstr(r.body, "\"ok\":false");
    h_resp_free(&r);
    return ready;
}

static void acl(int i, const char *rule)
{
    char ok[16];
    h_redis_cmd(&C.masters[i], ok, sizeof ok, "ACL SETUSER default %s", rule);
    cr_assert_str_eq(ok, "OK", "ACL SETUSER on master %d", i);
}

/* The model's old-reentry-count (tests/model): an outer hold on exactly masters 0, 1
 * and 2; a re-entry that reaches 0 and 2 (master 1 refuses every script for a while)
 * and 3, 4, where the key is free.  Taking those free keys counted a hold there that
 * no outer hold knew of: a nested release then took the keys that only the outer hold
 * counted, and another client got the name while the outer hold was valid.  A re-entry
 * now counts only where it adds a hold; short of a quorum it is answered 503, and the
 * outer hold stands, whole. */
Test(reentrant, a_reentry_never_takes_a_free_key)
{
    h_require_local(&C);
    const char *L = "reentryFreeKey0123456789";
    char body[256];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"ttl_ms\":30000}", L);
    acl(3, "-evalsha");
    acl(4, "-evalsha");
    cr_assert_eq(post("/locks/re.free", body, NULL, 0, NULL), 201);
    acl(3, "+evalsha");
    acl(4, "+evalsha");
    cr_assert(h_wait_until(all_ready, NULL, 10000), "masters 3 and 4 back");
    acl(1, "-evalsha");
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true,\"ttl_ms\":30000}", L);
    h_resp r;
    h_http(&C, "POST", "/locks/re.free", body, &r);
    long st = r.status;
    cr_log_info("a re-entry counted by masters 0 and 2 only: %ld %s", st, r.body);
    h_resp_free(&r);
    for (int i = 3; i < 5; i++) {
        char v[256];
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET redlock:re.free");
        cr_assert_str_empty(v, "master %d: the re-entry took a free key (%s)", i, v);
    }
    cr_assert_eq(st, 503, "a re-entry short of a quorum is refused");
    acl(1, "+evalsha");
    cr_assert(h_wait_until(all_ready, NULL, 10000), "master 1 back");
    cr_assert_eq(post("/locks/re.free", NULL, NULL, 0, NULL), 409, "the outer hold stands");
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", L);
    h_http(&C, "DELETE", "/locks/re.free", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_true(json_object_get(r.json, "released")),
              "the failed re-entry counted nothing: one release frees it (%s)", r.body);
    h_resp_free(&r);
}

/* A re-entry sent while masters in [from, to] are frozen past the script's clock window
 * (their copy then runs late and is refused: for them it is lost): the node timeout and
 * 500 ms more; thawed after. */
static long reenter_frozen(const char *body, int from, int to)
{
    for (int i = from; i <= to; i++)
        h_redis_freeze(&C.masters[i]);
    double t0 = h_now_ms();
    h_resp r;
    h_http(&C, "POST", "/locks/re.two", body, &r);
    long st = r.status;
    cr_log_info("a re-entry with masters %d..%d frozen: %ld %s", from, to, st, r.body);
    if (st == 503) {
        cr_assert_str_eq(h_str(&r, "error"), "quorum_unavailable", "%s", r.body);
        cr_assert_eq(h_int(&r, "quorum"), 5, "a re-entry needs every master: %s", r.body);
        cr_assert_eq(h_int(&r, "nodes_ok"), 5 - (to - from + 1), "those that counted it: %s", r.body);
    }
    h_resp_free(&r);
    while (h_now_ms() < t0 + h_node_timeout_ms() + 500) /* past every window of a script sent in the round */
        usleep(20 * 1000);
    for (int i = from; i <= to; i++)
        h_redis_thaw(&C.masters[i]);
    cr_assert(h_wait_until(all_ready, NULL, 10000), "masters %d..%d back", from, to);
    return st;
}

/* The model's found-two-reentries (tests/model) with real masters: the outer hold on all
 * five; re-entry 1 misses masters 3, 4 (frozen), re-entry 2 misses 0, 1.  Granted by a
 * quorum of added holds (the rule before), releasing both re-entries took the outer
 * hold's count on 0, 1 (re-entry 2's release) and 3, 4 (re-entry 1's): a majority, and
 * a competitor was granted while the outer hold was valid.  A re-entry is granted only
 * when every master counted it (DESIGN.md section 12): both are 503 here. */
Test(reentrant, two_reentries_that_each_miss_masters_never_free_the_outer_hold)
{
    h_require_local(&C);
    const char *L = "twoReentries0123456789AB";
    char body[256], rel[128];
    snprintf(body, sizeof body, "{\"lease\":\"%s\",\"reentrant\":true,\"ttl_ms\":30000}", L);
    snprintf(rel, sizeof rel, "{\"lease\":\"%s\"}", L);
    cr_assert_eq(post("/locks/re.two", body, NULL, 0, NULL), 201, "the outer hold, on all five");
    double outer_at = h_now_ms();
    long st1 = reenter_frozen(body, 3, 4);
    long st2 = reenter_frozen(body, 0, 1);
    long rel_st[2] = {0, 0};
    int nrel = (st1 == 201) + (st2 == 201); /* the client releases what it was granted */
    for (int k = 0; k < nrel; k++) {
        h_resp r;
        h_http(&C, "DELETE", "/locks/re.two", rel, &r);
        rel_st[k] = r.status;
        cr_log_info("release of a re-entry: %ld %s", r.status, r.body);
        h_resp_free(&r);
    }
    long comp = post("/locks/re.two", NULL, NULL, 0, NULL);
    cr_assert_lt(h_now_ms() - outer_at, 25000, "within the outer hold's validity");
    cr_assert_neq(comp, 201, "a competitor was granted while the outer hold is valid "
                             "(re-entries %ld, %ld; releases %ld, %ld)", st1, st2, rel_st[0], rel_st[1]);
    cr_assert_eq(comp, 409, "the outer hold stands");
    cr_assert_eq(st1, 503, "a re-entry that masters 3, 4 did not count is refused");
    cr_assert_eq(st2, 503, "a re-entry that masters 0, 1 did not count is refused");
    /* its holds taken back where they landed: one release frees the outer hold */
    h_resp r;
    h_http(&C, "DELETE", "/locks/re.two", rel, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    cr_assert(json_is_true(json_object_get(r.json, "released")), "%s", r.body);
    h_resp_free(&r);
}

/* first: granted while masters 3 and 4 refuse every script (their ACL forbids EVALSHA
 * for a while: they lag, but never restart nor lose anything), so on 0, 1, 2 only; then
 * master 0 restarts empty and 3, 4 answer again: second is what a competitor gets.
 * (Three masters restarted empty at once would be a majority that lost its data: no
 * repair can prove their counters, and they wait for an operator, docs/DESIGN.md §4.) */
static long competitor_after_wipe(const char *flags, const char *first, const char *first_body,
                                  const char *second, const char *second_body)
{
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
    acl(3, "-evalsha");
    acl(4, "-evalsha");
    cr_assert_eq(post(first, first_body, NULL, 0, NULL), 201);
    h_redis_kill(&C.masters[0]);
    h_redis_restart(&C.masters[0], 1);
    acl(3, "+evalsha");
    acl(4, "+evalsha");
    if (!h_wait_until(all_judged, NULL, 10000)) {
        h_resp r;
        h_http(&C, "GET", "/readyz", NULL, &r);
        cr_assert_fail("the service judges the restarted masters: %s", r.body);
    }
    long st = post(second, second_body, NULL, 0, NULL);
    if (st != 201 && flags && h_wait_until(all_ready, NULL, 20000))
        st = post(second, second_body, NULL, 0, NULL); /* the control: repaired, no delay */
    return st;
}

Test(shared_faults, a_reader_on_a_wiped_master_still_keeps_the_writer_out)
{
    long st = competitor_after_wipe(NULL, "/locks/wipe.r?mode=shared&ttl_ms=60000", NULL,
                                    "/locks/wipe.r?ttl_ms=60000", NULL);
    cr_assert_neq(st, 201, "a writer reached a quorum through an empty master");
}

Test(shared_faults, without_quarantine_a_writer_joins_the_reader)
{
    long st = competitor_after_wipe("--quarantine-ms 0", "/locks/wipe.r?mode=shared&ttl_ms=60000",
                                    NULL, "/locks/wipe.r?ttl_ms=60000", NULL);
    cr_assert_eq(st, 201, "expected the unsafe grant without a quarantine (the control)");
}

Test(shared_faults, a_permit_on_a_wiped_master_is_not_granted_twice)
{
    long st = competitor_after_wipe(NULL, "/semaphores/wipe.s?permits=1&ttl_ms=60000", NULL,
                                    "/semaphores/wipe.s?permits=1&ttl_ms=60000", NULL);
    cr_assert_neq(st, 201, "a second permit of one reached a quorum through an empty master");
}

Test(shared_faults, without_quarantine_a_second_permit_of_one_is_granted)
{
    long st = competitor_after_wipe("--quarantine-ms 0", "/semaphores/wipe.s?permits=1&ttl_ms=60000",
                                    NULL, "/semaphores/wipe.s?permits=1&ttl_ms=60000", NULL);
    cr_assert_eq(st, 201, "expected the unsafe grant without a quarantine (the control)");
}

Test(shared, a_multi_name_lock_takes_modes_per_name)
{
    h_resp r;
    h_http(&C, "POST", "/locks",
           "{\"names\":[\"mm.a\",\"mm.b\"],\"modes\":{\"mm.a\":\"shared\"},\"ttl_ms\":10000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    json_t *modes = json_object_get(r.json, "modes");
    cr_assert_str_eq(json_string_value(json_object_get(modes, "mm.a")), "shared", "%s", r.body);
    cr_assert_str_eq(json_string_value(json_object_get(modes, "mm.b")), "exclusive", "%s", r.body);
    char body[1024];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
    h_resp_free(&r);
    char rl[200];
    cr_assert_eq(post("/locks/mm.a?mode=shared&ttl_ms=10000", NULL, rl, sizeof rl, NULL), 201,
                 "another reader joins the set's shared name");
    cr_assert_eq(post("/locks/mm.a", NULL, NULL, 0, NULL), 409, "no writer on it");
    cr_assert_eq(post("/locks/mm.b?mode=shared", NULL, NULL, 0, NULL), 409, "the exclusive name keeps readers out");
    h_http(&C, "GET", "/locks/mm.a", NULL, &r);
    cr_assert_eq(h_int(&r, "readers"), 2, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "DELETE", "/locks", body, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/locks/mm.a", NULL, &r);
    cr_assert_eq(h_int(&r, "readers"), 1, "the set's reader entry went with it: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(post("/locks/mm.b", NULL, NULL, 0, NULL), 201, "the exclusive name is free");
    cr_assert_eq(del("/locks/mm.a", rl), 200);
    cr_assert_eq(post("/locks/mm.a", NULL, NULL, 0, NULL), 201, "the last reader left");
    static const char *const bad[] = {
        "{\"names\":[\"mm.c\"],\"modes\":{\"mm.d\":\"shared\"}}",
        "{\"names\":[\"mm.c\"],\"modes\":{\"mm.c\":\"read\"}}",
        "{\"names\":[\"mm.c\"],\"modes\":[\"shared\"]}",
        "{\"names\":[\"mm.c\"],\"mode\":\"shared\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h_http(&C, "POST", "/locks", bad[i], &r);
        cr_assert_eq(r.status, 400, "%s: %s", bad[i], r.body);
        cr_assert_str_eq(h_str(&r, "error"), "invalid_mode", "%s: %s", bad[i], r.body);
        h_resp_free(&r);
    }
}

Test(shared, readers_and_permits_need_a_quorum_and_two_instances_agree)
{
    h_require_local(&C);
    h_service other;
    h_service_start(&C, &other, NULL);
    void *curl = NULL;
    h_resp r;
    /* A reader here keeps a writer out there, and a permit there counts here. */
    cr_assert_eq(post("/locks/two.a?mode=shared&ttl_ms=10000", NULL, NULL, 0, NULL), 201);
    h_http_to(other.url, &curl, "POST", "/locks/two.a", NULL, &r);
    cr_assert_eq(r.status, 409, "a writer on the other instance: %s", r.body);
    h_resp_free(&r);
    h_http_to(other.url, &curl, "POST", "/locks/two.a?mode=shared", NULL, &r);
    cr_assert_eq(r.status, 201, "a reader on the other instance: %s", r.body);
    h_resp_free(&r);
    h_http_to(other.url, &curl, "POST", "/semaphores/two.s?permits=1&ttl_ms=10000", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    cr_assert_eq(post("/semaphores/two.s?permits=1", NULL, NULL, 0, NULL), 409, "its one permit is taken");
    curl_easy_cleanup(curl);
    h_service_stop(&other);
    /* Three masters frozen: no quorum for either, 503 within the bound. */
    for (int i = 0; i < 3; i++)
        h_redis_freeze(&C.masters[i]);
    h_http(&C, "POST", "/locks/two.b?mode=shared", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "quorum_unavailable");
    h_resp_free(&r);
    h_http(&C, "POST", "/semaphores/two.t?permits=2", NULL, &r);
    cr_assert_eq(r.status, 503, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "quorum_unavailable");
    h_resp_free(&r);
    for (int i = 0; i < 3; i++)
        h_redis_thaw(&C.masters[i]);
}
