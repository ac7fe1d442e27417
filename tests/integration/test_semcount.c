/* test_semcount.c -- a permit's release decides from the count of held slots, not from
 * a look at every slot, under a record its own build made ("<N>c"), and keeps the look
 * at every slot under a record of a build before it ("<N>"): docs/DESIGN.md section 12,
 * "The count of held slots".  Five real masters and the real service.
 *
 * - A 1024-permit semaphore: one permit's release reads a handful of keys on each
 *   master (INFO stats keyspace_hits + keyspace_misses, commandstats' exists), not the
 *   1024 slots (1,024 keys in two EXISTS before).
 * - Two permits under the record "2c" (2 in every answer, not "2c"): the record
 *   stays while one is held, goes with the last.
 * - A record "4" with a slot written as a build before the count writes it (no member
 *   of the count): a release through the service keeps the record, and its value, while
 *   that slot lives; another number of permits is refused; once the slot is gone the
 *   record goes with the last permit and a new N is granted, under "<N>c". */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static h_cluster C;

static void setup(void) { h_cluster_start(&C, 5, 0, NULL); }
static void teardown(void) { h_cluster_stop(&C); }

TestSuite(semcount, .init = setup, .fini = teardown, .timeout = 120);

static long call(const char *method, const char *path, const char *body, h_resp *out)
{
    return h_call(&C, method, path, body, out);
}

static long del_lease(const char *path, const char *lease)
{
    char body[512];
    snprintf(body, sizeof body, "{\"lease\":\"%s\"}", lease);
    return call("DELETE", path, body, NULL);
}

/* The integer after "<field>" (e.g. "keyspace_misses:" or "calls=") in the line of
 * INFO section sec that starts with line (NULL: any line); 0 if absent. */
static long long info_num(int m, const char *sec, const char *line, const char *field)
{
    static char buf[65536];
    h_redis_cmd(&C.masters[m], buf, sizeof buf, "INFO %s", sec);
    const char *p = buf;
    if (line) {
        p = strstr(buf, line);
        if (!p)
            return 0;
    }
    p = strstr(p, field);
    return p ? strtoll(p + strlen(field), NULL, 10) : 0;
}

typedef struct on_all {
    const char *verb, *key; /* a command answering an integer */
    long long want;
} on_all;

static int all_say(void *arg)
{
    on_all *a = arg;
    for (int i = 0; i < C.n; i++)
        if (h_redis_cmd(&C.masters[i], NULL, 0, "%s %s", a->verb, a->key) != a->want)
            return 0;
    return 1;
}

static void wait_all(const char *verb, const char *key, long long want, const char *what)
{
    on_all a = {verb, key, want};
    cr_assert(h_wait_until(all_say, &a, 10000), "%s (%s %s != %lld on some master)", what, verb, key, want);
}

static void value_on_all(const char *key, const char *want)
{
    for (int i = 0; i < C.n; i++) {
        char v[64];
        h_redis_cmd(&C.masters[i], v, sizeof v, "GET %s", key);
        cr_assert_str_eq(v, want, "master %d: %s is '%s'", i, key, v);
    }
}

