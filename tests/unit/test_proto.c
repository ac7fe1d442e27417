/* test_proto.c -- the reply codes of proto.h against the scripts' own text: every code
 * literal that a script decoded by reply_decode() answers (scripts.c's Lua, read
 * through script_source()) has a name in proto.h for that script, and every name is
 * still answered by its script, so that the Lua and the decoder cannot drift apart.
 *
 * A code literal is, in the script's own function (after the prelude's helpers, which
 * answer nothing to the service): the first element of a table returned or kept as
 * the answer ("return {1, f}", "r = {1, bump(b)}"), a bare integer returned
 * ("return 0"), the base of a sum ("return {10 + c, ...}": a base) and what is added
 * to an answer's code ("r[1] = r[1] + 10": an offset). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "proto.h"
#include "scripts.h"

TestSuite(proto, .fini = unit_fini, .timeout = 30);

enum lit_kind { LIT_CODE, LIT_BASE, LIT_OFFSET };

typedef struct lit {
    int kind;
    long value;
} lit;

#define MAX_LITS 64

/* The code literals of src (the whole text: the caller cuts it), in order; returns how
 * many (at most max). */
static size_t scan(const char *src, lit *out, size_t max)
{
    size_t n = 0;
    for (const char *p = src; *p && n < max; p++) {
        const char *q = NULL;
        int table = 0;
        if (strncmp(p, "return ", 7) == 0 && (p == src || !isalnum((unsigned char)p[-1]))) {
            q = p + 7;
        } else if (strncmp(p, "r = {", 5) == 0 && (p == src || !isalnum((unsigned char)p[-1]))) {
            q = p + 4;
        } else if (strncmp(p, "r[1] = r[1] + ", 14) == 0) {
            q = p + 14;
            if (isdigit((unsigned char)*q))
                out[n++] = (lit){LIT_OFFSET, strtol(q, NULL, 10)};
            continue;
        } else {
            continue;
        }
        if (*q == '{') {
            table = 1;
            q++;
            while (*q == ' ')
                q++;
        }
        const char *d = q;
        if (*d == '-')
            d++;
        if (!isdigit((unsigned char)*d))
            continue; /* a value, a variable, a call: no code */
        char *end;
        long v = strtol(q, &end, 10);
        if (isalnum((unsigned char)*end) || *end == '_' || *end == '.')
            continue;
        int base = strncmp(end, " + ", 3) == 0;
        if (!table && !base && *end == ',')
            continue; /* "return 0, 0, nil": a helper's several values */
        out[n++] = (lit){base ? LIT_BASE : LIT_CODE, v};
    }
    return n;
}

/* The script's own function: what follows the prelude (its shared helpers). */
static const char *own_part(int id)
{
    const char *src = script_source(id);
    const char *f = strstr(src, "\nlocal f = function(");
    cr_assert_not_null(f, "script %d: where its function starts ('local f = ')", id);
    return f;
}

