/* harness.h -- integration-test fixtures: real redis-server processes on free loopback
 * ports, the real bin/redlockd, an HTTP client (libcurl) and condition waits with
 * deadlines.  Or, with REDLOCK_TEST_URL / REDLOCK_TEST_MASTERS set, an external stack
 * (tests that need to start, freeze or kill processes then skip themselves). */
#ifndef RL_HARNESS_H
#define RL_HARNESS_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#define H_MAX_MASTERS 7

typedef struct h_redis {
    int port;
    pid_t pid;
    char dir[200];
    int appendonly;
    const char *appendfsync; /* NULL: "always"; read at each (re)start */
} h_redis;

typedef struct h_service {
    pid_t pid;
    int port;
    char url[128];
    char log[300];
} h_service;

typedef struct h_cluster {
    int n;
    h_redis masters[H_MAX_MASTERS];
    h_service svc;
    char tmp[128];
    int external;
    void *curl; /* keep-alive client for this cluster's default service */
    const char *masters_override; /* --masters value to use instead of the local list */
} h_cluster;

typedef struct h_resp {
    long status;
    char body[32768];      /* room for the largest answer (a multi-name grant, ~17 KiB) */
    json_t *json;          /* parsed body or NULL; freed by h_resp_free */
    char retry_after[32];  /* Retry-After header, "" if none */
    char allow[64];        /* Allow header */
    char request_id[80];   /* X-Request-Id header */
    char content_type[80];
    char www_auth[80];     /* WWW-Authenticate header */
    char location[300];    /* Location header */
    double ms;             /* client-side duration */
} h_resp;

/* Masters started from now on require this password (NULL: none). */
void h_set_redis_password(const char *pw);

/* Start n masters (AOF on if appendonly) and a service with extra flags (may be
 * NULL).  Aborts the test (cr_assert) on failure. */
void h_cluster_start(h_cluster *c, int n, int appendonly, const char *extra_flags);
void h_cluster_stop(h_cluster *c);

/* The --node-timeout-ms services get unless their flags say one: 1000, or
 * $REDLOCK_TEST_NODE_TIMEOUT_MS (test-valgrind: 2000). */
int h_node_timeout_ms(void);

/* Start another service instance on the same masters. */
void h_service_start(h_cluster *c, h_service *s, const char *extra_flags);
/* The same, waiting only for /readyz to answer 200 (a quorum of masters in quorums),
 * not for every master: for instances started while a master is quarantined. */
void h_service_start_quorum(h_cluster *c, h_service *s, const char *extra_flags);
/* The same, returning as soon as it says which port it listens on (its masters may
 * not be connected yet). */
void h_service_start_nowait(h_cluster *c, h_service *s, const char *extra_flags);
void h_service_stop(h_service *s);
/* SIGTERM the service and wait for it; returns its exit status (or -1). */
int h_service_term(h_service *s, int timeout_ms);

/* Whether the redis-server answering on 127.0.0.1:port is process pid (INFO's
 * process_id; password: AUTH first, NULL: none) and serves commands (PING answers
 * PONG, not -LOADING).  A port found free and then given to
 * redis-server may be taken in between by a redis-server of another test or of
 * another user of the machine: its "Address already in use" then ends ours, and a mere
 * PING would be answered by theirs. */
int h_redis_is(int port, pid_t pid, const char *password);

/* Master faults. */
void h_redis_freeze(h_redis *r);   /* SIGSTOP */
void h_redis_thaw(h_redis *r);     /* SIGCONT */
void h_redis_kill(h_redis *r);     /* SIGKILL and reap */
void h_redis_restart(h_redis *r, int empty); /* start again on the same port (empty: wipe dir) */
/* The master's AOF: size of its incr file (appendonlydir/<name>.incr.aof; -1 if none),
 * and cutting that file back to a size (only while the master is killed): it then
 * restarts without the writes it acknowledged after that point. */
long long h_redis_aof_size(h_redis *r);
/* The file that moves the master's wall clock (tests/clock/clockshim.h writes it): every
 * master runs under the clock shim when REDLOCK_TEST_CLOCKSHIM names it (make does);
 * 0 if it does not (the test should then skip), else 1 with the path in out. */
int h_redis_clock_file(h_redis *r, char *out, size_t cap);
void h_redis_aof_truncate(h_redis *r, long long size);
/* Run a redis command on a master (sync hiredis); returns the integer/-1, or copies a
 * string reply into out. */
