/* scripts.c -- Lua sources of the scripts in scripts.h.
 *
 * Every script a lock operation sends starts by reading the master's own record,
 * "<prefix>#master" (KEYS[1]): a master that lost it, or part of it (FLUSHALL, FLUSHDB,
 * keys or fields deleted), or that is quarantined answers an error before doing
 * anything, so no instance counts it again until it has sat out its delay and been
 * repaired.  docs/DESIGN.md gives the argument for each rule.
 *
 * The lock key holds the lease (one the service made for the request) or
 * "<lease>.<tag>" (one the client chose; the tag names the attempt, '.' is not a lease
 * character), or "<lease>.<tag>\n<owner>" (a grant with an owner always carries a tag;
 * an owner is printable ASCII, never '\n'), with a PX expiry: the clean-up of a failed
 * attempt deletes only what that attempt wrote (owner included); a release or extend by
 * the client matches the lease whatever the tag and owner.
 *
 * Fencing counters live in the record too, one per bucket of names (a name's bucket is
 * its hash modulo KEYS_BUCKETS (keys.h), chosen by the service, field "b<k>"): nothing per
 * name outlives its lock, and the master's state stays bounded whatever the number of
 * names.  A bucket's counter only grows, so every name's tokens do.  The record's base
 * (set by a repair) stands in for counters older than what the master forgot. */
#include "scripts.h"

#include "keys.h"
#include "proto.h"

/* Fields of the record besides the buckets: cluster, run, base, nb (the number of
 * bucket fields).  A record with fewer fields than nb + RECORD_FIXED lost some. */
#define RECORD_FIXED "4"

/* settle() keeps "<prefix>#expiry" this much past the longest ttl of the call when it
 * has to lengthen it, so that the calls of the next second (their ttls alike) find it
 * long enough and only read its PTTL (docs/DESIGN.md §4, R-expiry: longer is safe). */
#define SCRIPTS_SETTLE_SLACK_MS "1000"

/* Reads the record and defines, for the operations below:
 * cur(b)    the bucket's effective counter: max(its value, base)
 * bump(b)   a grant: cur + 1 (a new bucket field is counted in nb)
 * mine(v, l)  whether lock value v belongs to lease l (any attempt's tag)
 * untag(v)  the lease part of a lock value
 * (the helpers a plain cycle runs look for single characters with plain finds, not
 * patterns: a pattern class walks the value character by character in Lua's matcher)
 * adopted(v)  the value an attempt writes where it finds its lease already (another
 *           attempt's key, adopted): marked '!' (before the owner, if any), so that no
 *           attempt's clean-up, which deletes only its exact value, ever takes a key
 *           that another attempt may have counted on (docs/DESIGN.md, section 5)
 *
 * and, for what a lock value carries besides (docs/DESIGN.md section 14): in its header
 * (before the owner) '~<ms>' its lock-delay, '^<ms>' its bound (max_hold_ms as sent;
 * the deadline in this master's clock once written), '@<F>' the master's counter after
 * the bump of the grant that wrote it (the token check reads it):
 * stamp(value, f)  what a fresh grant writes: its deadline made absolute, '@f' added
 * and, made once per call and only where needed (ext(): a lock's hot path pays for none
 * of these closures):
 * split(v)  the header and the rest ('' or "\n<owner>")
 * delay(v)  the lock-delay the value carries (0: none)
 * rests(key, v)  the lock rests: a resting key (SCRIPTS_HOLDER_RESTING, left by a force
 *           or a failed hold), or its holder's part (PTTL - delay) is over
 * holder(key, v)  what a refusal names: the lease, or SCRIPTS_HOLDER_RESTING
 * carry(v, nv)  what an adoption writes (nv, the new attempt's value): the old value's
 *           lock-delay, deadline and counter kept (a hold keeps what its grant had:
 *           its lock-delay, its bound and its token)
 * cap(v, p) p, never past the value's deadline (plus its delay)
 * same(v, who)  v is exactly what the attempt `who` wrote (its stamps aside) */
