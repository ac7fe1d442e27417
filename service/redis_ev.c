/* redis_ev.c -- the hiredis event-library adapter on our loop (see redis_ev.h). */
#include "redis_ev.h"

#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "redis_tls.h"
#include "replyarena.h"

/* hiredis 0.14 exports this (Debian's symbols file lists redisProcessCallbacks@Base
 * 0.14.0) without declaring it in async.h: it parses what the reader holds and runs
 * the callbacks, which is what redisAsyncHandleRead() does after its read(). */
void redisProcessCallbacks(redisAsyncContext *ac);

enum { TLS_CONNECT = 0, TLS_HANDSHAKE, TLS_OPEN };

/* Parse at most this much before looking at the loop again (a flood of messages). */
#define TLS_READ_SLICE (256 * 1024)

static void update_events(redis_ev *e)
{
    if (!e->ac)
        return;
    uint32_t ev = (e->want_in ? EPOLLIN : 0) | (e->want_out ? EPOLLOUT : 0);
    e->io.fd = e->ac->c.fd;
    if (loop_io_set(e->loop, &e->io, ev) != 0 && ev && e->hooks->watch_failed)
        e->hooks->watch_failed(e);
}

/* On a TLS connection hiredis asks for nothing until it is open (then it only asks to
 * write); the session's needs decide what is watched. */
static void ev_add_read(void *p)
{
    redis_ev *e = p;
    if (e->tls)
        return;
    e->want_in = 1;
    update_events(e);
}

static void ev_del_read(void *p)
{
    redis_ev *e = p;
    if (e->tls)
        return;
    e->want_in = 0;
    update_events(e);
}

static void ev_del_write(void *p)
{
    redis_ev *e = p;
    if (e->tls)
        return;
    e->want_out = 0;
    update_events(e);
}

static void ev_add_write(void *p)
{
    redis_ev *e = p;
    if (e->tls && e->tls_phase != TLS_OPEN)
        return; /* the handshake writes first; the owner's commands wait in the buffer */
    /* At once; or coalesced: before connect completes, or when a flush could not write
     * everything, wait for the socket; otherwise one write per loop pass for all. */
    if (!e->hooks->want_flush || !e->connected || e->dirty < 0) {
        e->want_out = 1;
        update_events(e);
    } else {
        redis_ev_want_flush(e);
    }
}

static void ev_cleanup(void *p)
{
    redis_ev *e = p;
    /* hiredis calls this on every path that frees the context (after the last callback,
     * before it frees the reader): the reply arena goes with it */
    replyarena_uninstall(e->arena);
    e->arena = NULL;
    e->want_in = e->want_out = 0;
    loop_io_set(e->loop, &e->io, 0);
    e->io.events = 0;
    if (e->tls) {
        loop_timer_stop(e->loop, &e->tls_timer);
        redis_tls_free(e->tls);
        e->tls = NULL;
    }
}

/* ---- TLS ---- */

/* The TLS connection failed (reason for a person): hiredis's own paths from here. */
static void tls_fail(redis_ev *e, const char *reason)
{
    redisAsyncContext *ac = e->ac;
    redisContext *c = &ac->c;
    e->tls_refused = e->tls && redis_tls_refused(e->tls);
    snprintf(e->tls_error, sizeof e->tls_error, "%s", reason);
    c->err = REDIS_ERR_IO;
    snprintf(c->errstr, sizeof c->errstr, "%s", reason);
    if (c->flags & REDIS_CONNECTED) {
        /* As for a broken plain connection: its read fails on c->err, pending callbacks
         * get NULL, the disconnect callback runs, the context is freed. */
        redisAsyncHandleRead(ac);
        return;
    }
    /* As for a failed connect: the connect callback, then the context freed (hiredis
     * would not call us again: clean up first, and take our hooks off it). */
    ev_cleanup(e);
    ac->ev.data = NULL;
    ac->ev.addRead = ac->ev.delRead = ac->ev.addWrite = ac->ev.delWrite = ac->ev.cleanup = NULL;
    ac->err = c->err;
    ac->errstr = c->errstr;
    if (ac->onConnect)
        ac->onConnect(ac, REDIS_ERR);
    redisAsyncFree(ac);
}

static void tls_timeout(loop_timer *t)
{
    redis_ev *e = container_of(t, redis_ev, tls_timer);
    if (!e->ac || !e->tls || e->tls_phase == TLS_OPEN)
        return;
    tls_fail(e, e->tls_phase == TLS_CONNECT ? "TLS: connect timed out"
                                            : "TLS: the handshake timed out (the master took the "
                                              "connection but did not complete it)");
}

static void tls_want(redis_ev *e, int rc)
{
    e->want_in = rc == REDIS_TLS_WANT_READ || e->tls_phase == TLS_OPEN;
    e->want_out = rc == REDIS_TLS_WANT_WRITE;
    update_events(e);
}

static void tls_write(redis_ev *e)
{
    int rc = redis_tls_write(e->tls, &e->ac->c.obuf);
    if (rc == REDIS_TLS_ERR) {
        tls_fail(e, redis_tls_reason(e->tls));
        return;
    }
    tls_want(e, rc);
}

