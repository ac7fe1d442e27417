/* scripts.c -- Lua sources of the scripts in scripts.h.
 *
 * The lock key holds the lease as a plain string with a PX expiry, exactly as other
 * Redlock clients do, so they exclude each other.  The fencing counter lives beside it
 * under "<prefix>#fence:<name>" ('#' is not allowed in names) and never expires. */
#include "scripts.h"

static const char *const sources[SCRIPT__COUNT] = {
    [SCRIPT_ACQUIRE] =
        /* The common case first: one SET NX and one INCR. */
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
        "  return {1, redis.call('INCR', KEYS[2])}\n"
        "end\n"
        "local f = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
        "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
        "  return {2, f}\n"
        "end\n"
        "return {0, redis.call('PTTL', KEYS[1]), f}\n",
    [SCRIPT_RAISE] =
        "local f = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
        "local t = tonumber(ARGV[1])\n"
        "if f < t then redis.call('SET', KEYS[1], ARGV[1]) return t end\n"
        "return f\n",
    [SCRIPT_RELEASE] =
        /* ARGV[2]: the channel waiters on other instances follow (see notify.h);
         * publishing to a channel nobody follows costs next to nothing. */
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
        "  redis.call('DEL', KEYS[1])\n"
        "  redis.call('PUBLISH', ARGV[2], '1')\n"
        "  return 1\n"
        "end\n"
        "return 0\n",
    [SCRIPT_EXTEND] =
        "local f = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
        "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
        "  return {1, f}\n"
        "end\n"
        "return {0, f}\n",
    [SCRIPT_INSPECT] =
        "local v = redis.call('GET', KEYS[1])\n"
        "return {v, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}\n",
    [SCRIPT_MARKER] =
        "local marked = redis.call('EXISTS', KEYS[1])\n"
        "if marked == 0 and ARGV[1] ~= 'check' then\n"
        "  redis.call('SET', KEYS[1], '1')\n"
        "  if ARGV[1] == 'quarantine' then\n"
        "    redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])\n"
        "  else\n"
        "    redis.call('SET', KEYS[3], '1', 'PX', ARGV[3])\n"
        "  end\n"
        "  marked = 1\n"
        "end\n"
        "return {marked, redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3])}\n",
    /* Several names at once, all or nothing, in one call per master: callers asking for
     * overlapping sets in different orders cannot deadlock.  The set of names is kept
     * under "<prefix>#set:<lease>" so that the lease alone releases it. */
    [SCRIPT_MACQUIRE] =
        "local n = tonumber(ARGV[3])\n"
        "local held, longest = false, -1\n"
        "for i = 1, n do\n"
        "  local v = redis.call('GET', KEYS[i])\n"
        "  if v and v ~= ARGV[1] then\n"
        "    held = true\n"
        "    local p = redis.call('PTTL', KEYS[i])\n"
        "    if p > longest then longest = p end\n"
        "  end\n"
        "end\n"
        "local r = {}\n"
        "if held then\n"
        "  r[1] = 0\n"
        "  r[2] = longest\n"
        "  for i = 1, n do r[#r + 1] = tonumber(redis.call('GET', KEYS[n + i]) or '0') end\n"
        "  return r\n"
        "end\n"
        "r[1] = 1\n"
        "for i = 1, n do\n"
        "  if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
        "    r[#r + 1] = redis.call('INCR', KEYS[n + i])\n"
        "  else\n"
        "    redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
        "    r[#r + 1] = tonumber(redis.call('GET', KEYS[n + i]) or '0')\n"
        "  end\n"
        "end\n"
        "redis.call('SET', KEYS[2 * n + 1], ARGV[4], 'PX', ARGV[2])\n"
        "return r\n",
    [SCRIPT_MRAISE] =
        "local r = {}\n"
        "for i = 1, #KEYS do\n"
        "  local f = tonumber(redis.call('GET', KEYS[i]) or '0')\n"
        "  local t = tonumber(ARGV[i])\n"
        "  if f < t then redis.call('SET', KEYS[i], ARGV[i]) f = t end\n"
        "  r[i] = f\n"
        "end\n"
        "return r\n",
    [SCRIPT_MRELEASE] =
        "local s = redis.call('GET', KEYS[1])\n"
        "if not s then return {0, ''} end\n"
        "local n = 0\n"
        "for name in string.gmatch(s, '[^\\n]+') do\n"
        "  local k = ARGV[2] .. name\n"
        "  if redis.call('GET', k) == ARGV[1] then\n"
        "    redis.call('DEL', k)\n"
        "    redis.call('PUBLISH', ARGV[2] .. '#released:' .. name, '1')\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "redis.call('DEL', KEYS[1])\n"
        "if n > 0 then return {1, s} end\n"
        "return {0, s}\n",
};

const char *script_source(int id)
{
    if (id < 0 || id >= SCRIPT__COUNT)
        return "";
    return sources[id];
}
