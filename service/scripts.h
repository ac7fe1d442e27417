/* scripts.h -- the Lua scripts every master runs, by id.  Loaded once per
 * connection (SCRIPT LOAD) and called with EVALSHA; EVAL again on NOSCRIPT.  What a
 * script takes is below (shapes.c and multilock.c build it); the codes it answers are
 * named in proto.h, and the Lua writes them by those names (tests/unit/test_proto.c).
 *
 * A script refused because the master is untrusted answers an error starting with
 * SCRIPT_ERR_UNMARKED or SCRIPT_ERR_QUARANTINED. */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H

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
                         * scripts.c) */
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
                         * SCRIPTS_HOLDER_PERMITS/MINE/FREE (scripts.c) or the holder */
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

/* The Lua source of a script. */
const char *script_source(int id);

/* The code of script id inside SCRIPT_BATCH, or 0 if it is not batched there or a
 * call with nkeys keys and nargs arguments is not the shape the batch expects. */
char script_batch_code(int id, int nkeys, int nargs);

#endif
