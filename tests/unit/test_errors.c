/* test_errors.c -- the error table of errors.h: each code's HTTP status and stable
 * machine-readable name, distinct names, non-empty messages, and the fallbacks for
 * values outside the table. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>

#include "unit.h"
#include "errors.h"

TestSuite(errors, .fini = unit_fini, .timeout = 60);

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct err_case {
    rl_err e;
    int status;
    char code[32];
};

ParameterizedTestParameters(errors, status_and_code_per_error)
{
    static struct err_case cases[] = {
        {RL_OK, 200, "ok"},
        {RL_E_INVALID_JSON, 400, "invalid_json"},
        {RL_E_INVALID_NAME, 400, "invalid_name"},
        {RL_E_INVALID_TTL, 400, "invalid_ttl"},
        {RL_E_INVALID_WAIT, 400, "invalid_wait"},
        {RL_E_INVALID_LEASE, 400, "invalid_lease"},
        {RL_E_INVALID_HOLD, 400, "invalid_hold"},
        {RL_E_INVALID_INDEX, 400, "invalid_index"},
        {RL_E_INVALID_OWNER, 400, "invalid_owner"},
        {RL_E_INVALID_LIMIT, 400, "invalid_limit"},
        {RL_E_INVALID_FORCE, 400, "invalid_force"},
        {RL_E_INVALID_QUERY, 400, "invalid_query"},
        {RL_E_UNAUTHORIZED, 401, "unauthorized"},
        {RL_E_FORBIDDEN, 403, "forbidden"},
        {RL_E_NOT_FOUND, 404, "not_found"},
        {RL_E_LEASE_NOT_FOUND, 404, "lease_not_found"},
        {RL_E_METHOD_NOT_ALLOWED, 405, "method_not_allowed"},
        {RL_E_LOCK_HELD, 409, "lock_held"},
        {RL_E_LOCK_CONTENDED, 409, "lock_contended"},
        {RL_E_BODY_TOO_LARGE, 413, "body_too_large"},
        {RL_E_CLIENT_CLOSED, 499, "client_closed"},
        {RL_E_INTERNAL, 500, "internal"},
        {RL_E_QUORUM_UNAVAILABLE, 503, "quorum_unavailable"},
        {RL_E_VALIDITY_EXHAUSTED, 503, "validity_exhausted"},
        {RL_E_MASTERS_QUARANTINED, 503, "masters_quarantined"},
        {RL_E_TOO_MANY_WAITERS, 503, "too_many_waiters"},
        {RL_E_TOO_MANY_STREAMS, 503, "too_many_streams"},
        {RL_E_SHUTTING_DOWN, 503, "shutting_down"},
        {RL_E_INVALID_MODE, 400, "invalid_mode"},
        {RL_E_INVALID_PERMITS, 400, "invalid_permits"},
        {RL_E_INVALID_REENTRANT, 400, "invalid_reentrant"},
        {RL_E_PERMITS_MISMATCH, 409, "permits_mismatch"},
        {RL_E_RELEASE_UNCONFIRMED, 503, "release_unconfirmed"},
        {RL_E_INVALID_LOCK_DELAY, 400, "invalid_lock_delay"},
        {RL_E_INVALID_MAX_HOLD, 400, "invalid_max_hold"},
        {RL_E_INVALID_TOKEN, 400, "invalid_token"},
        {RL_E_MAX_HOLD_EXCEEDED, 409, "max_hold_exceeded"},
    };
    return cr_make_param_array(struct err_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct err_case *c, errors, status_and_code_per_error)
{
    cr_assert_eq(rl_err_status(c->e), c->status, "%s: %d", c->code, rl_err_status(c->e));
    cr_assert_str_eq(rl_err_code(c->e), c->code);
    const char *m = rl_err_message(c->e);
    cr_assert_not_null(m);
    cr_assert_neq(m[0], '\0', "%s has an empty message", c->code);
}

Test(errors, the_table_above_covers_every_code)
{
    /* If a code is added, the table test above must learn its status. */
    cr_assert_eq(RL_ERR__COUNT, 37);
}

Test(errors, codes_are_distinct_snake_case)
{
    for (int i = 0; i < RL_ERR__COUNT; i++) {
        const char *a = rl_err_code((rl_err)i);
        cr_assert_eq(strspn(a, "abcdefghijklmnopqrstuvwxyz_"), strlen(a), "'%s'", a);
        for (int j = i + 1; j < RL_ERR__COUNT; j++)
            cr_assert_str_neq(a, rl_err_code((rl_err)j), "codes %d and %d are both '%s'", i, j,
                              a);
    }
}

Test(errors, messages_need_no_json_escaping)
{
    /* They go into replies through jw (which escapes), but keeping them plain keeps
     * logs and the OpenAPI examples readable. */
    for (int i = 0; i < RL_ERR__COUNT; i++) {
        const char *m = rl_err_message((rl_err)i);
        for (const char *p = m; *p; p++)
            cr_assert(*p >= 0x20 && *p != '"' && *p != '\\', "message of %d: '%s'", i, m);
    }
}

Test(errors, only_ok_is_a_success_status)
{
    for (int i = 0; i < RL_ERR__COUNT; i++) {
        int s = rl_err_status((rl_err)i);
        if (i == RL_OK)
            cr_assert_eq(s, 200);
        else
            cr_assert(s >= 400 && s <= 599, "error %d has status %d", i, s);
    }
}

Test(errors, out_of_range_values_fall_back_to_internal)
{
    rl_err bad[] = {RL_ERR__COUNT, (rl_err)(RL_ERR__COUNT + 1), (rl_err)-1, (rl_err)1000000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(rl_err_status(bad[i]), 500);
        cr_assert_str_eq(rl_err_code(bad[i]), "internal");
        cr_assert_str_eq(rl_err_message(bad[i]), "internal error");
    }
}
