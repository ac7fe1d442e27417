/* jw.c -- JSON writer (see jw.h). */
#include "jw.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"

void jw_init(jw *w, char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->need_comma = 0;
    w->overflow = 0;
    if (cap)
        buf[0] = '\0';
}

static void put(jw *w, const char *s, size_t n)
{
    if (w->overflow || w->len + n >= w->cap) {
        w->overflow = 1;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void jw_raw(jw *w, const char *s) { put(w, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

void jw_escape(jw *w, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* start of the current run of plain bytes */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            /* Output is always valid UTF-8: a broken sequence (an echoed byte, a
             * message cut mid-character) becomes U+FFFD. */
            size_t l = utf8_len((const unsigned char *)s + i, n - i);
            if (l) {
                i += l - 1;
                continue;
            }
            put(w, s + run, i - run);
            put(w, "\\ufffd", 6);
            run = i + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(w, s + run, i - run);
        run = i + 1;
        char esc[7];
        switch (c) {
        case '"': put(w, "\\\"", 2); break;
        case '\\': put(w, "\\\\", 2); break;
        case '\n': put(w, "\\n", 2); break;
        case '\r': put(w, "\\r", 2); break;
        case '\t': put(w, "\\t", 2); break;
        default:
            esc[0] = '\\'; esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[c >> 4]; esc[5] = hex[c & 15];
            put(w, esc, 6);
        }
    }
    put(w, s + run, n - run);
}

static void key(jw *w, const char *k)
{
    if (w->need_comma)
        put(w, ",", 1);
    w->need_comma = 1;
    if (k) {
        put(w, "\"", 1);
        jw_escape(w, k, strlen(k));
        put(w, "\":", 2);
    }
}

void jw_obj_open(jw *w)
{
    if (w->need_comma)
        put(w, ",", 1);
    put(w, "{", 1);
    w->need_comma = 0;
}

void jw_key_obj_open(jw *w, const char *k)
{
    key(w, k);
    put(w, "{", 1);
    w->need_comma = 0;
}

void jw_obj_close(jw *w)
{
    put(w, "}", 1);
    w->need_comma = 1;
}

void jw_arr_open(jw *w, const char *k)
{
    key(w, k);
    put(w, "[", 1);
    w->need_comma = 0;
}

void jw_arr_close(jw *w)
{
    put(w, "]", 1);
    w->need_comma = 1;
}

void jw_key_strn(jw *w, const char *k, const char *val, size_t n)
{
    key(w, k);
    put(w, "\"", 1);
    jw_escape(w, val, n);
    put(w, "\"", 1);
}

void jw_key_str(jw *w, const char *k, const char *val) { jw_key_strn(w, k, val, strlen(val)); }

void jw_key_int(jw *w, const char *k, long long val)
{
    char tmp[FMT_U64_MAX + 1];
    size_t n = (size_t)(fmt_i64(tmp, (int64_t)val) - tmp);
    key(w, k);
    put(w, tmp, n);
}

void jw_key_uint(jw *w, const char *k, uint64_t val)
{
    char tmp[FMT_U64_MAX + 1];
    size_t n = (size_t)(fmt_u64(tmp, val) - tmp);
    key(w, k);
    put(w, tmp, n);
}

void jw_key_bool(jw *w, const char *k, int val)
{
    key(w, k);
    put(w, val ? "true" : "false", val ? 4 : 5);
}

void jw_key_double(jw *w, const char *k, double val)
{
    char tmp[64];
    int n;
    double th = val * 1000.0, r = val >= 0 && val < 1e12 ? (double)(uint64_t)(th + 0.5) : -1;
    if (r >= 0 && th - r < 1e-6 && r - th < 1e-6) {
        /* "%.3f" of a whole number of thousandths (a duration in ms of whole
         * microseconds: every request's log line) without the formatter */
        uint64_t t = (uint64_t)r;
        char *p = fmt_u64(tmp, t / 1000);
        *p++ = '.';
        p[0] = (char)('0' + t / 100 % 10);
        p[1] = (char)('0' + t / 10 % 10);
        p[2] = (char)('0' + t % 10);
        n = (int)(p + 3 - tmp);
    } else {
        n = snprintf(tmp, sizeof tmp, "%.3f", val);
    }
    key(w, k);
    put(w, tmp, (size_t)n);
}

void jw_raw_fields(jw *w, const char *fields)
{
    if (w->need_comma)
        put(w, ",", 1);
    put(w, fields, strlen(fields));
    w->need_comma = 1;
}

size_t jw_len(const jw *w) { return w->len; }
int jw_overflowed(const jw *w) { return w->overflow; }
