/* test_lograte.c -- lograte.h: a lasting condition is logged when it begins, then after
 * 10 s, 20 s, 40 s ... at most every 10 minutes, each repeat counting what it left out. */
#include <criterion/criterion.h>

#include "unit.h"
#include "lograte.h"

TestSuite(lograte, .fini = unit_fini, .timeout = 30);

#define S 1000000LL

Test(lograte, repeats_decay_from_ten_seconds_to_ten_minutes)
{
    lograte l;
    unsigned left = 99;
    lograte_begin(&l, 0);
    /* A reconnect attempt every second: logged at 10 s, 30 s, 70 s, 150 s ... */
    int64_t logged[8];
    size_t n = 0;
    for (int64_t t = 1; t <= 3000 && n < 8; t++)
        if (lograte_again(&l, t * S, &left))
            logged[n++] = t;
    cr_assert_eq(n, 8);
    const int64_t want[8] = {10, 30, 70, 150, 310, 630, 1230, 1830};
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(logged[i], want[i], "repeat %zu at %lld s", i, (long long)logged[i]);
}

Test(lograte, a_repeat_says_how_many_were_left_out)
{
    lograte l;
    unsigned left = 99;
    lograte_begin(&l, 0);
    for (int t = 1; t < 10; t++)
        cr_assert_eq(lograte_again(&l, t * S, &left), 0);
    cr_assert_eq(lograte_again(&l, 10 * S, &left), 1);
    cr_assert_eq(left, 9);
    cr_assert_eq(lograte_again(&l, 11 * S, &left), 0);
    /* A new beginning starts over. */
    lograte_begin(&l, 100 * S);
    cr_assert_eq(lograte_again(&l, 101 * S, &left), 0);
    cr_assert_eq(lograte_again(&l, 110 * S, &left), 1);
    cr_assert_eq(left, 1);
}
