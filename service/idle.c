/* idle.c -- the list of connections waiting for a request (see idle.h). */
#include "idle.h"

#include <sys/socket.h>

void idle_init(idle_list *l)
{
    list_init(&l->conns);
}

void idle_remove(idle_list *l, idle_conn *c)
{
    (void)l;
    if (c)
        list_remove(&c->link);
}

void idle_push(idle_list *l, idle_conn *c, int64_t now_us)
{
    list_remove(&c->link);
    c->since_us = now_us;
    list_insert_tail(&l->conns, &c->link);
}

size_t idle_cut(idle_list *l, int64_t cutoff_us)
{
    size_t n = 0;
    for (list *first; (first = list_first(&l->conns));) {
        idle_conn *c = list_data(first, idle_conn, link);
        if (c->since_us >= cutoff_us)
            break;
        list_remove(&c->link);
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        n++;
    }
    return n;
}
