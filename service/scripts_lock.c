/* scripts_lock.c -- the single-name lock scripts: exclusive and reentrant acquire
 * (FN_ACQUIRE), shared (FN_SHARED), raise, release, extend, inspect, handoff, force, a
 * writer's mark taken back (UNWANT), the scan of names, and SCRIPT_BATCH, which runs
 * many of the batchable ones in one call (BATCH_OPS: each one's code, keys and
 * arguments, declared once for the Lua and for scripts_lock_batch_code(); a permit's
 * acquire, release and extension join them from scripts_sem_lua.h, SEM_BATCH_OPS). */
#include "scripts_lock.h"

#include <stddef.h>

#include "proto.h"
#include "scripts_prelude.h"
#include "scripts_sem_lua.h"

/* The single-name operations, each written once as a Lua function of (key 1, key 2,
 * arg 1 .. arg 4).  Each is both a script of its own (called as the ids below) and
 * one entry of SCRIPT_BATCH, which runs many of them in one call.  Those that touch a
 * counter take its bucket as their first argument. */

/* value: the lease, or "<lease>.<tag>".  A free key is set and the counter bumped; a
 * key held by the same lease (an idempotent retry, or a reentrant one counting a hold
 * more) is adopted: marked so that no attempt's clean-up deletes it, neither the one
 * that set it nor this one, and it keeps the later of its expiry and ttl (a re-entry
 * never shortens a hold, nor passes its bound), which it answers (the holder's part:
 * its lock-delay aside), with the token the key was granted with (its '@F'; the
 * counter as it stands for a value without one).
 * A fresh grant stamps the value (stamp()).  A refusal names the holding lease, or
 * SCRIPTS_HOLDER_RESTING for a lock that rests (its own lease included), so that a
 * round can tell "held" from votes split between attempts.  ttl: what the key lives,
 * the lock-delay included (the service adds it).  intent: > 0 a refused attempt marks
 * its writer waiting (wants()); anything but "0" (the service sends "-1" once its request
 * marked any master, and a handoff sends none) has a fresh grant take that mark back:
 * with "0" no attempt of the request ever wrote one, so the grant pays for no ZREM.  A
 * held key is refused before the readers are looked at (no EXISTS on a refusal). */
#define FN_ACQUIRE                                                                   \
    "function(K, b, value, ttl, chan, origin, intent, reentrant)\n"                 \
    "  local key, lease = K[1], untag(value)\n"                                      \
    "  local v = redis.call('GET', key)\n"                                            \
    "  if mine(v, lease) and not ext().rests(key, v) then\n"                                \
    "    local d = ext().delay(v)\n"                                                        \
    "    local c = holds(v)\n"                                                        \
    "    local p = math.max(redis.call('PTTL', key), tonumber(ttl) - ext().delay(value) + d)\n" \
    "    if reentrant == '1' then c = c + 1 end\n"                                    \
    "    local nv, f = ext().carry(v, aux().counted(aux().adopted(value), c))\n"             \
    "    p = ext().cap(nv, p)\n"                                                            \
    "    redis.call('SET', key, nv, 'PX', p)\n"                                       \
    "    outlive(p)\n"                                                                \
    "    return {" PROTO_S(PROTO_ACQ_ADOPTED) ", f or cur(b), c, p - d}\n"                                         \
    "  end\n"                                                                         \
    "  if v then\n"                                                                   \
    "    if intent and tonumber(intent) > 0 then aux().wants(K[3], lease, nil, intent) end\n" \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', key), cur(b), ext().holder(key, v)}\n"         \
    "  end\n"                                                                         \
    "  local n, longest, now = live(K[2])\n"                                          \
    "  if n > 0 then\n"                                                               \
    "    if intent and tonumber(intent) > 0 then aux().wants(K[3], lease, now, intent) end\n" \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", longest, cur(b), '" SCRIPTS_HOLDER_SHARED "'}\n"                 \
    "  end\n"                                                                         \
    "  local f = bump(b)\n"                                                           \
    "  redis.call('SET', key, stamp(value, f), 'PX', ttl)\n"                          \
    "  outlive(ttl)\n"                                                                \
    "  if K[3] and intent ~= '0' then redis.call('ZREM', K[3], lease) end\n"          \
    "  if chan then redis.call('PUBLISH', chan, '+' .. origin) end\n"                 \
    "  return {" PROTO_S(PROTO_ACQ_GRANTED) ", f}\n"                                                               \
    "end"

