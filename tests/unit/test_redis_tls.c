/* test_redis_tls.c -- the TLS transport of redis_tls.h against a real GnuTLS server
 * session, both in this process over in-memory pipes whose ends take and give a few
 * bytes at a time and block (EAGAIN) every other call: the handshake with its
 * verification (the name, SNI, another name, another CA, an expired certificate, the
 * insecure mode), the server's refusal of a client without a certificate, writes cut
 * anywhere and resumed while hiredis appends more, replies cut anywhere and reassembled
 * by hiredis's reader, a key update and a close in the middle of a reply.  Then the same
 * session on a real (non-blocking) socket, where it reads a buffer at a time: several
 * records from one recv(), a record cut between two, a socket that takes a little at a
 * time.  The certificates are made by openssl in a temporary directory for each test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_tls.h"
#include "unit.h"

static char dir[64];

static void sh(const char *fmt, const char *arg)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg, arg);
    int rc = system(cmd);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "failed: %s", cmd);
}

/* ca, other-ca; server (redis-1.example, 127.0.0.1), expired (same names), stranger
 * (signed by other-ca), client. */
static void make_certs(void)
{
    snprintf(dir, sizeof dir, "/tmp/redlockd-tlsunit-XXXXXX");
    cr_assert(mkdtemp(dir));
    sh("(cd %s && for ca in ca other-ca; do "
       "openssl ecparam -name prime256v1 -genkey -noout -out $ca-key.pem && "
       "openssl req -x509 -new -key $ca-key.pem -days 2 -subj /CN=$ca -out $ca.pem || exit 1; done; "
       "printf 'subjectAltName=DNS:redis-1.example,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > srv.ext; "
       "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext; "
       "mk() { openssl ecparam -name prime256v1 -genkey -noout -out $1-key.pem && "
       "openssl req -new -key $1-key.pem -subj /CN=$2 -out $1.csr && "
       "openssl x509 -req -in $1.csr -CA $3.pem -CAkey $3-key.pem -CAcreateserial -days $4 "
       "-extfile $5 -out $1.pem; }; "
       "mk server redis-1.example ca 2 srv.ext && mk expired redis-1.example ca -1 srv.ext && "
       "mk stranger redis-1.example other-ca 2 srv.ext && mk client redlockd ca 2 cli.ext"
       ") > %s/openssl.log 2>&1",
       dir);
}

static void cleanup(void)
{
    if (dir[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) {
        }
    }
    unit_fini();
}

TestSuite(redis_tls, .init = make_certs, .fini = cleanup, .timeout = 60);

/* ---- in-memory pipes: each end takes/gives at most max bytes, blocks every `block`th call ---- */

typedef struct pipe_q {
    unsigned char *buf;
    size_t len, cap;
    int closed;   /* the writer closed it: 0 once drained */
    int reset;    /* reading it fails (ECONNRESET) once drained */
} pipe_q;

typedef struct end {
    pipe_q *in, *out;
    size_t max;        /* per call, each way */
    unsigned block;    /* 0: never; k: every kth call answers EAGAIN */
    unsigned calls;
} end;

static void q_put(pipe_q *q, const void *p, size_t n)
{
    if (q->len + n > q->cap) {
        q->cap = (q->len + n) * 2;
        q->buf = realloc(q->buf, q->cap);
        cr_assert(q->buf);
    }
    memcpy(q->buf + q->len, p, n);
    q->len += n;
}

static int blocks(end *e) { return e->block && ++e->calls % e->block == 0; }

static ssize_t e_push(void *p, const void *data, size_t n)
{
    end *e = p;
    if (blocks(e)) {
        errno = EAGAIN;
        return -1;
    }
    size_t k = n < e->max ? n : e->max;
    q_put(e->out, data, k);
    return (ssize_t)k;
}

static ssize_t e_pull(void *p, void *data, size_t n)
{
    end *e = p;
    if (e->in->len == 0) {
        if (e->in->reset) {
            errno = ECONNRESET;
            return -1;
        }
        if (e->in->closed)
            return 0;
        errno = EAGAIN;
        return -1;
    }
    if (blocks(e)) {
        errno = EAGAIN;
        return -1;
    }
    size_t k = n < e->max ? n : e->max;
    if (k > e->in->len)
        k = e->in->len;
    memcpy(data, e->in->buf, k);
    memmove(e->in->buf, e->in->buf + k, e->in->len - k);
    e->in->len -= k;
    return (ssize_t)k;
}

