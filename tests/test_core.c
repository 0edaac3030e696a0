/*
** test_core.c: status/last-error, arena, string builder, hash map, interning.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/hashmap.h"
#include "core/intern.h"
#include "core/strbuf.h"
#include "core/strdist.h"

Test(error, last_error_round_trip) {
  kn_clear_error();
  cr_assert_str_eq(kn_last_error(), "");
  cr_assert_eq(kn_last_status(), KN_OK);
  kn_status s = kn__error(KN_ESHAPE, "expected %d, found %d", 3, 4);
  cr_assert_eq(s, KN_ESHAPE);
  cr_assert_str_eq(kn_last_error(), "expected 3, found 4");
  cr_assert_str_eq(kn_status_name(KN_ESHAPE), "shape_error");
  kn__error_context("while doing %s", "x");
  cr_assert_str_eq(kn_last_error(), "while doing x: expected 3, found 4");
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
}

Test(error, long_message_is_truncated_with_ellipsis) {
  char big[5000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  kn__error(KN_EINVAL, "%s", big);
  size_t n = strlen(kn_last_error());
  cr_assert_eq(n, KN__ERROR_CAP - 1);
  cr_assert_str_eq(kn_last_error() + n - 3, "...");
}

Test(arena, alignment_and_strings) {
  kn__arena a;
  kn__arena_init(&a, 64);
  for (int i = 1; i < 200; i++) {
    void *p = kn__arena_alloc(&a, (size_t)i);
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % 16, 0);
  }
  char *s = kn__arena_strdup(&a, "hello");
  cr_assert_str_eq(s, "hello");
  int *z = kn__arena_calloc(&a, 100, sizeof(int));
  for (int i = 0; i < 100; i++) cr_assert_eq(z[i], 0);
  kn__arena_fini(&a);
}

Test(strbuf, printf_grows_past_small_buffer) {
  kn__sb sb = KN__SB_INIT;
  cr_assert_str_eq(kn__sb_cstr(&sb), "");
  for (int i = 0; i < 1000; i++) kn__sb_printf(&sb, "%d,", i);
  cr_assert(strncmp(kn__sb_cstr(&sb), "0,1,2,", 6) == 0);
  cr_assert_str_eq(kn__sb_cstr(&sb) + sb.len - 4, "999,");
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[999] = 0;
  kn__sb_clear(&sb);
  kn__sb_printf(&sb, "<%s>", big);
  cr_assert_eq(sb.len, 1001);
  char *taken = kn__sb_take(&sb);
  cr_assert_eq(taken[0], '<');
  cr_assert_eq(taken[1000], '>');
  free(taken);
  cr_assert_null(sb.buf);
}

Test(hashmap, string_keys_put_get_delete_and_grow) {
  kn__hashmap m;
  kn__hm_init(&m, true);
  char key[32];
  for (intptr_t i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "k%ld", (long)i);
    cr_assert(kn__hm_put(&m, key, (void *)(i + 1)));
  }
  cr_assert_eq(m.len, 5000);
  for (intptr_t i = 0; i < 5000; i += 2) {
    snprintf(key, sizeof key, "k%ld", (long)i);
    cr_assert(kn__hm_del(&m, key));
  }
  cr_assert_eq(m.len, 2500);
  bool found;
  cr_assert_null(kn__hm_get(&m, "k0", &found));
  cr_assert_not(found);
  cr_assert_eq((intptr_t)kn__hm_get(&m, "k4999", &found), 5000);
  cr_assert(found);
  size_t it = 0, count = 0;
  const kn__hm_slot *s;
  while (kn__hm_next(&m, &it, &s)) count++;
  cr_assert_eq(count, 2500);
  kn__hm_fini(&m);
}

Test(hashmap, u64_keys_and_stored_null) {
  kn__hashmap m;
  kn__hm_init(&m, false);
  cr_assert(kn__hm_put_u64(&m, 42, NULL));
  bool found = false;
  cr_assert_null(kn__hm_get_u64(&m, 42, &found));
  cr_assert(found);
  kn__hm_get_u64(&m, 43, &found);
  cr_assert_not(found);
  kn__hm_fini(&m);
}

Test(hash, fnv1a_known_vectors) {
  /* FNV-1a 64 published test vectors. */
  cr_assert_eq(kn__hash_str(""), 0xcbf29ce484222325ull);
  cr_assert_eq(kn__hash_str("a"), 0xaf63dc4c8601ec8cull);
  cr_assert_eq(kn__hash_str("foobar"), 0x85944171f73967e8ull);
}

Test(intern, dense_ids_and_identity) {
  kn__intern t;
  kn__intern_init(&t);
  uint32_t a, b, c;
  int fresh;
  const char *pa = kn__intern_add(&t, "alpha", &a, &fresh);
  cr_assert(fresh);
  const char *pb = kn__intern_add(&t, "beta", &b, NULL);
  char buf[] = "alpha";
  const char *pc = kn__intern_add(&t, buf, &c, &fresh);
  cr_assert_not(fresh);
  cr_assert_eq(pa, pc);
  cr_assert_neq(pa, pb);
  cr_assert_eq(a, 0);
  cr_assert_eq(b, 1);
  cr_assert_eq(c, 0);
  cr_assert_str_eq(kn__intern_str(&t, 1), "beta");
  cr_assert_null(kn__intern_str(&t, 2));
  kn__intern_fini(&t);
}

Test(error, message_may_quote_the_previous_message) {
  kn__error(KN_EINVAL, "inner problem");
  kn__error(KN_ESHAPE, "outer: %s (again: %s)", kn_last_error(), kn_last_error());
  cr_assert_str_eq(kn_last_error(), "outer: inner problem (again: inner problem)");
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
}

/* ---- edit distance ---------------------------------------------------------- */
Test(strdist, literal_distances) {
  cr_expect_eq(kn__edit_distance("", "", false), 0);
  cr_expect_eq(kn__edit_distance("kitten", "sitting", false), 3);
  cr_expect_eq(kn__edit_distance("graph_cod", "graph_code", false), 1);
  cr_expect_eq(kn__edit_distance("fc2.weights", "fc2.weight", false), 1);
  cr_expect_eq(kn__edit_distance("Dynamo", "dynamo", false), 1);
  cr_expect_eq(kn__edit_distance("Dynamo", "dynamo", true), 0);
  cr_expect_eq(kn__edit_distance("abc", "", false), 3);
  char longer[300];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  cr_expect_eq(kn__edit_distance(longer, "a", false), 1 << 20);
}
