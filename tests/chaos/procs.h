/* procs.h -- child processes and /proc readings for the chaos checker: spawn with a log
 * file and a death signal, wait with a deadline, probe a Redis port, pick free ports. */
#ifndef CHAOS_PROCS_H
#define CHAOS_PROCS_H

#include <stddef.h>
#include <sys/types.h>

/* Forks and execs path with argv.  stdin is /dev/null; stdout and stderr append to
 * log_path, except that when stdout_pipe is not NULL stdout goes to a new pipe whose read
 * end is returned there (close-on-exec).  The child gets SIGKILL when the calling thread
 * exits (PR_SET_PDEATHSIG), so call it from a thread that outlives the child.
 * Returns the pid, or -1 with errno set. */
pid_t proc_spawn(const char *path, char *const argv[], const char *log_path, int *stdout_pipe);
/* The same with the environment envp (NULL: this process's own). */
pid_t proc_spawn_env(const char *path, char *const argv[], char *const envp[], const char *log_path,
                     int *stdout_pipe);

/* Waits up to timeout_ms for pid to exit.  1 and *status set if it exited (reaped),
 * 0 if it is still running, -1 on error (e.g. not our child). */
int proc_wait(pid_t pid, int timeout_ms, int *status);

/* Sends sig, waits up to timeout_ms, then SIGKILLs and reaps.  Returns the wait status
 * (or -1 if pid could not be reaped). */
int proc_stop(pid_t pid, int sig, int timeout_ms);

/* Open file descriptors of pid (entries of /proc/PID/fd), or -1. */
int proc_fd_count(pid_t pid);
/* Resident set size of pid in kB (VmRSS), or -1. */
long proc_rss_kb(pid_t pid);

/* A TCP port on 127.0.0.1 that was free a moment ago, or -1. */
int net_free_port(void);
/* Sends one inline command (e.g. "FLUSHALL SYNC") to the Redis on 127.0.0.1:port on a
 * connection of its own and copies the first line of the reply ("+OK", "-ERR ...", ":1")
 * to reply.  0 if a reply line came within timeout_ms, else -1. */
int redis_command(int port, const char *cmd, char *reply, size_t replysz, int timeout_ms);
/* The integer field (e.g. "uptime_in_seconds") of `INFO section` from the Redis on
 * 127.0.0.1:port, or -1. */
long long redis_info_field(int port, const char *section, const char *field, int timeout_ms);
/* Sends one command (argv, as a RESP array: any bytes but NUL) to the Redis on
 * 127.0.0.1:port on a connection of its own.  Returns its reply, NUL-terminated, to free():
 * a bulk string's bytes, or a status, error or integer's first line with its type
 * character ('+', '-', ':'); *len its length.  NULL on a timeout, a transport error, a nil
 * or an array. */
char *redis_call(int port, int argc, const char *const *argv, size_t *len, int timeout_ms);
/* 1 if a Redis on 127.0.0.1:port answers PING with +PONG within timeout_ms, else 0. */
int redis_ping(int port, int timeout_ms);

/* Removes path and everything under it (no symlink following).  0, or -1. */
int rm_rf(const char *path);
/* Finds an executable named name on PATH (or name itself if it has a '/'); writes it to
 * out.  0, or -1 if not found. */
int find_executable(const char *name, char *out, size_t outsz);

/* Milliseconds on CLOCK_MONOTONIC. */
long long now_ms(void);
/* Sleeps ms milliseconds (restarting on signals). */
void sleep_ms(long ms);

#endif
