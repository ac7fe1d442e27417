/* test_redlock.c -- the pure Redlock logic of redlock.h: drift and validity maths,
 * quorum decisions (tables for 5, 3 and 1 masters and an exhaustive check that an
 * early decision is final), fencing-token choice, raises, retry-after, inspection
 * and the retry delay.  See docs/DESIGN.md for the rules checked here. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "redlock.h"
#include "resync.h"

TestSuite(redlock, .fini = unit_fini, .timeout = 60);

/* ---- helpers --------------------------------------------------------------- */

static redlock_reply ok_f(uint64_t fence)
{
    redlock_reply r;
    memset(&r, 0, sizeof r);
    r.state = RL_SLOT_OK;
    r.fence = fence;
    return r;
}

static redlock_reply refused(int64_t pttl, uint64_t fence)
{
    redlock_reply r;
    memset(&r, 0, sizeof r);
    r.state = RL_SLOT_REFUSED;
    r.pttl = pttl;
    r.fence = fence;
    return r;
}

static redlock_reply failed_f(uint64_t fence)
{
    redlock_reply r;
    memset(&r, 0, sizeof r);
    r.state = RL_SLOT_FAILED;
    r.fence = fence;
    r.pttl = 1;
    return r;
}

static redlock_reply pending(void)
{
    redlock_reply r;
    memset(&r, 0, sizeof r);
    r.state = RL_SLOT_PENDING;
    return r;
}

static redlock_reply holder(const char *value, int64_t pttl)
{
    redlock_reply r = ok_f(0);
    r.has_value = 1;
    r.value_len = (uint8_t)strlen(value);
    memcpy(r.value, value, r.value_len);
    r.pttl = pttl;
    return r;
}

static redlock_reply empty_key(void)
{
    redlock_reply r = ok_f(0);
    r.pttl = -2;
    return r;
}

/* ---- drift and validity ---------------------------------------------------- */

struct drift_case {
    int64_t ttl;
    double factor;
    int64_t drift;
};