/* The pair: our client session and a GnuTLS server session. */
typedef struct pair {
    pipe_q c2s, s2c;
    end cend, send_;
    redis_tls_creds *creds;
    redis_tls *cli;
    gnutls_certificate_credentials_t scred;
    gnutls_session_t srv;
    int srv_done, srv_rc;
} pair;

static void path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s.pem", dir, name);
}

/* server: its certificate's file stem; require: ask for a client certificate. */
static void pair_open(pair *p, const char *server, int require, const char *name, int verify,
                      int with_client_cert, size_t max, unsigned block)
{
    memset(p, 0, sizeof *p);
    char ca[200], cert[200], key[200], scert[200], skey[200], err[300];
    path(ca, sizeof ca, "ca");
    path(cert, sizeof cert, "client");
    snprintf(key, sizeof key, "%s/client-key.pem", dir);
    path(scert, sizeof scert, server);
    snprintf(skey, sizeof skey, "%s/%s-key.pem", dir, server);
    p->creds = redis_tls_creds_new(ca, with_client_cert ? cert : NULL, with_client_cert ? key : NULL,
                                   verify, err, sizeof err);
    cr_assert_not_null(p->creds, "%s", err);
    p->cli = redis_tls_new(p->creds, -1, name, err, sizeof err);
    cr_assert_not_null(p->cli, "%s", err);
    p->cend = (end){.in = &p->s2c, .out = &p->c2s, .max = max, .block = block};
    p->send_ = (end){.in = &p->c2s, .out = &p->s2c, .max = max, .block = block};
    redis_tls_set_io(p->cli, e_push, e_pull, &p->cend);

    cr_assert_eq(gnutls_certificate_allocate_credentials(&p->scred), 0);
    cr_assert_eq(gnutls_certificate_set_x509_key_file(p->scred, scert, skey, GNUTLS_X509_FMT_PEM), 0);
    cr_assert_gt(gnutls_certificate_set_x509_trust_file(p->scred, ca, GNUTLS_X509_FMT_PEM), 0);
    cr_assert_eq(gnutls_init(&p->srv, GNUTLS_SERVER | GNUTLS_NONBLOCK), 0);
    cr_assert_eq(gnutls_set_default_priority(p->srv), 0);
    cr_assert_eq(gnutls_credentials_set(p->srv, GNUTLS_CRD_CERTIFICATE, p->scred), 0);
    if (require) {
        gnutls_certificate_server_set_request(p->srv, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert(p->srv, NULL, 0);
    }
    gnutls_transport_set_ptr(p->srv, &p->send_);
    gnutls_transport_set_push_function(p->srv, e_push);
    gnutls_transport_set_pull_function(p->srv, e_pull);
}

static void pair_close(pair *p)
{
    redis_tls_free(p->cli);
    redis_tls_creds_free(p->creds);
    gnutls_deinit(p->srv);
    gnutls_certificate_free_credentials(p->scred);
    free(p->c2s.buf);
    free(p->s2c.buf);
}

/* The server's handshake ended: a failure is told with its alert, then the server goes. */
static void server_done(pair *p, int rc)
{
    p->srv_done = 1;
    p->srv_rc = rc;
    if (rc != 0) {
        while (gnutls_alert_send_appropriate(p->srv, rc) == GNUTLS_E_AGAIN)
            ;
        p->s2c.closed = 1;
    }
}

/* Step both handshakes until the client's is over; its last result. */
static int pair_handshake(pair *p)
{
    for (int i = 0; i < 100000; i++) {
        int rc = redis_tls_handshake(p->cli);
        if (!p->srv_done) {
            int s = gnutls_handshake(p->srv);
            if (s == 0 || (s < 0 && gnutls_error_is_fatal(s)))
                server_done(p, s);
        }
        if (rc == REDIS_TLS_OK || rc == REDIS_TLS_ERR)
            return rc;
    }
    cr_assert_fail("the handshake never ended");
    return REDIS_TLS_ERR;
}

/* Let the server finish its side (TLS 1.3: it judges our Finished after we are done). */
static void server_settle(pair *p)
{
    for (int i = 0; i < 100000 && !p->srv_done; i++) {
        int s = gnutls_handshake(p->srv);
        if (s == 0 || (s < 0 && gnutls_error_is_fatal(s)))
            server_done(p, s);
    }
    cr_assert(p->srv_done);
}

/* Everything the server can read now, appended to got. */
static void server_read(pair *p, sds *got)
{
    char buf[4096];
    for (int i = 0; i < 1000000; i++) {
        ssize_t k = gnutls_record_recv(p->srv, buf, sizeof buf);
        if (k > 0)
            *got = sdscatlen(*got, buf, (size_t)k);
        else if (k == GNUTLS_E_AGAIN && p->c2s.len == 0)
            return;
        else if (k < 0 && k != GNUTLS_E_AGAIN && k != GNUTLS_E_INTERRUPTED)
            cr_assert_fail("server read: %s", gnutls_strerror((int)k));
    }
}

static void server_send(pair *p, const char *data, size_t len)
{
    while (len) {
        ssize_t k = gnutls_record_send(p->srv, data, len);
        if (k == GNUTLS_E_AGAIN) {
            /* resume the same record until it is out (the pipe always takes more) */
            do
                k = gnutls_record_send(p->srv, NULL, 0);
            while (k == GNUTLS_E_AGAIN);
        }
        cr_assert_gt(k, 0, "server send: %s", gnutls_strerror((int)k));
        data += k;
        len -= (size_t)k;
    }
}

/* ---- the handshake and its verdicts ---- */

Test(redis_tls, handshake_checks_the_name_and_sends_it_as_sni)
{
    pair p;
    pair_open(&p, "server", 1, "redis-1.example", 1, 1, 5, 2);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK, "%s", redis_tls_reason(p.cli));
    server_settle(&p);
    cr_assert_eq(p.srv_rc, 0, "server: %s", gnutls_strerror(p.srv_rc));
    char sni[256];
    size_t len = sizeof sni;
    unsigned type;
    cr_assert_eq(gnutls_server_name_get(p.srv, sni, &len, &type, 0), 0, "no SNI sent");
    cr_assert_str_eq(sni, "redis-1.example");
    pair_close(&p);
}

