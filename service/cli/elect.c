/* elect.c -- `redlock elect`: campaign, lead while the hold's validity runs (see elect.h). */
#include "cli/elect.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/keep.h"
#include "cli/ops.h"
#include "cli/policy.h"
#include "cli/proc.h"

/* The loop wakes at least this often, a bound on any mistake in the timing. */
#define LOOP_CAP_MS 1000
/* wait_ms of each campaign POST (lowered if the service allows less). */
#define CAMPAIGN_WAIT_MS 30000L
/* How long setting up a campaign's connection may take (resolving, connecting, TLS). */
#define CONNECT_TIMEOUT_MS 5000L
/* A 409 that came sooner than this after its POST: wait before the next one. */
#define QUICK_409_MS 1000
/* Back-off after a 503 or no answer: from BACKOFF_MIN_MS, doubling up to BACKOFF_MAX_MS. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* How long the final release may take (the service lets the lock go anyway: at once when
 * a one-way stream closes, at the end of the validity it last told a duplex one). */
#define RELEASE_TIMEOUT_MS 5000L

typedef enum { CAMPAIGN, CONFIRMING, LEADING } elect_phase;

typedef struct elect_ctx {
    const cli_opts *o;
    cli_http *h;
    cli_proc proc;
    elect_phase phase;
    cli_req *stream;                /* the POST ?hold=stream, waiting or streaming */
    int duplex;                     /* the service upgraded it: pings (else PATCHes) */
    int64_t sent;                   /* when it was sent: the grant's anchor */
    int64_t answer_by;              /* no status line by then: give it up */
    long wait_ms;                   /* wait_ms of each POST */
    int64_t backoff_ms;             /* the next back-off (0: none yet) */
    int64_t retry_at;               /* no POST in flight: send the next one then */
    int64_t confirm_until;          /* CONFIRMING: give the grant up by then */
    char lease[CLI_LEASE_MAX + 1];
    long long fence;
    long ttl_ms;                    /* from the grant (o->ttl_ms before) */
    cli_keep keep;                  /* keep.sched.deadline: the validity ends there; a
                                     * one-way hold is kept by its extensions */
    long ping_ms;                   /* duplex: ping every ping_ms */
    long long ping_n;               /* duplex: the last ping sent */
    int64_t ping_sent;              /* ... when: the anchor of its answer's validity */
    int ping_waiting;               /* ... its answer is not read yet: send no other */
    int64_t granted_at;             /* when the grant line was read: its --max-hold
                                     * bound ends no later than this + max_hold_ms */
    int lost;                       /* leadership lost: the command is being stopped */
    int gone;                       /* the service said the hold is over: no release */
} elect_ctx;

/* Let the transfers progress for up to sleep_ms, watching the signals.  Returns 0 or -1. */
static int poll_once(elect_ctx *c, int64_t sleep_ms, int *ready)
{
    if (cli_http_poll(c->h, c->proc.sfd, (int)(sleep_ms > 0 ? sleep_ms : 0), ready) == 0)
        return 0;
    fprintf(stderr, "redlock: elect %s: curl multi error\n", c->o->name);
    return -1;
}

/* Close the stream.  A granted duplex hold is asked to release first (a hang-up alone
 * lets the lock go only at the end of the validity last told). */
static void drop_stream(elect_ctx *c)
{
    if (c->stream != NULL && c->phase != CAMPAIGN && c->duplex && !c->gone)
        (void)cli_req_send_line(c->stream, "{\"release\":true}"); /* goes at once */
    cli_req_free(c->stream); /* closes its connection */
    c->stream = NULL;
}

/* Campaign again after delay_ms (0: at once). */
static void campaign_again(elect_ctx *c, int64_t delay_ms)
{
    drop_stream(c);
    cli_keep_cancel(&c->keep);
    c->phase = CAMPAIGN;
    c->duplex = 0;
    c->gone = 0;
    c->retry_at = cli_now_ms() + delay_ms;
    memset(c->lease, 0, sizeof(c->lease));
}

