/* fuzz_query.c -- libFuzzer target: query-string parameters and the name/lease
 * validators, each checked against a small reference implementation of the contract
 * in validate.h.
 *
 * Input: byte 0 selects the key (ttl_ms, wait_ms, lease, or the bytes up to '=': owner,
 * hold, index, mode, permits, reentrant, lock_delay_ms, max_hold_ms and token have
 * references too, any other key must be ignored),
 * the rest is the value as the HTTP layer hands it over (a C string, so it stops at
 * the first NUL).  The whole input is also given to validate_name and validate_lease
 * as raw bytes, and to validate_uint with a maximum picked from byte 0.
 * Build with -DFUZZ_KNOWN_BUGS=1 to include maxima below 9 in the validate_uint check
 * (a known, reported bug). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

#ifndef FUZZ_KNOWN_BUGS
#define FUZZ_KNOWN_BUGS 0
#endif

#define HUGE_MS (86400000L * 366)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ref_name(const uint8_t *s, size_t n)
{
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-";
    if (n < 1 || n > 255)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !memchr(ok, s[i], sizeof ok - 1))
            return 0;
    return 1;
}

static int ref_lease(const uint8_t *s, size_t n)
{
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    if (n < 16 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !memchr(ok, s[i], sizeof ok - 1))
            return 0;
    return 1;
}

/* Strict decimal, no sign, at most max: 0 and *out, or -1. */
static int ref_uint(const char *s, long max, long *out)
{
    if (!*s)
        return -1;
    unsigned __int128 v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (unsigned)(*p - '0');
        if (v > (unsigned __int128)max)
            return -1;
    }
    *out = (long)v;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* raw validators on exact-size heap copies (ASan sees over-reads) */
    uint8_t *raw = malloc(size ? size : 1);
    if (!raw)
        return 0;
    memcpy(raw, data, size);
    if (validate_name((const char *)raw, size) != ref_name(raw, size))
        abort();
    if (validate_lease((const char *)raw, size) != ref_lease(raw, size))
        abort();
    free(raw);

    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    char *s = malloc(size);
    if (!s)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';

    const char *key;
    const char *value = s;
    switch (sel % 4) {
    case 0: key = "ttl_ms"; break;
    case 1: key = "wait_ms"; break;
    case 2: key = "lease"; break;
    default: {
        char *eq = strchr(s, '=');
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        } else {
            value = "";
        }
        key = s;
    }
    }

    lock_params p;
    memset(&p, 0, sizeof p);
    rl_err rc = params_from_query(&p, key, value);
    long want;
    if (strcmp(key, "ttl_ms") == 0) {
        int ok = ref_uint(value, HUGE_MS, &want) == 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_TTL))
            abort();
        if (ok && (!p.has_ttl || p.ttl_ms != want))
            abort();
        if (!ok && p.has_ttl)
            abort();
    } else if (strcmp(key, "wait_ms") == 0) {
        int ok = ref_uint(value, HUGE_MS, &want) == 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_WAIT))
            abort();
        if (ok && (!p.has_wait || p.wait_ms != want))
            abort();
        if (!ok && p.has_wait)
            abort();
    } else if (strcmp(key, "lease") == 0) {
        int ok = ref_lease((const uint8_t *)value, strlen(value));
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_LEASE))
            abort();
        if (ok && (!p.has_lease || strcmp(p.lease, value) != 0))
            abort();
        if (!ok && p.has_lease)
            abort();
    } else if (strcmp(key, "owner") == 0) {
        /* reference: 1..256 bytes of 0x20..0x7e */
        size_t n = strlen(value);
        int ok = n >= 1 && n <= 256;
        for (size_t i = 0; ok && i < n; i++)
            ok = (unsigned char)value[i] >= 0x20 && (unsigned char)value[i] <= 0x7e;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_OWNER))
            abort();
        if (ok && (!p.has_owner || strcmp(p.owner, value) != 0))
            abort();
        if (!ok && p.has_owner)
            abort();
    } else if (strcmp(key, "hold") == 0) {
        int ok = strcmp(value, "stream") == 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_HOLD) || p.hold_stream != ok)
            abort();
    } else if (strcmp(key, "index") == 0) {
        /* reference: one or more decimal digits whose value fits 64 bits */
        size_t n = strlen(value);
        int ok = n >= 1;
        unsigned long long v = 0;
        for (size_t i = 0; ok && i < n; i++) {
            unsigned d = (unsigned)(value[i] - '0');
            ok = value[i] >= '0' && value[i] <= '9' && v <= (~0ull - d) / 10;
            v = v * 10 + d;
        }
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_INDEX))
            abort();
        if (ok && (!p.has_index || p.index != v))
            abort();
        if (!ok && p.has_index)
            abort();
    } else if (strcmp(key, "mode") == 0) {
        int ok = strcmp(value, "shared") == 0 || strcmp(value, "exclusive") == 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_MODE) || p.has_mode != ok ||
            p.shared != (ok && value[0] == 's'))
            abort();
    } else if (strcmp(key, "permits") == 0) {
        int ok = ref_uint(value, 1024, &want) == 0 && want >= 1;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_PERMITS) || p.has_permits != ok ||
            (ok && p.permits != want))
            abort();
    } else if (strcmp(key, "reentrant") == 0) {
        int ok = strcmp(value, "true") == 0 || strcmp(value, "false") == 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_REENTRANT) ||
            p.has_reentrant != ok || p.reentrant != (ok && value[0] == 't'))
            abort();
    } else if (strcmp(key, "lock_delay_ms") == 0 || strcmp(key, "max_hold_ms") == 0) {
        int delay = key[0] == 'l';
        int ok = ref_uint(value, HUGE_MS, &want) == 0;
        rl_err bad = delay ? RL_E_INVALID_LOCK_DELAY : RL_E_INVALID_MAX_HOLD;
        int has = delay ? p.has_lock_delay : p.has_max_hold;
        long got = delay ? p.lock_delay_ms : p.max_hold_ms;
        if (ok != (rc == RL_OK) || (!ok && rc != bad) || has != ok || (ok && got != want))
            abort();
    } else if (strcmp(key, "token") == 0) {
        /* reference: decimal digits whose value fits 64 bits, not 0 */
        size_t n = strlen(value);
        int ok = n >= 1;
        unsigned long long v = 0;
        for (size_t i = 0; ok && i < n; i++) {
            unsigned d = (unsigned)(value[i] - '0');
            ok = value[i] >= '0' && value[i] <= '9' && v <= (~0ull - d) / 10;
            v = v * 10 + d;
        }
        ok = ok && v > 0;
        if (ok != (rc == RL_OK) || (!ok && rc != RL_E_INVALID_TOKEN) || p.has_token != ok ||
            (ok && p.token != v))
            abort();
    } else {
        /* unknown keys are ignored */
        if (rc != RL_OK || p.has_ttl || p.has_wait || p.has_lease || p.has_owner ||
            p.hold_stream || p.has_index || p.has_mode || p.has_permits || p.has_reentrant ||
            p.has_lock_delay || p.has_max_hold || p.has_token)
            abort();
    }

    /* validate_uint against the reference, with a maximum from the selector byte */
    static const long maxes[] = {0, 1, 5, 8, 9, 10, 15, 99, 100, 65535, 1L << 40,
                                 HUGE_MS, 9223372036854775807L, 19, 1000000, 7};
    long max = maxes[(sel >> 2) % 16];
    if (1) { /* every maximum, since validate_uint handles digits above a small max */
        long got = -1, ref = -1;
        int grc = validate_uint(value, max, &got);
        int rrc = ref_uint(value, max, &ref);
        if (grc != rrc || (grc == 0 && got != ref))
            abort();
    }
    free(s);
    return 0;
}
