/* lockop.c -- acquire / release / extend / inspect / readiness (see lockop.h and
 * docs/DESIGN.md for the reasoning behind each step). */
#include "stat.h"
#include "lockop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>

#include "keys.h"
#include "reply.h"
#include "scripts.h"

/* A name's queue on the worker that keeps the name: the waiters parked in arrival
 * order (the head alone retries), the no-wait acquires following the one attempt in
 * flight, and what the last round taught (held by whom, until when).  A multi-name
 * waiter has a private queue of its own (multi), woken by a release of any of its
 * names, so that it never blocks waiters of one name. */
struct waitq {
    waitq *next;          /* hash chain, or env->mqueues */
    lockop *head, *tail;  /* FIFO of parked waiters; head alone retries */
    lockop *fhead, *ftail; /* no-wait acquires waiting for the attempt in flight */
    lockop *inflight;     /* the attempt on this name in flight here (one at a time) */
    loop_timer retry;     /* when the head retries */
    loop_timer gc;        /* when what is known runs out: free the queue if idle */
    int retry_due;        /* the head's turn came while another attempt was in flight */
    int watched;          /* following the name's release messages (notify.h) */
    int multi;            /* the private queue of one multi-name waiter */
    int64_t known_until_us; /* until then the name is known held by known_lease */
    int64_t known_free_us;  /* when that lock should expire */
    size_t known_len;
    char known_lease[LEASE_MAX_LEN + 1];
    lockop_env *env;
    size_t name_len;
    char name[NAME_MAX_LEN + 1];
};

/* What a round taught is trusted this long at most: a release through another
 * instance is announced (notify.h), but an announcement can be missed. */
#define KNOWN_MAX_MS 100
/* A name that saw contention counts as contended this long (worker.c routes all of
 * its operations to the worker that keeps it). */
#define HEAT_MS 2000

static uint32_t rnd_next(lockop_env *env)
{
    uint32_t x = env->rnd;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return env->rnd = x ? x : 0x9e3779b9u;
}

int lockop_env_init(lockop_env *env, round_env *rounds, const config *conf, void *owner,
                    long *waiters_total, uint32_t seed)
{
    memset(env, 0, sizeof *env);
    env->rounds = rounds;
    env->conf = conf;
    env->owner = owner;
    env->waiters_total = waiters_total;
    env->rnd = seed ? seed : 0x12345678u;
    env->nbuckets = 1024;
    env->buckets = calloc(env->nbuckets, sizeof *env->buckets);
    env->epochs = calloc(LOCKOP_EPOCHS, sizeof *env->epochs);
    return env->buckets && env->epochs ? 0 : -1;
}

static void q_drop_all(lockop_env *env, waitq *q)
{
    while (q) {
        waitq *next = q->next;
        loop_timer_stop(env->rounds->loop, &q->retry);
        loop_timer_stop(env->rounds->loop, &q->gc);
        free(q);
        q = next;
    }
}

uint64_t lockop_counter(const lockop_env *env, int c)
{
    return c >= 0 && c < CNT__COUNT ? __atomic_load_n(&env->counters[c], __ATOMIC_RELAXED) : 0;
}

void lockop_env_fini(lockop_env *env)
{
    /* Queues that only what was known still kept (their waiters were answered). */
    for (size_t b = 0; env->buckets && b < env->nbuckets; b++)
        q_drop_all(env, env->buckets[b]);
    q_drop_all(env, env->mqueues);
    env->mqueues = NULL;
    free(env->buckets);
    env->buckets = NULL;
    free(env->epochs);
    env->epochs = NULL;
}

/* Releases seen of names with this hash.  A waiter's attempt notes the count when it
 * is sent; if it moved by the time the attempt is refused, a release came while it
 * was in flight and the attempt may have lost to nothing: it retries at once.  This
 * covers first attempts too, which are in no queue yet.  Names sharing a slot only
 * cost a spurious retry. */
static uint32_t *epoch_slot(lockop_env *env, const char *name, size_t len)
{
    return &env->epochs[keys_name_hash(name, len) & (LOCKOP_EPOCHS - 1)];
}

static uint32_t op_epoch(lockop *op)
{
    if (!op->multi)
        return *epoch_slot(op->env, op->name, op->name_len);
    uint32_t sum = 0; /* counters only grow: any release of any name moves the sum */
    for (size_t j = 0; j < op->multi->n; j++)
        sum += *epoch_slot(op->env, op->multi->names[j], op->multi->lens[j]);
    return sum;
}

static waitq **bucket_of(lockop_env *env, const char *name, size_t len)
{
    return &env->buckets[keys_name_hash(name, len) & (env->nbuckets - 1)];
}

static waitq *waitq_find(lockop_env *env, const char *name, size_t len)
{
    for (waitq *q = *bucket_of(env, name, len); q; q = q->next)
        if (q->name_len == len && memcmp(q->name, name, len) == 0)
            return q;
    return NULL;
}

/* ---- keys and script arguments ---- */

typedef struct keybuf {
    char key[KEYS_MAX], chan[KEYS_MAX], bucket[KEYS_BUCKET_MAX];
    size_t key_len, chan_len, bucket_len;
} keybuf;

static void make_keys(const lockop *op, keybuf *kb)
{
    const char *prefix = op->env->conf->key_prefix;
    kb->bucket_len = keys_bucket(op->name, op->name_len, kb->bucket, sizeof kb->bucket);
    kb->key_len = keys_lock(prefix, op->name, op->name_len, kb->key, sizeof kb->key);
    kb->chan_len = keys_released(prefix, op->name, op->name_len, kb->chan, sizeof kb->chan);
}

/* Completion: always from the loop, through the wait timer set to "now". */
static void on_wait_timer(loop_timer *t);

/* op's part in its name's queue is over: the queue is let go, if nothing else needs
 * it, after this loop pass (never under a caller still using it). */
static void detach(lockop *op)
{
    waitq *q = op->nq;
    if (!q)
        return;
    op->nq = NULL;
    if (q->inflight == op)
        q->inflight = NULL;
    loop_timer_start(q->env->rounds->loop, &q->gc, 0);
}

static void finish(lockop *op)
{
    detach(op);
    op->wait_deadline_us = 0; /* the timer now means "complete" */
    loop_timer_start(op->env->rounds->loop, &op->wait_timer, 0);
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
    op->wait_timer.cb = on_wait_timer;
    op->err = RL_E_INTERNAL;
    op->start_us = clock_now_us();
    op->release_mask = ~(uint64_t)0;
}

static void mrelease_send(lockop *op, round *rd);

static void release_everywhere(lockop *op)
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
    if (op->multi) {
        mrelease_send(op, rd);
        round_unref(rd);
        return;
    }
    keybuf kb;
    make_keys(op, &kb);
    /* The exact value: a retry with the same lease that adopted a key keeps it. */
    const char *argv[] = {kb.key, op->value, kb.chan, op->env->origin};
    size_t lens[] = {kb.key_len, op->value_len, kb.chan_len, op->env->origin_len};
    round_send(rd, SCRIPT_RELEASE, 1, 3, argv, lens, mask);
    round_unref(rd);
}

/* ---- waiting ---- */

static void attempt(lockop *op);

static void waitq_arm(waitq *q, int64_t delay_ms)
{
    loop_timer_start(q->env->rounds->loop, &q->retry, clock_now_us() + delay_ms * 1000);
}

int lockop_hot(const int64_t *heat, const char *name, size_t len, int64_t now_us)
{
    if (!heat)
        return 0;
    return __atomic_load_n(&heat[keys_name_hash(name, len) & (LOCKOP_EPOCHS - 1)], __ATOMIC_RELAXED) > now_us;
}

/* name saw contention: route its operations to this worker for a while. */
static void heat_up(lockop *op)
{
    if (!op->env->heat || op->multi)
        return;
    int64_t *slot = &op->env->heat[keys_name_hash(op->name, op->name_len) & (LOCKOP_EPOCHS - 1)];
    __atomic_store_n(slot, clock_now_us() + (int64_t)HEAT_MS * 1000, __ATOMIC_RELAXED);
}

