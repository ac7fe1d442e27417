/* hold.h -- locks held for as long as their client stays: after a grant, the service
 * itself extends the lease about every third of its ttl, tells its owner (a streamed
 * HTTP answer) each time, says "lost" before the validity of its last successful round
 * ends if it cannot extend, and releases the lock when the owner goes (client gone),
 * when asked, or at shutdown.
 *
 * Two modes (docs/DESIGN.md section 10):
 * - immediate (a one-way stream): whatever ends the hold releases the lock at once,
 *   but HOLD_LOST ("no_quorum"), said a margin before the validity of the last line
 *   (grant or extended) ends, which releases it only once that validity has run out;
 *   HOLD_LOST and HOLD_RELEASED are the last events.
 * - told (a duplex stream): the owner tells its client validities (hold_answer()), and
 *   the hold never lets the lock go before the last validity told has run out
 *   (told_until), unless the client asked (hold_release(), or a DELETE with the lease).
 *   After HOLD_LOST the hold waits for that (or for hold_release()), releases, and ends
 *   with HOLD_OVER.
 *
 * A hold belongs to one worker (its hold_env) and runs ordinary lock operations
 * (lockop.h: extend, release) through the worker, so they are routed and batched
 * like every other. */
#ifndef RL_HOLD_H
#define RL_HOLD_H

#include <stddef.h>
#include <stdint.h>

#include "list.h"
#include "lockop.h"

typedef struct hold hold;

enum hold_event {
    HOLD_EXTENDED,   /* extended: valid for validity_ms from now */
    HOLD_LOST,       /* cannot be counted on any more (reason: "no_quorum",
                      * "lease_lost", "shutting_down", "bad_message", or "max_hold": the
                      * hold reached its bound, docs/DESIGN.md section 14).  Immediate mode: the
                      * hold is over.  Told mode: HOLD_OVER follows once the lock is let
                      * go */
    HOLD_RELEASED,   /* released (reason: NULL by a DELETE with its lease, "requested",
                      * "client_silent", or "shutting_down"); the hold is over */
    HOLD_OVER,       /* told mode, after HOLD_LOST: the lock was let go (or left to
                      * expire); the hold is over */
};

enum hold_mode { HOLD_IMMEDIATE, HOLD_TOLD };

/* An event for the hold's owner.  After the last one (see enum hold_event) no other
 * comes, and the hold frees itself. */
typedef void (*hold_cb)(void *owner, int event, int64_t validity_ms, const char *reason);

typedef struct hold_env {
    /* public: set by the worker before use (then hold_env_init) */
    lockop_env *ops;
    void *owner;                               /* the worker */
    void (*start_op)(void *owner, lockop *op); /* start an op (routed like a request's) */
    long max_holds;                            /* whole process */
    long *holds_total;                         /* process-wide count (atomic) */
    /* read-only (relaxed reads by other threads) */
    long n;                                    /* holds on this worker */
    /* private */
    list holds;                                /* started holds (hold.link), the newest
                                                * first */
    int stopping;
} hold_env;

/* Ready env, whose public fields are set, for its first hold. */
void hold_env_init(hold_env *env);

/* A hold for an acquire about to be tried, counted against max_holds.  NULL: no room
 * (too many holds, or shutting down) or no memory. */
hold *hold_new(hold_env *env);

/* The acquire was not granted: forget h. */
void hold_discard(hold *h);

/* Keep the lock granted (op: an acquire that succeeded just now) until the hold ends;
 * events go to cb(owner, ...).  Told mode: the first extension starts at once, and
 * nothing counts as told until hold_told_grant(). */
void hold_start(hold *h, const lockop *granted, int mode, hold_cb cb, void *owner);

/* Told mode: the grant (its validity, counted from the request) was written to the
 * client: the hold never lets go before that validity ends. */
void hold_told_grant(hold *h);

/* Told mode: the validity to tell the client now, in ms (at least 1), counted from
 * now, and recorded as told; 0: not known yet (the first extension has not succeeded:
 * ask again at HOLD_EXTENDED); -1: none (the hold is ending). */
int64_t hold_answer(hold *h);

/* The client asks to let the lock go (reason: "requested", or "client_silent" when it
 * has been silent: then not before the validity told has run out).  Only "requested"
 * frees a lock with a lock-delay at once: every other end of a hold lets it rest
 * (docs/DESIGN.md section 14).  Ends with
 * HOLD_RELEASED (reason) if the release reached a quorum, else HOLD_LOST
 * ("no_quorum") and HOLD_OVER; after HOLD_LOST, with HOLD_OVER. */
void hold_release(hold *h, const char *reason);

/* Told mode: the owner ends the hold without its client's consent (a bad message):
 * HOLD_LOST (reason) now, the release at the end of the validity told (or at
 * hold_release()), then HOLD_OVER. */
void hold_fail(hold *h, const char *reason);

/* The owner is gone: no more events; the lock is released (immediate mode: at once;
 * told mode: once the validity told has run out) and the hold frees itself. */
void hold_close(hold *h);

/* A release of name went through (here or, announced, through another instance): a
 * hold of that name checks at once whether its lease still holds the lock, and ends
 * with HOLD_RELEASED if not. */
void hold_check(hold_env *env, const char *name, size_t len);

/* Shutdown.  Immediate mode: release every hold's lock, then end it with
 * HOLD_RELEASED ("shutting_down").  Told mode: HOLD_LOST ("shutting_down") at once,
 * the release at the end of the validity told (or at hold_release()), then HOLD_OVER. */
void hold_shutdown(hold_env *env);

/* Free the holds left (at the very end of a shutdown: no more I/O).  A hold still
 * waiting to let go leaves its keys to expire on the masters. */
void hold_env_fini(hold_env *env);

#endif