#define PRELUDE                                                                      \
    "local W = table.remove(ARGV, 1) or ''\n"                                         \
    "local M = redis.call('HMGET', KEYS[1], 'base', 'q', 'nb')\n"                    \
    "if not M[1] or redis.call('HLEN', KEYS[1]) < (tonumber(M[3]) or 0) + " RECORD_FIXED " then\n" \
    "  return redis.error_reply('REDLOCKD_UNMARKED this master lost its record (wiped, "\
    "restarted empty or damaged)')\n"                                                  \
    "end\n"                                                                            \
    "if M[2] then return redis.error_reply('REDLOCKD_QUARANTINED this master is "     \
    "quarantined') end\n"                                                              \
    "local NOW\n"                                                                      \
    "if W ~= '' then\n"                                                               \
    "  local t = redis.call('TIME')\n"                                                \
    "  NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"             \
    "  local c = string.find(W, ':', 1, true)\n"                                      \
    "  if not c or NOW < tonumber(string.sub(W, 1, c - 1)) or NOW > tonumber(string.sub(W, c + 1)) then\n" \
    "    return redis.error_reply('" SCRIPT_ERR_CLOCK " ' .. NOW .. ' ' .. W)\n"      \
    "  end\n"                                                                         \
    "end\n"                                                                           \
    "local base = tonumber(M[1])\n"                                                    \
    "local XT = 0\n"                                                                  \
    "local function outlive(ttl)\n"                                                  \
    "  local t = tonumber(ttl)\n"                                                    \
    "  if t and t > XT then XT = t end\n"                                            \
    "end\n"                                                                           \
    "local function settle()\n"                                                      \
    "  if XT <= 0 then return end\n"                                                 \
    "  local xk = string.gsub(KEYS[1], '" KEYS_RECORD "$', '" KEYS_EXPIRY "')\n"     \
    "  if redis.call('PTTL', xk) < XT then redis.call('SET', xk, '1', 'PX', XT + " SCRIPTS_SETTLE_SLACK_MS ") end\n" \
    "end\n"                                                                           \
    "local function cur(b)\n"                                                          \
    "  local f = tonumber(redis.call('HGET', KEYS[1], b)) or 0\n"                      \
    "  if f < base then return base end\n"                                             \
    "  return f\n"                                                                     \
    "end\n"                                                                            \
    "local function setc(b, f)\n"                                                      \
    "  if redis.call('HSET', KEYS[1], b, f) == 1 then redis.call('HINCRBY', KEYS[1], 'nb', 1) end\n" \
    "end\n"                                                                            \
    "local function bump(b)\n"                                                         \
    "  local f = redis.call('HINCRBY', KEYS[1], b, 1)\n"                               \
    "  if f == 1 then redis.call('HINCRBY', KEYS[1], 'nb', 1) end\n"                   \
    "  if f <= base then f = base + 1 redis.call('HSET', KEYS[1], b, f) end\n"         \
    "  return f\n"                                                                     \
    "end\n"                                                                            \
    "local function mine(v, l)\n"                                                      \
    "  if not v then return false end\n"                                               \
    "  if v == l then return true end\n"                                               \
    "  local c = string.byte(v, #l + 1)\n"                                             \
    "  return (c == 46 or c == 64) and string.find(v, l, 1, true) == 1\n"              \
    "end\n"                                                                            \
    "local function untag(v)\n"                                                        \
    "  local d, a = string.find(v, '.', 1, true), string.find(v, '@', 1, true)\n"      \
    "  if a and (not d or a < d) then d = a end\n"                                     \
    "  if d then return string.sub(v, 1, d - 1) end\n"                                 \
    "  return v\n"                                                                     \
    "end\n"                                                                            \
    "local function now_ms()\n"                                                      \
    "  if NOW then return NOW end\n"                                                  \
    "  local t = redis.call('TIME')\n"                                                \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"            \
    "end\n"                                                                           \
    "local XL\n"                                                                      \
    "local function ext()\n"                                                         \
    "  if XL then return XL end\n"                                                   \
    "  local x = {}\n"                                                               \
    "  function x.split(v)\n"                                                        \
    "    local nl = string.find(v, '\\n', 1, true)\n"                                 \
    "    if nl then return string.sub(v, 1, nl - 1), string.sub(v, nl) end\n"        \
    "    return v, ''\n"                                                             \
    "  end\n"                                                                        \
    "  function x.delay(v)\n"                                                        \
    "    if not string.find(v, '~', 1, true) then return 0 end\n"                    \
    "    return tonumber(string.match(x.split(v), '~(%d+)')) or 0\n"                 \
    "  end\n"                                                                        \
    "  function x.rests(key, v)\n"                                                   \
    "    if v == '" SCRIPTS_HOLDER_RESTING "' then return true end\n"                \
    "    local d = x.delay(v)\n"                                                     \
    "    return d > 0 and redis.call('PTTL', key) <= d\n"                            \
    "  end\n"                                                                        \
    "  function x.holder(key, v)\n"                                                  \
    "    if x.rests(key, v) then return '" SCRIPTS_HOLDER_RESTING "' end\n"          \
    "    return untag(v)\n"                                                          \
    "  end\n"                                                                        \
    "  function x.deadlines(h)\n"                                                    \
    "    if not string.find(h, '^', 1, true) then return h end\n"                    \
    "    return (string.gsub(h, '%^(%d+)', function(m) return '^' .. (now_ms() + tonumber(m)) end))\n" \
    "  end\n"                                                                        \
    "  function x.carry(v, nv)\n"                                                    \
    "    local ho = x.split(v)\n"                                                    \
    "    local h, o = x.split(nv)\n"                                                 \
    "    h = string.gsub(h, '[~^]%d+', '')\n"                                        \
    "    for _, m in ipairs({'~%d+', '%^%d+', '@%d+'}) do\n"                         \
    "      local y = string.match(ho, m)\n"                                          \
    "      if y then h = h .. y end\n"                                               \
    "    end\n"                                                                      \
    "    return h .. o, tonumber(string.match(ho, '@(%d+)'))\n"                      \
    "  end\n"                                                                        \
    "  function x.cap(v, p)\n"                                                       \
    "    local h = x.split(v)\n"                                                     \
    "    local t = tonumber(string.match(h, '%^(%d+)'))\n"                           \
    "    if not t then return p end\n"                                               \
    "    local left = math.max(t - now_ms(), 1) + (tonumber(string.match(h, '~(%d+)')) or 0)\n" \
    "    return math.min(p, left)\n"                                                 \
    "  end\n"                                                                        \
    "  function x.bare(v)\n"                                                         \
    "    local h, o = x.split(v)\n"                                                  \
    "    h = string.gsub(string.gsub(h, '@%d+', ''), '%^%d+', '^')\n"                \
    "    return h .. o\n"                                                            \
    "  end\n"                                                                        \
    "  function x.same(v, who)\n"                                                    \
    "    if v == who then return true end\n"                                         \
    "    return v and mine(v, untag(who)) and x.bare(v) == x.bare(who)\n"            \
    "  end\n"                                                                        \
    "  XL = x\n"                                                                     \
    "  return x\n"                                                                   \
    "end\n"                                                                          \
    "local function ours(key, v, l)\n"                                               \
    "  return mine(v, l) and not (string.find(v, '~', 1, true) and ext().rests(key, v))\n" \
    "end\n"                                                                          \
    "local function stamp(value, f)\n"                                               \
    "  if not string.find(value, '\\n', 1, true) and not string.find(value, '^', 1, true) then\n" \
    "    return value .. '@' .. f\n"                                                  \
    "  end\n"                                                                        \
    "  local h, o = ext().split(value)\n"                                            \
    "  return ext().deadlines(h) .. '@' .. f .. o\n"                                 \
    "end\n"                                                                          \
    "local function live(z)\n"                                                        \
    "  if not z or redis.call('EXISTS', z) == 0 then return 0, 0, nil end\n"          \
    "  local now = now_ms()\n"                                                        \
    "  redis.call('ZREMRANGEBYSCORE', z, '-inf', now)\n"                              \
    "  local top = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')\n"                   \
    "  if #top == 0 then return 0, 0, now end\n"                                      \
    "  return redis.call('ZCARD', z), tonumber(top[2]) - now, now\n"                  \
    "end\n"                                                                           \
    "local function keep(z, h, ttl)\n"                                                \
    "  if redis.call('PTTL', z) < tonumber(ttl) then\n"                               \
    "    redis.call('PEXPIRE', z, ttl)\n"                                              \
    "    if h then redis.call('PEXPIRE', h, ttl) end\n"                                \
    "  end\n"                                                                         \
    "end\n"                                                                           \
    "local function wants(z, lease, now, ms)\n"                                       \
    "  if not z then return end\n"                                                    \
    "  now = now or now_ms()\n"                                                       \
    "  redis.call('ZADD', z, 'GT', now + tonumber(ms), lease)\n"                      \
    "  keep(z, nil, ms)\n"                                                            \
    "  outlive(ms)\n"                                                                 \
    "end\n"                                                                           \
    "local function unshare(z, h, who)\n"                                             \
    "  if not z then return false end\n"                                              \
    "  live(z)\n"                                                                     \
    "  local lease = untag(who)\n"                                                    \
    "  if not redis.call('ZSCORE', z, lease) then return false end\n"                 \
    "  if lease ~= who and redis.call('HGET', h, lease) ~= string.sub(who, #lease + 2) then\n" \
    "    return false\n"                                                              \
    "  end\n"                                                                         \
    "  redis.call('ZREM', z, lease)\n"                                                \
    "  redis.call('HDEL', h, lease)\n"                                                \
    "  return true\n"                                                                 \
    "end\n"                                                                           \
    "local function holds(v)\n"                                                       \
    "  if not string.find(v, '*', 1, true) then return 1 end\n"                        \
    "  return tonumber(string.match(string.match(v, '^[^\\n]*'), '%*(%d+)')) or 1\n"  \
    "end\n"                                                                           \
    "local function counted(v, c)\n"                                                  \
    "  local nl = string.find(v, '\\n', 1, true)\n"                                  \
    "  local h, o = v, ''\n"                                                          \
    "  if nl then h, o = string.sub(v, 1, nl - 1), string.sub(v, nl) end\n"           \
    "  h = string.gsub(h, '%*%d+', '')\n"                                             \
    "  if c > 1 then h = h .. '*' .. c end\n"                                         \
    "  return h .. o\n"                                                               \
    "end\n"                                                                           \
    "local function adopted(v)\n"                                                      \
    "  local nl = string.find(v, '\\n', 1, true)\n"                                   \
    "  local h, o = v, ''\n"                                                           \
    "  if nl then h, o = string.sub(v, 1, nl - 1), string.sub(v, nl) end\n"            \
    "  if string.find(h, '.', 1, true) then return h .. '!' .. o end\n"                \
    "  return h .. '.!' .. o\n"                                                        \
    "end\n"

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
    "    local nv, f = ext().carry(v, counted(adopted(value), c))\n"                         \
    "    p = ext().cap(nv, p)\n"                                                            \
    "    redis.call('SET', key, nv, 'PX', p)\n"                                       \
    "    outlive(p)\n"                                                                \
    "    return {" PROTO_S(PROTO_ACQ_ADOPTED) ", f or cur(b), c, p - d}\n"                                         \
    "  end\n"                                                                         \
    "  if v then\n"                                                                   \
    "    if intent and tonumber(intent) > 0 then wants(K[3], lease, nil, intent) end\n" \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', key), cur(b), ext().holder(key, v)}\n"         \
    "  end\n"                                                                         \
    "  local n, longest, now = live(K[2])\n"                                          \
    "  if n > 0 then\n"                                                               \
    "    if intent and tonumber(intent) > 0 then wants(K[3], lease, now, intent) end\n" \
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
    "    setc(b, token)\n"                                                            \
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
    "      if c < h then redis.call('SET', key, counted(v, c), 'KEEPTTL') end\n"   \
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
    "  if unshare(K[2], K[3], who) then\n"                                         \
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
 * answer says what is left of the bound ({1, F, left}). */
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
    "      keep(K[3], K[4], px)\n"                                                    \
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
    "    keep(K[2], K[3], s - now)\n"                                                 \
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
    "  keep(K[2], K[3], ttl)\n"                                                       \
    "  outlive(ttl)\n"                                                                \
    "  if chan then redis.call('PUBLISH', chan, '+' .. origin) end\n"                 \
    "  return {" PROTO_S(PROTO_ACQ_GRANTED) ", cur(b)}\n"                                                          \
    "end"

