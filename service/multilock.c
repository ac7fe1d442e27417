/* multilock.c -- the multi-name shape of an acquire and the release of a set (see
 * multilock.h; the state machines are acquire.c's and release.c's, the decisions redlock.c's). */
#include "multilock.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "proto.h"
#include "scripts.h"

int multilock_set(lockop *op, const char *const *names, const size_t *lens, size_t n)
{
    lockop_multi *mu = calloc(1, sizeof *mu);
    if (!mu || n > MULTI_MAX_NAMES)
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

void multilock_free(lockop *op)
{
    if (!op->multi)
        return;
    free(op->multi->fences);
    free(op->multi->holders);
    free(op->multi);
    op->multi = NULL;
}

/* "a\nb\n..." as stored at acquire time, into mu->names. */
static void take_names(lockop_multi *mu, const char *p, size_t len)
{
    const char *end = p + len;
    size_t k = 0;
    while (p < end && k < MULTI_MAX_NAMES) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        size_t sh = l && *p == '#'; /* a name the set held shared */
        if (l > sh && validate_name(p + sh, l - sh)) {
            memcpy(mu->names[k], p + sh, l - sh);
            mu->names[k][l - sh] = '\0';
            mu->shared[k] = (int)sh;
            mu->lens[k++] = l - sh;
        }
        p += l + 1;
    }
    mu->n = k;
    mu->have_released_names = 1;
}

static void decode_release(lockop_multi *mu, const redisReply *rep, redlock_reply *out)
{
    if (rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_INTEGER ||
        rep->element[1]->type != REDIS_REPLY_STRING)
        return;
    out->state = rep->element[0]->integer == PROTO_MREL_RELEASED ? RL_SLOT_OK : RL_SLOT_REFUSED;
    if (rep->element[0]->integer == PROTO_MREL_OUT_OF_SCOPE)
        mu->out_of_scope = 1;
    if (out->state == RL_SLOT_OK && !mu->have_released_names)
        take_names(mu, rep->element[1]->str, rep->element[1]->len);
}

/* Replies to SCRIPT_MACQUIRE / MRAISE / MRELEASE, into out and the op's per-name
 * tables (fences, holders). */
