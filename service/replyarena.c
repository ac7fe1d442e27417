/* replyarena.c -- hiredis replies built in a per-connection bump arena (see replyarena.h). */
#include "replyarena.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN _Alignof(redisReply)

/* An extra block, for the part of one reply the first block could not hold. */
typedef struct block {
    struct block *next;
    size_t cap;
    /* the data follows (offset sizeof(block), a multiple of ALIGN) */
} block;

typedef struct replyarena {
    char *cur, *end;      /* free room in the block being filled */
    block *extra;         /* extra blocks of this reply, newest first */
    size_t extra_bytes;   /* their capacity, summed */
    size_t last_cap;      /* the newest extra block's capacity (the next doubles it) */
    void *root;           /* the top-level reply being built or read; NULL: none */
    replyarena_stats st;
    char first[];         /* REPLYARENA_FIRST bytes; the root is always at first[0] */
} replyarena;

_Static_assert(sizeof(block) % ALIGN == 0, "extra block data misaligned");
_Static_assert(offsetof(replyarena, first) % ALIGN == 0, "first block misaligned");
_Static_assert(REPLYARENA_FIRST >= sizeof(redisReply), "first block too small for a root");

static size_t used_now(const replyarena *a)
{
    if (!a->extra)
        return (size_t)(a->cur - a->first);
    /* the first block (full enough to spill), the full extra blocks and the newest one's part */
    return REPLYARENA_FIRST + a->extra_bytes - (size_t)(a->end - a->cur);
}

/* Forget the reply: the extra blocks go, the first block is empty again. */
static void reset(replyarena *a)
{
    size_t used = used_now(a);
    if (used > a->st.peak)
        a->st.peak = used;
    while (a->extra) {
        block *b = a->extra;
        a->extra = b->next;
        free(b);
    }
    a->extra_bytes = 0;
    a->last_cap = 0;
    a->cur = a->first;
    a->end = a->first + REPLYARENA_FIRST;
    a->root = NULL;
    a->st.blocks = 0;
    POISON(a->first, REPLYARENA_FIRST);
}

/* n bytes, aligned for a redisReply (or a pointer) when align, else anywhere; NULL when
 * out of memory. */
static void *take(replyarena *a, size_t n, int align)
{
    size_t pad = align ? (size_t)(-(uintptr_t)a->cur & (ALIGN - 1)) : 0;
    size_t room = (size_t)(a->end - a->cur);
    char *p;
    if (pad <= room && n <= room - pad) {
        p = a->cur + pad;
        a->cur = p + n;
        UNPOISON(p, n);
        return p;
    }
    /* Spill: a new block, twice the last (at least the first block's size). */
    size_t cap = a->last_cap ? a->last_cap * 2 : REPLYARENA_FIRST;
    if (cap < n)
        cap = n;
    if (cap > SIZE_MAX - sizeof(block))
        return NULL;
    block *b = malloc(sizeof(block) + cap);
    if (!b)
        return NULL;
    b->next = a->extra;
    b->cap = cap;
    a->extra = b;
    a->extra_bytes += cap;
    a->last_cap = cap;
    a->st.blocks++;
    a->st.spills++;
    p = (char *)(b + 1);
    a->cur = p + n;
    a->end = p + cap;
    return p;
}

/* A new reply object of the task's type, not linked yet; the root of a reply is always
 * the first object taken after a reset, so it sits at first[0]. */
static redisReply *object(replyarena *a, const redisReadTask *task, int type)
{
    if (!task->parent && a->root)
        return NULL; /* one top-level reply at a time: never overlay a live one */
    redisReply *r = take(a, sizeof *r, 1);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->type = type;
    if (!task->parent)
        a->root = r;
    return r;
}

