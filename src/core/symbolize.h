/*
** core/symbolize.h: return addresses to function, file and line.
**
** Addresses are symbolized with elfutils' libdwfl, loaded with dlopen at
** first use (no build dependency: without libdw, or without debug info,
** the parts that cannot be found are NULL / 0). Results are cached per
** address for the life of the process (one mutex guards the cache), and
** on disk per module build ID (core/symcache.h; partial ones too), so a new
** process running the same binaries finds them without libdw. Used
** by the capture frontend (source lines of graph nodes, dynamo/srcloc.h)
** and by the checked handle mode (where a tensor was created and
** released, tensor/handles.h).
*/
#ifndef KN_CORE_SYMBOLIZE_H
#define KN_CORE_SYMBOLIZE_H

#include <stdbool.h>

/* One symbolized frame. Strings are borrowed from the process-wide cache
** (valid for the life of the process). Unknown parts are NULL / 0. */
typedef struct kn__srcframe {
  const char *func;
  const char *file;
  int line;
} kn__srcframe;

/* A raw backtrace of the calling thread (return addresses), innermost
** first; returns how many were written (at most cap). */
int kn__backtrace(void **addrs, int cap);
/* Symbolize one return address (the call instruction just before it). */
kn__srcframe kn__symbolize(void *addr);
/* Write the frames libdw found since the last call to the disk cache
** (core/symcache.h); a no-op when there are none. Called when a trace
** ends. */
void kn__symbolize_save(void);
/* Could libdw be loaded (so that a frame without a file lacks debug info,
** rather than a symbolizer)? Loads it on first use, unless a frame already
** came from the disk cache (libdw found it in an earlier process). */
bool kn__symbolize_available(void);

/* From now on, search only local debug info: never start elfutils'
** debuginfod client (libcurl and its TLS libraries). Called by reports
** written while the process exits, when those libraries may already be
** finalised (starting them then crashed). Process-wide, one way. */
void kn__symbolize_local_only(void);
/* Is this a frame of kiln itself: a function named kn_* / kn__*, or code
** compiled from kiln's src/ tree? */
bool kn__is_kiln_frame(const kn__srcframe *f);
/* Does addr lie in libkiln.so? (Tells kiln's static helpers from the
** program's code when neither has debug info; always false when kiln is
** linked into the program itself.) */
bool kn__in_kiln_library(void *addr);

#endif
