/* test_lease.c -- lease secrets of lease.h: generated leases are 32 characters of the
 * URL-safe base64 alphabet, valid as request leases, unique, and use every symbol;
 * the buffered random source; and lease_equal. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "lease.h"
#include "validate.h"

TestSuite(lease, .fini = unit_fini, .timeout = 60);

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

#define N_LEASES 10000

static int cmp_lease(const void *a, const void *b)
{
    return memcmp(a, b, LEASE_GEN_LEN + 1);
}

Test(lease, generated_leases_are_32_url_safe_chars_and_valid_leases)
{
    lease_rng *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    lease_rng_init(r);
    for (int i = 0; i < N_LEASES; i++) {
        char l[LEASE_GEN_LEN + 8];
        memset(l, '#', sizeof l);
        cr_assert_eq(lease_generate(r, l), 0);
        cr_assert_eq(l[LEASE_GEN_LEN], '\0');
        cr_assert_eq(strlen(l), LEASE_GEN_LEN);
        cr_assert_eq(l[LEASE_GEN_LEN + 1], '#', "wrote past the terminator");
        cr_assert_eq(strspn(l, B64URL), LEASE_GEN_LEN, "bad character in %s", l);
        cr_assert(validate_lease(l, LEASE_GEN_LEN), "%s would be refused by validate_lease", l);
    }
    free(r);
}

Test(lease, ten_thousand_leases_are_distinct)
{
    lease_rng *r = malloc(sizeof *r);
    char(*all)[LEASE_GEN_LEN + 1] = calloc(N_LEASES, LEASE_GEN_LEN + 1);
    cr_assert(r && all);
    lease_rng_init(r);
    for (int i = 0; i < N_LEASES; i++)
        cr_assert_eq(lease_generate(r, all[i]), 0);
    qsort(all, N_LEASES, LEASE_GEN_LEN + 1, cmp_lease);
    for (int i = 1; i < N_LEASES; i++)
        cr_assert_neq(memcmp(all[i - 1], all[i], LEASE_GEN_LEN), 0, "duplicate lease %s", all[i]);
    free(all);
    free(r);
}

Test(lease, every_position_uses_the_whole_alphabet)
{
    /* 24 random bytes fill 32 symbols exactly: every symbol at every position should
     * appear over 10k leases (missing one by chance: about 64*32*(63/64)^10000 ~ 1e-65). */
    lease_rng *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    lease_rng_init(r);
    static unsigned char seen[LEASE_GEN_LEN][256];
    for (int i = 0; i < N_LEASES; i++) {
        char l[LEASE_GEN_LEN + 1];
        cr_assert_eq(lease_generate(r, l), 0);
        for (int p = 0; p < LEASE_GEN_LEN; p++)
            seen[p][(unsigned char)l[p]] = 1;
    }
    for (int p = 0; p < LEASE_GEN_LEN; p++)
        for (const char *c = B64URL; *c; c++)
            cr_assert(seen[p][(unsigned char)*c], "'%c' never at position %d", *c, p);
    free(r);
}

Test(lease, two_generators_do_not_repeat_each_other)
{
    lease_rng *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    cr_assert(a && b);
    lease_rng_init(a);
    lease_rng_init(b);
    char la[LEASE_GEN_LEN + 1], lb[LEASE_GEN_LEN + 1];
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(lease_generate(a, la), 0);
        cr_assert_eq(lease_generate(b, lb), 0);
        cr_assert_str_neq(la, lb);
    }
    free(a);
    free(b);
}

Test(lease, random_fills_across_pool_refills_and_wipes_what_it_handed_out)
{
    lease_rng *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    lease_rng_init(r);
    size_t n = sizeof r->pool * 2 + 123; /* crosses two refills */
    unsigned char *buf = calloc(1, n);
    cr_assert_not_null(buf);
    cr_assert_eq(lease_random(r, buf, n), 0);
    /* not left zero: a run of 64 zero bytes would be astronomically unlikely */
    for (size_t i = 0; i + 64 <= n; i += 64) {
        int nz = 0;
        for (size_t k = 0; k < 64; k++)
            nz |= buf[i + k];
        cr_assert_neq(nz, 0, "64 zero bytes at %zu", i);
    }
    cr_assert_eq(r->used, 123);
    for (size_t i = 0; i < r->used; i++)
        cr_assert_eq(r->pool[i], 0, "handed-out byte %zu still in the pool", i);
    /* the bytes still to come are in the pool and differ from what was handed out */
    cr_assert_neq(memcmp(r->pool + r->used, buf, 64), 0);
    free(buf);
    free(r);
}

Test(lease, random_of_zero_bytes_is_a_no_op)
{
    lease_rng *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    lease_rng_init(r);
    unsigned char b = 0xaa;
    cr_assert_eq(lease_random(r, &b, 0), 0);
    cr_assert_eq(b, 0xaa);
    free(r);
}

Test(lease, consecutive_random_draws_differ)
{
    lease_rng *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    lease_rng_init(r);
    unsigned char a[32], b[32];
    cr_assert_eq(lease_random(r, a, sizeof a), 0);
    cr_assert_eq(lease_random(r, b, sizeof b), 0);
    cr_assert_neq(memcmp(a, b, sizeof a), 0);
    free(r);
}

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct eq_case {
    char a[24];
    size_t alen;
    char b[24];
    size_t blen;
    int equal;
};

ParameterizedTestParameters(lease, equal_table)
{
    static struct eq_case cases[] = {
        {"abcdefghijklmnop", 16, "abcdefghijklmnop", 16, 1},
        {"abcdefghijklmnop", 16, "Abcdefghijklmnop", 16, 0}, /* first byte */
        {"abcdefghijklmnop", 16, "abcdefghijklmnoP", 16, 0}, /* last byte */
        {"abcdefghijklmnop", 16, "abcdefgXijklmnop", 16, 0},
        {"abcdefghijklmnop", 16, "abcdefghijklmno", 15, 0},  /* prefix */
        {"abcdefghijklmno", 15, "abcdefghijklmnop", 16, 0},
        {"abcdefghijklmnop", 16, "abcdefghijklmnopq", 16, 1}, /* only len bytes count */
        {"", 0, "", 0, 1},
        {"", 0, "a", 1, 0},
        {"a\0b", 3, "a\0c", 3, 0},                            /* bytes after a NUL count */
        {"a\0b", 3, "a\0b", 3, 1},
        {"\x80", 1, "\x00", 1, 0},                            /* high bit */
    };
    return cr_make_param_array(struct eq_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct eq_case *c, lease, equal_table)
{
    cr_assert_eq(lease_equal(c->a, c->alen, c->b, c->blen), c->equal, "'%.*s' vs '%.*s'",
                 (int)c->alen, c->a, (int)c->blen, c->b);
    cr_assert_eq(lease_equal(c->b, c->blen, c->a, c->alen), c->equal, "not symmetric");
}

Test(lease, equal_detects_every_single_bit_flip)
{
    char a[LEASE_GEN_LEN], b[LEASE_GEN_LEN];
    memset(a, 'k', sizeof a);
    for (size_t i = 0; i < sizeof a; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, a, sizeof a);
            b[i] ^= (char)(1 << bit);
            cr_assert_eq(lease_equal(a, sizeof a, b, sizeof b), 0, "byte %zu bit %d", i, bit);
        }
}
