/* http.c -- a worker's HTTP server on libmicrohttpd (see http.h): the daemon and its
 * life, the connections (the cap, the idle ones and their header timeout), and the
 * life of a request: the pool, its first callback (routing, token, size), its body,
 * its completion (the request log and counters).  What a request does and answers is
 * api.c's. */
#include "http.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "answer.h"
#include "api.h"
#include "app.h"
#include "auth.h"
#include "fmt.h"
#include "http_req.h"
#include "idle.h"
#include "jw.h"
#include "lease.h"
#include "listop.h"
#include "log.h"
#include "route.h"
#include "stat.h"
#include "stream.h"
#include "validate.h"

/* A chunked body past BODY_MAX_BYTES is read (and thrown away) up to this much more,
 * to answer it 413; a longer one has its connection cut. */
#define BODY_DISCARD_MAX (1024 * 1024)

/* ---- connections and the header timeout ---- */

/* The cap is the whole instance's (--max-connections): the workers take connections
 * from the shared socket unevenly, so a share per worker would refuse some while
 * fewer than the cap are open.  A connection counts while its socket context is set. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = ci ? ci->connect_fd : -1;
        s->nconns++;
        long open = __atomic_add_fetch(s->conns_total, 1, __ATOMIC_RELAXED);
        idle_conn *hc = open > s->max_conns ? NULL : calloc(1, sizeof *hc);
        if (!hc) {
            /* Past the cap (or no memory): refuse at once (the daemon's own limit is
             * set higher, so that excess clients are told instead of left in the
             * accept queue). */
            __atomic_fetch_sub(s->conns_total, 1, __ATOMIC_RELAXED);
            if (fd >= 0)
                shutdown(fd, SHUT_RDWR);
            stat_inc(&s->stats.conns_refused);
            return;
        }
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
            __atomic_fetch_sub(s->conns_total, 1, __ATOMIC_RELAXED);
        }
    }
}

void http_server_release_held(http_server *s, int64_t now_us)
{
    int starting = s->env.masters_starting && s->env.masters_starting(s->env.owner);
    int64_t limit_us = s->env.app->cfg.node_timeout_ms * 1000;
    for (http_req **pp = &s->held; *pp;) {
        http_req *r = *pp;
        if (!starting || now_us - r->start_us >= limit_us || !s->mhd) {
            *pp = r->held_next;
            r->held_next = NULL;
            s->mhd_ready = 1;
            MHD_resume_connection(r->conn); /* on_access runs its handler */
        } else {
            pp = &r->held_next;
        }
    }
}

void http_server_tick(http_server *s, int64_t now_us)
{
    /* Over TLS an upgraded connection that was closed (stream.c) is let go by
     * libmicrohttpd once it has forwarded what was left: it resumes the connection
     * from inside a run, and nothing wakes the loop for the run that completes it. */
    if (s->upgrades_closing)
        s->mhd_ready = 1;
    if (s->held)
        http_server_release_held(s, now_us);
    if (!s->mhd || now_us < s->next_sweep_us)
        return;
    s->next_sweep_us = now_us + 100 * 1000;
    size_t cut = idle_cut(&s->idle, now_us - s->env.app->cfg.header_timeout_ms * 1000);
    if (cut)
        stat_add(&s->stats.conns_cut, cut);
}

/* ---- the life of a request ---- */

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
    r->conn = NULL;
    r->begun = 0;
    r->raw_uri_len = 0;
    r->raw_query = 0;
    r->http10 = 0;
    r->ub_link.next = r->ub_link.prev = NULL; /* in no list */
    r->start_us = clock_now_us();
    r->request_id[0] = '\0';
    r->trace.trace_id[0] = r->trace.parent_id[0] = '\0';
    r->route = NULL;
    r->action = ROUTE_A_NONE;
    r->method_id = ROUTE_M_OTHER;
    r->started = r->suspended = r->gone_watched = 0;
    r->held_back = 0;
    r->held_next = NULL;
    r->body_len = 0;
    r->discarded = 0;
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
    r->stream = NULL;
    r->watch = NULL;
    r->list = NULL;
    s->active_reqs++;
    return r;
}

