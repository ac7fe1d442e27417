/* redis_tls.c -- TLS sessions to Redis masters on GnuTLS (see redis_tls.h). */
#include "redis_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* One record: gnutls_record_send() sends at most this much per call anyway. */
#define RECORD_MAX 16384

struct redis_tls_creds {
    gnutls_certificate_credentials_t x509;
    int verify;
    int system_store; /* the CAs are the system's (for the messages) */
};

struct redis_tls {
    gnutls_session_t s;
    const redis_tls_creds *creds;
    int fd;           /* the socket; -1 once tests replace it (redis_tls_set_io) */
    /* What one recv() brought and GnuTLS has not asked for yet: GnuTLS asks for a
     * record's header, then its body, and a read of the socket for each (plus the one
     * that finds it empty) would triple the syscalls of a reply. */
    size_t roff, rlen;
    unsigned char rbuf[RECORD_MAX + 512];
    int handshaken;
    int wpending;     /* a record_send() returned AGAIN: resume it with (NULL, 0) */
    int refused;
    int answered;     /* application data came: the master took us */
    int failed;       /* reason says why; every call fails from then on */
    char name[256];
    char reason[200];
};

/* ---- credentials ---- */

redis_tls_creds *redis_tls_creds_new(const char *ca_file, const char *cert_file, const char *key_file,
                                     int verify, char *err, size_t errlen)
{
    int have_cert = cert_file && *cert_file, have_key = key_file && *key_file;
    if (have_cert != have_key) {
        snprintf(err, errlen, "the client certificate and its key go together (--redis-tls-cert, --redis-tls-key)");
        return NULL;
    }
    redis_tls_creds *c = calloc(1, sizeof *c);
    if (!c || gnutls_certificate_allocate_credentials(&c->x509) != GNUTLS_E_SUCCESS) {
        snprintf(err, errlen, "out of memory for the TLS credentials");
        free(c);
        return NULL;
    }
    c->verify = verify;
    int rc;
    if (ca_file && *ca_file) {
        rc = gnutls_certificate_set_x509_trust_file(c->x509, ca_file, GNUTLS_X509_FMT_PEM);
        if (rc <= 0) {
            snprintf(err, errlen, "cannot use the CA file '%s': %s", ca_file,
                     rc < 0 ? gnutls_strerror(rc) : "no PEM certificate in it");
            goto fail;
        }
    } else if (verify) {
        c->system_store = 1;
        rc = gnutls_certificate_set_x509_system_trust(c->x509);
        if (rc <= 0) {
            snprintf(err, errlen, "no CA certificates in the system's trust store (%s): install "
                     "ca-certificates, or name the masters' CA with --redis-tls-ca-file",
                     rc < 0 ? gnutls_strerror(rc) : "empty");
            goto fail;
        }
    }
    if (have_cert) {
        rc = gnutls_certificate_set_x509_key_file(c->x509, cert_file, key_file, GNUTLS_X509_FMT_PEM);
        if (rc < 0) {
            snprintf(err, errlen, "cannot use the client certificate '%s' with the key '%s': %s",
                     cert_file, key_file, gnutls_strerror(rc));
            goto fail;
        }
    }
    return c;
fail:
    redis_tls_creds_free(c);
    return NULL;
}

void redis_tls_creds_free(redis_tls_creds *c)
{
    if (!c)
        return;
    gnutls_certificate_free_credentials(c->x509);
    free(c);
}

int redis_tls_creds_verify(const redis_tls_creds *c) { return c->verify; }

/* ---- sessions ---- */

/* GnuTLS's transport: the socket, read a whole buffer at a time. */
static ssize_t pull_socket(gnutls_transport_ptr_t p, void *data, size_t len)
{
    redis_tls *t = p;
    if (t->roff == t->rlen) {
        ssize_t k;
        do
            k = recv(t->fd, t->rbuf, sizeof t->rbuf, 0);
        while (k < 0 && errno == EINTR);
        if (k <= 0) {
            if (k < 0)
                gnutls_transport_set_errno(t->s, errno);
            return k;
        }
        t->roff = 0;
        t->rlen = (size_t)k;
    }
    size_t n = t->rlen - t->roff < len ? t->rlen - t->roff : len;
    memcpy(data, t->rbuf + t->roff, n);
    t->roff += n;
    return (ssize_t)n;
}

