/* proc.c -- the supervised command: signals, fork/exec, stop, reap (see proc.h). */
#include "cli/proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/policy.h"

/* The signals forwarded to the command. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

int64_t cli_now_ms(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_proc_init(cli_proc *p, char **argv, long grace_ms)
{
    sigset_t mask;
    struct sigaction ign;

    memset(p, 0, sizeof(*p));
    p->sfd = -1;
    p->argv = argv;
    p->slot = -1;
    p->grace_ms = grace_ms;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaddset(&mask, forwarded[i]);
    if (sigprocmask(SIG_BLOCK, &mask, &p->old_mask) != 0) {
        fprintf(stderr, "redlock: sigprocmask: %s\n", strerror(errno));
        return -1;
    }
    p->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (p->sfd < 0) {
        fprintf(stderr, "redlock: signalfd: %s\n", strerror(errno));
        return -1;
    }
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGPIPE, &ign, &p->old_pipe) != 0) {
        fprintf(stderr, "redlock: sigaction: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

int cli_proc_next_signal(cli_proc *p, struct signalfd_siginfo *si)
{
    ssize_t n = read(p->sfd, si, sizeof(*si));

    if (n == (ssize_t)sizeof(*si))
        return (int)si->ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

/* In the child: restore the signal state, export the lease, exec.  Never returns. */
static void exec_command(cli_proc *p, pid_t parent, long long fence_value, const char *lease)
{
    char fence[32], slot[32];
    const char *cmd = p->argv[0];
    int err;

    snprintf(fence, sizeof(fence), "%lld", fence_value);
    snprintf(slot, sizeof(slot), "%ld", p->slot);
    if (p->term_with_parent &&
        (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)) {
        fprintf(stderr, "redlock: not running '%s': redlock is gone\n", cmd);
        _exit(126);
    }
    if (sigaction(SIGPIPE, &p->old_pipe, NULL) != 0 ||
        sigprocmask(SIG_SETMASK, &p->old_mask, NULL) != 0 ||
        setenv("REDLOCK_FENCING_TOKEN", fence, 1) != 0 ||
        setenv("REDLOCK_LEASE", lease, 1) != 0 ||
        (p->slot >= 0 ? setenv("REDLOCK_SLOT", slot, 1) : unsetenv("REDLOCK_SLOT")) != 0) {
        fprintf(stderr, "redlock: cannot prepare to run '%s': %s\n", cmd, strerror(errno));
        _exit(126);
    }
    execvp(cmd, p->argv);
    err = errno;
    fprintf(stderr, "redlock: cannot run '%s': %s\n", cmd, strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

int cli_proc_spawn(cli_proc *p, long long fence, const char *lease)
{
    pid_t parent = getpid();

    /* Flush before fork so that buffered output is not written twice. */
    if (fflush(NULL) != 0)
        fprintf(stderr, "redlock: flushing output: %s\n", strerror(errno));
    p->pid = fork();
    if (p->pid < 0) {
        fprintf(stderr, "redlock: fork: %s\n", strerror(errno));
        p->pid = 0;
        return -1;
    }
    if (p->pid == 0)
        exec_command(p, parent, fence, lease);
    return 0;
}

void cli_proc_on_signals(cli_proc *p)
{
    struct signalfd_siginfo si;
    int sig;

    while ((sig = cli_proc_next_signal(p, &si)) > 0) {
        if (sig == SIGCHLD)
            continue; /* reaped below, whatever the number of SIGCHLDs merged */
        /* A terminal sends SIGINT/SIGQUIT/SIGHUP to the whole foreground process group,
         * the command included (si_code SI_KERNEL): do not deliver it twice. */
        if (si.ssi_code == SI_KERNEL)
            continue;
        if (kill(p->pid, sig) != 0 && errno != ESRCH)
            fprintf(stderr, "redlock: kill(%ld, %d): %s\n", (long)p->pid, sig,
                    strerror(errno));
    }
    if (sig < 0)
        fprintf(stderr, "redlock: reading signals: %s\n", strerror(errno));
    cli_proc_reap(p);
}

void cli_proc_reap(cli_proc *p)
{
    pid_t r;
    int st;

    if (p->done || p->pid <= 0)
        return;
    while ((r = waitpid(p->pid, &st, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == p->pid) {
        p->done = 1;
        p->wstatus = st;
    } else if (r < 0) {
        /* ECHILD: cannot happen for our own child; do not spin on it. */
        fprintf(stderr, "redlock: waitpid: %s\n", strerror(errno));
        p->done = 1;
        p->wstatus = CLI_EXIT_FAILURE << 8;
    }
}

void cli_proc_stop(cli_proc *p, const char *name, const char *why)
{
    p->stopping = 1;
    p->kill_at = cli_now_ms() + p->grace_ms;
    fprintf(stderr, "redlock: lost the lock on %s: %s; sending SIGTERM to %s (pid %ld)\n",
            name, why, p->argv[0], (long)p->pid);
    if (kill(p->pid, SIGTERM) != 0 && errno != ESRCH)
        fprintf(stderr, "redlock: kill(%ld, SIGTERM): %s\n", (long)p->pid, strerror(errno));
}

int64_t cli_proc_tick(cli_proc *p, int64_t now, int64_t cap_ms)
{
    if (!p->stopping || p->killed || p->done)
        return cap_ms;
    if (now >= p->kill_at) {
        fprintf(stderr, "redlock: %s (pid %ld) still running after %ld ms: SIGKILL\n",
                p->argv[0], (long)p->pid, p->grace_ms);
        if (kill(p->pid, SIGKILL) != 0 && errno != ESRCH)
            fprintf(stderr, "redlock: kill(%ld, SIGKILL): %s\n", (long)p->pid,
                    strerror(errno));
        p->killed = 1;
        return cap_ms;
    }
    return p->kill_at - now < cap_ms ? p->kill_at - now : cap_ms;
}

int cli_proc_exit_code(const cli_proc *p, int lost, const char *name)
{
    if (!lost)
        return cli_exit_for_wait(p->wstatus);
    fprintf(stderr, "redlock: %s ended after the lock on %s was lost; exit status 75\n",
            p->argv[0], name);
    return CLI_EXIT_TEMPFAIL;
}

void cli_proc_kill(cli_proc *p)
{
    if (p->pid <= 0)
        return;
    if (kill(p->pid, SIGKILL) != 0 && errno != ESRCH)
        fprintf(stderr, "redlock: kill: %s\n", strerror(errno));
    while (!p->done) {
        /* Blocking: the command has been sent SIGKILL. */
        pid_t r = waitpid(p->pid, &p->wstatus, 0);
        if (r == p->pid || (r < 0 && errno != EINTR))
            p->done = 1;
    }
}

void cli_proc_fini(cli_proc *p)
{
    if (p->sfd >= 0)
        close(p->sfd);
    p->sfd = -1;
}
