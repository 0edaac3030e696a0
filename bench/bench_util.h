/*
** bench/bench_util.h: the clocks and the median every benchmark uses.
** Thread CPU time for single-threaded paths (on a shared machine wall time
** mostly measures the other processes), monotonic wall time for the rest.
** kn_bench_gemm_choices prints which library ran each float32 GEMM shape;
** kn_bench_turns times two runs in alternating turns.
*/
#ifndef KN_BENCH_UTIL_H
#define KN_BENCH_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ops/gemm_select.h"

static inline double kn_bench_clock(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread, in seconds. */
static inline double kn_bench_cpu_s(void) { return kn_bench_clock(CLOCK_THREAD_CPUTIME_ID); }
/* Monotonic wall time, in seconds. */
static inline double kn_bench_wall_s(void) { return kn_bench_clock(CLOCK_MONOTONIC); }

static inline int kn_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double kn_bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kn_bench_cmp_double);
  return v[n / 2];
}

/* One timed run of a side of kn_bench_turns: its time in seconds (the run
** times itself, so that work around what it measures need not count). */
typedef double (*kn_bench_run)(void *ud, int rep);

#define KN_BENCH_TURNS_MAX 64

/* Two runs timed in alternating turns, so that both see the same moments of
** a machine whose speed moves: reps (at most KN_BENCH_TURNS_MAX) turns of
** each, a turn `turn` runs in a row (each then finds in the caches what its
** own earlier runs left, as a loop of calls does) of which the fastest
** counts; *ta and *tb get the median turn of a and of b. */
static inline void kn_bench_turns(int reps, int turn, kn_bench_run a, void *ua, kn_bench_run b,
                                  void *ub, double *ta, double *tb) {
  double va[KN_BENCH_TURNS_MAX], vb[KN_BENCH_TURNS_MAX];
  if (reps > KN_BENCH_TURNS_MAX) reps = KN_BENCH_TURNS_MAX;
  for (int r = 0; r < reps; r++) {
    va[r] = vb[r] = 1e30;
    for (int k = 0; k < turn; k++) {
      double t = a(ua, r);
      va[r] = t < va[r] ? t : va[r];
    }
    for (int k = 0; k < turn; k++) {
      double t = b(ub, r);
      vb[r] = t < vb[r] ? t : vb[r];
    }
  }
  *ta = kn_bench_median(va, reps);
  *tb = kn_bench_median(vb, reps);
}

/* The OpenBLAS core a torch baseline runs with (OPENBLAS_CORETYPE): the
** one in the environment, which libkiln_ompenv set before main on Intel
** CPUs unless the user had (src/ompenv/ompenv.c: Debian's OpenBLAS 0.3.21
** names an Intel CPU newer than it knows "Prescott" and takes its SSE3
** kernels, which would time torch's GEMMs at a fraction of what the
** machine does); else ZEN on AMD. NULL: OpenBLAS's own choice. */
static inline const char *kn_bench_openblas_core(void) {
  const char *env = getenv("OPENBLAS_CORETYPE");
  if (env && *env) return env;
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") ? "ZEN" : NULL;
}

/* What libkiln_ompenv did to this process's OpenMP environment (1: set
** OMP_WAIT_POLICY=passive, 3: set GOMP_SPINCOUNT; src/ompenv/ompenv.c). */
extern int kn__ompenv_choice;

/* A Python process (Debian's /usr/bin/python3) running script, which
** answers requests line by line: for timing torch or numpy in turns with
** kiln, each repetition a request, so that both see the same moments of a
** machine whose speed moves from second to second (timing one after the
** other moved ratios 0.8-1.6x between runs on a shared VM). */
typedef struct kn_bench_py {
  FILE *to, *from; /* its standard input and output */
  pid_t pid;
} kn_bench_py;

