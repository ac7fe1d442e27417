/* test_attack_sem.c -- a hostile review of the counted semaphore record ("<N>c"), the
 * batched permit operations and the reply arena (docs/DESIGN.md section 12, "The
 * counted record" and after it).  Real masters, the real service, real faults.
 *
 * - Two numbers of permits (2 and 3) contend for one name, acquiring, extending and
 *   releasing in the same batches, beside a permit of a build before the count (the
 *   legacy record "2" and a slot without a member, written with redis commands on three
 *   of five masters), while masters freeze (one, then two at once), one is FLUSHALLed
 *   and one restarts empty:
 *   at no instant are two numbers of permits valid together, nor more than N of N,
 *   and no two grants share a token.
 * - A permit whose slot key is a foreign hash (WRONGTYPE) fails in the same batches as
 *   other clients' exclusive locks: they are granted and released, the permit gets a
 *   JSON error (503 quorum_unavailable, which misnames the cause), the service stays up.
 *   A count key of the wrong type on one master: the permit lives on the others
 *   (grant, extension, release); on that master the failed grant's writes before the
 *   ZADD stay (the slot key and "<N>c", no member), as a script error undoes nothing.
 * - One client lease POSTed by many clients at once (retries of one permit), a master
 *   frozen for some rounds: every grant names the same slot, and no master holds the
 *   lease in two slots.  FOUND (liveness): a lease left in two slots on 2 + 2 masters
 *   (master 5 down) is never granted to its own retry while both keys live.
 * - A slot key deleted while its member stays: not found by extension or release, no
 *   obstacle to the record's removal with the last live permit.
 * - The reply arena: listings whose replies are large (1,000 names of 170 bytes from each
 *   master) read while masters are killed and restarted, and while one is frozen past
 *   the node timeout (dropped with a reply part read); the service answers and stays up
 *   (run it under SANITIZER=address,undefined). */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static h_cluster C;
static h_service S2; /* a second instance, where a test starts one */

static void teardown(void)
{
    if (S2.pid > 0)
        h_service_stop(&S2);
    S2.pid = 0;
    if (!C.external)
        for (int i = 0; i < C.n; i++)
            if (C.masters[i].pid > 0)
                h_redis_thaw(&C.masters[i]);
    h_cluster_stop(&C);
}

static void setup5(void) { h_cluster_start(&C, 5, 0, NULL); }
static void setup3(void) { h_cluster_start(&C, 3, 0, NULL); }

TestSuite(attack_sem, .fini = teardown, .timeout = 120);

/* ---- two numbers of permits, a legacy permit, faults ---- */

#define MIX_THREADS 8
#define MIX_MAX 4096

typedef struct mix_hold {
    double from, to;
    long long token;
    int permits, slot;
} mix_hold;

static pthread_mutex_t mix_mu = PTHREAD_MUTEX_INITIALIZER;
static mix_hold mix[MIX_MAX];
static size_t nmix;
static volatile int mix_stop;
static long mix_mismatch, mix_extended, mix_ext_failed;

static void mix_add(mix_hold h)
{
    pthread_mutex_lock(&mix_mu);
    if (nmix < MIX_MAX)
        mix[nmix++] = h;
    pthread_mutex_unlock(&mix_mu);
}