/* What proto.h names for each script decoded by reply_decode(). */
static const struct named {
    int id;
    const char *name;
    long codes[8];     /* -1 ends */
    long bases[4];
    long offsets[4];
} named[] = {
    {SCRIPT_ACQUIRE, "ACQUIRE",
     {PROTO_ACQ_REFUSED, PROTO_ACQ_GRANTED, PROTO_ACQ_ADOPTED, -1}, {-1}, {-1}},
    {SCRIPT_SHARED, "SHARED",
     {PROTO_ACQ_REFUSED, PROTO_ACQ_GRANTED, PROTO_ACQ_ADOPTED, -1}, {-1}, {-1}},
    {SCRIPT_SEM_ACQUIRE, "SEM_ACQUIRE",
     {PROTO_ACQ_REFUSED, PROTO_ACQ_GRANTED, PROTO_ACQ_ADOPTED, -1}, {-1}, {-1}},
    {SCRIPT_HANDOFF, "HANDOFF",
     {PROTO_ACQ_REFUSED, PROTO_ACQ_GRANTED, PROTO_ACQ_ADOPTED, PROTO_HANDOFF_REPLACED, -1},
     {PROTO_HANDOFF_KEPT, -1}, {PROTO_HANDOFF_READER, -1}},
    {SCRIPT_RELEASE, "RELEASE", {PROTO_REL_NOT_OURS, PROTO_REL_DELETED, -1}, {PROTO_REL_KEPT, -1},
     {-1}},
    {SCRIPT_SEM_RELEASE, "SEM_RELEASE", {PROTO_REL_NOT_OURS, PROTO_REL_DELETED, -1}, {-1}, {-1}},
    {SCRIPT_EXTEND, "EXTEND", {PROTO_EXT_REFUSED, PROTO_EXT_EXTENDED, PROTO_EXT_PAST_BOUND, -1},
     {-1}, {-1}},
    {SCRIPT_SEM_EXTEND, "SEM_EXTEND", {PROTO_EXT_REFUSED, PROTO_EXT_EXTENDED, -1}, {-1}, {-1}},
    {SCRIPT_FORCE, "FORCE", {PROTO_FORCE_NO_KEY, PROTO_FORCE_DELETED, PROTO_FORCE_RESTING, -1},
     {-1}, {-1}},
};

static int in(const long *set, long v)
{
    for (; *set != -1; set++)
        if (*set == v)
            return 1;
    return 0;
}

static const long *set_of(const struct named *s, int kind)
{
    return kind == LIT_CODE ? s->codes : kind == LIT_BASE ? s->bases : s->offsets;
}

static const char *kind_name(int kind)
{
    return kind == LIT_CODE ? "code" : kind == LIT_BASE ? "base" : "offset";
}

Test(proto, the_scan_finds_every_kind_of_code_literal)
{
    lit l[MAX_LITS];
    const char *lua = "local function h(v)\n  if not v then return 0, 0, nil end\n  return v\nend\n"
                      "if x then return {7, f} end\n"
                      "if y then return {30 + c, p} end\n"
                      "local r = {4, bump(b)}\n"
                      "if gone then r[1] = r[1] + 40 end\n"
                      "if z then return 5 end\n"
                      "return {false, p}\n"
                      "return redis.call('ZREM', K[1], lease)\n";
    size_t n = scan(lua, l, MAX_LITS);
    cr_assert_eq(n, 5, "found %zu", n);
    cr_assert(l[0].kind == LIT_CODE && l[0].value == 7);
    cr_assert(l[1].kind == LIT_BASE && l[1].value == 30);
    cr_assert(l[2].kind == LIT_CODE && l[2].value == 4);
    cr_assert(l[3].kind == LIT_OFFSET && l[3].value == 40);
    cr_assert(l[4].kind == LIT_CODE && l[4].value == 5);
}

Test(proto, every_code_a_script_answers_has_a_name)
{
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        const struct named *s = &named[k];
        lit l[MAX_LITS];
        size_t n = scan(own_part(s->id), l, MAX_LITS);
        cr_assert_lt(n, MAX_LITS, "SCRIPT_%s: too many to count", s->name);
        for (size_t i = 0; i < n; i++)
            cr_expect(in(set_of(s, l[i].kind), l[i].value),
                      "SCRIPT_%s answers the %s %ld, which proto.h does not name for it",
                      s->name, kind_name(l[i].kind), l[i].value);
    }
}

Test(proto, every_name_is_answered_by_its_script)
{
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        const struct named *s = &named[k];
        lit l[MAX_LITS];
        size_t n = scan(own_part(s->id), l, MAX_LITS);
        for (int kind = LIT_CODE; kind <= LIT_OFFSET; kind++)
            for (const long *v = set_of(s, kind); *v != -1; v++) {
                int seen = 0;
                for (size_t i = 0; i < n; i++)
                    seen |= l[i].kind == kind && l[i].value == *v;
                cr_expect(seen, "proto.h names the %s %ld for SCRIPT_%s, which it never answers",
                          kind_name(kind), *v, s->name);
            }
    }
}
