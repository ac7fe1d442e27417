/* test_jw.c -- the JSON writer of jw.h: escaping of quotes, backslashes and control
 * characters, commas between members and elements, numbers, and the overflow flag. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "unit.h"
#include "jw.h"

TestSuite(jw, .fini = unit_fini, .timeout = 60);

/* Parse what the writer produced; it must be valid JSON. */
static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    cr_assert_not_null(j, "not valid JSON: %s (%s at %d)", s, e.text, e.position);
    return j;
}

/* Parameters are copied into each test's own process: strings are inline arrays,
 * never pointers into the runner's memory. */
struct esc_case {
    char in[32];
    size_t len;
    char out[48];
};

#define E(lit, out) {lit, sizeof(lit) - 1, out}

ParameterizedTestParameters(jw, escape_table)
{
    static struct esc_case cases[] = {
        E("", ""),
        E("plain", "plain"),
        E("\"", "\\\""),
        E("\\", "\\\\"),
        E("a\"b\\c", "a\\\"b\\\\c"),
        E("\n", "\\n"),
        E("\r", "\\r"),
        E("\t", "\\t"),
        E("\b", "\\u0008"),
        E("\f", "\\u000c"),
        E("\x01", "\\u0001"),
        E("\x1f", "\\u001f"),
        E("\x10z", "\\u0010z"),
        E("\0", "\\u0000"),
        E("a\0b", "a\\u0000b"),
        E(" ", " "),
        E("/", "/"),
        E("\x7f", "\x7f"),
        E("caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac"),
        E("\"\"\"", "\\\"\\\"\\\""),
        E("end\n", "end\\n"),
        E("\nstart", "\\nstart"),
    };
    return cr_make_param_array(struct esc_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct esc_case *c, jw, escape_table)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_escape(&w, c->in, c->len);
    cr_assert_str_eq(buf, c->out);
    cr_assert_eq(jw_len(&w), strlen(c->out));
    cr_assert_eq(jw_overflowed(&w), 0);
}

Test(jw, every_byte_round_trips_through_a_json_parser)
{
    /* All bytes 0x00..0x7f in one string: escaped, parsed back, identical. */
    char in[128];
    for (int i = 0; i < 128; i++)
        in[i] = (char)i;
    char buf[1024];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_strn(&w, "s", in, sizeof in);
    jw_obj_close(&w);
    cr_assert_eq(jw_overflowed(&w), 0);
    json_t *j = parse(buf);
    json_t *s = json_object_get(j, "s");
    cr_assert_eq(json_string_length(s), sizeof in);
    cr_assert_eq(memcmp(json_string_value(s), in, sizeof in), 0);
    json_decref(j);
}

Test(jw, keys_are_escaped_too)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_int(&w, "we\"ird\n", 1);
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"we\\\"ird\\n\":1}");
    json_decref(parse(buf));
}

Test(jw, object_with_every_kind_of_member)
{
    char buf[512];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_str(&w, "s", "x");
    jw_key_strn(&w, "n", "abc", 2);
    jw_key_int(&w, "i", -42);
    jw_key_uint(&w, "u", UINT64_C(1) << 40);
    jw_key_bool(&w, "t", 1);
    jw_key_bool(&w, "f", 0);
    jw_key_double(&w, "d", 1.5);
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"s\":\"x\",\"n\":\"ab\",\"i\":-42,\"u\":1099511627776,"
                          "\"t\":true,\"f\":false,\"d\":1.500}");
    cr_assert_eq(jw_len(&w), strlen(buf));
    json_t *j = parse(buf);
    cr_assert_eq(json_object_size(j), 7);
    json_decref(j);
}

Test(jw, integer_extremes)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_int(&w, "min", LLONG_MIN);
    jw_key_int(&w, "max", LLONG_MAX);
    jw_key_uint(&w, "zero", 0);
    jw_key_uint(&w, "umax", UINT64_MAX); /* fencing tokens are uint64 */
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"min\":-9223372036854775808,\"max\":9223372036854775807,\"zero\":0,"
                          "\"umax\":18446744073709551615}");
}