Test(redis_tls, an_address_is_checked_against_the_certificate_but_sent_as_no_sni)
{
    pair p;
    pair_open(&p, "server", 0, "127.0.0.1", 1, 0, 4096, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK, "%s", redis_tls_reason(p.cli));
    char sni[256];
    size_t len = sizeof sni;
    unsigned type;
    cr_assert_neq(gnutls_server_name_get(p.srv, sni, &len, &type, 0), 0, "an address went as SNI");
    pair_close(&p);
    pair_open(&p, "server", 0, "127.0.0.2", 1, 0, 4096, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_ERR, "another address accepted");
    cr_assert(strstr(redis_tls_reason(p.cli), "another name than '127.0.0.2'"), "%s", redis_tls_reason(p.cli));
    pair_close(&p);
}

/* One refused handshake: the reason names what is wrong, and it counts as a refusal. */
static void refused(const char *server, const char *name, const char *want)
{
    pair p;
    pair_open(&p, server, 0, name, 1, 1, 7, 3);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_ERR, "%s accepted", server);
    cr_assert(strstr(redis_tls_reason(p.cli), want), "reason '%s' lacks '%s'", redis_tls_reason(p.cli), want);
    cr_assert(redis_tls_refused(p.cli));
    pair_close(&p);
}

Test(redis_tls, refuses_another_name)
{
    refused("server", "redis-2.example", "issued for another name than 'redis-2.example'");
}

Test(redis_tls, refuses_a_certificate_of_another_ca)
{
    refused("stranger", "redis-1.example", "signed by a CA that is not trusted (--redis-tls-ca-file)");
}

Test(redis_tls, refuses_an_expired_certificate)
{
    refused("expired", "redis-1.example", "expired");
}

