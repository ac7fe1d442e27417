/* worker.c -- the worker thread and its event loop (see worker.h). */
#include "worker.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "hold.h"
#include "http.h"
#include "jw.h"
#include "inbox.h"
#include "keys.h"
#include "lease.h"
#include "log.h"
#include "lograte.h"
#include "lockop.h"
#include "loop.h"
#include "mailbox.h"
#include "master.h"
#include "notify.h"
#include "resync.h"
#include "round.h"
#include "trust.h"
#include "waitq.h"
#include "watch.h"

#define TICK_MS 20

struct worker {
    /* read-only after worker_new(); read by other threads */
    app *app;
    int id;
    pthread_t thread;
    http_server *http;          /* its HTTP server (other threads: http_server_stats only) */
    /* this thread's; other threads read only the relaxed figures: the masters' states
     * and counters (readiness, /metrics), ops.waiting and ops.counters */
    master_conn *masters;       /* one connection per master */
    lockop_env ops;
    hold_env holds;             /* locks held for streams (hold.h) */
    watch_env watches;          /* watched GETs (watch.h) */
    /* private: this thread only */
    loop loop;
    round_env rounds;
    notify *notify;             /* release announcements from other instances */
    resync **resyncs;           /* worker 0: counter repair per master, made on demand */
    master_conn **dirty;        /* masters with output to write this pass */
    struct master_downlog *downlog; /* per master: whether it is down, and when its
                                 * "still down" line is due (lograte.h) */
    unsigned char *settled;     /* per master: its first connection was made and judged
                                 * (ready or quarantined), or failed */
    int64_t boot_until_us;      /* masters_starting() is 0 from then on, whatever they do */
    size_t ndirty;
    loop_timer tick;
    log_ctx log;
    lease_rng rng;
    int64_t next_trim_us;       /* when to hand freed memory back to the system */
    size_t foreign_ops;         /* ops running here for other workers' requests */
    mailbox mb;                 /* how the other threads reach this one (mailbox.h) */
};

/* ---- master hooks ---- */

typedef struct master_downlog {
    int down;                   /* went down (or never came up) and has not come back */
    lograte rate;
} master_downlog;

/* The verdict on the masters found without their record (trust.h).  The first worker
 * alone judges; the others ask again until the verdict is on the master. */
static void judge_unmarked(worker *w)
{
    trust_judge_unmarked(w->masters, w->rounds.n, w->id == 0, w->app->origin, &w->log);
}

/* master_hooks.state_changed: m's state changed (settled, logged, alarmed, judged). */
static void on_master_state(master_conn *m, int old_state, const char *why)
{
    worker *w = m->owner;
    int st = m->state;
    if (!w->settled[m->index] && (st == MASTER_READY || st == MASTER_QUARANTINED ||
                                  (old_state == MASTER_CONNECTING && st == MASTER_DOWN))) {
        w->settled[m->index] = 1;
        if (w->http)
            http_server_release_held(w->http, clock_now_us());
    }
    /* Connection churn is routine; log the transitions a person cares about: a master
     * going down once, then while it stays down (every reconnect attempt fails) at a
     * decaying rate (lograte.h), and its return with how long it was gone. */
    master_downlog *dl = &w->downlog[m->index];
    int64_t now_us = clock_now_us(), down_for_us = -1;
    unsigned left = 0;
    int show = !(old_state == MASTER_DOWN && st == MASTER_CONNECTING), repeat = 0;
    if (st == MASTER_DOWN && dl->down) {
        show = lograte_again(&dl->rate, now_us, &left);
        repeat = 1;
    } else if (st == MASTER_DOWN) {
        dl->down = 1;
        lograte_begin(&dl->rate, now_us);
    } else if ((st == MASTER_READY || st == MASTER_QUARANTINED) && dl->down) { /* back (unmarked: judged next) */
        dl->down = 0;
        down_for_us = now_us - dl->rate.since_us;
    }
    if (show) {
        char fields[640];
        jw j;
        jw_init(&j, fields, sizeof fields);
        jw_key_int(&j, "worker", w->id);
        jw_key_str(&j, "master", m->cfg->address);
        jw_key_str(&j, "from", master_state_name(old_state));
        jw_key_str(&j, "to", master_state_name(st));
        jw_key_str(&j, "reason", why);
        if (repeat) {
            jw_key_int(&j, "down_for_ms", (now_us - dl->rate.since_us) / 1000);
            jw_key_int(&j, "attempts_not_logged", left);
        }
        if (down_for_us >= 0)
            jw_key_int(&j, "down_for_ms", down_for_us / 1000);
        if (st == MASTER_QUARANTINED)
            jw_key_int(&j, "quarantine_ms", (m->quarantine_until_us - clock_now_us()) / 1000);
        int level = st == MASTER_READY ? LOG_LEVEL_INFO : LOG_LEVEL_WARN;
        /* "unmarked" is judged at once; shutting down is said once by main. */
        if (st == MASTER_UNMARKED || __atomic_load_n(&w->app->stopping, __ATOMIC_RELAXED))
            level = LOG_LEVEL_DEBUG;
        if (w->id != 0)
            level = LOG_LEVEL_DEBUG; /* one line per master, not one per worker */
        log_event(&w->log, level, repeat ? "master still down" : "master state", fields);
    }
    if (old_state == MASTER_READY && (st == MASTER_UNMARKED || st == MASTER_QUARANTINED))
        __atomic_store_n(&w->app->master_alarm_us[m->index], clock_now_us(), __ATOMIC_RELAXED);
    if (st == MASTER_UNMARKED || old_state == MASTER_UNMARKED)
        judge_unmarked(w);
}

