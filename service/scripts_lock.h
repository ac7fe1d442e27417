/* scripts_lock.h -- the single-name lock scripts and SCRIPT_BATCH (scripts_lock.c). */
#ifndef RL_SCRIPTS_LOCK_H
#define RL_SCRIPTS_LOCK_H

/* The Lua source of script id when it is one of scripts_lock.c's, else NULL
 * (script_source() in scripts.c asks each module in turn). */
const char *scripts_lock_source(int id);

/* script_batch_code() of scripts.h: the code of script id inside SCRIPT_BATCH, or 0. */
char scripts_lock_batch_code(int id, int nkeys, int nargs);

#endif
