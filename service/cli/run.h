/* run.h -- `redlock run`: hold a Redlock lock while a command runs (a distributed flock).
 *
 * One thread, one loop: a signalfd (SIGCHLD and the forwarded signals) and the lease
 * clock are waited on together with the HTTP transfers in one curl_multi_poll(), so an
 * extension in flight never delays noticing the command's exit or a signal. */
#ifndef RLC_RUN_H
#define RLC_RUN_H

struct cli_opts;
struct cli_http;

/* Acquire o->name, run o->argv with REDLOCK_FENCING_TOKEN and REDLOCK_LEASE in its
 * environment, extend every ttl/3 while it runs, release when it exits.  A grant that
 * arrives after its first extension was due (a long --wait) is first confirmed by an
 * extension, since its validity can only be counted from when the POST was sent.
 * Whatever the way out, a lease the service granted is released unless the service said
 * it is gone.
 * Returns the exit code: the command's status (128+N if killed by signal N); 75 if the
 * lock could not be taken or confirmed, or was lost while the command ran (the command
 * then got SIGTERM, and SIGKILL after o->grace_ms); 127/126 if the command could not be
 * run; 1 on other errors; 128+N if signal N interrupted the wait for the lock. */
int cli_run(const struct cli_opts *o, struct cli_http *h);

#endif
