/* shimtest.c -- clockshim.so against a real redis-server: it starts and answers under
 * the shim (no recursion with jemalloc), reads the true clock until told otherwise, and
 * its TIME and key expiry follow a jump forward, a fast clock (1.5x, 2x), a step back and
 * a reset; a process given the library without CLOCKSHIM_FILE keeps the true clock.
 *
 *   shimtest --shim build/clock/clockshim.so      (make clock-selftest)
 * Exit status 0 if every check held, 1 if one failed, 3 if redis-server would not start. */
#include "clockshim.h"
#include "procs.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("clockshim: %s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures += !ok;
}

/* The master's TIME in ms, or -1. */
static long long master_time_ms(int port)
{
    char reply[64];
    if (redis_command(port,
                      "EVAL \"local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000)\" 0",
                      reply, sizeof reply, 2000) < 0 ||
        reply[0] != ':')
        return -1;
    return atoll(reply + 1);
}

static int command_is(int port, const char *cmd, const char *want)
{
    char reply[64];
    return redis_command(port, cmd, reply, sizeof reply, 2000) == 0 && !strcmp(reply, want);
}

/* Waits (at most 1 s) until the master's clock is ahead of the true one by want_ms,
 * within tol_ms: a change takes up to 10 ms to be read.  The last difference seen. */
static long long wait_offset(int port, long long want_ms, long long tol_ms)
{
    long long diff = LLONG_MIN, until = now_ms() + 1000;
    while (now_ms() < until) {
        long long before = clockshim_real_ms();
        long long t = master_time_ms(port);
        long long after = clockshim_real_ms();
        if (t >= 0) {
            diff = t - (before + after) / 2;
            if (llabs(diff - want_ms) <= tol_ms)
                break;
        }
        sleep_ms(5);
    }
    return diff;
}

/* The master's clock rate over real_ms of true time, in ppm of the true rate. */
static long long measure_rate_ppm(int port, long real_ms)
{
    long long r0 = clockshim_real_ms(), t0 = master_time_ms(port);
    sleep_ms(real_ms);
    long long r1 = clockshim_real_ms(), t1 = master_time_ms(port);
    if (t0 < 0 || t1 < 0 || r1 <= r0)
        return -1;
    return (t1 - t0) * 1000000 / (r1 - r0);
}

