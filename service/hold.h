/* hold.h -- locks held for as long as their client stays: after a grant, the service
 * itself extends the lease about every third of its ttl, tells its owner (a streamed
 * HTTP answer) each time and how long the lock is now valid, says "lost" before the
 * validity it last announced ends if it cannot extend, and releases the lock when the
 * owner goes (client gone), when asked, or at shutdown.
 *
 * A hold belongs to one worker (its hold_env) and runs ordinary lock operations
 * (lockop.h: extend, release) through the worker, so they are routed and batched
 * like every other.  docs/DESIGN.md section 10 has the argument: a hold is a client
 * of the lock like any other, and only ever claims what an extension round granted. */
#ifndef RL_HOLD_H
#define RL_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include "lockop.h"

typedef struct hold hold;

enum hold_event {
    HOLD_EXTENDED,   /* extended: valid for validity_ms from now */
    HOLD_LOST,       /* cannot be kept (reason); the hold is over */
    HOLD_RELEASED,   /* released (reason: NULL by a DELETE with its lease, or
                      * "shutting_down"); the hold is over */
};

/* An event for the hold's owner.  After HOLD_LOST or HOLD_RELEASED no other comes. */
typedef void (*hold_cb)(void *owner, int event, int64_t validity_ms, const char *reason);

typedef struct hold_env {
    /* public: set by the worker before use */
    lockop_env *ops;
    void *owner;                               /* the worker */
    void (*start_op)(void *owner, lockop *op); /* start an op (routed like a request's) */
    long max_holds;                            /* whole process */
    long *holds_total;                         /* process-wide count (atomic) */
    /* read-only (relaxed reads by other threads) */
    long n;                                    /* holds on this worker */
    /* private */
    hold *head;
    int stopping;
} hold_env;

/* A hold for an acquire about to be tried, counted against max_holds.  NULL: no room
 * (too many holds, or shutting down) or no memory. */
hold *hold_new(hold_env *env);

/* The acquire was not granted: forget h. */
void hold_discard(hold *h);

/* Keep the lock granted (op: an acquire that succeeded just now) until hold_close();
 * events go to cb(owner, ...). */
void hold_start(hold *h, const lockop *granted, hold_cb cb, void *owner);

/* The owner is gone: release the lock (no more events); the hold frees itself. */
void hold_close(hold *h);

/* A release of name went through (here or, announced, through another instance): a
 * hold of that name checks at once whether its lease still holds the lock, and ends
 * with HOLD_RELEASED if not. */
void hold_check(hold_env *env, const char *name, size_t len);

/* Shutdown: release every hold's lock, then end it with HOLD_RELEASED
 * ("shutting_down"). */
void hold_shutdown(hold_env *env);

/* Free the holds left (at the very end of a shutdown: no more I/O). */
void hold_env_fini(hold_env *env);

#endif
