/* http.c -- a worker's HTTP server on libmicrohttpd (see http.h): the daemon, the
 * request pool, the idle connections and their header timeout, the handlers of the
 * routes, and every answer (bodies by body.c). */
#include "stat.h"
#include "http.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "auth.h"
#include "body.h"
#include "errors.h"
#include "idle.h"
#include "jw.h"
#include "lease.h"
#include "lockop.h"
#include "route.h"
#include "validate.h"

typedef struct http_req http_req;
typedef rl_err (*handler_fn)(http_req *r);

struct http_server {
    /* read-only after http_server_new() */
    http_env env;
    unsigned max_conns;         /* this daemon's share of --max-connections */
    /* private: the owner's thread only */
    struct MHD_Daemon *mhd;     /* NULL once stopped */
    loop_io mhd_io;             /* the daemon's epoll descriptor, in the owner's loop */
    int mhd_ready;              /* the daemon has work: run it this pass */
    int quiesced;               /* 1: asked, 2: the daemon gave its socket back */
    int listen_fd;              /* this daemon's descriptor of the shared socket */
    unsigned nconns;
    http_req *free_reqs;        /* a bounded pool */
    size_t nfree_reqs;
    size_t active_reqs;         /* requests between first callback and completion */
    uint64_t req_seq;           /* for request ids */
    idle_list idle;             /* connections waiting for a whole request header */
    int64_t next_sweep_us;
    /* written by the owner's thread only, read by any (http_server_stats) */
    http_stats stats;
};

struct http_req {
    http_server *srv;
    idle_conn *hc;           /* its connection while tracked (NULL: untracked) */
    struct MHD_Connection *conn;
    const struct route *route;
    handler_fn fn;
    int method_id;           /* enum route_method */
    int started;             /* the handler ran (body complete) */
    int suspended;
    size_t body_len, body_cap;
    char *body;
    char body_inline[256];
    struct MHD_Response *resp;
    int status;
    int64_t start_us;
    char request_id[65];
    const char *name;        /* points into the url (valid for the request) */
    size_t name_len;
    lock_params params;
    char msg[256];           /* a handler's message for its error answer, "" if none */
    lockop op;
    loop_io gone_io;         /* a waiting acquire: its connection, watched for a hang-up */
    int gone_watched;
    http_req *next_free;
};

/* ---- answers ---- */

