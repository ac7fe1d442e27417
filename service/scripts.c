/* scripts.c -- the Lua source of every script of proto.h, by id, gathered from the
 * script modules, one a concern:
 *   scripts_prelude.h  the Lua every lock script starts with: the master's record checked
 *   scripts_lock.c     single-name locks (exclusive, reentrant, shared), and the batch
 *   scripts_sem.c      semaphores
 *   scripts_multi.c    sets of names
 *   scripts_record.c   the master's record: its marker and a repair's proof
 * Their codes are proto.h's, written by name (PROTO_S). */
#include "scripts.h"

#include <stddef.h>

#include "scripts_lock.h"
#include "scripts_multi.h"
#include "scripts_record.h"
#include "scripts_sem.h"

const char *script_source(int id)
{
    static const char *(*const modules[])(int) = {scripts_lock_source, scripts_sem_source,
                                                  scripts_multi_source, scripts_record_source};
    for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++) {
        const char *s = modules[i](id);
        if (s)
            return s;
    }
    return "";
}

char script_batch_code(int id, int nkeys, int nargs)
{
    return scripts_lock_batch_code(id, nkeys, nargs);
}
