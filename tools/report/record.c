/*
** tools/report/record.c: what each trace record becomes in the report.
**
** Naming follows tlparse: one global counter N, taken by every file or link
** added to a compile directory in log order; a file for parser name X.ext is
** <dir>/X_N.ext where <dir> is the compile id's directory ("-_0_0_0").
** Unlike tlparse, records without an attempt but with a frame compile id go
** to the attempt-0 directory, the same one they are listed under. Payloads
** no handler wrote go to payloads/<md5>.txt; every accepted record but
** chromium events gets a raw.jsonl line.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/html.h"
#include "report/jsonout.h"
#include "report/report.h"
#include "trace/reader.h"

#define GUARDS_KEEP (64 * 1024)

static int64_t meta_int(json_t *m, const char *k) {
  json_t *v = json_object_get(m, k);
  return json_is_integer(v) && json_integer_value(v) >= 0
             ? json_integer_value(v) : -1;
}

static const char *meta_str(json_t *v, const char *k) {
  json_t *s = json_object_get(v, k);
  return json_is_string(s) ? json_string_value(s) : NULL;
}

const char *rp_string(const rp_report *r, int64_t id) {
  if (id < 0 || (size_t)id >= r->nstrings || !r->strings[id])
    return "(unknown)";
  return r->strings[id];
}

static const char *cache_suffix(const char *name) {
  if (strstr(name, "cache_miss")) return "\xe2\x9d\x8c";       /* ❌ */
  if (strstr(name, "cache_hit")) return "\xe2\x9c\x85";        /* ✅ */
  if (strstr(name, "cache_bypass")) return "\xe2\x9d\x93";     /* ❓ */
  return "";
}

/* The per-record context handed to the handlers. */
typedef struct rp_rec {
  rp_report *r;
  const kn__trace_record *rec;
  rp_compile *c;
  char payload_file[320]; /* set when a handler wrote the payload as is */
} rp_rec;

enum { AS_RAW, AS_JSON, AS_CODE };

/* Reserve the next number and build "<dir>/<stem>_N.<ext>". */
static uint64_t next_name(rp_rec *x, const char *stem, const char *ext,
                          char *rel, size_t n) {
  uint64_t num = x->r->counter++;
  char safe[RP_NAME_MAX + 1];
  rp_safe_name(safe, sizeof safe, stem);
  snprintf(rel, n, "%s/%s_%llu.%s", x->c->dir, safe, (unsigned long long)num,
           ext);
  return num;
}

static kn_status write_json_pretty(rp_rec *x, FILE *f) {
  json_error_t err;
  json_t *j = json_loadb(x->rec->payload, x->rec->payload_len,
                         JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
  if (!j) {
    fwrite(x->rec->payload, 1, x->rec->payload_len, f);
    rp_defect(x->r, x->rec->line, "%s payload is not valid JSON: %s",
              x->rec->event, err.text);
    return KN_OK;
  }
  json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
  fputc('\n', f);
  json_decref(j);
  return KN_OK;
}

/* Write the payload into a numbered file of the compile directory and list
** it. rel receives the path. */
static kn_status emit(rp_rec *x, const char *stem, const char *ext, int how,
                      char *rel, size_t reln) {
  uint64_t num = next_name(x, stem, ext, rel, reln);
  FILE *f = rp_out_fopen(&x->r->out, rel);
  if (!f) return kn_last_status();
  const kn__trace_record *rec = x->rec;
  if (how == AS_JSON) {
    write_json_pretty(x, f);
    snprintf(x->payload_file, sizeof x->payload_file, "%s", rel);
  } else if (how == AS_CODE) {
    rp_html_begin(f, strrchr(rel, '/') + 1, "../");
    fputs("<h1>", f);
    rp_html_esc(f, strrchr(rel, '/') + 1);
    fprintf(f, " <a href=\"index.html#%s\">%s</a></h1>\n", x->c->label,
            x->c->label);
    rp_html_code(f, rec->payload, rec->payload_len,
                 rp_guess_lang(rec->payload, rec->payload_len));
    rp_html_end(f);
  } else {
    fwrite(rec->payload, 1, rec->payload_len, f);
    snprintf(x->payload_file, sizeof x->payload_file, "%s", rel);
  }
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad)
    return kn__error(KN_EIO, "cannot write '%s/%s'", x->r->out.path, rel);
  const char *base = strrchr(rel, '/') + 1;
  if (!rp_compile_add_artifact(x->c, rel, base, num, cache_suffix(base), NULL))
    return kn__oom();
  return KN_OK;
}