static void tls_read(redis_ev *e)
{
    redisAsyncContext *ac = e->ac;
    int rc;
    for (;;) {
        size_t fed = 0;
        rc = redis_tls_read(e->tls, ac->c.reader, TLS_READ_SLICE, &fed);
        if (fed) {
            redisProcessCallbacks(ac);
            if (e->ac != ac || !e->tls)
                return; /* a callback closed it, or the reply did not parse */
        }
        if (rc != REDIS_TLS_MORE)
            break;
    }
    if (rc == REDIS_TLS_ERR) {
        tls_fail(e, redis_tls_reason(e->tls)); /* after what came before the failure */
        return;
    }
    if (redis_tls_write_pending(e->tls) && !e->want_out)
        tls_write(e); /* a write that waited for this read (a key update) */
}

/* The handshake is done: now hiredis hears of the connection, as after a plain connect. */
static void tls_opened(redis_ev *e)
{
    redisAsyncContext *ac = e->ac;
    loop_timer_stop(e->loop, &e->tls_timer);
    e->tls_phase = TLS_OPEN;
    tls_want(e, REDIS_TLS_WANT_READ);
    ac->c.flags |= REDIS_CONNECTED;
    if (ac->onConnect)
        ac->onConnect(ac, REDIS_OK); /* queues the owner's first commands */
}

static void tls_handshake(redis_ev *e)
{
    int rc = redis_tls_handshake(e->tls);
    if (rc == REDIS_TLS_ERR)
        tls_fail(e, redis_tls_reason(e->tls));
    else if (rc == REDIS_TLS_OK)
        tls_opened(e);
    else
        tls_want(e, rc);
}

static void tls_on_io(redis_ev *e, uint32_t events)
{
    redisAsyncContext *ac = e->ac;
    switch (e->tls_phase) {
    case TLS_CONNECT: {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(ac->c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err) {
            char why[128];
            snprintf(why, sizeof why, "%s", strerror(err));
            tls_fail(e, why);
            return;
        }
        e->tls_phase = TLS_HANDSHAKE;
        tls_handshake(e);
        return;
    }
    case TLS_HANDSHAKE:
        tls_handshake(e);
        return;
    default:
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
            if (e->hooks->reading)
                e->hooks->reading(e, 1);
            tls_read(e);
            if (e->hooks->reading)
                e->hooks->reading(e, 0);
            if (e->ac != ac || !e->tls)
                return;
        }
        if ((events & EPOLLOUT) && e->want_out)
            tls_write(e);
    }
}

int redis_ev_attach_tls(redis_ev *e, redisAsyncContext *ac, const struct redis_tls_creds *creds,
                        const char *name, int64_t deadline_us, char *err, size_t errlen)
{
    redis_tls *t = redis_tls_new(creds, ac->c.fd, name, err, errlen);
    if (!t)
        return -1;
    redis_ev_attach(e, ac);
    e->tls = t;
    e->tls_phase = TLS_CONNECT;
    e->want_in = 0;
    e->want_out = 1; /* the TCP connect completes when the socket is writable */
    update_events(e);
    if (deadline_us)
        loop_timer_start(e->loop, &e->tls_timer, deadline_us);
    return 0;
}

/* ---- both ---- */

static void on_io(loop_io *io, uint32_t events)
{
    redis_ev *e = container_of(io, redis_ev, io);
    if (!e->ac || e->ac->c.fd != io->fd)
        return; /* a stale event for a context freed earlier in this batch */
    if (e->tls) {
        tls_on_io(e, events);
        return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (e->hooks->reading)
            e->hooks->reading(e, 1);
        redisAsyncHandleRead(e->ac);
        if (e->hooks->reading)
            e->hooks->reading(e, 0);
    }
    if (e->ac && (events & EPOLLOUT))
        redisAsyncHandleWrite(e->ac);
}

void redis_ev_init(redis_ev *e, loop *l, const redis_ev_hooks *hooks)
{
    e->ac = NULL;
    e->connected = e->want_in = e->want_out = e->dirty = 0;
    e->io.fd = -1;
    e->io.events = 0;
    e->io.cb = on_io;
    e->loop = l;
    e->hooks = hooks;
    e->tls = NULL;
    e->tls_phase = TLS_CONNECT;
    e->tls_refused = 0;
    e->tls_error[0] = '\0';
    e->tls_timer.cb = tls_timeout;
    e->tls_timer.heap_index = 0;
    e->arena = NULL;
}

void redis_ev_attach(redis_ev *e, redisAsyncContext *ac)
{
    e->ac = ac;
    e->connected = 0;
    e->dirty = 0;
    e->tls = NULL;
    e->tls_phase = TLS_CONNECT;
    e->tls_refused = 0;
    e->tls_error[0] = '\0';
    ac->ev.data = e;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    e->io.fd = ac->c.fd;
    e->io.events = 0;
    /* replies without a malloc per element; out of memory: hiredis's own builders */
    e->arena = replyarena_install(ac->c.reader) == 0 ? ac->c.reader : NULL;
}

void redis_ev_forget(redis_ev *e)
{
    e->ac = NULL;
    e->connected = 0;
    e->dirty = 0;
    e->want_in = e->want_out = 0;
    e->io.events = 0;
}

void redis_ev_want_flush(redis_ev *e)
{
    if (!e->dirty) {
        e->dirty = 1;
        e->hooks->want_flush(e);
    }
}

void redis_ev_flush(redis_ev *e)
{
    e->dirty = -1; /* an add_write during this write means "wait for the socket" */
    if (e->ac && e->tls) {
        if (e->tls_phase == TLS_OPEN)
            tls_write(e);
    } else if (e->ac) {
        redisAsyncHandleWrite(e->ac);
    }
    e->dirty = 0;
}
