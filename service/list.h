/* list.h -- the one intrusive doubly linked list of the service (after libuv's queue.h):
 * a list is a ring of nodes through its head, which is never an entry; an entry embeds
 * a node and is found again from it with list_data().  Nothing is allocated; insertion
 * and removal are O(1); one thread owns a list and its entries.
 *
 * A head is list_init()ed before use.  An entry's node needs no initialisation: a node
 * that is zeroed, or was removed, is in no list (list_linked() is 0), and removing it
 * again is a no-op. */
#ifndef RL_LIST_H
#define RL_LIST_H

#include <stddef.h>

typedef struct list list;

struct list {
    list *next, *prev;      /* NULL in an entry that is in no list */
};

/* The entry of type `type` whose member `member` is node. */
#define list_data(node, type, member) ((type *)((char *)(node)-offsetof(type, member)))

/* An empty list. */
static inline void list_init(list *head) { head->next = head->prev = head; }

static inline int list_empty(const list *head) { return head->next == head; }

/* Whether the entry's node is in a list. */
static inline int list_linked(const list *node) { return node->next != NULL; }

/* The first node of head, or NULL if it is empty. */
static inline list *list_first(const list *head)
{
    return head->next == head ? NULL : head->next;
}

/* The node after node in head, or NULL at the end. */
static inline list *list_next(const list *head, const list *node)
{
    return node->next == head ? NULL : node->next;
}

/* Add node (in no list) at the front, or at the back, of head. */
static inline void list_insert_head(list *head, list *node)
{
    node->next = head->next;
    node->prev = head;
    head->next->prev = node;
    head->next = node;
}

static inline void list_insert_tail(list *head, list *node)
{
    node->next = head;
    node->prev = head->prev;
    head->prev->next = node;
    head->prev = node;
}

/* Take node out of its list (a no-op if it is in none). */
static inline void list_remove(list *node)
{
    if (!node->next)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->next = node->prev = NULL;
}

/* Every node of head, from the front; the body may remove the node it is at (never
 * another one). */
#define list_foreach(node, head)                                                          \
    for (list *node = (head)->next, *node##_next_ = node->next; node != (head);            \
         node = node##_next_, node##_next_ = node->next)

#endif
