/* printscript.c -- prints one of redlockd's Lua scripts (service/scripts.c) so
 * that bench.sh's raw-Redis ceiling runs exactly the service's own scripts.
 *
 *   printscript acquire|release|raise|batch|sem-acquire|extend   the source on stdout; exit 2 on a
 *   bad name
 */
#include <stdio.h>
#include <string.h>

#include "scripts.h"

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int id;
    } table[] = {{"acquire", SCRIPT_ACQUIRE},
                 {"release", SCRIPT_RELEASE},
                 {"raise", SCRIPT_RAISE},
                 {"batch", SCRIPT_BATCH},
                 {"sem-acquire", SCRIPT_SEM_ACQUIRE},
                 {"extend", SCRIPT_EXTEND}};
    if (argc == 2)
        for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
            if (strcmp(argv[1], table[i].name) == 0)
                return fputs(script_source(table[i].id), stdout) < 0 ? 1 : 0;
    fprintf(stderr, "usage: printscript acquire|release|raise|batch|sem-acquire|extend\n");
    return 2;
}
