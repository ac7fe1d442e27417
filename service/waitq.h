/* waitq.h -- the waiters of each name on the worker that keeps it, and what that
 * worker knows of the name.
 *
 * Per name, a queue holds: the waiters parked in arrival order (the head alone
 * retries, when the lock should expire or at once when a release of the name goes
 * through this instance), the no-wait acquires following the one attempt in flight,
 * that attempt, and what the last round taught (held by which lease, until when).  A
 * multi-name waiter parks in a private queue of its own, woken by a release of any of
 * its names, so that it never blocks the waiters of one name.
 *
 * The queue decides whose turn it is; the operation layer (acquire.c) runs the rounds.
 * It embeds a waiter in each operation and is called back through waitq_hooks: no
 * call goes from here to the operations but through those hooks.
 *
 * Also here, shared by the workers: which names count as contended (the heat map,
 * worker.c routes their operations to the worker that keeps them) and what each
 * keeper knows of its names (seqlock slots any worker reads). */
#ifndef RL_WAITQ_H
#define RL_WAITQ_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "list.h"
#include "loop.h"
#include "validate.h"

#define WAITQ_SLOTS 4096 /* shared slots (heat, knowledge) and release counters, by
                          * name hash (a power of 2) */

struct inbox;
typedef struct waitq waitq;
typedef struct waitq_env waitq_env;
typedef struct waiter waiter;

/* What the keeper of a name knows of it, published for every worker (one slot per
 * name hash, WAITQ_SLOTS of them, a seqlock each): a no-wait acquire of a name known
 * held is answered on the worker the request came to, without a round and without a
 * hop to the keeper. */
typedef struct waitq_known {
    uint32_t seq;          /* odd while written */
    uint64_t name_hash;
    uint64_t lease_hash;   /* the holder's lease */
    int64_t until_us;      /* known until then */
    int64_t free_us;       /* when the holder's lock should expire */
} waitq_known;

/* One operation's place in the queues.  Embedded in the operation, which recovers
 * itself with container_of. */
struct waiter {
    /* public: set by the owner before the waiter is used */
    const char (*names)[NAME_MAX_LEN + 1]; /* its name(s) */
    const size_t *lens;
    size_t nnames;
    int multi;             /* a multi-name waiter (private queue), even with one name */
    const char *lease;     /* its lease: what is known held by it is not "held" for it */
    size_t lease_len;
    const int *gone;       /* its client left (read atomically) */
    int in_flight;         /* the owner's attempt for it is under way (owner writes) */
    /* private */
    waitq *nq;             /* the name's queue while it uses it, or its private queue */
    waitq *q;              /* the queue it is parked in, NULL when not parked */
    list link;             /* in q's parked waiters */
    waiter *f_next;        /* following the attempt in flight */
    int following;
    uint32_t epoch;        /* releases of its name(s) seen when its attempt was sent */
    loop_timer deadline;
};

/* What the queues ask of the operations waiting in them.  Every call comes from the
 * loop or from a waitq_* call made by the owner, never from another thread. */
typedef struct waitq_hooks {
    /* w's turn: send its attempt (waitq_begin() first). */
    void (*attempt)(waiter *w);
    /* w is out of every queue and answered without a round: RL_E_LOCK_HELD (known
     * held; retry_after_ms set), RL_E_QUORUM_UNAVAILABLE (the attempt it followed
     * found no quorum; retry_after_ms is then how many masters answered it),
     * RL_E_CLIENT_CLOSED or RL_E_SHUTTING_DOWN.  A waiter whose attempt is in flight
     * only stops waiting (its round answers). */
    void (*answer)(waiter *w, rl_err why, int64_t retry_after_ms);
    /* w's wait is over: it is out of its queue; answer with its last result (unless
     * its attempt is in flight, whose round answers). */
    void (*waited_out)(waiter *w);
    /* Follow (on 1) or stop following (on 0) the release announcements of name. */
    void (*watch)(waitq_env *env, const char *name, size_t len, int on);
} waitq_hooks;

struct waitq_env {
    /* public: set before use (waitq_env_init sets the rest) */
    const waitq_hooks *hooks;
    loop *loop;
    long max_waiters;
    long *waiters_total;       /* process-wide count of parked waiters (atomic) */
    waitq_known *known;        /* WAITQ_SLOTS shared slots, or NULL */
    int64_t *heat;             /* WAITQ_SLOTS shared slots (atomic): until when a name
                                * counts as contended; or NULL */
    size_t keeper_id, nkeepers; /* names with hash % nkeepers == keeper_id are this
                                * worker's to know */
    const struct inbox *inbox; /* this worker's announcements (inbox.h), or NULL: what it
                                * knows answers "held" only while none waits unread */
    /* read-only (relaxed reads from other threads) */
    size_t parked;             /* waiters parked here */
    uint64_t wakeups, retries; /* heads woken by a release; heads that retried */
    /* private */
    uint32_t rnd;              /* jitter (xorshift; the owner may seed it before init) */
    waitq **buckets;
    size_t nbuckets;
    waitq *mqueues;            /* private queues of multi-name waiters */
    uint32_t *epochs;          /* releases seen, by name hash */
};

