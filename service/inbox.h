/* inbox.h -- whether a worker may have release announcements it has not read yet: the
 * sockets of its subscriber connections (notify.h), and a count that is odd while its
 * thread reads them.  Shared between threads: the worker that keeps a name writes it,
 * any worker reads it before it answers "held" from what that keeper knows (waitq.h).
 *
 * Why: an announcement of a release through another instance is written by the masters
 * into this instance's subscriber sockets before (or, at worst, while) that release is
 * answered, so by the time a client that saw it answered asks here, the bytes are
 * almost always in the sockets already; what the keeper knows is stale only until its
 * thread reads them.  A "held" answered from what it knows is trusted only when nothing
 * waits there and no read went on meanwhile (docs/DESIGN.md §6).  An announcement
 * still on its way over the network is not seen: the answer is then as old as that
 * delay. */
#ifndef RL_INBOX_H
#define RL_INBOX_H

#include <stdint.h>

#include "config.h"

/* How long after the last announcement from another instance the sockets are looked
 * at: an instance alone (every announcement its own, which it skips) pays no poll(2). */
#define INBOX_FOREIGN_MS 60000

typedef struct inbox {
    uint32_t reads;                 /* odd while the owner reads its sockets (atomic) */
    int64_t foreign_until_us;       /* until when others' announcements count (atomic) */
    int fds[CONFIG_MAX_MASTERS];    /* its subscriber sockets, -1: none (atomic) */
    int n;                          /* how many of fds are used (set before sharing) */
} inbox;

/* No sockets; n of them to come.  Before the inbox is shared. */
void inbox_init(inbox *in, int n);

/* The owner's thread: socket i is fd now (-1: gone). */
void inbox_set_fd(inbox *in, int i, int fd);

/* The owner's thread: an announcement from another instance came at now_us. */
void inbox_heard_foreign(inbox *in, int64_t now_us);

/* The owner's thread, around each read of its sockets and the handling of what came. */
void inbox_read_begin(inbox *in);
void inbox_read_end(inbox *in);

/* Any thread: a mark to pass to inbox_quiet() after reading what the keeper knows;
 * an odd mark means a read goes on now. */
uint32_t inbox_mark(const inbox *in);

/* Any thread: whether nothing waited unread in the sockets when called, and no read
 * went on since mark was taken.  One poll(2) of the sockets, no wait, and only while
 * other instances announce (INBOX_FOREIGN_MS): the first announcement of another
 * instance after a silence that long is not waited for.  NULL: quiet. */
int inbox_quiet(const inbox *in, uint32_t mark, int64_t now_us);

#endif
