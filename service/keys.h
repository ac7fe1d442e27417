/* keys.h -- every key and channel name redlockd uses on a master, in one place.
 *
 * Under the configured prefix P:
 *   P<name>               a lock (names are [A-Za-z0-9._:/-], never '#')
 *   P#set:<lease>         the names of a multi-name lock, under its lease
 *   P#master              the master's record: run id, base, counters, quarantine mark
 *   P#quarantine          the quarantine delay's own key (its pttl is the delay left)
 *   P#expiry              a key that outlives every lock-state key written on the master
 *                         (its pttl: how long the longest of them may still live), read
 *                         by the repair of a peer that lost its data (docs/DESIGN.md §4)
 *   P#released:<name>     the channel a release of name is announced on
 *   P#r:<name>            the readers of a shared lock (sorted set: lease -> expiry)
 *   P#t:<name>            their attempts' tags (hash: lease -> tag)
 *   P#w:<name>            the writers waiting for it (sorted set: lease -> until when)
 *   P#sem:<name>          a semaphore's record (its number of permits); the operation
 *                         layer calls the semaphore "#sem:<name>" (KEYS_SEM): its queue,
 *                         release channel and fencing bucket go by that name
 *   P#sem:<name>#<i>      permit i of it (a lock key)
 *   P#anchor              a channel nobody publishes on, that every subscriber
 *                         connection follows (notify.c says why)
 *   P<name-prefix>*       the SCAN pattern of GET /locks (never a '#' key)
 *   b<k>                  a field of the record: the fencing counter of the names whose
 *                         hash is k modulo KEYS_BUCKETS
 * Lock names cannot contain '#', so no lock key meets the service's own keys.
 * The scripts (scripts_multi.c) build the multi-name keys and channels from the prefix with
 * the same suffixes (KEYS_SET, KEYS_RELEASED). */
#ifndef RL_KEYS_H
#define RL_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define KEYS_SET "#set:"
#define KEYS_RELEASED "#released:"
#define KEYS_RECORD "#master"
#define KEYS_QUARANTINE "#quarantine"
#define KEYS_EXPIRY "#expiry"
#define KEYS_ANCHOR "#anchor"
#define KEYS_READERS "#r:"
#define KEYS_TAGS "#t:"
#define KEYS_INTENTS "#w:"
#define KEYS_SEM "#sem:"

/* Room for any key or channel built here (prefix up to 127 bytes, names up to 255,
 * leases up to 128). */
#define KEYS_MAX 512
/* Room for a bucket field name ("b16383"). */
#define KEYS_BUCKET_MAX 16
/* Buckets of fencing counters: a name's is its hash modulo this. */
#define KEYS_BUCKETS 16384

/* The hash names are kept under: buckets, waiter queues, the worker that keeps a
 * name, holder fingerprints.  FNV-1a's prime with an offset basis one digit short of
 * the standard one; it must never change, since a name moved to another bucket could
 * be granted a token below its last one (tests/unit/test_keys.c pins it). */
uint64_t keys_name_hash(const char *name, size_t len);

/* Each writes into buf (cap bytes, NUL-terminated) and returns the length; a result
 * that does not fit is cut (callers size buf with KEYS_MAX). */
size_t keys_lock(const char *prefix, const char *name, size_t len, char *buf, size_t cap);
size_t keys_set(const char *prefix, const char *lease, size_t len, char *buf, size_t cap);
size_t keys_record(const char *prefix, char *buf, size_t cap);
size_t keys_quarantine(const char *prefix, char *buf, size_t cap);
size_t keys_expiry(const char *prefix, char *buf, size_t cap);
size_t keys_released(const char *prefix, const char *name, size_t len, char *buf, size_t cap);
size_t keys_anchor(const char *prefix, char *buf, size_t cap);
/* A shared lock's readers, their tags, the writers waiting (KEYS_READERS, ...). */
size_t keys_shared(const char *prefix, const char *kind, const char *name, size_t len, char *buf,
                   size_t cap);
/* The key of permit slot of a semaphore, from its operation name ("#sem:<name>");
 * slot < 0: the prefix of every slot's key ("P#sem:<name>#"). */
size_t keys_sem_slot(const char *prefix, const char *name, size_t len, int slot, char *buf,
                     size_t cap);

/* The SCAN MATCH pattern of the lock keys whose names start with name_prefix (may be
 * empty): the key prefix with its glob characters escaped, then the name prefix and
 * '*'; with an empty name prefix "[^#]*", so that the service's own keys (P#...) never
 * match.  Fits KEYS_MAX (prefix up to 127 bytes, each escaped to 2 at most). */
size_t keys_scan_pattern(const char *prefix, const char *name_prefix, size_t len, char *buf,
                         size_t cap);
/* The bucket field of name's fencing counter ("b<k>"). */
size_t keys_bucket(const char *name, size_t len, char *buf, size_t cap);

/* If channel is a release announcement under prefix, the name it announces (a pointer
 * into channel, *len set); else NULL. */
const char *keys_released_name(const char *prefix, const char *channel, size_t channel_len,
                               size_t *len);

#endif