/* master_hooks.checked: a check of m's record was answered; an unmarked master's
 * verdict may be due (its peers' answers come without a state change). */
static void on_checked(master_conn *m)
{
    worker *w = m->owner;
    if (trust_any_unmarked(w->masters, w->rounds.n))
        judge_unmarked(w);
}

static resync *resync_of(worker *w, master_conn *m)
{
    if (!w->resyncs[m->index])
        w->resyncs[m->index] = resync_new(w->masters, w->rounds.n, w->rounds.quorum, (size_t)m->index);
    return w->resyncs[m->index];
}

/* master_hooks.repair: m's quarantine delay is over: repair its counters from the
 * peers, then rejoin. */
static void on_repair(master_conn *m)
{
    resync *r = resync_of(m->owner, m);
    if (r)
        resync_start(r);
}

/* master_hooks.shorten: m has sat out every round that may have counted it: lower its
 * delay to what its peers prove is outstanding.  One worker asks (the delay is on the
 * master); the others see it at their next check. */
static void on_shorten(master_conn *m)
{
    worker *w = m->owner;
    resync *r = w->id == 0 ? resync_of(w, m) : NULL;
    if (r)
        resync_shorten(r);
}

/* master_hooks.want_flush: m has output queued (master_eval); pass() writes it once at
 * the end of this loop pass (flush_masters), for every op queued meanwhile. */
static void on_master_flush(master_conn *m)
{
    worker *w = m->owner;
    w->dirty[w->ndirty++] = m;
}

static const master_hooks hooks = {
    .reply = round_on_reply, /* a master's reply goes to its round's slot (round.c) */
    .state_changed = on_master_state,
    .want_flush = on_master_flush,
    .checked = on_checked,
    .repair = on_repair,
    .shorten = on_shorten,
};

/* ---- cross-worker wake-ups ---- */

static worker *keeper_of(const app *a, const char *name, size_t len)
{
    return a->workers[keys_name_hash(name, len) % a->nworkers];
}

/* lockop_env.released: a release of name went through this worker; the others that
 * care hear of it through their mailboxes. */
static void on_released(lockop_env *env, const char *name, size_t len)
{
    worker *w = env->owner;
    if (w->holds.n) /* its waiters were woken by the release itself */
        hold_check(&w->holds, name, len);
    if (w->watches.n)
        watch_wake(&w->watches, name, len);
    worker *keeper = keeper_of(w->app, name, len);
    int hot = waitq_hot(w->app->heat, name, len, clock_now_us());
    for (size_t i = 0; i < w->app->nworkers; i++) {
        worker *o = w->app->workers[i];
        /* Workers with waiters; and the keeper of a contended name, which may know it
         * held and must forget that now. */
        if (o != w && (__atomic_load_n(&o->ops.waiting, __ATOMIC_RELAXED) ||
                       __atomic_load_n(&o->holds.n, __ATOMIC_RELAXED) ||
                       __atomic_load_n(&o->watches.n, __ATOMIC_RELAXED) || (o == keeper && hot)))
            mailbox_post_name(&o->mb, MAILBOX_RELEASED, name, len);
    }
}

