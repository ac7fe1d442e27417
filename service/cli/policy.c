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

void cli_sched_granted(cli_sched *s, int64_t sent_at, long validity_ms, long ttl_ms)
{
    int64_t step;

    if (validity_ms < 0)
        validity_ms = 0;
    s->ttl_ms = ttl_ms;
    s->deadline = sent_at + validity_ms;
    step = ttl_ms / 3;
    /* A validity far below the ttl means slow rounds: leave room for two attempts. */
    if (step > validity_ms / 2)
        step = validity_ms / 2;
    if (step < 1)
        step = 1;
    s->next_extend = sent_at + step;
}

int cli_sched_answered(cli_sched *s, int64_t sent_at, long validity_ms)
{
    if (validity_ms <= 0 || sent_at + validity_ms <= s->deadline)
        return 0;
    s->deadline = sent_at + validity_ms;
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
