/* scripts_sem_lua.h -- the Lua of a semaphore's permit: taken, released, extended
 * (scripts_sem.c runs each alone; SCRIPT_BATCH runs them among other operations,
 * SEM_BATCH_OPS below).  Included by scripts_sem.c and scripts_lock.c only. */
#ifndef RL_SCRIPTS_SEM_LUA_H
#define RL_SCRIPTS_SEM_LUA_H

#include "proto.h"

/* A semaphore's permit: slot `slot` of `permits` (keys "<pfx><i>"), taken like a lock
 * (K: the slot, the semaphore's record holding its permits).  The record lives at
 * least as long as any slot granted under it, so every grant of a name made while
 * another one's permit is valid agrees on the number of permits.  Refusals say why:
 * SCRIPTS_HOLDER_PERMITS "<n>" (another number of permits), or the holder's lease, or
 * (slot free for this lease elsewhere) SCRIPTS_HOLDER_MINE "<slot>"; a refusal by a
 * holder lists up to 8 free slots after this one (SCRIPTS_HOLDER_FREE "<i> <j>...").
 * "<pfx>h" (SEM_HELD) counts the slots held on this master, slot -> its expiry: a refusal
 * it says is one of a full semaphore answers an empty list at once, without a look at
 * every slot (issue 23: 1,023 EXISTS a refusal before).  It is never read for a grant;
 * only under a record this build made ("<N>c", made where there was none; a record
 * found is kept as it is) it decides the record's removal, and where a retry (scan)
 * looks for a slot its lease holds already: the count's members, not all N slots (no
 * record: no slot to look at): docs/DESIGN.md section 12.
 * A refusal drops the members whose score is past (strictly: the key of a member whose
 * score is now may live to the end of this millisecond). */
