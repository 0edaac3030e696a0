/*
** ops/threads.h: applying kiln's thread count (kiln/threads.h) to the
** calling thread (internal).
**
** The setting is one process-wide value with a generation number. Every
** entry into kiln's kernels (the dispatcher, a compiled graph's call) runs
** kn__threads_sync, which compares the generation with the one this thread
** last applied (a thread-local load and a relaxed atomic load) and, when they
** differ, sets OpenMP's thread count for this thread (omp_set_num_threads:
** the eager kernels' loops, generated code's loops and oneDNN all read it).
*/
#ifndef KN_OPS_THREADS_H
#define KN_OPS_THREADS_H

#include <stdbool.h>
#include <stddef.h>

/* Apply the current setting to the calling thread if it changed since this
** thread last did. */
void kn__threads_sync_slow(void);
extern _Atomic unsigned kn__threads_gen;
extern _Thread_local unsigned kn__threads_seen;
static inline void kn__threads_sync(void) {
  if (__builtin_expect(kn__threads_seen != kn__threads_gen, 0)) kn__threads_sync_slow();
}

/* Parse a KILN_NUM_THREADS value: true and *n set when v is a whole number
** from 1 to KN_MAX_THREADS (surrounding blanks allowed); false with why
** (n bytes) naming the expected and the found value otherwise. */
bool kn__threads_parse(const char *v, int *n, char *why, size_t len);

/* Tests: the size of the OpenMP team a kiln kernel started on this thread
** now would get (after kn__threads_sync). */
int kn__threads_team_size(void);

#endif
