/* stream.c -- locks held while the connection is open (see stream.h). */
#include "stream.h"

#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "answer.h"
#include "body.h"
#include "hold.h"
#include "jw.h"

/* One-way: bytes a client may leave unread in the service's own buffer before it
 * counts as gone. */
#define STREAM_MAX_UNREAD (4 * 1024)
/* The socket send buffer asked for, both modes (the kernel doubles it). */
#define STREAM_SNDBUF (4 * 1024)
/* Duplex: the longest line a client may send, and the lines kept unsent before pings
 * go unanswered (a client that does not read). */
#define DUPLEX_MAX_LINE 256
#define DUPLEX_OUT_CAP (4 * 1024)
/* Duplex: room for the last line past the cap, and for pings answered together. */
#define DUPLEX_OUT_MAX (DUPLEX_OUT_CAP + 1024)
#define DUPLEX_PENDING 8
/* Duplex: the last line is flushed for at most this long before the connection
 * closes. */
#define DUPLEX_CLOSE_WAIT_MS 1000
#define UPGRADE_TOKEN "redlock-hold"

enum duplex_phase {
    DX_WAITING,   /* granted, the 101 not sent yet */
    DX_RUNNING,   /* pings answered */
    DX_ENDING,    /* lost said, or a release asked: waiting for the hold's end */
    DX_CLOSING,   /* the last line written: flush it, then close */
    DX_CLOSED,    /* handed back to libmicrohttpd */
};

static void stream_gone(http_req *r);

/* A streamed answer.  One-way: the grant, then one line per event of its hold
 * (hold.h), in application/x-ndjson; the content reader hands out what is written and
 * suspends the connection when it has nothing; an event resumes it.  Duplex: the
 * connection after the 101, read and written here. */
struct stream_state {
    http_req *r;
    hold *h;             /* NULL once the hold has said its last word (or was let go) */
    int started;         /* the grant was answered: the hold runs */
    int ended;           /* one-way: nothing more will be written */
    int paused;          /* one-way: the reader suspended the connection */
    size_t off, len, cap;
    char *buf;           /* lines not yet handed out (both modes) */
    /* duplex */
    int duplex;
    int phase;           /* enum duplex_phase */
    int fd;              /* the upgraded socket (TLS: libmicrohttpd's socketpair end) */
    struct MHD_UpgradeResponseHandle *urh;
    loop_io io;
    loop_timer silence;  /* no ping answered for silence_ms: let go */
    loop_timer closing;  /* the last line could not be flushed in time: close anyway */
    int64_t ping_ms, silence_ms;
    char in[DUPLEX_MAX_LINE + 1];
    size_t in_len;
    uint64_t pending[DUPLEX_PENDING]; /* pings waiting for the first extension */
    int npending;
    int counted_closing; /* in the server's upgrades_closing */
    list dx_link;        /* in the server's upgraded streams (srv->duplex) */
};

static loop *loop_of(http_req *r)
{
    return r->srv->env.loop;
}

/* ---- the output buffer ---- */

/* Append a line (and its newline) to the buffer, growing it up to max bytes unsent.
 * 0, or -1 when it does not fit. */
static int buf_append(struct stream_state *st, const char *line, size_t n, size_t max)
{
    if (st->off && st->off == st->len)
        st->off = st->len = 0;
    if (st->len - st->off + n + 1 > max)
        return -1;
    if (st->len + n + 1 > st->cap) {
        if (st->off) { /* make room at the front first */
            memmove(st->buf, st->buf + st->off, st->len - st->off);
            st->len -= st->off;
            st->off = 0;
        }
        if (st->len + n + 1 > st->cap) {
            size_t cap = st->cap ? st->cap * 2 : 1024;
            while (cap < st->len + n + 1)
                cap *= 2;
            char *nb = realloc(st->buf, cap);
            if (!nb)
                return -1;
            st->buf = nb;
            st->cap = cap;
        }
    }
    memcpy(st->buf + st->len, line, n);
    st->len += n;
    st->buf[st->len++] = '\n';
    return 0;
}

/* ---- one-way ---- */

static void stream_wake(http_req *r)
{
    struct stream_state *st = r->stream;
    if (st->paused) {
        st->paused = 0;
        r->srv->mhd_ready = 1;
        MHD_resume_connection(r->conn);
    }
}

static void stream_write(http_req *r, const char *line, size_t n)
{
    struct stream_state *st = r->stream;
    if (st->ended)
        return;
    if (buf_append(st, line, n, STREAM_MAX_UNREAD) != 0) { /* a client that does not read */
        stream_gone(r);
        return;
    }
    stream_wake(r);
}

