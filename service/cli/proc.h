/* proc.h -- the command that `redlock run` and `redlock elect` supervise: the signals
 * (a signalfd for SIGCHLD and the forwarded ones, SIGPIPE ignored), fork/exec with
 * REDLOCK_FENCING_TOKEN and REDLOCK_LEASE, forwarding signals to it, stopping it
 * (SIGTERM, then SIGKILL after a grace period) and reaping it.  Single-threaded: the
 * caller waits on cli_proc.sfd together with its HTTP transfers. */
#ifndef RLC_PROC_H
#define RLC_PROC_H

#include <signal.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>

typedef struct cli_proc {
    int sfd;                        /* signalfd for SIGCHLD + forwarded, -1 before setup */
    sigset_t old_mask;              /* restored in the child */
    struct sigaction old_pipe;      /* SIGPIPE disposition, restored in the child */
    char **argv;                    /* the command (borrowed) */
    long slot;                      /* REDLOCK_SLOT (a semaphore's permit), -1: none */
    long grace_ms;                  /* SIGTERM -> SIGKILL */
    int term_with_parent;           /* the command gets SIGTERM if redlock dies */
    pid_t pid;                      /* 0 before cli_proc_spawn */
    int done;                       /* reaped: wstatus is valid */
    int wstatus;
    int stopping;                   /* SIGTERM sent by cli_proc_stop */
    int64_t kill_at;                /* stopping: SIGKILL then */
    int killed;                     /* SIGKILL sent */
} cli_proc;

/* Milliseconds on the monotonic clock. */
int64_t cli_now_ms(void);

/* Set p up for argv (borrowed) and grace_ms, and block SIGCHLD and the forwarded
 * signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) into p->sfd; ignore SIGPIPE (a closed
 * connection must not kill the lock holder).  Returns 0, or -1 with a message printed. */
int cli_proc_init(cli_proc *p, char **argv, long grace_ms);

/* Read one pending signal from p->sfd.  Returns its number, 0 if none is pending, -1 on
 * error. */
int cli_proc_next_signal(cli_proc *p, struct signalfd_siginfo *si);

/* Fork and exec the command with REDLOCK_FENCING_TOKEN=fence and REDLOCK_LEASE=lease in
 * its environment, with REDLOCK_SLOT=p->slot if p->slot >= 0 and without REDLOCK_SLOT
 * otherwise (an outer `redlock sem run`'s would not go with this lease) (127/126 from
 * the child if it cannot be run).  Flushes stdio first.
 * With p->term_with_parent the command gets SIGTERM when redlock dies (even by SIGKILL,
 * PR_SET_PDEATHSIG), and does not start if redlock is already gone.
 * Returns 0, or -1 with a message printed (fork failed). */
int cli_proc_spawn(cli_proc *p, long long fence, const char *lease);

/* The signals pending on p->sfd: forward SIGINT/SIGTERM/SIGHUP/SIGQUIT to the command
 * (not those a terminal already sent to the whole process group), then reap it. */
void cli_proc_on_signals(cli_proc *p);

/* Reap the command if it has exited (sets p->done and p->wstatus). */
void cli_proc_reap(cli_proc *p);

/* The lock is gone: print "lost the lock on NAME: WHY; sending SIGTERM ..." and send
 * SIGTERM now; cli_proc_tick() sends SIGKILL after the grace period. */
void cli_proc_stop(cli_proc *p, const char *name, const char *why);

/* Send the SIGKILL that is due at now, if any.  Returns how long the caller may sleep
 * before the next one is due, at most cap_ms (cap_ms when none is). */
int64_t cli_proc_tick(cli_proc *p, int64_t now, int64_t cap_ms);

/* The exit code once the command has been reaped: 75 if the lock was lost while it ran
 * (lost: saying so on stderr), else its status (128+N if killed by signal N). */
int cli_proc_exit_code(const cli_proc *p, int lost, const char *name);

/* Kill the command (SIGKILL) and reap it: after a failure of the caller's loop. */
void cli_proc_kill(cli_proc *p);

/* Close p->sfd. */
void cli_proc_fini(cli_proc *p);

#endif
