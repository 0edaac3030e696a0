/*
** tools/report/report.h: the `kiln report` HTML trace report (internal).
**
** One trace file becomes one report directory. The record loop (run.c) reads
** records through the trace reader and hands each to rp_handle_record
** (record.c), which writes payload files and fills the per-compile summary
** kept here; at the end the pages (index.c, views.c, metrics.c) are written
** from that summary. Memory is bounded by the largest record plus a small
** summary per compile id: payloads go straight to disk.
*/
#ifndef KN_TOOLS_REPORT_H
#define KN_TOOLS_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/hashmap.h"
#include "core/strbuf.h"
#include "kiln/core.h"
#include "report/outdir.h"
#include "report/trie.h"

typedef struct rp_opts {
  const char *out;          /* output directory */
  bool overwrite;           /* replace the contents of a non-empty out */
  bool strict;              /* first defect is an error */
  bool strict_compile_id;   /* a record without a compile id is a defect */
  bool verbose;             /* print unknown event names and defects */
  bool plain_text;          /* inductor_output_code as .txt, not .html */
  const char *custom_header;/* raw HTML put at the top of index pages */
  size_t max_record_bytes;  /* larger records are defects (0 = no limit) */
} rp_opts;

/* One file or link listed under a compile id. */
typedef struct rp_artifact {
  char *url;          /* relative to OUT (or an external http(s) link) */
  char *name;         /* the label shown */
  uint64_t number;    /* the global counter value it consumed */
  const char *suffix; /* cache marker or "" (static string) */
  char *readable_url; /* an extra HTML rendering, or NULL */
} rp_artifact;

/* What the report keeps per compile id (ca/frame/fcid/attempt). */
typedef struct rp_compile {
  int64_t ca, frame, fcid, attempt; /* -1 when absent */
  size_t idx;         /* position in rp_report.compiles */
  char *dir;          /* "-_0_0_0" (owned; one allocation with label) */
  const char *label;  /* "[0/0]" */
  rp_artifact *arts;
  size_t narts, caparts;
  bool has_metrics, failed, has_restarts, restarts_missing, empty_graph;
  char *co_name, *co_filename, *fail_type, *fail_reason;
  int64_t co_firstlineno;
  double compile_time_s;   /* entire frame compile time, 0 when unknown */
  char *metrics_url;       /* the last compilation_metrics page */
  long guards_off;         /* guard text (first 64 KiB) in the side file, */
  size_t guards_len;       /* for the recompile view; off -1 when none */
  char *guards_url;
  json_t *recompile_reasons; /* list of strings, or NULL (owned) */
  char graph_md5[33];      /* dynamo_output_graph payload hash, "" if none */
  char *fn_name;           /* from dynamo_start: the compiled function */
} rp_compile;

typedef struct rp_break {
  char *location; char *reason; size_t compile; char *url;
} rp_break;

typedef struct rp_failure {
  size_t compile; char *type; char *reason; char *source;
} rp_failure;

/* Counters shown in the summary and printed at the end. */
typedef struct rp_stats {
  uint64_t ok, defects, other_rank, fail_parser, no_compile_id, chromium,
      chromium_bad, records;
} rp_stats;

#define RP_MAX_DEFECT_MSGS 50
/* Interned strings: ids at or past RP_MAX_STRINGS, or more than
** RP_MAX_STRING_GAP past the table's end, are defects (the record is
** skipped). */
#define RP_MAX_STRINGS (1 << 20)
#define RP_MAX_STRING_GAP 4096
/* The index's stack trie starts collapsed past this depth or node count. */
#define RP_TRIE_OPEN_DEPTH 40
#define RP_TRIE_OPEN_NODES 2000
/* Distinct compile ids kept; records of further ids are defects. */
#define RP_MAX_COMPILES (1 << 20)

typedef struct rp_timeline rp_timeline; /* timeline.c */

