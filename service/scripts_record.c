/* scripts_record.c -- the scripts of a master's own record, sent as they are (no
 * record key added, no PRELUDE; only its RECORD_FIXED): SCRIPT_MARKER (its state, its
 * quarantine; master.c) and SCRIPT_PROOF (what a repair may learn from a peer;
 * resync.c). */
#include "scripts_record.h"

#include <stddef.h>

#include "proto.h"
#include "scripts_prelude.h"

static const char *const sources[SCRIPT__COUNT] = {
    /* The master's record and its quarantine, run at every (re)connect and whenever a
     * verdict is needed.  KEYS: record, quarantine key.  ARGV: action (check | mark |
     * quarantine | shorten | rejoin), the master's run id now, the delay in ms a restart
     * or wipe costs, the marking instance, and for rejoin the base a repair brings, for
     * shorten the delay that is left once every lock the master may have lost has expired.
     * A record written under another run id means the process restarted since it
     * was trusted and may have lost acknowledged writes: quarantined, the delay
     * counted from the restart (the caller subtracts the uptime), and kept if another
     * instance started it already.  A record made anew for a master that lost its own
     * (quarantine of a bare or damaged record) carries "lost": it has no history, and
     * counts for no repair until it is repaired itself.  shorten only ever lowers the
     * delay, and never that of a restart it finds in the same call.  rejoin ends a
     * quarantine whose key has expired: the base rises to what the repair proved, the
     * run id is recorded, "q" and "lost" go (docs/DESIGN.md §4).
     * -> {state (0 unmarked, 1 ready, 2 quarantined), quarantine pttl, nb (the number
     *    of counters: above 0 once anything was granted)} */
    [SCRIPT_MARKER] =
        "local mk, qk, act, run, delay = KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3])\n"
        "if delay < 1 then delay = 1 end\n"
        "local m = redis.call('HMGET', mk, 'run', 'nb', 'q', 'base')\n"
        "if not m[2] then\n"
        "  if act == 'mark' or act == 'quarantine' then\n"
        "    redis.call('DEL', mk)\n"
        "    redis.call('HSET', mk, 'cluster', ARGV[4], 'run', run, 'base', 0, 'nb', 0)\n"
        "  end\n"
        "  if act == 'mark' then return {" PROTO_S(PROTO_MARKER_READY) ", -2, 0} end\n"
        "  if act == 'quarantine' then\n"
        "    redis.call('HSET', mk, 'q', 1, 'lost', 1)\n"
        "    redis.call('SET', qk, 1, 'PX', delay)\n"
        "    return {" PROTO_S(PROTO_MARKER_QUARANTINED) ", redis.call('PTTL', qk), 0}\n"
        "  end\n"
        "  return {" PROTO_S(PROTO_MARKER_UNMARKED) ", -2, 0}\n"
        "end\n"
        "local nb = tonumber(m[2])\n"
        "if redis.call('HLEN', mk) < nb + " RECORD_FIXED " then\n"
        "  -- a damaged record is a lost one: it is quarantined like a wiped master\n"
        "  if act ~= 'quarantine' then return {" PROTO_S(PROTO_MARKER_UNMARKED) ", -2, 0} end\n"
        "  redis.call('DEL', mk)\n"
        "  redis.call('HSET', mk, 'cluster', ARGV[4], 'run', run, 'base', 0, 'nb', 0, 'q', 1, 'lost', 1)\n"
        "  redis.call('SET', qk, 1, 'PX', delay)\n"
        "  return {" PROTO_S(PROTO_MARKER_QUARANTINED) ", redis.call('PTTL', qk), 0}\n"
        "end\n"
        "local restarted = m[1] ~= run\n"
        "if restarted then\n"
        "  if redis.call('PTTL', qk) < delay then redis.call('SET', qk, 1, 'PX', delay) end\n"
        "  redis.call('HSET', mk, 'q', 1, 'run', run)\n"
        "  redis.call('HDEL', mk, 'clk')\n"
        "  m[3] = '1'\n"
        "end\n"
        "if act == 'distrust' then\n"
        "  -- its clock misbehaved: its locks may have expired early; like a loss, but its\n"
        "  -- counters are whole (it keeps its history): 'clk' says so to a repair's proof,\n"
        "  -- unless it is already out for a loss\n"
        "  if redis.call('PTTL', qk) < delay then redis.call('SET', qk, 1, 'PX', delay) end\n"
        "  if m[3] then redis.call('HSET', mk, 'q', 1) else redis.call('HSET', mk, 'q', 1, 'clk', 1) end\n"
        "  m[3] = '1'\n"
        "end\n"
        "if not m[3] then return {" PROTO_S(PROTO_MARKER_READY) ", -2, nb} end\n"
        "local q = redis.call('PTTL', qk)\n"
        "if act == 'shorten' and not restarted and q > 0 then\n"
        "  local left = math.max(tonumber(ARGV[5]) or q, 1)\n"
        "  if left < q then redis.call('PEXPIRE', qk, left) q = left end\n"
        "end\n"
        "if act == 'rejoin' and q < 0 then\n"
        "  local f = tonumber(ARGV[5])\n"
        "  if f > (tonumber(m[4]) or 0) then redis.call('HSET', mk, 'base', ARGV[5]) end\n"
        "  redis.call('HDEL', mk, 'q', 'lost', 'clk')\n"
        "  return {" PROTO_S(PROTO_MARKER_READY) ", -2, nb}\n"
        "end\n"
        "if q == -2 then q = 0 end\n"
        "return {" PROTO_S(PROTO_MARKER_QUARANTINED) ", q, nb}\n",
    /* What a repair may learn from a peer, proven in this same call (docs/DESIGN.md §4,
     * R-proof): KEYS record, expiry key.  The peer is proven when its record is there
     * and whole, carries neither "q" nor "lost", and was written under the run id the
     * process reports now (INFO, read here: a restart since it was trusted shows); one
     * out only for its clock ("q" with "clk") is proven for its counters alone (why
     * "clock"): its expiry key ran by that clock and is not answered.
     * -> {proven 0|1, its largest counter (base included; 0 without a whole record),
     *     the expiry key's pttl (-2: none), history 0|1 (a whole record without
     *     "lost": proven, or quarantined after a restart that kept its data), why} */
    [SCRIPT_PROOF] =
        "local m = redis.call('HMGET', KEYS[1], 'nb', 'q', 'lost', 'run', 'base', 'clk')\n"
        "if not m[1] then return {" PROTO_S(PROTO_PROOF_UNPROVEN) ", 0, -2, " PROTO_S(PROTO_PROOF_NO_HISTORY) ", 'no record'} end\n"
        "if redis.call('HLEN', KEYS[1]) < tonumber(m[1]) + " RECORD_FIXED " then\n"
        "  return {" PROTO_S(PROTO_PROOF_UNPROVEN) ", 0, -2, " PROTO_S(PROTO_PROOF_NO_HISTORY) ", 'damaged record'}\n"
        "end\n"
        "local t = tonumber(m[5]) or 0\n"
        "local kv = redis.call('HGETALL', KEYS[1])\n"
        "for i = 1, #kv, 2 do\n"
        "  if string.byte(kv[i], 1) == 98 then\n"
        "    local v = tonumber(kv[i + 1]) or 0\n"
        "    if v > t then t = v end\n"
        "  end\n"
        "end\n"
        "local x = redis.call('PTTL', KEYS[2])\n"
        "if m[3] then return {" PROTO_S(PROTO_PROOF_UNPROVEN) ", t, x, " PROTO_S(PROTO_PROOF_NO_HISTORY) ", 'lost its data'} end\n"
        "local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')\n"
        "if m[4] ~= run then return {" PROTO_S(PROTO_PROOF_UNPROVEN) ", t, x, " PROTO_S(PROTO_PROOF_HISTORY) ", 'restarted'} end\n"
        "-- out for its clock only: its counters are whole, and they count (its expiry key\n"
        "-- does not: it ran by that clock)\n"
        "if m[2] and m[6] then return {" PROTO_S(PROTO_PROOF_PROVEN) ", t, -2, " PROTO_S(PROTO_PROOF_HISTORY) ", '" PROTO_PROOF_CLOCK "'} end\n"
        "if m[2] then return {" PROTO_S(PROTO_PROOF_UNPROVEN) ", t, x, " PROTO_S(PROTO_PROOF_HISTORY) ", 'quarantined'} end\n"
        "return {" PROTO_S(PROTO_PROOF_PROVEN) ", t, x, " PROTO_S(PROTO_PROOF_HISTORY) ", ''}\n",
};

const char *scripts_record_source(int id)
{
    return id >= 0 && id < SCRIPT__COUNT ? sources[id] : NULL;
}
