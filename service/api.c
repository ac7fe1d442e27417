/* api.c -- the HTTP API's side of a request (see api.h): the handlers of the routes,
 * the lock operation each starts and its completion.  Answers are answer.c's, streamed
 * holds stream.c's, watched GETs watchget.c's. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "answer.h"
#include "app.h"
#include "auth.h"
#include "body.h"
#include "errors.h"
#include "hold.h"
#include "jw.h"
#include "keys.h"
#include "lease.h"
#include "listop.h"
#include "log.h"
#include "master.h"
#include "query.h"
#include "redlock.h"
#include "stat.h"
#include "stream.h"
#include "watchget.h"

/* ---- handlers: each answers or suspends its request and returns RL_OK, or returns
 * the error to answer with (and maybe its message in r->msg) ---- */

static void op_done(lockop *op);

/* The client of a waiting acquire hung up: drop it (or let go of what it gets). */
static void op_hung_up(http_req *r)
{
    r->srv->env.op_gone(r->srv->env.owner, &r->op);
}

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
        answer_watch_hangup(r, op_hung_up);
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
    static const char *const keys[] = {"ttl_ms", "wait_ms", "lease", "owner", "hold",
                                       "mode", "permits", "reentrant", "lock_delay_ms",
                                       "max_hold_ms"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
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
        e = answer_fail(r, RL_E_INVALID_LEASE, "the lease is required (JSON body {\"lease\": ...} or ?lease=)");
    return e;
}

