/* mclock.h -- the watch on one master's clock (docs/DESIGN.md §4, Rule 7).
 *
 * Redlock's safety assumes that every master expires keys at a rate within drift_factor
 * of the service's clock.  A master whose wall clock jumps (a bad NTP step, a VM restored
 * from a snapshot, `date -s`), runs fast or steps back breaks it; this module measures it.
 * Each sample is one TIME answered by the master (at the handshake, then about every
 * second, pipelined on the connection it uses anyway): its offset to this process's
 * monotonic clock, known within half the sample's round trip.  A sample is judged against
 * the one before it (a jump or a step back), against one ten seconds or more older (the
 * rate) and against the other masters (the skew); and every lock script carries a window
 * of master times it may run in, so that a jump between two samples is refused by the
 * first script that meets it, in the same atomic call (scripts_prelude.h, PRELUDE).
 *
 * Pure: numbers in, verdicts out; no I/O, no clock reads (unit-tested). */
#ifndef RL_MCLOCK_H
#define RL_MCLOCK_H

#include <stddef.h>
#include <stdint.h>

#define MCLOCK_MARGIN_US 5000          /* slack on top of the measured uncertainty */
#define MCLOCK_RATE_SPAN_US 10000000   /* the rate is measured over at least this */
#define MCLOCK_STEADY_US 3000000       /* a distrusted clock must be sane this long */
#define MCLOCK_LOOSER_US 1000          /* a sample this much looser still replaces the
                                        * baseline (round-trip jitter at drift 0) */

typedef struct mclock {
    int have;                 /* a sample was taken since the last reset */
    int64_t offset_us;        /* master wall time - local monotonic time, last sample */
    int64_t err_us;           /* its uncertainty: half that sample's round trip */
    int64_t at_us;            /* local monotonic time of the last sample */
    int64_t last_us;          /* local time of the latest sample judged, taken in or not
                               * (the baseline above may be an older, tighter one) */
    int64_t anchor_offset_us; /* an older sample, for the rate */
    int64_t anchor_err_us;
    int64_t anchor_at_us;
    int64_t sane_since_us;    /* first of the sane samples in a row (0: none) */
    int64_t rate_ppm;         /* the rate's deviation from ours, last measured (ppm) */
} mclock;

enum mclock_verdict {
    MCLOCK_OK = 0,
    MCLOCK_JUMP,              /* moved by more than its rate allows since the last sample */
    MCLOCK_RATE,              /* runs outside drift_factor over the rate span */
    MCLOCK_SKEW,              /* too far from the other masters' clocks */
};

/* Forget every sample (a new baseline from the next one). */
void mclock_reset(mclock *c);

/* A TIME sent at sent_us and answered at recv_us (local monotonic µs) said master_us
 * (the master's wall clock, µs).  others/nothers: the other masters' current offsets
 * (µs), for the skew (max_skew_us 0: not checked).  Judges the sample and takes it in
 * as the baseline (offset_us, err_us, at_us), unless it passed and is looser than the
 * baseline as it stands: its err more than the baseline's err + drift × its age +
 * MCLOCK_LOOSER_US, the baseline younger than MCLOCK_RATE_SPAN_US.  A sample answered
 * slowly (a master frozen just under the stall limit) has a large err, and every window
 * and every check after it would allow a jump that large; the older, tighter baseline
 * still bounds the clock within its own err and the drift since.
 * Returns a verdict; why (cap bytes) says what was seen, with the figures. */
int mclock_sample(mclock *c, int64_t sent_us, int64_t recv_us, int64_t master_us, double drift,
                  const int64_t *others, size_t nothers, int64_t max_skew_us, char *why, size_t cap);

/* The master times (ms) within which a script sent at now_us may run if it runs within
 * horizon_us (the node timeout: a later reply does not count anyway) and the clock
 * behaves.  0 (and *lo = *hi = 0) when there is no sample to tell. */
int mclock_window(const mclock *c, int64_t now_us, int64_t horizon_us, double drift, int64_t *lo_ms,
                  int64_t *hi_ms);

/* How far the clock as last measured may be from the master's at now_us (us): the
 * slack of mclock_window() on either side. */
int64_t mclock_tolerance_us(const mclock *c, int64_t now_us, double drift);

/* A script ran, by the master's clock, at master_ms (the time it refused its window
 * [lo_ms, hi_ms] at, or the time a script that ran answers with its reply: lo_ms 0 then,
 * its window passed); its answer was read at recv_us.  1 if that time agrees with the
 * clock as last measured (a script that ran late: a master that was frozen or slow), 0
 * if it does not (the clock moved: it ran "before it was sent", or later than its
 * answer was read, beyond mclock_tolerance_us()). */
int mclock_agrees(const mclock *c, int64_t recv_us, int64_t master_ms, int64_t lo_ms, double drift);

/* Whether the clock has been sane for MCLOCK_STEADY_US (a distrusted master may then be
 * repaired). */
int mclock_steady(const mclock *c, int64_t now_us);

/* The median of n offsets (sorted in place); 0 if n is 0. */
int64_t mclock_median(int64_t *v, size_t n);

#endif
