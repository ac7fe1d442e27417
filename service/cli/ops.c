/* ops.c -- acquire, release, extend and status: one request each (see ops.h). */
#include "cli/ops.h"

#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/policy.h"

/* Margin over --wait for the service's own rounds and the network. */
#define REQUEST_MARGIN_MS 15000L

long cli_ops_timeout(long wait_ms) { return (wait_ms > 0 ? wait_ms : 0) + REQUEST_MARGIN_MS; }

json_t *cli_ops_acquire_body(long ttl_ms, long wait_ms, const char *lease, const char *owner)
{
    json_t *body = json_object();

    if (body == NULL)
        return NULL;
    if ((ttl_ms > 0 && json_object_set_new(body, "ttl_ms", json_integer(ttl_ms)) != 0) ||
        (wait_ms >= 0 && json_object_set_new(body, "wait_ms", json_integer(wait_ms)) != 0) ||
        (lease != NULL && json_object_set_new(body, "lease", json_string(lease)) != 0) ||
        (owner != NULL && json_object_set_new(body, "owner", json_string(owner)) != 0)) {
        json_decref(body);
        return NULL;
    }
    return body;
}

json_t *cli_ops_grant_body(const cli_opts *o)
{
    json_t *body = cli_ops_acquire_body(o->ttl_ms, o->wait_ms, o->lease, o->owner);

    if (body == NULL)
        return NULL;
    if ((o->shared && json_object_set_new(body, "mode", json_string("shared")) != 0) ||
        (o->reentrant && json_object_set_new(body, "reentrant", json_true()) != 0) ||
        (o->sem && o->permits > 0 &&
         json_object_set_new(body, "permits", json_integer(o->permits)) != 0) ||
        (o->max_hold_ms > 0 &&
         json_object_set_new(body, "max_hold_ms", json_integer(o->max_hold_ms)) != 0)) {
        json_decref(body);
        return NULL;
    }
    return body;
}

void cli_ops_describe(char *buf, size_t len, const char *what, const char *name,
                      const char *url, const cli_req *r)
{
    long status = cli_req_status(r);
    const char *code = cli_req_error_code(r);
    const char *msg = cli_req_error_message(r);
    json_t *j = cli_req_json(r);

    if (status == 0) {
        snprintf(buf, len, "%s %s: cannot reach redlockd at %s: %s", what, name, url,
                 cli_req_error(r));
        return;
    }
    if (status == 409 && strcmp(code, "permits_mismatch") == 0) {
        json_t *permits = j != NULL ? json_object_get(j, "permits") : NULL;
        if (json_is_integer(permits)) {
            snprintf(buf, len, "%s %s: its holders use --permits %lld (HTTP 409 "
                     "permits_mismatch)", what, name, (long long)json_integer_value(permits));
            return;
        }
    }
    if (status == 409) {
        json_t *ra = j != NULL ? json_object_get(j, "retry_after_ms") : NULL;
        if (json_is_integer(ra)) {
            snprintf(buf, len, "%s %s: %s (HTTP 409 %s; retry after %lld ms)", what, name,
                     strncmp(what, "sem ", 4) == 0 ? "every permit is taken"
                                                   : "the lock is held by someone else",
                     code[0] ? code : "lock_held", (long long)json_integer_value(ra));
            return;
        }
    }
    if (status == 503 && strcmp(code, "quorum_unavailable") == 0 && j != NULL) {
        json_t *ok = json_object_get(j, "nodes_ok"), *q = json_object_get(j, "quorum");
        if (json_is_integer(ok) && json_is_integer(q)) {
            snprintf(buf, len, "%s %s: HTTP 503 quorum_unavailable: %lld masters answered, "
                     "%lld needed", what, name, (long long)json_integer_value(ok),
                     (long long)json_integer_value(q));
            return;
        }
    }
    /* Members of the POST body that an older redlockd refuses as unknown. */
    static const struct {
        const char *member, *why;
    } newer[] = {
        {"unknown member 'owner'", "does not know \"owner\" (it predates --owner): leave "
                                   "out --owner, or upgrade the service"},
        {"unknown member 'hold'", "predates locks held while connected (hold=stream), "
                                  "which elect needs: upgrade the service"},
        {"unknown member 'mode'", "predates shared locks (--shared): upgrade the service"},
        {"unknown member 'reentrant'", "predates reentrant holds (--reentrant): upgrade "
                                       "the service"},
    };
    for (size_t i = 0; status == 400 && strcmp(code, "invalid_json") == 0 &&
                       i < sizeof(newer) / sizeof(newer[0]); i++) {
        if (strstr(msg, newer[i].member) != NULL) {
            snprintf(buf, len, "%s %s: this redlockd %s (HTTP 400 invalid_json: %s)", what,
                     name, newer[i].why, msg);
            return;
        }
    }
    if (status == 404 && strcmp(code, "not_found") == 0 && strncmp(what, "sem ", 4) == 0) {
        snprintf(buf, len, "%s %s: this redlockd predates semaphores (HTTP 404 not_found on "
                 "/semaphores): upgrade the service", what, name);
        return;
    }
    if (code[0] != '\0')
        snprintf(buf, len, "%s %s: HTTP %ld %s%s%s", what, name, status, code,
                 msg[0] ? ": " : "", msg);
    else
        snprintf(buf, len, "%s %s: HTTP %ld with no JSON error body", what, name, status);
}