/* Only asked for with timeouts set (none are: the socket is non-blocking): say whether
 * something can be read now. */
static int pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
    redis_tls *t = p;
    if (t->roff < t->rlen)
        return 1;
    struct pollfd pf = {.fd = t->fd, .events = POLLIN};
    return poll(&pf, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static ssize_t push_socket(gnutls_transport_ptr_t p, const void *data, size_t len)
{
    redis_tls *t = p;
    ssize_t k;
    do
        k = send(t->fd, data, len, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        gnutls_transport_set_errno(t->s, errno);
    return k;
}

static int is_address(const char *name)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

redis_tls *redis_tls_new(const redis_tls_creds *c, int fd, const char *name, char *err, size_t errlen)
{
    redis_tls *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory for a TLS session");
        return NULL;
    }
    t->creds = c;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    int rc = gnutls_init(&t->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_set_default_priority(t->s);
    if (rc == GNUTLS_E_SUCCESS)
        rc = gnutls_credentials_set(t->s, GNUTLS_CRD_CERTIFICATE, c->x509);
    /* SNI carries names only (RFC 6066), never an address. */
    if (rc == GNUTLS_E_SUCCESS && t->name[0] && !is_address(t->name))
        rc = gnutls_server_name_set(t->s, GNUTLS_NAME_DNS, t->name, strlen(t->name));
    if (rc != GNUTLS_E_SUCCESS) {
        snprintf(err, errlen, "TLS session set-up: %s", gnutls_strerror(rc));
        redis_tls_free(t);
        return NULL;
    }
    /* The chain and the name (a DNS name, or an IP address against the certificate's
     * IP addresses) are checked inside the handshake, which fails if either is wrong. */
    if (c->verify)
        gnutls_session_set_verify_cert(t->s, t->name[0] ? t->name : NULL, 0);
    gnutls_handshake_set_timeout(t->s, 0); /* the caller's loop keeps the deadline */
    t->fd = fd;
    gnutls_transport_set_ptr(t->s, t);
    gnutls_transport_set_pull_function(t->s, pull_socket);
    gnutls_transport_set_pull_timeout_function(t->s, pull_timeout);
    gnutls_transport_set_push_function(t->s, push_socket);
    return t;
}

void redis_tls_free(redis_tls *t)
{
    if (!t)
        return;
    if (t->s)
        gnutls_deinit(t->s);
    free(t);
}

void redis_tls_set_io(redis_tls *t, ssize_t (*push)(void *, const void *, size_t),
                      ssize_t (*pull)(void *, void *, size_t), void *ptr)
{
    t->fd = -1;
    gnutls_transport_set_ptr(t->s, ptr);
    gnutls_transport_set_push_function(t->s, push);
    gnutls_transport_set_pull_function(t->s, pull);
    gnutls_transport_set_pull_timeout_function(t->s, NULL);
}

const char *redis_tls_reason(const redis_tls *t) { return t->reason; }
int redis_tls_refused(const redis_tls *t) { return t->refused; }
int redis_tls_write_pending(const redis_tls *t) { return t->wpending; }

static int blocked(const redis_tls *t)
{
    return gnutls_record_get_direction(t->s) ? REDIS_TLS_WANT_WRITE : REDIS_TLS_WANT_READ;
}

/* What a verification status means, for a person ("expired, issued for another name"). */
static void describe_status(redis_tls *t, unsigned st, char *out, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *what;
    } bits[] = {
        {GNUTLS_CERT_SIGNER_NOT_FOUND, NULL}, /* written below: which CAs were asked */
        {GNUTLS_CERT_EXPIRED, "expired"},
        {GNUTLS_CERT_NOT_ACTIVATED, "not valid yet"},
        {GNUTLS_CERT_UNEXPECTED_OWNER, NULL}, /* written below: the name expected */
        {GNUTLS_CERT_REVOKED, "revoked"},
        {GNUTLS_CERT_SIGNER_NOT_CA, "signed by a certificate that is no CA"},
        {GNUTLS_CERT_INSECURE_ALGORITHM, "signed with an insecure algorithm"},
        {GNUTLS_CERT_SIGNATURE_FAILURE, "its signature does not verify"},
        {GNUTLS_CERT_PURPOSE_MISMATCH, "not meant for a TLS server"},
        {GNUTLS_CERT_SIGNER_CONSTRAINTS_FAILURE, "its CA's constraints forbid it"},
    };
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof bits / sizeof bits[0] && len < cap; i++) {
        if (!(st & bits[i].bit))
            continue;
        const char *sep = len ? ", " : "";
        if (bits[i].bit == GNUTLS_CERT_SIGNER_NOT_FOUND)
            len += (size_t)snprintf(out + len, cap - len, "%ssigned by a CA that is not trusted (%s)",
                                    sep, t->creds->system_store ? "the system's store" : "--redis-tls-ca-file");
        else if (bits[i].bit == GNUTLS_CERT_UNEXPECTED_OWNER)
            len += (size_t)snprintf(out + len, cap - len, "%sissued for another name than '%.64s'",
                                    sep, t->name);
        else
            len += (size_t)snprintf(out + len, cap - len, "%s%s", sep, bits[i].what);
    }
    if (!out[0]) {
        gnutls_datum_t d = {NULL, 0};
        if (gnutls_certificate_verification_status_print(st, GNUTLS_CRT_X509, &d, 0) == 0 && d.data) {
            snprintf(out, cap, "%s", (const char *)d.data);
            gnutls_free(d.data);
        } else {
            snprintf(out, cap, "status 0x%x", st);
        }
    }
}

