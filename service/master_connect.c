/* master_connect.c -- starting a worker's connection to a master (see master.h): the
 * connect, the handshake's commands (AUTH, SELECT, SCRIPT LOAD, INFO, TIME, CONFIG) and
 * the replies that feed it, the disconnect, the connection's timer (the connect
 * deadline, the reconnect, the quarantine's polls) and the stall check.  What the
 * handshake ends in (the marker check) and everything after it are master.c's. */
#include "master.h"
#include "master_int.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "rnd.h"
#include "stat.h"

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    master_conn *m = ac->data;
    (void)status;
    if (!m || m->ev.ac != ac)
        return;
    master_forget_context(m, m->ev.tls_error[0] ? m->ev.tls_error : ac->err ? ac->errstr : "disconnected");
    if (m->backoff_ms) /* 0 after master_close(..., 0): shutting down */
        master_schedule_reconnect(m);
}

/* INFO server: the run id (new at every start of the process) and the uptime. */
static void on_info_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    redisReply *reply = r;
    (void)priv;
    if (!m)
        return;
    if (!reply || reply->type != REDIS_REPLY_STRING) {
        if (reply)
            master_close(m, 1, "handshake failed: INFO refused");
        return;
    }
    const char *p = strstr(reply->str, "run_id:");
    m->run_id[0] = '\0';
    if (p) {
        p += 7;
        size_t n = strspn(p, "0123456789abcdef");
        if (n == 40) {
            memcpy(m->run_id, p, 40);
            m->run_id[40] = '\0';
        }
    }
    p = strstr(reply->str, "uptime_in_seconds:");
    m->uptime_ms = p ? atoll(p + 18) * 1000 : 0;
    master_handshake_step_done(m);
}

/* CONFIG GET appendonly / appendfsync (only asked with --trust-fsync-always).  A
 * refusal (CONFIG renamed away) means "not known to be safe". */
static void on_config_reply(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    redisReply *reply = r;
    int what = (int)(intptr_t)priv; /* 0 appendonly, 1 appendfsync */
    if (!m)
        return;
    if (!reply)
        return;
    int yes = reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
              reply->element[1]->type == REDIS_REPLY_STRING &&
              strcmp(reply->element[1]->str, what == 0 ? "yes" : "always") == 0;
    if (what == 0)
        m->fsync_always = yes;
    else
        m->fsync_always &= yes;
    master_handshake_step_done(m);
}

/* The handshake's TIME: the first sample of the clock (or one more, after a reconnect). */
static void on_handshake_time(redisAsyncContext *ac, void *r, void *priv)
{
    master_conn *m = master_own_reply(ac);
    (void)priv;
    if (!m)
        return;
    if (!r)
        return;
    master_clock_sample(m, r);
    master_handshake_step_done(m);
}

static void on_connect(const redisAsyncContext *cac, int status)
{
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    master_conn *m = ac->data;
    if (!m || m->ev.ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback, without on_disconnect */
        master_forget_context(m, m->ev.tls_error[0] ? m->ev.tls_error : ac->errstr[0] ? ac->errstr : "connect failed");
        master_schedule_reconnect(m);
        return;
    }
    m->ev.connected = 1;
    /* Handshake: AUTH / SELECT if configured, load every script, then check the marker.
     * A master that is frozen accepts the TCP connection but never answers: the timer
     * closes the attempt and a later one tries again. */
    int n = 0;
    int ok = 1;
    const char *auth[3];
    int nauth = config_master_auth_argv(m->cfg, auth); /* AUTH [user] password */
    if (nauth) {
        ok &= redisAsyncCommandArgv(ac, master_on_handshake_reply, (void *)(intptr_t)-1, nauth, auth, NULL) == REDIS_OK;
        n++;
    }
    if (m->cfg->db) {
        char db[16];
        snprintf(db, sizeof db, "%d", m->cfg->db);
        const char *argv[] = {"SELECT", db};
        ok &= redisAsyncCommandArgv(ac, master_on_handshake_reply, (void *)(intptr_t)-1, 2, argv, NULL) == REDIS_OK;
        n++;
    }
    for (int i = 0; i < SCRIPT__COUNT; i++) {
        const char *argv[] = {"SCRIPT", "LOAD", script_source(i)};
        ok &= redisAsyncCommandArgv(ac, master_on_handshake_reply, (void *)(intptr_t)i, 3, argv, NULL) == REDIS_OK;
        n++;
    }
    {
        const char *argv[] = {"INFO", "server"};
        ok &= redisAsyncCommandArgv(ac, on_info_reply, NULL, 2, argv, NULL) == REDIS_OK;
        n++;
    }
    if (m->conf->clock_check) {
        /* its clock, before any lock script can need a window */
        const char *argv[] = {"TIME"};
        ok &= redisAsyncCommandArgv(ac, on_handshake_time, NULL, 1, argv, NULL) == REDIS_OK;
        m->clock_sent_us = clock_now_us();
        n++;
    }
    m->fsync_always = 0;
    if (m->conf->trust_fsync_always) {
        const char *a1[] = {"CONFIG", "GET", "appendonly"};
        const char *a2[] = {"CONFIG", "GET", "appendfsync"};
        ok &= redisAsyncCommandArgv(ac, on_config_reply, (void *)(intptr_t)0, 3, a1, NULL) == REDIS_OK;
        ok &= redisAsyncCommandArgv(ac, on_config_reply, (void *)(intptr_t)1, 3, a2, NULL) == REDIS_OK;
        n += 2;
    }
    m->handshake_left = n;
    m->pending = (unsigned)n;
    m->progress_us = clock_now_us();
    if (!ok)
        master_close(m, 1, "handshake failed: cannot queue commands");
}

