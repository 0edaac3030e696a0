/*
** tools/report/run.c: one trace file to one report directory.
**
** read_trace is the only place that talks to the trace reader: it streams
** records into rp_handle_record. Around it, rp_report_file prepares OUT,
** opens the streamed outputs (chromium_events.json, the raw.jsonl body in a
** temporary file so the string table can come first) and writes the pages
** at the end. Defects are counted; in strict mode the first one stops the
** run with "FILE:LINE: what was wrong".
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/report.h"
#include "trace/reader.h"
#include "trace/reader_int.h"

void rp_defect(rp_report *r, uint64_t line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->st.defects++;
  char full[1400];
  snprintf(full, sizeof full, "%s:%llu: %s", r->input,
           (unsigned long long)line, msg);
  if (r->ndefect_msgs < RP_MAX_DEFECT_MSGS)
    r->defect_msgs[r->ndefect_msgs++] = strdup(full);
  if (r->opts->verbose) fprintf(stderr, "kiln report: %s\n", full);
  if (r->opts->strict) r->stop = true;
}

static void on_reader_defect(void *ud, const kn__trace_defect *d) {
  rp_defect(ud, d->line, "%s", d->message);
}

/* The record loop: the reader plugs in here and nowhere else. */
static kn_status read_trace(rp_report *r, const char *path) {
  kn__trace_reader_opts ro = {.strict = r->opts->strict,
                              .max_record_bytes = r->opts->max_record_bytes,
                              .on_defect = on_reader_defect,
                              .ud = r};
  kn__trace_reader *rd = kn__trace_reader_open(path, &ro);
  if (!rd) return kn_last_status();
  kn_status st = KN_OK;
  for (;;) {
    const kn__trace_record *rec = NULL;
    st = kn__trace_reader_next(rd, &rec);
    if (st || !rec) break;
    st = rp_handle_record(r, rec);
    if (st || r->stop) break;
  }
  kn__trace_reader_close(rd);
  if (r->stop && r->ndefect_msgs && r->defect_msgs[0])
    return kn__error(KN_EPARSE, "%s", r->defect_msgs[0]);
  if (r->stop) return kn__error(KN_EPARSE, "%s: defect in strict mode", path);
  return st;
}

static kn_status write_raw_jsonl(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "raw.jsonl");
  if (!f) return kn_last_status();
  json_t *tab = json_array();
  for (size_t i = 0; i < r->nstrings; i++)
    json_array_append_new(tab, r->strings[i] ? json_string(r->strings[i])
                                             : json_null());
  json_t *o = json_pack("{s:o}", "string_table", tab);
  json_dumpf(o, f, JSON_COMPACT);
  fputc('\n', f);
  json_decref(o);
  rewind(r->raw);
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, r->raw)) > 0) fwrite(buf, 1, n, f);
  bool bad = ferror(f) || ferror(r->raw);
  if (fclose(f) != 0 || bad) return kn__error(KN_EIO, "cannot write raw.jsonl");
  return KN_OK;
}

static kn_status finish(rp_report *r) {
  fputs("\n]\n", r->chromium);
  bool bad = ferror(r->chromium) != 0;
  if (fclose(r->chromium) != 0 || bad) {
    r->chromium = NULL;
    return kn__error(KN_EIO, "cannot write chromium_events.json");
  }
  r->chromium = NULL;
  kn_status st = write_raw_jsonl(r);
  if (!st) st = rp_status_build(r);
  if (!st) st = rp_write_failures_page(r);
  if (!st) st = rp_write_recompiles_page(r);
  if (!st) st = rp_write_graph_breaks_page(r);
  if (!st) st = rp_write_symbolic_page(r);
  if (!st) st = rp_write_timeline_page(r);
  if (!st) st = rp_write_compile_directory(r);
  if (!st) st = rp_write_index(r);
  return st;
}

/* An empty report (rp_report_fini can free it). */
static void init(rp_report *r, const rp_opts *opts, const char *path) {
  memset(r, 0, sizeof *r);
  r->opts = opts;
  r->input = path;
  r->expected_rank = -1;
  r->out.fd = -1;
  kn__hm_init(&r->unknown, true);
  rp_trie_init(&r->trie);
  rp_trie_init(&r->unknown_trie);
}

static kn_status start(rp_report *r, const rp_opts *opts) {
  kn_status st = rp_out_prepare(&r->out, opts->out, opts->overwrite);
  if (st) return st;
  r->chromium = rp_out_fopen(&r->out, "chromium_events.json");
  if (!r->chromium) return kn_last_status();
  fputs("[\n", r->chromium);
  r->raw = tmpfile();
  r->side = tmpfile();
  if (!r->raw || !r->side)
    return kn__error(KN_EIO, "cannot create a temporary file");
  return KN_OK;
}

/* ---- is it a trace at all? ---------------------------------------------------- */

#define SNIFF_LINES 64       /* non-empty lines looked at */
#define SNIFF_BYTES (1 << 16)

