/* watchget.h -- the HTTP side of a watch: a watched GET (GET /locks/{name}?index=I&
 * wait_ms=N) is parked between inspections as one watcher of the worker's (watch.h owns
 * the watchers and wakes them by name) and answered once the lock's index (body.h) is
 * no longer I, or after wait_ms with the index unchanged. */
#ifndef RL_WATCHGET_H
#define RL_WATCHGET_H

#include "errors.h"

/* Pointed to only (http_req.h, op.h). */
typedef struct http_req http_req;
typedef struct lockop lockop;
typedef void (*lockop_done_cb)(lockop *op);

/* Read GET's index and wait_ms; if they ask for a watch, set r up for one (its
 * inspections' done() is `done`).  RL_OK, or the error to answer with. */
rl_err watchget_params(http_req *r, lockop_done_cb done);

/* An inspection of a watched GET is done: 1 if it keeps waiting (nothing to answer
 * yet), 0 if the request is to be answered now (the watch is over). */
int watchget_keep(http_req *r, const lockop *op);

/* r is over: the watch it kept is let go.  No-op for other requests. */
void watchget_free(http_req *r);

#endif
