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

#include <omp.h>
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

/* The parts a team of nt (kn__par_team) cuts a loop of `work` elements in
** `units` pieces into, that its threads take as they finish the one before
** (schedule(dynamic)): KN__PAR_PARTS a thread, each at least a quarter
** grain of work and one piece, never fewer than nt. A thread on a slower
** core (another process on it, a vCPU the host shares) then takes fewer
** parts instead of the team waiting for its equal share. The generated
** code's kn_parts (inductor/codegen_call.c) is this rule. */
#define KN__PAR_PARTS 8
int kn__par_parts(int nt, int64_t work, int64_t units, int64_t grain);

/* Multiply-adds a thread of a library's GEMM or convolution (oneDNN) gets
** at least: 2^20, some 30 us of AVX2 FMAs, a few wake-ups. */
#define KN__GRAIN_MAC ((int64_t)1 << 20)

/* Multiply-adds a thread of a oneDNN convolution gets at least: 2^22, four
** KN__GRAIN_MAC. A convolution call enters OpenMP up to four times (the
** reorders of its source, weights and result to and from oneDNN's blocked
** layouts, and the primitive), each region paying the wake-ups a GEMM's one
** region pays (docs/KERNELS.md, "Threads"). */
#define KN__GRAIN_CONV ((int64_t)1 << 22)

/* Before a library call (oneDNN) doing `work` units: when the team from
** grain (kn__par_team) is one thread and OpenMP's count on this thread is
** more, set that count to 1 (a thread-local setting; oneDNN reads it when
** it creates and runs a primitive) and return the count to restore with
** kn__par_restore; else 0 and nothing changes. A call of a team of one
** then runs on the calling thread without entering OpenMP; a larger team
** gets the whole count (kn__par_threads says why no count in between). */
int kn__par_limit(int64_t work, int64_t grain);
/* kn__par_limit for a team already sized (a GEMM's plan): the same rule. */
int kn__par_limit_team(int team);
void kn__par_restore(int prev);

/* The sum of fn over the blocks [lo, hi) of blk elements that cut [0, n),
** each block's value computed on the threads (a team of n / grain, at most
** one a block) and the values added in block order: the same result on any
** number of threads. On the calling thread, in the same order, when the
** per-block values cannot be allocated. */
double kn__par_sum_blocks(int64_t n, int64_t blk, int64_t grain,
                          double (*fn)(const void *ctx, int64_t lo, int64_t hi), const void *ctx);

/* The start and close of a team's region (every thread calls
** kn__par_enter first and kn__par_join last). Under kiln's passive wait
** policy a thread reaching the region's closing barrier before the last
** one sleeps there and is woken when the last arrives; for the calling
** thread (thread 0) that is a second wake-up per region after the one
** that started the team (tens of us on an idle virtual machine, whose idle
** CPU halts: a 1M-element add ran slower on 2 threads than on 1). So
** thread 0 waits for the others at kn__par_join, spinning, when every
** other thread has started its part (they are running, and end about when
** thread 0 did plus their late start), for at most as long as its own part
** took; else (a thread not started yet: the machine is busy) it goes to the
** barrier at once. kn__par_wait_rule is the decision. */
typedef struct kn__join {
  _Atomic int started, arrived; /* threads other than 0 that entered / joined */
  int64_t t0;                   /* thread 0's entry (ns, CLOCK_MONOTONIC) */
} kn__join;
void kn__par_enter(kn__join *j);
void kn__par_join(kn__join *j);
/* Does thread 0 (still) wait at kn__par_join, `waited` ns into its wait,
** its part having taken `part` ns, `started` of the team's `nt - 1` other
** threads having entered and `arrived` joined? */
bool kn__par_wait_rule(int nt, int started, int arrived, int64_t part, int64_t waited);

/* The size of the OpenMP region a kernel whose team is `team` opens: 1 for
** team < 2, else OpenMP's count on this thread (the threads set), whatever
** the team. libgomp ends the surplus threads of its pool whenever a region
** asks for fewer threads than the one before, and creates them again (a
** pthread_create and a fresh stack each) for the next larger one: on a
** 16-core machine, a layer_norm of 16 grains in turns with an add of 4
** took 2.2 ms instead of 43 us, and 10 transformer steps page-faulted
** 13,000 times (a 2-CPU machine at 8 threads: 944 threads started in 23
** steps). So every region kiln opens has this one size; a team smaller
** than it shares its loop out over all of the region's threads, or leaves
** the surplus threads idle (the generated code's shares, a per-thread
** block). */
int kn__par_threads(int team);

/* KN__PAR_FOR(team, loop): the `for` loop run by an OpenMP region of
** kn__par_threads(team) threads (schedule static, closed by kn__par_join)
** when team > 1, else a plain loop on the calling thread: unlike
** `#pragma omp parallel for if (...)`, a false condition calls nothing of
** OpenMP's (GOMP_parallel starts a team of one, a futex and some
** bookkeeping, on every call).
** KN__PAR_REGION(team, block): likewise a `parallel` region whose block
** shares its loops with _Pragma("omp for"), which a lone thread runs
** whole. Called from inside a parallel region of the caller's own (a user's
** `omp parallel`, where kn__par_team gives 1), the block runs in a region
** of one thread: an orphaned `omp for` there would bind to the caller's
** team and hand each of its threads a share of that thread's own loop (a
** softmax, cumsum or layer_norm backward called from four user threads
** computed a quarter of each result), and omp_get_thread_num() would be
** the caller's. */
#define KN__PAR_FOR(team, ...)                                                          \
  do {                                                                                  \
    const int kn__nt = (team);                                                          \
    if (kn__nt > 1) {                                                                   \
      const int kn__nr = kn__par_threads(kn__nt);                                       \
      kn__join kn__j = {0, 0, 0};                                                       \
      _Pragma("omp parallel num_threads(kn__nr)") {                                     \
        kn__par_enter(&kn__j);                                                          \
        _Pragma("omp for schedule(static) nowait") __VA_ARGS__                          \
        kn__par_join(&kn__j);                                                           \
      }                                                                                 \
    } else {                                                                            \
      __VA_ARGS__                                                                       \
    }                                                                                   \
  } while (0)
#define KN__PAR_REGION(team, ...)                                                       \
  do {                                                                                  \
    const int kn__nt = (team);                                                          \
    if (kn__nt > 1 || omp_in_parallel()) {                                              \
      const int kn__nr = kn__nt > 1 ? kn__par_threads(kn__nt) : 1;                      \
      kn__join kn__j = {0, 0, 0};                                                       \
      _Pragma("omp parallel num_threads(kn__nr)") {                                     \
        kn__par_enter(&kn__j);                                                          \
        __VA_ARGS__                                                                     \
        kn__par_join(&kn__j);                                                           \
      }                                                                                 \
    } else {                                                                            \
      __VA_ARGS__                                                                       \
    }                                                                                   \
  } while (0)

/* Tests: the size of the OpenMP team a kiln kernel started on this thread
** now would get (after kn__threads_sync). */
int kn__threads_team_size(void);

#endif
