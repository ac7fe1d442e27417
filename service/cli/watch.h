/* watch.h -- `redlock watch NAME`: the lock's state as one JSON line now and one more
 * at each change, by long-polling GET /locks/NAME?index=I&wait_ms=N (the service parks
 * the request until the state's index is no longer I). */
#ifndef RLC_WATCH_H
#define RLC_WATCH_H

struct cli_opts;
struct cli_http;

/* Watch until interrupted (SIGINT/SIGTERM: exit 0) or the service fails for good
 * (exit 75 after an unreachable service, 1 after a refused request). */
int cli_watch(const struct cli_opts *o, struct cli_http *h);

#endif