/* lockop_env.watch: follow (or stop following) name's release announcements from the
 * other instances (notify.h). */
static void on_watch(lockop_env *env, const char *name, size_t len, int on)
{
    worker *w = env->owner;
    if (!w->notify)
        return;
    if (on)
        notify_subscribe(w->notify, name, len);
    else
        notify_unsubscribe(w->notify, name, len);
}

/* A release of name went through: wake its waiters, check its holds, tell its
 * watchers. */
static void released_here(worker *w, const char *name, size_t len)
{
    waitq_wake(&w->ops.wq, name, len);
    if (w->holds.n)
        hold_check(&w->holds, name, len);
    if (w->watches.n)
        watch_wake(&w->watches, name, len);
}

/* A grant of name went through: its watchers look again, and a hold of it checks
 * whether the grant was the handoff of its own lease to a waiter. */
static void granted_here(worker *w, const char *name, size_t len)
{
    if (w->holds.n)
        hold_check(&w->holds, name, len);
    if (w->watches.n)
        watch_wake(&w->watches, name, len);
}

/* lockop_env.granted: a grant of name went through this instance: the workers with
 * holds or watchers hear it. */
static void on_granted(lockop_env *env, const char *name, size_t len)
{
    worker *w = env->owner;
    for (size_t i = 0; i < w->app->nworkers; i++) {
        worker *o = w->app->workers[i];
        if (!__atomic_load_n(&o->watches.n, __ATOMIC_RELAXED) &&
            !__atomic_load_n(&o->holds.n, __ATOMIC_RELAXED))
            continue;
        if (o == w)
            granted_here(w, name, len);
        else
            mailbox_post_name(&o->mb, MAILBOX_GRANTED, name, len);
    }
}

/* notify's callback: another instance announced a release or a grant of name. */
static void on_announced(void *owner, const char *name, size_t len, int granted)
{
    if (granted)
        granted_here(owner, name, len); /* waiters need not know */
    else
        released_here(owner, name, len);
}

/* http_env.op_gone: the client of op (a request of this worker's) closed its
 * connection: drop op if it waits, release what it gets if its attempt is in flight
 * (on whichever worker runs it).  This worker's thread only. */
static void on_op_gone(void *owner, lockop *op)
{
    worker *w = owner;
    __atomic_store_n(&op->gone, 1, __ATOMIC_RELAXED);
    if (!op->home) {
        waitq_check_gone(&w->ops.wq, op->name, op->name_len); /* it runs here */
        return;
    }
    /* It runs on the worker that keeps its name: that worker looks through its queues
     * (never at op itself, which may be on its way back already). */
    mailbox_post_name(&keeper_of(w->app, op->name, op->name_len)->mb, MAILBOX_GONE, op->name,
                      op->name_len);
}

/* The done() of an op run here for another worker (on_start_op puts it in place of the
 * request's own): hand the op back to the request's worker (this thread). */
static void foreign_done(lockop *op)
{
    worker *here = container_of(op->env, worker, ops);
    worker *home = op->home;
    here->foreign_ops--;
    lockop_fini_rounds(op); /* its round belongs to this worker */
    op->env = &home->ops;   /* from now on the request's worker owns it again */
    op->done = op->home_done;
    mailbox_post_back(&home->mb, op); /* its mailbox runs home_done: on_mail_back */
}

/* http_env.start_op and hold_env.start_op: start op, a request's (or a hold's) lock
 * operation, from w (w's thread).  A waiting acquire runs on the worker that keeps
 * that name's waiters (by name hash), so that one instance has one FIFO per name and
 * its waiters never race each other across workers: op->done becomes foreign_done
 * there, which hands op back through w's mailbox, whose on_mail_back calls the
 * request's own done() on w.  Anything else runs here. */