/* The last line of a hold that cannot be counted on any more: "expired" at its bound
 * (max_hold_ms, docs/DESIGN.md section 14), else "lost". */
static const char *lost_event(const char *reason)
{
    return reason && strcmp(reason, "max_hold") == 0 ? "expired" : "lost";
}

static void on_hold_event(void *owner, int event, int64_t validity_ms, const char *reason)
{
    http_req *r = owner;
    char buf[256];
    jw j;
    jw_init(&j, buf, sizeof buf);
    if (event == HOLD_OVER)
        return; /* immediate mode: never */
    body_hold_event(&j, event == HOLD_EXTENDED ? "extended" : event == HOLD_LOST ? lost_event(reason) : "released",
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
    struct stream_state *st = r->stream;
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
    struct stream_state *st = r->stream;
    if (st->h) {
        hold_close(st->h);
        st->h = NULL;
    }
    st->ended = 1;
    st->len = st->off = 0;
    stream_wake(r);
}

/* The connection's socket: a small send buffer, so that less of what a client does
 * not read sits in the kernel (one-way: it counts as gone sooner). */
static void small_sndbuf(int fd)
{
    int sz = STREAM_SNDBUF;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
}

static int conn_fd(http_req *r)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* ---- duplex ---- */

static void dx_flush(struct stream_state *st);
static void dx_close(struct stream_state *st);

/* The grant line: the 201's body, with the ping period and the silence bound. */
static size_t dx_grant_line(char *buf, size_t cap, const lockop *op, int64_t ping_ms, int64_t silence_ms)
{
    body_lock l = answer_lock_of(op);
    jw j;
    jw_init(&j, buf, cap);
    body_granted(&j, &l);
    size_t n = jw_len(&j);
    if (jw_overflowed(&j) || n < 2 || buf[n - 1] != '}')
        return 0;
    int k = snprintf(buf + n - 1, cap - (n - 1), ",\"ping_ms\":%lld,\"silence_ms\":%lld}", (long long)ping_ms,
                     (long long)silence_ms);
    if (k < 0 || (size_t)k >= cap - (n - 1))
        return 0;
    return n - 1 + (size_t)k;
}

/* A line for the client: appended (answers only while under the cap: a client that
 * does not read gets no more, and its silence ends the hold), then flushed. */
static int dx_write(struct stream_state *st, const char *line, size_t n, int answer)
{
    if (st->phase >= DX_CLOSING)
        return -1;
    if (buf_append(st, line, n, answer ? DUPLEX_OUT_CAP : DUPLEX_OUT_MAX) != 0)
        return -1;
    dx_flush(st);
    return 0;
}

/* The last line is written: close once it is flushed (or after a short wait). */
static void dx_closing(struct stream_state *st)
{
    if (st->phase >= DX_CLOSING)
        return;
    st->phase = DX_CLOSING;
    loop_timer_stop(loop_of(st->r), &st->silence);
    if (st->fd < 0)
        return; /* not upgraded yet: at the upgrade */
    loop_timer_start(loop_of(st->r), &st->closing, clock_now_us() + DUPLEX_CLOSE_WAIT_MS * 1000);
    dx_flush(st);
}

static void dx_arm_silence(struct stream_state *st)
{
    loop_timer_start(loop_of(st->r), &st->silence, clock_now_us() + st->silence_ms * 1000);
}

/* Answer ping n now, if the hold can say; 0: answered or never will be; 1: later. */
static int dx_answer(struct stream_state *st, uint64_t n)
{
    if (!st->h || st->phase != DX_RUNNING)
        return 0;
    if (st->len - st->off > DUPLEX_OUT_CAP - 100)
        return 0; /* not read: no answer (no validity told, and its silence counts) */
    int64_t v = hold_answer(st->h);
    if (v == 0)
        return 1;
    if (v < 0)
        return 0;
    char line[128];
    int k = snprintf(line, sizeof line, "{\"event\":\"alive\",\"ping\":%llu,\"validity_ms\":%lld}",
                     (unsigned long long)n, (long long)v);
    if (dx_write(st, line, (size_t)k, 1) == 0)
        dx_arm_silence(st); /* answered: the silence is counted from here */
    return 0;
}

static void dx_ping(struct stream_state *st, uint64_t n)
{
    if (st->npending) { /* keep the order */
        if (st->npending < DUPLEX_PENDING)
            st->pending[st->npending++] = n;
        return;
    }
    if (dx_answer(st, n) == 1)
        st->pending[st->npending++] = n;
}

static void dx_answer_pending(struct stream_state *st)
{
    int i = 0;
    while (i < st->npending && dx_answer(st, st->pending[i]) == 0)
        i++;
    memmove(st->pending, st->pending + i, (size_t)(st->npending - i) * sizeof *st->pending);
    st->npending -= i;
}

/* A line the service cannot read: the hold ends (lost, bad_message). */
static void dx_bad(struct stream_state *st, const char *why)
{
    if (st->phase != DX_RUNNING || !st->h)
        return;
    char line[200];
    jw j;
    jw_init(&j, line, sizeof line);
    jw_obj_open(&j);
    jw_key_str(&j, "event", "lost");
    jw_key_str(&j, "reason", "bad_message");
    jw_key_str(&j, "message", why);
    jw_obj_close(&j);
    st->phase = DX_ENDING; /* the hold's HOLD_LOST is ours: said here, with the message */
    loop_timer_stop(loop_of(st->r), &st->silence);
    st->npending = 0;
    dx_write(st, line, jw_len(&j), 0);
    hold_fail(st->h, "bad_message");
}

/* One line from the client (without its newline). */
static void dx_line(struct stream_state *st, char *line, size_t n)
{
    if (n && line[n - 1] == '\r')
        n--;
    if (!n)
        return;
    json_error_t e;
    json_t *o = json_loadb(line, n, JSON_REJECT_DUPLICATES, &e);
    const char *key = NULL;
    json_t *v = NULL;
    if (o && json_is_object(o) && json_object_size(o) == 1) {
        void *it = json_object_iter(o);
        key = json_object_iter_key(it);
        v = json_object_iter_value(it);
    }
    if (key && strcmp(key, "ping") == 0 && json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) <= 9007199254740991LL) {
        if (st->phase == DX_RUNNING)
            dx_ping(st, (uint64_t)json_integer_value(v));
    } else if (key && strcmp(key, "release") == 0 && json_is_true(v)) {
        if (st->h && st->phase <= DX_ENDING) {
            st->phase = DX_ENDING;
            loop_timer_stop(loop_of(st->r), &st->silence);
            st->npending = 0;
            hold_release(st->h, "requested");
        }
    } else {
        dx_bad(st, !o ? "not JSON" : "a line is {\"ping\":n} (0 <= n < 2^53) or {\"release\":true}");
    }
    json_decref(o);
}