static void *mix_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    int permits = (seed % 2) ? 2 : 3;
    const char *url = seed % 4 < 2 ? C.svc.url : S2.url; /* both numbers on both instances */
    char body[1024];
    snprintf(body, sizeof body, "{\"permits\":%d,\"ttl_ms\":700,\"wait_ms\":200}", permits);
    void *curl = NULL;
    while (!mix_stop) {
        /* the two numbers take turns, 3 s each: a number stops taking permits in the
         * second half of its own turn (its last permits then go: ttl 700 ms, one
         * extension), so that the other, which tries all the time, gets the name */
        long long ph = (long long)h_now_ms() % 6000;
        if ((ph < 3000 ? 2 : 3) == permits && ph % 3000 >= 1500) {
            usleep(20 * 1000);
            continue;
        }
        h_resp r;
        double sent = h_now_ms();
        h_http_to(url, &curl, "POST", "/semaphores/at.mix", body, &r);
        double got = h_now_ms();
        if (r.status != 201) {
            if (r.status == 409 && strcmp(h_str(&r, "error"), "permits_mismatch") == 0)
                __atomic_add_fetch(&mix_mismatch, 1, __ATOMIC_RELAXED);
            h_resp_free(&r);
            usleep(2000);
            continue;
        }
        double until = sent + (double)h_int(&r, "validity_ms");
        long long token = h_int(&r, "fencing_token");
        int slot = (int)h_int(&r, "slot");
        cr_expect_eq(h_int(&r, "permits"), permits, "%s", r.body);
        char lb[1024];
        snprintf(lb, sizeof lb, "{\"lease\":\"%s\",\"ttl_ms\":700}", h_str(&r, "lease"));
        h_resp_free(&r);
        usleep((useconds_t)(rand_r(&seed) % 30) * 1000);
        if (rand_r(&seed) % 2) {
            /* an extension: valid to its own send + validity when it answers 200; a
             * failed one leaves the first validity */
            double psent = h_now_ms();
            h_http_to(url, &curl, "PATCH", "/semaphores/at.mix", lb, &r);
            if (r.status == 200 && psent < until) {
                double u2 = psent + (double)h_int(&r, "validity_ms");
                if (u2 > until)
                    until = u2;
                __atomic_add_fetch(&mix_extended, 1, __ATOMIC_RELAXED);
            } else {
                __atomic_add_fetch(&mix_ext_failed, 1, __ATOMIC_RELAXED);
            }
            h_resp_free(&r);
            usleep((useconds_t)(rand_r(&seed) % 30) * 1000);
        }
        double rel = h_now_ms();
        if (rand_r(&seed) % 4) {
            h_http_to(url, &curl, "DELETE", "/semaphores/at.mix", lb, &r);
            h_resp_free(&r);
        } else {
            rel = until; /* left to expire */
        }
        mix_add((mix_hold){got, rel < until ? rel : until, token, permits, slot});
    }
    curl_easy_cleanup(curl);
    return NULL;
}

/* a redis command (a format and its arguments) on masters from .. to - 1 */
#define redis_all(from, to, ...)                                                     \
    do {                                                                             \
        for (int i_ = (from); i_ < (to); i_++)                                       \
            h_redis_cmd(&C.masters[i_], NULL, 0, __VA_ARGS__);                       \
    } while (0)

