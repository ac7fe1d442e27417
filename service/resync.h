/* resync.h -- restoring the fencing counters of a master that lost its data.
 *
 * The quarantine keeps such a master out of quorums until every lock key it lost has
 * expired, but fencing counters never expire: a name nobody used during the
 * quarantine would restart from 0 there, and once a quorum of masters has lost its
 * data (even one at a time) a later grant could get a smaller token.  So before the
 * master rejoins, every "<prefix>#fence:*" counter is copied to it from at least a
 * quorum of the other masters, keeping the largest value (any quorum of peers meets
 * the quorum that issued the last token of each name in a master that kept it). */
#ifndef RL_RESYNC_H
#define RL_RESYNC_H

#include "master.h"

typedef struct resync resync;

/* A job for target, using the other masters of the same worker.  NULL on OOM. */
resync *resync_new(master_conn *masters, size_t n, size_t quorum, size_t target);
void resync_free(resync *r);

/* Start (or restart) copying; idempotent while running. */
void resync_start(resync *r);

/* Whether the last run copied from at least a quorum of peers to the end. */
int resync_done(const resync *r);

#endif
