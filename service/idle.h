/* idle.h -- the connections of an HTTP server that wait for a whole request (a new
 * one, or the next on a keep-alive connection), oldest first, and the cut of those
 * that waited past the header timeout.  A list and its connections are owned by one
 * thread; the caller allocates the connections. */
#ifndef RL_IDLE_H
#define RL_IDLE_H

#include <stddef.h>
#include <stdint.h>

#include "list.h"

typedef struct idle_conn {
    int fd;                     /* the connection's socket, -1 if unknown */
    /* private: the list's */
    list link;                  /* in the list while it waits (list_linked) */
    int64_t since_us;           /* waiting since */
} idle_conn;

typedef struct idle_list {
    list conns;                 /* oldest first */
} idle_list;

/* An empty list. */
void idle_init(idle_list *l);

/* c waits from now_us on: to the tail (out of its place first, if it is in l). */
void idle_push(idle_list *l, idle_conn *c, int64_t now_us);

/* c no longer waits (its request is being served, or it closed).  A NULL c or one not
 * in l is a no-op. */
void idle_remove(idle_list *l, idle_conn *c);

/* Take out of l the connections waiting since before cutoff_us and shut their sockets
 * down both ways (the server then sees end-of-stream and closes them the usual way).
 * Returns how many. */
size_t idle_cut(idle_list *l, int64_t cutoff_us);

#endif