int cli_ops_release(cli_http *h, const char *name, const char *lease, long timeout_ms,
                    char *msg, size_t len)
{
    json_t *body = json_pack("{s:s}", "lease", lease);
    cli_req *r;
    char err[512];
    int rc = -1;

    if (body == NULL) {
        snprintf(msg, len, "release %s: out of memory", name);
        return -1;
    }
    r = cli_http_do(h, "DELETE", name, body, timeout_ms, err, sizeof(err));
    json_decref(body);
    if (r == NULL) {
        snprintf(msg, len, "release %s: %s", name, err);
        return -1;
    }
    if (cli_req_status(r) == 404 && strcmp(cli_req_error_code(r), "lease_not_found") == 0) {
        fprintf(stderr, "redlock: release %s: the lease was no longer held (expired or "
                "taken away)\n", name);
        rc = 1;
    } else if (cli_req_status(r) < 200 || cli_req_status(r) >= 300) {
        cli_ops_describe(msg, len, "release", name, cli_http_url(h), r);
    } else {
        json_t *holds = json_object_get(cli_req_json(r), "holds");
        /* A reentrant hold taken inside the command (acquire --reentrant) and not given
         * back: the service took one hold off and the lock stays held. */
        if (json_is_false(json_object_get(cli_req_json(r), "released")) &&
            json_is_integer(holds))
            fprintf(stderr, "redlock: release %s: the lease still has %lld reentrant "
                    "hold(s): the lock stays held until they are released or its ttl "
                    "runs out\n", name, (long long)json_integer_value(holds));
        rc = 0;
    }
    cli_req_free(r);
    return rc;
}

int cli_ops_do(const cli_opts *o, cli_http *h)
{
    static const struct {
        cli_cmd cmd;
        const char *method, *what;
    } table[] = {
        {CLI_CMD_ACQUIRE, "POST", "acquire"},
        {CLI_CMD_RELEASE, "DELETE", "release"},
        {CLI_CMD_EXTEND, "PATCH", "extend"},
        {CLI_CMD_STATUS, "GET", "status"},
    };
    const char *method = NULL, *what = NULL;
    json_t *body = NULL;
    cli_req *r = NULL;
    char err[512], sem_what[32];
    long status;
    int rc = CLI_EXIT_FAILURE;

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].cmd == o->cmd) {
            method = table[i].method;
            what = table[i].what;
        }
    }
    if (method == NULL) {
        fprintf(stderr, "redlock: internal error: not a one-request command\n");
        return CLI_EXIT_FAILURE;
    }
    if (o->sem) {
        snprintf(sem_what, sizeof(sem_what), "sem %s", what);
        what = sem_what;
    }

    switch (o->cmd) {
    case CLI_CMD_ACQUIRE:
        body = cli_ops_grant_body(o);
        break;
    case CLI_CMD_RELEASE:
        body = json_pack("{s:s}", "lease", o->lease);
        break;
    case CLI_CMD_EXTEND:
        body = o->ttl_ms > 0 ? json_pack("{s:s,s:I}", "lease", o->lease, "ttl_ms",
                                         (json_int_t)o->ttl_ms)
                             : json_pack("{s:s}", "lease", o->lease);
        break;
    default:
        break;
    }
    if (o->cmd != CLI_CMD_STATUS && body == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        goto out;
    }

    r = cli_http_do(h, method, o->name, body,
                    cli_ops_timeout(o->cmd == CLI_CMD_ACQUIRE ? o->wait_ms : 0), err,
                    sizeof(err));
    if (r == NULL) {
        fprintf(stderr, "redlock: %s %s: %s\n", what, o->name, err);
        goto out;
    }
    status = cli_req_status(r);
    if (!o->quiet && cli_req_json(r) != NULL) {
        const char *text = cli_req_body(r);
        size_t n = strlen(text);
        if (fputs(text, stdout) == EOF ||
            ((n == 0 || text[n - 1] != '\n') && fputc('\n', stdout) == EOF) ||
            fflush(stdout) != 0) {
            fprintf(stderr, "redlock: cannot write to stdout\n");
            goto out;
        }
    }
    rc = o->cmd == CLI_CMD_ACQUIRE ? cli_exit_for_acquire(status, o->conflict_exit)
                                   : cli_exit_for_status(status);
    if (rc != CLI_EXIT_OK || status == 409) {
        cli_ops_describe(err, sizeof(err), what, o->name, cli_http_url(h), r);
        fprintf(stderr, "redlock: %s\n", err);
    }
out:
    cli_req_free(r);
    json_decref(body);
    return rc;
}
