/* policy.h -- the redlock client's decisions, kept apart from I/O so they can be unit
 * tested: exit codes for HTTP answers and for the command's wait status, and the lease
 * clock of `redlock run` (when to extend, when to retry, when the lock counts as lost).
 * Times are milliseconds on a monotonic clock, supplied by the caller. */
#ifndef RLC_POLICY_H
#define RLC_POLICY_H

#include <stdint.h>

/* Exit code for an answer with HTTP status (0: no answer at all, e.g. connection
 * refused or timed out): 0 for 2xx, 75 (EX_TEMPFAIL) for 409, 503 and no answer,
 * 1 for anything else. */
int cli_exit_for_status(long status);

/* Exit code for the answer to an acquire (POST): as cli_exit_for_status, except that
 * 409 (the lock is held by someone else, also after a wait) gives conflict_exit (the
 * --conflict-exit-code, 75 by default). */
int cli_exit_for_acquire(long status, int conflict_exit);

/* Exit code for a waitpid() status: the exit status, or 128+N if killed by signal N. */
int cli_exit_for_wait(int wstatus);

/* The lease clock of one held lock. */
typedef struct cli_sched {
    long ttl_ms;          /* ttl asked for on each extension */
    int64_t deadline;     /* the lock counts as lost here: cli_sched_lead() before its
                           * validity ends (no extension succeeded) */
    int64_t next_extend;  /* when to send the next extension */
} cli_sched;

/* How long before its validity ends a held lock counts as lost (CMD gets its SIGTERM
 * then): a tenth of the ttl, 10 ms..1 s, as the Python, Go and TypeScript clients do, so
 * that CMD has that long to stop, and a delay in scheduling CMD, the guard or redlock
 * itself eats into that lead rather than into the time after another client's grant.
 * A validity shorter than twice the lead gets half of it as its lead. */
int64_t cli_sched_lead(long ttl_ms);

/* A grant or extension sent at sent_at returned validity_ms for ttl_ms.  The validity is
 * counted from the moment the request was sent, which is before the service started its
 * round, so the local deadline (cli_sched_lead() before the validity ends) is never later
 * than the service's.  The next extension is due a third of the ttl later (earlier if
 * the validity is unusually short). */
void cli_sched_granted(cli_sched *s, int64_t sent_at, long validity_ms, long ttl_ms);

/* A duplex hold's answer to a ping sent at sent_at says validity_ms: the lock is valid
 * until sent_at + validity_ms (the answer was written after the ping was read, so after
 * it was sent; never count from the answer's arrival), and counts as lost the lead
 * before (cli_sched_lead of the ttl_ms granted).  The deadline becomes the later of
 * that and the one it had: each end is a bound the service guaranteed.  Returns 1 if the
 * deadline moved. */
int cli_sched_answered(cli_sched *s, int64_t sent_at, long validity_ms);

/* 1 when a grant scheduled by cli_sched_granted() and received at now must be confirmed
 * by an extension before the command starts: its first extension is already due (or its
 * validity, counted from the send time, is over).  That is the case after a long --wait:
 * the send time is the only anchor known to be safe, and a waited POST's is too old to be
 * of use, so the anchor is renewed by an extension, whose own send time is recent. */
int cli_sched_confirm_first(const cli_sched *s, int64_t now);

/* An extension attempt failed at now without losing the lease outright (a 503, a
 * timeout, no connection): retry after a short delay, min(max(ttl/10, 50), 1000) ms. */
void cli_sched_failed(cli_sched *s, int64_t now);

/* 1 when the validity has run out at now. */
int cli_sched_expired(const cli_sched *s, int64_t now);

/* How long a loop may sleep at now before something is due: the earlier of the next
 * extension (if extending is 1, i.e. none is in flight) and the deadline, at least 0,
 * at most cap_ms. */
int64_t cli_sched_sleep(const cli_sched *s, int64_t now, int extending, int64_t cap_ms);

#endif
