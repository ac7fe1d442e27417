/* keep.h -- a lock kept by extensions: a PATCH with the lease every third of the ttl, the
 * validity each success brings counted from that PATCH's send (policy.h's lease clock),
 * retries after failures until the validity runs out.  Shared by `redlock run`, `sem run`
 * and `elect` (which keeps its streamed hold's validity this way when the service gives
 * it no anchor on the stream).  Single-threaded: the caller polls the transfers. */
#ifndef RLC_KEEP_H
#define RLC_KEEP_H

#include <stdint.h>

#include "cli/policy.h"

struct cli_http;
struct cli_req;

typedef enum {
    CLI_KEEP_NONE,   /* no extension ended */
    CLI_KEEP_OK,     /* one succeeded: k->sched.deadline moved, counted from its send */
    CLI_KEEP_GONE,   /* 404 lease_not_found: the service no longer holds the lease */
    CLI_KEEP_RETRY,  /* it failed otherwise (503, no answer in time...): retried soon */
    CLI_KEEP_BOUND,  /* 409 max_hold_exceeded and nothing left to ask for: the hold is at
                      * its bound (--max-hold); no more extensions, k->bounded is set and
                      * the lock ends with the validity it has */
} cli_keep_outcome;

typedef struct cli_keep {
    struct cli_http *h;
    const char *name;       /* borrowed */
    const char *what;       /* "extend" or "sem extend", for messages (static) */
    const char *lease;      /* borrowed */
    cli_sched sched;
    struct cli_req *ext;    /* the extension in flight, or NULL */
    int64_t ext_sent;       /* when it was sent: the anchor of its validity */
    int64_t ext_until;      /* it, and the retries after it, end by then */
    int failing;            /* extensions have failed since the last success */
    long final_ttl;         /* the service refused to extend past the hold's bound: the last
                             * extension asks for what is left of it (0: not yet) */
    int bounded;            /* the hold is at its bound: nothing more to extend */
} cli_keep;

/* Set k up (no request yet). */
void cli_keep_init(cli_keep *k, struct cli_http *h, const char *name, const char *what,
                   const char *lease);

/* Start an extension at now if one is due and none is in flight.  It, and the retries
 * after it, are bounded by until (the whole call: connecting, sending, receiving), which
 * is the lock's deadline while it is held: an answer later than that is of no use. */
void cli_keep_tick(cli_keep *k, int64_t now, int64_t until);

/* The outcome of the extension in flight, once it has ended (CLI_KEEP_NONE before).
 * Failures are printed once per run of them ("retrying for the N ms of validity left"). */
cli_keep_outcome cli_keep_take(cli_keep *k);

/* How long the caller may sleep at now: until the next extension is due (if none is in
 * flight) or, if holding (the deadline is the lock's, not a late grant's being
 * confirmed), the deadline; at most cap_ms. */
int64_t cli_keep_sleep(const cli_keep *k, int64_t now, int64_t cap_ms, int holding);

/* Cancel the extension in flight, if any. */
void cli_keep_cancel(cli_keep *k);

#endif
