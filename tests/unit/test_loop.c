/* test_loop.c -- the event loop of loop.h: the timer heap keeps its invariant and fires
 * due timers in order under random start/stop/re-arm sequences (checked against a
 * simple model), run_timers is bounded, next_timeout, and fd dispatch through epoll.
 * No sleeps: due timers are armed in the past, others far in the future. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "unit.h"
#include "loop.h"

static loop L;

static void setup(void) { cr_assert_eq(loop_init(&L), 0, "loop_init"); }
static void teardown(void)
{
    loop_fini(&L);
    unit_fini();
}

TestSuite(loop, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ------------------------------------------------------------------ */

#define MAXT 512

typedef struct tt {
    loop_timer t;
    int id;
    int fired;
} tt;

static tt timers[MAXT];
static int fire_order[MAXT * 4];
static int64_t fire_when[MAXT * 4];
static size_t n_fired;

static void on_fire(loop_timer *t)
{
    tt *x = container_of(t, tt, t);
    x->fired++;
    fire_order[n_fired] = x->id;
    fire_when[n_fired] = t->when_us;
    n_fired++;
}

static void init_timers(size_t n)
{
    memset(timers, 0, sizeof timers);
    n_fired = 0;
    for (size_t i = 0; i < n; i++) {
        timers[i].id = (int)i;
        timers[i].t.cb = on_fire;
    }
}

/* The heap invariant and the back-pointers. */
static void check_heap(const loop *l)
{
    for (size_t i = 0; i < l->heap_len; i++) {
        cr_assert_eq(l->heap[i]->heap_index, i + 1, "slot %zu has heap_index %zu", i,
                     l->heap[i]->heap_index);
        if (i > 0)
            cr_assert_leq(l->heap[(i - 1) / 2]->when_us, l->heap[i]->when_us,
                          "heap order broken at %zu", i);
    }
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from the seed */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

/* ---- heap --------------------------------------------------------------------- */

Test(loop, due_timers_fire_in_time_order)
{
    init_timers(8);
    int64_t whens[8] = {50, 10, 40, 30, 20, 70, 60, 5};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(loop_timer_start(&L, &timers[i].t, whens[i]), 0);
    check_heap(&L);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 8);
    int want[8] = {7, 1, 4, 3, 2, 0, 6, 5};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(fire_order[i], want[i], "position %d: timer %d", i, fire_order[i]);
    cr_assert_eq(L.heap_len, 0);
    for (int i = 0; i < 8; i++)
        cr_assert_not(loop_timer_armed(&timers[i].t));
}

Test(loop, future_timers_do_not_fire)
{
    init_timers(3);
    int64_t far = clock_now_us() + INT64_C(3600) * 1000000;
    loop_timer_start(&L, &timers[0].t, 1);
    loop_timer_start(&L, &timers[1].t, far);
    loop_timer_start(&L, &timers[2].t, 2);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 2);
    cr_assert_eq(timers[1].fired, 0);
    cr_assert(loop_timer_armed(&timers[1].t));
    cr_assert_eq(L.heap_len, 1);
}

Test(loop, stopped_timers_never_fire_and_stop_is_idempotent)
{
    init_timers(5);
    for (int i = 0; i < 5; i++)
        loop_timer_start(&L, &timers[i].t, 10 + i);
    loop_timer_stop(&L, &timers[0].t); /* the root */
    loop_timer_stop(&L, &timers[4].t); /* the last slot */
    loop_timer_stop(&L, &timers[2].t); /* the middle */
    loop_timer_stop(&L, &timers[2].t);
    check_heap(&L);
    cr_assert_eq(L.heap_len, 2);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 2);
    cr_assert_eq(fire_order[0], 1);
    cr_assert_eq(fire_order[1], 3);
    loop_timer_stop(&L, &timers[1].t); /* already fired: a no-op */
    cr_assert_eq(L.heap_len, 0);
}

