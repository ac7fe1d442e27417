/* fuzz_reply.c -- libFuzzer target: bytes from a master, parsed by hiredis's
 * redisReader, decoded by reply_decode for every script id (and PING, and ids that
 * do not exist), then checked against the reply shapes documented in scripts.h:
 *
 *   acquire  {1,F} | {2,F} granted, {0,pttl,F[,holder]} taken (F >= 0)
 *   raise    F >= 0
 *   release  1 deleted, any other integer: not ours
 *   extend   {1,F} ours, {a,F} otherwise                 (F >= 0), each with what is left
 *            of a bound as a third element (>= 0)
 *   inspect  {value|nil, pttl, F[, owner[, count, count_pttl[, holds[, stored, rest]]]]}
 *            (F >= 0, owner a string)
 *   force    any integer: 1 deleted, 2 deleted and resting, else nothing there (all OK)
 *   ping     a status reply
 * Anything else, an error reply or NULL, is RL_SLOT_FAILED.
 *
 * hiredis 0.14 allocates a multi-bulk's element array as soon as it reads the header,
 * with no upper bound: inputs announcing more than 100000 elements are skipped so that
 * the fuzzer does not report the allocator's limit (see the report for what a master
 * could do with that). */
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"
#include "scripts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int is_int(const redisReply *r, size_t i, long long *v)
{
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements || !r->element[i] ||
        r->element[i]->type != REDIS_REPLY_INTEGER)
        return 0;
    *v = r->element[i]->integer;
    return 1;
}

