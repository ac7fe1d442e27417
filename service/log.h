/* log.h -- log lines for people and for log shippers: JSON lines or text on stderr.
 *
 * A logger is owned by one thread (each worker has its own and buffers lines until
 * the end of its loop pass); never log a lease or a password. */
#ifndef RL_LOG_H
#define RL_LOG_H

#include <stddef.h>

/* Levels (named apart from <syslog.h>'s LOG_INFO, LOG_DEBUG...: both headers can be included). */
enum { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN = 1, LOG_LEVEL_INFO = 2, LOG_LEVEL_DEBUG = 3 };

typedef struct log_ctx {
    int json;         /* 1: JSON lines, 0: text */
    int level;        /* lines above this level are dropped */
    int buffered;     /* 1: keep lines until log_flush() */
    size_t len;
    char buf[16384];
    long long sec;    /* the second stamp[] was made for (-1: none yet) */
    char stamp[72];   /* "YYYY-MM-DDTHH:MM:SS." of that second: made once a second */
} log_ctx;

void log_init(log_ctx *lg, int json, int level, int buffered);

/* Parse a level name ("error", "warn", "info", "debug").  Returns -1 if unknown. */
int log_level_parse(const char *s);

/* One event line: msg plus extra pre-rendered JSON fields (`"k":v,...` or NULL).
 * In text mode the fields are appended as they are. */
void log_event(log_ctx *lg, int level, const char *msg, const char *fields_json);

/* printf-style message with no extra fields. */
void log_msg(log_ctx *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Write buffered lines to stderr. */
void log_flush(log_ctx *lg);

#endif
