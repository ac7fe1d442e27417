/* query.h -- the query parameters each action of the API takes (route.h's actions),
 * and the check of a request's query string against them: an unknown parameter, a
 * repeated one or one without a value is refused (400 invalid_query), as an unknown
 * member of a body is, so that a typo like ?ttl=5000 does not pass silently.  Pure:
 * no I/O, no state beyond the caller's query_seen. */
#ifndef RL_QUERY_H
#define RL_QUERY_H

#include <stddef.h>

#include "errors.h"

/* What a check has seen so far of one request's query string (zero it first). */
typedef struct query_seen {
    unsigned mask;   /* bit k: the action's k-th parameter was given */
    rl_err err;      /* the first problem (RL_OK while none) */
} query_seen;

/* The parameters action (enum route_action) takes, NULL-terminated; NULL if the action
 * does not check its query string (the probes: /healthz, /readyz, /metrics). */
const char *const *query_keys(int action);

/* Judge one parameter of the query string (key, and value: NULL when the parameter
 * has no '='): RL_OK, or RL_E_INVALID_QUERY with what is wrong in msg (the first
 * problem only is kept in q->err and msg).  Call once per parameter, in order. */
rl_err query_accept(query_seen *q, int action, const char *key, const char *value, char *msg,
                    size_t msglen);

#endif
