/* reply.h -- decoding a master's reply to one of our scripts into a redlock_reply.
 * Pure (takes a parsed hiredis reply); fed by the fuzzer through hiredis's reader.  The
 * codes it reads are named in proto.h. */
#ifndef RL_REPLY_H
#define RL_REPLY_H

#include "redlock.h"

struct redisReply;

/* Pseudo-script id for PING (readiness rounds). */
#define SCRIPT_PING 100

/* Set the fields a decoder may leave alone to "nothing" (no value, no holds left, no
 * bound, no count...); the fence, pttl and raised flag are the round's (round_new)
 * and each decoder's.  round.c calls it before any decoder, reply_decode itself too. */
void reply_clear(redlock_reply *out);

/* Decode r (may be NULL: connection failed) for script into out->state and fields.
 * Anything unexpected (error reply, wrong shape) is RL_SLOT_FAILED. */
void reply_decode(int script, const struct redisReply *r, redlock_reply *out);

#endif
