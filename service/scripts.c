/* scripts.c -- Lua sources of the scripts in scripts.h.
 *
 * Every script a lock operation sends starts by reading the master's own record,
 * "<prefix>#master" (KEYS[1]): a master that lost it (FLUSHALL, FLUSHDB, keys deleted)
 * or that is quarantined answers an error before doing anything, so no instance ever
 * counts it again until it has sat out its delay and been repaired.  ARGV[1] is the
 * retention of the fencing counters.  docs/DESIGN.md gives the argument for each rule.
 *
 * The lock key holds "<lease>.<tag>" with a PX expiry: the tag names the attempt
 * that wrote it ('.' is not a lease character), so the clean-up of a failed attempt
 * deletes only what that attempt wrote; a release or extend by the client matches the
 * lease whatever the tag.  The fencing counter "<prefix>#fence:<name>" is created with
 * the retention as expiry; the master's floor (>= every counter value it ever held)
 * stands in for a counter that expired or was deleted, and its base (set by a repair)
 * for a counter that is older than what the master forgot. */
#include "scripts.h"

/* Reads the master's record (and the floors of the buckets the call uses, listed in
 * the table `want` the script fills first) and defines, for the operations below:
 * cur(fkey, b)   a name's effective counter: max(F, or its bucket's floor when F is
 *                missing, base)
 * bump(fkey, b)  a grant: cur + 1, stored with the retention as expiry (a counter
 *                expires once its name has gone unused that long)
 * high(b, f)     a counter of bucket b now holds f: the bucket's floor and the master's
 *                floor rise to f if below
 * mine(v, l)     whether lock value v belongs to lease l (any attempt's tag)
 * untag(v)       the lease part of a lock value
 *
 * Buckets: a name's bucket (its hash modulo 16384, chosen by the service) keeps the
 * floor that a missing counter of that bucket starts above.  A floor per bucket rather
 * than one per master: two new names created at once then start at the same value on
 * every master whichever order the masters see them in (unless they share a bucket),
 * so a grant needs no raise round.  The master's floor (the largest of them) is what a
 * repair and the verdict on an unmarked master read.  Floors are written back once, at
 * the end, if an operation raised them. */
#define PRELUDE                                                                      \
    "local M = redis.call('HMGET', KEYS[1], unpack(want))\n"                         \
    "if not M[1] then return redis.error_reply('REDLOCKD_UNMARKED this master lost "  \
    "its record (wiped or restarted empty)') end\n"                                   \
    "if M[3] then return redis.error_reply('REDLOCKD_QUARANTINED this master is "     \
    "quarantined') end\n"                                                              \
    "local floor, base, ret = tonumber(M[1]), tonumber(M[2]) or 0, ARGV[1]\n"         \
    "local floor0, B, dirty = floor, {}, {}\n"                                         \
    "for j = 4, #want do B[want[j]] = tonumber(M[j]) or 0 end\n"                       \
    "local function high(b, f)\n"                                                      \
    "  if f > B[b] then B[b] = f dirty[#dirty + 1] = b end\n"                          \
    "end\n"                                                                            \
    "local function cur(fkey, b)\n"                                                    \
    "  local f = tonumber(redis.call('GET', fkey) or B[b]) or B[b]\n"                  \
    "  if f < base then return base end\n"                                             \
    "  return f\n"                                                                     \
    "end\n"                                                                            \
    "local function bump(fkey, b)\n"                                                   \
    "  local f = cur(fkey, b) + 1\n"                                                   \
    "  redis.call('SET', fkey, f, 'PX', ret)\n"                                        \
    "  high(b, f)\n"                                                                   \
    "  return f\n"                                                                     \
    "end\n"                                                                            \
    "local function mine(v, l)\n"                                                      \
    "  return v and (v == l or (string.byte(v, #l + 1) == 46 and string.find(v, l, 1, true) == 1))\n" \
    "end\n"                                                                            \
    "local function untag(v)\n"                                                        \
    "  local d = string.find(v, '.', 1, true)\n"                                       \
    "  if d then return string.sub(v, 1, d - 1) end\n"                                 \
    "  return v\n"                                                                     \
    "end\n"