Test(jw, double_has_three_decimals)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_double(&w, "a", 0.0);
    jw_key_double(&w, "b", 12.3456);
    jw_key_double(&w, "c", -0.0005);
    jw_obj_close(&w);
    json_t *j = parse(buf);
    cr_assert_str_eq(buf, "{\"a\":0.000,\"b\":12.346,\"c\":-0.001}");
    json_decref(j);
}

Test(jw, arrays_of_objects_get_commas_between_elements)
{
    char buf[256];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_int(&w, "n", 2);
    jw_arr_open(&w, "masters");
    for (int i = 0; i < 3; i++) {
        jw_obj_open(&w);
        jw_key_int(&w, "i", i);
        jw_key_str(&w, "s", "up");
        jw_obj_close(&w);
    }
    jw_arr_close(&w);
    jw_arr_open(&w, "empty");
    jw_arr_close(&w);
    jw_key_bool(&w, "after", 1);
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"n\":2,\"masters\":[{\"i\":0,\"s\":\"up\"},{\"i\":1,\"s\":\"up\"},"
                          "{\"i\":2,\"s\":\"up\"}],\"empty\":[],\"after\":true}");
    json_decref(parse(buf));
}

Test(jw, an_object_member_nests_with_commas_on_both_sides)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_int(&w, "a", 1);
    jw_key_obj_open(&w, "inner");
    jw_key_int(&w, "x", 2);
    jw_key_int(&w, "y", 3);
    jw_obj_close(&w);
    jw_key_obj_open(&w, "empty");
    jw_obj_close(&w);
    jw_key_bool(&w, "after", 0);
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"a\":1,\"inner\":{\"x\":2,\"y\":3},\"empty\":{},\"after\":false}");
    json_decref(parse(buf));
}

Test(jw, array_of_scalars_with_null_keys)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_arr_open(&w, NULL);
    jw_key_int(&w, NULL, 1);
    jw_key_str(&w, NULL, "two");
    jw_key_bool(&w, NULL, 0);
    jw_arr_close(&w);
    cr_assert_str_eq(buf, "[1,\"two\",false]");
    json_decref(parse(buf));
}

Test(jw, raw_fields_join_with_commas)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_raw_fields(&w, "\"a\":1,\"b\":2");
    jw_key_int(&w, "c", 3);
    jw_raw_fields(&w, "\"d\":null");
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"a\":1,\"b\":2,\"c\":3,\"d\":null}");
    json_decref(parse(buf));
}

Test(jw, raw_appends_verbatim)
{
    char buf[64];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "2024 info \"x\"");
    cr_assert_str_eq(buf, "2024 info \"x\"");
}

Test(jw, exact_fit_is_not_an_overflow)
{
    const char *want = "{\"k\":\"v\"}"; /* 9 bytes + NUL */
    char buf[10];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_str(&w, "k", "v");
    jw_obj_close(&w);
    cr_assert_eq(jw_overflowed(&w), 0);
    cr_assert_str_eq(buf, want);
}

Test(jw, one_byte_short_overflows_and_stays_terminated)
{
    char buf[10];
    memset(buf, 'Z', sizeof buf);
    jw w;
    jw_init(&w, buf, 9);
    jw_obj_open(&w);
    jw_key_str(&w, "k", "v");
    jw_obj_close(&w);
    cr_assert_eq(jw_overflowed(&w), 1);
    cr_assert_lt(jw_len(&w), 9);
    cr_assert_eq(buf[jw_len(&w)], '\0');
    cr_assert_eq(buf[9], 'Z', "wrote past cap");
}

Test(jw, overflow_is_sticky_even_if_later_pieces_would_fit)
{
    char buf[16];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_raw(&w, "0123456789");
    jw_raw(&w, "0123456789"); /* does not fit */
    size_t len = jw_len(&w);
    cr_assert_eq(jw_overflowed(&w), 1);
    jw_raw(&w, "x"); /* would fit, but the output is already broken */
    cr_assert_eq(jw_len(&w), len);
    cr_assert_str_eq(buf, "0123456789");
}

