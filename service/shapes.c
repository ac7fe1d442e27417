/* shapes.c -- the single-name shapes of an acquire (see shapes.h). */
#include "shapes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock.h"
#include "rnd.h"
#include "scripts.h"

void shape_keys_of(const lockop *op, shape_keys *kb)
{
    const char *prefix = op->env->conf->key_prefix;
    kb->bucket_len = keys_bucket(op->name, op->name_len, kb->bucket, sizeof kb->bucket);
    kb->key_len = keys_lock(prefix, op->name, op->name_len, kb->key, sizeof kb->key);
    kb->chan_len = keys_released(prefix, op->name, op->name_len, kb->chan, sizeof kb->chan);
    if (op->mode == LOCKOP_SEMAPHORE) {
        kb->slots_len = keys_sem_slot(prefix, op->name, op->name_len, -1, kb->slots,
                                      sizeof kb->slots);
        kb->readers_len = kb->tags_len = kb->intents_len = 0;
        return;
    }
    kb->slots_len = 0;
    kb->readers_len = keys_shared(prefix, KEYS_READERS, op->name, op->name_len, kb->readers,
                                  sizeof kb->readers);
    kb->tags_len = keys_shared(prefix, KEYS_TAGS, op->name, op->name_len, kb->tags,
                               sizeof kb->tags);
    kb->intents_len = keys_shared(prefix, KEYS_INTENTS, op->name, op->name_len, kb->intents,
                                  sizeof kb->intents);
}

/* How long a refused exclusive attempt asks readers to queue behind it: the wait it
 * has left, at most SHAPE_INTENT_MS (renewed while it waits); 0: it will not wait. */
static long intent_ms(const lockop *op)
{
    int64_t left = op->wait_deadline_us - clock_now_us();
    if (!op->wait_deadline_us || left <= 1000)
        return 0;
    return left / 1000 < SHAPE_INTENT_MS ? (long)(left / 1000) : SHAPE_INTENT_MS;
}

static void one_send_acquire(lockop *op, round *rd)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    char ttl[24], intent[24];
    long ims = intent_ms(op);
    /* the key lives the ttl and the lock-delay after it (docs/DESIGN.md section 14) */
    int tl = snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms + op->delay_ms);
    /* -1: no new mark, but a grant takes back the one an earlier attempt left ("0": the
     * request never marked, and a grant skips the ZREM) */
    int il = snprintf(intent, sizeof intent, "%ld", ims > 0 || !op->intent_mask ? ims : -1L);
    if (ims > 0) /* a refusing master marks it: taken back when op is answered */
        op->intent_mask |= round_all(op->env->rounds);
    const char *argv[] = {kb.key, kb.readers, kb.intents, kb.bucket, op->value, ttl, kb.chan,
                          op->env->origin, intent, op->reentrant ? "1" : "0"};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.intents_len, kb.bucket_len, op->value_len,
                     (size_t)tl, kb.chan_len, op->env->origin_len, (size_t)il, 1};
    rd->split_aware = 1;
    round_send(rd, SCRIPT_ACQUIRE, 3, 7, argv, lens, round_all(op->env->rounds));
}

static uint64_t one_plan_raise(lockop *op, const round *rd)
{
    return redlock_plan_raise(rd->replies, rd->env->n, rd->env->quorum, NULL, 1, &op->token);
}

static void one_send_raise(lockop *op, round *rr, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    char tok[24];
    int tl = snprintf(tok, sizeof tok, "%llu", (unsigned long long)op->token);
    const char *argv[] = {kb.bucket, tok};
    size_t lens[] = {kb.bucket_len, (size_t)tl};
    round_send(rr, SCRIPT_RAISE, 0, 2, argv, lens, mask);
}

static size_t one_fenced(const lockop *op, const round *rd, const round *rr)
{
    uint64_t acked = 0;
    for (size_t i = 0; i < rr->env->n && i < 64; i++)
        if (rr->replies[i].state == RL_SLOT_OK && rr->replies[i].fence >= op->token)
            acked |= (uint64_t)1 << i;
    return redlock_fenced(rd->replies, rd->env->n, NULL, 1, &op->token, acked);
}

static rl_err one_refused(lockop *op, const round *rd)
{
    (void)op;
    return redlock_held_by_quorum(rd->replies, rd->env->n, rd->env->quorum) ? RL_E_LOCK_HELD
                                                                            : RL_E_LOCK_CONTENDED;
}

/* A release by who (the lease: the client's; op->value: a failed attempt's clean-up,
 * exactly what it wrote) of an exclusive holder or a reader. */
