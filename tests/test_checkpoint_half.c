/*
** test_checkpoint_half.c: bfloat16 and float16 tensors in checkpoints
** (safetensors dtypes BF16 and F16): a file written by an independent writer
** from torch 1.13's bytes (tools/ref/gen_safetensors_half.py) loads to the
** values torch had, special values included, and kn_save / kn_load round
** trips keep every bit and write the dtype tags.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/checkpoint.h"
#include "kiln/kiln.h"
#include "support/fixture.h"

TestSuite(checkpoint_half, .init = kn_scope_begin, .fini = kn_scope_end);

static kn_module *half_module(void) {
  kn_module *m = kn_module_new();
  cr_assert_eq(kn_module_add_param(m, "w", kn_zeros(2, (int64_t[]){3, 4}, KN_BFLOAT16)), KN_OK);
  cr_assert_eq(kn_module_add_buffer(m, "h", kn_zeros(1, (int64_t[]){6}, KN_FLOAT16)), KN_OK);
  return m;
}

Test(checkpoint_half, loads_torch_bfloat16_and_float16_bytes) {
  kn_module *m = half_module();
  cr_assert_eq(kn_load(m, KN_FIXTURE_DIR "/torch_half.safetensors"), KN_OK, "%s",
               kn_last_error());
  kn_fixture *f = kn_fixture_load_named("torch_half.json");
  cr_assert_not_null(f);
  const json_t *c = kn_fixture_case(f, 0);
  char why[256];
  cr_assert(kn_fixture_close(kn_module_get(m, "w"), kn_fixture_output(c, 0), 0, 0, why,
                             sizeof why), "w: %s", why);
  cr_assert(kn_fixture_close(kn_module_get(m, "h"), kn_fixture_output(c, 1), 0, 0, why,
                             sizeof why), "h: %s", why);
  /* -0 keeps its sign bit */
  cr_assert_eq(((const uint16_t *)kn_data(kn_module_get(m, "h")))[1], 0x8000);
  kn_fixture_free(f);
  kn_module_free(m);
}

Test(checkpoint_half, round_trip_keeps_every_bit) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/kn_ckpt_half_%d.safetensors", (int)getpid());
  kn_module *a = half_module(), *b = half_module();
  kn_copy_(kn_module_get(a, "w"), kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32));
  kn_copy_(kn_module_get(a, "h"), kn_randn(1, (int64_t[]){6}, NULL, KN_FLOAT32));
  cr_assert_eq(kn_save(a, path), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_load(b, path), KN_OK, "%s", kn_last_error());
  cr_assert_eq(memcmp(kn_data(kn_module_get(a, "w")), kn_data(kn_module_get(b, "w")), 24), 0);
  cr_assert_eq(memcmp(kn_data(kn_module_get(a, "h")), kn_data(kn_module_get(b, "h")), 12), 0);
  FILE *fp = fopen(path, "rb");
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  cr_assert_gt(n, 8);
  cr_assert(memmem(buf, n, "\"BF16\"", 6), "no BF16 tag in the header");
  cr_assert(memmem(buf, n, "\"F16\"", 5), "no F16 tag in the header");
  unlink(path);
  kn_module_free(a);
  kn_module_free(b);
}
