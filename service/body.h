/* body.h -- the JSON bodies of the HTTP API's answers: a grant, a release, an
 * extension and an inspection of one name, a grant and a release of several, an error,
 * and the masters' health (/healthz, /readyz).  Pure: plain data in, JSON out through
 * a jw writer (jw.h), no I/O, no clock, no state.  api.c picks the body and the
 * status; api/openapi.yaml is the contract these shapes keep. */
#ifndef RL_BODY_H
#define RL_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "jw.h"
#include "validate.h"

/* Writer room enough for any single-name body or error body. */
#define BODY_MAX_LOCK 1024
/* ... for any multi-name body: MULTI_MAX_NAMES names of NAME_MAX_LEN, each twice
 * (the list and the tokens), with quotes, commas and a 20-digit token, and the lease. */
#define BODY_MAX_MULTI (2 * MULTI_MAX_NAMES * (NAME_MAX_LEN + 24) + LEASE_MAX_LEN + 128)
/* ... for the health body of a usual cluster (it is cut past that: see body_health). */
#define BODY_MAX_HEALTH 16384

/* One name's lock as the answers show it.  Each body uses the fields it names. */
typedef struct body_lock {
    const char *name;
    size_t name_len;
    const char *lease;          /* grants */
    size_t lease_len;
    uint64_t fencing_token;
    int64_t validity_ms;
    long ttl_ms;
    int held;                   /* inspections */
    const char *owner;          /* inspections: the holder's owner (owner_len 0: none) */
    size_t owner_len;
    int forced;                 /* releases: broken by an admin whatever the lease */
    int mode;                   /* enum lockop_mode (op.h): 1 shared, 2 a semaphore */
    long readers;               /* inspections: shared holders; semaphores: permits taken */
    long permits;               /* semaphores: the number of permits (0: unknown) */
    int slot;                   /* semaphore grants: the permit's slot */
    long holds;                 /* reentrant holds: the count (0: not shown) */
    long lock_delay_ms;         /* grants: the lock-delay (0: not shown) */
    long max_hold_ms;           /* grants: the hold's bound (0: not shown) */
    int64_t max_hold_left_ms;   /* extensions: what is left of the bound (-1: not shown) */
    int64_t resting_ms;         /* inspections of a lock nobody holds: how long it still
                                 * rests (0: not shown) */
    int resting;                /* forced releases: the lock rests for its lock-delay */
} body_lock;

/* 201 of POST /locks/{name}: {"name","lease","fencing_token","validity_ms","ttl_ms"},
 * and "lock_delay_ms", "max_hold_ms" when the lock has them */
void body_granted(jw *j, const body_lock *l);

/* A line of a streamed hold after its grant: {"event": event, "validity_ms" (when
 * >= 0), "reason" (when not NULL)}. */
void body_hold_event(jw *j, const char *event, int64_t validity_ms, const char *reason);
/* 200 of DELETE /locks/{name}: {"name","released":true[,"forced":true]} */
void body_released(jw *j, const body_lock *l);
/* 200 of PATCH /locks/{name}: {"name","fencing_token","validity_ms","ttl_ms"}, and
 * "max_hold_left_ms" for a hold with a bound */
void body_extended(jw *j, const body_lock *l);
/* 200 of GET /locks/{name}: {"name","held","owner","validity_ms","fencing_token","index"};
 * owner is null when the lock is free or was granted without one.  Never the lease.
 * "resting_ms" while a lock nobody holds rests (a lock-delay). */
void body_inspected(jw *j, const body_lock *l);
/* 200 of GET /locks/{name}?token=T, the token check: {"name","token","current","held"} */
void body_checked(jw *j, const body_lock *l, uint64_t token, int current);

/* The index of a lock's state as GET shows it: 2 x its counter, + 1 while held.  A
 * grant moves the counter, a release or an expiry the held bit; an extension by the
 * holder changes neither (another name sharing the counter may move it too). */
uint64_t body_index(const body_lock *l);

/* Several names' lock (the layout of validate.h's and lockop.h's name arrays). */
typedef struct body_multi {
    size_t n;
    const char (*names)[NAME_MAX_LEN + 1];
    const size_t *lens;
    const uint64_t *tokens;     /* grants: per name */
    const char *lease;          /* grants */
    size_t lease_len;
    int64_t validity_ms;        /* grants */
    long ttl_ms;                /* grants */
    const int *shared;          /* grants: per name, held shared (NULL: all exclusive) */
} body_multi;

