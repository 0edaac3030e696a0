/*
** trace/linesrc.h: a buffered line source for the trace reader.
**
** Reads a stream in large chunks into one growable buffer and hands out
** lines as borrowed (pointer, length) views without copying: no allocation
** per line. A line ends at '\n' (one trailing '\r' is stripped); the last
** line may lack its '\n'. A line longer than `max_line` (when non-zero) is
** discarded while reading, so memory stays bounded by the longest line kept.
*/
#ifndef KN_TRACE_LINESRC_H
#define KN_TRACE_LINESRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct kn__linesrc {
  FILE *f;          /* borrowed */
  char *buf;        /* owned */
  size_t cap, beg, end, scan; /* valid bytes [beg,end); no '\n' in [beg,scan) */
  size_t max_line;  /* 0 = unlimited */
  bool eof, err;
  bool have;        /* a peeked line is pending */
  const char *line; /* the peeked line (borrowed until consume/peek) */
  size_t len;
  size_t next;      /* buffer offset just after the peeked line */
  bool oversized;   /* the peeked line was longer than max_line (line is "") */
  uint64_t lineno;  /* number of lines consumed so far */
} kn__linesrc;

/* Returns false on OOM. */
bool kn__linesrc_init(kn__linesrc *s, FILE *f, size_t max_line);
void kn__linesrc_fini(kn__linesrc *s);
/* Peek the next line: 1 = a line (s->line, s->len, s->oversized), 0 = end of
** input, -1 = read error or OOM. Peeking twice returns the same line. The
** 1-based number of the peeked line is s->lineno + 1. */
int kn__linesrc_peek(kn__linesrc *s);
/* Consume the peeked line. */
void kn__linesrc_consume(kn__linesrc *s);

#endif
