/* sem.c -- `redlock sem VERB`: the lock verbs on /semaphores/NAME (see sem.h). */
#include "cli/sem.h"

#include <stdio.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/ops.h"
#include "cli/run.h"

int cli_sem_do(const cli_opts *o, cli_http *h)
{
    if (!o->sem) {
        fprintf(stderr, "redlock: internal error: not a sem command\n");
        return CLI_EXIT_FAILURE;
    }
    cli_http_set_collection(h, "semaphores");
    switch (o->cmd) {
    case CLI_CMD_RUN:
        return cli_run(o, h);
    case CLI_CMD_ACQUIRE:
    case CLI_CMD_RELEASE:
    case CLI_CMD_EXTEND:
    case CLI_CMD_STATUS:
        return cli_ops_do(o, h);
    default:
        fprintf(stderr, "redlock: internal error: no sem verb %d\n", (int)o->cmd);
        return CLI_EXIT_FAILURE;
    }
}
