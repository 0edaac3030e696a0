/*
** fuzz/fuzz_trace_reader.c: libFuzzer target for the structured-trace
** reader. Each input is read as a whole trace twice, tolerant and strict;
** the reader must never crash, leak or read out of bounds, and every record
** it returns must be self-consistent (payload length, line numbers rising).
** Built with clang -fsanitize=fuzzer,address,undefined by tests/CMakeLists.txt
** and run for a bounded time as a ctest test, seeded from the PyTorch traces.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_all(const uint8_t *data, size_t size, bool strict) {
  FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
  if (!f) return;
  kn__trace_reader_opts o = {.strict = strict, .max_record_bytes = 1 << 20};
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "fuzz", &o);
  if (r) {
    const kn__trace_record *rec;
    uint64_t last = 0;
    while (kn__trace_reader_next(r, &rec) == KN_OK && rec) {
      if (rec->line < last || strlen(rec->payload) > rec->payload_len ||
          !rec->event || !rec->metadata)
        abort();
      last = rec->line;
      (void)kn__trace_reader_string(r, 0);
    }
    kn__trace_reader_close(r);
  }
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  read_all(data, size, false);
  read_all(data, size, true);
  return 0;
}
