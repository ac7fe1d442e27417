/* proto.h -- what each script answers: the reply codes, named once, for both sides.
 * The Lua text (scripts.c and the script modules it gathers) writes every code through
 * these names, stringified into the text at compile time with PROTO_S():
 *
 *     "  return {" PROTO_S(PROTO_ACQ_GRANTED) ", f}\n"      the Lua reads "return {1, f}"
 *
 * and the C that decodes the answer (reply.c, multilock.c, master.c, trust.c, redlock.c,
 * resync.c, listop.c) compares with the same names, so the two cannot drift apart.  A
 * code is a plain integer literal here (PROTO_S of "(1)" would put the parentheses in
 * the Lua).  tests/unit/test_proto.c fails on any code written as a bare literal in a
 * script module's Lua, and on any name here that its script no longer answers.
 *
 * A script's code is the first element of its answer, or the answer itself when that
 * is an integer:
 *
 * FN_ACQUIRE, FN_SHARED, FN_SEM_ACQUIRE (and FN_HANDOFF where the old lease has no key)
 *   PROTO_ACQ_GRANTED       {1, F}                 a free key set
 *   PROTO_ACQ_ADOPTED       {2, F, holds, pttl}    the lease's own key, adopted
 *   PROTO_ACQ_REFUSED       {0, pttl, F, holder}   held, or readers hold it, or a
 *                                                  writer waits, or other permits
 * FN_HANDOFF
 *   PROTO_HANDOFF_REPLACED  {3, F}                 the old lease's key now holds the
 *                                                  new value
 *   PROTO_HANDOFF_KEPT + c  {20 + c, pttl, F, old} the old lease keeps c >= 1 holds
 *   PROTO_HANDOFF_READER + an acquire's code       the old lease was a reader, gone
 * FN_RELEASE, FN_SEM_RELEASE
 *   PROTO_REL_DELETED       {1, pttl}              deleted (or left resting); a bare 1:
 *                                                  a reader's entry gone
 *   PROTO_REL_KEPT + c      {10 + c, pttl}         c >= 1 holds left
 *   PROTO_REL_NOT_OURS      0
 * FN_EXTEND, FN_SEM_EXTEND
 *   PROTO_EXT_EXTENDED      {1, F}, {1, F, left}   extended (left: of the hold's
 *                                                  bound); a permit's {1, F, slot}
 *   PROTO_EXT_PAST_BOUND    {3, F, left}           refused, past the hold's bound
 *   PROTO_EXT_REFUSED       {0, F}                 not the lease's, or it rests
 * FN_FORCE
 *   PROTO_FORCE_RESTING     2                      left resting for its lock-delay
 *   PROTO_FORCE_DELETED     1                      deleted
 *   PROTO_FORCE_NO_KEY      0                      no key
 * FN_SCAN                   {more, name1, ...}     PROTO_SCAN_MORE: the scan stopped
 *                                                  before its end, else PROTO_SCAN_DONE
 * SCRIPT_MACQUIRE           {1, f1..fn} | {0, pttl, f1..fn, holder1..n}  (multilock.c)
 * SCRIPT_MRELEASE           {1 | 0 | -1, names}    released, nothing of ours, a name
 *                                                  outside the scope  (multilock.c)
 * SCRIPT_MARKER             {state, pttl, nb}      the master's record (master.c,
 *                                                  trust.c, redlock.c)
 * SCRIPT_PROOF              {proven, F, pttl, history, why}  (resync.c)
 *
 * RAISE and MRAISE answer counters, INSPECT and SEM_INSPECT a table of values, UNWANT
 * ZREM's count: no codes.  scripts.h says what each script takes. */
#ifndef RL_PROTO_H
#define RL_PROTO_H

/* A code as Lua text: PROTO_S(PROTO_ACQ_GRANTED) is "1". */
#define PROTO_S_(x) #x
#define PROTO_S(x) PROTO_S_(x)

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

/* SCRIPT_SCAN: its first element. */
#define PROTO_SCAN_DONE 0
#define PROTO_SCAN_MORE 1

/* SCRIPT_MACQUIRE: its first element. */
#define PROTO_MACQ_REFUSED 0
#define PROTO_MACQ_GRANTED 1

/* SCRIPT_MRELEASE: its first element. */
#define PROTO_MREL_OUT_OF_SCOPE -1 /* nothing released */
#define PROTO_MREL_NONE 0          /* no name of the set was the lease's */
#define PROTO_MREL_RELEASED 1

/* SCRIPT_MARKER: the record's state, its first element (master_conn.seen_state, -1
 * there for unknown, and redlock_peer_view.state). */
#define PROTO_MARKER_UNMARKED 0
#define PROTO_MARKER_READY 1
#define PROTO_MARKER_QUARANTINED 2

/* SCRIPT_PROOF: its first element (proven), its fourth (history) and its fifth (why)
 * when only the master's clock keeps it out (its counters count, its expiry key not). */
#define PROTO_PROOF_UNPROVEN 0
#define PROTO_PROOF_PROVEN 1
#define PROTO_PROOF_NO_HISTORY 0
#define PROTO_PROOF_HISTORY 1
#define PROTO_PROOF_CLOCK "clock"

#endif
