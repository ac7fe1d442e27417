/* test_config.c -- configuration of config.h: master forms and bad masters, the
 * password never shown, host:port and strict integers, the quorum, defaults, and
 * config_load's precedence (flags over environment over defaults), --help/--version
 * and error messages that name the bad value.
 *
 * Criterion runs each test in its own process, so setenv/unsetenv stay local. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "config.h"
#include "log.h"

extern char **environ;

/* No REDLOCK_* variable from the caller's environment may leak into a test. */
static void clear_env(void)
{
    for (;;) {
        char name[256] = "";
        for (char **e = environ; e && *e; e++)
            if (strncmp(*e, "REDLOCK_", 8) == 0) {
                size_t n = strcspn(*e, "=");
                if (n < sizeof name) {
                    memcpy(name, *e, n);
                    name[n] = '\0';
                }
                break;
            }
        if (!name[0])
            return;
        unsetenv(name);
    }
}

TestSuite(config, .init = clear_env, .fini = unit_fini, .timeout = 60);

/* The config struct is large (64 masters): keep it off the small test stack. */
static config *new_cfg(void)
{
    config *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    return c;
}

/* ---- one master ------------------------------------------------------------- */

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct master_case {
    char in[64];
    char address[48], host[32];
    int port;
    char unix_path[32], password[24];
    int db;
};

ParameterizedTestParameters(config, master_forms)
{
    static struct master_case cases[] = {
        {"127.0.0.1:6379", "127.0.0.1:6379", "127.0.0.1", 6379, "", "", 0},
        {"localhost:1", "localhost:1", "localhost", 1, "", "", 0},
        {"redis-7.example.com:65535", "redis-7.example.com:65535", "redis-7.example.com", 65535,
         "", "", 0},
        {"h:007", "h:7", "h", 7, "", "", 0},
        {"[::1]:6379", "[::1]:6379", "::1", 6379, "", "", 0},
        {"[2001:db8::7]:7001", "[2001:db8::7]:7001", "2001:db8::7", 7001, "", "", 0},
        {"redis://h:6380", "h:6380", "h", 6380, "", "", 0},
        {"redis://h:6380/3", "h:6380", "h", 6380, "", "", 3},
        {"redis://h:6380/0", "h:6380", "h", 6380, "", "", 0},
        {"redis://h:6380/1000000", "h:6380", "h", 6380, "", "", 1000000},
        {"redis://:s3cret@h:6381/3", "h:6381", "h", 6381, "", "s3cret", 3},
        {"redis://:s3cret@h:6381", "h:6381", "h", 6381, "", "s3cret", 0},
        {"redis://user:s3cret@h:6382", "h:6382", "h", 6382, "", "s3cret", 0},
        {"redis://default:p@ss:w/rd@h:6383/2", "h:6383", "h", 6383, "", "p@ss:w/rd", 2},
        {"redis://:s3cret@[::1]:7000/15", "[::1]:7000", "::1", 7000, "", "s3cret", 15},
        {"redis://[::1]:7000", "[::1]:7000", "::1", 7000, "", "", 0},
        {"unix:///var/run/redis.sock", "unix:/var/run/redis.sock", "", 0, "/var/run/redis.sock",
         "", 0},
        {"unix:///s", "unix:/s", "", 0, "/s", "", 0},
    };
    return cr_make_param_array(struct master_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct master_case *c, config, master_forms)
{
    config_master m;
    memset(&m, 0x5a, sizeof m);
    char err[512] = "";
    cr_assert_eq(config_parse_master(c->in, &m, err, sizeof err), 0, "'%s': %s", c->in, err);
    cr_assert_str_eq(m.address, c->address, "'%s'", c->in);
    cr_assert_str_eq(m.host, c->host, "'%s'", c->in);
    cr_assert_eq(m.port, c->port, "'%s'", c->in);
    cr_assert_str_eq(m.unix_path, c->unix_path, "'%s'", c->in);
    cr_assert_str_eq(m.password, c->password, "'%s'", c->in);
    cr_assert_eq(m.db, c->db, "'%s'", c->in);
    if (c->password[0])
        cr_assert_null(strstr(m.address, c->password), "address '%s' shows the password",
                       m.address);
}

struct bad_case {
    char in[40];
    char err_has[32]; /* what the message must name */
};

ParameterizedTestParameters(config, bad_masters_are_refused_naming_the_value)
{
    static struct bad_case cases[] = {
        {"", "''"},
        {"localhost", "'localhost'"},
        {"localhost:", "'localhost:'"},
        {"localhost:0", "'localhost:0'"},
        {"localhost:65536", "'localhost:65536'"},
        {"localhost:70000", "'localhost:70000'"},
        {"localhost:-1", "'localhost:-1'"},
        {"localhost:+1", "'localhost:+1'"},
        {"localhost: 1", "'localhost: 1'"},
        {"localhost:1x", "'localhost:1x'"},
        {":6379", "':6379'"},
        {"::1:6379", "'::1:6379'"},
        {"[::1]6379", "'[::1]6379'"},
        {"[::1]", "'[::1]'"},
        {"[]:6379", "'[]:6379'"},
        {"h:6379/3", "database"},          /* a db only in the URL form */
        {"redis://h:1/x", "database"},
        {"redis://h:1/", "database"},
        {"redis://h:1/-1", "database"},
        {"redis://h:1/1000001", "database"},
        {"redis://h:1/3/4", "database"},
        {"redis://", "'redis://'"},
        {"redis://h", "'redis://h'"},
        {"redis://h:0", "'redis://h:0'"},
        {"redis://:@h:1", "password"},
        {"redis://user:@h:1", "password"},
        {"unix://relative.sock", "unix://relative.sock"},
        {"unix://", "'unix://'"},
        {"http://h:1", "'http://h:1'"},
    };
    return cr_make_param_array(struct bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct bad_case *c, config, bad_masters_are_refused_naming_the_value)
{
    config_master m;
    char err[512] = "";
    cr_assert_eq(config_parse_master(c->in, &m, err, sizeof err), -1, "'%s' accepted", c->in);
    cr_assert(strstr(err, c->err_has) != NULL, "'%s': message '%s' lacks '%s'", c->in, err,
              c->err_has);
}

Test(config, overlong_unix_path_and_host_are_refused)
{
    char in[600], err[512];
    config_master m;
    strcpy(in, "unix:///");
    memset(in + 8, 'p', 300);
    in[308] = '\0';
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), -1);
    memset(in, 'h', 256);
    strcpy(in + 256, ":6379");
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), -1);
    in[255] = ':';
    strcpy(in + 255, ":6379"); /* 255-byte host fits */
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), 0, "%s", err);
    strcpy(in, "unix:///");
    memset(in + 8, 'p', 254);
    in[262] = '\0'; /* "/" + 254 = 255 bytes: fits */
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(strlen(m.unix_path), 255);
}

