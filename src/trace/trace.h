/*
** trace/trace.h: the structured-trace writer, one entry point for every
** subsystem (spec: docs/TRACE_FORMAT.md and trace_format.md §1-3).
**
** A record is: a glog header, a one-line JSON metadata object whose first key
** is the event name followed by rank, compiled_autograd_id, frame_id,
** frame_compile_id, attempt (each only when set) and has_payload (MD5 of the
** payload), then the payload lines, each prefixed by a tab.
**
** Cost when disabled: use KN_TRACE(...) or test kn__trace_enabled() first;
** both are one relaxed atomic load and a branch, and the metadata/payload
** expressions given to KN_TRACE are not evaluated at all.
*/
#ifndef KN_TRACE_TRACE_H
#define KN_TRACE_TRACE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "kiln/core.h"
#include "kiln/trace.h"
#include "trace/compile_id.h"

extern atomic_bool kn__trace_on;

static inline bool kn__trace_enabled(void) {
  return atomic_load_explicit(&kn__trace_on, memory_order_relaxed);
}

/* Where the record comes from and whose it is. Zero-initialised = defaults:
** the call site of the kn__trace_* call (its __FILE__ and __LINE__, filled
** by the macros below), compile id and attempt from the calling thread's
** compile context. */
typedef struct kn__trace_opts {
  const char *file;              /* header path (__FILE__; shortened to
                                    "src/..."; ':' is replaced by '_') */
  int line;                      /* header line */
  const kn_compile_id *compile_id; /* explicit id: written without attempt */
  bool suppress_context;         /* no rank or compile-id keys ("str") */
  const json_t *stack;           /* borrowed; written as the envelope "stack"
                                    when the record has no compile id (spec
                                    §1.3: why a record has no id) */
} kn__trace_opts;

/* Write one record. `metadata` is the value under the event key (stolen,
** even on error; NULL = {}); `payload` is NULL for none, else its bytes
** (payload_len, or strlen when payload_len is SIZE_MAX). No-op KN_OK when
** tracing is off. KN_EINVAL for a reserved event name or a value JSON cannot
** carry (non-finite number, invalid UTF-8); KN_EIO when the file cannot be
** created or written. */
kn_status kn__trace_structured_at(const char *file, int line, const char *event,
                                  json_t *metadata, const char *payload, size_t payload_len,
                                  const kn__trace_opts *opts);
#define kn__trace_structured(...) kn__trace_structured_at(__FILE__, __LINE__, __VA_ARGS__)

/* opts with the call site filled in when it has none: o itself, or *buf. */
const kn__trace_opts *kn__trace_at(kn__trace_opts *buf, const kn__trace_opts *o,
                                   const char *file, int line);

/* Build metadata and payload only when tracing is on. The builder sets
** *metadata (owned, may stay NULL) and appends the payload to *payload
** (set *has_payload); a non-OK status drops the record. */
typedef kn_status (*kn__trace_build_fn)(void *ud, json_t **metadata,
                                        kn__sb *payload, bool *has_payload);
kn_status kn__trace_structured_lazy_at(const char *file, int line, const char *event,
                                       kn__trace_build_fn build, void *ud,
                                       const kn__trace_opts *opts);
#define kn__trace_structured_lazy(...)                                         \
  kn__trace_structured_lazy_at(__FILE__, __LINE__, __VA_ARGS__)

/* The usual call: evaluates metadata/payload only when tracing is on. */
#define KN_TRACE(event, metadata, payload)                                    \
  do {                                                                        \
    if (kn__trace_enabled()) {                                                \
      kn__trace_opts kn__o_ = {.file = __FILE__, .line = __LINE__};           \
      (void)kn__trace_structured((event), (metadata), (payload), SIZE_MAX,    \
                                 &kn__o_);                                    \
    }                                                                         \
  } while (0)

/* The interned id of s (spec §1.6): dense ids in first-use order; the first
** use writes {"str": [s, id]} to the trace. -1 for NULL or when tracing is
** off. */
int64_t kn__trace_intern(const char *s);

/* Enable tracing from KILN_TRACE (done once at load time). */
kn_status kn__trace_init_from_env(void);

/* For tests: the header fields that vary (time, pid) are taken from here
** when set. NULL restores the real clock. ts = "MMDD HH:MM:SS.uuuuuu". */
void kn__trace_fake_header(const char *ts, long pid);

#endif