Test(semcount, a_permits_release_does_not_read_every_slot)
{
    h_resp r;
    cr_assert_eq(call("POST", "/semaphores/sc.big?permits=1024&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    char lease[200];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    /* every master has the grant (the answer came at a quorum) */
    wait_all("ZCARD", "redlock:#sem:sc.big#h", 1, "the permit counted on every master");
    cr_assert_eq(call("GET", "/semaphores/sc.big", NULL, &r), 200, "%s", r.body);
    cr_assert_eq(h_int(&r, "permits"), 1024, "%s", r.body);
    h_resp_free(&r);

    for (int i = 0; i < C.n; i++)
        h_redis_cmd(&C.masters[i], NULL, 0, "CONFIG RESETSTAT");
    cr_assert_eq(del_lease("/semaphores/sc.big", lease), 200);
    wait_all("EXISTS", "redlock:#sem:sc.big", 0, "the record goes with the last permit");
    for (int i = 0; i < C.n; i++) {
        long long looked = info_num(i, "stats", NULL, "keyspace_hits:") + info_num(i, "stats", NULL, "keyspace_misses:");
        long long exists = info_num(i, "commandstats", "cmdstat_exists:", "calls=");
        fprintf(stderr, "semcount: master %d: the release looked up %lld keys, %lld EXISTS calls\n", i, looked,
                exists);
        cr_assert(looked < 64, "master %d: the release looked up %lld keys (every slot: 1024)", i, looked);
        /* the service's own calls may EXISTS a key now and then: 3 calls before, 1 after */
        cr_assert(exists < 2, "master %d: %lld EXISTS calls (the count is empty)", i, exists);
    }
}

Test(semcount, a_legacy_record_stays_while_a_slot_the_count_does_not_know_lives)
{
    const char *rec = "redlock:#sem:sc.old";
    /* a build before the count: the record "4", slot 0 held without a member */
    for (int i = 0; i < C.n; i++) {
        h_redis_cmd(&C.masters[i], NULL, 0, "SET %s 4 PX 5000", rec);
        h_redis_cmd(&C.masters[i], NULL, 0, "SET %s#0 oldBuildLease000000001.t PX 30000", rec);
    }
    h_resp r;
    cr_assert_eq(call("POST", "/semaphores/sc.old?permits=4&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    char lease[200];
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    cr_assert_neq(h_int(&r, "slot"), 0, "slot 0 is the old build's");
    h_resp_free(&r);
    wait_all("ZCARD", "redlock:#sem:sc.old#h", 1, "the new permit counted on every master");
    /* the grant lengthened the record (5 s -> 30 s) and kept its value */
    value_on_all(rec, "4");
    cr_assert(h_least_pttl(&C, rec) > 20000, "the record lives as long as the new permit");

    cr_assert_eq(del_lease("/semaphores/sc.old", lease), 200);
    wait_all("ZCARD", "redlock:#sem:sc.old#h", 0, "the release reached every master");
    value_on_all(rec, "4"); /* slot 0 lives: the record stays, legacy */
    cr_assert_eq(call("POST", "/semaphores/sc.old?permits=8&wait_ms=0", NULL, &r), 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "permits_mismatch");
    cr_assert_eq(h_int(&r, "permits"), 4, "%s", r.body);
    h_resp_free(&r);

    /* the old slot goes (its release, its expiry): the next last permit takes the record */
    for (int i = 0; i < C.n; i++)
        h_redis_cmd(&C.masters[i], NULL, 0, "DEL %s#0", rec);
    cr_assert_eq(call("POST", "/semaphores/sc.old?permits=4&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    snprintf(lease, sizeof lease, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    wait_all("ZCARD", "redlock:#sem:sc.old#h", 1, "counted on every master");
    cr_assert_eq(del_lease("/semaphores/sc.old", lease), 200);
    wait_all("EXISTS", "redlock:#sem:sc.old", 0, "no slot left: the record goes");
    cr_assert_eq(call("POST", "/semaphores/sc.old?permits=8&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    h_resp_free(&r);
}

/* Under a counted record a slot is left exactly when a member of the count names a live
 * one: two permits, one released, then the other. */
Test(semcount, a_counted_record_goes_with_its_last_permit_only)
{
    h_resp r;
    char l1[200], l2[200];
    cr_assert_eq(call("POST", "/semaphores/sc.two?permits=2&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    snprintf(l1, sizeof l1, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    cr_assert_eq(call("POST", "/semaphores/sc.two?permits=2&ttl_ms=20000", NULL, &r), 201, "%s", r.body);
    snprintf(l2, sizeof l2, "%s", h_str(&r, "lease"));
    h_resp_free(&r);
    wait_all("ZCARD", "redlock:#sem:sc.two#h", 2, "both counted on every master");
    value_on_all("redlock:#sem:sc.two", "2c");
    cr_assert_eq(call("GET", "/semaphores/sc.two", NULL, &r), 200, "%s", r.body);
    cr_assert_eq(h_int(&r, "permits"), 2, "the record's number, not its marker: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(del_lease("/semaphores/sc.two", l1), 200);
    wait_all("ZCARD", "redlock:#sem:sc.two#h", 1, "the release reached every master");
    value_on_all("redlock:#sem:sc.two", "2c");
    cr_assert_eq(call("POST", "/semaphores/sc.two?permits=3&wait_ms=0", NULL, &r), 409, "%s", r.body);
    cr_assert_str_eq(h_str(&r, "error"), "permits_mismatch");
    cr_assert_eq(h_int(&r, "permits"), 2, "the number, not the marker: %s", r.body);
    h_resp_free(&r);
    cr_assert_eq(del_lease("/semaphores/sc.two", l2), 200);
    wait_all("EXISTS", "redlock:#sem:sc.two", 0, "the last permit takes the record");
    cr_assert_eq(call("POST", "/semaphores/sc.two?permits=3&ttl_ms=30000", NULL, &r), 201, "%s", r.body);
    h_resp_free(&r);
}