static void decode(round *rd, size_t i, const struct redisReply *r, redlock_reply *out)
{
    lockop *op = rd->owner;
    lockop_multi *mu = op->multi;
    const redisReply *rep = r;
    out->state = RL_SLOT_FAILED;
    out->has_value = 0;
    if (!rep || rep->type != REDIS_REPLY_ARRAY)
        return;
    if (rd->script == SCRIPT_MRELEASE) {
        decode_release(mu, rep, out);
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
               rep->element[0]->integer == PROTO_MACQ_GRANTED && rep->elements == n + 1) {
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

/* The arguments of one call: keys then args, up to every name twice and a few more. */
typedef struct callargs {
    char keys[2 * MULTI_MAX_NAMES + 1][KEYS_MAX];
    char buckets[MULTI_MAX_NAMES][KEYS_BUCKET_MAX];
    char nums[MULTI_MAX_NAMES + 2][24];
    char joined[MULTI_MAX_NAMES * (NAME_MAX_LEN + 2) + 1];
    const char *argv[MULTI_MAX_NAMES * 4 + 8];
    size_t lens[MULTI_MAX_NAMES * 4 + 8];
    size_t n;
} callargs;

static void arg(callargs *a, const char *s, size_t len)
{
    a->argv[a->n] = s;
    a->lens[a->n++] = len;
}

static void arg_num(callargs *a, size_t slot, unsigned long long v)
{
    arg(a, a->nums[slot], (size_t)snprintf(a->nums[slot], sizeof a->nums[slot], "%llu", v));
}

static void arg_buckets(callargs *a, const lockop_multi *mu)
{
    for (size_t j = 0; j < mu->n; j++)
        arg(a, a->buckets[j], keys_bucket(mu->names[j], mu->lens[j], a->buckets[j], KEYS_BUCKET_MAX));
}

static void send_acquire(lockop *op, round *rd)
{
    lockop_multi *mu = op->multi;
    callargs *a = calloc(1, sizeof *a);
    rd->split_aware = 2; /* hear every master before calling a refusal "held" */
    rd->decode = decode;
    if (!a) {
        round_send(rd, SCRIPT_MACQUIRE, 0, 0, NULL, NULL, 0); /* decides unavailable */
        return;
    }
    size_t n = mu->n, jl = 0;
    for (size_t j = 0; j < n; j++)
        arg(a, a->keys[j], keys_lock(op->env->conf->key_prefix, mu->names[j], mu->lens[j],
                                     a->keys[j], KEYS_MAX));
    arg(a, a->keys[n], keys_set(op->env->conf->key_prefix, op->lease, op->lease_len, a->keys[n],
                                KEYS_MAX));
    /* Each name's readers: an exclusive grant of a name refuses while they hold it. */
    for (size_t j = 0; j < n; j++)
        arg(a, a->keys[n + 1 + j],
            keys_shared(op->env->conf->key_prefix, KEYS_READERS, mu->names[j], mu->lens[j],
                        a->keys[n + 1 + j], KEYS_MAX));
    char modes[MULTI_MAX_NAMES + 1];
    for (size_t j = 0; j < n; j++) {
        if (mu->shared[j])
            a->joined[jl++] = '#'; /* the set's record marks the names it holds shared */
        memcpy(a->joined + jl, mu->names[j], mu->lens[j]);
        jl += mu->lens[j];
        a->joined[jl++] = '\n';
        modes[j] = mu->shared[j] ? 's' : 'x';
    }
    arg(a, op->value, op->value_len);
    arg_num(a, 0, (unsigned long long)op->ttl_ms);
    arg_num(a, 1, n);
    arg(a, a->joined, jl);
    arg_buckets(a, mu);
    arg(a, op->env->conf->key_prefix, strlen(op->env->conf->key_prefix)); /* grants announced */
    arg(a, op->env->origin, op->env->origin_len);
    arg(a, modes, n);
    round_send(rd, SCRIPT_MACQUIRE, (int)(2 * n + 1), (int)(7 + n), a->argv, a->lens,
               round_all(op->env->rounds));
    free(a);
}

static uint64_t plan_raise(lockop *op, const round *rd)
{
    lockop_multi *mu = op->multi;
    return redlock_plan_raise(rd->replies, rd->env->n, rd->env->quorum, mu->fences, mu->n, mu->tokens);
}

static void send_raise(lockop *op, round *rr, uint64_t mask)
{
    lockop_multi *mu = op->multi;
    callargs *a = calloc(1, sizeof *a);
    rr->decode = decode;
    if (!a) {
        round_send(rr, SCRIPT_MRAISE, 0, 0, NULL, NULL, 0);
        return;
    }
    for (size_t j = 0; j < mu->n; j++)
        arg_num(a, j, (unsigned long long)mu->tokens[j]);
    arg_buckets(a, mu);
    round_send(rr, SCRIPT_MRAISE, 0, (int)(2 * mu->n), a->argv, a->lens, mask);
    free(a);
}

static size_t fenced(const lockop *op, const round *rd, const round *rr)
{
    const lockop_multi *mu = op->multi;
    uint64_t acked = 0;
    for (size_t i = 0; i < rr->env->n && i < 64; i++)
        if (rr->replies[i].state == RL_SLOT_OK && rr->replies[i].raised)
            acked |= (uint64_t)1 << i;
    return redlock_fenced(rd->replies, rd->env->n, mu->fences, mu->n, mu->tokens, acked);
}

static rl_err refused(lockop *op, const round *rd)
{
    return redlock_any_held_by_quorum(rd->replies, rd->env->n, rd->env->quorum, op->multi->holders,
                                      op->multi->n)
               ? RL_E_LOCK_HELD
               : RL_E_LOCK_CONTENDED;
}

/* SCRIPT_MRELEASE of the set kept under lease: who is the lease (every name, within
 * scope) or a failed attempt's exact value (only what it wrote). */
static void send_mrelease(const lockop_env *env, round *rd, const char *lease, size_t lease_len,
                          const char *who, size_t who_len, const char *scope, uint64_t mask)
{
    const char *prefix = env->conf->key_prefix;
    char key[KEYS_MAX];
    size_t kl = keys_set(prefix, lease, lease_len, key, sizeof key);
    const char *argv[] = {key, who, prefix, env->origin, scope};
    size_t lens[] = {kl, who_len, strlen(prefix), env->origin_len, strlen(scope)};
    round_send(rd, SCRIPT_MRELEASE, 1, 4, argv, lens, mask);
}

void multilock_send_release(const lockop_env *env, round *rd, const char *lease, size_t lease_len,
                            const char *scope, uint64_t mask)
{
    send_mrelease(env, rd, lease, lease_len, lease, lease_len, scope ? scope : "", mask);
}

static void send_release(lockop *op, round *rd, uint64_t mask)
{
    /* The client's release: by lease, within its token's scope.  A failed attempt's
     * clean-up: only what that attempt wrote (its exact value). */
    int user = op->kind == LOCKOP_MRELEASE;
    rd->decode = user ? decode : NULL;
    if (user)
        multilock_send_release(op->env, rd, op->lease, op->lease_len, op->scope, mask);
    else
        send_mrelease(op->env, rd, op->lease, op->lease_len, op->value, op->value_len, "", mask);
}

const lockop_shape multilock_shape = {
    send_acquire, plan_raise, send_raise, fenced, refused, send_release,
};
