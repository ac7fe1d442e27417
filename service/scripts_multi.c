/* scripts_multi.c -- the scripts of a set of names held at once (multilock.c sends
 * them and reads their answers): SCRIPT_MACQUIRE, all or nothing, SCRIPT_MRAISE and
 * SCRIPT_MRELEASE. */
#include "scripts_multi.h"

#include <stddef.h>

#include "keys.h"
#include "proto.h"
#include "scripts_prelude.h"

static const char *const sources[SCRIPT__COUNT] = {
    /* Several names at once, all or nothing, in one call per master: callers asking for
     * overlapping sets in different orders cannot deadlock.  The set is kept under
     * "<prefix>#set:<lease>" as "<tag>\n<name1>\n<name2>..." so that the lease alone
     * releases it, and a failed attempt's clean-up only what it wrote.
     * KEYS: record, lock1..n, set; ARGV: value, ttl, n, names, bucket1..n, and (optional)
     * key prefix, origin: each name granted is announced as "+<origin>" on its release
     * channel (a watcher elsewhere learns of the grant). */
    [SCRIPT_MACQUIRE] =
        PRELUDE TIMED(
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
        "    aux().keep(z, nil, s - now)\n"
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
        "      local nv, f = ext().carry(v, aux().adopted(value))\n"
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
        "return r\n"),
    /* ARGV: t1..tn, bucket1..n. */
    [SCRIPT_MRAISE] =
        PRELUDE TIMED(
        "local r, n = {}, #ARGV / 2\n"
        "for i = 1, n do\n"
        "  local b = ARGV[n + i]\n"
        "  local f, t = cur(b), tonumber(ARGV[i])\n"
        "  if f < t then aux().setc(b, ARGV[i]) f = t end\n"
        "  r[i] = f\n"
        "end\n"
        "return r\n"),
    /* KEYS: record, set.  ARGV: who (a lease, or "<lease>.<tag>" for a failed
     * attempt's clean-up), key prefix, origin, scope (a name prefix every name of the
     * set must start with; "" for any).  A name outside the scope: nothing is
     * released, {-1, names}. */
    [SCRIPT_MRELEASE] =
        PRELUDE TIMED(
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
        "return {" PROTO_S(PROTO_MREL_NONE) ", names}\n"),
};

const char *scripts_multi_source(int id)
{
    return id >= 0 && id < SCRIPT__COUNT ? sources[id] : NULL;
}
