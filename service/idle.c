/* idle.c -- the list of connections waiting for a request (see idle.h). */
#include "idle.h"

#include <sys/socket.h>

void idle_remove(idle_list *l, idle_conn *c)
{
    if (!c || !c->linked)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
    c->linked = 0;
}

void idle_push(idle_list *l, idle_conn *c, int64_t now_us)
{
    idle_remove(l, c);
    c->since_us = now_us;
    c->prev = l->tail;
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    c->linked = 1;
}

size_t idle_cut(idle_list *l, int64_t cutoff_us)
{
    size_t n = 0;
    while (l->head && l->head->since_us < cutoff_us) {
        idle_conn *c = l->head;
        idle_remove(l, c);
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        n++;
    }
    return n;
}
