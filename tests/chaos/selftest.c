/* selftest.c -- `make chaos-selftest`: the checker's judge on synthetic histories (it must
 * catch every planted violation and pass every clean history) and the fault proxy's modes
 * against an in-process echo server.  Runs in a few seconds; needs no service. */
#include "judge.h"
#include "procs.h"
#include "sampler.h"
#include "schedstat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

#define MS(x) ((int64_t)((x) * 1000000.0))

/* ---- building synthetic histories --------------------------------------------------- */

static void hist_init(chaos_history *h)
{
    memset(h, 0, sizeof *h);
    h->n_names = 2;
    strcpy(h->names[0], "alpha");
    strcpy(h->names[1], "beta");
}

static long add(chaos_history *h, chaos_event e)
{
    long i = chaos_history_add(h, &e);
    if (i < 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return i;
}

static long grant(chaos_history *h, int name, double sent, double recv, int64_t token, int64_t validity)
{
    chaos_event e = {.op = CHAOS_ACQUIRE, .name = name, .t_send = MS(sent), .t_recv = MS(recv), .status = 201,
                     .token = token, .validity_ms = validity, .ttl_ms = validity + 10, .link = -1};
    return add(h, e);
}

static long release(chaos_history *h, long g, double sent, double recv, int status)
{
    chaos_event e = {.op = CHAOS_RELEASE, .name = h->ev[g].name, .t_send = MS(sent), .t_recv = MS(recv),
                     .status = status, .link = g};
    if (status == 404)
        strcpy(e.error, "lease_not_found");
    long i = add(h, e);
    h->ev[g].link = i;
    return i;
}

static long other(chaos_history *h, int op, double sent, double recv, int status, const char *err, int64_t wait)
{
    chaos_event e = {.op = op, .t_send = MS(sent), .t_recv = MS(recv), .status = status, .wait_ms = wait,
                     .ttl_ms = 500, .link = -1};
    snprintf(e.error, sizeof e.error, "%s", err);
    return add(h, e);
}

/* Runs one judge with its report captured; returns the violation count and keeps the
 * report in *report (caller frees). */
typedef long (*judge_fn)(const chaos_history *, const chaos_judge_opts *, FILE *);

static long run(judge_fn fn, const chaos_history *h, char **report)
{
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    size_t len;
    *report = NULL;
    FILE *f = open_memstream(report, &len);
    if (!f)
        exit(1);
    long v = fn(h, &o, f);
    fclose(f);
    return v;
}

static long judged(judge_fn fn, const chaos_history *h)
{
    char *rep;
    long v = run(fn, h, &rep);
    free(rep);
    return v;
}

/* ---- (a) mutual exclusion ---------------------------------------------------------- */

static void mutex_passes_a_grant_sent_during_a_hold_but_answered_after_its_release(void)
{
    chaos_history h;
    hist_init(&h);
    long g1 = grant(&h, 0, 0, 5, 1, 500);
    release(&h, g1, 50, 52, 200);
    grant(&h, 0, 40, 60, 2, 500); /* asked while g1 held, answered after g1's release was sent */
    CHECK(judged(chaos_judge_mutex, &h) == 0, "a wait-and-grant after release is legal");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "tokens 1 then 2 are in order");
    chaos_history_free(&h);
}

static void mutex_catches_a_grant_answered_before_the_holder_released(void)
{
    chaos_history h;
    hist_init(&h);
    long g1 = grant(&h, 0, 0, 5, 1, 500);
    release(&h, g1, 50, 52, 200);
    grant(&h, 0, 40, 45, 2, 500);
    char *rep;
    CHECK(run(chaos_judge_mutex, &h, &rep) == 1, "overlap 45..50 must be found");
    CHECK(strstr(rep, "FAIL (a)") && strstr(rep, "name alpha") && strstr(rep, "token 1") && strstr(rep, "token 2"),
          "evidence names the lock and both tokens: %s", rep);
    free(rep);
    chaos_history_free(&h);
}

static void mutex_ends_an_unreleased_hold_at_send_plus_validity(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 0, 5, 1, 100); /* never released: held until 0 + 100 at least */
    grant(&h, 0, 60, 99.9, 2, 100);
    CHECK(judged(chaos_judge_mutex, &h) == 1, "a grant at 99.9 ms is inside 0 + 100 ms");
    chaos_history_free(&h);

    hist_init(&h);
    grant(&h, 0, 0, 5, 1, 100);
    grant(&h, 0, 60, 100.1, 2, 100);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "a grant at 100.1 ms is after 0 + 100 ms");
    CHECK(judged(chaos_judge_mutex_client_view, &h) == 1,
          "but a client counting from receipt (5 + 100) still thinks it holds at 100.1");
    chaos_history_free(&h);
}

static void mutex_finds_every_grant_inside_one_long_hold(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 0, 1, 1, 1000);
    long g2 = grant(&h, 0, 99, 100, 2, 500);
    release(&h, g2, 200, 201, 200);
    long g3 = grant(&h, 0, 299, 300, 3, 500);
    release(&h, g3, 400, 401, 200);
    CHECK(judged(chaos_judge_mutex, &h) == 2, "g2 and g3 both overlap g1");
    chaos_history_free(&h);
}

static void mutex_keeps_names_apart_and_ignores_non_grants(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 0, 1, 1, 1000);
    grant(&h, 1, 10, 11, 1, 1000);
    other(&h, CHAOS_ACQUIRE, 20, 21, 409, "lock_held", 0);
    other(&h, CHAOS_ACQUIRE, 20, 21, 503, "quorum_unavailable", 0);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "different names may be held at once");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "token 1 on two names is fine");
    chaos_history_free(&h);
}

static void mutex_touching_holds_are_not_an_overlap(void)
{
    chaos_history h;
    hist_init(&h);
    long g1 = grant(&h, 0, 0, 10, 1, 500);
    release(&h, g1, 50, 51, 200);
    grant(&h, 0, 49, 50, 2, 500); /* starts exactly when g1's holder let go */
    CHECK(judged(chaos_judge_mutex, &h) == 0, "[10,50) and [50,..) do not overlap");
    chaos_history_free(&h);
}

/* ---- (b) fencing ------------------------------------------------------------------- */

static void fencing_catches_a_repeated_and_a_smaller_token(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 0, 10, 5, 100);
    grant(&h, 0, 200, 210, 5, 100);
    char *rep;
    CHECK(run(chaos_judge_fencing, &h, &rep) == 2, "token 5 after token 5: one inversion and one duplicate");
    CHECK(strstr(rep, "FAIL (b)") && strstr(rep, "issued twice"), "report: %s", rep);
    free(rep);
    chaos_history_free(&h);

    hist_init(&h);
    grant(&h, 0, 0, 10, 5, 100);
    grant(&h, 0, 200, 210, 4, 100);
    CHECK(judged(chaos_judge_fencing, &h) == 1, "token 4 after token 5 is an inversion");
    chaos_history_free(&h);
}

static void fencing_does_not_order_grants_whose_requests_overlapped(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 0, 30, 7, 100);
    long g2 = grant(&h, 0, 10, 20, 6, 100);
    release(&h, g2, 25, 26, 200);
    CHECK(judged(chaos_judge_fencing, &h) == 0, "which was first is unknowable, so 7 then 6 is allowed");
    CHECK(judged(chaos_judge_mutex, &h) == 0, "hold [20,25) then [30,..)");
    chaos_history_free(&h);
}

static void fencing_compares_with_the_largest_earlier_token(void)
{
    chaos_history h;
    hist_init(&h);
    grant(&h, 0, 5, 10, 10, 50);
    grant(&h, 0, 0, 15, 3, 50); /* concurrent with the first: not ordered against it */
    grant(&h, 0, 100, 110, 9, 50);
    char *rep;
    CHECK(run(chaos_judge_fencing, &h, &rep) == 1, "9 is below the earlier 10 even though above 3");
    CHECK(strstr(rep, "token 9 issued after token 10"), "report: %s", rep);
    free(rep);
    chaos_history_free(&h);
}

/* ---- (c) latency, (d) statuses ------------------------------------------------------ */

static void latency_bounds_are_wait_plus_rounds_plus_margin(void)
{
    chaos_history h;
    hist_init(&h);
    /* defaults: node timeout 50, 3 rounds for acquire, 1 for release, margin 200 */
    other(&h, CHAOS_ACQUIRE, 0, 100 + 150 + 200, 409, "lock_held", 100);
    other(&h, CHAOS_RELEASE, 0, 250, 200, "", 0);
    CHECK(judged(chaos_judge_latency, &h) == 0, "exactly on the bound is in time");
    other(&h, CHAOS_ACQUIRE, 1000, 1000 + 451, 409, "lock_held", 100);
    other(&h, CHAOS_RELEASE, 0, 251, 200, "", 0);
    other(&h, CHAOS_INSPECT, 0, 5300, CHAOS_ST_TIMEOUT, "", 0); /* gave up 5 s past the bound */
    CHECK(judged(chaos_judge_latency, &h) == 3, "1 ms late acquire and release, and a timeout");
    chaos_history_free(&h);

    hist_init(&h);
    long late = other(&h, CHAOS_RELEASE, 0, 1250, 200, "", 0);
    CHECK(judged(chaos_judge_latency, &h) == 1, "a release 1 s over its bound");
    h.ev[late].allow_ns = MS(999);
    CHECK(judged(chaos_judge_latency, &h) == 1, "999 ms of measured starvation does not excuse 1000 ms");
    h.ev[late].allow_ns = MS(1000);
    CHECK(judged(chaos_judge_latency, &h) == 0, "1000 ms of measured starvation does");
    chaos_history_free(&h);
}