static int op_has_name(const lockop *op, const char *name, size_t len)
{
    if (!op->multi)
        return op->name_len == len && memcmp(op->name, name, len) == 0;
    for (size_t j = 0; j < op->multi->n; j++)
        if (op->multi->lens[j] == len && memcmp(op->multi->names[j], name, len) == 0)
            return 1;
    return 0;
}

static void q_watch(waitq *q, int on)
{
    lockop_env *env = q->env;
    if (!env->watch || q->watched == on)
        return;
    q->watched = on;
    if (!q->multi) {
        env->watch(env, q->name, q->name_len, on);
        return;
    }
    lockop *op = q->head; /* a private queue is watched only while its waiter is in it */
    for (size_t j = 0; op && j < op->multi->n; j++)
        env->watch(env, op->multi->names[j], op->multi->lens[j], on);
}

static void q_free(waitq *q)
{
    lockop_env *env = q->env;
    loop_timer_stop(env->rounds->loop, &q->retry);
    loop_timer_stop(env->rounds->loop, &q->gc);
    q_watch(q, 0);
    waitq **pp = q->multi ? &env->mqueues : bucket_of(env, q->name, q->name_len);
    while (*pp != q)
        pp = &(*pp)->next;
    *pp = q->next;
    free(q);
}

/* Free q once nothing needs it; while only what is known keeps it, when that ends. */
static void q_settle(waitq *q)
{
    if (q->head || q->fhead || q->inflight)
        return;
    if (q->multi) {
        q_free(q);
        return;
    }
    if (q->known_until_us > clock_now_us()) {
        loop_timer_start(q->env->rounds->loop, &q->gc, q->known_until_us);
        return;
    }
    q_free(q);
}

static void on_gc(loop_timer *t)
{
    q_settle(container_of(t, waitq, gc));
}

static void on_retry(loop_timer *t);

static waitq *q_new(lockop_env *env, const char *name, size_t len)
{
    waitq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->env = env;
    q->retry.cb = on_retry;
    q->gc.cb = on_gc;
    memcpy(q->name, name, len);
    q->name[len] = '\0';
    q->name_len = len;
    return q;
}

/* The queue of op's name (created if need be), or NULL on allocation failure. */
static waitq *q_get(lockop_env *env, const char *name, size_t len)
{
    waitq *q = waitq_find(env, name, len);
    if (q || !(q = q_new(env, name, len)))
        return q;
    waitq **b = bucket_of(env, name, len);
    q->next = *b;
    *b = q;
    return q;
}

/* Whether q knows its name held by a lease other than op's. */
static int known_held(const waitq *q, const lockop *op, int64_t now)
{
    return q->known_until_us > now &&
           !(q->known_len == op->lease_len && memcmp(q->known_lease, op->lease, op->lease_len) == 0);
}

static void publish_slot(lockop_known *k, uint64_t nh, uint64_t lease_hash, int64_t until_us,
                         int64_t free_us)
{
    if (!until_us && __atomic_load_n(&k->name_hash, __ATOMIC_RELAXED) != nh)
        return; /* nothing to take back: the slot is another name's */
    uint32_t s = __atomic_load_n(&k->seq, __ATOMIC_RELAXED);
    while ((s & 1) || !__atomic_compare_exchange_n(&k->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE,
                                                   __ATOMIC_RELAXED))
        s = __atomic_load_n(&k->seq, __ATOMIC_RELAXED) & ~1u;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&k->name_hash, nh, __ATOMIC_RELAXED);
    __atomic_store_n(&k->lease_hash, lease_hash, __ATOMIC_RELAXED);
    __atomic_store_n(&k->until_us, until_us, __ATOMIC_RELAXED);
    __atomic_store_n(&k->free_us, free_us, __ATOMIC_RELAXED);
    __atomic_store_n(&k->seq, s + 2, __ATOMIC_RELEASE);
}

/* Publish what q knows (until_us 0: nothing) in the shared slots. */
static void publish(waitq *q)
{
    if (!q->env->known)
        return;
    uint64_t nh = keys_name_hash(q->name, q->name_len);
    publish_slot(q->env->known + (nh & (LOCKOP_EPOCHS - 1)), nh,
                 keys_name_hash(q->known_lease, q->known_len), q->known_until_us, q->known_free_us);
}

int lockop_known_held(const lockop_known *known, const char *name, size_t len, const char *lease,
                      size_t lease_len, int64_t now_us, int64_t *retry_after_ms)
{
    if (!known)
        return 0;
    uint64_t nh = keys_name_hash(name, len);
    const lockop_known *k = known + (nh & (LOCKOP_EPOCHS - 1));
    uint32_t s1 = __atomic_load_n(&k->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1)
        return 0;
    uint64_t h = __atomic_load_n(&k->name_hash, __ATOMIC_RELAXED);
    uint64_t lh = __atomic_load_n(&k->lease_hash, __ATOMIC_RELAXED);
    int64_t until = __atomic_load_n(&k->until_us, __ATOMIC_RELAXED);
    int64_t free_us = __atomic_load_n(&k->free_us, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&k->seq, __ATOMIC_RELAXED) != s1)
        return 0;
    if (h != nh || until <= now_us || (lease && lh == keys_name_hash(lease, lease_len)))
        return 0;
    *retry_after_ms = (free_us - now_us + 999) / 1000;
    return 1;
}

static void know(waitq *q, const char *lease, size_t len, int64_t free_in_ms)
{
    int64_t now = clock_now_us();
    lockop_env *env = q->env;
    if (env->nkeepers > 1 && keys_name_hash(q->name, q->name_len) % env->nkeepers != env->keeper_id)
        return; /* not this worker's name: its releases may never be heard here */
    if (len > LEASE_MAX_LEN || free_in_ms <= 0) {
        q->known_until_us = 0;
        publish(q);
        return;
    }
    memcpy(q->known_lease, lease, len);
    q->known_len = len;
    q->known_free_us = now + free_in_ms * 1000;
    q->known_until_us = now + (free_in_ms < KNOWN_MAX_MS ? free_in_ms : KNOWN_MAX_MS) * 1000;
    publish(q);
    q_watch(q, 1); /* a release through another instance must reach what is known here */
}

/* The name was released: what was known is over. */
static void forget(waitq *q)
{
    if (!q->known_until_us)
        return;
    q->known_until_us = 0;
    publish(q);
}

/* Answer op 409 from what its queue knows, without a round. */
static void held_locally(lockop *op, waitq *q, int64_t now)
{
    op->err = RL_E_LOCK_HELD;
    op->retry_after_ms = (q->known_free_us - now + 999) / 1000;
    stat_inc(&op->env->counters[CNT_HELD_LOCAL]);
    stat_inc(&op->env->counters[CNT_ACQ_HELD]);
    finish(op);
}

/* The attempt in flight on q ended: the next follower attempts, or learns it is held;
 * a head waiter whose turn came meanwhile goes first. */
static void serve_followers(waitq *q)
{
    int64_t now = clock_now_us();
    if (!q->inflight && q->retry_due && q->head && !q->head->in_flight) {
        q->retry_due = 0;
        if (known_held(q, q->head, now)) {
            waitq_arm(q, (q->known_free_us - now) / 1000 + 1);
        } else {
            loop_timer_stop(q->env->rounds->loop, &q->retry);
            stat_inc(&q->env->counters[CNT_RETRIES]);
            attempt(q->head);
        }
    }
    while (q->fhead && !q->inflight) {
        lockop *f = q->fhead;
        q->fhead = f->f_next;
        if (!q->fhead)
            q->ftail = NULL;
        f->f_next = NULL;
        f->following = 0;
        if (__atomic_load_n(&f->gone, __ATOMIC_RELAXED)) {
            f->err = RL_E_CLIENT_CLOSED;
            stat_inc(&f->env->counters[CNT_GONE]);
            finish(f);
        } else if (known_held(q, f, now)) {
            held_locally(f, q, now);
        } else {
            attempt(f);
        }
    }
}

