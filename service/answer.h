/* answer.h -- how a request is answered: a response queued at once, or kept until the
 * suspended request resumes; the JSON answers of lock operations and of the health
 * routes (bodies by body.h); the one function that renders every error; and the watch
 * for a client that hangs up while its request is suspended (libmicrohttpd does not
 * look at a suspended connection).  Used by the handlers (api.c) and by the answers
 * that last (stream.c, watchget.c). */
#ifndef RL_ANSWER_H
#define RL_ANSWER_H

#include <stddef.h>

#include "body.h"
#include "errors.h"
#include "http_req.h"

/* Send resp (of content type `type`, with one extra header if given) as r's answer, or
 * keep it until r is resumed.  Takes resp.  Every 201 gets a Location (/locks/NAME of
 * r's op; a set's first name), every 503 a Retry-After. */
enum MHD_Result answer_queue(http_req *r, int status, struct MHD_Response *resp, const char *type,
                             const char *extra_hdr, const char *extra_val);

/* The same with a JSON body (copied). */
enum MHD_Result answer_json(http_req *r, int status, const char *body, size_t len,
                            const char *extra_hdr, const char *extra_val);

/* Answer r with the error e: the one place an error answer is made.  The message is
 * r->msg when the handler that failed wrote one; a 409 carries the retry_after_ms of
 * r's op, a round that fell short its nodes_ok (body.h says which error carries what).
 * The headers: Retry-After with a 409, WWW-Authenticate with a 401, Allow with a 405. */
enum MHD_Result answer_error(http_req *r, rl_err e);

/* Answer r with the error e written straight to its socket, then shut the socket for
 * writing (Connection: close): for a request that libmicrohttpd answers by itself,
 * wrongly (http.c, mhd_log), and that no callback of ours may answer.  Plain HTTP
 * only. */
void answer_raw(http_req *r, rl_err e);

/* A handler's failure with its own message (into r->msg, which answer_error shows). */
rl_err answer_fail(http_req *r, rl_err e, const char *msg);

/* What a body shows of a single-name op. */
body_lock answer_lock_of(const lockop *op);

/* The answer of an op that succeeded (grant, release, extension, inspection, set). */
void answer_done(http_req *r, const lockop *op);

/* The health body: each master as this worker sees it, or as it answered the
 * readiness round whose replies are given. */
enum MHD_Result answer_health(http_req *r, int status, size_t ok, const redlock_reply *replies);

/* Call cb(r) once if r's client hangs up (closes or resets) while r is suspended;
 * calling it again only changes cb.  answer_unwatch_hangup stops watching. */
void answer_watch_hangup(http_req *r, void (*cb)(http_req *r));
void answer_unwatch_hangup(http_req *r);

#endif
