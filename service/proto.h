/* proto.h -- the script protocol, declared once for both sides: each script's id and
 * what it takes (enum script_id: its keys and arguments; shapes.c and multilock.c
 * build them, SCRIPT_BATCH's list of operations is scripts_lock.c's BATCH_OPS), what
 * it answers (the reply codes below, the holder names a refusal gives, the error
 * prefixes of an untrusted master).  The Lua (the script modules scripts_*.c, gathered
 * by scripts.c) writes every code through these names, stringified into the text at
 * compile time with PROTO_S():
 *
 *     "  return {" PROTO_S(PROTO_ACQ_GRANTED) ", f}\n"      the Lua reads "return {1, f}"
 *
 * and the C that decodes the answers (reply.c, multilock.c, master.c, trust.c,
 * redlock.c, resync.c, listop.c) compares with the same names, so the two cannot drift
 * apart.  A code is a plain integer literal here (PROTO_S of "(1)" would put the
 * parentheses in the Lua).  tests/unit/test_proto.c fails on a code written as a bare
 * literal in a script module's Lua or compared as one by a decoder, and on a name here
 * that its script no longer answers.
 *
 * Every lock script (those that start with PRELUDE: all but SCRIPT_MARKER and
 * SCRIPT_PROOF) answers, first, the master time it ran at (ms, the TIME its clock window
 * was checked with; PROTO_TIME_NONE when it carried no window): as SCRIPT_BATCH {time,
 * reply1, ..., replyn}; sent alone, an array reply {e1, ..., en} as {time, e1, ..., en},
 * any other reply (an integer, an error returned) as {"<time>", reply}: the time an
 * integer in front of an array's elements, a string in front of anything else, so that
 * the two are told apart (and an array costs no table more).  master.c judges the time
 * (docs/DESIGN.md §4, Rule 7) and hands each reply on as the script made it, so the
 * shapes below are the replies' and no decoder sees the time.  An error for the whole
 * call (PRELUDE's refusals, a script that raised) is not wrapped.
 *
 * A script's code is the first element of its answer, or the answer itself when that
 * is an integer:
 *
 * FN_ACQUIRE, FN_SHARED, FN_SEM_ACQUIRE (and FN_HANDOFF where the old lease has no key)
 *   PROTO_ACQ_GRANTED       {1, F}                 a free key set
 *   PROTO_ACQ_ADOPTED       {2, F, holds, pttl}    the lease's own key, adopted
 *   PROTO_ACQ_REFUSED       {0, pttl, F, holder}   held, or readers hold it, or a
 *                                                  writer waits, or other permits
 * FN_HANDOFF
 *   PROTO_HANDOFF_REPLACED  {3, F}                 the old lease's key now holds the
 *                                                  new value
 *   PROTO_HANDOFF_KEPT + c  {20 + c, pttl, F, old} the old lease keeps c >= 1 holds
 *   PROTO_HANDOFF_READER + an acquire's code       the old lease was a reader, gone
 * FN_RELEASE, FN_SEM_RELEASE
 *   PROTO_REL_DELETED       {1, pttl}              deleted (or left resting); a bare 1:
 *                                                  a reader's entry gone
 *   PROTO_REL_KEPT + c      {10 + c, pttl}         c >= 1 holds left
 *   PROTO_REL_NOT_OURS      0
 * FN_EXTEND, FN_SEM_EXTEND
 *   PROTO_EXT_EXTENDED      {1, F}, {1, F, left}   extended (left: of the hold's
 *                                                  bound); a permit's {1, F, slot}
 *   PROTO_EXT_PAST_BOUND    {3, F, left}           refused, past the hold's bound
 *   PROTO_EXT_REFUSED       {0, F}                 not the lease's, or it rests
 * FN_FORCE
 *   PROTO_FORCE_RESTING     2                      left resting for its lock-delay
 *   PROTO_FORCE_DELETED     1                      deleted
 *   PROTO_FORCE_NO_KEY      0                      no key
 * FN_SCAN                   {more, name1, ...}     PROTO_SCAN_MORE: the scan stopped
 *                                                  before its end, else PROTO_SCAN_DONE
 * SCRIPT_MACQUIRE           {1, f1..fn} | {0, pttl, f1..fn, holder1..n}  (multilock.c)
 * SCRIPT_MRELEASE           {1 | 0 | -1, names}    released, nothing of ours, a name
 *                                                  outside the scope  (multilock.c)
 * SCRIPT_MARKER             {state, pttl, nb}      the master's record (master.c,
 *                                                  trust.c, redlock.c)
 * SCRIPT_PROOF              {proven, F, pttl, history, why}  (resync.c)
 *
 * RAISE and MRAISE answer counters, INSPECT and SEM_INSPECT a table of values, UNWANT
 * ZREM's count: no codes.  FN_* are the Lua functions of scripts_lock.c and
 * scripts_sem.c; each SCRIPT_* below says what its script takes. */