static void keep_guards(rp_rec *x, const char *s, size_t n, const char *url) {
  rp_compile *c = x->c;
  free(c->guards_url);
  if (n > GUARDS_KEEP) n = GUARDS_KEEP;
  fseek(x->r->side, 0, SEEK_END);
  c->guards_off = ftell(x->r->side);
  c->guards_len = fwrite(s, 1, n, x->r->side);
  c->guards_url = strdup(url);
}

char *rp_compile_guards(const rp_report *r, const rp_compile *c) {
  if (c->guards_off < 0 || fseek(r->side, c->guards_off, SEEK_SET) != 0)
    return NULL;
  char *s = malloc(c->guards_len + 1);
  if (!s) return NULL;
  size_t n = fread(s, 1, c->guards_len, r->side);
  s[n] = '\0';
  return s;
}

static kn_status on_guards_json(rp_rec *x) {
  char rel[256];
  uint64_t num = next_name(x, "dynamo_guards", "html", rel, sizeof rel);
  json_t *j = json_loadb(x->rec->payload, x->rec->payload_len, 0, NULL);
  if (!json_is_array(j))
    rp_defect(x->r, x->rec->line, "dynamo_guards payload is not a JSON list");
  FILE *f = rp_out_fopen(&x->r->out, rel);
  if (!f) {
    json_decref(j);
    return kn_last_status();
  }
  rp_html_begin(f, "Guards", "../");
  fprintf(f, "<h1>Guards for %s</h1>\n<table>\n<tr><th>Code</th></tr>\n",
          x->c->label);
  kn__sb text = KN__SB_INIT;
  size_t i;
  json_t *g;
  json_array_foreach(j, i, g) {
    const char *code = meta_str(g, "code");
    fputs("<tr><td><code>", f);
    rp_html_esc(f, code ? code : "(no code)");
    fputs("</code></td></tr>\n", f);
    kn__sb_printf(&text, "%s\n", code ? code : "");
  }
  fputs("</table>\n", f);
  rp_html_end(f);
  fclose(f);
  json_decref(j);
  keep_guards(x, kn__sb_cstr(&text), text.len, rel);
  kn__sb_fini(&text);
  if (!rp_compile_add_artifact(x->c, rel, strrchr(rel, '/') + 1, num, "",
                               NULL))
    return kn__oom();
  return KN_OK;
}

static kn_status on_output_code(rp_rec *x) {
  const char *fn = meta_str(x->rec->value, "filename");
  char stem[256] = "";
  if (fn) {
    const char *b = strrchr(fn, '/');
    snprintf(stem, sizeof stem, "%s", b ? b + 1 : fn);
    char *dot = strrchr(stem, '.');
    if (dot) *dot = '\0';
  }
  char name[300], rel[256];
  snprintf(name, sizeof name, "inductor_output_code%s%s", *stem ? "_" : "",
           stem);
  if (x->r->opts->plain_text)
    return emit(x, name, "txt", AS_RAW, rel, sizeof rel);
  return emit(x, name, "html", AS_CODE, rel, sizeof rel);
}

