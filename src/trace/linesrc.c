/*
** trace/linesrc.c: chunked line reading with one growable buffer.
**
** Invariant: bytes [beg, end) of buf are unread input; [beg, scan) is known
** to hold no '\n', so a long line is scanned once however many refills it
** takes. The buffer only grows when a single line does not fit.
*/
#include <stdlib.h>
#include <string.h>

#include "trace/linesrc.h"

#define CHUNK ((size_t)1 << 20)

bool kn__linesrc_init(kn__linesrc *s, FILE *f, size_t max_line) {
  memset(s, 0, sizeof *s);
  s->f = f;
  s->max_line = max_line;
  s->cap = CHUNK;
  s->buf = malloc(s->cap);
  return s->buf != NULL;
}

void kn__linesrc_fini(kn__linesrc *s) {
  free(s->buf);
  s->buf = NULL;
}

/* Make room and read more input. Returns false on read error or OOM. */
static bool refill(kn__linesrc *s) {
  if (s->beg > 0) {
    memmove(s->buf, s->buf + s->beg, s->end - s->beg);
    s->end -= s->beg;
    s->scan -= s->beg;
    s->beg = 0;
  }
  if (s->cap - s->end < CHUNK / 2) {
    size_t cap = s->cap * 2;
    char *p = realloc(s->buf, cap);
    if (!p) return false;
    s->buf = p;
    s->cap = cap;
  }
  size_t got = fread(s->buf + s->end, 1, s->cap - s->end, s->f);
  s->end += got;
  if (got == 0) {
    if (ferror(s->f)) return false;
    s->eof = true;
  }
  return true;
}

/* Skip the rest of an over-long line (up to and including its '\n'). */
static bool discard(kn__linesrc *s) {
  for (;;) {
    char *nl = memchr(s->buf + s->beg, '\n', s->end - s->beg);
    if (nl) {
      s->beg = s->scan = (size_t)(nl - s->buf) + 1;
      return true;
    }
    s->beg = s->scan = s->end = 0;
    if (s->eof) return true;
    if (!refill(s)) return false;
  }
}

static void set_line(kn__linesrc *s, size_t stop, size_t next) {
  size_t len = stop - s->beg;
  if (len > 0 && s->buf[s->beg + len - 1] == '\r') len--;
  s->line = s->buf + s->beg;
  s->len = len;
  s->next = next;
  s->have = true;
  if (s->max_line && len > s->max_line) {
    s->oversized = true;
    s->line = "";
    s->len = 0;
  }
}

int kn__linesrc_peek(kn__linesrc *s) {
  if (s->have) return 1;
  s->oversized = false;
  for (;;) {
    char *nl = memchr(s->buf + s->scan, '\n', s->end - s->scan);
    if (nl) {
      size_t at = (size_t)(nl - s->buf);
      set_line(s, at, at + 1);
      return 1;
    }
    s->scan = s->end;
    if (s->max_line && s->end - s->beg > s->max_line) {
      if (!discard(s)) { s->err = true; return -1; }
      s->oversized = true;
      s->line = "";
      s->len = 0;
      s->next = s->beg;
      s->have = true;
      return 1;
    }
    if (s->eof) {
      if (s->end == s->beg) return 0;
      set_line(s, s->end, s->end);
      return 1;
    }
    if (!refill(s)) { s->err = true; return -1; }
  }
}

void kn__linesrc_consume(kn__linesrc *s) {
  if (!s->have) return;
  s->have = false;
  s->beg = s->next;
  if (s->scan < s->beg) s->scan = s->beg;
  s->lineno++;
}
