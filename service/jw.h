/* jw.h -- a small JSON writer into a caller-owned buffer (no allocation).
 *
 * Used for responses and log lines on the hot path.  Strings are escaped; on
 * overflow the writer stops writing and jw_overflowed() says so. */
#ifndef RL_JW_H
#define RL_JW_H

#include <stddef.h>
#include <stdint.h>

typedef struct jw {
    char *buf;
    size_t cap;
    size_t len;
    int need_comma;
    int overflow;
} jw;

void jw_init(jw *w, char *buf, size_t cap);
void jw_obj_open(jw *w);
void jw_key_obj_open(jw *w, const char *key); /* a member whose value is an object */
void jw_obj_close(jw *w);
void jw_arr_open(jw *w, const char *key);  /* key NULL inside an array */
void jw_arr_close(jw *w);
void jw_key_str(jw *w, const char *key, const char *val);
void jw_key_strn(jw *w, const char *key, const char *val, size_t n);
void jw_key_int(jw *w, const char *key, long long val);
void jw_key_uint(jw *w, const char *key, uint64_t val);
void jw_key_bool(jw *w, const char *key, int val);
void jw_key_double(jw *w, const char *key, double val);
/* Append already-rendered `"k":v,...` members into the open object. */
void jw_raw_fields(jw *w, const char *fields);
/* Append raw text (no escaping, no commas). */
void jw_raw(jw *w, const char *s);
/* Append s as an escaped JSON string body (no quotes). */
void jw_escape(jw *w, const char *s, size_t n);
size_t jw_len(const jw *w);
int jw_overflowed(const jw *w);

#endif