static void on_retry(loop_timer *t)
{
    waitq *q = container_of(t, waitq, retry);
    if (!q->head || q->head->in_flight)
        return;
    if (q->inflight) {
        q->retry_due = 1; /* one attempt per name at a time: after that one */
        return;
    }
    stat_inc(&q->head->env->counters[CNT_RETRIES]);
    attempt(q->head);
}

/* Take op out of its queue (the caller settles the queue). */
static void unpark(lockop *op)
{
    waitq *q = op->q;
    if (!q)
        return;
    if (op->q_prev)
        op->q_prev->q_next = op->q_next;
    else
        q->head = op->q_next;
    if (op->q_next)
        op->q_next->q_prev = op->q_prev;
    else
        q->tail = op->q_prev;
    op->q = NULL;
    op->q_next = op->q_prev = NULL;
    __atomic_sub_fetch(&op->env->parked, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(op->env->waiters_total, 1, __ATOMIC_RELAXED);
    loop_timer_stop(op->env->rounds->loop, &op->wait_timer);
    if (!q->head) {
        loop_timer_stop(q->env->rounds->loop, &q->retry);
        q->retry_due = 0;
        if (q->multi)
            q_watch(q, 0);
    }
}

/* Park op until its next try.  Returns 0, or -1 when it cannot wait (then it is done). */
static int park(lockop *op, int64_t delay_ms)
{
    lockop_env *env = op->env;
    waitq *q = op->q;
    if (!q) {
        long total = __atomic_add_fetch(env->waiters_total, 1, __ATOMIC_RELAXED);
        if (total > env->conf->max_waiters) {
            __atomic_fetch_sub(env->waiters_total, 1, __ATOMIC_RELAXED);
            op->err = RL_E_TOO_MANY_WAITERS;
            return -1;
        }
        if (op->multi && !op->nq) {
            /* A private queue: woken by a release of any of its names. */
            if (!(q = q_new(env, op->name, op->name_len))) {
                __atomic_fetch_sub(env->waiters_total, 1, __ATOMIC_RELAXED);
                return -1;
            }
            q->multi = 1;
            q->next = env->mqueues;
            env->mqueues = q;
            op->nq = q;
        }
        q = op->nq;
        op->q = q;
        op->q_prev = q->tail;
        op->q_next = NULL;
        if (q->tail)
            q->tail->q_next = op;
        else
            q->head = op;
        q->tail = op;
        q_watch(q, 1);
        __atomic_add_fetch(&env->parked, 1, __ATOMIC_RELAXED);
        loop_timer_start(env->rounds->loop, &op->wait_timer, op->wait_deadline_us);
    }
    if (q->head == op)
        waitq_arm(q, delay_ms);
    return 0;
}

static void wake_queue(waitq *q)
{
    if (!q->head)
        return;
    stat_inc(&q->env->counters[CNT_WAKEUPS]);
    if (!q->head->in_flight) /* one in flight sees the epoch move when it is refused */
        waitq_arm(q, 0);
}

void lockop_wake(lockop_env *env, const char *name, size_t len)
{
    (*epoch_slot(env, name, len))++;
    waitq *q = waitq_find(env, name, len);
    if (q) {
        forget(q); /* released: what was known is over */
        wake_queue(q);
    } else if (env->known) {
        /* Released here while another worker keeps the name: take back at once what
         * that worker published (it forgets its own when the wake reaches it). */
        uint64_t nh = keys_name_hash(name, len);
        publish_slot(env->known + (nh & (LOCKOP_EPOCHS - 1)), nh, 0, 0, 0);
    }
    for (waitq *m = env->mqueues; m; m = m->next)
        if (m->head && op_has_name(m->head, name, len))
            wake_queue(m);
}

void lockop_wake_all(lockop_env *env)
{
    for (size_t i = 0; i < LOCKOP_EPOCHS; i++)
        env->epochs[i]++;
    for (size_t b = 0; b < env->nbuckets; b++)
        for (waitq *q = env->buckets[b]; q; q = q->next) {
            forget(q);
            wake_queue(q);
        }
    for (waitq *m = env->mqueues; m; m = m->next)
        wake_queue(m);
}

/* Drop q's parked waiters and followers whose client left. */
static void drop_gone(waitq *q)
{
    lockop *op = q->head;
    while (op) {
        lockop *next = op->q_next;
        if (!op->in_flight && __atomic_load_n(&op->gone, __ATOMIC_RELAXED)) {
            int was_head = q->head == op;
            unpark(op);
            op->err = RL_E_CLIENT_CLOSED;
            stat_inc(&op->env->counters[CNT_GONE]);
            finish(op);
            if (was_head && q->head && !q->head->in_flight)
                waitq_arm(q, 0); /* the next one's turn may have come meanwhile */
        }
        op = next;
    }
    lockop **pp = &q->fhead, *prev = NULL;
    while (*pp) {
        lockop *f = *pp;
        if (__atomic_load_n(&f->gone, __ATOMIC_RELAXED)) {
            *pp = f->f_next;
            f->f_next = NULL;
            f->following = 0;
            f->nq = NULL;
            f->err = RL_E_CLIENT_CLOSED;
            stat_inc(&f->env->counters[CNT_GONE]);
            finish(f);
        } else {
            prev = f;
            pp = &f->f_next;
        }
    }
    q->ftail = prev;
}

void lockop_check_gone(lockop_env *env, const char *name, size_t len)
{
    waitq *q = waitq_find(env, name, len);
    if (q)
        drop_gone(q);
    for (waitq *m = env->mqueues; m; m = m->next)
        if (m->head && op_has_name(m->head, name, len))
            drop_gone(m);
}

/* Answer every waiter and follower of q now (shutdown); q may be freed. */
static void flush_queue(waitq *q)
{
    forget(q);
    while (q->fhead) {
        lockop *f = q->fhead;
        q->fhead = f->f_next;
        f->f_next = NULL;
        f->following = 0;
        if (f->err == RL_E_INTERNAL)
            f->err = RL_E_SHUTTING_DOWN;
        finish(f);
    }
    q->ftail = NULL;
    while (q->head) {
        lockop *op = q->head;
        if (op->in_flight) {
            /* Its round will finish it; just stop it from waiting further. */
            op->wait_deadline_us = 1;
            unpark(op);
            continue;
        }
        unpark(op);
        if (op->err == RL_E_INTERNAL)
            op->err = RL_E_SHUTTING_DOWN;
        finish(op);
    }
}

void lockop_env_flush_waiters(lockop_env *env)
{
    for (size_t b = 0; b < env->nbuckets; b++) {
        waitq *q = env->buckets[b];
        while (q) {
            waitq *next = q->next;
            flush_queue(q);
            q = next;
        }
    }
    for (waitq *m = env->mqueues; m; m = m->next)
        flush_queue(m);
}

/* op no longer counts in its worker's env->waiting (see worker_start_op). */
static void stop_waiting(lockop *op)
{
    if (op->waiting) {
        op->waiting = 0;
        __atomic_fetch_sub(&op->env->waiting, 1, __ATOMIC_RELAXED);
    }
}

static void on_wait_timer(loop_timer *t)
{
    lockop *op = container_of(t, lockop, wait_timer);
    if (op->q) {
        /* The caller's wait is over: answer with the last attempt's result. */
        int was_head = op->q->head == op;
        waitq *q = op->q;
        lockop *next = op->q_next;
        stat_inc(&op->env->counters[CNT_ACQ_WAITED_OUT]);
        unpark(op);
        if (was_head && next && !loop_timer_armed(&q->retry))
            waitq_arm(q, 0);
        if (op->in_flight)
            return; /* the round in flight will answer */
    }
    detach(op);
    stop_waiting(op);
    op->done(op);
}

/* ---- acquire ---- */


static void acquire_done(round *rd);
static void raise_done(round *rd);

static void attempt_multi(lockop *op, round *rd);
static void macquire_done(round *rd);

/* op's attempt goes out in rd (an acquire round, or a handoff), writing its own
 * value: the lease and a tag no other attempt has. */
static void attempt_begin(lockop *op, round *rd)
{
    static const char hex[] = "0123456789abcdef";
    memcpy(op->value, op->lease, op->lease_len);
    op->value_len = op->lease_len;
    if (!op->lease_fresh || op->attempts) {
        /* A lease the client chose (or a second attempt): another attempt may carry
         * it too, so this one writes its own tag.  A lease made for this request and
         * tried once is its own tag, and the masters compare it whole (cheaper). */
        uint64_t tag = ((uint64_t)rnd_next(op->env) << 32) | rnd_next(op->env);
        op->value[op->lease_len] = '.';
        for (int i = 0; i < 16; i++)
            op->value[op->lease_len + 1 + i] = hex[(tag >> (60 - 4 * i)) & 15];
        op->value_len = op->lease_len + 17;
    }
    op->value[op->value_len] = '\0';
    op->release_mask = ~(uint64_t)0; /* until the round says who refused */
    op->epoch = op_epoch(op);
    op->attempts++;
    op->in_flight = 1;
    op->rd = rd;
}

static void attempt(lockop *op)
{
    if (op->multi) {
        round *mr = round_new(op->env->rounds, macquire_done, op);
        if (!mr) {
            op->err = RL_E_INTERNAL;
            unpark(op);
            finish(op);
            return;
        }
        attempt_begin(op, mr);
        mr->split_aware = 2; /* hear every master before calling a refusal "held" */
        attempt_multi(op, mr);
        return;
    }
    round *rd = round_new(op->env->rounds, acquire_done, op);
    if (!rd) {
        op->err = RL_E_INTERNAL;
        unpark(op);
        finish(op);
        return;
    }
    attempt_begin(op, rd);
    rd->split_aware = 1;
    if (op->nq)
        op->nq->inflight = op; /* one attempt per name at a time on this worker */
    keybuf kb;
    make_keys(op, &kb);
    char ttl[24];
    int tl = snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms);
    const char *argv[] = {kb.key, kb.bucket, op->value, ttl};
    size_t lens[] = {kb.key_len, kb.bucket_len, op->value_len, (size_t)tl};
    round_send(rd, SCRIPT_ACQUIRE, 1, 3, argv, lens, round_all(op->env->rounds));
}

