/* test_hist.c -- hist.h: the buckets of the latency histograms and the statuses the
 * request counter keeps apart. */
#include <criterion/criterion.h>

#include "unit.h"
#include "hist.h"

TestSuite(hist, .fini = unit_fini, .timeout = 30);

Test(hist, a_value_falls_in_the_first_bucket_whose_bound_is_not_below_it)
{
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, 0), 0);
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, -5), 0);
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, 500), 0, "le is inclusive");
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, 501), 1);
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, 60000000), HIST_REQ_N - 1);
    cr_assert_eq(hist_bucket(hist_req_bounds_us, HIST_REQ_N, 60000001), HIST_REQ_N, "+Inf");
    cr_assert_eq(hist_bucket(hist_rtt_bounds_us, HIST_RTT_N, 150), 1);
    cr_assert_eq(hist_bucket(hist_rtt_bounds_us, HIST_RTT_N, INT64_MAX), HIST_RTT_N);
}

Test(hist, the_bounds_ascend)
{
    for (size_t k = 1; k < HIST_REQ_N; k++)
        cr_assert_gt(hist_req_bounds_us[k], hist_req_bounds_us[k - 1]);
    for (size_t k = 1; k < HIST_RTT_N; k++)
        cr_assert_gt(hist_rtt_bounds_us[k], hist_rtt_bounds_us[k - 1]);
}

Test(hist, every_status_the_service_answers_has_its_own_slot)
{
    const int ours[] = {200, 201, 400, 401, 403, 404, 405, 409, 413, 499, 500, 503};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++) {
        size_t s = hist_status_slot(ours[i]);
        cr_assert_neq(s, HIST_STATUS_OTHER, "%d", ours[i]);
        cr_assert_eq(hist_statuses[s], ours[i]);
    }
    cr_assert_eq(hist_status_slot(418), HIST_STATUS_OTHER);
    cr_assert_eq(hist_status_slot(0), HIST_STATUS_OTHER);
}
