/* waitq.c -- the per-name waiter queues, the heat map and what keepers know (see
 * waitq.h; docs/DESIGN.md section 6 has the reasoning). */
#include "waitq.h"

#include <stdlib.h>
#include <string.h>

#include "inbox.h"
#include "keys.h"
#include "rnd.h"

struct waitq {
    waitq *next;          /* hash chain, or env->mqueues */
    list parked;          /* FIFO of parked waiters (waiter.link): the head alone
                           * retries */
    waiter *fhead, *ftail; /* no-wait acquires waiting for the attempt in flight */
    waiter *inflight;     /* the attempt on this name in flight here (one at a time) */
    loop_timer retry;     /* when the head retries */
    loop_timer gc;        /* when what is known runs out: free the queue if idle */
    int retry_due;        /* the head's turn came while another attempt was in flight */
    int watched;          /* following the name's release announcements */
    int multi;            /* the private queue of one multi-name waiter */
    int unavailable;      /* the attempt that just ended found no quorum of masters */
    size_t unavailable_ok; /* ... and this many answered */
    int64_t known_until_us; /* until then the name is known held by known_lease */
    int64_t known_free_us;  /* when that lock should expire */
    size_t known_len;
    char known_lease[LEASE_MAX_LEN + 1];
    waitq_env *env;
    size_t name_len;
    char name[NAME_MAX_LEN + 1];
};

/* What a round taught is trusted this long at most: a release through another
 * instance is announced (notify.h), but an announcement can be missed. */
#define KNOWN_MAX_MS 100
/* A name that saw contention counts as contended this long. */
#define HEAT_MS 2000

static size_t slot_of(const char *name, size_t len)
{
    return (size_t)(keys_name_hash(name, len) & (WAITQ_SLOTS - 1));
}

static uint32_t jitter_ms(waitq_env *env)
{
    return rnd_next(&env->rnd) % 10;
}

int waitq_env_init(waitq_env *env)
{
    env->nbuckets = 1024;
    env->buckets = calloc(env->nbuckets, sizeof *env->buckets);
    env->epochs = calloc(WAITQ_SLOTS, sizeof *env->epochs);
    if (!env->rnd)
        env->rnd = rnd_seed((uintptr_t)env);
    return env->buckets && env->epochs ? 0 : -1;
}

static void drop_all(waitq_env *env, waitq *q)
{
    while (q) {
        waitq *next = q->next;
        loop_timer_stop(env->loop, &q->retry);
        loop_timer_stop(env->loop, &q->gc);
        free(q);
        q = next;
    }
}

void waitq_env_fini(waitq_env *env)
{
    /* Queues that only what was known still kept (their waiters were answered). */
    for (size_t b = 0; env->buckets && b < env->nbuckets; b++)
        drop_all(env, env->buckets[b]);
    drop_all(env, env->mqueues);
    env->mqueues = NULL;
    free(env->buckets);
    env->buckets = NULL;
    free(env->epochs);
    env->epochs = NULL;
}

/* ---- releases seen ---- */

/* Releases seen of names with this hash.  A waiter's attempt notes the count when it
 * is sent; if it moved by the time the attempt is refused, a release came while it
 * was in flight and the attempt may have lost to nothing: it retries at once.  This
 * covers first attempts too, which are in no queue yet.  Names sharing a slot only
 * cost a spurious retry. */
static uint32_t *epoch_slot(waitq_env *env, const char *name, size_t len)
{
    return &env->epochs[slot_of(name, len)];
}

static uint32_t epoch_of(waitq_env *env, const waiter *w)
{
    uint32_t sum = 0; /* counters only grow: any release of any name moves the sum */
    for (size_t j = 0; j < w->nnames; j++)
        sum += *epoch_slot(env, w->names[j], w->lens[j]);
    return sum;
}

void waitq_begin(waitq_env *env, waiter *w)
{
    w->epoch = epoch_of(env, w);
    if (w->nq && !w->multi)
        w->nq->inflight = w; /* one attempt per name at a time on this worker */
}

int waitq_released_since(waitq_env *env, const waiter *w)
{
    return epoch_of(env, w) != w->epoch;
}

/* ---- queues ---- */

static waitq **bucket_of(waitq_env *env, const char *name, size_t len)
{
    return &env->buckets[keys_name_hash(name, len) & (env->nbuckets - 1)];
}

