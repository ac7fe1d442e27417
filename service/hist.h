/* hist.h -- the shapes of what /metrics counts per request and per master round trip:
 * the latency histograms' buckets (Prometheus "le" bounds), and the exact HTTP statuses
 * the request counter keeps apart.  Pure: constants and lookups, no state. */
#ifndef RL_HIST_H
#define RL_HIST_H

#include <stddef.h>
#include <stdint.h>

/* Request durations (redlockd_request_duration_seconds): upper bounds in microseconds,
 * ascending; a duration above the last one counts in the +Inf bucket only. */
#define HIST_REQ_N 16
extern const int64_t hist_req_bounds_us[HIST_REQ_N];

/* Round trips to a master (redlockd_master_rtt_seconds), the same way. */
#define HIST_RTT_N 14
extern const int64_t hist_rtt_bounds_us[HIST_RTT_N];

/* The bucket of a value: the first bound >= us (n for +Inf).  Negative values count in
 * the first bucket. */
size_t hist_bucket(const int64_t *bounds_us, size_t n, int64_t us);

/* The statuses the request counter counts apart, each its own `code` label; any other
 * status is counted in the last slot (HIST_STATUS_OTHER, code="other"). */
#define HIST_STATUS_N 16
#define HIST_STATUS_OTHER (HIST_STATUS_N - 1)
extern const int hist_statuses[HIST_STATUS_N - 1];

/* The slot of an HTTP status. */
size_t hist_status_slot(int status);

#endif
