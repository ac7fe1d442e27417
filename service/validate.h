/* validate.h -- what a request may ask for: lock names, leases, ttl and wait values,
 * and the JSON body of the lock routes.  Pure functions, no I/O (fuzzed and unit-tested). */
#ifndef RL_VALIDATE_H
#define RL_VALIDATE_H

#include <stddef.h>

#include "errors.h"

#define NAME_MAX_LEN 255
#define LEASE_MIN_LEN 16
#define LEASE_MAX_LEN 128
#define OWNER_MAX_LEN 256
#define BODY_MAX_BYTES (64 * 1024)
#define SEM_MAX_PERMITS 1024
/* A semaphore's name: a lock name short enough for the operation's "#sem:<name>". */
#define SEM_NAME_MAX_LEN 247

/* A name is 1..255 bytes of [A-Za-z0-9._:/-]. */
int validate_name(const char *s, size_t len);

/* A lease is 16..128 characters of [A-Za-z0-9_-]. */
int validate_lease(const char *s, size_t len);

/* An owner (who holds a lock, shown by GET) is 1..256 bytes of printable ASCII
 * (0x20-0x7e): never '\n', which separates it from the lease on the masters. */
int validate_owner(const char *s, size_t len);

/* The parameters of a lock request, gathered from the query string and the body
 * (the body's value wins). */
typedef struct lock_params {
    long ttl_ms;
    long wait_ms;
    int has_ttl, has_wait, has_lease, has_owner;
    int hold_stream;     /* "hold": "stream": kept while the connection is open (hold.h) */
    int shared;          /* "mode": "shared" (1) or "exclusive" (0, the default) */
    int has_mode;
    long permits;        /* semaphores: "permits" 1..SEM_MAX_PERMITS */
    int has_permits;
    int reentrant;       /* "reentrant": true: a repeated lease counts one more hold */
    int has_reentrant;
    int has_index;       /* GET ?index=I: answer when the lock's index is no longer I */
    unsigned long long index;
    long lock_delay_ms;  /* "lock_delay_ms": a hold that ends without a release keeps the
                          * name from others this long more (docs/DESIGN.md section 14) */
    int has_lock_delay;
    long max_hold_ms;    /* "max_hold_ms": the hold is not extended past this, counted from
                          * its grant (0: no bound) */
    int has_max_hold;
    unsigned long long token; /* GET ?token=T: is T the current holder's fencing token */
    int has_token;
    char lease[LEASE_MAX_LEN + 1];
    char owner[OWNER_MAX_LEN + 1];
} lock_params;

/* Apply a query-string value ("ttl_ms", "wait_ms", "lease", "owner", "hold", "index",
 * "mode", "permits", "reentrant", "lock_delay_ms", "max_hold_ms", "token");
 * unknown keys are ignored.
 * Returns RL_OK or the error for that value. */
rl_err params_from_query(lock_params *p, const char *key, const char *value);

/* Parse a body: empty (len 0) means none; otherwise a JSON object whose known members
 * are ttl_ms, wait_ms (non-negative integers), lease and owner (strings) and hold
 * ("stream").  Unknown members are
 * an error, so that a typo does not pass silently.  On error, msg says what is wrong. */
rl_err params_from_body(lock_params *p, const char *body, size_t len, char *msg, size_t msglen);

#define MULTI_MAX_NAMES 32

/* The body of POST /locks: {"names": [...], "modes": {"<name>": "shared"|"exclusive"},
 * "ttl_ms", "wait_ms", "lease"}.  names are 1..MULTI_MAX_NAMES distinct valid names;
 * modes (optional) names only names of the list. */
typedef struct multi_params {
    lock_params p;
    size_t n;
    char names[MULTI_MAX_NAMES][NAME_MAX_LEN + 1];
    size_t lens[MULTI_MAX_NAMES];
    int shared[MULTI_MAX_NAMES]; /* "modes": {"<name>": "shared"}: that name held shared */
} multi_params;

rl_err multi_params_from_body(multi_params *mp, const char *body, size_t len, char *msg,
                              size_t msglen);

/* Check ranges against the configured limits (ttl 1..max_ttl and above the drift
 * allowance, wait 0..max_wait, lock_delay_ms 0..max_ttl).  Returns RL_OK or the error
 * with a message.  (max_hold_ms against the ttl is the caller's: it knows the
 * default ttl.) */
rl_err params_check(const lock_params *p, long max_ttl_ms, long max_wait_ms, double drift_factor,
                    char *msg, size_t msglen);

/* Strict non-negative decimal integer (no sign, no spaces), at most max.  0 or -1. */
int validate_uint(const char *s, long max, long *out);

#endif
