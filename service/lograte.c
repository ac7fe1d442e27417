/* lograte.c -- decaying repeats of a lasting condition's log line (see lograte.h). */
#include "lograte.h"

void lograte_begin(lograte *l, int64_t now_us)
{
    l->since_us = now_us;
    l->every_us = LOGRATE_FIRST_US;
    l->next_us = now_us + l->every_us;
    l->suppressed = 0;
}

int lograte_again(lograte *l, int64_t now_us, unsigned *suppressed)
{
    if (now_us < l->next_us) {
        l->suppressed++;
        return 0;
    }
    *suppressed = l->suppressed;
    l->suppressed = 0;
    l->every_us = l->every_us * 2 > LOGRATE_MAX_US ? LOGRATE_MAX_US : l->every_us * 2;
    l->next_us = now_us + l->every_us;
    return 1;
}