#define FN_RAISE                                                                     \
    "function(_, b, token)\n"                                                     \
    "  local f, t = cur(b), tonumber(token)\n"                                        \
    "  if f < t then\n"                                                               \
    "    aux().setc(b, token)\n"                                                      \
    "    return t\n"                                                                  \
    "  end\n"                                                                         \
    "  return f\n"                                                                    \
    "end"

/* who: a lease (the client's release: any tag; one reentrant hold less), "<lease>*<t>"
 * (the service finishing a release: the lease's holds lowered to t, idempotent, 0
 * deletes whatever the count; t < 0 deletes a single hold and leaves more alone) or
 * "<lease>.<tag>" (a failed attempt's clean-up: only the key that attempt wrote).  A
 * found key answers what is left of its expiry: how long a master that did not answer
 * may still hold it (docs/DESIGN.md, section 1).  chan: the channel waiters on other
 * instances follow (see notify.h); publishing to a channel nobody follows costs next
 * to nothing.  origin: the releasing instance, which woke its own waiters already and
 * ignores its own message.  A who ending in '~' is a hold that ended without its
 * holder's word (docs/DESIGN.md section 14): a lock with a lock-delay is not deleted
 * but left resting (SCRIPTS_HOLDER_RESTING) for the delay, or what is left of it. */
#define FN_RELEASE                                                                   \
    "function(K, who, chan, origin)\n"                                               \
    "  local key, to, rest = K[1], nil, false\n"                                   \
    "  if string.byte(who, -1) == 126 then rest, who = true, string.sub(who, 1, -2) end\n" \
    "  local star = string.find(who, '*', 1, true)\n"                              \
    "  if star then to, who = tonumber(string.sub(who, star + 1)), string.sub(who, 1, star - 1) end\n" \
    "  local v = redis.call('GET', key)\n"                                         \
    "  local client = v and not string.find(who, '.', 1, true) and ours(key, v, who)\n" \
    "  if client then\n"                                                           \
    "    local h = holds(v)\n"                                                     \
    "    local c = h - 1\n"                                                        \
    "    if to then c = to < 0 and (h > 1 and h or 0) or math.min(h, to) end\n"    \
    "    if c > 0 then\n"                                                          \
    "      if c < h then redis.call('SET', key, aux().counted(v, c), 'KEEPTTL') end\n"   \
    "      return {" PROTO_S(PROTO_REL_KEPT) " + c, redis.call('PTTL', key)}\n"                             \
    "    end\n"                                                                    \
    "  end\n"                                                                      \
    "  if client or ext().same(v, who) then\n"                                           \
    "    local p = redis.call('PTTL', key)\n"                                      \
    "    local d = rest and ext().delay(v) or 0\n"                                       \
    "    if d > 0 then\n"                                                          \
    "      redis.call('SET', key, '" SCRIPTS_HOLDER_RESTING "', 'PX', math.min(p, d))\n" \
    "    else\n"                                                                   \
    "      redis.call('DEL', key)\n"                                               \
    "    end\n"                                                                    \
    "    redis.call('PUBLISH', chan, origin)\n"                                    \
    "    return {" PROTO_S(PROTO_REL_DELETED) ", p}\n"                                                          \
    "  end\n"                                                                      \
    "  if aux().unshare(K[2], K[3], who) then\n"                                   \
    "    redis.call('PUBLISH', chan, origin)\n"                                    \
    "    return " PROTO_S(PROTO_REL_DELETED) "\n"                                                               \
    "  end\n"                                                                      \
    "  return " PROTO_S(PROTO_REL_NOT_OURS) "\n"                                                                 \
    "end"

/* set: "<prefix>#set:<lease>": a name of a multi-name set keeps the set alive as long
 * as the name, so that the set's release still finds it.  A lock with a lock-delay
 * keeps it on top of the ttl, and is not the lease's any more once it rests; one with
 * a bound (docs/DESIGN.md section 14) is refused an extension past it ({3, F, what is
 * left}), or, asked with a negative ttl (a streamed hold's), extended up to it; its
 * answer says what is left of the bound ({1, F, left}).  A key that counts more than
 * one hold (re-entered) keeps the later of its expiry and the new one: the lease's other
 * holds were promised it, and the extension cannot tell whose it is (a streamed nested
 * hold's keeper, a PATCH by the lease; docs/DESIGN.md section 12). */
