/* validate.c -- request validation and body parsing (see validate.h). */
#include "validate.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "redlock.h"

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
}

static int lease_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

int validate_name(const char *s, size_t len)
{
    if (len < 1 || len > NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!name_char((unsigned char)s[i]))
            return 0;
    return 1;
}

int validate_lease(const char *s, size_t len)
{
    if (len < LEASE_MIN_LEN || len > LEASE_MAX_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!lease_char((unsigned char)s[i]))
            return 0;
    return 1;
}

int validate_owner(const char *s, size_t len)
{
    if (len < 1 || len > OWNER_MAX_LEN)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

int validate_uint(const char *s, long max, long *out)
{
    if (!s || !*s)
        return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        int d = *p - '0';
        if (d > max || v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Values beyond this are refused before the range check, whatever the config. */
#define HUGE_MS (86400000L * 366)

rl_err params_from_query(lock_params *p, const char *key, const char *value)
{
    long v;
    if (strcmp(key, "ttl_ms") == 0) {
        if (validate_uint(value, HUGE_MS, &v) != 0)
            return RL_E_INVALID_TTL;
        p->ttl_ms = v;
        p->has_ttl = 1;
    } else if (strcmp(key, "wait_ms") == 0) {
        if (validate_uint(value, HUGE_MS, &v) != 0)
            return RL_E_INVALID_WAIT;
        p->wait_ms = v;
        p->has_wait = 1;
    } else if (strcmp(key, "lease") == 0) {
        size_t n = strlen(value);
        if (!validate_lease(value, n))
            return RL_E_INVALID_LEASE;
        memcpy(p->lease, value, n + 1);
        p->has_lease = 1;
    } else if (strcmp(key, "hold") == 0) {
        if (strcmp(value, "stream") != 0)
            return RL_E_INVALID_HOLD;
        p->hold_stream = 1;
    } else if (strcmp(key, "lock_delay_ms") == 0) {
        if (validate_uint(value, HUGE_MS, &v) != 0)
            return RL_E_INVALID_LOCK_DELAY;
        p->lock_delay_ms = v;
        p->has_lock_delay = 1;
    } else if (strcmp(key, "max_hold_ms") == 0) {
        if (validate_uint(value, HUGE_MS, &v) != 0)
            return RL_E_INVALID_MAX_HOLD;
        p->max_hold_ms = v;
        p->has_max_hold = 1;
    } else if (strcmp(key, "token") == 0) {
        char *end;
        errno = 0;
        unsigned long long t = strtoull(value, &end, 10);
        if (!*value || *end || errno || value[0] < '0' || value[0] > '9' || t == 0)
            return RL_E_INVALID_TOKEN;
        p->token = t;
        p->has_token = 1;
    } else if (strcmp(key, "index") == 0) {
        char *end;
        errno = 0;
        unsigned long long i = strtoull(value, &end, 10);
        if (!*value || *end || errno || value[0] < '0' || value[0] > '9')
            return RL_E_INVALID_INDEX;
        p->index = i;
        p->has_index = 1;
    } else if (strcmp(key, "mode") == 0) {
        if (strcmp(value, "shared") != 0 && strcmp(value, "exclusive") != 0)
            return RL_E_INVALID_MODE;
        p->shared = value[0] == 's';
        p->has_mode = 1;
    } else if (strcmp(key, "permits") == 0) {
        if (validate_uint(value, SEM_MAX_PERMITS, &v) != 0 || v < 1)
            return RL_E_INVALID_PERMITS;
        p->permits = v;
        p->has_permits = 1;
    } else if (strcmp(key, "reentrant") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return RL_E_INVALID_REENTRANT;
        p->reentrant = value[0] == 't';
        p->has_reentrant = 1;
    } else if (strcmp(key, "owner") == 0) {
        size_t n = strlen(value);
        if (!validate_owner(value, n))
            return RL_E_INVALID_OWNER;
        memcpy(p->owner, value, n + 1);
        p->has_owner = 1;
    }
    return RL_OK;
}

static rl_err json_ms(json_t *v, long *out, int *has, rl_err bad)
{
    if (!json_is_integer(v))
        return bad;
    json_int_t i = json_integer_value(v);
    if (i < 0 || i > HUGE_MS)
        return bad;
    *out = (long)i;
    *has = 1;
    return RL_OK;
}

rl_err params_from_body(lock_params *p, const char *body, size_t len, char *msg, size_t msglen)
{
    if (len == 0)
        return RL_OK;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    rl_err rc = RL_OK;
    if (!root) {
        snprintf(msg, msglen, "invalid JSON body: %s (at byte %d)", jerr.text, jerr.position);
        return RL_E_INVALID_JSON;
    }
    if (!json_is_object(root)) {
        snprintf(msg, msglen, "the body must be a JSON object");
        rc = RL_E_INVALID_JSON;
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "ttl_ms") == 0) {
            rc = json_ms(v, &p->ttl_ms, &p->has_ttl, RL_E_INVALID_TTL);
        } else if (strcmp(key, "wait_ms") == 0) {
            rc = json_ms(v, &p->wait_ms, &p->has_wait, RL_E_INVALID_WAIT);
        } else if (strcmp(key, "lease") == 0) {
            if (!json_is_string(v) ||
                !validate_lease(json_string_value(v), json_string_length(v))) {
                rc = RL_E_INVALID_LEASE;
            } else {
                memcpy(p->lease, json_string_value(v), json_string_length(v) + 1);
                p->has_lease = 1;
            }
        } else if (strcmp(key, "hold") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "stream") != 0)
                rc = RL_E_INVALID_HOLD;
            else
                p->hold_stream = 1;
        } else if (strcmp(key, "owner") == 0) {
            if (!json_is_string(v) ||
                !validate_owner(json_string_value(v), json_string_length(v))) {
                rc = RL_E_INVALID_OWNER;
            } else {
                memcpy(p->owner, json_string_value(v), json_string_length(v) + 1);
                p->has_owner = 1;
            }
        } else if (strcmp(key, "mode") == 0) {
            const char *m = json_string_value(v);
            if (!m || (strcmp(m, "shared") != 0 && strcmp(m, "exclusive") != 0)) {
                rc = RL_E_INVALID_MODE;
            } else {
                p->shared = m[0] == 's';
                p->has_mode = 1;
            }
        } else if (strcmp(key, "permits") == 0) {
            json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
            if (i < 1 || i > SEM_MAX_PERMITS) {
                rc = RL_E_INVALID_PERMITS;
            } else {
                p->permits = (long)i;
                p->has_permits = 1;
            }
        } else if (strcmp(key, "reentrant") == 0) {
            if (!json_is_boolean(v)) {
                rc = RL_E_INVALID_REENTRANT;
            } else {
                p->reentrant = json_is_true(v);
                p->has_reentrant = 1;
            }
        } else if (strcmp(key, "lock_delay_ms") == 0) {
            rc = json_ms(v, &p->lock_delay_ms, &p->has_lock_delay, RL_E_INVALID_LOCK_DELAY);
        } else if (strcmp(key, "max_hold_ms") == 0) {
            rc = json_ms(v, &p->max_hold_ms, &p->has_max_hold, RL_E_INVALID_MAX_HOLD);
        } else {
            snprintf(msg, msglen, "unknown member '%.64s' (expected ttl_ms, wait_ms, lease, owner, hold, mode, permits, reentrant, lock_delay_ms, max_hold_ms%s)", key,
                     strcmp(key, "names") == 0 ? "; names goes to POST /locks" : "");
            rc = RL_E_INVALID_JSON;
        }
        if (rc != RL_OK)
            goto out;
    }
