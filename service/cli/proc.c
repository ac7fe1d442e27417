/* proc.c -- the supervised command and its guard: signals, fork/exec, stop, reap (see
 * proc.h). */
#include "cli/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/policy.h"

/* The signals forwarded to the command. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/* How long after the SIGKILL the guard is to send we kill a guard that has not ended. */
#define GUARD_SLACK_MS 1000

/* What redlock and the guard say to each other, one message a datagram. */
enum { MSG_DEADLINE = 1, MSG_STOP, MSG_STARTED, MSG_DONE };

typedef struct guard_msg {
    int32_t kind;
    int32_t status;     /* MSG_DONE: the command's wait status */
    int32_t why;        /* MSG_DONE: CLI_GUARD_*, why the guard stopped it */
    int32_t killed;     /* MSG_DONE: 1 if it needed SIGKILL */
    int64_t value;      /* MSG_DEADLINE: the deadline (monotonic ms); MSG_STARTED: its pid */
} guard_msg;

int64_t cli_now_ms(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_proc_init(cli_proc *p, char **argv, const char *name, long grace_ms)
{
    struct sigaction ign, dfl;

    memset(p, 0, sizeof(*p));
    p->sfd = -1;
    p->sock = -1;
    p->keep_fd = -1;
    p->argv = argv;
    p->name = name;
    p->slot = -1;
    p->grace_ms = grace_ms;
    sigemptyset(&p->mask);
    sigaddset(&p->mask, SIGCHLD);
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaddset(&p->mask, forwarded[i]);
    if (sigprocmask(SIG_BLOCK, &p->mask, &p->old_mask) != 0) {
        fprintf(stderr, "redlock: sigprocmask: %s\n", strerror(errno));
        return -1;
    }
    p->sfd = signalfd(-1, &p->mask, SFD_NONBLOCK | SFD_CLOEXEC);
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
    /* A SIGCHLD our caller ignores (SIG_IGN survives exec) has the kernel reap children
     * at once, with no SIGCHLD: the guard would never see its command end, nor redlock
     * its guard.  The caller's disposition goes back in the command. */
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(SIGCHLD, &dfl, &p->old_chld) != 0) {
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

/* ---- the command (a child of the guard) -------------------------------------------- */

/* Restore the signal state, export the lease, exec.  Never returns. */
static void exec_command(cli_proc *p, pid_t guard, long long fence_value, const char *lease)
{
    char fence[32], slot[32];
    const char *cmd = p->argv[0];
    int err;

    snprintf(fence, sizeof(fence), "%lld", fence_value);
    snprintf(slot, sizeof(slot), "%ld", p->slot);
    /* The guard gone (even by SIGKILL), the command goes: nothing would stop it at the
     * deadline.  PR_SET_PDEATHSIG survives execve (the command is not set-user-ID). */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != guard) {
        fprintf(stderr, "redlock: not running '%s': redlock is gone\n", cmd);
        _exit(126);
    }
    if (sigaction(SIGPIPE, &p->old_pipe, NULL) != 0 ||
        sigaction(SIGCHLD, &p->old_chld, NULL) != 0 ||
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

/* ---- the guard (a child of redlock, no exec) --------------------------------------- */

/* Close every descriptor from `from` up (the guard keeps none of redlock's: a connection
 * left open here would keep a streamed hold alive after redlock died). */
static void close_from(int from)
{
    struct rlimit rl;
    long max;

    if (close_range((unsigned)from, ~0U, 0) == 0)
        return;
    /* close_range() is Linux 5.9: close one by one up to the limit below that. */
    max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
              ? (long)rl.rlim_cur : 65536;
    for (long fd = from; fd < max && fd < 65536; fd++)
        (void)close((int)fd);
}

typedef struct guard {
    cli_proc *p;
    pid_t cli, cmd;
    int sock;               /* -1 once redlock is gone */
    int64_t deadline;
    int why;                /* CLI_GUARD_*: set once stopping */
    int64_t kill_at;
    int killed;
} guard;

/* Stop the command: SIGTERM now, SIGKILL after the grace. */
static void guard_stop(guard *g, int why)
{
    if (g->why != CLI_GUARD_NONE)
        return;
    g->why = why;
    g->kill_at = cli_now_ms() + g->p->grace_ms;
    (void)kill(g->cmd, SIGTERM);
}

/* redlock's messages; its end of file: it is gone. */
static void guard_read(guard *g)
{
    guard_msg m;
    ssize_t n;

    while ((n = recv(g->sock, &m, sizeof(m), MSG_DONTWAIT)) == (ssize_t)sizeof(m)) {
        if (m.kind == MSG_DEADLINE)
            g->deadline = m.value;
        else if (m.kind == MSG_STOP)
            guard_stop(g, CLI_GUARD_STOPPED);
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        (void)close(g->sock);
        g->sock = -1;
        guard_stop(g, CLI_GUARD_ORPHANED);
    }
}

/* Signals: the command's end, redlock's death (the parent-death signal), the signals
 * redlock forwards.  Returns 1 once the command has been reaped (*status set). */
static int guard_signals(guard *g, int sfd, int *status)
{
    struct signalfd_siginfo si;
    int done = 0;

    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            pid_t r;
            if (done)
                continue; /* reaped: a second waitpid() would fail and spoil *status */
            while ((r = waitpid(g->cmd, status, WNOHANG)) < 0 && errno == EINTR)
                ;
            if (r < 0) /* ECHILD: cannot happen for its own child; no status is no success */
                *status = CLI_EXIT_FAILURE << 8;
            if (r == g->cmd || r < 0)
                done = 1;
        } else if (getppid() != g->cli) {
            guard_stop(g, CLI_GUARD_ORPHANED);
        } else if (si.ssi_code != SI_KERNEL) {
            /* Forwarded by redlock (a terminal's reached the command already). */
            (void)kill(g->cmd, (int)si.ssi_signo);
        }
    }
    return done;
}

static void guard_main(cli_proc *p, pid_t cli, int sock, long long fence, const char *lease,
                       int64_t deadline)
{
    guard g;
    guard_msg m;
    int sfd, status = 0;
    pid_t self = getpid();

    memset(&g, 0, sizeof(g));
    g.p = p;
    g.cli = cli;
    g.deadline = deadline;
    /* redlock's death also comes as SIGTERM, blocked into sfd like the rest. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != cli)
        _exit(126);
    (void)prctl(PR_SET_NAME, "redlock-guard");
    /* Keep sock as 3 and p->keep_fd as 4, nothing else of redlock's. */
    if (p->keep_fd == 3) {
        int fd = fcntl(p->keep_fd, F_DUPFD_CLOEXEC, 5);
        if (fd < 0)
            _exit(126);
        p->keep_fd = fd;
    }
    if ((sock != 3 && dup2(sock, 3) != 3) ||
        (p->keep_fd >= 0 && p->keep_fd != 4 && dup2(p->keep_fd, 4) != 4))
        _exit(126);
    sock = 3;
    close_from(p->keep_fd >= 0 ? 5 : 4);
    if (fcntl(3, F_SETFD, FD_CLOEXEC) != 0 ||
        (p->keep_fd >= 0 && fcntl(4, F_SETFD, FD_CLOEXEC) != 0))
        _exit(126);
    g.sock = sock;
    sfd = signalfd(-1, &p->mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "redlock: guard: signalfd: %s\n", strerror(errno));
        _exit(126);
    }
    g.cmd = fork();
    if (g.cmd < 0) {
        fprintf(stderr, "redlock: fork: %s\n", strerror(errno));
        _exit(126);
    }
    if (g.cmd == 0)
        exec_command(p, self, fence, lease);
    memset(&m, 0, sizeof(m));
    m.kind = MSG_STARTED;
    m.value = g.cmd;
    (void)send(g.sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);

    for (;;) {
        struct pollfd fds[2];
        int64_t now = cli_now_ms(), wait = -1;

        if (g.why == CLI_GUARD_NONE && now >= g.deadline)
            guard_stop(&g, CLI_GUARD_DEADLINE);
        if (g.why == CLI_GUARD_NONE)
            wait = g.deadline - now;
        else if (!g.killed && now >= g.kill_at) {
            (void)kill(g.cmd, SIGKILL);
            g.killed = 1;
        } else if (!g.killed) {
            wait = g.kill_at - now;
        }
        fds[0].fd = g.sock; /* -1 once redlock is gone: poll() skips it */
        fds[0].events = POLLIN;
        fds[1].fd = sfd;
        fds[1].events = POLLIN;
        if (poll(fds, 2, wait > INT_MAX ? INT_MAX : (int)wait) < 0 && errno != EINTR)
            break; /* cannot happen with valid arguments; the command is reaped below */
        if (g.sock >= 0 && fds[0].revents != 0)
            guard_read(&g);
        if (guard_signals(&g, sfd, &status))
            goto reaped;
    }
    (void)kill(g.cmd, SIGKILL);
    while (waitpid(g.cmd, &status, 0) < 0 && errno == EINTR)
        ;
reaped:
    if (g.sock >= 0 && g.why != CLI_GUARD_ORPHANED) {
        memset(&m, 0, sizeof(m));
        m.kind = MSG_DONE;
        m.status = status;
        m.why = g.why;
        m.killed = g.killed;
        (void)send(g.sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
        /* Nobody else will say it; written once the command is gone, so that a stderr
         * nobody reads cannot hold up its SIGKILL. */
        fprintf(stderr, "redlock: redlock (pid %ld) died while %s (pid %ld) held the lock "
                "on %s: it got SIGTERM%s\n", (long)g.cli, p->argv[0], (long)g.cmd, p->name,
                g.killed ? ", and SIGKILL after the grace period" : "");
    }
    /* Its own status says what its report says, should redlock fail to read that: the
     * command's, or 75 when it stopped the command (the lock was lost). */
    _exit(g.why == CLI_GUARD_NONE ? cli_exit_for_wait(status) : CLI_EXIT_TEMPFAIL);
}

/* ---- redlock's side ------------------------------------------------------------------ */

int cli_proc_spawn(cli_proc *p, long long fence, const char *lease, int64_t deadline)
{
    pid_t parent = getpid();
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        fprintf(stderr, "redlock: socketpair: %s\n", strerror(errno));
        return -1;
    }
    /* Flush before fork so that buffered output is not written twice. */
    if (fflush(NULL) != 0)
        fprintf(stderr, "redlock: flushing output: %s\n", strerror(errno));
    p->pid = fork();
    if (p->pid < 0) {
        fprintf(stderr, "redlock: fork: %s\n", strerror(errno));
        p->pid = 0;
        (void)close(sv[0]);
        (void)close(sv[1]);
        return -1;
    }
    if (p->pid == 0) {
        (void)close(sv[0]);
        guard_main(p, parent, sv[1], fence, lease, deadline);
    }
    (void)close(sv[1]);
    p->sock = sv[0];
    if (fcntl(p->sock, F_SETFL, O_NONBLOCK) != 0)
        fprintf(stderr, "redlock: fcntl: %s\n", strerror(errno));
    return 0;
}

