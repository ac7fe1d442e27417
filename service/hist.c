/* hist.c -- histogram buckets and counted statuses (see hist.h). */
#include "hist.h"

const int64_t hist_req_bounds_us[HIST_REQ_N] = {
    500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
    500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000,
};

const int64_t hist_rtt_bounds_us[HIST_RTT_N] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 5000000,
};

size_t hist_bucket(const int64_t *bounds_us, size_t n, int64_t us)
{
    size_t lo = 0, hi = n; /* the first bound >= us is in [lo, hi] */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (bounds_us[mid] >= us)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

const int hist_statuses[HIST_STATUS_N - 1] = {
    200, 201, 400, 401, 403, 404, 405, 409, 413, 431, 499, 500, 503, 505, 414,
};

size_t hist_status_slot(int status)
{
    for (size_t i = 0; i < HIST_STATUS_N - 1; i++)
        if (hist_statuses[i] == status)
            return i;
    return HIST_STATUS_OTHER;
}