Test(attack_sem, two_numbers_of_permits_and_a_legacy_permit_never_overlap_under_faults, .init = setup5)
{
    h_require_local(&C);
    nmix = 0;
    mix_stop = 0;
    h_service_start(&C, &S2, NULL);
    /* A build before the count holds slot 0 of a 2-permit semaphore on masters 0..2 (a
     * quorum), 1.5 s: its record "2", its slot, no member of the count. */
    double seeded_from = h_now_ms();
    redis_all(0, 3, "SET redlock:#sem:at.mix 2 PX 1500");
    redis_all(0, 3, "SET redlock:#sem:at.mix#0 oldBuildLease00000000001.t PX 1500");
    double seeded_to = seeded_from + 1500 - 20; /* its validity: ttl less a drift */
    mix_add((mix_hold){h_now_ms(), seeded_to, -1, 2, 0});

    pthread_t th[MIX_THREADS];
    for (int i = 0; i < MIX_THREADS; i++)
        pthread_create(&th[i], NULL, mix_main, (void *)(uintptr_t)(i + 1));
    /* faults off the seeded masters while the old permit lives (they do not know it) */
    usleep(300 * 1000);
    h_redis_freeze(&C.masters[3]);
    usleep(300 * 1000);
    redis_all(4, 5, "FLUSHALL");
    usleep(600 * 1000);
    h_redis_thaw(&C.masters[3]);
    usleep(800 * 1000); /* the old permit is gone (1.5 s) */
    h_redis_freeze(&C.masters[0]);
    usleep(500 * 1000);
    h_redis_kill(&C.masters[2]);
    h_redis_restart(&C.masters[2], 1);
    usleep(500 * 1000);
    h_redis_thaw(&C.masters[0]);
    h_redis_freeze(&C.masters[1]);
    usleep(600 * 1000);
    h_redis_thaw(&C.masters[1]);
    /* two masters frozen at once (a third wipe would leave no quorum to prove the
     * wiped ones: they would stay out for --quarantine-ms, by design) */
    h_redis_freeze(&C.masters[3]);
    h_redis_freeze(&C.masters[4]);
    usleep(400 * 1000);
    h_redis_thaw(&C.masters[3]);
    h_redis_thaw(&C.masters[4]);
    usleep(5500 * 1000);
    mix_stop = 1;
    for (int i = 0; i < MIX_THREADS; i++)
        pthread_join(th[i], NULL);

    size_t n2 = 0, n3 = 0;
    for (size_t i = 1; i < nmix; i++)
        *(mix[i].permits == 2 ? &n2 : &n3) += 1;
    fprintf(stderr,
            "attack_sem: %zu grants (%zu of 2 permits, %zu of 3), %ld permits_mismatch, %ld extended, "
            "%ld extensions failed\n",
            nmix - 1, n2, n3, mix_mismatch, mix_extended, mix_ext_failed);
    if (getenv("ATTACK_DUMP"))
        for (int m = 0; m < C.n; m++) {
            char v[64] = "", st[32] = "";
            long long rem = -1;
            h_redis_cmd(&C.masters[m], v, sizeof v, "GET redlock:#sem:at.mix");
            h_master_state(&C, NULL, m, st, sizeof st, &rem);
            fprintf(stderr, "  master %d: record '%s' pttl %lld, zcard %lld, state %s (%lld ms)\n", m, v,
                    h_redis_cmd(&C.masters[m], NULL, 0, "PTTL redlock:#sem:at.mix"),
                    h_redis_cmd(&C.masters[m], NULL, 0, "ZCARD redlock:#sem:at.mix#h"), st, rem);
        }
    if (getenv("ATTACK_DUMP"))
        for (size_t i = 0; i < nmix; i++)
            fprintf(stderr, "  hold N=%d slot %d %.0f..%.0f\n", mix[i].permits, mix[i].slot, mix[i].from - seeded_from,
                    mix[i].to - seeded_from);
    cr_assert(n2 >= 5 && n3 >= 5, "enough permits of each number granted to judge (%zu, %zu)", n2, n3);
    cr_assert_gt(mix_mismatch, 0, "the two numbers contended");
    /* at the instant each hold began: those valid then share its number, at most N */
    for (size_t i = 0; i < nmix; i++) {
        int at = 0;
        for (size_t j = 0; j < nmix; j++) {
            if (!(mix[j].from <= mix[i].from && mix[i].from < mix[j].to))
                continue;
            at++;
            cr_assert_eq(mix[j].permits, mix[i].permits,
                         "a %d-permit hold (token %lld, slot %d, %.0f..%.0f) and a %d-permit hold (token %lld, "
                         "slot %d, %.0f..%.0f) valid together",
                         mix[i].permits, mix[i].token, mix[i].slot, mix[i].from, mix[i].to, mix[j].permits,
                         mix[j].token, mix[j].slot, mix[j].from, mix[j].to);
            cr_assert_neq(mix[j].slot == mix[i].slot && j != i, 1, "slot %d held twice at once (tokens %lld, %lld)",
                          mix[i].slot, mix[i].token, mix[j].token);
        }
        cr_assert_leq(at, mix[i].permits, "%d holders at once of a %d-permit semaphore", at, mix[i].permits);
    }
    for (size_t i = 1; i < nmix; i++) {
        cr_assert_eq(mix[i].token % 1024, mix[i].slot, "token %lld names slot %d", mix[i].token, mix[i].slot);
        for (size_t j = i + 1; j < nmix; j++)
            cr_assert_neq(mix[i].token, mix[j].token, "two grants share token %lld", mix[i].token);
    }
    h_resp r;
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "the service is up: %s", r.body);
    h_resp_free(&r);
}

