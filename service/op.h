/* op.h -- the data of a lock operation and of a worker's operations: what the HTTP
 * side fills in and reads back (struct lockop), what the state machines keep
 * (lockop.c and the files lockop_int.h names), the shapes an acquire can take (one
 * name, shapes.c; several names, multilock.c) and the counters.  Functions are in
 * lockop.h.
 *
 * Ownership, libuv style: each struct says which fields are public (the creator sets
 * them before lockop_start), read-only (results, read after done()) and private (the
 * operation layer's own; nobody else writes them).  op->rd has one rule: while set it
 * holds a reference of its own to the round (round.h), let go only by the lock
 * operations' files (lockop_int.h). */
#ifndef RL_OP_H
#define RL_OP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "errors.h"
#include "list.h"
#include "loop.h"
#include "round.h"
#include "validate.h"
#include "waitq.h"

typedef struct lockop lockop;
typedef struct lockop_env lockop_env;
typedef struct lockop_multi lockop_multi;
typedef struct lockop_shape lockop_shape;
typedef struct lockop_finisher lockop_finisher;

enum lockop_kind { LOCKOP_ACQUIRE, LOCKOP_RELEASE, LOCKOP_EXTEND, LOCKOP_INSPECT, LOCKOP_READY,
                   LOCKOP_MACQUIRE, LOCKOP_MRELEASE,
                   LOCKOP_FORCE /* a release whatever the lease (an admin's) */ };

/* What an operation is about (lockop.mode). */
enum lockop_mode {
    LOCKOP_EXCLUSIVE = 0, /* a lock, one holder */
    LOCKOP_SHARED,        /* ACQUIRE: a reader of a lock (others of its kind may hold it
                           * with it, never an exclusive holder) */
    LOCKOP_SEMAPHORE,     /* a permit of a semaphore: op->name is "#sem:<name>" (keys.h),
                           * the permit one of op->permits slots, each a lock */
};

/* Counters a worker keeps (written by its thread only, read relaxed by /metrics
 * through lockop_counter()). */
enum lockop_counter {
    CNT_ACQ_GRANTED, CNT_ACQ_HELD, CNT_ACQ_UNAVAILABLE, CNT_ACQ_VALIDITY, CNT_ACQ_WAITED_OUT,
    CNT_REL_OK, CNT_REL_NOT_FOUND, CNT_REL_UNAVAILABLE,
    CNT_EXT_OK, CNT_EXT_NOT_FOUND, CNT_EXT_UNAVAILABLE,
    CNT_RAISE_ROUNDS, CNT_WAKEUPS, CNT_RETRIES, CNT_HANDOFFS,
    CNT_SPLITS,         /* acquire rounds refused with no lease holding a quorum */
    CNT_HELD_LOCAL,     /* 409s answered from what the instance knew, without a round */
    CNT_GONE,           /* waiters dropped because their client closed the connection */
    /* acquires answered, by kind (exclusive, shared, semaphore, multi-name): granted,
     * and refused with a 409 (held, contended, permits mismatch) */
    CNT_KIND_GRANTED, CNT_KIND_GRANTED_SHARED, CNT_KIND_GRANTED_SEM, CNT_KIND_GRANTED_MULTI,
    CNT_KIND_REFUSED, CNT_KIND_REFUSED_SHARED, CNT_KIND_REFUSED_SEM, CNT_KIND_REFUSED_MULTI,
    CNT__COUNT
};

struct lockop_env {
    /* public: set by the worker after lockop_env_init() */
    void *owner;                               /* the worker */
    /* A release of name succeeded here: wake waiters on other workers too. */
    void (*released)(lockop_env *env, const char *name, size_t len);
    /* A grant of name succeeded here: whoever watches it may want to know. */
    void (*granted)(lockop_env *env, const char *name, size_t len);
    /* A queue of waiters for name was created / is gone (follow its releases). */
    void (*watch)(lockop_env *env, const char *name, size_t len, int on);
    const char *origin;                        /* this instance's id, published on release */
    size_t origin_len;
    waitq_env wq;                              /* the name queues (public part: waitq.h) */
    /* read-only (relaxed reads from other threads) */
    long waiting;                              /* acquires with a wait, not yet answered */
    uint64_t counters[CNT__COUNT];
    /* private */
    round_env *rounds;
    const config *conf;
    uint32_t rnd;                              /* xorshift state for tags and jitter */
    list finishers;                            /* releases the masters did not all
                                                * confirm, finished here (finisher.c),
                                                * the newest first */
    size_t nfinishers;
};

