/*
** test_trace_json.c: the Python-compatible JSON writer. Expected strings are
** what CPython's json.dumps / repr(float) print for the same values.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/strbuf.h"
#include "trace/json_py.h"

static void real_is(double d, const char *want) {
  kn__sb sb = KN__SB_INIT;
  cr_assert(kn__json_py_real(&sb, d));
  cr_assert_str_eq(kn__sb_cstr(&sb), want, "%.17g", d);
  kn__sb_fini(&sb);
}

Test(json_py, reals_like_python_repr) {
  real_is(1.0, "1.0");
  real_is(0.5, "0.5");
  real_is(0.1, "0.1");
  real_is(-0.0, "-0.0");
  real_is(100.0, "100.0");
  real_is(1733527213926572.8, "1733527213926572.8");
  real_is(1755896448900625.0, "1755896448900625.0");
  real_is(1e16, "1e+16");
  real_is(1.5e16, "1.5e+16");
  real_is(9999999999999998.0, "9999999999999998.0");
  real_is(123456789012345680.0, "1.2345678901234568e+17");
  real_is(0.0001, "0.0001");
  real_is(0.00001, "1e-05");
  real_is(1.5e-7, "1.5e-07");
  real_is(2.5e-300, "2.5e-300");
  real_is(1e300, "1e+300");
  real_is(0.30000000000000004, "0.30000000000000004");
  real_is(1755896448.899586, "1755896448.899586");
  kn__sb sb = KN__SB_INIT;
  cr_assert(!kn__json_py_real(&sb, NAN));
  cr_assert(!kn__json_py_real(&sb, INFINITY));
  kn__sb_fini(&sb);
}

static void dump_is(json_t *v, kn__json_py_mode mode, const char *want) {
  kn__sb sb = KN__SB_INIT;
  cr_assert(kn__json_py_dump(&sb, v, mode));
  cr_assert_str_eq(kn__sb_cstr(&sb), want);
  kn__sb_fini(&sb);
  json_decref(v);
}

Test(json_py, strings_ensure_ascii) {
  dump_is(json_string("a\"b\\c\n\r\t\b\f/"), KN__JSON_COMPACT,
          "\"a\\\"b\\\\c\\n\\r\\t\\b\\f/\"");
  dump_is(json_string("\x01\x1f\x7f"), KN__JSON_COMPACT, "\"\\u0001\\u001f\\u007f\"");
  dump_is(json_string("caf\xc3\xa9 \xe2\x82\xac"), KN__JSON_COMPACT,
          "\"caf\\u00e9 \\u20ac\"");
  dump_is(json_string("\xf0\x9f\x98\x80"), KN__JSON_COMPACT, "\"\\ud83d\\ude00\"");
  dump_is(json_stringn("a\0b", 3), KN__JSON_COMPACT, "\"a\\u0000b\"");
}

Test(json_py, compact_and_indent0_layouts) {
  json_t *v = json_pack("{s[ii]s{}s[]sbsnsf}", "a", 1, 2, "b", "c", "d", true, "e",
                        "f", 2.0);
  dump_is(json_incref(v), KN__JSON_COMPACT,
          "{\"a\": [1, 2], \"b\": {}, \"c\": [], \"d\": true, \"e\": null, \"f\": 2.0}");
  dump_is(v, KN__JSON_INDENT0,
          "{\n\"a\": [\n1,\n2\n],\n\"b\": {},\n\"c\": [],\n\"d\": true,\n\"e\": null,\n"
          "\"f\": 2.0\n}");
}

Test(json_py, payload_forms_match_spec_vectors) {
  /* spec §1.4 vector 1: a dict with indent=0 */
  json_t *ev = json_pack("{ss,sf,s{ss},ss,ss,si,si}", "name", "dynamo", "ts",
                         1733527213926572.8, "args", "compile_id", "0/0", "ph", "B",
                         "cat", "dynamo_timed", "tid", 0, "pid", 0);
  kn__sb sb = KN__SB_INIT;
  cr_assert(kn__json_py_payload(&sb, ev));
  cr_assert_str_eq(kn__sb_cstr(&sb),
                   "{\n\"name\": \"dynamo\",\n\"ts\": 1733527213926572.8,\n\"args\": {\n"
                   "\"compile_id\": \"0/0\"\n},\n\"ph\": \"B\",\n\"cat\": \"dynamo_timed\",\n"
                   "\"tid\": 0,\n\"pid\": 0\n}");
  json_decref(ev);
  /* vector 3: a list, one compact element per line */
  kn__sb_clear(&sb);
  json_t *l = json_pack("[s{s[ii]}]", "0/0: ___check_obj_id(fn, 1)", "k", 1, 2);
  cr_assert(kn__json_py_payload(&sb, l));
  cr_assert_str_eq(kn__sb_cstr(&sb), "[\n\"0/0: ___check_obj_id(fn, 1)\",\n{\"k\": [1, 2]}\n]");
  json_decref(l);
  kn__sb_clear(&sb);
  l = json_array();
  cr_assert(kn__json_py_payload(&sb, l));
  cr_assert_str_eq(kn__sb_cstr(&sb), "[\n\n]");
  json_decref(l);
  kn__sb_fini(&sb);
}
