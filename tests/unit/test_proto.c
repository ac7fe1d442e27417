/* test_proto.c -- the reply codes of proto.h, held against both sides.
 *
 * 1. The C sources of the scripts (service/scripts*.c and .h, read as text): no Lua
 *    string literal writes a code bare.  Every code goes through its proto.h name,
 *    stringified (PROTO_S), so a literal digit in a code position is a code that
 *    bypasses proto.h.  A code position is what follows, inside one string literal,
 *    "return {" and "return " (a table's first element, or an integer answered),
 *    "r = {" (an answer kept), "[1] = ", "[1] == ", "[1] + " (an answer's code set,
 *    read or offset) and "{<n>}" (a table of a code alone).  The shared prelude
 *    (#define PRELUDE) is skipped: its helpers answer nothing to the service.
 * 2. The C that reads the answers (reply.c, multilock.c, master.c, trust.c, redlock.c,
 *    resync.c, listop.c): no reply integer or marker state is compared with a literal
 *    ("->integer == 1", "st == 2", "state != 0").
 * 3. The scripts' own text as sent (script_source()): every code literal that a
 *    script decoded by reply_decode() answers has a name in proto.h for that script,
 *    and every name is still answered by its script.
 *
 * A code literal of 3 is, in the script's own function (after the prelude's helpers):
 * the first element of a table returned or kept as the answer ("return {1, f}",
 * "r = {1, bump(b)}"), a bare integer returned ("return 0"), the base of a sum
 * ("return {10 + c, ...}": a base) and what is added to an answer's code ("r[1] = r[1]
 * + 10": an offset). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <glob.h>
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

/* ---- 1 and 2: the C sources, read as text ---- */

/* The repository's root, from this file's own path (the build compiles it from there). */
static void root_path(char *out, size_t len, const char *rel)
{
    const char *self = __FILE__;
    const char *tail = strstr(self, "tests/unit/test_proto.c");
    int n = tail ? (int)(tail - self) : 0;
    snprintf(out, len, "%.*s%s", n, self, rel);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Splits C text into what lies outside comments, strings and character constants
 * (code, each of those replaced by a space) and the string literals' contents, one
 * literal a line (strs).  Skips the body of #define PRELUDE when skip_prelude. */
static void split_c(const char *src, int skip_prelude, char *code, char *strs)
{
    const char *p = src;
    char *c = code, *t = strs;
    int bol = 1;
    while (*p) {
        if (bol && skip_prelude) {
            const char *q = p;
            while (*q == ' ' || *q == '\t')
                q++;
            if (strncmp(q, "#define PRELUDE", 15) == 0 && !isalnum((unsigned char)q[15]) && q[15] != '_') {
                while (*p && !(*p == '\n' && p[-1] != '\\'))
                    p++;
                continue;
            }
        }
        bol = 0;
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
            *c++ = ' ';
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
        } else if (*p == '"' || *p == '\'') {
            char q = *p++;
            while (*p && *p != q) {
                if (*p == '\\' && p[1])
                    *(q == '"' ? t++ : c) = *p++; /* an escape: kept as written */
                if (q == '"')
                    *t++ = *p;
                p++;
            }
            if (*p)
                p++;
            if (q == '"')
                *t++ = '\n';
            *c++ = ' ';
        } else {
            bol = *p == '\n';
            *c++ = *p++;
        }
    }
    *c = '\0';
    *t = '\0';
}

