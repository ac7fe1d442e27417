/* elect.h -- `redlock elect`: leader election on a lock held while connected.
 *
 * Campaign: POST /locks/NAME with hold=stream and a long wait_ms, again and again until
 * granted (at once after a 409, with a growing, jittered back-off after a 503 or no
 * answer).  Lead: run the command with REDLOCK_FENCING_TOKEN and REDLOCK_LEASE while
 * the service keeps the lock and says so on the stream.  One thread, one loop, as for
 * `redlock run`: the signalfd, the stream and the validity clock are waited on together
 * in one curl_multi_poll(), so a stream gone silent never delays stopping the command.
 *
 * The validity of each line (the grant, then {"event":"extended","validity_ms":V}) is
 * counted from the start of the poll before the one that read it: every byte there was
 * to read then was read by that poll, so the line reached this process after that
 * moment, and a delay of this process in reading it (descheduled, stopped) does not
 * extend its deadline.  Its way from the service to here is covered by the margin by
 * which the service says "lost" before the end of what it announced (docs/DESIGN.md
 * section 10).  Polls last at most a 25th of the ttl, so this costs little validity. */
#ifndef RLC_ELECT_H
#define RLC_ELECT_H

struct cli_opts;
struct cli_http;

/* Campaign for o->name, then run o->argv as the leader.  Returns the exit code: the
 * command's status (128+N if killed by signal N) once it has exited and the lock was
 * released; 75 if leadership was lost while it ran (a "lost" line, the stream or the
 * connection ending, or the announced validity running out with no new line: the
 * command got SIGTERM, and SIGKILL after o->grace_ms); 128+N if signal N interrupted the
 * campaign; 127/126 if the command could not be run; 1 if the service refused the
 * campaign (400, 401, 403...) and on other errors. */
int cli_elect(const struct cli_opts *o, struct cli_http *h);

#endif
