/* test_auth.c -- the tokens file (auth.h): the old form TOKEN [NAME-PREFIX] reads as it
 * always did, +admin and name=LABEL in any order after the token, and what the parser
 * refuses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "auth.h"

TestSuite(auth, .fini = unit_fini, .timeout = 30);

#define T1 "token-one-0123456789"
#define T2 "token-two-0123456789"
#define T3 "token-three-01234567"

static int parse(auth *a, const char *text, char *err, size_t cap)
{
    memset(a, 0, sizeof *a);
    err[0] = '\0';
    return auth_parse(a, text, err, cap);
}

Test(auth, the_old_form_reads_as_it_always_did)
{
    auth a;
    char err[256];
    cr_assert_eq(parse(&a, "# comment\n" T1 "\n\n" T2 " billing/\n", err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.n, 2);
    cr_assert_null(a.tokens[0].scope);
    cr_assert_str_eq(a.tokens[1].scope, "billing/");
    cr_assert_eq(a.tokens[0].admin, 0);
    cr_assert_eq(a.tokens[1].admin, 0);
    cr_assert_str_eq(a.tokens[0].label, "line 2", "named by its line");
    cr_assert_str_eq(a.tokens[1].label, "line 4");
    auth_free(&a);
}

Test(auth, admin_and_a_label_in_any_order_after_the_token)
{
    auth a;
    char err[256];
    const char *text = T1 " +admin\n" T2 " name=ops@host-1 billing/ +admin\n" T3 " team/ name=ci\n";
    cr_assert_eq(parse(&a, text, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.n, 3);
    cr_assert_eq(a.tokens[0].admin, 1);
    cr_assert_null(a.tokens[0].scope);
    cr_assert_str_eq(a.tokens[0].label, "line 1");
    cr_assert_eq(a.tokens[1].admin, 1);
    cr_assert_str_eq(a.tokens[1].scope, "billing/");
    cr_assert_str_eq(a.tokens[1].label, "ops@host-1");
    cr_assert_eq(a.tokens[2].admin, 0);
    cr_assert_str_eq(a.tokens[2].scope, "team/");
    cr_assert_str_eq(a.tokens[2].label, "ci");
    const auth_token *t = auth_token_of(&a, "Bearer " T2);
    cr_assert_not_null(t);
    cr_assert(t->admin);
    cr_assert_null(auth_token_of(&a, "Bearer " T2 "x"));
    cr_assert_null(auth_token_of(&a, NULL));
    cr_assert_eq(auth_check(&a, "Bearer " T2, "billing/x", 9), RL_OK);
    cr_assert_eq(auth_check(&a, "Bearer " T2, "payroll", 7), RL_E_FORBIDDEN, "admin keeps its scope");
    auth_free(&a);
}

Test(auth, the_bearer_scheme_is_case_insensitive)
{
    auth a;
    char err[256];
    cr_assert_eq(parse(&a, T1 "\n", err, sizeof err), 0, "%s", err);
    const char *ok[] = {"Bearer " T1, "bearer " T1, "BEARER " T1, "bEaReR\t" T1, "Bearer   " T1};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_assert_not_null(auth_token_of(&a, ok[i]), "%s", ok[i]);
        cr_assert_eq(auth_check(&a, ok[i], "x", 1), RL_OK, "%s", ok[i]);
        cr_assert(auth_is_bearer(ok[i]), "%s", ok[i]);
    }
    const char *no[] = {"Basic " T1, "Bearer" T1, T1, "Bearerx " T1, ""};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        cr_assert_null(auth_token_of(&a, no[i]), "%s", no[i]);
    cr_assert(!auth_is_bearer("Basic abc") && !auth_is_bearer(NULL) && !auth_is_bearer("Bearer"));
    auth_free(&a);
}

Test(auth, what_the_parser_refuses)
{
    const char *bad[] = {
        T1 " a/ b/\n",                 /* two scopes */
        T1 " +admin +admin\n",         /* a flag twice */
        T1 " +root\n",                 /* an unknown flag */
        T1 " name=\n",                 /* an empty label */
        T1 " name=a name=b\n",         /* two labels */
        T1 " name=has\"quote\n",       /* a label outside [A-Za-z0-9._:@/-] */
        T1 " x=y\n",                   /* another key */
        "short +admin\n",              /* a token under 16 characters */
        "# nothing but comments\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        auth a;
        char err[256];
        cr_assert_eq(parse(&a, bad[i], err, sizeof err), -1, "case %zu accepted", i);
        cr_assert(err[0], "case %zu: a message", i);
        cr_assert_null(strstr(err, T1), "case %zu: the message never shows the token: %s", i, err);
        auth_free(&a);
    }
    char label[100];
    memset(label, 'a', sizeof label);
    char line[200];
    snprintf(line, sizeof line, T1 " name=%.*s\n", AUTH_LABEL_MAX, label);
    auth a;
    char err[256];
    cr_assert_eq(parse(&a, line, err, sizeof err), 0, "a label of %d", AUTH_LABEL_MAX);
    auth_free(&a);
    snprintf(line, sizeof line, T1 " name=%.*s\n", AUTH_LABEL_MAX + 1, label);
    cr_assert_eq(parse(&a, line, err, sizeof err), -1);
    auth_free(&a);
}