/* The first code written bare in one literal's text (a line of strs), or NULL. */
static const char *bare_code(const char *text, size_t len)
{
    static const char *const at[] = {"return {", "return ", "r = {", "[1] = ", "[1] == ", "[1] + "};
    for (size_t i = 0; i < len; i++) {
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            size_t n = strlen(at[k]);
            if (i + n > len || strncmp(text + i, at[k], n) != 0)
                continue;
            if (k == 1 && i > 0 && (isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_'))
                continue;
            const char *d = text + i + n;
            if (*d == '-')
                d++;
            if (d < text + len && isdigit((unsigned char)*d))
                return text + i;
        }
        if (text[i] == '{' && i + 2 < len && isdigit((unsigned char)text[i + 1])) {
            const char *d = text + i + 1;
            while (isdigit((unsigned char)*d))
                d++;
            if (*d == '}')
                return text + i;
        }
    }
    return NULL;
}

/* How many literals of strs write a code bare; the first is put in first. */
static int count_bare(const char *strs, char *first, size_t firstlen)
{
    int n = 0;
    for (const char *l = strs; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *b = bare_code(l, len);
        if (b && n++ == 0)
            snprintf(first, firstlen, "%.*s", (int)(len - (size_t)(b - l)), b);
        l += len + (e ? 1 : 0);
    }
    return n;
}

Test(proto, the_source_scan_finds_a_bare_code)
{
    const char *c_src = "#define PRELUDE \"local function h(v)\\n\" \\\n"
                        "    \"  return 0\\n\"\n"
                        "#define FN \"  return {\" PROTO_S(PROTO_ACQ_GRANTED) \", f}\\n\"\n";
    char code[512], strs[512], first[128];
    split_c(c_src, 1, code, strs);
    cr_assert_eq(count_bare(strs, first, sizeof first), 0, "named, or in the prelude: %s", strs);
    const char *bad[] = {"\"  return {1, f}\\n\"", "\"  return 0\\n\"", "\"  r = {2, cur(b)}\"",
                         "\"  r[1] = 0\\n\"", "\"if gone then r[1] = r[1] + 10 end\"",
                         "\"until out[1] == 1\"", "\"local out = {0}, '0'\"",
                         "\"then return {-1, names} end\"", "\"return {20 + c, p}\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        split_c(bad[i], 1, code, strs);
        cr_expect_eq(count_bare(strs, first, sizeof first), 1, "%s", bad[i]);
    }
    const char *fine[] = {"\"return {false, p}\"", "\"return r\"", "\"  a = {3, 7, \"",
                          "\"return redis.call('ZREM', K[1], lease)\"", "\"local r = {}\"",
                          "/* return {1, f} */", "\"r = {\" PROTO_S(X) \", 1, p}\""};
    for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
        split_c(fine[i], 1, code, strs);
        cr_expect_eq(count_bare(strs, first, sizeof first), 0, "%s", fine[i]);
    }
}

Test(proto, no_script_writes_a_code_bare)
{
    char pattern[512];
    glob_t g;
    size_t files = 0, codes = 0;
    const char *globs[] = {"service/scripts*.c", "service/scripts*.h"};
    for (size_t k = 0; k < 2; k++) {
        root_path(pattern, sizeof pattern, globs[k]);
        cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no file matches %s", pattern);
        for (size_t i = 0; i < g.gl_pathc; i++) {
            char *src = slurp(g.gl_pathv[i]);
            size_t n = strlen(src) + 1;
            char *code = malloc(n), *strs = malloc(n), first[160];
            split_c(src, 1, code, strs);
            int bare = count_bare(strs, first, sizeof first);
            cr_expect_eq(bare, 0, "%s writes %d code(s) bare in its Lua, the first: \"%s\"; use "
                         "its proto.h name (PROTO_S)", g.gl_pathv[i], bare, first);
            for (const char *p = strstr(src, "PROTO_S(PROTO_"); p; p = strstr(p + 1, "PROTO_S(PROTO_"))
                codes++;
            files++;
            free(src);
            free(code);
            free(strs);
        }
        globfree(&g);
    }
    cr_assert_geq(files, 2, "the scripts' sources were found");
    cr_assert_geq(codes, 50, "the scripts write their codes through proto.h (%zu found)", codes);
}

Test(proto, no_decoder_compares_a_code_with_a_literal)
{
    static const char *const files[] = {"service/reply.c",   "service/multilock.c",
                                        "service/master.c",  "service/trust.c",
                                        "service/redlock.c", "service/resync.c",
                                        "service/listop.c",  "service/master_connect.c",
                                        "service/lockop.c",  "service/acquire.c",
                                        "service/release.c", "service/finisher.c",
                                        "service/oplife.c"};
    static const char *const lhs[] = {"integer", "seen_state", "state", "st"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512];
        root_path(path, sizeof path, files[f]);
        char *src = slurp(path);
        size_t n = strlen(src) + 1;
        char *code = malloc(n), *strs = malloc(n);
        split_c(src, 0, code, strs);
        for (const char *p = code; *p; p++) {
            for (size_t k = 0; k < sizeof lhs / sizeof lhs[0]; k++) {
                size_t l = strlen(lhs[k]);
                if (strncmp(p, lhs[k], l) != 0 || (p > code && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
                    continue;
                const char *q = p + l;
                while (*q == ' ')
                    q++;
                if (!((q[0] == '=' || q[0] == '!') && q[1] == '='))
                    continue;
                q += 2;
                while (*q == ' ')
                    q++;
                if (*q == '-')
                    q++;
                const char *e = p;
                while (*e && *e != '\n')
                    e++;
                cr_expect(!isdigit((unsigned char)*q), "%s compares a code with a literal: %.*s",
                          files[f], (int)(e - p), p);
            }
        }
        free(src);
        free(code);
        free(strs);
    }
}