typedef void (*lockop_done_cb)(lockop *op);

struct lockop {
    /* public: set by the creator (lockop_init, then these) before lockop_start */
    int kind;
    char name[NAME_MAX_LEN + 1];
    size_t name_len;
    char lease[LEASE_MAX_LEN + 1];
    size_t lease_len;
    int lease_fresh;            /* generated for this request: no other attempt can have it */
    char holder[OWNER_MAX_LEN + 1]; /* the "owner" of the API: ACQUIRE: kept with the
                                 * grant (holder_len 0: none); INSPECT: read-only, the
                                 * holder's */
    size_t holder_len;
    long ttl_ms;
    int mode;                   /* enum lockop_mode */
    int permits;                /* LOCKOP_SEMAPHORE, ACQUIRE: how many (1..SEM_MAX_PERMITS) */
    int reentrant;              /* ACQUIRE: a repeated lease counts one more hold */
    long delay_ms;              /* ACQUIRE (exclusive): the lock-delay: a hold that ends
                                 * without a release keeps others out this long more
                                 * (docs/DESIGN.md section 14); 0: none */
    long max_hold_ms;           /* ACQUIRE (exclusive): the hold's bound, counted from
                                 * the grant on each master; 0: none */
    int rest;                   /* RELEASE (exclusive): the hold ended without its
                                 * holder's word: a lock with a lock-delay rests instead
                                 * of going */
    int capped;                 /* EXTEND: up to the hold's bound, rather than refused
                                 * past it (a streamed hold's) */
    uint64_t check_token;       /* INSPECT: the token check asks about this token (0: not
                                 * a check) */
    const char *scope;          /* MRELEASE: a name prefix every name must have (NULL: any) */
    int64_t start_us;
    int64_t wait_deadline_us;   /* 0: no waiting */
    lockop_done_cb done;
    void *owner;
    int gone;                   /* its client closed the connection (atomic: set by the
                                 * request's worker, any time) */
    /* run by another worker than the request's (worker.c routes waiting acquires;
     * worker.c owns these three, mb_next while in a mailbox: mailbox.h) */
    lockop *mb_next;            /* in a worker's mailbox */
    lockop_done_cb home_done;   /* the request's own done(), called on its worker */
    void *home;                 /* that worker */
    /* read-only: results, valid in done() */
    lockop_env *env;
    rl_err err;
    int64_t validity_ms;
    uint64_t token;
    int held;
    long readers;               /* INSPECT: shared holders a quorum of masters count;
                                 * LOCKOP_SEMAPHORE: permits taken */
    long permits_seen;          /* LOCKOP_SEMAPHORE: the masters' number of permits (INSPECT;
                                 * ACQUIRE with RL_E_PERMITS_MISMATCH), 0 unknown */
    int slot;                   /* LOCKOP_SEMAPHORE, ACQUIRE: the permit's slot */
    long holds;                 /* reentrant holds a quorum counts: ACQUIRE, the lease's now;
                                 * RELEASE, what is left (0: released); INSPECT, the
                                 * holder's if op->lease is the holder's */
    int64_t retry_after_ms;
    int resting;                /* ACQUIRE refused: the lock rests (a lock-delay) */
    int64_t rest_ms;            /* INSPECT: how long a lock nobody holds still rests (0:
                                 * it does not) */
    int64_t bound_ms;           /* EXTEND: what is left of the hold's bound (-1: none) */
    int current;                /* INSPECT with check_token: the token is the holder's */
    size_t nodes_ok;
    size_t answered;             /* masters that answered the op's last round (an error
                                  * too), as its 503 says; SIZE_MAX: not known */
    round *rd;                  /* READY: its round (the replies per master) until
                                 * lockop_fini(); otherwise the round in flight */
    lockop_multi *multi;        /* multi-name locks (MACQUIRE, MRELEASE), else NULL */
    /* private (the lock operations' files, lockop_int.h, and the shape's functions) */
    const lockop_shape *shape;
    waiter w;                   /* its place in the name queues (waitq.h) */
    loop_timer done_timer;      /* done() runs from the loop, never inside a call */
    int attempts;
    uint64_t release_mask;      /* after a failed acquire: masters that may hold the key */
    char value[LEASE_MAX_LEN + 18 + 48 + 1 + OWNER_MAX_LEN]; /* "<lease>.<tag>[~<delay>]
                                 * [^<bound>][\n<owner>]":
                                 * what this attempt writes; its clean-up deletes only keys
                                 * holding exactly this (the '!' of an adopted key is
                                 * added on the master, never here) */
    size_t value_len;
    int partial;                /* the failed attempt was granted by some masters */
    int reentry_short;          /* a re-entry that not every master counted (503: it needs
                                 * all of them; answered counts those that did) */
    int64_t split_deadline_us;  /* a no-wait acquire retries split rounds until then */
    int cut_by_shutdown;        /* the shutdown ended its wait while its attempt was in
                                 * flight: no more waiting; refused, it answers
                                 * RL_E_SHUTTING_DOWN (as the parked waiters were) */
    lockop *handoff_from;       /* its attempt is this release's handoff (see release.c: try_handoff) */
    int waiting;                /* counted in env->waiting */
    int64_t hold_ms;            /* a grant: how long a quorum of its masters holds the key
                                 * (the ttl, or more for a re-entry: never shortened), its
                                 * lock-delay aside; an extension: how long it holds it now
                                 * (the ttl, or less at the hold's bound) */
    uint64_t intent_mask;       /* masters an attempt of this waiting writer sent its mark
                                 * to (P#w:): taken back from them when it is answered */
};