/* The floors that rose: each bucket's, and the master's (the largest of all). */
#define POSTLUDE                                                                     \
    "if #dirty > 0 then\n"                                                           \
    "  local w = {}\n"                                                               \
    "  for j = 1, #dirty do\n"                                                       \
    "    local b = dirty[j]\n"                                                       \
    "    if B[b] > floor then floor = B[b] end\n"                                    \
    "    w[#w + 1] = b w[#w + 1] = B[b]\n"                                           \
    "  end\n"                                                                        \
    "  if floor > floor0 then w[#w + 1] = 'floor' w[#w + 1] = floor end\n"           \
    "  redis.call('HSET', KEYS[1], unpack(w))\n"                                     \
    "end\n"

#define WANT "local want = {'floor', 'base', 'q'}\n"

/* The single-name operations, each written once as a Lua function of (key 1, key 2,
 * arg 1 .. arg 4).  Each is both a script of its own (called as the ids below) and
 * one entry of SCRIPT_BATCH, which runs many of them in one call.  Those that touch a
 * counter take its bucket as their first argument. */

/* value: "<lease>.<tag>".  A free key is set and the counter bumped; a key held by
 * the same lease (an idempotent retry) is adopted: this attempt's tag replaces the
 * other's, so the other attempt's clean-up no longer matches it.  A refusal names the
 * holding lease, so that a round can tell "held" from votes split between attempts. */
#define FN_ACQUIRE                                                                   \
    "function(key, fkey, b, value, ttl)\n"                                           \
    "  if redis.call('SET', key, value, 'NX', 'PX', ttl) then\n"                     \
    "    return {1, bump(fkey, b)}\n"                                                 \
    "  end\n"                                                                         \
    "  local v = redis.call('GET', key)\n"                                            \
    "  if mine(v, untag(value)) then\n"                                               \
    "    redis.call('SET', key, value, 'PX', ttl)\n"                                  \
    "    return {2, cur(fkey, b)}\n"                                                  \
    "  end\n"                                                                         \
    "  return {0, redis.call('PTTL', key), cur(fkey, b), v and untag(v) or ''}\n"     \
    "end"

#define FN_RAISE                                                                     \
    "function(fkey, _, b, token)\n"                                                  \
    "  local f, t = cur(fkey, b), tonumber(token)\n"                                  \
    "  if f < t then\n"                                                               \
    "    redis.call('SET', fkey, token, 'PX', ret)\n"                                 \
    "    high(b, t)\n"                                                                \
    "    return t\n"                                                                  \
    "  end\n"                                                                         \
    "  return f\n"                                                                    \
    "end"

/* who: a lease (the client's release: any tag) or "<lease>.<tag>" (a failed
 * attempt's clean-up: only the key that attempt wrote).  chan: the channel waiters on
 * other instances follow (see notify.h); publishing to a channel nobody follows costs
 * next to nothing.  origin: the releasing instance, which woke its own waiters already
 * and ignores its own message. */
#define FN_RELEASE                                                                   \
    "function(key, _, who, chan, origin)\n"                                          \
    "  local v = redis.call('GET', key)\n"                                            \
    "  if v == who or (v and not string.find(who, '.', 1, true) and mine(v, who)) then\n" \
    "    redis.call('DEL', key)\n"                                                    \
    "    redis.call('PUBLISH', chan, origin)\n"                                       \
    "    return 1\n"                                                                  \
    "  end\n"                                                                         \
    "  return 0\n"                                                                    \
    "end"

/* A hold may outlive the counter's retention: an extension renews it too.  A name of a
 * multi-name set ("<prefix>#set:<lease>", the prefix being what the fence key has
 * before "#fence:") keeps the set alive as long as the name, so that the set's release
 * still finds it. */
#define FN_EXTEND                                                                    \
    "function(key, fkey, b, lease, ttl)\n"                                           \
    "  if mine(redis.call('GET', key), lease) then\n"                                 \
    "    redis.call('PEXPIRE', key, ttl)\n"                                           \
    "    redis.call('PEXPIRE', fkey, ret)\n"                                          \
    "    local set = string.match(fkey, '^(.*)#fence:[^#]*$') .. '#set:' .. lease\n"   \
    "    if redis.call('PTTL', set) > 0 and redis.call('PTTL', set) < tonumber(ttl) then\n" \
    "      redis.call('PEXPIRE', set, ttl)\n"                                         \
    "    end\n"                                                                       \
    "    return {1, cur(fkey, b)}\n"                                                  \
    "  end\n"                                                                         \
    "  return {0, cur(fkey, b)}\n"                                                    \
    "end"

