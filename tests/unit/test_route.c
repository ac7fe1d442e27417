/* test_route.c -- the routing table of route.h: which URL reaches which route and
 * lock name, which method runs which action where, the Allow header each route
 * answers a 405 with, the labels /metrics and the request log use, who must show a
 * token, and the percent-decoding of URLs. */
#include <criterion/criterion.h>
#include <string.h>

#include "unit.h"
#include "route.h"

TestSuite(route, .fini = unit_fini, .timeout = 30);

Test(route, a_lock_url_reaches_the_lock_route_with_the_rest_as_its_name)
{
    const char *name = NULL;
    size_t len = 99;
    const route *rt = route_match("/locks/jobs/nightly", &name, &len);
    cr_assert_not_null(rt);
    cr_assert_eq(rt->id, ROUTE_LOCK);
    cr_assert_eq(len, strlen("jobs/nightly"));
    cr_assert_str_eq(name, "jobs/nightly");
    rt = route_match("/locks/", &name, &len);
    cr_assert_eq(rt->id, ROUTE_LOCK, "an empty name is the handler's to refuse");
    cr_assert_eq(len, 0);
}

Test(route, fixed_paths_match_exactly_and_carry_no_name)
{
    static const struct { const char *url; int id; } cases[] = {
        {"/healthz", ROUTE_HEALTHZ}, {"/readyz", ROUTE_READYZ},
        {"/metrics", ROUTE_METRICS}, {"/locks", ROUTE_LOCKS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *name = "x";
        size_t len = 1;
        const route *rt = route_match(cases[i].url, &name, &len);
        cr_assert_not_null(rt, "%s", cases[i].url);
        cr_assert_eq(rt->id, cases[i].id, "%s", cases[i].url);
        cr_assert_str_eq(name, "");
        cr_assert_eq(len, 0);
    }
}

Test(route, other_urls_match_nothing)
{
    static const char *const urls[] = {"/", "", "/nope", "/healthz/", "/healthzz", "/lock",
                                       "/locksmith", "/metrics?x", "other", "/LOCKS"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        const char *name;
        size_t len;
        cr_assert_null(route_match(urls[i], &name, &len), "'%s' matched a route", urls[i]);
    }
}

Test(route, each_method_runs_its_action_and_no_other_is_allowed)
{
    static const struct { int id, method, action; } cases[] = {
        {ROUTE_LOCK, ROUTE_M_POST, ROUTE_A_ACQUIRE},
        {ROUTE_LOCK, ROUTE_M_DELETE, ROUTE_A_RELEASE},
        {ROUTE_LOCK, ROUTE_M_PATCH, ROUTE_A_EXTEND},
        {ROUTE_LOCK, ROUTE_M_GET, ROUTE_A_INSPECT},
        {ROUTE_LOCK, ROUTE_M_OTHER, ROUTE_A_NONE},
        {ROUTE_HEALTHZ, ROUTE_M_GET, ROUTE_A_HEALTHZ},
        {ROUTE_HEALTHZ, ROUTE_M_POST, ROUTE_A_NONE},
        {ROUTE_READYZ, ROUTE_M_GET, ROUTE_A_READYZ},
        {ROUTE_READYZ, ROUTE_M_DELETE, ROUTE_A_NONE},
        {ROUTE_METRICS, ROUTE_M_GET, ROUTE_A_METRICS},
        {ROUTE_METRICS, ROUTE_M_PATCH, ROUTE_A_NONE},
        {ROUTE_LOCKS, ROUTE_M_POST, ROUTE_A_MACQUIRE},
        {ROUTE_LOCKS, ROUTE_M_DELETE, ROUTE_A_MRELEASE},
        {ROUTE_LOCKS, ROUTE_M_GET, ROUTE_A_LIST},
        {ROUTE_LOCKS, ROUTE_M_PATCH, ROUTE_A_NONE},
        {ROUTE_OTHER, ROUTE_M_GET, ROUTE_A_NONE},
        {ROUTE_SEM, ROUTE_M_POST, ROUTE_A_SEM_ACQUIRE},
        {ROUTE_SEM, ROUTE_M_DELETE, ROUTE_A_SEM_RELEASE},
        {ROUTE_SEM, ROUTE_M_PATCH, ROUTE_A_SEM_EXTEND},
        {ROUTE_SEM, ROUTE_M_GET, ROUTE_A_SEM_INSPECT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(route_action(route_get(cases[i].id), cases[i].method), cases[i].action,
                     "route %d, method %s", cases[i].id, route_method_name(cases[i].method));
}

Test(route, every_action_is_reached_by_exactly_one_route_and_method)
{
    int seen[ROUTE_A__COUNT] = {0};
    for (int r = 0; r < ROUTE__COUNT; r++)
        for (int m = 0; m < ROUTE_M__COUNT; m++)
            if (m != ROUTE_M_HEAD) /* HEAD mirrors GET (below) */
                seen[route_action(route_get(r), m)]++;
    for (int a = ROUTE_A_NONE + 1; a < ROUTE_A__COUNT; a++)
        cr_assert_eq(seen[a], 1, "action %d is reached %d times", a, seen[a]);
}

Test(route, head_runs_what_get_runs_wherever_get_is_allowed)
{
    for (int r = 0; r < ROUTE__COUNT; r++)
        cr_assert_eq(route_action(route_get(r), ROUTE_M_HEAD), route_action(route_get(r), ROUTE_M_GET),
                     "route %d", r);
    cr_assert_eq(route_method_id("HEAD"), ROUTE_M_HEAD);
    cr_assert_str_eq(route_method_name(ROUTE_M_HEAD), "HEAD");
}

Test(route, allow_lists_the_methods_of_the_route_in_table_order)
{
    char buf[64];
    cr_assert_eq(route_allow(route_get(ROUTE_LOCK), buf, sizeof buf), strlen("GET, HEAD, POST, PATCH, DELETE"));
    cr_assert_str_eq(buf, "GET, HEAD, POST, PATCH, DELETE");
    route_allow(route_get(ROUTE_LOCKS), buf, sizeof buf);
    cr_assert_str_eq(buf, "GET, HEAD, POST, DELETE");
    route_allow(route_get(ROUTE_HEALTHZ), buf, sizeof buf);
    cr_assert_str_eq(buf, "GET, HEAD");
    cr_assert_eq(route_allow(route_get(ROUTE_OTHER), buf, sizeof buf), 0);
    cr_assert_str_eq(buf, "");
}

Test(route, allow_is_cut_to_the_buffer_and_stays_terminated)
{
    char buf[10];
    memset(buf, 'z', sizeof buf);
    size_t n = route_allow(route_get(ROUTE_LOCK), buf, sizeof buf);
    cr_assert_lt(n, sizeof buf);
    cr_assert_eq(strlen(buf), n);
    cr_assert_str_eq(buf, "GET, HEAD");
    cr_assert_eq(route_allow(route_get(ROUTE_LOCK), buf, 0), 0);
}

Test(route, methods_are_named_and_parsed_back)
{
    for (int m = 0; m < ROUTE_M_OTHER; m++)
        cr_assert_eq(route_method_id(route_method_name(m)), m);
    cr_assert_str_eq(route_method_name(ROUTE_M_OTHER), "other");
    cr_assert_eq(route_method_id("PUT"), ROUTE_M_OTHER);
    cr_assert_eq(route_method_id("get"), ROUTE_M_OTHER, "methods are case-sensitive");
    cr_assert_eq(route_method_id("other"), ROUTE_M_OTHER);
    cr_assert_str_eq(route_method_name(-1), "other");
    cr_assert_str_eq(route_method_name(ROUTE_M__COUNT), "other");
}

Test(route, labels_are_the_ones_metrics_and_logs_have_always_shown)
{
    static const char *const labels[ROUTE__COUNT] = {
        [ROUTE_LOCK] = "/locks/{name}", [ROUTE_HEALTHZ] = "/healthz", [ROUTE_READYZ] = "/readyz",
        [ROUTE_METRICS] = "/metrics", [ROUTE_OTHER] = "other", [ROUTE_LOCKS] = "/locks",
        [ROUTE_SEM] = "/semaphores/{name}",
    };
    for (int r = 0; r < ROUTE__COUNT; r++) {
        cr_assert_eq(route_get(r)->id, r);
        cr_assert_str_eq(route_get(r)->label, labels[r]);
    }
    cr_assert_null(route_get(-1));
    cr_assert_null(route_get(ROUTE__COUNT));
}

Test(route, lock_routes_always_need_a_token_probes_only_when_asked_healthz_never)
{
    cr_assert(route_get(ROUTE_LOCK)->lock && route_get(ROUTE_LOCKS)->lock);
    cr_assert(!route_get(ROUTE_READYZ)->lock && route_get(ROUTE_READYZ)->probe);
    cr_assert(!route_get(ROUTE_METRICS)->lock && route_get(ROUTE_METRICS)->probe);
    cr_assert(!route_get(ROUTE_HEALTHZ)->lock && !route_get(ROUTE_HEALTHZ)->probe);
}

Test(route, percent_escapes_decode_in_place_in_either_case)
{
    char s[] = "/locks/a%2Fb%3a%41%7e";
    cr_assert_eq(route_unescape(s), strlen("/locks/a/b:A~"));
    cr_assert_str_eq(s, "/locks/a/b:A~");
}

Test(route, a_decoded_nul_becomes_del_instead_of_cutting_the_string)
{
    char s[] = "a%00b";
    cr_assert_eq(route_unescape(s), 3);
    cr_assert_eq(s[1], 0x7f);
    cr_assert_eq(s[2], 'b');
}

Test(route, a_percent_without_two_hex_digits_stays_as_it_is)
{
    static const char *const cases[] = {"%", "a%", "a%4", "%zz", "%4g", "%g4", "100%"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[16];
        strcpy(s, cases[i]);
        cr_assert_eq(route_unescape(s), strlen(cases[i]), "'%s'", cases[i]);
        cr_assert_str_eq(s, cases[i]);
    }
    char s[] = "%%41";
    route_unescape(s);
    cr_assert_str_eq(s, "%A", "the first % is kept, the escape after it decoded");
}
