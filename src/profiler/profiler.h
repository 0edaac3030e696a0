/*
** profiler/profiler.h: the hooks other subsystems call (kiln/profiler.h).
** The check is one relaxed atomic load: callers write
**   if (KN__PROF_ON()) { ... kn__prof_op_begin / kn__prof_op_end ... }
*/
#ifndef KN_PROFILER_PROFILER_H
#define KN_PROFILER_PROFILER_H

#include <stdatomic.h>
#include <stdint.h>

#include "kiln/profiler.h"

extern atomic_int kn__prof_on;
#define KN__PROF_ON() \
  __builtin_expect(atomic_load_explicit(&kn__prof_on, memory_order_relaxed), 0)

/* Around one dispatched op: begin returns a token for end. end records op
** (copied), its argument sizes as JSON text (shapes: malloc'd, owned by the
** profiler from here on; NULL when it could not be made) and the sequence
** number of the autograd node it created (-1 when none). */
int64_t kn__prof_op_begin(void);
void kn__prof_op_end(int64_t begin_ns, const char *op, char *shapes, int64_t seq);
/* A range that already ended: [now - seconds, now] (compile phases). */
void kn__prof_range_done(const char *name, double seconds);
/* A range around a compiled call: begin returns a token for end. */
int64_t kn__prof_range_begin(void);
void kn__prof_range_end(const char *prefix, const char *name, int64_t begin_ns);
/* An event [begin_ns, end_ns] (CLOCK_MONOTONIC) of category "cpu_op",
** recorded as if on thread `thread` (a collective: from its start to when
** MPI completed it, "mpi:all_reduce" as PyTorch's ProcessGroupMPI). name
** is copied; shapes as kn__prof_op_end's (malloc'd, owned from here on). */
void kn__prof_span(const char *name, char *shapes, int64_t begin_ns, int64_t end_ns,
                   uint64_t thread);
/* CLOCK_MONOTONIC in ns (the profiler's clock) and the kernel thread id. */
int64_t kn__prof_now_ns(void);
uint64_t kn__prof_thread_id(void);

/* A range inside a kernel ("onednn::matmul_execute"), so that the table
** splits an op's self time into its parts: kn__prof_sub_begin returns -1
** while the profiler is off (one branch), kn__prof_sub_end records
** [token, now] as `name` when token >= 0. */
static inline int64_t kn__prof_sub_begin(void) {
  return KN__PROF_ON() ? kn__prof_range_begin() : -1;
}
static inline void kn__prof_sub_end(const char *name, int64_t token) {
  if (token >= 0) kn__prof_range_end("", name, token);
}

#endif