/* What the start of a file that is not a trace looks like, for the error. */
static void describe(kn__sb *what, const char *buf, size_t n, const char *first,
                     const char *why) {
  size_t i = 0;
  while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')) i++;
  if (memchr(buf, '\0', n)) {
    kn__sb_puts(what, "binary data");
  } else if (i < n && (buf[i] == '{' || buf[i] == '[')) {
    bool chrome = strstr(buf, "\"traceEvents\"") ||
                  (strstr(buf, "\"ph\"") && strstr(buf, "\"ts\""));
    kn__sb_puts(what, chrome ? "a JSON document in the Chrome trace format, as kiln's profiler "
                               "writes (KILN_PROFILE, kn_profiler_export_chrome_trace): open it "
                               "in Perfetto (ui.perfetto.dev) or chrome://tracing"
                             : "a JSON document");
  } else {
    kn__sb_printf(what, "the line '%.60s%s' (%s)", first, strlen(first) > 60 ? "..." : "", why);
  }
}

/* A structured trace starts with a record header (blank lines aside); a
** few junk lines before one are defects of a trace, not another format. A
** file that has none in its first lines is not a trace: the error names what
** it is. Empty files pass (a run that traced nothing). */
static kn_status check_is_trace(const char *path) {
  if (!strcmp(path, "-")) return KN_OK; /* stdin cannot be read twice */
  FILE *f = fopen(path, "rb");
  if (!f) return KN_OK;                 /* the reader reports it */
  char *buf = malloc(SNIFF_BYTES + 1);
  size_t n = buf ? fread(buf, 1, SNIFF_BYTES, f) : 0;
  fclose(f);
  if (!buf) return kn__oom();
  buf[n] = '\0';
  kn__sb err = KN__SB_INIT, what = KN__SB_INIT;
  char first[128] = "", why[256] = "";
  bool header = false, any = false;
  int lines = 0;
  for (char *p = buf, *end = buf + n; p < end && !header && lines < SNIFF_LINES;) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = (size_t)((nl ? nl : end) - p);
    if (len && p[len - 1] == '\r') len--;
    if (len) {
      kn__trace_hdr h;
      kn__sb_clear(&err);
      header = kn__trace_hdr_parse(p, len, &h, &err);
      if (!any) {
        snprintf(first, sizeof first, "%.*s", (int)(len < 100 ? len : 100), p);
        snprintf(why, sizeof why, "%s", kn__sb_failed(&err) ? "?" : kn__sb_cstr(&err));
      }
      any = true;
      lines++;
    }
    if (!nl) break;
    p = nl + 1;
  }
  kn_status st = KN_OK;
  if (any && !header) {
    describe(&what, buf, n, first, why);
    st = kn__error(KN_EPARSE, "'%s' is not a structured trace (KILN_TRACE or TORCH_TRACE): "
                   "none of its first lines is a record header such as 'V1126 20:50:56.316105 "
                   "15673 src/dynamo/compile.c:12] {\"dynamo_start\": ...}'; found %s", path,
                   kn__sb_failed(&what) ? "something else" : kn__sb_cstr(&what));
  }
  kn__sb_fini(&err);
  kn__sb_fini(&what);
  free(buf);
  return st;
}

kn_status rp_report_file(const rp_opts *opts, const char *path,
                         rp_report *summary) {
  rp_report local, *r = summary ? summary : &local;
  init(r, opts, path);
  kn_status st = check_is_trace(path);
  if (!st) st = start(r, opts);
  if (!st) st = read_trace(r, path);
  if (!st) st = finish(r);
  if (!st)
    fprintf(stderr,
            "kiln report: %s: %llu records, %llu ok, %llu defects, %zu "
            "compile ids, %llu chromium events -> %s/index.html\n",
            path, (unsigned long long)r->st.records,
            (unsigned long long)r->st.ok, (unsigned long long)r->st.defects,
            r->ncompiles, (unsigned long long)r->st.chromium, opts->out);
  if (!summary || st) {
    char *msg = st ? strdup(kn_last_error()) : NULL;
    if (!summary) rp_report_fini(r);
    if (msg) {
      kn__error(st, "%s", msg);
      free(msg);
    }
  }
  return st;
}

void rp_report_fini(rp_report *r) {
  for (size_t i = 0; i < r->ncompiles; i++) rp_compile_free(r->compiles[i]);
  free(r->cid_tab);
  free(r->compiles);
  for (size_t i = 0; i < r->nstrings; i++) free(r->strings[i]);
  free(r->strings);
  for (size_t i = 0; i < r->nfailures; i++) {
    free(r->failures[i].type), free(r->failures[i].reason);
    free(r->failures[i].source);
  }
  free(r->failures);
  free(r->status_of);
  for (size_t i = 0; i < r->nbreaks; i++) {
    free(r->breaks[i].location), free(r->breaks[i].reason);
    free(r->breaks[i].url);
  }
  free(r->breaks);
  for (size_t i = 0; i < r->ndefect_msgs; i++) free(r->defect_msgs[i]);
  kn__hm_fini(&r->unknown);
  rp_trie_fini(&r->trie);
  rp_trie_fini(&r->unknown_trie);
  kn__sb_fini(&r->jbuf);
  rp_timeline_free(r->timeline);
  if (r->chromium) fclose(r->chromium);
  if (r->raw) fclose(r->raw);
  if (r->side) fclose(r->side);
  for (int k = 0; k < 3; k++)
    if (r->sym[k]) fclose(r->sym[k]);
  rp_out_close(&r->out);
  memset(r, 0, sizeof *r);
}
