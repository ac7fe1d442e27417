/* api.h -- the HTTP API's side of a request (api.c): what each route does for each
 * method (its handler, by route.h's actions), the lock operation it starts and its
 * completion, and every answer.  http.c hands each request here once its body is in,
 * and every error it finds before. */
#ifndef RL_API_H
#define RL_API_H

#include "errors.h"
#include "http_req.h"

/* Run r's handler (r->action, not ROUTE_A_NONE).  It answers r, or suspends it until
 * its lock operation is done, and returns RL_OK; or it returns the error to answer
 * with (api_error), its own message in r->msg if it has one. */
rl_err api_handle(http_req *r);

/* Answer r with the error e: the one place an error answer is made.  The message is
 * r->msg when the handler that failed wrote one; a 409 carries the retry_after_ms of
 * r's op, a round that fell short its nodes_ok (body.h says which error carries what).
 * The headers: Retry-After with a 409, WWW-Authenticate with a 401, Allow with a 405. */
enum MHD_Result api_error(http_req *r, rl_err e);

/* r is over (completed or cut): a lock it held for its stream is released, and the
 * stream's state freed.  No-op for other requests. */
void api_stream_free(http_req *r);

/* r is over: a watch it kept (GET ?index=&wait_ms=) is let go.  No-op otherwise. */
void api_watch_free(http_req *r);

#endif