static int queue_json(http_req *r, int status, const char *body, size_t len,
                      const char *extra_hdr, const char *extra_val)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    if (extra_hdr)
        MHD_add_response_header(resp, extra_hdr, extra_val);
    r->status = status;
    if (r->suspended) {
        r->resp = resp; /* queued when the connection is resumed */
        return MHD_YES;
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* Answer r with the error e: the one place an error answer is made.  The message is
 * r->msg when the handler that failed wrote one; a 409 carries the retry_after_ms of
 * r's op, a round that fell short its nodes_ok (body.h says which error carries what).
 * The headers: Retry-After with a 409, WWW-Authenticate with a 401, Allow with a 405. */
static int reply_error(http_req *r, rl_err e)
{
    int has_op = r->op.kind >= 0;
    body_err be = {e, r->msg, has_op ? r->op.retry_after_ms : 0, has_op ? r->op.nodes_ok : 0,
                   r->srv->env.quorum};
    char buf[BODY_MAX_LOCK], val[64];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_error(&j, &be);
    const char *hdr = NULL;
    if (e == RL_E_LOCK_HELD || e == RL_E_LOCK_CONTENDED) {
        hdr = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(val, sizeof val, "%lld", body_retry_after_s(be.retry_after_ms));
    } else if (e == RL_E_UNAUTHORIZED) {
        hdr = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
        snprintf(val, sizeof val, "Bearer realm=\"redlockd\"");
    } else if (e == RL_E_METHOD_NOT_ALLOWED && r->route) {
        hdr = MHD_HTTP_HEADER_ALLOW;
        route_allow(r->route, val, sizeof val);
    }
    return queue_json(r, rl_err_status(e), buf, jw_len(&j), hdr, val);
}

/* A handler's failure with its own message: r->msg for reply_error(). */
static rl_err fail(http_req *r, rl_err e, const char *msg)
{
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    return e;
}

/* The answer of an op that succeeded. */
static void reply_done(http_req *r, const lockop *op)
{
    if (op->multi) {
        const lockop_multi *mu = op->multi;
        body_multi m = {mu->n, mu->names, mu->lens, mu->tokens, op->lease, op->lease_len,
                        op->validity_ms, op->ttl_ms};
        char big[BODY_MAX_MULTI];
        jw j;
        jw_init(&j, big, sizeof big);
        if (op->kind == LOCKOP_MACQUIRE)
            body_multi_granted(&j, &m);
        else
            body_multi_released(&j, &m);
        queue_json(r, op->kind == LOCKOP_MACQUIRE ? 201 : 200, big, jw_len(&j), NULL, NULL);
        return;
    }
    body_lock l = {op->name, op->name_len, op->lease, op->lease_len, op->token,
                   op->validity_ms, op->ttl_ms, op->held};
    char buf[BODY_MAX_LOCK];
    jw j;
    jw_init(&j, buf, sizeof buf);
    switch (op->kind) {
    case LOCKOP_ACQUIRE:
        body_granted(&j, &l);
        break;
    case LOCKOP_RELEASE:
        body_released(&j, &l);
        break;
    case LOCKOP_EXTEND:
        body_extended(&j, &l);
        break;
    default:
        body_inspected(&j, &l);
        break;
    }
    queue_json(r, op->kind == LOCKOP_ACQUIRE ? 201 : 200, buf, jw_len(&j), NULL, NULL);
}

/* The health body: each master as this worker sees it, or as it answered the
 * readiness round whose replies are given. */
static int reply_health(http_req *r, int status, size_t ok, const redlock_reply *replies)
{
    const http_env *env = &r->srv->env;
    body_master ms[CONFIG_MAX_MASTERS];
    int64_t now = clock_now_us();
    for (size_t i = 0; i < env->nmasters; i++) {
        const master_conn *m = &env->masters[i];
        int64_t rtt = replies ? replies[i].rtt_us : m->last_rtt_us;
        ms[i] = (body_master){
            .address = m->cfg->address,
            .ok = replies ? replies[i].state == RL_SLOT_OK : master_usable(m),
            .state = master_state_name(m->state),
            .quarantined = m->state == MASTER_QUARANTINED,
            .quarantine_remaining_ms = (m->quarantine_until_us - now) / 1000,
            .failed = replies && replies[i].state == RL_SLOT_FAILED,
            .latency_ms = (double)rtt / 1000.0,
        };
    }
    char buf[BODY_MAX_HEALTH];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_health(&j, ok >= env->quorum, env->quorum, ms, env->nmasters);
    return queue_json(r, status, buf, jw_len(&j), NULL, NULL);
}

/* ---- clients that hang up while they wait ---- */

static void gone_unwatch(http_req *r)
{
    if (!r->gone_watched)
        return;
    r->gone_watched = 0;
    loop_io_set(r->srv->env.loop, &r->gone_io, 0);
}

/* The peer closed (or reset) a connection whose request waits for a lock: nobody will
 * read the answer, so the wait ends and a lock granted meanwhile is let go. */
static void on_gone(loop_io *io, uint32_t events)
{
    http_req *r = container_of(io, http_req, gone_io);
    (void)events;
    if (!r->gone_watched)
        return;
    gone_unwatch(r);
    r->srv->env.op_gone(r->srv->env.owner, &r->op);
}

/* While it is suspended libmicrohttpd does not look at the socket: watch it here. */
static void gone_watch(http_req *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    r->gone_io.fd = ci->connect_fd;
    r->gone_io.cb = on_gone;
    r->gone_io.events = 0;
    if (loop_io_set(r->srv->env.loop, &r->gone_io, EPOLLRDHUP) == 0)
        r->gone_watched = 1;
}

/* ---- handlers: each answers or suspends its request and returns RL_OK, or returns
 * the error to answer with (and maybe its message in r->msg) ---- */

static void op_done(lockop *op);

/* Suspend r while its op runs: op_done() answers. */
static void suspend(http_req *r)
{
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
}

/* Start r's op through the owner (which may run it on another thread). */
static rl_err start_routed(http_req *r)
{
    suspend(r);
    if (r->op.wait_deadline_us)
        gone_watch(r);
    r->srv->env.start_op(r->srv->env.owner, &r->op);
    return RL_OK;
}

/* Start r's op here. */
static rl_err start_here(http_req *r)
{
    suspend(r);
    lockop_start(&r->op);
    return RL_OK;
}

/* Gather query parameters (body wins later).  Returns RL_OK or the first error. */
static rl_err query_params(http_req *r)
{
    static const char *const keys[] = {"ttl_ms", "wait_ms", "lease"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, keys[i]);
        if (v) {
            rl_err e = params_from_query(&r->params, keys[i], v);
            if (e != RL_OK)
                return e;
        }
    }
    return RL_OK;
}

