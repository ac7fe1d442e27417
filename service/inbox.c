/* inbox.c -- whether announcements wait unread for a worker (see inbox.h). */
#include "inbox.h"

#include <poll.h>

void inbox_init(inbox *in, int n)
{
    in->reads = 0;
    in->foreign_until_us = 0;
    in->n = n < 0 ? 0 : n > CONFIG_MAX_MASTERS ? CONFIG_MAX_MASTERS : n;
    for (int i = 0; i < CONFIG_MAX_MASTERS; i++)
        in->fds[i] = -1;
}

void inbox_heard_foreign(inbox *in, int64_t now_us)
{
    __atomic_store_n(&in->foreign_until_us, now_us + (int64_t)INBOX_FOREIGN_MS * 1000,
                     __ATOMIC_RELAXED);
}

void inbox_set_fd(inbox *in, int i, int fd)
{
    if (i >= 0 && i < in->n)
        __atomic_store_n(&in->fds[i], fd, __ATOMIC_RELEASE);
}

void inbox_read_begin(inbox *in)
{
    __atomic_add_fetch(&in->reads, 1, __ATOMIC_SEQ_CST);
}

void inbox_read_end(inbox *in)
{
    /* release: what the reads changed (the keeper's published slots) is seen by a
     * reader whose mark is taken after this */
    __atomic_add_fetch(&in->reads, 1, __ATOMIC_RELEASE);
}

uint32_t inbox_mark(const inbox *in)
{
    return in ? __atomic_load_n(&in->reads, __ATOMIC_ACQUIRE) : 0;
}

int inbox_quiet(const inbox *in, uint32_t mark, int64_t now_us)
{
    if (!in || __atomic_load_n(&in->foreign_until_us, __ATOMIC_RELAXED) <= now_us)
        return 1;
    if (mark & 1)
        return 0; /* a read was going on */
    struct pollfd p[CONFIG_MAX_MASTERS];
    int n = 0;
    for (int i = 0; i < in->n; i++) {
        int fd = __atomic_load_n(&in->fds[i], __ATOMIC_ACQUIRE);
        if (fd >= 0)
            p[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    /* A socket closed and its number reused meanwhile only costs a needless round
     * (readable) or is one whose announcements were lost anyway (the keeper wakes
     * every queue when it connects again). */
    if (n && poll(p, (nfds_t)n, 0) != 0)
        return 0; /* something waits (or poll failed: trust nothing) */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return __atomic_load_n(&in->reads, __ATOMIC_RELAXED) == mark;
}
