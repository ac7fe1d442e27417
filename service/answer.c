/* answer.c -- how a request is answered (see answer.h). */
#include "answer.h"

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "app.h"
#include "auth.h"
#include "body.h"
#include "jw.h"
#include "keys.h"
#include "listop.h"

/* ---- answers ---- */

/* Retry-After of every 503, in seconds: a quorum that fell short, a full queue and a
 * stopping instance are each worth a retry soon (another instance, the next round). */
#define ANSWER_RETRY_503_S "1"

/* Send resp (of content type `type`) as r's answer, or keep it until r is resumed. */
enum MHD_Result answer_queue(http_req *r, int status, struct MHD_Response *resp, const char *type,
                             const char *extra_hdr, const char *extra_val)
{
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    if (extra_hdr)
        MHD_add_response_header(resp, extra_hdr, extra_val);
    if (status == 201 && r->op.kind >= 0) {
        /* The lock granted (a set: its first name).  Names need no escaping in a path. */
        char loc[16 + NAME_MAX_LEN];
        body_lock l = answer_lock_of(&r->op); /* a semaphore's name, not its op's */
        snprintf(loc, sizeof loc, "%s%.*s",
                 r->op.mode == LOCKOP_SEMAPHORE ? "/semaphores/" : "/locks/", (int)l.name_len, l.name);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, loc);
    }
    if (status == 503 && !(extra_hdr && strcmp(extra_hdr, MHD_HTTP_HEADER_RETRY_AFTER) == 0))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ANSWER_RETRY_503_S);
    r->status = status;
    if (r->suspended) {
        r->resp = resp; /* queued when the connection is resumed */
        return MHD_YES;
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ok;
}

enum MHD_Result answer_json(http_req *r, int status, const char *body, size_t len,
                                  const char *extra_hdr, const char *extra_val)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    return resp ? answer_queue(r, status, resp, "application/json", extra_hdr, extra_val) : MHD_NO;
}

/* A round that found no quorum while this worker sees masters quarantined (or not yet
 * judged after a loss of data) says so: how many, and when the first is due back
 * (-1 when every one waits for its peers' proof).  0 when none is out, or when enough
 * are trusted that the quarantine is not why.  *trusted: the masters in quorums. */
static size_t quarantined_masters(const http_env *env, int64_t *rejoin_ms, size_t *trusted)
{
    size_t q = 0, ready = 0;
    int64_t now = clock_now_us(), first = -1;
    for (size_t i = 0; i < env->nmasters; i++) {
        const master_conn *m = &env->masters[i];
        if (m->state == MASTER_READY)
            ready++;
        if (m->state != MASTER_QUARANTINED && m->state != MASTER_UNMARKED)
            continue;
        q++;
        if (m->state == MASTER_QUARANTINED && !m->repair_why[0]) {
            int64_t left = m->quarantine_until_us > now ? (m->quarantine_until_us - now + 999) / 1000 : 0;
            if (first < 0 || left < first)
                first = left;
        }
    }
    *rejoin_ms = first;
    *trusted = ready;
    return ready < env->quorum ? q : 0;
}