ParameterizedTestParameters(redlock, drift_is_ceil_of_ttl_times_factor_plus_2)
{
    static struct drift_case cases[] = {
        {0, 0.01, 2},        {1, 0.01, 3},       {99, 0.01, 3},     {100, 0.01, 3},
        {101, 0.01, 4},      {150, 0.01, 4},     {200, 0.01, 4},    {700, 0.01, 9},
        {1000, 0.01, 12},    {30000, 0.01, 302}, {3600000, 0.01, 36002},
        {1000, 0.0, 2},      {1, 0.0, 2},        {1000, 0.5, 502},  {3, 0.5, 4},
        {1001, 0.001, 4},    {1000, 0.001, 3},   {10, 0.3, 5},
    };
    return cr_make_param_array(struct drift_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct drift_case *c, redlock, drift_is_ceil_of_ttl_times_factor_plus_2)
{
    int64_t d = redlock_drift_ms(c->ttl, c->factor);
    cr_assert_eq(d, c->drift, "drift(ttl=%lld, f=%g) = %lld, expected %lld", (long long)c->ttl,
                 c->factor, (long long)d, (long long)c->drift);
}

Test(redlock, drift_matches_exact_integer_ceiling_for_one_percent)
{
    /* ceil(ttl/100) computed in integers: the double maths must never round up a
     * product that is exact (e.g. 700 * 0.01 must not become 7.000000000000001). */
    for (int64_t ttl = 0; ttl <= 200000; ttl++) {
        int64_t exact = (ttl + 99) / 100 + 2;
        int64_t d = redlock_drift_ms(ttl, 0.01);
        if (d != exact)
            cr_assert_fail("drift(%lld, 0.01) = %lld, expected %lld", (long long)ttl, (long long)d,
                     (long long)exact);
    }
}

struct validity_case {
    int64_t ttl, elapsed_us;
    double factor;
    int64_t validity;
};

ParameterizedTestParameters(redlock, validity_rounds_elapsed_up_and_subtracts_drift)
{
    static struct validity_case cases[] = {
        {1000, 0, 0.01, 988},     /* 1000 - 0 - 12 */
        {1000, 1, 0.01, 987},     /* 1 us counts as a whole ms */
        {1000, 999, 0.01, 987},
        {1000, 1000, 0.01, 987},
        {1000, 1001, 0.01, 986},
        {1000, 1999, 0.01, 986},
        {1000, 2000, 0.01, 986},
        {1000, 987999, 0.01, 0},  /* 988 ms elapsed: nothing left */
        {1000, 988000, 0.01, 0},
        {1000, 988001, 0.01, -1}, /* may go below zero: callers refuse <= 0 */
        {1000, 5000000, 0.01, -4012},
        {30000, 12345, 0.01, 29685}, /* 30000 - 13 - 302 */
        {10, 0, 0.0, 8},
        {4, 0, 0.01, 1},
        {3, 0, 0.01, 0},
    };
    return cr_make_param_array(struct validity_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct validity_case *c, redlock, validity_rounds_elapsed_up_and_subtracts_drift)
{
    int64_t v = redlock_validity_ms(c->ttl, c->elapsed_us, c->factor);
    cr_assert_eq(v, c->validity, "validity(ttl=%lld, elapsed=%lldus, f=%g) = %lld, expected %lld",
                 (long long)c->ttl, (long long)c->elapsed_us, c->factor, (long long)v,
                 (long long)c->validity);
}

Test(redlock, validity_never_exceeds_the_exact_remaining_time)
{
    /* Whatever the elapsed time, the caller is never told more than
     * ttl - elapsed - drift with elapsed counted exactly. */
    for (int64_t us = 0; us < 50000; us += 7) {
        int64_t v = redlock_validity_ms(1000, us, 0.01);
        /* v ms <= (1000*1000 - us - 12*1000) us */
        cr_assert_leq(v * 1000, 1000 * 1000 - us - 12 * 1000, "elapsed %lld us gave %lld ms",
                      (long long)us, (long long)v);
        /* and it is no more than 1 ms pessimistic */
        cr_assert_gt(v * 1000, 1000 * 1000 - us - 12 * 1000 - 1000);
    }
}

/* ---- tally ------------------------------------------------------------------ */

Test(redlock, tally_counts_each_state_and_ignores_pending)
{
    redlock_reply r[6] = {ok_f(1), ok_f(2), refused(5, 1), failed_f(0), pending(), failed_f(3)};
    redlock_tally t;
    memset(&t, 0xab, sizeof t);
    redlock_tally_of(r, 6, &t);
    cr_assert_eq(t.n, 6);
    cr_assert_eq(t.ok, 2);
    cr_assert_eq(t.refused, 1);
    cr_assert_eq(t.failed, 2);
}

Test(redlock, tally_of_nothing_is_all_zero)
{
    redlock_tally t;
    memset(&t, 0xab, sizeof t);
    redlock_tally_of(NULL, 0, &t);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(t.ok + t.refused + t.failed, 0);
}

/* ---- decisions -------------------------------------------------------------- */

struct decide_case {
    size_t n, quorum, ok, refused, failed;
    int wait_all;
    int expect;
};

#define W RL_DECIDE_WAIT
#define QU RL_DECIDE_QUORUM
#define NQ RL_DECIDE_NO_QUORUM
#define UN RL_DECIDE_UNAVAILABLE

ParameterizedTestParameters(redlock, decide_table)
{
    static struct decide_case cases[] = {
        /* five masters, quorum 3, early decisions */
        {5, 3, 0, 0, 0, 0, W},
        {5, 3, 2, 0, 0, 0, W},
        {5, 3, 3, 0, 0, 0, QU},  /* two still pending: a quorum is a quorum */
        {5, 3, 3, 2, 0, 0, QU},
        {5, 3, 3, 0, 2, 0, QU},
        {5, 3, 5, 0, 0, 0, QU},
        {5, 3, 2, 1, 0, 0, W},   /* two pending could still make it */
        {5, 3, 1, 2, 0, 0, W},
        {5, 3, 1, 1, 1, 0, W},
        {5, 3, 0, 3, 0, 0, NQ},  /* three refusals: out of reach, and answered */
        {5, 3, 1, 2, 1, 0, NQ},  /* one pending cannot help, three answered */
        {5, 3, 2, 2, 1, 0, NQ},
        {5, 3, 2, 3, 0, 0, NQ},
        {5, 3, 0, 5, 0, 0, NQ},
        {5, 3, 0, 0, 3, 0, UN},  /* three down: unreachable and unanswerable */
        {5, 3, 1, 0, 3, 0, UN},
        {5, 3, 2, 0, 3, 0, UN},
        {5, 3, 0, 2, 3, 0, UN},
        {5, 3, 0, 0, 5, 0, UN},
        {5, 3, 0, 2, 2, 0, W},   /* the last one decides between NQ and UN */
        {5, 3, 0, 1, 2, 0, W},
        {5, 3, 1, 1, 2, 0, W},
        /* five masters, wait_all: only when nothing is pending */
        {5, 3, 3, 0, 0, 1, W},
        {5, 3, 4, 0, 0, 1, W},
        {5, 3, 0, 3, 0, 1, W},
        {5, 3, 0, 0, 3, 1, W},
        {5, 3, 0, 0, 4, 1, W},
        {5, 3, 3, 2, 0, 1, QU},
        {5, 3, 3, 0, 2, 1, QU},
        {5, 3, 5, 0, 0, 1, QU},
        {5, 3, 2, 3, 0, 1, NQ},
        {5, 3, 1, 2, 2, 1, NQ},
        {5, 3, 0, 5, 0, 1, NQ},
        {5, 3, 2, 0, 3, 1, UN},
        {5, 3, 0, 0, 5, 1, UN},
        {5, 3, 1, 1, 3, 1, UN},
        /* three masters, quorum 2 */
        {3, 2, 0, 0, 0, 0, W},
        {3, 2, 1, 0, 0, 0, W},
        {3, 2, 2, 0, 0, 0, QU},
        {3, 2, 2, 1, 0, 0, QU},
        {3, 2, 2, 0, 1, 0, QU},
        {3, 2, 1, 1, 0, 0, W},
        {3, 2, 1, 0, 1, 0, W},
        {3, 2, 0, 1, 1, 0, W},
        {3, 2, 0, 2, 0, 0, NQ},
        {3, 2, 1, 1, 1, 0, NQ},
        {3, 2, 0, 3, 0, 0, NQ},
        {3, 2, 0, 0, 2, 0, UN},
        {3, 2, 1, 0, 2, 0, UN},
        {3, 2, 0, 1, 2, 0, UN},
        {3, 2, 0, 0, 3, 0, UN},
        {3, 2, 2, 0, 0, 1, W},
        {3, 2, 0, 2, 0, 1, W},
        {3, 2, 0, 0, 2, 1, W},
        {3, 2, 2, 1, 0, 1, QU},
        {3, 2, 1, 2, 0, 1, NQ},
        {3, 2, 1, 0, 2, 1, UN},
        /* one master, quorum 1 */
        {1, 1, 0, 0, 0, 0, W},
        {1, 1, 0, 0, 0, 1, W},
        {1, 1, 1, 0, 0, 0, QU},
        {1, 1, 1, 0, 0, 1, QU},
        {1, 1, 0, 1, 0, 0, NQ},
        {1, 1, 0, 1, 0, 1, NQ},
        {1, 1, 0, 0, 1, 0, UN},
        {1, 1, 0, 0, 1, 1, UN},
    };
    return cr_make_param_array(struct decide_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct decide_case *c, redlock, decide_table)
{
    redlock_tally t = {.n = c->n, .ok = c->ok, .refused = c->refused, .failed = c->failed};
    int d = redlock_decide(&t, c->quorum, c->wait_all);
    cr_assert_eq(d, c->expect,
                 "n=%zu q=%zu ok=%zu refused=%zu failed=%zu wait_all=%d: got %d, expected %d",
                 c->n, c->quorum, c->ok, c->refused, c->failed, c->wait_all, d, c->expect);
}

/* The outcome once every master has answered, by the definitions in redlock.h. */
static int final_outcome(size_t ok, size_t refused, size_t quorum)
{
    if (ok >= quorum)
        return RL_DECIDE_QUORUM;
    if (ok + refused >= quorum)
        return RL_DECIDE_NO_QUORUM;
    return RL_DECIDE_UNAVAILABLE;
}

/* Every outcome reachable from a partial tally, as a bit set. */
static unsigned reachable(size_t ok, size_t refused, size_t failed, size_t pending, size_t quorum)
{
    unsigned set = 0;
    for (size_t a = 0; a <= pending; a++)
        for (size_t b = 0; a + b <= pending; b++) {
            size_t c = pending - a - b;
            set |= 1u << final_outcome(ok + a, refused + b, quorum);
            (void)c;
        }
    (void)failed;
    return set;
}

Test(redlock, decide_early_exactly_when_the_outcome_can_no_longer_change)
{
    for (size_t n = 1; n <= 9; n++) {
        size_t q = n / 2 + 1;
        for (size_t ok = 0; ok <= n; ok++)
            for (size_t rf = 0; ok + rf <= n; rf++)
                for (size_t fl = 0; ok + rf + fl <= n; fl++) {
                    size_t pend = n - ok - rf - fl;
                    redlock_tally t = {.n = n, .ok = ok, .refused = rf, .failed = fl};
                    unsigned set = reachable(ok, rf, fl, pend, q);
                    int single = (set & (set - 1)) == 0;
                    int d = redlock_decide(&t, q, 0);
                    if (single) {
                        int only = __builtin_ctz(set);
                        cr_assert_eq(d, only, "n=%zu ok=%zu rf=%zu fl=%zu: got %d, final is %d", n,
                                     ok, rf, fl, d, only);
                    } else {
                        cr_assert_eq(d, RL_DECIDE_WAIT,
                                     "n=%zu ok=%zu rf=%zu fl=%zu: decided %d while still open", n,
                                     ok, rf, fl, d);
                    }
                    int dw = redlock_decide(&t, q, 1);
                    if (pend)
                        cr_assert_eq(dw, RL_DECIDE_WAIT, "wait_all decided with %zu pending", pend);
                    else
                        cr_assert_eq(dw, final_outcome(ok, rf, q));
                }
    }
}

/* ---- fencing tokens ------------------------------------------------------- */

Test(redlock, token_is_max_fence_over_granting_masters)
{
    redlock_reply r[5] = {ok_f(7), ok_f(9), ok_f(8), refused(100, 3), failed_f(0)};
    cr_assert_eq(redlock_token(r, 5), 9);
}

Test(redlock, token_ignores_refusing_and_failed_masters_even_with_larger_counters)
{
    redlock_reply r[5] = {ok_f(4), refused(100, 50), failed_f(60), ok_f(5), pending()};
    r[4].fence = 70;
    cr_assert_eq(redlock_token(r, 5), 5);
}

Test(redlock, token_is_zero_when_nobody_granted)
{
    redlock_reply r[3] = {refused(10, 5), failed_f(6), pending()};
    cr_assert_eq(redlock_token(r, 3), 0);
    cr_assert_eq(redlock_token(r, 0), 0);
}

Test(redlock, token_handles_counters_beyond_32_bits)
{
    redlock_reply r[3] = {ok_f(UINT64_C(1) << 40), ok_f((UINT64_C(1) << 40) + 1), ok_f(3)};
    cr_assert_eq(redlock_token(r, 3), (UINT64_C(1) << 40) + 1);
}

struct raise_case {
    int state;
    uint64_t fence;
    int expect; /* in the raise plan against token 5 */
};

ParameterizedTestParameters(redlock, raise_plan_takes_answering_masters_below_the_token)
{
    static struct raise_case cases[] = {
        {RL_SLOT_OK, 4, 1},       /* granted below the token */
        {RL_SLOT_REFUSED, 4, 1},  /* answered below the token: raised too */
        {RL_SLOT_OK, 5, 0},       /* already at the token */
        {RL_SLOT_REFUSED, 9, 0},  /* above it */
        {RL_SLOT_FAILED, 0, 0},   /* no answer: nothing to raise */
        {RL_SLOT_PENDING, 0, 0},
    };
    return cr_make_param_array(struct raise_case, cases, sizeof cases / sizeof cases[0]);
}

/* Master 0 grants at 5 (the token); master 1 is the case; masters 2 and 3 failed, so
 * no quorum of three holds the token yet and the plan is not empty. */
ParameterizedTest(struct raise_case *c, redlock, raise_plan_takes_answering_masters_below_the_token)
{
    redlock_reply r[4] = {ok_f(5), ok_f(0), failed_f(0), failed_f(0)};
    r[1].state = c->state;
    r[1].fence = c->fence;
    uint64_t token = 0;
    uint64_t mask = redlock_plan_raise(r, 4, 3, NULL, 1, &token);
    cr_assert_eq(token, c->state == RL_SLOT_OK && c->fence > 5 ? c->fence : 5);
    cr_assert_eq((mask >> 1) & 1, (uint64_t)c->expect, "state=%d fence=%llu", c->state,
                 (unsigned long long)c->fence);
    cr_assert_eq(mask & ~(uint64_t)2, 0, "only the case's master can be below the token");
}

Test(redlock, raise_plan_is_empty_when_a_quorum_of_grants_hold_the_token)
{
    /* docs/DESIGN.md section 3: three of five granting masters at the token fence it;
     * the laggards need no raise now. */
    redlock_reply r[5] = {ok_f(9), ok_f(9), ok_f(9), ok_f(2), refused(10, 1)};
    uint64_t token = 0;
    cr_assert_eq(redlock_plan_raise(r, 5, 3, NULL, 1, &token), 0);
    cr_assert_eq(token, 9);
    r[2].fence = 8; /* now only two hold it */
    cr_assert_eq(redlock_plan_raise(r, 5, 3, NULL, 1, &token), (1u << 2) | (1u << 3) | (1u << 4));
}

Test(redlock, fenced_counts_granting_masters_at_or_above_the_token)
{
    redlock_reply r[5] = {ok_f(9), ok_f(9), ok_f(8), ok_f(7), refused(10, 9)};
    uint64_t t = 9;
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, 0), 2);
    t = 8;
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, 0), 3);
    t = 7;
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, 0), 4);
}

