/*
** trace/json_py.h: JSON text exactly as Python's json.dumps writes it, which
** the trace format (and the MD5 of every JSON payload) depends on.
**
** Compact mode is json.dumps(v): separators ", " and ": ", ensure_ascii
** (non-ASCII and DEL as lowercase \uXXXX, surrogate pairs above U+FFFF),
** floats as Python's repr (shortest round trip, "1.0", "1e+16", "1e-05").
** Indent-0 mode is json.dumps(v, indent=0): a newline after "{" / "[" and
** after each ",", no indentation. Object keys keep insertion order.
*/
#ifndef KN_TRACE_JSON_PY_H
#define KN_TRACE_JSON_PY_H

#include <jansson.h>
#include <stdbool.h>

#include "core/strbuf.h"

typedef enum kn__json_py_mode { KN__JSON_COMPACT, KN__JSON_INDENT0 } kn__json_py_mode;

/* Append the text of v to sb. False when v holds something JSON cannot
** carry (a non-finite real, invalid UTF-8); sb is then partly written. */
bool kn__json_py_dump(kn__sb *sb, const json_t *v, kn__json_py_mode mode);
/* Append a double as Python's repr(float) does. False if not finite. */
bool kn__json_py_real(kn__sb *sb, double d);
/* Append a string as a JSON string literal (ensure_ascii). */
bool kn__json_py_string(kn__sb *sb, const char *s, size_t n);
/* A trace payload from a JSON value (spec §1.4): a list as "[\n" + items
** (compact, one per line) joined by ",\n" + "\n]", anything else indent-0. */
bool kn__json_py_payload(kn__sb *sb, const json_t *v);

#endif
