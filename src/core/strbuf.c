/*
** core/strbuf.c: growable strings with sticky OOM.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

void kn__sb_init(kn__sb *sb) { *sb = (kn__sb)KN__SB_INIT; }

void kn__sb_fini(kn__sb *sb) {
  free(sb->buf);
  kn__sb_init(sb);
}

void kn__sb_clear(kn__sb *sb) {
  sb->len = 0;
  if (sb->buf) sb->buf[0] = '\0';
}

bool kn__sb_failed(const kn__sb *sb) { return sb->oom; }

bool kn__sb_reserve(kn__sb *sb, size_t extra) {
  if (sb->oom) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 64;
  while (cap < sb->len + extra + 1) {
    if (cap > ((size_t)-1) / 2) { sb->oom = true; return false; }
    cap *= 2;
  }
  char *p = realloc(sb->buf, cap);
  if (!p) { sb->oom = true; return false; }
  sb->buf = p;
  sb->cap = cap;
  return true;
}

void kn__sb_putn(kn__sb *sb, const char *s, size_t n) {
  if (!kn__sb_reserve(sb, n)) return;
  memcpy(sb->buf + sb->len, s, n);
  sb->len += n;
  sb->buf[sb->len] = '\0';
}

void kn__sb_putc(kn__sb *sb, char c) { kn__sb_putn(sb, &c, 1); }
void kn__sb_puts(kn__sb *sb, const char *s) { kn__sb_putn(sb, s, strlen(s)); }

void kn__sb_vprintf(kn__sb *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    kn__sb_putn(sb, small, (size_t)n);
    return;
  }
  if (!kn__sb_reserve(sb, (size_t)n)) return;
  vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
  sb->len += (size_t)n;
}

void kn__sb_printf(kn__sb *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kn__sb_vprintf(sb, fmt, ap);
  va_end(ap);
}

const char *kn__sb_cstr(const kn__sb *sb) { return sb->buf ? sb->buf : ""; }

char *kn__sb_take(kn__sb *sb) {
  if (sb->oom) { kn__sb_fini(sb); return NULL; }
  if (!sb->buf && !kn__sb_reserve(sb, 0)) return NULL;
  if (sb->len == 0) sb->buf[0] = '\0';
  char *p = sb->buf;
  kn__sb_init(sb);
  return p;
}