Test(redlock, fenced_counts_acknowledged_raises_of_granting_masters_only)
{
    redlock_reply r[5] = {ok_f(9), ok_f(8), ok_f(7), refused(10, 3), failed_f(0)};
    uint64_t t = 9;
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, 0), 1);
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, 1u << 1), 2);
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, (1u << 1) | (1u << 2)), 3);
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &t, (1u << 3) | (1u << 4)), 1,
                 "a refusing or failed master's raise makes no grant");
}

Test(redlock, raise_plan_then_fenced_reaches_quorum)
{
    /* The flow lockop runs: tokens from grants, raise the laggards, count again. */
    redlock_reply r[5] = {ok_f(12), ok_f(10), ok_f(11), refused(500, 4), failed_f(0)};
    uint64_t token = 0;
    uint64_t mask = redlock_plan_raise(r, 5, 3, NULL, 1, &token);
    cr_assert_eq(token, 12);
    cr_assert_eq(mask, (1u << 1) | (1u << 2) | (1u << 3), "two grants and the refusal");
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &token, 0), 1);
    cr_assert_eq(redlock_fenced(r, 5, NULL, 1, &token, mask), 3);
}

Test(redlock, multi_name_tokens_are_per_name_maxima_and_one_laggard_name_raises_its_master)
{
    /* Three masters, two names: fences[i * 2 + j]. */
    redlock_reply r[3] = {ok_f(0), ok_f(0), ok_f(0)};
    uint64_t fences[6] = {5, 7,   /* master 0 */
                          6, 7,   /* master 1 */
                          6, 3};  /* master 2: behind on the second name */
    uint64_t tokens[2];
    uint64_t mask = redlock_plan_raise(r, 3, 2, fences, 2, tokens);
    cr_assert_eq(tokens[0], 6);
    cr_assert_eq(tokens[1], 7);
    cr_assert_eq(mask, (1u << 0) | (1u << 2),
                 "only master 1 holds both tokens, one short of the quorum: the two others are raised");
    fences[0] = 6; /* now masters 0 and 1 hold both */
    cr_assert_eq(redlock_plan_raise(r, 3, 2, fences, 2, tokens), 0);
}

