/* redis_tls.h -- TLS for the connections to Redis masters (rediss://), on GnuTLS: the
 * process's credentials (the CAs that vouch for masters, our client certificate) and
 * one client session per connection, driven non-blocking over its socket.
 *
 * Bytes only.  hiredis keeps formatting the commands (its output buffer, an sds
 * string) and parsing the replies (its reader); redis_ev.c moves the bytes through a
 * session instead of read()/write().  The handshake happens once per connection.
 *
 * Verification is on unless the credentials were made without it (the explicit
 * --redis-tls-insecure): the master's chain must lead to a trusted CA (a CA file, or the
 * system's store), be valid now, and name the host (a DNS name, or an IP address
 * against the certificate's IP addresses); the name also goes out as SNI when it is
 * not an address.  A refusal ends the handshake with a reason meant for a person. */
#ifndef RL_REDIS_TLS_H
#define RL_REDIS_TLS_H

#include <stddef.h>
#include <sys/types.h>

struct redisReader;
typedef struct redis_tls_creds redis_tls_creds;
typedef struct redis_tls redis_tls;

/* What the session calls return. */
enum redis_tls_rc {
    REDIS_TLS_OK = 0,         /* done: handshake complete, everything written */
    REDIS_TLS_WANT_READ = 1,  /* blocked: call again when the socket is readable */
    REDIS_TLS_WANT_WRITE = 2, /* blocked: call again when the socket is writable */
    REDIS_TLS_MORE = 3,       /* redis_tls_read(): stopped at its limit, call again */
    REDIS_TLS_ERR = -1,       /* failed: redis_tls_reason() says why; the session is dead */
};

/* The credentials, from PEM files: ca_file the CAs that vouch for masters (NULL or "":
 * the system's trust store), cert_file and key_file our client certificate for mutual
 * TLS (both or neither).  verify 0 checks nothing (the insecure flag).  Shared, read-only,
 * by every thread.  NULL with a message naming the bad file in err. */
redis_tls_creds *redis_tls_creds_new(const char *ca_file, const char *cert_file, const char *key_file,
                                     int verify, char *err, size_t errlen);
void redis_tls_creds_free(redis_tls_creds *c);
int redis_tls_creds_verify(const redis_tls_creds *c);

/* A client session over fd (a TCP socket, connected or still connecting): name is the
 * name the certificate must carry (and the SNI unless it is an IP address).  The
 * session does not own fd.  NULL on failure, with the reason in err. */
redis_tls *redis_tls_new(const redis_tls_creds *c, int fd, const char *name, char *err, size_t errlen);
void redis_tls_free(redis_tls *t); /* NULL: no-op */

/* Push the handshake on: OK, WANT_READ, WANT_WRITE or ERR. */
int redis_tls_handshake(redis_tls *t);

/* Decrypt what has arrived and feed it to r; *fed counts the bytes fed.  Returns
 * WANT_READ or WANT_WRITE once nothing more can be read now, MORE after `limit` bytes
 * (let the caller parse them, then call again), ERR when the connection failed or was
 * closed (what came before the failure is fed all the same). */
int redis_tls_read(redis_tls *t, struct redisReader *r, size_t limit, size_t *fed);

/* Send the front of *obuf (an sds string hiredis appends to): what was sent is cut from
 * it.  OK when it is empty, WANT_WRITE/WANT_READ when the socket took part of it (the
 * rest, and anything appended meanwhile, goes at the next call), ERR. */
int redis_tls_write(redis_tls *t, char **obuf);

/* Whether a write is under way (bytes of *obuf handed to TLS, not all sent yet). */
int redis_tls_write_pending(const redis_tls *t);

/* Why the session failed ("" while it has not). */
const char *redis_tls_reason(const redis_tls *t);

/* Whether the failure is a refusal (a certificate refused by either side, an alert
 * from the master, no common protocol): not a network fault, and not fixed by retrying
 * at once. */
int redis_tls_refused(const redis_tls *t);

/* Tests: replace the socket with push/pull functions (send()/recv() semantics: the
 * count, or -1 with errno EAGAIN when blocked; 0 from pull is the peer's close). */
void redis_tls_set_io(redis_tls *t, ssize_t (*push)(void *, const void *, size_t),
                      ssize_t (*pull)(void *, void *, size_t), void *ptr);

#endif
