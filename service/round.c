/* round.c -- fan-out rounds over the masters (see round.h). */
#include "stat.h"
#include "round.h"

#include <stdlib.h>
#include <string.h>

#include "reply.h"

static void on_deadline(loop_timer *t);

void round_env_init(round_env *env, loop *l, master_conn *masters, size_t n, size_t quorum,
                    int64_t node_timeout_us)
{
    memset(env, 0, sizeof *env);
    env->loop = l;
    env->masters = masters;
    env->n = n;
    env->quorum = quorum;
    env->node_timeout_us = node_timeout_us;
}

void round_env_fini(round_env *env)
{
    while (env->free_list) {
        round *rd = env->free_list;
        env->free_list = rd->next_ready;
        free(rd);
    }
}

round *round_new(round_env *env, round_cb done, void *owner)
{
    round *rd = env->free_list;
    if (rd) {
        env->free_list = rd->next_ready;
        env->pooled--;
    } else {
        size_t sz = sizeof *rd + env->n * (sizeof *rd->slots + sizeof *rd->replies);
        rd = malloc(sz);
        if (!rd)
            return NULL;
    }
    struct round_slot *slots = (struct round_slot *)(rd + 1);
    redlock_reply *replies = (redlock_reply *)(slots + env->n);
    memset(rd, 0, sizeof *rd);
    rd->env = env;
    rd->refs = 1;
    rd->done = done;
    rd->owner = owner;
    rd->slots = slots;
    rd->replies = replies;
    rd->timer.cb = on_deadline;
    for (size_t i = 0; i < env->n; i++) {
        slots[i].rd = rd;
        slots[i].index = i;
        replies[i].state = RL_SLOT_FAILED;
        replies[i].fence = 0;
        replies[i].pttl = -2;
        replies[i].raised = 0;
        replies[i].has_value = 0;
        replies[i].owner_len = 0;
    }
    return rd;
}

void round_unref(round *rd)
{
    if (--rd->refs > 0)
        return;
    round_env *env = rd->env;
    loop_timer_stop(env->loop, &rd->timer);
    if (env->pooled >= 1024) {
        free(rd); /* keep a bounded pool, not the peak of a burst */
        return;
    }
    rd->next_ready = env->free_list;
    env->free_list = rd;
    env->pooled++;
}

static void decide_now(round *rd, int decision)
{
    rd->decided = 1;
    rd->decision = decision;
    loop_timer_stop(rd->env->loop, &rd->timer);
    rd->refs++; /* held until done() has run */
    rd->next_ready = NULL;
    if (rd->env->ready_tail)
        rd->env->ready_tail->next_ready = rd;
    else
        rd->env->ready_head = rd;
    rd->env->ready_tail = rd;
}

static void check(round *rd)
{
    if (rd->decided)
        return;
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    size_t pending = t.n - t.ok - t.refused - t.failed;
    int d = redlock_decide(&t, rd->env->quorum, rd->wait_all);
    if (d == RL_DECIDE_NO_QUORUM && pending && rd->split_aware &&
        (rd->split_aware == 2 || !redlock_held_for_sure(rd->replies, rd->env->n, rd->env->quorum)))
        d = RL_DECIDE_WAIT;
    if (pending == 0 || d != RL_DECIDE_WAIT)
        decide_now(rd, pending == 0 ? redlock_decide(&t, rd->env->quorum, 1) : d);
}

