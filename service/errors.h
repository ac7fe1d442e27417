/* errors.h -- the one table of API error codes: name, HTTP status, default message.
 *
 * Handlers return an rl_err; answer_error() (answer.c) turns it into the JSON body
 * {"error": "<code>", "message": "<text>"[, extras]} (body.c) with the status from
 * this table. */
#ifndef RL_ERRORS_H
#define RL_ERRORS_H

#define RL_ERRORS(X)                                                                 \
    X(RL_OK, 200, "ok", "ok")                                                        \
    X(RL_E_INVALID_JSON, 400, "invalid_json", "the body must be a JSON object")      \
    X(RL_E_INVALID_NAME, 400, "invalid_name",                                        \
      "a lock name is 1..255 bytes of [A-Za-z0-9._:/-]")                             \
    X(RL_E_INVALID_TTL, 400, "invalid_ttl", "ttl_ms must be a positive integer")     \
    X(RL_E_INVALID_WAIT, 400, "invalid_wait", "wait_ms must be a non-negative integer") \
    X(RL_E_INVALID_LEASE, 400, "invalid_lease",                                      \
      "a lease is 16..128 characters of [A-Za-z0-9_-]")                              \
    X(RL_E_INVALID_HOLD, 400, "invalid_hold",                                        \
      "hold must be stream (a lock held while the connection is open)")         \
    X(RL_E_INVALID_INDEX, 400, "invalid_index",                                      \
      "index must be a non-negative integer (the index a GET answered)")             \
    X(RL_E_INVALID_OWNER, 400, "invalid_owner",                                      \
      "an owner is 1..256 bytes of printable ASCII (0x20-0x7e)")                     \
    X(RL_E_INVALID_LIMIT, 400, "invalid_limit", "limit must be an integer 1..1000")   \
    X(RL_E_INVALID_FORCE, 400, "invalid_force", "force must be true or false")       \
    X(RL_E_INVALID_MODE, 400, "invalid_mode", "mode must be exclusive or shared")     \
    X(RL_E_INVALID_PERMITS, 400, "invalid_permits",                                  \
      "permits must be an integer 1..1024 (required to acquire a semaphore)")         \
    X(RL_E_INVALID_REENTRANT, 400, "invalid_reentrant",                              \
      "reentrant must be true or false (exclusive locks only)")                      \
    X(RL_E_INVALID_QUERY, 400, "invalid_query",                                      \
      "the query string has an unknown or repeated parameter")                       \
    X(RL_E_INVALID_LOCK_DELAY, 400, "invalid_lock_delay",                            \
      "lock_delay_ms must be an integer 0..the max ttl (exclusive locks only)")      \
    X(RL_E_INVALID_MAX_HOLD, 400, "invalid_max_hold",                                \
      "max_hold_ms must be 0 or an integer at least the ttl (exclusive locks only)") \
    X(RL_E_INVALID_TOKEN, 400, "invalid_token",                                      \
      "token must be a fencing token: a positive integer")                           \
    X(RL_E_UNAUTHORIZED, 401, "unauthorized", "a valid bearer token is required")    \
    X(RL_E_FORBIDDEN, 403, "forbidden", "this token may not use this lock name")     \
    X(RL_E_NOT_FOUND, 404, "not_found", "no such route")                             \
    X(RL_E_LEASE_NOT_FOUND, 404, "lease_not_found",                                  \
      "a quorum of masters does not hold this lease (expired, released or lost)")    \
    X(RL_E_METHOD_NOT_ALLOWED, 405, "method_not_allowed",                            \
      "method not allowed on this route")                                            \
    X(RL_E_LOCK_HELD, 409, "lock_held", "the lock is held by another lease")         \
    X(RL_E_LOCK_CONTENDED, 409, "lock_contended",                                    \
      "no lease holds the lock, but concurrent attempts kept splitting the votes")    \
    X(RL_E_PERMITS_MISMATCH, 409, "permits_mismatch",                                \
      "the semaphore is in use with another number of permits")                     \
    X(RL_E_MAX_HOLD_EXCEEDED, 409, "max_hold_exceeded",                              \
      "the extension would carry the hold past its max_hold_ms: extend by at most "   \
      "max_hold_left_ms, or let go")                                                 \
    X(RL_E_BODY_TOO_LARGE, 413, "body_too_large", "request bodies are limited to 64 KiB") \
    X(RL_E_CLIENT_CLOSED, 499, "client_closed", "the client closed the connection")  \
    X(RL_E_INTERNAL, 500, "internal", "internal error")                              \
    X(RL_E_QUORUM_UNAVAILABLE, 503, "quorum_unavailable",                            \
      "fewer than a quorum of masters answered")                                     \
    X(RL_E_MASTERS_QUARANTINED, 503, "masters_quarantined",                          \
      "too few masters are trusted: the others sit out a restart or a loss of data "   \
      "until every lock they may have lost has expired")                             \
    X(RL_E_VALIDITY_EXHAUSTED, 503, "validity_exhausted",                            \
      "a quorum granted, but the round took longer than the ttl allows")             \
    X(RL_E_TOO_MANY_WAITERS, 503, "too_many_waiters", "too many requests are waiting") \
    X(RL_E_TOO_MANY_STREAMS, 503, "too_many_streams", "too many locks are held by streams") \
    X(RL_E_SHUTTING_DOWN, 503, "shutting_down", "the service is shutting down")          \
    X(RL_E_RELEASE_UNCONFIRMED, 503, "release_unconfirmed",                           \
      "masters that did not answer may still hold the lock for this lease: the service " \
      "goes on releasing it there, until its ttl ends")

typedef enum {
#define RL_ERR_ENUM(sym, status, code, msg) sym,
    RL_ERRORS(RL_ERR_ENUM)
#undef RL_ERR_ENUM
    RL_ERR__COUNT
} rl_err;

/* HTTP status for an error code (500 for an unknown value). */
int rl_err_status(rl_err e);
/* The stable machine-readable code ("lock_held"); never NULL. */
const char *rl_err_code(rl_err e);
/* The default human message; never NULL. */
const char *rl_err_message(rl_err e);

#endif
