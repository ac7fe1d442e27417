/* elect.c -- `redlock elect`: campaign, lead while the stream says so (see elect.h). */
#include "cli/elect.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/http.h"
#include "cli/ops.h"
#include "cli/policy.h"
#include "cli/proc.h"

/* The loop wakes at least this often, a bound on any mistake in the timing. */
#define LOOP_CAP_MS 1000
/* wait_ms of each campaign POST (lowered if the service allows less). */
#define CAMPAIGN_WAIT_MS 30000L
/* A 409 that came sooner than this after its POST: wait before the next one. */
#define QUICK_409_MS 1000
/* Back-off after a 503 or no answer: from BACKOFF_MIN_MS, doubling up to BACKOFF_MAX_MS. */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* How long the final release may take (closing the stream releases it anyway). */
#define RELEASE_TIMEOUT_MS 5000L

typedef enum { CAMPAIGN, GRANTED, LEADING } elect_phase;

typedef struct elect_ctx {
    const cli_opts *o;
    cli_http *h;
    cli_proc proc;
    elect_phase phase;
    cli_req *stream;                /* the POST ?hold=stream, waiting or streaming */
    int64_t sent;                   /* when it was sent */
    int64_t answer_by;              /* no status line by then: give it up */
    long wait_ms;                   /* wait_ms of each POST */
    int64_t backoff_ms;             /* the next back-off (0: none yet) */
    int64_t retry_at;               /* no POST in flight: send the next one then */
    int64_t poll_prev, poll_cur;    /* starts of the last two polls (see elect.h) */
    char lease[CLI_LEASE_MAX + 1];
    long long fence;
    long ttl_ms;                    /* from the grant (o->ttl_ms before) */
    int64_t deadline;               /* the validity last announced ends here */
    int lost;                       /* leadership lost: the command is being stopped */
} elect_ctx;

/* How long one poll may last: a 25th of the ttl (the most validity an anchor may cost),
 * well within the margin (a tenth) by which the service says "lost" before the end. */
static int64_t poll_cap(const elect_ctx *c)
{
    int64_t cap = c->ttl_ms > 0 ? c->ttl_ms / 25 : LOOP_CAP_MS;

    return cap < 10 ? 10 : cap > LOOP_CAP_MS ? LOOP_CAP_MS : cap;
}

/* Let the transfers progress for up to sleep_ms, watching the signals.  Returns 0 or -1. */
static int poll_once(elect_ctx *c, int64_t sleep_ms, int *ready)
{
    c->poll_prev = c->poll_cur;
    c->poll_cur = cli_now_ms();
    if (sleep_ms > poll_cap(c))
        sleep_ms = poll_cap(c);
    if (cli_http_poll(c->h, c->proc.sfd, (int)(sleep_ms > 0 ? sleep_ms : 0), ready) == 0)
        return 0;
    fprintf(stderr, "redlock: elect %s: curl multi error\n", c->o->name);
    return -1;
}

static void drop_stream(elect_ctx *c)
{
    cli_req_free(c->stream); /* closes its connection: the service lets the lock go */
    c->stream = NULL;
}