/* ---- a permit's failure in a batch ---- */

static volatile int lk_stop;
static long lk_bad;

static void *lock_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    void *curl = NULL;
    char path[64];
    snprintf(path, sizeof path, "/locks/at.lk%d", id);
    while (!lk_stop) {
        h_resp r;
        h_http_to(C.svc.url, &curl, "POST", path, "{\"ttl_ms\":5000}", &r);
        if (r.status != 201) {
            fprintf(stderr, "attack_sem: lock %s: %ld %s\n", path, r.status, r.body);
            __atomic_add_fetch(&lk_bad, 1, __ATOMIC_RELAXED);
            h_resp_free(&r);
            continue;
        }
        char lb[512];
        snprintf(lb, sizeof lb, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
        h_resp_free(&r);
        h_http_to(C.svc.url, &curl, "DELETE", path, lb, &r);
        if (r.status != 200) {
            fprintf(stderr, "attack_sem: release %s: %ld %s\n", path, r.status, r.body);
            __atomic_add_fetch(&lk_bad, 1, __ATOMIC_RELAXED);
        }
        h_resp_free(&r);
    }
    curl_easy_cleanup(curl);
    return NULL;
}

Test(attack_sem, a_permit_failing_wrongtype_in_a_batch_leaves_the_other_locks_alone, .init = setup3)
{
    h_require_local(&C);
    /* every master: slot 0 of at.wt (its only slot) is a hash */
    redis_all(0, C.n, "HSET redlock:#sem:at.wt#0 f v");
    lk_stop = 0;
    lk_bad = 0;
    pthread_t th[6];
    for (int i = 0; i < 6; i++)
        pthread_create(&th[i], NULL, lock_main, (void *)(uintptr_t)i);
    void *curl = NULL;
    int fails = 0;
    long last = 0;
    char last_body[1024] = "";
    for (int k = 0; k < 40; k++) {
        h_resp r;
        h_http_to(C.svc.url, &curl, "POST", "/semaphores/at.wt", "{\"permits\":1,\"ttl_ms\":5000,\"wait_ms\":0}", &r);
        cr_assert_neq(r.status, 201, "a permit granted over a hash: %s", r.body);
        cr_assert_not_null(r.json, "a JSON answer: %ld %s", r.status, r.body);
        cr_assert(strlen(h_str(&r, "error")) > 0, "an error code: %ld %s", r.status, r.body);
        fails++;
        last = r.status;
        snprintf(last_body, sizeof last_body, "%.900s", r.body);
        h_resp_free(&r);
    }
    lk_stop = 1;
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "attack_sem: the permit over a hash: %d failures, the last %ld %s\n", fails, last, last_body);
    cr_assert_eq(lk_bad, 0, "%ld lock operations failed beside the failing permit", lk_bad);
    /* the foreign key is untouched */
    char v[64];
    for (int i = 0; i < C.n; i++) {
        h_redis_cmd(&C.masters[i], v, sizeof v, "TYPE redlock:#sem:at.wt#0");
        cr_assert_str_eq(v, "hash", "master %d", i);
    }

    /* the count key a string on master 0: the permit lives on masters 1 and 2 */
    h_redis_cmd(&C.masters[0], NULL, 0, "SET redlock:#sem:at.cnt#h foreign");
    h_resp r;
    h_http_to(C.svc.url, &curl, "POST", "/semaphores/at.cnt", "{\"permits\":2,\"ttl_ms\":5000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    char lb[512];
    snprintf(lb, sizeof lb, "{\"lease\":\"%s\",\"ttl_ms\":6000}", h_str(&r, "lease"));
    int slot = (int)h_int(&r, "slot");
    h_resp_free(&r);
    h_http_to(C.svc.url, &curl, "PATCH", "/semaphores/at.cnt", lb, &r);
    cr_assert_eq(r.status, 200, "the extension: %s", r.body);
    h_resp_free(&r);
    h_http_to(C.svc.url, &curl, "DELETE", "/semaphores/at.cnt", lb, &r);
    cr_assert_eq(r.status, 200, "the release: %s", r.body);
    h_resp_free(&r);
    /* what the failed grant left on master 0: a script error does not undo its writes */
    char key[80], rec[64] = "", slotv[128] = "";
    snprintf(key, sizeof key, "redlock:#sem:at.cnt#%d", slot);
    h_redis_cmd(&C.masters[0], rec, sizeof rec, "GET redlock:#sem:at.cnt");
    h_redis_cmd(&C.masters[0], slotv, sizeof slotv, "GET %s", key);
    fprintf(stderr, "attack_sem: master 0 after the release: record '%s', slot %d '%s' (pttl %lld)\n", rec,
            slot, slotv, h_redis_cmd(&C.masters[0], NULL, 0, "PTTL %s", key));
    h_http_to(C.svc.url, &curl, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "the service is up: %s", r.body);
    h_resp_free(&r);
    curl_easy_cleanup(curl);
}

