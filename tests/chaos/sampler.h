/* sampler.h -- the chaos checker's look at the masters' lock state: a thread that reads,
 * straight from each master's own port (not through the fault proxy), every lock key,
 * permit slot, reader entry and writer mark that is live there, for verdict (l)
 * ("nothing held by nobody", judge.h). */
#ifndef CHAOS_SAMPLER_H
#define CHAOS_SAMPLER_H

#include "judge.h"

#include <pthread.h>

typedef struct chaos_sampler chaos_sampler;

/* Starts the thread: every period_ms it makes one pass over the n masters on 127.0.0.1
 * ports[0..n) (the array must outlive the sampler; a master that does not answer within
 * period_ms / 2 is skipped that pass), and appends what it saw to s under mu, mapping keys
 * under prefix to h's names (an unknown name is skipped).  NULL on failure. */
chaos_sampler *chaos_sampler_start(const int *ports, int n, const char *prefix, const chaos_history *h,
                                   chaos_obs_set *s, pthread_mutex_t *mu, int period_ms);
/* Stops and joins the thread, frees the sampler.  NULL is a no-op. */
void chaos_sampler_stop(chaos_sampler *sp);

/* Parses one pass's reply (lines "kind|name|lease-or-value|left_ms") into s; the
 * pass's time t and number.  Exposed for the self-test. */
void chaos_sampler_parse(const char *reply, int master, int64_t t, long pass, const char *prefix,
                         const chaos_history *h, chaos_obs_set *s);

#endif