static void on_start_op(void *owner, lockop *op)
{
    worker *w = owner;
    app *a = w->app;
    if (a->nworkers > 1) {
        worker *keeper = keeper_of(a, op->name, op->name_len);
        /* Waiting acquires go to the keeper, and so do every acquire, release and
         * extension of a name that is contended: one attempt per name at a time, and
         * what one attempt learns serves the others.  Releases also go there while it
         * has waiters (of any name), so that a release and the waiter it wakes reach
         * every master in that order, on the same connections. */
        int hot = op->kind != LOCKOP_MACQUIRE &&
                  waitq_hot(a->heat, op->name, op->name_len, clock_now_us());
        int to_keeper;
        switch (op->kind) {
        case LOCKOP_ACQUIRE:
            to_keeper = op->wait_deadline_us != 0 || hot;
            break;
        case LOCKOP_MACQUIRE:
            to_keeper = op->wait_deadline_us != 0;
            break;
        case LOCKOP_RELEASE:
            to_keeper = hot || __atomic_load_n(&keeper->ops.waiting, __ATOMIC_RELAXED) > 0;
            break;
        case LOCKOP_EXTEND:
            to_keeper = hot;
            break;
        default:
            to_keeper = 0;
        }
        if (to_keeper && keeper != w) {
            op->env = &keeper->ops;
            op->home = w;
            op->home_done = op->done;
            op->done = foreign_done;
            mailbox_post_start(&keeper->mb, op); /* started there: on_mail_start */
            return;
        }
    }
    lockop_start(op);
}

/* http_env.masters_starting: the first connections are still being made (within the
 * first seconds after the start), and fewer than a quorum of masters are ready. */
static int on_masters_starting(void *owner)
{
    const worker *w = owner;
    if (!w->boot_until_us || clock_now_us() >= w->boot_until_us)
        return 0;
    size_t ready = 0, unsettled = 0;
    for (size_t i = 0; i < w->rounds.n; i++) {
        ready += master_usable(&w->masters[i]);
        unsettled += !w->settled[i];
    }
    return ready < w->rounds.quorum && unsettled > 0;
}

/* http_env.master_ok: master m is in quorums on every worker. */
static int on_master_ok(void *owner, size_t m)
{
    const worker *w = owner;
    const app *a = w->app;
    for (size_t i = 0; i < a->nworkers; i++)
        if (__atomic_load_n(&a->workers[i]->masters[m].state, __ATOMIC_RELAXED) != MASTER_READY)
            return 0;
    return 1;
}

/* http_env.all_ready: whether every worker has a quorum of trusted masters (a request
 * may land on any). */
static int on_all_ready(void *owner)
{
    const worker *w = owner;
    const app *a = w->app;
    for (size_t i = 0; i < a->nworkers; i++) {
        size_t ready = 0;
        for (size_t m = 0; m < a->cfg.n_masters; m++)
            ready += __atomic_load_n(&a->workers[i]->masters[m].state, __ATOMIC_RELAXED) == MASTER_READY;
        if (ready < w->rounds.quorum)
            return 0;
    }
    return 1;
}

void worker_stop(worker *w)
{
    mailbox_poke(&w->mb);
}

/* ---- the mailbox's hooks (mailbox.h) ---- */

static void on_mail_name(void *owner, int kind, const char *name, size_t len)
{
    worker *w = owner;
    if (kind == MAILBOX_GONE)
        waitq_check_gone(&w->ops.wq, name, len);
    else if (kind == MAILBOX_GRANTED)
        granted_here(w, name, len);
    else
        released_here(w, name, len);
}

static void on_mail_lost(void *owner)
{
    worker *w = owner;
    waitq_wake_all(&w->ops.wq);
}

/* An op of another worker's request, routed here by on_start_op. */
static void on_mail_start(void *owner, lockop *op)
{
    worker *w = owner;
    w->foreign_ops++;
    if (__atomic_load_n(&w->app->stopping, __ATOMIC_RELAXED))
        op->wait_deadline_us = 0; /* the waiters here were answered already */
    lockop_start(op);
}

/* An op of this worker's request is back from the worker that ran it: its own done()
 * (api.c's op_done, hold.c's op_done) answers it. */
static void on_mail_back(void *owner, lockop *op)
{
    (void)owner;
    op->done(op);
}

