/* watch.h -- who on this worker waits for a change of which lock: the worker's watchers,
 * by name (a watched GET, `GET /locks/{name}?index=I&wait_ms=N`, is one: watchget.h),
 * parked until the lock's state may have changed.  The events that may change it reach the worker as names: a release (here,
 * on another worker, or announced by another instance), a grant made through this
 * instance, and the holder's expiry, which each watcher times itself.  A watcher is
 * embedded in its owner and called back; it costs no thread and no round until an
 * event comes. */
#ifndef RL_WATCH_H
#define RL_WATCH_H

#include <stddef.h>

#include "list.h"
#include "lockop.h"

typedef struct watcher watcher;
typedef struct watch_env watch_env;

struct watcher {
    /* public: set by the owner before watch_add() */
    const char *name;
    size_t len;
    void (*changed)(watcher *w); /* an event for its name (from the loop) */
    /* private */
    watch_env *env;              /* while listed */
    list link;                   /* in env->watchers */
};

struct watch_env {
    /* public: set by watch_env_init() */
    lockop_env *ops;             /* its watch() follows announcements of a name */
    /* read-only (relaxed reads by other threads) */
    long n;                      /* watchers listed here */
    /* private */
    list watchers;               /* the newest first */
};

/* No watchers yet; ops->watch follows the names watched. */
void watch_env_init(watch_env *env, lockop_env *ops);

/* List w (its name's announcements are followed while it is listed). */
void watch_add(watch_env *env, watcher *w);

/* Unlist w (no-op if it is not listed). */
void watch_remove(watcher *w);

/* Something may have changed name: call every watcher of it. */
void watch_wake(watch_env *env, const char *name, size_t len);

#endif
