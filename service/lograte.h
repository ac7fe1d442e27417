/* lograte.h -- how often a condition that lasts is logged: once when it begins, then
 * again after 10 s, 20 s, 40 s ... and at most every 10 minutes while it lasts, each
 * repeat saying how many occurrences were not logged.  Pure: the caller keeps the
 * state and gives the time. */
#ifndef RL_LOGRATE_H
#define RL_LOGRATE_H

#include <stdint.h>

#define LOGRATE_FIRST_US (10 * 1000000LL)
#define LOGRATE_MAX_US (600 * 1000000LL)

typedef struct lograte {
    int64_t since_us;     /* when the condition began */
    int64_t next_us;      /* the next occurrence at or after this is logged */
    int64_t every_us;     /* the interval after the next logged one */
    unsigned suppressed;  /* occurrences not logged since the last logged one */
} lograte;

/* The condition begins (log it): reset l. */
void lograte_begin(lograte *l, int64_t now_us);

/* The condition occurs again: 1 if this occurrence is to be logged (then
 * *suppressed is how many were not since the last logged one, and the interval
 * doubles), 0 if not (counted). */
int lograte_again(lograte *l, int64_t now_us, unsigned *suppressed);

#endif