/* A single-name acquire arrives on the worker that keeps its name.  One attempt per
 * name is in flight at a time: a no-wait acquire that comes meanwhile follows it and
 * learns its outcome; one that comes while the name is known held is answered 409 at
 * once, without a round; a waiting one queues behind the waiters already there. */
static void acquire_start(lockop *op)
{
    waitq *q = q_get(op->env, op->name, op->name_len);
    if (!q) {
        op->err = RL_E_INTERNAL;
        finish(op);
        return;
    }
    op->nq = q;
    int64_t now = clock_now_us();
    int can_wait = op->wait_deadline_us > now + 1000;
    if (known_held(q, op, now)) {
        heat_up(op);
        if (!can_wait) {
            held_locally(op, q, now);
            return;
        }
        op->err = RL_E_LOCK_HELD;
        op->retry_after_ms = (q->known_free_us - now + 999) / 1000;
        if (park(op, op->retry_after_ms + 1 + (int64_t)(rnd_next(op->env) % 10)) != 0)
            finish(op);
        return;
    }
    if (q->inflight || (can_wait && q->head)) {
        heat_up(op);
        if (!can_wait) {
            op->following = 1;
            op->f_next = NULL;
            if (q->ftail)
                q->ftail->f_next = op;
            else
                q->fhead = op;
            q->ftail = op;
            return;
        }
        int first = !q->head;
        /* Until its own attempt says otherwise: blocked by the others. */
        op->err = RL_E_LOCK_HELD;
        op->retry_after_ms = q->known_free_us > now ? (q->known_free_us - now + 999) / 1000 : 0;
        if (park(op, (op->wait_deadline_us - now) / 1000) != 0) {
            finish(op);
            return;
        }
        if (first && q->inflight)
            q->retry_due = 1; /* its turn comes when the attempt in flight ends */
        else if (first)
            waitq_arm(q, 0);
        return;
    }
    attempt(op);
}

static void release_resume(lockop *r);

/* The attempt in flight for op's name ended (op's own): followers and a waiter whose
 * turn came go on.  Returns op's name queue, still held by op (op->nq). */
static void attempt_ended(lockop *op)
{
    waitq *q = op->nq;
    if (!q || op->multi)
        return;
    if (q->inflight == op)
        q->inflight = NULL;
    serve_followers(q);
}

static void acquire_failed(lockop *op, rl_err err)
{
    lockop_env *env = op->env;
    lockop *waiting_release = op->handoff_wait;
    op->handoff_wait = NULL;
    op->err = err;
    op->in_flight = 0;
    release_everywhere(op);
    if (op->partial) {
        /* It held some masters and lets them go now: whoever those keys refused
         * meanwhile may get the lock.  That is a release of the name here. */
        op->partial = 0;
        if (op->multi)
            for (size_t j = 0; j < op->multi->n; j++)
                lockop_wake(env, op->multi->names[j], op->multi->lens[j]);
        else
            lockop_wake(env, op->name, op->name_len);
    }
    int64_t now = clock_now_us();
    if (err == RL_E_LOCK_CONTENDED) {
        /* Votes split between attempts: nobody holds the lock.  Even without a wait,
         * try again after a random delay, within a small budget (Redlock's retry). */
        stat_inc(&env->counters[CNT_SPLITS]);
        heat_up(op);
        if (!op->split_deadline_us)
            op->split_deadline_us = op->start_us + env->conf->node_timeout_ms * 1000 * 6;
        if (op->split_deadline_us > op->wait_deadline_us)
            op->wait_deadline_us = op->split_deadline_us;
        op->retry_after_ms = 1 + (int64_t)(rnd_next(env) % (uint32_t)(env->conf->node_timeout_ms + 1));
    }
    if (__atomic_load_n(&op->gone, __ATOMIC_RELAXED)) {
        op->wait_deadline_us = 0; /* nobody to answer: stop here */
        op->err = RL_E_CLIENT_CLOSED;
        stat_inc(&env->counters[CNT_GONE]);
    }
    if (op->wait_deadline_us > now + 1000) {
        int64_t remaining_ms = (op->wait_deadline_us - now) / 1000;
        int64_t delay = err == RL_E_LOCK_CONTENDED
                            ? (op->retry_after_ms < remaining_ms ? op->retry_after_ms : remaining_ms)
                            : redlock_retry_delay_ms(err == RL_E_LOCK_HELD, op->retry_after_ms,
                                                     remaining_ms, rnd_next(env));
        if (op_epoch(op) != op->epoch)
            delay = 0; /* released while this attempt was in flight */
        /* Park even when the lock outlives the wait: a release through this
         * instance wakes the waiter, and its deadline answers otherwise. */
        if (park(op, delay) == 0) {
            attempt_ended(op);
            release_resume(waiting_release); /* parked again: hand it over now */
            return;
        }
    }
    /* Out of time (or cannot wait): answer with this attempt's result. */
    if (op->err == RL_E_LOCK_HELD || op->err == RL_E_LOCK_CONTENDED)
        stat_inc(&env->counters[CNT_ACQ_HELD]);
    else if (op->err == RL_E_VALIDITY_EXHAUSTED)
        stat_inc(&env->counters[CNT_ACQ_VALIDITY]);
    else if (op->err != RL_E_CLIENT_CLOSED)
        stat_inc(&env->counters[CNT_ACQ_UNAVAILABLE]);
    waitq *q = op->q;
    lockop *next = op->q_next;
    unpark(op);
    if (q && next)
        waitq_arm(q, 0);
    attempt_ended(op);
    finish(op);
    release_resume(waiting_release);
}

