/* run.c -- `redlock run`: acquire, fork/exec, extend, release, all in one loop (see run.h). */
#include "cli/run.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/keep.h"
#include "cli/ops.h"
#include "cli/policy.h"
#include "cli/proc.h"

/* The loop wakes at least this often, a bound on any mistake in the timing. */
#define LOOP_CAP_MS 1000
/* How long the final release may take before the lock is left to expire. */
#define RELEASE_TIMEOUT_MS 5000L

typedef struct run_ctx {
    const cli_opts *o;
    cli_http *h;
    cli_proc proc;                  /* the command, and the signals */
    char lease[CLI_LEASE_MAX + 1];
    int held;                       /* the service granted lease: release it on every exit */
    int gone;                       /* the service said lease_not_found: nothing to release */
    int64_t answered_at;            /* when the last grant or extension was received */
    int64_t confirm_until;          /* a late grant: confirm it by then or give up */
    long long fence;
    cli_keep keep;                  /* the lease clock and the extension in flight */
    int lost;                       /* the lock was lost: the command is being stopped */
} run_ctx;

/* Pick lease, fencing token, validity and ttl out of a 201.  The lease is taken first:
 * once c->held is set, the lock is released on the way out whatever happens next.
 * Returns 0, or -1 if the answer is unusable (c->held tells whether it had a lease). */
static int parse_grant(run_ctx *c, const cli_req *r, long *validity_ms, long *ttl_ms)
{
    json_t *j = cli_req_json(r);
    const char *lease = json_string_value(json_object_get(j, "lease"));
    json_t *fence = json_object_get(j, "fencing_token");
    json_t *validity = json_object_get(j, "validity_ms");
    json_t *ttl = json_object_get(j, "ttl_ms");
    json_t *slot = json_object_get(j, "slot"); /* a semaphore's permit: REDLOCK_SLOT */

    if (lease == NULL || lease[0] == '\0' || strlen(lease) > CLI_LEASE_MAX)
        return -1;
    snprintf(c->lease, sizeof(c->lease), "%s", lease);
    c->held = 1;
    if (!json_is_integer(fence) || !json_is_integer(validity))
        return -1;
    c->fence = (long long)json_integer_value(fence);
    c->proc.slot = json_is_integer(slot) ? (long)json_integer_value(slot) : -1;
    *validity_ms = (long)json_integer_value(validity);
    if (json_is_integer(ttl) && json_integer_value(ttl) > 0)
        *ttl_ms = (long)json_integer_value(ttl);
    else if (c->o->ttl_ms > 0)
        *ttl_ms = c->o->ttl_ms;
    else
        *ttl_ms = *validity_ms;
    return 0;
}

/* A 201 (or 200) to a POST sent at sent, received at received.
 *
 * Which moment the validity is counted from.  The service computes validity = ttl -
 * elapsed - drift at its decision D, elapsed counted from its round's start; every key
 * was set at or after that start with expiry ttl, so the lock is safe until D + validity
 * (docs/DESIGN.md counts it, more cautiously, from the start).  The client knows only
 * sent <= round start <= D <= received, so sent is safe under either reading.  An anchor
 * later than sent needs a bound on received - D: the answer's way back plus however long
 * this process took to read it (descheduled, stopped, swapping), and nothing bounds that.
 * received - (ttl - validity) = received - elapsed - drift, for one, assumes that way
 * back is shorter than the round plus the drift allowance (17 ms at ttl 1500 with the
 * default --drift-factor), which one slow scheduling of this process breaks; so does
 * received minus any round-trip estimate.  The send time is the only safe anchor.
 *
 * A POST with --wait may have been parked for seconds, which makes its send time useless
 * as an anchor.  So when the grant comes after its first extension was due
 * (cli_sched_confirm_first), the grant is confirmed by an extension before the command
 * starts: a PATCH is answered in one round, and its send time is a safe anchor that is
 * recent (the same rule every extension already follows).  Returns -1 to go on, -2 to
 * confirm first. */