/* The lease given for op. */
static void set_lease(lockop *op, const char *lease)
{
    op->lease_len = strlen(lease);
    memcpy(op->lease, lease, op->lease_len + 1);
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

/* Whether r is on /semaphores/{name}. */
static int on_semaphore(const http_req *r)
{
    return r->route && r->route->id == ROUTE_SEM;
}

/* The parameters that only some requests take, checked against r's route and kind. */
static rl_err check_kind(http_req *r, int kind)
{
    const lock_params *p = &r->params;
    int sem = on_semaphore(r), post = kind == LOCKOP_ACQUIRE;
    const char *where = sem ? "POST /semaphores/{name}" : "POST /locks/{name}";
    if (p->hold_stream && !post) {
        snprintf(r->msg, sizeof r->msg, "hold=stream is for %s", where);
        return RL_E_INVALID_HOLD;
    }
    if (p->has_owner && !post) {
        snprintf(r->msg, sizeof r->msg, "an owner is given only with %s", where);
        return RL_E_INVALID_OWNER;
    }
    if (p->has_mode && (sem || !post))
        return answer_fail(r, RL_E_INVALID_MODE, "mode (exclusive or shared) is for POST /locks/{name}");
    if (p->has_permits && (!sem || !post))
        return answer_fail(r, RL_E_INVALID_PERMITS, "permits is for POST /semaphores/{name}");
    if (sem && post && !p->has_permits)
        return answer_fail(r, RL_E_INVALID_PERMITS,
                           "permits (1..1024, the same for every caller of the name) is required");
    if (p->has_reentrant && (sem || !post || p->shared))
        return answer_fail(r, RL_E_INVALID_REENTRANT,
                           "reentrant is for exclusive locks (POST /locks/{name})");
    if (p->shared && p->has_owner)
        return answer_fail(r, RL_E_INVALID_OWNER, "an owner is kept for exclusive locks only");
    /* A lock-delay and a bound are an exclusive holder's (docs/DESIGN.md section 14):
     * a reader writes nothing that could be in flight, and a permit's slot is not
     * what its holders contend for. */
    if (p->has_lock_delay && (sem || !post || p->shared))
        return answer_fail(r, RL_E_INVALID_LOCK_DELAY,
                           "lock_delay_ms is for exclusive locks (POST /locks/{name})");
    if (p->has_max_hold && (sem || !post || p->shared))
        return answer_fail(r, RL_E_INVALID_MAX_HOLD,
                           "max_hold_ms is for exclusive locks (POST /locks/{name})");
    return RL_OK;
}

/* The op of a request on /locks/{name} or /semaphores/{name}, with its parameters
 * (and the lease given).  A semaphore's op goes by "#sem:<name>" (keys.h). */
static rl_err lock_op(http_req *r, int kind, int need_lease)
{
    int sem = on_semaphore(r);
    if (!validate_name(r->name, r->name_len) || (sem && r->name_len > SEM_NAME_MAX_LEN)) {
        if (sem)
            snprintf(r->msg, sizeof r->msg,
                     "a semaphore name is 1..%d bytes of [A-Za-z0-9._:/-]", SEM_NAME_MAX_LEN);
        return RL_E_INVALID_NAME;
    }
    rl_err e = lock_params_of(r, need_lease);
    if (e == RL_OK)
        e = check_kind(r, kind);
    if (e != RL_OK)
        return e;
    if (sem) {
        char name[NAME_MAX_LEN + 1];
        int n = snprintf(name, sizeof name, KEYS_SEM "%.*s", (int)r->name_len, r->name);
        lockop_init(&r->op, r->srv->env.ops, kind, name, (size_t)n, op_done, r);
        r->op.mode = LOCKOP_SEMAPHORE;
        r->op.permits = (int)r->params.permits;
    } else {
        lockop_init(&r->op, r->srv->env.ops, kind, r->name, r->name_len, op_done, r);
        r->op.mode = r->params.shared ? LOCKOP_SHARED : LOCKOP_EXCLUSIVE;
    }
    if (r->params.has_lease)
        set_lease(&r->op, r->params.lease);
    if (r->params.has_owner) {
        r->op.holder_len = strlen(r->params.owner);
        memcpy(r->op.holder, r->params.owner, r->op.holder_len + 1);
    }
    return RL_OK;
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
        return answer_fail(r, RL_E_INTERNAL, "the system random generator failed");
    if (r->params.has_wait && r->params.wait_ms > 0)
        op->wait_deadline_us = r->start_us + (int64_t)r->params.wait_ms * 1000;
    op->reentrant = r->params.reentrant;
    if (op->mode == LOCKOP_EXCLUSIVE) {
        /* the lock-delay (the service's default when none is given) and the bound */
        op->delay_ms = r->params.has_lock_delay ? r->params.lock_delay_ms : env->app->cfg.lock_delay_ms;
        op->max_hold_ms = r->params.max_hold_ms;
        if (op->max_hold_ms > 0 && op->max_hold_ms < op->ttl_ms) {
            snprintf(r->msg, sizeof r->msg, "max_hold_ms %ld is below the ttl %ld: 0 (no bound) or at least the ttl",
                     op->max_hold_ms, op->ttl_ms);
            return RL_E_INVALID_MAX_HOLD;
        }
    }
    int duplex = stream_duplex_asked(r); /* Upgrade: redlock-hold (stream.h) */
    if (duplex < 0)
        return RL_E_INVALID_HOLD;
    if (duplex && !r->params.hold_stream)
        return answer_fail(r, RL_E_INVALID_HOLD, "Upgrade: redlock-hold is for hold=stream");
    if (r->params.hold_stream) {
        rl_err se = stream_reserve(r, duplex);
        if (se != RL_OK)
            return se;
    }
    if (!op->wait_deadline_us && op->mode == LOCKOP_EXCLUSIVE &&
        lockop_held_known(op, env->app->known, env->app->inboxes, env->app->nworkers))
        return RL_E_LOCK_HELD; /* known held, by another lease, moments ago: 409 now */
    return start_routed(r);
}

/* The token of r's Authorization header, if tokens are on and it is known. */
static const auth_token *token_of(http_req *r)
{
    const app *a = r->srv->env.app;
    return a->auth.n ? auth_token_of(&a->auth, MHD_lookup_connection_value(
                                                   r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))
                     : NULL;
}

/* DELETE /locks/{name}?force=true: break the lock whatever its lease, for a token
 * marked +admin (never without tokens).  The broken holder is kept off the resource
 * by its fencing token (docs/DESIGN.md, section 5a). */
static rl_err h_force(http_req *r)
{
    rl_err e = lock_op(r, LOCKOP_FORCE, 0);
    if (e != RL_OK)
        return e;
    const auth_token *t = token_of(r);
    if (!r->srv->env.app->auth.n)
        return answer_fail(r, RL_E_FORBIDDEN, "force=true needs an admin token, and this service runs "
                                       "without --auth-tokens-file");
    if (!t || !t->admin)
        return answer_fail(r, RL_E_FORBIDDEN, "force=true needs a token marked +admin in the tokens file");
    return start_here(r);
}

static rl_err h_release(http_req *r)
{
    const char *force = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "force");
    if (force && on_semaphore(r))
        return answer_fail(r, RL_E_INVALID_FORCE, "force is for DELETE /locks/{name}");
    if (force && strcmp(force, "true") == 0)
        return h_force(r);
    if (force && strcmp(force, "false") != 0)
        return RL_E_INVALID_FORCE;
    rl_err e = lock_op(r, LOCKOP_RELEASE, 1);
    return e != RL_OK ? e : start_routed(r);
}

