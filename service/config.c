/* config.c -- defaults, environment, flags and master-URL parsing (see config.h). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "version.h"

#define DEFAULT_MASTERS \
    "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005"

size_t config_quorum(size_t n_masters) { return n_masters / 2 + 1; }

void config_defaults(config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char err[256];
    if (config_parse_masters(cfg, DEFAULT_MASTERS, err, sizeof err) != 0)
        abort(); /* the built-in default is always valid */
    snprintf(cfg->listen_host, sizeof cfg->listen_host, "127.0.0.1");
    cfg->listen_port = 8080;
    cfg->node_timeout_ms = 50;
    cfg->drift_factor = 0.01;
    cfg->default_ttl_ms = 30000;
    cfg->max_ttl_ms = 3600000;
    cfg->max_wait_ms = 60000;
    snprintf(cfg->key_prefix, sizeof cfg->key_prefix, "redlock:");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
    cfg->max_connections = 10000;
    cfg->max_waiters = 10000;
    cfg->max_streams = 10000;
    cfg->quarantine_ms = -1; /* -1: follow max_ttl_ms */
    cfg->clock_check = 1;
    cfg->clock_max_skew_ms = 2000;
    cfg->header_timeout_ms = 15000;
    cfg->log_json = 1;
    cfg->log_level = LOG_LEVEL_INFO;
}

int config_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            if (!(p == s && *p == '-' && p[1]))
                return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int config_parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon;
    size_t hlen;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return -1;
        hlen = (size_t)(close - s - 1);
        s++;
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return -1;
        hlen = (size_t)(colon - s);
        if (memchr(s, ':', hlen))
            return -1; /* bare IPv6 needs brackets */
    }
    if (hlen == 0 || hlen >= hostlen)
        return -1;
    long p;
    if (config_parse_long(colon + 1, 0, 65535, &p) != 0)
        return -1;
    memcpy(host, s, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

int config_check_server_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 253)
        return -1;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_' || *p == ':'))
            return -1;
    return 0;
}

const char *config_master_tls_name(const config *cfg, const config_master *m)
{
    if (m->server_name[0])
        return m->server_name;
    if (cfg->redis_tls_server_name[0])
        return cfg->redis_tls_server_name;
    return m->host;
}