static void status_accepts_exactly_the_documented_set(void)
{
    static const struct {
        int op, status;
        const char *error;
        int ok;
    } cases[] = {
        {CHAOS_ACQUIRE, 409, "lock_held", 1},
        {CHAOS_ACQUIRE, 409, "lock_contended", 1},
        {CHAOS_ACQUIRE, 503, "quorum_unavailable", 1},
        {CHAOS_ACQUIRE, 503, "validity_exhausted", 1},
        {CHAOS_ACQUIRE, 503, "shutting_down", 0},
        {CHAOS_ACQUIRE, 409, "lease_not_found", 0},
        {CHAOS_ACQUIRE, 500, "internal", 0},
        {CHAOS_ACQUIRE, 418, "", 0},
        {CHAOS_ACQUIRE, CHAOS_ST_CONNERR, "", 0},
        {CHAOS_ACQUIRE, CHAOS_ST_BADRESP, "", 0},
        {CHAOS_ACQUIRE, CHAOS_ST_TIMEOUT, "", 1}, /* no answer: judged by (c) */
        {CHAOS_RELEASE, 200, "", 1},
        {CHAOS_RELEASE, 404, "lease_not_found", 1},
        {CHAOS_RELEASE, 503, "quorum_unavailable", 1},
        {CHAOS_RELEASE, 503, "release_unconfirmed", 1},
        {CHAOS_RELEASE, 503, "validity_exhausted", 0},
        {CHAOS_RELEASE, 400, "invalid_lease", 0},
        {CHAOS_INSPECT, 200, "", 1},
        {CHAOS_INSPECT, 503, "quorum_unavailable", 1},
        {CHAOS_INSPECT, 404, "not_found", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chaos_history h;
        hist_init(&h);
        other(&h, cases[i].op, 0, 1, cases[i].status, cases[i].error, 0);
        long v = judged(chaos_judge_status, &h);
        CHECK(v == !cases[i].ok, "case %zu: op %d status %d '%s' judged %ld", i, cases[i].op, cases[i].status,
              cases[i].error, v);
        chaos_history_free(&h);
    }
    chaos_history h;
    hist_init(&h);
    long g = grant(&h, 0, 0, 1, 1, 100);
    CHECK(judged(chaos_judge_status, &h) == 0, "a well-formed grant");
    strcpy(h.ev[g].shape, "201_lease_missing_or_invalid");
    CHECK(judged(chaos_judge_status, &h) == 1, "a 201 that breaks the contract's shape");
    chaos_history_free(&h);

    /* a 201 without a usable token still holds the lock for (a) */
    hist_init(&h);
    grant(&h, 0, 0, 1, 1, 500);
    g = grant(&h, 0, 10, 20, 0, 500);
    strcpy(h.ev[g].shape, "201_fencing_token_missing_or_<1");
    CHECK(judged(chaos_judge_mutex, &h) == 1, "the token-less grant overlaps the first");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "and is not ordered by token");
    chaos_history_free(&h);
}

/* Saves h with o and loads it back into back (emptied first) and o2. */
static void reload(const chaos_history *h, const chaos_judge_opts *o, chaos_history *back, chaos_judge_opts *o2)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f && chaos_history_save(h, o, f) == 0, "save");
    if (f)
        fclose(f);
    memset(back, 0, sizeof *back);
    f = buf ? fmemopen(buf, len, "r") : NULL;
    CHECK(f && chaos_history_load(back, o2, f) == 0, "load");
    if (f)
        fclose(f);
    free(buf);
}

/* ---- streamed holders (a), (b), (i) ---------------------------------------------- */

static long stream(chaos_history *h, int name, double sent, double recv, int64_t token, int64_t validity)
{
    long g = grant(h, name, sent, recv, token, validity);
    h->ev[g].op = CHAOS_STREAM;
    return g;
}

/* A line of stream g (or its end: CHAOS_LINE_CLOSED at `recv` is the client's decision). */
static long sline(chaos_history *h, long g, int kind, double recv, int64_t validity, const char *reason)
{
    chaos_event e = {.op = CHAOS_LINE, .name = h->ev[g].name, .t_send = MS(recv), .t_recv = MS(recv),
                     .status = kind, .validity_ms = validity, .ttl_ms = h->ev[g].ttl_ms, .link = g};
    snprintf(e.error, sizeof e.error, "%s", reason ? reason : "");
    return add(h, e);
}

/* Every kind of legal stream among ordinary holders of the same name. */
static void build_streams(chaos_history *h)
{
    hist_init(h);
    /* closed by its client at 250 (extended at 100 and 200, valid until 490) */
    long s1 = stream(h, 0, 0, 5, 1, 300);
    sline(h, s1, CHAOS_LINE_EXTENDED, 100, 290, NULL);
    sline(h, s1, CHAOS_LINE_EXTENDED, 200, 290, NULL);
    sline(h, s1, CHAOS_LINE_CLOSED, 250, 0, NULL);
    long g = grant(h, 0, 240, 260, 2, 300);
    release(h, g, 280, 281, 200);
    /* lost at 650, before 410 + 290 */
    long s2 = stream(h, 0, 285, 310, 3, 300);
    sline(h, s2, CHAOS_LINE_EXTENDED, 410, 290, NULL);
    sline(h, s2, CHAOS_LINE_LOST, 650, 0, "no_quorum");
    g = grant(h, 0, 640, 655, 4, 100);
    release(h, g, 700, 701, 200);
    /* released by a DELETE of its lease at 800 */
    long s3 = stream(h, 0, 750, 760, 5, 300);
    release(h, s3, 800, 801, 200);
    sline(h, s3, CHAOS_LINE_RELEASED, 802, 0, NULL);
    grant(h, 0, 790, 801, 6, 100); /* a waiter handed the lock as the DELETE went through */
    /* cut without a final line at 1050: held until 1000 + 290 all the same */
    long s4 = stream(h, 0, 950, 960, 7, 300);
    sline(h, s4, CHAOS_LINE_EXTENDED, 1000, 290, NULL);
    sline(h, s4, CHAOS_LINE_CUT, 1050, 0, NULL);
    g = grant(h, 0, 1200, 1290.5, 8, 100);
    release(h, g, 1300, 1301, 200);
    /* never extended, closed late: held until sent + validity (as any grant) */
    long s5 = stream(h, 0, 1400, 1410, 9, 100);
    sline(h, s5, CHAOS_LINE_CLOSED, 1600, 0, NULL);
    grant(h, 0, 1450, 1500.5, 10, 100);
}

static void streams_legal_history_passes(void)
{
    chaos_history h;
    build_streams(&h);
    char *rep;
    CHECK(run(chaos_judge_mutex, &h, &rep) == 0, "closed, lost, released, cut and unextended streams: %s", rep);
    free(rep);
    CHECK(judged(chaos_judge_fencing, &h) == 0, "tokens rise through streams and grants");
    CHECK(run(chaos_judge_streams, &h, &rep) == 0 && strstr(rep, "PASS (i)") && strstr(rep, "5 streams granted") &&
              strstr(rep, "4 extended, 1 lost, 1 released, 2 closed by their client, 1 ended without a final line"),
          "report: %s", rep);
    free(rep);
    CHECK(judged(chaos_judge_status, &h) == 0 && judged(chaos_judge_latency, &h) == 0,
          "lines are neither requests nor responses");
    CHECK(judged(chaos_judge_mutex_client_view, &h) == 1,
          "a client counting the unextended stream's validity from its grant line holds until 1510");
    chaos_history_free(&h);
}

/* build_streams() with the grant of token tok answered at recv: one overlap, the
 * stream's hold ended as `why` says. */
static void grant_answered_inside_a_stream(int64_t tok, double recv, const char *why)
{
    chaos_history h;
    build_streams(&h);
    for (long i = 0; i < h.n; i++)
        if (h.ev[i].token == tok)
            h.ev[i].t_recv = MS(recv);
    char *rep;
    CHECK(run(chaos_judge_mutex, &h, &rep) == 1 && strstr(rep, why), "token %ld answered at %.1f ms: %s", (long)tok,
          recv, rep);
    free(rep);
    chaos_history_free(&h);
}

static void streams_overlap_with_a_normal_holder_is_caught(void)
{
    chaos_history h;
    build_streams(&h);
    grant(&h, 0, 150, 160, 11, 50); /* inside s1 (5 .. its close at 250) */
    char *rep;
    CHECK(run(chaos_judge_mutex, &h, &rep) >= 1, "a grant inside a streamed hold");
    CHECK(strstr(rep, "FAIL (a)") && strstr(rep, "streamed grant") && strstr(rep, "stream closed by its client"),
          "evidence shows the streamed grant: %s", rep);
    free(rep);
    chaos_history_free(&h);

    /* the cut stream s4 holds until its last extended line's read + validity (1290) */
    grant_answered_inside_a_stream(8, 1289.5, "the validity announced last ran out");
    /* a lost line ends the hold when it is read, not before */
    grant_answered_inside_a_stream(4, 649, "final line read");

    /* two streamed holders of one name */
    hist_init(&h);
    long a = stream(&h, 1, 0, 5, 1, 300);
    sline(&h, a, CHAOS_LINE_EXTENDED, 100, 290, NULL);
    long b = stream(&h, 1, 300, 350, 2, 300); /* a holds until 390 */
    sline(&h, b, CHAOS_LINE_CLOSED, 400, 0, NULL);
    sline(&h, a, CHAOS_LINE_CLOSED, 500, 0, NULL);
    CHECK(judged(chaos_judge_mutex, &h) == 1, "two streams at once");
    chaos_history_free(&h);
}