/* Campaign again after delay_ms (0: at once). */
static void campaign_again(elect_ctx *c, int64_t delay_ms)
{
    drop_stream(c);
    c->phase = CAMPAIGN;
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

/* Send the next POST.  Returns 0, or -1 (printed) if it could not be started. */
static int campaign_post(elect_ctx *c)
{
    json_t *body = cli_ops_acquire_body(c->o->ttl_ms, c->wait_ms, NULL, c->o->owner);
    char err[512];

    if (body == NULL || json_object_set_new(body, "hold", json_string("stream")) != 0) {
        json_decref(body);
        fprintf(stderr, "redlock: out of memory\n");
        return -1;
    }
    c->sent = cli_now_ms();
    c->answer_by = c->sent + cli_ops_timeout(c->wait_ms);
    c->stream = cli_http_start_stream(c->h, "POST", c->o->name, body, err, sizeof(err));
    json_decref(body);
    if (c->stream == NULL) {
        fprintf(stderr, "redlock: elect %s: %s\n", c->o->name, err);
        return -1;
    }
    return 0;
}

/* The first line of a 201: lease, fencing token, validity and ttl.  Returns 0 or -1. */
static int take_grant(elect_ctx *c, json_t *j)
{
    const char *lease = json_string_value(json_object_get(j, "lease"));
    json_t *fence = json_object_get(j, "fencing_token");
    json_t *validity = json_object_get(j, "validity_ms");
    json_t *ttl = json_object_get(j, "ttl_ms");

    if (lease == NULL || lease[0] == '\0' || strlen(lease) > CLI_LEASE_MAX ||
        !json_is_integer(fence) || !json_is_integer(validity))
        return -1;
    snprintf(c->lease, sizeof(c->lease), "%s", lease);
    c->fence = (long long)json_integer_value(fence);
    if (json_is_integer(ttl) && json_integer_value(ttl) > 0)
        c->ttl_ms = (long)json_integer_value(ttl);
    else if (c->ttl_ms <= 0)
        c->ttl_ms = (long)json_integer_value(validity);
    c->deadline = c->poll_prev + json_integer_value(validity);
    return 0;
}

/* The campaign POST has ended without a stream.  Returns -1 to campaign on, else the
 * exit code. */
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

/* Leadership is gone: stop the command (or, before it started, campaign again). */
static void lose(elect_ctx *c, const char *why)
{
    drop_stream(c);
    if (c->phase == GRANTED) {
        fprintf(stderr, "redlock: elect %s: %s before %s started; campaigning again\n",
                c->o->name, why, c->o->argv[0]);
        campaign_again(c, backoff(c));
        return;
    }
    c->lost = 1;
    cli_proc_stop(&c->proc, c->o->name, why);
}

/* Take the lines the stream has brought.  Returns -1 to go on, else the exit code. */
static int take_lines(elect_ctx *c)
{
    json_t *j;
    char why[256];

    while (c->stream != NULL && cli_req_next_line(c->stream, &j)) {
        const char *event = json_string_value(json_object_get(j, "event"));
        const char *reason = json_string_value(json_object_get(j, "reason"));
        json_t *validity = json_object_get(j, "validity_ms");

        if (c->phase == CAMPAIGN) {
            if (j == NULL || take_grant(c, j) != 0) {
                json_decref(j);
                fprintf(stderr, "redlock: elect %s: the grant lacks lease, fencing_token or "
                        "validity_ms; giving it up\n", c->o->name);
                drop_stream(c); /* releases it */
                return CLI_EXIT_FAILURE;
            }
            c->phase = GRANTED;
            c->backoff_ms = 0;
        } else if (event == NULL) {
            /* Not an event: ignored (a later service may say more). */
        } else if (strcmp(event, "extended") == 0 && json_is_integer(validity)) {
            c->deadline = c->poll_prev + json_integer_value(validity);
        } else if (strcmp(event, "lost") == 0) {
            snprintf(why, sizeof(why), "the service could not keep it (lost: %s)",
                     reason != NULL ? reason : "no reason given");
            json_decref(j);
            lose(c, why);
            return -1;
        } else if (strcmp(event, "released") == 0) {
            snprintf(why, sizeof(why), "the service released it (%s)",
                     reason == NULL ? "a DELETE with its lease"
                     : strcmp(reason, "shutting_down") == 0 ? "it is shutting down" : reason);
            json_decref(j);
            lose(c, why);
            return -1;
        }
        json_decref(j);
    }
    return -1;
}

/* One turn of the loop after a poll: the stream's lines and end, the clock, the
 * command.  Returns -1 to go on, else the exit code. */
static int step(elect_ctx *c)
{
    int64_t now;
    int rc;

    if (c->stream != NULL && (rc = take_lines(c)) >= 0)
        return rc;
    now = cli_now_ms();
    if (c->phase == CAMPAIGN && c->stream != NULL && cli_req_done(c->stream)) {
        long status = cli_req_status(c->stream);
        if (status < 200 || status >= 300)
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
        if (cli_req_status(c->stream) == 0)
            snprintf(why, sizeof(why), "the connection to the service dropped (%s)",
                     cli_req_error(c->stream));
        else
            snprintf(why, sizeof(why), "the service ended the stream without a word");
        lose(c, why);
    }
    if (c->phase != CAMPAIGN && !c->lost && now >= c->deadline) {
        if (c->phase == LEADING)
            lose(c, "the validity the service announced ran out with no news from it");
        else if (now >= c->deadline + c->ttl_ms)
            lose(c, "no news from the service for a ttl");
    }
    if (c->phase == GRANTED && now < c->deadline) {
        /* Leader: the validity counted from before the line came is still running. */
        if (!c->o->quiet)
            fprintf(stderr, "redlock: elect %s: leader with fencing token %lld; running %s\n",
                    c->o->name, c->fence, c->o->argv[0]);
        if (cli_proc_spawn(&c->proc, c->fence, c->lease) != 0) {
            drop_stream(c);
            return CLI_EXIT_FAILURE;
        }
        c->phase = LEADING;
    }
    return -1;
}

/* How long the next poll may sleep. */
static int64_t sleep_for(elect_ctx *c, int64_t now)
{
    int64_t t = cli_proc_tick(&c->proc, now, LOOP_CAP_MS);

    if (c->phase == CAMPAIGN && c->stream == NULL)
        t = c->retry_at - now < t ? c->retry_at - now : t;
    if (c->phase == CAMPAIGN && c->stream != NULL && c->answer_by - now < t)
        t = c->answer_by - now;
    if (c->phase == LEADING && !c->lost && c->deadline - now < t)
        t = c->deadline - now;
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
                return 128 + sig; /* the stream is closed on the way out: released */
            }
        }
        if (!(c->phase == LEADING && c->proc.done) && (rc = step(c)) >= 0)
            return rc;
    }
}