static waitq *find(waitq_env *env, const char *name, size_t len)
{
    for (waitq *q = *bucket_of(env, name, len); q; q = q->next)
        if (q->name_len == len && memcmp(q->name, name, len) == 0)
            return q;
    return NULL;
}

static int has_name(const waiter *w, const char *name, size_t len)
{
    for (size_t j = 0; j < w->nnames; j++)
        if (w->lens[j] == len && memcmp(w->names[j], name, len) == 0)
            return 1;
    return 0;
}

static int is_gone(const waiter *w)
{
    return w->gone && __atomic_load_n(w->gone, __ATOMIC_RELAXED);
}

/* The head of q's parked waiters, or NULL. */
static waiter *head_of(const waitq *q)
{
    list *n = list_first(&q->parked);
    return n ? list_data(n, waiter, link) : NULL;
}

/* The waiter parked behind w, or NULL (none, or w is not parked). */
static waiter *behind(const waiter *w)
{
    list *n = w->q ? list_next(&w->q->parked, &w->link) : NULL;
    return n ? list_data(n, waiter, link) : NULL;
}

static void arm(waitq *q, int64_t delay_ms)
{
    loop_timer_start(q->env->loop, &q->retry, clock_now_us() + delay_ms * 1000);
}

static void watch(waitq *q, int on)
{
    waitq_env *env = q->env;
    if (!env->hooks->watch || q->watched == on)
        return;
    q->watched = on;
    if (!q->multi) {
        env->hooks->watch(env, q->name, q->name_len, on);
        return;
    }
    waiter *w = head_of(q); /* a private queue is watched only while its waiter is in it */
    for (size_t j = 0; w && j < w->nnames; j++)
        env->hooks->watch(env, w->names[j], w->lens[j], on);
}

static void q_free(waitq *q)
{
    waitq_env *env = q->env;
    loop_timer_stop(env->loop, &q->retry);
    loop_timer_stop(env->loop, &q->gc);
    watch(q, 0);
    waitq **pp = q->multi ? &env->mqueues : bucket_of(env, q->name, q->name_len);
    while (*pp != q)
        pp = &(*pp)->next;
    *pp = q->next;
    free(q);
}

/* Free q once nothing needs it; while only what is known keeps it, when that ends. */
static void settle(waitq *q)
{
    if (!list_empty(&q->parked) || q->fhead || q->inflight)
        return;
    if (!q->multi && q->known_until_us > clock_now_us()) {
        loop_timer_start(q->env->loop, &q->gc, q->known_until_us);
        return;
    }
    q_free(q);
}

static void on_gc(loop_timer *t)
{
    settle(container_of(t, waitq, gc));
}

static void on_retry(loop_timer *t);

static waitq *q_new(waitq_env *env, const char *name, size_t len)
{
    waitq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->env = env;
    q->retry.cb = on_retry;
    q->gc.cb = on_gc;
    list_init(&q->parked);
    memcpy(q->name, name, len);
    q->name[len] = '\0';
    q->name_len = len;
    return q;
}

/* The queue of name (created if need be), or NULL on allocation failure. */
static waitq *q_get(waitq_env *env, const char *name, size_t len)
{
    waitq *q = find(env, name, len);
    if (q || !(q = q_new(env, name, len)))
        return q;
    waitq **b = bucket_of(env, name, len);
    q->next = *b;
    *b = q;
    return q;
}

void waitq_detach(waiter *w)
{
    waitq *q = w->nq;
    if (!q)
        return;
    w->nq = NULL;
    if (q->inflight == w)
        q->inflight = NULL;
    loop_timer_start(q->env->loop, &q->gc, 0);
}

/* ---- heat and knowledge ---- */

int waitq_hot(const int64_t *heat, const char *name, size_t len, int64_t now_us)
{
    if (!heat)
        return 0;
    return __atomic_load_n(&heat[slot_of(name, len)], __ATOMIC_RELAXED) > now_us;
}

void waitq_heat_up(waitq_env *env, const char *name, size_t len)
{
    if (env->heat)
        __atomic_store_n(&env->heat[slot_of(name, len)], clock_now_us() + (int64_t)HEAT_MS * 1000,
                         __ATOMIC_RELAXED);
}

/* Whether q knows its name held by a lease other than w's, and no announcement waits
 * unread that may say otherwise (this thread's own: no read goes on between its loop's
 * passes). */