/* Starts script with the environment variable name=value (name NULL: none),
** and OMP_WAIT_POLICY=passive when passive; false when the process cannot be
** started (its own failures, a missing module say, show as kn_bench_py_ask
** reading nothing). */
static inline bool kn_bench_py_start(kn_bench_py *p, const char *script, const char *name,
                                     const char *value, bool passive) {
  int in[2], out[2]; /* close-on-exec: another child must not keep them open */
  if (pipe2(in, O_CLOEXEC) != 0) return false;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return false;
  }
  fflush(stdout);
  signal(SIGPIPE, SIG_IGN); /* a process gone shows as a failed write */
  p->pid = fork();
  if (p->pid == 0) {
    dup2(in[0], 0), dup2(out[1], 1);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    if (!freopen("/dev/null", "w", stderr)) _exit(127);
    /* the baseline gets the user's OpenMP settings, not the wait policy
    ** libkiln_ompenv chose for this process (src/ompenv/ompenv.c): with
    ** kiln's OMP_WAIT_POLICY=passive (2 CPUs) torch's 2-thread CNN step
    ** took 6.7 ms instead of 3.8 */
    if (kn__ompenv_choice == 1) unsetenv("OMP_WAIT_POLICY");
    if (kn__ompenv_choice == 3) unsetenv("GOMP_SPINCOUNT");
    if (passive) setenv("OMP_WAIT_POLICY", "passive", 1);
    if (name) setenv(name, value, 1);
    execl("/usr/bin/python3", "python3", "-c", script, (char *)NULL);
    _exit(127);
  }
  close(in[0]), close(out[1]);
  if (p->pid < 0) {
    close(in[1]), close(out[0]);
    return false;
  }
  p->to = fdopen(in[1], "w"), p->from = fdopen(out[0], "r");
  return p->to && p->from;
}

/* Sends one request line and reads up to n numbers of its one-line answer
** into v; returns how many were read (0 once the process has gone). */
static inline int kn_bench_py_ask(kn_bench_py *p, const char *request, double *v, int n) {
  char line[1024];
  if (fprintf(p->to, "%s\n", request) < 0 || fflush(p->to) != 0) return 0;
  if (!fgets(line, sizeof line, p->from)) return 0;
  int got = 0, used;
  for (const char *s = line; got < n && sscanf(s, "%lf%n", &v[got], &used) == 1; s += used) got++;
  return got;
}

/* Ends the process (closing its input) and waits for it. */
static inline void kn_bench_py_stop(kn_bench_py *p) {
  if (p->to) fclose(p->to);
  if (p->from) fclose(p->from);
  if (p->pid > 0) waitpid(p->pid, NULL, 0);
  p->to = p->from = NULL, p->pid = 0;
}

/* A torch baseline in two Python processes running one script: p[0] with
** the OpenMP wait policy a user gets (libgomp's spin), p[1] with
** OMP_WAIT_POLICY=passive. Which is faster depends on the work and the
** machine (2 vCPUs: torch's 2-thread CNN step 3.8 ms spinning and 6.7
** passive, its transformer step 199 ms spinning and 94 passive, where the
** BLAS threads and the spinning OpenMP threads shared the CPUs), so the
** benchmarks time both and compare kiln with the faster: the best a torch
** user could run. */
typedef struct kn_bench_torch {
  kn_bench_py p[2];
  bool up[2];
} kn_bench_torch;

/* Starts both (OPENBLAS_CORETYPE=core unless NULL); true when at least one
** answers `probe` with a number. */
static inline bool kn_bench_torch_start(kn_bench_torch *t, const char *script, const char *core,
                                        const char *probe) {
  double v;
  for (int k = 0; k < 2; k++)
    t->up[k] = kn_bench_py_start(&t->p[k], script, core ? "OPENBLAS_CORETYPE" : NULL, core, k) &&
               kn_bench_py_ask(&t->p[k], probe, &v, 1) == 1;
  return t->up[0] || t->up[1];
}

/* One request to each process that is up: its number into v[k], -1 for
** one that is not (or stopped answering). */
static inline void kn_bench_torch_ask(kn_bench_torch *t, const char *req, double v[2]) {
  for (int k = 0; k < 2; k++) {
    if (t->up[k] && kn_bench_py_ask(&t->p[k], req, &v[k], 1) != 1) t->up[k] = false;
    if (!t->up[k]) v[k] = -1;
  }
}