/* A semaphore's permit: slot `slot` of `permits` (keys "<pfx><i>"), taken like a lock
 * (K: the slot, the semaphore's record holding its permits).  The record lives at
 * least as long as any slot granted under it, so every grant of a name made while
 * another one's permit is valid agrees on the number of permits.  Refusals say why:
 * SCRIPTS_HOLDER_PERMITS "<n>" (another number of permits), or the holder's lease, or
 * (slot free for this lease elsewhere) SCRIPTS_HOLDER_MINE "<slot>"; a refusal by a
 * holder lists up to 8 free slots after this one (SCRIPTS_HOLDER_FREE "<i> <j>...").
 * "<pfx>h" (SEM_HELD) counts the slots held on this master, slot -> its expiry: a refusal
 * it says is one of a full semaphore answers an empty list at once, without a look at
 * every slot (issue 23: 1,023 EXISTS a refusal before).  It is a hint only, never read for
 * a grant or for the record's removal (docs/DESIGN.md section 12). */
#define FN_SEM_ACQUIRE                                                               \
    "function(K, b, value, ttl, chan, origin, permits, slot, pfx, scan)\n"            \
    "  local m = redis.call('GET', K[2])\n"                                           \
    "  if m and m ~= permits then\n"                                                  \
    "    return {" PROTO_S(PROTO_ACQ_REFUSED) ", redis.call('PTTL', K[2]), cur(b), '" SCRIPTS_HOLDER_PERMITS "' .. m}\n" \
    "  end\n"                                                                         \
    "  local lease, n, s = untag(value), tonumber(permits), tonumber(slot)\n"          \
    "  if scan == '1' then\n"                                                         \
    "    for i = 0, n - 1 do\n"                                                       \
    "      if i ~= s and mine(redis.call('GET', pfx .. i), lease) then\n"             \
    "        return {" PROTO_S(PROTO_ACQ_REFUSED) ", 0, cur(b), '" SCRIPTS_HOLDER_MINE "' .. i}\n"                 \
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
    "    redis.call('SET', K[1], adopted(value), 'PX', p)\n"                           \
    "    r = {" PROTO_S(PROTO_ACQ_ADOPTED) ", cur(b), 1, p}\n"                                                     \
    "  else\n"                                                                        \
    "    local h = pfx .. '" SEM_HELD "'\n"                                          \
    "    redis.call('ZREMRANGEBYSCORE', h, '-inf', now_ms())\n"                       \
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
    "  if redis.call('PTTL', K[2]) < p then redis.call('SET', K[2], permits, 'PX', p) end\n" \
    "  sem_held(pfx, s, p)\n"                                                         \
    "  outlive(p)\n"                                                                  \
    "  return r\n"                                                                    \
    "end"

