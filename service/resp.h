/* resp.h -- RESP (the Redis protocol) formatting of the commands on the hot path: bulk
 * strings, the EVALSHA head, one EVALSHA with its keys and arguments, and the builder
 * of a batched call (master.h), whose operations' keys and arguments are gathered
 * apart and joined behind one head when it leaves.  Commands are formatted here,
 * without hiredis's printf-style formatter, and handed to redisAsyncFormattedCommand;
 * the bytes are the ones redisFormatCommandArgv would make.
 *
 * Pure: bytes in memory, binary-safe (arguments may hold any byte, NUL and CRLF
 * included, or be empty); no I/O. */
#ifndef RL_RESP_H
#define RL_RESP_H

#include <stddef.h>

#define RESP_SHA_LEN 40      /* a script's SHA1 in hex, as EVALSHA takes it */
#define RESP_BULK_EXTRA 32   /* at least what a bulk string adds to its payload */
#define RESP_HEAD_MAX 128    /* at least what resp_put_evalsha_head() writes */

/* Append "$<n>\r\n<s>\r\n" at p (room: n + RESP_BULK_EXTRA); returns the end. */
char *resp_put_bulk(char *p, const char *s, size_t n);

/* Append "*<3+nkeys+nargs>\r\n", then EVALSHA, sha (RESP_SHA_LEN bytes) and nkeys as
 * bulk strings (room: RESP_HEAD_MAX); the keys and arguments follow.  Returns the end. */
char *resp_put_evalsha_head(char *p, size_t nkeys, size_t nargs, const char *sha);

/* EVALSHA sha with 1 + nkeys keys (first, then argv's nkeys) and argv's nargs
 * arguments (argv/lens hold keys then arguments), preceded, unless lead is NULL, by
 * one more argument lead (lead_len bytes: what every lock script takes first, its clock
 * window).  resp_evalsha_size() is room enough for resp_evalsha() (count the lead in
 * first_len), which returns the length written. */
size_t resp_evalsha_size(size_t first_len, size_t argc, const size_t *lens);
size_t resp_evalsha(char *buf, const char *sha, const char *first, size_t first_len,
                    const char *lead, size_t lead_len, size_t nkeys, size_t nargs,
                    const char *const *argv, const size_t *lens);

/* A batched call being built: one EVALSHA of a script that takes, after a first key,
 * every operation's keys, then for each operation a one-byte code and its arguments.
 * Zero it to start; the buffers are kept from one call to the next. */
typedef struct resp_batch {
    char *keys, *args;     /* bulk strings, in order (keys keeps room for the head) */
    size_t keys_len, keys_cap, args_len, args_cap;
    unsigned nkeys, nargs; /* nargs counts the codes */
} resp_batch;

/* Append one operation: nkeys keys then nargs arguments in argv/lens.  0, or -1 when
 * out of memory (nothing appended). */
int resp_batch_add(resp_batch *b, char code, size_t nkeys, size_t nargs, const char *const *argv,
                   const size_t *lens);

/* Join what was added into one EVALSHA sha: first as the first key, the operations'
 * keys, then (unless lead is NULL) the argument lead, then their codes and arguments.
 * skip_code (one operation sent as its own script): without its code.  Returns the
 * command (in b's buffer: valid until the next add) and its length in *len, and empties
 * b; or NULL when out of memory (b unchanged). */
const char *resp_batch_join(resp_batch *b, const char *sha, const char *first, size_t first_len,
                            const char *lead, size_t lead_len, int skip_code, size_t *len);

/* One operation's keys and arguments formatted once for all the masters of a round
 * (resp_batch_add_op() copies them; resp_batch_add() would format them again for each
 * master): the bytes resp_batch_add() writes, the code's bulk first among the
 * arguments. */
typedef struct resp_op {
    size_t nkeys, nargs;  /* nargs counts the code */
    const char *keys, *args;
    size_t keys_len, args_len;
} resp_op;

/* Room resp_op_format() needs for these keys and arguments. */
size_t resp_op_size(size_t nkeys, size_t nargs, const size_t *lens);

/* Format op (code, nkeys keys then nargs arguments of argv/lens) into buf, which has
 * resp_op_size() bytes at least. */
void resp_op_format(resp_op *op, char *buf, char code, size_t nkeys, size_t nargs,
                    const char *const *argv, const size_t *lens);

/* resp_batch_add() of an operation formatted by resp_op_format().  0 or -1. */
int resp_batch_add_op(resp_batch *b, const resp_op *op);

/* Forget what was added (the buffers are kept). */
void resp_batch_clear(resp_batch *b);

/* Free the buffers (b is then empty, as zeroed). */
void resp_batch_free(resp_batch *b);

#endif