/* The requests whose header libmicrohttpd is still reading (see mhd_log). */
static void unbegun_push(http_req *r)
{
    http_server *s = r->srv;
    list_insert_head(&s->unbegun, &r->ub_link);
    s->nunbegun++;
}

static void unbegun_remove(http_req *r)
{
    http_server *s = r->srv;
    list_remove(&r->ub_link);
    s->nunbegun--;
}

static void req_free(http_req *r)
{
    http_server *s = r->srv;
    if (!r->begun)
        unbegun_remove(r);
    api_free(r);
    if (r->op.kind >= 0)
        lockop_fini(&r->op);
    listop_free(r->list);
    r->list = NULL;
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
    const route *rt = r->route ? r->route : route_get(ROUTE_OTHER);
    int64_t took_us = clock_now_us() - r->start_us;
    stat_inc(&s->stats.requests[rt->id][r->method_id][hist_status_slot(status)]);
    if (!r->stream) { /* a streamed hold lasts as long as the hold: not a latency */
        stat_inc(&s->stats.dur[rt->id][r->method_id][hist_bucket(hist_req_bounds_us, HIST_REQ_N, took_us)]);
        stat_add(&s->stats.dur_sum_us[rt->id][r->method_id], (uint64_t)(took_us > 0 ? took_us : 0));
    }
    if (s->env.log->level < LOG_LEVEL_INFO)
        return;
    char fields[1536];
    jw j;
    jw_init(&j, fields, sizeof fields);
    jw_key_str(&j, "request_id", r->request_id);
    if (r->trace.trace_id[0]) { /* the W3C trace it belongs to (a valid traceparent) */
        jw_key_str(&j, "trace_id", r->trace.trace_id);
        jw_key_str(&j, "parent_id", r->trace.parent_id);
    }
    jw_key_str(&j, "method", route_method_name(r->method_id));
    jw_key_str(&j, "route", rt->label);
    if (r->name_len)
        jw_key_strn(&j, "name", r->name, r->name_len > 255 ? 255 : r->name_len);
    if (r->op.kind == LOCKOP_ACQUIRE && r->op.holder_len) /* who asked: never the lease */
        jw_key_strn(&j, "owner", r->op.holder, r->op.holder_len);
    jw_key_int(&j, "status", status);
    jw_key_double(&j, "duration_ms", (double)took_us / 1000.0);
    if (r->op.kind >= 0 && (r->status == 503))
        jw_key_uint(&j, "nodes_ok", r->op.nodes_ok);
    if (!toe_ok)
        jw_key_bool(&j, "aborted", 1);
    log_event(s->env.log, LOG_LEVEL_INFO, "request", fields);
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
    /* 32 hex digits: 64 random bits drawn at the start (unique across replicas and
     * restarts), the worker, and its count of requests. */
    char *p = fmt_hex(r->request_id, r->srv->id_prefix, 16);
    p = fmt_hex(p, (uint64_t)(r->srv->env.id & 0xff), 2);
    p = fmt_hex(p, ++r->srv->req_seq, 14); /* (a count past 2^56 wraps its digits) */
    *p = '\0';
}

/* The first callback of r: route it, and judge what the header alone decides (the
 * method, the token, shutdown, the announced body size).  RL_OK, or the error to
 * answer with at once. */
