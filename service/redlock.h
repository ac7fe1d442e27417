/* redlock.h -- the pure logic of Redlock as redlockd runs it: validity and drift
 * maths, quorum decisions over per-master results, fencing-token choice, the
 * retry-after estimate and the retry jitter.  No I/O, no clocks: unit-testable.
 *
 * The reasoning behind each rule is in docs/DESIGN.md; keep the two in agreement. */
#ifndef RL_REDLOCK_H
#define RL_REDLOCK_H

#include <stddef.h>
#include <stdint.h>

/* What one master said in one round. */
enum redlock_slot_state {
    RL_SLOT_PENDING = 0, /* no answer yet */
    RL_SLOT_OK,          /* granted / released / extended / held by this lease */
    RL_SLOT_REFUSED,     /* answered, but no (held by another lease, not ours...) */
    RL_SLOT_FAILED,      /* error reply, timeout, connection down or quarantined */
};

#define REDLOCK_VALUE_MAX 128
/* An owner (validate.h's OWNER_MAX_LEN): what a grant was made for, shown by GET. */
#define REDLOCK_OWNER_MAX 256

typedef struct redlock_reply {
    int state;           /* enum redlock_slot_state */
    uint64_t fence;      /* the master's fencing counter F(name), 0 if none */
    int64_t pttl;        /* remaining ttl of the key in ms; -1 no expiry, -2 no key */
    int raised;          /* acquire: the master acknowledged F >= token */
    int released;        /* handoff: the old lease held the key, the new one has it now */
    int64_t rtt_us;      /* time from the round's start to this reply */
    uint8_t value_len;   /* inspect: the value the key holds (never shown) */
    int has_value;
    char value[REDLOCK_VALUE_MAX];
    uint16_t owner_len;  /* inspect: the owner stored with the grant (0: none) */
    char owner[REDLOCK_OWNER_MAX];
    int64_t count;       /* inspect: readers of a lock, or permits taken of a semaphore */
    int64_t count_pttl;  /* inspect: the longest reader's remaining ms (locks); the
                          * semaphore's number of permits (semaphores) */
    int64_t holds;       /* acquire (granted): the holds the lease counts now (reentrant);
                          * inspect: the holder's */
    int64_t left;        /* release, handoff: holds the lease still counts (0: released) */
    int answered;        /* the master answered anything in time (an error too) */
    int64_t bound_ms;    /* extend: what is left of the hold's max_hold_ms on this master
                          * (-1: the lock has none); refused with it: the extension would
                          * pass it */
    uint64_t stored;     /* inspect: the token the holder's key was granted with (0: not
                          * known) */
    int64_t rest_ms;     /* inspect: how long a key with a lock-delay, or resting, still
                          * keeps the name from others (0: none of those) */
    int rested;          /* force: the lock was left resting (its lock-delay) */
} redlock_reply;

/* Counts over a round's replies. */
typedef struct redlock_tally {
    size_t n, ok, refused, failed;
    size_t answered;     /* masters that answered in time, whatever they said */
} redlock_tally;

void redlock_tally_of(const redlock_reply *r, size_t n, redlock_tally *t);

/* Drift allowance in ms: ceil(ttl * factor) + 2. */
int64_t redlock_drift_ms(int64_t ttl_ms, double drift_factor);

/* What an inspection (GET) answers as validity_ms, meaning what a grant's does: how
 * long from the request's start the lock surely stays held.  remaining_ms is the
 * expiry a quorum of masters reported, less the time the round took (-1: a key
 * without expiry, answered -1); the drift allowance on it is taken off as a grant's
 * is (ceil(remaining * factor) + 2 ms), floored at 0. */
int64_t redlock_inspect_validity_ms(int64_t remaining_ms, double drift_factor);

/* Validity in ms left after elapsed_us: ttl - elapsed - drift, floored. May be <= 0. */
int64_t redlock_validity_ms(int64_t ttl_ms, int64_t elapsed_us, double drift_factor);