/* "Graph break in user code at F:L" or the last 'File "F", line L'. */
static char *break_location(const char *p, size_t n) {
  const char *tag = "in user code at ";
  const char *s = strstr(p, tag);
  if (s) {
    s += strlen(tag);
    size_t len = strcspn(s, "\n");
    return strndup(s, len);
  }
  const char *last = NULL;
  for (const char *q = p; (q = strstr(q, "File \"")); q++) last = q;
  if (!last) return strdup("(unknown location)");
  last += 6;
  size_t flen = strcspn(last, "\"\n");
  long line = 0;
  const char *ln = strstr(last + flen, ", line ");
  if (ln && ln - last < (ptrdiff_t)(flen + 2)) line = strtol(ln + 7, NULL, 10);
  char buf[1024];
  snprintf(buf, sizeof buf, "%.*s:%ld", (int)(flen > 900 ? 900 : flen), last,
           line);
  (void)n;
  return strdup(buf);
}

static char *break_reason(const char *p) {
  const char *tags[] = {"Graph Break Reason: ", "Reason: "};
  for (int i = 0; i < 2; i++) {
    const char *s = strstr(p, tags[i]);
    if (s) {
      s += strlen(tags[i]);
      return strndup(s, strcspn(s, "\n"));
    }
  }
  while (*p == '\n') p++;
  size_t len = strcspn(p, "\n");
  return strndup(p, len > 200 ? 200 : len);
}

static kn_status add_break(rp_rec *x, const char *url) {
  rp_report *r = x->r;
  if (r->nbreaks == r->capbreaks) {
    size_t nc = r->capbreaks ? r->capbreaks * 2 : 16;
    rp_break *p = realloc(r->breaks, nc * sizeof *p);
    if (!p) return kn__oom();
    r->breaks = p;
    r->capbreaks = nc;
  }
  /* The payload has no NUL inside in practice; strstr stops at one. */
  rp_break *b = &r->breaks[r->nbreaks];
  b->location = break_location(x->rec->payload, x->rec->payload_len);
  b->reason = break_reason(x->rec->payload);
  b->url = strdup(url);
  b->compile = x->c->idx;
  if (!b->location || !b->reason || !b->url) {
    free(b->location), free(b->reason), free(b->url);
    return kn__oom();
  }
  r->nbreaks++;
  return KN_OK;
}

static kn_status kernel_traces_readable(rp_rec *x, const char *json_rel) {
  char rel[300];
  uint64_t num = x->r->counter++;
  (void)num;
  snprintf(rel, sizeof rel, "%.*s_readable.html",
           (int)(strrchr(json_rel, '.') - json_rel), json_rel);
  FILE *f = rp_out_fopen(&x->r->out, rel);
  if (!f) return kn_last_status();
  rp_html_begin(f, "Kernel stack traces", "../");
  fprintf(f, "<h1>Kernel stack traces for %s</h1>\n", x->c->label);
  rp_html_numbered(f, x->rec->payload, x->rec->payload_len);
  rp_html_end(f);
  fclose(f);
  rp_artifact *a = &x->c->arts[x->c->narts - 1];
  a->readable_url = strdup(rel);
  a->number++;
  return a->readable_url ? KN_OK : kn__oom();
}

static kn_status on_artifact(rp_rec *x) {
  const char *name = meta_str(x->rec->value, "name");
  const char *enc = meta_str(x->rec->value, "encoding");
  if (!name) name = "artifact";
  char rel[256];
  kn_status st;
  if (enc && !strcmp(enc, "json")) {
    st = emit(x, name, "json", AS_JSON, rel, sizeof rel);
    if (st) return st;
    if (!strcmp(name, "recompile_reasons")) {
      json_decref(x->c->recompile_reasons);
      x->c->recompile_reasons =
          json_loadb(x->rec->payload, x->rec->payload_len, 0, NULL);
    }
    if (!strcmp(name, "inductor_provenance_tracking_kernel_stack_traces"))
      return kernel_traces_readable(x, rel);
    return KN_OK;
  }
  if (!enc || strcmp(enc, "string")) {
    x->r->st.fail_parser++;
    rp_defect(x->r, x->rec->line,
              "artifact '%s' has encoding '%s'; expected \"string\" or "
              "\"json\"", name, enc ? enc : "(none)");
    return KN_OK;
  }
  st = emit(x, name, "txt", AS_RAW, rel, sizeof rel);
  if (st) return st;
  if (!strcmp(name, "dynamo_graph_break_reason")) return add_break(x, rel);
  return KN_OK;
}

