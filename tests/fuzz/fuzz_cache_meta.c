/*
** fuzz/fuzz_cache_meta.c: libFuzzer target for the readers of the code
** cache's small files (src/inductor/cache_meta.c): an input is read as a
** <key>.meta and as a <graph key>.fxg, and its text as the name of a cache
** temporary (core/cachefs.c). An accepted .meta or .fxg must format back to
** exactly the input (the readers accept only what the writers write, so no
** two texts mean the same entry); a rejected .meta must say why; a parsed
** temporary name is at least "<64 hex digits>.tmp.N.X" long. Nothing may crash, leak or
** read out of bounds. Built with clang -fsanitize=fuzzer,address,undefined
** by tests/CMakeLists.txt and run for a few seconds as a ctest test.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cachefs.h"
#include "inductor/toolchain.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void meta(const char *s, size_t n) {
  kn__ind_meta m;
  char why[100] = "", out[KN__IND_META_MAX + 100];
  if (!kn__ind_meta_parse(s, n, &m, why, sizeof why)) {
    if (!why[0]) abort();
    return;
  }
  int k = kn__ind_meta_format(&m, out, sizeof out);
  if (k < 0 || (size_t)k != n || memcmp(out, s, n) || m.size < 0 || strlen(m.key) != 64 ||
      strlen(m.sha256) != 64)
    abort();
}

static void fxg(const char *s, size_t n) {
  char g[65], k[65], out[300];
  if (!kn__ind_fxg_parse(s, n, g, k)) return;
  int len = kn__ind_fxg_format(g, k, out, sizeof out);
  if (len < 0 || (size_t)len != n || memcmp(out, s, n)) abort();
}

static void tmp_name(const char *s, size_t n) {
  char *name = malloc(n + 1);
  if (!name) return;
  memcpy(name, s, n);
  name[n] = 0;
  long long pid;
  unsigned long long ns;
  if (kn__cache_tmp_parse(name, &pid, &ns) && (strlen(name) < KN__CACHE_KEY_MIN + 8 || pid < 0)) abort();
  free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* a private copy of exactly size bytes: reading past it is caught */
  char *s = malloc(size ? size : 1);
  if (!s) return 0;
  memcpy(s, data, size);
  meta(s, size);
  fxg(s, size);
  tmp_name(s, size);
  free(s);
  return 0;
}
