/*
** fuzz/fuzz_csv.c: libFuzzer target for the numeric CSV parser behind
** kn_load_csv (src/data/csv.c). The first byte picks the dtype, the rest is
** the file. The parser must never crash, leak or read past the text, and
** every table it accepts must read back bit for bit: its values written out
** again (integers in decimal, floats as %.17g of their exact value) parse to
** the same elements (NaN to a NaN), with the same shape.
** Built with clang -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt
** and run for a bounded time as a ctest test, seeded with
** tests/fuzz/csv_corpus.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "data/csv.h"
#include "tensor/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Element i as a double (floats, bit-exact) or an integer. */
static double float_at(const kn__csv_table *t, kn_dtype dt, size_t i) {
  const uint8_t *p = (const uint8_t *)t->data + i * kn_dtype_size(dt);
  uint16_t h;
  float f;
  double d;
  switch (dt) {
  case KN_FLOAT16: memcpy(&h, p, 2); return kn__half_to_float(h);
  case KN_BFLOAT16: memcpy(&h, p, 2); return kn__bf16_to_float(h);
  case KN_FLOAT32: memcpy(&f, p, 4); return f;
  default: memcpy(&d, p, 8); return d;
  }
}

static void write_back(const kn__csv_table *t, kn_dtype dt, kn__sb *sb) {
  size_t n = (size_t)(t->rows * t->cols);
  for (size_t i = 0; i < n; i++) {
    const void *p = (const uint8_t *)t->data + i * kn_dtype_size(dt);
    if (kn_dtype_is_floating(dt)) kn__sb_printf(sb, "%.17g", float_at(t, dt, i));
    else kn__sb_printf(sb, "%lld", (long long)kn__load_int(p, dt));
    kn__sb_putc(sb, (i + 1) % (size_t)t->cols ? ',' : '\n');
  }
}

static void check_same(const kn__csv_table *a, const kn__csv_table *b, kn_dtype dt) {
  if (a->rows != b->rows || a->cols != b->cols) abort();
  size_t n = (size_t)(a->rows * a->cols), isz = kn_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    bool nan = kn_dtype_is_floating(dt) && isnan(float_at(a, dt, i));
    if (nan ? !isnan(float_at(b, dt, i))
            : memcmp((const uint8_t *)a->data + i * isz, (const uint8_t *)b->data + i * isz, isz))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  kn_dtype dt = (kn_dtype)(data[0] % KN_DTYPE_COUNT);
  char *text = malloc(size); /* the parser's contract: text[len] == '\0' */
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  kn__csv_table t, again;
  if (kn__csv_parse(text, size - 1, "fuzz.csv", dt, &t) == KN_OK) {
    if (t.rows < 1 || t.cols < 1) abort();
    kn__sb sb = KN__SB_INIT;
    write_back(&t, dt, &sb);
    if (kn__sb_failed(&sb) || kn__csv_parse(sb.buf, sb.len, "again.csv", dt, &again) != KN_OK)
      abort();
    check_same(&t, &again, dt);
    free(again.data);
    kn__sb_fini(&sb);
    free(t.data);
  }
  free(text);
  return 0;
}
