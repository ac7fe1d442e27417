/* hold.c -- locks kept alive for their owner (see hold.h). */
#include "hold.h"

#include <stdlib.h>
#include <string.h>

#include "redlock.h"

struct hold {
    hold_env *env;
    list link;                  /* in env->holds once started */
    hold_cb cb;                 /* NULL once the owner is gone or told the end */
    void *owner;
    lockop op;                  /* its extension or release */
    int busy;                   /* op is in flight */
    int mode;                   /* enum hold_mode */
    int ending;                 /* release (when op is free and letgo is not armed),
                                 * then free the hold */
    int said_lost;              /* HOLD_LOST was told: told mode ends with HOLD_OVER */
    const char *end_reason;     /* HOLD_RELEASED's reason after that release, if the
                                 * owner is told (NULL: by a DELETE, never here) */
    int tell_released;          /* tell HOLD_RELEASED (end_reason) after the release */
    int recheck;                /* a release of the name was seen while op was in flight */
    int release_seen;           /* ... and the lease may be gone because of it */
    int asked_again;            /* not found with no release heard: asked once more */
    int exact;                  /* valid_until comes from an extension sent here */
    int64_t valid_until_us;     /* the validity of the last successful round ends */
    int64_t told_until_us;      /* the last validity told the client ends (immediate
                                 * mode: the grant line's, each extended line's) */
    int64_t sent_us;            /* when the extension in flight was sent */
    loop_timer tick;            /* the next extension */
    loop_timer lost;            /* say "lost" at valid_until - margin */
    loop_timer letgo;           /* ending: the release at told_until (told mode;
                                 * immediate mode after "lost") */
    long ttl_ms;
    long max_hold_ms;           /* the grant's bound (0: none): extensions go up to it */
    int final;                  /* the masters capped the last extension at the bound: no
                                 * other can add to it; the hold ends with it */
    int clean;                  /* its client asked to let go: the release frees the lock
                                 * at once; any other end lets a lock with a lock-delay
                                 * rest (docs/DESIGN.md section 14) */
    int lock_mode;              /* the grant's (enum lockop_mode): its extensions and
                                 * release go the same way */
    size_t name_len, lease_len;
    char name[NAME_MAX_LEN + 1];
    char lease[LEASE_MAX_LEN + 1];
};

/* The extension period for a ttl: a third of it (at least 1 ms). */
static int64_t hold_period_ms(int64_t ttl_ms)
{
    return ttl_ms / 3 > 0 ? ttl_ms / 3 : 1;
}

/* The margin before the validity ends by which "lost" is said. */
static int64_t hold_margin_ms(int64_t ttl_ms)
{
    int64_t m = ttl_ms / 10;
    return m < 10 ? 10 : m > 1000 ? 1000 : m;
}

/* After a failed extension: try again this soon (a fraction of the ttl). */
static int64_t retry_ms(int64_t ttl_ms)
{
    int64_t r = ttl_ms / 10;
    return r < 20 ? 20 : r > 1000 ? 1000 : r;
}

static loop *loop_of(const hold *h)
{
    return h->env->ops->rounds->loop;
}

/* Tell the owner; the last word (anything but HOLD_EXTENDED, and HOLD_LOST in
 * immediate mode) leaves it without further events. */
static void tell(hold *h, int event, int64_t validity_ms, const char *reason)
{
    hold_cb cb = h->cb;
    if (!cb)
        return;
    if (event == HOLD_LOST)
        h->said_lost = 1;
    if (event != HOLD_EXTENDED && !(event == HOLD_LOST && h->mode == HOLD_TOLD))
        h->cb = NULL;
    cb(h->owner, event, validity_ms, reason);
}