static rl_err check_params(http_req *r, const lock_params *p)
{
    const config *cfg = &r->srv->env.app->cfg;
    return params_check(p, cfg->max_ttl_ms, cfg->max_wait_ms, cfg->drift_factor, r->msg, sizeof r->msg);
}

/* The parameters of a lock request into r->params: the query, then the body, checked
 * against the limits; need_lease: a lease is required. */
static rl_err lock_params_of(http_req *r, int need_lease)
{
    rl_err e = query_params(r);
    if (e == RL_OK)
        e = params_from_body(&r->params, r->body, r->body_len, r->msg, sizeof r->msg);
    if (e == RL_OK)
        e = check_params(r, &r->params);
    if (e == RL_OK && need_lease && !r->params.has_lease)
        e = fail(r, RL_E_INVALID_LEASE, "the lease is required (JSON body {\"lease\": ...} or ?lease=)");
    return e;
}

/* The op of a request on /locks/{name}, with its parameters (and the lease given). */
static rl_err lock_op(http_req *r, int kind, int need_lease)
{
    if (!validate_name(r->name, r->name_len))
        return RL_E_INVALID_NAME;
    rl_err e = lock_params_of(r, need_lease);
    if (e != RL_OK)
        return e;
    lockop_init(&r->op, r->srv->env.ops, kind, r->name, r->name_len, op_done, r);
    if (r->params.has_lease) {
        r->op.lease_len = strlen(r->params.lease);
        memcpy(r->op.lease, r->params.lease, r->op.lease_len + 1);
    }
    return RL_OK;
}

/* A new lease for op (none given): 0 or -1. */
static int new_lease(http_req *r, lockop *op)
{
    if (lease_generate(r->srv->env.rng, op->lease) != 0)
        return -1;
    op->lease_len = LEASE_GEN_LEN;
    op->lease_fresh = 1;
    return 0;
}

static rl_err h_acquire(http_req *r)
{
    rl_err e = lock_op(r, LOCKOP_ACQUIRE, 0);
    if (e != RL_OK)
        return e;
    const http_env *env = &r->srv->env;
    lockop *op = &r->op;
    op->ttl_ms = r->params.has_ttl ? r->params.ttl_ms : env->app->cfg.default_ttl_ms;
    if (!r->params.has_lease && new_lease(r, op) != 0)
        return fail(r, RL_E_INTERNAL, "the system random generator failed");
    if (r->params.has_wait && r->params.wait_ms > 0)
        op->wait_deadline_us = r->start_us + (int64_t)r->params.wait_ms * 1000;
    int64_t ra;
    if (!op->wait_deadline_us &&
        lockop_known_held(env->app->known, op->name, op->name_len, op->lease, op->lease_len,
                          clock_now_us(), &ra)) {
        /* Known held, by another lease, moments ago: 409 here and now. */
        op->err = RL_E_LOCK_HELD;
        op->retry_after_ms = ra;
        stat_inc(&env->ops->counters[CNT_HELD_LOCAL]);
        stat_inc(&env->ops->counters[CNT_ACQ_HELD]);
        return RL_E_LOCK_HELD;
    }
    return start_routed(r);
}

static rl_err h_release(http_req *r)
{
    rl_err e = lock_op(r, LOCKOP_RELEASE, 1);
    return e != RL_OK ? e : start_routed(r);
}

static rl_err h_extend(http_req *r)
{
    rl_err e = lock_op(r, LOCKOP_EXTEND, 1);
    if (e != RL_OK)
        return e;
    r->op.ttl_ms = r->params.has_ttl ? r->params.ttl_ms : r->srv->env.app->cfg.default_ttl_ms;
    return start_routed(r);
}

