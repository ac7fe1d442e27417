/* test_list.c -- the intrusive list of list.h: an initialised head is empty; entries
 * keep their order from either end; removal from the front, the middle or the back
 * keeps the ring whole both ways; a zeroed or removed node is in no list and removing
 * it again changes nothing; list_foreach visits every node once in order and lets the
 * body remove the node it is at. */
#include <criterion/criterion.h>

#include "unit.h"
#include "list.h"

TestSuite(list, .fini = unit_fini, .timeout = 30);

typedef struct item {
    int id;
    list link;
} item;

/* head must hold exactly want[0..n), in order, linked both ways. */
static void expect(const list *head, item *const *want, size_t n)
{
    size_t i = 0;
    const list *prev = head;
    for (const list *node = head->next; node != head; node = node->next, i++) {
        cr_assert_lt(i, n, "more entries than expected");
        cr_assert_eq(list_data(node, item, link), want[i], "entry %zu out of place", i);
        cr_assert_eq(node->prev, prev, "entry %zu: its prev", i);
        cr_assert(list_linked(node));
        prev = node;
    }
    cr_assert_eq(i, n, "%zu entries, not %zu", i, n);
    cr_assert_eq(head->prev, prev, "the tail");
    cr_assert_eq(list_empty(head), n == 0);
    cr_assert_eq(list_first(head), n ? &want[0]->link : NULL);
}

Test(list, an_initialised_head_is_empty_and_a_zeroed_node_is_in_no_list)
{
    list head;
    list_init(&head);
    expect(&head, NULL, 0);
    item a = {0};
    cr_assert(!list_linked(&a.link));
}

Test(list, entries_keep_their_order_from_either_end)
{
    list head;
    list_init(&head);
    item a = {.id = 1}, b = {.id = 2}, c = {.id = 3}, d = {.id = 4};
    list_insert_tail(&head, &b.link);
    list_insert_tail(&head, &c.link);
    list_insert_head(&head, &a.link);
    list_insert_tail(&head, &d.link);
    expect(&head, (item *[]){&a, &b, &c, &d}, 4);
    cr_assert_eq(list_next(&head, &a.link), &b.link);
    cr_assert_null(list_next(&head, &d.link), "the last node has no next");
}

Test(list, removal_from_front_middle_or_back_keeps_the_ring_whole)
{
    list head;
    list_init(&head);
    item a = {0}, b = {0}, c = {0}, d = {0};
    list_insert_tail(&head, &a.link);
    list_insert_tail(&head, &b.link);
    list_insert_tail(&head, &c.link);
    list_insert_tail(&head, &d.link);
    list_remove(&b.link);
    expect(&head, (item *[]){&a, &c, &d}, 3);
    cr_assert(!list_linked(&b.link));
    list_remove(&a.link);
    expect(&head, (item *[]){&c, &d}, 2);
    list_remove(&d.link);
    expect(&head, (item *[]){&c}, 1);
    list_remove(&c.link);
    expect(&head, NULL, 0);
}

Test(list, removing_a_node_in_no_list_changes_nothing)
{
    list head;
    list_init(&head);
    item a = {0}, out = {0};
    list_insert_tail(&head, &a.link);
    list_remove(&out.link);
    expect(&head, (item *[]){&a}, 1);
    list_remove(&a.link);
    list_remove(&a.link); /* twice */
    expect(&head, NULL, 0);
    list_insert_head(&head, &a.link); /* a removed node goes in again */
    expect(&head, (item *[]){&a}, 1);
}

Test(list, foreach_visits_each_node_once_in_order_and_may_remove_the_current_one)
{
    list head;
    list_init(&head);
    item it[6];
    for (int i = 0; i < 6; i++) {
        it[i] = (item){.id = i};
        list_insert_tail(&head, &it[i].link);
    }
    int seen[6], n = 0;
    list_foreach(node, &head) {
        item *x = list_data(node, item, link);
        seen[n++] = x->id;
        if (x->id % 2 == 0)
            list_remove(node); /* the body removes the node it is at */
    }
    cr_assert_eq(n, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(seen[i], i);
    expect(&head, (item *[]){&it[1], &it[3], &it[5]}, 3);
    n = 0;
    list head2;
    list_init(&head2);
    list_foreach(node, &head2) {
        (void)node;
        n++;
    }
    cr_assert_eq(n, 0, "an empty list has nothing to visit");
}
