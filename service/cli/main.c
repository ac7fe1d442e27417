/* main.c -- main() of bin/redlock, the command-line client of redlockd: parse the
 * command line, set up libcurl, hand over to `run` (run.c), `elect` (elect.c), `sem`
 * (sem.c) or a one-request command (ops.c).  Exit codes are in args.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/args.h"
#include "cli/elect.h"
#include "cli/client.h"
#include "cli/ops.h"
#include "cli/run.h"
#include "cli/sem.h"
#include "cli/watch.h"
#include "version.h"

static const char *env_get(const char *key) { return getenv(key); }

/* --lease -: read the lease from the first line of stdin into buf.  Returns 0 or -1. */
static int read_lease(char *buf, size_t len)
{
    size_t n;

    if (fgets(buf, (int)len, stdin) == NULL)
        return -1;
    n = strcspn(buf, "\r\n");
    if (buf[n] == '\0' && n == len - 1)
        return -1; /* no end of line within the limit: too long */
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    cli_opts o;
    cli_http *h = NULL;
    char err[512];
    char lease[CLI_LEASE_MAX + 2];
    int rc = CLI_EXIT_FAILURE;
    int curl_ready = 0;

    cli_opts_init(&o, env_get);
    if (cli_opts_parse(&o, argc, argv, err, sizeof(err)) != 0) {
        fprintf(stderr, "redlock: %s\nTry 'redlock --help'.\n", err);
        return CLI_EXIT_USAGE;
    }
    if (o.cmd == CLI_CMD_HELP) {
        if (fputs(cli_usage(), stdout) == EOF || fflush(stdout) != 0)
            return CLI_EXIT_FAILURE;
        return CLI_EXIT_OK;
    }
    if (o.cmd == CLI_CMD_VERSION) {
        if (printf("redlock %s\n", RL_VERSION) < 0 || fflush(stdout) != 0)
            return CLI_EXIT_FAILURE;
        return CLI_EXIT_OK;
    }
    if (o.lease_from_stdin) {
        if (read_lease(lease, sizeof(lease)) != 0) {
            fprintf(stderr, "redlock: --lease -: no lease of 1..%d characters on stdin\n",
                    CLI_LEASE_MAX);
            return CLI_EXIT_USAGE;
        }
        o.lease = lease;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "redlock: curl_global_init failed\n");
        goto out;
    }
    curl_ready = 1;
    h = cli_http_new(o.url, o.token, o.cacert, err, sizeof(err));
    if (h == NULL) {
        fprintf(stderr, "redlock: %s\n", err);
        goto out;
    }
    rc = o.sem                    ? cli_sem_do(&o, h)
         : o.cmd == CLI_CMD_RUN   ? cli_run(&o, h)
         : o.cmd == CLI_CMD_ELECT ? cli_elect(&o, h)
         : o.cmd == CLI_CMD_WATCH ? cli_watch(&o, h)
                                  : cli_ops_do(&o, h);
out:
    cli_http_free(h);
    if (curl_ready)
        curl_global_cleanup();
    memset(lease, 0, sizeof(lease));
    return rc;
}