static rl_err h_inspect(http_req *r)
{
    if (!validate_name(r->name, r->name_len))
        return RL_E_INVALID_NAME;
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_INSPECT, r->name, r->name_len, op_done, r);
    return start_here(r);
}

/* The names of POST /locks, checked against the token's scope; mp is the caller's. */
static rl_err multi_params_of(http_req *r, multi_params *mp)
{
    const app *a = r->srv->env.app;
    memset(&mp->p, 0, sizeof mp->p);
    rl_err e = query_params(r);
    mp->p = r->params;
    if (e == RL_OK)
        e = multi_params_from_body(mp, r->body, r->body_len, r->msg, sizeof r->msg);
    if (e == RL_OK)
        e = check_params(r, &mp->p);
    if (e == RL_OK && a->auth.n) {
        const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        for (size_t j = 0; e == RL_OK && j < mp->n; j++)
            e = auth_check(&a->auth, h, mp->names[j], mp->lens[j]);
    }
    return e;
}

static rl_err h_macquire(http_req *r)
{
    multi_params *mp = malloc(sizeof *mp);
    if (!mp)
        return fail(r, RL_E_INTERNAL, "out of memory");
    rl_err e = multi_params_of(r, mp);
    if (e != RL_OK) {
        free(mp);
        return e;
    }
    lockop *op = &r->op;
    lockop_init(op, r->srv->env.ops, LOCKOP_MACQUIRE, mp->names[0], mp->lens[0], op_done, r);
    const char *names[MULTI_MAX_NAMES];
    for (size_t j = 0; j < mp->n; j++)
        names[j] = mp->names[j];
    int bad = lockop_set_multi(op, names, mp->lens, mp->n);
    op->ttl_ms = mp->p.has_ttl ? mp->p.ttl_ms : r->srv->env.app->cfg.default_ttl_ms;
    if (mp->p.has_lease) {
        op->lease_len = strlen(mp->p.lease);
        memcpy(op->lease, mp->p.lease, op->lease_len + 1);
    } else if (!bad) {
        bad = new_lease(r, op);
    }
    if (mp->p.has_wait && mp->p.wait_ms > 0)
        op->wait_deadline_us = r->start_us + (int64_t)mp->p.wait_ms * 1000;
    free(mp);
    return bad ? RL_E_INTERNAL : start_routed(r);
}

static rl_err h_mrelease(http_req *r)
{
    rl_err e = lock_params_of(r, 1);
    if (e != RL_OK)
        return e;
    const app *a = r->srv->env.app;
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_MRELEASE, "", 0, op_done, r);
    if (a->auth.n) /* every name of the set must be in the token's scope */
        r->op.scope = auth_scope(&a->auth, MHD_lookup_connection_value(
                                               r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
    r->op.lease_len = strlen(r->params.lease);
    memcpy(r->op.lease, r->params.lease, r->op.lease_len + 1);
    if (lockop_set_multi(&r->op, NULL, NULL, 0) != 0)
        return RL_E_INTERNAL;
    return start_here(r);
}

static rl_err h_healthz(http_req *r)
{
    const http_env *env = &r->srv->env;
    size_t ok = 0;
    for (size_t i = 0; i < env->nmasters; i++)
        ok += master_usable(&env->masters[i]);
    reply_health(r, 200, ok, NULL);
    return RL_OK;
}

static rl_err h_readyz(http_req *r)
{
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_READY, r->name, r->name_len, op_done, r);
    return start_here(r);
}

static rl_err h_metrics(http_req *r)
{
    size_t len = 0;
    char *text = r->srv->env.metrics(r->srv->env.app, &len);
    if (!text)
        return fail(r, RL_E_INTERNAL, "out of memory");
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return fail(r, RL_E_INTERNAL, "out of memory");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    r->status = 200;
    MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    return RL_OK;
}

