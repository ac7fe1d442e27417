/* watch.c -- the watchers of a worker (see watch.h). */
#include "watch.h"

#include <string.h>

void watch_env_init(watch_env *env, lockop_env *ops)
{
    env->ops = ops;
    env->n = 0;
    list_init(&env->watchers);
}

void watch_add(watch_env *env, watcher *w)
{
    w->env = env;
    list_insert_head(&env->watchers, &w->link);
    __atomic_add_fetch(&env->n, 1, __ATOMIC_RELAXED);
    if (env->ops->watch)
        env->ops->watch(env->ops, w->name, w->len, 1);
}

void watch_remove(watcher *w)
{
    watch_env *env = w->env;
    if (!env)
        return;
    list_remove(&w->link);
    w->env = NULL;
    __atomic_sub_fetch(&env->n, 1, __ATOMIC_RELAXED);
    if (env->ops->watch)
        env->ops->watch(env->ops, w->name, w->len, 0);
}

void watch_wake(watch_env *env, const char *name, size_t len)
{
    /* A callback may unlist its own watcher (never another's): list_foreach allows it. */
    list_foreach(node, &env->watchers) {
        watcher *w = list_data(node, watcher, link);
        if (w->len == len && memcmp(w->name, name, len) == 0)
            w->changed(w);
    }
}
