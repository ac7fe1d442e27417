/* test_scripts.c -- the script table of scripts.h: every script has a source, and the
 * shapes master.c batches by (script_batch_code) agree with the operations table
 * inside SCRIPT_BATCH, which reads each operation's keys and arguments by them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "unit.h"
#include "scripts.h"

TestSuite(scripts, .fini = unit_fini, .timeout = 60);

Test(scripts, every_id_has_a_source_and_others_none)
{
    for (int id = 0; id < SCRIPT__COUNT; id++)
        cr_assert(strlen(script_source(id)) > 10, "script %d", id);
    cr_assert_str_empty(script_source(-1));
    cr_assert_str_empty(script_source(SCRIPT__COUNT));
}

Test(scripts, batch_shapes_agree_with_the_lua_table)
{
    const char *src = script_source(SCRIPT_BATCH);
    int batched = 0;
    for (int id = 0; id < SCRIPT__COUNT; id++) {
        int found = 0;
        for (int nk = 0; nk <= 4; nk++)
            for (int na = 0; na <= 9; na++) {
                char code = script_batch_code(id, nk, na);
                if (!code)
                    continue;
                found++;
                char entry[48];
                snprintf(entry, sizeof entry, "if c == '%c' then op = {%d, %d, ", code, nk, na);
                cr_assert_not_null(strstr(src, entry), "script %d: '%s' in SCRIPT_BATCH", id, entry);
            }
        cr_assert_leq(found, 1, "script %d batches in one shape only", id);
        batched += found;
    }
    cr_assert_eq(batched, 10, "acquire, raise, release, extend, inspect, handoff, shared, and a "
                              "permit's acquire, release and extend");
    cr_assert_eq(script_batch_code(SCRIPT_ACQUIRE, 3, 7), 'a');
    cr_assert_eq(script_batch_code(SCRIPT_SHARED, 4, 5), 's');
    cr_assert_eq(script_batch_code(SCRIPT_ACQUIRE, 1, 5), 0, "a wrong shape is never batched");
    cr_assert_eq(script_batch_code(SCRIPT_SEM_ACQUIRE, 2, 9), 'S', "permits are batched too");
    cr_assert_eq(script_batch_code(SCRIPT_SEM_RELEASE, 1, 4), 'R');
    cr_assert_eq(script_batch_code(SCRIPT_SEM_EXTEND, 1, 4), 'E');
    cr_assert_eq(script_batch_code(SCRIPT_SEM_INSPECT, 1, 2), 0, "a permit's inspection goes alone");
    cr_assert_eq(script_batch_code(SCRIPT_MACQUIRE, 3, 4), 0);
    cr_assert_eq(script_batch_code(-1, 0, 0), 0);
    cr_assert_eq(script_batch_code(SCRIPT__COUNT, 0, 0), 0);
}

Test(scripts, each_single_operation_is_the_batched_function)
{
    /* The standalone script is "<prelude> local f = <function>" over the same text the
     * batch table holds, so the two can never drift apart. */
    const char *batch = script_source(SCRIPT_BATCH);
    const int ids[] = {SCRIPT_ACQUIRE,     SCRIPT_RAISE,       SCRIPT_RELEASE,
                       SCRIPT_EXTEND,      SCRIPT_INSPECT,     SCRIPT_HANDOFF,
                       SCRIPT_SHARED,      SCRIPT_SEM_ACQUIRE, SCRIPT_SEM_RELEASE,
                       SCRIPT_SEM_EXTEND};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *s = script_source(ids[i]);
        const char *start = strstr(s, "local f = function(");
        cr_assert_not_null(start, "script %d", ids[i]);
        const char *end =
            strstr(s, "\nlocal r = f({unpack(KEYS, 2)}, unpack(ARGV))\n");
        cr_assert_not_null(end);
        char fn[2048];
        size_t n = (size_t)(end - (start + 10));
        cr_assert_lt(n, sizeof fn);
        memcpy(fn, start + 10, n);
        fn[n] = '\0';
        cr_assert_not_null(strstr(batch, fn), "script %d's function is in the batch", ids[i]);
    }
}

Test(scripts, every_lock_script_checks_the_masters_record_first)
{
    /* A wiped or quarantined master must refuse before any write (docs/DESIGN.md). */
    const int ids[] = {SCRIPT_ACQUIRE, SCRIPT_RAISE,    SCRIPT_RELEASE, SCRIPT_EXTEND,
                       SCRIPT_INSPECT, SCRIPT_HANDOFF,  SCRIPT_BATCH,   SCRIPT_MACQUIRE,
                       SCRIPT_MRAISE,  SCRIPT_MRELEASE, SCRIPT_FORCE,   SCRIPT_SCAN,
                       SCRIPT_SHARED,  SCRIPT_SEM_ACQUIRE, SCRIPT_SEM_RELEASE, SCRIPT_SEM_EXTEND,
                       SCRIPT_SEM_INSPECT};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *s = script_source(ids[i]);
        /* the first line takes its clock window off ARGV (no call), the next checks */
        const char *first = "local W = table.remove(ARGV, 1) or ''\n";
        cr_assert(strncmp(s, first, strlen(first)) == 0, "script %d takes its window first", ids[i]);
        const char *check = strstr(s, "redis.call('HMGET', KEYS[1], 'base', 'q', 'nb')");
        cr_assert(check == s + strlen(first) + strlen("local M = "), "script %d starts with the check", ids[i]);
        cr_assert_not_null(strstr(s, SCRIPT_ERR_UNMARKED), "script %d", ids[i]);
        cr_assert_not_null(strstr(s, SCRIPT_ERR_QUARANTINED), "script %d", ids[i]);
        cr_assert_not_null(strstr(s, SCRIPT_ERR_CLOCK), "script %d checks its clock window", ids[i]);
    }
}

Test(scripts, an_owner_never_moves_the_adoption_mark_or_the_lease)
{
    /* adopted() puts '!' before the '\n' of an owner, untag() stops at the first '.' (or
     * the '@' of a bare lease's stamp),
     * and the inspect reply carries the owner as its 4th element (tests/integration's
     * scripts_live runs them). */
    const char *s = script_source(SCRIPT_BATCH);
    cr_assert_not_null(strstr(s, "return h .. '!' .. o"));
    cr_assert_not_null(strstr(s, "return {v, p, cur(b), o, n, longest, h, f, rest}"));
    cr_assert_eq(script_batch_code(SCRIPT_INSPECT, 2, 1), 'i', "inspect keeps its batch shape");
    cr_assert_eq(script_batch_code(SCRIPT_FORCE, 4, 2), 0, "force goes alone");
    cr_assert_eq(script_batch_code(SCRIPT_SCAN, 0, 4), 0, "scan goes alone");
}