/* What each action of the routing table (route.h) runs. */
static const handler_fn handlers[ROUTE_A__COUNT] = {
    [ROUTE_A_ACQUIRE] = h_acquire, [ROUTE_A_RELEASE] = h_release, [ROUTE_A_EXTEND] = h_extend,
    [ROUTE_A_INSPECT] = h_inspect, [ROUTE_A_HEALTHZ] = h_healthz, [ROUTE_A_READYZ] = h_readyz,
    [ROUTE_A_METRICS] = h_metrics, [ROUTE_A_MACQUIRE] = h_macquire, [ROUTE_A_MRELEASE] = h_mrelease,
};

/* ---- completion of a suspended request ---- */

static void op_done(lockop *op)
{
    http_req *r = op->owner;
    gone_unwatch(r);
    if (op->kind == LOCKOP_READY) {
        /* Ready only when every worker has a quorum of trusted masters: a request may
         * land on any of them. */
        const http_env *env = &r->srv->env;
        size_t ok = op->nodes_ok;
        if (ok >= env->quorum && !env->all_ready(env->owner))
            ok = env->quorum - 1;
        reply_health(r, ok >= env->quorum ? 200 : 503, ok, op->rd ? op->rd->replies : NULL);
        lockop_fini(op);
    } else if (op->err == RL_OK) {
        reply_done(r, op);
    } else {
        reply_error(r, op->err);
    }
    r->srv->mhd_ready = 1;
    MHD_resume_connection(r->conn);
}

/* ---- connections and the header timeout ---- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        s->nconns++;
        if (s->nconns > s->max_conns) {
            /* Past the cap: refuse at once (the daemon's own limit is set higher, so
             * that excess clients are told instead of left in the accept queue). */
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            stat_inc(&s->stats.conns_refused);
            return;
        }
        idle_conn *hc = calloc(1, sizeof *hc);
        if (!hc)
            return; /* untracked: only MHD's own idle timeout applies to it */
        hc->fd = fd;
        idle_push(&s->idle, hc, clock_now_us());
        *socket_context = hc;
    } else {
        s->nconns--;
        if (*socket_context) {
            idle_conn *hc = *socket_context;
            idle_remove(&s->idle, hc);
            free(hc);
            *socket_context = NULL;
        }
    }
}

void http_server_tick(http_server *s, int64_t now_us)
{
    if (!s->mhd || now_us < s->next_sweep_us)
        return;
    s->next_sweep_us = now_us + 100 * 1000;
    size_t cut = idle_cut(&s->idle, now_us - s->env.app->cfg.header_timeout_ms * 1000);
    if (cut)
        stat_add(&s->stats.conns_cut, cut);
}

/* ---- libmicrohttpd callbacks ---- */

static http_req *req_new(http_server *s)
{
    http_req *r = s->free_reqs;
    if (r) {
        s->free_reqs = r->next_free;
        s->nfree_reqs--;
    } else if (!(r = malloc(sizeof *r))) {
        return NULL;
    }
    r->srv = s;
    r->route = NULL;
    r->fn = NULL;
    r->started = r->suspended = r->gone_watched = 0;
    r->body_len = 0;
    r->body_cap = sizeof r->body_inline;
    r->body = r->body_inline;
    r->resp = NULL;
    r->status = 0;
    r->name = "";
    r->name_len = 0;
    memset(&r->params, 0, sizeof r->params);
    r->msg[0] = '\0';
    r->op.rd = NULL;
    r->op.multi = NULL;
    r->op.kind = -1;
    s->active_reqs++;
    return r;
}

static void req_free(http_req *r)
{
    http_server *s = r->srv;
    if (r->op.kind >= 0)
        lockop_fini(&r->op);
    if (r->body != r->body_inline)
        free(r->body);
    if (r->resp)
        MHD_destroy_response(r->resp);
    r->resp = NULL;
    s->active_reqs--;
    if (s->nfree_reqs >= 1024) {
        free(r); /* a bounded pool, not the peak of a crowd of waiters */
        return;
    }
    r->next_free = s->free_reqs;
    s->free_reqs = r;
    s->nfree_reqs++;
}

