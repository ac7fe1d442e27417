/* test_waitq.c -- the decisions of waitq.h, with its hooks recorded instead of lock
 * operations (on a real loop, loop.h; no masters): one attempt per name at a time, the
 * no-wait acquires that follow it and what they learn when it ends (its result, a held
 * lock, a quorum that failed), the FIFO of waiters whose head alone retries, a release
 * that wakes the head, what a grant to a contended name makes known (here and in the
 * shared slots), releases seen while an attempt is in flight, deadlines, clients that
 * left, the cap on waiters, shutdown, the heat map, and a multi-name waiter's private
 * queue.  Time: timers due now run at once; the one deadline that must pass is a few
 * milliseconds ahead, waited for on the clock. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "loop.h"
#include "inbox.h"
#include "waitq.h"

/* ---- a fake operation per waiter, and what the hooks were told ---- */

typedef struct fake {
    waiter w;
    char name[2][NAME_MAX_LEN + 1];
    size_t lens[2];
    char lease[LEASE_MAX_LEN + 1];
    int gone;
    int attempts;       /* hooks->attempt calls */
    int answers;        /* hooks->answer calls */
    rl_err why;         /* the last answer's */
    int64_t ra;         /* ... and its retry_after_ms */
    int waited_out;
} fake;

enum { EV_ATTEMPT, EV_ANSWER, EV_WAITED_OUT };

static struct event {
    int kind;
    fake *f;
} events[64];
static size_t nevents;
static int watching;    /* names followed (hooks->watch), on minus off */
static long total;      /* the process-wide count of waiters */
static loop L;
static waitq_env E;

static void record(int kind, fake *f)
{
    if (nevents < sizeof events / sizeof events[0])
        events[nevents++] = (struct event){kind, f};
}

/* hooks->attempt: the operation sends its attempt, as acquire.c's acquire_attempt_begin does. */
static void on_attempt(waiter *w)
{
    fake *f = container_of(w, fake, w);
    f->attempts++;
    record(EV_ATTEMPT, f);
    waitq_begin(&E, w);
    w->in_flight = 1;
}

static void on_answer(waiter *w, rl_err why, int64_t retry_after_ms)
{
    fake *f = container_of(w, fake, w);
    f->answers++;
    f->why = why;
    f->ra = retry_after_ms;
    record(EV_ANSWER, f);
}

static void on_waited_out(waiter *w)
{
    fake *f = container_of(w, fake, w);
    f->waited_out++;
    record(EV_WAITED_OUT, f);
}

static void on_watch(waitq_env *env, const char *name, size_t len, int on)
{
    (void)env;
    (void)name;
    (void)len;
    watching += on ? 1 : -1;
}

static const waitq_hooks hooks = {on_attempt, on_answer, on_waited_out, on_watch};

static void setup(void)
{
    cr_assert_eq(loop_init(&L), 0);
    memset(&E, 0, sizeof E);
    E.hooks = &hooks;
    E.loop = &L;
    E.max_waiters = 100;
    E.waiters_total = &total;
    total = 0;
    nevents = 0;
    watching = 0;
    cr_assert_eq(waitq_env_init(&E), 0);
}

static void teardown(void)
{
    waitq_env_fini(&E);
    loop_fini(&L);
    unit_fini();
}

TestSuite(waitq, .init = setup, .fini = teardown, .timeout = 30);

/* A single-name waiter for name with a lease of its own. */
static void fake_init(fake *f, const char *name, const char *lease)
{
    memset(f, 0, sizeof *f);
    f->lens[0] = strlen(name);
    memcpy(f->name[0], name, f->lens[0]);
    snprintf(f->lease, sizeof f->lease, "%s", lease);
    f->w.names = (const char(*)[NAME_MAX_LEN + 1])f->name;
    f->w.lens = f->lens;
    f->w.nnames = 1;
    f->w.lease = f->lease;
    f->w.lease_len = strlen(lease);
    f->w.gone = &f->gone;
}

