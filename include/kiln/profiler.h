/*
** kiln/profiler.h: an op-level profiler (torch.profiler in C).
**
**   kn_profiler_start();
**   ... eager ops, compiled calls, optimizer steps ...
**   kn_profiler_stop();
**   kn_profiler_export_chrome_trace("trace.json");   // Perfetto, chrome://tracing
**   char *t = kn_profiler_table("self_cpu_time_total", 20); puts(t); free(t);
**
** While it runs, every dispatched op becomes an event ("aten::<op>") with
** its input shapes, start time, duration, thread and the sequence number of
** the autograd node it created (-1 if none); ranges mark compiled calls
** ("Torch-Compiled Region: <fn>"), compile phases ("_compile.compile_inner",
** ...), optimizer steps ("Optimizer.step#Adam.step") and user ranges
** (kn_profiler_range_push / pop, like torch.profiler.record_function).
** Ops called inside other ops (composites) nest under them.
**
** KILN_PROFILE=<file> profiles the whole process: the profiler starts when
** the library loads and writes the Chrome trace to <file> at exit.
**
** When the profiler is off, the dispatcher pays one predictable branch.
** Events are kept in memory until the next kn_profiler_start (or
** kn_profiler_clear). Thread-safe: events from every thread are collected.
*/
#ifndef KILN_PROFILER_H
#define KILN_PROFILER_H

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start recording (drops earlier events). KN_ESTATE if already running. */
KN_API kn_status kn_profiler_start(void);
/* Stop recording; the events stay until the next start. */
KN_API kn_status kn_profiler_stop(void);
KN_API bool kn_profiler_is_running(void);
KN_API void kn_profiler_clear(void);

/* A named range on this thread (record_function). Pops must match pushes. */
KN_API void kn_profiler_range_push(const char *name);
KN_API void kn_profiler_range_pop(void);

/* One recorded event (borrowed strings: valid until the next start/clear). */
typedef struct kn_profiler_event {
  const char *name;     /* "aten::mm", "Optimizer.step#Adam.step" */
  const char *category; /* "cpu_op" or "user_annotation" */
  const char *shapes;   /* "[[2, 3], [3, 4]]" ("" for ranges) */
  int64_t start_ns, dur_ns; /* CLOCK_MONOTONIC */
  uint64_t thread;      /* kernel thread id */
  int64_t seq;          /* autograd sequence number, or -1 */
} kn_profiler_event;
KN_API int kn_profiler_num_events(void);
/* Event i in recording-completion order; false if out of range. */
KN_API bool kn_profiler_get_event(int i, kn_profiler_event *out);

/* Write the events as Chrome trace JSON ({"traceEvents": [...]}, "X"
** events in microseconds, args "Input Dims" and "Sequence number"). */
KN_API kn_status kn_profiler_export_chrome_trace(const char *path);
/* key_averages().table(): per name, self and total CPU time, their
** percentages, the average and the number of calls; sort_by is
** "self_cpu_time_total" (default when NULL), "cpu_time_total" or "count";
** row_limit <= 0 means all. Malloc'd string (caller frees) or NULL. */
KN_API char *kn_profiler_table(const char *sort_by, int row_limit);

#ifdef __cplusplus
}
#endif
#endif
