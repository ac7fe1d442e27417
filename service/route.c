/* route.c -- the table of routes and methods, its lookups, and the percent-decoding of
 * URLs (see route.h). */
#include "route.h"

#include <string.h>

static const route route_table[ROUTE__COUNT] = {
    [ROUTE_LOCK] = {ROUTE_LOCK, "/locks/", 1, "/locks/{name}", 1, 0,
                    {{ROUTE_M_GET, ROUTE_A_INSPECT}, {ROUTE_M_POST, ROUTE_A_ACQUIRE},
                     {ROUTE_M_PATCH, ROUTE_A_EXTEND}, {ROUTE_M_DELETE, ROUTE_A_RELEASE}}},
    [ROUTE_HEALTHZ] = {ROUTE_HEALTHZ, "/healthz", 0, "/healthz", 0, 0, {{ROUTE_M_GET, ROUTE_A_HEALTHZ}}},
    [ROUTE_READYZ] = {ROUTE_READYZ, "/readyz", 0, "/readyz", 0, 1, {{ROUTE_M_GET, ROUTE_A_READYZ}}},
    [ROUTE_METRICS] = {ROUTE_METRICS, "/metrics", 0, "/metrics", 0, 1, {{ROUTE_M_GET, ROUTE_A_METRICS}}},
    [ROUTE_OTHER] = {ROUTE_OTHER, NULL, 0, "other", 0, 0, {{0, ROUTE_A_NONE}}},
    [ROUTE_LOCKS] = {ROUTE_LOCKS, "/locks", 0, "/locks", 1, 0,
                     {{ROUTE_M_GET, ROUTE_A_LIST}, {ROUTE_M_POST, ROUTE_A_MACQUIRE},
                      {ROUTE_M_DELETE, ROUTE_A_MRELEASE}}},
    [ROUTE_SEM] = {ROUTE_SEM, "/semaphores/", 1, "/semaphores/{name}", 1, 0,
                   {{ROUTE_M_GET, ROUTE_A_SEM_INSPECT}, {ROUTE_M_POST, ROUTE_A_SEM_ACQUIRE},
                    {ROUTE_M_PATCH, ROUTE_A_SEM_EXTEND}, {ROUTE_M_DELETE, ROUTE_A_SEM_RELEASE}}},
};

static const char *const route_methods[ROUTE_M__COUNT] = {
    [ROUTE_M_POST] = "POST", [ROUTE_M_DELETE] = "DELETE", [ROUTE_M_PATCH] = "PATCH",
    [ROUTE_M_GET] = "GET", [ROUTE_M_HEAD] = "HEAD", [ROUTE_M_OTHER] = "other",
};

const route *route_match(const char *url, const char **name, size_t *name_len)
{
    *name = "";
    *name_len = 0;
    for (size_t i = 0; i < ROUTE__COUNT; i++) {
        const route *rt = &route_table[i];
        if (!rt->path)
            continue;
        size_t pl = strlen(rt->path);
        if (rt->prefix ? strncmp(url, rt->path, pl) == 0 : strcmp(url, rt->path) == 0) {
            if (rt->prefix) {
                *name = url + pl;
                *name_len = strlen(*name);
            }
            return rt;
        }
    }
    return NULL;
}

const route *route_get(int id)
{
    return id >= 0 && id < ROUTE__COUNT ? &route_table[id] : NULL;
}

int route_method_id(const char *method)
{
    for (int m = 0; m < ROUTE_M_OTHER; m++)
        if (strcmp(method, route_methods[m]) == 0)
            return m;
    return ROUTE_M_OTHER;
}

const char *route_method_name(int method)
{
    return method >= 0 && method < ROUTE_M__COUNT ? route_methods[method] : "other";
}

int route_action(const route *rt, int method)
{
    if (method == ROUTE_M_HEAD)
        method = ROUTE_M_GET;
    for (int k = 0; k < ROUTE_MAX_METHODS && rt->methods[k].action != ROUTE_A_NONE; k++)
        if (rt->methods[k].method == method)
            return rt->methods[k].action;
    return ROUTE_A_NONE;
}

size_t route_allow(const route *rt, char *buf, size_t cap)
{
    size_t len = 0;
    if (!cap)
        return 0;
    buf[0] = '\0';
    for (int k = 0; k < ROUTE_MAX_METHODS && rt->methods[k].action != ROUTE_A_NONE; k++) {
        int get = rt->methods[k].method == ROUTE_M_GET;
        const char *parts[4] = {k ? ", " : "", route_method_name(rt->methods[k].method), ", ", "HEAD"};
        for (int p = 0; p < (get ? 4 : 2); p++) {
            size_t n = strlen(parts[p]);
            if (len + n >= cap)
                return len;
            memcpy(buf + len, parts[p], n + 1);
            len += n;
        }
    }
    return len;
}

size_t route_unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '%' && p[1] && p[2]) {
            int hi = p[1], lo = p[2], v = 0, ok = 1;
            for (int k = 0; k < 2 && ok; k++) {
                int ch = k ? lo : hi;
                v <<= 4;
                if (ch >= '0' && ch <= '9') v |= ch - '0';
                else if (ch >= 'a' && ch <= 'f') v |= ch - 'a' + 10;
                else if (ch >= 'A' && ch <= 'F') v |= ch - 'A' + 10;
                else ok = 0;
            }
            if (ok) {
                *o++ = v ? (char)v : (char)0x7f;
                p += 2;
                continue;
            }
        }
        *o++ = *p;
    }
    *o = '\0';
    return (size_t)(o - s);
}