/* What the client sent: its lines; end-of-stream or an error is a hang-up. */
static void dx_read(struct stream_state *st)
{
    for (;;) {
        char chunk[1024];
        ssize_t k = recv(st->fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k <= 0) {
            /* Gone without a release (or after one): the hold lets go once what it
             * told has run out (a cut looks the same as a close). */
            dx_close(st);
            return;
        }
        for (ssize_t i = 0; i < k && st->phase < DX_CLOSED; i++) {
            if (chunk[i] == '\n') {
                st->in[st->in_len] = '\0';
                if (st->phase < DX_CLOSING)
                    dx_line(st, st->in, st->in_len);
                st->in_len = 0;
            } else if (st->in_len < DUPLEX_MAX_LINE) {
                st->in[st->in_len++] = chunk[i];
            } else {
                st->in_len = 0;
                dx_bad(st, "a line is at most 256 bytes");
            }
        }
        if (st->phase >= DX_CLOSED)
            return;
    }
}

static void dx_set_events(struct stream_state *st)
{
    if (st->fd < 0 || st->phase >= DX_CLOSED)
        return;
    uint32_t ev = EPOLLIN | EPOLLRDHUP | (st->len > st->off ? EPOLLOUT : 0);
    if (st->io.events != ev)
        loop_io_set(loop_of(st->r), &st->io, ev);
}

static void dx_flush(struct stream_state *st)
{
    if (st->fd < 0 || st->phase >= DX_CLOSED)
        return;
    while (st->len > st->off) {
        ssize_t k = send(st->fd, st->buf + st->off, st->len - st->off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) { /* the client is gone */
            st->off = st->len = 0;
            dx_close(st);
            return;
        }
        st->off += (size_t)k;
    }
    if (st->off == st->len)
        st->off = st->len = 0;
    if (st->phase == DX_CLOSING && st->len == 0) {
        dx_close(st);
        return;
    }
    dx_set_events(st);
}

