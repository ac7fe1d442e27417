/* notify.h -- release and grant announcements across service instances: one
 * subscriber connection per master per worker, subscribed to "<prefix>#released:<name>"
 * (keys.h) for exactly the names followed on this worker (parked waiters, streamed
 * holds, watches).  The scripts publish a release (and a grant) on that channel, so a
 * waiter here learns of a release made through any other instance without waiting for
 * its next poll (the poll stays as the fallback), and a watch of a grant. */
#ifndef RL_NOTIFY_H
#define RL_NOTIFY_H

#include <stddef.h>

#include "config.h"
#include "loop.h"

typedef struct notify notify;
struct inbox;

/* Called with the name whose release (granted 0) or grant (granted 1) was announced.
 * The scripts announce a release as their origin, a grant as "+" and their origin. */
typedef void (*notify_cb)(void *owner, const char *name, size_t len, int granted);

/* Create (not connected).  Messages whose payload is origin (this instance's own
 * releases, already woken here) are skipped.  in (may be NULL; outlives n): where the
 * subscriber sockets and the reads of them are shown to the other threads (inbox.h).
 * NULL on allocation failure. */
notify *notify_new(const config *cfg, loop *l, const char *origin, notify_cb cb, void *owner,
                   struct inbox *in);
void notify_free(notify *n);

/* Connect to every master (reconnecting with back-off on failure). */
void notify_start(notify *n);

/* Follow / stop following name; counted: each caller that follows a name (a queue of
 * waiters, a hold, a watch) stops following it once, and the channel is left when the
 * last one does. */
void notify_subscribe(notify *n, const char *name, size_t len);
void notify_unsubscribe(notify *n, const char *name, size_t len);

#endif