/* The lease part of the value (never its tag); the counter as it stands (0 if none). */
#define FN_INSPECT                                                                   \
    "function(key, fkey)\n"                                                          \
    "  local v = redis.call('GET', key)\n"                                            \
    "  local f = tonumber(redis.call('GET', fkey) or '0') or 0\n"                     \
    "  if f > 0 and f < base then f = base end\n"                                     \
    "  if v then v = untag(v) end\n"                                                  \
    "  return {v, redis.call('PTTL', key), f}\n"                                      \
    "end"

/* A release that hands the lock straight to the next waiter: where the old lease
 * holds the key, the new value replaces it ({3, F} after a bump); elsewhere it is the
 * acquire above for the new value.  One operation instead of a release and then an
 * acquire, and the lock is never free in between for another to take. */
#define FN_HANDOFF                                                                   \
    "function(key, fkey, b, old, value, ttl)\n"                                      \
    "  if mine(redis.call('GET', key), old) then\n"                                   \
    "    redis.call('SET', key, value, 'PX', ttl)\n"                                  \
    "    return {3, bump(fkey, b)}\n"                                                 \
    "  end\n"                                                                         \
    "  local acquire = " FN_ACQUIRE "\n"                                              \
    "  return acquire(key, fkey, b, value, ttl)\n"                                    \
    "end"

/* A script of its own for one operation: KEYS record, its keys; ARGV retention, its
 * arguments (a counter's bucket first, for those that have one). */
#define ALONE_CALL "local r = f(KEYS[2], KEYS[3], ARGV[2], ARGV[3], ARGV[4], ARGV[5])\n"
#define ALONE(fn) WANT PRELUDE "local f = " fn "\n" ALONE_CALL POSTLUDE "return r\n"
#define ALONE_B(fn)                                                                  \
    WANT "want[4] = ARGV[2]\n" PRELUDE "local f = " fn "\n" ALONE_CALL POSTLUDE "return r\n"

