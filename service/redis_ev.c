/* redis_ev.c -- the hiredis event-library adapter on our loop (see redis_ev.h). */
#include "redis_ev.h"

#include <hiredis/async.h>
#include <sys/epoll.h>

static void update_events(redis_ev *e)
{
    if (!e->ac)
        return;
    uint32_t ev = (e->want_in ? EPOLLIN : 0) | (e->want_out ? EPOLLOUT : 0);
    e->io.fd = e->ac->c.fd;
    if (loop_io_set(e->loop, &e->io, ev) != 0 && ev && e->hooks->watch_failed)
        e->hooks->watch_failed(e);
}

static void ev_add_read(void *p) { redis_ev *e = p; e->want_in = 1; update_events(e); }
static void ev_del_read(void *p) { redis_ev *e = p; e->want_in = 0; update_events(e); }
static void ev_del_write(void *p) { redis_ev *e = p; e->want_out = 0; update_events(e); }

static void ev_add_write(void *p)
{
    redis_ev *e = p;
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
    e->want_in = e->want_out = 0;
    loop_io_set(e->loop, &e->io, 0);
    e->io.events = 0;
}

static void on_io(loop_io *io, uint32_t events)
{
    redis_ev *e = container_of(io, redis_ev, io);
    if (!e->ac || e->ac->c.fd != io->fd)
        return; /* a stale event for a context freed earlier in this batch */
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        redisAsyncHandleRead(e->ac);
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
}

void redis_ev_attach(redis_ev *e, redisAsyncContext *ac)
{
    e->ac = ac;
    e->connected = 0;
    e->dirty = 0;
    ac->ev.data = e;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    e->io.fd = ac->c.fd;
    e->io.events = 0;
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
    if (e->ac)
        redisAsyncHandleWrite(e->ac);
    e->dirty = 0;
}