Test(redis_tls, insecure_credentials_take_any_certificate)
{
    pair p;
    pair_open(&p, "stranger", 0, "redis-9.example", 0, 0, 4096, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK, "%s", redis_tls_reason(p.cli));
    pair_close(&p);
}

Test(redis_tls, a_server_that_wants_our_certificate_refuses_us_with_a_reason)
{
    pair p;
    pair_open(&p, "server", 1, "redis-1.example", 1, 0, 4096, 0);
    int rc = pair_handshake(&p);
    server_settle(&p);
    cr_assert_neq(p.srv_rc, 0, "the server took a client without a certificate");
    if (rc == REDIS_TLS_OK) { /* TLS 1.3: we were done first; the alert comes after */
        redisReader *r = redisReaderCreate();
        size_t fed;
        rc = redis_tls_read(p.cli, r, 1 << 20, &fed);
        redisReaderFree(r);
    }
    cr_assert_eq(rc, REDIS_TLS_ERR);
    cr_assert(strstr(redis_tls_reason(p.cli), "--redis-tls-cert"), "%s", redis_tls_reason(p.cli));
    cr_assert(redis_tls_refused(p.cli));
    pair_close(&p);
}

Test(redis_tls, credentials_name_the_bad_file)
{
    char err[300];
    cr_assert_null(redis_tls_creds_new("/nonexistent/ca.pem", NULL, NULL, 1, err, sizeof err));
    cr_assert(strstr(err, "/nonexistent/ca.pem"), "%s", err);
    char ca[200], cert[200];
    path(ca, sizeof ca, "ca");
    path(cert, sizeof cert, "client");
    cr_assert_null(redis_tls_creds_new(ca, cert, ca, 1, err, sizeof err), "a CA certificate as the key");
    cr_assert(strstr(err, "client certificate"), "%s", err);
    cr_assert_null(redis_tls_creds_new(ca, cert, NULL, 1, err, sizeof err));
    cr_assert(strstr(err, "go together"), "%s", err);
}

/* ---- bytes ---- */

Test(redis_tls, writes_cut_anywhere_resume_while_more_is_appended)
{
    pair p;
    pair_open(&p, "server", 0, "redis-1.example", 1, 0, 4096, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK);
    server_settle(&p);
    /* Now the pipe takes at most 7 bytes a call and blocks every other call. */
    p.cend.max = 7;
    p.cend.block = 2;
    sds obuf = sdsempty(), want = sdsempty(), got = sdsempty();
    int blocked = 0;
    for (int round = 0; round < 40; round++) {
        /* what hiredis would append: commands of growing size, some past a record */
        char cmd[64];
        size_t big = (size_t)round * 1500;
        int n = snprintf(cmd, sizeof cmd, "*2\r\n$3\r\nSET\r\n$%zu\r\n", big);
        obuf = sdscatlen(obuf, cmd, (size_t)n);
        want = sdscatlen(want, cmd, (size_t)n);
        for (size_t i = 0; i < big; i++) {
            char c = (char)('a' + (i + (size_t)round) % 26);
            obuf = sdscatlen(obuf, &c, 1);
            want = sdscatlen(want, &c, 1);
        }
        int rc = redis_tls_write(p.cli, &obuf);
        cr_assert_neq(rc, REDIS_TLS_ERR, "%s", redis_tls_reason(p.cli));
        blocked += rc != REDIS_TLS_OK;
        if (round % 3 == 0)
            server_read(&p, &got); /* the server drains now and then */
    }
    for (int i = 0; i < 1000000 && (sdslen(obuf) || redis_tls_write_pending(p.cli)); i++)
        cr_assert_neq(redis_tls_write(p.cli, &obuf), REDIS_TLS_ERR, "%s", redis_tls_reason(p.cli));
    cr_assert_eq(sdslen(obuf), 0);
    cr_assert(!redis_tls_write_pending(p.cli));
    server_read(&p, &got);
    cr_assert_gt(blocked, 0, "the pipe never blocked a write");
    cr_assert_eq(sdslen(got), sdslen(want), "server got %zu bytes of %zu", sdslen(got), sdslen(want));
    cr_assert(memcmp(got, want, sdslen(want)) == 0, "the bytes differ");
    sdsfree(obuf);
    sdsfree(want);
    sdsfree(got);
    pair_close(&p);
}

