/* notify.c -- release and grant announcements over Redis pub/sub (see notify.h). */
#include "notify.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inbox.h"
#include "keys.h"
#include "redis_ev.h"

typedef struct sub_conn {
    notify *n;
    const config_master *cfg;
    redis_ev ev; /* writes at once */
    loop_timer retry;
    int backoff_ms;
} sub_conn;

struct notify {
    const config *cfg;
    loop *loop;
    const char *origin;
    notify_cb cb;
    void *owner;
    inbox *inbox; /* its sockets and reads, for the other threads; may be NULL */
    size_t n;
    sub_conn *subs;
    /* the channels followed now (to subscribe again after a reconnect) */
    char **channels;            /* followed channels, each once */
    int *refs;                  /* how many callers follow each */
    size_t nchannels, cap;
};

static void on_reading(redis_ev *e, int begin)
{
    notify *n = container_of(e, sub_conn, ev)->n;
    if (!n->inbox)
        return;
    if (begin)
        inbox_read_begin(n->inbox);
    else
        inbox_read_end(n->inbox);
}

/* Socket i of n's inbox is fd now (-1: none). */
static void share_fd(sub_conn *s, int fd)
{
    if (s->n->inbox)
        inbox_set_fd(s->n->inbox, (int)(s - s->n->subs), fd);
}

/* The adapter (redis_ev.h) writes at once: subscriptions are few and not batched.
 * Its reads are counted in the inbox. */
static const redis_ev_hooks ev_hooks = {.want_flush = NULL, .watch_failed = NULL,
                                        .reading = on_reading};

/* ---- connection ---- */

static void connect_sub(sub_conn *s);

static void on_retry(loop_timer *t)
{
    connect_sub(container_of(t, sub_conn, retry));
}

static void schedule(sub_conn *s)
{
    /* a TLS refusal (a certificate) is not fixed by retrying at once: 1 s to 5 s */
    int refused = s->ev.tls_refused, max = refused ? 5000 : 2000;
    if (refused && s->backoff_ms < 1000)
        s->backoff_ms = 1000;
    loop_timer_start(s->n->loop, &s->retry, clock_now_us() + (int64_t)s->backoff_ms * 1000);
    s->backoff_ms = s->backoff_ms * 2 > max ? max : s->backoff_ms * 2;
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
        while (first < s->n->n && !s->n->subs[first].ev.connected)
            first++;
        if (s != &s->n->subs[first])
            return;
    } else if (strcmp(kind->str, "message") != 0) {
        return;
    }
    /* A release's message is the releasing instance's origin; a grant's is "+origin". */
    const char *origin = s->n->origin;
    const char *who = msg->type == REDIS_REPLY_STRING ? msg->str : "";
    size_t who_len = msg->type == REDIS_REPLY_STRING ? msg->len : 0;
    int granted = !confirmed && who_len && who[0] == '+';
    if (granted) {
        who++;
        who_len--;
    }
    if (!confirmed && origin && strlen(origin) == who_len && memcmp(who, origin, who_len) == 0)
        return; /* through this instance: its workers were told then */
    if (!confirmed && s->n->inbox)
        inbox_heard_foreign(s->n->inbox, clock_now_us());
    size_t nl;
    const char *name = keys_released_name(s->n->cfg->key_prefix, chan->str, chan->len, &nl);
    if (name)
        s->n->cb(s->n->owner, name, nl, granted);
}

static void send_subscribe(sub_conn *s, const char *channel, int subscribe)
{
    if (!s->ev.ac || !s->ev.connected)
        return;
    const char *argv[] = {subscribe ? "SUBSCRIBE" : "UNSUBSCRIBE", channel};
    /* hiredis keeps the callback per channel and calls it for every message */
    redisAsyncCommandArgv(s->ev.ac, on_message, NULL, 2, argv, NULL);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    sub_conn *s = cac->data;
    if (status != REDIS_OK) {
        redis_ev_forget(&s->ev);
        schedule(s);
        return;
    }
    s->ev.connected = 1;
    s->backoff_ms = 100;
    share_fd(s, cac->c.fd);
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    const char *auth[3];
    int nauth = config_master_auth_argv(s->cfg, auth); /* AUTH [user] password */
    if (nauth)
        redisAsyncCommandArgv(ac, NULL, NULL, nauth, auth, NULL);
    /* First a channel nobody publishes on, kept for the connection's life: hiredis
     * leaves subscribed mode whenever the count of channels falls to 0, and a
     * SUBSCRIBE whose answer comes after that (an UNSUBSCRIBE of the last name, then a
     * SUBSCRIBE, both in flight) would find no callback and abort the process. */
    char anchor[KEYS_MAX];
    keys_anchor(s->n->cfg->key_prefix, anchor, sizeof anchor);
    send_subscribe(s, anchor, 1);
    for (size_t i = 0; i < s->n->nchannels; i++)
        send_subscribe(s, s->n->channels[i], 1);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    sub_conn *s = ac->data;
    (void)status;
    if (!s || s->ev.ac != ac)
        return;
    share_fd(s, -1);
    redis_ev_forget(&s->ev);
    if (s->backoff_ms)
        schedule(s);
}

