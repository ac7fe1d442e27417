/* scripts.h -- the Lua source of every script, by id.  Loaded once per connection
 * (SCRIPT LOAD) and called with EVALSHA; EVAL again on NOSCRIPT.  The ids, what each
 * script takes and what it answers are proto.h's (the script protocol); the text is
 * the script modules' (scripts.c lists them). */
#ifndef RL_SCRIPTS_H
#define RL_SCRIPTS_H

#include "proto.h"

/* The Lua source of a script. */
const char *script_source(int id);

/* The code of script id inside SCRIPT_BATCH, or 0 if it is not batched there or a
 * call with nkeys keys and nargs arguments is not the shape the batch expects. */
char script_batch_code(int id, int nkeys, int nargs);

#endif