#define FN_EXTEND                                                                    \
    "function(K, b, lease, ttl)\n"                                                   \
    "  local key, set = K[1], K[2]\n"                                                 \
    "  local v = redis.call('GET', key)\n"                                            \
    "  ttl = tonumber(ttl)\n"                                                         \
    "  local px, capped, left = math.abs(ttl), ttl < 0, nil\n"                        \
    "  if mine(v, lease) then\n"                                                      \
    "    if string.find(v, '[~^]') then\n"                                            \
    "      local h = ext().split(v)\n"                                                      \
    "      local d = tonumber(string.match(h, '~(%d+)')) or 0\n"                      \
    "      if d > 0 and redis.call('PTTL', key) <= d then return {" PROTO_S(PROTO_EXT_REFUSED) ", cur(b)} end\n"   \
    "      local t = tonumber(string.match(h, '%^(%d+)'))\n"                          \
    "      if t then\n"                                                               \
    "        left = t - now_ms()\n"                                                   \
    "        if left < px and (not capped or left < 1) then\n"                        \
    "          return {" PROTO_S(PROTO_EXT_PAST_BOUND) ", cur(b), math.max(left, 0)}\n"                               \
    "        end\n"                                                                   \
    "        px = math.min(px, left)\n"                                               \
    "      end\n"                                                                     \
    "      px = px + d\n"                                                             \
    "    end\n"                                                                       \
    "    if holds(v) > 1 then\n"                                                      \
    "      local p = redis.call('PTTL', key)\n"                                       \
    "      if p > px then px = p end\n"                                               \
    "    end\n"                                                                       \
    "    redis.call('PEXPIRE', key, px)\n"                                            \
    "    outlive(px)\n"                                                               \
    "    local p = redis.call('PTTL', set)\n"                                         \
    "    if p > 0 and p < px then redis.call('PEXPIRE', set, px) end\n"               \
    "    if left then return {" PROTO_S(PROTO_EXT_EXTENDED) ", cur(b), left} end\n"                                 \
    "    return {" PROTO_S(PROTO_EXT_EXTENDED) ", cur(b)}\n"                                                        \
    "  end\n"                                                                         \
    "  if K[3] then\n"                                                                \
    "    local _, _, now = live(K[3])\n"                                              \
    "    if now and redis.call('ZSCORE', K[3], lease) then\n"                         \
    "      redis.call('ZADD', K[3], now + px, lease)\n"                                \
    "      aux().keep(K[3], K[4], px)\n"                                              \
    "      outlive(px)\n"                                                             \
    "      return {" PROTO_S(PROTO_EXT_EXTENDED) ", cur(b)}\n"                                                      \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  return {" PROTO_S(PROTO_EXT_REFUSED) ", cur(b)}\n"                                                          \
    "end"

/* The lease part of the value (never its tag); the name's counter as it stands; the
 * owner the grant was made with ("" if none); readers; holds; the token the key was
 * granted with (its '@F', 0 if none); for a lock with a lock-delay, or resting, how
 * long the key still keeps the name from others (0 for any other).  A lock with a
 * lock-delay answers its holder's part of the pttl (what is left beyond the delay);
 * one that rests answers no holder. */
#define FN_INSPECT                                                                   \
    "function(K, b)\n"                                                               \
    "  local key = K[1]\n"                                                            \
    "  local v, o = redis.call('GET', key), ''\n"                                     \
    "  local p, h, f, rest = redis.call('PTTL', key), 0, 0, 0\n"                      \
    "  if v then\n"                                                                   \
    "    local hd\n"                                                                  \
    "    hd, o = ext().split(v)\n"                                                          \
    "    o = string.sub(o, 2)\n"                                                      \
    "    f = tonumber(string.match(hd, '@(%d+)')) or 0\n"                             \
    "    local d = ext().delay(v)\n"                                                        \
    "    if d > 0 or v == '" SCRIPTS_HOLDER_RESTING "' then rest = p end\n"           \
    "    if v == '" SCRIPTS_HOLDER_RESTING "' or (d > 0 and p <= d) then\n"           \
    "      v, o, p, f = false, '', -2, 0\n"                                           \
    "    else\n"                                                                      \
    "      h = holds(v)\n"                                                            \
    "      p = p - d\n"                                                               \
    "      v = untag(v)\n"                                                            \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  local n, longest = live(K[2])\n"                                               \
    "  return {v, p, cur(b), o, n, longest, h, f, rest}\n"                            \
    "end"

