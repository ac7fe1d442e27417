/* http.c -- a minimal blocking HTTP/1.1 keep-alive client for the chaos checker: enough
 * of RFC 9112 for libmicrohttpd's answers (Content-Length or chunked bodies). */
#include "http.h"
#include "judge.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IDLE_RECONNECT_NS (1000LL * 1000000) /* never reuse a connection idle this long */
#define MAX_RESPONSE (1u << 20)

int64_t http_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int http_client_init(http_client *c, const char *host, int port)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->addr.sin_family = AF_INET;
    c->addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &c->addr.sin_addr) != 1)
        return -1;
    c->cap = 16384;
    c->buf = malloc(c->cap);
    return c->buf ? 0 : -1;
}

void http_client_disconnect(http_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
    c->chunk_state = 0;
    c->dec_len = 0;
}

void http_client_free(http_client *c)
{
    if (!c)
        return;
    http_client_disconnect(c);
    free(c->buf);
    free(c->dec);
    free(c->line);
    c->buf = c->dec = c->line = NULL;
}

/* Waits for events on fd until deadline (ns).  1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - http_now_ns();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, (int)((left + 999999) / 1000000));
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

static int do_connect(http_client *c, int64_t deadline)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return CHAOS_ST_CONNERR;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&c->addr, sizeof c->addr) < 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return CHAOS_ST_CONNERR;
        }
        int w = wait_fd(fd, POLLOUT, deadline);
        int err = 0;
        socklen_t len = sizeof err;
        if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
            close(fd);
            return w == 0 ? CHAOS_ST_TIMEOUT : CHAOS_ST_CONNERR;
        }
    }
    c->fd = fd;
    c->len = 0;
    return 0;
}

/* Case-insensitive header lookup within [hdr, end); copies the trimmed value. */
static int header_value(const char *hdr, const char *end, const char *name, char *out, size_t outsz)
{
    size_t nl = strlen(name);
    const char *p = hdr;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if ((size_t)(eol - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t n = (size_t)(ve - v);
            if (n >= outsz)
                n = outsz - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 1;
        }
        p = eol + 1;
    }
    return 0;
}

/* Decodes a chunked body in place starting at body (avail bytes present).  Returns the
 * decoded length and sets *consumed once the last chunk and trailers are in; -1 if more
 * bytes are needed; -2 if malformed. */
static long dechunk(char *body, size_t avail, size_t *consumed)
{
    size_t in = 0, out = 0;
    for (;;) {
        char *eol = memchr(body + in, '\n', avail - in);
        if (!eol)
            return -1;
        char *end;
        unsigned long sz = strtoul(body + in, &end, 16);
        if (end == body + in)
            return -2;
        size_t data = (size_t)(eol - body) + 1;
        if (sz == 0) {
            /* trailers end with an empty line */
            size_t p = data;
            for (;;) {
                char *l = memchr(body + p, '\n', avail - p);
                if (!l)
                    return -1;
                size_t ll = (size_t)(l - (body + p));
                p = (size_t)(l - body) + 1;
                if (ll == 0 || (ll == 1 && body[p - 2] == '\r'))
                    break;
            }
            *consumed = p;
            return (long)out;
        }
        if (avail < data + sz + 2)
            return -1;
        memmove(body + out, body + data, sz);
        out += sz;
        in = data + sz;
        if (body[in] == '\r')
            in++;
        if (body[in] != '\n')
            return -2;
        in++;
        if (in > avail)
            return -1;
    }
}

/* ---- streamed answers ---- */

static int dec_put(http_client *c, const char *p, size_t n)
{
    if (c->dec_len + n + 1 > c->dec_cap) {
        size_t cap = c->dec_cap ? c->dec_cap : 4096;
        while (cap < c->dec_len + n + 1)
            cap *= 2;
        char *nb = cap <= MAX_RESPONSE ? realloc(c->dec, cap) : NULL;
        if (!nb)
            return -1;
        c->dec = nb;
        c->dec_cap = cap;
    }
    memcpy(c->dec + c->dec_len, p, n);
    c->dec_len += n;
    return 0;
}

/* Moves what the received bytes (c->buf) hold of the chunked body into c->dec, keeping
 * an incomplete size line for later.  0, or -1 when malformed (or too long). */