/* Run the timers that are due, and those they arm for now. */
static void pump(void)
{
    for (int k = 0; k < 100 && loop_next_timeout_ms(&L, 1000) == 0; k++)
        loop_run_timers(&L);
}

static int admit(fake *f, int64_t wait_ms, int64_t *ra, rl_err *err)
{
    int64_t now = clock_now_us(), r = -1;
    rl_err e = RL_OK;
    int a = waitq_admit(&E, &f->w, wait_ms ? now + wait_ms * 1000 : 0, now, ra ? ra : &r,
                        err ? err : &e);
    return a;
}

/* f's attempt was admitted (WAITQ_ATTEMPT): it goes out. */
static void send(fake *f)
{
    on_attempt(&f->w);
}

/* f's attempt ended without a grant, and f does not wait (acquire.c's acquire_failed). */
static void refused_no_wait(fake *f)
{
    f->w.in_flight = 0;
    waitq_leave(&f->w, 0);
    waitq_attempt_ended(&f->w);
    waitq_detach(&f->w);
}

/* f's attempt ended without a grant, and f waits delay_ms for its next try. */
static void refused_parks(fake *f, int64_t delay_ms, int64_t deadline_us)
{
    f->w.in_flight = 0;
    cr_assert_eq(waitq_park(&E, &f->w, delay_ms, deadline_us), RL_OK);
    waitq_attempt_ended(&f->w);
}

/* f's attempt was granted for validity_ms (acquire_succeeded). */
static void granted(fake *f, int64_t validity_ms)
{
    f->w.in_flight = 0;
    waitq_granted(&E, &f->w, validity_ms);
    waitq_attempt_ended(&f->w);
    waitq_detach(&f->w);
}

#define FAR_MS (60 * 1000)

/* a's attempt is granted (validity 5 s) while b follows it: the name is contended, and
 * its keeper knows it held by a's lease (b is answered 409 from that). */