Test(redlock, multi_name_plan_needs_a_quorum_holding_every_token)
{
    redlock_reply r[3] = {ok_f(0), ok_f(0), refused(100, 0)};
    uint64_t fences[6] = {5, 7, 6, 3, 9, 9}; /* no granting master holds both 6 and 7 */
    uint64_t tokens[2];
    uint64_t mask = redlock_plan_raise(r, 3, 2, fences, 2, tokens);
    cr_assert_eq(tokens[0], 6, "a refusing master's counters make no token");
    cr_assert_eq(tokens[1], 7);
    cr_assert_eq(mask, 3, "both granting masters lag on one name; the refusing one is above");
    cr_assert_eq(redlock_fenced(r, 3, fences, 2, tokens, 0), 0);
    cr_assert_eq(redlock_fenced(r, 3, fences, 2, tokens, 1), 1);
    cr_assert_eq(redlock_fenced(r, 3, fences, 2, tokens, 3), 2);
    cr_assert_eq(redlock_fenced(r, 3, fences, 2, tokens, 4), 0, "not a grant");
}

Test(redlock, any_held_by_quorum_looks_at_each_name_and_counts_silent_masters)
{
    /* Five masters, two names; holders[i * 2 + j]. */
    redlock_reply r[5] = {refused(1, 0), refused(1, 0), refused(1, 0), refused(1, 0), refused(1, 0)};
    uint64_t split[10] = {11, 0, 11, 0, 22, 0, 22, 0, 33, 0};
    cr_assert_not(redlock_any_held_by_quorum(r, 5, 3, split, 2), "2 + 2 + 1: nobody");
    uint64_t second[10] = {11, 7, 11, 7, 22, 7, 22, 0, 33, 0};
    cr_assert(redlock_any_held_by_quorum(r, 5, 3, second, 2), "7 holds the second name on three");
    r[4] = failed_f(0);
    cr_assert(redlock_any_held_by_quorum(r, 5, 3, split, 2), "11 may hold the silent one");
    uint64_t none[10] = {0};
    cr_assert_not(redlock_any_held_by_quorum(r, 5, 3, none, 2), "free everywhere");
}

Test(redlock, handoff_tally_counts_replaced_leases_as_released)
{
    redlock_reply r[5] = {ok_f(3), ok_f(3), refused(10, 3), failed_f(0), pending()};
    r[0].released = 1;
    redlock_tally t;
    redlock_handoff_tally(r, 5, &t);
    cr_assert_eq(t.n, 5);
    cr_assert_eq(t.ok, 1, "only a master where the old lease was replaced released it");
    cr_assert_eq(t.refused, 2, "a grant without the old lease, and a refusal, answered");
    cr_assert_eq(t.failed, 2);
}

Test(redlock, max_fence_covers_answered_masters_only)
{
    redlock_reply r[5] = {ok_f(3), refused(1, 8), failed_f(100), pending(), ok_f(5)};
    r[3].fence = 200;
    cr_assert_eq(redlock_max_fence(r, 5), 8);
    cr_assert_eq(redlock_max_fence(r, 0), 0);
}

/* ---- retry-after ------------------------------------------------------------ */

Test(redlock, retry_after_is_quorum_th_smallest_known_pttl)
{
    redlock_reply r[5] = {refused(500, 1), refused(100, 1), refused(300, 1), refused(900, 1),
                          refused(700, 1)};
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, -7), 500);
    cr_assert_eq(redlock_retry_after_ms(r, 5, 1, -7), 100);
    cr_assert_eq(redlock_retry_after_ms(r, 5, 5, -7), 900);
}

Test(redlock, retry_after_counts_our_grants_as_free_now)
{
    redlock_reply r[5] = {ok_f(1), ok_f(1), refused(800, 1), refused(400, 1), refused(600, 1)};
    /* sorted: 0 0 400 600 800 -> third smallest */
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, -7), 400);
}

Test(redlock, retry_after_counts_vanished_keys_as_free_now)
{
    redlock_reply r[5] = {refused(-2, 1), refused(-2, 1), refused(900, 1), refused(400, 1),
                          failed_f(0)};
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, -7), 400);
}

Test(redlock, retry_after_treats_keys_without_expiry_as_unknown)
{
    /* -1: no expiry, cannot say when; only two known values for a quorum of three */
    redlock_reply r[5] = {refused(-1, 1), refused(-1, 1), refused(-1, 1), refused(300, 1),
                          refused(100, 1)};
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, 4242), 4242);
    r[0] = refused(200, 1);
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, 4242), 300);
}

Test(redlock, retry_after_falls_back_when_failed_masters_leave_too_few_values)
{
    redlock_reply r[5] = {refused(100, 1), refused(200, 1), failed_f(0), failed_f(0), pending()};
    r[2].pttl = 5; /* a failed master's numbers mean nothing */
    cr_assert_eq(redlock_retry_after_ms(r, 5, 3, 30000), 30000);
}

Test(redlock, retry_after_ignores_garbage_pttl_below_minus_two)
{
    redlock_reply r[3] = {refused(-3, 1), refused(-100, 1), refused(50, 1)};
    cr_assert_eq(redlock_retry_after_ms(r, 3, 2, 999), 999);
}

Test(redlock, retry_after_with_quorum_zero_returns_fallback)
{
    redlock_reply r[1] = {refused(50, 1)};
    cr_assert_eq(redlock_retry_after_ms(r, 1, 0, 77), 77);
}

