/* resync.h -- the repair of a quarantined master before it rejoins quorums.
 *
 * A master that restarted or lost its data may have forgotten fencing counters, or
 * hold older values of them.  Its record's base (scripts.c) makes every counter on it
 * read at least that value, so one number repairs it, whatever the number of names:
 * the largest counter among at least a quorum of ready peers (SCRIPT_TOP).  Any quorum
 * of peers meets the quorum that issued each token in a master that kept it, so no
 * name's next token can go back (docs/DESIGN.md).
 *
 * With fewer than a quorum of ready peers for resync_wait_ms() (a majority restarted
 * or lost its data at once), it repairs from every master that answers (itself too)
 * and adds RESYNC_GAP to the base: tokens then jump, and stay above what the lost
 * writes can have issued (at most RESYNC_GAP grants of one bucket in the writes a
 * master can lose). */
#ifndef RL_RESYNC_H
#define RL_RESYNC_H

#include <stdint.h>

#include "master.h"

#define RESYNC_GAP ((uint64_t)1 << 20)
/* How long a repair waits for a quorum of ready peers: one quarantine period, at most
 * 10 s and at least 1 s. */
int64_t resync_wait_ms(int64_t quarantine_ms);

typedef struct resync resync;

/* A repair job for target, using the other masters of the same worker.  NULL on OOM. */
resync *resync_new(master_conn *masters, size_t n, size_t quorum, size_t target);
void resync_free(resync *r);

/* Ask the peers for their floors, then rejoin the target (master_rejoin); idempotent
 * while a run is under way.  A run that finds too few ready peers tries again later. */
void resync_start(resync *r);

/* The base a repair sets from the floors it read: the largest (own included), plus
 * RESYNC_GAP when fewer than quorum ready peers answered.  (Pure; unit-tested.) */
uint64_t resync_floor(uint64_t largest, size_t ready_peers, size_t quorum, int gap);

#endif
