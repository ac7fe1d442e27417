/* resync.h -- what a quarantined master waits for, and its repair before it rejoins.
 *
 * A master that restarted or lost its data may have forgotten lock keys and fencing
 * counters.  Two proof rounds decide its return, each reading every master with
 * SCRIPT_PROOF, which proves a peer trusted in the same atomic call (its record whole,
 * not quarantined, not made anew after a loss, written under the run id it has now):
 *
 * - shorten: once every round that may have counted the master's vote before its loss
 *   is over (R-late: a node timeout), the largest expiry key among a quorum of proven
 *   peers bounds every lock it may have forgotten; its quarantine is lowered to that.
 * - repair: once the quarantine has run out, its base rises to the largest counter of
 *   a quorum of proven peers, and it rejoins.  Any quorum of peers meets the quorum that
 *   fenced each token in a master that kept it, and a proven one kept it.
 *
 * With fewer than a quorum of proven peers the master stays out and says why, unless
 * every master answered with a whole record that kept its history (a majority restarted
 * together: a power loss): then the base is the largest counter of all of them plus
 * RESYNC_GAP, which covers the grants their lost fsync windows can hold.  The instance's
 * own view of a peer is never used.  docs/DESIGN.md §4 has the argument. */
#ifndef RL_RESYNC_H
#define RL_RESYNC_H

#include <stddef.h>
#include <stdint.h>

#include "master.h"

#define RESYNC_GAP ((uint64_t)1 << 22)
/* How long a repair waits for a quorum of proven peers before the fallback may run:
 * one quarantine period, at most 10 s and at least 1 s. */
int64_t resync_wait_ms(int64_t quarantine_ms);

/* What one proof round learnt (target: the master being repaired). */
typedef struct resync_tally {
    size_t n;                /* masters */
    size_t proven_peers;     /* peers (not the target) proven in this round (counters) */
    size_t expiry_peers;     /* of them, those whose expiry key counts (not out for a clock) */
    size_t history;          /* masters (the target too) whose whole record kept its history */
    uint64_t top_proven;     /* largest counter among the proven peers and the target's own */
    uint64_t top_all;        /* largest counter among every whole record that answered */
    int64_t expiry_ms;       /* largest expiry-key pttl among the proven peers (0: none) */
} resync_tally;

enum resync_verdict {
    RESYNC_WAIT = 0,         /* too few proven peers: stay out */
    RESYNC_REJOIN,           /* base = top_proven */
    RESYNC_FALLBACK,         /* base = top_all + RESYNC_GAP */
};

/* The repair's verdict (pure; unit-tested): a quorum of proven peers, or, once waited
 * out, every master with its history; *base gets the base to set. */
int resync_decide(const resync_tally *t, size_t quorum, int waited_out, uint64_t *base);

/* The delay left for a master whose proof round found the given tally (pure): the
 * largest expiry among a quorum of proven peers whose expiry keys count (a peer out for
 * its clock proves its counters, not its expiry), stretched by the drift factor, plus
 * 2 ms; -1 when fewer than a quorum proved them (the delay stays as it is). */
int64_t resync_delay_ms(const resync_tally *t, size_t quorum, double drift_factor);

typedef struct resync resync;

/* A repair job for target, using the other masters of the same worker.  NULL on OOM. */
resync *resync_new(master_conn *masters, size_t n, size_t quorum, size_t target);
void resync_free(resync *r);

/* Run a proof round, then rejoin the target (master_rejoin) or leave it out with a
 * reason (master_conn.repair_why); idempotent while a round is under way. */
void resync_start(resync *r);

/* Run a proof round, then lower the target's quarantine to what its peers' expiry keys
 * prove (master_shorten); idempotent while a round is under way. */
void resync_shorten(resync *r);

#endif