/* The warning line of a forced release: the lock, the token's label (never the token)
 * and what came of it. */
static void log_forced(http_req *r, const lockop *op)
{
    const auth_token *t = token_of(r);
    char fields[640];
    jw j;
    jw_init(&j, fields, sizeof fields);
    jw_key_str(&j, "request_id", r->request_id);
    jw_key_strn(&j, "name", op->name, op->name_len);
    jw_key_str(&j, "token", t ? t->label : "?");
    jw_key_str(&j, "outcome", op->err != RL_OK ? rl_err_code(op->err) : op->held ? "broken" : "not_held");
    log_event(r->srv->env.log, LOG_LEVEL_WARN, "lock broken by force", fields);
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
    if (on_semaphore(r)) {
        if (MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "index"))
            return answer_fail(r, RL_E_INVALID_INDEX, "watches (?index=) are for GET /locks/{name}");
        rl_err e = lock_op(r, LOCKOP_INSPECT, 0);
        return e != RL_OK ? e : start_here(r);
    }
    if (!validate_name(r->name, r->name_len))
        return RL_E_INVALID_NAME;
    rl_err e = watchget_params(r, op_done);
    if (e != RL_OK)
        return e;
    /* ?lease=: the holder's own request sees its reentrant holds */
    const char *lease = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "lease");
    if (lease && !validate_lease(lease, strlen(lease)))
        return RL_E_INVALID_LEASE;
    /* ?token=T: the token check (docs/DESIGN.md section 14), one inspection round */
    const char *tok = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "token");
    lock_params tp;
    memset(&tp, 0, sizeof tp);
    if (tok && params_from_query(&tp, "token", tok) != RL_OK)
        return RL_E_INVALID_TOKEN;
    if (tok && (r->params.has_index || r->params.has_wait))
        return answer_fail(r, RL_E_INVALID_QUERY, "a token check (?token=) answers at once: no index or wait_ms");
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_INSPECT, r->name, r->name_len, op_done, r);
    if (lease)
        set_lease(&r->op, lease);
    r->op.check_token = tok ? tp.token : 0;
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
    if (e == RL_OK && mp->p.has_owner)
        e = answer_fail(r, RL_E_INVALID_OWNER, "a multi-name lock takes no owner (POST /locks/{name} does)");
    if (e == RL_OK && (mp->p.has_mode || mp->p.has_permits || mp->p.has_reentrant))
        e = answer_fail(r, RL_E_INVALID_MODE,
                        "a multi-name lock takes modes per name (\"modes\": {\"<name>\": \"shared\"}), "
                        "no mode, permits or reentrant");
    if (e == RL_OK && mp->p.has_lock_delay)
        e = answer_fail(r, RL_E_INVALID_LOCK_DELAY,
                        "lock_delay_ms is for single-name exclusive locks (POST /locks/{name})");
    if (e == RL_OK && mp->p.has_max_hold)
        e = answer_fail(r, RL_E_INVALID_MAX_HOLD,
                        "max_hold_ms is for single-name exclusive locks (POST /locks/{name})");
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
        return answer_fail(r, RL_E_INTERNAL, "out of memory");
    rl_err e = multi_params_of(r, mp);
    if (e == RL_OK && mp->p.hold_stream)
        e = answer_fail(r, RL_E_INVALID_HOLD, "hold=stream is for single-name locks (POST /locks/{name})");
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
    for (size_t j = 0; !bad && j < mp->n; j++)
        op->multi->shared[j] = mp->shared[j];
    op->ttl_ms = mp->p.has_ttl ? mp->p.ttl_ms : r->srv->env.app->cfg.default_ttl_ms;
    if (mp->p.has_lease)
        set_lease(op, mp->p.lease);
    else if (!bad)
        bad = new_lease(r, op);
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
    if (r->params.has_owner)
        return answer_fail(r, RL_E_INVALID_OWNER, "an owner is given only with POST /locks/{name}");
    if (r->params.has_lock_delay)
        return answer_fail(r, RL_E_INVALID_LOCK_DELAY, "lock_delay_ms is for POST /locks/{name}");
    if (r->params.has_max_hold)
        return answer_fail(r, RL_E_INVALID_MAX_HOLD, "max_hold_ms is for POST /locks/{name}");
    const app *a = r->srv->env.app;
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_MRELEASE, "", 0, op_done, r);
    if (a->auth.n) /* every name of the set must be in the token's scope */
        r->op.scope = auth_scope(&a->auth, MHD_lookup_connection_value(
                                               r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
    set_lease(&r->op, r->params.lease);
    if (lockop_set_multi(&r->op, NULL, NULL, 0) != 0)
        return RL_E_INTERNAL;
    return start_here(r);
}

/* The listing is done: the held locks, or the error. */
static void list_done(listop *l)
{
    http_req *r = l->owner;
    if (l->err != RL_OK) {
        answer_error(r, l->err);
    } else {
        body_listed *held = malloc((l->n ? l->n : 1) * sizeof *held);
        size_t n = 0, cap = BODY_LIST_SIZE(l->n);
        char *buf = held ? malloc(cap) : NULL;
        if (!buf) {
            free(held);
            answer_error(r, RL_E_INTERNAL);
        } else {
            for (size_t i = 0; i < l->n; i++)
                if (l->items[i].held)
                    held[n++] = (body_listed){l->items[i].name, l->items[i].name_len, l->items[i].owner,
                                              l->items[i].owner_len,
                                              redlock_inspect_validity_ms(l->items[i].validity_ms,
                                                                          r->srv->env.app->cfg.drift_factor),
                                              l->items[i].token};
            jw j;
            jw_init(&j, buf, cap);
            body_list(&j, l->prefix, l->prefix_len, held, n, l->truncated);
            free(held);
            struct MHD_Response *resp = MHD_create_response_from_buffer(jw_len(&j), buf, MHD_RESPMEM_MUST_FREE);
            if (resp)
                answer_queue(r, 200, resp, "application/json", NULL, NULL);
            else
                free(buf);
        }
    }
    r->srv->mhd_ready = 1;
    MHD_resume_connection(r->conn);
}

/* GET /locks?prefix=P&limit=N: the held locks under P (listop.h has the cost), within
 * the token's scope: a prefix shorter than the scope is narrowed to it, one outside it
 * is 403. */
static rl_err h_list(http_req *r)
{
    const app *a = r->srv->env.app;
    const char *p = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "prefix");
    const char *lim = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
    size_t plen = p ? strlen(p) : 0;
    long limit = LISTOP_LIMIT_DEFAULT;
    if (plen && !validate_name(p, plen))
        return answer_fail(r, RL_E_INVALID_NAME, "prefix must be 0..255 bytes of [A-Za-z0-9._:/-]");
    if (lim && (validate_uint(lim, LISTOP_LIMIT_MAX, &limit) != 0 || limit < 1))
        return RL_E_INVALID_LIMIT;
    const auth_token *t = token_of(r);
    if (t && t->scope) {
        size_t sl = strlen(t->scope);
        if (memcmp(t->scope, p ? p : "", plen < sl ? plen : sl) != 0)
            return answer_fail(r, RL_E_FORBIDDEN, "the prefix is outside this token's scope");
        if (plen < sl) {
            p = t->scope;
            plen = sl;
        }
    }
    r->list = listop_new(r->srv->env.ops->rounds, a->cfg.key_prefix, p ? p : "", plen,
                         (size_t)limit, list_done, r);
    if (!r->list || listop_start(r->list) != 0)
        return answer_fail(r, RL_E_INTERNAL, "out of memory");
    suspend(r);
    return RL_OK;
}

