/* master.c -- one worker's connection to one master (see master.h): its state, its
 * closing, the trust in the master (its record, the marker script, quarantine, the
 * verdict on a refused script), the watch on its clock, and what it carries (this
 * pass's batch, commands, their replies).  Starting it, its handshake's commands and
 * their replies, its timer and the stall check are master_connect.c's, which calls
 * into this file and never the other way. */
#include "stat.h"
#include "master.h"
#include "master_int.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "proto.h"
#include "redis_ev.h"
#include "resp.h"
#include "rnd.h"

static void batch_send(master_conn *m);
static void batch_fail(master_conn *m);

static const char *state_names[] = {"down", "connecting", "unmarked", "quarantined", "ready"};

const char *master_state_name(int state)
{
    if (state < 0 || state > MASTER_READY)
        return "unknown";
    return state_names[state];
}

void master_set_state(master_conn *m, int st, const char *why)
{
    int old = m->state;
    if (st == MASTER_DOWN && old != MASTER_DOWN && why) /* the first why, for /readyz */
        snprintf(m->down_reason, sizeof m->down_reason, "%s", why);
    else if (st >= MASTER_UNMARKED)
        m->down_reason[0] = '\0';
    if (old == st)
        return;
    if (st == MASTER_QUARANTINED) {
        m->quarantined_at_us = clock_now_us();
        m->shorten_asked = 0;
    }
    if (st == MASTER_READY)
        m->repair_why[0] = '\0';
    stat_set_int(&m->state, st);
    m->hooks->state_changed(m, old, why);
}

/* ---- the adapter's hooks (redis_ev.h): coalesced writes ---- */

static void on_want_flush(redis_ev *e)
{
    master_conn *m = container_of(e, master_conn, ev);
    m->hooks->want_flush(m);
}

static void on_watch_failed(redis_ev *e)
{
    /* cannot watch the socket: the stall check will recycle it */
    stat_inc(&container_of(e, master_conn, ev)->errors);
}

const redis_ev_hooks master_ev_hooks = {.want_flush = on_want_flush, .watch_failed = on_watch_failed};

void master_flush(master_conn *m)
{
    if (!m->ev.dirty)
        return;
    batch_send(m); /* while dirty: hiredis's add_write needs nothing more */
    redis_ev_flush(&m->ev);
}

/* ---- connection life cycle ---- */

void master_schedule_reconnect(master_conn *m)
{
    int refused = m->ev.tls_refused, max = refused ? BACKOFF_REFUSED_MAX_MS : BACKOFF_MAX_MS;
    if (refused && m->backoff_ms < BACKOFF_REFUSED_MIN_MS)
        m->backoff_ms = BACKOFF_REFUSED_MIN_MS;
    /* spreads reconnects of many workers */
    int jitter = (int)(rnd_next(&m->rnd) % (uint32_t)(m->backoff_ms / 4 + 1));
    loop_timer_start(m->loop, &m->timer, clock_now_us() + (int64_t)(m->backoff_ms + jitter) * 1000);
    m->backoff_ms *= 2;
    if (m->backoff_ms > max)
        m->backoff_ms = max;
}

void master_forget_context(master_conn *m, const char *why)
{
    redis_ev_forget(&m->ev);
    m->clock_sent_us = 0;
    m->pending = 0;
    master_set_state(m, MASTER_DOWN, why);
    batch_fail(m); /* last: nothing can queue on a master that is down */
}

void master_close(master_conn *m, int reconnect, const char *why)
{
    loop_timer_stop(m->loop, &m->timer);
    if (!reconnect)
        m->backoff_ms = 0;
    redisAsyncContext *ac = m->ev.ac;
    if (!ac) {
        master_set_state(m, MASTER_DOWN, why);
        return;
    }
    int deferred = (ac->c.flags & REDIS_IN_CALLBACK) != 0;
    stat_inc(&m->errors);
    master_set_state(m, MASTER_DOWN, why);
    redisAsyncFree(ac); /* pending callbacks get NULL, then on_disconnect if connected */
    if (!deferred && m->ev.ac == ac) {
        /* Freed without on_disconnect (never connected): forget it here. */
        master_forget_context(m, why);
        if (reconnect)
            master_schedule_reconnect(m);
    }
}

