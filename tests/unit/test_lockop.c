/* test_lockop.c -- the decisions of the lock operations (lockop.c and the files
 * lockop_int.h names: acquire, fencing raise, refusal, split votes, clean-up, release
 * and its judgement, the handoff to a parked waiter, extend, inspect), against fake
 * masters and no Redis: the rounds are round.c's own, but the link replaces
 * master_eval() (tests.mk: -Wl,--wrap=master_eval), so every command a round sends is
 * recorded here, and each master's reply is typed in RESP and handed to
 * round_on_reply() as hiredis would (hiredis's reader parses it).  So the lock
 * operations, the shapes, round.c, reply.c and redlock.c run as in the service;
 * nothing else does.
 *
 * Time: a round's deadline is far (10 s) so that only the replies given here decide;
 * the retries that acquire.c and finisher.c time (a split vote's, a finisher's) are
 * waited for on the clock with a deadline. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "config.h"
#include "keys.h"
#include "lockop.h"
#include "master.h"
#include "round.h"
#include "scripts.h"

/* ---- fake masters: master_eval() recorded, replies typed in ---- */

#define N 5
#define Q 3

typedef struct sent_cmd {
    int master, script, nkeys, nargs;
    char argv[16][320];
    void *priv;
    int answered;
} sent_cmd;

static sent_cmd sent[128];
static size_t nsent;
static int faking; /* 0: master_eval is the real one (the other suites) */

int __real_master_eval(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                       const size_t *lens, void *priv);
int __wrap_master_eval(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                       const size_t *lens, void *priv);

int __wrap_master_eval(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                       const size_t *lens, void *priv)
{
    if (!faking)
        return __real_master_eval(m, script, nkeys, nargs, argv, lens, priv);
    cr_assert_lt(nsent, sizeof sent / sizeof sent[0], "too many commands");
    cr_assert_leq(nkeys + nargs, 16);
    sent_cmd *c = &sent[nsent++];
    memset(c, 0, sizeof *c);
    c->master = m->index;
    c->script = script;
    c->nkeys = nkeys;
    c->nargs = nargs;
    c->priv = priv;
    for (int i = 0; i < nkeys + nargs; i++)
        snprintf(c->argv[i], sizeof c->argv[i], "%.*s", (int)lens[i], argv[i]);
    return 0;
}

/* A round formats a batched operation once for all its masters (round_send); faked,
 * it is the command of master_eval above. */
int __real_master_eval_op(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                          const size_t *lens, const resp_op *op, void *priv);
int __wrap_master_eval_op(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                          const size_t *lens, const resp_op *op, void *priv);

int __wrap_master_eval_op(master_conn *m, int script, int nkeys, int nargs, const char **argv,
                          const size_t *lens, const resp_op *op, void *priv)
{
    if (!faking)
        return __real_master_eval_op(m, script, nkeys, nargs, argv, lens, op, priv);
    return __wrap_master_eval(m, script, nkeys, nargs, argv, lens, priv);
}

static loop L;
static config cfg;
static master_conn masters[N];
static round_env R;
static lockop_env E;
static long waiters_total;
static int released_names, granted_names;

static void on_released(lockop_env *env, const char *name, size_t len)
{
    (void)env;
    (void)name;
    (void)len;
    released_names++;
}

static void on_granted(lockop_env *env, const char *name, size_t len)
{
    (void)env;
    (void)name;
    (void)len;
    granted_names++;
}

static void setup(void)
{
    cr_assert_eq(loop_init(&L), 0);
    config_defaults(&cfg);
    cfg.n_masters = N;
    cfg.node_timeout_ms = 20; /* a split vote's retries come within a few of these */
    memset(masters, 0, sizeof masters);
    for (int i = 0; i < N; i++) {
        masters[i].index = i;
        masters[i].state = MASTER_READY;
        masters[i].conf = &cfg;
    }
    round_env_init(&R, &L, masters, N, Q, 10 * 1000 * 1000);
    cr_assert_eq(lockop_env_init(&E, &R, &cfg, NULL, &waiters_total, 12345), 0);
    E.origin = "test-origin";
    E.origin_len = strlen(E.origin);
    E.released = on_released;
    E.granted = on_granted;
    faking = 1;
}

