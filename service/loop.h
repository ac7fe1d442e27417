/* loop.h -- a small per-thread event loop: epoll for file descriptors and a binary
 * heap of timers on the monotonic clock.  One loop is owned by one thread. */
#ifndef RL_LOOP_H
#define RL_LOOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct loop loop;
typedef struct loop_io loop_io;
typedef struct loop_timer loop_timer;

typedef void (*loop_io_cb)(loop_io *io, uint32_t events);
typedef void (*loop_timer_cb)(loop_timer *t);

/* An fd watcher; embed it in the owner and recover the owner with container_of. */
struct loop_io {
    int fd;
    uint32_t events; /* currently registered EPOLL* mask, 0 if not registered */
    loop_io_cb cb;
};

struct loop_timer {
    int64_t when_us;   /* absolute CLOCK_MONOTONIC time in microseconds */
    size_t heap_index; /* position in the heap + 1; 0 when not armed */
    loop_timer_cb cb;
};

struct loop {
    int epfd;
    loop_timer **heap;
    size_t heap_len, heap_cap;
};

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Monotonic clock in microseconds. */
int64_t clock_now_us(void);

int loop_init(loop *l);   /* 0 or -1 (errno) */
void loop_fini(loop *l);

/* Register, change or drop the events watched on io->fd (events 0 drops it).
 * Returns 0 or -1 (errno). */
int loop_io_set(loop *l, loop_io *io, uint32_t events);

/* Arm (or re-arm) a timer at an absolute time.  Returns 0 or -1 on allocation failure. */
int loop_timer_start(loop *l, loop_timer *t, int64_t when_us);
void loop_timer_stop(loop *l, loop_timer *t);
static inline int loop_timer_armed(const loop_timer *t) { return t->heap_index != 0; }

/* Milliseconds until the first timer is due (0 if due, -1 if none), capped at cap_ms. */
int loop_next_timeout_ms(loop *l, int cap_ms);

/* Wait up to timeout_ms for fd events and dispatch them.  Returns the count or -1. */
int loop_poll(loop *l, int timeout_ms);

/* Run the timers that are due. */
void loop_run_timers(loop *l);

#endif