static void grant_followed(fake *a, fake *b)
{
    cr_assert_eq(admit(a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(a);
    cr_assert_eq(admit(b, 0, NULL, NULL), WAITQ_FOLLOWING);
    granted(a, 5000);
}

/* ---- one attempt per name ---- */

Test(waitq, an_acquire_with_nothing_in_the_way_attempts_at_once)
{
    fake a;
    fake_init(&a, "n", "lease-a-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    cr_assert_eq(admit(&a, FAR_MS, NULL, NULL), WAITQ_ATTEMPT, "with a wait too");
}

Test(waitq, no_wait_acquires_follow_the_attempt_in_flight_and_try_one_at_a_time)
{
    fake a, b, c, other;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    fake_init(&other, "m", "lease-d-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_FOLLOWING);
    cr_assert_eq(admit(&c, 0, NULL, NULL), WAITQ_FOLLOWING);
    cr_assert_eq(admit(&other, 0, NULL, NULL), WAITQ_ATTEMPT, "another name is not in the way");
    cr_assert_eq(b.attempts + c.attempts, 0);
    refused_no_wait(&a); /* votes split: nobody holds it, the next follower tries */
    cr_assert_eq(b.attempts, 1);
    cr_assert_eq(c.attempts, 0, "one attempt per name at a time");
    refused_no_wait(&b);
    cr_assert_eq(c.attempts, 1);
    cr_assert_eq(a.answers + b.answers + c.answers, 0);
}

Test(waitq, followers_of_an_attempt_that_found_no_quorum_are_answered_without_trying)
{
    fake a, b;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_FOLLOWING);
    waitq_unavailable(&a.w, 2);
    refused_no_wait(&a);
    cr_assert_eq(b.attempts, 0);
    cr_assert_eq(b.answers, 1);
    cr_assert_eq(b.why, RL_E_QUORUM_UNAVAILABLE);
    cr_assert_eq(b.ra, 2, "how many masters answered the attempt it followed");
}

/* ---- what a grant makes known ---- */

Test(waitq, a_grant_to_a_contended_name_is_known_held_for_other_leases_only)
{
    fake a, b, c, again;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    fake_init(&again, "n", "lease-a-0123456789");
    grant_followed(&a, &b);
    /* the follower learns it is held, without a round */
    cr_assert_eq(b.attempts, 0);
    cr_assert_eq(b.why, RL_E_LOCK_HELD);
    cr_assert(b.ra > 4900 && b.ra <= 5000, "retry after %lld ms", (long long)b.ra);
    int64_t ra = 0;
    cr_assert_eq(admit(&c, 0, &ra, NULL), WAITQ_HELD, "a no-wait acquire is answered 409 at once");
    cr_assert(ra > 4900 && ra <= 5000);
    cr_assert_eq(admit(&again, 0, NULL, NULL), WAITQ_ATTEMPT, "the holder's own lease is not held out");
}

Test(waitq, an_uncontended_grant_is_not_remembered)
{
    fake a, b;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    granted(&a, 5000);
    pump();
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_ATTEMPT, "nobody else wanted it: ask the masters");
}

Test(waitq, a_release_through_this_instance_forgets_what_was_known)
{
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    grant_followed(&a, &b);
    waitq_wake(&E, "n", 1);
    cr_assert_eq(admit(&c, 0, NULL, NULL), WAITQ_ATTEMPT);
}

Test(waitq, the_shared_slots_tell_any_worker_what_the_keeper_knows)
{
    waitq_known *known = calloc(WAITQ_SLOTS, sizeof *known);
    cr_assert_not_null(known);
    E.known = known;
    fake a, b;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    grant_followed(&a, &b);
    int64_t now = clock_now_us(), ra = 0;
    const char *other = "lease-c-0123456789", *mine = "lease-a-0123456789";
    cr_assert(waitq_known_held(known, NULL, 0, "n", 1, other, strlen(other), now, &ra));
    cr_assert(ra > 4900 && ra <= 5000);
    cr_assert(!waitq_known_held(known, NULL, 0, "n", 1, mine, strlen(mine), now, &ra), "its own lease");
    cr_assert(!waitq_known_held(known, NULL, 0, "m", 1, other, strlen(other), now, &ra), "another name");
    cr_assert(!waitq_known_held(known, NULL, 0, "n", 1, other, strlen(other), now + 200 * 1000, &ra),
              "known for 100 ms at most: a release elsewhere can be missed");
    waitq_wake(&E, "n", 1);
    cr_assert(!waitq_known_held(known, NULL, 0, "n", 1, other, strlen(other), clock_now_us(), &ra),
              "released: taken back at once");
    cr_assert(!waitq_known_held(NULL, NULL, 0, "n", 1, other, strlen(other), now, &ra));
    E.known = NULL;
    free(known);
}

Test(waitq, a_refusal_that_a_release_overtook_is_not_known)
{
    /* a's attempt is refused by the masters, naming lease x; but a release of the
     * name was heard while the attempt was in flight (its announcement came before the
     * last refusal): x's hold may be over, so b is not answered "held" from it. */
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    const char *x = "lease-x-0123456789";
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    waitq_wake(&E, "n", 1);
    waitq_held(&E, &a.w, x, strlen(x), 5000);
    refused_no_wait(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_ATTEMPT, "a release overtook the refusal: ask the masters");
    send(&b);
    waitq_held(&E, &b.w, x, strlen(x), 5000);
    refused_no_wait(&b);
    cr_assert_eq(admit(&c, 0, NULL, NULL), WAITQ_HELD, "no release since b's attempt: known held");
}

Test(waitq, nothing_is_known_held_while_an_announcement_waits_unread)
{
    /* The keeper's subscriber socket holds bytes it has not read (a release announced
     * through another instance): what it knows may be over, so neither the keeper nor
     * another worker answers "held" from it until the bytes are read. */
    waitq_known *known = calloc(WAITQ_SLOTS, sizeof *known);
    cr_assert_not_null(known);
    int sv[2];
    cr_assert_eq(pipe(sv), 0); /* [0] as the subscriber socket's read end */
    inbox in;
    inbox_init(&in, 5);
    inbox_set_fd(&in, 2, sv[0]);
    inbox_heard_foreign(&in, clock_now_us()); /* another instance announces */
    E.known = known;
    E.inbox = &in;
    fake a, b, c, d;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    fake_init(&d, "n", "lease-d-0123456789");
    grant_followed(&a, &b);
    int64_t ra = 0;
    const char *other = "lease-c-0123456789";
    cr_assert(waitq_known_held(known, &in, 1, "n", 1, other, strlen(other), clock_now_us(), &ra), "quiet: held");
    cr_assert_eq(admit(&d, 0, NULL, NULL), WAITQ_HELD, "quiet: the keeper answers held");
    cr_assert_eq(write(sv[1], "x", 1), 1); /* the masters wrote an announcement */
    cr_assert(!waitq_known_held(known, &in, 1, "n", 1, other, strlen(other), clock_now_us(), &ra),
              "an announcement waits unread: not known");
    cr_assert_eq(admit(&c, 0, NULL, NULL), WAITQ_ATTEMPT, "the keeper asks the masters");
    char x;
    cr_assert_eq(read(sv[0], &x, 1), 1);
    /* a read going on, or one that went on between the mark and the look */
    uint32_t mark = inbox_mark(&in);
    cr_assert(inbox_quiet(&in, mark, clock_now_us()));
    inbox_read_begin(&in);
    cr_assert(!inbox_quiet(&in, inbox_mark(&in), clock_now_us()), "a read goes on");
    cr_assert(!inbox_quiet(&in, mark, clock_now_us()), "a read began after the mark");
    inbox_read_end(&in);
    cr_assert(!inbox_quiet(&in, mark, clock_now_us()), "a read went on after the mark");
    cr_assert(inbox_quiet(&in, inbox_mark(&in), clock_now_us()));
    cr_assert(inbox_quiet(NULL, 0, clock_now_us()), "no inbox: nothing to wait for");
    /* an instance alone (no announcement of another for a minute) looks at nothing */
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_assert(!inbox_quiet(&in, inbox_mark(&in), clock_now_us()));
    cr_assert(inbox_quiet(&in, inbox_mark(&in), clock_now_us() + (int64_t)INBOX_FOREIGN_MS * 1000 + 1),
              "no other instance heard for a minute: no poll");
    E.known = NULL;
    E.inbox = NULL;
    close(sv[0]);
    close(sv[1]);
    free(known);
}

/* ---- waiters ---- */

Test(waitq, waiters_queue_in_arrival_order_and_only_the_head_retries)
{
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, FAR_MS, NULL, NULL), WAITQ_PARKED);
    cr_assert_eq(admit(&c, FAR_MS, NULL, NULL), WAITQ_PARKED);
    cr_assert_eq(E.parked, 2);
    cr_assert_eq(total, 2);
    cr_assert_eq(watching, 1, "the name's releases are followed while it has waiters");
    refused_no_wait(&a); /* the attempt in flight ends: the head's turn */
    cr_assert_eq(b.attempts, 1);
    cr_assert_eq(c.attempts, 0);
    refused_parks(&b, FAR_MS, clock_now_us() + FAR_MS * 1000); /* held: try when it expires */
    pump();
    cr_assert_eq(b.attempts, 1);
    waitq_wake(&E, "n", 1); /* released through this instance: the head tries at once */
    pump();
    cr_assert_eq(b.attempts, 2);
    cr_assert_eq(c.attempts, 0, "never out of turn");
    granted(&b, 3000); /* the next one tries when b's lock should expire, or at a release */
    pump();
    cr_assert_eq(c.attempts, 0);
    waitq_wake(&E, "n", 1);
    pump();
    cr_assert_eq(c.attempts, 1);
    cr_assert_eq(E.parked, 1);
}