int config_parse_master(const char *s, config_master *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (strncmp(s, "unix://", 7) == 0) {
        const char *path = s + 7;
        if (path[0] != '/' || strlen(path) >= sizeof m->unix_path) {
            snprintf(err, errlen, "invalid master '%s': expected unix:///absolute/path.sock", s);
            return -1;
        }
        snprintf(m->unix_path, sizeof m->unix_path, "%s", path);
        snprintf(m->address, sizeof m->address, "unix:%s", path);
        return 0;
    }
    const char *hp = s;
    char shown[300]; /* what we may print: never the password */
    snprintf(shown, sizeof shown, "%s", s);
    const char *scheme = NULL;
    if (strncmp(s, "redis://", 8) == 0)
        scheme = "redis://";
    else if (strncmp(s, "rediss://", 9) == 0)
        scheme = "rediss://"; /* TLS (redis_tls.h) */
    if (scheme) {
        m->tls = scheme[5] == 's';
        hp = s + strlen(scheme);
        const char *at = strrchr(hp, '@');
        if (at) {
            const char *cred = hp;
            size_t clen = (size_t)(at - hp);
            const char *colon = memchr(cred, ':', clen);
            /* redis://:password@host (the default user), redis://user:password@host (an
             * ACL user, Redis 6 and later: AUTH user password), redis://password@host. */
            const char *pw = colon ? colon + 1 : cred;
            size_t pwlen = colon ? (size_t)(at - colon - 1) : clen;
            size_t ulen = colon ? (size_t)(colon - cred) : 0;
            snprintf(shown, sizeof shown, "%s***@%s", scheme, at + 1);
            if (pwlen == 0 || pwlen >= sizeof m->password) {
                snprintf(err, errlen, "invalid master '%s***@%s': bad password", scheme, at + 1);
                return -1;
            }
            if (ulen >= sizeof m->user || memchr(cred, ' ', ulen)) {
                snprintf(err, errlen, "invalid master '%s***@%s': bad user name", scheme, at + 1);
                return -1;
            }
            memcpy(m->user, cred, ulen);
            m->user[ulen] = '\0';
            memcpy(m->password, pw, pwlen);
            m->password[pwlen] = '\0';
            hp = at + 1;
        }
    }
    char hostport[600];
    if (strlen(hp) >= sizeof hostport) {
        snprintf(err, errlen, "invalid master '%.200s...': too long", shown);
        return -1;
    }
    snprintf(hostport, sizeof hostport, "%s", hp);
    char *query = strchr(hostport, '?');
    if (query) {
        /* rediss://host:port?server_name=NAME: the name its certificate carries (and the
         * SNI), when it is reached by an address or another name. */
        *query++ = '\0';
        const char *key = "server_name=";
        size_t klen = strlen(key);
        if (!scheme || strncmp(query, key, klen) != 0 || !m->tls) {
            snprintf(err, errlen, "invalid master '%s': the only URL option is ?server_name=NAME, "
                     "for rediss:// masters", shown);
            return -1;
        }
        if (config_check_server_name(query + klen) != 0) {
            snprintf(err, errlen, "invalid master '%s': bad server_name (a DNS name or an address)", shown);
            return -1;
        }
        snprintf(m->server_name, sizeof m->server_name, "%s", query + klen);
    }
    char *slash = strchr(hostport, '/');
    if (slash) {
        long db;
        if (hp == s || config_parse_long(slash + 1, 0, 1000000, &db) != 0) {
            snprintf(err, errlen, "invalid master '%s': bad database number", shown);
            return -1;
        }
        m->db = (int)db;
        *slash = '\0';
    }
    if (config_parse_hostport(hostport, m->host, sizeof m->host, &m->port) != 0 ||
        m->port == 0) {
        snprintf(err, errlen,
                 "invalid master '%s': expected host:port, redis[s]://[[user]:password@]host:port[/db] "
                 "or unix:///path.sock",
                 shown);
        return -1;
    }
    if (strchr(m->host, ':'))
        snprintf(m->address, sizeof m->address, "[%s]:%d", m->host, m->port);
    else
        snprintf(m->address, sizeof m->address, "%s:%d", m->host, m->port);
    return 0;
}

size_t config_tls_masters(const config *cfg)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->n_masters; i++)
        n += cfg->masters[i].tls != 0;
    return n;
}

int config_master_auth_argv(const config_master *m, const char *argv[3])
{
    if (!m->password[0])
        return 0;
    int n = 0;
    argv[n++] = "AUTH";
    if (m->user[0])
        argv[n++] = m->user;
    argv[n++] = m->password;
    return n;
}