static int granted(run_ctx *c, int64_t sent, int64_t received, long validity_ms, long ttl_ms)
{
    cli_sched_granted(&c->keep.sched, sent, validity_ms, ttl_ms);
    if (!cli_sched_confirm_first(&c->keep.sched, received))
        return -1;
    /* Retry the confirmation for as long as the grant's validity counted from its arrival,
     * a bound on what is left of it (D <= received): past that the keys are expiring
     * anyway.  This bounds only the retrying, not the holding: the command has not
     * started. */
    c->confirm_until = received + validity_ms;
    return -2;
}

/* Release the grant inside a 201 that came in although we stopped (a signal): the
 * transfer may end in the same poll as the signal arrives. */
static void take_late_grant(run_ctx *c, const cli_req *r)
{
    long validity_ms = 0, ttl_ms = 0;

    if (cli_req_done(r) && (cli_req_status(r) == 201 || cli_req_status(r) == 200)) {
        c->answered_at = cli_now_ms();
        (void)parse_grant(c, r, &validity_ms, &ttl_ms); /* sets c->held with the lease */
    }
}

/* POST /locks/NAME, watching the signals meanwhile.  Returns -1 when the lock is ours and
 * the command may start, -2 when it is ours but must be confirmed first (see granted()),
 * else the exit code (c->held then says whether a lease is to be released). */
static int acquire(run_ctx *c)
{
    const cli_opts *o = c->o;
    json_t *body = cli_ops_grant_body(o);
    cli_req *r = NULL;
    char msg[768];
    int64_t sent, received;
    long validity_ms = 0, ttl_ms = 0;
    int rc = CLI_EXIT_FAILURE;

    if (body == NULL) {
        fprintf(stderr, "redlock: out of memory\n");
        goto out;
    }
    sent = cli_now_ms();
    r = cli_http_start(c->h, "POST", o->name, body, cli_ops_timeout(o->wait_ms), msg,
                       sizeof(msg));
    if (r == NULL) {
        fprintf(stderr, "redlock: acquire %s: %s\n", o->name, msg);
        goto out;
    }
    while (!cli_req_done(r)) {
        struct signalfd_siginfo si;
        int ready = 0, sig;

        if (cli_http_poll(c->h, c->proc.sfd, LOOP_CAP_MS, &ready) != 0) {
            fprintf(stderr, "redlock: acquire %s: curl multi error\n", o->name);
            goto out;
        }
        while (ready && (sig = cli_proc_next_signal(&c->proc, &si)) > 0) {
            if (sig == SIGCHLD)
                continue;
            /* A grant already received is released on the way out.  The service may
             * still grant the lock after we stop listening, with a lease we never see:
             * it then expires after its ttl, as for any client that dies. */
            take_late_grant(c, r);
            fprintf(stderr, "redlock: interrupted by signal %d while acquiring %s\n", sig,
                    o->name);
            rc = 128 + sig;
            goto out;
        }
    }
    received = cli_now_ms();
    c->answered_at = received;
    if (cli_req_status(r) != 201 && cli_req_status(r) != 200) {
        cli_ops_describe(msg, sizeof(msg), o->sem ? "sem acquire" : "acquire", o->name,
                         cli_http_url(c->h), r);
        fprintf(stderr, "redlock: %s\n", msg);
        rc = cli_exit_for_acquire(cli_req_status(r), o->conflict_exit);
        if (rc == CLI_EXIT_OK && cli_req_status(r) != 409) /* a 2xx other than 200/201 */
            rc = CLI_EXIT_FAILURE;
        goto out;
    }
    if (parse_grant(c, r, &validity_ms, &ttl_ms) != 0) {
        fprintf(stderr, "redlock: acquire %s: the answer lacks lease, fencing_token or "
                "validity_ms%s\n", o->name, c->held ? "; releasing the lease it holds" : "");
        goto out;
    }
    rc = granted(c, sent, received, validity_ms, ttl_ms);
out:
    cli_req_free(r);
    json_decref(body);
    return rc;
}

