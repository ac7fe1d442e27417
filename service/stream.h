/* stream.h -- locks held while the connection is open (POST ?hold=stream): the
 * streamed answer (application/x-ndjson: the grant, then one line per event of its
 * hold, hold.h), written as events come and read by libmicrohttpd through a content
 * reader that suspends the connection when it has nothing to say.  A client that hangs
 * up, or leaves 64 KiB unread, releases the lock. */
#ifndef RL_STREAM_H
#define RL_STREAM_H

#include "errors.h"
#include "http_req.h"

/* r asks for a streamed hold: count it (a hold reserved for its acquire).  RL_OK, or
 * RL_E_TOO_MANY_STREAMS (or no memory). */
rl_err stream_reserve(http_req *r);

/* r's acquire was granted: answer 201 with the stream, and keep the lock while it is
 * open. */
void stream_begin(http_req *r, const lockop *op);

/* r is over, or its acquire was not granted: let go of its hold (releasing a lock it
 * kept) and of the stream's state.  No-op for other requests. */
void stream_free(http_req *r);

#endif