static void streams_late_lost_and_fencing_are_caught(void)
{
    chaos_history h;
    hist_init(&h);
    long s = stream(&h, 0, 0, 5, 1, 300);
    sline(&h, s, CHAOS_LINE_EXTENDED, 100, 290, NULL);
    long l = sline(&h, s, CHAOS_LINE_LOST, 391, 0, "no_quorum"); /* the validity ended at 390 */
    h.ev[l].t_send = MS(100);
    char *rep;
    chaos_judge_stats st;
    memset(&st, 0, sizeof st);
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    o.stats = &st;
    size_t len;
    FILE *f = open_memstream(&rep, &len);
    long v = chaos_judge_streams(&h, &o, f);
    fclose(f);
    CHECK(v == 1 && st.late == 1 && st.late_lost == 1 && strstr(rep, "FAIL (i)") &&
              strstr(rep, "\"lost\" (no_quorum) read at 391.000 ms, 1.000 ms after the validity announced at 100.000 ms"),
          "a lost line 1 ms late: %s", rep);
    free(rep);
    h.ev[l].allow_ns = MS(1);
    CHECK(run(chaos_judge_streams, &h, &rep) == 0 && strstr(rep, "1 late only by measured CPU starvation"),
          "late by no more than the measured starvation: %s", rep);
    free(rep);
    h.ev[l].allow_ns = 0;
    h.ev[l].t_recv = MS(389);
    CHECK(judged(chaos_judge_streams, &h) == 0, "a lost line in time");
    chaos_history_free(&h);

    /* an extension read after the validity before it had ended: "lost" was due first */
    hist_init(&h);
    s = stream(&h, 0, 0, 5, 1, 300);
    sline(&h, s, CHAOS_LINE_EXTENDED, 306, 290, NULL);
    sline(&h, s, CHAOS_LINE_CLOSED, 400, 0, NULL);
    CHECK(run(chaos_judge_streams, &h, &rep) == 1 && strstr(rep, "\"extended\" read at 306.000 ms, 1.000 ms after"),
          "extended at 306, after the grant's validity ended at 305: %s", rep);
    free(rep);
    chaos_history_free(&h);

    /* no line after the final one; lines as documented */
    hist_init(&h);
    s = stream(&h, 0, 0, 5, 1, 300);
    sline(&h, s, CHAOS_LINE_RELEASED, 50, 0, NULL);
    sline(&h, s, CHAOS_LINE_EXTENDED, 60, 290, NULL);
    l = sline(&h, s, CHAOS_LINE_OTHER, 10, 0, NULL);
    strcpy(h.ev[l].shape, "line_without_a_documented_event");
    CHECK(run(chaos_judge_streams, &h, &rep) == 2 && strstr(rep, "a line after the stream's end") &&
              strstr(rep, "line_without_a_documented_event"),
          "report: %s", rep);
    free(rep);
    chaos_history_free(&h);

    /* (b) orders streamed grants with the rest */
    hist_init(&h);
    s = stream(&h, 0, 0, 5, 5, 100);
    sline(&h, s, CHAOS_LINE_CLOSED, 20, 0, NULL);
    grant(&h, 0, 30, 35, 4, 100);
    CHECK(judged(chaos_judge_fencing, &h) == 1, "token 4 after a streamed token 5");
    chaos_history_free(&h);

    /* a saved history keeps its streams */
    chaos_history back;
    chaos_judge_opts o2;
    build_streams(&h);
    reload(&h, &o, &back, &o2);
    CHECK(back.n == h.n, "%ld events back, %ld saved", back.n, h.n);
    grant(&back, 0, 150, 160, 11, 50);
    CHECK(judged(chaos_judge_streams, &back) == 0 && judged(chaos_judge_mutex, &back) == 1,
          "streams judged the same after a reload");
    chaos_history_free(&back);
    chaos_history_free(&h);
}

/* ---- whole histories --------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ULL;
static long rnd(long lo, long hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (long)(rng % (uint64_t)(hi - lo + 1));
}

/* A long legal schedule: per name, grants one after the other (some released, some left
 * to expire), concurrent waiters answered after the holder left, tokens rising. */
static void build_legal(chaos_history *h, int per_name)
{
    hist_init(h);
    for (int nm = 0; nm < 2; nm++) {
        double t = 0;
        int64_t tok = 1;
        for (int i = 0; i < per_name; i++) {
            double sent = t - (double)rnd(0, 50); /* may have been asked long before */
            double recv = t + (double)rnd(0, 3);
            int64_t validity = rnd(50, 400);
            long g = grant(h, nm, sent, recv, tok, validity);
            tok += rnd(1, 3);
            if (rnd(0, 9) < 8) {
                double rel = recv + (double)rnd(0, (long)validity / 2);
                release(h, g, rel, rel + 1, 200);
                t = rel + (double)rnd(0, 5);
            } else {
                t = sent + (double)validity + 0.5; /* the next one only after it expired */
            }
            if (rnd(0, 3) == 0)
                other(h, CHAOS_ACQUIRE, recv, recv + 2, 409, "lock_held", 0);
        }
    }
}

static void clean_long_history_passes_and_one_planted_fault_is_found(void)
{
    chaos_history h;
    build_legal(&h, 3000);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "no false overlap in a legal history");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "no false inversion in a legal history");
    CHECK(judged(chaos_judge_status, &h) == 0, "all statuses documented");
    /* plant a stale token in the middle of name 0 */
    long mid = -1, seen = 0;
    for (long i = 0; i < h.n && mid < 0; i++)
        if (h.ev[i].op == CHAOS_ACQUIRE && h.ev[i].status == 201 && h.ev[i].name == 0 && ++seen == 1500)
            mid = i;
    int64_t saved = h.ev[mid].token;
    h.ev[mid].token = 1;
    CHECK(judged(chaos_judge_fencing, &h) >= 1, "a token reset to 1 is found");
    h.ev[mid].token = saved;
    /* plant an early answer: a grant received while the previous one was still held */
    long prev = -1;
    for (long i = mid - 1; i >= 0 && prev < 0; i--)
        if (h.ev[i].op == CHAOS_ACQUIRE && h.ev[i].status == 201 && h.ev[i].name == 0)
            prev = i;
    int64_t saved_recv = h.ev[mid].t_recv, saved_send = h.ev[mid].t_send;
    h.ev[mid].t_recv = h.ev[prev].t_recv + MS(0.5);
    h.ev[mid].t_send = h.ev[prev].t_recv; /* still after prev's answer: not a fencing matter */
    if (h.ev[prev].link >= 0 && h.ev[h.ev[prev].link].t_send <= h.ev[mid].t_recv)
        h.ev[h.ev[prev].link].t_send = h.ev[mid].t_recv + MS(1); /* prev still held then */
    CHECK(judged(chaos_judge_mutex, &h) >= 1, "a double grant is found");
    h.ev[mid].t_recv = saved_recv;
    h.ev[mid].t_send = saved_send;
    chaos_history_free(&h);
}

static void history_survives_a_save_and_load(void)
{
    chaos_history h, back;
    build_legal(&h, 200);
    long g = grant(&h, 1, 1e6, 1e6 + 1, 1, 100); /* plant a fencing failure */
    h.ev[g].allow_ns = 123456789;
    snprintf(h.ev[g].lease, sizeof h.ev[g].lease, "chaos01-000abc-12345678");
    h.ev[g].inst = 1;
    h.ev[g].nested = 1;
    chaos_judge_opts o, o2;
    chaos_judge_opts_default(&o);
    o.node_timeout_ms = 77;
    reload(&h, &o, &back, &o2);
    CHECK(back.n == h.n, "%ld events back, %ld saved", back.n, h.n);
    CHECK(o2.node_timeout_ms == 77, "options come back");
    CHECK(back.n_names == 2 && !strcmp(back.names[1], "beta"), "names come back");
    int same = back.n == h.n;
    for (long i = 0; same && i < h.n; i++)
        same = back.ev[i].t_send == h.ev[i].t_send && back.ev[i].t_recv == h.ev[i].t_recv &&
               back.ev[i].token == h.ev[i].token && back.ev[i].link == h.ev[i].link &&
               back.ev[i].status == h.ev[i].status && !strcmp(back.ev[i].error, h.ev[i].error) &&
               back.ev[i].allow_ns == h.ev[i].allow_ns && !strcmp(back.ev[i].lease, h.ev[i].lease) &&
               back.ev[i].inst == h.ev[i].inst && back.ev[i].nested == h.ev[i].nested;
    CHECK(same, "events come back identical");
    CHECK(judged(chaos_judge_fencing, &back) == judged(chaos_judge_fencing, &h), "same verdict after reload");
    chaos_history_free(&h);
    chaos_history_free(&back);
}

/* ---- (j) readers and writers, (k) semaphores -------------------------------------- */

