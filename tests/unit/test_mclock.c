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

/* What a script that ran answers (the master time it ran at) is held against the clock
 * as measured when its answer is read: a jump forward smaller than the node timeout
 * passes the window (its upper edge is the send + the node timeout), not this. */
Test(mclock, a_script_that_ran_after_a_jump_smaller_than_the_node_timeout_disagrees)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    sample(&c, 0, WALL, why); /* offset WALL, err 1 ms */
    int64_t lo, hi;
    mclock_window(&c, S, 50000, DRIFT, &lo, &hi); /* sent at 1 s, node timeout 50 ms */
    int64_t honest = (WALL + S + 1000) / 1000, jumped = honest + 45; /* ran 1 ms after it was sent */
    cr_assert(jumped >= lo && jumped <= hi, "the window lets a 45 ms jump run");
    cr_assert(mclock_agrees(&c, S + 2000, honest, 0, DRIFT), "an honest clock agrees");
    cr_assert_not(mclock_agrees(&c, S + 2000, jumped, 0, DRIFT), "a 45 ms jump does not");
    /* what slips through: a jump within the tolerance (err 1 ms + 5 ms + 1 % of 1 s) and
     * the time the answer took to be read (1 ms) */
    int64_t tol = mclock_tolerance_us(&c, S + 2000, DRIFT);
    cr_assert(tol > 15000 && tol < 17000, "tolerance %lld us", (long long)tol);
    cr_assert(mclock_agrees(&c, S + 2000, honest + 14, 0, DRIFT));
    cr_assert_not(mclock_agrees(&c, S + 2000, honest + 19, 0, DRIFT));
    /* a script that ran, then waited 40 ms to be read (a busy loop): agrees */
    cr_assert(mclock_agrees(&c, S + 42000, honest, 0, DRIFT));
}

/* A sample answered slowly (a master frozen just under the stall limit: 1.9 s) has an
 * err of 0.95 s; taken as the baseline, every window and every check after it would let
 * a jump that large through.  The tighter baseline stays; the next tight sample replaces
 * it; a looser one replaces a baseline older than the rate span. */
Test(mclock, a_looser_sample_does_not_widen_the_tolerance)
{
    mclock c;
    mclock_reset(&c);
    char why[160];
    sample(&c, 0, WALL, why);
    cr_assert_eq(mclock_sample(&c, S, S + 1900000, WALL + S + 950000, DRIFT, NULL, 0, 0, why, sizeof why),
                 MCLOCK_OK, "%s", why);
    cr_assert_eq(c.err_us, 1001, "the baseline kept its err");
    cr_assert_eq(c.at_us, 2000, "and its time");
    cr_assert_eq(c.last_us, S + 1900000, "the sample was judged all the same");
    int64_t tol = mclock_tolerance_us(&c, 3 * S, DRIFT);
    cr_assert_lt(tol, 40000, "tolerance %lld us, not the slow sample's 950 ms", (long long)tol);
    cr_assert_not(mclock_agrees(&c, 3 * S, (WALL + 3 * S) / 1000 + 500, 0, DRIFT),
                  "a 500 ms jump after the slow sample is caught");
    cr_assert_eq(sample(&c, 4 * S, WALL + 4 * S, why), MCLOCK_OK);
    cr_assert_eq(c.at_us, 4 * S + 2000, "a tight sample replaces it");
    cr_assert_eq(mclock_sample(&c, 15 * S, 15 * S + 1900000, WALL + 15 * S + 950000, DRIFT, NULL, 0, 0, why,
                               sizeof why), MCLOCK_OK, "%s", why);
    cr_assert_eq(c.at_us, 15 * S + 1900000, "past the rate span, a loose sample is the baseline");
}

Test(mclock, the_median_of_offsets)
{
    int64_t v[] = {5, 1, 9, 3};
    cr_assert_eq(mclock_median(v, 4), 4);
    int64_t w[] = {7, 2, 5};
    cr_assert_eq(mclock_median(w, 3), 5);
    cr_assert_eq(mclock_median(NULL, 0), 0);
}
