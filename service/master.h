/* master.h -- one connection from one worker thread to one Redis master: non-blocking
 * hiredis on the worker's loop, pipelined writes flushed once per loop pass, the
 * handshake (AUTH, SELECT, SCRIPT LOAD, data-loss marker), stall detection and
 * reconnection with back-off.
 *
 * Single-name operations (scripts.h: script_batch_code) queued in one loop pass leave
 * as one EVALSHA of SCRIPT_BATCH: Redis then pays one script call, one command parse
 * and one reply per pass instead of one per operation.  One operation alone goes as
 * its own script, which costs the master less than a batch of one.  Each operation still runs
 * atomically on the master and gets its own reply, exactly as if sent alone.
 *
 * Invariant: when master_eval() returns 0 the reply hook is called exactly once for
 * that command, with the reply, or with NULL if the connection failed first. */
#ifndef RL_MASTER_H
#define RL_MASTER_H

#include <stdint.h>

#include "config.h"
#include "loop.h"
#include "scripts.h"

struct redisAsyncContext;
struct redisReply;
typedef struct master_conn master_conn;
typedef struct master_batch master_batch;

#define MASTER_BATCH_MAX 128 /* operations in one batched call; more go in another */

/* The operations queued for the next batched call (owned by its master_conn). */
typedef struct master_outbatch {
    master_batch *cur;         /* the privs of the queued operations; NULL when none */
    master_batch *spare;       /* free list of sent batches' storage */
    char *keys, *args;         /* RESP bulk strings, in order */
    size_t keys_len, keys_cap, args_len, args_cap;
    unsigned nkeys, nargs;
    int first_script;          /* the first operation's script: sent alone when alone */
} master_outbatch;

enum master_state {
    MASTER_DOWN = 0,     /* not connected; a reconnect is scheduled */
    MASTER_CONNECTING,   /* TCP/unix connect or handshake under way */
    MASTER_UNMARKED,     /* connected, but carries no data marker: fresh or lost its data */
    MASTER_QUARANTINED,  /* lost its data; out of quorums until the quarantine key expires */
    MASTER_READY,        /* in quorums */
};

typedef struct master_hooks {
    /* A reply (or NULL) to a master_eval() command. */
    void (*reply)(master_conn *m, struct redisReply *r, void *priv);
    /* The state changed (after the change). */
    void (*state_changed)(master_conn *m, int old_state, const char *why);
    /* The connection has output to send: flush it at the end of this loop pass. */
    void (*want_flush)(master_conn *m);
    /* The quarantine key is gone: may m rejoin quorums?  While this says no, the
     * master keeps its quarantine key alive (another job is still repairing it). */
    int (*may_rejoin)(master_conn *m);
} master_hooks;

struct master_conn {
    const config_master *cfg;
    const config *conf;
    int index;                 /* position in the masters list */
    void *owner;               /* the worker */
    const master_hooks *hooks;
    loop *loop;
    struct redisAsyncContext *ac;
    int state;                 /* enum master_state */
    int connected;             /* the socket finished connecting */
    int want_in, want_out;
    int dirty;                 /* queued in the owner's flush list */
    loop_io io;
    loop_timer timer;          /* reconnect back-off, handshake deadline, quarantine end */
    int backoff_ms;
    int handshake_left;        /* replies the handshake still waits for */
    unsigned pending;          /* commands sent, replies not yet received */
    int64_t progress_us;       /* last reply, or when pending went 0 -> 1 */
    int64_t quarantine_until_us;
    int64_t fresh_until_us;    /* marked moments ago as part of a new cluster, until then */
    int64_t marker_sent_us;    /* when the last marker script was sent */
    char sha[SCRIPT__COUNT][41];
    master_outbatch out;
    /* figures for /readyz and metrics (owner thread writes, others may read relaxed) */
    uint64_t errors;
    int64_t last_rtt_us;
    uint64_t batches, batched_ops; /* batched calls sent, operations they carried */
};

/* Set up m (not connected); call master_start() to connect. */
void master_init(master_conn *m, const config *conf, int index, void *owner, loop *l,
                 const master_hooks *hooks);

/* Begin connecting now. */
void master_start(master_conn *m);

/* Close the connection (pending commands get NULL replies); no reconnect when
 * reconnect is 0 (shutdown). */
void master_close(master_conn *m, int reconnect, const char *why);

/* Free what m owns (after master_close(m, 0, ...)). */
void master_fini(master_conn *m);

/* Whether rounds may use m now. */
static inline int master_usable(const master_conn *m) { return m->state == MASTER_READY; }

/* Send EVALSHA of a script with nkeys keys then args (argv/lens hold keys then args).
 * Returns 0 (the reply hook will be called) or -1 (not usable / could not queue). */
int master_eval(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                const size_t *lens, void *priv);

/* Any command with a raw hiredis callback (cb may get NULL on failure); not subject
 * to the usable check, only to being connected.  0 or -1. */
int master_command(master_conn *m, int argc, const char **argv, const size_t *lens,
                   void (*cb)(struct redisAsyncContext *, void *, void *), void *priv);

/* Send PING (for /readyz).  Same contract as master_eval(). */
int master_ping(master_conn *m, void *priv);

/* Write pending output (called by the owner once per loop pass for dirty masters). */
void master_flush(master_conn *m, int flushing_phase);

/* Periodic check: a connection whose oldest reply is overdue by stall_us is closed
 * and reconnected, so that later rounds fail fast instead of waiting on it. */
void master_check_stall(master_conn *m, int64_t now_us, int64_t stall_us);

/* Resolve an UNMARKED master: mark it (fresh cluster) or quarantine it (lost data). */
void master_resolve_marker(master_conn *m, int quarantine);

/* Name of a state for logs and /readyz. */
const char *master_state_name(int state);

#endif