/* ---- one lease, many POSTs ---- */

#define LEASE "attackSharedLease0000000001"
#define RE_THREADS 8

static volatile int re_go;
static int re_slot[RE_THREADS];
static long re_status[RE_THREADS];

static void *re_main(void *arg)
{
    int id = (int)(uintptr_t)arg;
    void *curl = NULL;
    while (!re_go)
        usleep(100);
    h_resp r;
    /* half through each instance: one instance keeps one attempt per name at a time */
    h_http_to(id % 2 ? S2.url : C.svc.url, &curl, "POST", "/semaphores/at.re",
              "{\"permits\":6,\"ttl_ms\":4000,\"wait_ms\":5000,\"lease\":\"" LEASE "\"}", &r);
    re_status[id] = r.status;
    if (r.status != 201)
        fprintf(stderr, "attack_sem: POST %d: %ld %.200s\n", id, r.status, r.body);
    re_slot[id] = r.status == 201 ? (int)h_int(&r, "slot") : -1;
    h_resp_free(&r);
    curl_easy_cleanup(curl);
    return NULL;
}

/* how many slots of at.re hold LEASE on master m */
static int lease_slots(int m)
{
    int n = 0;
    for (int i = 0; i < 6; i++) {
        char v[256] = "";
        h_redis_cmd(&C.masters[m], v, sizeof v, "GET redlock:#sem:at.re#%d", i);
        n += strncmp(v, LEASE, strlen(LEASE)) == 0;
    }
    return n;
}

static int at_most_one_slot_each(void *arg)
{
    (void)arg;
    for (int m = 0; m < C.n; m++)
        if (!C.masters[m].pid || lease_slots(m) > 1)
            return 0;
    return 1;
}

/* Rounds of RE_THREADS POSTs of LEASE at once, half through each instance, master 4
 * frozen in rounds [freeze_from, freeze_to): every grant names one slot, and no master
 * keeps the lease in two slots.  Returns the rounds in which no POST was granted. */