static int send_marker(master_conn *m, const char *action, int64_t delay_ms, const char *instance,
                       uint64_t base);

/* The master a reply on ac is for, with one command fewer pending; NULL when ac is no
 * longer its connection (a reply to a connection that was replaced is nobody's). */
master_conn *master_own_reply(redisAsyncContext *ac)
{
    master_conn *m = ac->data;
    if (!m || m->ev.ac != ac)
        return NULL;
    if (m->pending)
        m->pending--;
    return m;
}

void master_on_handshake_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    redisReply *reply = r;
    intptr_t what = (intptr_t)priv; /* script id, or -1 AUTH/SELECT */
    if (!m)
        return;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        char why[160];
        snprintf(why, sizeof why, "handshake failed: %.120s",
                 reply ? reply->str : (ac->errstr[0] ? ac->errstr : "no reply"));
        if (reply) /* a refusal (bad password, no scripting): close and try later */
            master_close(m, 1, why);
        return;
    }
    if (what >= 0 && what < SCRIPT__COUNT) {
        if (reply->type != REDIS_REPLY_STRING || reply->len != 40) {
            master_close(m, 1, "handshake failed: unexpected SCRIPT LOAD reply");
            return;
        }
        memcpy(m->sha[what], reply->str, 40);
        m->sha[what][40] = '\0';
    }
    master_handshake_step_done(m);
}

/* The reply of SCRIPT_MARKER: {state, quarantine pttl, counters}. */
static void apply_marker(master_conn *m, redisReply *reply)
{
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER ||
        reply->element[2]->type != REDIS_REPLY_INTEGER || reply->element[0]->integer < PROTO_MARKER_UNMARKED ||
        reply->element[0]->integer > PROTO_MARKER_QUARANTINED) {
        /* A master that answers the handshake but not this (OOM, read-only replica,
         * no scripting): close, and the reconnect backs off. */
        char why[160];
        snprintf(why, sizeof why, "cannot read or write the master's record: %.100s",
                 reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        master_close(m, 1, why);
        return;
    }
    int64_t now = clock_now_us();
    int st = (int)reply->element[0]->integer;
    long long pttl = reply->element[1]->integer;
    m->seen_state = st;
    m->check_recv_us = now;
    if (st == PROTO_MARKER_UNMARKED) {
        if (m->state != MASTER_UNMARKED)
            m->unmarked_at_us = now;
        master_set_state(m, MASTER_UNMARKED, "no record: a new master, or one that lost its data");
        return;
    }
    if (st == PROTO_MARKER_QUARANTINED) {
        m->quarantine_until_us = now + (pttl > 0 ? pttl : 0) * 1000;
        if (m->state != MASTER_QUARANTINED) {
            stat_inc(&m->quarantines);
            master_set_state(m, MASTER_QUARANTINED,
                      m->clock_bad ? m->clock_why
                                   : "restarted or lost its data: out of quorums until every lock it may "
                                     "have lost has expired and its counters are repaired");
        }
        int64_t at = m->quarantine_until_us;
        if (at > now + 1000 * 1000)
            at = now + 1000 * 1000; /* look again each second: another instance may end it */
        loop_timer_start(m->loop, &m->timer, at);
        return;
    }
    if (m->clock_bad && !mclock_steady(&m->clock, now)) {
        /* trusted on the master, but not its clock here (yet): out, and for everyone */
        m->quarantine_until_us = now + 1000 * 1000;
        stat_inc(&m->quarantines);
        master_set_state(m, MASTER_QUARANTINED, m->clock_why);
        if (send_marker(m, "distrust", m->conf->quarantine_ms, NULL, 0) != 0)
            master_close(m, 1, "cannot queue the marker");
        return;
    }
    m->clock_bad = 0;
    m->backoff_ms = BACKOFF_MIN_MS;
    m->quarantine_until_us = 0;
    loop_timer_stop(m->loop, &m->timer);
    master_set_state(m, MASTER_READY, "ready");
}

static void on_marker_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    (void)priv;
    if (!m)
        return;
    m->progress_us = clock_now_us();
    m->check_inflight = 0;
    if (!r)
        return; /* the connection is going away; on_disconnect handles it */
    apply_marker(m, r);
    if (m->ev.ac == ac)
        m->hooks->checked(m);
}

