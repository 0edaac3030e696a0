/*
** tools/report/jsonout.h: JSON output from the bytes that were read (no
** parse-and-dump round trip); see jsonout.c.
*/
#ifndef KN_TOOLS_REPORT_JSONOUT_H
#define KN_TOOLS_REPORT_JSONOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/strbuf.h"

/* Deepest nesting accepted (jansson's default limit too). */
#define RP_JSON_MAX_DEPTH 2048

/* Append s[0..n) to out without insignificant whitespace when it is one
** valid JSON object (RFC 8259, valid UTF-8, nesting <= RP_JSON_MAX_DEPTH)
** and nothing else; else append nothing and return false. Tokens are
** copied as written (no re-encoding of numbers or escapes). */
bool rp_json_minify_object(const char *s, size_t n, kn__sb *out);
/* Append s (NUL-terminated) as a JSON string; invalid UTF-8 bytes become
** \ufffd escapes. */
void rp_json_string(kn__sb *out, const char *s);
/* Append a one-line, non-empty JSON object's text without its closing
** brace, so fields can follow as ",\"k\":v" and a final '}'. false (nothing
** appended) when text does not look like that. */
bool rp_json_open_object(kn__sb *out, const char *text, size_t n);

/* In a minified, valid JSON object s[0..n) (as rp_json_minify_object
** writes it), the text of the top-level member key: *val points into s,
** strings keep their quotes. false when absent. */
bool rp_json_field(const char *s, size_t n, const char *key, const char **val,
                   size_t *vlen);

#endif
