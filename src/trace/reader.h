/*
** trace/reader.h: the strict structured-trace reader (contract).
**
** Reads a trace log as written by kiln or by PyTorch's TORCH_TRACE: a glog
** header per record, a JSON metadata object whose first key is the event
** name, and optional payload lines each prefixed by a tab, whose MD5 must
** equal metadata "has_payload". Streams: memory is bounded by the largest
** record. Each defect is reported with its line number; in strict mode the
** first defect stops reading with an error, otherwise the reader skips to
** the next header line and goes on.
**
** Non-strict details: a record with a defect in its header, metadata or
** payload framing is dropped together with its payload lines (one defect per
** broken record); a record whose payload MD5 does not match is reported and
** still returned, with payload_md5_ok false (tlparse also uses its payload).
** Empty lines are skipped everywhere (tlparse does the same), unknown
** metadata keys are kept and are not defects.
**
** Contract changes: has_compile_id is true when any of compiled_autograd_id,
** frame_id, frame_compile_id is set (a compiled-autograd-only id "!2" has no
** frame ids); unset fields are -1. Added payload_md5_ok.
*/
#ifndef KN_TRACE_READER_H
#define KN_TRACE_READER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/core.h"
#include "trace/compile_id.h"

typedef struct kn__trace_reader kn__trace_reader;

typedef struct kn__trace_record {
  uint64_t line;          /* 1-based line number of the header line */
  char level;             /* glog level letter: 'I', 'W', 'E', 'V' ... */
  const char *timestamp;  /* "MMDD HH:MM:SS.uuuuuu" as in the header */
  int64_t thread;         /* thread id from the header */
  const char *src_file;   /* path from the header (before ':') */
  int64_t src_line;       /* line from the header */
  const char *event;      /* metadata's first key: "dynamo_start", "str"... */
  json_t *metadata;       /* the whole metadata object (borrowed) */
  json_t *value;          /* metadata[event] (borrowed) */
  const char *metadata_text; /* the metadata's JSON text as read, one line */
  size_t metadata_len;    /* (added: lets a consumer copy it unchanged) */
  int64_t rank;           /* -1 when absent */
  bool has_compile_id;    /* any compile-id field set (non-null) */
  kn_compile_id compile_id;
  int64_t attempt;        /* -1 when absent */
  bool has_payload;
  const char *payload;    /* payload lines without their tab, joined by '\n'
                             (no trailing newline); "" when none */
  size_t payload_len;
  uint64_t payload_lines; /* number of payload lines */
  bool payload_md5_ok;    /* no payload, or its MD5 equals has_payload */
} kn__trace_record;

typedef struct kn__trace_defect {
  uint64_t line;          /* 1-based line where the defect is */
  const char *message;    /* what was expected and what was found */
} kn__trace_defect;

typedef struct kn__trace_reader_opts {
  bool strict;            /* stop at the first defect with KN_EPARSE */
  size_t max_record_bytes;/* 0 = no limit; larger records are a defect */
  /* Called for each defect (also in strict mode, before stopping). */
  void (*on_defect)(void *ud, const kn__trace_defect *d);
  void *ud;
} kn__trace_reader_opts;

/* Open a file ("-" = stdin) or an already open stream (not closed by the
** reader). Returns NULL with kn_last_error() set. Owned: close it. */
kn__trace_reader *kn__trace_reader_open(const char *path,
                                        const kn__trace_reader_opts *opts);
kn__trace_reader *kn__trace_reader_open_stream(FILE *f, const char *name,
                                               const kn__trace_reader_opts *opts);
/* The next record. KN_OK and *rec set; KN_OK and *rec NULL at end of file;
** KN_EPARSE in strict mode on a defect (or KN_EIO). The record and every
** pointer in it are borrowed until the next call. "str" records are
** consumed into the string table but still returned. */
kn_status kn__trace_reader_next(kn__trace_reader *r, const kn__trace_record **rec);
/* An interned string by id (from "str" records), or NULL. Borrowed until
** close. */
const char *kn__trace_reader_string(const kn__trace_reader *r, int64_t id);
/* The largest interned id defined so far, or -1 (added: with
** kn__trace_reader_string it lists the string table, ids may have gaps). */
int64_t kn__trace_reader_max_string_id(const kn__trace_reader *r);
/* Defects seen so far, records read so far. */
uint64_t kn__trace_reader_defects(const kn__trace_reader *r);
uint64_t kn__trace_reader_records(const kn__trace_reader *r);
void kn__trace_reader_close(kn__trace_reader *r);

#endif
