/* lockop.h -- the lock operations as state machines over rounds: acquire (with the
 * fencing raise, release on failure, and waiting with parked retries), release,
 * extend, inspect and readiness.  Owned by one worker; an op belongs to one HTTP
 * request, which is told through done() when the result is ready.
 *
 * Waiting acquirers are parked, not polled: per name, a FIFO of waiters whose head
 * alone retries, when the lock should expire or at once when a release of that name
 * goes through this service instance. */
#ifndef RL_LOCKOP_H
#define RL_LOCKOP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "errors.h"
#include "loop.h"
#include "round.h"
#include "validate.h"

typedef struct lockop lockop;

/* What the worker that keeps a name knows of it, published for every worker (one slot
 * per name hash, LOCKOP_EPOCHS of them, a seqlock each): a no-wait acquire of a name
 * known held is answered on the worker the request came to, without a round and
 * without a hop to the keeper. */
typedef struct lockop_known {
    uint32_t seq;          /* odd while written */
    uint64_t name_hash;
    uint64_t lease_hash;   /* the holder's lease */
    int64_t until_us;      /* known until then */
    int64_t free_us;       /* when the holder's lock should expire */
} lockop_known;
typedef struct lockop_env lockop_env;
typedef struct waitq waitq;

enum lockop_kind { LOCKOP_ACQUIRE, LOCKOP_RELEASE, LOCKOP_EXTEND, LOCKOP_INSPECT, LOCKOP_READY,
                   LOCKOP_MACQUIRE, LOCKOP_MRELEASE };

#define LOCKOP_MULTI_MAX 32 /* names in one multi-name lock */
#define LOCKOP_EPOCHS 4096  /* release counters per worker, by name hash (a power of 2) */

/* Counters a worker keeps (written by its thread only, read relaxed by /metrics). */
enum lockop_counter {
    CNT_ACQ_GRANTED, CNT_ACQ_HELD, CNT_ACQ_UNAVAILABLE, CNT_ACQ_VALIDITY, CNT_ACQ_WAITED_OUT,
    CNT_REL_OK, CNT_REL_NOT_FOUND, CNT_REL_UNAVAILABLE,
    CNT_EXT_OK, CNT_EXT_NOT_FOUND, CNT_EXT_UNAVAILABLE,
    CNT_RAISE_ROUNDS, CNT_WAKEUPS, CNT_RETRIES, CNT_HANDOFFS,
    CNT_SPLITS,         /* acquire rounds refused with no lease holding a quorum */
    CNT_HELD_LOCAL,     /* 409s answered from what the instance knew, without a round */
    CNT_GONE,           /* waiters dropped because their client closed the connection */
    CNT__COUNT
};

struct lockop_env {
    round_env *rounds;
    const config *conf;
    void *owner;                               /* the worker */
    /* A release of name succeeded here: wake waiters on other workers too. */
    void (*released)(lockop_env *env, const char *name, size_t len);
    /* A queue of waiters for name was created / is gone (follow its releases). */
    void (*watch)(lockop_env *env, const char *name, size_t len, int on);
    long *waiters_total;                       /* process-wide count (atomic) */
    waitq **buckets;                           /* name -> its queue (waiters, followers,
                                                * the attempt in flight, what is known) */
    waitq *mqueues;                            /* private queues of multi-name waiters */
    lockop_known *known;                       /* LOCKOP_EPOCHS slots, shared (or NULL) */
    size_t keeper_id, nkeepers;                /* names with hash % nkeepers == keeper_id
                                                * are this worker's to know */
    int64_t *heat;                             /* LOCKOP_EPOCHS slots, shared by the
                                                * workers (atomic): a name's slot holds
                                                * until when it counts as contended */
    size_t nbuckets;
    size_t parked;                             /* waiters parked on this worker */
    long waiting;                              /* acquires with a wait, not yet answered */
    uint32_t *epochs;                          /* releases seen, by name hash (LOCKOP_EPOCHS) */
    const char *origin;                        /* this instance's id, published on release */
    size_t origin_len;
    uint64_t counters[CNT__COUNT];
    uint32_t rnd;                              /* xorshift state for jitter */
};

typedef void (*lockop_done_cb)(lockop *op);