typedef struct rp_report {
  const rp_opts *opts;
  const char *input;       /* the trace file name, for messages */
  rp_out out;
  uint64_t counter;        /* the global file number N */
  rp_compile **compiles; size_t ncompiles, capcompiles;
  size_t *cid_tab, cid_cap; /* compile id -> index + 1 (compiles.c) */
  char **strings; size_t nstrings; /* the interned-string table */
  rp_trie trie, unknown_trie;
  rp_failure *failures; size_t nfailures, capfailures;
  rp_break *breaks; size_t nbreaks, capbreaks;
  kn__hashmap unknown;     /* event name -> count (as uintptr_t) */
  rp_stats st;
  char *defect_msgs[RP_MAX_DEFECT_MSGS]; size_t ndefect_msgs;
  int64_t expected_rank;   /* -1 until the first record with a rank */
  FILE *chromium;          /* chromium_events.json, open while reading */
  FILE *raw;               /* raw.jsonl body, written to a temporary file */
  FILE *side;              /* temporary file of guard texts, so memory does
                              not grow with them */
  rp_timeline *timeline;    /* chromium event intervals, or NULL */
  FILE *sym[3];             /* symbolic_shapes.html rows per kind (tmpfiles) */
  size_t nsym[3];
  kn__sb jbuf;             /* scratch for raw.jsonl / chromium lines */
  bool stop;               /* a strict-mode defect happened */
  double total_compile_s;
  const char **status_of;  /* per compile index, built by rp_status_build */
} rp_report;

/* The report of one trace file into opts->out (prepared by the caller
** when out_ready, else prepared here). Returns KN_OK, or an error with
** kn_last_error() set (in strict mode: the first defect with file and line).
** If summary is not NULL the caller receives the finished report state and
** must call rp_report_fini on it; else it is released here. */
kn_status rp_report_file(const rp_opts *opts, const char *path,
                         rp_report *summary);
void rp_report_fini(rp_report *r);

/* Record a defect at a trace line; in strict mode this stops the run. */
void rp_defect(rp_report *r, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* record.c: one record from the reader. */
typedef struct kn__trace_record kn__trace_record;
kn_status rp_handle_record(rp_report *r, const kn__trace_record *rec);
/* compiles.c: the compile entry for a key, created on first sight. NULL
** on OOM or when RP_MAX_COMPILES entries exist already (then
** r->ncompiles == RP_MAX_COMPILES). Owned by r. */
rp_compile *rp_compile_get(rp_report *r, int64_t ca, int64_t frame,
                           int64_t fcid, int64_t attempt);
/* The entry for a key or NULL (borrowed). */
rp_compile *rp_compile_find(const rp_report *r, int64_t ca, int64_t frame,
                            int64_t fcid, int64_t attempt);
void rp_compile_free(rp_compile *c);
/* Add a listed artifact to c; strings are copied. false on OOM. */
bool rp_compile_add_artifact(rp_compile *c, const char *url, const char *name,
                             uint64_t number, const char *suffix,
                             const char *readable_url);
/* The guard text of c from the side file, NUL-terminated (owned, free it),
** or NULL when c has none. */
char *rp_compile_guards(const rp_report *r, const rp_compile *c);
/* The interned string with this id or "(unknown)". Borrowed. */
const char *rp_string(const rp_report *r, int64_t id);

/* metrics.c */
kn_status rp_write_metrics_page(rp_report *r, rp_compile *c, const char *event,
                                json_t *m, uint64_t line);
/* index.c */
kn_status rp_write_index(rp_report *r);
kn_status rp_write_failures_page(rp_report *r);
kn_status rp_write_compile_directory(rp_report *r);
/* views.c */
kn_status rp_write_recompiles_page(rp_report *r);
kn_status rp_write_graph_breaks_page(rp_report *r);
/* Compute the status class of every compile id ("status-ok", "status-error",
** "status-break", "status-empty", "status-missing"; static strings), merging
** all attempts of one frame compile as tlparse does. */
kn_status rp_status_build(rp_report *r);
/* Render a trie frame / terminal (shared by index and metrics pages). */
void rp_write_trie(rp_report *r, FILE *f, const rp_trie *t);

/* symbolic.c: the rows of symbolic_shapes.html and the page. */
bool rp_is_symbolic_event(const char *ev);
kn_status rp_symbolic_record(rp_report *r, const rp_compile *c, const char *ev,
                             json_t *v);
kn_status rp_write_symbolic_page(rp_report *r);

/* timeline.c: intervals from one minified chromium event (of compile c),
** and timeline.html. At most RP_TIMELINE_MAX intervals are kept. */
#define RP_TIMELINE_MAX 200000
kn_status rp_timeline_event(rp_report *r, const rp_compile *c, const char *ev,
                            size_t n);
kn_status rp_write_timeline_page(rp_report *r);
void rp_timeline_free(rp_timeline *t);

/* guardmatch.c: whether a guard line (from dynamo_cpp_guards_str or the
** guard table) checks what a recompile reason says failed. */
bool rp_guard_line_matches(const char *line, const char *failed);

/* ranks.c: the --all-ranks-html landing page over DIR. */
kn_status rp_report_all_ranks(const rp_opts *opts, const char *dir);

#endif