static int lease_rounds(int rounds, int freeze_from, int freeze_to)
{
    int ungranted = 0;
    for (int round = 0; round < rounds; round++) {
        if (round == freeze_from)
            h_redis_freeze(&C.masters[4]);
        if (round == freeze_to)
            h_redis_thaw(&C.masters[4]);
        int frozen = round >= freeze_from && round < freeze_to;
        re_go = 0;
        pthread_t th[RE_THREADS];
        for (int i = 0; i < RE_THREADS; i++)
            pthread_create(&th[i], NULL, re_main, (void *)(uintptr_t)i);
        usleep(50 * 1000);
        re_go = 1;
        for (int i = 0; i < RE_THREADS; i++)
            pthread_join(th[i], NULL);
        int slot = -1, granted = 0;
        for (int i = 0; i < RE_THREADS; i++) {
            if (re_status[i] != 201)
                continue;
            granted++;
            if (slot < 0)
                slot = re_slot[i];
            cr_assert_eq(re_slot[i], slot, "round %d: one lease granted slots %d and %d", round, slot, re_slot[i]);
        }
        ungranted += granted == 0;
        if (!frozen && round != freeze_to)
            cr_assert(h_wait_until(at_most_one_slot_each, NULL, 5000),
                      "round %d: a master holds the lease in two slots", round);
        h_resp r;
        h_http(&C, "DELETE", "/semaphores/at.re", "{\"lease\":\"" LEASE "\"}", &r);
        cr_assert(r.status == 200 || (!granted && r.status == 404), "round %d: %s", round, r.body);
        h_resp_free(&r);
        fprintf(stderr, "attack_sem: round %d%s: %d of %d POSTs granted slot %d\n", round,
                frozen ? " (master 4 frozen)" : "", granted, RE_THREADS, slot);
        if (frozen || round == freeze_to)
            usleep(4200 * 1000); /* what the frozen master may still hold (ttl 4 s) is gone */
    }
    return ungranted;
}

Test(attack_sem, one_lease_posted_at_once_holds_one_slot, .init = setup5)
{
    h_require_local(&C);
    h_service_start(&C, &S2, NULL);
    int ungranted = lease_rounds(6, 2, 4);
    /* liveness: FOUND_a_lease_split_over_two_slots_with_a_master_down_is_granted */
    fprintf(stderr, "attack_sem: %d of 6 rounds granted nothing\n", ungranted);
}

/* ---- the reply arena: many names listed while a master dies ---- */

static volatile int ls_stop;
static long ls_ok, ls_503, ls_bad;

static void *list_main(void *arg)
{
    (void)arg;
    void *curl = NULL;
    while (!ls_stop) {
        h_resp r;
        h_http_to(C.svc.url, &curl, "GET", "/locks?prefix=at.big.&limit=100", NULL, &r);
        if (r.status == 200 && json_array_size(json_object_get(r.json, "locks")) == 100)
            __atomic_add_fetch(&ls_ok, 1, __ATOMIC_RELAXED);
        else if (r.status == 503)
            __atomic_add_fetch(&ls_503, 1, __ATOMIC_RELAXED);
        else {
            fprintf(stderr, "attack_sem: listing: %ld %.200s\n", r.status, r.body);
            __atomic_add_fetch(&ls_bad, 1, __ATOMIC_RELAXED);
        }
        h_resp_free(&r);
    }
    curl_easy_cleanup(curl);
    return NULL;
}

static void seed_big(int m)
{
    long long n = h_redis_cmd(&C.masters[m], NULL, 0, "EVAL %s 0",
                              "for i = 1, 20000 do redis.call('SET', 'redlock:at.big.' .. string.rep('x', 150) .. i, "
                              "'someLease0000000000000001.t', 'PX', 60000) end return redis.call('DBSIZE')");
    cr_assert_geq(n, 20000, "master %d seeded (%lld keys)", m, n);
}