/* The lock is gone: stop the command (SIGTERM now, SIGKILL after the grace). */
static void lose(run_ctx *c, const char *why)
{
    c->lost = 1;
    cli_keep_cancel(&c->keep);
    cli_proc_stop(&c->proc, c->o->name, why);
}

/* The grant came late (see granted()): extend it before the command starts, retrying
 * failures until c->confirm_until, watching the signals.  Returns -1 when the lock is
 * confirmed, else the exit code. */
static int confirm_grant(run_ctx *c)
{
    int64_t give_up = c->confirm_until;

    for (;;) {
        struct signalfd_siginfo si;
        int64_t now = cli_now_ms(), sleep_ms;
        int ready = 0, sig;

        if (c->keep.ext == NULL && now >= give_up) {
            fprintf(stderr, "redlock: the grant of %s came too late to count on and no "
                    "extension could confirm it; not running %s\n", c->o->name,
                    c->o->argv[0]);
            return CLI_EXIT_TEMPFAIL;
        }
        cli_keep_tick(&c->keep, now, give_up);
        sleep_ms = cli_keep_sleep(&c->keep, now, LOOP_CAP_MS, 0);
        if (c->keep.ext == NULL && give_up - now < sleep_ms)
            sleep_ms = give_up - now;
        if (cli_http_poll(c->h, c->proc.sfd, (int)(sleep_ms > 0 ? sleep_ms : 0), &ready) != 0) {
            fprintf(stderr, "redlock: extend %s: curl multi error\n", c->o->name);
            return CLI_EXIT_FAILURE;
        }
        switch (cli_keep_take(&c->keep)) {
        case CLI_KEEP_OK:
            c->answered_at = cli_now_ms();
            if (cli_sched_expired(&c->keep.sched, c->answered_at))
                break; /* its answer came after its own validity: try again */
            return -1;
        case CLI_KEEP_GONE:
            c->gone = 1;
            fprintf(stderr, "redlock: the grant of %s came too late to count on and "
                    "had expired before an extension could confirm it (HTTP 404 "
                    "lease_not_found); not running %s\n", c->o->name, c->o->argv[0]);
            return CLI_EXIT_TEMPFAIL;
        case CLI_KEEP_NONE:
        case CLI_KEEP_RETRY:
        case CLI_KEEP_BOUND:
            break;
        }
        while (ready && (sig = cli_proc_next_signal(&c->proc, &si)) > 0) {
            if (sig == SIGCHLD)
                continue;
            fprintf(stderr, "redlock: interrupted by signal %d before running %s\n", sig,
                    c->o->argv[0]);
            return 128 + sig;
        }
    }
}

/* Why the lock is over when its validity ran out. */
static const char *expired_why(const run_ctx *c)
{
    return c->keep.bounded ? "it reached its --max-hold (the service extends it no further)"
                           : "its validity ran out with no successful extension";
}

/* Supervise the command until it has exited.  Returns 0, or -1 on a loop error (the
 * command is then killed and reaped).
 *
 * Loss is signalled twice over, at the same deadline: here, and by the command's guard
 * (proc.h), which holds the deadline too and stops the command on its own timer should
 * this loop be held up.  The deadline is checked after every poll before an extension's
 * answer is taken, so an answer that comes after it never revives the lock here while
 * the guard stops the command. */
