/* keep.c -- a lock kept by extensions (see keep.h). */
#include "cli/keep.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli/client.h"
#include "cli/ops.h"
#include "cli/proc.h"

/* A 409 max_hold_exceeded says what is left of the hold's bound: one more extension
 * asks for that, less this margin for the time its round takes to reach the masters,
 * if it is at least the minimum (below it the lock just ends with what it has). */
#define FINAL_MARGIN_MS 30L
#define FINAL_MIN_MS 100L

void cli_keep_init(cli_keep *k, cli_http *h, const char *name, const char *what,
                   const char *lease)
{
    memset(k, 0, sizeof(*k));
    k->h = h;
    k->name = name;
    k->what = what;
    k->lease = lease;
}

void cli_keep_tick(cli_keep *k, int64_t now, int64_t until)
{
    json_t *body;
    char err[256];
    long timeout = (long)(until - now);

    if (k->ext != NULL || k->bounded || now < k->sched.next_extend)
        return;
    if (timeout < 1)
        timeout = 1;
    body = json_pack("{s:s,s:I}", "lease", k->lease, "ttl_ms",
                     (json_int_t)(k->final_ttl > 0 ? k->final_ttl : k->sched.ttl_ms));
    k->ext_sent = now;
    k->ext_until = until;
    k->ext = body != NULL ? cli_http_start(k->h, "PATCH", k->name, body, timeout, err,
                                           sizeof(err))
                          : NULL;
    if (body == NULL)
        snprintf(err, sizeof(err), "out of memory");
    json_decref(body);
    if (k->ext == NULL) {
        fprintf(stderr, "redlock: %s %s: %s\n", k->what, k->name, err);
        cli_sched_failed(&k->sched, now);
    }
}

cli_keep_outcome cli_keep_take(cli_keep *k)
{
    cli_req *r = k->ext;
    long status;
    json_t *validity;
    char msg[768];
    cli_keep_outcome out;

    if (r == NULL || !cli_req_done(r))
        return CLI_KEEP_NONE;
    k->ext = NULL;
    status = cli_req_status(r);
    validity = json_object_get(cli_req_json(r), "validity_ms");
    if (status == 200 && json_is_integer(validity) && json_integer_value(validity) > 0) {
        cli_sched_granted(&k->sched, k->ext_sent, (long)json_integer_value(validity),
                          k->sched.ttl_ms);
        if (k->failing)
            fprintf(stderr, "redlock: %s %s: succeeded again\n", k->what, k->name);
        k->failing = 0;
        k->bounded = k->final_ttl > 0; /* the last one the bound allows */
        out = CLI_KEEP_OK;
    } else if (status == 404 && strcmp(cli_req_error_code(r), "lease_not_found") == 0) {
        out = CLI_KEEP_GONE;
    } else if (status == 409 && strcmp(cli_req_error_code(r), "max_hold_exceeded") == 0) {
        /* At the hold's bound: ask once for what is left of it, then no more. */
        json_t *l = json_object_get(cli_req_json(r), "max_hold_left_ms");
        long left = json_is_integer(l) ? (long)json_integer_value(l) : 0;
        if (k->final_ttl == 0 && left - FINAL_MARGIN_MS >= FINAL_MIN_MS) {
            k->final_ttl = left - FINAL_MARGIN_MS;
            k->sched.next_extend = cli_now_ms();
            out = CLI_KEEP_NONE;
        } else {
            k->bounded = 1;
            out = CLI_KEEP_BOUND;
        }
    } else {
        if (!k->failing) {
            int64_t left = k->ext_until - cli_now_ms();
            cli_ops_describe(msg, sizeof(msg), k->what, k->name, cli_http_url(k->h), r);
            fprintf(stderr, "redlock: %s; retrying for the %lld ms of validity left\n", msg,
                    (long long)(left > 0 ? left : 0));
        }
        k->failing = 1;
        cli_sched_failed(&k->sched, cli_now_ms());
        out = CLI_KEEP_RETRY;
    }
    cli_req_free(r);
    return out;
}

int64_t cli_keep_sleep(const cli_keep *k, int64_t now, int64_t cap_ms, int holding)
{
    int64_t t;

    if (holding)
        return cli_sched_sleep(&k->sched, now, k->ext == NULL, cap_ms);
    /* A late grant's deadline is already past: waking for it would spin. */
    t = k->ext == NULL && k->sched.next_extend - now < cap_ms ? k->sched.next_extend - now
                                                               : cap_ms;
    return t < 0 ? 0 : t;
}

void cli_keep_cancel(cli_keep *k)
{
    cli_req_free(k->ext);
    k->ext = NULL;
}