/* The delay a restart costs: the quarantine, counted from the restart (the master's
 * uptime says when), or none if the operator trusts a master that loses nothing it
 * acknowledged and this one is configured so. */
static int64_t restart_delay_ms(const master_conn *m)
{
    if (m->conf->trust_fsync_always && m->fsync_always)
        return 0;
    /* INFO counts whole wall-clock seconds: a process up 200 ms may say 1.  Take the
     * uptime one second short, so that the delay is never cut. */
    int64_t up = m->uptime_ms >= 1000 ? m->uptime_ms - 1000 : 0;
    int64_t d = m->conf->quarantine_ms - up;
    return d > 0 ? d : 0;
}

static int send_marker(master_conn *m, const char *action, int64_t delay_ms, const char *instance,
                       uint64_t base)
{
    char dbuf[24], fbuf[24];
    snprintf(dbuf, sizeof dbuf, "%lld", (long long)delay_ms);
    snprintf(fbuf, sizeof fbuf, "%llu", (unsigned long long)base);
    const char *argv[] = {"EVALSHA", m->sha[SCRIPT_MARKER], "2", m->mkey, m->qkey, action,
                          m->run_id, dbuf, instance ? instance : "", fbuf};
    batch_send(m); /* keep the connection's order */
    if (redisAsyncCommandArgv(m->ev.ac, on_marker_reply, NULL, 10, argv, NULL) != REDIS_OK)
        return -1;
    m->check_sent_us = clock_now_us();
    m->check_inflight = 1;
    if (m->pending++ == 0)
        m->progress_us = clock_now_us();
    return 0;
}

void master_handshake_step_done(master_conn *m)
{
    if (--m->handshake_left > 0)
        return;
    if (!m->run_id[0]) {
        master_close(m, 1, "handshake failed: INFO gave no run_id");
        return;
    }
    if (send_marker(m, "check", restart_delay_ms(m), NULL, 0) != 0)
        master_close(m, 1, "handshake failed: cannot queue the marker check");
}

void master_resolve_marker(master_conn *m, int quarantine, const char *instance)
{
    if (m->state != MASTER_UNMARKED || !m->ev.ac || m->check_inflight)
        return;
    if (send_marker(m, quarantine ? "quarantine" : "mark", m->conf->quarantine_ms, instance, 0) != 0)
        master_close(m, 1, "cannot queue the marker");
}

void master_recheck(master_conn *m)
{
    if (!m->ev.ac || m->check_inflight || m->state < MASTER_UNMARKED)
        return;
    if (send_marker(m, "check", restart_delay_ms(m), NULL, 0) != 0)
        master_close(m, 1, "cannot queue the marker check");
}

int master_shorten(master_conn *m, int64_t delay_ms)
{
    if (m->state != MASTER_QUARANTINED || !m->ev.ac || m->check_inflight)
        return -1;
    if (send_marker(m, "shorten", restart_delay_ms(m), NULL, (uint64_t)(delay_ms > 0 ? delay_ms : 0)) != 0) {
        master_close(m, 1, "cannot queue the shorten");
        return -1;
    }
    return 0;
}

void master_set_repair_why(master_conn *m, const char *why)
{
    snprintf(m->repair_why, sizeof m->repair_why, "%s", why);
}

void master_rejoin(master_conn *m, uint64_t base)
{
    if (m->state != MASTER_QUARANTINED || !m->ev.ac || m->check_inflight)
        return;
    if (send_marker(m, "rejoin", restart_delay_ms(m), NULL, base) != 0)
        master_close(m, 1, "cannot queue the rejoin");
}

/* ---- the watch on the master's clock (mclock.h; docs/DESIGN.md §4, Rule 7) ---- */

/* Its clock misbehaved (why): a master that may have forgotten its locks (they expire
 * by that clock).  Out of quorums at once, and quarantined on the master itself for
 * every instance, as after a loss of data; repaired only once its clock is steady. */
