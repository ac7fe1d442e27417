/* api.c -- the HTTP API's side of a request (see api.h): the handlers of the routes,
 * the lock operation each starts and its completion, and every answer (bodies by
 * body.c), the errors' among them. */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "auth.h"
#include "body.h"
#include "errors.h"
#include "hold.h"
#include "jw.h"
#include "lease.h"
#include "listop.h"
#include "stat.h"

/* ---- answers ---- */

/* Send resp (of content type `type`) as r's answer, or keep it until r is resumed. */
static enum MHD_Result queue(http_req *r, int status, struct MHD_Response *resp, const char *type,
                             const char *extra_hdr, const char *extra_val)
{
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
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

static enum MHD_Result queue_json(http_req *r, int status, const char *body, size_t len,
                                  const char *extra_hdr, const char *extra_val)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    return resp ? queue(r, status, resp, "application/json", extra_hdr, extra_val) : MHD_NO;
}

enum MHD_Result api_error(http_req *r, rl_err e)
{
    int has_op = r->op.kind >= 0;
    body_err be = {e, r->msg, has_op ? r->op.retry_after_ms : 0,
                   has_op ? r->op.nodes_ok : r->list ? r->list->nodes_ok : 0, r->srv->env.quorum};
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

/* A handler's failure with its own message (r->msg, which api_error() shows). */
static rl_err fail(http_req *r, rl_err e, const char *msg)
{
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    return e;
}

/* What a body shows of a single-name op. */
static body_lock lock_of(const lockop *op)
{
    return (body_lock){op->name, op->name_len, op->lease, op->lease_len, op->token,
                       op->validity_ms, op->ttl_ms, op->held, op->holder, op->holder_len,
                       op->kind == LOCKOP_FORCE};
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
    body_lock l = lock_of(op);
    char buf[BODY_MAX_LOCK];
    jw j;
    jw_init(&j, buf, sizeof buf);
    switch (op->kind) {
    case LOCKOP_ACQUIRE:
        body_granted(&j, &l);
        break;
    case LOCKOP_RELEASE:
    case LOCKOP_FORCE:
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
static enum MHD_Result reply_health(http_req *r, int status, size_t ok, const redlock_reply *replies)
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
static void stream_gone(http_req *r);
static int stream_running(const http_req *r);
static void watch_hung_up(http_req *r);

static void on_gone(loop_io *io, uint32_t events)
{
    http_req *r = container_of(io, http_req, gone_io);
    (void)events;
    if (!r->gone_watched)
        return;
    gone_unwatch(r);
    if (stream_running(r))
        stream_gone(r);
    else if (r->watch)
        watch_hung_up(r);
    else
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

/* ---- locks held while the connection is open (hold=stream) ---- */

/* A streamed answer: the grant, then one line per event of its hold (hold.h), in
 * application/x-ndjson.  The content reader hands out what is written and suspends
 * the connection when it has nothing; an event resumes it. */
struct api_stream {
    hold *h;             /* NULL once the hold has said its last word (or was let go) */
    int started;         /* the grant was answered: the hold runs */
    int ended;           /* nothing more will be written */
    int paused;          /* the reader suspended the connection */
    size_t off, len, cap;
    char *buf;
};

static int stream_running(const http_req *r)
{
    return r->stream && r->stream->started;
}

/* Bytes a client may leave unread before it counts as gone. */
#define STREAM_MAX_UNREAD (64 * 1024)

static void stream_wake(http_req *r)
{
    struct api_stream *st = r->stream;
    if (st->paused) {
        st->paused = 0;
        r->srv->mhd_ready = 1;
        MHD_resume_connection(r->conn);
    }
}

static void stream_write(http_req *r, const char *line, size_t n)
{
    struct api_stream *st = r->stream;
    if (st->ended)
        return;
    if (st->len + n + 1 > st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 1024;
        while (cap < st->len + n + 1)
            cap *= 2;
        char *nb = cap <= STREAM_MAX_UNREAD ? realloc(st->buf, cap) : NULL;
        if (!nb) { /* a client that does not read: let the lock go */
            stream_gone(r);
            return;
        }
        st->buf = nb;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, line, n);
    st->len += n;
    st->buf[st->len++] = '\n';
    stream_wake(r);
}

static void on_hold_event(void *owner, int event, int64_t validity_ms, const char *reason)
{
    http_req *r = owner;
    char buf[256];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_hold_event(&j, event == HOLD_EXTENDED ? "extended" : event == HOLD_LOST ? "lost" : "released",
                    event == HOLD_EXTENDED ? validity_ms : -1, reason);
    if (event != HOLD_EXTENDED)
        r->stream->h = NULL; /* the hold's last word: it lets go of the lock itself */
    stream_write(r, buf, jw_len(&j));
    if (event != HOLD_EXTENDED) {
        r->stream->ended = 1;
        stream_wake(r);
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    http_req *r = cls;
    struct api_stream *st = r->stream;
    (void)pos;
    if (!st)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (st->len > st->off) {
        size_t n = st->len - st->off < max ? st->len - st->off : max;
        memcpy(out, st->buf + st->off, n);
        st->off += n;
        if (st->off == st->len)
            st->off = st->len = 0;
        return (ssize_t)n;
    }
    if (st->ended)
        return MHD_CONTENT_READER_END_OF_STREAM;
    st->paused = 1; /* nothing to say: wait for the hold's next event */
    MHD_suspend_connection(r->conn);
    return 0;
}

/* The client hung up (or does not read): release the lock, end the stream. */
static void stream_gone(http_req *r)
{
    struct api_stream *st = r->stream;
    if (st->h) {
        hold_close(st->h);
        st->h = NULL;
    }
    st->ended = 1;
    st->len = st->off = 0;
    stream_wake(r);
}

/* The acquire of a streamed hold was granted: answer 201 with a stream, and keep the
 * lock for as long as it is open. */
static void stream_begin(http_req *r, const lockop *op)
{
    struct api_stream *st = r->stream;
    body_lock l = lock_of(op);
    char buf[BODY_MAX_LOCK];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_granted(&j, &l);
    stream_write(r, buf, jw_len(&j));
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_read, r, NULL);
    if (!resp || st->ended) {
        if (resp)
            MHD_destroy_response(resp);
        hold_start(st->h, op, NULL, NULL); /* only to let the lock go */
        hold_close(st->h);
        st->h = NULL;
        api_error(r, RL_E_INTERNAL);
        return;
    }
    hold_start(st->h, op, on_hold_event, r);
    st->started = 1;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    queue(r, 201, resp, "application/x-ndjson", NULL, NULL);
    gone_watch(r); /* a client that hangs up releases the lock */
}

void api_stream_free(http_req *r)
{
    struct api_stream *st = r->stream;
    if (!st)
        return;
    gone_unwatch(r);
    if (st->h) {
        if (st->started)
            hold_close(st->h);
        else
            hold_discard(st->h);
    }
    free(st->buf);
    free(st);
    r->stream = NULL;
}

/* ---- watched GETs: GET /locks/{name}?index=I&wait_ms=N ---- */

/* A GET that answers once the lock's index (body.h) is no longer I, or after wait_ms
 * with the index unchanged.  Between its inspections it is parked (watch.h): a release
 * or a grant of the name, or the holder's expiry, makes it look again. */
struct api_watch {
    watcher w;
    http_req *r;
    uint64_t index;             /* what the client has seen */
    int64_t deadline_us;
    loop_timer expiry;          /* when the holder's lock should expire */
    loop_timer deadline;
    int busy;                   /* an inspection is under way */
    int again;                  /* an event came during it: look again */
    int last;                   /* the wait is over: answer the next inspection */
};

static void op_done(lockop *op);

static void watch_look(struct api_watch *aw)
{
    http_req *r = aw->r;
    if (aw->busy) {
        aw->again = 1;
        return;
    }
    aw->busy = 1;
    lockop_fini(&r->op);
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_INSPECT, r->name, r->name_len, op_done, r);
    lockop_start(&r->op);
}

static void on_watch_changed(watcher *w)
{
    watch_look(container_of(w, struct api_watch, w));
}

static void on_watch_expiry(loop_timer *t)
{
    watch_look(container_of(t, struct api_watch, expiry));
}

static void on_watch_deadline(loop_timer *t)
{
    struct api_watch *aw = container_of(t, struct api_watch, deadline);
    aw->last = 1; /* one more look, then answer whatever it says */
    watch_look(aw);
}

static void watch_free(http_req *r)
{
    struct api_watch *aw = r->watch;
    if (!aw)
        return;
    watch_remove(&aw->w);
    loop_timer_stop(r->srv->env.loop, &aw->expiry);
    loop_timer_stop(r->srv->env.loop, &aw->deadline);
    free(aw);
    r->watch = NULL;
}

/* An inspection of a watched GET is done: 1 if it keeps waiting (nothing to answer
 * yet), 0 if the request is to be answered now. */
static int watch_keep(http_req *r, const lockop *op)
{
    struct api_watch *aw = r->watch;
    aw->busy = 0;
    body_lock l = {.fencing_token = op->token, .held = op->held};
    int64_t now = clock_now_us();
    if (op->err != RL_OK || aw->last || now >= aw->deadline_us || body_index(&l) != aw->index) {
        watch_free(r);
        return 0;
    }
    if (aw->again) {
        aw->again = 0;
        watch_look(aw);
        return 1;
    }
    if (!aw->w.env)
        watch_add(r->srv->env.watches, &aw->w);
    if (op->held) /* it changes at the latest when it expires (0 left: look again soon) */
        loop_timer_start(r->srv->env.loop, &aw->expiry,
                         now + ((op->validity_ms > 0 ? op->validity_ms : 0) + 5) * 1000);
    else
        loop_timer_stop(r->srv->env.loop, &aw->expiry);
    if (!loop_timer_armed(&aw->deadline))
        loop_timer_start(r->srv->env.loop, &aw->deadline, aw->deadline_us);
    if (!r->gone_watched)
        gone_watch(r); /* a client that hangs up is answered (to nobody) at once */
    return 1;
}

/* GET's watch parameters: index (the one seen) and wait_ms. */
static rl_err watch_params(http_req *r)
{
    static const char *const keys[] = {"index", "wait_ms"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, keys[i]);
        rl_err e = v ? params_from_query(&r->params, keys[i], v) : RL_OK;
        if (e != RL_OK)
            return e;
    }
    if (MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "hold"))
        return fail(r, RL_E_INVALID_HOLD, "hold=stream is for POST /locks/{name}");
    const config *cfg = &r->srv->env.app->cfg;
    if (r->params.has_wait && r->params.wait_ms > cfg->max_wait_ms)
        return fail(r, RL_E_INVALID_WAIT, "wait_ms is larger than --max-wait-ms");
    if (r->params.has_wait && r->params.wait_ms > 0 && !r->params.has_index)
        return fail(r, RL_E_INVALID_INDEX, "wait_ms on GET waits for a change: give the index seen");
    if (!r->params.has_index || !r->params.has_wait || r->params.wait_ms == 0)
        return RL_OK;
    struct api_watch *aw = calloc(1, sizeof *aw);
    if (!aw)
        return fail(r, RL_E_INTERNAL, "out of memory");
    aw->r = r;
    aw->index = r->params.index;
    aw->deadline_us = r->start_us + (int64_t)r->params.wait_ms * 1000;
    aw->w.name = r->name;
    aw->w.len = r->name_len;
    aw->w.changed = on_watch_changed;
    aw->expiry.cb = on_watch_expiry;
    aw->deadline.cb = on_watch_deadline;
    aw->busy = 1;
    r->watch = aw;
    return RL_OK;
}

/* The client of a watched GET hung up: answer now (to nobody) and let it go. */
static void watch_hung_up(http_req *r)
{
    r->watch->last = 1;
    watch_look(r->watch);
}

void api_watch_free(http_req *r)
{
    watch_free(r);
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
    static const char *const keys[] = {"ttl_ms", "wait_ms", "lease", "owner", "hold"};
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
        e = fail(r, RL_E_INVALID_LEASE, "the lease is required (JSON body {\"lease\": ...} or ?lease=)");
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

/* The op of a request on /locks/{name}, with its parameters (and the lease given). */
static rl_err lock_op(http_req *r, int kind, int need_lease)
{
    if (!validate_name(r->name, r->name_len))
        return RL_E_INVALID_NAME;
    rl_err e = lock_params_of(r, need_lease);
    if (e != RL_OK)
        return e;
    if (r->params.hold_stream && kind != LOCKOP_ACQUIRE)
        return fail(r, RL_E_INVALID_HOLD, "hold=stream is for POST /locks/{name}");
    if (kind != LOCKOP_ACQUIRE && r->params.has_owner)
        return fail(r, RL_E_INVALID_OWNER, "an owner is given only with POST /locks/{name}");
    lockop_init(&r->op, r->srv->env.ops, kind, r->name, r->name_len, op_done, r);
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
        return fail(r, RL_E_INTERNAL, "the system random generator failed");
    if (r->params.has_wait && r->params.wait_ms > 0)
        op->wait_deadline_us = r->start_us + (int64_t)r->params.wait_ms * 1000;
    if (r->params.hold_stream) {
        r->stream = calloc(1, sizeof *r->stream);
        if (!r->stream || !(r->stream->h = hold_new(env->holds))) {
            free(r->stream);
            r->stream = NULL;
            return RL_E_TOO_MANY_STREAMS;
        }
    }
    if (!op->wait_deadline_us && lockop_held_known(op, env->app->known))
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
        return fail(r, RL_E_FORBIDDEN, "force=true needs an admin token, and this service runs "
                                       "without --auth-tokens-file");
    if (!t || !t->admin)
        return fail(r, RL_E_FORBIDDEN, "force=true needs a token marked +admin in the tokens file");
    return start_here(r);
}

static rl_err h_release(http_req *r)
{
    const char *force = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "force");
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
    if (!validate_name(r->name, r->name_len))
        return RL_E_INVALID_NAME;
    rl_err e = watch_params(r);
    if (e != RL_OK)
        return e;
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
    if (e == RL_OK && mp->p.has_owner)
        e = fail(r, RL_E_INVALID_OWNER, "a multi-name lock takes no owner (POST /locks/{name} does)");
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
    if (e == RL_OK && mp->p.hold_stream)
        e = fail(r, RL_E_INVALID_HOLD, "hold=stream is for single-name locks (POST /locks/{name})");
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
        return fail(r, RL_E_INVALID_OWNER, "an owner is given only with POST /locks/{name}");
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
        api_error(r, l->err);
    } else {
        body_listed *held = malloc((l->n ? l->n : 1) * sizeof *held);
        size_t n = 0, cap = BODY_LIST_SIZE(l->n);
        char *buf = held ? malloc(cap) : NULL;
        if (!buf) {
            free(held);
            api_error(r, RL_E_INTERNAL);
        } else {
            for (size_t i = 0; i < l->n; i++)
                if (l->items[i].held)
                    held[n++] = (body_listed){l->items[i].name, l->items[i].name_len, l->items[i].owner,
                                              l->items[i].owner_len, l->items[i].validity_ms,
                                              l->items[i].token};
            jw j;
            jw_init(&j, buf, cap);
            body_list(&j, l->prefix, l->prefix_len, held, n, l->truncated);
            free(held);
            struct MHD_Response *resp = MHD_create_response_from_buffer(jw_len(&j), buf, MHD_RESPMEM_MUST_FREE);
            if (resp)
                queue(r, 200, resp, "application/json", NULL, NULL);
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
        return fail(r, RL_E_INVALID_NAME, "prefix must be 0..255 bytes of [A-Za-z0-9._:/-]");
    if (lim && (validate_uint(lim, LISTOP_LIMIT_MAX, &limit) != 0 || limit < 1))
        return RL_E_INVALID_LIMIT;
    const auth_token *t = token_of(r);
    if (t && t->scope) {
        size_t sl = strlen(t->scope);
        if (memcmp(t->scope, p ? p : "", plen < sl ? plen : sl) != 0)
            return fail(r, RL_E_FORBIDDEN, "the prefix is outside this token's scope");
        if (plen < sl) {
            p = t->scope;
            plen = sl;
        }
    }
    r->list = listop_new(r->srv->env.ops->rounds, a->cfg.key_prefix, p ? p : "", plen,
                         (size_t)limit, list_done, r);
    if (!r->list || listop_start(r->list) != 0)
        return fail(r, RL_E_INTERNAL, "out of memory");
    suspend(r);
    return RL_OK;
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
    queue(r, 200, resp, "text/plain; version=0.0.4", NULL, NULL);
    return RL_OK;
}

/* ---- completion of a suspended request ---- */

static void op_done(lockop *op)
{
    http_req *r = op->owner;
    gone_unwatch(r);
    if (op->kind == LOCKOP_FORCE)
        log_forced(r, op);
    if (op->kind == LOCKOP_READY) {
        /* Ready only when every worker has a quorum of trusted masters: a request may
         * land on any of them. */
        const http_env *env = &r->srv->env;
        size_t ok = op->nodes_ok;
        if (ok >= env->quorum && !env->all_ready(env->owner))
            ok = env->quorum - 1;
        reply_health(r, ok >= env->quorum ? 200 : 503, ok, op->rd ? op->rd->replies : NULL);
        lockop_fini(op);
    } else if (r->watch && watch_keep(r, op)) {
        return; /* parked until the lock may have changed */
    } else if (op->err == RL_OK && r->stream) {
        stream_begin(r, op);
    } else if (op->err == RL_OK) {
        reply_done(r, op);
    } else {
        api_stream_free(r); /* not granted: no stream */
        api_error(r, op->err);
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
};

rl_err api_handle(http_req *r)
{
    return handlers[r->action](r);
}