/* The faster of the two medians (n values each in v[0], v[1]; sorts them),
** -1 when neither process answered every request; *passive says which. */
static inline double kn_bench_torch_best(kn_bench_torch *t, double *v0, double *v1, int n,
                                         bool *passive) {
  double m[2] = {-1, -1};
  for (int k = 0; k < 2; k++)
    if (t->up[k]) m[k] = kn_bench_median(k ? v1 : v0, n);
  *passive = m[1] >= 0 && (m[0] < 0 || m[1] < m[0]);
  return *passive ? m[1] : m[0];
}

/* The name of the wait policy kn_bench_torch_best chose, for BENCH lines. */
static inline const char *kn_bench_torch_policy(bool passive) {
  return passive ? "OMP_WAIT_POLICY=passive" : "libgomp's default";
}

/* The clock of a turn at `threads` threads (0: the default count), as
** KN_BENCH_TORCH_LOOP's: process CPU time at 1 thread (on a shared machine
** wall time mostly measures the other processes), wall time with more. */
static inline double kn_bench_turn_clock(int threads) {
  return threads == 1 ? kn_bench_clock(CLOCK_PROCESS_CPUTIME_ID) : kn_bench_wall_s();
}

/* The start of a torch baseline's script: the modules it and
** KN_BENCH_TORCH_LOOP use, and a fixed seed. */
#define KN_BENCH_TORCH_HEAD                                                 \
  "import sys, time, torch, torch.nn as nn\n"                               \
  "torch.manual_seed(0)\n"

/* The end of a torch baseline's script, after its step() and S (the steps
** of a turn): "rep <threads>" (0: torch's default) answered with the ms per
** step of one turn of S steps (process CPU time at 1 thread, else wall
** time). */
#define KN_BENCH_TORCH_LOOP                                                 \
  "default = torch.get_num_threads()\n"                                     \
  "for line in sys.stdin:\n"                                                \
  "    nt = int(line.split()[1]) or default\n"                              \
  "    torch.set_num_threads(nt)\n"                                         \
  "    clock = time.process_time if nt == 1 else time.perf_counter\n"       \
  "    t0 = clock()\n"                                                      \
  "    for _ in range(S): step()\n"                                         \
  "    print((clock() - t0) / S * 1e3, flush=True)\n"

/* A turn of torch at `threads` threads in each process (ms per step into
** v, -1 for one that is gone). */
static inline void kn_bench_torch_turn(kn_bench_torch *t, int threads, double v[2]) {
  char req[16];
  snprintf(req, sizeof req, "rep %d", threads);
  kn_bench_torch_ask(t, req, v);
}

/* A pause before each turn of kiln or torch: the BLAS and OpenMP threads of
** the side that ran before spin for up to about 0.1 s after their last
** call, and at 2 threads on 2 CPUs they took a CPU from the next turn
** (bench_transformer: eager after torch ran 87 ms where it ran 65 alone). */
static inline void kn_bench_settle(void) { usleep(150000); }

static inline void kn_bench_torch_stop(kn_bench_torch *t) {
  for (int k = 0; k < 2; k++) kn_bench_py_stop(&t->p[k]);
}

/* One BENCH_INFO line per float32 GEMM shape recorded since
** kn__gemm_record(true) (ops/gemm_select.h): transposes, M x N x K, kiln's
** threads, the library and its ISA/core, its team and the number of calls;
** then the record is cleared. tag names the part of the benchmark. */
static inline void kn_bench_gemm_choices(const char *tag) {
  kn__gemm_rec r[KN__GEMM_REC_MAX];
  int64_t dropped = 0;
  int n = kn__gemm_recorded(r, KN__GEMM_REC_MAX, &dropped);
  for (int i = 0; i < n; i++)
    printf("BENCH_INFO gemm_choice %s %c%c %lldx%lldx%lld t%d %s team %d calls %lld\n", tag,
           r[i].s.ta ? 'T' : 'N', r[i].s.tb ? 'T' : 'N', (long long)r[i].s.M,
           (long long)r[i].s.N, (long long)r[i].s.K, r[i].threads,
           kn__gemm_lib_name(r[i].plan.lib), r[i].plan.team, (long long)r[i].calls);
  if (dropped) printf("BENCH_INFO gemm_choice %s (%lld calls of further shapes)\n", tag,
                      (long long)dropped);
  kn__gemm_record(true);
}

#endif
