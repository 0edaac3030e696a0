/*
** core/codeid.c: see codeid.h.
*/
#include "core/codeid.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static bool file_ident(const char *path, char *out, size_t n) {
  struct stat sb;
  if (stat(path, &sb) != 0) return false;
  snprintf(out, n, "%s %lld %lld.%09ld", path, (long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
           (long)sb.st_mtim.tv_nsec);
  return true;
}

void kn__code_ident(char *out, size_t n) {
  Dl_info info;
  if (dladdr((void *)kn__code_ident, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
      file_ident(info.dli_fname, out, n))
    return;
  char self[4096];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k > 0) self[k] = 0;
  if (k <= 0 || !file_ident(self, out, n)) snprintf(out, n, "(unknown)");
}