static int known_held(const waitq *q, const waiter *w, int64_t now)
{
    return q->known_until_us > now &&
           !(q->known_len == w->lease_len && memcmp(q->known_lease, w->lease, w->lease_len) == 0) &&
           inbox_quiet(q->env->inbox, inbox_mark(q->env->inbox), now);
}

static void publish_slot(waitq_known *k, uint64_t nh, uint64_t lease_hash, int64_t until_us,
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
    publish_slot(q->env->known + (nh & (WAITQ_SLOTS - 1)), nh,
                 keys_name_hash(q->known_lease, q->known_len), q->known_until_us, q->known_free_us);
}

int waitq_known_held(const waitq_known *known, const inbox *inboxes, size_t nkeepers,
                     const char *name, size_t len, const char *lease, size_t lease_len,
                     int64_t now_us, int64_t *retry_after_ms)
{
    if (!known)
        return 0;
    uint64_t nh = keys_name_hash(name, len);
    /* the name's keeper, as know() decides it */
    const inbox *keeper_inbox = inboxes && nkeepers ? &inboxes[nh % nkeepers] : NULL;
    uint32_t mark = inbox_mark(keeper_inbox); /* before the slot: see inbox_quiet() */
    const waitq_known *k = known + (nh & (WAITQ_SLOTS - 1));
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
    if (!inbox_quiet(keeper_inbox, mark, now_us))
        return 0; /* its keeper may be about to hear of a release */
    *retry_after_ms = (free_us - now_us + 999) / 1000;
    return 1;
}

static void know(waitq *q, const char *lease, size_t len, int64_t free_in_ms)
{
    int64_t now = clock_now_us();
    waitq_env *env = q->env;
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
    watch(q, 1); /* a release through another instance must reach what is known here */
}

/* The name was released: what was known is over. */
static void forget(waitq *q)
{
    if (!q->known_until_us)
        return;
    q->known_until_us = 0;
    publish(q);
}

/* ---- parking ---- */

