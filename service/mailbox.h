/* mailbox.h -- how the other threads reach a worker: they post names (a release whose
 * waiters to wake, a grant for watchers and holds, a name whose waiters include one
 * whose client left), lock operations to run on this worker for another one, and
 * operations handed back to the worker whose request they are.  Posts go in under a
 * mutex, and an eventfd wakes the owner's loop; the owner drains everything in one go
 * and hands each item to its hooks, on its own thread, in this order: the names, the
 * loss of names (the box was full), the operations to start, the operations back.
 *
 * The mailbox carries; the worker decides (worker.c: which worker runs an op, who is
 * told of a release).  An op in a mailbox is linked through op->mb_next (op.h). */
#ifndef RL_MAILBOX_H
#define RL_MAILBOX_H

#include <pthread.h>
#include <stddef.h>

#include "loop.h"

typedef struct lockop lockop;

#define MAILBOX_NAMES 256     /* names a mailbox holds between drains; more are lost */

/* What a posted name is about. */
enum mailbox_kind {
    MAILBOX_RELEASED,         /* released: wake its waiters, check its holds and watches */
    MAILBOX_GONE,             /* the client of one of its waiters left: drop it */
    MAILBOX_GRANTED,          /* granted through this instance: its watches and holds look */
};

/* What the owner does with what was posted (its thread, from its loop). */
typedef struct mailbox_hooks {
    void (*name)(void *owner, int kind, const char *name, size_t len);
    /* Names were lost (the box was full, or no memory): act as if every name was
     * released. */
    void (*lost)(void *owner);
    /* Run op here for another worker (posted by mailbox_post_start). */
    void (*start)(void *owner, lockop *op);
    /* One of the owner's requests' ops, run by another worker, is back: answer it. */
    void (*back)(void *owner, lockop *op);
} mailbox_hooks;

typedef struct mailbox {
    /* private */
    const mailbox_hooks *hooks;
    void *owner;
    int evfd;                 /* -1 until mailbox_open() */
    loop_io io;
    pthread_mutex_t lock;     /* everything below */
    size_t len;
    int overflow;             /* names were lost */
    char names[MAILBOX_NAMES][256]; /* the kind, then the name, NUL-terminated */
    lockop *start, *start_tail;
    lockop *back, *back_tail;
} mailbox;

/* An empty mailbox for owner, not yet watched (no I/O: it cannot fail). */
void mailbox_init(mailbox *mb, const mailbox_hooks *hooks, void *owner);

/* Make its eventfd and watch it on l, the owner's loop.  0, or -1 (errno). */
int mailbox_open(mailbox *mb, loop *l);

/* Close it (after mailbox_init, opened or not; the owner's thread is over). */
void mailbox_fini(mailbox *mb);

/* Post a name of len bytes (any thread).  A name too long, or one past a full box, is
 * lost: the owner's lost() then runs. */
void mailbox_post_name(mailbox *mb, int kind, const char *name, size_t len);

/* Post op to be started by the owner, or handed back to it (any thread; op->mb_next is
 * the mailbox's until the hook runs). */
void mailbox_post_start(mailbox *mb, lockop *op);
void mailbox_post_back(mailbox *mb, lockop *op);

/* Wake the owner's loop with nothing posted (a stop: it then reads app->stopping). */
void mailbox_poke(mailbox *mb);

#endif
