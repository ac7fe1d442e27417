/* http.h -- the HTTP server of one worker: its libmicrohttpd daemon in external-epoll
 * mode on the shared listening socket, the routing (by route.h's table), per-request
 * state (freed in the completion callback on every path), request parsing, the
 * answers (bodies by body.h), the header timeout, the connection cap and the request
 * counters.  A lock request is suspended while its lockop runs and resumed when the
 * op is done: no thread waits.
 *
 * The server knows nothing of the worker that makes it: what it needs comes in an
 * http_env (http_env.h) at creation: the worker's loop, logger, ops, lease generator
 * and masters, and callbacks.  One thread owns a server; http_server_stats() alone
 * may be called from any thread.  Inside, http.c runs the daemon, the connections and
 * the life of each request, and api.c what a request does and answers. */
#ifndef RL_HTTP_H
#define RL_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "http_env.h"

/* Start a server on env->app's listening socket.  NULL (logged) on failure. */
http_server *http_server_new(const http_env *env);

/* Stop s if it still runs and free it with its request pool.  NULL is a no-op. */
void http_server_free(http_server *s);

/* Stop accepting new connections (the socket stays open for the other servers). */
void http_server_quiesce(http_server *s);

/* Stop the daemon (requests not completed are cut). */
void http_server_stop(http_server *s);

/* Whether the daemon has work for this loop pass. */
int http_server_pending(const http_server *s);

/* Run the daemon's pending work, if it has any and still runs. */
void http_server_run(http_server *s);

/* Milliseconds until the daemon needs to run, or -1 (stopped, or no deadline).  When
 * it is 0 the daemon's work counts as pending. */
int http_server_timeout_ms(http_server *s);

/* Periodic work (every few tens of ms): close, every 100 ms, the connections that have
 * not delivered a whole request header within the header timeout (slow clients, idle
 * keep-alive past the limit). */
void http_server_tick(http_server *s, int64_t now_us);

/* Let the lock requests held back while the first connections to the masters were
 * being made run now if those connections are made (masters_starting() is 0) or they
 * waited the node timeout.  Called by the tick, and by the owner when a master's state
 * changes. */
void http_server_release_held(http_server *s, int64_t now_us);

/* Requests between their first callback and their completion. */
size_t http_server_active(const http_server *s);

/* Add s's counters to *sum (any thread: relaxed reads). */
void http_server_stats(const http_server *s, http_stats *sum);

#endif
