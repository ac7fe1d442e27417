/* master.h -- one connection from one worker thread to one Redis master: non-blocking
 * hiredis on the worker's loop (over TLS for rediss://: redis_ev.h), pipelined writes
 * flushed once per loop pass, the handshake (AUTH, SELECT, SCRIPT LOAD, INFO, the
 * master's record), stall detection and reconnection with back-off.
 *
 * Trust in a master comes from its own record "<prefix>#master" (scripts_record.c): the run
 * id it was last trusted under, its fencing counters and base, and a quarantine mark.
 * The handshake compares the run id with INFO's (a restart since the master was
 * trusted puts it in quarantine, the delay counted from the restart), and every lock
 * script checks the record first, so a wipe or a quarantine recorded by any instance
 * takes the master out here at the next operation.  docs/DESIGN.md has the argument.
 *
 * Single-name operations (scripts.h: script_batch_code) queued in one loop pass leave
 * as one EVALSHA of SCRIPT_BATCH: Redis then pays one script call, one command parse
 * and one reply per pass instead of one per operation.  One operation alone goes as
 * its own script, which costs the master less than a batch of one.  Each operation still runs
 * atomically on the master and gets its own reply, exactly as if sent alone.
 *
 * Two files: master_connect.c starts the connection (connect, handshake, timer, stall
 * check) and calls master.c (state, closing, trust, clock, the batch and commands);
 * master_int.h is what they share.
 *
 * Invariant: when master_eval() returns 0 the reply hook is called exactly once for
 * that command, with the reply, or with NULL if the connection failed first. */
#ifndef RL_MASTER_H
#define RL_MASTER_H

#include <stdint.h>

#include "config.h"
#include "hist.h"
#include "loop.h"
#include "mclock.h"
#include "redis_ev.h"
#include "resp.h"
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
    resp_batch fmt;            /* their keys and arguments, formatted (resp.h) */
    int first_script;          /* the first operation's script: sent alone when alone */
} master_outbatch;

enum master_state {
    MASTER_DOWN = 0,     /* not connected; a reconnect is scheduled */
    MASTER_CONNECTING,   /* TCP/unix connect or handshake under way */
    MASTER_UNMARKED,     /* connected, but carries no record: new, or lost its data */
    MASTER_QUARANTINED,  /* restarted or lost its data: out of quorums until its delay is
                          * over and its counters are repaired */
    MASTER_READY,        /* in quorums */
};

typedef struct master_hooks {
    /* A reply (or NULL) to a master_eval() command. */
    void (*reply)(master_conn *m, struct redisReply *r, void *priv);
    /* The state changed (after the change). */
    void (*state_changed)(master_conn *m, int old_state, const char *why);
    /* The connection has output to send: flush it at the end of this loop pass. */
    void (*want_flush)(master_conn *m);
    /* A check of m's record was answered (whether or not its state changed). */
    void (*checked)(master_conn *m);
    /* m's quarantine delay is over: repair it (then master_rejoin()). */
    void (*repair)(master_conn *m);
    /* m has been quarantined for longer than any round that counted it can last: its
     * delay may be lowered to what its peers prove outstanding (master_shorten()). */
    void (*shorten)(master_conn *m);
} master_hooks;

