/* client.c -- the redlock CLI's HTTP client: JSON requests to redlockd over one libcurl
 * multi handle (see client.h). */
#include "cli/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <unistd.h>

#include <curl/curl.h>

#include "version.h"

/* Answers larger than this are cut off and the request fails: redlockd's are < 1 KiB. */
#define RESPONSE_MAX (1024 * 1024)
#define CONNECT_TIMEOUT_MS 5000L
/* A duplex hold's answer head larger than this is refused (redlockd's are < 1 KiB). */
#define HEAD_MAX (16 * 1024)
/* Descriptors one poll waits on besides curl's own. */
#define WAIT_FDS_MAX 32

/* The states of a duplex hold (cli_http_start_duplex), in order. */
enum { DX_CONNECTING = 1, DX_SENDING, DX_HEAD, DX_BODY, DX_LINES };
/* The chunked decoder's states (a one-way stream from a service without duplex holds). */
enum { CH_SIZE = 0, CH_DATA, CH_CRLF, CH_END };

struct cli_http {
    CURLM *multi;
    char *base_url;     /* without trailing '/' */
    char *auth_header;  /* "Authorization: Bearer ..." or NULL */
    char *cacert;       /* CURLOPT_CAINFO, or NULL: libcurl's default */
    cli_req *inflight;  /* requests added to multi, linked by next */
    const char *collection; /* "semaphores", or NULL for "locks" (static string) */
};

struct cli_req {
    cli_http *owner;    /* NULL once detached (done or owner freed) */
    cli_req *next;      /* in owner->inflight */
    CURL *easy;
    struct curl_slist *headers;
    char *url;
    char *body;         /* request body or NULL */
    char *resp;         /* response body, NUL-terminated */
    size_t resp_len;
    int stream;         /* the answer is read line by line (a duplex hold) */
    size_t resp_off;    /* stream: bytes of resp already taken as lines */
    int done;
    int timed_out;
    long status;
    json_t *json;
    char errbuf[CURL_ERROR_SIZE];
    char error[CURL_ERROR_SIZE + 64];
    /* A duplex hold (0 otherwise): the connection is set up by libcurl (CURLOPT_CONNECT_ONLY,
     * in a multi of its own, whose connection cache holds that connection alone, so that
     * no other transfer's pruning or cache limit can close it), the HTTP exchange and the
     * lines both ways go through curl_easy_send/curl_easy_recv. */
    int duplex;         /* DX_* */
    CURLM *dmulti;
    char *out;          /* bytes to send: the request, then lines */
    size_t out_len, out_off;
    char *head;         /* the answer's head until its blank line */
    size_t head_len;
    long clen;          /* Content-Length of an answer that is not 101, -1: none */
    size_t body_got;
    int chunked;        /* Transfer-Encoding: chunked */
    int ch_state;       /* CH_* */
    size_t ch_left;     /* CH_DATA: bytes left in the chunk */
    char ch_line[40];   /* CH_SIZE: the size line so far */
    size_t ch_line_len;
};

static int dx_send(cli_req *r);

/* File descriptors scanned for ones that curl_multi_init() opened. */
#define FD_SCAN 1024

/* Mark close-on-exec every descriptor below FD_SCAN that is open now but was not in
 * before[]: curl_multi_init() opens a socketpair (for curl_multi_wakeup) without
 * FD_CLOEXEC, which would otherwise leak into the command `redlock run` executes. */
static void cloexec_new_fds(const unsigned char *before)
{
    for (int fd = 0; fd < FD_SCAN; fd++) {
        int flags;
        if (before[fd])
            continue;
        flags = fcntl(fd, F_GETFD);
        if (flags >= 0 && !(flags & FD_CLOEXEC))
            (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC); /* best effort */
    }
}

