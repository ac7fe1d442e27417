/* fuzz_config.c -- libFuzzer target: master lists, single masters, HOST:PORT and strict
 * integers from config.h.
 *
 * Input: byte 0 selects what to parse, the rest is the string (a C string: it stops at
 * the first NUL, as flags and environment variables do).  Checks, beyond "no crash":
 *  - a parsed master is either a unix socket (absolute path, no host/port) or TCP
 *    (non-empty host, port 1..65535), its display address holds no credentials,
 *    and a list holds 1..64 masters with no (address, db) twice;
 *  - a server name (?server_name=) only on a rediss:// master, and a valid one;
 *  - an error message exists, and never shows the password of a redis[s]:// URL;
 *  - HOST:PORT round-trips (format what was parsed, parse again, same result);
 *  - config_parse_long agrees with a reference (optional '-', digits, range). */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static config cfg; /* large: keep it off the stack */

static void check_master(const config_master *m)
{
    if (m->unix_path[0]) {
        if (m->unix_path[0] != '/' || m->host[0] || m->port != 0)
            abort();
        if (strncmp(m->address, "unix:", 5) != 0)
            abort();
    } else {
        if (!m->host[0] || m->port < 1 || m->port > 65535)
            abort();
    }
    if (m->db < 0)
        abort();
    /* a server name only for TLS, and only one config_check_server_name() takes */
    if (m->server_name[0] && (!m->tls || config_check_server_name(m->server_name) != 0))
        abort();
    if (m->tls && m->unix_path[0])
        abort();
    /* Credentials end at the last '@': what is shown after them never holds one. */
    if (m->password[0] && strchr(m->address, '@'))
        abort();
}

/* For "redis://CRED@rest" (or rediss://): the password part of CRED, if it cannot
 * appear in the message for another reason (it is not part of rest and is long enough). */
static int secret_of(const char *s, char *pw, size_t pwlen)
{
    const char *scheme = strncmp(s, "redis://", 8) == 0 ? "redis://" : strncmp(s, "rediss://", 9) == 0 ? "rediss://" : NULL;
    if (!scheme)
        return 0;
    const char *cred = s + strlen(scheme);
    const char *at = strrchr(cred, '@');
    if (!at)
        return 0;
    const char *colon = memchr(cred, ':', (size_t)(at - cred));
    const char *p = colon ? colon + 1 : cred;
    size_t n = (size_t)(at - p);
    if (n < 6 || n >= pwlen)
        return 0;
    memcpy(pw, p, n);
    pw[n] = '\0';
    /* what the message may show instead: the masked URL */
    char shown[4200];
    snprintf(shown, sizeof shown, "%s***@%s", scheme, at + 1);
    if (strstr(shown, pw))
        return 0;
    if (colon && strstr(pw, "***"))
        return 0;
    return 1;
}

/* Does the quoted value in "invalid master '<shown>': why" contain pw?  (The fixed
 * text after it mentions "redis://[:password@]..." and "unix:///path.sock".) */
static int shown_contains(const char *err, const char *pw)
{
    const char *q1 = strchr(err, '\'');
    const char *q2 = NULL;
    for (const char *p = err; (p = strstr(p, "': ")) != NULL; p++)
        q2 = p;
    if (!q1 || !q2 || q2 <= q1)
        return strstr(err, pw) != NULL;
    return memmem(q1 + 1, (size_t)(q2 - q1 - 1), pw, strlen(pw)) != NULL;
}

static int ref_long(const char *s, long min, long max, long *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!*p)
        return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno == ERANGE || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    uint8_t sel = data[0];
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    char err[512];
    char pw[300];

    switch (sel % 4) {
    case 0: { /* a master list */
        memset(&cfg, 0, sizeof cfg);
        err[0] = '\0';
        if (config_parse_masters(&cfg, s, err, sizeof err) == 0) {
            if (cfg.n_masters < 1 || cfg.n_masters > CONFIG_MAX_MASTERS)
                abort();
            for (size_t i = 0; i < cfg.n_masters; i++) {
                check_master(&cfg.masters[i]);
                for (size_t j = 0; j < i; j++)
                    if (strcmp(cfg.masters[i].address, cfg.masters[j].address) == 0 &&
                        cfg.masters[i].db == cfg.masters[j].db)
                        abort();
            }
        } else if (!err[0]) {
            abort();
        }
        break;
    }
    case 1: { /* one master */
        config_master m;
        err[0] = '\0';
        int rc = config_parse_master(s, &m, err, sizeof err);
        if (rc == 0)
            check_master(&m);
        else if (!err[0])
            abort();
        if (rc != 0 && secret_of(s, pw, sizeof pw) && shown_contains(err, pw))
            abort(); /* the error shows the password */
        break;
    }
    case 2: { /* HOST:PORT */
        char host[256];
        int port = -1;
        if (config_parse_hostport(s, host, sizeof host, &port) == 0) {
            if (!host[0] || strlen(host) >= sizeof host || port < 0 || port > 65535)
                abort();
            /* Hosts are not validated beyond that (a bad one fails at resolve time):
             * "[[]:0" gives host "[", which cannot be written back unbracketed. */
            if (host[0] == '[')
                break;
            char again[300];
            snprintf(again, sizeof again, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
            char host2[256];
            int port2 = -1;
            if (config_parse_hostport(again, host2, sizeof host2, &port2) != 0)
                abort();
            if (strcmp(host, host2) != 0 || port != port2)
                abort();
        }
        break;
    }
    default: { /* strict integers */
        static const long mins[] = {0, 1, -5, LONG_MIN};
        static const long maxs[] = {0, 65535, 86400000L * 30, LONG_MAX};
        long min = mins[(sel >> 2) % 4], max = maxs[(sel >> 4) % 4];
        long got = 7, ref = 7;
        int grc = config_parse_long(s, min, max, &got);
        int rrc = ref_long(s, min, max, &ref);
        if (grc != rrc || got != ref)
            abort();
        break;
    }
    }
    free(s);
    return 0;
}
