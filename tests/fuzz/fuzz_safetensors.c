/*
** fuzz/fuzz_safetensors.c: libFuzzer target for the safetensors parser
** behind kn_load (src/serialize/safetensors.c). The parser must never
** crash, leak or read out of bounds, and everything it accepts must be
** self-consistent: every entry's bytes lie inside the input, match its
** dtype and shape, and the entries tile the data section.
** Built with clang -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt
** and run for a bounded time as a ctest test, seeded with the committed
** safetensors fixtures.
*/
#include <stdint.h>
#include <stdlib.h>

#include "serialize/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t item_size(kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: case KN_UINT8: case KN_INT8: return 1;
  case KN_INT16: case KN_FLOAT16: case KN_BFLOAT16: return 2;
  case KN_INT32: case KN_FLOAT32: return 4;
  default: return 8;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn__st_file f;
  if (kn__st_parse(data, size, &f) != KN_OK) return 0;
  size_t total = 0;
  for (int i = 0; i < f.n; i++) {
    const kn__st_entry *e = &f.entries[i];
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
    if (e->data < data || e->data + e->nbytes > data + size || numel * item_size(e->dtype) !=
        e->nbytes || kn__st_find(&f, e->name) != e)
      abort();
    volatile uint8_t sink = 0;
    for (size_t b = 0; b < e->nbytes; b++) sink ^= e->data[b]; /* touch every byte */
    total += e->nbytes;
  }
  if (total > size) abort();
  kn__st_free(&f);
  return 0;
}
