/* ops.h -- the one-request commands of the redlock client (acquire, release, extend,
 * status) and the wording of failed requests, shared with `redlock run`. */
#ifndef RLC_OPS_H
#define RLC_OPS_H

#include <stddef.h>

#include <jansson.h>

struct cli_opts;
struct cli_http;
struct cli_req;

/* Run o->cmd (CLI_CMD_ACQUIRE, _RELEASE, _EXTEND or _STATUS): print the server's JSON
 * on stdout unless o->quiet, a one-line message on stderr when the request failed.
 * Returns the exit code (see cli_exit_for_status). */
int cli_ops_do(const struct cli_opts *o, struct cli_http *h);

/* The JSON body of POST /locks/NAME for the options (ttl, wait, lease, owner when set),
 * or NULL on allocation failure.  The caller owns the result. */
json_t *cli_ops_acquire_body(long ttl_ms, long wait_ms, const char *lease, const char *owner);

/* The JSON body of POST /locks/NAME or /semaphores/NAME for all of o's options: those
 * of cli_ops_acquire_body, and "mode": "shared" (--shared), "reentrant": true
 * (--reentrant), "permits": N (the sem verbs).  NULL on allocation failure; the caller
 * owns the result. */
json_t *cli_ops_grant_body(const struct cli_opts *o);

/* How long to let a request run: the wait plus a margin for the service's rounds. */
long cli_ops_timeout(long wait_ms);

/* Describe a failed request in one line for stderr: "what NAME: <why>", where why is
 * "cannot reach redlockd at URL: ..." with no answer, or "HTTP 409 lock_held: ...", or
 * for a service that refuses "owner" as an unknown member, that it predates --owner.
 * A what starting with "sem " ("sem acquire") names a semaphore: a 409 lock_held then
 * says that every permit is taken.
 * Never includes a lease (error bodies never hold one).  Writes into buf. */
void cli_ops_describe(char *buf, size_t len, const char *what, const char *name,
                      const char *url, const struct cli_req *r);

/* DELETE /locks/NAME with the lease, for up to timeout_ms.  Returns 0 when released (or,
 * for a reentrant hold, one hold was taken off: a note on stderr says how many remain);
 * 1 when the service said the lease was no longer held (a note is printed on stderr);
 * -1 when the release failed, with msg describing it in one line ("release NAME: ..."),
 * for the caller to print with what that means for the lock. */
int cli_ops_release(struct cli_http *h, const char *name, const char *lease,
                    long timeout_ms, char *msg, size_t len);

#endif