static int stream_decode(http_client *c)
{
    size_t in = 0;
    int rc = 0;
    while (in < c->len && c->chunk_state != 5) {
        char *p = c->buf + in;
        size_t avail = c->len - in;
        if (c->chunk_state == 2) {
            size_t n = avail < c->chunk_left ? avail : c->chunk_left;
            if (dec_put(c, p, n) < 0) {
                rc = -1;
                break;
            }
            in += n;
            c->chunk_left -= n;
            if (!c->chunk_left)
                c->chunk_state = 3;
            continue;
        }
        char *eol = memchr(p, '\n', avail);
        if (!eol)
            break; /* the rest of the line is still on its way */
        size_t ll = (size_t)(eol - p);
        if (ll && p[ll - 1] == '\r')
            ll--;
        in += (size_t)(eol - p) + 1;
        if (c->chunk_state == 1) {
            char *end;
            unsigned long sz = strtoul(p, &end, 16);
            if (end == p) {
                rc = -1;
                break;
            }
            c->chunk_left = sz;
            c->chunk_state = sz ? 2 : 4;
        } else if (c->chunk_state == 3) {
            if (ll) {
                rc = -1;
                break;
            }
            c->chunk_state = 1;
        } else if (!ll) { /* trailers: an empty line ends them, and the body */
            c->chunk_state = 5;
        }
    }
    memmove(c->buf, c->buf + in, c->len - in);
    c->len -= in;
    c->buf[c->len] = '\0';
    return rc;
}

int http_stream_line(http_client *c, int64_t deadline, int64_t *t_recv)
{
    for (;;) {
        if (stream_decode(c) < 0) {
            *t_recv = http_now_ns();
            http_client_disconnect(c);
            return CHAOS_ST_BADRESP;
        }
        char *nl = c->dec_len ? memchr(c->dec, '\n', c->dec_len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->dec);
            if (n + 1 > c->line_cap) {
                char *nb = realloc(c->line, n + 1);
                if (!nb) {
                    http_client_disconnect(c);
                    return CHAOS_ST_BADRESP;
                }
                c->line = nb;
                c->line_cap = n + 1;
            }
            memcpy(c->line, c->dec, n);
            c->line[n] = '\0';
            memmove(c->dec, nl + 1, c->dec_len - n - 1);
            c->dec_len -= n + 1;
            *t_recv = c->last_used; /* when the read that completed it returned */
            return 1;
        }
        if (c->chunk_state == 5)
            return 0;
        if (c->fd < 0 || c->chunk_state == 0)
            return CHAOS_ST_CONNERR;
        if (c->len + 1 >= c->cap) { /* a size line this long is no size line */
            *t_recv = http_now_ns();
            http_client_disconnect(c);
            return CHAOS_ST_BADRESP;
        }
        ssize_t got = recv(c->fd, c->buf + c->len, c->cap - 1 - c->len, MSG_DONTWAIT);
        if (got > 0) {
            c->len += (size_t)got;
            c->buf[c->len] = '\0';
            c->last_used = http_now_ns();
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        int w = got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? wait_fd(c->fd, POLLIN, deadline) : -1;
        if (w > 0)
            continue;
        *t_recv = http_now_ns();
        if (w == 0)
            return CHAOS_ST_TIMEOUT;
        http_client_disconnect(c); /* closed without the last chunk, or reset */
        return CHAOS_ST_CONNERR;
    }
}