void shape_send_release(lockop *op, round *rd, const char *who, size_t who_len, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    if (op->mode == LOCKOP_SEMAPHORE) {
        const char *argv[] = {kb.key, who, kb.chan, op->env->origin, kb.slots};
        size_t lens[] = {kb.key_len, who_len, kb.chan_len, op->env->origin_len, kb.slots_len};
        round_send(rd, SCRIPT_SEM_RELEASE, 1, 4, argv, lens, mask);
        return;
    }
    const char *argv[] = {kb.key, kb.readers, kb.tags, who, kb.chan, op->env->origin};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.tags_len, who_len, kb.chan_len,
                     op->env->origin_len};
    round_send(rd, SCRIPT_RELEASE, 3, 3, argv, lens, mask);
}

static void one_send_release(lockop *op, round *rd, uint64_t mask)
{
    /* The exact value: a retry with the same lease that adopted a key keeps it. */
    shape_send_release(op, rd, op->value, op->value_len, mask);
}

void shape_send_unwant(lockop *op)
{
    uint64_t mask = op->intent_mask & round_all(op->env->rounds);
    op->intent_mask = 0;
    round *rd = mask ? round_new(op->env->rounds, NULL, NULL) : NULL;
    if (!rd)
        return; /* out of memory: the marks expire within SHAPE_INTENT_MS */
    shape_keys kb;
    shape_keys_of(op, &kb);
    const char *argv[] = {kb.intents, op->lease};
    size_t lens[] = {kb.intents_len, op->lease_len};
    round_send(rd, SCRIPT_UNWANT, 1, 1, argv, lens, mask);
    round_unref(rd);
}

const lockop_shape shape_exclusive = {
    one_send_acquire, one_plan_raise, one_send_raise, one_fenced, one_refused, one_send_release,
};

/* ---- the shared shape: a reader of one name ---- */

static void shared_send_acquire(lockop *op, round *rd)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    char ttl[24];
    int tl = snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms);
    const char *argv[] = {kb.key, kb.readers, kb.tags, kb.intents, kb.bucket, op->value, ttl,
                          kb.chan, op->env->origin};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.tags_len, kb.intents_len, kb.bucket_len,
                     op->value_len, (size_t)tl, kb.chan_len, op->env->origin_len};
    rd->split_aware = 1;
    round_send(rd, SCRIPT_SHARED, 4, 5, argv, lens, round_all(op->env->rounds));
}

/* A reader's token is the name's as it stands (no bump): the largest counter among the
 * granting masters, at least the last exclusive grant's; fenced like a writer's (raised
 * to a quorum of granting masters when needed), so that every later writer's token is
 * larger (docs/DESIGN.md, section 12). */

const lockop_shape shape_shared = {
    shared_send_acquire, one_plan_raise, one_send_raise, one_fenced, one_refused,
    one_send_release,
};

/* ---- the semaphore shape: one permit, a lock on one of its slots ---- */

static void sem_send_acquire(lockop *op, round *rd)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    char slot[KEYS_MAX], ttl[24], permits[16], idx[16];
    size_t sl = keys_sem_slot(op->env->conf->key_prefix, op->name, op->name_len, op->slot, slot,
                              sizeof slot);
    int tl = snprintf(ttl, sizeof ttl, "%ld", op->ttl_ms);
    int pl = snprintf(permits, sizeof permits, "%d", op->permits);
    int il = snprintf(idx, sizeof idx, "%d", op->slot);
    /* A lease another attempt may carry could hold another slot: look there first. */
    const char *scan = !op->lease_fresh || op->attempts > 1 ? "1" : "0";
    const char *argv[] = {slot, kb.key, kb.bucket, op->value, ttl, kb.chan, op->env->origin,
                          permits, idx, kb.slots, scan};
    size_t lens[] = {sl, kb.key_len, kb.bucket_len, op->value_len, (size_t)tl, kb.chan_len,
                     op->env->origin_len, (size_t)pl, (size_t)il, kb.slots_len, 1};
    rd->split_aware = 1;
    round_send(rd, SCRIPT_SEM_ACQUIRE, 2, 9, argv, lens, round_all(op->env->rounds));
}

/* Where a refused permit attempt goes next: another number of permits is an error; a
 * slot this lease holds already, or a slot free on enough masters to make a quorum,
 * is tried at once; else every permit is taken (wait for a release).  Among the slots
 * free on enough masters one is drawn at random: attempts refused together were
 * listed the same free slots, and each taking the most voted one collided again (64
 * clients of one 1,024-permit semaphore, one run each: 191 errors before, 37 after). */