static void dx_on_io(loop_io *io, uint32_t events)
{
    struct stream_state *st = container_of(io, struct stream_state, io);
    if (events & EPOLLOUT)
        dx_flush(st);
    if (st->phase < DX_CLOSED && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        dx_read(st);
}

static void dx_on_silence(loop_timer *t)
{
    struct stream_state *st = container_of(t, struct stream_state, silence);
    if (st->phase != DX_RUNNING || !st->h)
        return;
    st->phase = DX_ENDING;
    st->npending = 0;
    hold_release(st->h, "client_silent");
}

static void dx_on_closing(loop_timer *t)
{
    dx_close(container_of(t, struct stream_state, closing));
}

/* The connection goes back to libmicrohttpd, which closes it (the request then
 * completes and stream_free() runs).  A hold still running is let go as after a
 * hang-up (hold_close: once what it told has run out). */
static void dx_close(struct stream_state *st)
{
    http_req *r = st->r;
    if (st->phase == DX_CLOSED)
        return;
    st->phase = DX_CLOSED;
    loop_timer_stop(loop_of(r), &st->silence);
    loop_timer_stop(loop_of(r), &st->closing);
    if (st->h) {
        hold_close(st->h);
        st->h = NULL;
    }
    if (st->fd >= 0) {
        loop_io_set(loop_of(r), &st->io, 0);
        st->fd = -1;
    }
    list_remove(&st->dx_link);
    if (st->urh) {
        MHD_upgrade_action(st->urh, MHD_UPGRADE_ACTION_CLOSE);
        st->urh = NULL;
        r->srv->mhd_ready = 1;
        r->srv->upgrades_closing++; /* until the request completes (stream_free) */
        st->counted_closing = 1;
    }
}

static void on_duplex_event(void *owner, int event, int64_t validity_ms, const char *reason)
{
    struct stream_state *st = owner;
    (void)validity_ms;
    if (event == HOLD_EXTENDED) {
        dx_answer_pending(st);
        return;
    }
    if (event == HOLD_LOST) {
        /* Said at once; the hold lets go later (HOLD_OVER).  A bad message's was said
         * with its message already. */
        if (!(reason && strcmp(reason, "bad_message") == 0)) {
            char buf[128];
            jw j;
            jw_init(&j, buf, sizeof buf);
            body_hold_event(&j, lost_event(reason), -1, reason);
            dx_write(st, buf, jw_len(&j), 0);
        }
        if (st->phase < DX_ENDING)
            st->phase = DX_ENDING;
        loop_timer_stop(loop_of(st->r), &st->silence);
        st->npending = 0;
        return;
    }
    st->h = NULL; /* HOLD_RELEASED or HOLD_OVER: the hold's last word */
    if (event == HOLD_RELEASED) {
        char buf[128];
        jw j;
        jw_init(&j, buf, sizeof buf);
        body_hold_event(&j, "released", -1, reason);
        dx_write(st, buf, jw_len(&j), 0);
    }
    dx_closing(st);
}

/* libmicrohttpd sent the 101: the connection is ours.  The grant line goes first. */
static void on_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    http_req *r = cls;
    struct stream_state *st = r->stream;
    (void)c;
    (void)con_cls;
    st->fd = sock;
    st->urh = urh;
    st->io.fd = sock;
    st->io.cb = dx_on_io;
    st->io.events = 0;
    list_insert_head(&r->srv->duplex, &st->dx_link);
    small_sndbuf(sock);
    int one = 1, fd = conn_fd(r);
    /* libmicrohttpd turns Nagle back on for the upgrade: small lines must not wait for
     * the peer's delayed acknowledgement (TLS: the real socket, not the socketpair). */
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (st->h)
        hold_told_grant(st->h); /* the grant line is in the buffer: from now on, told */
    if (st->phase == DX_WAITING)
        st->phase = DX_RUNNING;
    if (st->phase == DX_RUNNING)
        dx_arm_silence(st);
    else if (st->phase == DX_CLOSING)
        loop_timer_start(loop_of(r), &st->closing, clock_now_us() + DUPLEX_CLOSE_WAIT_MS * 1000);
    /* Bytes the client sent before the 101 (it should not): as if read now. */
    for (size_t i = 0; i < extra_in_size && st->phase < DX_CLOSED; i++) {
        if (extra_in[i] == '\n') {
            if (st->phase < DX_CLOSING)
                dx_line(st, st->in, st->in_len);
            st->in_len = 0;
        } else if (st->in_len < DUPLEX_MAX_LINE) {
            st->in[st->in_len++] = extra_in[i];
        }
    }
    dx_flush(st);
}

