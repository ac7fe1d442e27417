/* scripts.h -- the Lua scripts every master runs, by id.  Loaded once per
 * connection (SCRIPT LOAD) and called with EVALSHA; EVAL again on NOSCRIPT. */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H

enum script_id {
    SCRIPT_ACQUIRE = 0, /* KEYS lock, fence; ARGV lease, ttl -> {1,F} new | {2,F} same lease | {0,pttl,F} */
    SCRIPT_RAISE,       /* KEYS fence; ARGV token -> F after max(F, token) */
    SCRIPT_RELEASE,     /* KEYS lock; ARGV lease, channel -> 1 deleted (and published) | 0 not ours */
    SCRIPT_EXTEND,      /* KEYS lock, fence; ARGV lease, ttl -> {1,F} | {0,F} */
    SCRIPT_INSPECT,     /* KEYS lock, fence -> {value|nil, pttl, F} */
    SCRIPT_MARKER,      /* KEYS marker, quarantine, fresh; ARGV check|mark|quarantine, q_ms, fresh_ms
                         * -> {marked, quarantine pttl, fresh pttl} */
    SCRIPT__COUNT
};

/* The Lua source of a script. */
const char *script_source(int id);

#endif
