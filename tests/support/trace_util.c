/*
** support/trace_util.c: scratch directories and file reads for trace tests.
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/trace.h"
#include "support/trace_util.h"
#include "trace/trace.h"

char *kn_test_tmpdir(void) {
  char tmpl[] = "/tmp/kn_trace_test_XXXXXX";
  if (!mkdtemp(tmpl)) return NULL;
  return strdup(tmpl);
}

void kn_test_rmdir(char *dir) {
  if (!dir) return;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0) {
      char *sub = strdup(path);
      kn_test_rmdir(sub);
    }
  }
  if (d) closedir(d);
  rmdir(dir);
  free(dir);
}

char *kn_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (cap - n - 1 == 0) {
      char *p = realloc(buf, cap *= 2);
      if (!p) { free(buf); buf = NULL; }
      buf = p;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

char *kn_test_trace_start(void) {
  char *dir = kn_test_tmpdir();
  if (!dir || kn_trace_enable(dir) != KN_OK) return dir;
  kn__trace_fake_header("1206 15:20:13.926000", 1543231);
  return dir;
}

char *kn_test_trace_text(void) {
  char *path = kn_trace_file_path();
  char *text = path ? kn_test_read_file(path, NULL) : strdup("");
  free(path);
  return text;
}
