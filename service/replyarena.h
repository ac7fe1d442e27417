/* replyarena.h -- hiredis replies built in a per-connection bump arena: the same
 * redisReply trees hiredis's own builders make (every consumer reads them unchanged),
 * without a calloc and a free per element.
 *
 * hiredis 0.14 lets the user replace a reader's builders (redisReader.fn, a
 * redisReplyObjectFunctions) and hands redisReader.privdata to each of them in the
 * redisReadTask.  replyarena_install() puts its builders and an arena on a reader: a
 * first block kept for the reader's life (REPLYARENA_FIRST bytes), and extra blocks for
 * a reply larger than that, freed when the reply is.  freeObject of the top-level reply
 * empties the arena.  Sizes measured: a batched reply of 32 granted acquires takes
 * 5,480 bytes, of 64 10,856, of 128 (MASTER_BATCH_MAX) 21,616; the largest reply on
 * any connection at c=64 exclusive cycles (2 workers) took 6,304.  Only the part a
 * reply used is ever touched, so a connection whose replies are small (a subscriber)
 * costs no more resident memory than they take.
 *
 * Why this is safe (checked in hiredis 0.14.1's sources, async.c and read.c):
 *   - one top-level reply is alive at a time per reader: redisProcessCallbacks() takes
 *     one reply from the reader (redisGetReply), runs its callback, calls
 *     reader->fn->freeObject on it, and only then asks the reader for the next; the
 *     reader itself frees a partly built reply (freeObject of its root) when it fails
 *     (protocol error, out of memory) and when it is freed.  A root built while another
 *     is alive is refused (NULL: the reader fails with "Out of memory"), never overlaid.
 *   - freeObject is only ever called on a top-level reply (the root), which is always
 *     the first object of the first block: the arena is found from it.
 *   - nothing in service/ keeps a pointer into a reply after its callback returns (the
 *     decoders copy values and owners out: redlock_reply, listop's names, notify's
 *     name is looked up or copied into a mailbox).  Under AddressSanitizer the first
 *     block is poisoned when emptied, so a read of a freed reply is reported there as
 *     it would be with hiredis's own free().
 *
 * Not thread-safe, like the reader it serves. */
#ifndef RL_REPLYARENA_H
#define RL_REPLYARENA_H

#include <stddef.h>
#include <stdint.h>

struct redisReader;

/* The first block's size in bytes (kept for the reader's life). */
#define REPLYARENA_FIRST (16 * 1024)

/* Put the arena's builders on r (a reader with no reply being built, e.g. a new
 * context's).  0; or -1 when out of memory, r left with hiredis's own builders (they
 * work, only slower). */
int replyarena_install(struct redisReader *r);

/* Take the arena off r and free it; no-op when r is NULL or has none.  A reply r was
 * building is dropped with it (r->reply cleared); r is left with builders that build
 * nothing (each returns NULL: "Out of memory") and a freeObject that does nothing, so
 * a later redisReaderFree(r) is safe.  For the context's teardown, after its last
 * callback (redis_ev's cleanup hook). */
void replyarena_uninstall(struct redisReader *r);

/* What an arena holds, for tests and measurement. */
typedef struct replyarena_stats {
    size_t first;     /* the first block's size */
    size_t used;      /* bytes the reply being built or read takes now (all blocks) */
    size_t blocks;    /* extra blocks alive now */
    size_t peak;      /* the most bytes one reply took */
    uint64_t replies; /* top-level replies freed */
    uint64_t spills;  /* extra blocks made, ever */
} replyarena_stats;

/* 0 with *out filled; -1 when r has no arena. */
int replyarena_stats_of(const struct redisReader *r, replyarena_stats *out);

#endif