int config_parse_masters(config *cfg, const char *list, char *err, size_t errlen)
{
    size_t n = 0;
    const char *p = list;
    if (!*list) {
        snprintf(err, errlen, "invalid masters '': at least one master is needed");
        return -1;
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[1024];
        if (len == 0 || len >= sizeof one) {
            snprintf(err, errlen, "invalid masters list: empty or overlong entry");
            return -1;
        }
        if (n == CONFIG_MAX_MASTERS) {
            snprintf(err, errlen, "invalid masters list: more than %d masters", CONFIG_MAX_MASTERS);
            return -1;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        if (config_parse_master(one, &cfg->masters[n], err, errlen) != 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (strcmp(cfg->masters[i].address, cfg->masters[n].address) == 0 &&
                cfg->masters[i].db == cfg->masters[n].db) {
                snprintf(err, errlen, "invalid masters list: '%s' is listed twice",
                         cfg->masters[n].address);
                return -1;
            }
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    cfg->n_masters = n;
    return 0;
}

/* ---- flags and environment ------------------------------------------------ */

enum opt_kind { OPT_MASTERS, OPT_LISTEN, OPT_LONG, OPT_DOUBLE, OPT_PREFIX, OPT_INT,
                OPT_LOGFMT, OPT_LOGLEVEL, OPT_PATH, OPT_BOOL, OPT_SERVERNAME };

struct opt {
    const char *flag;
    const char *env;
    enum opt_kind kind;
    size_t offset;
    long min, max;
    const char *help;
};

#define OFF(f) offsetof(config, f)
static const struct opt opts[] = {
    {"masters", "REDLOCK_MASTERS", OPT_MASTERS, 0, 0, 0,
     "comma-separated masters: host:port, redis://[[user]:pw@]host:port[/db], unix:///p.sock, "
     "rediss://[[user]:pw@]host:port[/db][?server_name=NAME] (TLS; plain and TLS may mix)"},
    {"listen", "REDLOCK_LISTEN", OPT_LISTEN, 0, 0, 0, "where to serve HTTP (port 0: any free port)"},
    {"node-timeout-ms", "REDLOCK_NODE_TIMEOUT_MS", OPT_LONG, OFF(node_timeout_ms), 1, 60000,
     "per master, per round"},
    {"drift-factor", "REDLOCK_DRIFT_FACTOR", OPT_DOUBLE, OFF(drift_factor), 0, 0,
     "clock drift allowance as a fraction of the ttl (0..0.5)"},
    {"default-ttl-ms", "REDLOCK_DEFAULT_TTL_MS", OPT_LONG, OFF(default_ttl_ms), 1, 86400000L * 30,
     "ttl when a request gives none"},
    {"max-ttl-ms", "REDLOCK_MAX_TTL_MS", OPT_LONG, OFF(max_ttl_ms), 1, 86400000L * 30,
     "largest ttl a request may ask for"},
    {"max-wait-ms", "REDLOCK_MAX_WAIT_MS", OPT_LONG, OFF(max_wait_ms), 0, 86400000L,
     "largest wait_ms a request may ask for"},
    {"lock-delay-ms", "REDLOCK_LOCK_DELAY_MS", OPT_LONG, OFF(lock_delay_ms), 0, 86400000L * 30,
     "lock_delay_ms of an exclusive lock whose acquire gives none (at most the max ttl)"},
    {"key-prefix", "REDLOCK_KEY_PREFIX", OPT_PREFIX, 0, 0, 0, "prefix of lock keys on the masters"},
    {"threads", "REDLOCK_THREADS", OPT_INT, OFF(threads), 1, 64, "worker threads"},
    {"max-connections", "REDLOCK_MAX_CONNECTIONS", OPT_LONG, OFF(max_connections), 1, 1000000,
     "open HTTP connections, whole process"},
    {"max-waiters", "REDLOCK_MAX_WAITERS", OPT_LONG, OFF(max_waiters), 0, 1000000,
     "parked waiting acquirers, whole process"},
    {"max-streams", "REDLOCK_MAX_STREAMS", OPT_LONG, OFF(max_streams), 0, 1000000,
     "locks held for open streams (hold=stream), whole process"},
    {"quarantine-ms", "REDLOCK_QUARANTINE_MS", OPT_LONG, OFF(quarantine_ms), 0, 86400000L * 30,
     "how long a master that restarted or lost its data stays out of quorums"},
    {"trust-fsync-always", "REDLOCK_TRUST_FSYNC_ALWAYS", OPT_BOOL, OFF(trust_fsync_always), 0, 1,
     "1: a restarted master running AOF with appendfsync always skips the delay (not after a restore)"},
    {"clock-check", "REDLOCK_CLOCK_CHECK", OPT_BOOL, OFF(clock_check), 0, 1,
     "1: a master whose clock jumps, steps back or runs outside the drift factor is quarantined"},
    {"clock-max-skew-ms", "REDLOCK_CLOCK_MAX_SKEW_MS", OPT_LONG, OFF(clock_max_skew_ms), 0, 86400000L,
     "a master's clock this far from the other masters' is not trusted (0: not compared)"},
    {"header-timeout-ms", "REDLOCK_HEADER_TIMEOUT_MS", OPT_LONG, OFF(header_timeout_ms), 100, 3600000,
     "a connection must send a whole request header within this (also the keep-alive idle limit)"},
    {"auth-tokens-file", "REDLOCK_AUTH_TOKENS_FILE", OPT_PATH, OFF(auth_tokens_file), 0, 0,
     "bearer tokens, one per line, optionally followed by a lock-name prefix"},
    {"auth-probes", "REDLOCK_AUTH_PROBES", OPT_BOOL, OFF(auth_probes), 0, 1,
     "1: /readyz and /metrics need a token too (/healthz never does)"},
    {"tls-cert", "REDLOCK_TLS_CERT", OPT_PATH, OFF(tls_cert), 0, 0, "PEM certificate: serve HTTPS"},
    {"tls-key", "REDLOCK_TLS_KEY", OPT_PATH, OFF(tls_key), 0, 0, "PEM private key for --tls-cert"},
    {"redis-password-file", "REDLOCK_REDIS_PASSWORD_FILE", OPT_PATH, OFF(redis_password_file), 0, 0,
     "AUTH password (first line) for masters whose URL carries none"},
    {"redis-tls-ca-file", "REDLOCK_REDIS_TLS_CA_FILE", OPT_PATH, OFF(redis_tls_ca_file), 0, 0,
     "PEM CA certificates that vouch for rediss:// masters (none: the system's trust store)"},
    {"redis-tls-cert", "REDLOCK_REDIS_TLS_CERT", OPT_PATH, OFF(redis_tls_cert), 0, 0,
     "PEM client certificate for rediss:// masters that ask for one (tls-auth-clients)"},
    {"redis-tls-key", "REDLOCK_REDIS_TLS_KEY", OPT_PATH, OFF(redis_tls_key), 0, 0,
     "PEM private key for --redis-tls-cert"},
    {"redis-tls-server-name", "REDLOCK_REDIS_TLS_SERVER_NAME", OPT_SERVERNAME, OFF(redis_tls_server_name),
     0, 0, "the name rediss:// masters' certificates carry (and the SNI) when they are reached by "
     "address; a master's ?server_name= wins"},
    {"redis-tls-insecure", "REDLOCK_REDIS_TLS_INSECURE", OPT_BOOL, OFF(redis_tls_insecure), 0, 1,
     "1: do not verify rediss:// masters' certificates at all (anyone on the path can pose as a "
     "master; warned at start and shown in /readyz)"},
    {"log-format", "REDLOCK_LOG_FORMAT", OPT_LOGFMT, 0, 0, 0, "json or text"},
    {"log-level", "REDLOCK_LOG_LEVEL", OPT_LOGLEVEL, 0, 0, 0, "error, warn, info or debug"},
};
#undef OFF

static const char *value_name(enum opt_kind k)
{
    switch (k) {
    case OPT_MASTERS: return "LIST";
    case OPT_LISTEN: return "HOST:PORT";
    case OPT_DOUBLE: return "F";
    case OPT_PREFIX: return "P";
    case OPT_LOGFMT: return "json|text";
    case OPT_LOGLEVEL: return "L";
    case OPT_PATH: return "FILE";
    case OPT_BOOL: return "0|1";
    case OPT_SERVERNAME: return "NAME";
    case OPT_LONG:
    case OPT_INT: break;
    }
    return "N";
}

/* The built-in default of o, as --help shows it (from config_defaults(): the one place
 * the defaults are set). */
static void default_text(const config *d, const struct opt *o, char *out, size_t cap)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const char *base = (const char *)d + o->offset;
    switch (o->kind) {
    case OPT_MASTERS: {
        size_t len = 0;
        out[0] = '\0';
        for (size_t i = 0; i < d->n_masters && len < cap; i++)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", d->masters[i].address);
        return;
    }
    case OPT_LISTEN:
        snprintf(out, cap, "%s:%d", d->listen_host, d->listen_port);
        return;
    case OPT_LONG:
        if (o->offset == offsetof(config, quarantine_ms) && d->quarantine_ms < 0)
            snprintf(out, cap, "the max ttl");
        else
            snprintf(out, cap, "%ld", *(const long *)base);
        return;
    case OPT_INT:
        if (o->offset == offsetof(config, threads))
            snprintf(out, cap, "the number of CPUs, at most 64 (here %d)", d->threads);
        else
            snprintf(out, cap, "%d", *(const int *)base);
        return;
    case OPT_DOUBLE:
        snprintf(out, cap, "%g", *(const double *)base);
        return;
    case OPT_PREFIX:
        snprintf(out, cap, "%s", d->key_prefix);
        return;
    case OPT_PATH:
        snprintf(out, cap, "%s", *base ? base : "none");
        return;
    case OPT_SERVERNAME:
        snprintf(out, cap, "%s", *base ? base : "none (the host in the master's URL)");
        return;
    case OPT_BOOL:
        snprintf(out, cap, "%d", *(const int *)base);
        return;
    case OPT_LOGFMT:
        snprintf(out, cap, "%s", d->log_json ? "json" : "text");
        return;
    case OPT_LOGLEVEL:
        snprintf(out, cap, "%s", d->log_level >= 0 && d->log_level <= 3 ? levels[d->log_level] : "?");
        return;
    }
    snprintf(out, cap, "?");
}

static void print_help(void)
{
    static config d; /* large (64 masters): not on the stack */
    config_defaults(&d);
    printf("usage: redlockd [options]\n"
           "       redlockd --probe [URL]   exit 0 if GET URL answers 200 (http:// or https://,\n"
           "                                the certificate is not verified); without URL, GET\n"
           "                                /healthz on the listener that REDLOCK_LISTEN and\n"
           "                                REDLOCK_TLS_CERT configure\n\n"
           "Redlock over HTTP: POST/DELETE/PATCH/GET /locks/<name>.\n\n"
           "options (each also read from the environment variable shown; the flag wins):\n");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char flag[64], dflt[700];
        snprintf(flag, sizeof flag, "--%s %s", opts[i].flag, value_name(opts[i].kind));
        default_text(&d, &opts[i], dflt, sizeof dflt);
        printf("  %-30s %s\n      %s\n      default: %s\n", flag, opts[i].env, opts[i].help, dflt);
    }
    printf("  --help                         this text\n"
           "  --version                      the version\n\n"
           "exit status: 0 after SIGTERM/SIGINT, 2 bad configuration, %d the listen address is\n"
           "in use (another process holds it), 1 other failures at start.\n",
           CONFIG_EXIT_ADDRESS_IN_USE);
}

static int apply(config *cfg, const struct opt *o, const char *val, const char *origin,
                 char *err, size_t errlen)
{
    long l;
    switch (o->kind) {
    case OPT_MASTERS:
        if (config_parse_masters(cfg, val, err, errlen) != 0) {
            char inner[512];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, errlen, "%s: %s", origin, inner);
            return -1;
        }
        return 0;
    case OPT_LISTEN:
        if (config_parse_hostport(val, cfg->listen_host, sizeof cfg->listen_host,
                                  &cfg->listen_port) != 0) {
            snprintf(err, errlen, "%s: invalid listen address '%s' (expected HOST:PORT)", origin, val);
            return -1;
        }
        return 0;
    case OPT_LONG:
    case OPT_INT:
        if (config_parse_long(val, o->min, o->max, &l) != 0) {
            snprintf(err, errlen, "%s: invalid value '%s' (expected an integer %ld..%ld)", origin,
                     val, o->min, o->max);
            return -1;
        }
        if (o->kind == OPT_INT)
            *(int *)((char *)cfg + o->offset) = (int)l;
        else
            *(long *)((char *)cfg + o->offset) = l;
        return 0;
    case OPT_DOUBLE: {
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(d) || d < 0 || d > 0.5) {
            snprintf(err, errlen, "%s: invalid value '%s' (expected a number 0..0.5)", origin, val);
            return -1;
        }
        *(double *)((char *)cfg + o->offset) = d;
        return 0;
    }
    case OPT_PREFIX:
        if (strlen(val) >= sizeof cfg->key_prefix || strpbrk(val, " \t\r\n")) {
            snprintf(err, errlen, "%s: invalid key prefix '%s' (under 128 bytes, no spaces)",
                     origin, val);
            return -1;
        }
        snprintf(cfg->key_prefix, sizeof cfg->key_prefix, "%s", val);
        return 0;
    case OPT_PATH:
        if (!*val || strlen(val) >= 512) {
            snprintf(err, errlen, "%s: invalid path '%s'", origin, val);
            return -1;
        }
        snprintf((char *)cfg + o->offset, 512, "%s", val);
        return 0;
    case OPT_SERVERNAME:
        if (config_check_server_name(val) != 0) {
            snprintf(err, errlen, "%s: invalid server name '%s' (a DNS name or an address)", origin, val);
            return -1;
        }
        snprintf((char *)cfg + o->offset, 512, "%s", val);
        return 0;
    case OPT_BOOL:
        if (strcmp(val, "1") == 0 || strcmp(val, "true") == 0 || strcmp(val, "yes") == 0)
            *(int *)((char *)cfg + o->offset) = 1;
        else if (strcmp(val, "0") == 0 || strcmp(val, "false") == 0 || strcmp(val, "no") == 0)
            *(int *)((char *)cfg + o->offset) = 0;
        else {
            snprintf(err, errlen, "%s: invalid value '%s' (expected 1 or 0)", origin, val);
            return -1;
        }
        return 0;
    case OPT_LOGFMT:
        if (strcmp(val, "json") == 0)
            cfg->log_json = 1;
        else if (strcmp(val, "text") == 0)
            cfg->log_json = 0;
        else {
            snprintf(err, errlen, "%s: invalid log format '%s' (json or text)", origin, val);
            return -1;
        }
        return 0;
    case OPT_LOGLEVEL: {
        int lv = log_level_parse(val);
        if (lv < 0) {
            snprintf(err, errlen, "%s: invalid log level '%s' (error, warn, info, debug)", origin, val);
            return -1;
        }
        cfg->log_level = lv;
        return 0;
    }
    }
    return -1;
}

