/* schedstat.c -- CPU starvation accounting from /proc schedstat (see schedstat.h). */
#include "schedstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TASKS 64

/* One reading: the run_delay of every task seen, by slot in the sampler's tid table. */
typedef struct sample {
    int64_t t;
    int64_t rd[MAX_TASKS]; /* -1: the task did not exist at this reading */
} sample;

struct starve_sampler {
    pid_t pid;
    int interval_ms;
    pid_t tids[MAX_TASKS];
    int ntids;
    sample *samples;
    long n, cap;
    pthread_t th;
    int started;
    atomic_int stop;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* schedstat is "cpu_time_ns run_delay_ns timeslices" */
static int64_t parse_run_delay(const char *buf)
{
    unsigned long long cpu, delay;
    return sscanf(buf, "%llu %llu", &cpu, &delay) == 2 ? (int64_t)delay : -1;
}

int64_t sched_self_run_delay(int *fd)
{
    char buf[128];
    if (*fd < 0)
        *fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return -1;
    ssize_t n = pread(*fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return parse_run_delay(buf);
}

static int slot_of(starve_sampler *s, pid_t tid)
{
    for (int i = 0; i < s->ntids; i++)
        if (s->tids[i] == tid)
            return i;
    if (s->ntids == MAX_TASKS)
        return -1; /* more threads than we track: the rest go unmeasured (less allowance) */
    s->tids[s->ntids] = tid;
    return s->ntids++;
}

static int take_sample(starve_sampler *s)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task", (int)s->pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    if (s->n == s->cap) {
        long cap = s->cap ? s->cap * 2 : 4096;
        sample *ns = realloc(s->samples, (size_t)cap * sizeof *ns);
        if (!ns) {
            closedir(d);
            return -1;
        }
        s->samples = ns;
        s->cap = cap;
    }
    sample *sm = &s->samples[s->n];
    for (int i = 0; i < MAX_TASKS; i++)
        sm->rd[i] = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)s->pid, (int)tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0)
            continue;
        buf[r] = '\0';
        int slot = slot_of(s, tid);
        if (slot >= 0)
            sm->rd[slot] = parse_run_delay(buf);
    }
    closedir(d);
    sm->t = mono_ns();
    s->n++;
    return 0;
}

static void *sampler_main(void *arg)
{
    starve_sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        if (take_sample(s) < 0)
            break; /* the process is gone */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)s->interval_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

starve_sampler *starve_sampler_new(pid_t pid, int interval_ms)
{
    int fd = -1;
    if (sched_self_run_delay(&fd) < 0)
        return NULL;
    close(fd);
    starve_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pid = pid;
    s->interval_ms = interval_ms;
    if (take_sample(s) < 0 || pthread_create(&s->th, NULL, sampler_main, s) != 0) {
        free(s->samples);
        free(s);
        return NULL;
    }
    s->started = 1;
    return s;
}

void starve_sampler_stop(starve_sampler *s)
{
    if (!s || !s->started)
        return;
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    s->started = 0;
}

void starve_sampler_free(starve_sampler *s)
{
    if (!s)
        return;
    starve_sampler_stop(s);
    free(s->samples);
    free(s);
}

long starve_sampler_count(const starve_sampler *s)
{
    return s ? s->n : 0;
}

int64_t starve_sampler_max_delay(const starve_sampler *s, int64_t from_ns, int64_t to_ns)
{
    if (!s || s->n < 2)
        return 0;
    /* a: the last sample at or before from_ns; b: the first at or after to_ns */
    long lo = 0, hi = s->n - 1;
    while (lo < hi) {
        long mid = (lo + hi + 1) / 2;
        if (s->samples[mid].t <= from_ns)
            lo = mid;
        else
            hi = mid - 1;
    }
    long a = lo;
    lo = a;
    hi = s->n - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (s->samples[mid].t >= to_ns)
            hi = mid;
        else
            lo = mid + 1;
    }
    long b = lo;
    if (b <= a)
        return 0;
    int64_t best = 0;
    for (int i = 0; i < s->ntids; i++) {
        int64_t end = s->samples[b].rd[i];
        if (end < 0)
            continue;
        int64_t start = s->samples[a].rd[i] < 0 ? 0 : s->samples[a].rd[i]; /* born inside: from 0 */
        if (end - start > best)
            best = end - start;
    }
    return best;
}