int waitq_env_init(waitq_env *env);   /* 0 or -1 (allocation) */
void waitq_env_fini(waitq_env *env);

/* How an acquire enters its name's queue (waitq_admit). */
enum waitq_admission {
    WAITQ_ATTEMPT,     /* nothing in the way: send its attempt now */
    WAITQ_FOLLOWING,   /* follows the attempt in flight: called back when it ends */
    WAITQ_PARKED,      /* parked behind others or a known holder: called back */
    WAITQ_HELD,        /* known held and it cannot wait: answer 409 now */
    WAITQ_REFUSED,     /* cannot wait (*err: too many waiters, or allocation) */
};

/* A single-name acquire arrives on the worker that keeps its name.  One attempt per
 * name is in flight at a time: a no-wait acquire that comes meanwhile follows it and
 * learns its outcome; one that comes while the name is known held is answered 409 at
 * once, without a round; a waiting one queues behind the waiters already there.
 * deadline_us 0: it does not wait.  *retry_after_ms: when the lock should free (HELD,
 * PARKED). */
int waitq_admit(waitq_env *env, waiter *w, int64_t deadline_us, int64_t now_us,
                int64_t *retry_after_ms, rl_err *err);

/* w's attempt is being sent: it becomes its name's attempt in flight, and the
 * releases seen so far are noted. */
void waitq_begin(waitq_env *env, waiter *w);

/* Whether a release of w's name(s) came through here since its attempt was sent
 * (it may have lost to nothing: retry at once). */
int waitq_released_since(waitq_env *env, const waiter *w);

/* Park w (or keep it parked) until its next try in delay_ms, waiting at most until
 * deadline_us.  0, or an error (w is then in no queue). */
rl_err waitq_park(waitq_env *env, waiter *w, int64_t delay_ms, int64_t deadline_us);

/* Take w out of the queue it is parked in.  If a waiter was behind it, the queue's
 * head tries again in next_in_ms (< 0: leave its timer as it is). */
void waitq_leave(waiter *w, int64_t next_in_ms);

/* w's attempt was granted for validity_ms: it leaves its queue; if others want the
 * name (parked, following, or the name is hot) the queue remembers w's lease as the
 * holder, and the next waiter tries when the lock should expire (or at once when it
 * is released through this instance). */
void waitq_granted(waitq_env *env, waiter *w, int64_t validity_ms);

/* A refused attempt of w's saw the name held by lease for free_in_ms. */
void waitq_held(waitq_env *env, waiter *w, const char *lease, size_t len, int64_t free_in_ms);

/* w's attempt (the name's in flight) found fewer than a quorum of masters: the no-wait
 * acquires following it are answered so (503) when it ends, instead of trying again at
 * once, which would double their wait behind masters that just failed to answer.
 * Call before waitq_attempt_ended(). */
void waitq_unavailable(waiter *w, size_t nodes_ok);

/* w's attempt ended: its followers and a head waiter whose turn came go on. */
void waitq_attempt_ended(waiter *w);

/* w's part in its queue is over (answered): the queue is let go, if nothing else
 * needs it, after this loop pass. */
void waitq_detach(waiter *w);

/* The next waiter in line for name (a release may hand the lock over to it), after
 * dropping those whose client left; NULL if none.  *busy: the attempt in flight on
 * the name, if any (then wait for it to end). */
waiter *waitq_next_in_line(waitq_env *env, const char *name, size_t len, waiter **busy);

/* A release of name went through this instance: wake its head waiter (and
 * multi-name waiters with it); what was known of it is over. */
void waitq_wake(waitq_env *env, const char *name, size_t len);

/* Wake the head waiter of every queue (a wake-up message was lost). */
void waitq_wake_all(waitq_env *env);

/* Drop the waiters of name (or of multi-name sets with it) whose client left. */
void waitq_check_gone(waitq_env *env, const char *name, size_t len);

/* Answer every parked waiter and follower now (shutdown). */
void waitq_flush(waitq_env *env);

/* name saw contention: route its operations to the worker that keeps it a while. */
void waitq_heat_up(waitq_env *env, const char *name, size_t len);

/* Whether name counts as contended now.  heat may be NULL. */
int waitq_hot(const int64_t *heat, const char *name, size_t len, int64_t now_us);

/* Whether name is known held, by a lease other than lease, now; *retry_after_ms then
 * says for how long.  inboxes: each keeper's announcements (nkeepers of them, by worker;
 * NULL: none looked at); nothing is known while one waits unread in the inbox of the
 * worker that keeps name.  Safe from any thread. */
int waitq_known_held(const waitq_known *known, const struct inbox *inboxes, size_t nkeepers,
                     const char *name, size_t len, const char *lease, size_t lease_len,
                     int64_t now_us, int64_t *retry_after_ms);

#endif
