/* scripts_multi.h -- the scripts of a set of names (scripts_multi.c). */
#ifndef RL_SCRIPTS_MULTI_H
#define RL_SCRIPTS_MULTI_H

/* The Lua source of script id when it is one of scripts_multi.c's, else NULL
 * (script_source() in scripts.c asks each module in turn). */
const char *scripts_multi_source(int id);

#endif
