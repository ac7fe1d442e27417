/* test_cli_unit.c -- unit tests of the redlock client's pure parts: the command line
 * (args.c), exit codes and the lease clock (policy.c, keep.c's sleep), request bodies
 * (ops.c); and of the command's guard (proc.c), with real processes. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/keep.h"
#include "cli/ops.h"
#include "cli/policy.h"
#include "cli/proc.h"

/* ---- args ------------------------------------------------------------------------ */

static const char *const fake_env[][2] = {
    {"REDLOCK_URL", "http://lock.example:9000"},
    {"REDLOCK_TOKEN", "tok-from-env"},
    {"REDLOCK_LEASE", "lease-from-env-0123"},
};

static const char *env_table(const char *key)
{
    for (size_t i = 0; i < sizeof(fake_env) / sizeof(fake_env[0]); i++)
        if (strcmp(fake_env[i][0], key) == 0)
            return fake_env[i][1];
    return NULL;
}

/* Parse a NULL-terminated word list; returns cli_opts_parse's result. */
static int parse(cli_opts *o, cli_getenv_fn env, const char **words, char *err, size_t len)
{
    int argc = 0;

    while (words[argc] != NULL)
        argc++;
    cli_opts_init(o, env);
    return cli_opts_parse(o, argc, (char **)words, err, len);
}

Test(args, defaults_without_environment)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "status", "jobs/nightly", NULL};

    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_STATUS);
    cr_assert_str_eq(o.name, "jobs/nightly");
    cr_assert_str_eq(o.url, "http://127.0.0.1:8080");
    cr_assert_null(o.token);
    cr_assert_eq(o.ttl_ms, -1);
    cr_assert_eq(o.wait_ms, -1);
    cr_assert_eq(o.grace_ms, 5000);
}

Test(args, flags_override_environment)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "--url", "http://other:1", "acquire", "n", "--token=t2",
                       "--ttl", "1500", "--wait=250", "-q", NULL};

    cr_assert_eq(parse(&o, env_table, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_ACQUIRE);
    cr_assert_str_eq(o.url, "http://other:1");
    cr_assert_str_eq(o.token, "t2");
    cr_assert_eq(o.ttl_ms, 1500);
    cr_assert_eq(o.wait_ms, 250);
    cr_assert_eq(o.quiet, 1);
}

Test(args, environment_supplies_url_and_token)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "status", "n", NULL};

    cr_assert_eq(parse(&o, env_table, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(o.url, "http://lock.example:9000");
    cr_assert_str_eq(o.token, "tok-from-env");
}

Test(args, env_lease_serves_release_and_extend_but_never_acquire)
{
    cli_opts o;
    char err[256];
    const char *rel[] = {"redlock", "release", "n", NULL};
    const char *acq[] = {"redlock", "acquire", "n", NULL};

    cr_assert_eq(parse(&o, env_table, rel, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(o.lease, "lease-from-env-0123");
    cr_assert_eq(parse(&o, env_table, acq, err, sizeof(err)), 0, "%s", err);
    cr_assert_null(o.lease, "acquire inside `redlock run` must not reuse the outer lease");
}

Test(args, release_without_lease_is_a_usage_error)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "release", "n", NULL};

    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1);
    cr_assert(strstr(err, "--lease") != NULL, "%s", err);
}

Test(args, lease_dash_means_stdin)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "extend", "n", "--lease", "-", NULL};

    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.lease_from_stdin, 1);
    cr_assert_null(o.lease);
}

Test(args, run_takes_the_command_after_double_dash)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "run", "n", "--ttl", "900", "--grace", "0", "--",
                       "sh",      "-c",  "--ttl x", NULL};

    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_RUN);
    cr_assert_eq(o.ttl_ms, 900);
    cr_assert_eq(o.grace_ms, 0);
    cr_assert_eq(o.argc, 3);
    cr_assert_str_eq(o.argv[0], "sh");
    cr_assert_str_eq(o.argv[2], "--ttl x");
    cr_assert_null(o.argv[3]);
}

Test(args, run_takes_the_command_after_name_like_flock)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "run", "n", "make", "--jobs", NULL};

    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.argc, 2);
    cr_assert_str_eq(o.argv[0], "make");
    cr_assert_str_eq(o.argv[1], "--jobs");
}

Test(args, elect_takes_the_command_and_an_owner)
{
    cli_opts o;
    char err[256];
    const char *w[] = {"redlock", "elect", "leader/db", "--owner", "host-1 pid 42", "--ttl",
                       "3000", "--grace", "200", "--", "server", "--port", "1", NULL};

    cr_assert_eq(parse(&o, env_table, w, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_ELECT);
    cr_assert_str_eq(o.name, "leader/db");
    cr_assert_str_eq(o.owner, "host-1 pid 42");
    cr_assert_eq(o.ttl_ms, 3000);
    cr_assert_eq(o.grace_ms, 200);
    cr_assert_eq(o.argc, 3);
    cr_assert_str_eq(o.argv[0], "server");
    cr_assert_null(o.lease, "REDLOCK_LEASE is never elect's");
}

Test(args, elect_refuses_what_does_not_apply)
{
    cli_opts o;
    char err[256];
    const char *nocmd[] = {"redlock", "elect", "n", NULL};
    const char *wait[] = {"redlock", "elect", "n", "--wait", "10", "--", "true", NULL};
    const char *lease[] = {"redlock", "elect", "n", "--lease", "abcdefghijklmnop", "true", NULL};
    const char *owner_status[] = {"redlock", "status", "n", "--owner", "me", NULL};

    cr_assert_eq(parse(&o, NULL, nocmd, err, sizeof(err)), -1);
    cr_assert(strstr(err, "elect: no command") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, wait, err, sizeof(err)), -1);
    cr_assert_eq(parse(&o, NULL, lease, err, sizeof(err)), -1);
    cr_assert_eq(parse(&o, NULL, owner_status, err, sizeof(err)), -1);
    cr_assert(strstr(err, "--owner") != NULL, "%s", err);
}

