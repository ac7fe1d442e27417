/* proto.h -- what each script answers: the reply codes that reply_decode() (reply.c)
 * reads, named once.  The Lua in scripts.c writes them as bare literals (its text is
 * left as it is); tests/unit/test_proto.c reads that text and fails on any code
 * literal a script returns that has no name here, so the two cannot drift apart.
 *
 * A script's code is the first element of its answer, or the answer itself when that
 * is an integer.  Which function of scripts.c returns each, and on which line:
 *
 * FN_ACQUIRE, FN_SHARED, FN_SEM_ACQUIRE (and FN_HANDOFF where the old lease has no key)
 *   PROTO_ACQ_GRANTED       {1, F}                 a free key set: "return {1, f}"
 *                                                  ("r = {1, bump(b)}" for a permit)
 *   PROTO_ACQ_ADOPTED       {2, F, holds, pttl}    the lease's own key, adopted:
 *                                                  "return {2, ..."
 *   PROTO_ACQ_REFUSED       {0, pttl, F, holder}   held, or readers hold it, or a
 *                                                  writer waits, or other permits:
 *                                                  every "return {0, ..."
 * FN_HANDOFF
 *   PROTO_HANDOFF_REPLACED  {3, F}                 the old lease's key now holds the
 *                                                  new value: "if was then ..."
 *   PROTO_HANDOFF_KEPT + c  {20 + c, pttl, F, old} the old lease keeps c >= 1 holds:
 *                                                  "if was and holds(v) > 1 then ..."
 *   PROTO_HANDOFF_READER + an acquire's code       the old lease was a reader, gone:
 *                                                  "if gone then r[1] = r[1] + 10"
 * FN_RELEASE, FN_SEM_RELEASE
 *   PROTO_REL_DELETED       {1, pttl}              deleted (or left resting): "return
 *                                                  {1, p}"; a bare 1: a reader's entry
 *                                                  gone ("if unshare(...)")
 *   PROTO_REL_KEPT + c      {10 + c, pttl}         c >= 1 holds left: "if c > 0 then"
 *   PROTO_REL_NOT_OURS      0                      the last line, "return 0"
 * FN_EXTEND, FN_SEM_EXTEND
 *   PROTO_EXT_EXTENDED      {1, F}, {1, F, left}   extended (left: of the hold's
 *                                                  bound); a permit's {1, F, slot}
 *   PROTO_EXT_PAST_BOUND    {3, F, left}           refused, past the hold's bound:
 *                                                  "if left < px and ..."
 *   PROTO_EXT_REFUSED       {0, F}                 not the lease's, or it rests
 * FN_FORCE
 *   PROTO_FORCE_RESTING     2                      left resting for its lock-delay
 *   PROTO_FORCE_DELETED     1                      deleted
 *   PROTO_FORCE_NO_KEY      0                      no key
 *
 * RAISE answers the counter, INSPECT and SEM_INSPECT a table of values: no codes.  The
 * scripts decoded elsewhere (MACQUIRE and MRELEASE in multilock.c, MARKER in master.c,
 * PROOF in resync.c) have no names here yet.  scripts.h says what each script takes. */
#ifndef RL_PROTO_H
#define RL_PROTO_H

/* An acquire's answer (SCRIPT_ACQUIRE, SCRIPT_SHARED, SCRIPT_SEM_ACQUIRE; and
 * SCRIPT_HANDOFF where the old lease did not hold the key). */
#define PROTO_ACQ_REFUSED 0
#define PROTO_ACQ_GRANTED 1
#define PROTO_ACQ_ADOPTED 2

/* SCRIPT_HANDOFF's own. */
#define PROTO_HANDOFF_REPLACED 3
#define PROTO_HANDOFF_READER 10 /* added to an acquire's code */
#define PROTO_HANDOFF_KEPT 20   /* plus the holds the old lease keeps (>= 1) */

/* SCRIPT_RELEASE, SCRIPT_SEM_RELEASE. */
#define PROTO_REL_NOT_OURS 0
#define PROTO_REL_DELETED 1
#define PROTO_REL_KEPT 10       /* plus the holds left (>= 1) */

/* SCRIPT_EXTEND, SCRIPT_SEM_EXTEND. */
#define PROTO_EXT_REFUSED 0
#define PROTO_EXT_EXTENDED 1
#define PROTO_EXT_PAST_BOUND 3

/* SCRIPT_FORCE. */
#define PROTO_FORCE_NO_KEY 0
#define PROTO_FORCE_DELETED 1
#define PROTO_FORCE_RESTING 2

#endif