Test(attack_sem, large_replies_read_while_a_master_is_killed, .init = setup3)
{
    h_require_local(&C);
    /* 20,000 lock keys with long names on every master: a listing reads large replies */
    for (int m = 0; m < C.n; m++)
        seed_big(m);
    ls_stop = 0;
    ls_ok = ls_503 = ls_bad = 0;
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, list_main, NULL);
    for (int k = 0; k < 4; k++) {
        usleep(300 * 1000);
        h_redis_kill(&C.masters[k % C.n]);
        usleep(200 * 1000);
        h_redis_restart(&C.masters[k % C.n], 0);
        seed_big(k % C.n); /* no AOF: it came back empty */
    }
    /* frozen past the node timeout while it writes a large reply: the service drops the
     * connection with the reply part read (the arena's extra blocks go with it) */
    for (int k = 0; k < 3; k++) {
        usleep(150 * 1000);
        h_redis_freeze(&C.masters[2]);
        usleep((useconds_t)(h_node_timeout_ms() + 300) * 1000);
        h_redis_thaw(&C.masters[2]);
    }
    usleep(500 * 1000);
    ls_stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    fprintf(stderr, "attack_sem: %ld listings of 100 names, %ld 503, %ld odd\n", ls_ok, ls_503, ls_bad);
    cr_assert_gt(ls_ok, 0);
    cr_assert_eq(ls_bad, 0);
    h_resp r;
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "the service is up: %s", r.body);
    h_resp_free(&r);
}

/* ---- a slot key gone while its member stays ---- */

static int record_gone(void *arg)
{
    (void)arg;
    for (int m = 0; m < C.n; m++)
        if (h_redis_cmd(&C.masters[m], NULL, 0, "EXISTS redlock:#sem:at.gone") != 0)
            return 0;
    return 1;
}

static int counted_on_all(void *arg)
{
    long long want = *(long long *)arg;
    for (int m = 0; m < C.n; m++)
        if (h_redis_cmd(&C.masters[m], NULL, 0, "ZCARD redlock:#sem:at.gone#h") != want)
            return 0;
    return 1;
}