/* Every command still unanswered gets no answer (NULL, as from a connection that
 * failed), so that the rounds and what they hold go before the loop does. */
static void settle(void);
static void teardown(void)
{
    for (int k = 0; k < 20; k++) {
        int any = 0;
        for (size_t i = 0; i < nsent; i++)
            if (!sent[i].answered) {
                sent[i].answered = 1;
                round_on_reply(&masters[sent[i].master], NULL, sent[i].priv);
                any = 1;
            }
        settle();
        if (!any)
            break;
    }
    lockop_env_fini(&E);
    round_env_fini(&R);
    loop_fini(&L);
    faking = 0;
    unit_fini();
}

TestSuite(lockop, .init = setup, .fini = teardown, .timeout = 30);

/* Decided rounds' done(), then timers due now (done() of ops), until nothing is left. */
static void settle(void)
{
    for (int k = 0; k < 200; k++) {
        round_env_dispatch(&R);
        if (loop_next_timeout_ms(&L, 1000) == 0)
            loop_run_timers(&L);
        else if (!R.ready_head)
            return;
    }
}

/* The oldest unanswered command of script to master i, or -1. */
static long pending(int i, int script)
{
    for (size_t k = 0; k < nsent; k++)
        if (!sent[k].answered && sent[k].master == i && sent[k].script == script)
            return (long)k;
    return -1;
}

static size_t count_sent(int script)
{
    size_t n = 0;
    for (size_t k = 0; k < nsent; k++)
        n += sent[k].script == script;
    return n;
}

/* Master i answers its oldest command of script with resp (RESP text), or with
 * nothing (resp NULL: a connection that failed). */