/* A shared grant.  K: lock, readers (a sorted set: lease -> expiry, in the master's
 * own clock), their tags (a hash: lease -> the tag of the attempt that added it, '!'
 * once adopted by another attempt), the writers waiting (a sorted set: lease -> until
 * when).  Refused while an exclusive holder holds the name (that holder's lease) or a
 * writer waits (SCRIPTS_HOLDER_WRITER): writers do not starve behind readers.  The
 * token is the name's counter as it stands: no bump.  A reader already in keeps the
 * later of its expiry and the new one (a re-entry never shortens a hold).  The tags of
 * readers that expired without a release are dropped once 16 have gathered. */
#define FN_SHARED                                                                    \
    "function(K, b, value, ttl, chan, origin)\n"                                     \
    "  local lease = untag(value)\n"                                                  \
    "  local n, _, now = live(K[2])\n"                                                \
    "  local s = now and redis.call('ZSCORE', K[2], lease)\n"                        \
    "  if s then\n"                                                                   \
    "    s = math.max(tonumber(s), now + tonumber(ttl))\n"                            \
    "    redis.call('ZADD', K[2], s, lease)\n"                                         \
    "    redis.call('HSET', K[3], lease, '!')\n"                                       \
    "    aux().keep(K[2], K[3], s - now)\n"                                           \
    "    outlive(s - now)\n"                                                          \
    "    return {" PROTO_S(PROTO_ACQ_ADOPTED) ", cur(b), 1, s - now}\n"                                            \
    "  end\n"                                                                         \
    "  local v = redis.call('GET', K[1])\n"                                           \
    "  if v then return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', K[1]), cur(b), ext().holder(K[1], v)} end\n" \
    "  local w, longest = live(K[4])\n"                                               \
    "  if w > 0 then return {" PROTO_S(PROTO_ACQ_REFUSED) ", longest, cur(b), '" SCRIPTS_HOLDER_WRITER "'} end\n" \
    "  now = now or now_ms()\n"                                                       \
    "  if redis.call('HLEN', K[3]) > n + 16 then\n"                                \
    "    for _, l in ipairs(redis.call('HKEYS', K[3])) do\n"                       \
    "      if not redis.call('ZSCORE', K[2], l) then redis.call('HDEL', K[3], l) end\n" \
    "    end\n"                                                                    \
    "  end\n"                                                                      \
    "  redis.call('ZADD', K[2], now + tonumber(ttl), lease)\n"                         \
    "  redis.call('HSET', K[3], lease, string.sub(value, #lease + 2))\n"               \
    "  aux().keep(K[2], K[3], ttl)\n"                                                 \
    "  outlive(ttl)\n"                                                                \
    "  if chan then redis.call('PUBLISH', chan, '+' .. origin) end\n"                 \
    "  return {" PROTO_S(PROTO_ACQ_GRANTED) ", cur(b)}\n"                                                          \
    "end"

/* A release that hands the lock straight to the next waiter: where the old lease
 * holds the key, the new value replaces it ({3, F} after a bump); elsewhere it is the
 * acquire above for the new value.  One operation instead of a release and then an
 * acquire, and the lock is never free in between for another to take. */
#define FN_HANDOFF                                                                   \
    "function(K, b, old, value, ttl, chan, origin)\n"                                \
    "  local key = K[1]\n"                                                            \
    "  local v = redis.call('GET', key)\n"                                            \
    "  local was = ours(key, v, old)\n"                                               \
    "  if was and holds(v) > 1 then\n"                                                 \
    "    local c = holds(v) - 1\n"                                                    \
    "    redis.call('SET', key, aux().counted(v, c), 'KEEPTTL')\n"                    \
    "    return {" PROTO_S(PROTO_HANDOFF_KEPT) " + c, redis.call('PTTL', key), cur(b), old}\n"                     \
    "  end\n"                                                                         \
    "  if was then\n"                                                                 \
    "    local f = bump(b)\n"                                                         \
    "    redis.call('SET', key, stamp(value, f), 'PX', ttl)\n"                        \
    "    outlive(ttl)\n"                                                              \
    "    if K[4] then redis.call('ZREM', K[4], untag(value)) end\n"                                 \
    "    if chan then redis.call('PUBLISH', chan, '+' .. origin) end\n"               \
    "    return {" PROTO_S(PROTO_HANDOFF_REPLACED) ", f}\n"                                                             \
    "  end\n"                                                                         \
    "  local acquire = " FN_ACQUIRE "\n"                                              \
    "  local gone = aux().unshare(K[2], K[3], old)\n"                                 \
    "  if gone then redis.call('PUBLISH', chan, origin) end\n"                         \
    "  local r = acquire({key, K[2], K[4]}, b, value, ttl, chan, origin)\n"           \
    "  if gone then r[1] = r[1] + " PROTO_S(PROTO_HANDOFF_READER) " end\n"                                           \
    "  return r\n"                                                                    \
    "end"

