/* test_mclock.c -- the watch on a master's clock (mclock.h): what a sample is judged
 * against (the one before: a jump or a step back; one 10 s older: the rate; the other
 * masters: the skew), the window a script may run in, and how a late script is told
 * from a clock that moved. */
#include <criterion/criterion.h>
#include <string.h>

#include "mclock.h"
#include "unit.h"

TestSuite(mclock, .fini = unit_fini, .timeout = 60);

#define S 1000000LL /* µs in a second */
#define WALL (1800000000LL * S) /* a master's wall clock, µs */
#define DRIFT 0.01

/* A sample answered 2 ms after it was sent at local t, the master at wall w then. */
static int sample(mclock *c, int64_t t, int64_t w, char *why)
{
    return mclock_sample(c, t, t + 2000, w + 1000, DRIFT, NULL, 0, 0, why, 160);
}

Test(mclock, a_steady_clock_is_ok_and_becomes_steady)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    for (int k = 0; k <= 12; k++)
        cr_assert_eq(sample(&c, k * S, WALL + k * S, why), MCLOCK_OK, "sample %d: %s", k, why);
    cr_assert(mclock_steady(&c, 12 * S + 2000));
    cr_assert_eq(c.rate_ppm, 0);
}

Test(mclock, a_jump_forward_and_a_step_back_are_caught_at_the_next_sample)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    sample(&c, 0, WALL, why);
    cr_assert_eq(sample(&c, S, WALL + S + 3600 * S, why), MCLOCK_JUMP);
    cr_assert(strstr(why, "jumped forward 3600000 ms"), "%s", why);
    cr_assert_not(mclock_steady(&c, 10 * S));
    mclock_reset(&c);
    sample(&c, 0, WALL, why);
    cr_assert_eq(sample(&c, S, WALL + S - 50000, why), MCLOCK_JUMP, "a step back of 50 ms");
    cr_assert(strstr(why, "stepped back"), "%s", why);
    mclock_reset(&c);
    sample(&c, 0, WALL, why);
    cr_assert_eq(sample(&c, S, WALL + S + 12000, why), MCLOCK_OK,
                 "12 ms in a second: within 1 %% drift plus the samples' uncertainty and margin");
}

Test(mclock, a_clock_outside_the_drift_factor_is_caught_by_its_rate)
{
    /* 1.5 % fast: each second alone stays within the jump's slack, ten do not. */
    mclock c;
    mclock_reset(&c);
    char why[160];
    int v = MCLOCK_OK, k;
    for (k = 0; k <= 12 && v == MCLOCK_OK; k++)
        v = sample(&c, k * S, WALL + k * S + k * 15000, why);
    cr_assert_eq(v, MCLOCK_RATE, "caught at sample %d: %s", k, why);
    cr_assert(c.rate_ppm > 14000 && c.rate_ppm < 16000, "%lld ppm", (long long)c.rate_ppm);
    /* 0.5 % slow is within the 1 % drift factor */
    mclock_reset(&c);
    for (k = 0; k <= 25; k++)
        cr_assert_eq(sample(&c, k * S, WALL + k * S - k * 5000, why), MCLOCK_OK, "%d: %s", k, why);
}

Test(mclock, a_clock_far_from_the_others_is_caught_by_its_skew)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    int64_t others[3] = {WALL + 1000 - 1000, WALL + 3000 - 1000, WALL - 2000 - 1000};
    /* offsets of the others: wall - local; ours is an hour ahead */
    cr_assert_eq(mclock_sample(&c, 0, 2000, WALL + 3600 * S, DRIFT, others, 3, 2 * S, why, sizeof why),
                 MCLOCK_SKEW);
    cr_assert(strstr(why, "from the other masters"), "%s", why);
    mclock_reset(&c);
    cr_assert_eq(mclock_sample(&c, 0, 2000, WALL + 1000, DRIFT, others, 3, 2 * S, why, sizeof why), MCLOCK_OK);
    cr_assert_eq(mclock_sample(&c, 0, 2000, WALL + 3600 * S, DRIFT, others, 1, 2 * S, why, sizeof why),
                 MCLOCK_JUMP, "one other master is no majority to judge by: only the jump counts");
}

Test(mclock, the_window_covers_the_node_timeout_and_the_uncertainty)
{
    mclock c;
    mclock_reset(&c);
    int64_t lo, hi;
    cr_assert_eq(mclock_window(&c, 0, 50000, DRIFT, &lo, &hi), 0, "no sample: no window");
    char why[160];
    sample(&c, 0, WALL, why); /* offset WALL, err 1 ms */
    cr_assert_eq(mclock_window(&c, S, 50000, DRIFT, &lo, &hi), 1);
    int64_t now_master_ms = (WALL + S) / 1000;
    cr_assert(lo < now_master_ms - 5 && lo > now_master_ms - 30, "lo %lld", (long long)(lo - now_master_ms));
    cr_assert(hi > now_master_ms + 55 && hi < now_master_ms + 80, "hi +%lld", (long long)(hi - now_master_ms));
}

Test(mclock, a_late_script_is_no_clock_fault_but_a_moved_clock_is)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    sample(&c, 0, WALL, why);
    int64_t lo, hi;
    mclock_window(&c, S, 50000, DRIFT, &lo, &hi);
    /* ran 2 s late (a frozen master), read just after: agrees */
    int64_t ran = (WALL + 3 * S) / 1000;
    cr_assert(mclock_agrees(&c, 3 * S + 1000, ran, lo, DRIFT));
    /* ran an hour ahead of what the clock said when its answer was read: moved */
    cr_assert_not(mclock_agrees(&c, 3 * S + 1000, ran + 3600 * 1000, lo, DRIFT));
    /* ran, by its clock, before it was sent: stepped back */
    cr_assert_not(mclock_agrees(&c, S + 1000, lo - 500, lo, DRIFT));
}

Test(mclock, the_median_of_offsets)
{
    int64_t v[] = {5, 1, 9, 3};
    cr_assert_eq(mclock_median(v, 4), 4);
    int64_t w[] = {7, 2, 5};
    cr_assert_eq(mclock_median(w, 3), 5);
    cr_assert_eq(mclock_median(NULL, 0), 0);
}
