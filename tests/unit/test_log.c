/* test_log.c -- log.h's levels: they parse from their names, unknown names are
 * refused, and log.h builds next to <syslog.h> (whose LOG_INFO/LOG_DEBUG it once
 * redefined). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "unit.h"
#include "log.h"

TestSuite(log, .fini = unit_fini, .timeout = 30);

Test(log, levels_parse_from_their_names_and_nothing_else)
{
    cr_assert_eq(log_level_parse("error"), LOG_LEVEL_ERROR);
    cr_assert_eq(log_level_parse("warn"), LOG_LEVEL_WARN);
    cr_assert_eq(log_level_parse("info"), LOG_LEVEL_INFO);
    cr_assert_eq(log_level_parse("debug"), LOG_LEVEL_DEBUG);
    cr_assert_eq(log_level_parse("verbose"), -1);
    cr_assert_eq(log_level_parse(""), -1);
}

Test(log, levels_are_ordered_and_syslog_keeps_its_own_values)
{
    cr_assert(LOG_LEVEL_ERROR < LOG_LEVEL_WARN && LOG_LEVEL_WARN < LOG_LEVEL_INFO &&
              LOG_LEVEL_INFO < LOG_LEVEL_DEBUG);
    cr_assert_eq(LOG_INFO, 6, "<syslog.h>'s own LOG_INFO is untouched");
    cr_assert_eq(LOG_DEBUG, 7);
}

/* The time of a line is made to the second once a second (log_event keeps it): every
 * line still carries its own milliseconds, and a new second a new stamp. */
Test(log, every_line_carries_the_time_of_its_own_millisecond)
{
    static log_ctx lg;
    log_init(&lg, 1, LOG_LEVEL_INFO, 1);
    for (int round = 0; round < 2; round++) {
        struct timespec a, b;
        clock_gettime(CLOCK_REALTIME, &a);
        log_event(&lg, LOG_LEVEL_INFO, "x", "\"k\":1");
        clock_gettime(CLOCK_REALTIME, &b);
        lg.buf[lg.len] = '\0';
        int Y, M, D, h, m, s, ms;
        char z;
        cr_assert_eq(sscanf(lg.buf, "{\"time\":\"%4d-%2d-%2dT%2d:%2d:%2d.%3d%c\"", &Y, &M, &D, &h, &m, &s, &ms, &z), 8,
                     "%s", lg.buf);
        cr_assert_eq(z, 'Z');
        struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = s};
        long long at = (long long)timegm(&tm) * 1000 + ms;
        long long lo = (long long)a.tv_sec * 1000 + a.tv_nsec / 1000000, hi = (long long)b.tv_sec * 1000 + b.tv_nsec / 1000000;
        cr_assert(at >= lo && at <= hi, "%lld not in %lld..%lld: %s", at, lo, hi, lg.buf);
        cr_assert(strstr(lg.buf, "\"level\":\"info\",\"msg\":\"x\",\"k\":1}\n") != NULL, "%s", lg.buf);
        lg.len = 0;
        /* as if the last line was made in 2000: the next line makes its stamp anew */
        snprintf(lg.stamp, sizeof lg.stamp, "2000-01-01T00:00:00.");
        lg.sec = 946684800;
    }
}