/* A release whatever the lease (DELETE ?force=true, for an admin token): the holder
 * is broken, and the fencing token is what protects the resource from it
 * (docs/DESIGN.md, section 5a).  Announced like any release, so waiters wake.  A lock
 * with a lock-delay whose holder's part is not over is left resting for the delay
 * (2); one that rests already is freed (1): a second force ends the rest. */
#define FN_FORCE                                                                     \
    "function(K, chan, origin)\n"                                                    \
    "  local v = redis.call('GET', K[1])\n"                                          \
    "  local d = v and ext().delay(v) or 0\n"                                              \
    "  if d > 0 and redis.call('PTTL', K[1]) > d then\n"                             \
    "    redis.call('DEL', unpack(K, 2))\n"                                          \
    "    redis.call('SET', K[1], '" SCRIPTS_HOLDER_RESTING "', 'PX', d)\n"           \
    "    outlive(d)\n"                                                               \
    "    redis.call('PUBLISH', chan, origin)\n"                                      \
    "    return " PROTO_S(PROTO_FORCE_RESTING) "\n"                                                                 \
    "  end\n"                                                                        \
    "  if redis.call('DEL', unpack(K)) > 0 then\n"                                                   \
    "    redis.call('PUBLISH', chan, origin)\n"                                       \
    "    return " PROTO_S(PROTO_FORCE_DELETED) "\n"                                                                  \
    "  end\n"                                                                         \
    "  return " PROTO_S(PROTO_FORCE_NO_KEY) "\n"                                                                    \
    "end"

/* A waiting writer's mark (K: the name's intents) is taken back: its writer was
 * granted, gave up, hung up or reached its deadline (docs/DESIGN.md, section 12). */
#define FN_UNWANT                                                                    \
    "function(K, lease)\n"                                                           \
    "  return redis.call('ZREM', K[1], lease)\n"                                     \
    "end"

/* The names of the lock keys matching pattern (keys_scan_pattern, keys.h), the first
 * skip bytes (the key prefix) cut: at most `calls` SCAN calls of COUNT 1000 and at most
 * limit names, so the cost on the master is bounded.  {more, name1, name2, ...}: more
 * is 1 when the scan stopped before its end (names may be missing), else 0. */
#define FN_SCAN                                                                      \
    "function(_, pattern, skip, limit, calls)\n"                                  \
    "  local out, cursor, n = {" PROTO_S(PROTO_SCAN_DONE) "}, '0', tonumber(calls)\n"                            \
    "  local lim, sk = tonumber(limit), tonumber(skip)\n"                             \
    "  repeat\n"                                                                      \
    "    local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000)\n"     \
    "    cursor, n = r[1], n - 1\n"                                                   \
    "    for _, k in ipairs(r[2]) do\n"                                               \
    "      if #out - 1 >= lim then out[1] = " PROTO_S(PROTO_SCAN_MORE) " break end\n"                            \
    "      out[#out + 1] = string.sub(k, sk + 1)\n"                                   \
    "    end\n"                                                                       \
    "  until cursor == '0' or n <= 0 or out[1] == " PROTO_S(PROTO_SCAN_MORE) "\n"                                \
    "  if cursor ~= '0' then out[1] = " PROTO_S(PROTO_SCAN_MORE) " end\n"                                        \
    "  return out\n"                                                                  \
    "end"

/* The operations SCRIPT_BATCH runs, declared once for both sides: the script's id, its
 * code in a batch (a Lua name, and the same as a C char), its keys and its arguments
 * (after the record's key and the clock window), its function.  SCRIPT_BATCH's Lua
 * (BATCH_LUA: "  if c == 'a' then op = {3, 7, function(...) ... end} end", an
 * operation's entry made where its code first appears in the call: a batch usually
 * holds one or two kinds, and pays for no other's closure) and
 * scripts_lock_batch_code() (BATCH_SHAPE) are both made from it. */