long long h_redis_cmd(h_redis *r, char *out, size_t outlen, const char *fmt, ...);
/* The least PTTL of key over c's masters (-2 if some master has no key). */
long long h_least_pttl(h_cluster *c, const char *key);
/* Subscribers of a pub/sub channel on a master (PUBSUB NUMSUB; -1 on error). */
long long h_redis_numsub(h_redis *r, const char *channel);
/* The fewest and most subscribers of name's release channel (the default key prefix)
 * over the cluster's masters: a service instance subscribes on every master while it
 * follows the name (its waiters, streamed holds, watches). */
void h_release_subscribers(h_cluster *c, const char *name, long long *fewest, long long *most);

/* HTTP against the cluster's service (or svc if given).  path includes any query. */
void h_http(h_cluster *c, const char *method, const char *path, const char *body, h_resp *out);
/* method path body on c's service: the status, and the parsed answer in *out when out
 * is given (the caller frees it with h_resp_free). */
long h_call(h_cluster *c, const char *method, const char *path, const char *body, h_resp *out);
void h_http_to(const char *base_url, void **curl, const char *method, const char *path,
               const char *body, h_resp *out);
void h_resp_free(h_resp *r);
/* A gauge or counter without labels from base's /metrics (-1 if absent). */
long long h_metric(const char *base, void **curl, const char *metric);

/* The replies base's rounds have read, over every master (the counts of
 * redlockd_master_rtt_seconds). */
unsigned long long h_replies_read(const char *base, void **curl);
/* A waiter of a name on base (5 masters) has parked: wait until what follows its
 * parking is over.  Its queue is woken once when its first SUBSCRIBE is confirmed
 * and tries again (docs/DESIGN.md, handoff); a release while that attempt is in
 * flight is a plain one, and the retry takes the lock -- correct, but not the
 * handoff a test may want to see.  Waits (deadlines, nothing asserted: a name already
 * followed is not woken) until redlockd_waiter_wakeups_total passed wakeups0 and a
 * quorum of the retry's replies was read; wakeups0 and replies0 (h_replies_read) are
 * taken before the waiter is started. */
void h_waiter_settle(const char *base, void **curl, long long wakeups0, unsigned long long replies0);

/* Convenience: POST a lock; returns status; copies lease and token. */
long h_acquire(h_cluster *c, const char *name, const char *query, char *lease, size_t leaselen,
               long long *token);
long h_release(h_cluster *c, const char *name, const char *lease);

/* JSON helpers (0 / "" if missing). */
long long h_int(const h_resp *r, const char *key);
const char *h_str(const h_resp *r, const char *key);

/* /readyz of a service (svc; NULL: the cluster's default service): master i's "state"
 * copied into state ("" if absent) and its "quarantine_remaining_ms" into *remaining
 * (-1 if absent).  Returns 1 if the master is "ok", 0 if not, -1 if /readyz did not
 * list it.  The default service is asked on the cluster's keep-alive connection (so
 * the same worker thread answers each time). */
int h_master_state(h_cluster *c, h_service *svc, int i, char *state, size_t statelen,
                   long long *remaining);

/* A TCP relay to 127.0.0.1:upstream_port on a free loopback port, run by a thread of
 * the test process, holding every chunk delay_ms (settable at any time; order kept)
 * before passing it on, in both directions.  A connection closed on one side is
 * closed on the other once its queued bytes have gone. */
typedef struct h_proxy h_proxy;
h_proxy *h_proxy_start(int upstream_port);
int h_proxy_port(const h_proxy *p);
void h_proxy_set_delay(h_proxy *p, int delay_ms);
/* Chunks read and not yet passed on, both directions. */
int h_proxy_queued(const h_proxy *p);
void h_proxy_stop(h_proxy *p);

/* Wait until the wall clock is between from_ms and to_ms into its second (to time a
 * restart against INFO's whole-second uptime). */
void h_align_wall_clock(int from_ms, int to_ms);

/* Whether the service's log holds needle (on some line). */
int h_log_contains(const h_service *s, const char *needle);
/* Monotonic milliseconds. */
double h_now_ms(void);
/* Wait until cond(arg) is true or timeout_ms passes; returns 1 if it became true. */
int h_wait_until(int (*cond)(void *), void *arg, int timeout_ms);

/* A fresh temporary directory <base>/<stem>-XXXXXX into out (cr_assert on failure); base
 * is $REDLOCK_TEST_TMPDIR or /tmp.  With REDLOCK_TEST_KEEP set, tests leave theirs (the
 * masters' and services' logs) behind: a tmpdir of one's own keeps them apart from the
 * runs of others on a shared machine. */
void h_tmpdir(char *out, size_t cap, const char *stem);

/* How many descriptors process pid has open (/proc/PID/fd; -1 if unknown): a service
 * has accepted the connections a test dialed once they are counted there. */
int h_open_fds(pid_t pid);

/* Skip the current test when running against an external stack. */
void h_require_local(h_cluster *c);

#endif
