/* test_trace.c -- trace.h: W3C traceparent values accepted and refused (the examples
 * of the Trace Context recommendation, and each way one can be malformed). */
#include <criterion/criterion.h>
#include <string.h>

#include "unit.h"
#include "trace.h"

TestSuite(trace, .fini = unit_fini, .timeout = 30);

Test(trace, the_recommendations_example_is_read)
{
    trace_parent t;
    cr_assert_eq(trace_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &t), 0);
    cr_assert_str_eq(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    cr_assert_str_eq(t.parent_id, "00f067aa0ba902b7");
    cr_assert_eq(t.flags, 1);
    cr_assert_eq(trace_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &t), 0);
    cr_assert_eq(t.flags, 0);
}

Test(trace, a_later_version_is_read_as_00)
{
    trace_parent t;
    cr_assert_eq(trace_parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &t), 0);
    cr_assert_eq(trace_parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", &t), 0);
    cr_assert_str_eq(t.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    cr_assert_neq(trace_parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", &t), 0,
                  "more only after a '-'");
}

Test(trace, malformed_values_are_refused)
{
    static const char *bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",   /* 00 is exactly 55 */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",     /* short flags */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",    /* version ff */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",    /* zero trace-id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",    /* zero parent-id */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",    /* uppercase */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",    /* not hex */
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",    /* separators */
        "0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        trace_parent t;
        cr_assert_eq(trace_parse(bad[i], &t), -1, "accepted '%s'", bad[i]);
        cr_assert_str_eq(t.trace_id, "");
    }
    trace_parent t;
    cr_assert_eq(trace_parse(NULL, &t), -1);
}