/* The expected state, and the fence/pttl when it is not FAILED. */
static int expect(int script, const redisReply *r, uint64_t *fence, int64_t *pttl)
{
    long long a, b, c;
    *fence = 0;
    *pttl = 0;
    if (!r || r->type == REDIS_REPLY_ERROR)
        return RL_SLOT_FAILED;
    int arr = r->type == REDIS_REPLY_ARRAY;
    switch (script) {
    case SCRIPT_ACQUIRE:
    case SCRIPT_HANDOFF:
    case SCRIPT_SHARED:
    case SCRIPT_SEM_ACQUIRE:
        /* a handoff whose old lease was a reader answers the acquire's reply + 10; one
         * whose old lease counts reentrant holds left answers a refusal with 20 + left */
        if (!arr || !is_int(r, 0, &a))
            return RL_SLOT_FAILED;
        if (script == SCRIPT_HANDOFF && a >= 21)
            a = 0;
        else if (script == SCRIPT_HANDOFF && a >= 10 && a <= 12)
            a -= 10;
        if (r->elements == 2 && (a == 1 || a == 2 || (a == 3 && script == SCRIPT_HANDOFF)) &&
            is_int(r, 1, &b) && b >= 0) {
            *fence = (uint64_t)b;
            return RL_SLOT_OK;
        }
        if (r->elements == 3 && a == 2 && is_int(r, 1, &b) && b >= 0 && is_int(r, 2, &c) && c >= 1) {
            *fence = (uint64_t)b; /* {2, F, holds} */
            return RL_SLOT_OK;
        }
        long long p;
        if (r->elements == 4 && a == 2 && is_int(r, 1, &b) && b >= 0 && is_int(r, 2, &c) && c >= 1 &&
            is_int(r, 3, &p) && p > 0) {
            *fence = (uint64_t)b; /* {2, F, holds, pttl}: a key kept, never shortened */
            return RL_SLOT_OK;
        }
        if ((r->elements == 3 || (r->elements == 4 && r->element[3] &&
                                  r->element[3]->type == REDIS_REPLY_STRING)) &&
            a == 0 && is_int(r, 1, &b) && is_int(r, 2, &c) && c >= 0) {
            *fence = (uint64_t)c;
            *pttl = b;
            return RL_SLOT_REFUSED;
        }
        return RL_SLOT_FAILED;
    case SCRIPT_RAISE:
        if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
            *fence = (uint64_t)r->integer;
            return RL_SLOT_OK;
        }
        return RL_SLOT_FAILED;
    case SCRIPT_RELEASE:
    case SCRIPT_SEM_RELEASE:
        /* 1 or {1, pttl} released, {10 + n, pttl} a reentrant hold less (n left), 0 not
         * ours; anything else is no answer */
        a = -1;
        if (r->type == REDIS_REPLY_INTEGER)
            a = r->integer;
        else if (arr && r->elements == 2 && is_int(r, 1, &b) && !is_int(r, 0, &a))
            a = -1;
        return a == 0 ? RL_SLOT_REFUSED : a == 1 || a > 10 ? RL_SLOT_OK : RL_SLOT_FAILED;
    case SCRIPT_EXTEND:
    case SCRIPT_SEM_EXTEND:
        if (arr && (r->elements == 2 || (r->elements == 3 && is_int(r, 2, &c) && c >= 0)) &&
            is_int(r, 0, &a) && is_int(r, 1, &b) && b >= 0) {
            *fence = (uint64_t)b;
            return a == 1 ? RL_SLOT_OK : RL_SLOT_REFUSED;
        }
        return RL_SLOT_FAILED;
    case SCRIPT_INSPECT:
    case SCRIPT_SEM_INSPECT:
        /* {value|nil, pttl, F[, owner[, count, count_pttl[, holds]]]} */
        if (arr && r->elements >= 6 &&
            (!is_int(r, 4, &a) || a < 0 || !is_int(r, 5, &b)))
            return RL_SLOT_FAILED;
        if (arr && r->elements >= 7 && (!is_int(r, 6, &a) || a < 0))
            return RL_SLOT_FAILED;
        if (arr && r->elements == 9 && (!is_int(r, 7, &a) || a < 0 || !is_int(r, 8, &b) || b < 0))
            return RL_SLOT_FAILED;
        if (arr && (r->elements == 3 || (r->elements >= 4 && r->elements != 5 && r->elements != 8 &&
                                         r->elements <= 9 &&
                                         r->element[3] && r->element[3]->type == REDIS_REPLY_STRING)) &&
            r->element[0] &&
            (r->element[0]->type == REDIS_REPLY_STRING || r->element[0]->type == REDIS_REPLY_NIL) &&
            is_int(r, 1, &b) && is_int(r, 2, &c) && c >= 0) {
            *fence = (uint64_t)c;
            *pttl = b;
            return RL_SLOT_OK;
        }
        return RL_SLOT_FAILED;
    case SCRIPT_FORCE:
        return r->type == REDIS_REPLY_INTEGER ? RL_SLOT_OK : RL_SLOT_FAILED;
    case SCRIPT_PING:
        return r->type == REDIS_REPLY_STATUS ? RL_SLOT_OK : RL_SLOT_FAILED;
    default:
        return RL_SLOT_FAILED;
    }
}