static void clock_fault(master_conn *m, const char *why)
{
    stat_inc(&m->clock_faults);
    snprintf(m->clock_why, sizeof m->clock_why, "%s", why);
    mclock_reset(&m->clock); /* the next sample is a new baseline */
    m->clock_bad = 1;
    if (m->state != MASTER_READY)
        return; /* connecting or out already: apply_marker() will not let it in */
    m->quarantine_until_us = clock_now_us() + 1000 * 1000; /* until the marker says */
    stat_inc(&m->quarantines);
    master_set_state(m, MASTER_QUARANTINED, m->clock_why);
    if (m->ev.ac && send_marker(m, "distrust", m->conf->quarantine_ms, NULL, 0) != 0)
        master_close(m, 1, "cannot queue the marker");
}

/* Judge a TIME answered by the master (sent at m->clock_sent_us). */
void master_clock_sample(master_conn *m, const redisReply *reply)
{
    int64_t sent = m->clock_sent_us, now = clock_now_us();
    m->clock_sent_us = 0;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING || reply->element[1]->type != REDIS_REPLY_STRING ||
        !sent)
        return;
    int64_t master_us = atoll(reply->element[0]->str) * 1000000 + atoll(reply->element[1]->str);
    int64_t others[CONFIG_MAX_MASTERS];
    size_t n = 0;
    const master_conn *all = m - m->index; /* the worker's connections, in order */
    for (size_t j = 0; j < m->conf->n_masters; j++)
        if ((int)j != m->index && all[j].clock.have && !all[j].clock_bad)
            others[n++] = all[j].clock.offset_us;
    char why[160];
    int v = mclock_sample(&m->clock, sent, now, master_us, m->conf->drift_factor, others, n,
                          m->conf->clock_max_skew_ms * 1000, why, sizeof why);
    stat_set_i64(&m->clock_rate_ppm, m->clock.rate_ppm);
    if (v != MCLOCK_OK && m->conf->clock_check)
        clock_fault(m, why);
}

static void on_clock_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    (void)priv;
    if (!m)
        return;
    m->progress_us = clock_now_us();
    master_clock_sample(m, r);
}

void master_clock_tick(master_conn *m, int64_t now_us)
{
    if (!m->conf->clock_check || !m->ev.ac || !m->ev.connected || m->state < MASTER_UNMARKED ||
        m->clock_sent_us || (m->clock.have && now_us - m->clock.last_us < 1000 * 1000))
        return;
    const char *argv[] = {"TIME"};
    batch_send(m); /* keep the connection's order */
    if (redisAsyncCommandArgv(m->ev.ac, on_clock_reply, NULL, 1, argv, NULL) != REDIS_OK)
        return;
    m->clock_sent_us = clock_now_us();
    if (m->pending++ == 0)
        m->progress_us = m->clock_sent_us;
}

int master_clock_fit(const master_conn *m, int64_t now_us)
{
    return !m->clock_bad || mclock_steady(&m->clock, now_us);
}

int64_t master_window_closed_us(const master_conn *m, int64_t sent_us)
{
    if (!m->conf->clock_check || !m->clock.have)
        return -1;
    /* its window ends at sent_us + the node timeout + the tolerance, by the clock as
     * estimated then; the master's clock may be a tolerance behind that estimate; and
     * both ends are rounded to the ms */
    int64_t tol = mclock_tolerance_us(&m->clock, clock_now_us(), m->conf->drift_factor);
    return sent_us + m->conf->node_timeout_ms * 1000 + 2 * tol + 2000;
}

/* The window of master times a lock script sent now may run in, as its first argument
 * ("lo:hi" in ms; "" when the clock is not watched or not known yet). */
static size_t clock_window(const master_conn *m, char *buf, size_t cap)
{
    int64_t lo, hi;
    if (!m->conf->clock_check ||
        !mclock_window(&m->clock, clock_now_us(), m->conf->node_timeout_ms * 1000, m->conf->drift_factor, &lo, &hi))
        return 0;
    if (cap < 2 * FMT_U64_MAX + 2)
        return 0;
    char *p = fmt_i64(buf, lo);
    *p++ = ':';
    p = fmt_i64(p, hi);
    *p = '\0';
    return (size_t)(p - buf);
}

/* A lock script refused: the master lost its record or is quarantined (by any
 * instance), or its clock was outside the script's window.  Out of quorums at once; the
 * check says for how long. */
