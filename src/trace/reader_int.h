/*
** trace/reader_int.h: pieces of the trace reader shared by its files: the
** header-line grammar and the metadata checks. Each check returns NULL when
** the input is well formed, else a message naming what was expected and what
** was found (written into the caller's kn__sb).
*/
#ifndef KN_TRACE_READER_INT_H
#define KN_TRACE_READER_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hashmap.h"
#include "core/strbuf.h"
#include "trace/reader.h"

/* The fields of a glog header line; pointers borrow from the line. */
typedef struct kn__trace_hdr {
  char level;
  const char *ts;       /* 20 bytes, not NUL-terminated */
  int64_t thread;
  const char *path;
  size_t path_len;
  int64_t src_line;
  const char *json;     /* the metadata text, to the end of the line */
  size_t json_len;
} kn__trace_hdr;

/* Parse one header line (spec §1.2). An optional "[...]:" prefix such as
** "[rank0]:" is skipped. False with a message in *err on a grammar error. */
bool kn__trace_hdr_parse(const char *line, size_t len, kn__trace_hdr *h,
                         kn__sb *err);

/* Check the metadata object and fill the metadata-derived fields of *rec
** (event, value, rank, compile id, attempt, has_payload). `strings` maps
** interned ids (u64) to strings; stack frames must name known ids. False
** with a message in *err. *md5 receives has_payload's hex (or ""). */
bool kn__trace_meta_check(json_t *meta, const kn__hashmap *strings,
                          kn__trace_record *rec, char md5[33], kn__sb *err);

#endif