/* 201 of POST /locks: {"names":[...],"lease","fencing_tokens":{name: token},
 * "validity_ms","ttl_ms"} */
void body_multi_granted(jw *j, const body_multi *m);
/* 200 of DELETE /locks: {"names":[...],"released":true} */
void body_multi_released(jw *j, const body_multi *m);

/* One held lock of a list (GET /locks). */
typedef struct body_listed {
    const char *name;
    size_t name_len;
    const char *owner;          /* owner_len 0: null */
    size_t owner_len;
    int64_t validity_ms;
    uint64_t fencing_token;
} body_listed;

/* Writer room for the list body of n locks. */
#define BODY_LIST_SIZE(n) (128 + NAME_MAX_LEN + (size_t)(n) * (2 * NAME_MAX_LEN + 2 * OWNER_MAX_LEN + 96))

/* 200 of GET /locks: {"prefix","locks":[{"name","owner","validity_ms","fencing_token"}...],
 * "truncated"}.  Never a lease. */
void body_list(jw *j, const char *prefix, size_t prefix_len, const body_listed *locks, size_t n,
               int truncated);

/* An error answer: its code and what its body carries besides. */
typedef struct body_err {
    rl_err err;
    const char *message;        /* NULL or "": the error's own message (errors.h) */
    int64_t retry_after_ms;     /* the 409s: when to try again (negative counts as 0) */
    size_t nodes_ok, quorum;    /* a round that fell short: masters that answered, needed */
    long permits;               /* permits_mismatch: the semaphore's number of permits */
    size_t quarantined;         /* masters_quarantined: how many are out */
    int64_t rejoin_ms;          /* masters_quarantined: when the first is due back (-1: not
                                 * known: it waits for its peers) */
    int resting;                /* lock_held: the lock rests (a lock-delay) */
    int64_t max_hold_left_ms;   /* max_hold_exceeded: what is left of the bound */
} body_err;

/* {"error","message"}, plus "retry_after_ms" for RL_E_LOCK_HELD and
 * RL_E_LOCK_CONTENDED, "nodes_ok","quorum" for RL_E_QUORUM_UNAVAILABLE,
 * RL_E_VALIDITY_EXHAUSTED and RL_E_RELEASE_UNCONFIRMED, and with them "quarantined",
 * "rejoin_ms" for RL_E_MASTERS_QUARANTINED; "resting": true for a lock_held of a lock
 * that rests; "max_hold_left_ms" for RL_E_MAX_HOLD_EXCEEDED. */
void body_error(jw *j, const body_err *e);

/* The Retry-After header that goes with a 409's retry_after_ms: whole seconds,
 * rounded up, at least 1. */
long long body_retry_after_s(int64_t retry_after_ms);

/* One master in the health body. */
typedef struct body_master {
    const char *address;
    int ok;                     /* usable now, or answered the readiness round */
    const char *state;          /* master_state_name() */
    int quarantined;            /* then quarantine_remaining_ms is shown */
    int64_t quarantine_remaining_ms; /* negative counts as 0 */
    int failed;                 /* failed the readiness round: latency_ms is null */
    double latency_ms;
    const char *waiting;        /* quarantined past its delay: what its repair waits for
                                 * (NULL or "": nothing) */
    const char *clock;          /* out for its clock: what was seen (NULL or "": nothing) */
    const char *tls;            /* rediss://: "verified" or "insecure"; NULL: plain */
    const char *reason;         /* down or connecting: why it last went down; NULL: none */
} body_master;

/* {"ready","quorum","masters":[{"address","ok","state"[,"tls"][,"reason"]
 * [,"quarantine_remaining_ms"[,"waiting_for"]][,"clock"],"latency_ms"}...]}.  With
 * CONFIG_MAX_MASTERS masters of the longest addresses the body outgrows BODY_MAX_HEALTH:
 * the writer then says it overflowed. */
void body_health(jw *j, int ready, size_t quorum, const body_master *m, size_t n);

#endif
