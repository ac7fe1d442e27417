/* notify.c -- release notifications over Redis pub/sub (see notify.h). */
#include "notify.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "keys.h"

typedef struct sub_conn {
    notify *n;
    const config_master *cfg;
    redisAsyncContext *ac;
    loop_io io;
    loop_timer retry;
    int want_in, want_out, connected, dirty;
    int backoff_ms;
} sub_conn;

struct notify {
    const config *cfg;
    loop *loop;
    const char *origin;
    notify_cb cb;
    void *owner;
    size_t n;
    sub_conn *subs;
    /* the channels followed now (to subscribe again after a reconnect) */
    char **channels;
    size_t nchannels, cap;
};

/* ---- event adapter ---- */

static void update(sub_conn *s)
{
    if (!s->ac)
        return;
    s->io.fd = s->ac->c.fd;
    loop_io_set(s->n->loop, &s->io, (s->want_in ? EPOLLIN : 0) | (s->want_out ? EPOLLOUT : 0));
}
static void add_read(void *p) { sub_conn *s = p; s->want_in = 1; update(s); }
static void del_read(void *p) { sub_conn *s = p; s->want_in = 0; update(s); }
static void add_write(void *p) { sub_conn *s = p; s->want_out = 1; update(s); }
static void del_write(void *p) { sub_conn *s = p; s->want_out = 0; update(s); }
static void cleanup(void *p)
{
    sub_conn *s = p;
    s->want_in = s->want_out = 0;
    loop_io_set(s->n->loop, &s->io, 0);
    s->io.events = 0;
}

static void on_io(loop_io *io, uint32_t ev)
{
    sub_conn *s = container_of(io, sub_conn, io);
    if (!s->ac || s->ac->c.fd != io->fd)
        return;
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        redisAsyncHandleRead(s->ac);
    if (s->ac && (ev & EPOLLOUT))
        redisAsyncHandleWrite(s->ac);
}

/* ---- connection ---- */

static void connect_sub(sub_conn *s);

static void on_retry(loop_timer *t)
{
    connect_sub(container_of(t, sub_conn, retry));
}

static void schedule(sub_conn *s)
{
    loop_timer_start(s->n->loop, &s->retry, clock_now_us() + (int64_t)s->backoff_ms * 1000);
    s->backoff_ms = s->backoff_ms * 2 > 2000 ? 2000 : s->backoff_ms * 2;
}

static void on_message(redisAsyncContext *ac, void *r, void *priv)
{
    sub_conn *s = ac->data;
    redisReply *reply = r;
    (void)priv;
    if (!s || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
        return;
    redisReply *kind = reply->element[0], *chan = reply->element[1], *msg = reply->element[2];
    if (kind->type != REDIS_REPLY_STRING || chan->type != REDIS_REPLY_STRING)
        return;
    int confirmed = strcmp(kind->str, "subscribe") == 0;
    if (confirmed) {
        /* Following the name from now on: a release made elsewhere between the
         * waiter's refused attempt and this moment would be missed, so wake it once
         * (on the first connected master's confirmation only). */
        size_t first = 0;
        while (first < s->n->n && !s->n->subs[first].connected)
            first++;
        if (s != &s->n->subs[first])
            return;
    } else if (strcmp(kind->str, "message") != 0) {
        return;
    }
    const char *origin = s->n->origin;
    if (!confirmed && origin && msg->type == REDIS_REPLY_STRING && strlen(origin) == msg->len &&
        memcmp(msg->str, origin, msg->len) == 0)
        return; /* released through this instance: its waiters were woken then */
    size_t nl;
    const char *name = keys_released_name(s->n->cfg->key_prefix, chan->str, chan->len, &nl);
    if (name)
        s->n->cb(s->n->owner, name, nl);
}

static void send_subscribe(sub_conn *s, const char *channel, int subscribe)
{
    if (!s->ac || !s->connected)
        return;
    const char *argv[] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel};
    /* hiredis keeps the callback per channel and calls it for every message */
    redisAsyncCommandArgv(s->ac, on_message, NULL, 2, argv, NULL);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    sub_conn *s = cac->data;
    if (status != REDIS_OK) {
        s->ac = NULL;
        s->connected = 0;
        schedule(s);
        return;
    }
    s->connected = 1;
    s->backoff_ms = 100;
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    if (s->cfg->password[0]) {
        const char *argv[] = {"AUTH", s->cfg->password};
        redisAsyncCommandArgv(ac, NULL, NULL, 2, argv, NULL);
    }
    for (size_t i = 0; i < s->n->nchannels; i++)
        send_subscribe(s, s->n->channels[i], 1);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    sub_conn *s = ac->data;
    (void)status;
    if (!s || s->ac != ac)
        return;
    s->ac = NULL;
    s->connected = 0;
    if (s->backoff_ms)
        schedule(s);
}