static void reply(int i, int script, const char *resp)
{
    long k = pending(i, script);
    cr_assert_geq(k, 0, "no %d command pending on master %d", script, i);
    sent[k].answered = 1;
    if (!resp) {
        round_on_reply(&masters[i], NULL, sent[k].priv);
        return;
    }
    redisReader *rd = redisReaderCreate();
    cr_assert_not_null(rd);
    cr_assert_eq(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    cr_assert_not_null(r, "incomplete RESP: %s", resp);
    redisReaderFree(rd);
    round_on_reply(&masters[i], r, sent[k].priv);
    freeReplyObject(r);
}

/* Whether command k carries arg among its keys and arguments. */
static int carries(size_t k, const char *arg)
{
    for (int i = 0; i < sent[k].nkeys + sent[k].nargs; i++)
        if (strcmp(sent[k].argv[i], arg) == 0)
            return 1;
    return 0;
}

/* The masters (a bit each) that were sent script carrying arg. */
static unsigned sent_to(int script, const char *arg)
{
    unsigned mask = 0;
    for (size_t k = 0; k < nsent; k++)
        if (sent[k].script == script && (!arg || carries(k, arg)))
            mask |= 1u << sent[k].master;
    return mask;
}

/* Wait on the clock (at most ms) until script has been sent n times in all. */
static void wait_sent(int script, size_t n, int ms)
{
    int64_t until = clock_now_us() + (int64_t)ms * 1000;
    while (count_sent(script) < n && clock_now_us() < until) {
        loop_poll(&L, 1);
        settle();
    }
    cr_assert_geq(count_sent(script), n, "%zu of script %d sent, not %zu, after %d ms",
                  count_sent(script), script, n, ms);
}

/* ---- operations ---- */

/* A request's op.  Tests keep theirs static: the teardown answers what is still in
 * flight, after the test's own frame is gone. */
typedef struct req {
    lockop op;
    int done;           /* done() calls */
} req;

static void on_done(lockop *op)
{
    req *q = op->owner;
    q->done++;
}

static void start(req *q, int kind, const char *name, const char *lease, long ttl_ms,
                  int64_t wait_ms)
{
    memset(q, 0, sizeof *q);
    lockop_init(&q->op, &E, kind, name, strlen(name), on_done, q);
    q->op.lease_len = strlen(lease);
    memcpy(q->op.lease, lease, q->op.lease_len + 1);
    q->op.ttl_ms = ttl_ms;
    if (wait_ms)
        q->op.wait_deadline_us = clock_now_us() + wait_ms * 1000;
    lockop_start(&q->op);
    cr_assert_eq(q->done, 0, "done() never runs inside lockop_start()");
}

#define LEASE_A "leaseAAAAAAAAAAAAAAA"
#define LEASE_B "leaseBBBBBBBBBBBBBBB"
#define LEASE_C "leaseCCCCCCCCCCCCCCC"

#define GRANT(f) "*2\r\n:1\r\n:" #f "\r\n"
#define HELD_BY(lease, pttl, f) "*4\r\n:0\r\n:" #pttl "\r\n:" #f "\r\n$20\r\n" lease "\r\n"

/* ---- acquire ---- */

Test(lockop, an_acquire_granted_by_a_quorum_at_one_fence_gets_that_token)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    cr_assert_eq(sent_to(SCRIPT_ACQUIRE, NULL), 0x1f, "the attempt goes to every master at once");
    cr_assert_eq(sent_to(SCRIPT_ACQUIRE, a.op.value), 0x1f, "with its own value");
    cr_assert(strncmp(a.op.value, LEASE_A, strlen(LEASE_A)) == 0);
    reply(0, SCRIPT_ACQUIRE, GRANT(7));
    reply(1, SCRIPT_ACQUIRE, GRANT(7));
    settle();
    cr_assert_eq(a.done, 0, "two of five: not yet");
    reply(2, SCRIPT_ACQUIRE, GRANT(7));
    settle();
    cr_assert_eq(a.done, 1, "decided at the quorum, without the slow masters");
    cr_assert_eq(a.op.err, RL_OK);
    cr_assert_eq(a.op.token, 7);
    cr_assert(a.op.validity_ms > 9000 && a.op.validity_ms <= 10000 - 100 - 2,
              "validity %lld: the ttl less drift", (long long)a.op.validity_ms);
    cr_assert_eq(count_sent(SCRIPT_RAISE), 0, "a quorum holds the token: no raise");
    cr_assert_eq(granted_names, 1, "the grant is told (watchers, holds)");
}

Test(lockop, a_token_above_what_a_quorum_holds_is_raised_before_it_is_issued)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    reply(0, SCRIPT_ACQUIRE, GRANT(9));
    reply(1, SCRIPT_ACQUIRE, GRANT(7));
    reply(2, SCRIPT_ACQUIRE, GRANT(5));
    settle();
    cr_assert_eq(a.done, 0, "not issued before a quorum of granting masters holds it");
    cr_assert_eq(sent_to(SCRIPT_RAISE, "9"), 0x6, "masters 1 and 2 are raised to 9");
    reply(1, SCRIPT_RAISE, ":9\r\n");
    settle();
    cr_assert_eq(a.done, 0);
    reply(2, SCRIPT_RAISE, ":9\r\n");
    settle();
    cr_assert_eq(a.done, 1);
    cr_assert_eq(a.op.err, RL_OK);
    cr_assert_eq(a.op.token, 9);
}

Test(lockop, a_raise_short_of_a_quorum_fails_the_grant_and_cleans_up)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    reply(0, SCRIPT_ACQUIRE, GRANT(9));
    reply(1, SCRIPT_ACQUIRE, GRANT(7));
    reply(2, SCRIPT_ACQUIRE, GRANT(5));
    settle();
    reply(1, SCRIPT_RAISE, ":9\r\n");
    reply(2, SCRIPT_RAISE, NULL);
    settle();
    cr_assert_eq(a.done, 1);
    cr_assert_eq(a.op.err, RL_E_QUORUM_UNAVAILABLE, "no token is issued that a quorum may not hold");
    cr_assert_eq(sent_to(SCRIPT_RELEASE, a.op.value), 0x1f,
                 "what the attempt wrote goes, by its exact value, wherever it may be");
}

