/* listop.h -- GET /locks: the locks held by a quorum whose names start with a prefix,
 * at a bounded cost.  One SCRIPT_SCAN per master (at most LISTOP_SCAN_CALLS SCAN calls
 * of COUNT 1000 on each, so at most about 10,000 keys examined, and at most
 * LISTOP_LIMIT_MAX names each; the service's own '#' keys never match:
 * keys_scan_pattern), the union of
 * the names found by the masters that answered, cut to the first `limit` by name, then
 * one inspect per name (the rounds of LOCKOP_INSPECT, batched by master.c into one
 * script call per master per loop pass), keeping those a quorum holds.  Owned by one
 * worker (its rounds); never the lease. */
#ifndef RL_LISTOP_H
#define RL_LISTOP_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "round.h"
#include "validate.h"

#define LISTOP_LIMIT_MAX 1000
#define LISTOP_LIMIT_DEFAULT 100
#define LISTOP_SCAN_CALLS 10

typedef struct listop listop;
typedef void (*listop_done_cb)(listop *l);

typedef struct listop_item {
    char name[NAME_MAX_LEN + 1];
    size_t name_len;
    int held;                   /* held by a quorum (the others are not listed) */
    int64_t validity_ms;
    uint64_t token;             /* the bucket's counter as it stands (as GET answers) */
    size_t owner_len;           /* 0: none */
    char owner[OWNER_MAX_LEN + 1];
} listop_item;

struct listop {
    /* public: set by listop_new */
    round_env *rounds;
    const char *key_prefix;
    char prefix[NAME_MAX_LEN + 1];
    size_t prefix_len;
    size_t limit;               /* 1..LISTOP_LIMIT_MAX */
    listop_done_cb done;        /* from the loop, once */
    void *owner;
    /* read-only, valid in done() */
    rl_err err;                 /* RL_OK, RL_E_QUORUM_UNAVAILABLE, RL_E_INTERNAL */
    size_t nodes_ok;            /* masters that answered the scan (or the worst inspect) */
    int truncated;              /* a scan stopped early, or more names than limit */
    size_t n;                   /* items[0..n): the candidates, by name; held ones listed */
    listop_item *items;
    /* private */
    size_t cap, pending;
};

/* A list of the locks under prefix (a valid name prefix, may be empty).  NULL when out
 * of memory. */
listop *listop_new(round_env *rounds, const char *key_prefix, const char *prefix, size_t prefix_len,
                   size_t limit, listop_done_cb done, void *owner);
/* Start it: done() is called later from the loop (never from inside this call).  0, or
 * -1 (out of memory: nothing started, done() is never called). */
int listop_start(listop *l);
/* After done() (or before start). */
void listop_free(listop *l);

#endif
