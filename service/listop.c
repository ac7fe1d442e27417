/* listop.c -- GET /locks (see listop.h). */
#include "listop.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"
#include "proto.h"
#include "scripts.h"

listop *listop_new(round_env *rounds, const char *key_prefix, const char *prefix, size_t prefix_len,
                   size_t limit, listop_done_cb done, void *owner)
{
    listop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->rounds = rounds;
    l->key_prefix = key_prefix;
    if (prefix_len > NAME_MAX_LEN)
        prefix_len = NAME_MAX_LEN;
    memcpy(l->prefix, prefix, prefix_len);
    l->prefix_len = prefix_len;
    l->limit = limit < 1 ? 1 : limit > LISTOP_LIMIT_MAX ? LISTOP_LIMIT_MAX : limit;
    l->done = done;
    l->owner = owner;
    l->err = RL_E_INTERNAL;
    return l;
}

void listop_free(listop *l)
{
    if (l) {
        free(l->items);
        free(l);
    }
}

static int add_name(listop *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        listop_item *ni = realloc(l->items, cap * sizeof *ni);
        if (!ni)
            return -1;
        l->items = ni;
        l->cap = cap;
    }
    listop_item *it = &l->items[l->n++];
    memset(it, 0, sizeof *it);
    memcpy(it->name, s, len);
    it->name_len = len;
    return 0;
}

/* A master's scan reply {more, name1, ...}: its names join the candidates. */
static void scan_decode(round *rd, size_t master, const redisReply *r, redlock_reply *out)
{
    listop *l = rd->owner;
    (void)master;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !r->element[0] ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        out->state = RL_SLOT_FAILED;
        return;
    }
    if (r->element[0]->integer != PROTO_SCAN_DONE)
        l->truncated = 1;
    for (size_t i = 1; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        /* a key under the prefix that is no lock name (another client's) is skipped */
        if (e && e->type == REDIS_REPLY_STRING && validate_name(e->str, e->len) &&
            add_name(l, e->str, e->len) != 0) {
            out->state = RL_SLOT_FAILED;
            return;
        }
    }
    out->state = RL_SLOT_OK;
}

static int by_name(const void *a, const void *b)
{
    const listop_item *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static void finished(listop *l)
{
    l->done(l);
}

static void inspect_done(round *rd)
{
    listop *l = rd->owner;
    listop_item *it = &l->items[rd->token];
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    if (t.ok + t.refused < rd->env->quorum) {
        if (l->err == RL_OK || t.ok + t.refused < l->nodes_ok)
            l->nodes_ok = t.ok + t.refused;
        l->err = RL_E_QUORUM_UNAVAILABLE;
    } else {
        int64_t valid;
        int h = redlock_inspect_holder(rd->replies, rd->env->n, rd->env->quorum, &valid);
        if (h >= 0) {
            int64_t elapsed_ms = (clock_now_us() - rd->start_us + 999) / 1000;
            it->held = 1;
            it->validity_ms = valid == INT64_MAX ? -1 : valid > elapsed_ms ? valid - elapsed_ms : 0;
            it->token = redlock_max_fence(rd->replies, rd->env->n);
            it->owner_len = rd->replies[h].owner_len;
            memcpy(it->owner, rd->replies[h].owner, it->owner_len);
        }
    }
    if (--l->pending == 0)
        finished(l);
}

/* The candidates are in: one inspect round per name (sent in this loop pass, so
 * master.c batches them). */
static void scan_done(round *rd)
{
    listop *l = rd->owner;
    redlock_tally t;
    redlock_tally_of(rd->replies, rd->env->n, &t);
    l->nodes_ok = t.ok;
    if (t.ok < rd->env->quorum) {
        l->err = RL_E_QUORUM_UNAVAILABLE;
        finished(l);
        return;
    }
    if (l->n) /* no candidate: no array at all (qsort must not see NULL) */
        qsort(l->items, l->n, sizeof *l->items, by_name);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (k == 0 || strcmp(l->items[k - 1].name, l->items[i].name) != 0)
            l->items[k++] = l->items[i];
    l->n = k;
    if (l->n > l->limit) {
        l->n = l->limit;
        l->truncated = 1;
    }
    l->err = RL_OK;
    if (l->n == 0) {
        finished(l);
        return;
    }
    l->pending = l->n;
    for (size_t i = 0; i < l->n; i++) {
        round *ir = round_new(l->rounds, inspect_done, l);
        if (!ir) {
            l->err = RL_E_INTERNAL;
            if (--l->pending == 0)
                finished(l);
            continue;
        }
        ir->wait_all = 1;
        ir->token = i;
        char key[KEYS_MAX], readers[KEYS_MAX], bucket[KEYS_BUCKET_MAX];
        const listop_item *it = &l->items[i];
        size_t kl = keys_lock(l->key_prefix, it->name, it->name_len, key, sizeof key);
        size_t rl = keys_shared(l->key_prefix, KEYS_READERS, it->name, it->name_len, readers,
                                sizeof readers);
        size_t bl = keys_bucket(it->name, it->name_len, bucket, sizeof bucket);
        const char *argv[] = {key, readers, bucket};
        size_t lens[] = {kl, rl, bl};
        round_send(ir, SCRIPT_INSPECT, 2, 1, argv, lens, round_all(l->rounds));
        round_unref(ir); /* its commands in flight, or the ready list, hold it */
    }
}

int listop_start(listop *l)
{
    round *rd = round_new(l->rounds, scan_done, l);
    if (!rd)
        return -1;
    rd->wait_all = 1;
    rd->decode = scan_decode;
    char pattern[KEYS_MAX], skip[24], limit[24], calls[24];
    size_t pl = keys_scan_pattern(l->key_prefix, l->prefix, l->prefix_len, pattern, sizeof pattern);
    int sl = snprintf(skip, sizeof skip, "%zu", strlen(l->key_prefix));
    /* Each master gathers up to the largest limit, not this one: the list is the
     * first `limit` names in order of every name found, so a master must not stop at
     * `limit` names taken in its own (hash) order. */
    int ll = snprintf(limit, sizeof limit, "%d", LISTOP_LIMIT_MAX);
    int cl = snprintf(calls, sizeof calls, "%d", LISTOP_SCAN_CALLS);
    const char *argv[] = {pattern, skip, limit, calls};
    size_t lens[] = {pl, (size_t)sl, (size_t)ll, (size_t)cl};
    round_send(rd, SCRIPT_SCAN, 0, 4, argv, lens, round_all(l->rounds));
    round_unref(rd);
    return 0;
}