Test(lockop, a_lease_holding_a_quorum_is_answered_held_and_nothing_it_holds_is_touched)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    for (int i = 0; i < Q; i++)
        reply(i, SCRIPT_ACQUIRE, HELD_BY(LEASE_B, 4000, 7));
    settle();
    cr_assert_eq(a.done, 1, "one lease surely holds a quorum: decided");
    cr_assert_eq(a.op.err, RL_E_LOCK_HELD);
    cr_assert(a.op.retry_after_ms >= 3900 && a.op.retry_after_ms <= 4000, "retry after %lld",
              (long long)a.op.retry_after_ms);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, NULL), 0x18,
                 "the clean-up goes to the masters that did not answer, never to those that refused");
    cr_assert_eq(granted_names, 0);
}

Test(lockop, votes_split_between_attempts_are_contended_and_tried_again)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    reply(0, SCRIPT_ACQUIRE, HELD_BY(LEASE_B, 4000, 7));
    reply(1, SCRIPT_ACQUIRE, HELD_BY(LEASE_B, 4000, 7));
    reply(2, SCRIPT_ACQUIRE, HELD_BY(LEASE_C, 4000, 7));
    settle();
    cr_assert_eq(a.done, 0, "two leases, two and one: not decided while two masters may tip it");
    reply(3, SCRIPT_ACQUIRE, HELD_BY(LEASE_C, 4000, 7));
    reply(4, SCRIPT_ACQUIRE, GRANT(7));
    settle();
    cr_assert_eq(a.done, 0, "nobody holds it: even without a wait, tried again soon");
    cr_assert_eq(sent_to(SCRIPT_RELEASE, NULL), 0x10, "its one key goes first");
    wait_sent(SCRIPT_ACQUIRE, 2 * N, 1000);
    for (int i = 0; i < Q; i++)
        reply(i, SCRIPT_ACQUIRE, GRANT(8));
    settle();
    cr_assert_eq(a.done, 1);
    cr_assert_eq(a.op.err, RL_OK);
    cr_assert_eq(a.op.token, 8);
}

Test(lockop, fewer_than_a_quorum_answering_is_unavailable_and_cleaned_up)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    reply(0, SCRIPT_ACQUIRE, GRANT(7));
    reply(1, SCRIPT_ACQUIRE, GRANT(7));
    reply(2, SCRIPT_ACQUIRE, NULL);
    reply(3, SCRIPT_ACQUIRE, NULL);
    settle();
    cr_assert_eq(a.done, 0, "the last master could still make a quorum");
    reply(4, SCRIPT_ACQUIRE, NULL);
    settle();
    cr_assert_eq(a.done, 1, "a quorum can no longer grant: decided");
    cr_assert_eq(a.op.err, RL_E_QUORUM_UNAVAILABLE);
    cr_assert_eq(a.op.nodes_ok, 2);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, a.op.value), 0x1f);
}

Test(lockop, a_grant_that_took_its_whole_ttl_is_no_grant)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 1, 0); /* 1 ms: less than the drift allowance */
    for (int i = 0; i < Q; i++)
        reply(i, SCRIPT_ACQUIRE, GRANT(7));
    settle();
    cr_assert_eq(a.done, 1);
    cr_assert_eq(a.op.err, RL_E_VALIDITY_EXHAUSTED);
    cr_assert_eq(a.op.validity_ms, 0);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, a.op.value), 0x1f);
}

Test(lockop, a_grant_to_a_client_that_left_is_let_go_at_once)
{
    static req a;
    start(&a, LOCKOP_ACQUIRE, "n", LEASE_A, 10000, 0);
    a.op.gone = 1;
    for (int i = 0; i < Q; i++)
        reply(i, SCRIPT_ACQUIRE, GRANT(7));
    settle();
    cr_assert_eq(a.done, 1);
    cr_assert_eq(a.op.err, RL_E_CLIENT_CLOSED);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, a.op.value), 0x1f);
    cr_assert_eq(released_names, 1, "the next waiter may have it");
}

/* ---- release ---- */