static void check(int script, const redisReply *r)
{
    redlock_reply out;
    memset(&out, 0xa5, sizeof out); /* stale garbage must not leak through */
    out.raised = 0;
    reply_decode(script, r, &out);
    uint64_t fence;
    int64_t pttl;
    int want = expect(script, r, &fence, &pttl);
    if (out.state != want)
        abort();
    int has_fence = script == SCRIPT_ACQUIRE || script == SCRIPT_RAISE || script == SCRIPT_EXTEND ||
                    script == SCRIPT_INSPECT || script == SCRIPT_HANDOFF || script == SCRIPT_SHARED ||
                    script == SCRIPT_SEM_ACQUIRE || script == SCRIPT_SEM_EXTEND ||
                    script == SCRIPT_SEM_INSPECT; /* release, ping: no */
    if (want != RL_SLOT_FAILED && has_fence && out.fence != fence)
        abort();
    int acq = script == SCRIPT_ACQUIRE || script == SCRIPT_HANDOFF || script == SCRIPT_SHARED ||
              script == SCRIPT_SEM_ACQUIRE;
    int insp = script == SCRIPT_INSPECT || script == SCRIPT_SEM_INSPECT;
    if ((insp && want == RL_SLOT_OK) || (acq && want == RL_SLOT_REFUSED))
        if (out.pttl != pttl)
            abort();
    /* A handoff counts as a release where the old lease was replaced ({3, F}), where it
     * was a reader (+10), or where it counts a reentrant hold less (20 + left). */
    long long code;
    int want_released = (script == SCRIPT_HANDOFF && want != RL_SLOT_FAILED && is_int(r, 0, &code) &&
                         (code == 3 || (code >= 10 && code <= 12) || code >= 21) &&
                         (want == RL_SLOT_OK || code != 3)) ||
                        (script == SCRIPT_FORCE && want == RL_SLOT_OK &&
                         (r->integer == 1 || r->integer == 2));
    if (out.released != want_released)
        abort();
    /* The value: an inspection's, or the holder a refusal names ({0,pttl,F,holder}). */
    const redisReply *v = NULL;
    if (insp && want == RL_SLOT_OK && r->element[0]->type == REDIS_REPLY_STRING)
        v = r->element[0];
    if (acq && want == RL_SLOT_REFUSED && r->elements == 4)
        v = r->element[3];
    if (out.has_value != (v != NULL))
        abort();
    if (v) {
        size_t n = v->len < REDLOCK_VALUE_MAX ? v->len : REDLOCK_VALUE_MAX;
        if (out.value_len != n || memcmp(out.value, v->str, n) != 0)
            abort();
    }
    /* The owner of an inspection: the 4th element, cut to REDLOCK_OWNER_MAX; none without. */
    if (insp && want == RL_SLOT_OK) {
        size_t n = r->elements >= 4 ? r->element[3]->len : 0;
        if (n > REDLOCK_OWNER_MAX)
            n = REDLOCK_OWNER_MAX;
        if (out.owner_len != n || (n && memcmp(out.owner, r->element[3]->str, n) != 0))
            abort();
    }
}

/* Does the input announce a multi-bulk of more than 100000 elements anywhere? */
static int huge_multibulk(const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d[i] != '*')
            continue;
        size_t j = i + 1;
        if (j < n && d[j] == '-')
            continue;
        unsigned long long v = 0;
        for (; j < n && d[j] >= '0' && d[j] <= '9'; j++) {
            v = v * 10 + (d[j] - '0');
            if (v > 100000)
                return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int scripts[] = {SCRIPT_ACQUIRE, SCRIPT_RAISE,   SCRIPT_RELEASE, SCRIPT_EXTEND,
                                  SCRIPT_INSPECT, SCRIPT_MARKER,  SCRIPT_PING,    SCRIPT__COUNT,
                                  -1,             SCRIPT_PING + 1, SCRIPT_HANDOFF, SCRIPT_FORCE,
                                  SCRIPT_SHARED,  SCRIPT_SEM_ACQUIRE, SCRIPT_SEM_RELEASE,
                                  SCRIPT_SEM_EXTEND, SCRIPT_SEM_INSPECT};
    const size_t nscripts = sizeof scripts / sizeof scripts[0];
    if (huge_multibulk(data, size))
        return 0;
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    if (size && redisReaderFeed(rd, (const char *)data, size) != REDIS_OK) {
        redisReaderFree(rd);
        return 0;
    }
    for (int k = 0; k < 64; k++) {
        void *reply = NULL;
        if (redisReaderGetReply(rd, &reply) != REDIS_OK || !reply)
            break;
        for (size_t i = 0; i < nscripts; i++)
            check(scripts[i], reply);
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    for (size_t i = 0; i < nscripts; i++)
        check(scripts[i], NULL);
    return 0;
}