enum MHD_Result answer_error(http_req *r, rl_err e)
{
    int has_op = r->op.kind >= 0;
    size_t answered = has_op && r->op.answered != SIZE_MAX ? r->op.answered
                      : has_op ? r->op.nodes_ok : r->list ? r->list->nodes_ok : 0;
    body_err be = {e, r->msg, has_op ? r->op.retry_after_ms : 0, answered, r->srv->env.quorum,
                   has_op ? r->op.permits_seen : 0, 0, -1, has_op && r->op.resting,
                   has_op ? r->op.bound_ms : -1};
    size_t trusted = 0;
    if (e == RL_E_QUORUM_UNAVAILABLE && has_op && r->op.reentry_short) {
        /* a re-entry needs every master (docs/DESIGN.md section 12) */
        be.message = "a re-entry needs every master to count its hold; the outer hold stands";
        be.quorum = r->srv->env.nmasters;
    } else if (e == RL_E_QUORUM_UNAVAILABLE &&
        (be.quarantined = quarantined_masters(&r->srv->env, &be.rejoin_ms, &trusted))) {
        /* nodes_ok: the masters in quorums, whatever the round heard before it was
         * decided (with too few usable it is decided at once) */
        be.err = e = RL_E_MASTERS_QUARANTINED;
        be.nodes_ok = trusted;
    }
    char buf[BODY_MAX_LOCK], val[64];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_error(&j, &be);
    const char *hdr = NULL;
    if (e == RL_E_MASTERS_QUARANTINED) {
        hdr = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(val, sizeof val, "%lld", body_retry_after_s(be.rejoin_ms >= 0 ? be.rejoin_ms : 1000));
    } else if (e == RL_E_LOCK_HELD || e == RL_E_LOCK_CONTENDED) {
        hdr = MHD_HTTP_HEADER_RETRY_AFTER;
        snprintf(val, sizeof val, "%lld", body_retry_after_s(be.retry_after_ms));
    } else if (e == RL_E_UNAUTHORIZED) {
        hdr = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
        /* RFC 6750: a token was given and is not known (a request without one gets no
         * error code). */
        int given = auth_is_bearer(
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
        snprintf(val, sizeof val, "Bearer realm=\"redlockd\"%s", given ? ", error=\"invalid_token\"" : "");
    } else if (e == RL_E_METHOD_NOT_ALLOWED && r->route) {
        hdr = MHD_HTTP_HEADER_ALLOW;
        route_allow(r->route, val, sizeof val);
    }
    return answer_json(r, rl_err_status(e), buf, jw_len(&j), hdr, val);
}

void answer_raw(http_req *r, rl_err e)
{
    body_err be = {e, r->msg, 0, 0, r->srv->env.quorum, 0, 0, -1, 0, -1};
    char body[BODY_MAX_LOCK], out[BODY_MAX_LOCK + 512];
    jw j;
    jw_init(&j, body, sizeof body);
    body_error(&j, &be);
    int status = rl_err_status(e);
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "X-Request-Id: %s\r\nContent-Length: %zu\r\n\r\n%.*s",
                     status, reason ? reason : "", r->request_id, jw_len(&j), (int)jw_len(&j), body);
    r->status = status;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || n < 0 || (size_t)n >= sizeof out)
        return;
    /* A new request's answer on an idle socket: its send buffer has room for it. */
    ssize_t w = send(ci->connect_fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w; /* whatever went, nothing more goes: libmicrohttpd's sends now fail */
    shutdown(ci->connect_fd, SHUT_WR);
}

/* A handler's failure with its own message (r->msg, which answer_error() shows). */
rl_err answer_fail(http_req *r, rl_err e, const char *msg)
{
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    return e;
}

/* What a body shows of a single-name op. */
body_lock answer_lock_of(const lockop *op)
{
    /* a semaphore's op goes by "#sem:<name>": the client knows it by <name> */
    size_t skip = op->mode == LOCKOP_SEMAPHORE ? sizeof KEYS_SEM - 1 : 0;
    if (skip > op->name_len)
        skip = 0;
    return (body_lock){op->name + skip, op->name_len - skip, op->lease, op->lease_len, op->token,
                       op->validity_ms, op->ttl_ms, op->held, op->holder, op->holder_len,
                       op->kind == LOCKOP_FORCE, op->mode, op->readers,
                       op->kind == LOCKOP_ACQUIRE ? op->permits : op->permits_seen, op->slot,
                       op->kind != LOCKOP_ACQUIRE || op->reentrant ? op->holds : 0,
                       op->kind == LOCKOP_ACQUIRE ? op->delay_ms : 0,
                       op->kind == LOCKOP_ACQUIRE ? op->max_hold_ms : 0,
                       op->kind == LOCKOP_EXTEND ? op->bound_ms : -1,
                       op->kind == LOCKOP_INSPECT ? op->rest_ms : 0,
                       op->kind == LOCKOP_FORCE && op->resting};
}