static void acquire_succeeded(lockop *op)
{
    lockop_env *env = op->env;
    lockop *waiting_release = op->handoff_wait;
    op->handoff_wait = NULL;
    op->err = RL_OK;
    op->in_flight = 0;
    stat_inc(&env->counters[CNT_ACQ_GRANTED]);
    waitq *q = op->q;
    lockop *next = op->q_next;
    unpark(op);
    if (__atomic_load_n(&op->gone, __ATOMIC_RELAXED)) {
        /* Granted to a client that left: free it at once, for the next waiter. */
        op->err = RL_E_CLIENT_CLOSED;
        stat_inc(&env->counters[CNT_GONE]);
        release_everywhere(op);
        lockop_wake(env, op->name, op->name_len);
        if (env->released && !op->multi)
            env->released(env, op->name, op->name_len);
        if (op->multi)
            for (size_t j = 0; j < op->multi->n; j++) {
                lockop_wake(env, op->multi->names[j], op->multi->lens[j]);
                if (env->released)
                    env->released(env, op->multi->names[j], op->multi->lens[j]);
            }
        attempt_ended(op);
        finish(op);
        release_resume(waiting_release);
        return;
    }
    if (op->nq && !op->multi &&
        (next || op->nq->fhead || lockop_hot(env->heat, op->name, op->name_len, clock_now_us())))
        know(op->nq, op->lease, op->lease_len, op->validity_ms); /* contended: remember */
    if (q && next) {
        /* The lock is ours now: the next waiter tries when it should expire, or at
         * once when it is released through this instance. */
        waitq_arm(q, op->validity_ms + 1 + (int64_t)(rnd_next(env) % 10));
    }
    attempt_ended(op);
    finish(op);
    release_resume(waiting_release); /* the releaser's lock had gone: it answers as it will */
}

static void drop_round(lockop *op)
{
    if (op->rd) {
        round_unref(op->rd);
        op->rd = NULL;
    }
}

/* A refused multi-name round: whether one lease holds (or may hold, counting the
 * masters that did not answer) a quorum for one of the names. */
static int multi_held(const lockop *op, const round *rd)
{
    const lockop_multi *mu = op->multi;
    size_t n = mu->n, nm = rd->env->n, unknown = 0;
    for (size_t i = 0; i < nm; i++)
        unknown += rd->replies[i].state == RL_SLOT_FAILED || rd->replies[i].state == RL_SLOT_PENDING;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < nm; i++) {
            uint64_t h = mu->holders[i * n + j];
            if (rd->replies[i].state != RL_SLOT_REFUSED || !h)
                continue;
            size_t same = 0;
            for (size_t k = 0; k < nm; k++)
                same += rd->replies[k].state == RL_SLOT_REFUSED && mu->holders[k * n + j] == h;
            if (same + unknown >= rd->env->quorum)
                return 1;
        }
    return 0;
}

/* The acquire round did not reach a quorum: held by another lease, votes split
 * between attempts (nobody holds it), or masters missing. */
static void acquire_refused(lockop *op, round *rd)
{
    round_env *re = op->env->rounds;
    rl_err err = RL_E_QUORUM_UNAVAILABLE;
    if (rd->decision == RL_DECIDE_NO_QUORUM) {
        op->retry_after_ms = redlock_retry_after_ms(rd->replies, re->n, re->quorum,
                                                    op->env->conf->default_ttl_ms);
        err = RL_E_LOCK_HELD;
        if (!(op->multi ? multi_held(op, rd) : redlock_held_by_quorum(rd->replies, re->n, re->quorum)))
            err = RL_E_LOCK_CONTENDED;
        if (err == RL_E_LOCK_HELD && !op->multi && op->nq) {
            heat_up(op);
            for (size_t i = 0; i < re->n; i++)
                if (rd->replies[i].state == RL_SLOT_REFUSED && rd->replies[i].has_value) {
                    know(op->nq, rd->replies[i].value, rd->replies[i].value_len, op->retry_after_ms);
                    break;
                }
        }
    }
    drop_round(op);
    acquire_failed(op, err);
}

/* After a raise round: issue the token only if `fenced` granting masters (at least a
 * quorum) hold it, and validity, counted from the acquire round's start, is left. */
static void acquire_fenced(lockop *op, round *rd, size_t fenced)
{
    int64_t validity = redlock_validity_ms(op->ttl_ms, clock_now_us() - rd->start_us,
                                           op->env->conf->drift_factor);
    drop_round(op);
    if (fenced < op->env->rounds->quorum) {
        op->nodes_ok = fenced;
        acquire_failed(op, RL_E_QUORUM_UNAVAILABLE);
    } else if (validity <= 0) {
        acquire_failed(op, RL_E_VALIDITY_EXHAUSTED);
    } else {
        op->validity_ms = validity;
        acquire_succeeded(op);
    }
}

/* Masters an attempt may have written to: all but those that refused. */
static uint64_t maybe_written(const round *rd)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < rd->env->n && i < 64; i++)
        if (rd->replies[i].state != RL_SLOT_REFUSED)
            mask |= (uint64_t)1 << i;
    return mask;
}

static void acquire_done(round *rd)
{
    lockop *op = rd->owner;
    round_env *re = op->env->rounds;
    redlock_tally t;
    redlock_tally_of(rd->replies, re->n, &t);
    op->nodes_ok = t.ok + t.refused;
    op->release_mask = maybe_written(rd);
    op->partial = t.ok > 0;
    if (rd->decision == RL_DECIDE_QUORUM) {
        int64_t validity = redlock_validity_ms(op->ttl_ms, clock_now_us() - rd->start_us,
                                               re->masters[0].conf->drift_factor);
        uint64_t token = redlock_token(rd->replies, re->n);
        if (validity <= 0) {
            op->validity_ms = 0;
            drop_round(op);
            acquire_failed(op, RL_E_VALIDITY_EXHAUSTED);
            return;
        }
        op->token = token;
        op->validity_ms = validity;
        uint64_t mask = 0;
        for (size_t i = 0; i < re->n && i < 64; i++)
            if (redlock_needs_raise(&rd->replies[i], token))
                mask |= (uint64_t)1 << i;
        /* A quorum of granting masters hold the token already: it is fenced (docs/
         * DESIGN.md, section 3), and the masters below it need no raise now. */
        if (!mask || redlock_fenced_grants(rd->replies, re->n, token) >= re->quorum) {
            drop_round(op);
            acquire_succeeded(op);
            return;
        }
        /* Counters differ: raise every master that answered below the token, and
         * issue it only once a quorum of granting masters hold F >= token. */
        stat_inc(&op->env->counters[CNT_RAISE_ROUNDS]);
        round *rr = round_new(re, raise_done, op);
        if (!rr) {
            drop_round(op);
            acquire_failed(op, RL_E_INTERNAL);
            return;
        }
        rr->wait_all = 1;
        rr->token = token;
        keybuf kb;
        make_keys(op, &kb);
        char tok[24];
        int tl = snprintf(tok, sizeof tok, "%llu", (unsigned long long)token);
        const char *argv[] = {kb.bucket, tok};
        size_t lens[] = {kb.bucket_len, (size_t)tl};
        /* op->rd keeps the acquire replies until the raise is judged. */
        round_send(rr, SCRIPT_RAISE, 0, 2, argv, lens, mask);
        round_unref(rr); /* commands in flight or the ready list hold it */
        return;
    }
    acquire_refused(op, rd);
}

