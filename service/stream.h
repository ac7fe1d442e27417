/* stream.h -- locks held while the connection is open (POST ?hold=stream), in the two
 * modes of docs/DESIGN.md section 10:
 *
 * - one-way: the streamed answer (application/x-ndjson: the grant, then one line per
 *   event of its hold, hold.h), written as events come and read by libmicrohttpd
 *   through a content reader that suspends the connection when it has nothing to say.
 *   A client that hangs up, or leaves 4 KiB unread, releases the lock at once.
 * - duplex (Connection: Upgrade, Upgrade: redlock-hold): 101 Switching Protocols once
 *   granted, then newline-delimited JSON both ways on the connection, read and written
 *   here in the worker's loop: the grant line, an "alive" answer to each ping, one last
 *   line.  The hold runs in told mode (hold.h): the lock is let go when the client asks,
 *   when it has been silent for a ttl, or when what it was told has run out. */
#ifndef RL_STREAM_H
#define RL_STREAM_H

#include "errors.h"
#include "http_req.h"

/* Whether r asks for a duplex hold (Upgrade: redlock-hold): 1 or 0; -1 when the
 * headers are wrong (a message in r->msg: answer RL_E_INVALID_HOLD). */
int stream_duplex_asked(http_req *r);

/* r asks for a streamed hold (duplex or not): count it (a hold reserved for its
 * acquire).  RL_OK, or RL_E_TOO_MANY_STREAMS (or no memory). */
rl_err stream_reserve(http_req *r, int duplex);

/* r's acquire was granted: answer 201 with the stream (or 101 and the duplex
 * protocol), and keep the lock while it lasts. */
void stream_begin(http_req *r, const lockop *op);

/* r is over, or its acquire was not granted: let go of its hold (releasing a lock it
 * kept, as its mode says) and of the stream's state.  No-op for other requests. */
void stream_free(http_req *r);

/* The server stops: close every duplex connection still open (their holds carry on,
 * as after a hang-up, until the worker frees them). */
void stream_close_all(http_server *s);

#endif
