/*
** trace/compile_id.h: CompileId and the thread-local compile context.
**
** A CompileId names one compilation: frame_id counts compiled frames (one
** per user function and per segment after a graph break), frame_compile_id
** counts recompiles of that frame, compiled_autograd_id is set only under
** compiled autograd. The attempt counts restarts of one compile. Both the log
** formatter (the "[0/1]" tag) and the trace writer (metadata fields) read the
** context of the calling thread.
*/
#ifndef KN_TRACE_COMPILE_ID_H
#define KN_TRACE_COMPILE_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/core.h"

typedef struct kn_compile_id {
  int64_t compiled_autograd_id; /* -1 when unset */
  int64_t frame_id;             /* -1 when unset */
  int64_t frame_compile_id;     /* -1 when unset */
} kn_compile_id;

#define KN_COMPILE_ID_NONE ((kn_compile_id){-1, -1, -1})

typedef struct kn__compile_ctx {
  bool active;       /* inside a compile */
  kn_compile_id id;
  int64_t attempt;   /* 0 for the first attempt */
  /* mode reduce-overhead: set by dynamo around its backend call; a backend
  ** that wraps the graphs it compiles in CUDA graphs itself (inductor's
  ** training forward and backward) sets cudagraphs_inner, and dynamo then
  ** leaves the whole callable unwrapped */
  bool cudagraphs, cudagraphs_inner;
} kn__compile_ctx;

/* The calling thread's context; borrowed, never NULL. */
kn__compile_ctx *kn__compile_ctx_get(void);
/* Enter a compile: saves the previous context in *saved and installs id with
** attempt 0. Leave restores *saved. Contexts nest (compiled autograd). */
void kn__compile_ctx_enter(kn_compile_id id, kn__compile_ctx *saved);
void kn__compile_ctx_leave(const kn__compile_ctx *saved);
/* fn runs once, on this thread, when its outermost compile context is left
** next (records held until the compile has written its own: events.h's
** kn__trace_runtime_metrics). A later call replaces an unrun fn. */
void kn__compile_ctx_on_leave(void (*fn)(void));

/* The PyTorch string form: "0/1", "!2/0/1", "!2" (only compiled autograd),
** without the attempt. Writes at most n bytes (NUL included) into buf and
** returns the length it needed, like snprintf. */
int kn__compile_id_format(kn_compile_id id, char *buf, size_t n);
/* The log tag form with the attempt: "0/1", "0/1_2" when attempt > 0. */
int kn__compile_id_format_attempt(kn_compile_id id, int64_t attempt, char *buf,
                                  size_t n);
/* Parse the string form (spec grammar). KN_EPARSE with a message naming the
** input on anything else ("-/-", "1/-", "!1/2" ...). */
kn_status kn__compile_id_parse(const char *s, kn_compile_id *out);

#endif
