/* loop.c -- epoll + timer heap (see loop.h). */
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

int64_t clock_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int loop_init(loop *l)
{
    l->heap = NULL;
    l->heap_len = l->heap_cap = 0;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    return l->epfd < 0 ? -1 : 0;
}

void loop_fini(loop *l)
{
    if (l->epfd >= 0)
        close(l->epfd);
    l->epfd = -1;
    free(l->heap);
    l->heap = NULL;
    l->heap_len = l->heap_cap = 0;
}

int loop_io_set(loop *l, loop_io *io, uint32_t events)
{
    if (events == io->events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = io};
    int rc;
    if (events == 0)
        rc = epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, &ev);
    else if (io->events == 0)
        rc = epoll_ctl(l->epfd, EPOLL_CTL_ADD, io->fd, &ev);
    else
        rc = epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev);
    if (rc == 0 || events == 0)
        io->events = events;
    return rc;
}

/* ---- timer heap (1-based indices stored in the timers) ---- */

static void heap_set(loop *l, size_t i, loop_timer *t)
{
    l->heap[i] = t;
    t->heap_index = i + 1;
}

static void sift_up(loop *l, size_t i)
{
    loop_timer *t = l->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (l->heap[p]->when_us <= t->when_us)
            break;
        heap_set(l, i, l->heap[p]);
        i = p;
    }
    heap_set(l, i, t);
}

static void sift_down(loop *l, size_t i)
{
    loop_timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->heap_len)
            break;
        if (c + 1 < l->heap_len && l->heap[c + 1]->when_us < l->heap[c]->when_us)
            c++;
        if (t->when_us <= l->heap[c]->when_us)
            break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

void loop_timer_stop(loop *l, loop_timer *t)
{
    if (!t->heap_index || !l->heap)
        return;
    size_t i = t->heap_index - 1;
    t->heap_index = 0;
    l->heap_len--;
    if (i == l->heap_len)
        return;
    heap_set(l, i, l->heap[l->heap_len]);
    sift_down(l, i);
    sift_up(l, l->heap[i]->heap_index - 1);
}

int loop_timer_start(loop *l, loop_timer *t, int64_t when_us)
{
    loop_timer_stop(l, t);
    if (l->heap_len == l->heap_cap) {
        size_t cap = l->heap_cap ? l->heap_cap * 2 : 64;
        loop_timer **h = realloc(l->heap, cap * sizeof *h);
        if (!h)
            return -1;
        l->heap = h;
        l->heap_cap = cap;
    }
    t->when_us = when_us;
    heap_set(l, l->heap_len++, t);
    sift_up(l, l->heap_len - 1);
    return 0;
}

int loop_next_timeout_ms(loop *l, int cap_ms)
{
    if (l->heap_len == 0)
        return cap_ms;
    int64_t d = l->heap[0]->when_us - clock_now_us();
    if (d <= 0)
        return 0;
    int64_t ms = (d + 999) / 1000;
    if (cap_ms >= 0 && ms > cap_ms)
        return cap_ms;
    return (int)ms;
}

int loop_poll(loop *l, int timeout_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(l->epfd, evs, 256, timeout_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        loop_io *io = evs[i].data.ptr;
        io->cb(io, evs[i].events);
    }
    return n;
}

void loop_run_timers(loop *l)
{
    int64_t now = clock_now_us();
    /* Bounded: a timer re-armed for "now" runs on the next pass, not forever here. */
    size_t budget = l->heap_len;
    while (l->heap_len && l->heap[0]->when_us <= now && budget--) {
        loop_timer *t = l->heap[0];
        loop_timer_stop(l, t);
        t->cb(t);
    }
}