static rl_err req_begin(http_req *r, const char *url, const char *method, const char *version)
{
    const app *a = r->srv->env.app;
    r->method_id = route_method_id(method);
    r->http10 = version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0;
    request_id(r);
    trace_parse(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "traceparent"), &r->trace);
    /* libmicrohttpd keeps the URI as a C string: a raw NUL byte in it would cut the
     * path (POST /locks/a<NUL>b would lock "a").  The URI was read up to a first NUL
     * (on_uri); it ends just before the version, in the same buffer, unless it held
     * one. */
    if (r->raw_uri_len && version && *version && url + r->raw_uri_len + 1 != version)
        return r->raw_query ? answer_fail(r, RL_E_INVALID_QUERY, "the query string holds a NUL byte")
                            : answer_fail(r, RL_E_INVALID_NAME, "the path holds a NUL byte");
    r->route = route_match(url, &r->name, &r->name_len);
    if (!r->route)
        return RL_E_NOT_FOUND;
    r->action = route_action(r->route, r->method_id);
    if (r->action == ROUTE_A_NONE)
        return RL_E_METHOD_NOT_ALLOWED;
    if (a->auth.n && (r->route->lock || (a->cfg.auth_probes && r->route->probe))) {
        const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        rl_err e = auth_check(&a->auth, h, r->route->prefix ? r->name : NULL, r->name_len);
        if (e != RL_OK)
            return e;
    }
    if (__atomic_load_n(&a->stopping, __ATOMIC_RELAXED) && r->route->lock)
        return RL_E_SHUTTING_DOWN;
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    long n;
    if (cl && (validate_uint(cl, 1L << 40, &n) != 0 || n > BODY_MAX_BYTES))
        return RL_E_BODY_TOO_LARGE;
    return RL_OK;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    http_server *s = cls;
    http_req *r = *con_cls;
    if (!r || !r->begun) { /* the first callback: the whole header is there */
        if (!r) { /* on_uri could not make it */
            r = req_new(s);
            if (!r)
                return MHD_NO;
            *con_cls = r;
            r->conn = c;
        } else {
            unbegun_remove(r);
        }
        r->begun = 1;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->hc = ci ? ci->socket_context : NULL;
        rl_err e = req_begin(r, url, method, version);
        return e == RL_OK ? MHD_YES : answer_error(r, e);
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
        if (r->discarded || r->body_len + n > BODY_MAX_BYTES) {
            /* Chunked and too large: read on to its end and answer 413, unless it goes
             * on for much longer (then cut the connection). */
            r->discarded += n;
            return r->discarded > BODY_DISCARD_MAX ? MHD_NO : MHD_YES;
        }
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
    if (r->started && !r->held_back)
        return MHD_YES; /* suspended and resumed without a reply: cannot happen */
    if (r->held_back) { /* resumed by http_server_release_held(): run it now */
        r->held_back = 0;
        r->suspended = 0;
    } else {
        r->started = 1;
        idle_remove(&s->idle, r->hc); /* being served: no longer subject to the header timeout */
        if (r->discarded)
            return answer_error(r, RL_E_BODY_TOO_LARGE);
        if (r->route->lock && s->env.masters_starting && s->env.masters_starting(s->env.owner)) {
            /* The first connections to the masters are still being made: wait for
             * them (http_server_release_held) rather than fail a round that no master could
             * answer yet. */
            r->held_back = r->suspended = 1;
            r->held_next = s->held;
            s->held = r;
            MHD_suspend_connection(c);
            return MHD_YES;
        }
    }
    rl_err e = api_handle(r);
    if (e != RL_OK)
        answer_error(r, e);
    return MHD_YES;
}

/* A request line was read: the request begins here (its state is the con_cls of the
 * callbacks that follow), with the length of its URI as read: libmicrohttpd cuts the
 * URI at a NUL byte later, and req_begin() tells that from here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    http_server *s = cls;
    http_req *r = req_new(s);
    if (!r)
        return NULL; /* on_access makes it */
    r->conn = c;
    r->raw_uri_len = strlen(uri);
    r->raw_query = strchr(uri, '?') != NULL;
    unbegun_push(r);
    return r;
}

/* Whether libmicrohttpd 0.9.x refuses this Content-Length (not all digits, or more
 * than 64 bits): it then answers before any callback of ours, and (a bug of those
 * versions) sends its answer's header twice. */
static int bad_content_length(const char *v, int *too_large)
{
    size_t n = strlen(v);
    *too_large = 0;
    if (n == 0 || strspn(v, "0123456789") != n)
        return 1;
    *too_large = n > 20 || (n == 20 && strcmp(v, "18446744073709551615") > 0);
    return *too_large;
}

