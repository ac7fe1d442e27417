/* stream.c -- locks held while the connection is open (see stream.h). */
#include "stream.h"

#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "body.h"
#include "hold.h"
#include "jw.h"

static void stream_gone(http_req *r);

/* A streamed answer: the grant, then one line per event of its hold (hold.h), in
 * application/x-ndjson.  The content reader hands out what is written and suspends
 * the connection when it has nothing; an event resumes it. */
struct stream_state {
    hold *h;             /* NULL once the hold has said its last word (or was let go) */
    int started;         /* the grant was answered: the hold runs */
    int ended;           /* nothing more will be written */
    int paused;          /* the reader suspended the connection */
    size_t off, len, cap;
    char *buf;
};

/* Bytes a client may leave unread before it counts as gone. */
#define STREAM_MAX_UNREAD (64 * 1024)

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

/* The acquire of a streamed hold was granted: answer 201 with a stream, and keep the
 * lock for as long as it is open. */
void stream_begin(http_req *r, const lockop *op)
{
    struct stream_state *st = r->stream;
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
        hold_start(st->h, op, NULL, NULL); /* only to let the lock go */
        hold_close(st->h);
        st->h = NULL;
        answer_error(r, RL_E_INTERNAL);
        return;
    }
    hold_start(st->h, op, on_hold_event, r);
    st->started = 1;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    answer_queue(r, 201, resp, "application/x-ndjson", NULL, NULL);
    answer_watch_hangup(r, stream_gone); /* a client that hangs up releases the lock */
}

void stream_free(http_req *r)
{
    struct stream_state *st = r->stream;
    if (!st)
        return;
    answer_unwatch_hangup(r);
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


rl_err stream_reserve(http_req *r)
{
    r->stream = calloc(1, sizeof *r->stream);
    if (!r->stream || !(r->stream->h = hold_new(r->srv->env.holds))) {
        free(r->stream);
        r->stream = NULL;
        return RL_E_TOO_MANY_STREAMS;
    }
    return RL_OK;
}