/* sem_held(pfx, slot, p): slot is held on this master for p ms more (the count of
 * FN_SEM_ACQUIRE above); p nil: it is not held any more.  The set lives as long as its
 * longest slot. */
#define SEM_HELD "h"
#define SEM_HELD_FN                                                                  \
    "local function sem_held(pfx, slot, p)\n"                                       \
    "  local h = pfx .. '" SEM_HELD "'\n"                                           \
    "  if not p then redis.call('ZREM', h, slot) return end\n"                      \
    "  redis.call('ZADD', h, now_ms() + p, slot)\n"                                 \
    "  if redis.call('PTTL', h) < p then redis.call('PEXPIRE', h, p) end\n"         \
    "end\n"

/* The slot of a semaphore that lease holds (K: the semaphore's record; pfx the slots'
 * key prefix), for a release (who: a lease, or an attempt's exact value) or an
 * extension: its key, or nil. */
#define SEM_FIND                                                                     \
    SEM_HELD_FN                                                                      \
    "local function sem_find(rec, pfx, who, exact)\n"                                \
    "  local n = tonumber(redis.call('GET', rec)) or 0\n"                             \
    "  local lease, seen = untag(who), {}\n"                                          \
    "  local function is(i)\n"                                                        \
    "    local v = redis.call('GET', pfx .. i)\n"                                     \
    "    return (exact and v == who) or (not exact and mine(v, lease))\n"            \
    "  end\n"                                                                         \
    "  for _, j in ipairs(redis.call('ZRANGE', pfx .. '" SEM_HELD "', 0, -1)) do\n"  \
    "    local i = tonumber(j)\n"                                                     \
    "    if i and i < n and not seen[i] then\n"                                       \
    "      seen[i] = true\n"                                                          \
    "      if is(i) then return pfx .. i, n end\n"                                    \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  for i = 0, n - 1 do\n"                                                         \
    "    if not seen[i] and is(i) then return pfx .. i, n end\n"                      \
    "  end\n"                                                                         \
    "  return nil, n\n"                                                               \
    "end\n"