#define FN_SEM_ACQUIRE                                                               \
    "function(K, b, value, ttl, chan, origin, permits, slot, pfx, scan)\n"            \
    "  local rec = redis.call('GET', K[2])\n"                                         \
    "  local m, counted = sem_rec(rec)\n"                                                      \
    "  if m and m ~= permits then\n"                                                  \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', K[2]), cur(b), '" SCRIPTS_HOLDER_PERMITS "' .. m}\n" \
    "  end\n"                                                                         \
    "  local lease, n, s = untag(value), tonumber(permits), tonumber(slot)\n"          \
    "  if scan == '1' and rec then\n"                                                 \
    "    local is = function(i)\n"                                                    \
    "      return i ~= s and i < n and mine(redis.call('GET', pfx .. i), lease)\n"    \
    "    end\n"                                                                       \
    "    if counted then\n"                                                           \
    "      for _, j in ipairs(redis.call('ZRANGE', pfx .. '" SEM_HELD "', 0, -1)) do\n" \
    "        local i = tonumber(j)\n"                                                 \
    "        if i and is(i) then\n"                                                   \
    "          return {" PROTO_S(PROTO_ACQ_REFUSED) ", 0, cur(b), '" SCRIPTS_HOLDER_MINE "' .. i}\n"               \
    "        end\n"                                                                   \
    "      end\n"                                                                     \
    "    else\n"                                                                      \
    "      for i = 0, n - 1 do\n"                                                     \
    "        if is(i) then\n"                                                         \
    "          return {" PROTO_S(PROTO_ACQ_REFUSED) ", 0, cur(b), '" SCRIPTS_HOLDER_MINE "' .. i}\n"               \
    "        end\n"                                                                   \
    "      end\n"                                                                     \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  local v = redis.call('GET', K[1])\n"                                           \
    "  local r, p = nil, tonumber(ttl)\n"                                            \
    "  if not v then\n"                                                               \
    "    redis.call('SET', K[1], value, 'PX', ttl)\n"                                  \
    "    if chan then redis.call('PUBLISH', chan, '+' .. origin) end\n"               \
    "    r = {" PROTO_S(PROTO_ACQ_GRANTED) ", bump(b)}\n"                                                          \
    "  elseif mine(v, lease) then\n"                                                  \
    "    p = math.max(redis.call('PTTL', K[1]), p)\n"                                 \
    "    redis.call('SET', K[1], aux().adopted(value), 'PX', p)\n"                     \
    "    r = {" PROTO_S(PROTO_ACQ_ADOPTED) ", cur(b), 1, p}\n"                                                     \
    "  else\n"                                                                        \
    "    local h = pfx .. '" SEM_HELD "'\n"                                          \
    "    redis.call('ZREMRANGEBYSCORE', h, '-inf', '(' .. now_ms())\n"                \
    "    if redis.call('ZCARD', h) >= n then\n"                                       \
    "      return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', K[1]), cur(b), '" SCRIPTS_HOLDER_FREE "'}\n"  \
    "    end\n"                                                                       \
    "    local free = {}\n"                                                           \
    "    for j = 1, n - 1 do\n"                                                       \
    "      local i = (s + j) % n\n"                                                   \
    "      if redis.call('EXISTS', pfx .. i) == 0 then\n"                             \
    "        free[#free + 1] = i\n"                                                   \
    "        if #free >= 8 then break end\n"                                          \
    "      end\n"                                                                     \
    "    end\n"                                                                       \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', K[1]), cur(b), '" SCRIPTS_HOLDER_FREE "' .. table.concat(free, ' ')}\n" \
    "  end\n"                                                                         \
    "  if not rec then redis.call('SET', K[2], permits .. '" SEM_COUNTED "', 'PX', p)\n" \
    "  elseif redis.call('PTTL', K[2]) < p then redis.call('PEXPIRE', K[2], p) end\n"   \
    "  sem_held(pfx, s, p)\n"                                                         \
    "  outlive(p)\n"                                                                  \
    "  return r\n"                                                                    \
    "end"

/* sem_held(pfx, slot, p): slot is held on this master for p ms more (the count of
 * FN_SEM_ACQUIRE above); p nil: it is not held any more.  The set lives as long as its
 * longest slot.  A member's score is at least its key's expiry on every Redis: TIME is
 * read after the key's write (a script's time is frozen from Redis 7.0 only; NOW, read
 * by PRELUDE before the write, would not be enough before it).
 * sem_rec(v): the record's value v -> its number of permits (a string; v itself when
 * there is none) and whether it ends in SEM_COUNTED (made by a build whose every grant,
 * extension and release keeps the count). */
#define SEM_HELD "h"
#define SEM_COUNTED "c"
#define SEM_HELD_FN                                                                  \
    "local function sem_rec(v)\n"                                                  \
    "  if v and string.sub(v, -1) == '" SEM_COUNTED "' then return string.sub(v, 1, -2), true end\n" \
    "  return v, false\n"                                                           \
    "end\n"                                                                         \
    "local function sem_held(pfx, slot, p)\n"                                       \
    "  local h = pfx .. '" SEM_HELD "'\n"                                           \
    "  if not p then redis.call('ZREM', h, slot) return end\n"                      \
    "  local t = redis.call('TIME')\n"                                               \
    "  redis.call('ZADD', h, t[1] * 1000 + math.floor(t[2] / 1000) + p, slot)\n"    \
    "  if redis.call('PTTL', h) < p then redis.call('PEXPIRE', h, p) end\n"         \
    "end\n"

/* The slot of a semaphore that lease holds (K: the semaphore's record; pfx the slots'
 * key prefix), for a release (who: a lease, or an attempt's exact value) or an
 * extension: its key or nil, the number of permits, whether the record is counted.
 * Under a counted record every live slot is a member of the count, so the slots it
 * does not name are not read. */
#define SEM_FIND                                                                     \
    SEM_HELD_FN                                                                      \
    "local function sem_find(rec, pfx, who, exact)\n"                                \
    "  local m, counted = sem_rec(redis.call('GET', rec))\n"                          \
    "  local n = tonumber(m) or 0\n"                                                  \
    "  local lease, seen = untag(who), {}\n"                                          \
    "  local function is(i)\n"                                                        \
    "    local v = redis.call('GET', pfx .. i)\n"                                     \
    "    return (exact and v == who) or (not exact and mine(v, lease))\n"            \
    "  end\n"                                                                         \
    "  for _, j in ipairs(redis.call('ZRANGE', pfx .. '" SEM_HELD "', 0, -1)) do\n"  \
    "    local i = tonumber(j)\n"                                                     \
    "    if i and i < n and not seen[i] then\n"                                       \
    "      seen[i] = true\n"                                                          \
    "      if is(i) then return pfx .. i, n, counted end\n"                           \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  if counted then return nil, n, counted end\n"                                  \
    "  for i = 0, n - 1 do\n"                                                         \
    "    if not seen[i] and is(i) then return pfx .. i, n, counted end\n"             \
    "  end\n"                                                                         \
    "  return nil, n, counted\n"                                                      \
    "end\n"

/* K: the semaphore's record.  As FN_RELEASE, over the semaphore's slots; the record
 * goes with the last permit held on the master (no valid permit counts a master that
 * holds none), so that a new number of permits may be used at once.  Whether a slot is
 * left: the count's latest member first (a quick "yes"); then, under a counted record,
 * every member of the count in one EXISTS (every live slot is one of them), under
 * another record every slot in one EXISTS (a build before the count writes slots the
 * count does not name). */
#define FN_SEM_RELEASE                                                               \
    "function(K, who, chan, origin, pfx)\n"                                          \
    "  local k, n, counted = sem_find(K[1], pfx, who, string.find(who, '.', 1, true))\n" \
    "  if not k then return " PROTO_S(PROTO_REL_NOT_OURS) " end\n"                                                  \
    "  local p = redis.call('PTTL', k)\n"                                          \
    "  redis.call('DEL', k)\n"                                                        \
    "  sem_held(pfx, string.sub(k, #pfx + 1), nil)\n"                                \
    "  local left, h = false, pfx .. '" SEM_HELD "'\n"                             \
    "  local j = redis.call('ZRANGE', h, -1, -1)[1]\n"                             \
    "  if j and redis.call('EXISTS', pfx .. j) == 1 then left = true end\n"       \
    "  if counted and not left and j then\n"                                        \
    "    local ks = redis.call('ZRANGE', h, 0, -1)\n"                               \
    "    for i = 1, #ks do ks[i] = pfx .. ks[i] end\n"                             \
    "    left = redis.call('EXISTS', unpack(ks)) > 0\n"                            \
    "  end\n"                                                                     \
    "  for a = 0, (left or counted) and -1 or n - 1, 512 do\n"                   \
    "    local ks = {}\n"                                                          \
    "    for i = a, math.min(a + 511, n - 1) do ks[#ks + 1] = pfx .. i end\n"      \
    "    if redis.call('EXISTS', unpack(ks)) > 0 then left = true break end\n"     \
    "  end\n"                                                                      \
    "  if not left then redis.call('DEL', K[1]) end\n"                             \
    "  redis.call('PUBLISH', chan, origin)\n"                                         \
    "  return {" PROTO_S(PROTO_REL_DELETED) ", p}\n"                                                            \
    "end"

/* K: the semaphore's record.  As FN_EXTEND, over the semaphore's slots; the record
 * lives as long as the permit.  -> {1, F, slot} | {0, F}. */
#define FN_SEM_EXTEND                                                                \
    "function(K, b, lease, ttl, pfx)\n"                                              \
    "  local k = sem_find(K[1], pfx, lease, false)\n"                                 \
    "  if not k then return {" PROTO_S(PROTO_EXT_REFUSED) ", cur(b)} end\n"                                        \
    "  redis.call('PEXPIRE', k, ttl)\n"                                               \
    "  sem_held(pfx, string.sub(k, #pfx + 1), tonumber(ttl))\n"                     \
    "  outlive(ttl)\n"                                                                \
    "  if redis.call('PTTL', K[1]) < tonumber(ttl) then redis.call('PEXPIRE', K[1], ttl) end\n" \
    "  return {" PROTO_S(PROTO_EXT_EXTENDED) ", cur(b), tonumber(string.sub(k, #pfx + 1))}\n"                        \
    "end"

/* The permit's operations in SCRIPT_BATCH (as scripts_lock.c's BATCH_OPS: id, Lua name,
 * code, keys, arguments, function).  Each entry's function is made with the helpers it
 * calls, where its code first appears in a call. */
#define SEM_BATCH_OPS(X)                                                             \
    X(SCRIPT_SEM_ACQUIRE, S, 'S', 2, 9, "(function()\n" SEM_HELD_FN "return " FN_SEM_ACQUIRE "\nend)()") \
    X(SCRIPT_SEM_RELEASE, R, 'R', 1, 4, "(function()\n" SEM_FIND "return " FN_SEM_RELEASE "\nend)()") \
    X(SCRIPT_SEM_EXTEND, E, 'E', 1, 4, "(function()\n" SEM_FIND "return " FN_SEM_EXTEND "\nend)()")

#endif