Test(args, owner_is_1_to_256_printable_characters)
{
    cli_opts o;
    char err[256];
    char longest[CLI_OWNER_MAX + 2];
    const char *w[] = {"redlock", "acquire", "n", "--owner", NULL, NULL};

    memset(longest, 'x', CLI_OWNER_MAX);
    longest[CLI_OWNER_MAX] = '\0';
    w[4] = longest;
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), 0, "%s", err);
    longest[CLI_OWNER_MAX] = 'x';
    longest[CLI_OWNER_MAX + 1] = '\0';
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1, "257 bytes");
    w[4] = "";
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1, "empty");
    w[4] = "new\nline";
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1, "control character");
    w[4] = "caf\xc3\xa9";
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1, "not ASCII");
}

Test(args, help_and_version_win_over_errors_later_on)
{
    cli_opts o;
    char err[256];
    const char *h[] = {"redlock", "--help", NULL};
    const char *v[] = {"redlock", "run", "-V", NULL};

    cr_assert_eq(parse(&o, NULL, h, err, sizeof(err)), 0);
    cr_assert_eq(o.cmd, CLI_CMD_HELP);
    cr_assert_eq(parse(&o, NULL, v, err, sizeof(err)), 0);
    cr_assert_eq(o.cmd, CLI_CMD_VERSION);
}

/* Criterion copies parameters into a fresh process: no pointers, only arrays. */
struct bad_case {
    char words[6][16];
    char message_part[32];
};

ParameterizedTestParameters(args, usage_errors)
{
    static struct bad_case cases[] = {
        {{"redlock"}, "no command"},
        {{"redlock", "lock", "n"}, "unknown command"},
        {{"redlock", "status"}, "no lock NAME"},
        {{"redlock", "run", "n"}, "no command given after NAME"},
        {{"redlock", "run", "n", "--"}, "no command given after NAME"},
        {{"redlock", "acquire", "n", "--ttl", "0"}, "--ttl"},
        {{"redlock", "acquire", "n", "--ttl", "12x"}, "--ttl"},
        {{"redlock", "acquire", "n", "--wait", "-1"}, "--wait"},
        {{"redlock", "acquire", "n", "--ttl"}, "needs a value"},
        {{"redlock", "status", "n", "extra"}, "unexpected argument"},
        {{"redlock", "status", "n", "--bogus"}, "unknown option"},
        {{"redlock", "status", "n", "-x"}, "unknown option"},
        {{"redlock", "status", "n", "--url="}, "--url"},
        {{"redlock", "sem"}, "sem: no verb given"},
        {{"redlock", "sem", "lock", "n"}, "unknown sem verb"},
        {{"redlock", "sem", "sem", "n"}, "unknown sem verb"},
        {{"redlock", "sem", "elect", "n", "--", "true"}, "the verbs are"},
        {{"redlock", "sem", "watch", "n"}, "the verbs are"},
        {{"redlock", "sem", "status"}, "no semaphore NAME"},
        {{"redlock", "sem", "acquire", "n"}, "sem acquire needs --permits"},
        {{"redlock", "sem", "run", "n", "--", "true"}, "sem run needs --permits"},
        {{"redlock", "sem", "run", "n", "--permits=2"}, "sem run: no command"},
        {{"redlock", "sem", "acquire", "n", "--permits=0"}, "--permits"},
        {{"redlock", "sem", "acquire", "n", "--permits=-2"}, "--permits"},
        {{"redlock", "sem", "acquire", "n", "--permits=2x"}, "--permits"},
        {{"redlock", "sem", "release", "n"}, "sem release needs --lease"},
        {{"redlock", "acquire", "n", "--permits=2"}, "--permits is for the sem"},
        {{"redlock", "sem", "acquire", "n", "--shared", "--permits=2"}, "--shared is for"},
        {{"redlock", "status", "n", "--shared"}, "--shared is for"},
        {{"redlock", "elect", "n", "--shared", "true"}, "--shared is for"},
        {{"redlock", "run", "n", "--reentrant", "true"}, "--reentrant is for"},
        {{"redlock", "release", "n", "--reentrant"}, "--reentrant is for"},
        {{"redlock", "acquire", "n", "--reentrant", "--shared"}, "do not go together"},
    };
    return cr_make_param_array(struct bad_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *c, args, usage_errors)
{
    cli_opts o;
    char err[256];
    const char *w[7] = {NULL};

    for (int i = 0; i < 6 && c->words[i][0] != '\0'; i++)
        w[i] = c->words[i];
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1);
    cr_assert(strstr(err, c->message_part) != NULL, "'%s' lacks '%s'", err,
              c->message_part);
}

