/*
** core/strbuf.h: a growable byte string. Sticky out-of-memory: after a
** failed growth every further append is ignored and kn__sb_failed() is true,
** so callers check once at the end instead of after every append.
*/
#ifndef KN_CORE_STRBUF_H
#define KN_CORE_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct kn__sb {
  char *buf;   /* NUL-terminated when len > 0 or after any append; owned */
  size_t len;
  size_t cap;
  bool oom;
} kn__sb;

#define KN__SB_INIT {NULL, 0, 0, false}

void kn__sb_init(kn__sb *sb);
void kn__sb_fini(kn__sb *sb);
/* Drop the contents, keep the capacity. */
void kn__sb_clear(kn__sb *sb);
bool kn__sb_failed(const kn__sb *sb);
bool kn__sb_reserve(kn__sb *sb, size_t extra);
void kn__sb_putc(kn__sb *sb, char c);
void kn__sb_puts(kn__sb *sb, const char *s);
void kn__sb_putn(kn__sb *sb, const char *s, size_t n);
void kn__sb_printf(kn__sb *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kn__sb_vprintf(kn__sb *sb, const char *fmt, va_list ap);
/* The contents as a C string ("" when empty); borrowed from sb. */
const char *kn__sb_cstr(const kn__sb *sb);
/* Hand the buffer to the caller (who frees it with free()) and reset sb.
** Returns NULL if an append failed. Never NULL on success, even when empty. */
char *kn__sb_take(kn__sb *sb);

#endif