/* libmicrohttpd's own messages (MHD_USE_ERROR_LOG), at debug level.  One of them
 * says it is refusing a request's Content-Length: libmicrohttpd 0.9.75 then writes
 * the header of its answer twice on the connection, and no callback can stop it.  The
 * requests whose header it is reading are known (on_uri); the one with the bad value
 * is answered here with the documented JSON error, written straight to the socket,
 * and the socket is shut for writing, so libmicrohttpd's own bytes never leave
 * (its send fails and it closes the connection).  Over TLS its answer stands. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *s = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    log_msg(s->env.log, LOG_LEVEL_DEBUG, "libmicrohttpd: %s", msg);
    if (!strstr(fmt, "Content-Length") || s->env.app->tls_cert)
        return;
    list_foreach(node, &s->unbegun) {
        http_req *r = list_data(node, http_req, ub_link);
        const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        int too_large;
        if (!cl || MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
            !bad_content_length(cl, &too_large))
            continue;
        unbegun_remove(r);
        r->begun = 1; /* no callback of ours will run for it */
        request_id(r);
        if (!too_large)
            answer_fail(r, RL_E_INVALID_JSON, "the Content-Length header is not a length");
        answer_raw(r, too_large ? RL_E_BODY_TOO_LARGE : RL_E_INVALID_JSON);
    }
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
    /* MHD_ALLOW_UPGRADE: duplex streamed holds (stream.h). */
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_TURBO |
                     MHD_USE_ERROR_LOG;
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
        log_msg(s->env.log, LOG_LEVEL_ERROR, "worker %d: dup of the listening socket failed", s->env.id);
        return -1;
    }
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_access, s,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s, /* first: see the docs */
                              MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                              MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->max_conns + 64,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                              MHD_OPTION_ARRAY, a->tls_cert ? tls : tls + 2,
                              MHD_OPTION_END);
    if (!s->mhd) {
        log_msg(s->env.log, LOG_LEVEL_ERROR, "worker %d: cannot start the HTTP daemon", s->env.id);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!di) {
        log_msg(s->env.log, LOG_LEVEL_ERROR, "worker %d: the HTTP daemon has no epoll fd", s->env.id);
        return -1;
    }
    s->mhd_io.fd = di->epoll_fd;
    s->mhd_io.cb = on_mhd_io;
    s->mhd_io.events = 0;
    if (loop_io_set(s->env.loop, &s->mhd_io, EPOLLIN) != 0) {
        log_msg(s->env.log, LOG_LEVEL_ERROR, "worker %d: cannot watch the HTTP daemon", s->env.id);
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
    list_init(&s->unbegun);
    list_init(&s->duplex);
    idle_init(&s->idle);
    if (lease_random(env->rng, &s->id_prefix, sizeof s->id_prefix) != 0) {
        log_msg(env->log, LOG_LEVEL_ERROR, "worker %d: the system random generator failed", env->id);
        free(s);
        return NULL;
    }
    const app *a = env->app;
    s->max_conns = a->cfg.max_connections;
    s->conns_total = &env->app->conns_total;
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
    stream_close_all(s); /* upgraded connections go back to the daemon first */
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

size_t http_server_active(const http_server *s)
{
    return s->active_reqs - s->nunbegun; /* a header still coming in is not waited for */
}

void http_server_stats(const http_server *s, http_stats *sum)
{
    const uint64_t *from = &s->stats.requests[0][0][0];
    uint64_t *to = &sum->requests[0][0][0];
    for (size_t i = 0; i < sizeof s->stats.requests / sizeof *from; i++)
        to[i] += __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    from = &s->stats.dur[0][0][0];
    to = &sum->dur[0][0][0];
    for (size_t i = 0; i < sizeof s->stats.dur / sizeof *from; i++)
        to[i] += __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    from = &s->stats.dur_sum_us[0][0];
    to = &sum->dur_sum_us[0][0];
    for (size_t i = 0; i < sizeof s->stats.dur_sum_us / sizeof *from; i++)
        to[i] += __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    sum->conns_cut += __atomic_load_n(&s->stats.conns_cut, __ATOMIC_RELAXED);
    sum->conns_refused += __atomic_load_n(&s->stats.conns_refused, __ATOMIC_RELAXED);
}