int config_load(config *cfg, int argc, char **argv, char *err, size_t errlen)
{
    config_defaults(cfg);
    const size_t nopts = sizeof opts / sizeof opts[0];
    char origin[128];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            return CONFIG_EXIT;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("redlockd %s\n", RL_VERSION);
            return CONFIG_EXIT;
        }
    }
    /* Environment first, then flags on top. */
    for (size_t k = 0; k < nopts; k++) {
        const char *v = getenv(opts[k].env);
        if (v) {
            snprintf(origin, sizeof origin, "%s", opts[k].env);
            if (apply(cfg, &opts[k], v, origin, err, errlen) != 0)
                return CONFIG_ERROR;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s' (see --help)", a);
            return CONFIG_ERROR;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const struct opt *o = NULL;
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].flag) == nlen && strncmp(opts[k].flag, a, nlen) == 0)
                o = &opts[k];
        if (!o) {
            snprintf(err, errlen, "unknown option '%s' (see --help)", argv[i]);
            return CONFIG_ERROR;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "option '--%s' needs a value", o->flag);
                return CONFIG_ERROR;
            }
            val = argv[++i];
        }
        snprintf(origin, sizeof origin, "--%s", o->flag);
        if (apply(cfg, o, val, origin, err, errlen) != 0)
            return CONFIG_ERROR;
    }
    if (cfg->default_ttl_ms > cfg->max_ttl_ms) {
        snprintf(err, errlen, "invalid default ttl %ld: above the max ttl %ld", cfg->default_ttl_ms,
                 cfg->max_ttl_ms);
        return CONFIG_ERROR;
    }
    if (cfg->lock_delay_ms > cfg->max_ttl_ms) {
        snprintf(err, errlen, "invalid lock delay %ld: above the max ttl %ld", cfg->lock_delay_ms,
                 cfg->max_ttl_ms);
        return CONFIG_ERROR;
    }
    if (cfg->quarantine_ms < 0)
        cfg->quarantine_ms = cfg->max_ttl_ms;
    if (!cfg->tls_cert[0] != !cfg->tls_key[0]) {
        snprintf(err, errlen, "invalid TLS setting: --tls-cert and --tls-key go together");
        return CONFIG_ERROR;
    }
    if (!cfg->redis_tls_cert[0] != !cfg->redis_tls_key[0]) {
        snprintf(err, errlen, "invalid TLS setting: --redis-tls-cert and --redis-tls-key go together");
        return CONFIG_ERROR;
    }
    return CONFIG_OK;
}
