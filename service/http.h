/* http.h -- the HTTP side of a worker: its libmicrohttpd daemon in external-epoll
 * mode, the routing table, per-request state (freed in the completion callback on
 * every path), request parsing and the JSON replies.  A lock request is suspended
 * while its rounds run and resumed when its lockop is done: no thread waits. */
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include <stdint.h>

struct worker;

/* Start w's daemon on the app's listening socket.  0 or -1 (logged). */
int http_start(struct worker *w);

/* Stop accepting new connections (the socket stays open for the others). */
void http_quiesce(struct worker *w);

/* Stop the daemon (all requests must have completed or will be cut). */
void http_stop(struct worker *w);

/* Stop the daemon if still running and free the request pool. */
void http_fini(struct worker *w);

/* Run the daemon's pending work (called by the worker loop). */
void http_run(struct worker *w);

/* Close connections that have not delivered a whole request header within the
 * header timeout (slow clients, idle keep-alive past the limit). */
void http_sweep(struct worker *w, int64_t now_us);

/* Milliseconds until the daemon needs to run, or -1. */
int http_timeout_ms(struct worker *w);

#endif