Test(redlock, retry_after_one_master)
{
    redlock_reply r[1] = {refused(1234, 1)};
    cr_assert_eq(redlock_retry_after_ms(r, 1, 1, 77), 1234);
    r[0] = refused(-1, 1);
    cr_assert_eq(redlock_retry_after_ms(r, 1, 1, 77), 77);
}

/* ---- inspection ------------------------------------------------------------- */

Test(redlock, inspect_holder_needs_the_same_value_on_a_quorum)
{
    redlock_reply r[5] = {holder("lease-A-0123456789", 900), holder("lease-A-0123456789", 800),
                          holder("lease-B-0123456789", 700), empty_key(), failed_f(0)};
    int64_t valid = 123;
    cr_assert_eq(redlock_inspect_holder(r, 5, 3, &valid), -1);
    cr_assert_eq(valid, 0);
    r[3] = holder("lease-A-0123456789", 600);
    int h = redlock_inspect_holder(r, 5, 3, &valid);
    cr_assert(h == 0 || h == 1 || h == 3, "holder index %d", h);
    cr_assert_str_eq(r[h].value, "lease-A-0123456789");
    /* holders' pttls 900 800 600: a quorum of 3 still holds it for 600 */
    cr_assert_eq(valid, 600);
}

Test(redlock, inspect_valid_is_quorum_th_largest_pttl_among_holders)
{
    redlock_reply r[5] = {holder("x", 100), holder("x", 500), holder("x", 300), holder("x", 400),
                          holder("x", 200)};
    int64_t valid = 0;
    cr_assert_geq(redlock_inspect_holder(r, 5, 3, &valid), 0);
    cr_assert_eq(valid, 300); /* 500 400 [300] */
    cr_assert_geq(redlock_inspect_holder(r, 5, 1, &valid), 0);
    cr_assert_eq(valid, 500);
    cr_assert_geq(redlock_inspect_holder(r, 5, 5, &valid), 0);
    cr_assert_eq(valid, 100);
}

Test(redlock, inspect_key_without_expiry_is_int64_max)
{
    redlock_reply r[3] = {holder("x", -1), holder("x", -1), holder("x", 50)};
    int64_t valid = 0;
    cr_assert_geq(redlock_inspect_holder(r, 3, 2, &valid), 0);
    cr_assert_eq(valid, INT64_MAX);
    r[1].pttl = 70;
    cr_assert_geq(redlock_inspect_holder(r, 3, 2, &valid), 0);
    cr_assert_eq(valid, 70);
}

Test(redlock, inspect_compares_whole_values_not_prefixes)
{
    redlock_reply r[3] = {holder("abcdef", 10), holder("abcdefg", 10), holder("abcdeX", 10)};
    int64_t valid;
    cr_assert_eq(redlock_inspect_holder(r, 3, 2, &valid), -1);
    r[2] = holder("abcdef", 5);
    cr_assert_geq(redlock_inspect_holder(r, 3, 2, &valid), 0);
    cr_assert_eq(valid, 5);
}

Test(redlock, inspect_ignores_values_from_refused_or_failed_slots)
{
    redlock_reply r[3] = {holder("x", 10), holder("x", 10), holder("x", 10)};
    r[1].state = RL_SLOT_FAILED;
    r[2].state = RL_SLOT_REFUSED;
    int64_t valid;
    cr_assert_eq(redlock_inspect_holder(r, 3, 2, &valid), -1);
}

Test(redlock, inspect_free_everywhere_has_no_holder)
{
    redlock_reply r[3] = {empty_key(), empty_key(), empty_key()};
    int64_t valid = 9;
    cr_assert_eq(redlock_inspect_holder(r, 3, 2, &valid), -1);
    cr_assert_eq(valid, 0);
}

/* ---- retry delay ------------------------------------------------------------ */

Test(redlock, retry_delay_after_lock_held_is_retry_after_plus_1_to_10)
{
    int seen[10] = {0};
    for (uint32_t rnd = 0; rnd < 1000; rnd++) {
        int64_t d = redlock_retry_delay_ms(1, 400, 100000, rnd * 2654435761u);
        cr_assert(d >= 401 && d <= 410, "rnd %u: %lld", rnd, (long long)d);
        seen[d - 401] = 1;
    }
    for (int i = 0; i < 10; i++)
        cr_assert(seen[i], "jitter value %d never produced", i + 1);
}

Test(redlock, retry_delay_treats_negative_retry_after_as_zero)
{
    for (uint32_t rnd = 0; rnd < 100; rnd++) {
        int64_t d = redlock_retry_delay_ms(1, -5, 100000, rnd);
        cr_assert(d >= 1 && d <= 10, "%lld", (long long)d);
    }
}

Test(redlock, retry_delay_after_no_quorum_is_25_to_125)
{
    int seen[101] = {0};
    for (uint32_t rnd = 0; rnd < 20000; rnd++) {
        int64_t d = redlock_retry_delay_ms(0, 99999, 100000, rnd * 2654435761u);
        cr_assert(d >= 25 && d <= 125, "%lld", (long long)d);
        seen[d - 25] = 1;
    }
    for (int i = 0; i <= 100; i++)
        cr_assert(seen[i], "back-off %d never produced", i + 25);
}

Test(redlock, retry_delay_never_past_remaining)
{
    uint32_t rnds[] = {0, 1, 9, 100, 0xffffffffu, 0x80000000u};
    for (size_t k = 0; k < sizeof rnds / sizeof rnds[0]; k++) {
        cr_assert_eq(redlock_retry_delay_ms(1, 5000, 300, rnds[k]), 300);
        cr_assert_leq(redlock_retry_delay_ms(0, 0, 30, rnds[k]), 30);
        cr_assert_eq(redlock_retry_delay_ms(1, 5000, 0, rnds[k]), 0);
        cr_assert_eq(redlock_retry_delay_ms(0, 0, 0, rnds[k]), 0);
        cr_assert_eq(redlock_retry_delay_ms(1, 5000, -20, rnds[k]), 0);
        cr_assert_eq(redlock_retry_delay_ms(0, 0, -20, rnds[k]), 0);
    }
}

Test(redlock, retry_delay_handles_the_largest_pttl_redis_can_report)
{
    /* Redis refuses expiries past LLONG_MAX - now, so a pttl is at most about this. */
    int64_t big = INT64_MAX - INT64_C(2000000000000);
    int64_t d = redlock_retry_delay_ms(1, big, 60000, 0xffffffffu);
    cr_assert_eq(d, 60000);
}

/* ---- the verdict on a master found without its record (docs/DESIGN.md, rule 3) ---- */