#ifndef RL_PROTO_H
#define RL_PROTO_H

/* A code as Lua text: PROTO_S(PROTO_ACQ_GRANTED) is "1". */
#define PROTO_S_(x) #x
#define PROTO_S(x) PROTO_S_(x)

enum script_id {
    /* Every lock script: KEYS[1] the master's record (master.c adds it); the shapes
     * below are what follows it.  A bucket is "b<k>", k a name's hash modulo
     * KEYS_BUCKETS (keys.h): the name's fencing counter. */
    SCRIPT_ACQUIRE = 0, /* KEYS lock, readers, intents; ARGV bucket, value, ttl, channel,
                         * origin, intent (ms; > 0: the attempt will wait, and readers
                         * queue behind it that long) -> {1,F} new (announced as
                         * "+<origin>" on the channel) | {2,F,holds,pttl} same lease
                         * (adopted; its expiry never shortened, pttl the key's now) |
                         * {0,pttl,F,holder lease or SCRIPTS_HOLDER_SHARED} */
    SCRIPT_RAISE,       /* ARGV bucket, token -> F after max(F, token) */
    SCRIPT_RELEASE,     /* KEYS lock, readers, tags; ARGV lease (any tag), "<lease>*<t>"
                         * (its holds lowered to t, 0: deleted; t < 0: deleted only at
                         * one hold) or value (exact), channel, origin -> {1,pttl}
                         * deleted (origin published on channel) | {10+c,pttl} c holds
                         * left | 1 a reader's entry gone | 0 not ours */
    SCRIPT_EXTEND,      /* KEYS lock, set of the lease, readers, tags; ARGV bucket, lease, ttl
                         * -> {1,F} | {0,F} (the exclusive holder's, or a reader's) */
    SCRIPT_INSPECT,     /* KEYS lock, readers; ARGV bucket -> {lease|nil, pttl, F, owner|"",
                         * readers, longest reader's pttl} */
    SCRIPT_MARKER,      /* sent as is (no record key added): KEYS record, quarantine;
                         * ARGV check|mark|quarantine|shorten|rejoin, run id, delay ms,
                         * instance, base (rejoin) or delay left (shorten) -> {0 unmarked |
                         * 1 ready | 2 quarantined, pttl, counters} */
    SCRIPT_MACQUIRE,    /* KEYS lock1..n, set, readers1..n; ARGV (modes: 's' shared or 'x'
                         * per name, last) value, ttl, n, "name1\nname2...", bucket1..n,
                         * key prefix, origin -> {1, f1..fn} (each name announced as a
                         * grant) | {0, pttl (longest held), f1..fn, holder1..n} */
    SCRIPT_MRAISE,      /* ARGV t1..tn, bucket1..n -> {F1..Fn} after max(F, t) */
    SCRIPT_MRELEASE,    /* KEYS set; ARGV lease or value, key prefix, origin, scope ->
                         * {1|0, "name1\nname2..."} | {-1, names}: a name outside scope */
    SCRIPT_HANDOFF,     /* KEYS lock, readers, tags, intents; ARGV bucket, old lease, new
                         * value, ttl, channel, origin -> {3,F} old replaced by new
                         * (announced as a grant) | else as SCRIPT_ACQUIRE for the new
                         * value, its first element + 10 if the old lease was a reader
                         * (released) */
    SCRIPT_BATCH,       /* many single-name operations in one call (master.c batches each
                         * loop pass's): ARGV code1, args1..., code2, args2...; KEYS keys1...,
                         * keys2... -> {reply1, reply2, ...}, each as its own script answers */
    SCRIPT_PROOF,       /* sent as is: KEYS record, expiry -> {proven, largest counter,
                         * expiry pttl, history, why} (a repair reads it from each master:
                         * scripts_record.c) */
    SCRIPT_FORCE,       /* KEYS lock, readers, tags, intents; ARGV channel, origin -> 1 deleted whatever its value
                         * (origin published on channel) | 0 no key */
    SCRIPT_SCAN,        /* ARGV pattern, prefix length, limit, SCAN calls -> {more, name1,
                         * name2, ...} (names of the lock keys matching, prefix cut) */
    SCRIPT_SHARED,      /* KEYS lock, readers, tags, intents; ARGV bucket, value, ttl, channel,
                         * origin -> {1,F} a reader now (announced as a grant) | {2,F,1,
                         * pttl} a reader already (adopted, never shortened) | {0,pttl,F,holder}: the exclusive
                         * holder's lease, or SCRIPTS_HOLDER_WRITER */
    SCRIPT_SEM_ACQUIRE, /* KEYS slot, semaphore record; ARGV bucket, value, ttl, channel,
                         * origin, permits, slot, slot key prefix, scan (1: look for the
                         * lease in the other slots) -> as SCRIPT_ACQUIRE; refusals name
                         * SCRIPTS_HOLDER_PERMITS/MINE/FREE (proto.h) or the holder */
    SCRIPT_SEM_RELEASE, /* KEYS record; ARGV who, channel, origin, slot key prefix -> {1,pttl} | 0 */
    SCRIPT_SEM_EXTEND,  /* KEYS record; ARGV bucket, lease, ttl, slot key prefix -> {1,F} | {0,F} */
    SCRIPT_SEM_INSPECT, /* KEYS record; ARGV bucket, slot key prefix -> {nil, longest pttl,
                         * F, "", permits taken, permits} */
    SCRIPT_UNWANT,      /* KEYS intents; ARGV lease -> 1 | 0: a waiting writer's mark taken
                         * back (it was granted, gave up or left) */
    SCRIPT__COUNT
};

