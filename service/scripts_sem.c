/* scripts_sem.c -- a semaphore's scripts: a permit taken (FN_SEM_ACQUIRE), released,
 * extended and inspected, over the semaphore's slots and its record, and the count of
 * held slots they keep (SEM_HELD).  The record is "<N>" or, made by a build that
 * counts every slot it writes, "<N>c" (SEM_COUNTED; docs/DESIGN.md section 12). */
#include "scripts_sem.h"

#include <stddef.h>

#include "proto.h"
#include "scripts_prelude.h"
#include "scripts_sem_lua.h"

/* K: the semaphore's record -> {nil, longest pttl, F, "", permits taken, permits}. */
#define FN_SEM_INSPECT                                                               \
    "function(K, b, pfx)\n"                                                          \
    "  local n = tonumber((sem_rec(redis.call('GET', K[1])))) or 0\n"                 \
    "  local held, longest = 0, -2\n"                                                 \
    "  for i = 0, n - 1 do\n"                                                         \
    "    local p = redis.call('PTTL', pfx .. i)\n"                                    \
    "    if p ~= -2 then held = held + 1 end\n"                                       \
    "    if p > longest then longest = p end\n"                                       \
    "  end\n"                                                                         \
    "  return {false, longest, cur(b), '', held, n}\n"                                \
    "end"

static const char *const sources[SCRIPT__COUNT] = {
    [SCRIPT_SEM_ACQUIRE] = PRELUDE SEM_HELD_FN "local f = " FN_SEM_ACQUIRE "\n"
                           "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                           "settle()\n"
                           TIMED_RETURN,
    [SCRIPT_SEM_RELEASE] = PRELUDE SEM_FIND "local f = " FN_SEM_RELEASE "\n"
                           "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                           TIMED_RETURN,
    [SCRIPT_SEM_EXTEND] = PRELUDE SEM_FIND "local f = " FN_SEM_EXTEND "\n"
                          "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                          "settle()\n"
                          TIMED_RETURN,
    [SCRIPT_SEM_INSPECT] = PRELUDE SEM_HELD_FN "local f = " FN_SEM_INSPECT "\n"
                           "local r = f({unpack(KEYS, 2)}, unpack(ARGV))\n"
                           "settle()\n"
                           TIMED_RETURN,
};

const char *scripts_sem_source(int id)
{
    return id >= 0 && id < SCRIPT__COUNT ? sources[id] : NULL;
}