/* hist_init() plus name 2, "sem", a semaphore of `permits` permits. */
static void hist_init_sem(chaos_history *h, int permits)
{
    hist_init(h);
    strcpy(h->names[2], "sem");
    h->permits[2] = permits;
    h->n_names = 3;
}

static long reader(chaos_history *h, int name, double sent, double recv, int64_t token, int64_t validity)
{
    long g = grant(h, name, sent, recv, token, validity);
    h->ev[g].mode = CHAOS_MODE_SHARED;
    return g;
}

/* A permit of the semaphore "sem" (name 2), on slot `slot`. */
static long permit(chaos_history *h, double sent, double recv, int64_t token, int64_t validity, int slot)
{
    long g = grant(h, 2, sent, recv, token, validity);
    h->ev[g].slot = slot;
    return g;
}

/* Runs judge fn with stats; the report in *report (caller frees). */
static long run_stats(judge_fn fn, const chaos_history *h, chaos_judge_stats *st, char **report)
{
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    memset(st, 0, sizeof *st);
    o.stats = st;
    size_t len;
    FILE *f = open_memstream(report, &len);
    if (!f)
        exit(1);
    long v = fn(h, &o, f);
    fclose(f);
    return v;
}

/* A writer, then five readers at once (two released, three left to expire, one
 * streamed and closed), then a writer after the last reader's hold. */
static void build_readers(chaos_history *h)
{
    hist_init(h);
    long w = grant(h, 0, 0, 5, 7, 500);
    release(h, w, 50, 51, 200);
    long r1 = reader(h, 0, 45, 50, 7, 300); /* asked during the writer's hold, answered at its release */
    release(h, r1, 200, 201, 200);
    long r2 = reader(h, 0, 52, 60, 7, 300);
    release(h, r2, 250, 251, 200);
    reader(h, 0, 60, 70, 7, 300);           /* held until 60 + 300 */
    reader(h, 0, 61, 80, 7, 300);           /* until 361 */
    long s = reader(h, 0, 62, 90, 7, 300);
    h->ev[s].op = CHAOS_STREAM;
    sline(h, s, CHAOS_LINE_EXTENDED, 150, 290, NULL); /* until 440 */
    sline(h, s, CHAOS_LINE_CLOSED, 400, 0, NULL);
    long w2 = grant(h, 0, 300, 400, 8, 500); /* after every reader's hold */
    release(h, w2, 450, 451, 200);
    reader(h, 0, 455, 460, 8, 300);
}

static void shared_readers_together_pass(void)
{
    chaos_history h;
    build_readers(&h);
    chaos_judge_stats st;
    char *rep;
    CHECK(run_stats(chaos_judge_shared, &h, &st, &rep) == 0 && strstr(rep, "PASS (j)") && st.shared_grants == 6 &&
              st.shared_streams == 1 && st.max_readers == 5 && st.readers_together == 4 && st.reader_writer == 0,
          "five readers at once between two writers: %s", rep);
    free(rep);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "(a) leaves readers alone");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "(b) leaves readers' shared token 7 alone");
    CHECK(judged(chaos_judge_status, &h) == 0 && judged(chaos_judge_streams, &h) == 0, "(d), (i) as usual");
    chaos_history_free(&h);

    /* a reader of a name no writer ever held: token 0 */
    hist_init(&h);
    reader(&h, 1, 0, 5, 0, 100);
    reader(&h, 1, 1, 6, 0, 100);
    CHECK(judged(chaos_judge_shared, &h) == 0, "token 0 with no writer before");
    chaos_history_free(&h);
}

/* build_readers() with one more event planted by plant(); (j) must find `want`
 * violations and its report name `why`. */
static void readers_planted(void (*plant)(chaos_history *), long want, const char *why)
{
    chaos_history h;
    build_readers(&h);
    plant(&h);
    char *rep;
    long v = run(chaos_judge_shared, &h, &rep);
    CHECK(v == want && strstr(rep, "FAIL (j)") && strstr(rep, why), "want %ld: %s", want, rep);
    free(rep);
    chaos_history_free(&h);
}

static void plant_writer_among_readers(chaos_history *h)
{
    long w = grant(h, 0, 100, 120, 8, 500); /* while five readers hold ((b)'s business: token 8 again) */
    release(h, w, 130, 131, 200);
}

static void plant_reader_in_a_writer(chaos_history *h)
{
    reader(h, 0, 405, 420, 8, 100); /* inside w2's hold [400, 450) */
}

static void plant_reader_before_a_writer_let_go(chaos_history *h)
{
    reader(h, 0, 30, 49.5, 7, 100); /* 0.5 ms before the first writer's release */
}

static void plant_streamed_reader_past_its_writer(chaos_history *h)
{
    /* a streamed reader cut at 430 is held until 390 + 290 = 680: the reader at 460
     * is fine, but a writer answered at 600 is beside it */
    long s = reader(h, 0, 300, 310, 8, 300);
    h->ev[s].op = CHAOS_STREAM;
    sline(h, s, CHAOS_LINE_EXTENDED, 390, 290, NULL);
    sline(h, s, CHAOS_LINE_CUT, 430, 0, NULL);
    grant(h, 0, 590, 600, 9, 100);
}

static void plant_low_reader_token(chaos_history *h)
{
    reader(h, 0, 452, 470, 7, 100); /* asked after w2 (token 8) was answered */
}

static void plant_writer_token_not_above_a_reader(chaos_history *h)
{
    grant(h, 0, 760, 770, 8, 100); /* asked after the reader of token 8 answered at 460 (held until 755) */
}

static void shared_reader_with_a_writer_is_caught(void)
{
    /* the writer overlaps five readers: each reader's hold is one finding */
    readers_planted(plant_writer_among_readers, 5, "a reader and a writer");
    readers_planted(plant_reader_in_a_writer, 1, "a reader and a writer for 30.000 ms (from 420.000 to 450.000 ms)");
    readers_planted(plant_reader_before_a_writer_let_go, 1, "for 0.500 ms");
    /* the streamed reader [310, 680) overlaps w2 [400, 450) and the writer at 600 */
    readers_planted(plant_streamed_reader_past_its_writer, 2, "streamed shared grant");
    readers_planted(plant_low_reader_token, 1, "reader's token 7 below token 8 of a writer");
    readers_planted(plant_writer_token_not_above_a_reader, 1, "writer's token 8 not above token 8 of a reader");

    /* touching holds are no overlap: a reader answered as the writer's release is sent */
    chaos_history h;
    hist_init(&h);
    long w = grant(&h, 0, 0, 5, 3, 500);
    release(&h, w, 50, 51, 200);
    reader(&h, 0, 10, 50, 3, 100);
    CHECK(judged(chaos_judge_shared, &h) == 0, "[5,50) then [50,..)");
    /* a reader asked before the writer's answer may carry the older token */
    reader(&h, 0, 4, 60, 2, 100);
    CHECK(judged(chaos_judge_shared, &h) == 0, "asked at 4, before the writer's answer at 5: not ordered");
    /* nor is a writer asked before a reader's answer */
    grant(&h, 0, 49, 200, 3, 100); /* readers held until 110 and 104 */
    CHECK(judged(chaos_judge_shared, &h) == 0, "asked at 49, before the readers' answers at 50 and 60: not ordered");
    grant(&h, 0, 61, 400, 4, 100);
    CHECK(judged(chaos_judge_shared, &h) == 0, "asked at 61, after readers of tokens 2 and 3: token 4 is above");
    chaos_history_free(&h);
}

static void semaphore_n_holders_pass(void)
{
    chaos_history h;
    hist_init_sem(&h, 2);
    long p1 = permit(&h, 0, 5, 1, 500, 0);
    long p2 = permit(&h, 1, 10, 2, 500, 1);
    release(&h, p1, 50, 51, 200);
    permit(&h, 20, 50, 3, 100, 0); /* the third starts as the first's release is sent */
    release(&h, p2, 120, 121, 200);
    grant(&h, 0, 0, 1, 1, 500); /* a lock beside it: no permit */
    chaos_judge_stats st;
    char *rep;
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) == 0 && strstr(rep, "PASS (k)") && st.sem_grants == 3 &&
              st.max_permits[2] == 2 && strstr(rep, "sem 2 of 2"),
          "two permits of two at once: %s", rep);
    free(rep);
    CHECK(judged(chaos_judge_mutex, &h) == 0 && judged(chaos_judge_fencing, &h) == 0,
          "(a) and (b) leave semaphore names alone");
    CHECK(judged(chaos_judge_shared, &h) == 0, "(j) too");
    chaos_history_free(&h);

    hist_init_sem(&h, 5);
    for (int i = 0; i < 5; i++)
        permit(&h, i, 10 + i, 1 + i, 300, i);
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) == 0 && st.max_permits[2] == 5, "five of five: %s", rep);
    free(rep);
    chaos_history_free(&h);
}