/* Tell the guard something.  A guard that is gone is reaped by the caller's loop. */
static void tell_guard(cli_proc *p, int kind, int64_t value)
{
    guard_msg m;

    if (p->sock < 0)
        return;
    memset(&m, 0, sizeof(m));
    m.kind = kind;
    m.value = value;
    if (send(p->sock, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(m) &&
        errno != EPIPE && errno != ECONNRESET)
        fprintf(stderr, "redlock: telling the guard of %s: %s\n", p->argv[0], strerror(errno));
}

/* Take the guard's messages (its command's pid, its report).
 *
 * A guard that exits with a message of ours unread (a deadline sent as it reported: the
 * first ping's answer as a command exits at once) resets the connection, as any
 * SOCK_SEQPACKET or SOCK_STREAM peer closing with unread data does: the next recv() fails
 * with ECONNRESET, once (reading the error clears it), although the guard's report waits
 * in the queue behind it.  So read on past it. */
static void hear_guard(cli_proc *p)
{
    guard_msg m;
    int resets = 0;

    while (p->sock >= 0) {
        ssize_t n = recv(p->sock, &m, sizeof(m), MSG_DONTWAIT);
        if (n < 0 && errno == ECONNRESET && resets++ == 0)
            continue;
        if (n != (ssize_t)sizeof(m))
            break;
        if (m.kind == MSG_STARTED)
            p->cmd_pid = (pid_t)m.value;
        else if (m.kind == MSG_DONE) {
            /* Kept until the guard is reaped, whoever reads it (cli_proc_stop too). */
            p->reported = 1;
            p->report_status = m.status;
            p->guard_why = m.why;
            p->guard_killed = m.killed;
        }
    }
}

/* The guard was reaped with wait status st: the command's status is the one the guard
 * reported, read now or before; without a report (the guard died: it was killed, or the
 * command could not be started) the guard's own stands. */
static void reaped(cli_proc *p, int st)
{
    p->done = 1;
    hear_guard(p);
    if (!p->reported) {
        p->wstatus = st;
        return;
    }
    p->wstatus = p->report_status;
    if (p->guard_killed)
        fprintf(stderr, "redlock: %s (pid %ld) was still running %ld ms after SIGTERM: "
                "SIGKILL\n", p->argv[0], (long)p->cmd_pid, p->grace_ms);
    if (p->guard_why == CLI_GUARD_DEADLINE && !p->stopping)
        fprintf(stderr, "redlock: lost the lock on %s: its validity ran out while redlock "
                "was held up; %s (pid %ld) got SIGTERM at the deadline\n", p->name,
                p->argv[0], (long)p->cmd_pid);
}

void cli_proc_set_deadline(cli_proc *p, int64_t deadline)
{
    tell_guard(p, MSG_DEADLINE, deadline);
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
    if (r == 0)
        return;
    p->done = 1;
    if (r < 0) {
        /* ECHILD: cannot happen for our own child; do not spin on it. */
        fprintf(stderr, "redlock: waitpid: %s\n", strerror(errno));
        p->wstatus = CLI_EXIT_FAILURE << 8;
        return;
    }
    /* The guard reports the command's status before it exits: read after the reaping,
     * the report is there. */
    reaped(p, st);
}

void cli_proc_stop(cli_proc *p, const char *name, const char *why)
{
    if (p->stopping)
        return;
    p->stopping = 1;
    p->kill_at = cli_now_ms() + p->grace_ms;
    hear_guard(p);
    fprintf(stderr, "redlock: lost the lock on %s: %s; sending SIGTERM to %s (pid %ld)\n",
            name, why, p->argv[0], (long)(p->cmd_pid > 0 ? p->cmd_pid : p->pid));
    tell_guard(p, MSG_STOP, 0);
}

int64_t cli_proc_tick(cli_proc *p, int64_t now, int64_t cap_ms)
{
    int64_t due = p->kill_at + GUARD_SLACK_MS;

    if (!p->stopping || p->killed || p->done)
        return cap_ms;
    if (now >= due) {
        fprintf(stderr, "redlock: the guard of %s (pid %ld) has not ended: SIGKILL\n",
                p->argv[0], (long)p->pid);
        if (kill(p->pid, SIGKILL) != 0 && errno != ESRCH)
            fprintf(stderr, "redlock: kill(%ld, SIGKILL): %s\n", (long)p->pid,
                    strerror(errno));
        p->killed = 1;
        return cap_ms;
    }
    return due - now < cap_ms ? due - now : cap_ms;
}

int cli_proc_exit_code(const cli_proc *p, int lost, const char *name)
{
    if (!lost && p->guard_why != CLI_GUARD_DEADLINE && p->guard_why != CLI_GUARD_STOPPED)
        return cli_exit_for_wait(p->wstatus);
    fprintf(stderr, "redlock: %s ended after the lock on %s was lost; exit status 75\n",
            p->argv[0], name);
    return CLI_EXIT_TEMPFAIL;
}

void cli_proc_kill(cli_proc *p)
{
    pid_t r;
    int st = CLI_EXIT_FAILURE << 8;

    /* (Reaped already: its pid may be another process's now.) */
    if (p->pid <= 0 || p->done)
        return;
    if (kill(p->pid, SIGKILL) != 0 && errno != ESRCH)
        fprintf(stderr, "redlock: kill: %s\n", strerror(errno));
    /* Blocking: the guard has been sent SIGKILL (its command gets one too). */
    while ((r = waitpid(p->pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0) {
        fprintf(stderr, "redlock: waitpid: %s\n", strerror(errno));
        st = CLI_EXIT_FAILURE << 8;
    }
    /* A guard that ended by itself first has reported the command's status. */
    reaped(p, st);
}

void cli_proc_fini(cli_proc *p)
{
    if (p->sfd >= 0)
        close(p->sfd);
    p->sfd = -1;
    if (p->sock >= 0)
        close(p->sock);
    p->sock = -1;
}