out:
    json_decref(root);
    return rc;
}

rl_err multi_params_from_body(multi_params *mp, const char *body, size_t len, char *msg,
                              size_t msglen)
{
    if (len == 0) {
        snprintf(msg, msglen, "the body must be a JSON object with \"names\"");
        return RL_E_INVALID_JSON;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(msg, msglen, "invalid JSON body: %s (at byte %d)", jerr.text, jerr.position);
        return RL_E_INVALID_JSON;
    }
    rl_err rc = RL_OK;
    json_t *names = json_is_object(root) ? json_object_get(root, "names") : NULL;
    if (!json_is_object(root)) {
        snprintf(msg, msglen, "the body must be a JSON object");
        rc = RL_E_INVALID_JSON;
        goto out;
    }
    if (!json_is_array(names) || json_array_size(names) == 0 ||
        json_array_size(names) > MULTI_MAX_NAMES) {
        snprintf(msg, msglen, "\"names\" must be an array of 1..%d lock names", MULTI_MAX_NAMES);
        rc = RL_E_INVALID_NAME;
        goto out;
    }
    mp->n = 0;
    memset(mp->shared, 0, sizeof mp->shared);
    size_t i;
    json_t *v;
    json_array_foreach(names, i, v) {
        const char *s = json_string_value(v);
        size_t l = json_string_length(v);
        if (!json_is_string(v) || !validate_name(s, l)) {
            snprintf(msg, msglen, "names[%zu] is not a valid lock name", i);
            rc = RL_E_INVALID_NAME;
            goto out;
        }
        for (size_t k = 0; k < mp->n; k++)
            if (mp->lens[k] == l && memcmp(mp->names[k], s, l) == 0) {
                snprintf(msg, msglen, "names[%zu] repeats '%s'", i, mp->names[k]);
                rc = RL_E_INVALID_NAME;
                goto out;
            }
        memcpy(mp->names[mp->n], s, l + 1);
        mp->lens[mp->n++] = l;
    }
    json_t *modes = json_object_get(root, "modes");
    if (modes) {
        const char *mk;
        json_t *mv;
        if (!json_is_object(modes)) {
            snprintf(msg, msglen, "\"modes\" must be an object {\"<name>\": \"shared\" or \"exclusive\"}");
            rc = RL_E_INVALID_MODE;
            goto out;
        }
        json_object_foreach(modes, mk, mv) {
            size_t k = 0;
            while (k < mp->n && strcmp(mp->names[k], mk) != 0)
                k++;
            const char *m = json_string_value(mv);
            if (k == mp->n || !m || (strcmp(m, "shared") != 0 && strcmp(m, "exclusive") != 0)) {
                snprintf(msg, msglen, "modes: '%.64s' must be one of names, with \"shared\" or \"exclusive\"", mk);
                rc = RL_E_INVALID_MODE;
                goto out;
            }
            mp->shared[k] = m[0] == 's';
        }
        json_object_del(root, "modes");
    }
    /* The other members are those of a single lock. */
    json_object_del(root, "names");
    char *rest = json_dumps(root, JSON_COMPACT);
    if (!rest) {
        rc = RL_E_INTERNAL;
        goto out;
    }
    rc = params_from_body(&mp->p, rest, strlen(rest), msg, msglen);
    free(rest);
out:
    json_decref(root);
    return rc;
}