static void connect_sub(sub_conn *s)
{
    if (s->ac)
        return;
    redisAsyncContext *ac = s->cfg->unix_path[0] ? redisAsyncConnectUnix(s->cfg->unix_path)
                                                 : redisAsyncConnect(s->cfg->host, s->cfg->port);
    if (!ac || ac->err) {
        if (ac)
            redisAsyncFree(ac);
        schedule(s);
        return;
    }
    s->ac = ac;
    s->connected = 0;
    ac->data = s;
    ac->ev.data = s;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    s->io.fd = ac->c.fd;
    s->io.events = 0;
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    redisAsyncSetConnectCallback(ac, on_connect);
}

notify *notify_new(const config *cfg, loop *l, const char *origin, notify_cb cb, void *owner)
{
    notify *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->cfg = cfg;
    n->loop = l;
    n->origin = origin;
    n->cb = cb;
    n->owner = owner;
    n->n = cfg->n_masters;
    n->subs = calloc(n->n, sizeof *n->subs);
    if (!n->subs) {
        free(n);
        return NULL;
    }
    for (size_t i = 0; i < n->n; i++) {
        sub_conn *s = &n->subs[i];
        s->n = n;
        s->cfg = &cfg->masters[i];
        s->io.fd = -1;
        s->io.cb = on_io;
        s->retry.cb = on_retry;
        s->backoff_ms = 100;
    }
    return n;
}

void notify_start(notify *n)
{
    for (size_t i = 0; i < n->n; i++)
        connect_sub(&n->subs[i]);
}

void notify_free(notify *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        sub_conn *s = &n->subs[i];
        loop_timer_stop(n->loop, &s->retry);
        s->backoff_ms = 0; /* no reconnect */
        if (s->ac) {
            redisAsyncContext *ac = s->ac;
            redisAsyncFree(ac);
            s->ac = NULL;
        }
    }
    for (size_t i = 0; i < n->nchannels; i++)
        free(n->channels[i]);
    free(n->channels);
    free(n->subs);
    free(n);
}

void notify_subscribe(notify *n, const char *name, size_t len)
{
    char ch[512];
    keys_released(n->cfg->key_prefix, name, len, ch, sizeof ch);
    if (n->nchannels == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 16;
        char **nc = realloc(n->channels, cap * sizeof *nc);
        if (!nc)
            return; /* the poll still wakes the waiters */
        n->channels = nc;
        n->cap = cap;
    }
    char *dup = strdup(ch);
    if (!dup)
        return;
    n->channels[n->nchannels++] = dup;
    for (size_t i = 0; i < n->n; i++)
        send_subscribe(&n->subs[i], ch, 1);
}

void notify_unsubscribe(notify *n, const char *name, size_t len)
{
    char ch[512];
    keys_released(n->cfg->key_prefix, name, len, ch, sizeof ch);
    for (size_t i = 0; i < n->nchannels; i++)
        if (strcmp(n->channels[i], ch) == 0) {
            free(n->channels[i]);
            n->channels[i] = n->channels[--n->nchannels];
            for (size_t k = 0; k < n->n; k++)
                send_subscribe(&n->subs[k], ch, 0);
            return;
        }
}