Test(lockop, a_release_is_released_once_no_quorum_can_hold_the_lease)
{
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, LEASE_A), 0x1f, "by the lease, on every master");
    reply(0, SCRIPT_RELEASE, ":1\r\n");
    reply(1, SCRIPT_RELEASE, ":1\r\n");
    settle();
    cr_assert_eq(r.done, 0, "two masters out of five may leave a quorum holding it");
    reply(2, SCRIPT_RELEASE, ":1\r\n");
    settle();
    cr_assert_eq(r.done, 1, "n - quorum + 1 said it is gone: decided");
    cr_assert_eq(r.op.err, RL_OK);
    cr_assert_eq(r.op.holds, 0);
    cr_assert_eq(released_names, 1, "announced: waiters here and on the other workers");
}

Test(lockop, a_release_that_no_quorum_had_is_lease_not_found)
{
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_RELEASE, i < 2 ? ":1\r\n" : ":0\r\n");
    settle();
    cr_assert_eq(r.done, 1);
    cr_assert_eq(r.op.err, RL_E_LEASE_NOT_FOUND);
}

Test(lockop, a_release_the_silent_masters_could_undo_is_unconfirmed_and_finished_later)
{
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    reply(0, SCRIPT_RELEASE, ":1\r\n");
    reply(1, SCRIPT_RELEASE, ":1\r\n");
    reply(2, SCRIPT_RELEASE, NULL);
    reply(3, SCRIPT_RELEASE, NULL);
    reply(4, SCRIPT_RELEASE, NULL);
    settle();
    cr_assert_eq(r.done, 1);
    cr_assert_eq(r.op.err, RL_E_RELEASE_UNCONFIRMED);
    cr_assert_eq(released_names, 0, "not known free: nobody is woken");
    cr_assert_eq(E.nfinishers, 1, "the service finishes it itself");
    wait_sent(SCRIPT_RELEASE, N + 3, 2000);
    cr_assert_eq(sent_to(SCRIPT_RELEASE, LEASE_A "*0"), 0x1c,
                 "to the silent masters only, idempotent: the lease's holds down to 0");
}

Test(lockop, a_reentrant_hold_left_is_counted_not_released)
{
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_RELEASE, "*2\r\n:12\r\n:9000\r\n"); /* two holds left */
    settle();
    cr_assert_eq(r.done, 1);
    cr_assert_eq(r.op.err, RL_OK);
    cr_assert_eq(r.op.holds, 2);
    cr_assert_eq(released_names, 0, "still held by the lease");
}

/* ---- the handoff ---- */

Test(lockop, a_release_hands_the_lock_to_the_parked_waiter_in_one_round)
{
    static req w;
    start(&w, LOCKOP_ACQUIRE, "n", LEASE_B, 10000, 30000); /* waits 30 s */
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_ACQUIRE, HELD_BY(LEASE_A, 4000, 7));
    settle();
    cr_assert_eq(w.done, 0, "held: it parks");
    size_t before = count_sent(SCRIPT_ACQUIRE), released = count_sent(SCRIPT_RELEASE);
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    cr_assert_eq(count_sent(SCRIPT_RELEASE), released, "no plain release");
    cr_assert_eq(sent_to(SCRIPT_HANDOFF, LEASE_A), 0x1f, "the old lease, on every master");
    cr_assert_eq(sent_to(SCRIPT_HANDOFF, w.op.value), 0x1f, "and the waiter's new value");
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_HANDOFF, "*2\r\n:3\r\n:8\r\n"); /* replaced by the waiter's */
    settle();
    cr_assert_eq(r.done, 1);
    cr_assert_eq(r.op.err, RL_OK, "the release is judged like any release");
    cr_assert_eq(w.done, 1);
    cr_assert_eq(w.op.err, RL_OK, "the waiter is granted like any acquire");
    cr_assert_eq(w.op.token, 8);
    cr_assert_eq(count_sent(SCRIPT_ACQUIRE), before, "no round of its own");
    cr_assert_eq(E.counters[CNT_HANDOFFS], 1);
}