static kn_status on_dump_file(rp_rec *x) {
  const char *name = meta_str(x->rec->value, "name");
  char clean[256], safe[RP_NAME_MAX + 1], rel[300];
  size_t n = 0;
  for (const char *p = name ? name : "dump"; *p && n < sizeof clean - 1; p++)
    if (*p != '<' && *p != '>') clean[n++] = *p == '.' ? '_' : *p;
  clean[n] = '\0';
  rp_safe_name(safe, sizeof safe, clean);
  snprintf(rel, sizeof rel, "dump_file/%s.html", safe);
  uint64_t num = x->r->counter++;
  FILE *f = rp_out_fopen(&x->r->out, rel);
  if (!f) return kn_last_status();
  rp_html_begin(f, name ? name : "dump_file", "../");
  fputs("<h1>", f);
  rp_html_esc(f, name ? name : "dump_file");
  fputs("</h1>\n", f);
  rp_html_code(f, x->rec->payload, x->rec->payload_len, RP_LANG_PY);
  rp_html_end(f);
  fclose(f);
  snprintf(x->payload_file, sizeof x->payload_file, "%s", rel);
  if (!rp_compile_add_artifact(x->c, rel, strrchr(rel, '/') + 1, num, "",
                               NULL))
    return kn__oom();
  return KN_OK;
}

static kn_status on_link(rp_rec *x) {
  const char *name = meta_str(x->rec->value, "name");
  const char *url = meta_str(x->rec->value, "url");
  uint64_t num = x->r->counter++;
  /* Only plain web links become hrefs: no javascript:, data:, file: ... */
  bool web = url && (!strncmp(url, "https://", 8) || !strncmp(url, "http://", 7));
  if (!rp_compile_add_artifact(x->c, web ? url : "", name ? name : "link", num,
                               "", NULL))
    return kn__oom();
  return KN_OK;
}

static const char *const graph_events[] = {
    "optimize_ddp_split_graph", "compiled_autograd_graph", "aot_forward_graph",
    "aot_backward_graph", "aot_inference_graph", "aot_joint_graph",
    "inductor_post_grad_graph", "inductor_pre_grad_graph",
    "dynamo_cpp_guards_str", "dynamo_output_graph", NULL};

static const char *const quiet_events[] = {
    "dynamo_start", "describe_storage", "describe_tensor", "describe_source",
    "chromium_event", NULL};

static bool in_list(const char *const *l, const char *s) {
  for (; *l; l++)
    if (!strcmp(*l, s)) return true;
  return false;
}

/* A highlighted HTML rendition beside a graph's .txt (rel), listed as its
** readable_url; it takes no number of its own. */
static kn_status graph_readable(rp_rec *x, const char *rel) {
  char html[300];
  snprintf(html, sizeof html, "%.*s.html", (int)(strrchr(rel, '.') - rel), rel);
  FILE *f = rp_out_fopen(&x->r->out, html);
  if (!f) return kn_last_status();
  rp_html_begin(f, strrchr(html, '/') + 1, "../");
  fputs("<h1>", f);
  rp_html_esc(f, strrchr(html, '/') + 1);
  fprintf(f, " <a href=\"index.html#%s\">%s</a> <small><a href=\"", x->c->label,
          x->c->label);
  rp_html_esc(f, rel);
  fputs("\">plain text</a></small></h1>\n", f);
  rp_html_code(f, x->rec->payload, x->rec->payload_len, RP_LANG_PY);
  rp_html_end(f);
  bool bad = ferror(f) != 0;
  if (fclose(f) != 0 || bad)
    return kn__error(KN_EIO, "cannot write '%s/%s'", x->r->out.path, html);
  rp_artifact *a = &x->c->arts[x->c->narts - 1];
  a->readable_url = strdup(html);
  return a->readable_url ? KN_OK : kn__oom();
}

