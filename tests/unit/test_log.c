/* test_log.c -- log.h's levels: they parse from their names, unknown names are
 * refused, and log.h builds next to <syslog.h> (whose LOG_INFO/LOG_DEBUG it once
 * redefined). */
#include <criterion/criterion.h>
#include <syslog.h>

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
