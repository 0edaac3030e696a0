/*
** support/files.c: small file helpers shared by tests.
*/
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *kn_test_inductor_sources(const char *dir) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "%s/inductor/*.c", dir);
  char *pattern = kn__sb_take(&sb);
  glob_t g = {0};
  if (pattern && glob(pattern, 0, NULL, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; i++) {
      char *text = kn_test_read_file(g.gl_pathv[i], NULL);
      if (text) kn__sb_puts(&sb, text);
      free(text);
    }
  globfree(&g);
  free(pattern);
  char *all = kn__sb_take(&sb);
  return all ? all : calloc(1, 1);
}

int kn_test_count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}
