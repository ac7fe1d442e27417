/* round.h -- one Redlock round: the same script sent to every master at once, each
 * reply decoded into a slot, and a decision as soon as the outcome is known or the
 * per-master deadline passes.  A slow or dead master costs at most node_timeout
 * and never delays the others.
 *
 * Rounds are owned by one worker (its round_env) and reference-counted: the owner
 * holds one reference, every command in flight another, so a reply arriving after
 * the decision (or after the owner let go) never touches freed memory. */
#ifndef RL_ROUND_H
#define RL_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "master.h"
#include "redlock.h"

typedef struct round round;

typedef struct round_env {
    loop *loop;
    master_conn *masters;
    size_t n;
    size_t quorum;
    int64_t node_timeout_us;
    round *ready_head, *ready_tail; /* decided rounds waiting for their done() */
    round *free_list;
    size_t pooled;                  /* rounds in free_list */
} round_env;

typedef void (*round_cb)(round *rd);
/* A decoder of the owner's own (used instead of reply_decode while undecided). */
typedef void (*round_decode_cb)(round *rd, size_t master, const struct redisReply *r,
                                redlock_reply *out);

struct round {
    round_env *env;
    int script;
    int refs;
    int decided;
    int decision;          /* enum redlock_decision at the time of the decision */
    int wait_all;          /* decide only when every sent command answered (or deadline) */
    int split_aware;       /* a refusal is decided early only when one lease surely holds a
                            * quorum; else every master is heard (or the deadline), so that
                            * votes split between attempts are told from "held" */
    int64_t start_us;
    loop_timer timer;
    round *next_ready;
    round_cb done;         /* called once, from the owner's loop, after the decision */
    round_decode_cb decode; /* optional: decodes replies into the owner's storage */
    void *owner;
    uint64_t token;        /* free for the owner (e.g. the token a raise round raises to) */
    struct round_slot {
        round *rd;
        size_t index;
    } *slots;
    redlock_reply *replies;
};

void round_env_init(round_env *env, loop *l, master_conn *masters, size_t n, size_t quorum,
                    int64_t node_timeout_us);
/* Free the pooled rounds (all rounds must have been released). */
void round_env_fini(round_env *env);

/* A fresh round with one reference (the caller's).  NULL on allocation failure. */
round *round_new(round_env *env, round_cb done, void *owner);

/* Drop a reference; the round returns to the pool when none are left. */
void round_unref(round *rd);

/* Send script with keys/args to the masters in mask (bit i = master i; masters not in
 * mask stay FAILED and count as not answering).  Arms the deadline.  Never fails:
 * masters that cannot take the command are FAILED at once.  The decision may come
 * immediately (all masters down); done() then runs from the ready list. */
void round_send(round *rd, int script, int nkeys, int nargs, const char **argv,
                const size_t *lens, uint64_t mask);

/* Send PING to every connected master (readiness). */
void round_ping(round *rd);

/* The master reply hook (installed in master_hooks by the worker). */
void round_on_reply(master_conn *m, struct redisReply *r, void *priv);

/* Run done() of every decided round (called by the owner once per loop pass). */
void round_env_dispatch(round_env *env);

/* Bit mask of all masters. */
static inline uint64_t round_all(const round_env *env)
{
    return env->n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << env->n) - 1);
}

#endif
