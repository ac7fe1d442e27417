/* log.c -- JSON-lines / text logging with per-thread buffers (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jw.h"

static const char *level_names[] = {"error", "warn", "info", "debug"};

void log_init(log_ctx *lg, int json, int level, int buffered)
{
    lg->json = json;
    lg->level = level;
    lg->buffered = buffered;
    lg->len = 0;
    lg->sec = -1;
}

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return LOG_LEVEL_WARN;
    return -1;
}

void log_flush(log_ctx *lg)
{
    size_t off = 0;
    while (off < lg->len) {
        ssize_t n = write(STDERR_FILENO, lg->buf + off, lg->len - off);
        if (n <= 0)
            break; /* stderr gone: nothing sensible left to do with the lines */
        off += (size_t)n;
    }
    lg->len = 0;
}

static void append_line(log_ctx *lg, const char *line, size_t n)
{
    if (lg->len + n > sizeof(lg->buf))
        log_flush(lg);
    if (n > sizeof(lg->buf)) {
        n = sizeof(lg->buf);
    }
    memcpy(lg->buf + lg->len, line, n);
    lg->len += n;
    if (!lg->buffered)
        log_flush(lg);
}

void log_event(log_ctx *lg, int level, const char *msg, const char *fields_json)
{
    if (level > lg->level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (lg->sec != (long long)ts.tv_sec) {
        /* the date and time to the second, once a second (gmtime_r and the formatter
         * cost more than the rest of a request's line) */
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(lg->stamp, sizeof lg->stamp, "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        lg->sec = (long long)ts.tv_sec;
    }
    char when[96];
    size_t sl = strlen(lg->stamp); /* < 72: room for the milliseconds and 'Z' */
    long ms = ts.tv_nsec / 1000000;
    memcpy(when, lg->stamp, sl);
    when[sl] = (char)('0' + ms / 100);
    when[sl + 1] = (char)('0' + ms / 10 % 10);
    when[sl + 2] = (char)('0' + ms % 10);
    when[sl + 3] = 'Z';
    when[sl + 4] = '\0';
    char line[4096];
    jw w;
    jw_init(&w, line, sizeof line - 1);
    if (lg->json) {
        jw_obj_open(&w);
        jw_key_str(&w, "time", when);
        jw_key_str(&w, "level", level_names[level]);
        jw_key_str(&w, "msg", msg);
        if (fields_json && *fields_json)
            jw_raw_fields(&w, fields_json);
        jw_obj_close(&w);
    } else {
        jw_raw(&w, when);
        jw_raw(&w, " ");
        jw_raw(&w, level_names[level]);
        jw_raw(&w, " ");
        jw_raw(&w, msg);
        if (fields_json && *fields_json) {
            jw_raw(&w, " ");
            jw_raw(&w, fields_json);
        }
    }
    size_t n = jw_len(&w);
    if (jw_overflowed(&w)) {
        /* Never emit a half line: fall back to the essentials. */
        n = (size_t)snprintf(line, sizeof line - 1, lg->json
                                 ? "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":\"(log line too long)\"}"
                                 : "%s %s (log line too long)",
                             when, level_names[level]);
    }
    line[n++] = '\n';
    append_line(lg, line, n);
}

void log_msg(log_ctx *lg, int level, const char *fmt, ...)
{
    if (level > lg->level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_event(lg, level, msg, NULL);
}