static int supervise(run_ctx *c)
{
    while (!c->proc.done) {
        int64_t now = cli_now_ms(), sleep_ms;
        int ready = 0;

        if (!c->lost && cli_sched_expired(&c->keep.sched, now))
            lose(c, expired_why(c));
        if (!c->lost)
            cli_keep_tick(&c->keep, now, c->keep.sched.deadline);
        sleep_ms = cli_proc_tick(&c->proc, now, LOOP_CAP_MS);
        if (!c->lost)
            sleep_ms = cli_keep_sleep(&c->keep, now, sleep_ms, 1);
        if (cli_http_poll(c->h, c->proc.sfd, (int)(sleep_ms > 0 ? sleep_ms : 0), &ready) != 0) {
            fprintf(stderr, "redlock: curl multi error; stopping %s\n", c->o->argv[0]);
            cli_proc_kill(&c->proc);
            return -1;
        }
        if (!c->lost && cli_sched_expired(&c->keep.sched, cli_now_ms()))
            lose(c, expired_why(c));
        if (!c->lost) {
            switch (cli_keep_take(&c->keep)) {
            case CLI_KEEP_OK:
                c->answered_at = cli_now_ms();
                cli_proc_set_deadline(&c->proc, c->keep.sched.deadline);
                break;
            case CLI_KEEP_GONE:
                c->gone = 1;
                lose(c, "the service no longer holds the lease (HTTP 404 lease_not_found)");
                break;
            case CLI_KEEP_NONE:
            case CLI_KEEP_RETRY:
            case CLI_KEEP_BOUND: /* the validity it has stands; no more extensions */
                break;
            }
        }
        if (ready)
            cli_proc_on_signals(&c->proc);
        cli_proc_reap(&c->proc);
    }
    return 0;
}

/* DELETE the lease.  Called on every way out once the service granted it (c->held), unless
 * it said the lease is gone (c->gone): after the command ended, after the lock was lost
 * (the validity ran out, but the keys may still be on the masters: a lease left there
 * would keep everyone out until its ttl with no one holding it), after a failure of ours
 * or a signal.  A DELETE only removes keys holding this lease, so it never harms a later
 * holder. */
static void release(run_ctx *c)
{
    char msg[768];
    /* The quorum's keys were last set before answered_at, to live about ttl from then (a
     * failed extension may have renewed some of them: an estimate, not a bound). */
    long left = (long)(c->answered_at + c->keep.sched.ttl_ms - cli_now_ms());

    c->held = 0;
    if (cli_ops_release(c->h, c->o->name, c->lease, RELEASE_TIMEOUT_MS, msg, sizeof(msg)) >= 0)
        return;
    if (left > 0)
        fprintf(stderr, "redlock: %s; the lock expires on its own in about %ld ms\n", msg,
                left);
    else
        fprintf(stderr, "redlock: %s; the lock expires on its own at the end of its ttl\n",
                msg);
}

int cli_run(const cli_opts *o, cli_http *h)
{
    run_ctx c;
    int rc = CLI_EXIT_FAILURE;

    memset(&c, 0, sizeof(c));
    c.o = o;
    c.h = h;
    cli_keep_init(&c.keep, h, o->name, o->sem ? "sem extend" : "extend", c.lease);
    if (o->argv == NULL || o->argc < 1) {
        fprintf(stderr, "redlock: run: no command\n");
        return CLI_EXIT_USAGE;
    }
    if (cli_proc_init(&c.proc, o->argv, o->name, o->grace_ms) != 0)
        goto out;
    rc = acquire(&c);
    if (rc == -2)
        rc = confirm_grant(&c);
    if (rc >= 0)
        goto out;

    if (cli_proc_spawn(&c.proc, c.fence, c.lease, c.keep.sched.deadline) != 0) {
        rc = CLI_EXIT_FAILURE;
        goto out;
    }
    if (supervise(&c) != 0) {
        rc = CLI_EXIT_FAILURE;
        goto out;
    }
    rc = cli_proc_exit_code(&c.proc, c.lost, o->name);
out:
    /* Every way out after a grant, the command having ended if it was started. */
    cli_keep_cancel(&c.keep);
    if (c.held && !c.gone)
        release(&c);
    memset(c.lease, 0, sizeof(c.lease));
    cli_proc_fini(&c.proc);
    return rc;
}
