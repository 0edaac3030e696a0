/*
** tools/report/html.h: HTML output helpers for the report pages.
**
** Everything that comes from a trace passes through rp_html_esc (text and
** attribute values alike: & < > " ' are replaced), so a payload holding
** "<script>" shows as text. Pages are self-contained: CSS and the small
** filter script are inline, nothing is fetched, and every page reads fine
** with JavaScript off. Output is deterministic (no run timestamps).
*/
#ifndef KN_TOOLS_REPORT_HTML_H
#define KN_TOOLS_REPORT_HTML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Escape n bytes of s (NUL bytes are dropped). */
void rp_html_escn(FILE *f, const char *s, size_t n);
void rp_html_esc(FILE *f, const char *s);
/* printf-style text that is escaped as a whole. */
void rp_html_escf(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Start a page: doctype, title (escaped), inline style; base is "" or a
** prefix like "../" that makes links root-relative. */
void rp_html_begin(FILE *f, const char *title, const char *base);
void rp_html_end(FILE *f);
/* Text as a <pre> with one <span id="L<n>"> anchor and a line number per
** line (generated code, dump_file sources). */
void rp_html_numbered(FILE *f, const char *s, size_t n);
/* v as Python's repr writes a float ("0.00061", "1e-05", "2.0"), into buf
** (32 bytes are enough). Returns buf. */
char *rp_fmt_double(char *buf, size_t n, double v);
/* highlight.c: code as rp_html_numbered lays it out, with keywords,
** strings, comments, numbers and called names in <span class="k|s|c|n|fn">
** (everything escaped). RP_LANG_NONE gives plain numbered lines. */
typedef enum { RP_LANG_NONE, RP_LANG_PY, RP_LANG_C } rp_lang;
void rp_html_code(FILE *f, const char *s, size_t n, rp_lang lang);
/* C when the first 4 KiB look like C (#include, void, ...), else Python. */
rp_lang rp_guess_lang(const char *s, size_t n);
/* The inline script that filters the compile list (index page only). */
void rp_html_filter_script(FILE *f);

#endif