static int exchange(http_client *c, const char *method, const char *path, const char *body,
                    const char *request_id, int timeout_ms, http_response *r, int64_t *t_send,
                    int64_t *t_recv, int stream)
{
    int64_t start = http_now_ns();
    int64_t deadline = start + (int64_t)timeout_ms * 1000000;
    int rc = 0;
    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    *t_send = *t_recv = start;

    if (c->fd >= 0 && start - c->last_used > IDLE_RECONNECT_NS)
        http_client_disconnect(c);
    if (c->fd < 0 && (rc = do_connect(c, deadline)) != 0) {
        *t_send = *t_recv = http_now_ns();
        return rc;
    }

    char req[4096];
    size_t blen = body ? strlen(body) : 0;
    int n;
    if (body)
        n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, request_id, blen);
    else
        n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: %s\r\n\r\n",
                     method, path, request_id);
    if (n < 0 || (size_t)n + blen >= sizeof req)
        return CHAOS_ST_BADRESP;
    if (body) {
        memcpy(req + n, body, blen);
        n += (int)blen;
    }

    c->len = 0;
    *t_send = http_now_ns();
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = send(c->fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int ww = wait_fd(c->fd, POLLOUT, deadline);
            if (ww > 0)
                continue;
            rc = ww == 0 ? CHAOS_ST_TIMEOUT : CHAOS_ST_CONNERR;
        } else {
            rc = CHAOS_ST_CONNERR;
        }
        goto fail;
    }

    size_t hdr_len = 0;
    long content_length = -1;
    int chunked = 0, close_after = 0, until_eof = 0;
    for (;;) {
        if (c->len + 1 >= c->cap) {
            if (c->cap >= MAX_RESPONSE) {
                rc = CHAOS_ST_BADRESP;
                goto fail;
            }
            char *nb = realloc(c->buf, c->cap * 2);
            if (!nb) {
                rc = CHAOS_ST_BADRESP;
                goto fail;
            }
            c->buf = nb;
            c->cap *= 2;
        }
        ssize_t got = recv(c->fd, c->buf + c->len, c->cap - 1 - c->len, MSG_DONTWAIT);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                rc = CHAOS_ST_CONNERR;
                goto fail;
            }
            int ww = wait_fd(c->fd, POLLIN, deadline);
            if (ww <= 0) {
                rc = ww == 0 ? CHAOS_ST_TIMEOUT : CHAOS_ST_CONNERR;
                goto fail;
            }
            continue;
        }
        if (got == 0 && !until_eof) {
            rc = CHAOS_ST_CONNERR; /* closed before a complete response */
            goto fail;
        }
        c->len += (size_t)got;
        c->buf[c->len] = '\0';

        if (!hdr_len) {
            char *e = strstr(c->buf, "\r\n\r\n");
            if (!e)
                continue;
            hdr_len = (size_t)(e - c->buf) + 4;
            int minor = 0, status = 0;
            if (sscanf(c->buf, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999) {
                rc = CHAOS_ST_BADRESP;
                goto fail;
            }
            r->status = status;
            char v[128];
            const char *hs = memchr(c->buf, '\n', hdr_len);
            const char *he = c->buf + hdr_len;
            if (header_value(hs, he, "Content-Length", v, sizeof v))
                content_length = strtol(v, NULL, 10);
            if (header_value(hs, he, "Transfer-Encoding", v, sizeof v) && strcasestr(v, "chunked"))
                chunked = 1;
            if (header_value(hs, he, "Connection", v, sizeof v))
                close_after = strcasestr(v, "close") != NULL;
            else
                close_after = minor == 0;
            if (header_value(hs, he, "Retry-After", v, sizeof v))
                r->retry_after = strtoll(v, NULL, 10);
            (void)header_value(hs, he, "X-Request-Id", r->request_id, sizeof r->request_id);
            (void)header_value(hs, he, "Content-Type", r->content_type, sizeof r->content_type);
            if (stream && chunked && status == 201) {
                /* a streamed hold: hand out its first line, keep the rest coming */
                memmove(c->buf, c->buf + hdr_len, c->len - hdr_len);
                c->len -= hdr_len;
                c->buf[c->len] = '\0';
                c->chunk_state = 1;
                c->last_used = http_now_ns();
                rc = http_stream_line(c, deadline, t_recv);
                if (rc == 1) {
                    r->body = c->line;
                    r->body_len = strlen(c->line);
                    return status;
                }
                if (rc == 0)
                    rc = CHAOS_ST_BADRESP; /* a stream without its grant */
                goto fail;
            }
            if (status == 204 || status == 304 || status < 200)
                content_length = 0;
            if (!chunked && content_length < 0) {
                until_eof = 1;
                close_after = 1;
            }
        }
        if (got == 0 && until_eof) {
            r->body = c->buf + hdr_len;
            r->body_len = c->len - hdr_len;
            break;
        }
        size_t avail = c->len - hdr_len;
        if (chunked) {
            size_t consumed = 0;
            long d = dechunk(c->buf + hdr_len, avail, &consumed);
            if (d == -2) {
                rc = CHAOS_ST_BADRESP;
                goto fail;
            }
            if (d >= 0) {
                r->body = c->buf + hdr_len;
                r->body_len = (size_t)d;
                r->body[d] = '\0';
                if (consumed != avail)
                    close_after = 1; /* stray bytes: don't trust the stream */
                break;
            }
        } else if (content_length >= 0 && avail >= (size_t)content_length) {
            r->body = c->buf + hdr_len;
            r->body_len = (size_t)content_length;
            if (avail != (size_t)content_length)
                close_after = 1;
            r->body[content_length] = '\0';
            break;
        }
    }
    *t_recv = http_now_ns();
    c->last_used = *t_recv;
    if (close_after) {
        /* keep the body readable: it lives in buf, which disconnect does not free */
        close(c->fd);
        c->fd = -1;
    }
    return r->status;

fail:
    *t_recv = http_now_ns();
    http_client_disconnect(c);
    return rc;
}

int http_request(http_client *c, const char *method, const char *path, const char *body,
                 const char *request_id, int timeout_ms, http_response *r, int64_t *t_send,
                 int64_t *t_recv)
{
    return exchange(c, method, path, body, request_id, timeout_ms, r, t_send, t_recv, 0);
}

int http_stream_open(http_client *c, const char *method, const char *path, const char *body,
                     const char *request_id, int timeout_ms, http_response *r, int64_t *t_send, int64_t *t_recv)
{
    return exchange(c, method, path, body, request_id, timeout_ms, r, t_send, t_recv, 1);
}
