/* watchget.c -- watched GETs (see watchget.h). */
#include "watchget.h"

#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "app.h"
#include "body.h"
#include "http_req.h"
#include "watch.h"

static void watch_hung_up(http_req *r);

/* A GET that answers once the lock's index (body.h) is no longer I, or after wait_ms
 * with the index unchanged.  Between its inspections it is parked (watch.h): a release
 * or a grant of the name, or the holder's expiry, makes it look again. */
struct watchget {
    watcher w;
    http_req *r;
    uint64_t index;             /* what the client has seen */
    int64_t deadline_us;
    loop_timer expiry;          /* when the holder's lock should expire */
    loop_timer deadline;
    int busy;                   /* an inspection is under way */
    int again;                  /* an event came during it: look again */
    int last;                   /* the wait is over: answer the next inspection */
    lockop_done_cb done;        /* the inspections' done() */
};

static void watch_look(struct watchget *aw)
{
    http_req *r = aw->r;
    if (aw->busy) {
        aw->again = 1;
        return;
    }
    aw->busy = 1;
    lockop_fini(&r->op);
    lockop_init(&r->op, r->srv->env.ops, LOCKOP_INSPECT, r->name, r->name_len, aw->done, r);
    lockop_start(&r->op);
}

static void on_watch_changed(watcher *w)
{
    watch_look(container_of(w, struct watchget, w));
}

static void on_watch_expiry(loop_timer *t)
{
    watch_look(container_of(t, struct watchget, expiry));
}

static void on_watch_deadline(loop_timer *t)
{
    struct watchget *aw = container_of(t, struct watchget, deadline);
    aw->last = 1; /* one more look, then answer whatever it says */
    watch_look(aw);
}

static void watch_free(http_req *r)
{
    struct watchget *aw = r->watch;
    if (!aw)
        return;
    watch_remove(&aw->w);
    loop_timer_stop(r->srv->env.loop, &aw->expiry);
    loop_timer_stop(r->srv->env.loop, &aw->deadline);
    free(aw);
    r->watch = NULL;
}

/* An inspection of a watched GET is done: 1 if it keeps waiting (nothing to answer
 * yet), 0 if the request is to be answered now. */
int watchget_keep(http_req *r, const lockop *op)
{
    struct watchget *aw = r->watch;
    aw->busy = 0;
    body_lock l = {.fencing_token = op->token, .held = op->held};
    int64_t now = clock_now_us();
    if (op->err != RL_OK || aw->last || now >= aw->deadline_us || body_index(&l) != aw->index) {
        watch_free(r);
        return 0;
    }
    if (aw->again) {
        aw->again = 0;
        watch_look(aw);
        return 1;
    }
    if (!aw->w.env)
        watch_add(r->srv->env.watches, &aw->w);
    if (op->held) /* it changes at the latest when it expires (0 left: look again soon) */
        loop_timer_start(r->srv->env.loop, &aw->expiry,
                         now + ((op->validity_ms > 0 ? op->validity_ms : 0) + 5) * 1000);
    else
        loop_timer_stop(r->srv->env.loop, &aw->expiry);
    if (!loop_timer_armed(&aw->deadline))
        loop_timer_start(r->srv->env.loop, &aw->deadline, aw->deadline_us);
    answer_watch_hangup(r, watch_hung_up); /* answered (to nobody) at once */
    return 1;
}

/* GET's watch parameters: index (the one seen) and wait_ms. */
rl_err watchget_params(http_req *r, lockop_done_cb done)
{
    static const char *const keys[] = {"index", "wait_ms"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, keys[i]);
        rl_err e = v ? params_from_query(&r->params, keys[i], v) : RL_OK;
        if (e != RL_OK)
            return e;
    }
    if (MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "hold"))
        return answer_fail(r, RL_E_INVALID_HOLD, "hold=stream is for POST /locks/{name}");
    const config *cfg = &r->srv->env.app->cfg;
    if (r->params.has_wait && r->params.wait_ms > cfg->max_wait_ms)
        return answer_fail(r, RL_E_INVALID_WAIT, "wait_ms is larger than --max-wait-ms");
    if (r->params.has_wait && r->params.wait_ms > 0 && !r->params.has_index)
        return answer_fail(r, RL_E_INVALID_INDEX, "wait_ms on GET waits for a change: give the index seen");
    if (!r->params.has_index || !r->params.has_wait || r->params.wait_ms == 0)
        return RL_OK;
    struct watchget *aw = calloc(1, sizeof *aw);
    if (!aw)
        return answer_fail(r, RL_E_INTERNAL, "out of memory");
    aw->r = r;
    aw->index = r->params.index;
    aw->deadline_us = r->start_us + (int64_t)r->params.wait_ms * 1000;
    aw->w.name = r->name;
    aw->w.len = r->name_len;
    aw->w.changed = on_watch_changed;
    aw->expiry.cb = on_watch_expiry;
    aw->deadline.cb = on_watch_deadline;
    aw->busy = 1;
    aw->done = done;
    r->watch = aw;
    return RL_OK;
}

/* The client of a watched GET hung up: answer now (to nobody) and let it go. */
static void watch_hung_up(http_req *r)
{
    r->watch->last = 1;
    watch_look(r->watch);
}

void watchget_free(http_req *r)
{
    watch_free(r);
}