static void semaphore_n_plus_one_holders_are_caught(void)
{
    chaos_history h;
    hist_init_sem(&h, 2);
    long p1 = permit(&h, 0, 5, 1, 500, 0);
    permit(&h, 1, 10, 2, 500, 1);
    release(&h, p1, 50, 51, 200);
    permit(&h, 20, 49, 3, 100, 0); /* 1 ms before the first's release: three at once */
    chaos_judge_stats st;
    char *rep;
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) == 1 && st.sem_over == 1 && st.max_permits[2] == 3 &&
              strstr(rep, "FAIL (k)") && strstr(rep, "name sem (2 permits): 3 holders at once from 49.000 to 50.000 ms") &&
              strstr(rep, "permit (slot 0) grant"),
          "three holders of two permits: %s", rep);
    free(rep);
    chaos_history_free(&h);

    /* with one permit a semaphore is a lock: two overlapping holds fail */
    hist_init_sem(&h, 1);
    permit(&h, 0, 5, 1, 100, 0);
    permit(&h, 10, 99.9, 2, 100, 0); /* the first holds until 0 + 100 */
    CHECK(judged(chaos_judge_semaphores, &h) == 1, "two holders of one permit");
    chaos_history_free(&h);

    /* streamed permits are holds like the rest */
    hist_init_sem(&h, 2);
    long s = permit(&h, 0, 5, 1, 300, 0);
    h.ev[s].op = CHAOS_STREAM;
    sline(&h, s, CHAOS_LINE_EXTENDED, 100, 290, NULL); /* held until 390 */
    sline(&h, s, CHAOS_LINE_CLOSED, 380, 0, NULL);
    permit(&h, 200, 210, 2, 300, 1);
    permit(&h, 300, 370, 3, 300, 0);
    CHECK(judged(chaos_judge_semaphores, &h) == 1, "a third permit while a stream still holds");
    chaos_history_free(&h);
}

static void semaphore_token_regressions_are_caught(void)
{
    chaos_history h;
    hist_init_sem(&h, 3);
    permit(&h, 0, 5, 5, 100, 0);
    permit(&h, 1, 6, 4, 100, 1); /* concurrent with the first: not ordered */
    permit(&h, 10, 12, 6, 100, 2);
    CHECK(judged(chaos_judge_semaphores, &h) == 0, "5, 4 (concurrent), then 6");
    permit(&h, 200, 210, 6, 100, 0); /* after every one of them */
    chaos_judge_stats st;
    char *rep;
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) == 2 && st.sem_inversions == 1 && st.sem_duplicates == 1 &&
              strstr(rep, "FAIL (k)") && strstr(rep, "name sem: token 6 issued twice"),
          "token 6 again: an inversion and a duplicate: %s", rep);
    free(rep);
    h.ev[h.n - 1].token = 3;
    CHECK(run(chaos_judge_semaphores, &h, &rep) == 1 && strstr(rep, "token 3 issued after token 6"), "3 after 6: %s",
          rep);
    free(rep);
    chaos_history_free(&h);
}

/* A long legal mixed history: on name 0, writers one after the other with groups of
 * readers between them (readers' holds touching the writers' ends); on "sem" (N
 * permits), N lanes of holds back to back, so all N are held almost all the time. */
static void permit_tokens_by_answer(chaos_history *h);

static void build_mixed(chaos_history *h, int rounds, int permits)
{
    hist_init_sem(h, permits);
    double t = 0;
    int64_t tok = 1;
    for (int i = 0; i < rounds; i++) {
        long w = grant(h, 0, t - (double)rnd(0, 20), t, tok, rnd(50, 300));
        double end = t + (double)rnd(1, 40);
        release(h, w, end, end + 1, 200);
        double readers_end = end;
        for (int k = rnd(0, 6); k > 0; k--) {
            double recv = end + (double)rnd(0, 30);
            long r = reader(h, 0, end - (double)rnd(0, 10), recv, tok, rnd(50, 300));
            double rel = recv + (double)rnd(0, 40);
            release(h, r, rel, rel + 1, 200);
            if (rel > readers_end)
                readers_end = rel;
        }
        tok += rnd(1, 3);
        t = readers_end + (double)rnd(0, 3);
    }
    double lane[64] = {0};
    for (int i = 0; i < rounds * permits; i++) {
        int l = (int)rnd(0, permits - 1);
        double recv = lane[l];
        /* held until its release (validity outlasts it): no gap in the lane */
        long p = permit(h, recv - (double)rnd(0, 20), recv, 0, rnd(100, 300), l);
        double rel = recv + (double)rnd(1, 40);
        release(h, p, rel, rel + 1, 200);
        lane[l] = rel;
    }
    permit_tokens_by_answer(h);
}

static const chaos_history *g_hist; /* for qsort */

static int cmp_recv(const void *a, const void *b)
{
    const chaos_event *x = &g_hist->ev[*(const long *)a], *y = &g_hist->ev[*(const long *)b];
    if (x->t_recv != y->t_recv)
        return x->t_recv < y->t_recv ? -1 : 1;
    return *(const long *)a < *(const long *)b ? -1 : 1;
}

/* The permits' tokens 1, 2, ... in the order of their answers: a permit asked after
 * another's answer has a larger one. */
static void permit_tokens_by_answer(chaos_history *h)
{
    long *ix = malloc(((size_t)h->n + 1) * sizeof *ix), k = 0;
    if (!ix)
        exit(1);
    for (long i = 0; i < h->n; i++)
        if (h->ev[i].name == 2 && h->ev[i].op == CHAOS_ACQUIRE)
            ix[k++] = i;
    g_hist = h;
    qsort(ix, (size_t)k, sizeof *ix, cmp_recv);
    for (long j = 0; j < k; j++)
        h->ev[ix[j]].token = j + 1;
    free(ix);
}

static void mixed_long_history_passes_and_planted_faults_are_found(void)
{
    chaos_history h;
    build_mixed(&h, 2000, 3);
    chaos_judge_stats st;
    char *rep;
    CHECK(run_stats(chaos_judge_shared, &h, &st, &rep) == 0 && st.shared_grants > 4000, "legal readers: %s", rep);
    free(rep);
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) == 0 && st.max_permits[2] == 3, "legal permits: %s", rep);
    free(rep);
    CHECK(judged(chaos_judge_mutex, &h) == 0 && judged(chaos_judge_fencing, &h) == 0, "legal writers");
    /* a writer from the middle of the run whose successor comes 1 ms or more after its
     * release is sent (a reader then held for 0.5 ms from that release is legal) */
    long w = -1, prev = -1, seen = 0;
    for (long i = 0; i < h.n && w < 0; i++) {
        if (h.ev[i].op != CHAOS_ACQUIRE || h.ev[i].name != 0 || h.ev[i].mode != CHAOS_MODE_EXCLUSIVE)
            continue;
        if (++seen > 1000 && h.ev[i].t_recv >= h.ev[h.ev[prev].link].t_send + MS(1))
            w = prev;
        prev = i;
    }
    CHECK(w >= 0, "a writer with a gap after it");
    int64_t let_go = h.ev[h.ev[w].link].t_send;
    long r = reader(&h, 0, 0, 0, h.ev[w].token, 1);
    h.ev[r].t_send = let_go - MS(1);
    h.ev[r].t_recv = let_go - MS(0.5); /* held [let_go - 0.5, let_go) */
    CHECK(judged(chaos_judge_shared, &h) == 1, "one reader planted inside a writer's hold");
    h.ev[r].t_send = let_go - MS(0.5);
    h.ev[r].t_recv = let_go; /* held [let_go, let_go + 0.5): touching, legal */
    CHECK(judged(chaos_judge_shared, &h) == 0, "the same reader answered as the writer let go");
    h.ev[r].token = h.ev[w].token - 1;
    h.ev[r].t_send = h.ev[w].t_recv + 1;
    CHECK(judged(chaos_judge_shared, &h) == 1, "its token below the writer's answered before it was asked");
    chaos_history_free(&h);

    /* a fourth permit anywhere in the run (all three lanes are always held) */
    build_mixed(&h, 2000, 3);
    long p = permit(&h, 0, 0, 0, 100, 0);
    h.ev[p].t_recv = MS(20000);
    h.ev[p].t_send = h.ev[p].t_recv - MS(1);
    release(&h, p, 20010, 20011, 200);
    permit_tokens_by_answer(&h); /* its token in order */
    CHECK(run_stats(chaos_judge_semaphores, &h, &st, &rep) >= 1 && st.sem_over >= 1 && st.max_permits[2] == 4,
          "N + 1 holders: %s", rep);
    free(rep);
    chaos_history_free(&h);
}

static void mixed_history_survives_a_save_and_load(void)
{
    chaos_history h, back;
    build_mixed(&h, 100, 2);
    plant_reader_in_a_writer(&h); /* name 0, at 405..420: somewhere in the run */
    chaos_judge_opts o, o2;
    chaos_judge_opts_default(&o);
    reload(&h, &o, &back, &o2);
    int same = back.n == h.n && back.n_names == 3 && back.permits[2] == 2 && back.permits[0] == 0;
    for (long i = 0; same && i < h.n; i++)
        same = back.ev[i].mode == h.ev[i].mode && back.ev[i].slot == h.ev[i].slot;
    CHECK(same, "modes, slots and permits come back");
    CHECK(judged(chaos_judge_shared, &back) == judged(chaos_judge_shared, &h) &&
              judged(chaos_judge_semaphores, &back) == judged(chaos_judge_semaphores, &h),
          "same (j) and (k) after a reload");
    chaos_history_free(&h);
    chaos_history_free(&back);

    /* a v2 history (no mode, no slot, no permits line) still loads: exclusive locks */
    static const char v2[] = "# chaos history v2\n# names alpha\n"
                             "A\t0\t0\t0\t5000000\t201\t-\t-\t1\t100\t110\t0\t-1\t0\n"
                             "A\t0\t0\t1000000\t6000000\t201\t-\t-\t2\t100\t110\t0\t-1\t0\n";
    FILE *f = fmemopen((void *)v2, sizeof v2 - 1, "r");
    memset(&back, 0, sizeof back);
    CHECK(f && chaos_history_load(&back, &o2, f) == 0 && back.n == 2 && back.ev[1].mode == CHAOS_MODE_EXCLUSIVE &&
              back.permits[0] == 0,
          "a v2 history loads");
    if (f)
        fclose(f);
    CHECK(judged(chaos_judge_mutex, &back) == 1, "and is judged as before");
    chaos_history_free(&back);
}

