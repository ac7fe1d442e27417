/* reply.c -- script reply decoding (see reply.h). */
#include "reply.h"

#include <hiredis/hiredis.h>
#include <string.h>

#include "proto.h"
#include "scripts.h"

static int int_at(const redisReply *r, size_t i, long long *v)
{
    if (i >= r->elements || !r->element[i] || r->element[i]->type != REDIS_REPLY_INTEGER)
        return 0;
    *v = r->element[i]->integer;
    return 1;
}

static void fail(redlock_reply *out)
{
    out->state = RL_SLOT_FAILED;
    out->released = 0; /* a malformed handoff reply releases nothing */
}

void reply_clear(redlock_reply *out)
{
    out->has_value = 0;
    out->released = 0;
    out->count = out->count_pttl = out->holds = out->left = 0;
    out->bound_ms = -1;
    out->stored = 0;
    out->rest_ms = 0;
    out->rested = 0;
}

void reply_decode(int script, const redisReply *r, redlock_reply *out)
{
    long long a = 0, b = 0, c = 0;
    reply_clear(out);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        fail(out);
        return;
    }
    switch (script) {
    case SCRIPT_ACQUIRE:
    case SCRIPT_HANDOFF:
    case SCRIPT_SHARED:
    case SCRIPT_SEM_ACQUIRE:
        if (r->type != REDIS_REPLY_ARRAY || !int_at(r, 0, &a))
            break;
        if (script == SCRIPT_HANDOFF && a >= PROTO_HANDOFF_KEPT + 1) {
            out->released = 1; /* a reentrant holder counts one hold less: it keeps the
                                * lock, and the new value is refused by it */
            out->left = a - PROTO_HANDOFF_KEPT;
            a = PROTO_ACQ_REFUSED;
        } else if (script == SCRIPT_HANDOFF && a >= PROTO_HANDOFF_READER + PROTO_ACQ_REFUSED &&
                   a <= PROTO_HANDOFF_READER + PROTO_ACQ_ADOPTED) {
            out->released = 1; /* the old lease was a reader: gone, and the new value
                                * tried as an acquire */
            a -= PROTO_HANDOFF_READER;
        }
        long long p = -2; /* a fresh grant: the key lives its ttl */
        if ((a == PROTO_ACQ_GRANTED || a == PROTO_ACQ_ADOPTED ||
             (a == PROTO_HANDOFF_REPLACED && script == SCRIPT_HANDOFF)) &&
            (r->elements == 2 ||
             (a == PROTO_ACQ_ADOPTED &&
              (r->elements == 3 || (r->elements == 4 && int_at(r, 3, &p) && p > 0)) &&
              int_at(r, 2, &c) && c >= 1)) &&
            int_at(r, 1, &b) && b >= 0) {
            out->state = RL_SLOT_OK;
            out->fence = (uint64_t)b;
            out->holds = r->elements >= 3 ? c : 1;
            out->pttl = p; /* a key found held by the lease: what it has left now */
            out->released |= a == PROTO_HANDOFF_REPLACED;
            return;
        }
        if (a == PROTO_ACQ_REFUSED && (r->elements == 3 || (r->elements == 4 && r->element[3] &&
                                            r->element[3]->type == REDIS_REPLY_STRING)) &&
            int_at(r, 1, &b) && int_at(r, 2, &c) && c >= 0) {
            out->state = RL_SLOT_REFUSED;
            out->pttl = b;
            out->fence = (uint64_t)c;
            if (r->elements == 4) {
                /* the holding lease: which attempt holds this master */
                size_t len = r->element[3]->len;
                if (len > REDLOCK_VALUE_MAX)
                    len = REDLOCK_VALUE_MAX;
                memcpy(out->value, r->element[3]->str, len);
                out->value_len = (uint8_t)len;
                out->has_value = 1;
            }
            return;
        }
        break;
    case SCRIPT_RAISE:
        if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
            out->state = RL_SLOT_OK;
            out->fence = (uint64_t)r->integer;
            return;
        }
        break;
    case SCRIPT_RELEASE:
    case SCRIPT_SEM_RELEASE:
        /* 1 | {1, pttl}: deleted; {10 + c, pttl}: c holds left; 0: not the lease's */
        a = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        b = -2;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && int_at(r, 1, &b) &&
            !int_at(r, 0, &a))
            a = -1;
        if (a == PROTO_REL_NOT_OURS || a == PROTO_REL_DELETED || a > PROTO_REL_KEPT) {
            out->state = a == PROTO_REL_NOT_OURS ? RL_SLOT_REFUSED : RL_SLOT_OK;
            out->left = a > PROTO_REL_KEPT ? a - PROTO_REL_KEPT : 0;
            out->pttl = b;
            return;
        }
        break;
    case SCRIPT_EXTEND:
    case SCRIPT_SEM_EXTEND:
        if (r->type == REDIS_REPLY_ARRAY &&
            (r->elements == 2 || (r->elements == 3 && int_at(r, 2, &c) && c >= 0)) &&
            int_at(r, 0, &a) && int_at(r, 1, &b) && b >= 0) {
            out->state = a == PROTO_EXT_EXTENDED ? RL_SLOT_OK : RL_SLOT_REFUSED;
            out->fence = (uint64_t)b;
            if (script == SCRIPT_SEM_EXTEND)
                out->count = r->elements == 3 ? c : 0; /* a permit's slot */
            else if (r->elements == 3 && (a == PROTO_EXT_EXTENDED || a == PROTO_EXT_PAST_BOUND))
                out->bound_ms = c; /* {1|3, F, what is left of the hold's bound} */
            return;
        }
        break;
    case SCRIPT_INSPECT:
    case SCRIPT_SEM_INSPECT:
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 9 ||
            r->elements == 5 || r->elements == 8 || !int_at(r, 1, &b) || !int_at(r, 2, &c) ||
            c < 0 || !r->element[0])
            break;
        out->owner_len = 0;
        if (r->elements >= 6) {
            /* readers and the longest one's pttl; a semaphore's permits taken and its
             * number of permits */
            long long n = 0, l = 0;
            if (!int_at(r, 4, &n) || !int_at(r, 5, &l) || n < 0)
                break;
            out->count = n;
            out->count_pttl = l;
        }
        if (r->elements >= 7) {
            long long h = 0;
            if (!int_at(r, 6, &h) || h < 0)
                break;
            out->holds = h;
        }
        if (r->elements == 9) {
            /* the token the holder's key was granted with, and how long a key with a
             * lock-delay (or resting) keeps the name from others */
            long long t = 0, rest = 0;
            if (!int_at(r, 7, &t) || t < 0 || !int_at(r, 8, &rest) || rest < 0)
                break;
            out->stored = (uint64_t)t;
            out->rest_ms = rest;
        }
        if (r->elements >= 4) {
            /* the owner the grant was made with ("": none) */
            const redisReply *o = r->element[3];
            if (!o || o->type != REDIS_REPLY_STRING)
                break;
            size_t len = o->len > REDLOCK_OWNER_MAX ? REDLOCK_OWNER_MAX : o->len;
            memcpy(out->owner, o->str, len);
            out->owner_len = (uint16_t)len;
        }
        if (r->element[0]->type == REDIS_REPLY_STRING) {
            size_t len = r->element[0]->len;
            if (len > REDLOCK_VALUE_MAX)
                len = REDLOCK_VALUE_MAX; /* a foreign value: compare its first bytes */
            memcpy(out->value, r->element[0]->str, len);
            out->value_len = (uint8_t)len;
            out->has_value = 1;
        } else if (r->element[0]->type != REDIS_REPLY_NIL) {
            break;
        }
        out->state = RL_SLOT_OK;
        out->pttl = b;
        out->fence = (uint64_t)c;
        return;
    case SCRIPT_FORCE:
        if (r->type == REDIS_REPLY_INTEGER) {
            out->state = RL_SLOT_OK; /* the key is gone there, whoever held it */
            out->released = r->integer == PROTO_FORCE_DELETED || r->integer == PROTO_FORCE_RESTING;
            out->rested = r->integer == PROTO_FORCE_RESTING; /* ... and rests there for its lock-delay */
            return;
        }
        break;
    case SCRIPT_PING:
        if (r->type == REDIS_REPLY_STATUS) {
            out->state = RL_SLOT_OK;
            return;
        }
        break;
    default:
        break;
    }
    fail(out);
}