Test(redlock, unmarked_master_joins_only_a_cluster_where_no_master_has_a_record)
{
    redlock_peer_view v[4] = {{0, 1}, {0, 1}, {0, 1}, {0, 1}};
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_MARK, "all bare: a new cluster");
    v[2].state = 1;
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_QUARANTINE,
                 "a record elsewhere, even with no counter yet: a grant may be in flight");
    v[2].state = 2;
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_QUARANTINE, "a quarantined peer too");
}

Test(redlock, unmarked_master_waits_for_every_fresh_answer)
{
    redlock_peer_view v[4] = {{0, 1}, {0, 1}, {0, 1}, {-1, 0}};
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_WAIT, "one master never answered");
    v[3] = (redlock_peer_view){0, 0};
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_WAIT,
                 "an answer older than the observation may hide a record written since");
    v[3].fresh = 1;
    cr_assert_eq(redlock_judge_unmarked(v, 4), RL_VERDICT_MARK);
    /* A fresh record anywhere quarantines at once, whatever the others; a stale one
     * proves nothing. */
    redlock_peer_view w[3] = {{1, 1}, {-1, 0}, {0, 0}};
    cr_assert_eq(redlock_judge_unmarked(w, 3), RL_VERDICT_QUARANTINE);
    w[0].fresh = 0;
    cr_assert_eq(redlock_judge_unmarked(w, 3), RL_VERDICT_WAIT, "a stale answer proves nothing");
    cr_assert_eq(redlock_judge_unmarked(NULL, 0), RL_VERDICT_MARK, "a cluster of one");
}

/* Issue 21: the repair counts only peers proven in the round itself; no gap unless
 * every master answered with its history (a majority restarted together). */
Test(redlock, repair_needs_a_quorum_of_proven_peers_and_no_guessed_gap)
{
    uint64_t base = 0;
    resync_tally t = {.n = 5, .proven_peers = 3, .history = 4, .top_proven = 41, .top_all = 90};
    cr_assert_eq(resync_decide(&t, 3, 0, &base), RESYNC_REJOIN);
    cr_assert_eq(base, 41, "the largest counter of the proven peers, not of any that answered");
    t.proven_peers = 2;
    cr_assert_eq(resync_decide(&t, 3, 1, &base), RESYNC_WAIT,
                 "finding 3: a master down, two lagging: wait, whatever the time");
    t.history = 5;
    cr_assert_eq(resync_decide(&t, 3, 0, &base), RESYNC_WAIT, "not before the wait is out");
    cr_assert_eq(resync_decide(&t, 3, 1, &base), RESYNC_FALLBACK);
    cr_assert_eq(base, 90 + RESYNC_GAP, "every master answered with its history: the largest of all");
    t.proven_peers = 0;
    t.history = 4; /* one master lost everything (wiped): no count can bound what it held */
    cr_assert_eq(resync_decide(&t, 3, 1, &base), RESYNC_WAIT);
}

Test(redlock, a_quarantine_shortens_to_the_longest_outstanding_lock_of_a_proven_quorum)
{
    resync_tally t = {.n = 5, .proven_peers = 3, .expiry_peers = 3, .expiry_ms = 30000};
    cr_assert_eq(resync_delay_ms(&t, 3, 0.01), 30000 + 300 + 2);
    t.expiry_ms = -2; /* no lock outstanding on any of them */
    cr_assert_eq(resync_delay_ms(&t, 3, 0.01), 2);
    t.expiry_peers = 2; /* one of the three is out for its clock: its expiry key ran by it */
    cr_assert_eq(resync_delay_ms(&t, 3, 0.01), -1, "unproven: the delay stays");
}

/* ---- "held" versus votes split between attempts ---- */

static redlock_reply held_by(const char *lease)
{
    redlock_reply r;
    memset(&r, 0, sizeof r);
    r.state = RL_SLOT_REFUSED;
    r.has_value = 1;
    r.value_len = (uint8_t)strlen(lease);
    memcpy(r.value, lease, r.value_len);
    return r;
}

Test(redlock, a_refused_round_is_held_only_if_one_lease_can_hold_a_quorum)
{
    redlock_reply ok;
    memset(&ok, 0, sizeof ok);
    ok.state = RL_SLOT_OK;
    redlock_reply failed;
    memset(&failed, 0, sizeof failed);
    failed.state = RL_SLOT_FAILED;
    redlock_reply held[5] = {held_by("A"), held_by("A"), held_by("A"), ok, ok};
    cr_assert(redlock_held_by_quorum(held, 5, 3), "A holds three of five");
    redlock_reply split[5] = {held_by("A"), held_by("A"), held_by("B"), held_by("B"), ok};
    cr_assert_not(redlock_held_by_quorum(split, 5, 3), "two, two and one: nobody holds it");
    redlock_reply maybe[5] = {held_by("A"), held_by("A"), failed, ok, ok};
    cr_assert(redlock_held_by_quorum(maybe, 5, 3), "A may hold the one that did not answer");
    redlock_reply anon[5] = {held_by("A"), ok, ok, ok, ok};
    anon[0].has_value = 0;
    cr_assert(redlock_held_by_quorum(anon, 5, 3), "a refusal that names nobody counts as held");
    redlock_reply none[3] = {ok, ok, failed};
    cr_assert_not(redlock_held_by_quorum(none, 3, 2), "no refusal at all: not held");
}

Test(redlock, a_repair_waits_one_quarantine_for_a_quorum_of_peers_within_bounds)
{
    cr_assert_eq(resync_wait_ms(0), 1000);
    cr_assert_eq(resync_wait_ms(2500), 2500);
    cr_assert_eq(resync_wait_ms(3600000), 10000);
}

Test(redlock, handoff_tally_counts_a_reader_gone_where_the_waiter_was_refused)
{
    /* A reader's release handed to a writer that other readers still keep out: the
     * reader went on those masters (released), the writer was refused there. */
    redlock_reply r[5] = {refused(10, 3), refused(10, 3), refused(10, 3), ok_f(3), failed_f(0)};
    r[0].released = r[1].released = r[2].released = 1;
    redlock_tally t;
    redlock_handoff_tally(r, 5, &t);
    cr_assert_eq(t.ok, 3, "the release counts wherever the old lease went");
    cr_assert_eq(t.refused, 1);
    cr_assert_eq(t.failed, 1);
}