/* ---- starvation accounting --------------------------------------------------------- */

static void spin_ms(long ms)
{
    long long until = now_ms() + ms;
    volatile unsigned long x = 0;
    while (now_ms() < until)
        x++;
}

/* ---- (f) resources under sanitizer builds ------------------------------------------- */

static int resources(const chaos_resources *r, char *line, size_t linesz)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        exit(1);
    int failed = chaos_judge_resources(r, f);
    fclose(f);
    snprintf(line, linesz, "%s", buf ? buf : "");
    free(buf);
    return failed;
}


/* ---- reentrant holds, duplex streams, (l), (m) -------------------------------------- */

static void with_lease(chaos_history *h, long i, const char *lease)
{
    snprintf(h->ev[i].lease, sizeof h->ev[i].lease, "%s", lease);
}

static void reentrant_reentry_is_no_holder_of_its_own(void)
{
    chaos_history h;
    hist_init(&h);
    long outer = grant(&h, 0, 0, 5, 7, 900);
    long inner = grant(&h, 0, 100, 102, 7, 300); /* the same token, inside the outer hold */
    h.ev[inner].nested = 1;
    release(&h, inner, 200, 202, 200);
    h.ev[h.ev[inner].link].nested = 1;
    release(&h, outer, 400, 402, 200);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "a re-entry inside its own hold is no second holder");
    CHECK(judged(chaos_judge_fencing, &h) == 0, "a re-entry's token is not a second issue of it");
    /* the re-entry shortened the hold (issue 22, finding 1): a rival inside the outer
     * validity is a double grant all the same */
    grant(&h, 0, 250, 260, 8, 100);
    CHECK(judged(chaos_judge_mutex, &h) == 1, "a rival inside the outer hold is caught");
    chaos_history_free(&h);
}

static void duplex_alive_lines_extend_the_hold_from_the_ping(void)
{
    chaos_history h;
    hist_init(&h);
    long g = grant(&h, 0, 0, 5, 1, 300);
    h.ev[g].op = CHAOS_STREAM;
    /* ping sent at 200, answered at 205 with 290 ms: the client holds until 490 */
    chaos_event a = {.op = CHAOS_LINE, .name = 0, .t_send = MS(200), .t_recv = MS(205), .status = CHAOS_LINE_ALIVE,
                     .validity_ms = 290, .ttl_ms = 310, .link = g};
    add(&h, a);
    grant(&h, 0, 495, 500, 2, 100);
    CHECK(judged(chaos_judge_mutex, &h) == 0, "a grant after the last answer's validity passes");
    CHECK(judged(chaos_judge_streams, &h) == 0, "an alive line is in contract");
    h.ev[h.n - 1].t_send = MS(470); /* the same grant, answered inside the validity told */
    h.ev[h.n - 1].t_recv = MS(480);
    CHECK(judged(chaos_judge_mutex, &h) == 1, "a grant inside the validity an answer told is caught");
    chaos_history_free(&h);
}

/* A history for (l): a writer that hung up at 100 (its lease "w1"), a grant "g1" held
 * 0..300 and released (answered released: true at 305). */
static void build_leftovers(chaos_history *h)
{
    hist_init(h);
    chaos_event w = {.op = CHAOS_ACQUIRE, .name = 0, .t_send = MS(0), .t_recv = MS(100), .status = CHAOS_ST_HUNGUP,
                     .wait_ms = 20000, .ttl_ms = 500, .link = -1};
    snprintf(w.lease, sizeof w.lease, "w1");
    add(h, w);
    long g = grant(h, 1, 0, 5, 1, 490);
    with_lease(h, g, "g1");
    long r = release(h, g, 300, 305, 200);
    with_lease(h, r, "g1");
}

static void obs(chaos_obs_set *s, long pass, double t, int master, char kind, int name, int64_t left, const char *lease)
{
    chaos_obs o = {.t = MS(t), .pass = pass, .master = master, .kind = kind, .name = name, .count = 1, .left_ms = left};
    snprintf(o.lease, sizeof o.lease, "%s", lease);
    if (chaos_obs_add(s, &o) < 0)
        exit(1);
}

static long leftovers(const chaos_history *h, const chaos_obs_set *s)
{
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    char *rep = NULL;
    size_t len;
    FILE *f = open_memstream(&rep, &len);
    long v = chaos_judge_leftovers(h, s, &o, f);
    fclose(f);
    free(rep);
    return v;
}

static void leftovers_mark_outliving_its_writer_is_caught(void)
{
    chaos_history h;
    chaos_obs_set s;
    build_leftovers(&h);
    memset(&s, 0, sizeof s);
    obs(&s, 1, 1000, 0, CHAOS_OBS_MARK, 0, 19000, "w1"); /* 0.9 s after the hang-up: within 3 s */
    obs(&s, 2, 3500, 0, CHAOS_OBS_MARK, 0, 17000, "w1"); /* 3.4 s: within 3 s + 500 ms */
    CHECK(leftovers(&h, &s) == 0, "a mark within the bound passes");
    obs(&s, 3, 3700, 0, CHAOS_OBS_MARK, 0, 16800, "w1"); /* 3.6 s: the writer is long gone */
    CHECK(leftovers(&h, &s) == 1, "a mark 3.6 s after its writer hung up is caught");
    /* unless the master was frozen meanwhile: the queued mark ran at its resumption */
    chaos_pause_add(&s, 0, MS(50), MS(1500));
    CHECK(leftovers(&h, &s) == 0, "counted from the master's resumption");
    s.n_p = 0;
    s.skip_masters = 1; /* its clock was moved */
    CHECK(leftovers(&h, &s) == 0, "a master whose clock moved is not judged");
    s.skip_masters = 0;
    obs(&s, 4, 3800, 1, CHAOS_OBS_MARK, 0, 1000, "nobody-knows");
    CHECK(leftovers(&h, &s) == 1, "a lease the history does not know is not judged");
    chaos_obs_free(&s);
    chaos_history_free(&h);
}

static void leftovers_keys_and_released_quorums(void)
{
    chaos_history h;
    chaos_obs_set s;
    build_leftovers(&h);
    memset(&s, 0, sizeof s);
    /* released at 305 (answered); keys on two masters until their ttl: legal */
    obs(&s, 1, 310, 0, CHAOS_OBS_KEY, 1, 180, "g1");
    obs(&s, 1, 311, 1, CHAOS_OBS_KEY, 1, 180, "g1");
    CHECK(leftovers(&h, &s) == 0, "a minority keeping a released key until its ttl passes");
    obs(&s, 1, 312, 2, CHAOS_OBS_KEY, 1, 180, "g1");
    CHECK(leftovers(&h, &s) == 1, "a quorum holding a lease after released: true is caught");
    chaos_pause_add(&s, CHAOS_PAUSE_OUT + 2, MS(200), MS(2000));
    CHECK(leftovers(&h, &s) == 0, "a master out of quorums (it forgot) is not counted");
    obs(&s, 5, 300 + 490 + 1000 + 50, 3, CHAOS_OBS_READER, 1, 300, "g1");
    CHECK(leftovers(&h, &s) == 1, "an entry past ttl + 1 s after its holder let go is caught");
    chaos_obs_free(&s);
    chaos_history_free(&h);
}

static void leftovers_samples_survive_a_save_and_load(void)
{
    chaos_history h;
    chaos_obs_set s, back;
    build_leftovers(&h);
    memset(&s, 0, sizeof s);
    memset(&back, 0, sizeof back);
    obs(&s, 3, 3200, 0, CHAOS_OBS_MARK, 0, 16800, "w1");
    chaos_pause_add(&s, 3, MS(10), MS(20));
    s.skip_masters = 16;
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    char *buf = NULL;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    CHECK(chaos_obs_save(&s, &h, &o, f) == 0, "saved");
    fclose(f);
    f = fmemopen(buf, len, "r");
    CHECK(f && chaos_obs_load(&back, &h, f) == 0, "loaded");
    if (f)
        fclose(f);
    CHECK(back.n == 1 && back.o[0].t == MS(3200) && back.o[0].kind == 'w' && !strcmp(back.o[0].lease, "w1") &&
              back.n_p == 1 && back.skip_masters == 16,
          "the samples come back");
    free(buf);
    chaos_obs_free(&s);
    chaos_obs_free(&back);
    chaos_history_free(&h);
}

