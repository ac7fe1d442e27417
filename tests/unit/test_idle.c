/* test_idle.c -- the idle connection list of idle.h: oldest first, a push moves a
 * connection to the tail with its new time, removal from anywhere keeps the links
 * whole and is a no-op for NULL or unlisted connections, and a cut takes exactly
 * those waiting since before the cutoff, shutting their sockets down. */
#include <criterion/criterion.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"
#include "idle.h"

TestSuite(idle, .fini = unit_fini, .timeout = 30);

/* The list from head to tail must be exactly want[0..n), linked both ways. */
static void expect(const idle_list *l, idle_conn *const *want, size_t n)
{
    size_t i = 0;
    const list *prev = &l->conns;
    for (const list *c = l->conns.next; c != &l->conns; c = c->next, i++) {
        cr_assert_lt(i, n, "more connections than expected");
        cr_assert_eq(list_data(c, idle_conn, link), want[i], "connection %zu out of place", i);
        cr_assert_eq(c->prev, prev);
        prev = c;
    }
    cr_assert_eq(i, n, "%zu connections, not %zu", i, n);
    cr_assert_eq(l->conns.prev, prev, "the tail");
}

Test(idle, pushes_keep_the_oldest_first_and_a_push_again_moves_to_the_tail)
{
    idle_list l;
    idle_init(&l);
    idle_conn a = {.fd = -1}, b = {.fd = -1}, c = {.fd = -1};
    idle_push(&l, &a, 10);
    idle_push(&l, &b, 20);
    idle_push(&l, &c, 30);
    expect(&l, (idle_conn *[]){&a, &b, &c}, 3);
    idle_push(&l, &a, 40); /* keep-alive: its next request's clock starts */
    expect(&l, (idle_conn *[]){&b, &c, &a}, 3);
    cr_assert_eq(a.since_us, 40);
}

Test(idle, removal_from_head_middle_or_tail_keeps_the_links_whole)
{
    idle_list l;
    idle_init(&l);
    idle_conn a = {.fd = -1}, b = {.fd = -1}, c = {.fd = -1}, d = {.fd = -1};
    idle_push(&l, &a, 1);
    idle_push(&l, &b, 2);
    idle_push(&l, &c, 3);
    idle_push(&l, &d, 4);
    idle_remove(&l, &b);
    expect(&l, (idle_conn *[]){&a, &c, &d}, 3);
    idle_remove(&l, &a);
    expect(&l, (idle_conn *[]){&c, &d}, 2);
    idle_remove(&l, &d);
    expect(&l, (idle_conn *[]){&c}, 1);
    idle_remove(&l, &c);
    expect(&l, NULL, 0);
}

Test(idle, removing_null_or_an_unlisted_connection_changes_nothing)
{
    idle_list l;
    idle_init(&l);
    idle_conn a = {.fd = -1}, out = {.fd = -1};
    idle_push(&l, &a, 1);
    idle_remove(&l, NULL);
    idle_remove(&l, &out);
    expect(&l, (idle_conn *[]){&a}, 1);
    idle_remove(&l, &a);
    idle_remove(&l, &a); /* twice: the request was served, then the connection closed */
    expect(&l, NULL, 0);
}

Test(idle, a_cut_takes_exactly_those_waiting_since_before_the_cutoff)
{
    idle_list l;
    idle_init(&l);
    idle_conn a = {.fd = -1}, b = {.fd = -1}, c = {.fd = -1};
    idle_push(&l, &a, 100);
    idle_push(&l, &b, 200);
    idle_push(&l, &c, 300);
    cr_assert_eq(idle_cut(&l, 100), 0, "waiting since the cutoff itself is not past it");
    cr_assert_eq(idle_cut(&l, 201), 2);
    expect(&l, (idle_conn *[]){&c}, 1);
    cr_assert(!list_linked(&a.link) && !list_linked(&b.link));
    cr_assert_eq(idle_cut(&l, 1000), 1);
    expect(&l, NULL, 0);
    cr_assert_eq(idle_cut(&l, 1000), 0, "an empty list");
}

Test(idle, a_cut_shuts_the_socket_down_so_the_peer_sees_end_of_stream)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    idle_list l;
    idle_init(&l);
    idle_conn a = {.fd = sv[0]};
    idle_push(&l, &a, 5);
    cr_assert_eq(idle_cut(&l, 6), 1);
    char ch;
    cr_assert_eq(read(sv[1], &ch, 1), 0, "the other end reads end-of-stream");
    close(sv[0]);
    close(sv[1]);
}