rl_err params_check(const lock_params *p, long max_ttl_ms, long max_wait_ms, double drift_factor,
                    char *msg, size_t msglen)
{
    if (p->has_ttl) {
        if (p->ttl_ms < 1 || p->ttl_ms > max_ttl_ms) {
            snprintf(msg, msglen, "ttl_ms must be an integer 1..%ld", max_ttl_ms);
            return RL_E_INVALID_TTL;
        }
        if (p->ttl_ms <= redlock_drift_ms(p->ttl_ms, drift_factor)) {
            snprintf(msg, msglen, "ttl_ms %ld leaves no validity after the drift allowance of %lld ms",
                     p->ttl_ms, (long long)redlock_drift_ms(p->ttl_ms, drift_factor));
            return RL_E_INVALID_TTL;
        }
    }
    if (p->has_wait && (p->wait_ms < 0 || p->wait_ms > max_wait_ms)) {
        snprintf(msg, msglen, "wait_ms must be an integer 0..%ld", max_wait_ms);
        return RL_E_INVALID_WAIT;
    }
    if (p->has_lock_delay && (p->lock_delay_ms < 0 || p->lock_delay_ms > max_ttl_ms)) {
        snprintf(msg, msglen, "lock_delay_ms must be an integer 0..%ld (the max ttl)", max_ttl_ms);
        return RL_E_INVALID_LOCK_DELAY;
    }
    return RL_OK;
}