Test(loop, restart_moves_a_timer_instead_of_duplicating_it)
{
    init_timers(3);
    loop_timer_start(&L, &timers[0].t, 10);
    loop_timer_start(&L, &timers[1].t, 20);
    loop_timer_start(&L, &timers[2].t, 30);
    loop_timer_start(&L, &timers[0].t, 40); /* later */
    loop_timer_start(&L, &timers[2].t, 5);  /* earlier */
    cr_assert_eq(L.heap_len, 3);
    check_heap(&L);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 3);
    cr_assert_eq(fire_order[0], 2);
    cr_assert_eq(fire_order[1], 1);
    cr_assert_eq(fire_order[2], 0);
    cr_assert_eq(timers[0].fired, 1);
}

Test(loop, equal_deadlines_all_fire_once)
{
    init_timers(100);
    for (int i = 0; i < 100; i++)
        loop_timer_start(&L, &timers[i].t, 42);
    check_heap(&L);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 100);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(timers[i].fired, 1);
}

Test(loop, heap_grows_past_its_first_allocation)
{
    init_timers(MAXT);
    for (int i = MAXT - 1; i >= 0; i--)
        cr_assert_eq(loop_timer_start(&L, &timers[i].t, 1000 + i), 0);
    cr_assert_eq(L.heap_len, MAXT);
    cr_assert_geq(L.heap_cap, MAXT);
    check_heap(&L);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, MAXT);
    for (int i = 0; i < MAXT; i++)
        cr_assert_eq(fire_order[i], i);
}

struct seed_case {
    uint64_t seed;
    size_t ntimers, nops;
};

ParameterizedTestParameters(loop, random_start_stop_matches_a_model)
{
    static struct seed_case cases[] = {
        {1, 8, 2000},     {2, 64, 5000},    {3, 300, 20000}, {0xdeadbeef, 512, 30000},
        {42, 2, 1000},    {7, 1, 500},      {99, 100, 10000}, {12345, 33, 8000},
    };
    return cr_make_param_array(struct seed_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct seed_case *c, loop, random_start_stop_matches_a_model)
{
    rng_state = c->seed * 0x9e3779b97f4a7c15ULL + 1;
    init_timers(c->ntimers);
    static int armed[MAXT];
    static int64_t when[MAXT];
    memset(armed, 0, sizeof armed);
    size_t model_len = 0;
    for (size_t op = 0; op < c->nops; op++) {
        size_t i = rnd() % c->ntimers;
        if (rnd() % 3 == 0) {
            loop_timer_stop(&L, &timers[i].t);
            if (armed[i])
                model_len--;
            armed[i] = 0;
        } else {
            /* small range so that equal deadlines happen; all in the past (due) */
            int64_t w = (int64_t)(rnd() % 1000) + 1;
            cr_assert_eq(loop_timer_start(&L, &timers[i].t, w), 0);
            if (!armed[i])
                model_len++;
            armed[i] = 1;
            when[i] = w;
        }
        cr_assert_eq(L.heap_len, model_len, "op %zu", op);
        cr_assert_eq(loop_timer_armed(&timers[i].t), armed[i], "op %zu timer %zu", op, i);
        if (op % 97 == 0 || c->ntimers < 16)
            check_heap(&L);
        if (L.heap_len)
            for (size_t k = 0; k < c->ntimers; k++)
                if (armed[k])
                    cr_assert_leq(L.heap[0]->when_us, when[k], "root is not the minimum");
    }
    check_heap(&L);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, model_len);
    for (size_t k = 1; k < n_fired; k++)
        cr_assert_leq(fire_when[k - 1], fire_when[k], "fired out of order at %zu", k);
    for (size_t k = 0; k < c->ntimers; k++) {
        cr_assert_eq(timers[k].fired, armed[k], "timer %zu fired %d times, armed %d", k,
                     timers[k].fired, armed[k]);
        if (armed[k])
            cr_assert_eq(timers[k].t.when_us, when[k]);
    }
    cr_assert_eq(L.heap_len, 0);
}

/* ---- run_timers edge cases ------------------------------------------------------- */

