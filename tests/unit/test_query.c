/* test_query.c -- query.h: which query parameters each action takes, and the refusal of
 * an unknown, repeated or valueless one (400 invalid_query, like an unknown body
 * member). */
#include <criterion/criterion.h>
#include <string.h>

#include "unit.h"
#include "query.h"
#include "route.h"

TestSuite(query, .fini = unit_fini, .timeout = 30);

/* Judge a whole query string given as key/value pairs (value NULL: no '='). */
static rl_err judge(int action, const char *const *kv, size_t n, char *msg, size_t msglen)
{
    query_seen q = {0, RL_OK};
    msg[0] = '\0';
    for (size_t i = 0; i + 1 < n; i += 2)
        query_accept(&q, action, kv[i], kv[i + 1], msg, msglen);
    return q.err;
}

Test(query, each_action_takes_the_parameters_it_documents)
{
    char msg[256];
    const char *acq[] = {"ttl_ms", "5000", "wait_ms", "0", "lease", "x", "owner", "o", "hold", "stream"};
    cr_assert_eq(judge(ROUTE_A_ACQUIRE, acq, 10, msg, sizeof msg), RL_OK, "%s", msg);
    const char *rel[] = {"lease", "x", "force", "true"};
    cr_assert_eq(judge(ROUTE_A_RELEASE, rel, 4, msg, sizeof msg), RL_OK, "%s", msg);
    const char *ext[] = {"lease", "x", "ttl_ms", "1"};
    cr_assert_eq(judge(ROUTE_A_EXTEND, ext, 4, msg, sizeof msg), RL_OK, "%s", msg);
    const char *ins[] = {"index", "3", "wait_ms", "100"};
    cr_assert_eq(judge(ROUTE_A_INSPECT, ins, 4, msg, sizeof msg), RL_OK, "%s", msg);
    const char *lst[] = {"prefix", "a/", "limit", "10"};
    cr_assert_eq(judge(ROUTE_A_LIST, lst, 4, msg, sizeof msg), RL_OK, "%s", msg);
    const char *mrel[] = {"lease", "x"};
    cr_assert_eq(judge(ROUTE_A_MRELEASE, mrel, 2, msg, sizeof msg), RL_OK, "%s", msg);
}

Test(query, an_unknown_parameter_is_refused_and_named)
{
    char msg[256];
    const char *typo[] = {"ttl", "5000"};
    cr_assert_eq(judge(ROUTE_A_ACQUIRE, typo, 2, msg, sizeof msg), RL_E_INVALID_QUERY);
    cr_assert(strstr(msg, "'ttl'") && strstr(msg, "ttl_ms"), "%s", msg);
    /* A parameter of another action is unknown here. */
    const char *other[] = {"lease", "x", "ttl_ms", "1"};
    cr_assert_eq(judge(ROUTE_A_RELEASE, other, 4, msg, sizeof msg), RL_E_INVALID_QUERY);
    const char *wait_on_patch[] = {"wait_ms", "1"};
    cr_assert_eq(judge(ROUTE_A_EXTEND, wait_on_patch, 2, msg, sizeof msg), RL_E_INVALID_QUERY);
    const char *names[] = {"names", "a"};
    cr_assert_eq(judge(ROUTE_A_LIST, names, 2, msg, sizeof msg), RL_E_INVALID_QUERY);
}

Test(query, a_repeated_parameter_is_refused)
{
    char msg[256];
    const char *twice[] = {"ttl_ms", "5000", "ttl_ms", "6000"};
    cr_assert_eq(judge(ROUTE_A_ACQUIRE, twice, 4, msg, sizeof msg), RL_E_INVALID_QUERY);
    cr_assert(strstr(msg, "more than once"), "%s", msg);
    const char *same[] = {"lease", "x", "lease", "x"};
    cr_assert_eq(judge(ROUTE_A_RELEASE, same, 4, msg, sizeof msg), RL_E_INVALID_QUERY);
}

Test(query, a_parameter_without_a_value_is_refused)
{
    char msg[256];
    const char *bare[] = {"hold", NULL};
    cr_assert_eq(judge(ROUTE_A_ACQUIRE, bare, 2, msg, sizeof msg), RL_E_INVALID_QUERY);
    cr_assert(strstr(msg, "no value"), "%s", msg);
    const char *empty[] = {"prefix", ""}; /* "?prefix=": a value, the empty one */
    cr_assert_eq(judge(ROUTE_A_LIST, empty, 2, msg, sizeof msg), RL_OK, "%s", msg);
}

Test(query, the_first_problem_is_the_one_reported)
{
    char msg[256];
    const char *kv[] = {"bogus", "1", "ttl_ms", "1", "ttl_ms", "2"};
    cr_assert_eq(judge(ROUTE_A_ACQUIRE, kv, 6, msg, sizeof msg), RL_E_INVALID_QUERY);
    cr_assert(strstr(msg, "'bogus'"), "%s", msg);
}

Test(query, the_probes_do_not_check_their_query)
{
    char msg[256];
    const char *kv[] = {"anything", "1", "anything", "2"};
    cr_assert_null(query_keys(ROUTE_A_HEALTHZ));
    cr_assert_eq(judge(ROUTE_A_HEALTHZ, kv, 4, msg, sizeof msg), RL_OK);
    cr_assert_eq(judge(ROUTE_A_READYZ, kv, 4, msg, sizeof msg), RL_OK);
    cr_assert_eq(judge(ROUTE_A_METRICS, kv, 4, msg, sizeof msg), RL_OK);
}
