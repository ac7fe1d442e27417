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
} http_client;

typedef struct http_response {
    int status;
    int64_t retry_after;   /* Retry-After header in seconds; -1 if absent */
    char request_id[80];   /* X-Request-Id echoed back; "" if absent */
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

#endif