static loop_timer *victim;

static void rearm_now(loop_timer *t)
{
    on_fire(t);
    loop_timer_start(&L, t, clock_now_us()); /* due again "now" */
}

static void rearm_past(loop_timer *t)
{
    on_fire(t);
    loop_timer_start(&L, t, 1); /* due again, and before everything else */
}

static void stop_victim(loop_timer *t)
{
    on_fire(t);
    loop_timer_stop(&L, victim);
}

static void start_victim(loop_timer *t)
{
    on_fire(t);
    loop_timer_start(&L, victim, 2);
}

Test(loop, a_timer_rearmed_for_now_does_not_starve_other_due_timers)
{
    init_timers(2);
    timers[0].t.cb = rearm_now;
    loop_timer_start(&L, &timers[0].t, 1);
    loop_timer_start(&L, &timers[1].t, 3);
    loop_run_timers(&L);
    cr_assert_eq(timers[1].fired, 1, "the other due timer ran in the same pass");
    cr_assert_geq(timers[0].fired, 1);
    cr_assert(loop_timer_armed(&timers[0].t));
    size_t before = n_fired;
    loop_run_timers(&L);
    cr_assert_gt(n_fired, before, "the re-armed timer runs on the next pass");
}

Test(loop, run_timers_is_bounded_by_the_heap_length_at_the_start)
{
    /* A callback that keeps re-arming itself in the past must not loop forever. */
    init_timers(3);
    timers[0].t.cb = rearm_past;
    loop_timer_start(&L, &timers[0].t, 1);
    loop_timer_start(&L, &timers[1].t, 5);
    loop_timer_start(&L, &timers[2].t, 6);
    loop_run_timers(&L);
    cr_assert_leq(n_fired, 3, "%zu callbacks in one pass over 3 timers", n_fired);
    cr_assert(loop_timer_armed(&timers[0].t));
}

Test(loop, a_callback_can_stop_another_due_timer)
{
    init_timers(3);
    timers[0].t.cb = stop_victim;
    victim = &timers[1].t;
    loop_timer_start(&L, &timers[0].t, 1);
    loop_timer_start(&L, &timers[1].t, 2);
    loop_timer_start(&L, &timers[2].t, 3);
    loop_run_timers(&L);
    cr_assert_eq(timers[0].fired, 1);
    cr_assert_eq(timers[1].fired, 0);
    cr_assert_eq(timers[2].fired, 1);
    cr_assert_eq(L.heap_len, 0);
}

Test(loop, a_callback_can_start_another_timer)
{
    init_timers(2);
    timers[0].t.cb = start_victim;
    victim = &timers[1].t;
    loop_timer_start(&L, &timers[0].t, 1);
    loop_run_timers(&L);
    cr_assert_eq(timers[0].fired, 1);
    cr_assert(loop_timer_armed(&timers[1].t));
    loop_run_timers(&L);
    cr_assert_eq(timers[1].fired, 1);
}

Test(loop, run_timers_on_an_empty_heap_does_nothing)
{
    init_timers(0);
    loop_run_timers(&L);
    cr_assert_eq(n_fired, 0);
}

/* ---- next timeout ---------------------------------------------------------------- */

Test(loop, next_timeout_without_timers_is_the_cap)
{
    cr_assert_eq(loop_next_timeout_ms(&L, 1000), 1000);
    cr_assert_eq(loop_next_timeout_ms(&L, -1), -1);
}

Test(loop, next_timeout_of_a_due_timer_is_zero)
{
    init_timers(1);
    loop_timer_start(&L, &timers[0].t, 1);
    cr_assert_eq(loop_next_timeout_ms(&L, 1000), 0);
    cr_assert_eq(loop_next_timeout_ms(&L, -1), 0);
}

static int64_t ceil_ms(int64_t us) { return us <= 0 ? 0 : (us + 999) / 1000; }