static void raise_done(round *rr)
{
    lockop *op = rr->owner;
    round *rd = op->rd;
    round_env *re = op->env->rounds;
    for (size_t i = 0; i < re->n; i++)
        if (rr->replies[i].state == RL_SLOT_OK && rr->replies[i].fence >= rr->token)
            rd->replies[i].raised = 1;
    size_t fenced = redlock_fenced_grants(rd->replies, re->n, rr->token);
    acquire_fenced(op, rd, fenced);
}

void lockop_fini_rounds(lockop *op)
{
    stop_waiting(op);
    drop_round(op);
}

void lockop_fini(lockop *op)
{
    lockop_fini_rounds(op);
    if (op->multi) {
        free(op->multi->fences);
        free(op->multi->holders);
        free(op->multi);
        op->multi = NULL;
    }
}

int lockop_set_multi(lockop *op, const char *const *names, const size_t *lens, size_t n)
{
    lockop_multi *mu = calloc(1, sizeof *mu);
    if (!mu || n > LOCKOP_MULTI_MAX)
        goto fail;
    /* n == 0: a release by lease alone; the names come back from the masters. */
    mu->fences = calloc(op->env->rounds->n * (n ? n : 1), sizeof *mu->fences);
    mu->holders = calloc(op->env->rounds->n * (n ? n : 1), sizeof *mu->holders);
    if (!mu->fences || !mu->holders)
        goto fail;
    mu->n = n;
    for (size_t j = 0; j < n; j++) {
        memcpy(mu->names[j], names[j], lens[j]);
        mu->names[j][lens[j]] = '\0';
        mu->lens[j] = lens[j];
    }
    op->multi = mu;
    return 0;
fail:
    if (mu) {
        free(mu->fences);
        free(mu->holders);
    }
    free(mu);
    return -1;
}

/* ---- multi-name locks ---- */

static void multi_decode(round *rd, size_t i, const struct redisReply *r, redlock_reply *out)
{
    lockop *op = rd->owner;
    lockop_multi *mu = op->multi;
    const redisReply *rep = r;
    out->state = RL_SLOT_FAILED;
    out->has_value = 0;
    if (!rep || rep->type != REDIS_REPLY_ARRAY)
        return;
    if (rd->script == SCRIPT_MRELEASE) {
        if (rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_INTEGER ||
            rep->element[1]->type != REDIS_REPLY_STRING)
            return;
        out->state = rep->element[0]->integer == 1 ? RL_SLOT_OK : RL_SLOT_REFUSED;
        if (rep->element[0]->integer == -1)
            mu->out_of_scope = 1;
        if (out->state == RL_SLOT_OK && !mu->have_released_names) {
            /* "a\nb\n..." as stored at acquire time */
            const char *p = rep->element[1]->str, *end = p + rep->element[1]->len;
            size_t k = 0;
            while (p < end && k < LOCKOP_MULTI_MAX) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (len && validate_name(p, len)) {
                    memcpy(mu->names[k], p, len);
                    mu->names[k][len] = '\0';
                    mu->lens[k++] = len;
                }
                p += len + 1;
            }
            mu->n = k;
            mu->have_released_names = 1;
        }
        return;
    }
    size_t n = mu->n;
    size_t first; /* index of f1 */
    if (rd->script == SCRIPT_MRAISE) {
        if (rep->elements != n)
            return;
        first = 0;
        out->state = RL_SLOT_OK;
        out->raised = 1;
    } else if (rep->elements >= 1 && rep->element[0]->type == REDIS_REPLY_INTEGER &&
               rep->element[0]->integer == 1 && rep->elements == n + 1) {
        first = 1;
        out->state = RL_SLOT_OK;
    } else if ((rep->elements == n + 2 || rep->elements == 2 * n + 2) &&
               rep->element[0]->type == REDIS_REPLY_INTEGER &&
               rep->element[1]->type == REDIS_REPLY_INTEGER) {
        first = 2;
        out->state = RL_SLOT_REFUSED;
        out->pttl = rep->element[1]->integer;
        for (size_t j = 0; j < n; j++) { /* who holds each name here (0: free or ours) */
            const redisReply *h = rep->elements == 2 * n + 2 ? rep->element[2 + n + j] : NULL;
            mu->holders[i * n + j] = h && h->type == REDIS_REPLY_STRING && h->len
                                         ? keys_name_hash(h->str, h->len) | 1 : 0;
        }
    } else {
        return;
    }
    for (size_t j = 0; j < n; j++) {
        const redisReply *e = rep->element[first + j];
        if (e->type != REDIS_REPLY_INTEGER || e->integer < 0) {
            out->state = RL_SLOT_FAILED;
            return;
        }
        uint64_t f = (uint64_t)e->integer;
        if (rd->script == SCRIPT_MRAISE) {
            if (f < mu->tokens[j])
                out->raised = 0;
        } else {
            mu->fences[i * n + j] = f;
        }
    }
}

/* Keys of a multi-name op: lock keys, fence keys, then the set key. */
typedef struct multikeys {
    char buf[LOCKOP_MULTI_MAX + 1][KEYS_MAX];
    const char *argv[LOCKOP_MULTI_MAX * 3 + 8];
    size_t lens[LOCKOP_MULTI_MAX * 3 + 8];
} multikeys;

static size_t set_key(const lockop *op, char *buf, size_t cap)
{
    return keys_set(op->env->conf->key_prefix, op->lease, op->lease_len, buf, cap);
}

static void mrelease_send(lockop *op, round *rd)
{
    char key[KEYS_MAX];
    size_t kl = set_key(op, key, sizeof key);
    const char *prefix = op->env->conf->key_prefix;
    /* The client's release: by lease, within its token's scope.  A failed attempt's
     * clean-up: only what that attempt wrote (its exact value). */
    int user = op->kind == LOCKOP_MRELEASE;
    const char *scope = user && op->scope ? op->scope : "";
    const char *argv[] = {key, user ? op->lease : op->value, prefix, op->env->origin, scope};
    size_t lens[] = {kl, user ? op->lease_len : op->value_len, strlen(prefix), op->env->origin_len,
                     strlen(scope)};
    rd->decode = user ? multi_decode : NULL;
    round_send(rd, SCRIPT_MRELEASE, 1, 4, argv, lens,
               op->kind == LOCKOP_MRELEASE ? round_all(op->env->rounds)
                                           : op->release_mask & round_all(op->env->rounds));
}

static void macquire_done(round *rd);
static void mraise_done(round *rd);

static void attempt_multi(lockop *op, round *rd)
{
    lockop_multi *mu = op->multi;
    multikeys *mk = malloc(sizeof *mk);
    if (!mk) {
        round_send(rd, SCRIPT_MACQUIRE, 0, 0, NULL, NULL, 0); /* decides unavailable */
        return;
    }
    const char *prefix = op->env->conf->key_prefix;
    size_t n = mu->n, a = 0;
    for (size_t j = 0; j < n; j++) {
        mk->lens[a] = keys_lock(prefix, mu->names[j], mu->lens[j], mk->buf[a], sizeof mk->buf[a]);
        mk->argv[a] = mk->buf[a];
        a++;
    }
    mk->lens[a] = set_key(op, mk->buf[a], sizeof mk->buf[a]);
    mk->argv[a] = mk->buf[a];
    a++;
    char ttl[24], cnt[8];
    char joined[LOCKOP_MULTI_MAX * (NAME_MAX_LEN + 1) + 1];
    size_t jl = 0;
    for (size_t j = 0; j < n; j++) {
        memcpy(joined + jl, mu->names[j], mu->lens[j]);
        jl += mu->lens[j];
        joined[jl++] = '\n';
    }
    mk->argv[a] = op->value; mk->lens[a++] = op->value_len;
    mk->argv[a] = ttl; mk->lens[a++] = (size_t)snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms);
    mk->argv[a] = cnt; mk->lens[a++] = (size_t)snprintf(cnt, sizeof cnt, "%zu", n);
    mk->argv[a] = joined; mk->lens[a++] = jl;
    char bks[LOCKOP_MULTI_MAX][KEYS_BUCKET_MAX];
    for (size_t j = 0; j < n; j++) {
        mk->lens[a] = keys_bucket(mu->names[j], mu->lens[j], bks[j], sizeof bks[j]);
        mk->argv[a++] = bks[j];
    }
    rd->decode = multi_decode;
    round_send(rd, SCRIPT_MACQUIRE, (int)(n + 1), (int)(4 + n), mk->argv, mk->lens, round_all(op->env->rounds));
    free(mk);
}

