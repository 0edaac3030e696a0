/*
** tools/report/html.c: escaping, page frame, numbered listings.
*/
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"

void rp_html_escn(FILE *f, const char *s, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    const char *rep = NULL;
    switch (s[i]) {
    case '&': rep = "&amp;"; break;
    case '<': rep = "&lt;"; break;
    case '>': rep = "&gt;"; break;
    case '"': rep = "&quot;"; break;
    case '\'': rep = "&#39;"; break;
    case '\0': rep = ""; break;
    default: continue;
    }
    fwrite(s + start, 1, i - start, f);
    fputs(rep, f);
    start = i + 1;
  }
  fwrite(s + start, 1, n - start, f);
}

void rp_html_esc(FILE *f, const char *s) {
  if (s) rp_html_escn(f, s, strlen(s));
}

void rp_html_escf(FILE *f, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  rp_html_esc(f, buf);
}

static const char *style =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;"
    "max-width:80em}\n"
    "h1{font-size:1.5em;overflow-wrap:anywhere}h2{font-size:1.2em;margin-top:1.5em;"
    "border-bottom:1px solid #ccc}\n"
    "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:.85em}\n"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
    "padding:.2em .5em;vertical-align:top;text-align:left}\n"
    "th{background:#eee}.num{text-align:right}\n"
    ".status-ok{color:#1a7f37}.status-error{color:#cf222e;font-weight:bold}\n"
    ".status-break{color:#9a6700}.status-empty{color:#777}"
    ".status-missing{color:#8250df}\n"
    ".legend span{margin-right:1em}.trie{font-family:monospace;"
    "font-size:.9em}\n"
    ".trie ul{border-left:1px dotted #999;padding-left:1.2em}\n"
    ".frame-loc{color:#555}.ln{color:#999;user-select:none;"
    "display:inline-block;width:4em}\n"
    "mark{background:#ffe08a}.summary td{min-width:5em}\n"
    "#filter{display:none}nav a{margin-right:1em}\n"
    ".guards pre{max-width:52em;max-height:30em;overflow:auto}\n"
    "td{overflow-wrap:anywhere}td pre{white-space:pre-wrap}"
    ".guards pre{white-space:pre}\n"
    ".code .k{color:#8250df;font-weight:bold}.code .s{color:#0a3069}"
    ".code .c{color:#6e7781;font-style:italic}.code .n{color:#0550ae}"
    ".code .fn{color:#953800}\n";

void rp_html_begin(FILE *f, const char *title, const char *base) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">"
        "\n",
        f);
  if (base && *base) fprintf(f, "<base href=\"%s\">\n", base);
  fputs("<title>", f);
  rp_html_esc(f, title);
  fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
}

/* Python's repr of a float (what PyTorch's json.dumps wrote): the fewest
** significant digits that read back as v; positional notation for decimal
** exponents -4..15 (with ".0" when integral), else d.ddde+XX. */
char *rp_fmt_double(char *buf, size_t n, double v) {
  if (v != v) return snprintf(buf, n, "NaN"), buf;
  if (v == 1.0 / 0.0 || v == -1.0 / 0.0)
    return snprintf(buf, n, "%sInfinity", v < 0 ? "-" : ""), buf;
  char e[40];
  int p = 1;
  for (; p < 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (strtod(e, NULL) == v) break;
  }
  snprintf(e, sizeof e, "%.*e", p - 1, v);
  char *x = strchr(e, 'e');
  int exp = atoi(x + 1);
  if (exp < -4 || exp >= 16) {
    snprintf(buf, n, "%.*s%s%02d", (int)(x - e), e, exp < 0 ? "e-" : "e+",
             exp < 0 ? -exp : exp);
    return buf;
  }
  int decimals = p - 1 - exp;
  snprintf(buf, n, "%.*f", decimals > 0 ? decimals : 0, v);
  if (decimals <= 0 && strlen(buf) + 2 < n) strcat(buf, ".0");
  return buf;
}

void rp_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

void rp_html_numbered(FILE *f, const char *s, size_t n) {
  rp_html_code(f, s, n, RP_LANG_NONE);
}

void rp_html_filter_script(FILE *f) {
  fputs("<script>\n"
        "(function(){var box=document.getElementById('filter');\n"
        "box.style.display='block';var q=document.getElementById('q');\n"
        "q.addEventListener('input',function(){\n"
        "var t=q.value.toLowerCase();\n"
        "var items=document.querySelectorAll('#compiles > li');\n"
        "for(var i=0;i<items.length;i++){var li=items[i];\n"
        "li.style.display=li.textContent.toLowerCase().indexOf(t)>=0?'':"
        "'none';}});})();\n"
        "</script>\n",
        f);
}