Test(waitq, a_release_during_an_attempt_is_seen_when_it_is_refused)
{
    fake a, m;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&m, "x", "lease-m-0123456789");
    m.lens[1] = 1;
    memcpy(m.name[1], "y", 1);
    m.w.nnames = 2;
    m.w.multi = 1;
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    waitq_begin(&E, &m.w);
    cr_assert(!waitq_released_since(&E, &a.w));
    cr_assert(!waitq_released_since(&E, &m.w));
    waitq_wake(&E, "n", 1);
    waitq_wake(&E, "y", 1);
    cr_assert(waitq_released_since(&E, &a.w), "it may have lost to nothing: retry at once");
    cr_assert(waitq_released_since(&E, &m.w), "a release of any of its names");
}

Test(waitq, the_deadline_answers_a_waiter_with_its_last_result)
{
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, 5, NULL, NULL), WAITQ_PARKED); /* waits 5 ms */
    cr_assert_eq(admit(&c, FAR_MS, NULL, NULL), WAITQ_PARKED);
    int64_t until = clock_now_us() + 5 * 1000;
    while (clock_now_us() <= until)
        ; /* the clock passes b's deadline */
    pump();
    cr_assert_eq(b.waited_out, 1);
    cr_assert_eq(b.attempts, 0);
    cr_assert_eq(c.waited_out, 0);
    waiter *busy;
    cr_assert_eq(waitq_next_in_line(&E, "n", 1, &busy), &c.w, "the next one moves up");
    cr_assert_eq(busy, &a.w, "the attempt in flight");
    cr_assert_eq(E.parked, 1);
}

