/* http_env.h -- what an HTTP server (http.h) is given by its owner at creation
 * (http_env) and what it counts (http_stats): the types the server's users and the
 * two halves of the server (http.c, api.c) share. */
#ifndef RL_HTTP_ENV_H
#define RL_HTTP_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "route.h"

/* Pointed to only (their headers: app.h, hold.h, lease.h, log.h, loop.h, master.h,
 * op.h, watch.h). */
typedef struct app app;
typedef struct hold_env hold_env;
typedef struct lease_rng lease_rng;
typedef struct lockop lockop;
typedef struct lockop_env lockop_env;
typedef struct log_ctx log_ctx;
typedef struct loop loop;
typedef struct master_conn master_conn;
typedef struct watch_env watch_env;

typedef struct http_server http_server;

/* Renders the /metrics exposition (the caller frees it); NULL on allocation failure. */
typedef char *http_metrics_fn(app *a, size_t *len);

/* What a server needs from its owner; copied at creation, the pointers must outlive it. */
typedef struct http_env {
    app *app;                   /* configuration, tokens, TLS, the listening socket, stopping */
    int id;                     /* the owner's number: in request ids and log lines */
    loop *loop;                 /* the owner's loop: the daemon's descriptor is watched there */
    log_ctx *log;
    lockop_env *ops;            /* requests' ops are made in it */
    hold_env *holds;            /* locks held for streamed answers (hold.h) */
    watch_env *watches;         /* watched GETs (watch.h) */
    lease_rng *rng;             /* for the leases the server makes up */
    const master_conn *masters; /* the owner's connections, shown by /healthz and /readyz */
    size_t nmasters, quorum;
    void *owner;                /* passed back to the callbacks */
    /* Start op, a request's lock operation (it may run on another thread; op->done
     * comes back on this one). */
    void (*start_op)(void *owner, lockop *op);
    /* The client of op closed its connection while op waits: drop it. */
    void (*op_gone)(void *owner, lockop *op);
    /* Whether every worker has a quorum of trusted masters (/readyz). */
    int (*all_ready)(void *owner);
    /* Whether master i is in quorums on every worker (/readyz's "ok": the instance's
     * view, whichever worker answers). */
    int (*master_ok)(void *owner, size_t i);
    /* Whether the owner's first connections to the masters are still being made, with
     * fewer than a quorum ready: a lock request then waits (up to the node timeout)
     * instead of failing at once (NULL: never). */
    int (*masters_starting)(void *owner);
    http_metrics_fn *metrics;
} http_env;

/* A server's counters (or their sum over servers). */
typedef struct http_stats {
    uint64_t requests[ROUTE__COUNT][ROUTE_M__COUNT][HIST_STATUS_N]; /* by route, method, status
                                                                      * (hist.h's slots) */
    /* request durations by route and method: a histogram (hist.h's buckets, +Inf last)
     * and the sum; streamed holds are not counted (their duration is the hold's) */
    uint64_t dur[ROUTE__COUNT][ROUTE_M__COUNT][HIST_REQ_N + 1];
    uint64_t dur_sum_us[ROUTE__COUNT][ROUTE_M__COUNT];
    uint64_t conns_cut;         /* closed for a slow or missing request header */
    uint64_t conns_refused;     /* refused past --max-connections */
} http_stats;

#endif
