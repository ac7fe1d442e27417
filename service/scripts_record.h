/* scripts_record.h -- the scripts of a master's own record (scripts_record.c). */
#ifndef RL_SCRIPTS_RECORD_H
#define RL_SCRIPTS_RECORD_H

/* The Lua source of script id when it is one of scripts_record.c's, else NULL
 * (script_source() in scripts.c asks each module in turn). */
const char *scripts_record_source(int id);

#endif
