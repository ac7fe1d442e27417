/* route.h -- the one table of the HTTP API: its routes (path, label, who must show a
 * token, the methods each allows and what each method asks for) and the methods it
 * counts; and the percent-decoding of the URLs routed by it.  http.c routes requests
 * by it and api.c runs the action it names; metrics.c labels the request counters by
 * it, and the counters are sized from it.  Pure: constant data and functions, no
 * state. */
#ifndef RL_ROUTE_H
#define RL_ROUTE_H

#include <stddef.h>

/* Routes, in the order /metrics lists their counters.  ROUTE_OTHER is no route: it
 * counts the requests that matched none. */
enum route_id {
    ROUTE_LOCK,     /* /locks/{name} */
    ROUTE_HEALTHZ,
    ROUTE_READYZ,
    ROUTE_METRICS,
    ROUTE_OTHER,
    ROUTE_LOCKS,    /* /locks: multi-name locks, and the list of held locks */
    ROUTE_SEM,      /* /semaphores/{name} */
    ROUTE__COUNT
};

/* Methods, as counted: anything else is ROUTE_M_OTHER.  HEAD runs what GET runs
 * wherever GET is allowed (libmicrohttpd sends the answer without its body). */
enum route_method {
    ROUTE_M_POST, ROUTE_M_DELETE, ROUTE_M_PATCH, ROUTE_M_GET, ROUTE_M_HEAD, ROUTE_M_OTHER, ROUTE_M__COUNT
};

/* What a route and method ask for (api.c has one handler for each). */
enum route_action {
    ROUTE_A_NONE,   /* the method is not allowed there */
    ROUTE_A_ACQUIRE, ROUTE_A_RELEASE, ROUTE_A_EXTEND, ROUTE_A_INSPECT,
    ROUTE_A_HEALTHZ, ROUTE_A_READYZ, ROUTE_A_METRICS,
    ROUTE_A_MACQUIRE, ROUTE_A_MRELEASE, ROUTE_A_LIST,
    ROUTE_A_SEM_ACQUIRE, ROUTE_A_SEM_RELEASE, ROUTE_A_SEM_EXTEND, ROUTE_A_SEM_INSPECT,
    ROUTE_A__COUNT
};

#define ROUTE_MAX_METHODS 4

typedef struct route {
    int id;                   /* enum route_id */
    const char *path;         /* NULL: matches no URL (ROUTE_OTHER) */
    int prefix;               /* path is a prefix: the rest of the URL is the lock name */
    const char *label;        /* the route in /metrics and the request log */
    int lock;                 /* a lock route: a token is always required (when tokens are
                               * configured) and it is refused while the service stops */
    int probe;                /* a token is required with --auth-probes only */
    struct {
        int method;           /* enum route_method */
        int action;           /* enum route_action */
    } methods[ROUTE_MAX_METHODS]; /* in the order the Allow header lists them */
} route;

/* The route of url, or NULL.  For a prefix route *name is the rest of url (a pointer
 * into it) and *name_len its length; otherwise they are "" and 0. */
const route *route_match(const char *url, const char **name, size_t *name_len);

/* The route with this id (ROUTE_OTHER included); NULL outside the table. */
const route *route_get(int id);

/* The counted method of an HTTP method name (ROUTE_M_OTHER if it is none of them). */
int route_method_id(const char *method);

/* The name of a counted method ("POST", ..., "other"); "other" outside the table. */
const char *route_method_name(int method);

/* What method asks for on rt: ROUTE_A_NONE if rt does not allow it (HEAD: what GET
 * asks for). */
int route_action(const route *rt, int method);

/* The Allow header of rt ("GET, HEAD, POST, PATCH, DELETE") into buf (NUL-terminated, cut
 * to cap).  Returns its length as written. */
size_t route_allow(const route *rt, char *buf, size_t cap);

/* Percent-decode s in place (a path or a query value); returns its new length.  A
 * decoded NUL becomes DEL (0x7f), which no validator accepts, instead of silently
 * cutting the string short; a '%' not followed by two hex digits stays as it is. */
size_t route_unescape(char *s);

#endif