static const char *const sources[SCRIPT__COUNT] = {
    [SCRIPT_ACQUIRE] = ALONE_B(FN_ACQUIRE),
    [SCRIPT_RAISE] = ALONE_B(FN_RAISE),
    [SCRIPT_RELEASE] = ALONE(FN_RELEASE),
    [SCRIPT_EXTEND] = ALONE_B(FN_EXTEND),
    [SCRIPT_INSPECT] = ALONE(FN_INSPECT),
    [SCRIPT_HANDOFF] = ALONE_B(FN_HANDOFF),
    /* ARGV: the retention, then for each operation its code (scripts.h) and its
     * arguments; KEYS: the master's record, then each operation's keys in the same
     * order.  Every operation runs under pcall, so one that fails (a foreign key of the
     * wrong type, say) answers with its own error and the others go on; the reply
     * holds each operation's reply in turn. */
    [SCRIPT_BATCH] =
        "local ops = {\n"
        "  a = {2, 3, true},\n"
        "  f = {1, 2, true},\n"
        "  r = {1, 3, false},\n"
        "  e = {2, 3, true},\n"
        "  i = {2, 0, false},\n"
        "  h = {2, 4, true},\n"
        "}\n"
        /* the buckets the batch uses, each once */
        WANT
        "local seen, i, n = {}, 2, #ARGV\n"
        "while i <= n do\n"
        "  local op = ops[ARGV[i]]\n"
        "  if not op then return redis.error_reply('ERR redlockd batch: unknown operation') end\n"
        "  if op[3] and not seen[ARGV[i + 1]] then seen[ARGV[i + 1]] = true want[#want + 1] = ARGV[i + 1] end\n"
        "  i = i + 1 + op[2]\n"
        "end\n"
        PRELUDE
        "ops.a[4] = " FN_ACQUIRE "\n"
        "ops.f[4] = " FN_RAISE "\n"
        "ops.r[4] = " FN_RELEASE "\n"
        "ops.e[4] = " FN_EXTEND "\n"
        "ops.i[4] = " FN_INSPECT "\n"
        "ops.h[4] = " FN_HANDOFF "\n"
        "local r, k = {}, 2\n"
        "i = 2\n"
        "while i <= n do\n"
        "  local op = ops[ARGV[i]]\n"
        "  local ok, v = pcall(op[4], KEYS[k], KEYS[k + 1], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])\n"
        "  if not ok and (type(v) ~= 'table' or not v.err) then v = {err = tostring(v)} end\n"
        "  r[#r + 1] = v\n"
        "  k = k + op[1]\n"
        "  i = i + 1 + op[2]\n"
        "end\n"
        POSTLUDE
        "return r\n",
    /* The master's record and its quarantine, run at every (re)connect and whenever a
     * verdict is needed.  KEYS: record, quarantine key.  ARGV: action (check | mark |
     * quarantine | rejoin), the master's run id now, the delay in ms a restart or wipe
     * costs, the marking instance, the floor a repair brings (rejoin).
     * A record written under another run id means the process restarted since it
     * was trusted and may have lost acknowledged writes: quarantined, the delay
     * counted from the restart (the caller subtracts the uptime), and kept if another
     * instance started it already.  rejoin ends a quarantine whose key has expired:
     * base and floor rise to what a quorum of peers hold, the run id is recorded.
     * -> {state (0 unmarked, 1 ready, 2 quarantined), quarantine pttl, floor} */
    [SCRIPT_MARKER] =
        "local mk, qk, act, run, delay = KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3])\n"
        "if delay < 1 then delay = 1 end\n"
        "local m = redis.call('HMGET', mk, 'run', 'floor', 'q', 'base')\n"
        "if not m[2] then\n"
        "  if act == 'mark' then\n"
        "    redis.call('HSET', mk, 'cluster', ARGV[4], 'run', run, 'floor', 0, 'base', 0)\n"
        "    return {1, -2, 0}\n"
        "  elseif act == 'quarantine' then\n"
        "    redis.call('HSET', mk, 'cluster', ARGV[4], 'run', run, 'floor', 0, 'base', 0, 'q', 1)\n"
        "    redis.call('SET', qk, 1, 'PX', delay)\n"
        "    return {2, redis.call('PTTL', qk), 0}\n"
        "  end\n"
        "  return {0, -2, 0}\n"
        "end\n"
        "local floor = tonumber(m[2])\n"
        "if m[1] ~= run then\n"
        "  if redis.call('PTTL', qk) < delay then redis.call('SET', qk, 1, 'PX', delay) end\n"
        "  redis.call('HSET', mk, 'q', 1, 'run', run)\n"
        "  m[3] = '1'\n"
        "end\n"
        "if not m[3] then return {1, -2, floor} end\n"
        "local q = redis.call('PTTL', qk)\n"
        "if act == 'rejoin' and q < 0 then\n"
        "  local f = tonumber(ARGV[5])\n"
        "  local b = tonumber(m[4]) or 0\n"
        "  if f > b then b = f end\n"
        "  if f > floor then floor = f end\n"
        "  redis.call('HSET', mk, 'base', b, 'floor', floor)\n"
        "  redis.call('HDEL', mk, 'q')\n"
        "  return {1, -2, floor}\n"
        "end\n"
        "if q == -2 then q = 0 end\n"
        "return {2, q, floor}\n",
    /* Several names at once, all or nothing, in one call per master: callers asking for
     * overlapping sets in different orders cannot deadlock.  The set is kept under
     * "<prefix>#set:<lease>" as "<tag>\n<name1>\n<name2>..." so that the lease alone
     * releases it, and a failed attempt's clean-up only what it wrote. */
    [SCRIPT_MACQUIRE] =
        WANT
        "for i = 1, tonumber(ARGV[4]) do want[3 + i] = ARGV[5 + i] end\n"
        PRELUDE
        "local r = (function()\n"
        "local n = tonumber(ARGV[4])\n"
        "local value, lease = ARGV[2], untag(ARGV[2])\n"
        "local held, longest, holders = false, -1, {}\n"
        "for i = 1, n do\n"
        "  local v = redis.call('GET', KEYS[1 + i])\n"
        "  holders[i] = ''\n"
        "  if v and not mine(v, lease) then\n"
        "    held = true\n"
        "    holders[i] = untag(v)\n"
        "    local p = redis.call('PTTL', KEYS[1 + i])\n"
        "    if p > longest then longest = p end\n"
        "  end\n"
        "end\n"
        "local r = {}\n"
        "if held then\n"
        "  r[1] = 0\n"
        "  r[2] = longest\n"
        "  for i = 1, n do r[#r + 1] = cur(KEYS[1 + n + i], ARGV[5 + i]) end\n"
        "  for i = 1, n do r[#r + 1] = holders[i] end\n"
        "  return r\n"
        "end\n"
        "r[1] = 1\n"
        "for i = 1, n do\n"
        "  if redis.call('SET', KEYS[1 + i], value, 'NX', 'PX', ARGV[3]) then\n"
        "    r[#r + 1] = bump(KEYS[1 + n + i], ARGV[5 + i])\n"
        "  else\n"
        "    redis.call('SET', KEYS[1 + i], value, 'PX', ARGV[3])\n"
        "    r[#r + 1] = cur(KEYS[1 + n + i], ARGV[5 + i])\n"
        "  end\n"
        "end\n"
        "redis.call('SET', KEYS[2 * n + 2], string.sub(value, #lease + 2) .. '\\n' .. ARGV[5], 'PX', ARGV[3])\n"
        "return r\n"
        "end)()\n"
        POSTLUDE
        "return r\n",
    [SCRIPT_MRAISE] =
        WANT
        "local n = #KEYS - 1\n"
        "for i = 1, n do want[3 + i] = ARGV[1 + n + i] end\n"
        PRELUDE
        "local r = {}\n"
        "for i = 2, #KEYS do\n"
        "  local b = ARGV[n + i]\n"
        "  local f, t = cur(KEYS[i], b), tonumber(ARGV[i])\n"
        "  if f < t then\n"
        "    redis.call('SET', KEYS[i], ARGV[i], 'PX', ret)\n"
        "    high(b, t)\n"
        "    f = t\n"
        "  end\n"
        "  r[i - 1] = f\n"
        "end\n"
        POSTLUDE
        "return r\n",
    /* ARGV: retention, who (a lease, or "<lease>.<tag>" for a failed attempt's
     * clean-up), key prefix, origin, scope (a name prefix every name of the set must
     * start with; "" for any).  A name outside the scope: nothing is released,
     * {-1, names}. */
    [SCRIPT_MRELEASE] =
        WANT PRELUDE
        "local s = redis.call('GET', KEYS[2])\n"
        "if not s then return {0, ''} end\n"
        "local who, prefix, scope = ARGV[2], ARGV[3], ARGV[5]\n"
        "local nl = string.find(s, '\\n', 1, true) or #s\n"
        "local tag, names = string.sub(s, 1, nl - 1), string.sub(s, nl + 1)\n"
        "local lease, exact = untag(who), string.find(who, '.', 1, true)\n"
        "if exact and string.sub(who, #lease + 2) ~= tag then return {0, names} end\n"
        "if scope ~= '' then\n"
        "  for name in string.gmatch(names, '[^\\n]+') do\n"
        "    if string.sub(name, 1, #scope) ~= scope then return {-1, names} end\n"
        "  end\n"
        "end\n"
        "local n = 0\n"
        "for name in string.gmatch(names, '[^\\n]+') do\n"
        "  local k = prefix .. name\n"
        "  local v = redis.call('GET', k)\n"
        "  if (exact and v == who) or (not exact and mine(v, lease)) then\n"
        "    redis.call('DEL', k)\n"
        "    redis.call('PUBLISH', prefix .. '#released:' .. name, ARGV[4])\n"
        "    n = n + 1\n"
        "  end\n"
        "end\n"
        "redis.call('DEL', KEYS[2])\n"
        "if n > 0 then return {1, names} end\n"
        "return {0, names}\n",
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
        [SCRIPT_ACQUIRE] = {'a', 2, 3}, [SCRIPT_RAISE] = {'f', 1, 2},
        [SCRIPT_RELEASE] = {'r', 1, 3}, [SCRIPT_EXTEND] = {'e', 2, 3},
        [SCRIPT_INSPECT] = {'i', 2, 0}, [SCRIPT_HANDOFF] = {'h', 2, 4},
    };
    if (id < 0 || id >= SCRIPT__COUNT || shapes[id].nkeys != nkeys || shapes[id].nargs != nargs)
        return 0;
    return shapes[id].code;
}