Test(args, shared_goes_with_acquire_and_run)
{
    cli_opts o;
    char err[256];
    const char *acq[] = {"redlock", "acquire", "--shared", "reports", NULL};
    const char *run[] = {"redlock", "run", "reports", "--shared", "--", "cat", "x", NULL};
    const char *plain[] = {"redlock", "acquire", "reports", NULL};

    cr_assert_eq(parse(&o, NULL, acq, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_ACQUIRE);
    cr_assert_eq(o.shared, 1);
    cr_assert_eq(o.sem, 0);
    cr_assert_str_eq(o.name, "reports");
    cr_assert_eq(parse(&o, NULL, run, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_RUN);
    cr_assert_eq(o.shared, 1);
    cr_assert_eq(o.argc, 2);
    cr_assert_str_eq(o.argv[0], "cat");
    cr_assert_eq(parse(&o, NULL, plain, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.shared, 0, "exclusive stays the default");
    cr_assert_eq(o.reentrant, 0);
}

Test(args, reentrant_acquire_reenters_the_lease_given_or_else_the_environments)
{
    cli_opts o;
    char err[256];
    const char *env[] = {"redlock", "acquire", "n", "--reentrant", NULL};
    const char *flag[] = {"redlock", "acquire", "n", "--reentrant", "--lease",
                          "lease-from-flag-0123", NULL};

    cr_assert_eq(parse(&o, env_table, env, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.reentrant, 1);
    cr_assert_str_eq(o.lease, "lease-from-env-0123", "inside `redlock run`: its lease");
    cr_assert_eq(parse(&o, env_table, flag, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(o.lease, "lease-from-flag-0123");
    cr_assert_eq(parse(&o, NULL, env, err, sizeof(err)), 0, "%s", err);
    cr_assert_null(o.lease, "no lease anywhere: a first acquire");
}

Test(args, sem_takes_a_verb_a_name_and_permits)
{
    cli_opts o;
    char err[256];
    const char *acq[] = {"redlock", "--url", "http://u:1", "sem", "acquire", "pool/db",
                         "--permits", "3", "--ttl=2000", "--wait", "500", NULL};
    const char *opts_first[] = {"redlock", "--permits=1024", "sem", "status", "pool/db",
                                NULL};

    cr_assert_eq(parse(&o, env_table, acq, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.sem, 1);
    cr_assert_eq(o.cmd, CLI_CMD_ACQUIRE);
    cr_assert_str_eq(o.name, "pool/db");
    cr_assert_eq(o.permits, 3);
    cr_assert_eq(o.ttl_ms, 2000);
    cr_assert_eq(o.wait_ms, 500);
    cr_assert_null(o.lease, "sem acquire must not reuse REDLOCK_LEASE either");
    cr_assert_eq(parse(&o, NULL, opts_first, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_STATUS);
    cr_assert_eq(o.sem, 1);
    cr_assert_eq(o.permits, 1024, "the other verbs accept --permits");
}

Test(args, sem_run_takes_the_command_like_run)
{
    cli_opts o;
    char err[256];
    const char *dd[] = {"redlock", "sem", "run", "pool", "--permits", "2", "--grace", "10",
                        "--", "sh", "-c", "echo $REDLOCK_SLOT", NULL};
    const char *bare[] = {"redlock", "sem", "run", "pool", "--permits=2", "make", "-j", NULL};

    cr_assert_eq(parse(&o, NULL, dd, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.sem, 1);
    cr_assert_eq(o.cmd, CLI_CMD_RUN);
    cr_assert_eq(o.permits, 2);
    cr_assert_eq(o.grace_ms, 10);
    cr_assert_eq(o.argc, 3);
    cr_assert_str_eq(o.argv[0], "sh");
    cr_assert_eq(parse(&o, NULL, bare, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.argc, 2);
    cr_assert_str_eq(o.argv[0], "make");
}

Test(args, sem_release_and_extend_take_the_lease_from_the_environment)
{
    cli_opts o;
    char err[256];
    const char *rel[] = {"redlock", "sem", "release", "pool", NULL};
    const char *ext[] = {"redlock", "sem", "extend", "pool", "--ttl", "900", NULL};

    cr_assert_eq(parse(&o, env_table, rel, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_RELEASE);
    cr_assert_str_eq(o.lease, "lease-from-env-0123");
    cr_assert_eq(parse(&o, env_table, ext, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.cmd, CLI_CMD_EXTEND);
    cr_assert_str_eq(o.lease, "lease-from-env-0123");
}

Test(args, a_bad_lease_is_refused_without_echoing_it)
{
    cli_opts o;
    char err[256];
    char lease[200];
    const char *w[] = {"redlock", "release", "n", "--lease", lease, NULL};

    memset(lease, 'S', sizeof(lease) - 1);
    lease[sizeof(lease) - 1] = '\0';
    cr_assert_eq(parse(&o, NULL, w, err, sizeof(err)), -1);
    cr_assert_null(strstr(err, "SSSS"), "the message echoes the lease: %s", err);
}

Test(args, conflict_exit_code_like_flocks_E)
{
    cli_opts o;
    char err[256];
    const char *a[] = {"redlock", "acquire", "n", "-E", "3", NULL};
    const char *b[] = {"redlock", "run", "n", "-qE7", "--", "true", NULL};
    const char *c[] = {"redlock", "acquire", "n", "--conflict-exit-code=0", NULL};
    const char *d[] = {"redlock", "run", "n", "--conflict-exit-code", "255", "true", NULL};
    const char *dflt[] = {"redlock", "acquire", "n", NULL};

    cr_assert_eq(parse(&o, NULL, dflt, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.conflict_exit, 75, "75 unless given");
    cr_assert_eq(parse(&o, NULL, a, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.conflict_exit, 3);
    cr_assert_eq(parse(&o, NULL, b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.conflict_exit, 7);
    cr_assert_eq(o.quiet, 1);
    cr_assert_str_eq(o.argv[0], "true");
    cr_assert_eq(parse(&o, NULL, c, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.conflict_exit, 0);
    cr_assert_eq(parse(&o, NULL, d, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.conflict_exit, 255);
    cr_assert_str_eq(o.argv[0], "true");
}

Test(args, conflict_exit_code_refuses_bad_values_and_other_commands)
{
    cli_opts o;
    char err[256];
    const char *big[] = {"redlock", "acquire", "n", "-E", "256", NULL};
    const char *neg[] = {"redlock", "acquire", "n", "--conflict-exit-code", "-1", NULL};
    const char *none[] = {"redlock", "acquire", "n", "-E", NULL};
    const char *status[] = {"redlock", "status", "n", "-E", "3", NULL};
    const char *elect[] = {"redlock", "elect", "n", "-E", "3", "--", "true", NULL};

    cr_assert_eq(parse(&o, NULL, big, err, sizeof(err)), -1);
    cr_assert(strstr(err, "0..255") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, neg, err, sizeof(err)), -1);
    cr_assert(strstr(err, "--conflict-exit-code") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, none, err, sizeof(err)), -1);
    cr_assert(strstr(err, "needs a value") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, status, err, sizeof(err)), -1);
    cr_assert(strstr(err, "acquire and run") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, elect, err, sizeof(err)), -1);
}

Test(args, too_large_ttl_and_wait_name_the_real_limits)
{
    cli_opts o;
    char err[512];
    const char *ttl[] = {"redlock", "acquire", "n", "--ttl", "2592000001", NULL};
    const char *ok[] = {"redlock", "acquire", "n", "--ttl", "2592000000", "--wait", "86400000",
                        NULL};
    const char *wait[] = {"redlock", "acquire", "n", "--wait", "86400001", NULL};
    const char *zero[] = {"redlock", "acquire", "n", "--ttl", "0", NULL};

    cr_assert_eq(parse(&o, NULL, ttl, err, sizeof(err)), -1);
    cr_assert(strstr(err, "above 2592000000") != NULL, "%s", err);
    cr_assert(strstr(err, "--max-ttl-ms (3600000") != NULL, "%s", err);
    cr_assert_null(strstr(err, "not a"), "a number is called a number: %s", err);
    cr_assert_eq(parse(&o, NULL, ok, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.ttl_ms, 2592000000L);
    cr_assert_eq(parse(&o, NULL, wait, err, sizeof(err)), -1);
    cr_assert(strstr(err, "above 86400000") != NULL, "%s", err);
    cr_assert(strstr(err, "--max-wait-ms (60000") != NULL, "%s", err);
    cr_assert_eq(parse(&o, NULL, zero, err, sizeof(err)), -1);
    cr_assert(strstr(err, "below 1") != NULL, "%s", err);
}

static const char *const ca_env[][2] = {
    {"CURL_CA_BUNDLE", "/etc/curl-bundle.pem"},
    {"SSL_CERT_FILE", "/etc/ssl-cert-file.pem"},
};

static const char *env_both(const char *key)
{
    for (size_t i = 0; i < sizeof(ca_env) / sizeof(ca_env[0]); i++)
        if (strcmp(ca_env[i][0], key) == 0)
            return ca_env[i][1];
    return NULL;
}

static const char *env_ssl_only(const char *key)
{
    return strcmp(key, "SSL_CERT_FILE") == 0 ? "/etc/ssl-cert-file.pem" : NULL;
}

Test(args, cacert_from_flag_then_curl_ca_bundle_then_ssl_cert_file)
{
    cli_opts o;
    char err[256];
    const char *plain[] = {"redlock", "status", "n", NULL};
    const char *flag[] = {"redlock", "status", "n", "--cacert", "/my/ca.pem", NULL};
    const char *empty[] = {"redlock", "status", "n", "--cacert=", NULL};

    cr_assert_eq(parse(&o, NULL, plain, err, sizeof(err)), 0);
    cr_assert_null(o.cacert, "libcurl's default unless told");
    cr_assert_eq(parse(&o, env_ssl_only, plain, err, sizeof(err)), 0);
    cr_assert_str_eq(o.cacert, "/etc/ssl-cert-file.pem");
    cr_assert_eq(parse(&o, env_both, plain, err, sizeof(err)), 0);
    cr_assert_str_eq(o.cacert, "/etc/curl-bundle.pem", "CURL_CA_BUNDLE first, as curl(1)");
    cr_assert_eq(parse(&o, env_both, flag, err, sizeof(err)), 0);
    cr_assert_str_eq(o.cacert, "/my/ca.pem", "the flag wins");
    cr_assert_eq(parse(&o, NULL, empty, err, sizeof(err)), -1);
}

Test(args, parse_ms_bounds)
{
    long v = 0;

    cr_assert_eq(cli_parse_ms("0", 0, 10, &v), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(cli_parse_ms("10", 0, 10, &v), 0);
    cr_assert_eq(cli_parse_ms("11", 0, 10, &v), -1);
    cr_assert_eq(cli_parse_ms("", 0, 10, &v), -1);
    cr_assert_eq(cli_parse_ms(" 5", 0, 10, &v), -1);
    cr_assert_eq(cli_parse_ms("+5", 0, 10, &v), -1);
    cr_assert_eq(cli_parse_ms("99999999999999999999", 0, 10, &v), -1);
}

/* ---- policy ---------------------------------------------------------------------- */

Test(policy, exit_codes_for_http_status)
{
    cr_assert_eq(cli_exit_for_status(200), 0);
    cr_assert_eq(cli_exit_for_status(201), 0);
    cr_assert_eq(cli_exit_for_status(409), 75);
    cr_assert_eq(cli_exit_for_status(503), 75);
    cr_assert_eq(cli_exit_for_status(0), 75, "no answer (connection refused) is temporary");
    cr_assert_eq(cli_exit_for_status(400), 1);
    cr_assert_eq(cli_exit_for_status(401), 1);
    cr_assert_eq(cli_exit_for_status(404), 1);
    cr_assert_eq(cli_exit_for_status(500), 1);
}

Test(policy, acquire_conflicts_take_the_conflict_exit_code)
{
    cr_assert_eq(cli_exit_for_acquire(409, 75), 75);
    cr_assert_eq(cli_exit_for_acquire(409, 3), 3, "held by someone else");
    cr_assert_eq(cli_exit_for_acquire(409, 0), 0);
    cr_assert_eq(cli_exit_for_acquire(0, 3), 75, "unreachable stays 75");
    cr_assert_eq(cli_exit_for_acquire(503, 3), 75, "no quorum stays 75");
    cr_assert_eq(cli_exit_for_acquire(201, 3), 0);
    cr_assert_eq(cli_exit_for_acquire(400, 3), 1);
}

Test(policy, exit_code_passes_status_and_maps_signals)
{
    cr_assert_eq(cli_exit_for_wait(0), 0);
    cr_assert_eq(cli_exit_for_wait(3 << 8), 3);
    cr_assert_eq(cli_exit_for_wait(255 << 8), 255);
    cr_assert_eq(cli_exit_for_wait(SIGTERM), 128 + SIGTERM);
    cr_assert_eq(cli_exit_for_wait(SIGKILL), 128 + SIGKILL);
}

Test(policy, extends_at_a_third_of_the_ttl)
{
    cli_sched s;

    cli_sched_granted(&s, 1000, 29700, 30000);
    cr_assert_eq(s.deadline, 1000 + 29700 - 1000,
                 "validity counts from the send time, lost a lead (ttl/10, at most 1 s) before");
    cr_assert_eq(s.next_extend, 1000 + 10000);
    cr_assert_not(cli_sched_expired(&s, 29699));
    cr_assert(cli_sched_expired(&s, 29700));
}

Test(policy, the_loss_comes_a_tenth_of_the_ttl_before_the_validity_ends)
{
    cli_sched s;

    /* So that CMD has that long to stop, and a late timer on a busy machine is late
     * into the lead rather than past another client's grant (the clients' margin). */
    cr_assert_eq(cli_sched_lead(3000), 300);
    cr_assert_eq(cli_sched_lead(50), 10, "at least 10 ms");
    cr_assert_eq(cli_sched_lead(60000), 1000, "at most 1 s");
    cli_sched_granted(&s, 0, 2960, 3000);
    cr_assert_eq(s.deadline, 2660);
    cr_assert_eq(cli_sched_answered(&s, 1000, 2960), 1);
    cr_assert_eq(s.deadline, 3660, "a ping's answer keeps the same lead");
    cli_sched_granted(&s, 0, 1000, 20000);
    cr_assert_eq(s.deadline, 500, "a validity far below its ttl: half of it");
}

Test(policy, short_validity_brings_the_extension_forward)
{
    cli_sched s;

    cli_sched_granted(&s, 0, 600, 30000);
    cr_assert_eq(s.deadline, 300, "the lead: half of a short validity");
    cr_assert_eq(s.next_extend, 150, "two attempts before the deadline");
}

Test(policy, tiny_ttls_still_move_forward)
{
    cli_sched s;

    cli_sched_granted(&s, 50, 0, 2);
    cr_assert_eq(s.next_extend, 51);
    cr_assert(cli_sched_expired(&s, 50));
}

Test(policy, a_grant_after_a_long_wait_is_confirmed_before_the_command)
{
    cli_sched s;

    /* --ttl 1500: sent at 0, granted 1483 ms of validity, received 3000 ms later (the
     * POST waited for a holder).  Counted from the send time it is over: an extension
     * must renew it before the command starts. */
    cli_sched_granted(&s, 0, 1483, 1500);
    cr_assert(cli_sched_confirm_first(&s, 3000));
    /* The first extension (at ttl/3 = 500) was due before the answer came: confirm. */
    cr_assert_not(cli_sched_expired(&s, 600));
    cr_assert(cli_sched_confirm_first(&s, 600));
    /* An answer within a round or two: the command starts at once. */
    cr_assert_not(cli_sched_confirm_first(&s, 5));
    cr_assert_not(cli_sched_confirm_first(&s, 499));
    /* A zero validity is over at once even though its first extension is not yet due. */
    cli_sched_granted(&s, 100, 0, 2);
    cr_assert(cli_sched_confirm_first(&s, 100));
}

Test(policy, a_pings_answer_counts_from_the_pings_send_and_never_shortens)
{
    cli_sched s;

    cli_sched_granted(&s, 1000, 2900, 3000); /* granted: valid until 3900 */
    /* Ping sent at 1500, answered (read at, say, 2400): valid until 1500 + 2800. */
    cr_assert_eq(cli_sched_answered(&s, 1500, 2800), 1);
    cr_assert_eq(s.deadline, 4300 - 300);
    /* An answer whose end comes before the one known moves nothing. */
    cr_assert_eq(cli_sched_answered(&s, 2000, 2000), 0);
    cr_assert_eq(s.deadline, 4000);
    cr_assert_eq(cli_sched_answered(&s, 2000, 0), 0);
    cr_assert_eq(cli_sched_answered(&s, 2000, -5), 0);
    cr_assert_eq(s.deadline, 4000);
    cr_assert(cli_sched_expired(&s, 4000));
    cr_assert_not(cli_sched_expired(&s, 3999));
}

Test(policy, confirming_a_late_grant_does_not_wake_for_its_past_deadline)
{
    cli_keep k;
    int in_flight;

    cli_keep_init(&k, NULL, "n", "extend", "lease");
    cli_sched_granted(&k.sched, 1000, 1400, 1500); /* sent at 1000, granted at 9000 */
    cr_assert_eq(cli_keep_sleep(&k, 9000, 1000, 0), 0, "the extension is due at once");
    k.ext = (struct cli_req *)&in_flight; /* an extension in flight: only its answer */
    cr_assert_eq(cli_keep_sleep(&k, 9000, 1000, 0), 1000);
    /* Holding, the deadline is a wake-up (and one in the past is due at once). */
    cr_assert_eq(cli_keep_sleep(&k, 9000, 1000, 1), 0);
    cr_assert_eq(cli_keep_sleep(&k, 1200, 1000, 1), 1000);
    cr_assert_eq(cli_keep_sleep(&k, 2000, 1000, 1), 250, "the deadline: 2400 less the lead");
    k.ext = NULL;
}

Test(policy, failed_extension_retries_soon_within_bounds)
{
    cli_sched s;

    cli_sched_granted(&s, 0, 29000, 30000);
    cli_sched_failed(&s, 12000);
    cr_assert_eq(s.next_extend, 13000, "capped at 1 s");
    cli_sched_granted(&s, 0, 290, 300);
    cli_sched_failed(&s, 100);
    cr_assert_eq(s.next_extend, 150, "at least 50 ms");
    cli_sched_granted(&s, 0, 2900, 3000);
    cli_sched_failed(&s, 100);
    cr_assert_eq(s.next_extend, 400, "ttl/10 in between");
}

Test(policy, sleep_until_the_next_event)
{
    cli_sched s;

    cli_sched_granted(&s, 0, 2900, 3000);
    cr_assert_eq(cli_sched_sleep(&s, 0, 1, 5000), 1000);
    cr_assert_eq(cli_sched_sleep(&s, 0, 1, 400), 400, "capped");
    cr_assert_eq(cli_sched_sleep(&s, 0, 0, 5000), 2600, "extension in flight: the deadline (less the lead)");
    cr_assert_eq(cli_sched_sleep(&s, 3500, 1, 5000), 0, "never negative");
}

/* ---- ops ------------------------------------------------------------------------- */

Test(ops, acquire_body_holds_only_what_was_given)
{
    json_t *b = cli_ops_acquire_body(-1, -1, NULL, NULL);
    char *s;

    cr_assert_not_null(b);
    cr_assert_eq(json_object_size(b), 0);
    json_decref(b);
    b = cli_ops_acquire_body(2500, 0, "abcdefghijklmnop", NULL);
    s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(s, "{\"lease\":\"abcdefghijklmnop\",\"ttl_ms\":2500,\"wait_ms\":0}");
    free(s);
    json_decref(b);
    b = cli_ops_acquire_body(-1, 30000, NULL, "host-1");
    s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    cr_assert_str_eq(s, "{\"owner\":\"host-1\",\"wait_ms\":30000}");
    free(s);
    json_decref(b);
}

/* The grant body for a command line. */
static char *grant_body_of(const char **words)
{
    cli_opts o;
    char err[256];
    json_t *b;
    char *s;

    cr_assert_eq(parse(&o, NULL, words, err, sizeof(err)), 0, "%s", err);
    b = cli_ops_grant_body(&o);
    cr_assert_not_null(b);
    s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(b);
    return s;
}

Test(ops, grant_body_carries_mode_reentrant_and_permits_only_when_asked)
{
    const char *plain[] = {"redlock", "acquire", "n", "--ttl", "900", NULL};
    const char *shared[] = {"redlock", "run", "n", "--shared", "--wait", "0", "--", "x", NULL};
    const char *reent[] = {"redlock", "acquire", "n", "--reentrant", "--lease",
                           "abcdefghijklmnop", NULL};
    const char *sem[] = {"redlock", "sem", "run", "n", "--permits", "4", "--owner", "w1",
                         "--", "x", NULL};
    char *s;

    s = grant_body_of(plain);
    cr_assert_str_eq(s, "{\"ttl_ms\":900}", "an exclusive request is today's");
    free(s);
    s = grant_body_of(shared);
    cr_assert_str_eq(s, "{\"mode\":\"shared\",\"wait_ms\":0}");
    free(s);
    s = grant_body_of(reent);
    cr_assert_str_eq(s, "{\"lease\":\"abcdefghijklmnop\",\"reentrant\":true}");
    free(s);
    s = grant_body_of(sem);
    cr_assert_str_eq(s, "{\"owner\":\"w1\",\"permits\":4}");
    free(s);
}

Test(ops, timeout_covers_the_wait)
{
    cr_assert_gt(cli_ops_timeout(-1), 0);
    cr_assert_eq(cli_ops_timeout(60000) - cli_ops_timeout(0), 60000);
}

Test(args, max_hold_goes_with_run_and_elect_and_into_the_grant)
{
    cli_opts o;
    char err[256];
    const char *run[] = {"redlock", "run", "jobs", "--ttl", "900", "--max-hold", "2500", "--", "x", NULL};
    const char *elect[] = {"redlock", "elect", "jobs", "--max-hold=60000", "--", "x", NULL};

    cr_assert_eq(parse(&o, NULL, run, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.max_hold_ms, 2500);
    json_t *b = cli_ops_grant_body(&o);
    cr_assert_not_null(b);
    cr_assert_eq(json_integer_value(json_object_get(b, "max_hold_ms")), 2500, "the grant asks for it");
    json_decref(b);
    cr_assert_eq(parse(&o, NULL, elect, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(o.max_hold_ms, 60000);
    const char *plain[] = {"redlock", "run", "jobs", "--", "x", NULL};
    cr_assert_eq(parse(&o, NULL, plain, err, sizeof(err)), 0, "%s", err);
    b = cli_ops_grant_body(&o);
    cr_assert_null(json_object_get(b, "max_hold_ms"), "not asked for without --max-hold");
    json_decref(b);

    static const char *const bad[][10] = {
        {"redlock", "acquire", "jobs", "--max-hold", "5000", NULL},
        {"redlock", "run", "jobs", "--shared", "--max-hold", "5000", "--", "x", NULL},
        {"redlock", "sem", "run", "jobs", "--permits", "2", "--max-hold", "5000", "--", NULL},
        {"redlock", "run", "jobs", "--ttl", "3000", "--max-hold", "2999", "--", "x", NULL},
        {"redlock", "run", "jobs", "--max-hold", "0", "--", "x", NULL},
        {"redlock", "run", "jobs", "--max-hold", "soon", "--", "x", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        cr_assert_eq(parse(&o, NULL, (const char **)bad[i], err, sizeof(err)), -1, "case %zu", i);
        cr_assert(strstr(err, "--max-hold") != NULL, "case %zu: %s", i, err);
    }
}

/* ---- proc: the guard's report of the command's status ----------------------------- */

TestSuite(proc, .timeout = 60);

/* The state letter in /proc/PID/stat ('T' stopped, 'Z' zombie), '?' if unreadable. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512], *close_paren;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (f == NULL)
        return '?';
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');
    return close_paren != NULL && close_paren[1] == ' ' ? close_paren[2] : '?';
}

/* Wait until pid is in state st, 10 s at most.  Returns 1 if it got there. */
static int wait_state(pid_t pid, char st)
{
    for (int64_t until = cli_now_ms() + 10000; cli_now_ms() < until; usleep(2000))
        if (proc_state(pid) == st)
            return 1;
    return 0;
}

/* Start `sh -c script` under a guard (deadline a minute away). */
static void spawn_sh(cli_proc *p, char **argv, const char *script)
{
    argv[0] = (char *)"sh";
    argv[1] = (char *)"-c";
    argv[2] = (char *)script;
    argv[3] = NULL;
    cr_assert_eq(cli_proc_init(p, argv, "unit/proc", 1000), 0);
    cr_assert_eq(cli_proc_spawn(p, 42, "unit-lease", cli_now_ms() + 60000), 0);
}

/* What redlock's loops do: watch the signals and reap, until the guard is reaped (10 s
 * at most).  Returns p->done. */
static int watch(cli_proc *p)
{
    for (int64_t until = cli_now_ms() + 10000; !p->done && cli_now_ms() < until;) {
        struct pollfd fd = {.fd = p->sfd, .events = POLLIN};
        (void)poll(&fd, 1, 100);
        cli_proc_on_signals(p);
    }
    return p->done;
}

static void supervise(cli_proc *p)
{
    cr_assert(watch(p), "the guard was not reaped within 10 s");
}

/* The elect_runs_cmd_with_the_token_and_exits_with_its_status flake: `redlock elect NAME
 * -- /nonexistent/command` exited 0, not 127.  The first ping's answer moved the deadline
 * (MSG_DEADLINE) just as the guard, the command gone at once, reported and exited: it
 * left that message unread, and a SOCK_SEQPACKET peer that closes with unread data
 * resets the connection, so redlock's next recv() failed (ECONNRESET) once although the
 * report was queued behind the error; redlock took the guard's own exit status, 0.
 * Forced here: the command stops its guard and exits; two messages wait for the guard, a
 * datagram its read stops at, then a new deadline; the guard, continued, takes the first
 * message, reaps the command, reports and exits with the deadline unread. */
Test(proc, a_message_the_guard_left_unread_does_not_hide_its_report)
{
    char dir[] = "/tmp/redlock-unit.XXXXXX", pidfile[64], script[320], *argv[4], buf[32];
    cli_proc p;
    pid_t cmd = 0;
    FILE *f;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
    snprintf(script, sizeof(script), "echo $$ > %s.new && mv %s.new %s; kill -STOP $PPID; exit 7",
             pidfile, pidfile, pidfile);
    spawn_sh(&p, argv, script);
    for (int64_t until = cli_now_ms() + 10000; cmd <= 0 && cli_now_ms() < until; usleep(2000)) {
        if ((f = fopen(pidfile, "r")) == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL)
            cmd = (pid_t)atol(buf);
        fclose(f);
    }
    cr_assert_gt(cmd, 0, "the command did not start");
    cr_assert(wait_state(p.pid, 'T'), "the command did not stop its guard");
    cr_assert(wait_state(cmd, 'Z'), "the command did not exit");
    cr_assert_eq(send(p.sock, "x", 1, 0), 1);
    cli_proc_set_deadline(&p, cli_now_ms() + 60000);
    cr_assert_eq(kill(p.pid, SIGCONT), 0);
    supervise(&p);
    cr_assert(WIFEXITED(p.wstatus) && WEXITSTATUS(p.wstatus) == 7,
              "wait status %#x, not the command's exit 7", p.wstatus);
    cr_assert_eq(cli_proc_exit_code(&p, 0, "unit/proc"), 7);
    cli_proc_fini(&p);
    (void)unlink(pidfile);
    (void)rmdir(dir);
}

/* cli_proc_stop reads the guard's messages for the command's pid: a report already
 * there (the command ended just before the loss) is kept for the reaping, not dropped. */
Test(proc, a_report_read_while_stopping_is_kept)
{
    char *argv[4];
    cli_proc p;

    spawn_sh(&p, argv, "exit 7");
    cr_assert(wait_state(p.pid, 'Z'), "the guard did not exit"); /* reported, unreaped */
    cli_proc_stop(&p, "unit/proc", "a loss in the test");
    supervise(&p);
    cr_assert(WIFEXITED(p.wstatus) && WEXITSTATUS(p.wstatus) == 7,
              "wait status %#x, not the command's exit 7", p.wstatus);
    cr_assert_eq(p.guard_why, CLI_GUARD_NONE, "the command ended by itself");
    cli_proc_fini(&p);
}

/* cli_proc_kill after the guard reported: the command's status, not the guard's. */
Test(proc, killing_a_guard_that_already_reported_keeps_the_commands_status)
{
    char *argv[4];
    cli_proc p;

    spawn_sh(&p, argv, "exit 7");
    cr_assert(wait_state(p.pid, 'Z'), "the guard did not exit");
    cli_proc_kill(&p);
    cr_assert(p.done);
    cr_assert(WIFEXITED(p.wstatus) && WEXITSTATUS(p.wstatus) == 7,
              "wait status %#x, not the command's exit 7", p.wstatus);
    cli_proc_fini(&p);
}

/* A report redlock cannot read (here: its end of the socket closed) leaves the guard's
 * own exit status, which says the command's too, never a success it did not have. */
Test(proc, the_guards_own_status_is_the_commands)
{
    char *argv[4];
    cli_proc p;

    spawn_sh(&p, argv, "exit 7");
    cr_assert(wait_state(p.pid, 'Z'), "the guard did not exit");
    cr_assert_eq(close(p.sock), 0);
    p.sock = -1;
    supervise(&p);
    cr_assert_eq(cli_exit_for_wait(p.wstatus), 7, "wait status %#x", p.wstatus);
    cli_proc_fini(&p);
}

/* A SIGCHLD that redlock's caller ignores (inherited across exec) has the kernel reap
 * the command unseen, with no SIGCHLD: the guard waited for it until the lock's end (run
 * and elect hung for good).  The command gets its caller's disposition back. */
Test(proc, a_sigchld_the_caller_ignores_does_not_hide_the_commands_end)
{
    char *argv[4];
    cli_proc p;
    int ended;

    cr_assert_neq(signal(SIGCHLD, SIG_IGN), SIG_ERR);
    spawn_sh(&p, argv, "exit 7");
    ended = watch(&p);
    if (!ended)
        cli_proc_kill(&p); /* the guard, which would wait a minute */
    cr_assert(ended, "the guard did not see its command end within 10 s");
    cr_assert_eq(cli_exit_for_wait(p.wstatus), 7, "wait status %#x", p.wstatus);
    cli_proc_fini(&p);
}