Test(jw, escaping_respects_the_capacity)
{
    char buf[32];
    memset(buf, 'Z', sizeof buf);
    jw w;
    jw_init(&w, buf, 8);
    jw_escape(&w, "\x01\x02\x03", 3); /* 18 bytes escaped */
    cr_assert_eq(jw_overflowed(&w), 1);
    cr_assert_lt(jw_len(&w), 8);
    for (size_t i = 8; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 'Z', "wrote past cap at %zu", i);
}

Test(jw, zero_capacity_overflows_without_writing)
{
    char buf[1] = {'Z'};
    jw w;
    jw_init(&w, buf, 0);
    jw_raw(&w, "x");
    cr_assert_eq(jw_overflowed(&w), 1);
    cr_assert_eq(jw_len(&w), 0);
    cr_assert_eq(buf[0], 'Z');
}

Test(jw, init_resets_state)
{
    char buf[32];
    jw w;
    jw_init(&w, buf, 4);
    jw_raw(&w, "too long");
    cr_assert(jw_overflowed(&w));
    jw_init(&w, buf, sizeof buf);
    cr_assert_eq(jw_overflowed(&w), 0);
    cr_assert_eq(jw_len(&w), 0);
    cr_assert_str_eq(buf, "");
    jw_obj_open(&w);
    jw_key_int(&w, "a", 1);
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"a\":1}");
}

Test(jw, long_strings_are_written_whole)
{
    static char in[3000], buf[8192];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)(i % 7 == 0 ? '"' : 'a' + i % 26);
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_strn(&w, "s", in, sizeof in);
    jw_obj_close(&w);
    cr_assert_eq(jw_overflowed(&w), 0);
    json_t *j = parse(buf);
    cr_assert_eq(json_string_length(json_object_get(j, "s")), sizeof in);
    cr_assert_eq(memcmp(json_string_value(json_object_get(j, "s")), in, sizeof in), 0);
    json_decref(j);
}

/* Found by fuzz_body: jansson's error text and %.64s can carry broken UTF-8; the
 * reply must stay valid JSON. */
Test(jw, broken_utf8_becomes_replacement_characters)
{
    char buf[128];
    jw w;
    jw_init(&w, buf, sizeof buf);
    jw_obj_open(&w);
    jw_key_str(&w, "m", "a\xd0" "b\xc3\xa9" "c\xe2\x82");
    jw_obj_close(&w);
    cr_assert_str_eq(buf, "{\"m\":\"a\\ufffdb\xc3\xa9" "c\\ufffd\\ufffd\"}");
}

/* A duration in ms of a whole number of microseconds (the request log's duration_ms)
 * comes out exactly as "%.3f" wrote it, and so do the numbers around it. */
Test(jw, a_duration_has_the_digits_printf_gave_it)
{
    for (long long us = 0; us < 3000000; us += (us < 20000 ? 1 : 997)) {
        double v = (double)us / 1000.0;
        char buf[96], want[64];
        jw w;
        jw_init(&w, buf, sizeof buf);
        jw_key_double(&w, "d", v);
        snprintf(want, sizeof want, "\"d\":%.3f", v);
        buf[jw_len(&w)] = '\0';
        cr_assert_str_eq(buf, want, "%lld us", us);
    }
    const double others[] = {0.0004, 0.0006, 1.2345678, 99.9995, 123456.789, 5e11, -1.5, -0.0004, 1e13};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char buf[96], want[64];
        jw w;
        jw_init(&w, buf, sizeof buf);
        jw_key_double(&w, "d", others[i]);
        snprintf(want, sizeof want, "\"d\":%.3f", others[i]);
        buf[jw_len(&w)] = '\0';
        cr_assert_str_eq(buf, want, "%.9g", others[i]);
    }
}
