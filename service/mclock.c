/* mclock.c -- the watch on one master's clock (see mclock.h). */
#include "mclock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }

void mclock_reset(mclock *c)
{
    memset(c, 0, sizeof *c);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t mclock_median(int64_t *v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof *v, cmp_i64);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

int mclock_sample(mclock *c, int64_t sent_us, int64_t recv_us, int64_t master_us, double drift,
                  const int64_t *others, size_t nothers, int64_t max_skew_us, char *why, size_t cap)
{
    if (recv_us < sent_us)
        recv_us = sent_us;
    int64_t off = master_us - sent_us - (recv_us - sent_us) / 2;
    int64_t err = (recv_us - sent_us) / 2 + 1;
    int verdict = MCLOCK_OK;
    if (why && cap)
        why[0] = '\0';
    if (c->have) {
        int64_t dt = recv_us - c->at_us;
        int64_t moved = off - c->offset_us;
        int64_t allowed = (int64_t)(drift * (double)dt) + err + c->err_us + MCLOCK_MARGIN_US;
        if (abs64(moved) > allowed) {
            verdict = MCLOCK_JUMP;
            if (why)
                snprintf(why, cap, "its clock %s %lld ms in %lld ms (at most %lld allowed)",
                         moved > 0 ? "jumped forward" : "stepped back", (long long)(abs64(moved) / 1000),
                         (long long)(dt / 1000), (long long)(allowed / 1000));
        } else if (recv_us - c->anchor_at_us >= MCLOCK_RATE_SPAN_US) {
            int64_t span = recv_us - c->anchor_at_us;
            int64_t d = off - c->anchor_offset_us;
            int64_t room = (int64_t)(drift * (double)span) + err + c->anchor_err_us + MCLOCK_MARGIN_US;
            c->rate_ppm = (int64_t)((double)d * 1e6 / (double)span);
            if (abs64(d) > room) {
                verdict = MCLOCK_RATE;
                if (why)
                    snprintf(why, cap, "its clock runs %+lld ppm against ours over %lld ms "
                             "(drift factor %.4g allows %lld ppm)", (long long)c->rate_ppm,
                             (long long)(span / 1000), drift, (long long)(drift * 1e6));
            }
            c->anchor_offset_us = off;
            c->anchor_err_us = err;
            c->anchor_at_us = recv_us;
        }
    } else {
        c->anchor_offset_us = off;
        c->anchor_err_us = err;
        c->anchor_at_us = recv_us;
        c->rate_ppm = 0;
    }
    if (verdict == MCLOCK_OK && max_skew_us > 0 && nothers >= 2) {
        int64_t v[64];
        size_t n = nothers < 64 ? nothers : 64;
        memcpy(v, others, n * sizeof *v);
        int64_t med = mclock_median(v, n);
        if (abs64(off - med) > max_skew_us + err) {
            verdict = MCLOCK_SKEW;
            if (why)
                snprintf(why, cap, "its clock is %+lld ms from the other masters' (at most %lld allowed)",
                         (long long)((off - med) / 1000), (long long)(max_skew_us / 1000));
        }
    }
    c->last_us = recv_us;
    /* looser than the baseline as it stands: keep the baseline (mclock.h) */
    int looser = verdict == MCLOCK_OK && c->have && recv_us - c->at_us < MCLOCK_RATE_SPAN_US &&
                 err > c->err_us + (int64_t)(drift * (double)(recv_us - c->at_us)) + MCLOCK_LOOSER_US;
    if (!looser) {
        c->have = 1;
        c->offset_us = off;
        c->err_us = err;
        c->at_us = recv_us;
    }
    if (verdict != MCLOCK_OK)
        c->sane_since_us = 0;
    else if (!c->sane_since_us)
        c->sane_since_us = recv_us;
    return verdict;
}

static int64_t tolerance(const mclock *c, int64_t now_us, double drift)
{
    int64_t age = now_us > c->at_us ? now_us - c->at_us : 0;
    return c->err_us + MCLOCK_MARGIN_US + (int64_t)(drift * (double)age);
}

int64_t mclock_tolerance_us(const mclock *c, int64_t now_us, double drift)
{
    return tolerance(c, now_us, drift);
}

int mclock_window(const mclock *c, int64_t now_us, int64_t horizon_us, double drift, int64_t *lo_ms,
                  int64_t *hi_ms)
{
    *lo_ms = *hi_ms = 0;
    if (!c->have)
        return 0;
    int64_t tol = tolerance(c, now_us, drift);
    int64_t lo = now_us + c->offset_us - tol, hi = now_us + horizon_us + c->offset_us + tol;
    *lo_ms = lo / 1000;
    *hi_ms = (hi + 999) / 1000;
    return 1;
}

int mclock_agrees(const mclock *c, int64_t recv_us, int64_t master_ms, int64_t lo_ms, double drift)
{
    if (!c->have)
        return 1; /* nothing to hold it against */
    if (master_ms < lo_ms)
        return 0; /* it ran, by its clock, before it was sent: the clock went back */
    /* Past its window: a script that simply ran late ran before its answer was read,
     * so its time is no later than the clock as last measured says it was then. */
    return master_ms * 1000 <= recv_us + c->offset_us + tolerance(c, recv_us, drift);
}

int mclock_steady(const mclock *c, int64_t now_us)
{
    return c->have && c->sane_since_us && now_us - c->sane_since_us >= MCLOCK_STEADY_US;
}