struct secret_case {
    char in[48];
};

ParameterizedTestParameters(config, errors_never_show_the_password)
{
    static struct secret_case cases[] = {
        {"redis://:TOPSECRET@h:0"},        {"redis://:TOPSECRET@h"},
        {"redis://:TOPSECRET@h:1/x"},      {"redis://:TOPSECRET@h:1/99999999"},
        {"redis://:TOPSECRET@"},           {"redis://u:TOPSECRET@[::1]"},
        {"redis://u:TOPSECRET@h:70000/1"}, {"redis://:TOPSECRET@h:1:2"},
    };
    return cr_make_param_array(struct secret_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct secret_case *c, config, errors_never_show_the_password)
{
    config_master m;
    char err[512] = "";
    cr_assert_eq(config_parse_master(c->in, &m, err, sizeof err), -1);
    cr_assert_neq(err[0], '\0');
    cr_assert_null(strstr(err, "TOPSECRET"), "'%s' -> '%s'", c->in, err);
    cr_assert(strstr(err, "***") != NULL, "'%s' -> '%s'", c->in, err);
}

Test(config, password_too_long_is_refused_without_showing_it)
{
    char in[400], err[512];
    config_master m;
    strcpy(in, "redis://:");
    memset(in + 9, 'S', 256);
    strcpy(in + 9 + 256, "@h:1");
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), -1);
    cr_assert_null(strstr(err, "SSSS"), "%s", err);
    in[9 + 255] = '@'; /* 255 characters fit */
    strcpy(in + 9 + 255, "@h:1");
    cr_assert_eq(config_parse_master(in, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(strlen(m.password), 255);
}

/* ---- master lists ------------------------------------------------------------- */

Test(config, masters_list_parses_every_entry_in_order)
{
    config *c = new_cfg();
    char err[512] = "";
    cr_assert_eq(config_parse_masters(c, "a:1,redis://:pw@b:2/4,[::1]:3,unix:///tmp/r.sock", err,
                                      sizeof err),
                 0, "%s", err);
    cr_assert_eq(c->n_masters, 4);
    cr_assert_str_eq(c->masters[0].address, "a:1");
    cr_assert_str_eq(c->masters[1].address, "b:2");
    cr_assert_str_eq(c->masters[1].password, "pw");
    cr_assert_eq(c->masters[1].db, 4);
    cr_assert_str_eq(c->masters[2].address, "[::1]:3");
    cr_assert_str_eq(c->masters[3].unix_path, "/tmp/r.sock");
    free(c);
}

struct list_case {
    char in[48];
    char err_has[40];
};

ParameterizedTestParameters(config, bad_master_lists)
{
    static struct list_case cases[] = {
        {"", "at least one"},
        {"a:1,,b:2", "empty"},
        {"a:1,", "empty"},
        {",a:1", "empty"},
        {",", "empty"},
        {"a:1,b:2,a:1", "'a:1' is listed twice"},
        {"a:1,redis://a:1", "'a:1' is listed twice"},
        {"a:01,a:1", "'a:1' is listed twice"},
        {"redis://a:1/2,redis://:pw@a:1/2", "'a:1' is listed twice"},
        {"unix:///s,unix:///s", "'unix:/s' is listed twice"},
        {"[::1]:5,redis://[::1]:5", "'[::1]:5' is listed twice"},
        {"a:1,b:0,c:3", "'b:0'"},
        {"a:1,b:2,c", "'c'"},
    };
    return cr_make_param_array(struct list_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct list_case *c, config, bad_master_lists)
{
    config *cfg = new_cfg();
    char err[512] = "";
    cr_assert_eq(config_parse_masters(cfg, c->in, err, sizeof err), -1, "'%s' accepted", c->in);
    cr_assert(strstr(err, c->err_has) != NULL, "'%s': '%s' lacks '%s'", c->in, err, c->err_has);
    free(cfg);
}

Test(config, same_host_port_with_different_db_is_not_a_duplicate)
{
    config *c = new_cfg();
    char err[512] = "";
    cr_assert_eq(config_parse_masters(c, "redis://a:1/1,redis://a:1/2,a:1", err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(c->n_masters, 3);
    free(c);
}

Test(config, at_most_64_masters)
{
    config *c = new_cfg();
    char list[64 * 16 + 32] = "", err[512] = "";
    for (int i = 1; i <= 64; i++) {
        char one[16];
        snprintf(one, sizeof one, "%sh:%d", i > 1 ? "," : "", i);
        strcat(list, one);
    }
    cr_assert_eq(config_parse_masters(c, list, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c->n_masters, 64);
    strcat(list, ",h:65");
    cr_assert_eq(config_parse_masters(c, list, err, sizeof err), -1);
    cr_assert(strstr(err, "64") != NULL, "%s", err);
    free(c);
}

Test(config, failed_list_leaves_the_count_unchanged)
{
    config *c = new_cfg();
    config_defaults(c);
    char err[512];
    cr_assert_eq(config_parse_masters(c, "x:1,y:2,bad", err, sizeof err), -1);
    cr_assert_eq(c->n_masters, 5);
    free(c);
}

/* ---- host:port and strict longs ----------------------------------------------- */

struct hp_case {
    char in[32];
    int rc;
    char host[16];
    int port;
};

ParameterizedTestParameters(config, hostport_table)
{
    static struct hp_case cases[] = {
        {"0.0.0.0:8080", 0, "0.0.0.0", 8080},
        {"localhost:0", 0, "localhost", 0}, /* listen on an ephemeral port */
        {"h:65535", 0, "h", 65535},
        {"[::]:80", 0, "::", 80},
        {"[::1]:0", 0, "::1", 0},
        {"h:65536", -1, "", 0},
        {"h:-1", -1, "", 0},
        {"h:", -1, "", 0},
        {"h", -1, "", 0},
        {":80", -1, "", 0},
        {"", -1, "", 0},
        {"::1:80", -1, "", 0},
        {"[::1]:", -1, "", 0},
        {"[::1]80", -1, "", 0},
        {"[::1", -1, "", 0},
        {"[]:80", -1, "", 0},
        {"h:8o", -1, "", 0},
        {"h:+80", -1, "", 0},
        {"h:80 ", -1, "", 0},
        {"h: 80", -1, "", 0},
        {"h:99999999999999999999", -1, "", 0},
    };
    return cr_make_param_array(struct hp_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct hp_case *c, config, hostport_table)
{
    char host[64] = "unchanged";
    int port = -7;
    int rc = config_parse_hostport(c->in, host, sizeof host, &port);
    cr_assert_eq(rc, c->rc, "'%s': rc %d", c->in, rc);
    if (rc == 0) {
        cr_assert_str_eq(host, c->host);
        cr_assert_eq(port, c->port);
    } else {
        cr_assert_str_eq(host, "unchanged", "'%s': host written on failure", c->in);
        cr_assert_eq(port, -7, "'%s': port written on failure", c->in);
    }
}

Test(config, hostport_respects_the_host_buffer)
{
    char host[8];
    int port;
    cr_assert_eq(config_parse_hostport("1234567:1", host, sizeof host, &port), 0);
    cr_assert_str_eq(host, "1234567");
    cr_assert_eq(config_parse_hostport("12345678:1", host, sizeof host, &port), -1);
    cr_assert_eq(config_parse_hostport("[12345678]:1", host, sizeof host, &port), -1);
}

struct long_case {
    char in[32];
    long min, max;
    int rc;
    long value;
};

ParameterizedTestParameters(config, parse_long_is_strict)
{
    static struct long_case cases[] = {
        {"0", 0, 10, 0, 0},
        {"10", 0, 10, 0, 10},
        {"11", 0, 10, -1, 0},
        {"-1", 0, 10, -1, 0},
        {"-1", -5, 10, 0, -1},
        {"-5", -5, 10, 0, -5},
        {"-6", -5, 10, -1, 0},
        {"01", 0, 10, 0, 1},
        {"", 0, 10, -1, 0},
        {"-", -5, 10, -1, 0},
        {"--1", -5, 10, -1, 0},
        {"1-", -5, 10, -1, 0},
        {"+1", 0, 10, -1, 0},
        {" 1", 0, 10, -1, 0},
        {"1 ", 0, 10, -1, 0},
        {"1.0", 0, 10, -1, 0},
        {"1e1", 0, 100, -1, 0},
        {"0x1", 0, 100, -1, 0},
        {"9223372036854775807", 0, LONG_MAX, 0, LONG_MAX},
        {"9223372036854775808", 0, LONG_MAX, -1, 0},
        {"-9223372036854775808", LONG_MIN, 0, 0, LONG_MIN},
        {"-9223372036854775809", LONG_MIN, 0, -1, 0},
        {"99999999999999999999999", LONG_MIN, LONG_MAX, -1, 0},
    };
    return cr_make_param_array(struct long_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct long_case *c, config, parse_long_is_strict)
{
    long v = 424242;
    int rc = config_parse_long(c->in, c->min, c->max, &v);
    cr_assert_eq(rc, c->rc, "'%s' in [%ld, %ld]: rc %d", c->in, c->min, c->max, rc);
    cr_assert_eq(v, rc == 0 ? c->value : 424242, "'%s': %ld", c->in, v);
}

Test(config, parse_long_refuses_null)
{
    long v;
    cr_assert_eq(config_parse_long(NULL, 0, 10, &v), -1);
}

/* ---- quorum and defaults ------------------------------------------------------ */

Test(config, quorum_is_a_strict_majority)
{
    size_t want[] = {1, 1, 2, 2, 3, 3, 4, 4};
    for (size_t n = 0; n < 8; n++)
        cr_assert_eq(config_quorum(n), want[n], "quorum(%zu)", n);
    cr_assert_eq(config_quorum(64), 33);
    for (size_t n = 1; n <= 64; n++) {
        size_t q = config_quorum(n);
        cr_assert_gt(2 * q, n, "two quorums of %zu must overlap", n);
        cr_assert_leq(2 * (q - 1), n, "quorum of %zu is not the smallest majority", n);
    }
}

Test(config, defaults_are_the_documented_ones)
{
    config *c = new_cfg();
    memset(c, 0x77, sizeof *c);
    config_defaults(c);
    cr_assert_eq(c->n_masters, 5);
    for (size_t i = 0; i < 5; i++) {
        char want[32];
        snprintf(want, sizeof want, "127.0.0.1:%zu", 7001 + i);
        cr_assert_str_eq(c->masters[i].address, want);
        cr_assert_str_eq(c->masters[i].password, "");
    }
    cr_assert_str_eq(c->listen_host, "127.0.0.1");
    cr_assert_eq(c->listen_port, 8080);
    cr_assert_eq(c->node_timeout_ms, 50);
    cr_assert_float_eq(c->drift_factor, 0.01, 1e-12);
    cr_assert_eq(c->default_ttl_ms, 30000);
    cr_assert_eq(c->max_ttl_ms, 3600000);
    cr_assert_eq(c->max_wait_ms, 60000);
    cr_assert_str_eq(c->key_prefix, "redlock:");
    cr_assert(c->threads >= 1 && c->threads <= 64);
    cr_assert_eq(c->quarantine_ms, -1);
    cr_assert_eq(c->trust_fsync_always, 0);
    cr_assert_eq(c->header_timeout_ms, 15000);
    cr_assert_str_eq(c->auth_tokens_file, "");
    cr_assert_eq(c->auth_probes, 0);
    cr_assert_str_eq(c->tls_cert, "");
    cr_assert_str_eq(c->tls_key, "");
    cr_assert_str_eq(c->redis_password_file, "");
    cr_assert_eq(c->log_json, 1);
    cr_assert_eq(c->log_level, LOG_LEVEL_INFO);
    free(c);
}

/* ---- config_load --------------------------------------------------------------- */

static int load(config *c, char *err, size_t errlen, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"redlockd";
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    err[0] = '\0';
    return config_load(c, argc, argv, err, errlen);
}

Test(config, load_without_anything_gives_defaults_and_quarantine_follows_max_ttl)
{
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(load(c, err, sizeof err, NULL), CONFIG_OK, "%s", err);
    cr_assert_eq(c->n_masters, 5);
    cr_assert_eq(c->quarantine_ms, c->max_ttl_ms);
    free(c);
}


Test(config, load_reads_every_flag_both_spellings)
{
    config *c = new_cfg();
    char err[512];
    int rc = load(c, err, sizeof err, "--masters", "a:1,b:2,c:3", "--listen=0.0.0.0:9000",
                  "--node-timeout-ms", "75", "--drift-factor=0.05", "--default-ttl-ms", "1000",
                  "--max-ttl-ms=2000", "--max-wait-ms", "0", "--key-prefix", "app:",
                  "--threads=3", "--max-connections", "5", "--max-waiters=0",
                  "--quarantine-ms", "0", "--log-format", "text", "--log-level=debug", NULL);
    cr_assert_eq(rc, CONFIG_OK, "%s", err);
    cr_assert_eq(c->n_masters, 3);
    cr_assert_str_eq(c->masters[2].address, "c:3");
    cr_assert_str_eq(c->listen_host, "0.0.0.0");
    cr_assert_eq(c->listen_port, 9000);
    cr_assert_eq(c->node_timeout_ms, 75);
    cr_assert_float_eq(c->drift_factor, 0.05, 1e-12);
    cr_assert_eq(c->default_ttl_ms, 1000);
    cr_assert_eq(c->max_ttl_ms, 2000);
    cr_assert_eq(c->max_wait_ms, 0);
    cr_assert_str_eq(c->key_prefix, "app:");
    cr_assert_eq(c->threads, 3);
    cr_assert_eq(c->max_connections, 5);
    cr_assert_eq(c->max_waiters, 0);
    cr_assert_eq(c->quarantine_ms, 0, "an explicit 0 is kept, not replaced by max ttl");
    cr_assert_eq(c->log_json, 0);
    cr_assert_eq(c->log_level, LOG_LEVEL_DEBUG);
    free(c);
}

Test(config, load_reads_the_environment)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_MASTERS", "redis://:pw@x:1,y:2,z:3", 1);
    setenv("REDLOCK_THREADS", "7", 1);
    setenv("REDLOCK_DRIFT_FACTOR", "0.1", 1);
    setenv("REDLOCK_LOG_LEVEL", "warning", 1);
    setenv("REDLOCK_LISTEN", "[::]:81", 1);
    cr_assert_eq(load(c, err, sizeof err, NULL), CONFIG_OK, "%s", err);
    cr_assert_eq(c->n_masters, 3);
    cr_assert_str_eq(c->masters[0].password, "pw");
    cr_assert_eq(c->threads, 7);
    cr_assert_float_eq(c->drift_factor, 0.1, 1e-12);
    cr_assert_eq(c->log_level, LOG_LEVEL_WARN);
    cr_assert_str_eq(c->listen_host, "::");
    cr_assert_eq(c->listen_port, 81);
    free(c);
}

Test(config, flag_wins_over_environment)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_THREADS", "7", 1);
    setenv("REDLOCK_MASTERS", "a:1,b:2,c:3,d:4,e:5", 1);
    setenv("REDLOCK_KEY_PREFIX", "env:", 1);
    cr_assert_eq(load(c, err, sizeof err, "--threads", "2", "--masters=f:6", NULL), CONFIG_OK,
                 "%s", err);
    cr_assert_eq(c->threads, 2);
    cr_assert_eq(c->n_masters, 1, "the flag's list replaces the environment's");
    cr_assert_str_eq(c->masters[0].address, "f:6");
    cr_assert_str_eq(c->key_prefix, "env:", "what no flag overrides stays from the environment");
    free(c);
}

Test(config, last_flag_wins)
{
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(load(c, err, sizeof err, "--threads", "2", "--threads=5", NULL), CONFIG_OK);
    cr_assert_eq(c->threads, 5);
    free(c);
}

/* Run config_load with stdout captured into buf. */
static int load_captured(config *c, char *out, size_t outlen, const char *arg1, const char *arg2)
{
    char err[512];
    fflush(stdout);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    int saved = dup(STDOUT_FILENO);
    dup2(fileno(tmp), STDOUT_FILENO);
    int rc = load(c, err, sizeof err, arg1, arg2, NULL);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, outlen - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
    return rc;
}

Test(config, help_prints_usage_with_every_variable_and_asks_to_exit)
{
    config *c = new_cfg();
    static char out[16384];
    cr_assert_eq(load_captured(c, out, sizeof out, "--help", NULL), CONFIG_EXIT);
    cr_assert(strstr(out, "usage: redlockd") != NULL, "%s", out);
    const char *vars[] = {"REDLOCK_MASTERS", "REDLOCK_LISTEN", "REDLOCK_NODE_TIMEOUT_MS",
                          "REDLOCK_DRIFT_FACTOR", "REDLOCK_DEFAULT_TTL_MS", "REDLOCK_MAX_TTL_MS",
                          "REDLOCK_MAX_WAIT_MS", "REDLOCK_KEY_PREFIX", "REDLOCK_THREADS",
                          "REDLOCK_MAX_CONNECTIONS", "REDLOCK_MAX_WAITERS",
                          "REDLOCK_QUARANTINE_MS", "REDLOCK_TRUST_FSYNC_ALWAYS",
                          "REDLOCK_HEADER_TIMEOUT_MS", "REDLOCK_AUTH_TOKENS_FILE",
                          "REDLOCK_AUTH_PROBES", "REDLOCK_TLS_CERT", "REDLOCK_TLS_KEY",
                          "REDLOCK_REDIS_PASSWORD_FILE", "REDLOCK_LOG_FORMAT",
                          "REDLOCK_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        cr_assert(strstr(out, vars[i]) != NULL, "--help does not mention %s", vars[i]);
    cr_assert_eq(load_captured(c, out, sizeof out, "-h", NULL), CONFIG_EXIT);
    cr_assert(strstr(out, "usage:") != NULL);
    free(c);
}

Test(config, help_shows_each_options_default)
{
    config *c = new_cfg();
    static char out[16384];
    cr_assert_eq(load_captured(c, out, sizeof out, "--help", NULL), CONFIG_EXIT);
    /* Every option's entry ends with a "default:" line. */
    size_t options = 0, defaults = 0;
    for (const char *p = out; (p = strstr(p, "\n  --")) != NULL; p++)
        if (strncmp(p, "\n  --help", 8) != 0 && strncmp(p, "\n  --version", 11) != 0)
            options++;
    for (const char *p = out; (p = strstr(p, "\n      default: ")) != NULL; p++)
        defaults++;
    cr_assert_geq(options, 20, "%s", out);
    cr_assert_eq(options, defaults, "%zu options, %zu defaults:\n%s", options, defaults, out);
    const char *want[] = {
        "default: 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005\n",
        "default: 127.0.0.1:8080\n", "default: 50\n", "default: 0.01\n", "default: 30000\n",
        "default: 3600000\n", "default: 60000\n", "default: redlock:\n", "default: 10000\n",
        "default: the max ttl\n", "default: 15000\n", "default: none\n", "default: json\n",
        "default: info\n", "default: the number of CPUs"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(out, want[i]) != NULL, "--help lacks '%s':\n%s", want[i], out);
    free(c);
}

Test(config, acl_user_in_the_url_is_kept_for_auth)
{
    config_master m;
    char err[512] = "";
    const char *argv[3];
    cr_assert_eq(config_parse_master("redis://locker:s3cret@h:6382/2", &m, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(m.user, "locker");
    cr_assert_str_eq(m.password, "s3cret");
    cr_assert_str_eq(m.address, "h:6382");
    cr_assert_eq(config_master_auth_argv(&m, argv), 3);
    cr_assert_str_eq(argv[0], "AUTH");
    cr_assert_str_eq(argv[1], "locker");
    cr_assert_str_eq(argv[2], "s3cret");
    /* The default user: no user name, AUTH password. */
    cr_assert_eq(config_parse_master("redis://:s3cret@h:6381", &m, err, sizeof err), 0);
    cr_assert_str_eq(m.user, "");
    cr_assert_eq(config_master_auth_argv(&m, argv), 2);
    cr_assert_str_eq(argv[1], "s3cret");
    cr_assert_eq(config_parse_master("redis://s3cret@h:6381", &m, err, sizeof err), 0);
    cr_assert_str_eq(m.user, "");
    cr_assert_eq(config_master_auth_argv(&m, argv), 2);
    /* A colon in the password stays in the password. */
    cr_assert_eq(config_parse_master("redis://u:a:b@h:1", &m, err, sizeof err), 0);
    cr_assert_str_eq(m.user, "u");
    cr_assert_str_eq(m.password, "a:b");
    /* No password, no AUTH. */
    cr_assert_eq(config_parse_master("redis://h:6380", &m, err, sizeof err), 0);
    cr_assert_eq(config_master_auth_argv(&m, argv), 0);
    cr_assert_eq(config_parse_master("h:6380", &m, err, sizeof err), 0);
    cr_assert_eq(config_master_auth_argv(&m, argv), 0);
}

Test(config, rediss_masters_are_tls_with_their_credentials_db_and_server_name)
{
    config_master m;
    char err[512] = "";
    cr_assert_eq(config_parse_master("rediss://h:6380", &m, err, sizeof err), 0, "%s", err);
    cr_assert(m.tls);
    cr_assert_str_eq(m.address, "h:6380");
    cr_assert_str_eq(m.server_name, "");
    cr_assert_eq(config_parse_master("rediss://locker:p?w@d@h:6380/2?server_name=redis-1.example", &m,
                                     err, sizeof err), 0, "%s", err);
    cr_assert(m.tls);
    cr_assert_str_eq(m.user, "locker");
    cr_assert_str_eq(m.password, "p?w@d");
    cr_assert_eq(m.db, 2);
    cr_assert_str_eq(m.host, "h");
    cr_assert_str_eq(m.server_name, "redis-1.example");
    cr_assert_str_eq(m.address, "h:6380");
    cr_assert_eq(config_parse_master("rediss://[::1]:7000?server_name=10.0.0.7", &m, err, sizeof err), 0,
                 "%s", err);
    cr_assert_str_eq(m.host, "::1");
    cr_assert_str_eq(m.server_name, "10.0.0.7");
    cr_assert_eq(config_parse_master("redis://h:6380", &m, err, sizeof err), 0);
    cr_assert(!m.tls);
    cr_assert_eq(config_parse_master("h:6380", &m, err, sizeof err), 0);
    cr_assert(!m.tls);
}

Test(config, plain_and_tls_masters_mix_in_one_list)
{
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(config_parse_masters(c, "a:1,rediss://b:2,redis://c:3,rediss://:pw@d:4?server_name=n.example",
                                      err, sizeof err), 0, "%s", err);
    cr_assert_eq(c->n_masters, 4);
    cr_assert_eq(config_tls_masters(c), 2);
    cr_assert(!c->masters[0].tls && c->masters[1].tls && !c->masters[2].tls && c->masters[3].tls);
    /* the same master by either scheme is listed twice */
    cr_assert_eq(config_parse_masters(c, "rediss://b:2,redis://b:2", err, sizeof err), -1);
    cr_assert(strstr(err, "twice"), "%s", err);
    free(c);
}

Test(config, a_tls_masters_expected_name_is_its_own_else_the_flags_else_its_host)
{
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(config_parse_masters(c, "rediss://10.0.0.1:1?server_name=own.example,rediss://10.0.0.2:2",
                                      err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(config_master_tls_name(c, &c->masters[0]), "own.example");
    cr_assert_str_eq(config_master_tls_name(c, &c->masters[1]), "10.0.0.2");
    snprintf(c->redis_tls_server_name, sizeof c->redis_tls_server_name, "all.example");
    cr_assert_str_eq(config_master_tls_name(c, &c->masters[0]), "own.example");
    cr_assert_str_eq(config_master_tls_name(c, &c->masters[1]), "all.example");
    free(c);
}

ParameterizedTestParameters(config, bad_tls_masters_are_refused_naming_the_value)
{
    static struct bad_case cases[] = {
        {"redis://h:1?server_name=n", "only URL option"},   /* a name is for TLS only */
        {"h:1?server_name=n", "'h:1?server_name=n'"},
        {"rediss://h:1?sni=n", "only URL option"},
        {"rediss://h:1?server_name=", "bad server_name"},
        {"rediss://h:1?server_name=a b", "bad server_name"},
        {"rediss://h:1?server_name=*.ex", "bad server_name"},
        {"rediss://h", "'rediss://h'"},
        {"rediss://h:0", "'rediss://h:0'"},
        {"rediss://:@h:1", "password"},
        {"rediss://", "'rediss://'"},
    };
    return cr_make_param_array(struct bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct bad_case *c, config, bad_tls_masters_are_refused_naming_the_value)
{
    config_master m;
    char err[512] = "";
    cr_assert_eq(config_parse_master(c->in, &m, err, sizeof err), -1, "'%s' accepted", c->in);
    cr_assert(strstr(err, c->err_has) != NULL, "'%s': message '%s' lacks '%s'", c->in, err,
              c->err_has);
}

Test(config, tls_master_errors_never_show_the_password)
{
    static const char *const in[] = {"rediss://u:TOPSECRET@h:1?server_name=bad name",
                                     "rediss://:TOPSECRET@h:1?sni=x", "rediss://:TOPSECRET@h",
                                     "rediss://u:TOPSECRET@h:1/x"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        config_master m;
        char err[512] = "";
        cr_assert_eq(config_parse_master(in[i], &m, err, sizeof err), -1, "%s", in[i]);
        cr_assert_null(strstr(err, "TOPSECRET"), "'%s' -> '%s'", in[i], err);
        cr_assert(strstr(err, "rediss://***@h"), "'%s' -> '%s'", in[i], err);
    }
}

Test(config, tls_flags_and_their_environment)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_REDIS_TLS_CA_FILE", "/etc/ca.pem", 1);
    setenv("REDLOCK_REDIS_TLS_INSECURE", "yes", 1);
    cr_assert_eq(load(c, err, sizeof err, "--redis-tls-cert", "/c.pem", "--redis-tls-key", "/k.pem",
                      "--redis-tls-server-name", "redis.example", "--redis-tls-insecure", "0", NULL),
                 CONFIG_OK, "%s", err);
    unsetenv("REDLOCK_REDIS_TLS_CA_FILE");
    unsetenv("REDLOCK_REDIS_TLS_INSECURE");
    cr_assert_str_eq(c->redis_tls_ca_file, "/etc/ca.pem");
    cr_assert_str_eq(c->redis_tls_cert, "/c.pem");
    cr_assert_str_eq(c->redis_tls_key, "/k.pem");
    cr_assert_str_eq(c->redis_tls_server_name, "redis.example");
    cr_assert_eq(c->redis_tls_insecure, 0, "the flag wins over the environment");
    cr_assert_null(c->redis_tls, "credentials are main's to make");
    free(c);
}

Test(config, version_prints_the_version_and_asks_to_exit)
{
    config *c = new_cfg();
    char out[256];
    cr_assert_eq(load_captured(c, out, sizeof out, "--version", NULL), CONFIG_EXIT);
    cr_assert(strncmp(out, "redlockd ", 9) == 0 && strlen(out) > 10, "'%s'", out);
    /* even next to something invalid */
    cr_assert_eq(load_captured(c, out, sizeof out, "--bogus", "--version"), CONFIG_EXIT);
    free(c);
}

struct load_err_case {
    char arg1[32], arg2[32]; /* arg2 empty: none */
    char err_has1[32], err_has2[32];
};

ParameterizedTestParameters(config, bad_flags_are_refused_naming_flag_and_value)
{
    static struct load_err_case cases[] = {
        {"--threads", "0", "--threads", "'0'"},
        {"--threads", "65", "--threads", "'65'"},
        {"--threads", "four", "--threads", "'four'"},
        {"--node-timeout-ms", "0", "--node-timeout-ms", "'0'"},
        {"--node-timeout-ms", "60001", "--node-timeout-ms", "'60001'"},
        {"--max-ttl-ms", "-1", "--max-ttl-ms", "'-1'"},
        {"--max-wait-ms=86400001", "", "--max-wait-ms", "'86400001'"},
        {"--max-connections", "0", "--max-connections", "'0'"},
        {"--drift-factor", "0.6", "--drift-factor", "'0.6'"},
        {"--drift-factor", "-0.1", "--drift-factor", "'-0.1'"},
        {"--drift-factor", "nan", "--drift-factor", "'nan'"},
        {"--drift-factor", "inf", "--drift-factor", "'inf'"},
        {"--drift-factor=", "", "--drift-factor", "''"},
        {"--drift-factor", "0.1x", "--drift-factor", "'0.1x'"},
        {"--listen", "nohost", "--listen", "'nohost'"},
        {"--listen", "h:65536", "--listen", "'h:65536'"},
        {"--masters", "a:1,b:0", "--masters", "'b:0'"},
        {"--masters=", "", "--masters", "''"},
        {"--key-prefix", "a b", "--key-prefix", "'a b'"},
        {"--log-format", "xml", "--log-format", "'xml'"},
        {"--log-level", "loud", "--log-level", "'loud'"},
        {"--trust-fsync-always", "2", "--trust-fsync-always", "'2'"},
        {"--header-timeout-ms", "99", "--header-timeout-ms", "'99'"},
        {"--auth-probes", "maybe", "--auth-probes", "'maybe'"},
        {"--auth-probes", "2", "--auth-probes", "'2'"},
        {"--auth-tokens-file=", "", "--auth-tokens-file", "''"},
        {"--tls-cert", "/etc/cert.pem", "--tls-cert", "--tls-key"}, /* one without the other */
        {"--tls-key", "/etc/key.pem", "--tls-cert", "--tls-key"},
        {"--redis-tls-cert", "/etc/c.pem", "--redis-tls-cert", "--redis-tls-key"},
        {"--redis-tls-key", "/etc/k.pem", "--redis-tls-cert", "--redis-tls-key"},
        {"--redis-tls-server-name", "a b", "--redis-tls-server-name", "'a b'"},
        {"--redis-tls-insecure", "2", "--redis-tls-insecure", "'2'"},
        {"--redis-tls-ca-file=", "", "--redis-tls-ca-file", "''"},
        {"--bogus", "1", "'--bogus'", "unknown option"},
        {"--thread", "1", "'--thread'", "unknown option"},
        {"positional", "", "'positional'", "unexpected"},
        {"-t", "1", "'-t'", "unexpected"},
        {"--threads", "", "'--threads'", "needs a value"},
    };
    return cr_make_param_array(struct load_err_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct load_err_case *c, config, bad_flags_are_refused_naming_flag_and_value)
{
    config *cfg = new_cfg();
    char err[512];
    int rc = load(cfg, err, sizeof err, c->arg1, c->arg2[0] ? c->arg2 : NULL, NULL);
    cr_assert_eq(rc, CONFIG_ERROR, "%s %s: rc %d", c->arg1, c->arg2, rc);
    cr_assert(strstr(err, c->err_has1) != NULL, "'%s' lacks '%s'", err, c->err_has1);
    cr_assert(strstr(err, c->err_has2) != NULL, "'%s' lacks '%s'", err, c->err_has2);
    free(cfg);
}

Test(config, bad_environment_is_refused_naming_the_variable_and_value)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_MAX_TTL_MS", "-1", 1);
    cr_assert_eq(load(c, err, sizeof err, NULL), CONFIG_ERROR);
    cr_assert(strstr(err, "REDLOCK_MAX_TTL_MS") && strstr(err, "'-1'"), "%s", err);
    unsetenv("REDLOCK_MAX_TTL_MS");
    setenv("REDLOCK_MASTERS", "redis://:TOPSECRET@h:0", 1);
    cr_assert_eq(load(c, err, sizeof err, NULL), CONFIG_ERROR);
    cr_assert(strstr(err, "REDLOCK_MASTERS") != NULL, "%s", err);
    cr_assert_null(strstr(err, "TOPSECRET"), "%s", err);
    free(c);
}

Test(config, security_options_are_read)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_AUTH_PROBES", "yes", 1);
    setenv("REDLOCK_REDIS_PASSWORD_FILE", "/run/secrets/redis", 1);
    cr_assert_eq(load(c, err, sizeof err, "--auth-tokens-file", "/etc/redlockd/tokens",
                      "--tls-cert=/etc/c.pem", "--tls-key", "/etc/k.pem", "--trust-fsync-always",
                      "1", "--header-timeout-ms=100", NULL),
                 CONFIG_OK, "%s", err);
    cr_assert_str_eq(c->auth_tokens_file, "/etc/redlockd/tokens");
    cr_assert_str_eq(c->tls_cert, "/etc/c.pem");
    cr_assert_str_eq(c->tls_key, "/etc/k.pem");
    cr_assert_str_eq(c->redis_password_file, "/run/secrets/redis");
    cr_assert_eq(c->auth_probes, 1);
    cr_assert_eq(c->trust_fsync_always, 1);
    cr_assert_eq(c->header_timeout_ms, 100);
    free(c);
}

struct bool_case {
    char val[8];
    int want;
};

ParameterizedTestParameters(config, bool_options_take_1_true_yes_0_false_no)
{
    static struct bool_case cases[] = {{"1", 1},     {"true", 1}, {"yes", 1},
                                       {"0", 0},     {"false", 0}, {"no", 0}};
    return cr_make_param_array(struct bool_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct bool_case *bc, config, bool_options_take_1_true_yes_0_false_no)
{
    config *c = new_cfg();
    char err[512];
    setenv("REDLOCK_AUTH_PROBES", bc->want ? "0" : "1", 1); /* the flag must win */
    cr_assert_eq(load(c, err, sizeof err, "--auth-probes", bc->val, NULL), CONFIG_OK, "%s", err);
    cr_assert_eq(c->auth_probes, bc->want, "'%s'", bc->val);
    free(c);
}

Test(config, path_options_hold_511_bytes)
{
    config *c = new_cfg();
    char err[1200], path[600];
    memset(path, 'p', 511);
    path[0] = '/';
    path[511] = '\0';
    cr_assert_eq(load(c, err, sizeof err, "--auth-tokens-file", path, NULL), CONFIG_OK, "%s", err);
    cr_assert_str_eq(c->auth_tokens_file, path);
    strcat(path, "p");
    cr_assert_eq(load(c, err, sizeof err, "--auth-tokens-file", path, NULL), CONFIG_ERROR);
    free(c);
}

Test(config, key_prefix_limit_is_127_bytes)
{
    config *c = new_cfg();
    char err[512], prefix[130];
    memset(prefix, 'k', 127);
    prefix[127] = '\0';
    cr_assert_eq(load(c, err, sizeof err, "--key-prefix", prefix, NULL), CONFIG_OK, "%s", err);
    cr_assert_str_eq(c->key_prefix, prefix);
    strcat(prefix, "k");
    cr_assert_eq(load(c, err, sizeof err, "--key-prefix", prefix, NULL), CONFIG_ERROR);
    free(c);
}

Test(config, default_ttl_above_max_ttl_is_refused)
{
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(load(c, err, sizeof err, "--default-ttl-ms", "5000", "--max-ttl-ms", "1000",
                      NULL),
                 CONFIG_ERROR);
    cr_assert(strstr(err, "5000") && strstr(err, "1000"), "%s", err);
    cr_assert_eq(load(c, err, sizeof err, "--default-ttl-ms", "1000", "--max-ttl-ms", "1000",
                      NULL),
                 CONFIG_OK, "%s", err);
    free(c);
}

Test(config, default_ttl_within_the_drift_allowance_is_refused)
{
    known_bug("config_load accepts a default ttl that leaves no validity");
    /* A request with ttl_ms=3 is refused by params_check (drift at 0.01 is 3 ms), but the
     * same value as --default-ttl-ms is accepted, and then every acquire without a ttl
     * ends in 503 validity_exhausted.  Invalid configuration should fail at start. */
    config *c = new_cfg();
    char err[512];
    cr_assert_eq(load(c, err, sizeof err, "--default-ttl-ms", "3", NULL), CONFIG_ERROR,
                 "default ttl 3 ms with drift allowance 3 ms was accepted");
    free(c);
}
