/* schedstat.h -- CPU starvation accounting from /proc/.../schedstat (run_delay: the time a
 * thread sat runnable but not running).  The latency verdict widens a request's bound by
 * exactly the time the machine, not the service, held that request up, so a busy host does
 * not fail the run and a service that blocks on its own still does. */
#ifndef CHAOS_SCHEDSTAT_H
#define CHAOS_SCHEDSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* The calling thread's cumulative run_delay in ns, or -1 if unavailable.  *fd caches an
 * open descriptor (initialise it to -1; close it when the thread is done). */
int64_t sched_self_run_delay(int *fd);

typedef struct starve_sampler starve_sampler;

/* Starts a thread sampling every interval_ms the run_delay of each thread of pid.
 * Returns NULL on failure (no /proc schedstat, or out of memory). */
starve_sampler *starve_sampler_new(pid_t pid, int interval_ms);
/* Stops the sampling thread; the samples stay readable.  NULL is a no-op. */
void starve_sampler_stop(starve_sampler *s);
/* Stops (if needed) and frees.  NULL is a no-op. */
void starve_sampler_free(starve_sampler *s);
/* The largest run_delay any one thread of pid accumulated over a window enclosing
 * [from_ns, to_ns] (CLOCK_MONOTONIC ns), from the samples around it; 0 if unknown.
 * Call after starve_sampler_stop. */
int64_t starve_sampler_max_delay(const starve_sampler *s, int64_t from_ns, int64_t to_ns);
/* Samples taken so far. */
long starve_sampler_count(const starve_sampler *s);

#endif
