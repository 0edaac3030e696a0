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
#include <stdint.h>

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

/* Elements a thread of an eager kernel's team gets at least (the grain):
** a team takes one thread per grain, so a kernel under two grains runs on
** the calling thread and never enters OpenMP (no team, no wake-up), and a
** kernel of 3 grains wakes 3 threads, not every core. KN__GRAIN suits
** loops of a few operations an element (tanh, exp, a softmax or norm row,
** a reduction); KN__GRAIN_MEM those of a load and a store or two (add,
** copy, fill, compare, gather). docs/KERNELS.md, "Threads", has the
** measurements behind them; the generated code's KN_GRAIN is KN__GRAIN. */
#define KN__GRAIN ((int64_t)1 << 15)
#define KN__GRAIN_MEM ((int64_t)1 << 17)

/* The team for a loop of `work` elements in `units` independent pieces
** (rows, blocks): work / grain threads, at most units and the threads set
** (kn_set_num_threads); 1 (run on the calling thread) under two, inside an
** OpenMP parallel region, or for grain <= 0. Calls into OpenMP only when
** the loop is at least two grains. */
int kn__par_team(int64_t work, int64_t units, int64_t grain);

/* Multiply-adds a thread of a library's GEMM or convolution (oneDNN) gets
** at least: 2^20, some 30 us of AVX2 FMAs, a few wake-ups. */
#define KN__GRAIN_MAC ((int64_t)1 << 20)

/* Before a library call (oneDNN) doing `work` units: when the team from
** grain (kn__par_team) is smaller than OpenMP's count on this thread, set
** that count to the team (a thread-local setting; oneDNN reads it when it
** creates and runs a primitive) and return the count to restore with
** kn__par_restore; else 0 and nothing changes. A call of a team of one
** then runs on the calling thread without entering OpenMP. */
int kn__par_limit(int64_t work, int64_t grain);
void kn__par_restore(int prev);

/* KN__PAR_FOR(team, loop): the `for` loop run by an OpenMP team of `team`
** threads (schedule static) when team > 1, else a plain loop on the
** calling thread: unlike `#pragma omp parallel for if (...)`, a false
** condition calls nothing of OpenMP's (GOMP_parallel starts a team of one,
** a futex and some bookkeeping, on every call). KN__PAR_REGION(team,
** block): likewise a `parallel` region whose block shares its loops with
** _Pragma("omp for"), which a lone thread runs whole. */
#define KN__PAR_FOR(team, ...)                                                          \
  do {                                                                                  \
    const int kn__nt = (team);                                                          \
    if (kn__nt > 1) {                                                                   \
      _Pragma("omp parallel for schedule(static) num_threads(kn__nt)") __VA_ARGS__      \
    } else {                                                                            \
      __VA_ARGS__                                                                       \
    }                                                                                   \
  } while (0)
#define KN__PAR_REGION(team, ...)                                                       \
  do {                                                                                  \
    const int kn__nt = (team);                                                          \
    if (kn__nt > 1) {                                                                   \
      _Pragma("omp parallel num_threads(kn__nt)") __VA_ARGS__                           \
    } else {                                                                            \
      __VA_ARGS__                                                                       \
    }                                                                                   \
  } while (0)

/* Tests: the size of the OpenMP team a kiln kernel started on this thread
** now would get (after kn__threads_sync). */
int kn__threads_team_size(void);

#endif