/* Record why the session failed (rc a GnuTLS error, or 0: closed by the peer); the
 * first failure is the one told, and the session is dead from then on. */
static int fail(redis_tls *t, int rc)
{
    if (t->failed)
        return REDIS_TLS_ERR;
    t->failed = 1;
    const char *during = t->handshaken ? "" : " during the TLS handshake";
    char what[160];
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
        describe_status(t, gnutls_session_get_verify_cert_status(t->s), what, sizeof what);
        snprintf(t->reason, sizeof t->reason, "TLS: the master's certificate is refused: %s", what);
        t->refused = 1;
    } else if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        gnutls_alert_description_t a = gnutls_alert_get(t->s);
        const char *name = gnutls_alert_get_name(a);
        int about_us = a == GNUTLS_A_CERTIFICATE_REQUIRED || a == GNUTLS_A_BAD_CERTIFICATE ||
                       a == GNUTLS_A_UNKNOWN_CA || a == GNUTLS_A_CERTIFICATE_UNKNOWN ||
                       a == GNUTLS_A_UNSUPPORTED_CERTIFICATE || a == GNUTLS_A_CERTIFICATE_EXPIRED ||
                       a == GNUTLS_A_CERTIFICATE_REVOKED;
        snprintf(t->reason, sizeof t->reason, "TLS: the master refused us%s: %s%s", during,
                 name ? name : "an alert",
                 about_us ? " (our client certificate: --redis-tls-cert, --redis-tls-key)" : "");
        t->refused = 1;
    } else if (t->handshaken && !t->answered &&
               (rc == 0 || rc == GNUTLS_E_PREMATURE_TERMINATION || rc == GNUTLS_E_PULL_ERROR ||
                rc == GNUTLS_E_PUSH_ERROR)) {
        /* In TLS 1.3 the master judges our certificate after our side of the handshake
         * is over; its alert is often lost in the reset that our first commands, already
         * on their way, provoke.  A connection that ends before a single answer is most
         * likely that. */
        snprintf(t->reason, sizeof t->reason, "TLS: the master dropped the connection before "
                 "answering (does it want a client certificate? --redis-tls-cert, --redis-tls-key)");
        t->refused = 1;
    } else if (rc == 0 || rc == GNUTLS_E_PREMATURE_TERMINATION) {
        snprintf(t->reason, sizeof t->reason, "TLS: the master closed the connection%s", during);
    } else if (rc == GNUTLS_E_PUSH_ERROR || rc == GNUTLS_E_PULL_ERROR) {
        snprintf(t->reason, sizeof t->reason, "TLS: %s%s", errno ? strerror(errno) : gnutls_strerror(rc),
                 during);
    } else if (rc == GNUTLS_E_REHANDSHAKE) {
        snprintf(t->reason, sizeof t->reason, "TLS: the master asked to renegotiate (not supported)");
        t->refused = 1;
    } else {
        /* A protocol failure: no common version or cipher, or not TLS at all (a plain
         * port answering a ClientHello). */
        snprintf(t->reason, sizeof t->reason, "TLS%s: %s%s", t->handshaken ? "" : " handshake failed",
                 gnutls_strerror(rc), t->handshaken ? "" : " (is it a TLS port?)");
        t->refused = !t->handshaken;
    }
    return REDIS_TLS_ERR;
}

