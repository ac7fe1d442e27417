/* proc.h -- the command that `redlock run`, `sem run` and `elect` supervise, and its guard.
 *
 * redlock never runs CMD itself: it forks a guard (a copy of itself that keeps none of its
 * descriptors, connections included), and the guard forks and execs CMD.  The guard does
 * no I/O but its socket to redlock and its signals, so nothing redlock does can hold it up:
 *   - it holds the lock's deadline (the end of the last validity redlock counted, sent on
 *     every change) and stops CMD there on its own timer, however long a write, a read or
 *     a DNS lookup holds redlock up (or a SIGSTOP, or a swap-out);
 *   - it stops CMD when redlock dies, however it dies (its socket to redlock reaches end of
 *     file; the parent-death signal too): SIGKILL of redlock included;
 *   - stopping is SIGTERM, then SIGKILL after the grace period, then reaping CMD: the
 *     guard only ends once CMD has, so redlock releases the lock only after CMD is gone;
 *   - CMD gets SIGKILL if the guard itself dies (its parent-death signal);
 *   - it may keep one of redlock's descriptors open (keep_fd: elect's stream, whose end
 *     lets the service release the lock at once) until CMD is gone, so that redlock's
 *     death does not hand the lock to someone else while CMD still runs.
 * Signals redlock forwards (SIGINT, SIGTERM, SIGHUP, SIGQUIT) go to the guard, which passes
 * them on, unless a terminal sent them to the whole process group (CMD has them already).
 * Single-threaded: redlock waits on cli_proc.sfd (SIGCHLD and the forwarded signals)
 * together with its HTTP transfers; the guard reports CMD's status before it exits, and
 * exits with it too (75 if it stopped CMD), should the report go unread. */
#ifndef RLC_PROC_H
#define RLC_PROC_H

#include <signal.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

/* Why the guard stopped CMD (cli_proc.guard_why). */
enum {
    CLI_GUARD_NONE = 0,     /* it did not: CMD ended by itself (or by a forwarded signal) */
    CLI_GUARD_STOPPED,      /* redlock said the lock was lost (cli_proc_stop) */
    CLI_GUARD_DEADLINE,     /* the lock's deadline passed on the guard's own timer */
    CLI_GUARD_ORPHANED,     /* redlock died */
};

typedef struct cli_proc {
    int sfd;                        /* signalfd for SIGCHLD + forwarded, -1 before setup */
    sigset_t mask;                  /* the signals blocked into sfd */
    sigset_t old_mask;              /* restored in the command */
    struct sigaction old_pipe;      /* SIGPIPE disposition, restored in the command */
    struct sigaction old_chld;      /* SIGCHLD disposition, restored in the command */
    char **argv;                    /* the command (borrowed) */
    const char *name;               /* the lock's name, for messages (borrowed) */
    long slot;                      /* REDLOCK_SLOT (a semaphore's permit), -1: none */
    long grace_ms;                  /* SIGTERM -> SIGKILL */
    int keep_fd;                    /* a descriptor of redlock's the guard keeps open until
                                     * the command is gone (elect's stream), -1: none */
    pid_t pid;                      /* the guard; 0 before cli_proc_spawn */
    pid_t cmd_pid;                  /* the command, once the guard said (0 until then) */
    int sock;                       /* our end of the socket to the guard, -1: none */
    int done;                       /* the guard was reaped: wstatus is the command's */
    int wstatus;
    int stopping;                   /* cli_proc_stop was called */
    int64_t kill_at;                /* stopping: the guard sends SIGKILL then */
    int killed;                     /* we sent SIGKILL to the guard (it did not end) */
    int reported;                   /* the guard's report was read: report_status, guard_why
                                     * and guard_killed (kept until it is reaped) */
    int report_status;              /* the command's wait status, as the guard reported it */
    int guard_why;                  /* CLI_GUARD_*: why the guard stopped the command */
    int guard_killed;               /* the guard had to SIGKILL the command */
} cli_proc;

/* Milliseconds on the monotonic clock. */
int64_t cli_now_ms(void);

/* Set p up for argv and name (both borrowed) and grace_ms, and block SIGCHLD and the
 * forwarded signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) into p->sfd; ignore SIGPIPE (a
 * closed connection must not kill the lock holder); give SIGCHLD its default action (an
 * ignored one, inherited from the caller, would reap the guard and the command unseen).
 * Returns 0, or -1 with a message printed. */
int cli_proc_init(cli_proc *p, char **argv, const char *name, long grace_ms);

/* Read one pending signal from p->sfd.  Returns its number, 0 if none is pending, -1 on
 * error. */
int cli_proc_next_signal(cli_proc *p, struct signalfd_siginfo *si);

/* Start the guard, which runs the command with REDLOCK_FENCING_TOKEN=fence and
 * REDLOCK_LEASE=lease in its environment, with REDLOCK_SLOT=p->slot if p->slot >= 0 and
 * without REDLOCK_SLOT otherwise (an outer `redlock sem run`'s would not go with this
 * lease) (status 127/126 if it cannot be run), and stops it at deadline (monotonic ms,
 * see cli_now_ms) unless told a later one; the guard keeps p->keep_fd open if set.  Neither starts if redlock is gone by then.
 * Flushes stdio first.  Returns 0, or -1 with a message printed (fork failed). */
int cli_proc_spawn(cli_proc *p, long long fence, const char *lease, int64_t deadline);

/* The lock is now valid until deadline (monotonic ms): tell the guard. */
void cli_proc_set_deadline(cli_proc *p, int64_t deadline);

/* The signals pending on p->sfd: forward SIGINT/SIGTERM/SIGHUP/SIGQUIT to the command
 * through its guard (not those a terminal already sent to the whole process group), then
 * reap the guard. */
void cli_proc_on_signals(cli_proc *p);

/* Reap the guard if it has exited, which it does once the command has (sets p->done,
 * p->wstatus to the command's status as the guard reported it, p->guard_why and
 * p->guard_killed; says on stderr when the guard needed SIGKILL or stopped the command at
 * the deadline before redlock did). */
void cli_proc_reap(cli_proc *p);

/* The lock is gone: print "lost the lock on NAME: WHY; sending SIGTERM ..." and have the
 * guard send SIGTERM now and SIGKILL after the grace period.  Once only. */
void cli_proc_stop(cli_proc *p, const char *name, const char *why);

/* A guard that has not ended a while after the SIGKILL it was to send gets one itself
 * (the command then gets SIGKILL from its parent-death signal).  Returns how long the
 * caller may sleep before that is due, at most cap_ms. */
int64_t cli_proc_tick(cli_proc *p, int64_t now, int64_t cap_ms);

/* The exit code once the command has been reaped: 75 if the lock was lost while it ran
 * (lost, or the guard stopped it at the deadline: saying so on stderr), else its status
 * (128+N if killed by signal N). */
int cli_proc_exit_code(const cli_proc *p, int lost, const char *name);

/* Kill the guard (SIGKILL; the command gets SIGKILL from its parent-death signal) and
 * reap it: after a failure of the caller's loop.  p->wstatus is then the command's
 * status if the guard had reported it.  No-op once the guard has been reaped. */
void cli_proc_kill(cli_proc *p);

/* Close p->sfd and the socket to the guard. */
void cli_proc_fini(cli_proc *p);

#endif