static rl_err h_healthz(http_req *r)
{
    const http_env *env = &r->srv->env;
    size_t ok = 0;
    for (size_t i = 0; i < env->nmasters; i++)
        ok += master_usable(&env->masters[i]);
    answer_health(r, 200, ok, NULL);
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
        return answer_fail(r, RL_E_INTERNAL, "out of memory");
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return answer_fail(r, RL_E_INTERNAL, "out of memory");
    }
    answer_queue(r, 200, resp, "text/plain; version=0.0.4", NULL, NULL);
    return RL_OK;
}

/* ---- completion of a suspended request ---- */

static void op_done(lockop *op)
{
    http_req *r = op->owner;
    answer_unwatch_hangup(r);
    if (op->kind == LOCKOP_FORCE)
        log_forced(r, op);
    if (op->kind == LOCKOP_READY) {
        /* Ready only when every worker has a quorum of trusted masters: a request may
         * land on any of them. */
        const http_env *env = &r->srv->env;
        size_t ok = op->nodes_ok;
        if (ok >= env->quorum && !env->all_ready(env->owner))
            ok = env->quorum - 1;
        answer_health(r, ok >= env->quorum ? 200 : 503, ok, op->rd ? op->rd->replies : NULL);
        lockop_fini(op);
    } else if (r->watch && watchget_keep(r, op)) {
        return; /* parked until the lock may have changed */
    } else if (op->err == RL_OK && r->stream) {
        stream_begin(r, op);
    } else if (op->err == RL_OK) {
        answer_done(r, op);
    } else {
        stream_free(r); /* not granted: no stream */
        if (op->mode == LOCKOP_SEMAPHORE && op->err == RL_E_LOCK_HELD)
            snprintf(r->msg, sizeof r->msg, "every permit of this semaphore is taken");
        if (op->resting && op->err == RL_E_LOCK_HELD)
            snprintf(r->msg, sizeof r->msg,
                     "the lock rests: its last holder ended without a release, and its lock-delay "
                     "keeps it from others until retry_after_ms");
        answer_error(r, op->err);
    }
    r->srv->mhd_ready = 1;
    MHD_resume_connection(r->conn);
}