#define BATCH_OPS(X)                                                                 \
    X(SCRIPT_ACQUIRE, a, 'a', 3, 7, FN_ACQUIRE)                                      \
    X(SCRIPT_RAISE, f, 'f', 0, 2, FN_RAISE)                                          \
    X(SCRIPT_RELEASE, r, 'r', 3, 3, FN_RELEASE)                                      \
    X(SCRIPT_EXTEND, e, 'e', 4, 3, FN_EXTEND)                                        \
    X(SCRIPT_INSPECT, i, 'i', 2, 1, FN_INSPECT)                                      \
    X(SCRIPT_HANDOFF, h, 'h', 4, 6, FN_HANDOFF)                                      \
    X(SCRIPT_SHARED, s, 's', 4, 5, FN_SHARED)
#define BATCH_LUA(id, name, code, nkeys, nargs, fn)                                  \
    "    if c == '" #name "' then op = {" #nkeys ", " #nargs ", " fn "} end\n"
#define BATCH_SHAPE(id, name, code, nkeys, nargs, fn) [id] = {code, nkeys, nargs},

static const char *const sources[SCRIPT__COUNT] = {
    [SCRIPT_ACQUIRE] = ALONE(FN_ACQUIRE),
    [SCRIPT_RAISE] = ALONE(FN_RAISE),
    [SCRIPT_RELEASE] = ALONE(FN_RELEASE),
    [SCRIPT_EXTEND] = ALONE(FN_EXTEND),
    [SCRIPT_INSPECT] = ALONE(FN_INSPECT),
    [SCRIPT_HANDOFF] = ALONE(FN_HANDOFF),
    [SCRIPT_FORCE] = ALONE(FN_FORCE),
    [SCRIPT_SCAN] = ALONE(FN_SCAN),
    [SCRIPT_SHARED] = ALONE(FN_SHARED),
    [SCRIPT_UNWANT] = ALONE(FN_UNWANT),
    /* ARGV: for each operation its code (BATCH_OPS) and its arguments; KEYS: the
     * master's record, then each operation's keys in the same order.  Every operation
     * runs under pcall, so one that fails (a foreign key of the wrong type, say)
     * answers with its own error and the others go on; the reply holds the time it
     * ran at (proto.h), then each operation's reply in turn.  An operation's entry
     * ({keys, arguments, function}) is made where its code first appears, and kept in
     * ops for the rest of the call. */
    [SCRIPT_BATCH] =
        PRELUDE
        "local ops, r, k, i, n = {}, {NOW or " PROTO_S(PROTO_TIME_NONE) "}, 2, 1, #ARGV\n"
        "while i <= n do\n"
        "  local c = ARGV[i]\n"
        "  local op = ops[c]\n"
        "  if not op then\n"
        BATCH_OPS(BATCH_LUA)
        SEM_BATCH_OPS(BATCH_LUA)
        "    if not op then return redis.error_reply('ERR redlockd batch: unknown operation') end\n"
        "    ops[c] = op\n"
        "  end\n"
        "  local ok, v = pcall(op[3], {unpack(KEYS, k, k + op[1] - 1)}, unpack(ARGV, i + 1, i + op[2]))\n"
        "  if not ok and (type(v) ~= 'table' or not v.err) then v = {err = tostring(v)} end\n"
        "  r[#r + 1] = v\n"
        "  k = k + op[1]\n"
        "  i = i + 1 + op[2]\n"
        "end\n"
        "settle()\n"
        "return r\n",
};

const char *scripts_lock_source(int id)
{
    return id >= 0 && id < SCRIPT__COUNT ? sources[id] : NULL;
}

char scripts_lock_batch_code(int id, int nkeys, int nargs)
{
    /* The ops table of SCRIPT_BATCH, from the same list. */
    static const struct {
        char code;
        int nkeys, nargs;
    } shapes[SCRIPT__COUNT] = {BATCH_OPS(BATCH_SHAPE) SEM_BATCH_OPS(BATCH_SHAPE)};
    if (id < 0 || id >= SCRIPT__COUNT || shapes[id].nkeys != nkeys || shapes[id].nargs != nargs)
        return 0;
    return shapes[id].code;
}
