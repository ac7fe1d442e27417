/* shapes.h -- how an acquire of one name talks to the masters, for each kind: an
 * exclusive lock, a reader of a shared lock, a permit of a semaphore (op.h,
 * lockop_shape; docs/DESIGN.md sections 1, 3 and 12), and the keys and arguments of
 * every single-name script (acquire, raise, release, extend, inspect, force; scripts.h
 * says what each takes, proto.h what each answers).  The state machines that drive
 * them are the lock operations' (lockop_int.h names their files); the multi-name
 * shape is multilock.c's. */
#ifndef RL_SHAPES_H
#define RL_SHAPES_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"
#include "op.h"

/* The keys and channel of op's name (shape_keys_of()): for a semaphore, key is its record, slots is
 * the prefix of its slots' keys; for a lock, readers, tags and intents are those of
 * its shared holders (keys.h). */
typedef struct shape_keys {
    char key[KEYS_MAX], chan[KEYS_MAX], bucket[KEYS_BUCKET_MAX];
    char readers[KEYS_MAX], tags[KEYS_MAX], intents[KEYS_MAX], slots[KEYS_MAX];
    size_t key_len, chan_len, bucket_len, readers_len, tags_len, intents_len, slots_len;
} shape_keys;

void shape_keys_of(const lockop *op, shape_keys *kb);

/* A release by who (the lease: the client's; op->value: a failed attempt's clean-up,
 * exactly what it wrote) of an exclusive holder, a reader or a permit, on mask. */
void shape_send_release(lockop *op, round *rd, const char *who, size_t who_len, uint64_t mask);

/* An extension of op's lease (op->ttl_ms; op->capped: up to the hold's bound), an
 * inspection of op's name, and a release of it whatever the lease (an admin's force),
 * sent in rd to the masters in mask: each script's keys and arguments are built here,
 * as an acquire's and a release's are (scripts.h says what each takes). */
void shape_send_extend(lockop *op, round *rd, uint64_t mask);
void shape_send_inspect(lockop *op, round *rd, uint64_t mask);
void shape_send_force(lockop *op, round *rd, uint64_t mask);

/* A release by r that hands the lock to the waiter h (docs/DESIGN.md section 1,
 * "Handoff"): where r's lease holds the key, h's attempt (h->value, its ttl and
 * lock-delay) replaces it; elsewhere it is h's acquire. */
void shape_send_handoff(lockop *h, const lockop *r, round *rd, uint64_t mask);

/* A waiting writer's mark (P#w:<name>, docs/DESIGN.md section 12) expires this long
 * after its last attempt wrote it; the writer's instance tries again (which renews it)
 * at least every SHAPE_INTENT_RENEW_MS while the writer waits, so that the marks of an
 * instance that died go within SHAPE_INTENT_MS. */
#define SHAPE_INTENT_MS 3000
#define SHAPE_INTENT_RENEW_MS 1000

/* Take op's marks back from every master an attempt of it sent one to (op->intent_mask),
 * fire and forget: the writer was answered (granted, refused, gone, out of time). */
void shape_send_unwant(lockop *op);

extern const lockop_shape shape_exclusive; /* a lock: one holder */
extern const lockop_shape shape_shared;    /* a reader: readers together, never a writer */
extern const lockop_shape shape_semaphore; /* a permit: a lock on one of N slots */

#endif