void round_send(round *rd, int script, int nkeys, int nargs, const char **argv,
                const size_t *lens, uint64_t mask)
{
    round_env *env = rd->env;
    rd->script = script;
    rd->start_us = clock_now_us();
    /* A batched operation's keys and arguments are formatted once, here, for all the
     * masters (each one's batch copies the bytes). */
    char code = nkeys >= 0 && nargs >= 0 ? script_batch_code(script, nkeys, nargs) : 0;
    char stackbuf[2048], *buf = NULL;
    resp_op op;
    if (code) {
        size_t need = resp_op_size((size_t)nkeys, (size_t)nargs, lens);
        buf = need <= sizeof stackbuf ? stackbuf : malloc(need);
        if (buf)
            resp_op_format(&op, buf, code, (size_t)nkeys, (size_t)nargs, argv, lens);
    }
    for (size_t i = 0; i < env->n; i++) {
        redlock_reply *r = &rd->replies[i];
        r->state = RL_SLOT_FAILED;
        r->answered = 0;
        reply_clear(r); /* a master that never answers leaves its fields at "nothing" */
        if (i < 64 && !(mask & ((uint64_t)1 << i)))
            continue;
        r->state = RL_SLOT_PENDING; /* before the call: a reply cannot come synchronously */
        if (master_eval_op(&env->masters[i], script, nkeys, nargs, argv, lens, buf ? &op : NULL,
                           &rd->slots[i]) == 0)
            rd->refs++;
        else
            r->state = RL_SLOT_FAILED;
    }
    if (buf && buf != stackbuf)
        free(buf);
    loop_timer_start(env->loop, &rd->timer, rd->start_us + env->node_timeout_us);
    check(rd);
}

void round_ping(round *rd)
{
    round_env *env = rd->env;
    rd->script = SCRIPT_PING;
    rd->wait_all = 1;
    rd->start_us = clock_now_us();
    for (size_t i = 0; i < env->n; i++) {
        rd->replies[i].state = RL_SLOT_PENDING;
        rd->replies[i].answered = 0;
        if (master_ping(&env->masters[i], &rd->slots[i]) == 0)
            rd->refs++;
        else
            rd->replies[i].state = RL_SLOT_FAILED;
    }
    loop_timer_start(env->loop, &rd->timer, rd->start_us + env->node_timeout_us);
    check(rd);
}

void round_on_reply(master_conn *m, struct redisReply *r, void *priv)
{
    struct round_slot *slot = priv;
    round *rd = slot->rd;
    redlock_reply *out = &rd->replies[slot->index];
    int64_t now = clock_now_us();
    if (r) {
        int64_t rtt = now - rd->start_us;
        stat_set_i64(&m->last_rtt_us, rtt);
        stat_inc(&m->rtt_hist[hist_bucket(hist_rtt_bounds_us, HIST_RTT_N, rtt)]);
        stat_add(&m->rtt_sum_us, (uint64_t)(rtt > 0 ? rtt : 0));
    } else
        stat_inc(&m->errors);
    if (!rd->decided && out->state == RL_SLOT_PENDING && now - rd->start_us > rd->env->node_timeout_us) {
        /* Read after the round's deadline (the loop came to it late, or this instance
         * was frozen): it counts as no answer, and so does every other reply still
         * pending (docs/DESIGN.md §4, R-late).  Every write a granted round counts has
         * then happened within one node timeout of its start. */
        on_deadline(&rd->timer);
    } else if (!rd->decided && out->state == RL_SLOT_PENDING) {
        if (rd->decode)
            rd->decode(rd, slot->index, r, out);
        else
            reply_decode(rd->script, r, out);
        out->rtt_us = now - rd->start_us;
        out->answered = r != NULL;
        check(rd);
    }
    round_unref(rd);
}

static void on_deadline(loop_timer *t)
{
    round *rd = container_of(t, round, timer);
    if (rd->decided)
        return;
    /* Pending masters count as not answering; their replies may still come (late). */
    for (size_t i = 0; i < rd->env->n; i++)
        if (rd->replies[i].state == RL_SLOT_PENDING)
            rd->replies[i].state = RL_SLOT_FAILED;
    redlock_tally tl;
    redlock_tally_of(rd->replies, rd->env->n, &tl);
    decide_now(rd, redlock_decide(&tl, rd->env->quorum, 1));
}

void round_env_dispatch(round_env *env)
{
    while (env->ready_head) {
        round *rd = env->ready_head;
        env->ready_head = rd->next_ready;
        if (!env->ready_head)
            env->ready_tail = NULL;
        if (rd->done)
            rd->done(rd);
        round_unref(rd); /* the reference taken at the decision */
    }
}
