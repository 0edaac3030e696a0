/*
** kiln/trace.h: the structured trace (KILN_TRACE), kiln's equivalent of
** PyTorch's TORCH_TRACE. Records are written in PyTorch's trace format (see
** docs/TRACE_FORMAT.md), so PyTorch's tlparse and `kiln report` read them.
**
** Process-wide settings: tracing is on when KILN_TRACE=<dir> is set at load
** time or after kn_trace_enable(). The file
** <dir>/dedicated_log_kiln_trace_[rank_<R>_]XXXXXXXX.log is created lazily on
** the first record. All functions are thread-safe.
*/
#ifndef KILN_TRACE_H
#define KILN_TRACE_H

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trace into dir (created on the first record, with missing parents). A
** previously open trace file is closed first. KN_EINVAL for an empty dir. */
KN_API kn_status kn_trace_enable(const char *dir);
/* Stop tracing and close the file (a later enable starts a new file). */
KN_API void kn_trace_disable(void);
KN_API bool kn_trace_is_enabled(void);
/* The path of the current trace file, or NULL when tracing is off or no
** record was written yet. Owned by the caller: free() it. */
KN_API char *kn_trace_file_path(void);
/* The distributed rank written in every record ("rank": R) and, if set
** before the file is created, in its name. -1 (the default) = no rank. */
KN_API void kn_trace_set_rank(int64_t rank);

#ifdef __cplusplus
}
#endif
#endif