Test(redlock, quorum_at_least_is_what_a_quorum_agrees_on)
{
    int64_t a[5] = {2, 2, 1, 1, 1};
    cr_assert_eq(redlock_quorum_at_least(a, 5, 3), 1, "three count 1 or more, two count 2");
    int64_t b[5] = {2, 2, 2, 0, 0};
    cr_assert_eq(redlock_quorum_at_least(b, 5, 3), 2);
    int64_t c[3] = {0, 5, 7};
    cr_assert_eq(redlock_quorum_at_least(c, 3, 3), 0, "one master at zero among three");
    int64_t d[2] = {4, 4};
    cr_assert_eq(redlock_quorum_at_least(d, 2, 3), 0, "fewer values than a quorum: nothing agreed");
    cr_assert_eq(redlock_quorum_at_least(d, 2, 0), 0);
}

Test(redlock, quorum_count_reads_answered_masters_only)
{
    redlock_reply r[5] = {ok_f(1), ok_f(1), ok_f(1), refused(1, 1), failed_f(0)};
    r[0].count = 4;
    r[1].count = 3;
    r[2].count = 3;
    r[3].count = 9; /* a refusal says nothing of readers */
    r[4].count = 9;
    cr_assert_eq(redlock_quorum_count(r, 5, 3), 3);
    r[2].state = RL_SLOT_FAILED;
    cr_assert_eq(redlock_quorum_count(r, 5, 3), 0, "two answers cannot speak for a quorum");
}

Test(redlock, an_inspection_takes_the_drift_off_like_a_grant)
{
    /* 10 s left, 1 %: 10000 - (100 + 2). */
    cr_assert_eq(redlock_inspect_validity_ms(10000, 0.01), 9898);
    cr_assert_eq(redlock_inspect_validity_ms(10000, 0.2), 7998);
    /* The same figure a grant of that ttl with no elapsed time would get. */
    cr_assert_eq(redlock_inspect_validity_ms(30000, 0.01), redlock_validity_ms(30000, 0, 0.01));
    /* Nothing left to vouch for: 0, never negative; no expiry stays -1. */
    cr_assert_eq(redlock_inspect_validity_ms(2, 0.01), 0);
    cr_assert_eq(redlock_inspect_validity_ms(0, 0.01), 0);
    cr_assert_eq(redlock_inspect_validity_ms(-1, 0.01), -1);
}

/* ---- a re-entry's validity, a release's outcome (docs/DESIGN.md, sections 1, 12) ---- */

static redlock_reply ok_kept(int64_t pttl)
{
    redlock_reply r = ok_f(1);
    r.pttl = pttl;
    return r;
}

Test(redlock, a_grant_lives_as_long_as_a_quorum_of_its_masters_keeps_the_key)
{
    /* A fresh grant: every key its ttl (no expiry said), the figure of before. */
    redlock_reply fresh[5] = {ok_kept(-2), ok_kept(-2), ok_kept(-2), failed_f(0), refused(5, 0)};
    cr_assert_eq(redlock_granted_ms(fresh, 5, 3, 500), 500);
    /* A re-entry with ttl 500 into a hold of 30 s: the keys kept their 30 s. */
    redlock_reply kept[5] = {ok_kept(29800), ok_kept(29700), ok_kept(29900), failed_f(0), failed_f(0)};
    cr_assert_eq(redlock_granted_ms(kept, 5, 3, 500), 29700, "the quorum-th largest");
    /* Mixed: two masters kept 30 s, three were set anew for 500 ms: a quorum holds the
     * key only 500 ms. */
    redlock_reply mixed[5] = {ok_kept(30000), ok_kept(30000), ok_kept(-2), ok_kept(-2), ok_kept(-2)};
    cr_assert_eq(redlock_granted_ms(mixed, 5, 3, 500), 500);
    redlock_reply four[5] = {ok_kept(30000), ok_kept(30000), ok_kept(20000), ok_kept(-2), failed_f(0)};
    cr_assert_eq(redlock_granted_ms(four, 5, 3, 500), 20000);
    cr_assert_eq(redlock_granted_ms(kept, 5, 4, 500), 500, "fewer than the quorum granted");
    /* The validity of it takes the drift off the figure, as a grant's does. */
    cr_assert_eq(redlock_validity_ms(redlock_granted_ms(kept, 5, 3, 500), 10000, 0.01),
                 29700 - 10 - (297 + 2));
}

/* left per master: >= 0 answered, -1 no answer. */
static int known(const int64_t *left, size_t n, size_t q, int64_t *holds)
{
    return redlock_release_known(left, n, q, holds);
}

Test(redlock, a_release_is_released_once_n_minus_q_plus_one_masters_say_gone)
{
    int64_t h;
    int64_t all[5] = {0, 0, 0, 0, 0};
    cr_assert(known(all, 5, 3, &h) && h == 0);
    int64_t three[5] = {0, 0, 0, -1, -1};
    cr_assert(known(three, 5, 3, &h) && h == 0, "3 = n - q + 1 gone: no quorum is left");
    int64_t two[5] = {0, 0, -1, -1, -1};
    cr_assert(!known(two, 5, 3, &h), "the three silent masters may still hold it");
    cr_assert_eq(h, INT64_MAX);
    /* Four masters, quorum 3: two gone suffice (the other two are no quorum). */
    int64_t even[4] = {0, 0, -1, -1};
    cr_assert(known(even, 4, 3, &h) && h == 0);
    int64_t one[4] = {0, -1, -1, -1};
    cr_assert(!known(one, 4, 3, &h));
}

Test(redlock, a_reentrant_release_counts_the_holds_a_quorum_may_still_have)
{
    int64_t h;
    /* Finding 3 of issue 22: masters 1-3 counted 2 (a re-entry that missed 4 and 5),
     * 4 and 5 counted 1.  The DELETE: 3 answers 1 left, 4 and 5 deleted, 1 and 2 slow. */
    int64_t first[5] = {-1, -1, 1, 0, 0};
    cr_assert(!known(first, 5, 3, &h), "1 and 2 may still count a hold: not released yet");
    cr_assert_eq(h, 1);
    int64_t all[5] = {1, 1, 1, 0, 0};
    cr_assert(known(all, 5, 3, &h) && h == 1, "1-3 keep one hold: not released");
    /* All five counted 2 and three answered 1: the two silent ones cannot make it 0. */
    int64_t same[5] = {1, 1, 1, -1, -1};
    cr_assert(known(same, 5, 3, &h) && h == 1);
    /* Three answered 1, 0, 0, two silent: 1 or 0 depending on them. */
    int64_t split[5] = {1, 0, 0, -1, -1};
    cr_assert(!known(split, 5, 3, &h));
    /* Stale higher counts on a minority do not keep a hold alive. */
    int64_t stale[5] = {0, 0, 0, 3, 3};
    cr_assert(known(stale, 5, 3, &h) && h == 0);
    int64_t mixed[5] = {2, 1, 1, 1, -1};
    cr_assert(known(mixed, 5, 3, &h) && h == 1, "{2,1,1,1} and any fifth: a quorum counts 1");
    int64_t two2[5] = {2, 2, 1, 1, -1};
    cr_assert(!known(two2, 5, 3, &h), "{2,2,1,1}: a fifth at 2 makes it 2");
    int64_t higher[5] = {2, 2, 1, 0, -1};
    cr_assert(!known(higher, 5, 3, &h), "the fifth at 2 would make it 2");
    cr_assert_eq(h, 2);
}