enum redlock_decision {
    RL_DECIDE_WAIT = 0,     /* not known yet: keep waiting for replies */
    RL_DECIDE_QUORUM,       /* >= quorum said OK */
    RL_DECIDE_NO_QUORUM,    /* >= quorum answered, but fewer than quorum said OK */
    RL_DECIDE_UNAVAILABLE,  /* fewer than quorum answered at all */
};

/* Decide a round from its tally.  With wait_all, answer only when nothing is pending
 * (used where every reply matters, e.g. inspection); otherwise answer as soon as the
 * outcome can no longer change. */
int redlock_decide(const redlock_tally *t, size_t quorum, int wait_all);

/* Fencing: the token for a grant is max(F) over the masters that granted.
 * Returns 0 if none granted. */
uint64_t redlock_token(const redlock_reply *r, size_t n);

/* After a round granted by a quorum over k names (fences[i * k + j]: the counter
 * master i answered for name j; NULL for one name, whose counters are r[i].fence):
 * tokens[j] becomes the largest counter among the granting masters, and the result is
 * the set of answering masters (bit i) below some token, to raise before the tokens
 * are issued -- or 0 when a quorum of granting masters already hold every token: the
 * tokens are fenced (docs/DESIGN.md, section 3).  One name and several take the same
 * plan. */
uint64_t redlock_plan_raise(const redlock_reply *r, size_t n, size_t quorum, const uint64_t *fences,
                            size_t k, uint64_t *tokens);

/* After the raise: how many granting masters hold every token, having answered at or
 * above it, or acknowledged the raise (bit i of acked).  The tokens may be issued only
 * when this reaches the quorum. */
size_t redlock_fenced(const redlock_reply *r, size_t n, const uint64_t *fences, size_t k,
                      const uint64_t *tokens, uint64_t acked);

/* A refused multi-name round (holders[i * k + j]: a fingerprint of the lease holding
 * name j on master i, 0 none): whether one lease holds, or may hold counting the
 * masters that did not answer, a quorum for one of the names.  No: the votes split. */
int redlock_any_held_by_quorum(const redlock_reply *r, size_t n, size_t quorum,
                               const uint64_t *holders, size_t k);

/* A handoff round's release side: ok = masters where the old lease was replaced,
 * refused = masters that answered without it, failed = the others. */
void redlock_handoff_tally(const redlock_reply *r, size_t n, redlock_tally *t);

/* When the lock frees on a quorum: the quorum-th smallest remaining ttl among the
 * masters (0 for masters where it is free or ours), or fallback_ms when fewer than
 * quorum values are known (failed masters, keys without expiry). */
int64_t redlock_retry_after_ms(const redlock_reply *r, size_t n, size_t quorum,
                               int64_t fallback_ms);

/* Inspection: the value held by >= quorum masters, if any.  Returns the index of a
 * master holding it (its reply has value/pttl), or -1.  *valid_ms receives the
 * quorum-th largest pttl among the holders (how long a quorum still holds it). */
int redlock_inspect_holder(const redlock_reply *r, size_t n, size_t quorum, int64_t *valid_ms);

/* Inspection of shared holders or permits: the largest c such that at least quorum
 * masters that answered count c or more (readers of a lock, permits taken of a
 * semaphore): what a quorum agrees is held, at least.  0 if fewer answered. */
int64_t redlock_quorum_count(const redlock_reply *r, size_t n, size_t quorum);

/* The largest c such that at least quorum of the k values are c or more (0 if k <
 * quorum).  v is sorted in place. */
int64_t redlock_quorum_at_least(int64_t *v, size_t k, size_t quorum);

/* How long a granted lock lives, as a quorum of its granting masters holds it: the
 * quorum-th largest of what each granting master's key has left (the script's pttl for
 * a key it found held by the lease and never shortened; ttl_ms for a key it set), so
 * that a re-entry's answer is the lock's own and a fresh grant's is its ttl.  ttl_ms
 * when fewer than quorum granted.  The validity is then redlock_validity_ms() of it. */
int64_t redlock_granted_ms(const redlock_reply *r, size_t n, size_t quorum, int64_t ttl_ms);

/* An extension granted by a quorum: how long its key lives, as a quorum of the
 * masters that extended it holds it: the quorum-th largest of ttl_ms, or what is left
 * of the hold's bound where a master capped it there (bound_ms).  ttl_ms when fewer
 * than quorum extended. */
