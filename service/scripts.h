/* scripts.h -- the Lua scripts every master runs, by id.  Loaded once per
 * connection (SCRIPT LOAD) and called with EVALSHA; EVAL again on NOSCRIPT. */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H

enum script_id {
    SCRIPT_ACQUIRE = 0, /* KEYS lock, fence; ARGV lease, ttl -> {1,F} new | {2,F} same lease | {0,pttl,F} */
    SCRIPT_RAISE,       /* KEYS fence; ARGV token -> F after max(F, token) */
    SCRIPT_RELEASE,     /* KEYS lock; ARGV lease, channel, origin -> 1 deleted (origin published
                         * on channel) | 0 not ours */
    SCRIPT_EXTEND,      /* KEYS lock, fence; ARGV lease, ttl -> {1,F} | {0,F} */
    SCRIPT_INSPECT,     /* KEYS lock, fence -> {value|nil, pttl, F} */
    SCRIPT_MARKER,      /* KEYS marker, quarantine, fresh; ARGV check|mark|quarantine, q_ms, fresh_ms
                         * -> {marked, quarantine pttl, fresh pttl} */
    SCRIPT_MACQUIRE,    /* KEYS lock1..n, fence1..n, set; ARGV lease, ttl, n, "name1\nname2..."
                         * -> {1, f1..fn} | {0, pttl (longest held), f1..fn} */
    SCRIPT_MRAISE,      /* KEYS fence1..n; ARGV t1..tn -> {F1..Fn} after max(F, t) */
    SCRIPT_MRELEASE,    /* KEYS set; ARGV lease, key prefix, origin -> {1|0, "name1\nname2..."} */
    SCRIPT_HANDOFF,     /* KEYS lock, fence; ARGV old lease, new lease, ttl -> {3,F} old replaced
                         * by new | else as SCRIPT_ACQUIRE for the new lease */
    SCRIPT_BATCH,       /* many single-name operations in one call (master.c batches each
                         * loop pass's): ARGV code1, args1..., code2, args2...; KEYS keys1...,
                         * keys2... -> {reply1, reply2, ...}, each as its own script answers */
    SCRIPT__COUNT
};

/* The Lua source of a script. */
const char *script_source(int id);

/* The code of script id inside SCRIPT_BATCH, or 0 if it is not batched there or a
 * call with nkeys keys and nargs arguments is not the shape the batch expects. */
char script_batch_code(int id, int nkeys, int nargs);

#endif
