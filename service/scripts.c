/* scripts.c -- Lua sources of the scripts in scripts.h.
 *
 * The lock key holds the lease as a plain string with a PX expiry, exactly as other
 * Redlock clients do, so they exclude each other.  The fencing counter lives beside it
 * under "<prefix>#fence:<name>" ('#' is not allowed in names) and never expires. */
#include "scripts.h"

/* The single-name operations, each written once as a Lua function of (key 1, key 2,
 * arg 1, arg 2).  Each is both a script of its own (called as the ids below) and one
 * entry of SCRIPT_BATCH, which runs many of them in one call. */
#define FN_ACQUIRE                                                                   \
    /* The common case first: one SET NX and one INCR. */                            \
    "function(key, fkey, lease, ttl)\n"                                              \
    "  if redis.call('SET', key, lease, 'NX', 'PX', ttl) then\n"                     \
    "    return {1, redis.call('INCR', fkey)}\n"                                      \
    "  end\n"                                                                         \
    "  local f = tonumber(redis.call('GET', fkey) or '0')\n"                          \
    "  if redis.call('GET', key) == lease then\n"                                     \
    "    redis.call('PEXPIRE', key, ttl)\n"                                           \
    "    return {2, f}\n"                                                             \
    "  end\n"                                                                         \
    "  return {0, redis.call('PTTL', key), f}\n"                                      \
    "end"

#define FN_RAISE                                                                     \
    "function(fkey, _, token)\n"                                                     \
    "  local f = tonumber(redis.call('GET', fkey) or '0')\n"                          \
    "  local t = tonumber(token)\n"                                                   \
    "  if f < t then redis.call('SET', fkey, token) return t end\n"                   \
    "  return f\n"                                                                    \
    "end"

/* chan: the channel waiters on other instances follow (see notify.h); publishing to
 * a channel nobody follows costs next to nothing.  origin: the releasing instance,
 * which woke its own waiters already and ignores its own message. */
#define FN_RELEASE                                                                   \
    "function(key, _, lease, chan, origin)\n"                                        \
    "  if redis.call('GET', key) == lease then\n"                                     \
    "    redis.call('DEL', key)\n"                                                    \
    "    redis.call('PUBLISH', chan, origin)\n"                                       \
    "    return 1\n"                                                                  \
    "  end\n"                                                                         \
    "  return 0\n"                                                                    \
    "end"

#define FN_EXTEND                                                                    \
    "function(key, fkey, lease, ttl)\n"                                              \
    "  local f = tonumber(redis.call('GET', fkey) or '0')\n"                          \
    "  if redis.call('GET', key) == lease then\n"                                     \
    "    redis.call('PEXPIRE', key, ttl)\n"                                           \
    "    return {1, f}\n"                                                             \
    "  end\n"                                                                         \
    "  return {0, f}\n"                                                               \
    "end"

#define FN_INSPECT                                                                   \
    "function(key, fkey)\n"                                                          \
    "  local v = redis.call('GET', key)\n"                                            \
    "  return {v, redis.call('PTTL', key), tonumber(redis.call('GET', fkey) or '0')}\n" \
    "end"

/* A release that hands the lock straight to the next waiter: where the old lease
 * holds the key, the new one replaces it ({3, F} after INCR); elsewhere it is the
 * acquire above for the new lease.  One operation instead of a release and then an
 * acquire, and the lock is never free in between for another to take. */
#define FN_HANDOFF                                                                   \
    "function(key, fkey, old, lease, ttl)\n"                                         \
    "  if redis.call('GET', key) == old then\n"                                       \
    "    redis.call('SET', key, lease, 'PX', ttl)\n"                                  \
    "    return {3, redis.call('INCR', fkey)}\n"                                      \
    "  end\n"                                                                         \
    "  local acquire = " FN_ACQUIRE "\n"                                              \
    "  return acquire(key, fkey, lease, ttl)\n"                                       \
    "end"

#define ALONE(fn) "local f = " fn "\nreturn f(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])\n"

static const char *const sources[SCRIPT__COUNT] = {
    [SCRIPT_ACQUIRE] = ALONE(FN_ACQUIRE),
    [SCRIPT_RAISE] = ALONE(FN_RAISE),
    [SCRIPT_RELEASE] = ALONE(FN_RELEASE),
    [SCRIPT_EXTEND] = ALONE(FN_EXTEND),
    [SCRIPT_INSPECT] = ALONE(FN_INSPECT),
    [SCRIPT_HANDOFF] = ALONE(FN_HANDOFF),
    /* ARGV: for each operation its code (scripts.h) then its arguments; KEYS: each
     * operation's keys in the same order.  Every operation runs under pcall, so one
     * that fails (a foreign key of the wrong type, say) answers with its own error
     * and the others go on; the reply holds each operation's reply in turn. */
    [SCRIPT_BATCH] =
        "local ops = {\n"
        "  a = {2, 2, " FN_ACQUIRE "},\n"
        "  f = {1, 1, " FN_RAISE "},\n"
        "  r = {1, 3, " FN_RELEASE "},\n"
        "  e = {2, 2, " FN_EXTEND "},\n"
        "  i = {2, 0, " FN_INSPECT "},\n"
        "  h = {2, 3, " FN_HANDOFF "},\n"
        "}\n"
        "local r, k, i, n = {}, 1, 1, #ARGV\n"
        "while i <= n do\n"
        "  local op = ops[ARGV[i]]\n"
        "  if not op then return redis.error_reply('ERR redlockd batch: unknown operation') end\n"
        "  local ok, v = pcall(op[3], KEYS[k], KEYS[k + 1], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])\n"
        "  if not ok and (type(v) ~= 'table' or not v.err) then v = {err = tostring(v)} end\n"
        "  r[#r + 1] = v\n"
        "  k = k + op[1]\n"
        "  i = i + 1 + op[2]\n"
        "end\n"
        "return r\n",
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
        "    redis.call('PUBLISH', ARGV[2] .. '#released:' .. name, ARGV[3])\n"
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

char script_batch_code(int id, int nkeys, int nargs)
{
    /* Must agree with the ops table of SCRIPT_BATCH. */
    static const struct {
        char code;
        int nkeys, nargs;
    } shapes[SCRIPT__COUNT] = {
        [SCRIPT_ACQUIRE] = {'a', 2, 2}, [SCRIPT_RAISE] = {'f', 1, 1},
        [SCRIPT_RELEASE] = {'r', 1, 3}, [SCRIPT_EXTEND] = {'e', 2, 2},
        [SCRIPT_INSPECT] = {'i', 2, 0}, [SCRIPT_HANDOFF] = {'h', 2, 3},
    };
    if (id < 0 || id >= SCRIPT__COUNT || shapes[id].nkeys != nkeys || shapes[id].nargs != nargs)
        return 0;
    return shapes[id].code;
}
