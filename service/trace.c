/* trace.c -- W3C traceparent parsing (see trace.h). */
#include "trace.h"

#include <string.h>

/* n lowercase hex digits at s; whether they are all zeros in *zero. */
static int hex_field(const char *s, size_t n, int *zero)
{
    *zero = 1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
        if (c != '0')
            *zero = 0;
    }
    return 1;
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int trace_parse(const char *v, trace_parent *out)
{
    out->trace_id[0] = out->parent_id[0] = '\0';
    out->flags = 0;
    if (!v)
        return -1;
    size_t len = strlen(v);
    int zero;
    /* vv-tttttttttttttttttttttttttttttttt-pppppppppppppppp-ff */
    if (len < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-')
        return -1;
    if (!hex_field(v, 2, &zero) || (v[0] == 'f' && v[1] == 'f'))
        return -1;
    int v00 = v[0] == '0' && v[1] == '0';
    if (v00 ? len != 55 : (len > 55 && v[55] != '-'))
        return -1;
    if (!hex_field(v + 3, TRACE_ID_LEN, &zero) || zero)
        return -1;
    if (!hex_field(v + 36, TRACE_PARENT_LEN, &zero) || zero)
        return -1;
    if (!hex_field(v + 53, 2, &zero))
        return -1;
    memcpy(out->trace_id, v + 3, TRACE_ID_LEN);
    out->trace_id[TRACE_ID_LEN] = '\0';
    memcpy(out->parent_id, v + 36, TRACE_PARENT_LEN);
    out->parent_id[TRACE_PARENT_LEN] = '\0';
    out->flags = (unsigned)(hexval(v[53]) * 16 + hexval(v[54]));
    return 0;
}