Test(lockop, without_a_waiter_a_release_is_a_plain_round)
{
    static req r;
    start(&r, LOCKOP_RELEASE, "n", LEASE_A, 0, 0);
    cr_assert_eq(count_sent(SCRIPT_HANDOFF), 0);
    cr_assert_eq(count_sent(SCRIPT_RELEASE), N);
}

/* ---- extend and inspect ---- */

Test(lockop, an_extension_by_a_quorum_renews_the_validity)
{
    static req x;
    start(&x, LOCKOP_EXTEND, "n", LEASE_A, 8000, 0);
    cr_assert_eq(sent_to(SCRIPT_EXTEND, LEASE_A), 0x1f);
    for (int i = 0; i < Q; i++)
        reply(i, SCRIPT_EXTEND, "*2\r\n:1\r\n:7\r\n");
    settle();
    cr_assert_eq(x.done, 1);
    cr_assert_eq(x.op.err, RL_OK);
    cr_assert_eq(x.op.token, 7);
    cr_assert(x.op.validity_ms > 7000 && x.op.validity_ms <= 8000 - 80 - 2);
}

Test(lockop, an_extension_refused_by_a_quorum_has_lost_the_lock_and_frees_what_is_left)
{
    static req x;
    start(&x, LOCKOP_EXTEND, "n", LEASE_A, 8000, 0);
    reply(0, SCRIPT_EXTEND, "*2\r\n:1\r\n:7\r\n");
    for (int i = 1; i <= Q; i++)
        reply(i, SCRIPT_EXTEND, "*2\r\n:0\r\n:7\r\n");
    settle();
    cr_assert_eq(x.done, 1);
    cr_assert_eq(x.op.err, RL_E_LEASE_NOT_FOUND);
    /* by the lease, marked '~': a lock whose holder did not say it was done rests
     * for its lock-delay, if it has one (docs/DESIGN.md section 14) */
    cr_assert(sent_to(SCRIPT_RELEASE, LEASE_A "~") & 0x1, "the key it kept goes, by the lease");
}

/* Chaos finding (k): two refusals and three silent masters are no quorum for the
 * extension, but the silent ones may still hold the lease: nothing is deleted. */
Test(lockop, an_extension_refused_by_fewer_than_n_minus_q_plus_1_deletes_nothing)
{
    static req x;
    start(&x, LOCKOP_EXTEND, "n", LEASE_A, 8000, 0);
    reply(0, SCRIPT_EXTEND, "*2\r\n:1\r\n:7\r\n");
    reply(1, SCRIPT_EXTEND, "*2\r\n:0\r\n:7\r\n");
    reply(2, SCRIPT_EXTEND, "*2\r\n:0\r\n:7\r\n");
    reply(3, SCRIPT_EXTEND, NULL);
    reply(4, SCRIPT_EXTEND, NULL);
    settle();
    cr_assert_eq(x.done, 1);
    cr_assert_eq(x.op.err, RL_E_QUORUM_UNAVAILABLE);
    cr_assert_eq(count_sent(SCRIPT_RELEASE), 0, "no key of a lease that may still hold goes");
}

Test(lockop, an_inspection_hears_every_master_and_reports_the_quorum_holder)
{
    static req g;
    start(&g, LOCKOP_INSPECT, "n", "", 0, 0);
    for (int i = 0; i < N - 1; i++)
        reply(i, SCRIPT_INSPECT, "*3\r\n$20\r\n" LEASE_B "\r\n:4000\r\n:7\r\n");
    settle();
    cr_assert_eq(g.done, 0, "an inspection waits for every master");
    reply(N - 1, SCRIPT_INSPECT, "*3\r\n$-1\r\n:-2\r\n:9\r\n");
    settle();
    cr_assert_eq(g.done, 1);
    cr_assert_eq(g.op.err, RL_OK);
    cr_assert(g.op.held);
    cr_assert(g.op.validity_ms > 3900 && g.op.validity_ms <= 4000);
    cr_assert_eq(g.op.token, 9, "the largest counter any master reported");
}

/* The keys and arguments each of these sends (shapes.c builds them; scripts.h's order,
 * after the master's record, which master.c adds). */