struct master_conn {
    const config_master *cfg;
    const config *conf;
    int index;                 /* position in the masters list */
    void *owner;               /* the worker */
    const master_hooks *hooks;
    loop *loop;
    redis_ev ev;               /* the context on the loop, writes coalesced (dirty: queued
                                * in the owner's flush list) */
    int state;                 /* enum master_state */
    loop_timer timer;          /* reconnect back-off, handshake deadline, quarantine end */
    int backoff_ms;
    uint32_t rnd;              /* rnd.h: the reconnect jitter */
    int handshake_left;        /* replies the handshake still waits for */
    unsigned pending;          /* commands sent, replies not yet received */
    int64_t progress_us;       /* last reply, or when pending went 0 -> 1 */
    int64_t quarantine_until_us;
    int64_t quarantined_at_us; /* when this connection found it quarantined */
    int shorten_asked;         /* the shorten hook ran for this quarantine */
    char repair_why[160];      /* why it is still out after its delay ("" if not) */
    /* the watch on its clock (mclock.h) */
    mclock clock;
    int64_t clock_sent_us;     /* the TIME in flight was sent then (0: none in flight) */
    int clock_bad;             /* quarantined for its clock: repaired only once steady */
    char clock_why[160];       /* what was seen of its clock, last time it was distrusted */
    uint64_t clock_faults;     /* times its clock was distrusted (metrics) */
    int64_t clock_rate_ppm;    /* its rate against ours, last measured (metrics) */
    /* what the handshake learnt (INFO, CONFIG) */
    char run_id[41];
    int64_t uptime_ms;
    int fsync_always;          /* appendonly yes and appendfsync always */
    /* the last check of the master's record (for the verdict on unmarked masters) */
    int seen_state;            /* -1 unknown, 0 unmarked, 1 ready, 2 quarantined */
    int64_t check_sent_us, check_recv_us;
    int check_inflight;
    int64_t unmarked_at_us;    /* when it was last found without its record */
    int64_t waiting_logged_us; /* "waiting for every master" said at this time */
    char down_reason[200];     /* why it last went down (a refused certificate...), for
                                * /readyz; cleared once it is connected and judged */
    /* the keys of the master's record and quarantine (every lock script carries the first) */
    char mkey[160], qkey[160];
    size_t mkey_len;
    char sha[SCRIPT__COUNT][41];
    master_outbatch out;
    /* figures for /readyz and metrics (owner thread writes, others may read relaxed) */
    uint64_t errors;
    int64_t last_rtt_us;
    uint64_t batches, batched_ops; /* batched calls sent, operations they carried */
    uint64_t quarantines;      /* times it went into quarantine */
    uint64_t rtt_hist[HIST_RTT_N + 1]; /* round trips of rounds' commands (hist.h), +Inf last */
    uint64_t rtt_sum_us;
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

/* master_eval() with the operation's keys and arguments formatted already for the
 * batched call (resp_op_format() with the script's batch code; NULL: format here),
 * so that a round formats them once for all its masters. */
int master_eval_op(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                   const size_t *lens, const resp_op *op, void *priv);

/* Any command with a raw hiredis callback (cb may get NULL on failure); not subject
 * to the usable check, only to being connected.  0 or -1. */
int master_command(master_conn *m, int argc, const char **argv, const size_t *lens,
                   void (*cb)(struct redisAsyncContext *, void *, void *), void *priv);

/* Send PING (for /readyz).  Same contract as master_eval(). */
int master_ping(master_conn *m, void *priv);

/* Write pending output (called by the owner once per loop pass for dirty masters). */
void master_flush(master_conn *m);

/* Periodic check: a connection whose oldest reply is overdue by stall_us is closed
 * and reconnected, so that later rounds fail fast instead of waiting on it. */
void master_check_stall(master_conn *m, int64_t now_us, int64_t stall_us);

/* Resolve an UNMARKED master: mark it (a cluster that never granted anything) or
 * quarantine it (it lost its data). */
void master_resolve_marker(master_conn *m, int quarantine, const char *instance);

/* Ask the master for its record again (no-op while a check is in flight or it is not
 * connected); the answer updates seen_* and the state. */
void master_recheck(master_conn *m);

/* End m's quarantine with its counters repaired to base (see resync.h). */
void master_rejoin(master_conn *m, uint64_t base);

/* Lower m's quarantine delay to delay_ms from now (never raise it; see resync.h).
 * 0 sent, -1 not (not quarantined, not connected, or a check in flight). */
int master_shorten(master_conn *m, int64_t delay_ms);

/* Why m is still out once its delay is over (shown by /readyz); "" clears it. */
void master_set_repair_why(master_conn *m, const char *why);

/* Once a second or so (the worker's tick): ask m for its TIME, pipelined on its
 * connection, and judge the answer (mclock.h); a clock that misbehaves puts m in
 * quarantine as a master that may have forgotten its locks. */
void master_clock_tick(master_conn *m, int64_t now_us);

/* Whether m may be repaired as far as its clock goes (steady if it was distrusted). */
int master_clock_fit(const master_conn *m, int64_t now_us);
/* The time (clock_now_us) after which a lock script sent to m at sent_us can no longer
 * run there (its clock window has closed, as the clock is known now), or -1 when the
 * script carried no window (the clock is not watched or not known): it may run late at
 * any time. */
int64_t master_window_closed_us(const master_conn *m, int64_t sent_us);

/* Name of a state for logs and /readyz. */
const char *master_state_name(int state);

#endif