/* The names of a multi-name lock and what the masters said of each (multilock.c). */
struct lockop_multi {
    /* read-only after lockop_set_multi (MRELEASE: after done()) */
    size_t n;
    char names[MULTI_MAX_NAMES][NAME_MAX_LEN + 1];
    size_t lens[MULTI_MAX_NAMES];
    uint64_t tokens[MULTI_MAX_NAMES];
    int shared[MULTI_MAX_NAMES]; /* held shared (a reader), else exclusive */
    /* private */
    uint64_t *fences;           /* [master * n + name] */
    uint64_t *holders;          /* [master * n + name]: hash of the lease holding it, 0 none */
    int have_released_names;    /* MRELEASE: names[] filled from a master's reply */
    int out_of_scope;           /* MRELEASE: a master said a name is outside op->scope */
};

/* How an acquire of one shape talks to the masters.  The state machine (acquire.c) is
 * the same for one name and for several; only these differ. */
struct lockop_shape {
    /* Send op's attempt (op->value, op->ttl_ms) in rd. */
    void (*send_acquire)(lockop *op, round *rd);
    /* A granted round: set the fencing token(s); the masters to raise (0: none). */
    uint64_t (*plan_raise)(lockop *op, const round *rd);
    /* Send the raise of the token(s) to the masters in mask. */
    void (*send_raise)(lockop *op, round *rr, uint64_t mask);
    /* After the raise round rr: the granting masters known to hold the token(s). */
    size_t (*fenced)(const lockop *op, const round *rd, const round *rr);
    /* A refused round: RL_E_LOCK_HELD (one lease holds or may hold a quorum: wait for
     * it), RL_E_LOCK_CONTENDED (nobody does: try again soon) or the shape's own error. */
    rl_err (*refused)(lockop *op, const round *rd);
    /* Delete what the failed attempt wrote (exact value) on the masters in mask; for
     * LOCKOP_MRELEASE, the client's release by lease, on every master. */
    void (*send_release)(lockop *op, round *rd, uint64_t mask);
};

#endif
