/* keys.c -- the key and channel names of keys.h. */
#include "keys.h"

#include <stdio.h>
#include <string.h>


uint64_t keys_name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* see keys.h: never change it */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static size_t fit(int k, size_t cap)
{
    if (k < 0)
        return 0;
    return (size_t)k < cap ? (size_t)k : (cap ? cap - 1 : 0);
}

/* buf = a (NUL-ended) then b then the first len bytes of c (up to a NUL in them), cut
 * to cap - 1 bytes and NUL-ended as snprintf("%s%s%.*s") would, without its formatter:
 * these run for every key of every operation. */
static size_t join3(char *buf, size_t cap, const char *a, const char *b, const char *c, size_t len)
{
    if (!cap)
        return 0;
    size_t n = 0;
    const char *parts[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        size_t l = strlen(parts[i]);
        if (l > cap - 1 - n)
            l = cap - 1 - n;
        memcpy(buf + n, parts[i], l);
        n += l;
    }
    size_t l = strnlen(c, len);
    if (l > cap - 1 - n)
        l = cap - 1 - n;
    memcpy(buf + n, c, l);
    n += l;
    buf[n] = '\0';
    return n;
}

size_t keys_lock(const char *prefix, const char *name, size_t len, char *buf, size_t cap)
{
    return join3(buf, cap, prefix, "", name, len);
}

size_t keys_set(const char *prefix, const char *lease, size_t len, char *buf, size_t cap)
{
    return join3(buf, cap, prefix, KEYS_SET, lease, len);
}

size_t keys_record(const char *prefix, char *buf, size_t cap)
{
    return fit(snprintf(buf, cap, "%s" KEYS_RECORD, prefix), cap);
}

size_t keys_quarantine(const char *prefix, char *buf, size_t cap)
{
    return fit(snprintf(buf, cap, "%s" KEYS_QUARANTINE, prefix), cap);
}

size_t keys_expiry(const char *prefix, char *buf, size_t cap)
{
    return fit(snprintf(buf, cap, "%s" KEYS_EXPIRY, prefix), cap);
}

size_t keys_released(const char *prefix, const char *name, size_t len, char *buf, size_t cap)
{
    return join3(buf, cap, prefix, KEYS_RELEASED, name, len);
}

size_t keys_anchor(const char *prefix, char *buf, size_t cap)
{
    return fit(snprintf(buf, cap, "%s" KEYS_ANCHOR, prefix), cap);
}

size_t keys_shared(const char *prefix, const char *kind, const char *name, size_t len, char *buf,
                   size_t cap)
{
    return join3(buf, cap, prefix, kind, name, len);
}

size_t keys_sem_slot(const char *prefix, const char *name, size_t len, int slot, char *buf,
                     size_t cap)
{
    if (slot < 0)
        return fit(snprintf(buf, cap, "%s%.*s#", prefix, (int)len, name), cap);
    return fit(snprintf(buf, cap, "%s%.*s#%d", prefix, (int)len, name, slot), cap);
}

size_t keys_scan_pattern(const char *prefix, const char *name_prefix, size_t len, char *buf,
                         size_t cap)
{
    size_t n = 0;
    if (!cap)
        return 0;
    for (const char *p = prefix; *p && n + 2 < cap; p++) {
        if (strchr("*?[]\\^", *p))
            buf[n++] = '\\';
        buf[n++] = *p;
    }
    buf[n] = '\0';
    if (len)
        snprintf(buf + n, cap - n, "%.*s*", (int)len, name_prefix);
    else
        snprintf(buf + n, cap - n, "[^#]*");
    return strlen(buf);
}

size_t keys_bucket(const char *name, size_t len, char *buf, size_t cap)
{
    char tmp[24];
    size_t k = 0, n = 0;
    uint64_t v = keys_name_hash(name, len) % KEYS_BUCKETS;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (!cap)
        return 0;
    if (n < cap - 1)
        buf[n++] = 'b';
    while (k && n < cap - 1)
        buf[n++] = tmp[--k];
    buf[n] = '\0';
    return n;
}

const char *keys_released_name(const char *prefix, const char *channel, size_t channel_len,
                               size_t *len)
{
    size_t pl = strlen(prefix), sl = sizeof KEYS_RELEASED - 1;
    if (channel_len <= pl + sl || memcmp(channel, prefix, pl) != 0 ||
        memcmp(channel + pl, KEYS_RELEASED, sl) != 0)
        return NULL;
    *len = channel_len - pl - sl;
    return channel + pl + sl;
}
