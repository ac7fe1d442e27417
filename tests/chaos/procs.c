/* procs.c -- child processes and /proc readings for the chaos checker. */
#include "procs.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

pid_t proc_spawn(const char *path, char *const argv[], const char *log_path, int *stdout_pipe)
{
    return proc_spawn_env(path, argv, NULL, log_path, stdout_pipe);
}

pid_t proc_spawn_env(const char *path, char *const argv[], char *const envp[], const char *log_path,
                     int *stdout_pipe)
{
    extern char **environ;
    if (!envp)
        envp = environ;
    int pfd[2] = {-1, -1};
    if (stdout_pipe && pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        goto fail;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        goto fail;
    if (pid == 0) {
        /* only async-signal-safe calls from here to exec */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
        int nul = open("/dev/null", O_RDONLY);
        if (nul < 0 || dup2(nul, 0) < 0)
            _exit(127);
        if (dup2(stdout_pipe ? pfd[1] : logfd, 1) < 0 || dup2(logfd, 2) < 0)
            _exit(127);
        /* the parent's handlers must not run here (a signal before exec would run the
         * checker's clean-up in the child); undo its mask and ignored signals too */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(path, argv, envp);
        _exit(127);
    }
    close(logfd);
    if (stdout_pipe) {
        close(pfd[1]);
        *stdout_pipe = pfd[0];
    }
    return pid;
fail:;
    int saved = errno;
    if (logfd >= 0)
        close(logfd);
    if (pfd[0] >= 0) {
        close(pfd[0]);
        close(pfd[1]);
    }
    errno = saved;
    return -1;
}

int proc_wait(pid_t pid, int timeout_ms, int *status)
{
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_ms() >= deadline)
            return 0;
        sleep_ms(5);
    }
}

int proc_stop(pid_t pid, int sig, int timeout_ms)
{
    int st = -1;
    if (pid <= 0)
        return -1;
    kill(pid, sig);
    if (sig != SIGKILL)
        kill(pid, SIGCONT); /* a frozen process must run to act on the signal */
    int r = proc_wait(pid, timeout_ms, &st);
    if (r == 0) {
        kill(pid, SIGKILL);
        r = proc_wait(pid, 5000, &st);
    }
    return r == 1 ? st : -1;
}

int proc_fd_count(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

long proc_rss_kb(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

int net_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int redis_command(int port, const char *cmd, char *reply, size_t replysz, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    if (replysz)
        reply[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = -1;
    char buf[256], line[256];
    size_t len = 0, cl = strlen(cmd);
    if (cl > sizeof line - 3)
        goto out;
    memcpy(line, cmd, cl);
    memcpy(line + cl, "\r\n", 2);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 || send(fd, line, cl + 2, MSG_NOSIGNAL) != (ssize_t)(cl + 2))
        goto out;
    while (len < sizeof buf - 1) {
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *eol = strstr(buf, "\r\n");
        if (eol) {
            *eol = '\0';
            if (replysz)
                snprintf(reply, replysz, "%s", buf);
            rc = 0;
            break;
        }
    }
out:
    close(fd);
    return rc;
}

long long redis_info_field(int port, const char *section, const char *field, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms, val = -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char cmd[128], buf[16384];
    size_t len = 0;
    int cl = snprintf(cmd, sizeof cmd, "INFO %s\r\n", section);
    if (cl <= 0 || (size_t)cl >= sizeof cmd || connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        send(fd, cmd, (size_t)cl, MSG_NOSIGNAL) != cl)
        goto out;
    while (len < sizeof buf - 1) {
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        long blen;
        char *eol = strstr(buf, "\r\n");
        if (buf[0] != '$' || !eol || sscanf(buf + 1, "%ld", &blen) != 1)
            break;
        if ((size_t)(eol + 2 - buf) + (size_t)blen > len)
            continue; /* not all of it yet */
        char key[96];
        snprintf(key, sizeof key, "\n%s:", field);
        char *f = strstr(eol, key);
        if (f)
            val = atoll(f + strlen(key));
        break;
    }
out:
    close(fd);
    return val;
}

int redis_ping(int port, int timeout_ms)
{
    char reply[64];
    return redis_command(port, "PING", reply, sizeof reply, timeout_ms) == 0 && !strcmp(reply, "+PONG");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int find_executable(const char *name, char *out, size_t outsz)
{
    if (strchr(name, '/')) {
        if (access(name, X_OK) != 0)
            return -1;
        snprintf(out, outsz, "%s", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dl = colon ? (size_t)(colon - path) : strlen(path);
        if (dl > 0 && (size_t)snprintf(out, outsz, "%.*s/%s", (int)dl, path, name) < outsz &&
            access(out, X_OK) == 0)
            return 0;
        path += dl + (colon ? 1 : 0);
    }
    return -1;
}

char *redis_call(int port, int argc, const char *const *argv, size_t *len, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    size_t req_len = 32, cap = 4096, got = 0;
    for (int i = 0; i < argc; i++)
        req_len += strlen(argv[i]) + 32;
    char *req = malloc(req_len), *buf = malloc(cap), *out = NULL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!req || !buf || fd < 0)
        goto done;
    size_t rl = (size_t)snprintf(req, req_len, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        rl += (size_t)snprintf(req + rl, req_len - rl, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 || send(fd, req, rl, MSG_NOSIGNAL) != (ssize_t)rl)
        goto done;
    for (;;) {
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            goto done;
        if (got + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto done;
            buf = nb;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n <= 0)
            goto done;
        got += (size_t)n;
        buf[got] = '\0';
        char *eol = strstr(buf, "\r\n");
        if (!eol)
            continue;
        if (buf[0] == '+' || buf[0] == '-' || buf[0] == ':') {
            *eol = '\0';
            *len = (size_t)(eol - buf);
            out = buf;
            buf = NULL;
            goto done;
        }
        if (buf[0] != '$')
            goto done; /* an array or a nil: not for this helper */
        long blen = strtol(buf + 1, NULL, 10);
        if (blen < 0)
            goto done;
        size_t head = (size_t)(eol + 2 - buf);
        if (got < head + (size_t)blen + 2)
            continue;
        memmove(buf, buf + head, (size_t)blen);
        buf[blen] = '\0';
        *len = (size_t)blen;
        out = buf;
        buf = NULL;
        goto done;
    }
done:
    if (fd >= 0)
        close(fd);
    free(req);
    free(buf);
    return out;
}
