/* oplife.c -- the life of a lock operation, whatever its kind: prepared (lockop_init,
 * lockop_set_multi), answered from the loop and never under a caller still using it
 * (lockop_finish -> done_timer -> lockop_complete -> op->done), let go (lockop_fini);
 * and what the state machines above it share: the names an op is about, the
 * announcement of a release, the tally of a decided round, the fire-and-forget release
 * of what an attempt may have written, and the 409 answered without a round.  The
 * machines are acquire.c's and release.c's, the one-round kinds and lockop_start
 * lockop.c's (see lockop.h, lockop_int.h). */
#include "oplife.h"
#include "lockop_int.h"

#include <string.h>

#include "multilock.h"
#include "shapes.h"

/* ---- completion ---- */

/* op no longer counts in its worker's env->waiting (see on_start_op in worker.c). */
static void stop_waiting(lockop *op)
{
    if (op->waiting) {
        op->waiting = 0;
        __atomic_fetch_sub(&op->env->waiting, 1, __ATOMIC_RELAXED);
    }
}

/* An acquire's answer, counted by kind. */
static void count_kind(lockop *op)
{
    int k = op->multi ? 3 : op->mode == LOCKOP_SHARED ? 1 : op->mode == LOCKOP_SEMAPHORE ? 2 : 0;
    if (op->err == RL_OK)
        count(op->env, CNT_KIND_GRANTED + k);
    else if (op->err == RL_E_LOCK_HELD || op->err == RL_E_LOCK_CONTENDED ||
             op->err == RL_E_PERMITS_MISMATCH)
        count(op->env, CNT_KIND_REFUSED + k);
}

void lockop_complete(lockop *op)
{
    if (op->kind == LOCKOP_ACQUIRE || op->kind == LOCKOP_MACQUIRE)
        count_kind(op);
    if (op->intent_mask) /* a waiting writer is answered: its marks go (DESIGN.md §12) */
        shape_send_unwant(op);
    waitq_detach(&op->w);
    stop_waiting(op);
    op->done(op); /* api.c's op_done, hold.c's op_done, or worker.c's foreign_done */
}

/* op->done_timer's callback (lockop_finish() arms it): the answer, from the loop. */
static void on_done_timer(loop_timer *t)
{
    lockop_complete(container_of(t, lockop, done_timer));
}

/* Answer op from the loop, never under a caller still using it: done_timer ->
 * on_done_timer -> lockop_complete -> op->done. */
void lockop_finish(lockop *op)
{
    waitq_detach(&op->w);
    loop_timer_start(op->env->rounds->loop, &op->done_timer, 0);
}

void lockop_init(lockop *op, lockop_env *env, int kind, const char *name, size_t name_len,
                 lockop_done_cb done, void *owner)
{
    memset(op, 0, sizeof *op);
    op->env = env;
    op->kind = kind;
    if (name_len > NAME_MAX_LEN)
        name_len = NAME_MAX_LEN;
    memcpy(op->name, name, name_len);
    op->name[name_len] = '\0';
    op->name_len = name_len;
    op->done = done;
    op->owner = owner;
    op->done_timer.cb = on_done_timer;
    op->err = RL_E_INTERNAL;
    op->start_us = clock_now_us();
    op->release_mask = ~(uint64_t)0;
    op->answered = SIZE_MAX;
    op->bound_ms = -1;
}

int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n)
{
    if (multilock_set(op, names, lens, n) != 0)
        return -1;
    op->shape = &multilock_shape;
    return 0;
}

void lockop_fini_rounds(lockop *op)
{
    stop_waiting(op);
    drop_round(op);
}

void lockop_fini(lockop *op)
{
    lockop_fini_rounds(op);
    multilock_free(op);
}

/* The names op is about (one, or the names of a multi-name lock). */
size_t lockop_names(const lockop *op, const char (**names)[NAME_MAX_LEN + 1],
                       const size_t **lens)
{
    if (op->multi) {
        *names = (const char(*)[NAME_MAX_LEN + 1])op->multi->names;
        *lens = op->multi->lens;
        return op->multi->n;
    }
    *names = (const char(*)[NAME_MAX_LEN + 1])&op->name;
    *lens = &op->name_len;
    return 1;
}

/* A release of op's name(s) went through here: wake their waiters, here and on the
 * other workers. */
void lockop_announce_release(lockop *op)
{
    const char(*names)[NAME_MAX_LEN + 1];
    const size_t *lens;
    size_t n = lockop_names(op, &names, &lens);
    for (size_t j = 0; j < n; j++) {
        waitq_wake(&op->env->wq, names[j], lens[j]);
        if (op->env->released)
            op->env->released(op->env, names[j], lens[j]); /* worker.c: on_released */
    }
}

/* The op a decided round was for, with the masters that answered (into *t too). */
lockop *lockop_heard(const round *rd, redlock_tally *t)
{
    lockop *op = rd->owner;
    redlock_tally own;
    if (!t)
        t = &own;
    redlock_tally_of(rd->replies, rd->env->n, t);
    op->nodes_ok = t->ok + t->refused;
    op->answered = t->answered;
    return op;
}


/* Release what op's attempt may have written (op->release_mask), fire and forget. */
void lockop_release_everywhere(lockop *op)
{
    /* Fire and forget: a master that timed out may still have set the key.  On each
     * connection it goes after our acquire, so it cannot overtake it.  Masters that
     * refused wrote nothing (the scripts refuse before any write) and are skipped: a
     * refused attempt then costs the masters one operation, as a grant does. */
    uint64_t mask = op->release_mask & round_all(op->env->rounds);
    if (!mask)
        return;
    round *rd = round_new(op->env->rounds, NULL, NULL);
    if (!rd)
        return; /* out of memory: the keys expire with their ttl */
    op->shape->send_release(op, rd, mask);
    round_unref(rd);
}


/* ---- answered without a round ---- */

int lockop_held_known(lockop *op, const waitq_known *known, const struct inbox *inboxes,
                      size_t nkeepers)
{
    int64_t ra;
    if (!waitq_known_held(known, inboxes, nkeepers, op->name, op->name_len, op->lease,
                          op->lease_len, clock_now_us(), &ra))
        return 0;
    op->err = RL_E_LOCK_HELD;
    op->retry_after_ms = ra;
    count(op->env, CNT_HELD_LOCAL);
    count(op->env, CNT_ACQ_HELD);
    count_kind(op);
    return 1;
}