static kn_status on_graph(rp_rec *x) {
  char rel[256];
  kn_status st = emit(x, x->rec->event, "txt", AS_RAW, rel, sizeof rel);
  if (st) return st;
  if (strcmp(x->rec->event, "dynamo_cpp_guards_str") &&
      (st = graph_readable(x, rel)))
    return st;
  if (!strcmp(x->rec->event, "dynamo_cpp_guards_str"))
    keep_guards(x, x->rec->payload, x->rec->payload_len, rel);
  if (!strcmp(x->rec->event, "dynamo_output_graph")) {
    const char *h = meta_str(x->rec->metadata, "has_payload");
    snprintf(x->c->graph_md5, sizeof x->c->graph_md5, "%s", h ? h : "");
  }
  return KN_OK;
}

static kn_status on_dynamo_start(rp_rec *x) {
  json_t *stack = json_object_get(x->rec->value, "stack");
  if (!json_is_array(stack)) return KN_OK;
  size_t n = json_array_size(stack);
  while (n > 0) { /* legacy logs end with convert_frame.py frames */
    json_t *fid = json_object_get(json_array_get(stack, n - 1), "filename");
    const char *fname = rp_string(x->r, json_integer_value(fid));
    if (!strstr(fname, "_dynamo/convert_frame.py")) break;
    n--;
  }
  if (n > 0) {
    const char *fn = meta_str(json_array_get(stack, n - 1), "name");
    free(x->c->fn_name);
    x->c->fn_name = fn ? strdup(fn) : NULL;
  }
  size_t idx = x->c->idx;
  if (!rp_trie_insert(&x->r->trie, stack, n, idx, NULL)) return kn__oom();
  return KN_OK;
}

/* The payload minified as read; jansson only when that fails. */
static kn_status on_chromium(rp_rec *x) {
  kn__sb *b = &x->r->jbuf;
  kn__sb_clear(b);
  if (x->r->st.chromium) kn__sb_puts(b, ",\n");
  size_t at = b->len;
  if (rp_json_minify_object(x->rec->payload, x->rec->payload_len, b)) {
    fwrite(b->buf, 1, b->len, x->r->chromium);
    x->r->st.chromium++;
    return rp_timeline_event(x->r, x->c, b->buf + at, b->len - at);
  }
  json_t *j = json_loadb(x->rec->payload, x->rec->payload_len, 0, NULL);
  if (!json_is_object(j)) {
    x->r->st.chromium_bad++;
    json_decref(j);
    return KN_OK;
  }
  if (x->r->st.chromium++) fputs(",\n", x->r->chromium);
  json_dumpf(j, x->r->chromium, JSON_COMPACT | JSON_SORT_KEYS);
  char *text = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  kn_status st = text ? rp_timeline_event(x->r, x->c, text, strlen(text)) : KN_OK;
  free(text);
  return st;
}

static kn_status dispatch(rp_rec *x) {
  const char *ev = x->rec->event;
  char rel[256];
  if (in_list(graph_events, ev)) return on_graph(x);
  if (!strcmp(ev, "artifact")) return on_artifact(x);
  if (!strcmp(ev, "dynamo_start")) return on_dynamo_start(x);
  if (!strcmp(ev, "inductor_output_code")) return on_output_code(x);
  if (!strcmp(ev, "dynamo_guards")) return on_guards_json(x);
  if (!strcmp(ev, "dump_file")) return on_dump_file(x);
  if (!strcmp(ev, "link")) return on_link(x);
  if (rp_is_symbolic_event(ev))
    return rp_symbolic_record(x->r, x->c, ev, x->rec->value);
  if (!strcmp(ev, "chromium_event")) return on_chromium(x);
  if (!strcmp(ev, "graph_dump")) {
    const char *name = meta_str(x->rec->value, "name");
    return emit(x, name ? name : "graph_dump", "txt", AS_RAW, rel, sizeof rel);
  }
  if (!strcmp(ev, "optimize_ddp_split_child")) {
    const char *name = meta_str(x->rec->value, "name");
    char stem[300];
    snprintf(stem, sizeof stem, "optimize_ddp_split_child_%s",
             name ? name : "");
    return emit(x, stem, "txt", AS_RAW, rel, sizeof rel);
  }
  if (!strcmp(ev, "compilation_metrics") ||
      !strcmp(ev, "bwd_compilation_metrics") ||
      !strcmp(ev, "aot_autograd_backward_compilation_metrics"))
    return rp_write_metrics_page(x->r, x->c, ev, x->rec->value, x->rec->line);
  if (!in_list(quiet_events, ev)) {
    uintptr_t n = (uintptr_t)kn__hm_get(&x->r->unknown, ev, NULL);
    if (!kn__hm_put(&x->r->unknown, ev, (void *)(n + 1))) return kn__oom();
  }
  return KN_OK;
}

