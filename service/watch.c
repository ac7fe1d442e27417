/* watch.c -- the watchers of a worker (see watch.h). */
#include "watch.h"

#include <string.h>

void watch_add(watch_env *env, watcher *w)
{
    w->env = env;
    w->prev = NULL;
    w->next = env->head;
    if (env->head)
        env->head->prev = w;
    env->head = w;
    __atomic_add_fetch(&env->n, 1, __ATOMIC_RELAXED);
    if (env->ops->watch)
        env->ops->watch(env->ops, w->name, w->len, 1);
}

void watch_remove(watcher *w)
{
    watch_env *env = w->env;
    if (!env)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else
        env->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->env = NULL;
    __atomic_sub_fetch(&env->n, 1, __ATOMIC_RELAXED);
    if (env->ops->watch)
        env->ops->watch(env->ops, w->name, w->len, 0);
}

void watch_wake(watch_env *env, const char *name, size_t len)
{
    /* A callback may unlist its own watcher (never another's): take next first. */
    for (watcher *w = env->head, *next; w; w = next) {
        next = w->next;
        if (w->len == len && memcmp(w->name, name, len) == 0)
            w->changed(w);
    }
}