void master_start(master_conn *m)
{
    loop_timer_stop(m->loop, &m->timer);
    if (m->ev.ac)
        return;
    redisAsyncContext *ac = m->cfg->unix_path[0] ? redisAsyncConnectUnix(m->cfg->unix_path)
                                                 : redisAsyncConnect(m->cfg->host, m->cfg->port);
    if (!ac) {
        stat_inc(&m->errors);
        master_schedule_reconnect(m);
        return;
    }
    char why[160];
    if (ac->err)
        snprintf(why, sizeof why, "connect failed: %.120s", ac->errstr);
    else if (!m->cfg->tls)
        redis_ev_attach(&m->ev, ac);
    else if (redis_ev_attach_tls(&m->ev, ac, m->conf->redis_tls, config_master_tls_name(m->conf, m->cfg), 0,
                                 why, sizeof why) == 0)
        why[0] = '\0'; /* TLS: the handshake completes before on_connect, within the timer below */
    if (ac->err || m->ev.ac != ac) {
        redisAsyncFree(ac);
        stat_inc(&m->errors);
        master_set_state(m, MASTER_DOWN, why);
        master_schedule_reconnect(m);
        return;
    }
    m->pending = 0;
    m->check_inflight = 0;
    m->run_id[0] = '\0';
    ac->data = m;
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    redisAsyncSetConnectCallback(ac, on_connect); /* registers for the first write event */
    master_set_state(m, MASTER_CONNECTING, "connecting");
    /* Deadline for connect + handshake. */
    int64_t limit_ms = m->conf->node_timeout_ms * 10;
    if (limit_ms < 1000)
        limit_ms = 1000;
    loop_timer_start(m->loop, &m->timer, clock_now_us() + limit_ms * 1000);
}

static void on_timer(loop_timer *t)
{
    master_conn *m = container_of(t, master_conn, timer);
    switch (m->state) {
    case MASTER_DOWN:
        master_start(m);
        break;
    case MASTER_CONNECTING:
        master_close(m, 1, "connect or handshake timed out");
        break;
    case MASTER_QUARANTINED: {
        /* Past its delay: repair and rejoin; before it, ask whether another instance
         * ended it already, and once every round that may have counted its vote before
         * its loss is over (R-late: one node timeout, stretched by the drift), whether
         * its peers prove its delay can be lowered.  Either way look again in a second. */
        int64_t now = clock_now_us();
        int64_t settle_us = m->conf->node_timeout_ms * 1000 +
                            (int64_t)((double)m->conf->node_timeout_ms * 1000 * m->conf->drift_factor) + 20 * 1000;
        if (now >= m->quarantine_until_us) {
            m->hooks->repair(m);
        } else if (!m->shorten_asked && now - m->quarantined_at_us >= settle_us) {
            m->shorten_asked = 1;
            m->hooks->shorten(m);
        } else {
            master_recheck(m);
        }
        if (m->state == MASTER_QUARANTINED) {
            /* never in the past: a timer re-armed for "now" would run every pass */
            int64_t next = now + 1000 * 1000, settle_at = m->quarantined_at_us + settle_us;
            if (!m->shorten_asked && settle_at > now && settle_at < next)
                next = settle_at;
            loop_timer_start(m->loop, &m->timer, next);
        }
        break;
    }
    default:
        break;
    }
}

void master_init(master_conn *m, const config *conf, int index, void *owner, loop *l,
                 const master_hooks *hooks)
{
    memset(m, 0, sizeof *m);
    m->conf = conf;
    m->cfg = &conf->masters[index];
    m->index = index;
    m->owner = owner;
    m->hooks = hooks;
    m->loop = l;
    redis_ev_init(&m->ev, l, &master_ev_hooks);
    m->timer.cb = on_timer;
    m->backoff_ms = BACKOFF_MIN_MS;
    m->seen_state = -1;
    /* per connection: each worker's differs (its own master_conn), and each instance's */
    m->rnd = rnd_seed(keys_name_hash(m->cfg->address, strlen(m->cfg->address)) ^
                      (uint64_t)(uintptr_t)m ^ (uint64_t)clock_now_us());
    m->mkey_len = keys_record(conf->key_prefix, m->mkey, sizeof m->mkey);
    keys_quarantine(conf->key_prefix, m->qkey, sizeof m->qkey);
    stat_set_int(&m->state, MASTER_DOWN);
}


void master_check_stall(master_conn *m, int64_t now_us, int64_t stall_us)
{
    if (m->ev.ac && m->ev.connected && m->pending && now_us - m->progress_us > stall_us)
        master_close(m, 1, "no reply within the stall limit: frozen or overloaded");
}