/* What each action of the routing table (route.h) runs. */
static rl_err (*const handlers[ROUTE_A__COUNT])(http_req *r) = {
    [ROUTE_A_ACQUIRE] = h_acquire, [ROUTE_A_RELEASE] = h_release, [ROUTE_A_EXTEND] = h_extend,
    [ROUTE_A_INSPECT] = h_inspect, [ROUTE_A_HEALTHZ] = h_healthz, [ROUTE_A_READYZ] = h_readyz,
    [ROUTE_A_METRICS] = h_metrics, [ROUTE_A_MACQUIRE] = h_macquire, [ROUTE_A_MRELEASE] = h_mrelease,
    [ROUTE_A_LIST] = h_list,
    /* a semaphore's requests are a lock's, on its permits (lock_op() tells them apart) */
    [ROUTE_A_SEM_ACQUIRE] = h_acquire, [ROUTE_A_SEM_RELEASE] = h_release,
    [ROUTE_A_SEM_EXTEND] = h_extend, [ROUTE_A_SEM_INSPECT] = h_inspect,
};

/* The query string's parameters, each judged by query.h for r's action. */
struct query_check {
    http_req *r;
    query_seen seen;
};

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct query_check *c = cls;
    (void)kind;
    return query_accept(&c->seen, c->r->action, key, value, c->r->msg, sizeof c->r->msg) == RL_OK ? MHD_YES
                                                                                                : MHD_NO;
}

rl_err api_handle(http_req *r)
{
    struct query_check c = {r, {0, RL_OK}};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_arg, &c);
    if (c.seen.err != RL_OK)
        return c.seen.err; /* an unknown, repeated or empty parameter: never ignored */
    return handlers[r->action](r);
}

void api_free(http_req *r)
{
    stream_free(r);
    watchget_free(r);
}