static void sampler_reads_each_kind_of_entry(void)
{
    chaos_history h;
    hist_init(&h);
    strcpy(h.names[2], "chaos:sem-a");
    h.n_names = 3;
    chaos_obs_set s;
    memset(&s, 0, sizeof s);
    chaos_sampler_parse("k|alpha|L1.0123456789abcdef!*2|900\nw|beta|L2|1500\nr|alpha|L3|300\n"
                        "s|chaos:sem-a#1|L4.fedcba9876543210|400\nk|unknown|L5|10",
                        2, MS(7), 9, "redlock:", &h, &s);
    CHECK(s.n == 4, "%ld entries (the unknown name skipped)", s.n);
    CHECK(s.n >= 4 && s.o[0].kind == 'k' && s.o[0].count == 2 && !strcmp(s.o[0].lease, "L1") && s.o[0].left_ms == 900 &&
              s.o[0].name == 0 && s.o[0].master == 2 && s.o[0].pass == 9,
          "a lock key: lease, count, ttl");
    CHECK(s.n >= 4 && s.o[1].kind == 'w' && s.o[1].name == 1 && !strcmp(s.o[1].lease, "L2"), "a writer mark");
    CHECK(s.n >= 4 && s.o[2].kind == 'r' && !strcmp(s.o[2].lease, "L3"), "a reader entry");
    CHECK(s.n >= 4 && s.o[3].kind == 's' && s.o[3].name == 2 && !strcmp(s.o[3].lease, "L4"), "a permit slot");
    chaos_obs_free(&s);
}

static void stopped_holders_are_judged_by_their_last_ping(void)
{
    chaos_judge_opts o;
    chaos_judge_opts_default(&o);
    chaos_stopped ok = {.duplex = 1, .ttl_ms = 400, .silence_ms = 400, .last_ping = MS(1000), .stopped = MS(1010),
                        .held_last = MS(1300), .freed = MS(1500)};
    chaos_stopped late = ok;
    late.held_last = MS(1000 + 400 + 100 + 200 + 50); /* past silence + 2 x 50 + 200 */
    chaos_stopped faulty = late;
    faulty.faults = 1; /* a release that reached no quorum: a ttl more */
    chaos_stopped never = ok;
    never.freed = 0;
    never.held_last = MS(9000);
    never.gave_up = MS(9100);
    chaos_stopped unknown = ok;
    unknown.freed = 0;
    unknown.held_last = 0;
    char *rep = NULL;
    size_t len;
    FILE *f = open_memstream(&rep, &len);
    chaos_stopped a[] = {ok, faulty, unknown};
    CHECK(chaos_judge_stopped(a, 3, &o, f) == 0, "freed in time, with a fault, or undetermined: pass");
    chaos_stopped b[] = {ok, late, never};
    CHECK(chaos_judge_stopped(b, 3, &o, f) == 2, "told held past the bound, and never freed: caught");
    fclose(f);
    free(rep);
}


static void resources_judge_rss_by_the_build(void)
{
    /* the readings of a 30 s run of an ASan build that leaked nothing */
    chaos_resources r = {.base_fds = 20, .end_fds = 21, .fd_slack = 8, .base_rss_kb = 18 * 1024,
                         .end_rss_kb = 117 * 1024, .rss_slack_kb = 16384, .rss_slack_pct = 25,
                         .peak_fds = 40, .peak_rss_kb = 120 * 1024, .exited = 1};
    char line[1024];
    CHECK(resources(&r, line, sizeof line) == 1 && strstr(line, "(limit 34.0 MB)"),
          "default build: 18 -> 117 MB is over the limit: %s", line);
    r.end_rss_kb = 34 * 1024;
    CHECK(resources(&r, line, sizeof line) == 0, "default build: 34 MB is on the limit: %s", line);
    r.end_rss_kb = 117 * 1024;
    r.sanitizers = CHAOS_SAN_UNDEFINED;
    CHECK(resources(&r, line, sizeof line) == 1, "UBSan leaves the allocator alone: still judged: %s", line);

    r.sanitizers = CHAOS_SAN_ADDRESS | CHAOS_SAN_UNDEFINED;
    CHECK(resources(&r, line, sizeof line) == 0 && strstr(line, "not judged") && strstr(line, "none reported"),
          "ASan: RSS growth is the quarantine, no leak report: %s", line);
    snprintf(r.leak_report, sizeof r.leak_report, "==1==ERROR: LeakSanitizer: detected memory leaks ... "
                                                  "SUMMARY: AddressSanitizer: 64 byte(s) leaked in 1 allocation(s).");
    CHECK(resources(&r, line, sizeof line) == 1 && strstr(line, "64 byte(s) leaked"),
          "ASan: a LeakSanitizer report at exit fails (f): %s", line);
    r.exited = 0;
    CHECK(resources(&r, line, sizeof line) == 0 && strstr(line, "did not exit"),
          "ASan: no exit, no leak check: not judged here ((e)/(h) fail the run): %s", line);
    r.exited = 1;
    r.leak_report[0] = '\0';
    r.end_fds = 29;
    CHECK(resources(&r, line, sizeof line) == 1, "ASan: fds are judged as in any build: %s", line);

    r.end_fds = 21;
    r.sanitizers = CHAOS_SAN_THREAD;
    CHECK(resources(&r, line, sizeof line) == 0 && strstr(line, "not judged") && strstr(line, "no leak checker"),
          "TSan: RSS not judged, and the line says there is no leak check: %s", line);
}

static void sanitizers_are_read_from_the_binary(void)
{
    /* this program is built with the same SAN_FLAGS as the service */
    FILE *self = fopen("/proc/self/exe", "re");
    CHECK(self != NULL, "cannot open /proc/self/exe");
    if (!self)
        return;
    unsigned san = chaos_sanitizers_in(self);
    fclose(self);
#if defined(__SANITIZE_ADDRESS__)
    CHECK(san & CHAOS_SAN_ADDRESS, "an ASan build reads as %s", chaos_sanitizer_names(san));
#else
    CHECK(!(san & CHAOS_SAN_ADDRESS), "a build without ASan reads as %s", chaos_sanitizer_names(san));
#endif
#if defined(__SANITIZE_THREAD__)
    CHECK(san & CHAOS_SAN_THREAD, "a TSan build reads as %s", chaos_sanitizer_names(san));
#else
    CHECK(!(san & CHAOS_SAN_THREAD), "a build without TSan reads as %s", chaos_sanitizer_names(san));
#endif
    static char not_elf[4096] = "__asan_init __tsan_init __ubsan_handle_add_overflow";
    FILE *f = fmemopen(not_elf, sizeof not_elf, "r");
    CHECK(f && chaos_sanitizers_in(f) == 0, "names outside an ELF symbol table do not count");
    if (f)
        fclose(f);
}

static void schedstat_measures_time_spent_waiting_for_a_cpu(void)
{
    /* two busy tasks pinned to one CPU for 400 ms: each waits roughly half the time */
    cpu_set_t one, saved;
    sched_getaffinity(0, sizeof saved, &saved);
    CPU_ZERO(&one);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved))
        cpu++;
    CPU_SET(cpu, &one);
    pid_t child = fork();
    if (child == 0) {
        sched_setaffinity(0, sizeof one, &one);
        spin_ms(600);
        _exit(0);
    }
    CHECK(child > 0, "fork");
    starve_sampler *s = starve_sampler_new(child, 10);
    CHECK(s != NULL, "sampler on the child");
    sched_setaffinity(0, sizeof one, &one);
    int fd = -1;
    int64_t rd0 = sched_self_run_delay(&fd);
    int64_t t0 = MS(now_ms());
    spin_ms(400);
    int64_t t1 = MS(now_ms());
    int64_t rd1 = sched_self_run_delay(&fd);
    sched_setaffinity(0, sizeof saved, &saved);
    int st;
    waitpid(child, &st, 0);
    starve_sampler_stop(s);
    int64_t theirs = starve_sampler_max_delay(s, t0, t1);
    CHECK(rd0 >= 0 && rd1 - rd0 > MS(50), "this thread waited %.1f ms for the CPU", (double)(rd1 - rd0) / 1e6);
    CHECK(theirs > MS(50), "the sampler saw the child wait %.1f ms (%ld samples)", (double)theirs / 1e6,
          starve_sampler_count(s));
    CHECK(starve_sampler_max_delay(s, t1 + MS(10000), t1 + MS(20000)) == 0, "nothing outside the samples");
    starve_sampler_free(s);
    if (fd >= 0)
        close(fd);
}

/* ---- the fault proxy --------------------------------------------------------------- */

struct echo {
    int lfd, port;
    atomic_int stop;
};

static void *echo_main(void *arg)
{
    struct echo *e = arg;
    struct pollfd fds[64];
    int n = 1;
    fds[0] = (struct pollfd){.fd = e->lfd, .events = POLLIN};
    while (!atomic_load(&e->stop)) {
        if (poll(fds, (nfds_t)n, 50) <= 0)
            continue;
        if ((fds[0].revents & POLLIN) && n < 64) {
            int c = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (c >= 0)
                fds[n++] = (struct pollfd){.fd = c, .events = POLLIN};
        }
        for (int i = 1; i < n; i++) {
            if (!fds[i].revents)
                continue;
            char buf[4096];
            ssize_t r = recv(fds[i].fd, buf, sizeof buf, 0);
            if (r <= 0 || send(fds[i].fd, buf, (size_t)r, MSG_NOSIGNAL) != r) {
                close(fds[i].fd);
                fds[i--] = fds[--n];
            }
        }
    }
    for (int i = 1; i < n; i++)
        close(fds[i].fd);
    return NULL;
}

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Sends msg and waits up to timeout_ms for it to come back.  Returns the round trip in
 * ms, -1 if nothing came back in time, -2 if the connection was closed or reset. */