/* What a refusal names instead of a holding lease ('#' is never in a lease). */
#define SCRIPTS_HOLDER_SHARED "#shared"   /* readers hold the name */
#define SCRIPTS_HOLDER_WRITER "#writer"   /* a writer waits: readers queue behind it */
#define SCRIPTS_HOLDER_PERMITS "#permits:" /* then the semaphore's number of permits */
#define SCRIPTS_HOLDER_MINE "#mine:"     /* then the slot the lease holds already */
#define SCRIPTS_HOLDER_FREE "#free:"     /* then free slots, space-separated */
/* A lock that rests after its holder ended without a release (a lock-delay,
 * docs/DESIGN.md section 14): named by refusals, and the value of a key left resting
 * by a force or a failed hold. */
#define SCRIPTS_HOLDER_RESTING "#resting"

#define SCRIPT_ERR_UNMARKED "REDLOCKD_UNMARKED"
#define SCRIPT_ERR_QUARANTINED "REDLOCKD_QUARANTINED"
#define SCRIPT_ERR_CLOCK "REDLOCKD_CLOCK" /* then "<its time ms> <lo>:<hi>": the window */

/* The time a lock script answers first when it carried no clock window (it read none). */
#define PROTO_TIME_NONE 0

/* An acquire's answer (SCRIPT_ACQUIRE, SCRIPT_SHARED, SCRIPT_SEM_ACQUIRE; and
 * SCRIPT_HANDOFF where the old lease did not hold the key). */
#define PROTO_ACQ_REFUSED 0
#define PROTO_ACQ_GRANTED 1
#define PROTO_ACQ_ADOPTED 2

/* SCRIPT_HANDOFF's own. */
#define PROTO_HANDOFF_REPLACED 3
#define PROTO_HANDOFF_READER 10 /* added to an acquire's code */
#define PROTO_HANDOFF_KEPT 20   /* plus the holds the old lease keeps (>= 1) */

/* SCRIPT_RELEASE, SCRIPT_SEM_RELEASE. */
#define PROTO_REL_NOT_OURS 0
#define PROTO_REL_DELETED 1
#define PROTO_REL_KEPT 10       /* plus the holds left (>= 1) */

/* SCRIPT_EXTEND, SCRIPT_SEM_EXTEND. */
#define PROTO_EXT_REFUSED 0
#define PROTO_EXT_EXTENDED 1
#define PROTO_EXT_PAST_BOUND 3

/* SCRIPT_FORCE. */
#define PROTO_FORCE_NO_KEY 0
#define PROTO_FORCE_DELETED 1
#define PROTO_FORCE_RESTING 2

/* SCRIPT_SCAN: its first element. */
#define PROTO_SCAN_DONE 0
#define PROTO_SCAN_MORE 1

/* SCRIPT_MACQUIRE: its first element. */
#define PROTO_MACQ_REFUSED 0
#define PROTO_MACQ_GRANTED 1

/* SCRIPT_MRELEASE: its first element. */
#define PROTO_MREL_OUT_OF_SCOPE -1 /* nothing released */
#define PROTO_MREL_NONE 0          /* no name of the set was the lease's */
#define PROTO_MREL_RELEASED 1

/* SCRIPT_MARKER: the record's state, its first element (master_conn.seen_state, -1
 * there for unknown, and redlock_peer_view.state). */
#define PROTO_MARKER_UNMARKED 0
#define PROTO_MARKER_READY 1
#define PROTO_MARKER_QUARANTINED 2

/* SCRIPT_PROOF: its first element (proven), its fourth (history) and its fifth (why)
 * when only the master's clock keeps it out (its counters count, its expiry key not). */
#define PROTO_PROOF_UNPROVEN 0
#define PROTO_PROOF_PROVEN 1
#define PROTO_PROOF_NO_HISTORY 0
#define PROTO_PROOF_HISTORY 1
#define PROTO_PROOF_CLOCK "clock"

#endif