static void macquire_done(round *rd)
{
    lockop *op = rd->owner;
    lockop_multi *mu = op->multi;
    round_env *re = op->env->rounds;
    size_t n = mu->n;
    redlock_tally t;
    redlock_tally_of(rd->replies, re->n, &t);
    op->nodes_ok = t.ok + t.refused;
    op->release_mask = maybe_written(rd);
    op->partial = t.ok > 0;
    if (rd->decision == RL_DECIDE_QUORUM) {
        int64_t validity = redlock_validity_ms(op->ttl_ms, clock_now_us() - rd->start_us,
                                               op->env->conf->drift_factor);
        if (validity <= 0) {
            drop_round(op);
            acquire_failed(op, RL_E_VALIDITY_EXHAUSTED);
            return;
        }
        op->validity_ms = validity;
        /* Per name: the token is the max over the granting masters; a master that
         * answered below any token is raised (all names at once). */
        uint64_t mask = 0;
        for (size_t j = 0; j < n; j++) {
            uint64_t tj = 0;
            for (size_t i = 0; i < re->n; i++)
                if (rd->replies[i].state == RL_SLOT_OK && mu->fences[i * n + j] > tj)
                    tj = mu->fences[i * n + j];
            mu->tokens[j] = tj;
        }
        for (size_t i = 0; i < re->n && i < 64; i++) {
            int st = rd->replies[i].state;
            if (st != RL_SLOT_OK && st != RL_SLOT_REFUSED)
                continue;
            for (size_t j = 0; j < n; j++)
                if (mu->fences[i * n + j] < mu->tokens[j])
                    mask |= (uint64_t)1 << i;
        }
        if (!mask) {
            drop_round(op);
            acquire_succeeded(op);
            return;
        }
        stat_inc(&op->env->counters[CNT_RAISE_ROUNDS]);
        round *rr = round_new(re, mraise_done, op);
        if (!rr) {
            drop_round(op);
            acquire_failed(op, RL_E_INTERNAL);
            return;
        }
        rr->wait_all = 1;
        rr->decode = multi_decode;
        multikeys *mk = malloc(sizeof *mk);
        char toks[LOCKOP_MULTI_MAX][24], bks[LOCKOP_MULTI_MAX][KEYS_BUCKET_MAX];
        if (mk) {
            for (size_t j = 0; j < n; j++) {
                mk->lens[j] = (size_t)snprintf(toks[j], sizeof toks[j], "%llu", (unsigned long long)mu->tokens[j]);
                mk->argv[j] = toks[j];
                mk->lens[n + j] = keys_bucket(mu->names[j], mu->lens[j], bks[j], sizeof bks[j]);
                mk->argv[n + j] = bks[j];
            }
            round_send(rr, SCRIPT_MRAISE, 0, (int)(2 * n), mk->argv, mk->lens, mask);
            free(mk);
        } else {
            round_send(rr, SCRIPT_MRAISE, 0, 0, NULL, NULL, 0);
        }
        round_unref(rr);
        return;
    }
    acquire_refused(op, rd);
}

static void mraise_done(round *rr)
{
    lockop *op = rr->owner;
    round *rd = op->rd;
    round_env *re = op->env->rounds;
    lockop_multi *mu = op->multi;
    size_t fenced = 0;
    for (size_t i = 0; i < re->n; i++) {
        if (rd->replies[i].state != RL_SLOT_OK)
            continue;
        int ok = rr->replies[i].state == RL_SLOT_OK && rr->replies[i].raised;
        if (!ok) {
            ok = 1;
            for (size_t j = 0; j < mu->n; j++)
                if (mu->fences[i * mu->n + j] < mu->tokens[j])
                    ok = 0;
        }
        fenced += ok;
    }
    acquire_fenced(op, rd, fenced);
}

static void mrelease_done(round *rd)
{
    lockop *op = rd->owner;
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    op->nodes_ok = t.ok + t.refused;
    op->rd = NULL;
    if (op->multi->out_of_scope) {
        /* A name of the set is outside the token's scope: the masters released
         * nothing (each holds the same set and refuses it whole). */
        op->err = RL_E_FORBIDDEN;
    } else if (rd->decision == RL_DECIDE_QUORUM) {
        op->err = RL_OK;
        stat_inc(&op->env->counters[CNT_REL_OK]);
        for (size_t j = 0; j < op->multi->n; j++) {
            lockop_wake(op->env, op->multi->names[j], op->multi->lens[j]);
            if (op->env->released)
                op->env->released(op->env, op->multi->names[j], op->multi->lens[j]);
        }
    } else if (rd->decision == RL_DECIDE_NO_QUORUM) {
        op->err = RL_E_LEASE_NOT_FOUND;
        stat_inc(&op->env->counters[CNT_REL_NOT_FOUND]);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        stat_inc(&op->env->counters[CNT_REL_UNAVAILABLE]);
    }
    op->done(op);
}

/* ---- release / extend / inspect / ready ---- */

static void handoff_done(round *rd);

/* A release through the worker that keeps the name's waiters, with a waiter parked:
 * one round replaces the old lease by the head waiter's on every master that has the
 * old one (SCRIPT_HANDOFF), and acquires for it elsewhere.  The release is judged by
 * the masters that had the old lease, the waiter's grant as any acquire (quorum,
 * validity, fencing).  The round waits for every master, so both verdicts are
 * complete.  Returns 1 if the release went (or will go) that way. */
static int try_handoff(lockop *r)
{
    lockop_env *env = r->env;
    waitq *q = waitq_find(env, r->name, r->name_len);
    if (!q)
        return 0;
    drop_gone(q); /* never hand a lock to a client that left */
    lockop *h = q->head;
    if (!h || h->multi || h->handoff_from || h->wait_deadline_us <= clock_now_us() + 1000)
        return 0;
    lockop *busy = q->inflight ? q->inflight : h->in_flight ? h : NULL;
    if (busy) {
        /* An attempt on the name is in flight and will be refused (the lock is still
         * the releaser's): hand over as soon as it is (acquire_failed), rather than
         * let the waiter retry after us. */
        if (busy->handoff_wait)
            return 0;
        busy->handoff_wait = r;
        return 1;
    }
    round *rd = round_new(env->rounds, handoff_done, h);
    if (!rd)
        return 0;
    rd->wait_all = 1;
    attempt_begin(h, rd);
    keybuf kb;
    make_keys(h, &kb);
    char ttl[24];
    int tl = snprintf(ttl, sizeof ttl, "%ld", h->ttl_ms);
    const char *argv[] = {kb.key, kb.bucket, r->lease, h->value, ttl};
    size_t lens[] = {kb.key_len, kb.bucket_len, r->lease_len, h->value_len, (size_t)tl};
    h->handoff_from = r;
    q->inflight = h;
    stat_inc(&env->counters[CNT_HANDOFFS]);
    round_send(rd, SCRIPT_HANDOFF, 1, 4, argv, lens, round_all(env->rounds));
    return 1;
}

