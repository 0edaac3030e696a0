/*
** support/files.c: small file helpers shared by tests.
*/
#include <stdio.h>

#include "core/strbuf.h"
#include "support/files.h"

char *kn_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kn__sb sb = KN__SB_INIT;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) kn__sb_putn(&sb, buf, n);
  fclose(f);
  if (len) *len = sb.len;
  return kn__sb_take(&sb);
}
