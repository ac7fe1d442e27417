/* test_security.c -- bearer tokens with name scopes, HTTPS, masters behind AUTH, and
 * secrets (leases, passwords, tokens) never reaching the logs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static h_cluster C;
static char dir[128];

static void teardown(void)
{
    h_cluster_stop(&C);
    unsetenv("REDLOCK_TEST_TOKEN");
    if (dir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
        }
    }
}

TestSuite(security, .fini = teardown, .timeout = 60);

static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/redlockd-sec-XXXXXX");
        cr_assert(mkdtemp(dir));
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static int log_contains(const char *needle) { return h_log_contains(&C.svc, needle); }

#define ADMIN "admin-token-0123456789abcdef"
#define BILLING "billing-token-0123456789abcd"

Test(security, bearer_tokens_and_scopes)
{
    char flags[400];
    const char *path = write_file("tokens", "# name prefix scopes\n" ADMIN "\n" BILLING " billing/\n");
    snprintf(flags, sizeof flags, "--auth-tokens-file %s", path);
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
    h_resp r;
    h_http(&C, "POST", "/locks/billing/run", NULL, &r);
    cr_assert_eq(r.status, 401);
    cr_assert_str_eq(h_str(&r, "error"), "unauthorized");

    cr_assert(strstr(r.www_auth, "Bearer realm=") && !strstr(r.www_auth, "error="),
              "no token given: no error code (RFC 6750): %s", r.www_auth);
    h_resp_free(&r);

    setenv("REDLOCK_TEST_TOKEN", "wrong-token-0123456789abcdef", 1);
    h_http(&C, "POST", "/locks/billing/run", NULL, &r);
    cr_assert_eq(r.status, 401);
    cr_assert(strstr(r.www_auth, "error=\"invalid_token\""), "a bad token: %s", r.www_auth);
    h_resp_free(&r);

    /* The scheme is case-insensitive. */
    setenv("REDLOCK_TEST_TOKEN", "bearer " BILLING, 1);
    h_http(&C, "POST", "/locks/billing/lower", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    setenv("REDLOCK_TEST_TOKEN", "BEARER " BILLING, 1);
    h_http(&C, "POST", "/locks/billing/upper", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);

    setenv("REDLOCK_TEST_TOKEN", BILLING, 1);
    h_http(&C, "POST", "/locks/billing/run", NULL, &r);
    cr_assert_eq(r.status, 201, "%s", r.body);
    h_resp_free(&r);
    h_http(&C, "POST", "/locks/payroll/run", NULL, &r);
    cr_assert_eq(r.status, 403);
    cr_assert_str_eq(h_str(&r, "error"), "forbidden");
    h_resp_free(&r);

    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1);
    h_http(&C, "POST", "/locks/payroll/run", NULL, &r);
    cr_assert_eq(r.status, 201);
    h_resp_free(&r);

    unsetenv("REDLOCK_TEST_TOKEN");
    h_http(&C, "GET", "/healthz", NULL, &r);
    cr_assert_eq(r.status, 200, "/healthz stays open");
    h_resp_free(&r);
    h_http(&C, "GET", "/readyz", NULL, &r);
    cr_assert_eq(r.status, 200, "/readyz is open unless --auth-probes 1");
    h_resp_free(&r);
    cr_assert(!log_contains(BILLING) && !log_contains(ADMIN), "tokens never reach the log");
}

Test(security, auth_probes_protects_readyz_and_metrics)
{
    char flags[400];
    snprintf(flags, sizeof flags, "--auth-tokens-file %s --auth-probes 1",
             write_file("tokens", ADMIN "\n"));
    setenv("REDLOCK_TEST_TOKEN", ADMIN, 1); /* the harness waits on /readyz */
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
    unsetenv("REDLOCK_TEST_TOKEN");
    const char *paths[] = {"/readyz", "/metrics"};
    for (int i = 0; i < 2; i++) {
        h_resp r;
        h_http(&C, "GET", paths[i], NULL, &r);
        cr_assert_eq(r.status, 401, "%s", paths[i]);
        h_resp_free(&r);
    }
}

Test(security, bad_tokens_file_stops_the_start)
{
    if (getenv("REDLOCK_TEST_URL"))
        cr_skip_test("starts its own process (external stack)");
    const char *bin = getenv("REDLOCKD_BIN");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s --auth-tokens-file /nonexistent/tokens >/dev/null 2>&1",
             bin ? bin : "bin/redlockd");
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "exit %d", WEXITSTATUS(rc));
}

Test(security, https_with_tls_cert_and_key)
{
    const char *d = write_file("x", "");
    (void)d;
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
             "-keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1", dir, dir);
    cr_assert(system(cmd) == 0, "openssl");
    char flags[600];
    snprintf(flags, sizeof flags, "--tls-cert %s/cert.pem --tls-key %s/key.pem", dir, dir);
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
    cr_assert(strncmp(C.svc.url, "https://", 8) == 0);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "tls.lock", NULL, lease, sizeof lease, NULL), 201);
    cr_assert_eq(h_release(&C, "tls.lock", lease), 200);
}

#define PW "m4ster-secret-pw"

Test(security, masters_behind_auth_and_no_secret_in_logs)
{
    h_set_redis_password(PW);
    char flags[400];
    snprintf(flags, sizeof flags, "--redis-password-file %s --log-level debug",
             write_file("redis-pw", PW "\n"));
    h_cluster_start(&C, 5, 0, flags);
    h_require_local(&C);
    char lease[200];
    cr_assert_eq(h_acquire(&C, "auth.lock", NULL, lease, sizeof lease, NULL), 201);
    h_resp r;
    h_http(&C, "POST", "/locks/auth.lock", "{\"lease\":\"client-chosen-lease-123\"}", &r);
    h_resp_free(&r);
    cr_assert_eq(h_release(&C, "auth.lock", lease), 200);
    h_http(&C, "GET", "/metrics", NULL, &r);
    cr_assert_null(strstr(r.body, PW));
    h_resp_free(&r);
    cr_assert(!log_contains(PW), "the password reached the log");
    cr_assert(!log_contains(lease), "a lease reached the log");
    cr_assert(!log_contains("client-chosen-lease-123"), "a lease reached the log");
    h_set_redis_password(NULL);
}

Test(security, password_in_master_url_is_never_shown)
{
    h_set_redis_password(PW);
    setenv("REDLOCK_TEST_URL_PASSWORD", PW, 1); /* masters given as redis://:PW@host:port */
    h_cluster_start(&C, 5, 0, "--log-level debug");
    unsetenv("REDLOCK_TEST_URL_PASSWORD");
    h_set_redis_password(NULL);
    h_require_local(&C);
    cr_assert_eq(h_acquire(&C, "url.pw", NULL, NULL, 0, NULL), 201);
    const char *paths[] = {"/readyz", "/healthz", "/metrics"};
    for (int i = 0; i < 3; i++) {
        h_resp r;
        h_http(&C, "GET", paths[i], NULL, &r);
        cr_assert_eq(r.status, 200);
        cr_assert_null(strstr(r.body, PW), "%s shows the password", paths[i]);
        h_resp_free(&r);
    }
    cr_assert(!log_contains(PW), "the password reached the log");
}
