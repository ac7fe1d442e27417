/* master_int.h -- what the two files of a master connection share and nobody else
 * uses: master_connect.c (starting it: the connect, the handshake, the timer), which
 * calls master.c (its state, closing, trust, clock and what it carries), never the
 * other way.  The interface is master.h. */
#ifndef RL_MASTER_INT_H
#define RL_MASTER_INT_H

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000
/* A TLS refusal (a certificate either side refuses, the master's alert) is not fixed
 * by trying again at once: retry every few seconds, so that a fixed certificate is
 * picked up soon without a handshake a second per connection meanwhile. */
#define BACKOFF_REFUSED_MIN_MS 1000
#define BACKOFF_REFUSED_MAX_MS 5000

struct redisAsyncContext;
struct redisReply;
struct redis_ev_hooks;
typedef struct master_conn master_conn; /* master.h */

/* The adapter's hooks (redis_ev.h) of every master connection: coalesced writes. */
extern const struct redis_ev_hooks master_ev_hooks;

/* m's state becomes st (why: the reason shown while it is not ready); the hook hears
 * of a change. */
void master_set_state(master_conn *m, int st, const char *why);

/* Start m's timer for the next connect, backed off and jittered. */
void master_schedule_reconnect(master_conn *m);

/* m's hiredis context is gone (why): down, and its queued operations failed. */
void master_forget_context(master_conn *m, const char *why);

/* The master a reply on ac is for, with one command fewer pending; NULL when ac is no
 * longer its connection (a reply to a connection that was replaced is nobody's). */
master_conn *master_own_reply(struct redisAsyncContext *ac);

/* The reply to AUTH, SELECT (priv -1) or a SCRIPT LOAD (priv: the script id). */
void master_on_handshake_reply(struct redisAsyncContext *ac, void *r, void *priv);

/* One command of the handshake answered; after the last, the marker check. */
void master_handshake_step_done(master_conn *m);

/* Judge a TIME answered by the master (sent at m->clock_sent_us). */
void master_clock_sample(master_conn *m, const struct redisReply *reply);

#endif