static void log_request(http_req *r, int toe_ok)
{
    http_server *s = r->srv;
    int status = r->status ? r->status : 500;
    int cls = status / 100;
    if (cls < 1 || cls > 5)
        cls = 5;
    const route *rt = r->route ? r->route : route_get(ROUTE_OTHER);
    stat_inc(&s->stats.requests[rt->id][r->method_id][cls]);
    if (s->env.log->level < LOG_INFO)
        return;
    char fields[768];
    jw j;
    jw_init(&j, fields, sizeof fields);
    jw_key_str(&j, "request_id", r->request_id);
    jw_key_str(&j, "method", route_method_name(r->method_id));
    jw_key_str(&j, "route", rt->label);
    if (r->name_len)
        jw_key_strn(&j, "name", r->name, r->name_len > 255 ? 255 : r->name_len);
    jw_key_int(&j, "status", status);
    jw_key_double(&j, "duration_ms", (double)(clock_now_us() - r->start_us) / 1000.0);
    if (r->op.kind >= 0 && (r->status == 503))
        jw_key_uint(&j, "nodes_ok", r->op.nodes_ok);
    if (!toe_ok)
        jw_key_bool(&j, "aborted", 1);
    log_event(s->env.log, LOG_INFO, "request", fields);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    http_req *r = *con_cls;
    if (!r)
        return;
    log_request(r, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (r->hc && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        idle_push(&r->srv->idle, r->hc, clock_now_us()); /* keep-alive: the next request's clock starts */
    req_free(r);
    *con_cls = NULL;
}

static void request_id(http_req *r)
{
    const char *in = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
    if (in) {
        size_t n = strlen(in);
        int ok = n > 0 && n <= 64;
        for (size_t i = 0; ok && i < n; i++)
            ok = in[i] > 0x20 && in[i] < 0x7f && in[i] != '"' && in[i] != '\\';
        if (ok) {
            memcpy(r->request_id, in, n + 1);
            return;
        }
    }
    snprintf(r->request_id, sizeof r->request_id, "%02x%014llx", r->srv->env.id & 0xff,
             (unsigned long long)++r->srv->req_seq);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    http_server *s = cls;
    http_req *r = *con_cls;
    (void)version;
    if (!r) {
        r = req_new(s);
        if (!r)
            return MHD_NO;
        *con_cls = r;
        r->conn = c;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->hc = ci ? ci->socket_context : NULL;
        r->start_us = clock_now_us();
        r->method_id = route_method_id(method);
        request_id(r);
        r->route = route_match(url, &r->name, &r->name_len);
        if (!r->route)
            return reply_error(r, RL_E_NOT_FOUND);
        r->fn = handlers[route_action(r->route, r->method_id)];
        if (!r->fn)
            return reply_error(r, RL_E_METHOD_NOT_ALLOWED);
        const app *a = s->env.app;
        if (a->auth.n && (r->route->lock || (a->cfg.auth_probes && r->route->probe))) {
            const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
            rl_err e = auth_check(&a->auth, h, r->route->prefix ? r->name : NULL, r->name_len);
            if (e != RL_OK)
                return reply_error(r, e);
        }
        if (__atomic_load_n(&a->stopping, __ATOMIC_RELAXED) && r->route->lock)
            return reply_error(r, RL_E_SHUTTING_DOWN);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        long n;
        if (cl && (validate_uint(cl, 1L << 40, &n) != 0 || n > BODY_MAX_BYTES))
            return reply_error(r, RL_E_BODY_TOO_LARGE);
        return MHD_YES;
    }
    if (r->resp) {
        /* Resumed after the lockop finished: send what it produced. */
        enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, r->resp);
        MHD_destroy_response(r->resp);
        r->resp = NULL;
        return ok;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->body_len + n > BODY_MAX_BYTES)
            return MHD_NO; /* chunked and too large: cut the connection */
        if (r->body_len + n > r->body_cap) {
            size_t cap = r->body_cap * 2;
            while (cap < r->body_len + n)
                cap *= 2;
            char *nb = malloc(cap);
            if (!nb)
                return MHD_NO;
            memcpy(nb, r->body, r->body_len);
            if (r->body != r->body_inline)
                free(r->body);
            r->body = nb;
            r->body_cap = cap;
        }
        memcpy(r->body + r->body_len, upload_data, n);
        r->body_len += n;
        return MHD_YES;
    }
    if (r->started)
        return MHD_YES; /* suspended and resumed without a reply: cannot happen */
    r->started = 1;
    idle_remove(&s->idle, r->hc); /* being served: no longer subject to the header timeout */
    rl_err e = r->fn(r);
    if (e != RL_OK)
        reply_error(r, e);
    return MHD_YES;
}