static long echo_rtt(int fd, const char *msg, int timeout_ms)
{
    long long t = now_ms();
    size_t len = strlen(msg), got = 0;
    char buf[256];
    if (send(fd, msg, len, MSG_NOSIGNAL) != (ssize_t)len)
        return -2;
    while (got < len) {
        long long left = t + timeout_ms - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + got, sizeof buf - got, 0);
        if (r <= 0)
            return -2;
        got += (size_t)r;
    }
    return memcmp(buf, msg, len) == 0 ? (long)(now_ms() - t) : -3;
}

/* Reads exactly n bytes within timeout_ms; returns how many arrived. */
static size_t read_n(int fd, char *buf, size_t n, int timeout_ms)
{
    long long until = now_ms() + timeout_ms;
    size_t got = 0;
    while (got < n) {
        long long left = until - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

/* 1 if the peer closed or reset fd within timeout_ms. */
static int closed_within(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return 0;
    char b;
    return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

static int ctl(const char *path, const char *cmd, char *reply, size_t rsz)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof un) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char line[256];
    snprintf(line, sizeof line, "%s\n", cmd);
    size_t len = 0;
    if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0) {
        close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (len < rsz - 1 && poll(&p, 1, 2000) > 0) {
        ssize_t r = recv(fd, reply + len, rsz - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (memchr(reply, '\n', len))
            break;
    }
    reply[len] = '\0';
    close(fd);
    return strncmp(reply, "ok", 2) == 0 ? 0 : -1;
}

static void proxy_modes_behave_as_documented(const char *proxy_bin)
{
    struct echo e = {0};
    e.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* the proxy child must not inherit it */
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(e.lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(e.lfd, 16) < 0 ||
        getsockname(e.lfd, (struct sockaddr *)&a, &alen) < 0) {
        CHECK(0, "echo server: %s", strerror(errno));
        return;
    }
    e.port = ntohs(a.sin_port);
    pthread_t th;
    pthread_create(&th, NULL, echo_main, &e);

    char dir[] = "/tmp/chaos-selftest.XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char ctlp[128], logp[128], pair[64], reply[512];
    snprintf(ctlp, sizeof ctlp, "%s/ctl", dir);
    snprintf(logp, sizeof logp, "%s/proxy.log", dir);
    snprintf(pair, sizeof pair, "127.0.0.1:0=127.0.0.1:%d", e.port);
    char *argv[] = {(char *)proxy_bin, "--ctl", ctlp, "--max-seconds", "60", pair, NULL};
    int out = -1;
    pid_t pid = proc_spawn(proxy_bin, argv, logp, &out);
    CHECK(pid > 0, "spawn %s", proxy_bin);
    char buf[128] = "";
    struct pollfd p = {.fd = out, .events = POLLIN};
    ssize_t r = poll(&p, 1, 5000) > 0 ? read(out, buf, sizeof buf - 1) : -1;
    close(out);
    buf[r > 0 ? r : 0] = '\0';
    int port = 0;
    CHECK(sscanf(buf, "ready %d", &port) == 1 && port > 0, "ready line: '%s'", buf);

    int c1 = tcp_connect(port);
    long rtt = echo_rtt(c1, "hello", 1000);
    CHECK(rtt >= 0 && rtt < 100, "pass relays at once (rtt %ld)", rtt);

    CHECK(ctl(ctlp, "mode 0 delay 150", reply, sizeof reply) == 0, "delay accepted: %s", reply);
    rtt = echo_rtt(c1, "slow", 2000);
    CHECK(rtt >= 295 && rtt < 800, "delay 150 holds each direction 150 ms (rtt %ld)", rtt);
    /* bytes in flight keep their order when the delay is lifted */
    send(c1, "ab", 2, MSG_NOSIGNAL);
    CHECK(ctl(ctlp, "mode 0 pass", reply, sizeof reply) == 0, "pass accepted");
    send(c1, "cd", 2, MSG_NOSIGNAL);
    char got[8] = "";
    CHECK(read_n(c1, got, 4, 2000) == 4 && !memcmp(got, "abcd", 4), "order kept across a mode change: '%s'", got);

    int c2 = tcp_connect(port);
    CHECK(echo_rtt(c2, "x", 1000) >= 0, "second connection works");
    CHECK(ctl(ctlp, "mode 0 drop", reply, sizeof reply) == 0, "drop accepted");
    CHECK(echo_rtt(c2, "void", 300) == -1, "drop: nothing comes back");
    int c3 = tcp_connect(port);
    CHECK(c3 >= 0 && echo_rtt(c3, "void", 300) == -1, "drop: a new connection is a blackhole too");
    CHECK(ctl(ctlp, "mode 0 pass", reply, sizeof reply) == 0, "pass accepted");
    CHECK(closed_within(c2, 1000), "a connection that lost bytes is closed when drop ends");
    int c4 = tcp_connect(port);
    CHECK(echo_rtt(c4, "back", 1000) >= 0, "after drop, new connections relay again");

    CHECK(ctl(ctlp, "mode all cut", reply, sizeof reply) == 0, "cut accepted");
    CHECK(closed_within(c4, 1000), "cut closes open connections");
    int c5 = tcp_connect(port);
    CHECK(c5 < 0 || closed_within(c5, 1000), "cut resets new connections at once");
    CHECK(ctl(ctlp, "mode 0 pass", reply, sizeof reply) == 0, "pass accepted");
    int c6 = tcp_connect(port);
    CHECK(echo_rtt(c6, "again", 1000) >= 0, "after cut, new connections relay again");

    CHECK(ctl(ctlp, "stats", reply, sizeof reply) == 0 && strstr(reply, "0:pass"), "stats: %s", reply);
    CHECK(ctl(ctlp, "mode 7 pass", reply, sizeof reply) < 0, "an unknown pair is refused: %s", reply);
    CHECK(ctl(ctlp, "mode 0 delay -1", reply, sizeof reply) < 0, "a bad delay is refused: %s", reply);
    CHECK(ctl(ctlp, "frobnicate", reply, sizeof reply) < 0, "an unknown command is refused: %s", reply);

    /* the upstream going away shows as a closed connection, as a dead master would */
    atomic_store(&e.stop, 1);
    pthread_join(th, NULL);
    close(e.lfd);
    CHECK(closed_within(c6, 1000), "upstream close propagates");
    int c7 = tcp_connect(port);
    CHECK(c7 < 0 || closed_within(c7, 1000), "upstream refusing shows as a reset");

    CHECK(ctl(ctlp, "quit", reply, sizeof reply) == 0, "quit accepted");
    int st;
    CHECK(proc_wait(pid, 3000, &st) == 1, "proxy exits on quit");
    int fds[] = {c1, c2, c3, c4, c5, c6, c7};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    rm_rf(dir);
}

int main(int argc, char **argv)
{
    const char *proxy = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--proxy"))
            proxy = argv[++i];
    signal(SIGPIPE, SIG_IGN);
    alarm(60); /* bounded whatever happens */

#define RUN(t)                                                                                                         \
    do {                                                                                                               \
        int before = failures;                                                                                         \
        t;                                                                                                             \
        printf("  %-4s %s\n", failures == before ? "ok" : "FAIL", #t);                                                 \
    } while (0)
    RUN(mutex_passes_a_grant_sent_during_a_hold_but_answered_after_its_release());
    RUN(mutex_catches_a_grant_answered_before_the_holder_released());
    RUN(mutex_ends_an_unreleased_hold_at_send_plus_validity());
    RUN(mutex_finds_every_grant_inside_one_long_hold());
    RUN(mutex_keeps_names_apart_and_ignores_non_grants());
    RUN(mutex_touching_holds_are_not_an_overlap());
    RUN(fencing_catches_a_repeated_and_a_smaller_token());
    RUN(fencing_does_not_order_grants_whose_requests_overlapped());
    RUN(fencing_compares_with_the_largest_earlier_token());
    RUN(latency_bounds_are_wait_plus_rounds_plus_margin());
    RUN(status_accepts_exactly_the_documented_set());
    RUN(streams_legal_history_passes());
    RUN(streams_overlap_with_a_normal_holder_is_caught());
    RUN(streams_late_lost_and_fencing_are_caught());
    RUN(clean_long_history_passes_and_one_planted_fault_is_found());
    RUN(history_survives_a_save_and_load());
    RUN(shared_readers_together_pass());
    RUN(shared_reader_with_a_writer_is_caught());
    RUN(semaphore_n_holders_pass());
    RUN(semaphore_n_plus_one_holders_are_caught());
    RUN(semaphore_token_regressions_are_caught());
    RUN(mixed_long_history_passes_and_planted_faults_are_found());
    RUN(mixed_history_survives_a_save_and_load());
    RUN(reentrant_reentry_is_no_holder_of_its_own());
    RUN(duplex_alive_lines_extend_the_hold_from_the_ping());
    RUN(leftovers_mark_outliving_its_writer_is_caught());
    RUN(leftovers_keys_and_released_quorums());
    RUN(leftovers_samples_survive_a_save_and_load());
    RUN(sampler_reads_each_kind_of_entry());
    RUN(stopped_holders_are_judged_by_their_last_ping());
    RUN(resources_judge_rss_by_the_build());
    RUN(sanitizers_are_read_from_the_binary());
    RUN(schedstat_measures_time_spent_waiting_for_a_cpu());
    if (proxy)
        RUN(proxy_modes_behave_as_documented(proxy));
    else
        printf("  skip proxy tests (no --proxy)\n");
    printf("chaos-selftest: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
