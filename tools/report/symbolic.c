/*
** tools/report/symbolic.c: symbolic_shapes.html, the dynamic-shape records.
**
** create_symbol and create_unbacked_symbol records (a size became a
** symbol), guard_added and guard_added_fast (the shape environment added a
** guard) and symbolic_shape_specialization (a symbol was specialized to a
** value) each become a table row with their compile id and their user and
** framework stacks, as tlparse lists them per compile. Rows are written to
** temporary files as records arrive, so memory does not grow with them, and
** the page is assembled at the end: one table per kind, in log order.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "report/html.h"
#include "report/report.h"

enum { SYM_SYMBOLS, SYM_GUARDS, SYM_SPECIAL };

static int kind_of(const char *ev) {
  if (!strcmp(ev, "create_symbol") || !strcmp(ev, "create_unbacked_symbol"))
    return SYM_SYMBOLS;
  if (!strcmp(ev, "guard_added") || !strcmp(ev, "guard_added_fast"))
    return SYM_GUARDS;
  if (!strcmp(ev, "symbolic_shape_specialization")) return SYM_SPECIAL;
  return -1;
}

bool rp_is_symbolic_event(const char *ev) { return kind_of(ev) >= 0; }

/* A field as text: strings as they are, lists of strings joined, anything
** else as compact JSON; "" when absent. */
static void cell(FILE *f, json_t *v) {
  fputs("<td>", f);
  if (json_is_string(v)) {
    rp_html_escn(f, json_string_value(v), json_string_length(v));
  } else if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (i) fputs(", ", f);
      if (json_is_string(e)) rp_html_esc(f, json_string_value(e));
    }
  } else if (v && !json_is_null(v)) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    rp_html_esc(f, s ? s : "");
    free(s);
  }
  fputs("</td>", f);
}

/* "file:line in name" of one frame. */
static void frame_text(rp_report *r, FILE *f, json_t *fr) {
  json_t *file = json_object_get(fr, "filename");
  json_t *line = json_object_get(fr, "line");
  json_t *name = json_object_get(fr, "name");
  rp_html_esc(f, json_is_integer(file) ? rp_string(r, json_integer_value(file)) : "(unknown)");
  fprintf(f, ":%lld in ", json_is_integer(line) ? (long long)json_integer_value(line) : -1LL);
  rp_html_esc(f, json_is_string(name) ? json_string_value(name) : "(unknown)");
}

static void frame_name(FILE *f, json_t *fr) {
  json_t *name = json_object_get(fr, "name");
  rp_html_esc(f, json_is_string(name) ? json_string_value(name) : "(unknown)");
}

/* A stack (list of {filename, line, name[, loc]}), innermost frame last.
** The summary says what a reader looks for without opening it: for a user
** stack the innermost frame (the line that caused the record), for a
** framework stack its outermost and innermost functions (the public function
** the user called, e.g. kn_matmul, and the code that added the guard). */
static void stack_cell(rp_report *r, FILE *f, json_t *st, bool user) {
  size_t n = json_array_size(st);
  fputs("<td>", f);
  if (!n) {
    fputs("</td>", f);
    return;
  }
  fputs("<details><summary>", f);
  if (user) {
    frame_text(r, f, json_array_get(st, n - 1));
  } else {
    frame_name(f, json_array_get(st, 0));
    if (n > 1) fputs(" &hellip; ", f), frame_name(f, json_array_get(st, n - 1));
  }
  fprintf(f, " (%zu frame(s))</summary><ul class=\"stack\">", n);
  size_t i;
  json_t *fr;
  json_array_foreach(st, i, fr) {
    json_t *loc = json_object_get(fr, "loc");
    fputs("<li>", f);
    frame_text(r, f, fr);
    if (json_is_string(loc)) {
      fputs("<br><code>", f);
      rp_html_esc(f, json_string_value(loc));
      fputs("</code>", f);
    }
    fputs("</li>", f);
  }
  fputs("</ul></details></td>", f);
}