static void handoff_done(round *rd)
{
    lockop *h = rd->owner, *r = h->handoff_from;
    h->handoff_from = NULL;
    redlock_tally t = {rd->env->n, 0, 0, 0};
    for (size_t i = 0; i < rd->env->n; i++) {
        const redlock_reply *x = &rd->replies[i];
        if (x->state == RL_SLOT_OK && x->released)
            t.ok++;
        else if (x->state == RL_SLOT_OK || x->state == RL_SLOT_REFUSED)
            t.refused++; /* answered: the old lease was not there */
        else
            t.failed++;
    }
    r->nodes_ok = t.ok + t.refused;
    switch (redlock_decide(&t, rd->env->quorum, 1)) {
    case RL_DECIDE_QUORUM:
        r->err = RL_OK;
        stat_inc(&r->env->counters[CNT_REL_OK]);
        break;
    case RL_DECIDE_NO_QUORUM:
        r->err = RL_E_LEASE_NOT_FOUND;
        stat_inc(&r->env->counters[CNT_REL_NOT_FOUND]);
        break;
    default:
        r->err = RL_E_QUORUM_UNAVAILABLE;
        stat_inc(&r->env->counters[CNT_REL_UNAVAILABLE]);
        break;
    }
    r->done(r);
    /* The waiter's side; if it fails, its keys are released and the name woken. */
    acquire_done(rd);
}

static void release_done(round *rd);

/* A release: handed over to a parked waiter, or one plain round.  0 or -1. */
static int release_start(lockop *op)
{
    lockop_env *env = op->env;
    if (try_handoff(op))
        return 0;
    round *rd = round_new(env->rounds, release_done, op);
    if (!rd)
        return -1;
    keybuf kb;
    make_keys(op, &kb);
    const char *argv[] = {kb.key, op->lease, kb.chan, env->origin};
    size_t lens[] = {kb.key_len, op->lease_len, kb.chan_len, env->origin_len};
    op->rd = rd;
    round_send(rd, SCRIPT_RELEASE, 1, 3, argv, lens, round_all(env->rounds));
    round_unref(rd);
    return 0;
}

/* The release r waited for a waiter's attempt (try_handoff): that attempt has ended. */
static void release_resume(lockop *r)
{
    if (r && release_start(r) != 0) {
        r->err = RL_E_INTERNAL;
        r->done(r);
    }
}

static void release_done(round *rd)
{
    lockop *op = rd->owner;
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    op->nodes_ok = t.ok + t.refused;
    if (rd->decision == RL_DECIDE_QUORUM) {
        op->err = RL_OK;
        stat_inc(&op->env->counters[CNT_REL_OK]);
        lockop_wake(op->env, op->name, op->name_len);
        if (op->env->released)
            op->env->released(op->env, op->name, op->name_len);
    } else if (rd->decision == RL_DECIDE_NO_QUORUM) {
        op->err = RL_E_LEASE_NOT_FOUND;
        stat_inc(&op->env->counters[CNT_REL_NOT_FOUND]);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        stat_inc(&op->env->counters[CNT_REL_UNAVAILABLE]);
    }
    op->rd = NULL;
    op->done(op);
}

static void extend_done(round *rd)
{
    lockop *op = rd->owner;
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    op->nodes_ok = t.ok + t.refused;
    op->rd = NULL;
    if (rd->decision == RL_DECIDE_QUORUM) {
        op->validity_ms = redlock_validity_ms(op->ttl_ms, clock_now_us() - rd->start_us,
                                              op->env->conf->drift_factor);
        op->token = redlock_token(rd->replies, rd->env->n);
        if (op->validity_ms > 0) {
            op->err = RL_OK;
            stat_inc(&op->env->counters[CNT_EXT_OK]);
        } else {
            op->validity_ms = 0;
            op->err = RL_E_VALIDITY_EXHAUSTED;
            stat_inc(&op->env->counters[CNT_EXT_UNAVAILABLE]);
        }
    } else if (rd->decision == RL_DECIDE_NO_QUORUM) {
        /* The lock is lost: free what is left of it so others need not wait. */
        op->err = RL_E_LEASE_NOT_FOUND;
        stat_inc(&op->env->counters[CNT_EXT_NOT_FOUND]);
        release_everywhere(op);
    } else {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        stat_inc(&op->env->counters[CNT_EXT_UNAVAILABLE]);
    }
    op->done(op);
}

static void inspect_done(round *rd)
{
    lockop *op = rd->owner;
    round_env *re = rd->env;
    redlock_tally t;
    redlock_tally_of(rd->replies, re->n, &t);
    op->nodes_ok = t.ok + t.refused;
    op->rd = NULL;
    if (op->nodes_ok < re->quorum) {
        op->err = RL_E_QUORUM_UNAVAILABLE;
        op->done(op);
        return;
    }
    int64_t valid;
    op->held = redlock_inspect_holder(rd->replies, re->n, re->quorum, &valid) >= 0;
    int64_t elapsed_ms = (clock_now_us() - rd->start_us + 999) / 1000;
    op->validity_ms = op->held ? (valid == INT64_MAX ? -1 : valid - elapsed_ms) : 0;
    if (op->held && op->validity_ms < 0 && valid != INT64_MAX)
        op->validity_ms = 0;
    op->token = redlock_max_fence(rd->replies, re->n);
    op->err = RL_OK;
    op->done(op);
}

static void ready_done(round *rd)
{
    lockop *op = rd->owner;
    round_env *re = rd->env;
    size_t ok = 0;
    for (size_t i = 0; i < re->n; i++) {
        if (rd->replies[i].state == RL_SLOT_OK && !master_usable(&re->masters[i]))
            rd->replies[i].state = RL_SLOT_REFUSED; /* answers, but out of quorums */
        if (rd->replies[i].state == RL_SLOT_OK)
            ok++;
    }
    op->nodes_ok = ok;
    op->err = ok >= re->quorum ? RL_OK : RL_E_QUORUM_UNAVAILABLE;
    op->done(op); /* op->rd stays until lockop_fini() */
}

void lockop_start(lockop *op)
{
    lockop_env *env = op->env;
    keybuf kb;
    make_keys(op, &kb);
    char ttl[24];
    int tl = snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms);
    round *rd;
    switch (op->kind) {
    case LOCKOP_ACQUIRE:
    case LOCKOP_MACQUIRE:
        if (op->wait_deadline_us) {
            /* Other workers tell this one of releases while it has any (see worker.c). */
            op->waiting = 1;
            __atomic_fetch_add(&env->waiting, 1, __ATOMIC_RELAXED);
        }
        if (op->multi)
            attempt(op);
        else
            acquire_start(op);
        return;
    case LOCKOP_MRELEASE:
        rd = round_new(env->rounds, mrelease_done, op);
        if (!rd)
            break;
        op->rd = rd;
        mrelease_send(op, rd);
        round_unref(rd);
        return;
    case LOCKOP_RELEASE:
        if (release_start(op) == 0)
            return;
        break;
    case LOCKOP_EXTEND: {
        rd = round_new(env->rounds, extend_done, op);
        if (!rd)
            break;
        char setk[KEYS_MAX];
        size_t setl = set_key(op, setk, sizeof setk);
        const char *argv[] = {kb.key, setk, kb.bucket, op->lease, ttl};
        size_t lens[] = {kb.key_len, setl, kb.bucket_len, op->lease_len, (size_t)tl};
        op->rd = rd;
        round_send(rd, SCRIPT_EXTEND, 2, 3, argv, lens, round_all(env->rounds));
        round_unref(rd);
        return;
    }
    case LOCKOP_INSPECT: {
        rd = round_new(env->rounds, inspect_done, op);
        if (!rd)
            break;
        rd->wait_all = 1;
        const char *argv[] = {kb.key, kb.bucket};
        size_t lens[] = {kb.key_len, kb.bucket_len};
        op->rd = rd;
        round_send(rd, SCRIPT_INSPECT, 1, 1, argv, lens, round_all(env->rounds));
        round_unref(rd);
        return;
    }
    case LOCKOP_READY:
        rd = round_new(env->rounds, ready_done, op);
        if (!rd)
            break;
        op->rd = rd; /* kept: the caller reads the replies */
        round_ping(rd);
        return;
    }
    op->err = RL_E_INTERNAL;
    finish(op);
}
