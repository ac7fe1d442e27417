/* clockshim.h -- the writing side of clockshim.so (tests/clock/clockshim.c): moves the
 * wall clock of every process started with CLOCKSHIM_FILE=<file> and
 * LD_PRELOAD=<clockshim.so> by rewriting <file>.  Header-only (static functions), so a
 * test includes it and links nothing.  Each change takes effect in those processes within
 * 10 ms.  See tests/clock/README.md.
 *
 * The file says "OFFSET_MS RATE_PPM ANCHOR_MS": the shifted clock reads
 *   real + OFFSET_MS + (real - ANCHOR_MS) * (RATE_PPM - 1e6) / 1e6   once real >= ANCHOR_MS.
 * The functions below keep the clock continuous where they should: a rate change starts
 * from the offset reached at that moment; a jump adds to it. */
#ifndef CLOCKSHIM_H
#define CLOCKSHIM_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

typedef struct clockshim_params {
    int64_t offset_ms; /* added to the true clock at anchor_ms */
    int64_t rate_ppm;  /* 1000000: the true rate; 2000000: twice as fast */
    int64_t anchor_ms; /* the true CLOCK_REALTIME (ms) from which the rate applies */
} clockshim_params;

/* The true CLOCK_REALTIME in ms (the calling process is not under the shim). */
static inline int64_t clockshim_real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads file into *p; a missing or malformed file reads as the true clock (0, 1e6, 0),
 * as the shim reads it.  0 if the file was read, -1 if not (p is then the true clock). */
static inline int clockshim_read(const char *file, clockshim_params *p)
{
    p->offset_ms = 0;
    p->rate_ppm = 1000000;
    p->anchor_ms = 0;
    FILE *f = fopen(file, "re");
    if (!f)
        return -1;
    int64_t v[3] = {0, 1000000, 0};
    int n = fscanf(f, "%" SCNd64 " %" SCNd64 " %" SCNd64, &v[0], &v[1], &v[2]);
    fclose(f);
    if (n < 1 || v[1] <= 0 || v[2] < 0)
        return -1;
    p->offset_ms = v[0];
    p->rate_ppm = v[1];
    p->anchor_ms = v[2];
    return 0;
}

/* How far the shifted clock is ahead of the true one (ms, negative: behind) at true
 * time real_ms, under p. */
static inline int64_t clockshim_offset_at(const clockshim_params *p, int64_t real_ms)
{
    int64_t off = p->offset_ms;
    if (real_ms > p->anchor_ms && p->rate_ppm != 1000000)
        off += (int64_t)((__int128)(real_ms - p->anchor_ms) * (p->rate_ppm - 1000000) / 1000000);
    return off;
}

/* Writes *p to file atomically (a temporary file renamed over it: the shim never reads a
 * half-written one).  0, or -1 with errno set. */
static inline int clockshim_write(const char *file, const clockshim_params *p)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", file) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -1;
    int bad = fprintf(f, "%" PRId64 " %" PRId64 " %" PRId64 "\n", p->offset_ms, p->rate_ppm, p->anchor_ms) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, file) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Steps the clock by delta_ms now (forward if > 0, back if < 0), keeping its rate. */
static inline int clockshim_jump(const char *file, int64_t delta_ms)
{
    clockshim_params p;
    clockshim_read(file, &p);
    int64_t now = clockshim_real_ms();
    p.offset_ms = clockshim_offset_at(&p, now) + delta_ms;
    p.anchor_ms = now;
    return clockshim_write(file, &p);
}

/* From now on the clock runs at rate_ppm (1500000: 1.5x), continuing from where it is. */
static inline int clockshim_set_rate(const char *file, int64_t rate_ppm)
{
    clockshim_params p;
    clockshim_read(file, &p);
    int64_t now = clockshim_real_ms();
    p.offset_ms = clockshim_offset_at(&p, now);
    p.anchor_ms = now;
    p.rate_ppm = rate_ppm;
    return clockshim_write(file, &p);
}

/* The true clock again (a step back to it, if it was ahead). */
static inline int clockshim_reset(const char *file)
{
    clockshim_params p = {0, 1000000, 0};
    return clockshim_write(file, &p);
}

#endif
