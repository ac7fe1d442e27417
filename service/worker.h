/* worker.h -- a worker thread: its own event loop, its own HTTP server (http.h) on the
 * shared listening socket, its own connection to every master, its rounds, parked
 * waiters, logger and counters.  Workers share nothing mutable but a few atomics in
 * the app and a mailbox each (wake-ups, operations run for one another, and stop).
 * What a worker holds is private to worker.c: others ask through these functions. */
#ifndef RL_WORKER_H
#define RL_WORKER_H

#include <stddef.h>

#include "http_env.h" /* http_metrics_fn; app, http_server, lockop_env, master_conn: pointed to */

typedef struct worker worker;

/* Create a worker (not started); metrics renders /metrics for its HTTP server.  NULL
 * with a logged error on failure. */
worker *worker_new(app *a, int id, http_metrics_fn *metrics);
void worker_free(worker *w);

int worker_start(worker *w);      /* spawn the thread: 0 or -1 */
void worker_stop(worker *w);      /* ask it to stop (any thread) */
void worker_join(worker *w);

/* What /metrics reads of a worker, from any thread (the figures in them are written
 * by the worker's thread and read relaxed): its HTTP server, its lock operations, and
 * its connection to master i (0 <= i < cfg.n_masters). */
const http_server *worker_http(const worker *w);
const lockop_env *worker_ops(const worker *w);
const master_conn *worker_master(const worker *w, size_t i);

#endif
