/* client.h -- the redlock CLI's HTTP client (cli_http, cli_req; the service's own HTTP
 * server is service/http.c): JSON requests to /locks/{name} over libcurl,
 * driven by one curl multi handle so that a caller can wait on a request and on its own
 * file descriptor (a signalfd) in the same poll, single-threaded; and duplex holds (lines
 * both ways over an upgraded connection), waited on in that same poll.  Every request has
 * a whole-call bound (resolving, connecting, sending, receiving together: libcurl's
 * CURLOPT_TIMEOUT_MS); a duplex hold's exchange after connecting is bounded by its
 * caller's clock.
 *
 * Requests never carry the lease in the URL (it goes in the JSON body) and error texts
 * never contain it. */
#ifndef RLC_CLIENT_H
#define RLC_CLIENT_H

#include <jansson.h>

typedef struct cli_http cli_http;
typedef struct cli_req cli_req;

/* A client for base_url ("http://host:port" or "https://...", trailing '/' allowed)
 * sending "Authorization: Bearer <token>" when token is not NULL, and verifying an https
 * service against the CA certificates in cacert (a PEM file) when it is not NULL (else
 * libcurl's default bundle).  The strings are copied.  Call curl_global_init() first.
 * Returns NULL with a message in err on failure (an https URL and a cacert that cannot
 * be read included). */
cli_http *cli_http_new(const char *base_url, const char *token, const char *cacert, char *err,
                       size_t errlen);

/* Cancels every request still in flight (their cli_req stay valid until freed).
 * cli_http_free(NULL) is a no-op. */
void cli_http_free(cli_http *h);

/* The base URL, for messages. */
const char *cli_http_url(const cli_http *h);

/* Send the requests started from now on to /<collection>/<name> ("semaphores"; a static
 * string, borrowed) instead of /locks/<name>; NULL goes back to /locks. */
void cli_http_set_collection(cli_http *h, const char *collection);

/* Start METHOD /locks/<name> (name percent-encoded) with body serialized now (body may
 * be NULL: no body; it is borrowed).  timeout_ms bounds the whole request (>= 1).
 * Returns the request, or NULL on allocation/curl failure with a message in err.
 * The request progresses inside cli_http_poll(). */
cli_req *cli_http_start(cli_http *h, const char *method, const char *name, const json_t *body,
                        long timeout_ms, char *err, size_t errlen);

/* Start METHOD /locks/<name>?<query> (query: already encoded), no body; otherwise as
 * cli_http_start. */
cli_req *cli_http_start_query(cli_http *h, const char *method, const char *name,
                              const char *query, long timeout_ms, char *err, size_t errlen);

/* Start a duplex hold (docs/DESIGN.md section 10): POST /<collection>/<name>?<query>
 * (query already encoded, may be NULL) with body, Connection: Upgrade and Upgrade:
 * redlock-hold.  connect_timeout_ms bounds setting up the connection (resolving,
 * connecting, TLS) as one call; the rest is bounded by the caller's clock.  Its answer:
 * cli_req_status_now() once the head has come; a 101 then carries lines both ways
 * (cli_req_next_line, cli_req_send_line) until either side ends it; any other answer ends
 * as a request does (a 201 with a streamed body, from a service without duplex holds, is
 * taken line by line too).  cli_req_free() closes the connection.
 * NULL as cli_http_start. */
cli_req *cli_http_start_duplex(cli_http *h, const char *name, const char *query,
                               const json_t *body, long connect_timeout_ms, char *err,
                               size_t errlen);

/* A duplex hold that was upgraded (101): send line and a newline, at once or in the next
 * polls, in order, without waiting.  Returns 0, or -1 (not upgraded, ended, out of
 * memory). */
int cli_req_send_line(cli_req *r, const char *line);

/* 1 if r is a duplex hold whose answer was 101 (lines both ways). */
int cli_req_upgraded(const cli_req *r);

/* Let requests progress: wait up to timeout_ms (0: just progress, no wait) for network
 * activity or for extra_fd (-1: none) to become readable.  Sets *extra_ready (may be
 * NULL) to 1 when extra_fd is readable.  Returns 0, or -1 on a curl multi error. */
int cli_http_poll(cli_http *h, int extra_fd, int timeout_ms, int *extra_ready);

/* Start a request and poll until it ends (no extra fd).  NULL as cli_http_start. */
cli_req *cli_http_do(cli_http *h, const char *method, const char *name, const json_t *body,
                     long timeout_ms, char *err, size_t errlen);

/* 1 once the request has ended (answered, failed or timed out). */
int cli_req_done(const cli_req *r);

/* The socket of a request still in flight (a stream's connection), or -1. */
int cli_req_socket(const cli_req *r);

/* The HTTP status of a request still in flight: 0 until the answer's status line has
 * come; once done, cli_req_status(). */
long cli_req_status_now(const cli_req *r);

/* A streamed request: take the next complete line of its answer.  Returns 0 if no
 * complete line has come yet; else 1 with *line the line parsed as JSON (a new
 * reference; NULL if it is not JSON). */
int cli_req_next_line(cli_req *r, json_t **line);

/* The HTTP status, 0 when no answer came (see cli_req_error). */
long cli_req_status(const cli_req *r);

/* The answer's body parsed as JSON (borrowed; NULL if none or not JSON). */
json_t *cli_req_json(const cli_req *r);

/* The answer's body as received, NUL-terminated (borrowed, "" if none). */
const char *cli_req_body(const cli_req *r);

/* The transport error when status is 0 ("Couldn't connect to server: ..."), else "". */
const char *cli_req_error(const cli_req *r);

/* 1 if the transport failure was a timeout. */
int cli_req_timed_out(const cli_req *r);

/* The "error" code of a JSON error body ("lock_held"), or "" if none. */
const char *cli_req_error_code(const cli_req *r);

/* The "message" of a JSON error body, or "". */
const char *cli_req_error_message(const cli_req *r);

/* Cancel the request if it is still in flight, and free it.  NULL is a no-op. */
void cli_req_free(cli_req *r);

#endif