Test(redlock, a_release_is_known_for_good_once_known)
{
    /* Answers only narrow the bounds: every order of answers for five masters whose
     * final counts are each 0..2, once known, stays known with the same count. */
    for (int code = 0; code < 243; code++) {
        int64_t fin[5];
        for (int i = 0, c = code; i < 5; i++, c /= 3)
            fin[i] = c % 3;
        int64_t now[5] = {-1, -1, -1, -1, -1}, first = -1, h;
        for (int i = 0; i < 5; i++) {
            now[i] = fin[i];
            if (known(now, 5, 3, &h)) {
                if (first < 0)
                    first = h;
                cr_assert_eq(h, first, "code %d after %d answers", code, i + 1);
            }
        }
        cr_assert_geq(first, 0, "everyone answered: known (code %d)", code);
    }
}

Test(redlock, an_unconfirmed_release_lowers_the_silent_masters_to_what_was_left)
{
    int64_t left[5] = {-1, -1, 1, 0, 0};
    cr_assert_eq(redlock_release_target(left, 0x1c, 5), 1, "a hold is left: lowered to 1");
    int64_t gone[5] = {0, 0, -1, -1, -1};
    cr_assert_eq(redlock_release_target(gone, 0x03, 5), 0, "deleted where answered: deleted");
    cr_assert_eq(redlock_release_target(gone, 0x01, 5), 0);
    cr_assert_eq(redlock_release_target(gone, 0, 5), -1, "nobody had it: one hold at most");
    int64_t none[5] = {-1, -1, -1, -1, -1};
    cr_assert_eq(redlock_release_target(none, 0, 5), -1);
}

/* ---- lock-delay, bounded holds, the token check (docs/DESIGN.md section 14) ---- */

static redlock_reply bounded(int state, int64_t left)
{
    redlock_reply r = state == RL_SLOT_OK ? ok_f(3) : refused(0, 3);
    r.bound_ms = left;
    return r;
}

Test(redlock, an_extension_lives_its_ttl_or_what_a_quorum_has_left_of_the_bound)
{
    redlock_reply r[5] = {bounded(RL_SLOT_OK, -1), bounded(RL_SLOT_OK, -1), bounded(RL_SLOT_OK, -1),
                          failed_f(0), failed_f(0)};
    cr_assert_eq(redlock_extended_ms(r, 5, 3, 1000), 1000, "no bound: the ttl");
    cr_assert_eq(redlock_bound_left_ms(r, 5, 3, 1), -1);
    r[0] = bounded(RL_SLOT_OK, 400);
    r[1] = bounded(RL_SLOT_OK, 420);
    r[2] = bounded(RL_SLOT_OK, 5000);
    cr_assert_eq(redlock_extended_ms(r, 5, 3, 1000), 400, "capped: the quorum-th largest");
    cr_assert_eq(redlock_bound_left_ms(r, 5, 3, 1), 400);
    r[3] = bounded(RL_SLOT_OK, 430);
    cr_assert_eq(redlock_extended_ms(r, 5, 3, 1000), 420, "four extended: the third largest");
    r[0] = bounded(RL_SLOT_REFUSED, 20);
    r[1] = bounded(RL_SLOT_REFUSED, 15);
    r[3] = refused(0, 3);
    r[3].bound_ms = -1;
    cr_assert_eq(redlock_bound_left_ms(r, 5, 3, 0), 15, "refused for the bound: the least said");
    r[0] = refused(0, 3);
    r[0].bound_ms = -1;
    r[1] = r[0];
    cr_assert_eq(redlock_bound_left_ms(r, 5, 3, 0), -1, "refused for another reason: none");
}

static redlock_reply rests(int64_t ms)
{
    redlock_reply r = empty_key();
    r.rest_ms = ms;
    return r;
}

Test(redlock, a_resting_lock_frees_when_a_quorum_is_free)
{
    redlock_reply r[5] = {rests(0), rests(0), rests(0), rests(0), rests(0)};
    cr_assert_eq(redlock_resting_ms(r, 5, 3), 0, "nothing rests");
    r[0] = rests(900);
    r[1] = rests(1000);
    cr_assert_eq(redlock_resting_ms(r, 5, 3), 0, "three masters free: free now");
    r[2] = rests(1100);
    cr_assert_eq(redlock_resting_ms(r, 5, 3), 900, "free once the first of three lets go");
    r[3] = failed_f(0);
    r[4] = failed_f(0);
    cr_assert_eq(redlock_resting_ms(r, 5, 3), 1100, "a master that did not answer counts as never");
    r[2] = failed_f(0);
    cr_assert_eq(redlock_resting_ms(r, 5, 3), 0, "fewer than a quorum answered: not said");
}

static redlock_reply stored(const char *lease, uint64_t token)
{
    redlock_reply r = holder(lease, 1000);
    r.stored = token;
    return r;
}

Test(redlock, the_token_check_wants_the_largest_token_stored_with_the_holders_keys)
{
    redlock_reply r[5] = {stored("L", 7), stored("L", 7), stored("L", 5), stored("M", 9), empty_key()};
    int64_t valid;
    int h = redlock_inspect_holder(r, 5, 3, &valid);
    cr_assert_geq(h, 0);
    cr_assert(redlock_token_current(r, 5, h, 7), "the grant's token: its largest stored");
    cr_assert_not(redlock_token_current(r, 5, h, 5), "a laggard's own counter is not the token");
    cr_assert_not(redlock_token_current(r, 5, h, 9), "another lease's");
    cr_assert_not(redlock_token_current(r, 5, -1, 7), "nobody holds a quorum");
    r[0].stored = r[1].stored = r[2].stored = 0;
    cr_assert_not(redlock_token_current(r, 5, h, 0), "no token stored: never current");
}