static rl_err sem_refused(lockop *op, const round *rd)
{
    size_t n = rd->env->n, unknown = 0;
    size_t votes[64] = {0};
    int cand[64];
    size_t ncand = 0;
    for (size_t i = 0; i < n; i++) {
        const redlock_reply *r = &rd->replies[i];
        unknown += r->state == RL_SLOT_FAILED || r->state == RL_SLOT_PENDING;
        if (r->state != RL_SLOT_REFUSED || !r->has_value)
            continue;
        size_t pl = sizeof SCRIPTS_HOLDER_PERMITS - 1, ml = sizeof SCRIPTS_HOLDER_MINE - 1,
               fl = sizeof SCRIPTS_HOLDER_FREE - 1;
        char v[REDLOCK_VALUE_MAX + 1];
        memcpy(v, r->value, r->value_len);
        v[r->value_len] = '\0';
        if (r->value_len > pl && memcmp(v, SCRIPTS_HOLDER_PERMITS, pl) == 0) {
            op->permits_seen = strtol(v + pl, NULL, 10);
            return RL_E_PERMITS_MISMATCH;
        }
        if (r->value_len > ml && memcmp(v, SCRIPTS_HOLDER_MINE, ml) == 0) {
            op->slot = (int)strtol(v + ml, NULL, 10);
            return RL_E_LOCK_CONTENDED;
        }
        if (r->value_len < fl || memcmp(v, SCRIPTS_HOLDER_FREE, fl) != 0)
            continue;
        for (char *p = v + fl, *end; *p; p = end) {
            long s = strtol(p, &end, 10);
            if (end == p)
                break;
            size_t k = 0;
            while (k < ncand && cand[k] != (int)s)
                k++;
            if (k == ncand && ncand < 64)
                cand[ncand++] = (int)s;
            if (k < 64)
                votes[k]++;
        }
    }
    int fit[64];
    size_t nfit = 0;
    for (size_t k = 0; k < ncand; k++)
        if (cand[k] >= 0 && cand[k] < op->permits && votes[k] + unknown >= rd->env->quorum)
            fit[nfit++] = cand[k];
    if (nfit) {
        op->slot = fit[rnd_next(&op->env->rnd) % (uint32_t)nfit];
        return RL_E_LOCK_CONTENDED;
    }
    return RL_E_LOCK_HELD;
}

const lockop_shape shape_semaphore = {
    sem_send_acquire, one_plan_raise, one_send_raise, one_fenced, sem_refused, one_send_release,
};


/* ---- extend, inspect and force: their arguments, built here as an acquire's are ---- */

void shape_send_extend(lockop *op, round *rd, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    char setk[KEYS_MAX], ttl[24];
    /* negative: up to the hold's bound rather than refused past it (scripts_lock.c) */
    int tl = snprintf(ttl, sizeof ttl, "%s%ld", op->capped ? "-" : "", op->ttl_ms);
    if (op->mode == LOCKOP_SEMAPHORE) {
        const char *argv[] = {kb.key, kb.bucket, op->lease, ttl, kb.slots};
        size_t lens[] = {kb.key_len, kb.bucket_len, op->lease_len, (size_t)tl, kb.slots_len};
        round_send(rd, SCRIPT_SEM_EXTEND, 1, 4, argv, lens, mask);
        return;
    }
    size_t setl = keys_set(op->env->conf->key_prefix, op->lease, op->lease_len, setk, sizeof setk);
    const char *argv[] = {kb.key, setk, kb.readers, kb.tags, kb.bucket, op->lease, ttl};
    size_t lens[] = {kb.key_len, setl, kb.readers_len, kb.tags_len, kb.bucket_len,
                     op->lease_len, (size_t)tl};
    round_send(rd, SCRIPT_EXTEND, 4, 3, argv, lens, mask);
}

void shape_send_inspect(lockop *op, round *rd, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    if (op->mode == LOCKOP_SEMAPHORE) {
        const char *argv[] = {kb.key, kb.bucket, kb.slots};
        size_t lens[] = {kb.key_len, kb.bucket_len, kb.slots_len};
        round_send(rd, SCRIPT_SEM_INSPECT, 1, 2, argv, lens, mask);
        return;
    }
    const char *argv[] = {kb.key, kb.readers, kb.bucket};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.bucket_len};
    round_send(rd, SCRIPT_INSPECT, 2, 1, argv, lens, mask);
}

void shape_send_force(lockop *op, round *rd, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(op, &kb);
    const lockop_env *env = op->env;
    const char *argv[] = {kb.key, kb.readers, kb.tags, kb.intents, kb.chan, env->origin};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.tags_len, kb.intents_len, kb.chan_len,
                     env->origin_len};
    round_send(rd, SCRIPT_FORCE, 4, 2, argv, lens, mask);
}

void shape_send_handoff(lockop *h, const lockop *r, round *rd, uint64_t mask)
{
    shape_keys kb;
    shape_keys_of(h, &kb);
    const lockop_env *env = h->env;
    char ttl[24];
    int tl = snprintf(ttl, sizeof ttl, "%ld", h->ttl_ms + h->delay_ms);
    const char *argv[] = {kb.key, kb.readers, kb.tags, kb.intents, kb.bucket, r->lease,
                          h->value, ttl, kb.chan, env->origin};
    size_t lens[] = {kb.key_len, kb.readers_len, kb.tags_len, kb.intents_len, kb.bucket_len,
                     r->lease_len, h->value_len, (size_t)tl, kb.chan_len, env->origin_len};
    round_send(rd, SCRIPT_HANDOFF, 4, 6, argv, lens, mask);
}