static const mailbox_hooks mail_hooks = {
    .name = on_mail_name,
    .lost = on_mail_lost,
    .start = on_mail_start,
    .back = on_mail_back,
};

/* ---- the loop ---- */

static void on_tick(loop_timer *t)
{
    worker *w = container_of(t, worker, tick);
    int64_t now = clock_now_us();
    int64_t stall = w->app->cfg.node_timeout_ms * 4 * 1000;
    if (stall < 250000)
        stall = 250000;
    int unmarked = 0;
    for (size_t i = 0; i < w->rounds.n; i++) {
        master_conn *m = &w->masters[i];
        master_check_stall(m, now, stall);
        master_clock_tick(m, now);
        unmarked |= m->state == MASTER_UNMARKED;
        /* Another worker found it wiped or quarantined: ask it now, before a round. */
        if (m->state == MASTER_READY &&
            __atomic_load_n(&w->app->master_alarm_us[i], __ATOMIC_RELAXED) > m->check_sent_us)
            master_recheck(m);
    }
    if (unmarked)
        judge_unmarked(w); /* its peers' checks come back without a state change */
    http_server_tick(w->http, now);
    if (now >= w->next_trim_us) {
        /* After a burst (a frozen master's backlog, a crowd of waiters) hand freed
         * memory back instead of keeping the high-water mark for ever. */
        if (w->id == 0)
            malloc_trim(0);
        w->next_trim_us = now + 10 * 1000 * 1000;
    }
    loop_timer_start(&w->loop, &w->tick, now + TICK_MS * 1000);
}

static void flush_masters(worker *w)
{
    for (size_t i = 0; i < w->ndirty; i++)
        master_flush(w->dirty[i]);
    w->ndirty = 0;
}

static void pass(worker *w, int timeout_ms)
{
    if (w->rounds.ready_head || http_server_pending(w->http))
        timeout_ms = 0;
    loop_poll(&w->loop, timeout_ms);
    loop_run_timers(&w->loop);
    round_env_dispatch(&w->rounds);
    http_server_run(w->http);
    flush_masters(w);
    log_flush(&w->log);
}

static int next_timeout(worker *w)
{
    int t = loop_next_timeout_ms(&w->loop, 1000);
    int h = http_server_timeout_ms(w->http);
    return h >= 0 && h < t ? h : t;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    app *a = w->app;
    /* Requests wait for the first connections for a few seconds at most (a master that
     * never answers is not waited for after that). */
    w->boot_until_us = clock_now_us() + 5 * 1000 * 1000;
    for (size_t i = 0; i < w->rounds.n; i++)
        master_start(&w->masters[i]);
    if (w->notify)
        notify_start(w->notify);
    loop_timer_start(&w->loop, &w->tick, clock_now_us() + TICK_MS * 1000);

    while (!__atomic_load_n(&a->stopping, __ATOMIC_RELAXED))
        pass(w, next_timeout(w));

    /* Stop accepting, answer parked waiters, let in-flight requests finish. */
    http_server_quiesce(w->http);
    waitq_flush(&w->ops.wq);
    hold_shutdown(&w->holds); /* releases, then ends the streams */
    int64_t limit = clock_now_us() + (a->cfg.node_timeout_ms * 20 + 2000) * 1000;
    while ((http_server_active(w->http) || w->foreign_ops || w->holds.n) && clock_now_us() < limit)
        pass(w, next_timeout(w) > 50 ? 50 : next_timeout(w));
    /* Whatever still waits on a master is failed now, and answered. */
    for (size_t i = 0; i < w->rounds.n; i++)
        master_close(&w->masters[i], 0, "shutting down");
    limit = clock_now_us() + 500 * 1000;
    while ((http_server_active(w->http) || w->foreign_ops || w->holds.n) && clock_now_us() < limit)
        pass(w, 10);
    http_server_stop(w->http);
    hold_env_fini(&w->holds);
    notify_free(w->notify);
    w->notify = NULL;
    loop_timer_stop(&w->loop, &w->tick);
    round_env_dispatch(&w->rounds);
    log_flush(&w->log);
    return NULL;
}