/* Read until a reply is complete (or the session fails); the last result. */
static int read_reply(pair *p, redisReader *r, void **reply, size_t limit)
{
    *reply = NULL;
    int rc = REDIS_TLS_WANT_READ;
    for (int i = 0; i < 1000000 && !*reply; i++) {
        size_t fed;
        rc = redis_tls_read(p->cli, r, limit, &fed);
        cr_assert_eq(redisReaderGetReply(r, reply), REDIS_OK);
        if (rc == REDIS_TLS_ERR || (rc != REDIS_TLS_MORE && p->s2c.len == 0))
            break;
    }
    return rc;
}

Test(redis_tls, replies_cut_anywhere_are_put_together_by_the_reader)
{
    pair p;
    pair_open(&p, "server", 0, "redis-1.example", 1, 0, 4096, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK);
    server_settle(&p);
    p.cend.max = 3;   /* our end reads 3 bytes a call... */
    p.cend.block = 2; /* ...and is blocked every other call */
    sds big = sdsempty();
    for (int i = 0; i < 70000; i++)
        big = sdscatlen(big, &"0123456789"[i % 10], 1);
    sds wire = sdscatprintf(sdsempty(), "+OK\r\n:42\r\n$%zu\r\n", sdslen(big));
    wire = sdscatlen(wire, big, sdslen(big));
    wire = sdscat(wire, "\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n");
    /* sent in uneven pieces: records that end inside a reply's header and body */
    for (size_t off = 0, step = 1; off < sdslen(wire); off += step, step = step * 3 % 9001 + 1)
        server_send(&p, wire + off, off + step > sdslen(wire) ? sdslen(wire) - off : step);
    redisReader *r = redisReaderCreate();
    void *rep;
    read_reply(&p, r, &rep, 1 << 20);
    cr_assert_not_null(rep);
    cr_assert_eq(((redisReply *)rep)->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    read_reply(&p, r, &rep, 1 << 20);
    cr_assert_eq(((redisReply *)rep)->integer, 42);
    freeReplyObject(rep);
    read_reply(&p, r, &rep, 1 << 20);
    cr_assert_not_null(rep);
    cr_assert_eq(((redisReply *)rep)->len, sdslen(big));
    cr_assert(memcmp(((redisReply *)rep)->str, big, sdslen(big)) == 0);
    freeReplyObject(rep);
    read_reply(&p, r, &rep, 1 << 20);
    cr_assert_not_null(rep);
    cr_assert_eq(((redisReply *)rep)->elements, 2);
    freeReplyObject(rep);
    redisReaderFree(r);
    sdsfree(big);
    sdsfree(wire);
    pair_close(&p);
}

Test(redis_tls, a_read_stops_at_its_limit_and_goes_on_when_called_again)
{
    pair p;
    pair_open(&p, "server", 0, "redis-1.example", 1, 0, 1 << 20, 0);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK);
    server_settle(&p);
    static char chunk[100000];
    memset(chunk, 'x', sizeof chunk);
    server_send(&p, chunk, sizeof chunk);
    redisReader *r = redisReaderCreate();
    size_t fed, total = 0;
    cr_assert_eq(redis_tls_read(p.cli, r, 20000, &fed), REDIS_TLS_MORE);
    cr_assert_geq(fed, 20000);
    cr_assert_lt(fed, 20000 + 16384 + 1, "read %zu past the limit", fed);
    total += fed;
    int rc;
    while ((rc = redis_tls_read(p.cli, r, 20000, &fed)) == REDIS_TLS_MORE)
        total += fed;
    total += fed;
    cr_assert_eq(rc, REDIS_TLS_WANT_READ);
    cr_assert_eq(total, sizeof chunk);
    redisReaderFree(r);
    pair_close(&p);
}

