/* mailbox.c -- posts from other threads to a worker (see mailbox.h). */
#include "mailbox.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "op.h"

/* The first byte of a stored name: its kind, or the name itself for a release. */
#define KIND_GONE '\001'
#define KIND_GRANTED '\002'

void mailbox_init(mailbox *mb, const mailbox_hooks *hooks, void *owner)
{
    mb->hooks = hooks;
    mb->owner = owner;
    mb->evfd = -1;
    mb->len = 0;
    mb->overflow = 0;
    mb->start = mb->start_tail = mb->back = mb->back_tail = NULL;
    pthread_mutex_init(&mb->lock, NULL);
}

static void on_mail(loop_io *io, uint32_t events);

int mailbox_open(mailbox *mb, loop *l)
{
    mb->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mb->evfd < 0)
        return -1;
    mb->io.fd = mb->evfd;
    mb->io.cb = on_mail;
    return loop_io_set(l, &mb->io, EPOLLIN);
}

void mailbox_fini(mailbox *mb)
{
    if (mb->evfd >= 0)
        close(mb->evfd);
    mb->evfd = -1;
    pthread_mutex_destroy(&mb->lock);
}

void mailbox_poke(mailbox *mb)
{
    uint64_t one = 1;
    if (write(mb->evfd, &one, sizeof one) < 0) {
        /* EAGAIN: the counter is already non-zero, the worker will look */
    }
}

void mailbox_post_name(mailbox *mb, int kind, const char *name, size_t len)
{
    char k = kind == MAILBOX_GONE ? KIND_GONE : kind == MAILBOX_GRANTED ? KIND_GRANTED : 0;
    pthread_mutex_lock(&mb->lock);
    if (mb->len < MAILBOX_NAMES && len + 1 < sizeof mb->names[0]) {
        char *p = mb->names[mb->len];
        if (k)
            *p++ = k;
        memcpy(p, name, len);
        p[len] = '\0';
        mb->len++;
    } else {
        mb->overflow = 1;
    }
    pthread_mutex_unlock(&mb->lock);
    uint64_t one = 1;
    if (write(mb->evfd, &one, sizeof one) < 0 && errno != EAGAIN)
        mb->overflow = 1; /* cannot happen with an eventfd; the poll retries anyway */
}

/* Append op to one of the mailbox's lists and poke the owner. */
static void post_op(mailbox *mb, lockop **head, lockop **tail, lockop *op)
{
    op->mb_next = NULL;
    pthread_mutex_lock(&mb->lock);
    if (*tail)
        (*tail)->mb_next = op;
    else
        *head = op;
    *tail = op;
    pthread_mutex_unlock(&mb->lock);
    mailbox_poke(mb);
}

void mailbox_post_start(mailbox *mb, lockop *op)
{
    post_op(mb, &mb->start, &mb->start_tail, op);
}

void mailbox_post_back(mailbox *mb, lockop *op)
{
    post_op(mb, &mb->back, &mb->back_tail, op);
}

/* The eventfd is readable: take everything posted, then hand it to the hooks. */
static void on_mail(loop_io *io, uint32_t events)
{
    mailbox *mb = container_of(io, mailbox, io);
    (void)events;
    uint64_t v;
    if (read(mb->evfd, &v, sizeof v) < 0) {
        /* EAGAIN: nothing new */
    }
    pthread_mutex_lock(&mb->lock);
    lockop *start = mb->start, *back = mb->back;
    mb->start = mb->start_tail = mb->back = mb->back_tail = NULL;
    size_t n = mb->len;
    int overflow = mb->overflow;
    char (*copy)[256] = n ? malloc(n * 256) : NULL;
    if (copy)
        memcpy(copy, mb->names, n * 256);
    else if (n)
        overflow = 1;
    mb->len = 0;
    mb->overflow = 0;
    pthread_mutex_unlock(&mb->lock);
    const mailbox_hooks *h = mb->hooks;
    for (size_t i = 0; copy && i < n; i++) {
        if (copy[i][0] == KIND_GONE)
            h->name(mb->owner, MAILBOX_GONE, copy[i] + 1, strlen(copy[i] + 1));
        else if (copy[i][0] == KIND_GRANTED)
            h->name(mb->owner, MAILBOX_GRANTED, copy[i] + 1, strlen(copy[i] + 1));
        else
            h->name(mb->owner, MAILBOX_RELEASED, copy[i], strlen(copy[i]));
    }
    free(copy);
    if (overflow)
        h->lost(mb->owner);
    while (start) {
        lockop *op = start;
        start = op->mb_next;
        h->start(mb->owner, op);
    }
    while (back) {
        lockop *op = back;
        back = op->mb_next;
        h->back(mb->owner, op);
    }
}
