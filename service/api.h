/* api.h -- the HTTP API's side of a request (api.c): what each route does for each
 * method (its handler, by route.h's actions), the lock operation it starts and its
 * completion.  http.c hands each request here once its body is in; answers (errors
 * among them) are answer.h's. */
#ifndef RL_API_H
#define RL_API_H

#include "errors.h"

typedef struct http_req http_req; /* http_req.h */

/* Run r's handler (r->action, not ROUTE_A_NONE).  It answers r, or suspends it until
 * its lock operation is done, and returns RL_OK; or it returns the error to answer
 * with (answer_error), its own message in r->msg if it has one. */
rl_err api_handle(http_req *r);

/* r is over (completed or cut): what its streamed hold or its watch kept is let go. */
void api_free(http_req *r);

#endif