cli_http *cli_http_new(const char *base_url, const char *token, const char *cacert, char *err,
                       size_t errlen)
{
    cli_http *h = NULL;
    unsigned char open_before[FD_SCAN];
    size_t n;

    if (base_url == NULL || base_url[0] == '\0') {
        snprintf(err, errlen, "empty service URL");
        return NULL;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        goto oom;
    h->base_url = strdup(base_url);
    if (h->base_url == NULL)
        goto oom;
    n = strlen(h->base_url);
    while (n > 0 && h->base_url[n - 1] == '/')
        h->base_url[--n] = '\0';
    if (token != NULL) {
        size_t len = strlen(token) + sizeof("Authorization: Bearer ");
        h->auth_header = malloc(len);
        if (h->auth_header == NULL)
            goto oom;
        snprintf(h->auth_header, len, "Authorization: Bearer %s", token);
    }
    if (cacert != NULL) {
        /* Only an https service is verified: a bad SSL_CERT_FILE in the environment does
         * not stop plain-HTTP use. */
        if (strncasecmp(h->base_url, "https://", 8) == 0 && access(cacert, R_OK) != 0) {
            snprintf(err, errlen, "CA certificates '%s' (--cacert, CURL_CA_BUNDLE or "
                     "SSL_CERT_FILE): %s", cacert, strerror(errno));
            goto fail;
        }
        h->cacert = strdup(cacert);
        if (h->cacert == NULL)
            goto oom;
    }
    for (int fd = 0; fd < FD_SCAN; fd++)
        open_before[fd] = fcntl(fd, F_GETFD) >= 0;
    h->multi = curl_multi_init();
    cloexec_new_fds(open_before);
    if (h->multi == NULL) {
        snprintf(err, errlen, "curl_multi_init failed");
        goto fail;
    }
    return h;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    cli_http_free(h);
    return NULL;
}

const char *cli_http_url(const cli_http *h) { return h->base_url; }

void cli_http_set_collection(cli_http *h, const char *collection)
{
    h->collection = collection;
}

/* Take r off its owner's in-flight list and out of the shared multi handle (a duplex
 * hold stays in its own multi until freed: its connection lives there). */
static void req_detach(cli_req *r)
{
    cli_http *h = r->owner;

    if (h == NULL)
        return;
    for (cli_req **pp = &h->inflight; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    r->next = NULL;
    /* Removing an easy handle from a multi cannot fail for a handle that is in it. */
    if (!r->duplex)
        (void)curl_multi_remove_handle(h->multi, r->easy);
    r->owner = NULL;
}

void cli_http_free(cli_http *h)
{
    if (h == NULL)
        return;
    while (h->inflight != NULL) {
        cli_req *r = h->inflight;
        req_detach(r);
        if (!r->done) {
            r->done = 1;
            snprintf(r->error, sizeof(r->error), "request cancelled");
        }
    }
    if (h->multi != NULL)
        (void)curl_multi_cleanup(h->multi);
    if (h->auth_header != NULL) {
        /* The token is a credential: do not leave it in freed memory. */
        memset(h->auth_header, 0, strlen(h->auth_header));
        free(h->auth_header);
    }
    free(h->base_url);
    free(h->cacert);
    free(h);
}

/* Append n bytes to r's answer (a stream drops the lines already taken first).  Returns
 * 0, or -1 past RESPONSE_MAX or out of memory. */
static int resp_append(cli_req *r, const char *ptr, size_t n)
{
    char *p;

    if (r->resp_off > 0) { /* a stream: drop the lines already taken */
        memmove(r->resp, r->resp + r->resp_off, r->resp_len - r->resp_off + 1);
        r->resp_len -= r->resp_off;
        r->resp_off = 0;
    }
    if (n > RESPONSE_MAX || r->resp_len + n > RESPONSE_MAX)
        return -1;
    p = realloc(r->resp, r->resp_len + n + 1);
    if (p == NULL)
        return -1;
    r->resp = p;
    memcpy(r->resp + r->resp_len, ptr, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    size_t n = size * nmemb;

    /* 0 makes curl fail the transfer with CURLE_WRITE_ERROR. */
    return resp_append(userdata, ptr, n) == 0 ? n : 0;
}

/* Sockets must not leak into the command that `redlock run` executes. */
static int on_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    int flags = fcntl(fd, F_GETFD);

    (void)clientp;
    (void)purpose;
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0)
        return CURL_SOCKOPT_ERROR;
    return CURL_SOCKOPT_OK;
}

static int add_header(cli_req *r, const char *line)
{
    struct curl_slist *l = curl_slist_append(r->headers, line);
    if (l == NULL)
        return -1;
    r->headers = l;
    return 0;
}

/* Set up r->easy for the request.  Returns 0 or -1 with a message in err. */
static int req_setup(cli_http *h, cli_req *r, const char *method, const char *name,
                     const char *query, const json_t *body, long timeout_ms, char *err,
                     size_t errlen)
{
    const char *coll = h->collection != NULL ? h->collection : "locks";
    char *escaped = NULL;
    size_t url_len;
    int rc = -1;
    CURLcode cc = CURLE_OK;

    r->easy = curl_easy_init();
    if (r->easy == NULL) {
        snprintf(err, errlen, "curl_easy_init failed");
        goto out;
    }
    escaped = curl_easy_escape(r->easy, name, 0);
    if (escaped == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    url_len = strlen(h->base_url) + strlen(coll) + 2 + strlen(escaped) + 1 +
              (query ? strlen(query) + 1 : 0);
    r->url = malloc(url_len);
    if (r->url == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    snprintf(r->url, url_len, "%s/%s/%s%s%s", h->base_url, coll, escaped, query ? "?" : "",
             query ? query : "");

    if (body != NULL) {
        r->body = json_dumps(body, JSON_COMPACT);
        if (r->body == NULL) {
            snprintf(err, errlen, "cannot serialize the request body");
            goto out;
        }
    }
    if (add_header(r, r->stream ? "Accept: application/x-ndjson, application/json"
                                : "Accept: application/json") != 0 ||
        add_header(r, "Expect:") != 0 ||
        (r->body != NULL && add_header(r, "Content-Type: application/json") != 0) ||
        (h->auth_header != NULL && add_header(r, h->auth_header) != 0)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }

#define SETOPT(opt, val)                                                                   \
    do {                                                                                   \
        if (cc == CURLE_OK)                                                                \
            cc = curl_easy_setopt(r->easy, opt, val);                                      \
    } while (0)
    SETOPT(CURLOPT_URL, r->url);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    SETOPT(CURLOPT_USERAGENT, "redlock/" RL_VERSION);
    SETOPT(CURLOPT_HTTPHEADER, r->headers);
    SETOPT(CURLOPT_WRITEFUNCTION, on_data);
    SETOPT(CURLOPT_WRITEDATA, r);
    SETOPT(CURLOPT_ERRORBUFFER, r->errbuf);
    SETOPT(CURLOPT_PRIVATE, r);
    if (h->cacert != NULL)
        SETOPT(CURLOPT_CAINFO, h->cacert);
    SETOPT(CURLOPT_SOCKOPTFUNCTION, on_sockopt);
    /* Freeing a request while its name is being resolved must not wait for the resolver
     * thread (libcurl otherwise joins it). */
#if LIBCURL_VERSION_NUM >= 0x075700
    SETOPT(CURLOPT_QUICK_EXIT, 1L);
#endif
    /* A whole-call bound: resolving, connecting, sending and receiving together.  A
     * duplex hold's bounds its connecting (TLS included); its exchange is the caller's. */
    SETOPT(CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
    if (r->duplex)
        SETOPT(CURLOPT_CONNECT_ONLY, 1L);
    SETOPT(CURLOPT_CONNECTTIMEOUT_MS,
           timeout_ms > 0 && timeout_ms < CONNECT_TIMEOUT_MS ? timeout_ms : CONNECT_TIMEOUT_MS);
    if (strcmp(method, "GET") == 0) {
        SETOPT(CURLOPT_HTTPGET, 1L);
    } else {
        SETOPT(CURLOPT_CUSTOMREQUEST, method);
        if (r->body != NULL) {
            SETOPT(CURLOPT_POSTFIELDS, r->body);
            SETOPT(CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
        }
    }
#undef SETOPT
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "curl setup failed: %s", curl_easy_strerror(cc));
        goto out;
    }
    rc = 0;
out:
    curl_free(escaped);
    return rc;
}

static cli_req *start(cli_http *h, const char *method, const char *name, const char *query,
                      const json_t *body, long timeout_ms, char *err, size_t errlen)
{
    cli_req *r = calloc(1, sizeof(*r));
    CURLMcode mc;

    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (req_setup(h, r, method, name, query, body, timeout_ms, err, errlen) != 0)
        goto fail;
    mc = curl_multi_add_handle(h->multi, r->easy);
    if (mc != CURLM_OK) {
        snprintf(err, errlen, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
        goto fail;
    }
    r->owner = h;
    r->next = h->inflight;
    h->inflight = r;
    return r;
fail:
    cli_req_free(r);
    return NULL;
}

cli_req *cli_http_start(cli_http *h, const char *method, const char *name, const json_t *body,
                        long timeout_ms, char *err, size_t errlen)
{
    return start(h, method, name, NULL, body, timeout_ms, err, errlen);
}

cli_req *cli_http_start_query(cli_http *h, const char *method, const char *name,
                              const char *query, long timeout_ms, char *err, size_t errlen)
{
    return start(h, method, name, query, NULL, timeout_ms, err, errlen);
}

/* The bytes of a duplex hold's request into r->out.  Returns 0 or -1 (err set). */
static int dx_request(cli_http *h, cli_req *r, char *err, size_t errlen)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL, *query = NULL;
    size_t body_len = r->body != NULL ? strlen(r->body) : 0, len;
    int rc = -1;

    if (u == NULL || curl_url_set(u, CURLUPART_URL, r->url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        snprintf(err, errlen, "cannot parse the URL %s", r->url);
        goto out;
    }
    (void)curl_url_get(u, CURLUPART_PORT, &port, CURLU_NO_DEFAULT_PORT);
    (void)curl_url_get(u, CURLUPART_QUERY, &query, 0);
    len = strlen(path) + (query ? strlen(query) : 0) + strlen(host) + (port ? strlen(port) : 0) +
          (h->auth_header ? strlen(h->auth_header) : 0) + body_len + 512;
    r->out = malloc(len);
    if (r->out == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    r->out_len = (size_t)snprintf(
        r->out, len,
        "POST %s%s%s HTTP/1.1\r\nHost: %s%s%s\r\nUser-Agent: redlock/" RL_VERSION "\r\n"
        "Accept: application/json\r\nContent-Type: application/json\r\n"
        "Content-Length: %zu\r\nConnection: Upgrade\r\nUpgrade: redlock-hold\r\n"
        "%s%s\r\n%s",
        path, query ? "?" : "", query ? query : "", host, port ? ":" : "", port ? port : "",
        body_len, h->auth_header ? h->auth_header : "", h->auth_header ? "\r\n" : "",
        r->body != NULL ? r->body : "");
    rc = 0;
out:
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_url_cleanup(u);
    return rc;
}

cli_req *cli_http_start_duplex(cli_http *h, const char *name, const char *query,
                               const json_t *body, long connect_timeout_ms, char *err,
                               size_t errlen)
{
    cli_req *r = calloc(1, sizeof(*r));
    unsigned char open_before[FD_SCAN];
    CURLMcode mc;

    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->stream = 1;
    r->duplex = DX_CONNECTING;
    r->clen = -1;
    if (req_setup(h, r, "POST", name, query, body, connect_timeout_ms, err, errlen) != 0 ||
        dx_request(h, r, err, errlen) != 0)
        goto fail;
    for (int fd = 0; fd < FD_SCAN; fd++)
        open_before[fd] = fcntl(fd, F_GETFD) >= 0;
    r->dmulti = curl_multi_init();
    cloexec_new_fds(open_before);
    if (r->dmulti == NULL) {
        snprintf(err, errlen, "curl_multi_init failed");
        goto fail;
    }
    mc = curl_multi_add_handle(r->dmulti, r->easy);
    if (mc != CURLM_OK) {
        snprintf(err, errlen, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
        goto fail;
    }
    r->owner = h;
    r->next = h->inflight;
    h->inflight = r;
    return r;
fail:
    cli_req_free(r);
    return NULL;
}

int cli_req_send_line(cli_req *r, const char *line)
{
    size_t n = strlen(line);
    char *p;

    if (r->done || r->duplex != DX_LINES)
        return -1;
    p = realloc(r->out, r->out_len + n + 1);
    if (p == NULL)
        return -1;
    r->out = p;
    memcpy(r->out + r->out_len, line, n);
    r->out[r->out_len + n] = '\n';
    r->out_len += n + 1;
    (void)dx_send(r); /* most often it goes at once; answers are read in the poll */
    return 0;
}

int cli_req_upgraded(const cli_req *r) { return r->duplex == DX_LINES; }

/* Record the end of one transfer. */
static void req_finish(cli_req *r, CURLcode result)
{
    r->done = 1;
    if (result == CURLE_OK) {
        if (curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status) != CURLE_OK)
            r->status = 0;
        if (r->resp != NULL && r->resp_len > r->resp_off)
            r->json = json_loadb(r->resp + r->resp_off, r->resp_len - r->resp_off, 0, NULL);
        if (r->status == 0)
            snprintf(r->error, sizeof(r->error), "no HTTP status in the answer");
    } else {
        r->status = 0;
        r->timed_out = result == CURLE_OPERATION_TIMEDOUT;
        /* errbuf is the more precise text ("Failed to connect to ... port ..."). */
        snprintf(r->error, sizeof(r->error), "%s",
                 r->errbuf[0] != '\0' ? r->errbuf : curl_easy_strerror(result));
    }
    req_detach(r);
}

/* Hand every finished transfer to its request.  Returns how many finished. */
static int drain_done(cli_http *h)
{
    CURLMsg *msg;
    int left = 0, n = 0;

    while ((msg = curl_multi_info_read(h->multi, &left)) != NULL) {
        char *priv = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv) != CURLE_OK ||
            priv == NULL)
            continue;
        req_finish((cli_req *)(void *)priv, msg->data.result);
        n++;
    }
    return n;
}

/* ---- duplex holds ----------------------------------------------------------------- */

/* The duplex hold has ended: its answer, the stream, or a failure (why: NULL if none). */
static void dx_end(cli_req *r, const char *why)
{
    r->done = 1;
    if (why != NULL && r->error[0] == '\0')
        snprintf(r->error, sizeof(r->error), "%s", why);
    if (r->duplex != DX_LINES && !r->chunked && r->resp != NULL && r->resp_len > r->resp_off)
        r->json = json_loadb(r->resp + r->resp_off, r->resp_len - r->resp_off, 0, NULL);
    req_detach(r);
}

/* Decode n bytes of a chunked body into r's answer.  Returns 0, or -1 (ended). */
static int dx_chunked(cli_req *r, const char *p, size_t n)
{
    while (n > 0 && r->ch_state != CH_END) {
        if (r->ch_state == CH_DATA) {
            size_t take = n < r->ch_left ? n : r->ch_left;
            if (resp_append(r, p, take) != 0) {
                dx_end(r, "the answer is too large");
                return -1;
            }
            p += take;
            n -= take;
            r->ch_left -= take;
            if (r->ch_left == 0)
                r->ch_state = CH_CRLF;
        } else if (*p != '\n') {
            /* CH_SIZE collects the size line; CH_CRLF skips to the end of the line. */
            if (r->ch_state == CH_SIZE) {
                if (r->ch_line_len + 1 >= sizeof(r->ch_line)) {
                    dx_end(r, "a bad chunk size in the answer");
                    return -1;
                }
                r->ch_line[r->ch_line_len++] = *p;
            }
            p++;
            n--;
        } else {
            p++;
            n--;
            if (r->ch_state == CH_CRLF) {
                r->ch_state = CH_SIZE;
                r->ch_line_len = 0;
                continue;
            }
            r->ch_line[r->ch_line_len] = '\0';
            r->ch_line_len = 0;
            errno = 0;
            char *end = NULL;
            unsigned long size = strtoul(r->ch_line, &end, 16);
            if (end == r->ch_line || errno != 0 || size > RESPONSE_MAX) {
                dx_end(r, "a bad chunk size in the answer");
                return -1;
            }
            r->ch_left = size;
            r->ch_state = size == 0 ? CH_END : CH_DATA;
        }
    }
    if (r->ch_state == CH_END) {
        dx_end(r, NULL);
        return -1;
    }
    return 0;
}

/* Bytes of the body (after the head).  Returns 0, or -1 once the hold has ended. */
static int dx_body(cli_req *r, const char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (r->chunked)
        return dx_chunked(r, p, n);
    if (r->clen >= 0 && r->body_got + n > (size_t)r->clen)
        n = (size_t)r->clen - r->body_got; /* nothing follows an answer on this connection */
    if (resp_append(r, p, n) != 0) {
        dx_end(r, "the answer is too large");
        return -1;
    }
    r->body_got += n;
    if (r->duplex == DX_BODY && r->clen >= 0 && r->body_got >= (size_t)r->clen) {
        dx_end(r, NULL);
        return -1;
    }
    return 0;
}

/* The answer's head is complete (NUL-terminated in r->head, without its blank line):
 * its status and the headers that say how the body comes.  Returns 0 or -1 (ended). */
static int dx_parse_head(cli_req *r)
{
    char *line = r->head, *next;
    int first = 1;

    r->clen = -1;
    for (; line != NULL; line = next, first = 0) {
        next = strstr(line, "\r\n");
        if (next != NULL) {
            *next = '\0';
            next += 2;
        }
        if (first) {
            int major = 0, minor = 0;
            long status = 0;
            if (sscanf(line, "HTTP/%d.%d %ld", &major, &minor, &status) != 3 ||
                status < 100 || status > 999) {
                dx_end(r, "no HTTP status in the answer");
                return -1;
            }
            r->status = status;
        } else if (strncasecmp(line, "Content-Length:", 15) == 0) {
            r->clen = strtol(line + 15, NULL, 10);
        } else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
                   strcasestr(line + 18, "chunked") != NULL) {
            r->chunked = 1;
        }
    }
    if (r->status == 101) {
        r->duplex = DX_LINES;
    } else {
        r->duplex = DX_BODY;
        if (!r->chunked && r->clen == 0) {
            dx_end(r, NULL);
            return -1;
        }
    }
    return 0;
}

/* n bytes came.  Returns 0, or -1 once the hold has ended. */
static int dx_take(cli_req *r, const char *p, size_t n)
{
    if (r->duplex >= DX_BODY)
        return dx_body(r, p, n);
    while (n > 0) {
        char *blank;
        char *grown;
        size_t before = r->head_len, used;

        if (r->head_len + n > HEAD_MAX) {
            dx_end(r, "the answer's head is too large");
            return -1;
        }
        grown = realloc(r->head, r->head_len + n + 1);
        if (grown == NULL) {
            dx_end(r, "out of memory");
            return -1;
        }
        r->head = grown;
        memcpy(r->head + r->head_len, p, n);
        r->head_len += n;
        r->head[r->head_len] = '\0';
        blank = strstr(r->head, "\r\n\r\n");
        if (blank == NULL)
            return 0;
        used = (size_t)(blank + 4 - r->head) - before;
        *blank = '\0';
        r->head_len = (size_t)(blank - r->head);
        if (dx_parse_head(r) != 0)
            return -1;
        return dx_body(r, p + used, n - used);
    }
    return 0;
}

/* Send what is pending of a duplex hold, without waiting.  Returns 1 if anything moved
 * (bytes, or its end). */
static int dx_send(cli_req *r)
{
    int moved = 0;

    if (r->done || r->duplex < DX_SENDING)
        return 0;
    while (r->out_off < r->out_len) {
        size_t n = 0;
        CURLcode cc = curl_easy_send(r->easy, r->out + r->out_off, r->out_len - r->out_off, &n);
        if (cc == CURLE_AGAIN)
            break;
        if (cc != CURLE_OK) {
            dx_end(r, curl_easy_strerror(cc));
            return 1;
        }
        r->out_off += n;
        moved = 1;
    }
    if (r->out_off == r->out_len) {
        memset(r->out, 0, r->out_len); /* the request holds the token */
        r->out_off = r->out_len = 0;
        if (r->duplex == DX_SENDING)
            r->duplex = DX_HEAD;
    }
    return moved;
}

/* Move a duplex hold on: send what is pending, take what has come, without waiting.
 * Reading happens only here, inside cli_http_poll(), so that whatever comes is seen by
 * the caller's next look at the request.  Returns 1 if anything moved (bytes either way,
 * or its end), or if a complete line waits to be taken (the poll must not sleep on it). */
static int dx_progress(cli_req *r)
{
    int moved = dx_send(r);

    if (r->done || r->duplex < DX_SENDING)
        return moved;
    /* Read even while sending: a refusal may come before the whole request went.  Read
     * until libcurl says there is nothing more (TLS may hold bytes the socket does not
     * show). */
    for (;;) {
        char buf[16384];
        size_t n = 0;
        CURLcode cc = curl_easy_recv(r->easy, buf, sizeof(buf), &n);
        if (cc == CURLE_AGAIN)
            break;
        moved = 1;
        if (cc != CURLE_OK) {
            if (r->duplex < DX_BODY)
                r->status = 0;
            dx_end(r, curl_easy_strerror(cc));
            return 1;
        }
        if (n == 0) {
            /* End of file: the end of an answer read to the close, or of the stream. */
            if (r->duplex < DX_BODY) {
                r->status = 0;
                dx_end(r, "the service closed the connection without an answer");
            } else if (r->duplex == DX_LINES || r->chunked ||
                       (r->clen >= 0 && r->body_got < (size_t)r->clen)) {
                dx_end(r, "the service closed the connection");
            } else {
                dx_end(r, NULL);
            }
            return 1;
        }
        if (dx_take(r, buf, n) != 0)
            return 1;
    }
    if (r->resp != NULL && r->resp_len > r->resp_off &&
        memchr(r->resp + r->resp_off, '\n', r->resp_len - r->resp_off) != NULL)
        moved = 1;
    return moved;
}

/* The connection of a duplex hold being set up: drive its multi.  Returns 1 when it is
 * up (or failed), else 0; adds its descriptors to wfds (unless NULL) and lowers
 * *timeout_ms to its own timeout. */
static int dx_connecting(cli_req *r, struct curl_waitfd *wfds, unsigned *nwfds,
                         int *timeout_ms)
{
    CURLMsg *msg;
    int running = 0, left = 0, maxfd = -1;
    long t = -1;
    fd_set rd, wr, ex;

    if (curl_multi_perform(r->dmulti, &running) != CURLM_OK) {
        dx_end(r, "curl multi error");
        return 1;
    }
    while ((msg = curl_multi_info_read(r->dmulti, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        if (msg->data.result != CURLE_OK) {
            r->timed_out = msg->data.result == CURLE_OPERATION_TIMEDOUT;
            dx_end(r, r->errbuf[0] != '\0' ? r->errbuf : curl_easy_strerror(msg->data.result));
            return 1;
        }
        r->duplex = DX_SENDING;
        return 1;
    }
    if (wfds == NULL) /* after the poll: only driven */
        return 0;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_ZERO(&ex);
    if (curl_multi_fdset(r->dmulti, &rd, &wr, &ex, &maxfd) == CURLM_OK) {
        for (int fd = 0; fd <= maxfd && *nwfds < WAIT_FDS_MAX; fd++) {
            short ev = (short)((FD_ISSET(fd, &rd) ? CURL_WAIT_POLLIN : 0) |
                               (FD_ISSET(fd, &wr) ? CURL_WAIT_POLLOUT : 0));
            if (ev == 0)
                continue;
            wfds[*nwfds].fd = fd;
            wfds[*nwfds].events = ev;
            wfds[*nwfds].revents = 0;
            (*nwfds)++;
        }
    }
    /* No descriptor yet (the resolver's thread, say): come back soon. */
    if (maxfd < 0 && *timeout_ms > 10)
        *timeout_ms = 10;
    if (curl_multi_timeout(r->dmulti, &t) == CURLM_OK && t >= 0 && t < *timeout_ms)
        *timeout_ms = (int)t;
    return 0;
}

/* Drive every duplex hold in flight; add what they wait on to wfds.  Returns how many
 * moved (their poll must not wait). */
static int dx_all(cli_http *h, struct curl_waitfd *wfds, unsigned *nwfds, int *timeout_ms)
{
    int moved = 0;

    for (cli_req *r = h->inflight, *next; r != NULL; r = next) {
        next = r->next; /* r may end and leave the list */
        if (!r->duplex)
            continue;
        if (r->duplex == DX_CONNECTING && dx_connecting(r, wfds, nwfds, timeout_ms))
            moved++;
        if (r->done || r->duplex == DX_CONNECTING)
            continue;
        moved += dx_progress(r);
        if (r->done || wfds == NULL || *nwfds >= WAIT_FDS_MAX)
            continue;
        curl_socket_t fd = CURL_SOCKET_BAD;
        if (curl_easy_getinfo(r->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
            fd == CURL_SOCKET_BAD) {
            dx_end(r, "the connection is gone");
            moved++;
            continue;
        }
        wfds[*nwfds].fd = fd;
        wfds[*nwfds].events = (short)(CURL_WAIT_POLLIN |
                                      (r->out_len > r->out_off ? CURL_WAIT_POLLOUT : 0));
        wfds[*nwfds].revents = 0;
        (*nwfds)++;
    }
    return moved;
}

int cli_http_poll(cli_http *h, int extra_fd, int timeout_ms, int *extra_ready)
{
    struct curl_waitfd wfds[WAIT_FDS_MAX];
    unsigned nwfds = 0;
    int running = 0, numfds = 0, dummy = 0;

    if (extra_ready != NULL)
        *extra_ready = 0;
    if (timeout_ms < 0)
        timeout_ms = 0;
    if (extra_fd >= 0) {
        wfds[0].fd = extra_fd;
        wfds[0].events = CURL_WAIT_POLLIN;
        wfds[0].revents = 0;
        nwfds = 1;
    }
    if (curl_multi_perform(h->multi, &running) != CURLM_OK)
        return -1;
    /* Only wait when nothing finished or moved in the work above, so callers see each
     * end without delay. */
    if (drain_done(h) > 0)
        timeout_ms = 0;
    if (dx_all(h, wfds, &nwfds, &timeout_ms) > 0)
        timeout_ms = 0;
    /* curl_multi_poll waits on the extra descriptors even with no transfer in flight. */
    if (curl_multi_poll(h->multi, nwfds > 0 ? wfds : NULL, nwfds, timeout_ms, &numfds) !=
        CURLM_OK)
        return -1;
    if (curl_multi_perform(h->multi, &running) != CURLM_OK)
        return -1;
    (void)drain_done(h);
    (void)dx_all(h, NULL, NULL, &dummy);
    if (extra_ready != NULL && extra_fd >= 0 && (wfds[0].revents & CURL_WAIT_POLLIN))
        *extra_ready = 1;
    return 0;
}

cli_req *cli_http_do(cli_http *h, const char *method, const char *name, const json_t *body,
                     long timeout_ms, char *err, size_t errlen)
{
    cli_req *r = cli_http_start(h, method, name, body, timeout_ms, err, errlen);

    while (r != NULL && !r->done) {
        if (cli_http_poll(h, -1, 1000, NULL) != 0) {
            snprintf(err, errlen, "curl multi error");
            cli_req_free(r);
            return NULL;
        }
    }
    return r;
}

int cli_req_done(const cli_req *r) { return r->done; }

int cli_req_socket(const cli_req *r)
{
    curl_socket_t fd = CURL_SOCKET_BAD;

    if (r->done || r->easy == NULL ||
        curl_easy_getinfo(r->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
        fd == CURL_SOCKET_BAD)
        return -1;
    return (int)fd;
}

long cli_req_status_now(const cli_req *r)
{
    long status = 0;

    if (r->done || r->easy == NULL || r->duplex)
        return r->status;
    if (curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        return 0;
    return status;
}

int cli_req_next_line(cli_req *r, json_t **line)
{
    char *start, *nl;
    size_t n;

    *line = NULL;
    if (r->resp == NULL || r->resp_off >= r->resp_len)
        return 0;
    start = r->resp + r->resp_off;
    nl = memchr(start, '\n', r->resp_len - r->resp_off);
    if (nl == NULL)
        return 0;
    n = (size_t)(nl - start);
    r->resp_off += n + 1;
    *line = json_loadb(start, n, 0, NULL);
    return 1;
}
long cli_req_status(const cli_req *r) { return r->status; }
json_t *cli_req_json(const cli_req *r) { return r->json; }
const char *cli_req_body(const cli_req *r) { return r->resp != NULL ? r->resp : ""; }
const char *cli_req_error(const cli_req *r) { return r->error; }
int cli_req_timed_out(const cli_req *r) { return r->timed_out; }

static const char *json_str_field(const cli_req *r, const char *key)
{
    const char *s;

    if (r->json == NULL || !json_is_object(r->json))
        return "";
    s = json_string_value(json_object_get(r->json, key));
    return s != NULL ? s : "";
}

const char *cli_req_error_code(const cli_req *r) { return json_str_field(r, "error"); }
const char *cli_req_error_message(const cli_req *r) { return json_str_field(r, "message"); }

void cli_req_free(cli_req *r)
{
    if (r == NULL)
        return;
    req_detach(r);
    if (r->dmulti != NULL && r->easy != NULL)
        (void)curl_multi_remove_handle(r->dmulti, r->easy);
    if (r->easy != NULL)
        curl_easy_cleanup(r->easy);
    if (r->dmulti != NULL)
        (void)curl_multi_cleanup(r->dmulti); /* closes the hold's connection */
    if (r->out != NULL) {
        /* The request holds the token (what was sent is wiped already). */
        memset(r->out, 0, r->out_len);
        free(r->out);
    }
    free(r->head);
    curl_slist_free_all(r->headers);
    free(r->url);
    if (r->body != NULL) {
        /* Request bodies can hold a lease. */
        memset(r->body, 0, strlen(r->body));
        free(r->body);
    }
    free(r->resp);
    json_decref(r->json);
    free(r);
}