int redis_tls_handshake(redis_tls *t)
{
    if (t->failed)
        return REDIS_TLS_ERR;
    int rc;
    do
        rc = gnutls_handshake(t->s);
    while (rc < 0 && rc != GNUTLS_E_AGAIN && !gnutls_error_is_fatal(rc));
    if (rc == GNUTLS_E_SUCCESS) {
        t->handshaken = 1;
        return REDIS_TLS_OK;
    }
    if (rc == GNUTLS_E_AGAIN)
        return blocked(t);
    errno = 0;
    return fail(t, rc);
}

int redis_tls_read(redis_tls *t, redisReader *r, size_t limit, size_t *fed)
{
    char buf[RECORD_MAX];
    *fed = 0;
    if (t->failed)
        return REDIS_TLS_ERR;
    for (;;) {
        if (*fed >= limit)
            return REDIS_TLS_MORE;
        errno = 0;
        ssize_t k = gnutls_record_recv(t->s, buf, sizeof buf);
        if (k > 0) {
            if (redisReaderFeed(r, buf, (size_t)k) != REDIS_OK) {
                snprintf(t->reason, sizeof t->reason, "out of memory for a reply");
                t->failed = 1;
                return REDIS_TLS_ERR;
            }
            *fed += (size_t)k;
            t->answered = 1;
            /* Nothing left in hand (decrypted, or read and not yet asked for): stop
             * here rather than ask the socket to say it is empty; the loop watches it
             * and comes back when more arrives. */
            if (t->fd >= 0 && t->roff == t->rlen && gnutls_record_check_pending(t->s) == 0)
                return REDIS_TLS_WANT_READ;
            continue;
        }
        if (k == GNUTLS_E_AGAIN)
            return blocked(t);
        if (k == GNUTLS_E_INTERRUPTED || (k < 0 && !gnutls_error_is_fatal((int)k) && k != GNUTLS_E_REHANDSHAKE))
            continue; /* a warning alert, a session ticket, a key update */
        return fail(t, (int)k);
    }
}

int redis_tls_write(redis_tls *t, char **obuf)
{
    if (t->failed)
        return REDIS_TLS_ERR;
    for (;;) {
        ssize_t k;
        errno = 0;
        if (t->wpending) {
            /* Resume the record under way: GnuTLS holds it, encrypted; (NULL, 0) sends
             * the rest and answers the size first asked for. */
            k = gnutls_record_send(t->s, NULL, 0);
        } else {
            size_t len = sdslen(*obuf);
            if (len == 0)
                return REDIS_TLS_OK;
            k = gnutls_record_send(t->s, *obuf, len < RECORD_MAX ? len : RECORD_MAX);
        }
        if (k == GNUTLS_E_AGAIN || k == GNUTLS_E_INTERRUPTED) {
            t->wpending = 1;
            if (k == GNUTLS_E_INTERRUPTED)
                continue;
            return blocked(t);
        }
        if (k < 0) {
            t->wpending = 0;
            return fail(t, (int)k);
        }
        t->wpending = 0;
        /* hiredis only ever appends, so the front is what went */
        sdsrange(*obuf, (int)k, -1);
    }
}