Test(redis_tls, a_key_update_in_the_middle_of_a_reply_is_taken_in_stride)
{
    pair p;
    pair_open(&p, "server", 0, "redis-1.example", 1, 0, 5, 2);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK);
    server_settle(&p);
    if (gnutls_protocol_get_version(p.srv) != GNUTLS_TLS1_3)
        cr_skip_test("key updates are TLS 1.3 (the default priority chose another version)");
    server_send(&p, "$11\r\nhello", 10);
    /* the server asks us to update our keys too (we must answer while reading) */
    int k;
    while ((k = gnutls_session_key_update(p.srv, GNUTLS_KU_PEER)) == GNUTLS_E_AGAIN)
        ;
    cr_assert_eq(k, 0, "%s", gnutls_strerror(k));
    server_send(&p, " world\r\n", 8);
    redisReader *r = redisReaderCreate();
    void *rep;
    int rc = read_reply(&p, r, &rep, 1 << 20);
    cr_assert_not_null(rep, "no reply (%d: %s)", rc, redis_tls_reason(p.cli));
    cr_assert_str_eq(((redisReply *)rep)->str, "hello world");
    freeReplyObject(rep);
    /* our writes still reach the server after the update */
    sds obuf = sdsnew("*1\r\n$4\r\nPING\r\n"), got = sdsempty();
    while (sdslen(obuf))
        cr_assert_neq(redis_tls_write(p.cli, &obuf), REDIS_TLS_ERR, "%s", redis_tls_reason(p.cli));
    server_read(&p, &got);
    cr_assert_str_eq(got, "*1\r\n$4\r\nPING\r\n");
    sdsfree(obuf);
    sdsfree(got);
    redisReaderFree(r);
    pair_close(&p);
}

/* The server sends half a reply then goes: how (close_notify, a bare close, a reset). */
static void cut_reply(int how, const char *want)
{
    pair p;
    pair_open(&p, "server", 0, "redis-1.example", 1, 0, 6, 2);
    cr_assert_eq(pair_handshake(&p), REDIS_TLS_OK);
    server_settle(&p);
    server_send(&p, "+OK\r\n$10\r\nhello", 15);
    if (how == 0) {
        int k;
        while ((k = gnutls_bye(p.srv, GNUTLS_SHUT_WR)) == GNUTLS_E_AGAIN)
            ;
        p.s2c.closed = 1;
    } else if (how == 1) {
        p.s2c.closed = 1;
    } else {
        p.s2c.reset = 1;
    }
    redisReader *r = redisReaderCreate();
    void *rep;
    read_reply(&p, r, &rep, 1 << 20);
    cr_assert_not_null(rep, "the whole reply before the cut is lost");
    freeReplyObject(rep);
    int rc = read_reply(&p, r, &rep, 1 << 20);
    cr_assert_null(rep, "half a reply came out whole");
    cr_assert_eq(rc, REDIS_TLS_ERR);
    cr_assert(strstr(redis_tls_reason(p.cli), want), "reason '%s' lacks '%s'", redis_tls_reason(p.cli), want);
    cr_assert(!redis_tls_refused(p.cli), "a cut connection is no refusal");
    redisReaderFree(r);
    pair_close(&p);
}

Test(redis_tls, a_close_notify_in_the_middle_of_a_reply_fails_the_read)
{
    cut_reply(0, "closed the connection");
}

Test(redis_tls, a_bare_close_in_the_middle_of_a_reply_fails_the_read)
{
    cut_reply(1, "closed the connection");
}

Test(redis_tls, a_reset_in_the_middle_of_a_reply_fails_the_read)
{
    cut_reply(2, "reset");
}

/* ---- on a socket: the session's own transport, a buffer per recv() ---- */

/* Our client on one end of a non-blocking socketpair; the server's records go to a queue
 * the test forwards to the other end when and how it likes (sock_pump). */
typedef struct sockpair {
    int cfd, sfd;
    pipe_q s_out;
    end send_;
    redis_tls_creds *creds;
    redis_tls *cli;
    gnutls_certificate_credentials_t scred;
    gnutls_session_t srv;
} sockpair;

static ssize_t s_pull(void *p, void *data, size_t n)
{
    sockpair *sp = p;
    ssize_t k = recv(sp->sfd, data, n, 0);
    if (k < 0)
        errno = errno == EWOULDBLOCK ? EAGAIN : errno;
    return k;
}

static ssize_t s_push(void *p, const void *data, size_t n)
{
    sockpair *sp = p;
    q_put(&sp->s_out, data, n);
    return (ssize_t)n;
}