Test(loop, next_timeout_rounds_partial_milliseconds_up)
{
    /* Rounding down would wake the loop before the timer is due (and spin on
     * epoll_wait(0) in the last millisecond).  Bounds from clock readings taken
     * around the call keep this exact without sleeping. */
    init_timers(1);
    for (int k = 0; k < 50; k++) {
        int64_t when = clock_now_us() + 200500 + k * 37;
        loop_timer_start(&L, &timers[0].t, when);
        int64_t t0 = clock_now_us();
        int ms = loop_next_timeout_ms(&L, -1);
        int64_t t1 = clock_now_us();
        cr_assert(ms >= ceil_ms(when - t1) && ms <= ceil_ms(when - t0),
                  "%d ms not in [%lld, %lld]", ms, (long long)ceil_ms(when - t1),
                  (long long)ceil_ms(when - t0));
    }
}

Test(loop, next_timeout_rounds_up_and_is_capped)
{
    init_timers(2);
    int64_t now = clock_now_us();
    loop_timer_start(&L, &timers[0].t, now + 5000000); /* 5 s */
    int ms = loop_next_timeout_ms(&L, -1);
    cr_assert(ms > 4000 && ms <= 5000, "%d", ms);
    cr_assert_eq(loop_next_timeout_ms(&L, 100), 100);
    /* a nearer timer takes over */
    loop_timer_start(&L, &timers[1].t, clock_now_us() + 100000);
    ms = loop_next_timeout_ms(&L, -1);
    cr_assert(ms > 0 && ms <= 100, "%d", ms);
    loop_timer_stop(&L, &timers[1].t);
    ms = loop_next_timeout_ms(&L, 10000);
    cr_assert(ms > 4000 && ms <= 5000, "after stopping the near timer the far one decides: %d", ms);
}

/* ---- fds ------------------------------------------------------------------------- */

typedef struct pio {
    loop_io io;
    int calls;
    uint32_t last;
} pio;

static void on_io(loop_io *io, uint32_t events)
{
    pio *p = container_of(io, pio, io);
    p->calls++;
    p->last = events;
}

Test(loop, io_dispatches_ready_fds_and_drops_on_zero)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pio p = {.io = {.fd = fds[0], .events = 0, .cb = on_io}};
    cr_assert_eq(loop_io_set(&L, &p.io, EPOLLIN), 0);
    cr_assert_eq(p.io.events, EPOLLIN);
    cr_assert_eq(loop_poll(&L, 0), 0, "nothing readable yet");
    cr_assert_eq(p.calls, 0);
    cr_assert_eq(write(fds[1], "x", 1), 1);
    cr_assert_eq(loop_poll(&L, 1000), 1);
    cr_assert_eq(p.calls, 1);
    cr_assert(p.last & EPOLLIN);
    /* same mask again: nothing to do */
    cr_assert_eq(loop_io_set(&L, &p.io, EPOLLIN), 0);
    /* modify: also watch for output (never ready on a read end) */
    cr_assert_eq(loop_io_set(&L, &p.io, EPOLLIN | EPOLLOUT), 0);
    cr_assert_eq(p.io.events, EPOLLIN | EPOLLOUT);
    /* drop */
    cr_assert_eq(loop_io_set(&L, &p.io, 0), 0);
    cr_assert_eq(p.io.events, 0);
    cr_assert_eq(loop_poll(&L, 0), 0, "dropped fd still dispatched");
    cr_assert_eq(p.calls, 1);
    close(fds[0]);
    close(fds[1]);
}

Test(loop, io_set_on_a_bad_fd_fails_and_keeps_the_mask)
{
    pio p = {.io = {.fd = -1, .events = 0, .cb = on_io}};
    cr_assert_eq(loop_io_set(&L, &p.io, EPOLLIN), -1);
    cr_assert_eq(p.io.events, 0);
}

Test(loop, clock_is_monotonic)
{
    int64_t a = clock_now_us();
    for (int i = 0; i < 1000; i++) {
        int64_t b = clock_now_us();
        cr_assert_geq(b, a);
        a = b;
    }
    cr_assert_gt(a, 0);
}
