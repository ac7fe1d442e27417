/* test_keys.c -- the key and channel names of keys.h: each kind under its prefix, lock
 * names that can never meet the service's own keys, release channels parsed back to
 * their name, buckets in range and stable, results cut to the buffer. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "keys.h"

TestSuite(keys, .fini = unit_fini, .timeout = 30);

Test(keys, each_kind_of_key_sits_under_the_prefix)
{
    char b[KEYS_MAX];
    cr_assert_eq(keys_lock("p:", "a/b", 3, b, sizeof b), 5);
    cr_assert_str_eq(b, "p:a/b");
    cr_assert_eq(keys_set("p:", "LEASE", 5, b, sizeof b), strlen("p:#set:LEASE"));
    cr_assert_str_eq(b, "p:#set:LEASE");
    cr_assert_eq(keys_record("p:", b, sizeof b), strlen("p:#master"));
    cr_assert_str_eq(b, "p:#master");
    keys_quarantine("p:", b, sizeof b);
    cr_assert_str_eq(b, "p:#quarantine");
    cr_assert_eq(keys_released("p:", "x.y", 3, b, sizeof b), strlen("p:#released:x.y"));
    cr_assert_str_eq(b, "p:#released:x.y");
    keys_anchor("p:", b, sizeof b);
    cr_assert_str_eq(b, "p:#anchor");
    size_t len;
    cr_assert_null(keys_released_name("p:", b, strlen(b), &len), "the anchor names no lock");
}

Test(keys, a_release_channel_parses_back_to_its_name_and_nothing_else_does)
{
    char b[KEYS_MAX];
    size_t n = keys_released("redlock:", "jobs/nightly", 12, b, sizeof b), len = 0;
    const char *name = keys_released_name("redlock:", b, n, &len);
    cr_assert_not_null(name);
    cr_assert_eq(len, 12);
    cr_assert(memcmp(name, "jobs/nightly", 12) == 0);
    cr_assert_null(keys_released_name("other:", b, n, &len), "another prefix's channel");
    cr_assert_null(keys_released_name("redlock:", "redlock:#released:", 18, &len), "no name");
    cr_assert_null(keys_released_name("redlock:", "redlock:#set:x", 14, &len));
    cr_assert_null(keys_released_name("redlock:", "red", 3, &len), "shorter than the prefix");
}

Test(keys, buckets_are_stable_in_range_and_spread)
{
    char a[KEYS_BUCKET_MAX], b[KEYS_BUCKET_MAX];
    size_t la = keys_bucket("name", 4, a, sizeof a), lb = keys_bucket("name", 4, b, sizeof b);
    cr_assert_eq(la, lb);
    cr_assert_str_eq(a, b);
    static char seen[KEYS_BUCKETS];
    size_t distinct = 0;
    for (int i = 0; i < 4096; i++) {
        char name[32];
        int nl = snprintf(name, sizeof name, "lock-%d", i);
        keys_bucket(name, (size_t)nl, a, sizeof a);
        cr_assert_eq(a[0], 'b');
        long k = strtol(a + 1, NULL, 10);
        cr_assert(k >= 0 && k < KEYS_BUCKETS, "bucket %ld out of range", k);
        cr_assert_eq((unsigned long long)k, keys_name_hash(name, (size_t)nl) % KEYS_BUCKETS);
        distinct += !seen[k];
        seen[k] = 1;
    }
    cr_assert_gt(distinct, 3300, "4096 names fell in only %zu buckets", distinct);
}

Test(keys, a_result_that_does_not_fit_is_cut_and_terminated)
{
    char b[8];
    size_t n = keys_lock("prefix:", "longname", 8, b, sizeof b);
    cr_assert_eq(n, 7);
    cr_assert_str_eq(b, "prefix:");
}

/* Pinned: a name's bucket on the masters comes from this hash, and a name moved to
 * another bucket could be granted a token below its last one. */
Test(keys, the_hash_never_changes)
{
    cr_assert_eq(keys_name_hash("", 0), 1469598103934665603ull);
    cr_assert_eq(keys_name_hash("a", 1), 0x44bd8ad473cd9906ull);
}