static void untrusted(master_conn *m, const redisReply *reply)
{
    if (m->state != MASTER_READY)
        return;
    if (strncmp(reply->str, SCRIPT_ERR_CLOCK, sizeof SCRIPT_ERR_CLOCK - 1) == 0) {
        /* "REDLOCKD_CLOCK <its time> <lo>:<hi>": a script that ran late (a master that
         * was frozen) is no fault of its clock; one that ran outside its window by its
         * clock is. */
        long long at = 0, lo = 0, hi = 0;
        if (sscanf(reply->str + sizeof SCRIPT_ERR_CLOCK - 1, " %lld %lld:%lld", &at, &lo, &hi) == 3 &&
            !mclock_agrees(&m->clock, clock_now_us(), at, lo, m->conf->drift_factor)) {
            char why[160];
            snprintf(why, sizeof why, "a script ran at %lld by its clock, outside %lld..%lld (its clock moved)",
                     at, lo, hi);
            clock_fault(m, why);
        }
        return;
    }
    if (strncmp(reply->str, SCRIPT_ERR_UNMARKED, sizeof SCRIPT_ERR_UNMARKED - 1) == 0) {
        m->unmarked_at_us = clock_now_us();
        m->seen_state = PROTO_MARKER_UNMARKED;
        master_set_state(m, MASTER_UNMARKED, "lost its record while running (wiped): judged at once");
    } else {
        m->quarantine_until_us = clock_now_us() + 1000 * 1000; /* until the check says */
        stat_inc(&m->quarantines);
        master_set_state(m, MASTER_QUARANTINED, "quarantined by another instance");
        master_recheck(m);
    }
}

/* The master time a lock script ran at, answered first in its reply (proto.h): it must
 * agree with the clock as measured when the answer is read (mclock_agrees(): a script
 * that ran late ran before its answer was read).  The window the script checked bounds
 * the clock only from below and by the node timeout from above, so a jump forward
 * smaller than that passed it; this check bounds it by the tolerance.  1: the replies
 * count; 0: the clock moved (or is distrusted already): the master is out at once, as
 * after a SCRIPT_ERR_CLOCK refusal, and the replies count as no answer (docs/DESIGN.md
 * §4, Rule 7). */
static int ran_in_time(master_conn *m, long long at)
{
    if (at == PROTO_TIME_NONE)
        return 1; /* sent without a window: the clock is not watched, or not known yet */
    if (!m->clock_bad && mclock_agrees(&m->clock, clock_now_us(), at, 0, m->conf->drift_factor))
        return 1;
    if (!m->clock_bad) {
        char why[160];
        snprintf(why, sizeof why, "a script ran at %lld by its clock, %lld ms past the clock as measured when "
                 "its answer was read (its clock moved)", at,
                 (long long)((at * 1000 - clock_now_us() - m->clock.offset_us) / 1000));
        clock_fault(m, why);
    }
    return 0;
}

static int is_untrusted_reply(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR &&
           strncmp(r->str, "REDLOCKD_", 9) == 0;
}

/* The master's script cache was flushed (SCRIPT FLUSH): load every script again. */
static void reload_scripts(master_conn *m)
{
    if (m->state != MASTER_READY)
        return;
    for (int i = 0; i < SCRIPT__COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", script_source(i)};
        if (redisAsyncCommandArgv(m->ev.ac, master_on_handshake_reply, (void *)(intptr_t)i, 3, argv, NULL) ==
            REDIS_OK)
            m->pending++;
    }
    m->handshake_left = 1 << 20; /* not a handshake: never send the marker from here */
}

/* ---- batching (see master.h) ---- */

struct master_batch {
    master_batch *next;    /* in the spare list */
    size_t n;
    void *privs[MASTER_BATCH_MAX];
};

static void batch_reset(master_outbatch *o)
{
    o->cur = NULL;
    resp_batch_clear(&o->fmt);
}

static void batch_recycle(master_conn *m, master_batch *b)
{
    b->next = m->out.spare;
    m->out.spare = b;
}

/* The queued operations will never be sent: each gets its NULL reply. */
static void batch_fail(master_conn *m)
{
    master_batch *b = m->out.cur;
    if (!b)
        return;
    batch_reset(&m->out);
    for (size_t i = 0; i < b->n; i++)
        m->hooks->reply(m, NULL, b->privs[i]);
    batch_recycle(m, b);
}