static FILE *rows_file(rp_report *r, int k) {
  if (!r->sym[k]) r->sym[k] = tmpfile();
  return r->sym[k];
}

kn_status rp_symbolic_record(rp_report *r, const rp_compile *c, const char *ev,
                             json_t *v) {
  int k = kind_of(ev);
  FILE *f = k >= 0 ? rows_file(r, k) : NULL;
  if (!f) return k < 0 ? KN_OK : kn__error(KN_EIO, "cannot create a temporary file");
  r->nsym[k]++;
  fprintf(f, "<tr><td><a href=\"index.html#%s\">%s</a></td>", c->label, c->label);
  if (k == SYM_SYMBOLS) {
    cell(f, json_object_get(v, "symbol"));
    if (!strcmp(ev, "create_unbacked_symbol")) fputs("<td>(unbacked)</td>", f);
    else cell(f, json_object_get(v, "val"));
    cell(f, json_object_get(v, "vr"));
    cell(f, json_object_get(v, "source"));
  } else if (k == SYM_GUARDS) {
    fputs("<td><code>", f);
    json_t *e = json_object_get(v, "expr");
    if (json_is_string(e)) rp_html_esc(f, json_string_value(e));
    fputs("</code></td>", f);
    fprintf(f, "<td>%s</td>", ev); /* one of two fixed names */
  } else {
    cell(f, json_object_get(v, "symbol"));
    cell(f, json_object_get(v, "sources"));
    cell(f, json_object_get(v, "value"));
    cell(f, json_object_get(v, "reason"));
  }
  stack_cell(r, f, json_object_get(v, "user_stack"), true);
  stack_cell(r, f, json_object_get(v, "stack"), false);
  fputs("</tr>\n", f);
  return ferror(f) ? kn__error(KN_EIO, "cannot write a temporary file") : KN_OK;
}

static const char *const titles[3] = {"Symbols created", "Guards added",
                                      "Specializations"};
static const char *const heads[3] = {
    "<th>Symbol</th><th>Value</th><th>Range</th><th>Source</th>",
    "<th>Guard</th><th>Event</th>",
    "<th>Symbol</th><th>Sources</th><th>Value</th><th>Reason</th>"};
static const char *const ids[3] = {"symbols", "guards", "specializations"};

static void section(rp_report *r, FILE *f, int k) {
  fprintf(f, "<h2 id=\"%s\">%s</h2>\n", ids[k], titles[k]);
  if (!r->nsym[k]) {
    fputs("<p>None.</p>\n", f);
    return;
  }
  fprintf(f, "<table>\n<tr><th>Compile id</th>%s<th>User stack</th>"
          "<th>Framework stack</th></tr>\n", heads[k]);
  rewind(r->sym[k]);
  char buf[1 << 15];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, r->sym[k])) > 0) fwrite(buf, 1, n, f);
  fputs("</table>\n", f);
}

kn_status rp_write_symbolic_page(rp_report *r) {
  FILE *f = rp_out_fopen(&r->out, "symbolic_shapes.html");
  if (!f) return kn_last_status();
  rp_html_begin(f, "Symbolic shapes", "");
  fprintf(f, "<h1>Symbolic shapes</h1>\n<p><a href=\"index.html\">back to the "
          "index</a></p>\n<p>Sizes that became symbols (dynamic shapes), the "
          "guards the shape environment added on them, and the symbols that "
          "were specialized to a value, with the stacks that caused them: "
          "%zu symbol(s), %zu guard(s), %zu specialization(s).</p>\n",
          r->nsym[SYM_SYMBOLS], r->nsym[SYM_GUARDS], r->nsym[SYM_SPECIAL]);
  for (int k = 0; k < 3; k++) section(r, f, k);
  rp_html_end(f);
  bool bad = ferror(f) != 0;
  return fclose(f) == 0 && !bad ? KN_OK
                                : kn__error(KN_EIO, "cannot write symbolic_shapes.html");
}