/* Forward up to max bytes of what the server wrote to its end of the socket. */
static void sock_pump(sockpair *sp, size_t max)
{
    size_t n = sp->s_out.len < max ? sp->s_out.len : max;
    if (!n)
        return;
    ssize_t k = send(sp->sfd, sp->s_out.buf, n, MSG_NOSIGNAL);
    cr_assert_gt(k, 0, "send: %s", strerror(errno));
    memmove(sp->s_out.buf, sp->s_out.buf + k, sp->s_out.len - (size_t)k);
    sp->s_out.len -= (size_t)k;
}

static void sock_open(sockpair *sp)
{
    memset(sp, 0, sizeof *sp);
    int fds[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    sp->cfd = fds[0];
    sp->sfd = fds[1];
    char ca[200], scert[200], skey[200], err[300];
    path(ca, sizeof ca, "ca");
    path(scert, sizeof scert, "server");
    snprintf(skey, sizeof skey, "%s/server-key.pem", dir);
    sp->creds = redis_tls_creds_new(ca, NULL, NULL, 1, err, sizeof err);
    cr_assert_not_null(sp->creds, "%s", err);
    sp->cli = redis_tls_new(sp->creds, sp->cfd, "redis-1.example", err, sizeof err);
    cr_assert_not_null(sp->cli, "%s", err);
    cr_assert_eq(gnutls_certificate_allocate_credentials(&sp->scred), 0);
    cr_assert_eq(gnutls_certificate_set_x509_key_file(sp->scred, scert, skey, GNUTLS_X509_FMT_PEM), 0);
    cr_assert_eq(gnutls_init(&sp->srv, GNUTLS_SERVER | GNUTLS_NONBLOCK), 0);
    cr_assert_eq(gnutls_set_default_priority(sp->srv), 0);
    cr_assert_eq(gnutls_credentials_set(sp->srv, GNUTLS_CRD_CERTIFICATE, sp->scred), 0);
    gnutls_transport_set_ptr(sp->srv, sp);
    gnutls_transport_set_push_function(sp->srv, s_push);
    gnutls_transport_set_pull_function(sp->srv, s_pull);
    int cdone = 0, sdone = 0;
    for (int i = 0; i < 100000 && !(cdone && sdone); i++) {
        if (!cdone) {
            int rc = redis_tls_handshake(sp->cli);
            cr_assert_neq(rc, REDIS_TLS_ERR, "%s", redis_tls_reason(sp->cli));
            cdone = rc == REDIS_TLS_OK;
        }
        if (!sdone) {
            int rc = gnutls_handshake(sp->srv);
            cr_assert(rc == 0 || !gnutls_error_is_fatal(rc), "server: %s", gnutls_strerror(rc));
            sdone = rc == 0;
        }
        sock_pump(sp, SIZE_MAX);
    }
    cr_assert(cdone && sdone, "the handshake never ended");
    /* whatever the server said after its handshake (session tickets): read it now */
    redisReader *r = redisReaderCreate();
    size_t fed;
    cr_assert_neq(redis_tls_read(sp->cli, r, 1 << 20, &fed), REDIS_TLS_ERR);
    cr_assert_eq(fed, 0);
    redisReaderFree(r);
}

static void sock_close(sockpair *sp)
{
    redis_tls_free(sp->cli);
    redis_tls_creds_free(sp->creds);
    gnutls_deinit(sp->srv);
    gnutls_certificate_free_credentials(sp->scred);
    free(sp->s_out.buf);
    close(sp->cfd);
    close(sp->sfd);
}

/* The server sends each string as its own record (not yet forwarded). */
static void sock_records(sockpair *sp, const char *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gnutls_record_send(sp->srv, parts[i], strlen(parts[i])), (ssize_t)strlen(parts[i]));
}

