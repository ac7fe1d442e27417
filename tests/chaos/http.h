/* http.h -- a minimal blocking HTTP/1.1 client over raw sockets with keep-alive, for the
 * chaos checker's client threads.  One http_client per thread; never shared. */
#ifndef CHAOS_HTTP_H
#define CHAOS_HTTP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

typedef struct http_client {
    struct sockaddr_in addr;
    int fd;            /* -1 when not connected */
    int64_t last_used; /* ns of the last completed exchange, for the idle reconnect */
    char *buf;         /* receive buffer */
    size_t cap, len;
    /* a streamed answer (http_stream_open): the chunked body decoded as it comes */
    int chunk_state;   /* 0 none; 1 size line, 2 chunk data, 3 CRLF after it, 4 trailers, 5 done */
    size_t chunk_left; /* data bytes left in the current chunk */
    char *dec;         /* decoded bytes not yet handed out as lines */
    size_t dec_len, dec_cap;
    char *line;        /* the last line handed out, NUL-terminated (no newline) */
    size_t line_cap;
} http_client;

typedef struct http_response {
    int status;
    int64_t retry_after;   /* Retry-After header in seconds; -1 if absent */
    char request_id[80];   /* X-Request-Id echoed back; "" if absent */
    char content_type[64]; /* Content-Type; "" if absent */
    char *body;            /* NUL-terminated; points into the client's buffer, valid until next call */
    size_t body_len;
} http_response;

/* Monotonic clock in nanoseconds. */
int64_t http_now_ns(void);

/* Prepares c for 127.0.0.1-style host:port (IPv4 literal).  0, or -1 on a bad address or
 * allocation failure. */
int http_client_init(http_client *c, const char *host, int port);
/* Closes the connection (if any) and frees the buffer.  NULL is a no-op. */
void http_client_free(http_client *c);
/* Closes the connection only; the next request reconnects. */
void http_client_disconnect(http_client *c);

/* Sends one request and reads the whole response within timeout_ms (connect included).
 * body may be NULL; request_id is sent as X-Request-Id.  *t_send is set just before the
 * first byte is written, *t_recv just after the last byte is read (or when giving up).
 * Returns the HTTP status (> 0) with *r filled, or CHAOS_ST_TIMEOUT / CHAOS_ST_CONNERR /
 * CHAOS_ST_BADRESP (judge.h); after any failure the connection is closed. */
int http_request(http_client *c, const char *method, const char *path, const char *body,
                 const char *request_id, int timeout_ms, http_response *r, int64_t *t_send,
                 int64_t *t_recv);

/* A streamed answer (hold=stream): as http_request, but a 201 with a chunked body
 * returns as soon as its first line is in (r->body is that line, without the newline;
 * *t_recv when it was read); its later lines come from http_stream_line().  Any other
 * answer is read whole, as by http_request.  The connection then belongs to the stream:
 * end it with http_client_disconnect(). */
int http_stream_open(http_client *c, const char *method, const char *path, const char *body,
                     const char *request_id, int timeout_ms, http_response *r, int64_t *t_send, int64_t *t_recv);

/* The stream's next line, waiting until deadline (ns): 1 with c->line set (*t_recv when
 * its last byte was read), 0 when the stream ended properly (the last chunk), or
 * CHAOS_ST_TIMEOUT (nothing more by the deadline; the stream stays open) /
 * CHAOS_ST_CONNERR (closed or reset without the last chunk) / CHAOS_ST_BADRESP (not
 * chunked as HTTP/1.1 says; the connection is closed after these two). */
int http_stream_line(http_client *c, int64_t deadline, int64_t *t_recv);

#endif