static void hold_free(hold *h)
{
    hold_env *env = h->env;
    loop_timer_stop(loop_of(h), &h->tick);
    loop_timer_stop(loop_of(h), &h->lost);
    loop_timer_stop(loop_of(h), &h->letgo);
    if (env->ops->watch)
        env->ops->watch(env->ops, h->name, h->name_len, 0);
    list_remove(&h->link);
    __atomic_sub_fetch(&env->n, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(env->holds_total, 1, __ATOMIC_RELAXED);
    free(h);
}

/* The hold is over without a release (nothing left to let go): its last word, then
 * free it. */
static void finish(hold *h, int event, const char *reason)
{
    if (event == HOLD_LOST && h->mode == HOLD_TOLD) {
        tell(h, HOLD_LOST, 0, reason);
        tell(h, HOLD_OVER, 0, NULL);
    } else {
        tell(h, event, 0, reason);
    }
    hold_free(h);
}

static void op_done(lockop *op);

static void run(hold *h, int kind)
{
    lockop_init(&h->op, h->env->ops, kind, h->name, h->name_len, op_done, h);
    memcpy(h->op.lease, h->lease, h->lease_len + 1);
    h->op.lease_len = h->lease_len;
    h->op.ttl_ms = h->ttl_ms;
    h->op.mode = h->lock_mode; /* a permit's extension and release go by its semaphore */
    h->op.capped = kind == LOCKOP_EXTEND && h->max_hold_ms > 0;
    h->op.rest = kind == LOCKOP_RELEASE && !h->clean && h->lock_mode == LOCKOP_EXCLUSIVE;
    h->busy = 1;
    h->sent_us = clock_now_us();
    h->env->start_op(h->env->owner, &h->op);
}

/* The hold is over: let the lock go no sooner than at_us (when op is free), then free
 * the hold. */
static void end_at(hold *h, int64_t at_us)
{
    loop_timer_stop(loop_of(h), &h->tick);
    loop_timer_stop(loop_of(h), &h->lost);
    h->ending = 1;
    if (at_us > clock_now_us()) {
        loop_timer_start(loop_of(h), &h->letgo, at_us);
        return;
    }
    loop_timer_stop(loop_of(h), &h->letgo);
    if (!h->busy)
        run(h, LOCKOP_RELEASE);
}

/* When this mode may let go without its client's consent. */
static int64_t letgo_at(const hold *h)
{
    return h->mode == HOLD_TOLD ? h->told_until_us : 0;
}

static void on_letgo(loop_timer *t)
{
    hold *h = container_of(t, hold, letgo);
    if (!h->busy)
        run(h, LOCKOP_RELEASE);
}

static void on_tick(loop_timer *t)
{
    hold *h = container_of(t, hold, tick);
    if (!h->busy && !h->ending)
        run(h, LOCKOP_EXTEND);
}

static void arm_tick(hold *h, int64_t in_ms)
{
    loop_timer_start(loop_of(h), &h->tick, clock_now_us() + in_ms * 1000);
}

static void arm_lost(hold *h)
{
    int64_t now = clock_now_us();
    int64_t at = h->valid_until_us - hold_margin_ms(h->ttl_ms) * 1000;
    loop_timer_start(loop_of(h), &h->lost, at > now ? at : now);
}

/* No extension came through in time, or the hold reached its bound: say so before
 * the validity ends, and let go only once the validity told has run out, in both
 * modes: the line is said a margin early so that the client stops in time, and a
 * one-way client reads it when it reads it (docs/DESIGN.md section 10). */
static void on_lost(loop_timer *t)
{
    hold *h = container_of(t, hold, lost);
    tell(h, HOLD_LOST, 0, h->final ? "max_hold" : "no_quorum");
    end_at(h, h->told_until_us);
}

/* An extension sent at sent_us succeeded: the keys it renewed outlive
 * sent + ttl - drift allowance (section 1), which is all the hold ever counts on --
 * or sent + what was left of the hold's bound, where the masters capped it there
 * (held_ms below the ttl): then no extension can add to it, and the hold ends with it
 * (on_lost says "max_hold").  Timers first, then the owner (who may end it). */
static void extended(hold *h, int64_t held_ms)
{
    if (held_ms <= 0 || held_ms > h->ttl_ms)
        held_ms = h->ttl_ms;
    if (held_ms < h->ttl_ms)
        h->final = 1;
    int64_t v = redlock_validity_ms(held_ms, 0, h->env->ops->conf->drift_factor);
    int64_t until = h->sent_us + (v > 0 ? v : 0) * 1000;
    int64_t now = clock_now_us();
    if (until <= now) { /* the round took the whole validity: as good as a failure */
        if (!h->final)
            arm_tick(h, retry_ms(h->ttl_ms));
        return;
    }
    if (until > h->valid_until_us || !h->exact)
        h->valid_until_us = until;
    h->exact = 1;
    arm_lost(h);
    if (!h->final)
        arm_tick(h, hold_period_ms(h->ttl_ms));
    if (h->mode == HOLD_IMMEDIATE && h->cb && h->valid_until_us > h->told_until_us)
        h->told_until_us = h->valid_until_us; /* the extended line says it */
    tell(h, HOLD_EXTENDED, (h->valid_until_us - now) / 1000, NULL);
}

/* The release (the hold's last op) is done: the last word, and the hold goes. */
static void released(hold *h, rl_err err)
{
    /* The lease holds no quorum any more (released, or not found on a quorum). */
    int gone = err == RL_OK || err == RL_E_LEASE_NOT_FOUND;
    if (h->said_lost) {
        tell(h, HOLD_OVER, 0, NULL);
        hold_free(h);
    } else if (h->tell_released && gone) {
        tell(h, HOLD_RELEASED, 0, h->end_reason);
        hold_free(h);
    } else if (h->tell_released) {
        finish(h, HOLD_LOST, "no_quorum"); /* the keys expire by themselves */
    } else {
        hold_free(h);
    }
}

static void op_done(lockop *op)
{
    hold *h = op->owner;
    int kind = op->kind;
    rl_err err = op->err;
    int64_t held_ms = op->hold_ms;
    h->busy = 0;
    lockop_fini(op);
    if (kind == LOCKOP_RELEASE) {
        released(h, err);
        return;
    }
    if (h->ending) {
        if (!loop_timer_armed(&h->letgo))
            run(h, LOCKOP_RELEASE);
        return;
    }
    if (err == RL_OK) {
        extended(h, held_ms);
        if (h->ending)
            return; /* its owner ended it meanwhile */
        if (h->recheck) { /* a release came while it was in flight: ask again */
            h->recheck = 0;
            loop_timer_stop(loop_of(h), &h->tick);
            run(h, LOCKOP_EXTEND);
        } else {
            h->release_seen = 0;
        }
        h->asked_again = 0;
        return;
    }
    if (err == RL_E_LEASE_NOT_FOUND) {
        if (!h->release_seen && !h->asked_again) {
            /* Gone from a quorum and no release of the name heard: one that went
             * through another worker (its mailbox) or instance (its announcement) may
             * be on its way still, told once its own round has its answers, within a
             * node timeout.  (A told hold's first extension goes at once: a release
             * right after the grant can reach the masters first.)  Ask once more then:
             * a release heard meanwhile asks at once, and says released. */
            h->asked_again = 1;
            arm_tick(h, h->env->ops->conf->node_timeout_ms + 1);
            return;
        }
        /* Gone from a quorum: released with its lease, or lost.  The extension let go
         * of what was left of it already. */
        finish(h, h->release_seen ? HOLD_RELEASED : HOLD_LOST, h->release_seen ? NULL : "lease_lost");
        return;
    }
    if (err == RL_E_MAX_HOLD_EXCEEDED) {
        /* At the bound: nothing more to extend.  The lost timer, armed at the last
         * validity, says "max_hold". */
        h->final = 1;
        return;
    }
    /* No quorum this time: again soon, until the lost timer says it is too late. */
    arm_tick(h, retry_ms(h->ttl_ms));
}

hold *hold_new(hold_env *env)
{
    if (env->stopping)
        return NULL;
    long total = __atomic_add_fetch(env->holds_total, 1, __ATOMIC_RELAXED);
    hold *h = total > env->max_holds ? NULL : calloc(1, sizeof *h);
    if (!h) {
        __atomic_fetch_sub(env->holds_total, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    h->env = env;
    h->tick.cb = on_tick;
    h->lost.cb = on_lost;
    h->letgo.cb = on_letgo;
    return h;
}

void hold_discard(hold *h)
{
    __atomic_fetch_sub(h->env->holds_total, 1, __ATOMIC_RELAXED);
    free(h);
}

void hold_start(hold *h, const lockop *g, int mode, hold_cb cb, void *owner)
{
    hold_env *env = h->env;
    h->cb = cb;
    h->owner = owner;
    h->mode = mode;
    h->ttl_ms = g->ttl_ms;
    h->max_hold_ms = g->max_hold_ms;
    h->lock_mode = g->mode;
    h->name_len = g->name_len;
    memcpy(h->name, g->name, g->name_len + 1);
    h->lease_len = g->lease_len;
    memcpy(h->lease, g->lease, g->lease_len + 1);
    list_insert_head(&env->holds, &h->link);
    __atomic_add_fetch(&env->n, 1, __ATOMIC_RELAXED);
    /* A release of the name through another instance is announced (notify.h). */
    if (env->ops->watch)
        env->ops->watch(env->ops, h->name, h->name_len, 1);
    /* The grant's validity was counted from its round's start, which only the round
     * knew: counted from now it may be a little long.  The lost timer allows for that
     * with its margin; a told hold answers no ping from it (hold_answer). */
    h->valid_until_us = clock_now_us() + g->validity_ms * 1000;
    if (mode == HOLD_IMMEDIATE && cb)
        h->told_until_us = h->valid_until_us; /* the grant line, written now */
    arm_lost(h);
    int64_t first = hold_period_ms(h->ttl_ms);
    if (first > g->validity_ms / 2)
        first = g->validity_ms / 2; /* the grant took a good part of its ttl */
    if (mode == HOLD_TOLD)
        first = 0; /* a validity known from this side, for the first answer */
    arm_tick(h, first > 0 ? first : 0);
    if (env->stopping) { /* started during the shutdown */
        if (mode == HOLD_TOLD) {
            tell(h, HOLD_LOST, 0, "shutting_down");
        } else {
            h->tell_released = h->cb != NULL;
            h->end_reason = "shutting_down";
        }
        end_at(h, 0); /* nothing told yet: at once */
    }
}

void hold_told_grant(hold *h)
{
    if (h->valid_until_us > h->told_until_us)
        h->told_until_us = h->valid_until_us;
}

int64_t hold_answer(hold *h)
{
    if (h->ending || h->said_lost || !h->cb)
        return -1;
    if (!h->exact)
        return 0;
    int64_t now = clock_now_us();
    int64_t v = (h->valid_until_us - now) / 1000; /* rounded down */
    if (v < 1)
        return -1; /* the lost timer is due */
    int64_t until = now + v * 1000;
    if (until > h->told_until_us)
        h->told_until_us = until;
    return v;
}

void hold_release(hold *h, const char *reason)
{
    if (h->ending && !h->said_lost) {
        return; /* already letting go */
    }
    if (!h->said_lost) {
        h->tell_released = h->cb != NULL;
        h->end_reason = reason;
    }
    /* The client's own request lets go at once (and frees a lock with a lock-delay at
     * once); its silence only once what it was told has run out (it has by the time
     * the owner notices: silence lasts a ttl), and lets it rest. */
    int asked = reason && strcmp(reason, "requested") == 0;
    h->clean = asked;
    end_at(h, asked ? 0 : letgo_at(h));
}

void hold_fail(hold *h, const char *reason)
{
    if (h->ending || h->said_lost)
        return;
    tell(h, HOLD_LOST, 0, reason);
    end_at(h, letgo_at(h));
}

void hold_close(hold *h)
{
    h->cb = NULL;
    h->tell_released = 0;
    if (h->ending) {
        /* Already letting go; an owner gone does not make that sooner. */
        return;
    }
    end_at(h, letgo_at(h));
}

void hold_env_init(hold_env *env)
{
    list_init(&env->holds);
}

void hold_check(hold_env *env, const char *name, size_t len)
{
    list_foreach(node, &env->holds) {
        hold *h = list_data(node, hold, link);
        if (h->ending || h->name_len != len || memcmp(h->name, name, len) != 0)
            continue;
        h->release_seen = 1;
        if (h->busy) {
            h->recheck = 1;
        } else {
            loop_timer_stop(loop_of(h), &h->tick);
            run(h, LOCKOP_EXTEND);
        }
    }
}

void hold_shutdown(hold_env *env)
{
    env->stopping = 1;
    list_foreach(node, &env->holds) {
        hold *h = list_data(node, hold, link);
        if (h->ending)
            continue;
        if (h->mode == HOLD_TOLD) {
            /* Never let go before what the client was told runs out: say so now; a
             * client that reads it releases at once. */
            hold_fail(h, "shutting_down");
        } else {
            h->tell_released = h->cb != NULL;
            h->end_reason = "shutting_down";
            end_at(h, 0);
        }
    }
}

void hold_env_fini(hold_env *env)
{
    for (list *node; (node = list_first(&env->holds));) {
        hold *h = list_data(node, hold, link);
        if (h->busy)
            lockop_fini(&h->op);
        h->cb = NULL;
        hold_free(h);
    }
}