int64_t redlock_extended_ms(const redlock_reply *r, size_t n, size_t quorum, int64_t ttl_ms);

/* What is left of a hold's bound (max_hold_ms), as the masters that answered with one
 * say: the quorum-th largest among the masters that extended (ok), or the smallest
 * among those that refused for it (!ok).  -1 when none said. */
int64_t redlock_bound_left_ms(const redlock_reply *r, size_t n, size_t quorum, int ok);

/* An inspection of a lock nobody holds: how long until a quorum of masters is free of
 * it -- the quorum-th smallest of what each master's key with a lock-delay (or left
 * resting) still has (0 where there is none; a master that did not answer counts as
 * never).  0: free now (or nothing rests). */
int64_t redlock_resting_ms(const redlock_reply *r, size_t n, size_t quorum);

/* The token check (docs/DESIGN.md section 14): whether token is the current holder's.
 * holder is the index redlock_inspect_holder() returned (-1: nobody holds the name on
 * a quorum: no).  Yes when the largest token stored with the holder's keys, over the
 * masters that answered holding them, is token. */
int redlock_token_current(const redlock_reply *r, size_t n, int holder, uint64_t token);

/* A release, from what each master says the lease keeps there after it: left[i] the
 * holds master i still counts (0: it deleted the key, or never had it), negative when
 * master i has not answered (it may still hold the key, at any count).  Returns 1 when
 * the masters yet to answer cannot change how many holds a quorum may still count,
 * which goes to *holds (0: no quorum can hold the key for the lease any more: released;
 * that takes n - quorum + 1 masters answering 0); else 0 (the outcome is not known;
 * *holds is the most a quorum may count, INT64_MAX when that is unbounded). */
int redlock_release_known(const int64_t *left, size_t n, size_t quorum, int64_t *holds);

/* What a release the masters did not all confirm still has to do on those that did not
 * answer: lower the lease's holds to the most any master that had the lease says is
 * left (found: bit i, master i had it), so that it is done once however often it is
 * sent; -1 when no master that answered had the lease (then only a single hold is let
 * go, and more are left alone: a reentrant count nobody saw is not guessed at). */
int64_t redlock_release_target(const int64_t *left, uint64_t found, size_t n);

/* A refused acquire round: whether one lease holds a quorum of the masters, or might
 * (it holds some and the masters that did not answer would make a quorum).  No: the
 * votes were split between attempts, and nobody holds the lock on a quorum. */
int redlock_held_by_quorum(const redlock_reply *r, size_t n, size_t quorum);

/* Whether one lease holds a quorum among the refusals already in (no guessing about
 * masters that have not answered). */
int redlock_held_for_sure(const redlock_reply *r, size_t n, size_t quorum);

/* Highest fencing counter any master reported. */
uint64_t redlock_max_fence(const redlock_reply *r, size_t n);

/* Delay before a waiting acquirer tries again, in ms: after lock_held, at the moment
 * the lock should free (retry_after_ms) plus jitter; after a failed quorum, a
 * randomized back-off.  Never past remaining_ms.  rnd is a uniform random 32-bit value. */
int64_t redlock_retry_delay_ms(int lock_held, int64_t retry_after_ms, int64_t remaining_ms,
                               uint32_t rnd);

/* The verdict on a master found without its record (docs/DESIGN.md, rule 3), from what
 * the other masters answered.  state: -1 unknown, 0 unmarked, 1 ready, 2 quarantined;
 * fresh: that answer is to a check sent after the master was found bare. */
typedef struct redlock_peer_view {
    int state;
    int fresh;
} redlock_peer_view;

enum redlock_verdict {
    RL_VERDICT_WAIT = 0,    /* not every other master has answered a fresh check */
    RL_VERDICT_MARK,        /* no master carries a record: a new cluster, nothing was ever
                             * granted: join it */
    RL_VERDICT_QUARANTINE,  /* another master carries a record: the cluster may have
                             * granted through this one, which lost its data */
};

int redlock_judge_unmarked(const redlock_peer_view *peers, size_t n);

#endif