static void on_batch_reply(redisAsyncContext *ac, void *r, void *priv);
static void on_script_reply(redisAsyncContext *ac, void *r, void *priv);

/* Hand the queued operations to hiredis as one EVALSHA of SCRIPT_BATCH: the head,
 * the master's record key, the operations' keys, their arguments. */
static void batch_send(master_conn *m)
{
    master_outbatch *o = &m->out;
    master_batch *b = o->cur;
    if (!b)
        return;
    if (!m->ev.ac || !m->ev.connected) {
        batch_fail(m);
        return;
    }
    int alone = b->n == 1; /* alone: its own script, without the code */
    size_t len;
    char win[48];
    size_t wl = clock_window(m, win, sizeof win);
    const char *cmd = resp_batch_join(&o->fmt, m->sha[alone ? o->first_script : SCRIPT_BATCH],
                                      m->mkey, m->mkey_len, win, wl, alone, &len);
    if (!cmd) {
        batch_fail(m);
        return;
    }
    o->cur = NULL;
    int rc = alone ? redisAsyncFormattedCommand(m->ev.ac, on_script_reply, b->privs[0], cmd, len)
                   : redisAsyncFormattedCommand(m->ev.ac, on_batch_reply, b, cmd, len);
    if (rc != REDIS_OK) {
        o->cur = b; /* fail them as queued */
        batch_fail(m);
        return;
    }
    if (alone) {
        batch_recycle(m, b); /* the reply goes straight to its operation */
    } else {
        stat_inc(&m->batches);
        stat_add(&m->batched_ops, b->n);
    }
    if (m->pending++ == 0)
        m->progress_us = clock_now_us();
}

static void on_batch_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = ac->data;
    master_batch *b = priv;
    redisReply *reply = r;
    if (m->pending)
        m->pending--;
    m->progress_us = clock_now_us();
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == b->n + 1 &&
        reply->element[0]->type == REDIS_REPLY_INTEGER) {
        /* {time, reply1, ..., replyn} (proto.h) */
        int count = ran_in_time(m, reply->element[0]->integer);
        for (size_t i = 0; i < b->n; i++)
            m->hooks->reply(m, count ? reply->element[i + 1] : NULL, b->privs[i]);
    } else {
        /* An error for the whole call (untrusted, NOSCRIPT, BUSY, OOM...) or no
         * reply: every operation in it failed. */
        if (reply && reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "NOSCRIPT", 8) == 0)
            reload_scripts(m);
        if (is_untrusted_reply(reply))
            untrusted(m, reply);
        int whole_error = reply && reply->type == REDIS_REPLY_ERROR;
        for (size_t i = 0; i < b->n; i++)
            m->hooks->reply(m, whole_error ? reply : NULL, b->privs[i]);
    }
    batch_recycle(m, b);
}

/* Queue one operation for this pass's batched call (formatted already when op is not
 * NULL).  0 or -1. */
static int batch_add(master_conn *m, int script, char code, int nkeys, int nargs,
                     const char **argv, const size_t *lens, const resp_op *op, void *priv)
{
    master_outbatch *o = &m->out;
    if (o->cur && o->cur->n == MASTER_BATCH_MAX)
        batch_send(m);
    master_batch *b = o->cur;
    if (!b) {
        if ((b = o->spare))
            o->spare = b->next;
        else if (!(b = malloc(sizeof *b)))
            return -1;
        b->n = 0;
    }
    if ((op ? resp_batch_add_op(&o->fmt, op)
            : resp_batch_add(&o->fmt, code, (size_t)nkeys, (size_t)nargs, argv, lens)) != 0) {
        if (!o->cur)
            batch_recycle(m, b);
        return -1;
    }
    if (!o->cur) {
        o->cur = b;
        o->first_script = script;
    }
    b->privs[b->n++] = priv;
    redis_ev_want_flush(&m->ev);
    return 0;
}

void master_fini(master_conn *m)
{
    batch_fail(m);
    while (m->out.spare) {
        master_batch *b = m->out.spare;
        m->out.spare = b->next;
        free(b);
    }
    resp_batch_free(&m->out.fmt);
}

/* ---- commands ---- */