/* ---- clients that left ---- */

Test(waitq, the_next_in_line_is_never_a_waiter_whose_client_left)
{
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, FAR_MS, NULL, NULL), WAITQ_PARKED);
    cr_assert_eq(admit(&c, FAR_MS, NULL, NULL), WAITQ_PARKED);
    b.gone = 1;
    waiter *busy;
    cr_assert_eq(waitq_next_in_line(&E, "n", 1, &busy), &c.w);
    cr_assert_eq(b.answers, 1);
    cr_assert_eq(b.why, RL_E_CLIENT_CLOSED);
    refused_no_wait(&a); /* the head's turn came meanwhile: it tries */
    cr_assert_eq(c.attempts, 1);
    cr_assert_eq(waitq_next_in_line(&E, "n", 1, &busy), &c.w);
    cr_assert_eq(busy, &c.w, "its own attempt is in flight: a release waits for it");
    refused_parks(&c, FAR_MS, clock_now_us() + FAR_MS * 1000);
    cr_assert_eq(waitq_next_in_line(&E, "n", 1, &busy), &c.w);
    cr_assert_null(busy, "nothing in flight: a release may hand the lock over now");
    cr_assert_null(waitq_next_in_line(&E, "m", 1, &busy), "a name without a queue");
}

Test(waitq, check_gone_drops_followers_and_waiters_whose_client_left)
{
    fake a, b, c, d;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    fake_init(&d, "n", "lease-d-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_FOLLOWING);
    cr_assert_eq(admit(&d, 0, NULL, NULL), WAITQ_FOLLOWING);
    cr_assert_eq(admit(&c, FAR_MS, NULL, NULL), WAITQ_PARKED);
    b.gone = c.gone = 1;
    waitq_check_gone(&E, "n", 1);
    cr_assert_eq(b.why, RL_E_CLIENT_CLOSED);
    cr_assert_eq(c.why, RL_E_CLIENT_CLOSED);
    cr_assert_eq(d.answers, 0);
    cr_assert_eq(E.parked, 0);
    refused_no_wait(&a);
    cr_assert_eq(d.attempts, 1, "the follower that stayed tries");
    cr_assert_eq(b.attempts + c.attempts, 0);
}

/* ---- limits and shutdown ---- */

Test(waitq, waiters_past_the_cap_are_refused)
{
    E.max_waiters = 1;
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, FAR_MS, NULL, NULL), WAITQ_PARKED);
    rl_err err = RL_OK;
    cr_assert_eq(admit(&c, FAR_MS, NULL, &err), WAITQ_REFUSED);
    cr_assert_eq(err, RL_E_TOO_MANY_WAITERS);
    cr_assert_eq(total, 1, "the refused one is not counted");
}

