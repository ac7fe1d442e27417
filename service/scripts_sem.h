/* scripts_sem.h -- a semaphore's scripts (scripts_sem.c). */
#ifndef RL_SCRIPTS_SEM_H
#define RL_SCRIPTS_SEM_H

/* The Lua source of script id when it is one of scripts_sem.c's, else NULL
 * (script_source() in scripts.c asks each module in turn). */
const char *scripts_sem_source(int id);

#endif
