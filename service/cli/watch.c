/* watch.c -- `redlock watch` (see watch.h). */
#include "cli/watch.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/ops.h"

/* How long one GET waits for a change (the service may allow less: --max-wait-ms). */
#define WATCH_WAIT_MS 25000L

static volatile sig_atomic_t stop_watching;

static void on_signal(int sig)
{
    (void)sig;
    stop_watching = 1;
}

/* Print the state (held, owner, fencing_token, validity_ms) as one line. */
static int print_state(const json_t *state)
{
    json_t *line = json_object();
    const char *keys[] = {"held", "owner", "fencing_token", "validity_ms"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(state, keys[i]);
        if (v)
            json_object_set(line, keys[i], v);
    }
    char *text = json_dumps(line, JSON_COMPACT);
    json_decref(line);
    int rc = text && printf("%s\n", text) >= 0 && fflush(stdout) == 0 ? 0 : -1;
    free(text);
    return rc;
}

int cli_watch(const cli_opts *o, cli_http *h)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: a poll in progress returns */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    char index[32] = "", query[96], err[256];
    long wait_ms = WATCH_WAIT_MS;
    int failures = 0;
    while (!stop_watching) {
        if (index[0])
            snprintf(query, sizeof query, "index=%s&wait_ms=%ld", index, wait_ms);
        cli_req *r = cli_http_start_query(h, "GET", o->name, index[0] ? query : NULL,
                                          wait_ms + 10000, err, sizeof err);
        if (!r) {
            fprintf(stderr, "redlock: watch %s: %s\n", o->name, err);
            return CLI_EXIT_FAILURE;
        }
        while (!cli_req_done(r) && !stop_watching)
            if (cli_http_poll(h, -1, 200, NULL) != 0)
                break;
        if (stop_watching) {
            cli_req_free(r);
            break;
        }
        long status = cli_req_status(r);
        json_t *body = cli_req_json(r);
        if (status == 400 && wait_ms > 1000 && cli_req_error_code(r) &&
            strcmp(cli_req_error_code(r), "invalid_wait") == 0) {
            wait_ms /= 2; /* the service allows less: ask again with less */
            cli_req_free(r);
            continue;
        }
        if (status != 200 || !body) {
            char what[512];
            cli_ops_describe(what, sizeof what, "watch", o->name, cli_http_url(h), r);
            int temporary = status == 0 || status == 503;
            cli_req_free(r);
            if (!temporary || ++failures > 5) {
                fprintf(stderr, "redlock: %s\n", what);
                return temporary ? CLI_EXIT_TEMPFAIL : CLI_EXIT_FAILURE;
            }
            struct timespec ts = {0, 200L * 1000000L * failures};
            nanosleep(&ts, NULL); /* interrupted by a signal: the loop stops */
            continue;
        }
        failures = 0;
        const char *next = json_string_value(json_object_get(body, "index"));
        if (!next) {
            fprintf(stderr, "redlock: watch %s: this redlockd answers no index (it predates "
                            "watches): upgrade the service\n", o->name);
            cli_req_free(r);
            return CLI_EXIT_FAILURE;
        }
        if (strcmp(next, index) != 0) { /* a change (or the first answer) */
            if (print_state(body) != 0) {
                cli_req_free(r);
                return CLI_EXIT_FAILURE;
            }
            snprintf(index, sizeof index, "%s", next);
        }
        cli_req_free(r);
    }
    return CLI_EXIT_OK;
}