static bool is_md5(const char *s) {
  if (!s || strlen(s) != 32) return false;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return false;
  return true;
}

static kn_status save_payload(rp_rec *x) {
  const char *h = meta_str(x->rec->metadata, "has_payload");
  if (!is_md5(h)) return KN_OK;
  snprintf(x->payload_file, sizeof x->payload_file, "payloads/%s.txt", h);
  if (rp_out_exists(&x->r->out, x->payload_file)) return KN_OK;
  FILE *f = rp_out_fopen(&x->r->out, x->payload_file);
  if (!f) return kn_last_status();
  fwrite(x->rec->payload, 1, x->rec->payload_len, f);
  return fclose(f) == 0 ? KN_OK : kn__error(KN_EIO, "cannot write payload");
}

static const char *trimmed_path(const kn__trace_record *rec) {
  const char *path = rec->src_file ? rec->src_file : "";
  while (*path == ' ') path++;
  return path;
}

/* The old way, for metadata text that cannot be extended as is. */
static void raw_line_json(rp_rec *x) {
  json_t *o = json_copy(x->rec->metadata);
  if (!o) return;
  const kn__trace_record *rec = x->rec;
  if (!json_object_get(o, "timestamp"))
    json_object_set_new(o, "timestamp", json_string(rec->timestamp ?
                                                    rec->timestamp : ""));
  if (!json_object_get(o, "thread"))
    json_object_set_new(o, "thread", json_integer(rec->thread));
  if (!json_object_get(o, "pathname"))
    json_object_set_new(o, "pathname", json_string(trimmed_path(rec)));
  if (!json_object_get(o, "lineno"))
    json_object_set_new(o, "lineno", json_integer((json_int_t)rec->src_line));
  if (x->payload_file[0] && !json_object_get(o, "payload_filename"))
    json_object_set_new(o, "payload_filename", json_string(x->payload_file));
  json_dumpf(o, x->r->raw, JSON_COMPACT | JSON_SORT_KEYS);
  fputc('\n', x->r->raw);
  json_decref(o);
}

static void str_field(kn__sb *b, json_t *m, const char *k, const char *v) {
  if (json_object_get(m, k)) return;
  kn__sb_printf(b, ",\"%s\":", k);
  rp_json_string(b, v);
}

static void int_field(kn__sb *b, json_t *m, const char *k, long long v) {
  if (!json_object_get(m, k)) kn__sb_printf(b, ",\"%s\":%lld", k, v);
}

/* The metadata text as read, with the fields tlparse adds (keys the
** metadata has already are kept as they are). */
static void raw_line(rp_rec *x) {
  const kn__trace_record *rec = x->rec;
  kn__sb *b = &x->r->jbuf;
  kn__sb_clear(b);
  if (!rec->metadata_text ||
      !rp_json_open_object(b, rec->metadata_text, rec->metadata_len)) {
    raw_line_json(x);
    return;
  }
  json_t *m = rec->metadata;
  str_field(b, m, "timestamp", rec->timestamp ? rec->timestamp : "");
  int_field(b, m, "thread", (long long)rec->thread);
  str_field(b, m, "pathname", trimmed_path(rec));
  int_field(b, m, "lineno", (long long)rec->src_line);
  if (x->payload_file[0]) str_field(b, m, "payload_filename", x->payload_file);
  kn__sb_puts(b, "}\n");
  fwrite(b->buf, 1, b->len, x->r->raw);
}