/* The next back-off, jittered in [b/2, b]. */
static int64_t backoff(elect_ctx *c)
{
    int64_t b;

    c->backoff_ms = c->backoff_ms <= 0 ? BACKOFF_MIN_MS : c->backoff_ms * 2;
    if (c->backoff_ms > BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MAX_MS;
    b = c->backoff_ms;
    return b / 2 + random() % (b / 2 + 1);
}

/* Send the next POST, asking for a duplex hold.  Returns 0, or -1 (printed) if it could
 * not be started. */
static int campaign_post(elect_ctx *c)
{
    json_t *body = cli_ops_acquire_body(c->o->ttl_ms, c->wait_ms, NULL, c->o->owner);
    char err[512];

    if (body == NULL || json_object_set_new(body, "hold", json_string("stream")) != 0 ||
        (c->o->max_hold_ms > 0 &&
         json_object_set_new(body, "max_hold_ms", json_integer(c->o->max_hold_ms)) != 0)) {
        json_decref(body);
        fprintf(stderr, "redlock: out of memory\n");
        return -1;
    }
    c->sent = cli_now_ms();
    c->answer_by = c->sent + cli_ops_timeout(c->wait_ms);
    c->stream = cli_http_start_duplex(c->h, c->o->name, NULL, body, CONNECT_TIMEOUT_MS, err,
                                      sizeof(err));
    json_decref(body);
    if (c->stream == NULL) {
        fprintf(stderr, "redlock: elect %s: %s\n", c->o->name, err);
        return -1;
    }
    return 0;
}

/* The grant line: lease, fencing token, validity and ttl (and a duplex hold's ping_ms).
 * The validity is counted from the POST's send (see elect.h).  Returns 0 or -1. */
static int take_grant(elect_ctx *c, json_t *j)
{
    const char *lease = json_string_value(json_object_get(j, "lease"));
    json_t *fence = json_object_get(j, "fencing_token");
    json_t *validity = json_object_get(j, "validity_ms");
    json_t *ttl = json_object_get(j, "ttl_ms");
    json_t *ping = json_object_get(j, "ping_ms");

    if (lease == NULL || lease[0] == '\0' || strlen(lease) > CLI_LEASE_MAX ||
        !json_is_integer(fence) || !json_is_integer(validity))
        return -1;
    snprintf(c->lease, sizeof(c->lease), "%s", lease);
    c->fence = (long long)json_integer_value(fence);
    c->granted_at = cli_now_ms();
    if (json_is_integer(ttl) && json_integer_value(ttl) > 0)
        c->ttl_ms = (long)json_integer_value(ttl);
    else if (c->ttl_ms <= 0)
        c->ttl_ms = (long)json_integer_value(validity);
    cli_sched_granted(&c->keep.sched, c->sent, (long)json_integer_value(validity), c->ttl_ms);
    c->duplex = cli_req_upgraded(c->stream);
    c->ping_ms = json_is_integer(ping) && json_integer_value(ping) > 0
                     ? (long)json_integer_value(ping) : (c->ttl_ms / 4 > 0 ? c->ttl_ms / 4 : 1);
    c->ping_n = 0;
    c->ping_waiting = 0;
    return 0;
}

/* Duplex: send the next ping if it is due (one every ping_ms, none while the answer to
 * the last is unread). */
static void ping_if_due(elect_ctx *c, int64_t now)
{
    char line[64];

    if (!c->duplex || c->lost || c->ping_waiting || c->stream == NULL ||
        (c->ping_n > 0 && now < c->ping_sent + c->ping_ms))
        return;
    snprintf(line, sizeof(line), "{\"ping\":%lld}", c->ping_n + 1);
    if (cli_req_send_line(c->stream, line) != 0)
        return; /* the stream has ended: seen by step() */
    c->ping_n++;
    c->ping_sent = now;
    c->ping_waiting = 1;
}

/* The campaign POST has ended without a grant.  Returns -1 to campaign on, else the exit
 * code. */
static int campaign_refused(elect_ctx *c)
{
    cli_req *r = c->stream;
    long status = cli_req_status(r);
    const char *code = cli_req_error_code(r);
    int64_t took = cli_now_ms() - c->sent;
    char msg[768];
    int rc;

    if (status == 409) {
        /* Held by another leader (or contended): campaign on, at once after a long wait. */
        c->backoff_ms = 0;
        campaign_again(c, took >= QUICK_409_MS ? 0 : backoff(c));
        return -1;
    }
    if (status == 400 && strcmp(code, "invalid_wait") == 0 && c->wait_ms > 0) {
        /* The service allows a shorter wait ("wait_ms must be an integer 0..N"). */
        const char *range = strstr(cli_req_error_message(r), "0..");
        long max = range != NULL ? strtol(range + 3, NULL, 10) : 0;
        c->wait_ms = max > 0 && max < c->wait_ms ? max : c->wait_ms / 2;
        campaign_again(c, 0);
        return -1;
    }
    cli_ops_describe(msg, sizeof(msg), "elect", c->o->name, cli_http_url(c->h), r);
    if (status == 0 || status == 503) {
        int64_t delay = backoff(c);
        fprintf(stderr, "redlock: %s; campaigning again in %lld ms\n", msg, (long long)delay);
        campaign_again(c, delay);
        return -1;
    }
    fprintf(stderr, "redlock: %s\n", msg);
    rc = cli_exit_for_status(status);
    return rc == CLI_EXIT_OK || rc == CLI_EXIT_TEMPFAIL ? CLI_EXIT_FAILURE : rc;
}

/* Leadership is gone: stop the command (or, before it started, campaign again).  The
 * stream stays open while the command is being stopped (no pings, no extensions): the
 * service lets the lock go when asked once the command has ended, or by itself (a
 * duplex hold at its silence, a one-way one when it cannot extend). */
static void lose(elect_ctx *c, const char *why)
{
    cli_keep_cancel(&c->keep);
    if (c->phase != LEADING) {
        fprintf(stderr, "redlock: elect %s: %s before %s started; campaigning again\n",
                c->o->name, why, c->o->argv[0]);
        campaign_again(c, backoff(c));
        return;
    }
    c->lost = 1;
    cli_proc_stop(&c->proc, c->o->name, why);
}

/* The grant is ours and its validity still runs: lead. */
static int lead(elect_ctx *c)
{
    if (!c->o->quiet)
        fprintf(stderr, "redlock: elect %s: leader with fencing token %lld; running %s\n",
                c->o->name, c->fence, c->o->argv[0]);
    /* The guard keeps the stream's connection open until the command is gone: redlock
     * killed, the service must not hand the lock on while the command still runs. */
    c->proc.keep_fd = cli_req_socket(c->stream);
    if (cli_proc_spawn(&c->proc, c->fence, c->lease, c->keep.sched.deadline) != 0) {
        drop_stream(c);
        return CLI_EXIT_FAILURE;
    }
    c->phase = LEADING;
    return -1;
}

/* A new validity, from an extension or a ping's answer: lead if the grant waited for it,
 * else tell the guard.  Returns -1 to go on, else the exit code. */
static int renewed(elect_ctx *c)
{
    if (c->phase == CONFIRMING && cli_sched_expired(&c->keep.sched, cli_now_ms()))
        return -1; /* came too late to count on: the next ping or extension may do */
    if (c->phase == CONFIRMING)
        return lead(c);
    cli_proc_set_deadline(&c->proc, c->keep.sched.deadline);
    return -1;
}

/* Duplex: {"event":"alive","ping":n,"validity_ms":v}, v counted from ping n's send.
 * Returns -1 to go on, else the exit code. */
static int take_alive(elect_ctx *c, json_t *j)
{
    json_t *n = json_object_get(j, "ping"), *v = json_object_get(j, "validity_ms");

    if (!c->ping_waiting || !json_is_integer(n) || json_integer_value(n) != c->ping_n ||
        !json_is_integer(v)) {
        lose(c, "the service answered a ping it was not sent");
        return -1;
    }
    c->ping_waiting = 0;
    if (!cli_sched_answered(&c->keep.sched, c->ping_sent, (long)json_integer_value(v)) &&
        c->phase != CONFIRMING)
        return -1;
    return c->lost ? -1 : renewed(c);
}

/* Take the lines the stream has brought.  Returns -1 to go on, else the exit code. */
static int take_lines(elect_ctx *c)
{
    json_t *j;
    char why[256];
    int rc;

    while (c->stream != NULL && cli_req_next_line(c->stream, &j)) {
        const char *event = json_string_value(json_object_get(j, "event"));
        const char *reason = json_string_value(json_object_get(j, "reason"));

        if (c->phase == CAMPAIGN) {
            int64_t now = cli_now_ms();
            if (j == NULL || take_grant(c, j) != 0) {
                json_decref(j);
                fprintf(stderr, "redlock: elect %s: the grant lacks lease, fencing_token or "
                        "validity_ms; giving it up\n", c->o->name);
                c->duplex = cli_req_upgraded(c->stream);
                c->phase = CONFIRMING; /* granted: drop_stream() asks for the release */
                drop_stream(c);
                return CLI_EXIT_FAILURE;
            }
            json_decref(j);
            c->backoff_ms = 0;
            ping_if_due(c, now); /* the first ping goes right after the grant line */
            if (!cli_sched_confirm_first(&c->keep.sched, now)) {
                if ((rc = lead(c)) >= 0)
                    return rc;
                continue;
            }
            /* Parked: the POST's send is too old an anchor.  A ping's answer (or an
             * extension) confirms the grant first, waited for as long as the grant's
             * validity counted from its arrival (a bound on what is left of it: this
             * bounds the waiting, not the holding). */
            c->phase = CONFIRMING;
            c->confirm_until = now + (c->keep.sched.deadline - c->sent);
            continue;
        }
        if (event != NULL && c->duplex && strcmp(event, "alive") == 0) {
            rc = take_alive(c, j);
            json_decref(j);
            if (rc >= 0)
                return rc;
            continue;
        }
        if (event != NULL && strcmp(event, "lost") == 0) {
            snprintf(why, sizeof(why), "the service could not keep it (lost: %s)",
                     reason != NULL ? reason : "no reason given");
        } else if (event != NULL && strcmp(event, "expired") == 0) {
            snprintf(why, sizeof(why), "it reached its --max-hold of %ld ms (expired: %s)",
                     c->o->max_hold_ms, reason != NULL ? reason : "no reason given");
        } else if (event != NULL && strcmp(event, "released") == 0) {
            snprintf(why, sizeof(why), "the service released it (%s)",
                     reason == NULL ? "a DELETE with its lease"
                     : strcmp(reason, "shutting_down") == 0 ? "it is shutting down" : reason);
        } else if (c->duplex) {
            /* Any line but "alive" ends a duplex client's belief. */
            snprintf(why, sizeof(why), "the service said something unexpected (%s)",
                     event != NULL ? event : "not an event");
        } else {
            /* One-way: "extended" lines move no deadline (see elect.h); others are
             * ignored (a later service may say more). */
            json_decref(j);
            continue;
        }
        /* Nothing left to release after "released", nor after a one-way stream's last
         * line; a duplex hold that said anything else is still to be asked to let go. */
        c->gone = !c->duplex || (event != NULL && strcmp(event, "released") == 0);
        json_decref(j);
        lose(c, why);
        return -1;
    }
    return -1;
}

/* The extension in flight (one-way), if it ended.  Returns -1 to go on, else the exit
 * code. */
static int take_extension(elect_ctx *c)
{
    switch (cli_keep_take(&c->keep)) {
    case CLI_KEEP_OK:
        return renewed(c);
    case CLI_KEEP_GONE:
        c->gone = 1;
        lose(c, "the service no longer holds the lease (HTTP 404 lease_not_found)");
        break;
    case CLI_KEEP_NONE:
    case CLI_KEEP_RETRY:
    case CLI_KEEP_BOUND: /* the validity it has stands; no more extensions */
        break;
    }
    return -1;
}

/* 1 when the validity that ran out ended at the --max-hold bound: the service answers
 * no validity past the bound, which ends by granted_at + max_hold_ms, and the deadline
 * is the lead before the validity's end (less the drift and the round's time: the slack). */
static int at_bound(const elect_ctx *c)
{
    int64_t lead = cli_sched_lead(c->ttl_ms), slack = c->ttl_ms / 10 > 100 ? c->ttl_ms / 10 : 100;

    return c->o->max_hold_ms > 0 &&
           c->keep.sched.deadline + lead + slack >= c->granted_at + c->o->max_hold_ms;
}

/* One turn of the loop after a poll: the stream's lines and end, the clock, the pings
 * or extensions.  Returns -1 to go on, else the exit code. */
static int step(elect_ctx *c)
{
    int64_t now;
    int rc;

    /* The deadline first: an answer that comes after it revives nothing (the guard
     * stops the command at the same deadline). */
    if (c->phase == LEADING && !c->lost && cli_sched_expired(&c->keep.sched, cli_now_ms())) {
        char why[128];

        snprintf(why, sizeof(why), "it reached its --max-hold of %ld ms (its last validity "
                 "ends there)", c->o->max_hold_ms);
        lose(c, c->keep.bounded || at_bound(c) ? why
                : c->duplex ? "its validity ran out with no renewal in a ping's answer"
                            : "its validity ran out with no successful extension");
    }
    if (c->stream != NULL && (rc = take_lines(c)) >= 0)
        return rc;
    if (c->phase != CAMPAIGN && !c->duplex && !c->lost && (rc = take_extension(c)) >= 0)
        return rc;
    now = cli_now_ms();
    if (c->phase == CAMPAIGN && c->stream != NULL && cli_req_done(c->stream)) {
        long status = cli_req_status(c->stream);
        if (status != 101 && (status < 200 || status >= 300))
            return campaign_refused(c);
        fprintf(stderr, "redlock: elect %s: HTTP %ld with no grant; campaigning again\n",
                c->o->name, status);
        campaign_again(c, backoff(c));
        return -1;
    }
    if (c->phase == CAMPAIGN && c->stream != NULL && now >= c->answer_by &&
        cli_req_status_now(c->stream) == 0) {
        int64_t delay = backoff(c);
        fprintf(stderr, "redlock: elect %s: no answer from %s within %lld ms; campaigning "
                "again in %lld ms\n", c->o->name, cli_http_url(c->h),
                (long long)(now - c->sent), (long long)delay);
        campaign_again(c, delay);
        return -1;
    }
    if (c->phase != CAMPAIGN && !c->lost && c->stream != NULL && cli_req_done(c->stream)) {
        char why[512];
        if (cli_req_error(c->stream)[0] != '\0')
            snprintf(why, sizeof(why), "the connection to the service ended (%s)",
                     cli_req_error(c->stream));
        else
            snprintf(why, sizeof(why), "the service ended the stream without a word");
        c->gone = 1;
        lose(c, why);
        if (c->phase == CAMPAIGN)
            return -1;
    }
    if (c->phase == CONFIRMING && now >= c->confirm_until &&
        (c->duplex || c->keep.ext == NULL)) {
        fprintf(stderr, "redlock: elect %s: the grant came too late to count on and %s; "
                "campaigning again\n", c->o->name,
                c->duplex ? "no ping was answered in time" : "no extension could confirm it");
        campaign_again(c, backoff(c));
        return -1;
    }
    if (c->duplex)
        ping_if_due(c, now);
    else if (c->phase == CONFIRMING)
        cli_keep_tick(&c->keep, now, c->confirm_until);
    else if (c->phase == LEADING && !c->lost)
        cli_keep_tick(&c->keep, now, c->keep.sched.deadline);
    return -1;
}

/* How long the next poll may sleep. */
static int64_t sleep_for(elect_ctx *c, int64_t now)
{
    int64_t t = cli_proc_tick(&c->proc, now, LOOP_CAP_MS);
    int holding = c->phase == CONFIRMING || (c->phase == LEADING && !c->lost);

    if (c->phase == CAMPAIGN && c->stream == NULL)
        t = c->retry_at - now < t ? c->retry_at - now : t;
    if (c->phase == CAMPAIGN && c->stream != NULL && c->answer_by - now < t)
        t = c->answer_by - now;
    if (holding && !c->duplex)
        t = cli_keep_sleep(&c->keep, now, t, c->phase == LEADING);
    if (holding && c->duplex) {
        if (!c->ping_waiting && c->ping_sent + c->ping_ms - now < t)
            t = c->ping_sent + c->ping_ms - now;
        if (c->phase == LEADING && c->keep.sched.deadline - now < t)
            t = c->keep.sched.deadline - now;
    }
    if (c->phase == CONFIRMING && c->confirm_until - now < t)
        t = c->confirm_until - now;
    return t < 0 ? 0 : t;
}

/* Campaign and lead until the command has exited.  Returns -1 when it has (c->lost
 * says how), else the exit code. */
static int elect_loop(elect_ctx *c)
{
    for (;;) {
        struct signalfd_siginfo si;
        int ready = 0, sig, rc;
        int64_t now = cli_now_ms();

        if (c->phase == LEADING && c->proc.done)
            return -1;
        if (c->phase == CAMPAIGN && c->stream == NULL && now >= c->retry_at &&
            campaign_post(c) != 0)
            return CLI_EXIT_FAILURE;
        if (poll_once(c, sleep_for(c, now), &ready) != 0) {
            cli_proc_kill(&c->proc);
            return CLI_EXIT_FAILURE;
        }
        if (c->phase == LEADING) {
            if (ready)
                cli_proc_on_signals(&c->proc);
            cli_proc_reap(&c->proc);
        } else {
            while (ready && (sig = cli_proc_next_signal(&c->proc, &si)) > 0) {
                if (sig == SIGCHLD)
                    continue;
                fprintf(stderr, "redlock: interrupted by signal %d while campaigning for "
                        "%s\n", sig, c->o->name);
                return 128 + sig; /* a grant is released on the way out */
            }
        }
        if (!(c->phase == LEADING && c->proc.done) && (rc = step(c)) >= 0)
            return rc;
    }
}

/* Release the lock we hold, while the stream is still open, so that it is free when
 * redlock exits: on a duplex hold with {"release":true} (answered "released" once a
 * quorum released it), on a one-way one with a DELETE (closing the stream would release
 * it too, a moment later). */
static void release_hold(elect_ctx *c)
{
    char msg[768];
    int64_t until = cli_now_ms() + RELEASE_TIMEOUT_MS;
    json_t *j;

    if (!c->duplex) {
        if (cli_ops_release(c->h, c->o->name, c->lease, RELEASE_TIMEOUT_MS, msg,
                            sizeof(msg)) < 0)
            fprintf(stderr, "redlock: %s; closing the stream releases it\n", msg);
        return;
    }
    if (cli_req_send_line(c->stream, "{\"release\":true}") != 0)
        return;
    c->gone = 1; /* asked: drop_stream() does not ask again */
    while (!cli_req_done(c->stream) && cli_now_ms() < until) {
        if (cli_http_poll(c->h, -1, (int)(until - cli_now_ms()), NULL) != 0)
            break;
        while (cli_req_next_line(c->stream, &j)) {
            const char *event = json_string_value(json_object_get(j, "event"));
            int last = event != NULL && strcmp(event, "alive") != 0;
            const char *reason = json_string_value(json_object_get(j, "reason"));
            /* (after a loss already reported, the service saying it lost it too is
             * no news: the lock was given up when CMD was stopped) */
            if (event != NULL && strcmp(event, "lost") == 0 && !c->lost)
                fprintf(stderr, "redlock: release %s: the service could not release it "
                        "(lost: %s); it expires on its own\n", c->o->name,
                        reason != NULL ? reason : "no reason given");
            json_decref(j);
            if (last)
                return;
        }
    }
    if (!cli_req_done(c->stream))
        fprintf(stderr, "redlock: release %s: no answer within %ld ms; the service lets it "
                "go at the end of its validity\n", c->o->name, RELEASE_TIMEOUT_MS);
}

int cli_elect(const cli_opts *o, cli_http *h)
{
    elect_ctx c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.o = o;
    c.h = h;
    c.wait_ms = CAMPAIGN_WAIT_MS;
    c.ttl_ms = o->ttl_ms;
    cli_keep_init(&c.keep, h, o->name, "extend", c.lease);
    srandom((unsigned)getpid() ^ (unsigned)cli_now_ms());
    if (o->argv == NULL || o->argc < 1) {
        fprintf(stderr, "redlock: elect: no command\n");
        return CLI_EXIT_USAGE;
    }
    if (cli_proc_init(&c.proc, o->argv, o->name, o->grace_ms) != 0) {
        rc = CLI_EXIT_FAILURE;
        goto out;
    }
    rc = elect_loop(&c);
    if (rc < 0)
        rc = cli_proc_exit_code(&c.proc, c.lost, o->name);
    /* Whatever the way out once granted: release while the stream is open. */
    if (c.phase != CAMPAIGN && !c.gone && c.stream != NULL && !cli_req_done(c.stream))
        release_hold(&c);
out:
    cli_keep_cancel(&c.keep);
    drop_stream(&c);
    memset(c.lease, 0, sizeof(c.lease));
    cli_proc_fini(&c.proc);
    return rc;
}
