/* query.c -- the query parameters of each action and the check of a query string (see
 * query.h). */
#include "query.h"

#include <stdio.h>
#include <string.h>

#include "route.h"

/* owner and hold where the operation refuses them: api.c answers them with their own
 * error (invalid_owner, invalid_hold: "only with POST /locks/{name}"). */
static const char *const p_acquire[] = {"ttl_ms", "wait_ms", "lease", "owner", "hold", "mode",
                                        "reentrant", "permits", "lock_delay_ms", "max_hold_ms",
                                        NULL};
static const char *const p_release[] = {"lease", "force", "owner", "hold", NULL};
static const char *const p_extend[] = {"lease", "ttl_ms", "owner", "hold", NULL};
static const char *const p_inspect[] = {"index", "wait_ms", "hold", "lease", "token", NULL};
/* A semaphore's: mode, reentrant, lock_delay_ms and max_hold_ms, index and force answer
 * their own errors there. */
static const char *const p_sem_acquire[] = {"permits", "ttl_ms", "wait_ms", "lease", "owner",
                                            "hold", "mode", "reentrant", "lock_delay_ms",
                                            "max_hold_ms", NULL};
static const char *const p_sem_inspect[] = {"index", "hold", NULL};
static const char *const p_list[] = {"prefix", "limit", NULL};
static const char *const p_mrelease[] = {"lease", "owner", NULL};

const char *const *query_keys(int action)
{
    switch (action) {
    case ROUTE_A_ACQUIRE:
    case ROUTE_A_MACQUIRE:
        return p_acquire;
    case ROUTE_A_RELEASE:
        return p_release;
    case ROUTE_A_EXTEND:
        return p_extend;
    case ROUTE_A_INSPECT:
        return p_inspect;
    case ROUTE_A_SEM_ACQUIRE:
        return p_sem_acquire;
    case ROUTE_A_SEM_RELEASE:
        return p_release;
    case ROUTE_A_SEM_EXTEND:
        return p_extend;
    case ROUTE_A_SEM_INSPECT:
        return p_sem_inspect;
    case ROUTE_A_LIST:
        return p_list;
    case ROUTE_A_MRELEASE:
        return p_mrelease;
    default:
        return NULL;
    }
}

/* "a, b, c" of the list (cut to cap). */
static void list_of(const char *const *ps, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; ps[k] && len < cap; k++) {
        int n = snprintf(buf + len, cap - len, "%s%s", k ? ", " : "", ps[k]);
        if (n < 0)
            return;
        len += (size_t)n;
    }
}

static rl_err fail(query_seen *q, char *msg, size_t msglen, const char *fmt, const char *key,
                   const char *more)
{
    if (q->err == RL_OK) {
        snprintf(msg, msglen, fmt, key, more);
        q->err = RL_E_INVALID_QUERY;
    }
    return RL_E_INVALID_QUERY;
}

rl_err query_accept(query_seen *q, int action, const char *key, const char *value, char *msg,
                    size_t msglen)
{
    const char *const *ps = query_keys(action);
    if (!ps)
        return RL_OK;
    for (size_t k = 0; ps[k]; k++) {
        if (strcmp(key, ps[k]) != 0)
            continue;
        if (q->mask & (1u << k))
            return fail(q, msg, msglen, "query parameter '%.64s' is given more than once%s", key, "");
        q->mask |= 1u << k;
        if (!value)
            return fail(q, msg, msglen, "query parameter '%.64s' has no value (%s=...)", key, key);
        return RL_OK;
    }
    char expected[128];
    list_of(ps, expected, sizeof expected);
    return fail(q, msg, msglen, "unknown query parameter '%.64s' (expected %s)", key, expected);
}