static kn_status on_str(rp_report *r, const kn__trace_record *rec) {
  json_t *s = json_array_get(rec->value, 0), *id = json_array_get(rec->value, 1);
  if (!json_is_string(s) || !json_is_integer(id) || json_integer_value(id) < 0) {
    rp_defect(r, rec->line, "str record must be [string, id >= 0]");
    return KN_OK;
  }
  /* The table is dense (raw.jsonl lists it by index): bound its size and
  ** the gap one record may open, so a tiny file cannot make it huge. */
  json_int_t v = json_integer_value(id);
  if (v >= RP_MAX_STRINGS || v > (json_int_t)(r->nstrings + RP_MAX_STRING_GAP)) {
    rp_defect(r, rec->line, "str record id %lld is out of range: ids must be "
              "below %d and at most %d past the largest id so far (%zu)",
              (long long)v, RP_MAX_STRINGS, RP_MAX_STRING_GAP, r->nstrings);
    return KN_OK;
  }
  size_t i = (size_t)v;
  if (i >= r->nstrings) {
    char **p = realloc(r->strings, (i + 1) * sizeof *p);
    if (!p) return kn__oom();
    memset(p + r->nstrings, 0, (i + 1 - r->nstrings) * sizeof *p);
    r->strings = p;
    r->nstrings = i + 1;
  }
  free(r->strings[i]);
  r->strings[i] = strdup(json_string_value(s));
  return r->strings[i] ? KN_OK : kn__oom();
}

kn_status rp_handle_record(rp_report *r, const kn__trace_record *rec) {
  r->st.records++;
  if (!strcmp(rec->event, "str")) return on_str(r, rec);
  rp_rec x = {.r = r, .rec = rec};
  if (r->expected_rank < 0 && rec->rank >= 0) r->expected_rank = rec->rank;
  if (r->expected_rank >= 0 && rec->rank != r->expected_rank) {
    r->st.other_rank++;
    rp_defect(r, rec->line, "record of rank %lld in a trace of rank %lld",
              (long long)rec->rank, (long long)r->expected_rank);
    raw_line(&x);
    return KN_OK;
  }
  json_t *m = rec->metadata;
  int64_t ca = meta_int(m, "compiled_autograd_id"), fr = meta_int(m, "frame_id");
  int64_t fc = meta_int(m, "frame_compile_id"), at = meta_int(m, "attempt");
  if (fc >= 0 && at < 0) at = 0;
  bool chromium = !strcmp(rec->event, "chromium_event");
  if (ca < 0 && fr < 0 && fc < 0 && !chromium) {
    r->st.no_compile_id++;
    if (r->opts->strict_compile_id)
      rp_defect(r, rec->line, "record '%s' has no compile id", rec->event);
  }
  x.c = rp_compile_get(r, ca, fr, fc, at);
  if (!x.c && r->ncompiles >= RP_MAX_COMPILES) {
    rp_defect(r, rec->line, "more than %d distinct compile ids; record '%s' "
              "skipped", RP_MAX_COMPILES, rec->event);
    return KN_OK;
  }
  if (!x.c) return kn__oom();
  r->st.ok++;
  kn_status st = dispatch(&x);
  if (st) return st;
  json_t *stack = json_object_get(m, "stack");
  if (json_is_array(stack)) {
    size_t idx = x.c->idx;
    if (!rp_trie_insert(&r->unknown_trie, stack, json_array_size(stack), idx,
                        NULL))
      return kn__oom();
  }
  if (chromium) return KN_OK;
  if (rec->has_payload && rec->payload_len > 0 && !x.payload_file[0]) {
    st = save_payload(&x);
    if (st) return st;
  }
  raw_line(&x);
  return KN_OK;
}
