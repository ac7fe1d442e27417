/* trace.h -- the W3C Trace Context `traceparent` header (version 00, and later versions
 * read as 00 as the recommendation says): validated, so that a request's log line can
 * carry the trace it belongs to.  An invalid header is ignored, never an error.  Pure. */
#ifndef RL_TRACE_H
#define RL_TRACE_H

#define TRACE_ID_LEN 32     /* hex digits of a trace-id */
#define TRACE_PARENT_LEN 16 /* hex digits of a parent-id (span id) */

typedef struct trace_parent {
    char trace_id[TRACE_ID_LEN + 1];
    char parent_id[TRACE_PARENT_LEN + 1];
    unsigned flags;         /* trace-flags (bit 0: sampled) */
} trace_parent;

/* Parse a traceparent value (NULL: none) into *out.  0 if it is valid: lowercase hex
 * fields "vv-<32>-<16>-<2>", the version not ff, the trace-id and the parent-id not all
 * zeros, exactly 55 characters for version 00 (a later version may go on after a
 * '-').  -1 otherwise (*out is then empty strings). */
int trace_parse(const char *value, trace_parent *out);

#endif