/* The reply of a lock script sent alone (proto.h): {time, e1, ..., en} for an array
 * reply, {"<time>", reply} for any other, or an error for the whole call. */
static void on_script_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = ac->data;
    redisReply *reply = r;
    if (m->pending)
        m->pending--;
    m->progress_us = clock_now_us();
    if (reply && reply->type == REDIS_REPLY_ERROR) {
        if (strncmp(reply->str, "NOSCRIPT", 8) == 0 && m->state == MASTER_READY) {
            /* The script cache was flushed: count this one as failed, reload for the next. */
            reload_scripts(m);
            m->hooks->reply(m, NULL, priv);
            return;
        }
        if (is_untrusted_reply(reply))
            untrusted(m, reply);
        m->hooks->reply(m, reply, priv);
        return;
    }
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 1) {
        m->hooks->reply(m, NULL, priv); /* not a lock script's answer: no answer */
        return;
    }
    redisReply *t = reply->element[0];
    if (t->type == REDIS_REPLY_INTEGER) {
        /* the array the script made, seen without its first element (no copy of the
         * elements: hiredis frees the whole reply after this callback) */
        redisReply view = *reply;
        view.element = reply->element + 1;
        view.elements = reply->elements - 1;
        m->hooks->reply(m, ran_in_time(m, t->integer) ? &view : NULL, priv);
    } else if (t->type == REDIS_REPLY_STRING && reply->elements == 2) {
        m->hooks->reply(m, ran_in_time(m, strtoll(t->str, NULL, 10)) ? reply->element[1] : NULL, priv);
    } else {
        m->hooks->reply(m, NULL, priv);
    }
}

/* The reply of a PING (master_ping()). */
static void on_ping_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = ac->data;
    if (m->pending)
        m->pending--;
    m->progress_us = clock_now_us();
    m->hooks->reply(m, r, priv);
}

int master_eval(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                const size_t *lens, void *priv)
{
    return master_eval_op(m, script, nkeys, nargs, argv, lens, NULL, priv);
}

int master_eval_op(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                   const size_t *lens, const resp_op *op, void *priv)
{
    if (m->state != MASTER_READY || !m->ev.ac || nkeys < 0 || nargs < 0 || nkeys + nargs > 512)
        return -1;
    char code = script_batch_code(script, nkeys, nargs);
    if (code)
        return batch_add(m, script, code, nkeys, nargs, argv, lens, op, priv);
    batch_send(m); /* keep the connection's order */
    char win[48];
    size_t wl = clock_window(m, win, sizeof win);
    size_t need = resp_evalsha_size(m->mkey_len + RESP_BULK_EXTRA + wl, (size_t)(nkeys + nargs), lens);
    char stackbuf[2048];
    char *buf = need <= sizeof stackbuf ? stackbuf : malloc(need);
    if (!buf)
        return -1;
    size_t len = resp_evalsha(buf, m->sha[script], m->mkey, m->mkey_len, win, wl, (size_t)nkeys,
                              (size_t)nargs, argv, lens);
    int rc = redisAsyncFormattedCommand(m->ev.ac, on_script_reply, priv, buf, len);
    if (buf != stackbuf)
        free(buf);
    if (rc != REDIS_OK)
        return -1;
    if (m->pending++ == 0)
        m->progress_us = clock_now_us();
    return 0;
}

int master_command(master_conn *m, int argc, const char **argv, const size_t *lens,
                   void (*cb)(struct redisAsyncContext *, void *, void *), void *priv)
{
    if (!m->ev.ac || !m->ev.connected)
        return -1;
    batch_send(m); /* keep the connection's order */
    return redisAsyncCommandArgv(m->ev.ac, cb, priv, argc, argv, lens) == REDIS_OK ? 0 : -1;
}

int master_ping(master_conn *m, void *priv)
{
    if (!m->ev.ac || !m->ev.connected)
        return -1;
    batch_send(m); /* keep the connection's order */
    const char *argv[] = {"PING"};
    if (redisAsyncCommandArgv(m->ev.ac, on_ping_reply, priv, 1, argv, NULL) != REDIS_OK)
        return -1;
    if (m->pending++ == 0)
        m->progress_us = clock_now_us();
    return 0;
}
