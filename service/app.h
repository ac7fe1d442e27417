/* app.h -- the application context that main builds and passes down: configuration,
 * the shared listening socket, the workers, and the few process-wide counters.
 * Nothing else is process-wide. */
#ifndef RL_APP_H
#define RL_APP_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "log.h"

struct worker;

typedef struct app {
    config cfg;
    int listen_fd;
    char listen_addr[300];       /* as bound, with the real port */
    size_t nworkers;
    struct worker **workers;
    long waiters_total;          /* parked acquirers, all workers (atomic) */
    long holds_total;            /* locks held for streams, all workers (atomic) */
    long conns_total;            /* HTTP connections open, all workers (atomic) */
    int stopping;                /* set once by main on SIGTERM/SIGINT (atomic) */
    /* when a worker last found master i untrusted (wiped or quarantined) while it was
     * ready: the other workers check it again at their next tick (atomic; 0: never) */
    int64_t master_alarm_us[CONFIG_MAX_MASTERS];
    /* by name hash (WAITQ_SLOTS slots): until when a name counts as contended, so
     * that every worker sends its operations to the worker that keeps it (atomic) */
    int64_t *heat;
    struct waitq_known *known;   /* by name hash: what each keeper knows (waitq.h) */
    struct inbox *inboxes;       /* by worker: the announcements it has not read (inbox.h) */
    int64_t started_us;
    char origin[24];             /* this instance's random id: its own release messages */
    auth auth;                   /* bearer tokens (n == 0: open) */
    char *tls_cert, *tls_key;    /* PEM text when serving HTTPS */
    log_ctx log;                 /* main thread only */
} app;

#endif