Test(lockop, extend_inspect_and_force_send_the_keys_and_arguments_of_their_scripts)
{
    char key[KEYS_MAX], setk[KEYS_MAX], readers[KEYS_MAX], tags[KEYS_MAX], intents[KEYS_MAX],
        chan[KEYS_MAX], bucket[KEYS_BUCKET_MAX];
    const char *pf = cfg.key_prefix;
    keys_lock(pf, "n", 1, key, sizeof key);
    keys_set(pf, LEASE_A, strlen(LEASE_A), setk, sizeof setk);
    keys_shared(pf, KEYS_READERS, "n", 1, readers, sizeof readers);
    keys_shared(pf, KEYS_TAGS, "n", 1, tags, sizeof tags);
    keys_shared(pf, KEYS_INTENTS, "n", 1, intents, sizeof intents);
    keys_released(pf, "n", 1, chan, sizeof chan);
    keys_bucket("n", 1, bucket, sizeof bucket);
    static req x, c, g, f;
    start(&x, LOCKOP_EXTEND, "n", LEASE_A, 8000, 0);
    memset(&c, 0, sizeof c);
    lockop_init(&c.op, &E, LOCKOP_EXTEND, "n", 1, on_done, &c);
    c.op.lease_len = strlen(LEASE_A);
    memcpy(c.op.lease, LEASE_A, c.op.lease_len + 1);
    c.op.ttl_ms = 8000;
    c.op.capped = 1;
    lockop_start(&c.op);
    start(&g, LOCKOP_INSPECT, "n", "", 0, 0);
    start(&f, LOCKOP_FORCE, "n", "", 0, 0);
    const struct {
        int script, nkeys, nargs;
        const char *argv[8];
    } want[] = {
        {SCRIPT_EXTEND, 4, 3, {key, setk, readers, tags, bucket, LEASE_A, "8000"}},
        {SCRIPT_EXTEND, 4, 3, {key, setk, readers, tags, bucket, LEASE_A, "-8000"}},
        {SCRIPT_INSPECT, 2, 1, {key, readers, bucket}},
        {SCRIPT_FORCE, 4, 2, {key, readers, tags, intents, chan, "test-origin"}},
    };
    cr_assert_eq(nsent, 4 * N);
    for (size_t k = 0; k < nsent; k++) {
        size_t w = k / N;
        cr_assert_eq(sent[k].master, (int)(k % N), "each to every master");
        cr_assert_eq(sent[k].script, want[w].script);
        cr_assert_eq(sent[k].nkeys, want[w].nkeys);
        cr_assert_eq(sent[k].nargs, want[w].nargs);
        for (int i = 0; i < want[w].nkeys + want[w].nargs; i++)
            cr_assert_str_eq(sent[k].argv[i], want[w].argv[i], "script %d, argument %d",
                             want[w].script, i);
    }
}

/* ---- shutdown ---- */

Test(lockop, a_waiter_cut_off_by_the_shutdown_while_it_tries_answers_shutting_down_once_refused)
{
    static req w;
    start(&w, LOCKOP_ACQUIRE, "n", LEASE_B, 10000, 30000); /* waits 30 s */
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_ACQUIRE, HELD_BY(LEASE_A, 4000, 7));
    settle();
    cr_assert_eq(w.done, 0, "held: it parks");
    waitq_wake(&E.wq, "n", 1); /* a release went through: its next attempt goes now */
    wait_sent(SCRIPT_ACQUIRE, 2 * N, 1000);
    waitq_flush(&E.wq); /* the shutdown: every waiter answered, this one in flight */
    settle();
    cr_assert_eq(w.done, 0, "its round in flight answers it");
    for (int i = 0; i < N; i++)
        reply(i, SCRIPT_ACQUIRE, HELD_BY(LEASE_A, 4000, 7));
    settle();
    cr_assert_eq(w.done, 1, "refused: answered, not parked again");
    cr_assert_eq(w.op.err, RL_E_SHUTTING_DOWN, "as the parked waiters were, not 409: %d",
                 w.op.err);
}