/* Percent-decoding of paths and query values (route.h). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return route_unescape(s);
}

static void on_mhd_io(loop_io *io, uint32_t events)
{
    http_server *s = container_of(io, http_server, mhd_io);
    (void)events;
    s->mhd_ready = 1;
}

/* ---- the server ---- */

static int start_daemon(http_server *s)
{
    const app *a = s->env.app;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, a->tls_cert},
        {MHD_OPTION_END, 0, NULL},
    };
    if (a->tls_cert)
        flags |= MHD_USE_TLS;
    /* Each daemon gets its own descriptor of the shared socket: a daemon closes the
     * socket it was given when it stops, and must not close the others'. */
    s->listen_fd = dup(a->listen_fd);
    if (s->listen_fd < 0) {
        log_msg(s->env.log, LOG_ERROR, "worker %d: dup of the listening socket failed", s->env.id);
        return -1;
    }
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s,
                              MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_CONNECTION_LIMIT, s->max_conns + 64,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                              MHD_OPTION_ARRAY, a->tls_cert ? tls : tls + 2,
                              MHD_OPTION_END);
    if (!s->mhd) {
        log_msg(s->env.log, LOG_ERROR, "worker %d: cannot start the HTTP daemon", s->env.id);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!di) {
        log_msg(s->env.log, LOG_ERROR, "worker %d: the HTTP daemon has no epoll fd", s->env.id);
        return -1;
    }
    s->mhd_io.fd = di->epoll_fd;
    s->mhd_io.cb = on_mhd_io;
    s->mhd_io.events = 0;
    if (loop_io_set(s->env.loop, &s->mhd_io, EPOLLIN) != 0) {
        log_msg(s->env.log, LOG_ERROR, "worker %d: cannot watch the HTTP daemon", s->env.id);
        return -1;
    }
    s->mhd_ready = 1;
    return 0;
}

http_server *http_server_new(const http_env *env)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->env = *env;
    s->listen_fd = -1;
    const app *a = env->app;
    s->max_conns = (unsigned)((a->cfg.max_connections + (long)a->nworkers - 1) / (long)a->nworkers);
    if (start_daemon(s) != 0) {
        http_server_free(s);
        return NULL;
    }
    return s;
}

void http_server_quiesce(http_server *s)
{
    if (s->mhd && !s->quiesced) {
        /* On success the daemon no longer owns its descriptor: http_server_stop closes it. */
        s->quiesced = MHD_quiesce_daemon(s->mhd) != MHD_INVALID_SOCKET ? 2 : 1;
    }
}

void http_server_stop(http_server *s)
{
    if (!s->mhd)
        return;
    loop_io_set(s->env.loop, &s->mhd_io, 0);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    if (s->quiesced == 2)
        close(s->listen_fd);
    s->listen_fd = -1;
}

void http_server_free(http_server *s)
{
    if (!s)
        return;
    http_server_stop(s);
    while (s->free_reqs) {
        http_req *r = s->free_reqs;
        s->free_reqs = r->next_free;
        free(r);
    }
    free(s);
}

int http_server_pending(const http_server *s) { return s->mhd && s->mhd_ready; }

void http_server_run(http_server *s)
{
    if (!http_server_pending(s))
        return;
    s->mhd_ready = 0;
    MHD_run(s->mhd);
}

int http_server_timeout_ms(http_server *s)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (!s->mhd || MHD_get_timeout(s->mhd, &t) != MHD_YES)
        return -1;
    if (t == 0)
        s->mhd_ready = 1;
    return t > 1000 ? 1000 : (int)t;
}

size_t http_server_active(const http_server *s) { return s->active_reqs; }

void http_server_stats(const http_server *s, http_stats *sum)
{
    const uint64_t *from = &s->stats.requests[0][0][0];
    uint64_t *to = &sum->requests[0][0][0];
    for (size_t i = 0; i < sizeof s->stats.requests / sizeof *from; i++)
        to[i] += __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    sum->conns_cut += __atomic_load_n(&s->stats.conns_cut, __ATOMIC_RELAXED);
    sum->conns_refused += __atomic_load_n(&s->stats.conns_refused, __ATOMIC_RELAXED);
}