worker *worker_new(app *a, int id, http_metrics_fn *metrics)
{
    worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->app = a;
    w->id = id;
    log_init(&w->log, a->cfg.log_json, a->cfg.log_level, 1);
    lease_rng_init(&w->rng);
    mailbox_init(&w->mb, &mail_hooks, w);
    if (loop_init(&w->loop) != 0)
        goto err;
    size_t n = a->cfg.n_masters;
    w->masters = calloc(n, sizeof *w->masters);
    w->dirty = calloc(n, sizeof *w->dirty);
    w->settled = calloc(n, sizeof *w->settled);
    w->downlog = calloc(n, sizeof *w->downlog);
    w->resyncs = calloc(n, sizeof *w->resyncs);
    if (!w->masters || !w->dirty || !w->resyncs || !w->settled || !w->downlog)
        goto err;
    for (size_t i = 0; i < n; i++)
        master_init(&w->masters[i], &a->cfg, (int)i, w, &w->loop, &hooks);
    round_env_init(&w->rounds, &w->loop, w->masters, n, config_quorum(n),
                   a->cfg.node_timeout_ms * 1000);
    uint32_t seed;
    if (lease_random(&w->rng, &seed, sizeof seed) != 0)
        goto err;
    if (lockop_env_init(&w->ops, &w->rounds, &a->cfg, w, &a->waiters_total, seed) != 0)
        goto err;
    w->ops.released = on_released;
    w->ops.wq.heat = a->heat;
    w->ops.wq.known = a->known;
    w->ops.wq.keeper_id = (size_t)id;
    w->ops.wq.nkeepers = a->nworkers;
    w->ops.wq.inbox = &a->inboxes[id];
    w->ops.watch = on_watch;
    w->ops.origin = a->origin;
    w->ops.origin_len = strlen(a->origin);
    w->ops.granted = on_granted;
    watch_env_init(&w->watches, &w->ops);
    w->holds = (hold_env){.ops = &w->ops, .owner = w, .start_op = on_start_op,
                          .max_holds = a->cfg.max_streams, .holds_total = &a->holds_total};
    hold_env_init(&w->holds);
    w->notify = notify_new(&a->cfg, &w->loop, a->origin, on_announced, w, &a->inboxes[id]);
    if (!w->notify)
        goto err;
    w->tick.cb = on_tick;
    if (mailbox_open(&w->mb, &w->loop) != 0)
        goto err;
    http_env env = {
        .app = a, .id = id, .loop = &w->loop, .log = &w->log, .ops = &w->ops, .rng = &w->rng,
        .masters = w->masters, .nmasters = n, .quorum = w->rounds.quorum, .owner = w,
        .holds = &w->holds, .watches = &w->watches, .start_op = on_start_op, .op_gone = on_op_gone, .all_ready = on_all_ready, .master_ok = on_master_ok,
        .masters_starting = on_masters_starting,
        .metrics = metrics,
    };
    w->http = http_server_new(&env);
    if (!w->http)
        goto err;
    return w;
err:
    log_msg(&w->log, LOG_LEVEL_ERROR, "worker %d: cannot start: %s", id, strerror(errno));
    log_flush(&w->log);
    worker_free(w);
    return NULL;
}

int worker_start(worker *w)
{
    return pthread_create(&w->thread, NULL, worker_main, w) == 0 ? 0 : -1;
}

void worker_join(worker *w) { pthread_join(w->thread, NULL); }

const http_server *worker_http(const worker *w) { return w->http; }
const lockop_env *worker_ops(const worker *w) { return &w->ops; }
const master_conn *worker_master(const worker *w, size_t i) { return &w->masters[i]; }

void worker_free(worker *w)
{
    if (!w)
        return;
    http_server_free(w->http);
    notify_free(w->notify);
    /* Timers live in the loop: drop the jobs that own some before the loop goes. */
    for (size_t i = 0; w->resyncs && i < w->rounds.n; i++)
        resync_free(w->resyncs[i]);
    for (size_t i = 0; w->masters && i < w->rounds.n; i++)
        master_fini(&w->masters[i]);
    round_env_fini(&w->rounds);
    lockop_env_fini(&w->ops);
    mailbox_fini(&w->mb);
    loop_fini(&w->loop);
    free(w->resyncs);
    free(w->masters);
    free(w->dirty);
    free(w->settled);
    free(w->downlog);
    free(w);
}