static void unpark(waiter *w)
{
    waitq *q = w->q;
    if (!q)
        return;
    waitq_env *env = q->env;
    if (q->multi) /* its only waiter leaves: watch() reads the names from it, so first */
        watch(q, 0);
    list_remove(&w->link);
    w->q = NULL;
    __atomic_sub_fetch(&env->parked, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(env->waiters_total, 1, __ATOMIC_RELAXED);
    loop_timer_stop(env->loop, &w->deadline);
    if (list_empty(&q->parked)) {
        loop_timer_stop(env->loop, &q->retry);
        q->retry_due = 0;
    }
}

/* The caller's wait is over: w answers with its last attempt's result. */
static void on_deadline(loop_timer *t)
{
    waiter *w = container_of(t, waiter, deadline);
    waitq *q = w->q;
    if (!q)
        return;
    waitq_env *env = q->env;
    int was_head = head_of(q) == w;
    waiter *next = behind(w);
    unpark(w);
    if (was_head && next && !loop_timer_armed(&q->retry))
        arm(q, 0);
    env->hooks->waited_out(w);
}

rl_err waitq_park(waitq_env *env, waiter *w, int64_t delay_ms, int64_t deadline_us)
{
    waitq *q = w->q;
    if (!q) {
        long total = __atomic_add_fetch(env->waiters_total, 1, __ATOMIC_RELAXED);
        if (total > env->max_waiters) {
            __atomic_fetch_sub(env->waiters_total, 1, __ATOMIC_RELAXED);
            return RL_E_TOO_MANY_WAITERS;
        }
        if (w->multi && !w->nq) {
            /* A private queue: woken by a release of any of its names. */
            if (!(q = q_new(env, w->names[0], w->lens[0]))) {
                __atomic_fetch_sub(env->waiters_total, 1, __ATOMIC_RELAXED);
                return RL_E_INTERNAL;
            }
            q->multi = 1;
            q->next = env->mqueues;
            env->mqueues = q;
            w->nq = q;
        }
        q = w->nq;
        w->q = q;
        list_insert_tail(&q->parked, &w->link);
        watch(q, 1);
        __atomic_add_fetch(&env->parked, 1, __ATOMIC_RELAXED);
        w->deadline.cb = on_deadline;
        loop_timer_start(env->loop, &w->deadline, deadline_us);
    }
    if (head_of(q) == w)
        arm(q, delay_ms);
    return RL_OK;
}

void waitq_leave(waiter *w, int64_t next_in_ms)
{
    waitq *q = w->q;
    waiter *next = behind(w);
    unpark(w);
    if (q && next && next_in_ms >= 0)
        arm(q, next_in_ms);
}

int waitq_admit(waitq_env *env, waiter *w, int64_t deadline_us, int64_t now,
                int64_t *retry_after_ms, rl_err *err)
{
    waitq *q = q_get(env, w->names[0], w->lens[0]);
    if (!q) {
        *err = RL_E_INTERNAL;
        return WAITQ_REFUSED;
    }
    w->nq = q;
    int can_wait = deadline_us > now + 1000;
    if (known_held(q, w, now)) {
        waitq_heat_up(env, q->name, q->name_len);
        *retry_after_ms = (q->known_free_us - now + 999) / 1000;
        if (!can_wait)
            return WAITQ_HELD;
        *err = waitq_park(env, w, *retry_after_ms + 1 + jitter_ms(env), deadline_us);
        return *err == RL_OK ? WAITQ_PARKED : WAITQ_REFUSED;
    }
    if (!q->inflight && !(can_wait && head_of(q)))
        return WAITQ_ATTEMPT;
    waitq_heat_up(env, q->name, q->name_len);
    if (!can_wait) {
        w->following = 1;
        w->f_next = NULL;
        if (q->ftail)
            q->ftail->f_next = w;
        else
            q->fhead = w;
        q->ftail = w;
        return WAITQ_FOLLOWING;
    }
    int first = !head_of(q);
    /* Until its own attempt says otherwise: blocked by the others. */
    *retry_after_ms = q->known_free_us > now ? (q->known_free_us - now + 999) / 1000 : 0;
    *err = waitq_park(env, w, (deadline_us - now) / 1000, deadline_us);
    if (*err != RL_OK)
        return WAITQ_REFUSED;
    if (first && q->inflight)
        q->retry_due = 1; /* its turn comes when the attempt in flight ends */
    else if (first)
        arm(q, 0);
    return WAITQ_PARKED;
}

void waitq_granted(waitq_env *env, waiter *w, int64_t validity_ms)
{
    waitq *q = w->q;
    waiter *next = behind(w);
    unpark(w);
    if (w->nq && !w->multi &&
        (next || w->nq->fhead || waitq_hot(env->heat, w->names[0], w->lens[0], clock_now_us())))
        know(w->nq, w->lease, w->lease_len, validity_ms); /* contended: remember */
    if (q && next) {
        /* The lock is w's now: the next waiter tries when it should expire, or at once
         * when it is released through this instance. */
        arm(q, validity_ms + 1 + jitter_ms(env));
    }
}

void waitq_held(waitq_env *env, waiter *w, const char *lease, size_t len, int64_t free_in_ms)
{
    if (w->multi || !w->nq)
        return;
    waitq_heat_up(env, w->names[0], w->lens[0]);
    /* A release heard while the attempt was in flight may have ended the hold its
     * refusal names (the announcement came before the last refusal did): nothing is
     * known then, or the next no-wait acquires would be answered "held" from it. */
    if (lease && !waitq_released_since(env, w))
        know(w->nq, lease, len, free_in_ms);
}

/* ---- turns ---- */

/* The attempt in flight on q ended: the next follower attempts, or learns it is held;
 * a head waiter whose turn came meanwhile goes first. */
static void serve_followers(waitq *q)
{
    waitq_env *env = q->env;
    int64_t now = clock_now_us();
    waiter *head = head_of(q);
    if (!q->inflight && q->retry_due && head && !head->in_flight) {
        q->retry_due = 0;
        if (known_held(q, head, now)) {
            arm(q, (q->known_free_us - now) / 1000 + 1);
        } else {
            loop_timer_stop(env->loop, &q->retry);
            env->retries++;
            env->hooks->attempt(head);
        }
    }
    while (q->fhead && !q->inflight) {
        waiter *f = q->fhead;
        q->fhead = f->f_next;
        if (!q->fhead)
            q->ftail = NULL;
        f->f_next = NULL;
        f->following = 0;
        if (is_gone(f))
            env->hooks->answer(f, RL_E_CLIENT_CLOSED, 0);
        else if (known_held(q, f, now))
            env->hooks->answer(f, RL_E_LOCK_HELD, (q->known_free_us - now + 999) / 1000);
        else if (q->unavailable)
            env->hooks->answer(f, RL_E_QUORUM_UNAVAILABLE, (int64_t)q->unavailable_ok);
        else
            env->hooks->attempt(f);
    }
}

static void on_retry(loop_timer *t)
{
    waitq *q = container_of(t, waitq, retry);
    waiter *head = head_of(q);
    if (!head || head->in_flight)
        return;
    if (q->inflight) {
        q->retry_due = 1; /* one attempt per name at a time: after that one */
        return;
    }
    q->env->retries++;
    q->env->hooks->attempt(head);
}

void waitq_attempt_ended(waiter *w)
{
    waitq *q = w->nq;
    if (!q || w->multi)
        return;
    if (q->inflight == w)
        q->inflight = NULL;
    serve_followers(q);
    q->unavailable = 0;
}

void waitq_unavailable(waiter *w, size_t nodes_ok)
{
    waitq *q = w->nq;
    if (!q || w->multi || q->inflight != w)
        return;
    q->unavailable = 1;
    q->unavailable_ok = nodes_ok;
}

static void wake_queue(waitq *q)
{
    waiter *head = head_of(q);
    if (!head)
        return;
    q->env->wakeups++;
    if (!head->in_flight) /* one in flight sees the epoch move when it is refused */
        arm(q, 0);
}

void waitq_wake(waitq_env *env, const char *name, size_t len)
{
    (*epoch_slot(env, name, len))++;
    waitq *q = find(env, name, len);
    if (q) {
        forget(q); /* released: what was known is over */
        wake_queue(q);
    } else if (env->known) {
        /* Released here while another worker keeps the name: take back at once what
         * that worker published (it forgets its own when the wake reaches it). */
        uint64_t nh = keys_name_hash(name, len);
        publish_slot(env->known + (nh & (WAITQ_SLOTS - 1)), nh, 0, 0, 0);
    }
    for (waitq *m = env->mqueues; m; m = m->next)
        if (head_of(m) && has_name(head_of(m), name, len)) /* its one waiter */
            wake_queue(m);
}

void waitq_wake_all(waitq_env *env)
{
    for (size_t i = 0; i < WAITQ_SLOTS; i++)
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
    waitq_env *env = q->env;
    list_foreach(node, &q->parked) {
        waiter *w = list_data(node, waiter, link);
        if (!w->in_flight && is_gone(w)) {
            int was_head = head_of(q) == w;
            unpark(w);
            env->hooks->answer(w, RL_E_CLIENT_CLOSED, 0);
            waiter *head = head_of(q);
            if (was_head && head && !head->in_flight)
                arm(q, 0); /* the next one's turn may have come meanwhile */
        }
    }
    waiter **pp = &q->fhead, *prev = NULL;
    while (*pp) {
        waiter *f = *pp;
        if (is_gone(f)) {
            *pp = f->f_next;
            f->f_next = NULL;
            f->following = 0;
            f->nq = NULL;
            env->hooks->answer(f, RL_E_CLIENT_CLOSED, 0);
        } else {
            prev = f;
            pp = &f->f_next;
        }
    }
    q->ftail = prev;
}

void waitq_check_gone(waitq_env *env, const char *name, size_t len)
{
    waitq *q = find(env, name, len);
    if (q)
        drop_gone(q);
    for (waitq *m = env->mqueues; m; m = m->next)
        if (head_of(m) && has_name(head_of(m), name, len)) /* its one waiter */
            drop_gone(m);
}

waiter *waitq_next_in_line(waitq_env *env, const char *name, size_t len, waiter **busy)
{
    waitq *q = find(env, name, len);
    *busy = NULL;
    if (!q)
        return NULL;
    drop_gone(q); /* never hand a lock to a client that left */
    waiter *h = head_of(q);
    if (h)
        *busy = q->inflight ? q->inflight : h->in_flight ? h : NULL;
    return h;
}

/* Answer every waiter and follower of q now (shutdown). */
static void flush_queue(waitq *q)
{
    waitq_env *env = q->env;
    forget(q);
    while (q->fhead) {
        waiter *f = q->fhead;
        q->fhead = f->f_next;
        f->f_next = NULL;
        f->following = 0;
        env->hooks->answer(f, RL_E_SHUTTING_DOWN, 0);
    }
    q->ftail = NULL;
    for (waiter *w; (w = head_of(q));) {
        unpark(w);
        env->hooks->answer(w, RL_E_SHUTTING_DOWN, 0); /* in flight: only stops waiting */
    }
}

void waitq_flush(waitq_env *env)
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