int cli_elect(const cli_opts *o, cli_http *h)
{
    elect_ctx c;
    char msg[768];
    int rc;

    memset(&c, 0, sizeof(c));
    c.o = o;
    c.h = h;
    c.wait_ms = CAMPAIGN_WAIT_MS;
    c.ttl_ms = o->ttl_ms;
    c.poll_cur = cli_now_ms();
    srandom((unsigned)getpid() ^ (unsigned)c.poll_cur);
    if (o->argv == NULL || o->argc < 1) {
        fprintf(stderr, "redlock: elect: no command\n");
        return CLI_EXIT_USAGE;
    }
    if (cli_proc_init(&c.proc, o->argv, o->grace_ms) != 0) {
        rc = CLI_EXIT_FAILURE;
        goto out;
    }
    /* redlock gone (killed), the stream is closed and another campaigner may lead at
     * once: the command must not lead on. */
    c.proc.term_with_parent = 1;
    rc = elect_loop(&c);
    if (rc >= 0)
        goto out;
    rc = cli_proc_exit_code(&c.proc, c.lost, o->name);
    /* Release with the lease while the stream is still open, so that the lock is free
     * when redlock exits; closing the stream would release it too, a moment later. */
    if (!c.lost && c.stream != NULL &&
        cli_ops_release(h, o->name, c.lease, RELEASE_TIMEOUT_MS, msg, sizeof(msg)) < 0)
        fprintf(stderr, "redlock: %s; closing the stream releases it\n", msg);
out:
    drop_stream(&c);
    memset(c.lease, 0, sizeof(c.lease));
    cli_proc_fini(&c.proc);
    return rc;
}
