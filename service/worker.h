/* worker.h -- a worker thread: its own event loop, its own libmicrohttpd daemon on
 * the shared listening socket, its own connection to every master, its rounds,
 * parked waiters, logger and counters.  Workers share nothing mutable but a few
 * atomics in the app and a mailbox each (for wake-ups and stop). */
#ifndef RL_WORKER_H
#define RL_WORKER_H

#include <pthread.h>
#include <stdint.h>

#include "app.h"
#include "http.h"
#include "lease.h"
#include "lockop.h"
#include "log.h"
#include "loop.h"
#include "master.h"
#include "notify.h"
#include "resync.h"
#include "round.h"

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
    http_server *http;      /* its HTTP server */
    master_conn **dirty;    /* masters with output to write this pass */
    size_t ndirty;
    loop_timer tick;
    log_ctx log;
    lease_rng rng;
    int64_t next_trim_us;
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
} worker;

/* Create a worker (not started); metrics renders /metrics for its HTTP server.  NULL
 * with a logged error on failure. */
worker *worker_new(app *a, int id, http_metrics_fn *metrics);
void worker_free(worker *w);

int worker_start(worker *w);      /* spawn the thread: 0 or -1 */
void worker_stop(worker *w);      /* ask it to stop (any thread) */
void worker_join(worker *w);

/* Post a wake-up for name to w (any thread). */
void worker_post_wake(worker *w, const char *name, size_t len);

#endif
