/* http_req.h -- the state of one HTTP request and of its server, shared by the two
 * halves of the HTTP module and private to them: http.c (the server: its daemon,
 * connections, and the life of a request from its first callback to its completion)
 * and api.c (what a request asks for, its lock operation, and its answer). */
#ifndef RL_HTTP_REQ_H
#define RL_HTTP_REQ_H

#include <microhttpd.h>
#include <stddef.h>
#include <stdint.h>

#include "http_env.h"
#include "idle.h"
#include "lockop.h"
#include "loop.h"
#include "trace.h"
#include "validate.h"

typedef struct route route;

typedef struct http_req http_req;

struct http_server {
    /* read-only after http_server_new() */
    http_env env;
    long max_conns;             /* --max-connections: the whole instance's */
    long *conns_total;          /* connections open, all workers (atomic) */
    /* private: the owner's thread only */
    struct MHD_Daemon *mhd;     /* NULL once stopped */
    loop_io mhd_io;             /* the daemon's epoll descriptor, in the owner's loop */
    int mhd_ready;              /* the daemon has work: run it this pass */
    int quiesced;               /* 1: asked, 2: the daemon gave its socket back */
    int listen_fd;              /* this daemon's descriptor of the shared socket */
    unsigned nconns;            /* connections of this daemon (refused ones too) */
    list duplex;                /* upgraded duplex streams (stream.c), the newest first */
    unsigned upgrades_closing;  /* upgraded connections closed, not yet completed:
                                 * run the daemon at every tick (stream.c) */
    http_req *free_reqs;        /* a bounded pool */
    size_t nfree_reqs;
    size_t active_reqs;         /* requests between first callback and completion */
    uint64_t req_seq;           /* for request ids */
    uint64_t id_prefix;         /* for request ids: random, new at every start */
    http_req *held;             /* lock requests waiting for the first connections to the
                                 * masters (masters_starting) */
    list unbegun;               /* requests whose line was read, not yet their headers
                                 * (libmicrohttpd may still refuse them itself) */
    size_t nunbegun;
    idle_list idle;             /* connections waiting for a whole request header */
    int64_t next_sweep_us;
    /* written by the owner's thread only, read by any (http_server_stats) */
    http_stats stats;
};

/* One request, from its first callback to its completion (then back to the pool).
 * Its server's thread only. */
struct http_req {
    /* set at the first callback, read-only after */
    http_server *srv;
    struct MHD_Connection *conn;
    idle_conn *hc;              /* its connection while tracked (NULL: untracked) */
    const route *route;         /* NULL: no route (404) */
    int action;                 /* enum route_action: what the route does for the method */
    int method_id;              /* enum route_method */
    int64_t start_us;
    int begun;                  /* its first callback ran (else libmicrohttpd is still
                                 * reading its header, or refused it) */
    size_t raw_uri_len;         /* the request line's URI as read, up to a first NUL */
    int raw_query;              /* that URI has a query string */
    int http10;                 /* an HTTP/1.0 request */
    list ub_link;               /* in srv->unbegun while !begun */
    char request_id[65];
    trace_parent trace;         /* its W3C traceparent, if valid (trace_id "" if not) */
    const char *name;           /* points into the url (valid for the request) */
    size_t name_len;
    /* the body as it arrives */
    size_t body_len, body_cap;
    size_t discarded;           /* bytes of a chunked body past BODY_MAX_BYTES, thrown away */
    char *body;
    char body_inline[256];
    /* the handler's */
    lock_params params;
    char msg[256];              /* its message for its error answer, "" if none */
    lockop op;                  /* kind -1 until the handler makes one */
    struct listop *list;        /* GET /locks: its listing (listop.h), NULL otherwise */
    loop_io gone_io;            /* a waiting acquire or a stream: its connection, watched
                                 * for a hang-up */
    void (*on_hangup)(http_req *r); /* its client hung up while suspended (answer.h) */
    struct stream_state *stream; /* a lock held while the connection is open (stream.c) */
    struct watchget *watch;     /* a GET waiting for a change (watchget.c) */
    int gone_watched;
    /* the answer */
    int started;                /* the handler ran (body complete) */
    int held_back;              /* suspended in srv->held: its handler runs at resume */
    http_req *held_next;
    int suspended;              /* waits for its op: the answer is queued at resume */
    struct MHD_Response *resp;  /* made while suspended */
    int status;
    /* the server's pool */
    http_req *next_free;
};

#endif