Test(attack_sem, a_permit_whose_slot_key_went_is_not_found_and_does_not_hold_the_record, .init = setup3)
{
    h_resp r;
    char l1[200], l2[200];
    int s1;
    h_http(&C, "POST", "/semaphores/at.gone", "{\"permits\":2,\"ttl_ms\":20000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    snprintf(l1, sizeof l1, "{\"lease\":\"%s\",\"ttl_ms\":20000}", h_str(&r, "lease"));
    s1 = (int)h_int(&r, "slot");
    h_resp_free(&r);
    h_http(&C, "POST", "/semaphores/at.gone", "{\"permits\":2,\"ttl_ms\":20000}", &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    snprintf(l2, sizeof l2, "{\"lease\":\"%s\"}", h_str(&r, "lease"));
    h_resp_free(&r);
    long long two = 2;
    cr_assert(h_wait_until(counted_on_all, &two, 10000), "both counted on every master");
    /* permit 1's key goes (an operator, a lost write), its member stays */
    redis_all(0, C.n, "DEL redlock:#sem:at.gone#%d", s1);
    h_http(&C, "PATCH", "/semaphores/at.gone", l1, &r);
    cr_assert_eq(r.status, 404, "an extension of a slot whose key went: %s", r.body);
    h_resp_free(&r);
    h_http(&C, "DELETE", "/semaphores/at.gone", l1, &r);
    cr_assert_eq(r.status, 404, "a release of a slot whose key went: %s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "lease_not_found", "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "POST", "/semaphores/at.gone", "{\"permits\":3,\"wait_ms\":0}", &r);
    cr_assert_eq(r.status, 409, "permit 2 lives: %s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "permits_mismatch", "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "GET", "/semaphores/at.gone", NULL, &r);
    cr_assert_eq(h_int(&r, "held"), 1, "%s", r.body);
    h_resp_free(&r);
    /* the last live permit goes: the record with it, the stale member no obstacle */
    h_http(&C, "DELETE", "/semaphores/at.gone", l2, &r);
    cr_assert_eq(r.status, 200, "%s", r.body);
    h_resp_free(&r);
    cr_assert(h_wait_until(record_gone, NULL, 10000), "the record goes with the last live permit");
    h_http(&C, "POST", "/semaphores/at.gone", "{\"permits\":3,\"ttl_ms\":5000}", &r);
    cr_assert_eq(r.status, 201, "another N once none is held: %s", r.body);
    h_resp_free(&r);
}

/* FOUND (liveness, not safety; before this stop too: 7b34626 fails it the same way with
 * the legacy record, ATTACK_LEGACY=1).  The race of the test above (two instances
 * draw different first slots for one lease; with master 4 down the four others split
 * 2/2) twice ended with all 8 POSTs answered 409 lock_contended ("concurrent attempts
 * kept splitting the votes") under ASan on a loaded machine, in the round master 4 had
 * just been frozen; not reproduced on demand since.  Here the state it leaves, written
 * directly: the lease holds
 * slot 1 on masters 0 and 1 and slot 4 on masters 2 and 3 (each instance's first
 * attempt granted on two, the other refused "#mine:" there), master 4 down.  A POST of
 * the lease (its retry) is told "#mine: 1" by two masters and "#mine: 4" by two: it
 * goes to 1, adopts it on 0 and 1 and is told "#mine: 4" on 2 and 3, goes to 4, and so
 * on: never a quorum while both keys live.  The fix proposed (report): a retry that
 * meets its lease in several slots keeps the one named by most masters, ties to the
 * lowest, and releases the others of its lease on the masters it reaches. */
/* Kept, disabled, as the record of the defect (it fails on every build so far): the
 * lead's note of stop 32 says why no fix was taken yet (dropping the lease's other slot
 * where it is met is unsafe while the silent master may hold that slot for it, a valid
 * permit).  To run it, remove `.disabled`. */
Test(attack_sem, FOUND_a_lease_split_over_two_slots_with_a_master_down_is_granted, .init = setup5, .disabled = true)
{
    h_require_local(&C);
    h_redis_freeze(&C.masters[4]);
    for (int m = 0; m < 4; m++) {
        int slot = m < 2 ? 1 : 4;
        /* ATTACK_LEGACY set: the record a build before the count writes (to run this
         * against one: REDLOCKD_BIN=<its redlockd>) */
        h_redis_cmd(&C.masters[m], NULL, 0, "SET redlock:#sem:at.split %s PX 20000",
                    getenv("ATTACK_LEGACY") ? "6" : "6c");
        h_redis_cmd(&C.masters[m], NULL, 0, "SET redlock:#sem:at.split#%d " LEASE ".a PX 20000", slot);
        h_redis_cmd(&C.masters[m], NULL, 0, "ZADD redlock:#sem:at.split#h %lld %d",
                    (long long)h_redis_cmd(&C.masters[m], NULL, 0, "EVAL %s 0",
                                           "local t = redis.call('TIME') return t[1] * 1000 + 20000") ,
                    slot);
        h_redis_cmd(&C.masters[m], NULL, 0, "PEXPIRE redlock:#sem:at.split#h 20000");
    }
    h_resp r;
    double t0 = h_now_ms();
    h_http(&C, "POST", "/semaphores/at.split", "{\"permits\":6,\"ttl_ms\":20000,\"wait_ms\":3000,\"lease\":\"" LEASE "\"}",
           &r);
    fprintf(stderr, "attack_sem: the split lease's POST: %ld after %.0f ms: %s\n", r.status, h_now_ms() - t0, r.body);
    for (int m = 0; m < 4; m++) {
        char v1[128] = "", v4[128] = "";
        h_redis_cmd(&C.masters[m], v1, sizeof v1, "GET redlock:#sem:at.split#1");
        h_redis_cmd(&C.masters[m], v4, sizeof v4, "GET redlock:#sem:at.split#4");
        fprintf(stderr, "  master %d: slot 1 '%s', slot 4 '%s'\n", m, v1, v4);
    }
    long st = r.status;
    h_resp_free(&r);
    h_redis_thaw(&C.masters[4]);
    cr_assert_eq(st, 201, "the lease's own retry is not granted while it holds two slots on 2 + 2 masters");
}