Test(waitq, shutdown_answers_every_waiter_and_follower)
{
    fake a, b, c;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    fake_init(&c, "n", "lease-c-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    send(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_FOLLOWING);
    cr_assert_eq(admit(&c, FAR_MS, NULL, NULL), WAITQ_PARKED);
    waitq_flush(&E);
    cr_assert_eq(b.why, RL_E_SHUTTING_DOWN);
    cr_assert_eq(c.why, RL_E_SHUTTING_DOWN);
    cr_assert_eq(a.answers, 0, "the attempt in flight answers by its round");
    cr_assert_eq(E.parked, 0);
    cr_assert_eq(total, 0);
}

/* ---- heat ---- */

Test(waitq, contention_makes_a_name_hot_for_a_while)
{
    int64_t *heat = calloc(WAITQ_SLOTS, sizeof *heat);
    cr_assert_not_null(heat);
    E.heat = heat;
    int64_t now = clock_now_us();
    cr_assert(!waitq_hot(heat, "n", 1, now));
    fake a, b;
    fake_init(&a, "n", "lease-a-0123456789");
    fake_init(&b, "n", "lease-b-0123456789");
    cr_assert_eq(admit(&a, 0, NULL, NULL), WAITQ_ATTEMPT);
    cr_assert(!waitq_hot(heat, "n", 1, clock_now_us()), "one acquire is no contention");
    send(&a);
    cr_assert_eq(admit(&b, 0, NULL, NULL), WAITQ_FOLLOWING);
    now = clock_now_us();
    cr_assert(waitq_hot(heat, "n", 1, now));
    cr_assert(!waitq_hot(heat, "n", 1, now + 10 * 1000 * 1000), "it cools down");
    cr_assert(!waitq_hot(NULL, "n", 1, now));
    E.heat = NULL;
    free(heat);
}

/* ---- several names ---- */

Test(waitq, a_multi_name_waiter_waits_apart_and_wakes_at_a_release_of_any_name)
{
    fake m, x;
    fake_init(&m, "x", "lease-m-0123456789");
    m.lens[1] = 1;
    memcpy(m.name[1], "y", 1);
    m.w.nnames = 2;
    m.w.multi = 1;
    fake_init(&x, "x", "lease-x-0123456789");
    waitq_begin(&E, &m.w); /* its attempt (it is admitted by no queue) */
    m.w.in_flight = 1;
    refused_parks(&m, FAR_MS, clock_now_us() + FAR_MS * 1000);
    cr_assert_eq(watching, 2, "both of its names are followed");
    cr_assert_eq(admit(&x, FAR_MS, NULL, NULL), WAITQ_ATTEMPT, "it never blocks a name's own queue");
    waitq_wake(&E, "z", 1);
    pump();
    cr_assert_eq(m.attempts, 0);
    waitq_wake(&E, "y", 1);
    pump();
    cr_assert_eq(m.attempts, 1);
}

Test(waitq, a_multi_name_waiter_stops_following_its_names_when_it_leaves)
{
    fake m;
    fake_init(&m, "x", "lease-m-0123456789");
    m.lens[1] = 1;
    memcpy(m.name[1], "y", 1);
    m.w.nnames = 2;
    m.w.multi = 1;
    waitq_begin(&E, &m.w);
    m.w.in_flight = 1;
    refused_parks(&m, FAR_MS, clock_now_us() + FAR_MS * 1000);
    cr_assert_eq(watching, 2);
    waitq_wake(&E, "y", 1);
    pump();
    cr_assert_eq(m.attempts, 1);
    granted(&m, 1000);
    pump();
    cr_assert_eq(watching, 0, "its names are no longer followed");
}