static pid_t start_redis(const char *redis, const char *shim, const char *file, const char *dir, int *port)
{
    char portbuf[16], logpath[400], env_pre[4200], env_file[4200];
    snprintf(logpath, sizeof logpath, "%s/redis.log", dir);
    snprintf(env_pre, sizeof env_pre, "LD_PRELOAD=%s", shim);
    snprintf(env_file, sizeof env_file, "CLOCKSHIM_FILE=%s", file ? file : "");
    char *envp[] = {env_pre, file ? env_file : NULL, NULL};
    for (int attempt = 0; attempt < 5; attempt++) {
        *port = net_free_port();
        snprintf(portbuf, sizeof portbuf, "%d", *port);
        char *argv[] = {(char *)redis, "--port", portbuf, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", (char *)dir, NULL};
        pid_t pid = proc_spawn_env(redis, argv, envp, logpath, NULL);
        if (pid < 0)
            return -1;
        long long until = now_ms() + 5000;
        while (now_ms() < until) {
            if (redis_ping(*port, 200))
                return pid;
            int st;
            if (proc_wait(pid, 0, &st) == 1)
                break;
            sleep_ms(10);
        }
        proc_stop(pid, SIGKILL, 1000);
    }
    return -1;
}

int main(int argc, char **argv)
{
    const char *shim = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--shim"))
            shim = argv[++i];
    char redis[PATH_MAX], shim_abs[PATH_MAX];
    if (!shim || !realpath(shim, shim_abs)) {
        fprintf(stderr, "usage: shimtest --shim PATH/clockshim.so (%s)\n", shim ? strerror(errno) : "no --shim");
        return 2;
    }
    if (find_executable("redis-server", redis, sizeof redis) < 0) {
        fprintf(stderr, "clockshim: redis-server not found on PATH\n");
        return 3;
    }
    char dir[] = "/tmp/clockshim-test.XXXXXX", file[200];
    if (!mkdtemp(dir))
        return 3;
    snprintf(file, sizeof file, "%s/clock", dir);

    /* the library preloaded without CLOCKSHIM_FILE: the true clock */
    int port;
    long long t0 = now_ms();
    pid_t plain = start_redis(redis, shim_abs, NULL, dir, &port);
    if (plain < 0) {
        fprintf(stderr, "clockshim: redis-server would not start under the shim; see %s/redis.log\n", dir);
        return 3;
    }
    check(1, "redis-server starts and answers under the shim without CLOCKSHIM_FILE (%lld ms)", now_ms() - t0);
    long long d = wait_offset(port, 0, 50);
    check(llabs(d) <= 50, "no CLOCKSHIM_FILE: the true clock (off by %lld ms)", d);
    proc_stop(plain, SIGKILL, 2000);

    /* under the shim with a file that does not exist yet: the true clock */
    t0 = now_ms();
    pid_t pid = start_redis(redis, shim_abs, file, dir, &port);
    if (pid < 0) {
        fprintf(stderr, "clockshim: redis-server would not start under the shim; see %s/redis.log\n", dir);
        return 3;
    }
    check(1, "redis-server starts and answers under the shim with CLOCKSHIM_FILE (%lld ms)", now_ms() - t0);
    d = wait_offset(port, 0, 50);
    check(llabs(d) <= 50, "no file yet: the true clock (off by %lld ms)", d);

    /* a jump forward of one hour: TIME follows, a key with an hour less to live is gone */
    check(command_is(port, "SET held x PX 1800000", "+OK") && command_is(port, "EXISTS held", ":1"),
          "a key set to live 30 min exists");
    clockshim_jump(file, 3600 * 1000LL);
    d = wait_offset(port, 3600 * 1000LL, 50);
    check(llabs(d - 3600000) <= 50, "jump +1 h: TIME is %lld ms ahead", d);
    check(command_is(port, "EXISTS held", ":0"), "jump +1 h: the 30 min key expired at once");

    /* a step back of 90 s: a key written now lives longer than its ttl in true time */
    clockshim_jump(file, -90 * 1000LL);
    d = wait_offset(port, 3510 * 1000LL, 50);
    check(llabs(d - 3510000) <= 50, "step back 90 s: TIME is %lld ms ahead (3510000)", d);
    clockshim_reset(file);
    d = wait_offset(port, 0, 50);
    check(llabs(d) <= 50, "reset: the true clock again (off by %lld ms), a step back of an hour", d);
    check(command_is(port, "SET k x PX 300", "+OK"), "a 300 ms key");
    clockshim_jump(file, -1000);
    sleep_ms(600);
    check(command_is(port, "EXISTS k", ":1"), "step back 1 s: the 300 ms key still lives 600 ms later");

    /* fast clocks */
    static const long long rates[] = {1500000, 2000000};
    for (int i = 0; i < 2; i++) {
        clockshim_set_rate(file, rates[i]);
        sleep_ms(30); /* read within 10 ms */
        long long r = measure_rate_ppm(port, 800);
        check(llabs(r - rates[i]) <= rates[i] / 10, "rate %.1fx: TIME ran at %.3fx over 800 ms", rates[i] / 1e6,
              r / 1e6);
    }
    clockshim_set_rate(file, 2000000);
    check(command_is(port, "SET fast x PX 1000", "+OK"), "a 1000 ms key at 2x");
    sleep_ms(650); /* 1300 ms of the master's time */
    check(command_is(port, "EXISTS fast", ":0"), "rate 2x: the 1000 ms key expired after 650 ms of true time");
    clockshim_params p;
    clockshim_read(file, &p);
    long long ahead = clockshim_offset_at(&p, clockshim_real_ms());
    clockshim_set_rate(file, 1000000);
    d = wait_offset(port, ahead, 60);
    check(llabs(d - ahead) <= 60, "back to 1x: the clock continues from where it was (%lld ms ahead, %lld)", d,
          ahead);

    /* a malformed file: the true clock */
    FILE *f = fopen(file, "we");
    if (f) {
        fputs("soon\n", f);
        fclose(f);
    }
    d = wait_offset(port, 0, 50);
    check(llabs(d) <= 50, "a malformed file: the true clock (off by %lld ms)", d);

    proc_stop(pid, SIGKILL, 2000);
    rm_rf(dir);
    printf("clockshim: %s\n", failures ? "FAILED" : "all checks held");
    return failures ? 1 : 0;
}