/* The object is complete: into its parent's element array, as hiredis does. */
static void *linked(const redisReadTask *task, redisReply *r)
{
    if (task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

/* Out of memory while building r: the reader fails and frees its root (r->reply) if it
 * had one; a root that failed itself was never handed to it, so it goes here. */
static void *failed(replyarena *a, const redisReply *r)
{
    if (a->root == r)
        reset(a);
    return NULL;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    replyarena *a = task->privdata;
    redisReply *r = object(a, task, task->type); /* REDIS_REPLY_STRING, _STATUS or _ERROR */
    if (!r)
        return NULL;
    char *buf = len < SIZE_MAX ? take(a, len + 1, 0) : NULL;
    if (!buf)
        return failed(a, r);
    memcpy(buf, str, len);
    buf[len] = '\0';
    r->str = buf;
    r->len = len;
    return linked(task, r);
}

static void *create_array(const redisReadTask *task, int elements)
{
    replyarena *a = task->privdata;
    redisReply *r = object(a, task, REDIS_REPLY_ARRAY);
    if (!r)
        return NULL;
    if (elements > 0) {
        size_t n = (size_t)elements;
        if (n > SIZE_MAX / sizeof *r->element || !(r->element = take(a, n * sizeof *r->element, 1)))
            return failed(a, r);
        memset(r->element, 0, n * sizeof *r->element); /* as hiredis's calloc */
        r->elements = n;
    }
    return linked(task, r);
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = object(task->privdata, task, REDIS_REPLY_INTEGER);
    if (!r)
        return NULL;
    r->integer = value;
    return linked(task, r);
}

static void *create_nil(const redisReadTask *task)
{
    redisReply *r = object(task->privdata, task, REDIS_REPLY_NIL);
    return r ? linked(task, r) : NULL;
}

/* hiredis calls this on top-level replies only (the root, at first[0]). */
static void free_object(void *reply)
{
    if (!reply)
        return;
    replyarena *a = (replyarena *)((char *)reply - offsetof(replyarena, first));
    if (a->root != reply)
        return; /* freed already */
    a->st.replies++;
    reset(a);
}

static redisReplyObjectFunctions arena_fns = {
    create_string, create_array, create_integer, create_nil, free_object,
};

/* After uninstall: builds nothing (the reader fails with "Out of memory"), frees nothing. */
static void *none_string(const redisReadTask *t, char *s, size_t n)
{
    (void)t, (void)s, (void)n;
    return NULL;
}
static void *none_array(const redisReadTask *t, int n)
{
    (void)t, (void)n;
    return NULL;
}
static void *none_integer(const redisReadTask *t, long long v)
{
    (void)t, (void)v;
    return NULL;
}
static void *none_nil(const redisReadTask *t)
{
    (void)t;
    return NULL;
}
static void none_free(void *p)
{
    (void)p;
}

static redisReplyObjectFunctions none_fns = {
    none_string, none_array, none_integer, none_nil, none_free,
};

int replyarena_install(redisReader *r)
{
    if (!r || r->reply)
        return -1;
    replyarena *a = malloc(sizeof *a + REPLYARENA_FIRST);
    if (!a)
        return -1;
    memset(a, 0, sizeof *a);
    a->st.first = REPLYARENA_FIRST;
    a->cur = a->first;
    reset(a);
    r->fn = &arena_fns;
    r->privdata = a;
    return 0;
}

void replyarena_uninstall(redisReader *r)
{
    if (!r || r->fn != &arena_fns)
        return;
    replyarena *a = r->privdata;
    r->reply = NULL; /* a partly built reply lives in the arena: it goes with it */
    r->fn = &none_fns;
    r->privdata = NULL;
    reset(a);
    UNPOISON(a->first, REPLYARENA_FIRST); /* back to malloc's own tracking */
    free(a);
}

int replyarena_stats_of(const redisReader *r, replyarena_stats *out)
{
    if (!r || r->fn != &arena_fns)
        return -1;
    const replyarena *a = r->privdata;
    *out = a->st;
    out->used = a->root ? used_now(a) : 0;
    return 0;
}