Test(redis_tls, on_a_socket_several_records_of_one_recv_are_all_read)
{
    sockpair sp;
    sock_open(&sp);
    static const char *const parts[] = {"+OK\r\n", ":1\r\n", "$5\r\nhello\r\n", ":2\r\n"};
    sock_records(&sp, parts, 4);
    sock_pump(&sp, SIZE_MAX); /* all four records at once on the socket */
    redisReader *r = redisReaderCreate();
    size_t fed;
    /* one call takes them all: the three left in the buffer need no readable socket */
    cr_assert_eq(redis_tls_read(sp.cli, r, 1 << 20, &fed), REDIS_TLS_WANT_READ);
    cr_assert_eq(fed, strlen("+OK\r\n:1\r\n$5\r\nhello\r\n:2\r\n"));
    void *rep;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(redisReaderGetReply(r, &rep), REDIS_OK);
        cr_assert_not_null(rep, "reply %d", i);
        freeReplyObject(rep);
    }
    /* and the socket is empty: the next call finds nothing */
    cr_assert_eq(redis_tls_read(sp.cli, r, 1 << 20, &fed), REDIS_TLS_WANT_READ);
    cr_assert_eq(fed, 0);
    redisReaderFree(r);
    sock_close(&sp);
}

Test(redis_tls, on_a_socket_a_record_cut_between_two_recvs_waits_for_its_end)
{
    sockpair sp;
    sock_open(&sp);
    static const char *const parts[] = {"$11\r\nhello world\r\n", ":7\r\n"};
    sock_records(&sp, parts, 2);
    size_t total = sp.s_out.len;
    redisReader *r = redisReaderCreate();
    size_t fed = 0, all = 0;
    /* byte by byte, then in odd pieces: never a whole record at once */
    for (size_t k = 0; k < 7; k++) {
        sock_pump(&sp, 1);
        cr_assert_eq(redis_tls_read(sp.cli, r, 1 << 20, &fed), REDIS_TLS_WANT_READ);
        cr_assert_eq(fed, 0, "plaintext from a record not whole yet");
    }
    while (sp.s_out.len) {
        sock_pump(&sp, 13);
        cr_assert_neq(redis_tls_read(sp.cli, r, 1 << 20, &fed), REDIS_TLS_ERR, "%s", redis_tls_reason(sp.cli));
        all += fed;
    }
    cr_assert_eq(all, strlen("$11\r\nhello world\r\n:7\r\n"), "%zu of %zu record bytes", all, total);
    void *rep;
    cr_assert_eq(redisReaderGetReply(r, &rep), REDIS_OK);
    cr_assert_str_eq(((redisReply *)rep)->str, "hello world");
    freeReplyObject(rep);
    cr_assert_eq(redisReaderGetReply(r, &rep), REDIS_OK);
    cr_assert_eq(((redisReply *)rep)->integer, 7);
    freeReplyObject(rep);
    redisReaderFree(r);
    sock_close(&sp);
}

Test(redis_tls, on_a_socket_a_full_send_buffer_is_waited_for_and_every_byte_goes)
{
    sockpair sp;
    sock_open(&sp);
    int small = 4096;
    setsockopt(sp.cfd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sp.sfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sds obuf = sdsempty(), want;
    for (int i = 0; i < 20000; i++)
        obuf = sdscatprintf(obuf, "*2\r\n$4\r\nECHO\r\n$5\r\n%05d\r\n", i);
    want = sdsdup(obuf);
    sds got = sdsempty();
    int blocked = 0;
    for (int i = 0; i < 1000000 && (sdslen(obuf) || redis_tls_write_pending(sp.cli)); i++) {
        int rc = redis_tls_write(sp.cli, &obuf);
        cr_assert_neq(rc, REDIS_TLS_ERR, "%s", redis_tls_reason(sp.cli));
        if (rc == REDIS_TLS_WANT_WRITE) {
            blocked++;
            /* the server reads what is there (the socket is full) */
            char buf[65536];
            ssize_t k;
            while ((k = gnutls_record_recv(sp.srv, buf, sizeof buf)) > 0)
                got = sdscatlen(got, buf, (size_t)k);
        }
    }
    char buf[65536];
    ssize_t k;
    while ((k = gnutls_record_recv(sp.srv, buf, sizeof buf)) > 0)
        got = sdscatlen(got, buf, (size_t)k);
    cr_assert_gt(blocked, 0, "the socket never filled");
    cr_assert_eq(sdslen(got), sdslen(want));
    cr_assert(memcmp(got, want, sdslen(want)) == 0);
    sdsfree(obuf);
    sdsfree(want);
    sdsfree(got);
    sock_close(&sp);
}
