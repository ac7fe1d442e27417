/* metrics.h -- the Prometheus text exposition of /metrics, summed over the workers'
 * own counters (each written by its thread only and read here with relaxed loads). */
#ifndef RL_METRICS_H
#define RL_METRICS_H

#include <stddef.h>

#include "app.h"

/* Render the exposition; the caller frees the text.  NULL on allocation failure. */
char *metrics_render(app *a, size_t *len);

#endif
