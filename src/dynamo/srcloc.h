/*
** dynamo/srcloc.h: where in the user's C code an op was called.
**
** While tracing, the capture frontend takes a backtrace at each op call and
** keeps the frames that lie between the compiled function's entry and the
** public kiln function the user called. Addresses are turned into function,
** file and line by core/symbolize.h (without libdw or without debug info
** every location is unknown and callers fall back to the compiled
** function's own location). Source lines are read from the files and
** cached per file.
*/
#ifndef KN_DYNAMO_SRCLOC_H
#define KN_DYNAMO_SRCLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/symbolize.h"

#define KN__SRC_MAX_FRAMES 64 /* user frames kept */
/* Frames captured: the whole stack down to the user's caller must fit, or
** the depth of that caller (counted from the outermost frame) is lost. */
#define KN__SRC_CAPTURE_FRAMES 1024

/* A raw backtrace of the calling thread (return addresses), innermost first. */
int kn__srcloc_capture(void **addrs, int cap);
/* The number of frames from the calling function `func` (found by name in
** the backtrace) to the bottom of the stack: the `base_depth` below. */
int kn__srcloc_base_depth(const char *func);

/* The user frames of a backtrace taken inside kiln, outermost first, given
** the depth of the frame that called the user's root function (`base_depth`,
** from kn__srcloc_base_depth). Frames of functions named
** kn_* / kn__* (kiln itself) are skipped. `api` receives the kiln function
** called by the innermost user frame (e.g. "kn_mul"), or NULL. Returns the
** number of frames written (at most cap). */
int kn__srcloc_user_stack(void *const *addrs, int n, int base_depth, kn__srcframe *out,
                          int cap, const char **api);

/* The kiln frames of a backtrace taken inside kiln that lie inside the
** innermost user frame (the whole backtrace's kiln frames, innermost first,
** when no user frame is on it), outermost first: the "framework stack" of
** something kiln did on the user's behalf, from the public function the
** user called (kn_matmul) to the code that did it. Frames without a file
** and those of the shape environment (src/dynamic/) are left out. At most
** cap frames (the innermost ones). */
int kn__srcloc_framework_stack(void *const *addrs, int n, int base_depth, kn__srcframe *out,
                               int cap);

/* Line `line` (1-based) of `file`, without its newline; borrowed from the
** cache; NULL when unreadable. */
const char *kn__srcloc_line(const char *file, int line);
/* The first line at or after `from` whose text defines function `name`
** (name followed by '(' at the start of a definition), or `from` itself
** when none is found. Used for a function's first line. */
int kn__srcloc_def_line(const char *file, const char *name, int from);

/* Forget cached files and whether the missing-debug-info notice was
** logged (tests). When no frame of the user's code has a source location
** (built without -g, or libdw missing), kn__srcloc_user_stack logs once, on
** kiln.dynamo, how to get source lines: at WARNING when a structured trace
** or a log that shows source lines is on, else at INFO. */
void kn__srcloc_reset(void);

#endif
