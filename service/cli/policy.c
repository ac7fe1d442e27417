/* policy.c -- exit codes and the lease clock of `redlock run` (see policy.h). */
#include "cli/policy.h"

#include <sys/wait.h>

#include "cli/args.h"

int cli_exit_for_status(long status)
{
    if (status >= 200 && status < 300)
        return CLI_EXIT_OK;
    if (status == 0 || status == 409 || status == 503)
        return CLI_EXIT_TEMPFAIL;
    return CLI_EXIT_FAILURE;
}

int cli_exit_for_acquire(long status, int conflict_exit)
{
    return status == 409 ? conflict_exit : cli_exit_for_status(status);
}

int cli_exit_for_wait(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return CLI_EXIT_FAILURE;
}

int64_t cli_sched_lead(long ttl_ms)
{
    int64_t lead = ttl_ms / 10;

    if (lead < 10)
        lead = 10;
    if (lead > 1000)
        lead = 1000;
    return lead;
}

/* The lead for one validity: never more than half of it (a validity far below its ttl,
 * such as the last one before a --max-hold bound, still leaves CMD its first half). */
static int64_t lead_of(long ttl_ms, long validity_ms)
{
    int64_t lead = cli_sched_lead(ttl_ms);

    return lead > validity_ms / 2 ? validity_ms / 2 : lead;
}

void cli_sched_granted(cli_sched *s, int64_t sent_at, long validity_ms, long ttl_ms)
{
    int64_t step;

    if (validity_ms < 0)
        validity_ms = 0;
    s->ttl_ms = ttl_ms;
    s->deadline = sent_at + validity_ms - lead_of(ttl_ms, validity_ms);
    step = ttl_ms / 3;
    /* A validity far below the ttl means slow rounds: leave room for two attempts
     * before the deadline. */
    if (step > (s->deadline - sent_at) / 2)
        step = (s->deadline - sent_at) / 2;
    if (step < 1)
        step = 1;
    s->next_extend = sent_at + step;
}

int cli_sched_answered(cli_sched *s, int64_t sent_at, long validity_ms)
{
    int64_t end = sent_at + validity_ms - lead_of(s->ttl_ms, validity_ms);

    if (validity_ms <= 0 || end <= s->deadline)
        return 0;
    s->deadline = end;
    return 1;
}

void cli_sched_failed(cli_sched *s, int64_t now)
{
    int64_t delay = s->ttl_ms / 10;

    if (delay < 50)
        delay = 50;
    if (delay > 1000)
        delay = 1000;
    s->next_extend = now + delay;
}

int cli_sched_expired(const cli_sched *s, int64_t now) { return now >= s->deadline; }

int cli_sched_confirm_first(const cli_sched *s, int64_t now)
{
    return now >= s->next_extend || cli_sched_expired(s, now);
}

int64_t cli_sched_sleep(const cli_sched *s, int64_t now, int extending, int64_t cap_ms)
{
    int64_t t = cap_ms;

    if (extending && s->next_extend - now < t)
        t = s->next_extend - now;
    if (s->deadline - now < t)
        t = s->deadline - now;
    return t < 0 ? 0 : t;
}