/* The duplex grant: a 101 (sent when the request is resumed), and the hold in told
 * mode, its first extension under way at once. */
static void dx_begin(http_req *r, const lockop *op)
{
    struct stream_state *st = r->stream;
    st->fd = -1;
    st->r = r;
    st->silence.cb = dx_on_silence;
    st->closing.cb = dx_on_closing;
    st->ping_ms = op->ttl_ms / 4 > 0 ? op->ttl_ms / 4 : 1;
    st->silence_ms = op->ttl_ms;
    char line[BODY_MAX_LOCK + 64];
    size_t n = dx_grant_line(line, sizeof line, op, st->ping_ms, st->silence_ms);
    struct MHD_Response *resp = n ? MHD_create_response_for_upgrade(on_upgraded, r) : NULL;
    if (!resp || buf_append(st, line, n, DUPLEX_OUT_MAX) != 0) {
        if (resp)
            MHD_destroy_response(resp);
        hold_start(st->h, op, HOLD_IMMEDIATE, NULL, NULL); /* only to let the lock go */
        hold_close(st->h);
        st->h = NULL;
        answer_error(r, RL_E_INTERNAL);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, UPGRADE_TOKEN);
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    st->started = 1;
    st->phase = DX_WAITING;
    hold_start(st->h, op, HOLD_TOLD, on_duplex_event, st);
    r->status = 101;
    r->resp = resp; /* queued when the request is resumed (op_done) */
}

/* ---- both ---- */

void stream_begin(http_req *r, const lockop *op)
{
    struct stream_state *st = r->stream;
    st->r = r;
    if (st->duplex) {
        dx_begin(r, op);
        return;
    }
    body_lock l = answer_lock_of(op);
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
        hold_start(st->h, op, HOLD_IMMEDIATE, NULL, NULL); /* only to let the lock go */
        hold_close(st->h);
        st->h = NULL;
        answer_error(r, RL_E_INTERNAL);
        return;
    }
    hold_start(st->h, op, HOLD_IMMEDIATE, on_hold_event, r);
    st->started = 1;
    small_sndbuf(conn_fd(r));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    answer_queue(r, 201, resp, "application/x-ndjson", NULL, NULL);
    answer_watch_hangup(r, stream_gone); /* a client that hangs up releases the lock */
}

void stream_free(http_req *r)
{
    struct stream_state *st = r->stream;
    if (!st)
        return;
    if (st->duplex) {
        /* A 101 never sent (the client went first), or the connection closed. */
        if (st->phase != DX_CLOSED && st->started)
            dx_close(st);
        loop_timer_stop(loop_of(r), &st->silence);
        loop_timer_stop(loop_of(r), &st->closing);
        if (st->counted_closing)
            r->srv->upgrades_closing--;
    } else {
        answer_unwatch_hangup(r);
    }
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

void stream_close_all(http_server *s)
{
    for (list *node; (node = list_first(&s->duplex));)
        dx_close(list_data(node, struct stream_state, dx_link)); /* unlists it */
}

/* A comma-separated header value holds token (case aside). */
static int has_token(const char *v, const char *token)
{
    size_t tl = strlen(token);
    while (v && *v) {
        v += strspn(v, " \t,");
        size_t n = strcspn(v, ",");
        size_t k = n;
        while (k && (v[k - 1] == ' ' || v[k - 1] == '\t'))
            k--;
        if (k == tl && strncasecmp(v, token, tl) == 0)
            return 1;
        v += n;
    }
    return 0;
}

int stream_duplex_asked(http_req *r)
{
    const char *up = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
    if (!up || !has_token(up, UPGRADE_TOKEN))
        return 0;
    const char *conn = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);
    if (!conn || !has_token(conn, "upgrade")) {
        snprintf(r->msg, sizeof r->msg, "Upgrade: " UPGRADE_TOKEN " needs Connection: Upgrade");
        return -1;
    }
    if (r->http10) {
        snprintf(r->msg, sizeof r->msg, "Upgrade: " UPGRADE_TOKEN " needs HTTP/1.1");
        return -1;
    }
    return 1;
}

rl_err stream_reserve(http_req *r, int duplex)
{
    r->stream = calloc(1, sizeof *r->stream);
    if (!r->stream || !(r->stream->h = hold_new(r->srv->env.holds))) {
        free(r->stream);
        r->stream = NULL;
        return RL_E_TOO_MANY_STREAMS;
    }
    r->stream->r = r;
    r->stream->duplex = duplex;
    r->stream->fd = -1;
    return RL_OK;
}
