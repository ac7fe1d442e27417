/* redis_ev.h -- the hiredis event-library adapter on our own loop (loop.h): one
 * redisAsyncContext's socket watched through a loop_io, read and written when hiredis
 * asks (its addRead/delRead/addWrite/delWrite/cleanup hooks).  Used by every
 * non-blocking connection to a master: the worker's command connection (master.c)
 * and its pub/sub subscriber (notify.c).
 *
 * Two ways to write:
 *   - at once (hooks->want_flush NULL): a command queued makes the loop watch the
 *     socket for writing, and hiredis writes when it is writable;
 *   - coalesced (hooks->want_flush set): once connected, queued commands only ask the
 *     owner for a flush (want_flush, once until it happens); the owner calls
 *     redis_ev_flush() at the end of its loop pass, and everything queued in that pass
 *     leaves in one write.  Only what that write could not take waits for the socket.
 *
 * The owner embeds a redis_ev, creates the context, hands it to redis_ev_attach()
 * (or redis_ev_attach_tls()), keeps its own data in ac->data, sets `connected` from its
 * connect callback and calls redis_ev_forget() when hiredis lets the context go; it
 * attaches no new context before the old one is gone.
 *
 * TLS (rediss://): hiredis 0.14 has none, but it never needs to touch the socket
 * itself: it appends formatted commands to its output buffer and parses what its reader
 * is fed.  So on a TLS connection this adapter does the I/O (redis_tls.h): the TCP
 * connect and the handshake complete before hiredis hears of the connection (then it
 * calls the owner's connect callback, as after a plain connect), the output buffer
 * leaves through the session, and what the session decrypts is fed to the reader and
 * parsed with hiredis's own redisProcessCallbacks().  Failures take hiredis's own
 * paths: before the connect callback, that callback with REDIS_ERR and the context
 * freed; after it, pending callbacks get NULL and the disconnect callback runs; either
 * way ac->errstr says why (a refused certificate, the master's alert, a timeout). */
#ifndef RL_REDIS_EV_H
#define RL_REDIS_EV_H

#include "loop.h"

struct redisAsyncContext;
struct redis_tls;
struct redis_tls_creds;
typedef struct redis_ev redis_ev;

typedef struct redis_ev_hooks {
    /* Coalesced writes: output is queued, call redis_ev_flush() at the end of this
     * loop pass.  NULL: write as soon as the socket takes it. */
    void (*want_flush)(redis_ev *e);
    /* The loop could not watch the socket (epoll_ctl failed); may be NULL. */
    void (*watch_failed)(redis_ev *e);
    /* Around each read of the socket and the callbacks of what it brought: begin 1,
     * then 0 (the owner's count of reads going on, inbox.h); may be NULL. */
    void (*reading)(redis_ev *e, int begin);
} redis_ev_hooks;

struct redis_ev {
    struct redisAsyncContext *ac; /* NULL when none */
    int connected;                /* the socket finished connecting (set by the owner) */
    int want_in, want_out;        /* what hiredis asked for */
    int dirty;                    /* coalesced: 1 a flush is asked for, -1 flushing, else 0 */
    loop_io io;
    loop *loop;
    const redis_ev_hooks *hooks;
    /* TLS only */
    struct redis_tls *tls;     /* the connection's session; NULL: plain */
    int tls_phase;             /* enum in redis_ev.c: TCP connect, handshake, open */
    int tls_refused;           /* the last TLS failure was a refusal (redis_tls_refused());
                                * kept until the next attach, for the owner's back-off */
    char tls_error[200];       /* why it failed, whole (ac->errstr holds 127 bytes of it);
                                * "" when the failure was not TLS's; kept until the next attach */
    loop_timer tls_timer;      /* the connect + handshake deadline, if one was given */
    struct redisReader *arena; /* the context's reader while it builds replies in a
                                * replyarena (replyarena.h): set at attach, the arena
                                * freed by hiredis's cleanup hook; NULL: none */
};

/* Set up e (no context) on loop l; hooks must outlive e. */
void redis_ev_init(redis_ev *e, loop *l, const redis_ev_hooks *hooks);

/* Take a new context (not connected yet): hiredis's event hooks now drive e.  The
 * owner's ac->data is left alone. */
void redis_ev_attach(redis_ev *e, struct redisAsyncContext *ac);

/* Take a new context (not connected yet) as a TLS connection (see above): the
 * certificate must name `name` (also the SNI unless it is an address); deadline_us
 * (0: none) bounds the TCP connect and the handshake.  Returns 0, or -1 with err (e
 * then holds no context; the caller frees ac). */
int redis_ev_attach_tls(redis_ev *e, struct redisAsyncContext *ac, const struct redis_tls_creds *creds,
                        const char *name, int64_t deadline_us, char *err, size_t errlen);

/* The context is gone or going (freed, or failed to connect and about to be freed by
 * hiredis): forget it and what it asked for. */
void redis_ev_forget(redis_ev *e);

/* Coalesced: ask the owner for a flush this pass, once (for output queued around
 * hiredis, e.g. a batch formatted at flush time). */
void redis_ev_want_flush(redis_ev *e);

/* Coalesced: write what is queued now (the owner's end-of-pass flush). */
void redis_ev_flush(redis_ev *e);

#endif
