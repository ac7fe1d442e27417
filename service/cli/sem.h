/* sem.h -- `redlock sem VERB NAME --permits N`: the lock verbs (acquire, release, extend,
 * status, run) on a counting semaphore, /semaphores/NAME, with `run`'s supervision
 * (run.c) and the one-request commands (ops.c) reused as they are: only the collection
 * of the URL, the "permits" member of a grant request and REDLOCK_SLOT differ. */
#ifndef RLC_SEM_H
#define RLC_SEM_H

struct cli_opts;
struct cli_http;

/* Run o->cmd (o->sem set by cli_opts_parse) against /semaphores/o->name through h, which
 * keeps that collection afterwards.  `sem run` takes a permit, runs o->argv with
 * REDLOCK_FENCING_TOKEN, REDLOCK_LEASE and REDLOCK_SLOT (the permit's slot, 0..N-1),
 * extends it every ttl/3 and releases it at exit, with the exit codes of cli_run() (75
 * when every permit is taken, or when the permit is lost while the command runs); the
 * other verbs are those of cli_ops_do().  409 permits_mismatch (the holders of NAME use
 * another N) exits 75 as any 409: the service lets the N go once no permit granted
 * under it can still be valid. */
int cli_sem_do(const struct cli_opts *o, struct cli_http *h);

#endif
