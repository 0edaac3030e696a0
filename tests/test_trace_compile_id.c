/*
** test_trace_compile_id.c: CompileId string forms (spec §2.2, §2.3) and the
** MD5 test vectors of the trace spec §1.4 (libmd, as the writer uses it).
*/
#include <criterion/criterion.h>
#include <md5.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "trace/compile_id.h"

static void round_trip(const char *s, int64_t ca, int64_t frame, int64_t fcid) {
  kn_compile_id id;
  cr_assert_eq(kn__compile_id_parse(s, &id), KN_OK, "%s: %s", s, kn_last_error());
  cr_assert_eq(id.compiled_autograd_id, ca, "%s", s);
  cr_assert_eq(id.frame_id, frame, "%s", s);
  cr_assert_eq(id.frame_compile_id, fcid, "%s", s);
  char buf[64];
  cr_assert_eq(kn__compile_id_format(id, buf, sizeof buf), (int)strlen(s));
  cr_assert_str_eq(buf, s);
}

Test(compile_id, seed_round_trips) {
  round_trip("1/2", -1, 1, 2);
  round_trip("!1/2/3", 1, 2, 3);
  round_trip("!1", 1, -1, -1);
  round_trip("0/0", -1, 0, 0);
  round_trip("2147483647/0", -1, 2147483647, 0);
}

Test(compile_id, rejects_with_message_naming_input) {
  static const char *const bad[] = {
      "-/-", "-/1", "1/-", "!1/2", "!1/-/-",                /* seed */
      "0/1_2", "", "0", "0/1/2", "!", "[0/0]",              /* spec §2.2 */
      "0/1\n", " 0/1", "0/1 ", "+1/2", "0x1/2", "1//2", "!!1",
      "2147483648/0", "0/99999999999999999999", "!4294967296", "/", "1/", "!1/2/3/4",
      "\xd9\xa1/2",                                          /* Arabic-Indic one */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kn_compile_id id = {7, 7, 7};
    kn_status st = kn__compile_id_parse(bad[i], &id);
    cr_assert_eq(st, KN_EPARSE, "'%s' accepted", bad[i]);
    char want[64];
    snprintf(want, sizeof want, "Invalid compile_id '%s'", bad[i]);
    cr_assert(strstr(kn_last_error(), want), "%s", kn_last_error());
    cr_assert_eq(id.frame_id, 7, "output changed on error");
  }
  kn_compile_id id;
  cr_assert_eq(kn__compile_id_parse(NULL, &id), KN_EINVAL);
}

Test(compile_id, trace_id_form_with_attempt) {
  char buf[64];
  kn_compile_id id = {-1, 0, 1};
  kn__compile_id_format_attempt(id, 2, buf, sizeof buf);
  cr_assert_str_eq(buf, "0/1_2");
  kn__compile_id_format_attempt(id, 0, buf, sizeof buf);
  cr_assert_str_eq(buf, "0/1");
  kn_compile_id ca = {0, 3, 0};
  kn__compile_id_format_attempt(ca, 1, buf, sizeof buf);
  cr_assert_str_eq(buf, "!0/3/0_1");
}

static void md5_is(const char *s, const char *want) {
  char got[MD5_DIGEST_STRING_LENGTH];
  MD5Data((const uint8_t *)s, strlen(s), got);
  cr_assert_str_eq(got, want);
}

Test(md5, spec_vectors) {
  md5_is("{\n\"name\": \"dynamo\",\n\"ts\": 1733527213926572.8,\n\"args\": {\n"
         "\"compile_id\": \"0/0\"\n},\n\"ph\": \"B\",\n\"cat\": \"dynamo_timed\",\n"
         "\"tid\": 0,\n\"pid\": 0\n}",
         "bb6a3dc5077f86b72cd9a27f294c8718");
  md5_is("class GraphModule(torch.nn.Module):\n"
         "    def forward(self, L_x_: \"f32[4]\"):\n"
         "        return (L_x_,)\n",
         "7aec2af84bb2867e38eca1a3f5dc8387");
  md5_is("[\n\"0/0: ___check_obj_id(fn, 1)\"\n]", "c02d3b5fce45ab6059d2cd5157f27e82");
  md5_is("", "d41d8cd98f00b204e9800998ecf8427e");
}
