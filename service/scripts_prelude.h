/* scripts_prelude.h -- the Lua every lock script starts with (PRELUDE), and ALONE(),
 * which makes one single-name operation a script of its own.  Text only: the script
 * modules (scripts_lock.c, scripts_sem.c, scripts_multi.c, scripts_record.c) put it
 * in front of their own.
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
#ifndef RL_SCRIPTS_PRELUDE_H
#define RL_SCRIPTS_PRELUDE_H

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
 * same(v, who)  v is exactly what the attempt `who` wrote (its stamps aside)
 * and, made the same way (aux(): the helpers a plain exclusive grant or release never
 * calls, so that it pays for none of them):
 * setc(b, f)  the bucket's counter set to f (a raise; a new field counted in nb)
 * keep(z, h, ttl)  a readers' or writers' set (and its tags' hash h) lives at least ttl
 * wants(z, lease, now, ms)  a refused writer marked waiting in z for ms
 * unshare(z, h, who)  the reader who (its tag matching, if it has one) leaves z and h
 * counted(v, c)  v counting c holds ('*<c>' in its header; none for 1)
 * adopted(v)  the value an attempt writes where it finds its lease already (another
 *           attempt's key, adopted): marked '!' (before the owner, if any), so that no
 *           attempt's clean-up, which deletes only its exact value, ever takes a key
 *           that another attempt may have counted on (docs/DESIGN.md, section 5) */
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
    "  local u = t[2]\n"                                                             \
    "  NOW = t[1] * 1000 + (u - u % 1000) / 1000\n"                                  \
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
    "local function holds(v)\n"                                                       \
    "  if not string.find(v, '*', 1, true) then return 1 end\n"                        \
    "  return tonumber(string.match(string.match(v, '^[^\\n]*'), '%*(%d+)')) or 1\n"  \
    "end\n"                                                                           \
    "local AX\n"                                                                      \
    "local function aux()\n"                                                          \
    "  if AX then return AX end\n"                                                    \
    "  local x = {}\n"                                                                \
    "  function x.setc(b, f)\n"                                                       \
    "    if redis.call('HSET', KEYS[1], b, f) == 1 then redis.call('HINCRBY', KEYS[1], 'nb', 1) end\n" \
    "  end\n"                                                                         \
    "  function x.keep(z, h, ttl)\n"                                                  \
    "    if redis.call('PTTL', z) < tonumber(ttl) then\n"                             \
    "      redis.call('PEXPIRE', z, ttl)\n"                                            \
    "      if h then redis.call('PEXPIRE', h, ttl) end\n"                              \
    "    end\n"                                                                       \
    "  end\n"                                                                         \
    "  function x.wants(z, lease, now, ms)\n"                                         \
    "    if not z then return end\n"                                                  \
    "    now = now or now_ms()\n"                                                     \
    "    redis.call('ZADD', z, 'GT', now + tonumber(ms), lease)\n"                    \
    "    x.keep(z, nil, ms)\n"                                                        \
    "    outlive(ms)\n"                                                               \
    "  end\n"                                                                         \
    "  function x.unshare(z, h, who)\n"                                               \
    "    if not z then return false end\n"                                            \
    "    live(z)\n"                                                                   \
    "    local lease = untag(who)\n"                                                  \
    "    if not redis.call('ZSCORE', z, lease) then return false end\n"               \
    "    if lease ~= who and redis.call('HGET', h, lease) ~= string.sub(who, #lease + 2) then\n" \
    "      return false\n"                                                            \
    "    end\n"                                                                       \
    "    redis.call('ZREM', z, lease)\n"                                              \
    "    redis.call('HDEL', h, lease)\n"                                              \
    "    return true\n"                                                               \
    "  end\n"                                                                         \
    "  function x.counted(v, c)\n"                                                    \
    "    local nl = string.find(v, '\\n', 1, true)\n"                                \
    "    local h, o = v, ''\n"                                                        \
    "    if nl then h, o = string.sub(v, 1, nl - 1), string.sub(v, nl) end\n"         \
    "    h = string.gsub(h, '%*%d+', '')\n"                                           \
    "    if c > 1 then h = h .. '*' .. c end\n"                                       \
    "    return h .. o\n"                                                             \
    "  end\n"                                                                         \
    "  function x.adopted(v)\n"                                                       \
    "    local nl = string.find(v, '\\n', 1, true)\n"                                 \
    "    local h, o = v, ''\n"                                                        \
    "    if nl then h, o = string.sub(v, 1, nl - 1), string.sub(v, nl) end\n"        \
    "    if string.find(h, '.', 1, true) then return h .. '!' .. o end\n"             \
    "    return h .. '.!' .. o\n"                                                     \
    "  end\n"                                                                         \
    "  AX = x\n"                                                                      \
    "  return x\n"                                                                    \
    "end\n"

/* What a lock script sent alone answers, its reply r kept: the time it ran at first
 * (proto.h; NOW, read by PRELUDE when the script carried a window), put in front of an
 * array reply (no table more: a nested one costs the master a conversion of its own), a
 * string in front of any other reply.  An error table returned stays an error for the
 * whole call (Redis answers a table with an err field as that error, whatever else it
 * holds). */
#define TIMED_RETURN                                                                 \
    "if type(r) == 'table' then\n"                                                   \
    "  table.insert(r, 1, NOW or " PROTO_S(PROTO_TIME_NONE) ")\n"                    \
    "  return r\n"                                                                   \
    "end\n"                                                                          \
    "return {tostring(NOW or " PROTO_S(PROTO_TIME_NONE) "), r}\n"

/* A script's own text (after PRELUDE) that answers from several places: run as a
 * function, and its answer returned with the time (TIMED_RETURN). */
#define TIMED(body) "local r = (function()\n" body "end)()\n" TIMED_RETURN

/* A script of its own for one operation: KEYS record, its keys; ARGV its arguments. */
#define ALONE(fn)                                                                    \
    PRELUDE "local f = " fn "\n"                                                     \
    "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"                                 \
    "settle()\n"                                                                     \
    TIMED_RETURN

#endif