/* K: the semaphore's record.  As FN_RELEASE, over the semaphore's slots; the record
 * goes with the last permit held on the master (no valid permit counts a master that
 * holds none), so that a new number of permits may be used at once: whether one is
 * left is read from the slots themselves (the count's latest member first, then all
 * of them in one EXISTS), never from the count alone. */
#define FN_SEM_RELEASE                                                               \
    "function(K, who, chan, origin, pfx)\n"                                          \
    "  local k, n = sem_find(K[1], pfx, who, string.find(who, '.', 1, true))\n"       \
    "  if not k then return " PROTO_S(PROTO_REL_NOT_OURS) " end\n"                                                  \
    "  local p = redis.call('PTTL', k)\n"                                          \
    "  redis.call('DEL', k)\n"                                                        \
    "  sem_held(pfx, string.sub(k, #pfx + 1), nil)\n"                                \
    "  local left = false\n"                                                       \
    "  local j = redis.call('ZRANGE', pfx .. '" SEM_HELD "', -1, -1)[1]\n"         \
    "  if j and redis.call('EXISTS', pfx .. j) == 1 then left = true end\n"       \
    "  for a = 0, left and -1 or n - 1, 512 do\n"                                \
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

/* K: the semaphore's record -> {nil, longest pttl, F, "", permits taken, permits}. */
#define FN_SEM_INSPECT                                                               \
    "function(K, b, pfx)\n"                                                          \
    "  local n = tonumber(redis.call('GET', K[1])) or 0\n"                            \
    "  local held, longest = 0, -2\n"                                                 \
    "  for i = 0, n - 1 do\n"                                                         \
    "    local p = redis.call('PTTL', pfx .. i)\n"                                    \
    "    if p ~= -2 then held = held + 1 end\n"                                       \
    "    if p > longest then longest = p end\n"                                       \
    "  end\n"                                                                         \
    "  return {false, longest, cur(b), '', held, n}\n"                                \
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
    "    redis.call('SET', key, counted(v, c), 'KEEPTTL')\n"                          \
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
    "  local gone = unshare(K[2], K[3], old)\n"                                       \
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
 * (after the record's key and the clock window), its function.  The Lua table of
 * SCRIPT_BATCH (BATCH_LUA: "  a = {3, 7, function(...) ... end},") and
 * script_batch_code() (BATCH_SHAPE) are both made from it. */
#define BATCH_OPS(X)                                                                 \
    X(SCRIPT_ACQUIRE, a, 'a', 3, 7, FN_ACQUIRE)                                      \
    X(SCRIPT_RAISE, f, 'f', 0, 2, FN_RAISE)                                          \
    X(SCRIPT_RELEASE, r, 'r', 3, 3, FN_RELEASE)                                      \
    X(SCRIPT_EXTEND, e, 'e', 4, 3, FN_EXTEND)                                        \
    X(SCRIPT_INSPECT, i, 'i', 2, 1, FN_INSPECT)                                      \
    X(SCRIPT_HANDOFF, h, 'h', 4, 6, FN_HANDOFF)                                      \
    X(SCRIPT_SHARED, s, 's', 4, 5, FN_SHARED)
#define BATCH_LUA(id, name, code, nkeys, nargs, fn) "  " #name " = {" #nkeys ", " #nargs ", " fn "},\n"
#define BATCH_SHAPE(id, name, code, nkeys, nargs, fn) [id] = {code, nkeys, nargs},

/* A script of its own for one operation: KEYS record, its keys; ARGV its arguments. */
#define ALONE(fn)                                                                    \
    PRELUDE "local f = " fn "\n"                                                     \
    "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"                                 \
    "settle()\n"                                                                     \
    "return r\n"

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
    [SCRIPT_SEM_ACQUIRE] = PRELUDE SEM_HELD_FN "local f = " FN_SEM_ACQUIRE "\n"
                           "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                           "settle()\n"
                           "return r\n",
    [SCRIPT_SEM_RELEASE] = PRELUDE SEM_FIND "local f = " FN_SEM_RELEASE "\n"
                           "return f({unpack(KEYS, 2)}, unpack(ARGV))\n",
    [SCRIPT_SEM_EXTEND] = PRELUDE SEM_FIND "local f = " FN_SEM_EXTEND "\n"
                          "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                          "settle()\n"
                          "return r\n",
    [SCRIPT_SEM_INSPECT] = ALONE(FN_SEM_INSPECT),
    [SCRIPT_UNWANT] = ALONE(FN_UNWANT),
    /* ARGV: for each operation its code (scripts.h) and its arguments; KEYS: the
     * master's record, then each operation's keys in the same order.  Every operation
     * runs under pcall, so one that fails (a foreign key of the wrong type, say)
     * answers with its own error and the others go on; the reply holds each
     * operation's reply in turn. */
    [SCRIPT_BATCH] =
        PRELUDE
        "local ops = {\n" BATCH_OPS(BATCH_LUA) "}\n"
        "local r, k, i, n = {}, 2, 1, #ARGV\n"
        "while i <= n do\n"
        "  local op = ops[ARGV[i]]\n"
        "  if not op then return redis.error_reply('ERR redlockd batch: unknown operation') end\n"
        "  local ok, v = pcall(op[3], {unpack(KEYS, k, k + op[1] - 1)}, unpack(ARGV, i + 1, i + op[2]))\n"
        "  if not ok and (type(v) ~= 'table' or not v.err) then v = {err = tostring(v)} end\n"
        "  r[#r + 1] = v\n"
        "  k = k + op[1]\n"
        "  i = i + 1 + op[2]\n"
        "end\n"
        "settle()\n"
        "return r\n",
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
    /* Several names at once, all or nothing, in one call per master: callers asking for
     * overlapping sets in different orders cannot deadlock.  The set is kept under
     * "<prefix>#set:<lease>" as "<tag>\n<name1>\n<name2>..." so that the lease alone
     * releases it, and a failed attempt's clean-up only what it wrote.
     * KEYS: record, lock1..n, set; ARGV: value, ttl, n, names, bucket1..n, and (optional)
     * key prefix, origin: each name granted is announced as "+<origin>" on its release
     * channel (a watcher elsewhere learns of the grant). */
    [SCRIPT_MACQUIRE] =
        PRELUDE
        "local n = tonumber(ARGV[3])\n"
        "local value, lease = ARGV[1], untag(ARGV[1])\n"
        "local held, longest, holders, adopt = false, -1, {}, ''\n"
        "local px = tonumber(ARGV[2])\n"
        "local modes = ARGV[7 + n] or ''\n"
        "for i = 1, n do\n"
        "  local v = redis.call('GET', KEYS[1 + i])\n"
        "  holders[i] = ''\n"
        "  if v and not ours(KEYS[1 + i], v, lease) then\n"
        "    held = true\n"
        "    holders[i] = ext().holder(KEYS[1 + i], v)\n"
        "    local p = redis.call('PTTL', KEYS[1 + i])\n"
        "    if p > longest then longest = p end\n"
        "  elseif not v and string.sub(modes, i, i) ~= 's' then\n"
        "    local r, p = live(KEYS[n + 2 + i])\n"
        "    if r > 0 then\n"
        "      held = true\n"
        "      holders[i] = '" SCRIPTS_HOLDER_SHARED "'\n"
        "      if p > longest then longest = p end\n"
        "    end\n"
        "  end\n"
        "end\n"
        "local r = {}\n"
        "if held then\n"
        "  r[1] = " PROTO_S(PROTO_MACQ_REFUSED) "\n"
        "  r[2] = longest\n"
        "  for i = 1, n do r[#r + 1] = cur(ARGV[4 + i]) end\n"
        "  for i = 1, n do r[#r + 1] = holders[i] end\n"
        "  return r\n"
        "end\n"
        "r[1] = " PROTO_S(PROTO_MACQ_GRANTED) "\n"
        "local names = {}\n"
        "if ARGV[5 + n] then\n"
        "  for nm in string.gmatch(ARGV[4], '[^\\n]+') do names[#names + 1] = string.gsub(nm, '^#', '') end\n"
        "end\n"
        "for i = 1, n do\n"
        "  if string.sub(modes, i, i) == 's' then\n"
        "    local z = KEYS[n + 2 + i]\n"
        "    local _, _, now = live(z)\n"
        "    local s = now and tonumber(redis.call('ZSCORE', z, lease))\n"
        "    if s then adopt = '!' end\n"
        "    now = now or now_ms()\n"
        "    s = math.max(s or 0, now + tonumber(ARGV[2]))\n"
        "    if s - now > px then px = s - now end\n"
        "    redis.call('ZADD', z, s, lease)\n"
        "    keep(z, nil, s - now)\n"
        "    r[#r + 1] = cur(ARGV[4 + i])\n"
        "    if ARGV[5 + n] then\n"
        "      redis.call('PUBLISH', ARGV[5 + n] .. '" KEYS_RELEASED "' .. names[i], '+' .. ARGV[6 + n])\n"
        "    end\n"
        "  else\n"
        "    local v = redis.call('GET', KEYS[1 + i])\n"
        "    if not v then\n"
        "      local f = bump(ARGV[4 + i])\n"
        "      redis.call('SET', KEYS[1 + i], stamp(value, f), 'PX', ARGV[2])\n"
        "      r[#r + 1] = f\n"
        "      if ARGV[5 + n] then\n"
        "        redis.call('PUBLISH', ARGV[5 + n] .. '" KEYS_RELEASED "' .. names[i], '+' .. ARGV[6 + n])\n"
        "      end\n"
        "    else\n"
        "      local nv, f = ext().carry(v, adopted(value))\n"
        "      local p = ext().cap(nv, math.max(redis.call('PTTL', KEYS[1 + i]), tonumber(ARGV[2]) + ext().delay(v)))\n"
        "      if p > px then px = p end\n"
        "      redis.call('SET', KEYS[1 + i], nv, 'PX', p)\n"
        "      adopt = '!'\n"
        "      r[#r + 1] = f or cur(ARGV[4 + i])\n"
        "    end\n"
        "  end\n"
        "end\n"
        "redis.call('SET', KEYS[n + 2], string.sub(value, #lease + 2) .. adopt .. '\\n' .. ARGV[4], 'PX', px)\n"
        "outlive(px)\n"
        "settle()\n"
        "return r\n",
    /* ARGV: t1..tn, bucket1..n. */
    [SCRIPT_MRAISE] =
        PRELUDE
        "local r, n = {}, #ARGV / 2\n"
        "for i = 1, n do\n"
        "  local b = ARGV[n + i]\n"
        "  local f, t = cur(b), tonumber(ARGV[i])\n"
        "  if f < t then setc(b, ARGV[i]) f = t end\n"
        "  r[i] = f\n"
        "end\n"
        "return r\n",
    /* KEYS: record, set.  ARGV: who (a lease, or "<lease>.<tag>" for a failed
     * attempt's clean-up), key prefix, origin, scope (a name prefix every name of the
     * set must start with; "" for any).  A name outside the scope: nothing is
     * released, {-1, names}. */
    [SCRIPT_MRELEASE] =
        PRELUDE
        "local s = redis.call('GET', KEYS[2])\n"
        "if not s then return {" PROTO_S(PROTO_MREL_NONE) ", ''} end\n"
        "local who, prefix, scope = ARGV[1], ARGV[2], ARGV[4]\n"
        "local nl = string.find(s, '\\n', 1, true) or #s\n"
        "local tag, names = string.sub(s, 1, nl - 1), string.sub(s, nl + 1)\n"
        "local lease, exact = untag(who), string.find(who, '.', 1, true)\n"
        "if exact and string.sub(who, #lease + 2) ~= tag then return {" PROTO_S(PROTO_MREL_NONE) ", names} end\n"
        "if scope ~= '' then\n"
        "  for name in string.gmatch(names, '[^\\n]+') do\n"
        "    local nm = string.gsub(name, '^#', '')\n"
        "    if string.sub(nm, 1, #scope) ~= scope then return {" PROTO_S(PROTO_MREL_OUT_OF_SCOPE) ", names} end\n"
        "  end\n"
        "end\n"
        "local n = 0\n"
        "for name in string.gmatch(names, '[^\\n]+') do\n"
        "  local k = prefix .. name\n"
        "  local v = redis.call('GET', k)\n"
        "  if string.byte(name, 1) == 35 then\n"
        "    -- a name the set holds shared ('#' before it): its reader entry goes\n"
        "    name = string.sub(name, 2)\n"
        "    k = prefix .. '" KEYS_READERS "' .. name\n"
        "    if redis.call('ZREM', k, lease) == 1 then\n"
        "      redis.call('PUBLISH', prefix .. '" KEYS_RELEASED "' .. name, ARGV[3])\n"
        "      n = n + 1\n"
        "    end\n"
        "  elseif (exact and ext().same(v, who)) or (not exact and ours(k, v, lease)) then\n"
        "    redis.call('DEL', k)\n"
        "    redis.call('PUBLISH', prefix .. '" KEYS_RELEASED "' .. name, ARGV[3])\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "redis.call('DEL', KEYS[2])\n"
        "if n > 0 then return {" PROTO_S(PROTO_MREL_RELEASED) ", names} end\n"
        "return {" PROTO_S(PROTO_MREL_NONE) ", names}\n",
};

const char *script_source(int id)
{
    if (id < 0 || id >= SCRIPT__COUNT)
        return "";
    return sources[id];
}

char script_batch_code(int id, int nkeys, int nargs)
{
    /* The ops table of SCRIPT_BATCH, from the same list. */
    static const struct {
        char code;
        int nkeys, nargs;
    } shapes[SCRIPT__COUNT] = {BATCH_OPS(BATCH_SHAPE)};
    if (id < 0 || id >= SCRIPT__COUNT || shapes[id].nkeys != nkeys || shapes[id].nargs != nargs)
        return 0;
    return shapes[id].code;
}