struct lockop {
    lockop_env *env;
    int kind;
    /* input */
    char name[NAME_MAX_LEN + 1];
    size_t name_len;
    char lease[LEASE_MAX_LEN + 1];
    size_t lease_len;
    int lease_fresh;            /* generated for this request: no other attempt can have it */
    long ttl_ms;
    const char *scope;          /* MRELEASE: a name prefix every name must have (NULL: any) */
    int64_t start_us;
    int64_t wait_deadline_us;   /* 0: no waiting */
    /* output */
    rl_err err;
    int64_t validity_ms;
    uint64_t token;
    int held;
    int64_t retry_after_ms;
    size_t nodes_ok;
    int attempts;
    round *rd;                  /* the round in flight or the last one, if kept */
    /* waiting */
    waitq *nq;                  /* its name's queue while it uses it (single-name), or its
                                 * private queue (multi-name, while parked) */
    waitq *q;                   /* the queue it is parked in, NULL when not parked */
    lockop *f_next;             /* following the attempt in flight (no-wait acquires) */
    int following;
    int gone;                   /* its client closed the connection (atomic: set by the
                                 * request's worker) */
    int64_t split_deadline_us;  /* a no-wait acquire retries split rounds until then */
    lockop *q_next, *q_prev;
    loop_timer wait_timer;
    int in_flight;              /* a round for this op is under way */
    uint64_t release_mask;      /* after a failed acquire: masters that may hold the key */
    uint32_t epoch;             /* releases of its name(s) seen when the attempt was sent */
    char value[LEASE_MAX_LEN + 18]; /* "<lease>.<tag>": what this attempt writes; its
                                 * clean-up deletes only keys holding exactly this */
    size_t value_len;
    int partial;                /* the failed attempt was granted by some masters */
    lockop *handoff_from;       /* its attempt is this release's handoff (see try_handoff) */
    lockop *handoff_wait;       /* a release waiting for this head's attempt to end */
    int waiting;                /* counted in env->waiting */
    /* multi-name locks (LOCKOP_MACQUIRE / LOCKOP_MRELEASE), else NULL */
    struct lockop_multi *multi;
    /* completion */
    lockop_done_cb done;
    void *owner;
    /* run by another worker than the request's (worker.c routes waiting acquires) */
    lockop *mb_next;            /* in a worker's mailbox */
    lockop_done_cb home_done;   /* the request's own done(), called on its worker */
    void *home;                 /* that worker */
};

/* The names of a multi-name lock and what the masters said of each. */
typedef struct lockop_multi {
    size_t n;
    char names[LOCKOP_MULTI_MAX][NAME_MAX_LEN + 1];
    size_t lens[LOCKOP_MULTI_MAX];
    uint64_t tokens[LOCKOP_MULTI_MAX];
    uint64_t *fences;           /* [master * n + name] */
    uint64_t *holders;          /* [master * n + name]: hash of the lease holding it, 0 none */
    int have_released_names;    /* MRELEASE: names[] filled from a master's reply */
    int out_of_scope;           /* MRELEASE: a master said a name is outside op->scope */
} lockop_multi;

/* A counter of env's (any thread: a relaxed read). */
uint64_t lockop_counter(const lockop_env *env, int counter);

/* Make op a multi-name op over names (valid, distinct, 1..LOCKOP_MULTI_MAX).
 * Returns 0 or -1 (allocation). */
int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n);

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed);
void lockop_env_fini(lockop_env *env);

/* Prepare op (no I/O).  name/lease must be valid (validate.h). */
void lockop_init(lockop *op, lockop_env *env, int kind, const char *name, size_t name_len,
                 lockop_done_cb done, void *owner);

/* Start it; done() is called later from the loop (never from inside this call). */
void lockop_start(lockop *op);

/* Let go of what op still holds (LOCKOP_READY keeps its round in op->rd, whose
 * replies say per master whether it answered in quorum state, and its rtt). */
void lockop_fini(lockop *op);

/* Let go of what op holds in its worker's rounds (lockop_fini() does it too): for an
 * op about to be handed to another thread. */
void lockop_fini_rounds(lockop *op);

/* Wake the waiters on name (a release went through this instance). */
void lockop_wake(lockop_env *env, const char *name, size_t len);

/* Drop the waiters of name (or of multi-name sets with it) whose client closed the
 * connection; an attempt in flight for one is released when it ends. */
void lockop_check_gone(lockop_env *env, const char *name, size_t len);

/* Whether name counts as contended now (its operations run on the worker that keeps
 * it).  heat may be NULL. */
int lockop_hot(const int64_t *heat, const char *name, size_t len, int64_t now_us);

/* Whether name is known held, by a lease other than lease, now; *retry_after_ms then
 * says for how long.  Safe from any thread. */
int lockop_known_held(const lockop_known *known, const char *name, size_t len, const char *lease,
                      size_t lease_len, int64_t now_us, int64_t *retry_after_ms);

/* Wake the head waiter of every name (a lost wake-up message). */
void lockop_wake_all(lockop_env *env);

/* Answer every parked waiter now with its last result (shutdown). */
void lockop_env_flush_waiters(lockop_env *env);

#endif