/* The answer of an op that succeeded. */
void answer_done(http_req *r, const lockop *op)
{
    if (op->multi) {
        const lockop_multi *mu = op->multi;
        body_multi m = {mu->n, mu->names, mu->lens, mu->tokens, op->lease, op->lease_len,
                        op->validity_ms, op->ttl_ms, mu->shared};
        char big[BODY_MAX_MULTI];
        jw j;
        jw_init(&j, big, sizeof big);
        if (op->kind == LOCKOP_MACQUIRE)
            body_multi_granted(&j, &m);
        else
            body_multi_released(&j, &m);
        answer_json(r, op->kind == LOCKOP_MACQUIRE ? 201 : 200, big, jw_len(&j), NULL, NULL);
        return;
    }
    body_lock l = answer_lock_of(op);
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
    default: /* op->validity_ms is the raw expiry left (watches time it): answer a validity */
        l.validity_ms = l.held ? redlock_inspect_validity_ms(l.validity_ms, r->srv->env.app->cfg.drift_factor) : 0;
        if (op->check_token)
            body_checked(&j, &l, op->check_token, op->current);
        else
            body_inspected(&j, &l);
        break;
    }
    answer_json(r, op->kind == LOCKOP_ACQUIRE ? 201 : 200, buf, jw_len(&j), NULL, NULL);
}

/* The health body: each master as this worker sees it, or as it answered the
 * readiness round whose replies are given. */
enum MHD_Result answer_health(http_req *r, int status, size_t ok, const redlock_reply *replies)
{
    const http_env *env = &r->srv->env;
    body_master ms[CONFIG_MAX_MASTERS];
    int64_t now = clock_now_us();
    for (size_t i = 0; i < env->nmasters; i++) {
        const master_conn *m = &env->masters[i];
        int64_t rtt = replies ? replies[i].rtt_us : m->last_rtt_us;
        ms[i] = (body_master){
            .address = m->cfg->address,
            /* in quorums on every worker: the instance's view, whichever worker answers */
            .ok = (replies ? replies[i].state == RL_SLOT_OK : master_usable(m)) &&
                  (!env->master_ok || env->master_ok(env->owner, i)),
            .state = master_state_name(m->state),
            .quarantined = m->state == MASTER_QUARANTINED,
            .quarantine_remaining_ms = (m->quarantine_until_us - now) / 1000,
            .waiting = m->repair_why,
            .clock = m->clock_bad ? m->clock_why : NULL,
            .failed = replies && replies[i].state == RL_SLOT_FAILED,
            .latency_ms = (double)rtt / 1000.0,
            .tls = !m->cfg->tls ? NULL : m->conf->redis_tls_insecure ? "insecure" : "verified",
            .reason = m->state <= MASTER_CONNECTING && m->down_reason[0] ? m->down_reason : NULL,
        };
    }
    char buf[BODY_MAX_HEALTH];
    jw j;
    jw_init(&j, buf, sizeof buf);
    body_health(&j, ok >= env->quorum, env->quorum, ms, env->nmasters);
    return answer_json(r, status, buf, jw_len(&j), NULL, NULL);
}

/* ---- clients that hang up while their request is suspended ---- */

void answer_unwatch_hangup(http_req *r)
{
    if (!r->gone_watched)
        return;
    r->gone_watched = 0;
    loop_io_set(r->srv->env.loop, &r->gone_io, 0);
}

static void on_gone(loop_io *io, uint32_t events)
{
    http_req *r = container_of(io, http_req, gone_io);
    (void)events;
    if (!r->gone_watched)
        return;
    answer_unwatch_hangup(r);
    r->on_hangup(r);
}

void answer_watch_hangup(http_req *r, void (*cb)(http_req *r))
{
    r->on_hangup = cb;
    if (r->gone_watched)
        return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    r->gone_io.fd = ci->connect_fd;
    r->gone_io.cb = on_gone;
    r->gone_io.events = 0;
    if (loop_io_set(r->srv->env.loop, &r->gone_io, EPOLLRDHUP) == 0)
        r->gone_watched = 1;
}
