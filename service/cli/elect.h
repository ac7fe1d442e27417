/* elect.h -- `redlock elect`: leader election on a lock held while connected.
 *
 * Campaign: POST /locks/NAME with hold=stream, a long wait_ms and Upgrade: redlock-hold,
 * again and again until granted (at once after a 409, with a growing, jittered back-off
 * after a 503 or no answer).  Lead: run the command with REDLOCK_FENCING_TOKEN and
 * REDLOCK_LEASE while the hold's validity runs.  One thread, one loop, as for `redlock
 * run`: the signalfd, the stream, the pings or extensions and the validity clock are
 * waited on together in one poll, so a stream gone silent never delays stopping the
 * command.
 *
 * Validity (docs/DESIGN.md, "The rule for clients").  The grant's is counted from the
 * send of the POST (its round started after that).  A duplex hold (the service answered
 * 101) is then kept by pings: one every ping_ms, never two unanswered, each answer's
 * validity counted from its ping's send, the latest end kept.  A one-way stream (a 201:
 * a service without duplex holds) cannot anchor anything: an "extended" line says how
 * much validity its round left, not when that round ran, and it can spend any time on
 * the way.  So it is kept by this process's own extensions, a PATCH with the lease every
 * third of the ttl, each success counted from its send (keep.h), as `redlock run` keeps
 * its lock; "extended" lines move nothing.  A grant that comes after its first renewal
 * was due (the POST was parked) is confirmed by a ping's answer or an extension before
 * the command starts.  "lost" and "released" lines and the stream's end stop the command
 * at once.  The command's guard (proc.h) holds the deadline and stops the command there
 * on its own timer, and keeps the stream's connection open until the command is gone, so
 * that the lock is not handed on while it still runs, whatever happens to redlock. */
#ifndef RLC_ELECT_H
#define RLC_ELECT_H

struct cli_opts;
struct cli_http;

/* Campaign for o->name, then run o->argv as the leader.  Returns the exit code: the
 * command's status (128+N if killed by signal N) once it has exited and the lock was
 * released; 75 if leadership was lost while it ran (a "lost" or "released" line, the
 * stream or the connection ending, an extension answered lease_not_found, or the
 * validity running out with no successful extension: the command got SIGTERM, and
 * SIGKILL after o->grace_ms); 128+N if signal N interrupted the
 * campaign; 127/126 if the command could not be run; 1 if the service refused the
 * campaign (400, 401, 403...) and on other errors. */
int cli_elect(const struct cli_opts *o, struct cli_http *h);

#endif
