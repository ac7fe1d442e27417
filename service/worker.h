/* worker.h -- a worker thread: its own event loop, its own libmicrohttpd daemon on
 * the shared listening socket, its own connection to every master, its rounds,
 * parked waiters, logger and counters.  Workers share nothing mutable but a few
 * atomics in the app and a mailbox each (for wake-ups and stop). */
#ifndef RL_WORKER_H
#define RL_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "app.h"
#include "lease.h"
#include "lockop.h"
#include "log.h"
#include "loop.h"
#include "master.h"
#include "notify.h"
#include "resync.h"
#include "round.h"
#include "route.h"

struct MHD_Daemon;
struct http_req;
struct http_conn;

#define WORKER_MAILBOX 256

typedef struct worker {
    app *app;
    int id;
    pthread_t thread;
    loop loop;
    master_conn *masters;
    round_env rounds;
    lockop_env ops;
    notify *notify;         /* release announcements from other instances */
    resync **resyncs;       /* worker 0: counter repair per master, made on demand */
    struct MHD_Daemon *mhd;
    loop_io mhd_io;
    int mhd_ready;          /* MHD has work: run it this pass */
    master_conn **dirty;    /* masters with output to write this pass */
    size_t ndirty;
    loop_timer tick;
    log_ctx log;
    lease_rng rng;
    uint64_t req_seq;
    size_t active_reqs;     /* requests between first call and completion */
    struct http_req *free_reqs;
    size_t nfree_reqs;
    struct http_conn *idle_head, *idle_tail; /* connections waiting for a whole request, oldest first */
    int64_t next_sweep_us;
    int64_t next_trim_us;
    uint64_t conns_cut;     /* connections closed for a slow or missing request header */
    uint64_t conns_refused; /* connections refused past --max-connections */
    unsigned nconns, max_conns;
    int quiesced;           /* 1: asked, 2: the daemon gave its socket back */
    int listen_fd;          /* this daemon's descriptor of the shared socket */
    /* mailbox: other threads post, this one drains on its eventfd */
    int evfd;
    loop_io ev_io;
    pthread_mutex_t mb_lock;
    size_t mb_len;
    int mb_overflow;        /* lost wake-ups: wake every queue */
    char mb_names[WORKER_MAILBOX][256];
    lockop *mb_start, *mb_start_tail; /* waiting acquires to run here for other workers */
    lockop *mb_done, *mb_done_tail;   /* this worker's requests that another one ran */
    size_t foreign_ops;     /* ops running here for other workers' requests */
    /* counters by route x method x status class (1xx..5xx), for /metrics */
    uint64_t http_counts[ROUTE__COUNT][ROUTE_M__COUNT][6];
} worker;

/* Create a worker (not started).  NULL with a logged error on failure. */
worker *worker_new(app *a, int id);
void worker_free(worker *w);

int worker_start(worker *w);      /* spawn the thread: 0 or -1 */
void worker_stop(worker *w);      /* ask it to stop (any thread) */
void worker_join(worker *w);

/* Post a wake-up for name to w (any thread). */
void worker_post_wake(worker *w, const char *name, size_t len);

/* Start op, a request's lock operation, from w (w's thread).  A waiting acquire runs
 * on the worker that keeps that name's waiters (by name hash), so that one instance
 * has one FIFO per name and its waiters never race each other across workers; its
 * done() is then called back on w.  Anything else runs here. */
void worker_start_op(worker *w, lockop *op);

/* The client of op (a request of this worker's) closed its connection: drop op if it
 * waits, release what it gets if its attempt is in flight (on whichever worker runs
 * it).  Call from w's thread only. */
void worker_op_gone(worker *w, lockop *op);

#endif
