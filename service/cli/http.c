/* http.c -- JSON requests to redlockd over one libcurl multi handle (see http.h). */
#include "cli/http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "version.h"

/* Answers larger than this are cut off and the request fails: redlockd's are < 1 KiB. */
#define RESPONSE_MAX (1024 * 1024)
#define CONNECT_TIMEOUT_MS 5000L

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
    int stream;         /* the answer is read line by line (cli_http_start_stream) */
    size_t resp_off;    /* stream: bytes of resp already taken as lines */
    int done;
    int timed_out;
    long status;
    json_t *json;
    char errbuf[CURL_ERROR_SIZE];
    char error[CURL_ERROR_SIZE + 64];
};

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

/* Take r off its owner's in-flight list and out of the multi handle. */
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

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    cli_req *r = userdata;
    size_t n = size * nmemb;
    char *p;

    if (r->resp_off > 0) { /* a stream: drop the lines already taken */
        memmove(r->resp, r->resp + r->resp_off, r->resp_len - r->resp_off + 1);
        r->resp_len -= r->resp_off;
        r->resp_off = 0;
    }
    if (n > RESPONSE_MAX || r->resp_len + n > RESPONSE_MAX)
        return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
    p = realloc(r->resp, r->resp_len + n + 1);
    if (p == NULL)
        return 0;
    r->resp = p;
    memcpy(r->resp + r->resp_len, ptr, n);
    r->resp_len += n;
    r->resp[r->resp_len] = '\0';
    return n;
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
    SETOPT(CURLOPT_TIMEOUT_MS, r->stream ? 0L : timeout_ms > 0 ? timeout_ms : 1L);
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
                      const json_t *body, long timeout_ms, int stream, char *err, size_t errlen)
{
    cli_req *r = calloc(1, sizeof(*r));
    CURLMcode mc;

    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->stream = stream;
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
    return start(h, method, name, NULL, body, timeout_ms, 0, err, errlen);
}

cli_req *cli_http_start_query(cli_http *h, const char *method, const char *name,
                              const char *query, long timeout_ms, char *err, size_t errlen)
{
    return start(h, method, name, query, NULL, timeout_ms, 0, err, errlen);
}

cli_req *cli_http_start_stream(cli_http *h, const char *method, const char *name,
                               const json_t *body, char *err, size_t errlen)
{
    return start(h, method, name, NULL, body, 0, 1, err, errlen);
}

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

int cli_http_poll(cli_http *h, int extra_fd, int timeout_ms, int *extra_ready)
{
    struct curl_waitfd wfd;
    int running = 0, numfds = 0;

    if (extra_ready != NULL)
        *extra_ready = 0;
    if (timeout_ms < 0)
        timeout_ms = 0;
    memset(&wfd, 0, sizeof(wfd));
    wfd.fd = extra_fd;
    wfd.events = CURL_WAIT_POLLIN;
    if (curl_multi_perform(h->multi, &running) != CURLM_OK)
        return -1;
    /* Only wait when nothing finished in the perform above, so callers see each end
     * without delay. */
    if (drain_done(h) > 0 || timeout_ms == 0)
        timeout_ms = 0;
    /* curl_multi_poll waits on extra_fd even with no transfer in flight. */
    if (curl_multi_poll(h->multi, extra_fd >= 0 ? &wfd : NULL, extra_fd >= 0 ? 1 : 0,
                        timeout_ms, &numfds) != CURLM_OK)
        return -1;
    if (curl_multi_perform(h->multi, &running) != CURLM_OK)
        return -1;
    (void)drain_done(h);
    if (extra_ready != NULL && extra_fd >= 0 && (wfd.revents & CURL_WAIT_POLLIN))
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

long cli_req_status_now(const cli_req *r)
{
    long status = 0;

    if (r->done || r->easy == NULL)
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
    if (r->easy != NULL)
        curl_easy_cleanup(r->easy);
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