Test(keys, the_scan_pattern_matches_lock_names_only_and_escapes_the_prefix)
{
    char b[KEYS_MAX];
    cr_assert_eq(keys_scan_pattern("redlock:", "jobs/", 5, b, sizeof b), strlen("redlock:jobs/*"));
    cr_assert_str_eq(b, "redlock:jobs/*");
    keys_scan_pattern("redlock:", "", 0, b, sizeof b);
    cr_assert_str_eq(b, "redlock:[^#]*", "never the service's '#' keys");
    keys_scan_pattern("a*b?[c]\\:", "x", 1, b, sizeof b);
    cr_assert_str_eq(b, "a\\*b\\?\\[c\\]\\\\:x*", "glob characters of the prefix are literal");
    /* the longest: a prefix of 127 glob characters and a name prefix of 255 */
    char prefix[128], name[256];
    memset(prefix, '*', 127);
    prefix[127] = '\0';
    memset(name, 'n', 255);
    name[255] = '\0';
    cr_assert_eq(keys_scan_pattern(prefix, name, 255, b, sizeof b), 254 + 255 + 1, "fits KEYS_MAX");
}

/* The builders write what snprintf wrote before them (they no longer use it: they run
 * for every key of every operation), cut the same way at every size of buffer. */
Test(keys, the_builders_write_exactly_what_snprintf_would_at_every_size)
{
    const char *name = "jobs/nightly.v2", *pfx = "redlock:";
    size_t nl = strlen(name);
    for (size_t cap = 0; cap <= 40; cap++) {
        char got[64], want[64];
        memset(got, 'x', sizeof got);
        memset(want, 'x', sizeof want);
        size_t n = keys_lock(pfx, name, nl, got, cap);
        int k = snprintf(want, cap, "%s%.*s", pfx, (int)nl, name);
        cr_assert_eq(n, (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0), "lock cap %zu", cap);
        cr_assert(memcmp(got, want, cap) == 0, "lock cap %zu", cap);
        n = keys_shared(pfx, KEYS_READERS, name, nl, got, cap);
        k = snprintf(want, cap, "%s%s%.*s", pfx, KEYS_READERS, (int)nl, name);
        cr_assert_eq(n, (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0), "shared cap %zu", cap);
        cr_assert(memcmp(got, want, cap) == 0, "shared cap %zu", cap);
        n = keys_released(pfx, name, nl, got, cap);
        k = snprintf(want, cap, "%s" KEYS_RELEASED "%.*s", pfx, (int)nl, name);
        cr_assert_eq(n, (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0), "released cap %zu", cap);
        cr_assert(memcmp(got, want, cap) == 0, "released cap %zu", cap);
        /* a name cut short by its length, and one with a NUL inside it */
        n = keys_lock(pfx, "abc\0def", 7, got, cap);
        k = snprintf(want, cap, "%s%.*s", pfx, 7, "abc\0def");
        cr_assert_eq(n, (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0), "nul cap %zu", cap);
        cr_assert(memcmp(got, want, cap) == 0, "nul cap %zu", cap);
        n = keys_bucket(name, nl, got, cap);
        k = snprintf(want, cap, "b%llu", (unsigned long long)(keys_name_hash(name, nl) % KEYS_BUCKETS));
        cr_assert_eq(n, (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0), "bucket cap %zu", cap);
        cr_assert(memcmp(got, want, cap) == 0, "bucket cap %zu", cap);
    }
    char b[KEYS_BUCKET_MAX];
    for (unsigned i = 0; i < 2000; i++) { /* every bucket number's digits */
        char nm[16], want[KEYS_BUCKET_MAX];
        int l = snprintf(nm, sizeof nm, "n%u", i);
        keys_bucket(nm, (size_t)l, b, sizeof b);
        snprintf(want, sizeof want, "b%llu", (unsigned long long)(keys_name_hash(nm, (size_t)l) % KEYS_BUCKETS));
        cr_assert_str_eq(b, want);
    }
}