static void connect_sub(sub_conn *s)
{
    if (s->ev.ac)
        return;
    redisAsyncContext *ac = s->cfg->unix_path[0] ? redisAsyncConnectUnix(s->cfg->unix_path)
                                                 : redisAsyncConnect(s->cfg->host, s->cfg->port);
    char err[160];
    if (ac && !ac->err && !s->cfg->tls) {
        redis_ev_attach(&s->ev, ac);
    } else if (ac && !ac->err) {
        /* TLS: the connect and the handshake must end within the master's own limit */
        const config *c = s->n->cfg;
        int64_t limit_ms = c->node_timeout_ms * 10 < 1000 ? 1000 : c->node_timeout_ms * 10;
        if (redis_ev_attach_tls(&s->ev, ac, c->redis_tls, config_master_tls_name(c, s->cfg),
                                clock_now_us() + limit_ms * 1000, err, sizeof err) != 0) {
            redisAsyncFree(ac);
            ac = NULL;
        }
    }
    if (!ac || ac->err) {
        if (ac)
            redisAsyncFree(ac);
        schedule(s);
        return;
    }
    ac->data = s;
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    redisAsyncSetConnectCallback(ac, on_connect);
}

notify *notify_new(const config *cfg, loop *l, const char *origin, notify_cb cb, void *owner,
                   inbox *in)
{
    notify *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->cfg = cfg;
    n->loop = l;
    n->origin = origin;
    n->cb = cb;
    n->owner = owner;
    n->inbox = in;
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
        redis_ev_init(&s->ev, l, &ev_hooks);
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
        share_fd(s, -1);
        if (s->ev.ac) {
            redisAsyncFree(s->ev.ac);
            redis_ev_forget(&s->ev);
        }
    }
    for (size_t i = 0; i < n->nchannels; i++)
        free(n->channels[i]);
    free(n->channels);
    free(n->refs);
    free(n->subs);
    free(n);
}

void notify_subscribe(notify *n, const char *name, size_t len)
{
    char ch[KEYS_MAX];
    keys_released(n->cfg->key_prefix, name, len, ch, sizeof ch);
    for (size_t i = 0; i < n->nchannels; i++)
        if (strcmp(n->channels[i], ch) == 0) {
            n->refs[i]++; /* followed already (waiters, a hold or a watch of it) */
            return;
        }
    if (n->nchannels == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 16;
        char **nc = realloc(n->channels, cap * sizeof *nc);
        if (nc)
            n->channels = nc;
        int *nr = nc ? realloc(n->refs, cap * sizeof *nr) : NULL;
        if (!nr)
            return; /* the poll still wakes the waiters */
        n->refs = nr;
        n->cap = cap;
    }
    char *dup = strdup(ch);
    if (!dup)
        return;
    n->refs[n->nchannels] = 1;
    n->channels[n->nchannels++] = dup;
    for (size_t i = 0; i < n->n; i++)
        send_subscribe(&n->subs[i], ch, 1);
}

void notify_unsubscribe(notify *n, const char *name, size_t len)
{
    char ch[KEYS_MAX];
    keys_released(n->cfg->key_prefix, name, len, ch, sizeof ch);
    for (size_t i = 0; i < n->nchannels; i++)
        if (strcmp(n->channels[i], ch) == 0) {
            if (--n->refs[i] > 0)
                return;
            free(n->channels[i]);
            n->nchannels--;
            n->channels[i] = n->channels[n->nchannels];
            n->refs[i] = n->refs[n->nchannels];
            for (size_t k = 0; k < n->n; k++)
                send_subscribe(&n->subs[k], ch, 0);
            return;
        }
}
