/*
** tests/distributed/dist_check.c: the multi-process checks of the
** distributed layer, run by run.sh under `mpirun -np 2`. Each mode checks
** results against values computed independently from the ranks (a sum of
** rank-dependent literals, a one-process training run) and prints
** "rank N: ok MODE" at the end, or "rank N: FAIL ..." lines and exits 1.
**   collectives  all_reduce/broadcast/all_gather/reduce_scatter, sync and
**                async, three dtypes, non-contiguous tensors, barrier
**   skip         rank 1 skips a collective: rank 0 fails within the timeout
**                naming rank 1 (KILN_DIST_TIMEOUT set by run.sh)
**   kill         rank 1 dies (SIGKILL) before a collective: the same
**   ddp          DDP training equals one process over the global batch;
**                rank 0's checkpoint loads into a fresh model
**   ddp_digits   the digits MLP and CNN on the committed digits rows:
**                DDP equals one process over the global batch
**   ddp_compile  the same as ddp with the loss compiled (inductor): the graph
**                splits at the DDP buckets (DDPOptimizer)
**   logs         [rankN]: log prefixes, per-rank trace files (rank 1
**                compiles another graph; run.sh reports the traces)
*/
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kiln/distributed.h"

static int failures;
static int rank, world;
static const char *nbc_var = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
static char nbc_before[32]; /* its value before kn_dist_init ("" unset) */

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      failures++;                                                \
      printf("rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
      printf(__VA_ARGS__);                                       \
      printf(" [%s]\n", kn_last_error());                        \
    }                                                            \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A [3, 4] tensor of dtype dt holding (rank + 1) * (k + 1) at flat index k. */
static kn_tensor *ranked(kn_dtype dt, int r) {
  kn_tensor *t = kn_empty(2, (int64_t[]){3, 4}, dt);
  for (int k = 0; k < 12; k++) {
    double v = (double)(r + 1) * (k + 1);
    if (dt == KN_FLOAT32) ((float *)kn_data(t))[k] = (float)v;
    else if (dt == KN_FLOAT64) ((double *)kn_data(t))[k] = v;
    else ((int64_t *)kn_data(t))[k] = (int64_t)v;
  }
  return t;
}

static double at(kn_tensor *t, int64_t i, int64_t j) { return kn_get(t, (int64_t[]){i, j}); }

/* Expected element (i, j) of the [3, 4] all_reduce result (of the tensor
** indexed as stored, before any transpose). */
static double expect_reduce(kn_reduce_op op, int k) {
  double sum = 0, mx = -1e300, mn = 1e300;
  for (int r = 0; r < world; r++) {
    double v = (double)(r + 1) * (k + 1);
    sum += v;
    mx = fmax(mx, v);
    mn = fmin(mn, v);
  }
  switch (op) {
  case KN_REDUCE_SUM: return sum;
  case KN_REDUCE_AVG: return sum / world;
  case KN_REDUCE_MAX: return mx;
  default: return mn;
  }
}

static void check_all_reduce(kn_dtype dt, kn_reduce_op op, bool transposed, bool async) {
  kn_scope_begin();
  kn_tensor *base = ranked(dt, rank);
  kn_tensor *t = transposed ? kn_t(base) : base; /* [4, 3] view, non-contiguous */
  kn_status st;
  if (async) {
    kn_dist_work *w = NULL;
    st = kn_dist_all_reduce_async(t, op, &w);
    bool done = false;
    while (st == KN_OK && !done) st = kn_dist_test(w, &done);
    if (st == KN_OK) st = kn_dist_wait(w); /* again: the same status */
    kn_dist_work_free(w);
  } else {
    st = kn_dist_all_reduce(t, op);
  }
  CHECK(st == KN_OK, "all_reduce %s op %d", kn_dtype_name(dt), (int)op);
  for (int k = 0; st == KN_OK && k < 12; k++) {
    double e = expect_reduce(op, k);
    if (dt == KN_INT64 && op == KN_REDUCE_AVG) e = trunc(e);
    double got = at(base, k / 4, k % 4);
    CHECK(got == e, "all_reduce %s op %d%s%s: element %d is %g, expected %g", kn_dtype_name(dt),
          (int)op, transposed ? " transposed" : "", async ? " async" : "", k, got, e);
  }
  kn_scope_end();
}

static void check_broadcast(kn_dtype dt, int src, bool async) {
  kn_scope_begin();
  kn_tensor *base = ranked(dt, rank), *t = kn_t(base);
  kn_status st;
  if (async) {
    kn_dist_work *w = NULL;
    st = kn_dist_broadcast_async(t, src, &w);
    if (st == KN_OK) st = kn_dist_wait(w);
    kn_dist_work_free(w);
  } else {
    st = kn_dist_broadcast(t, src);
  }
  CHECK(st == KN_OK, "broadcast from %d", src);
  for (int k = 0; st == KN_OK && k < 12; k++)
    CHECK(at(base, k / 4, k % 4) == (double)(src + 1) * (k + 1), "broadcast element %d", k);
  kn_scope_end();
}

static void check_all_gather(kn_dtype dt, bool async) {
  kn_scope_begin();
  kn_tensor *in = kn_t(ranked(dt, rank));               /* [4, 3], non-contiguous */
  kn_tensor *out = kn_zeros(3, (int64_t[]){world, 4, 3}, dt);
  kn_status st;
  if (async) {
    kn_dist_work *w = NULL;
    st = kn_dist_all_gather_async(out, in, &w);
    if (st == KN_OK) st = kn_dist_wait(w);
    kn_dist_work_free(w);
  } else {
    st = kn_dist_all_gather(out, in);
  }
  CHECK(st == KN_OK, "all_gather %s", kn_dtype_name(dt));
  for (int r = 0; st == KN_OK && r < world; r++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++) {
        double e = (double)(r + 1) * (j * 4 + i + 1); /* transposed: (i, j) is base (j, i) */
        double got = kn_get(out, (int64_t[]){r, i, j});
        CHECK(got == e, "all_gather [%d, %d, %d] is %g, expected %g", r, i, j, got, e);
      }
  kn_scope_end();
}

static void check_reduce_scatter(kn_dtype dt, kn_reduce_op op) {
  kn_scope_begin();
  /* in: [world * 3, 4]: rank r contributes (r + 1) * (k + 1) at flat k */
  kn_tensor *in = kn_empty(2, (int64_t[]){world * 3, 4}, dt);
  for (int k = 0; k < world * 12; k++) {
    double v = (double)(rank + 1) * (k + 1);
    if (dt == KN_FLOAT32) ((float *)kn_data(in))[k] = (float)v;
    else if (dt == KN_FLOAT64) ((double *)kn_data(in))[k] = v;
    else ((int64_t *)kn_data(in))[k] = (int64_t)v;
  }
  kn_tensor *out = kn_t(kn_zeros(2, (int64_t[]){4, 3}, dt)); /* [3, 4] non-contiguous */
  kn_status st = kn_dist_reduce_scatter(out, in, op);
  CHECK(st == KN_OK, "reduce_scatter %s", kn_dtype_name(dt));
  for (int k = 0; st == KN_OK && k < 12; k++) {
    int flat = rank * 12 + k;
    double e = expect_reduce(op, flat);
    if (dt == KN_INT64 && op == KN_REDUCE_AVG) e = trunc(e);
    double got = at(out, k / 4, k % 4);
    CHECK(got == e, "reduce_scatter element %d is %g, expected %g", k, got, e);
  }
  kn_scope_end();
}

/* All-reduces of every length that takes Open MPI's non-blocking all-reduce
** down a different path (one element, fewer than the ranks, odd, above its
** 64 KB threshold, DDP-bucket sized), every op, against sums computed here:
** rank r's element i is (r + 1) * (i % 97 + 1), exact in float32. */
static void check_all_reduce_lengths(void) {
  const int64_t lens[] = {1, 2, 3, 1001, 300001, 1048576 + 10250};
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (int op = KN_REDUCE_SUM; op <= KN_REDUCE_MIN; op++) {
      kn_scope_begin();
      int64_t n = lens[l];
      kn_tensor *t = kn_empty(1, &n, KN_FLOAT32);
      float *d = kn_data(t);
      for (int64_t i = 0; i < n; i++) d[i] = (float)((rank + 1) * (i % 97 + 1));
      kn_dist_work *w = NULL;
      kn_status st = kn_dist_all_reduce_async(t, (kn_reduce_op)op, &w);
      if (st == KN_OK) st = kn_dist_wait(w);
      kn_dist_work_free(w);
      CHECK(st == KN_OK, "all_reduce of %lld elements, op %d", (long long)n, op);
      int64_t bad = -1;
      for (int64_t i = 0; st == KN_OK && i < n && bad < 0; i++) {
        double k = (double)(i % 97 + 1), lo = k, hi = k * world, sum = k * world * (world + 1) / 2;
        double e = op == KN_REDUCE_SUM ? sum : op == KN_REDUCE_AVG ? sum / world
                   : op == KN_REDUCE_MAX ? hi : lo;
        if ((double)d[i] != (double)(float)e) bad = i;
      }
      CHECK(bad < 0, "all_reduce of %lld elements, op %d: element %lld is %g", (long long)n, op,
            (long long)bad, bad < 0 ? 0.0 : (double)d[bad]);
      kn_scope_end();
    }
}

/* kn_dist_init asks Open MPI for the reduce-scatter + all-gather all-reduce
** (3) unless the launcher's environment chose one (run.sh sets 1 for ddp). */
static void check_nbc_algorithm(const char *mode) {
  const char *now = getenv(nbc_var);
  const char *want = nbc_before[0] ? nbc_before : "3";
  CHECK(now && !strcmp(now, want), "%s: %s is '%s' after kn_dist_init, expected '%s'", mode,
        nbc_var, now ? now : "(unset)", want);
}

/* An asynchronous all-reduce (8 MiB, Open MPI's multi-round path) while the
** caller makes no MPI call: the progress thread completes it (Open MPI alone
** moves it only inside MPI calls); with KILN_DIST_PROGRESS=none nothing
** tests it until kn_dist_wait. The result is checked either way. */
static void check_progress(void) {
  const char *p = getenv("KILN_DIST_PROGRESS");
  bool thread = !p || strcmp(p, "none");
  kn_scope_begin();
  int64_t n = 1 << 21;
  kn_tensor *t = kn_full(1, &n, kn_float(rank + 1), KN_FLOAT32);
  kn_dist_work *w = NULL;
  CHECK(kn_profiler_start() == KN_OK, "profiler");
  CHECK(kn_dist_all_reduce_async(t, KN_REDUCE_SUM, &w) == KN_OK, "async all_reduce");
  double t0 = now_s();
  while (w && !kn_dist_work_is_completed(w) && now_s() - t0 < (thread ? 60 : 0.2))
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  if (thread)
    CHECK(kn_dist_work_is_completed(w), "the progress thread completed the all-reduce (%.1f s)",
          now_s() - t0);
  else
    CHECK(!kn_dist_work_is_completed(w), "no progress thread: nothing completed the all-reduce");
  CHECK(kn_dist_wait(w) == KN_OK && kn_dist_work_is_completed(w), "wait");
  kn_dist_work_free(w);
  kn_profiler_stop();
  /* the profiler's event spans the collective, as torch's "mpi:all_reduce" */
  kn_profiler_event e;
  int found = 0;
  for (int i = 0; kn_profiler_get_event(i, &e); i++)
    if (!strcmp(e.name, "mpi:all_reduce")) {
      found++;
      CHECK(!strcmp(e.shapes, "[[2097152]]") && e.dur_ns > 0 && e.dur_ns < (int64_t)60e9,
            "mpi:all_reduce event: shapes %s, %lld ns", e.shapes, (long long)e.dur_ns);
    }
  CHECK(found == 1, "%d mpi:all_reduce events, expected 1", found);
  kn_profiler_clear();
  float want = (float)(world * (world + 1) / 2);
  CHECK(((float *)kn_data(t))[0] == want && ((float *)kn_data(t))[n - 1] == want,
        "all_reduce result %g, expected %g", (double)((float *)kn_data(t))[0], (double)want);
  kn_scope_end();
}

static void mode_collectives(void) {
  check_nbc_algorithm("collectives");
  check_progress();
  check_all_reduce_lengths();
  kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64, KN_INT64};
  for (int d = 0; d < 3; d++) {
    for (int op = KN_REDUCE_SUM; op <= KN_REDUCE_MIN; op++) {
      check_all_reduce(dts[d], (kn_reduce_op)op, false, false);
      check_all_reduce(dts[d], (kn_reduce_op)op, true, true);
      check_reduce_scatter(dts[d], (kn_reduce_op)op);
    }
    check_broadcast(dts[d], world - 1, d == 1);
    check_all_gather(dts[d], d == 2);
  }
  CHECK(kn_dist_barrier() == KN_OK, "barrier");
  /* errors are values: a bad source rank, a dtype MPI does not get */
  kn_scope_begin();
  kn_tensor *t = kn_zeros(1, (int64_t[]){4}, KN_INT32);
  CHECK(kn_dist_all_reduce(t, KN_REDUCE_SUM) == KN_EDTYPE &&
        strstr(kn_last_error(), "expected a float32, float64 or int64 tensor"), "int32 refused");
  kn_tensor *f = kn_zeros(1, (int64_t[]){4}, KN_FLOAT32);
  CHECK(kn_dist_broadcast(f, world) == KN_EINVAL, "source rank %d refused", world);
  kn_scope_end();
  CHECK(kn_dist_barrier() == KN_OK, "barrier after the refused calls");
}

/* Rank 1 leaves after the first all_reduce (skipping: sleeps past the
** timeout; kill: SIGKILL); rank 0's second all_reduce fails in time. */
static void mode_fault(bool kill_it) {
  kn_scope_begin();
  kn_tensor *t = kn_ones(1, (int64_t[]){8}, KN_FLOAT32);
  CHECK(kn_dist_all_reduce(t, KN_REDUCE_SUM) == KN_OK, "first all_reduce");
  if (rank == 1) {
    fflush(stdout);
    if (kill_it) raise(SIGKILL);
    sleep((unsigned)kn_dist_timeout() + 3);
    printf("rank 1: ok %s (skipped all_reduce #2)\n", kill_it ? "kill" : "skip");
    fflush(stdout);
    _exit(0);
  }
  double t0 = now_s();
  kn_status st = kn_dist_all_reduce(t, KN_REDUCE_SUM);
  double took = now_s() - t0;
  char want[160];
  snprintf(want, sizeof want, "all_reduce #2 did not complete within %g s: rank 1 did not enter "
           "it (1 of 2 ranks missing)", kn_dist_timeout());
  if (kill_it) /* a dead peer may also be reported by MPI itself, naming rank 1 */
    CHECK(st == KN_ESTATE && strstr(kn_last_error(), "all_reduce #2") &&
          strstr(kn_last_error(), "rank 1"), "the survivor's error names the collective and rank 1");
  else
    CHECK(st == KN_ESTATE && strstr(kn_last_error(), want), "expected the error '%s'", want);
  CHECK(took < kn_dist_timeout() + 5, "failed after %.1f s, timeout %g s", took, kn_dist_timeout());
  printf("rank 0: error after %.1f s: %s\n", took, kn_last_error());
  CHECK(kn_dist_all_reduce(t, KN_REDUCE_SUM) == KN_ESTATE &&
        strstr(kn_last_error(), "the process group is broken"), "later collectives fail at once");
  CHECK(kn_dist_finalize() == KN_ESTATE, "finalize of a broken group");
  kn_scope_end();
}

static kn_tensor *times_rank(kn_tensor *x) {
  /* rank 1 compiles another graph (an extra op): the report shows the desync */
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  return rank == 1 ? kn_add_scalar(y, kn_float(1)) : y;
}

/* Log lines carry [rankN]:, the trace file of each rank is named and
** stamped with its rank (run.sh reads them and runs kiln report). */
static void mode_logs(const char *dir) {
  CHECK(kn_set_logs_str("dynamo") == KN_OK, "KILN_LOGS=dynamo");
  CHECK(kn_trace_enable(dir) == KN_OK, "trace into %s", dir);
  kn_compiled *f = KN_COMPILE(times_rank, NULL);
  kn_scope_begin();
  kn_tensor *y = kn_call_t(f, kn_ones(1, (int64_t[]){4}, KN_FLOAT32));
  CHECK(y && kn_get(y, (int64_t[]){0}) == (rank == 1 ? 3.0 : 2.0), "compiled call");
  kn_scope_end();
  kn_compiled_free(f);
  char *path = kn_trace_file_path();
  char want[64];
  snprintf(want, sizeof want, "dedicated_log_kiln_trace_rank_%d_", rank);
  CHECK(path && strstr(path, want), "trace file %s named with %s", path ? path : "(none)", want);
  free(path);
  kn_trace_disable();
  kn_set_logs_str("");
}

int ddp_mode(int rank, int world, const char *dir);
int ddp_compile_mode(int rank, int world, const char *dir);
int ddp_digits_mode(int rank, int world, const char *csv);

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dist_check collectives|skip|kill|ddp|ddp_digits|ddp_compile|logs [DIR]\n");
    return 2;
  }
  snprintf(nbc_before, sizeof nbc_before, "%s", getenv(nbc_var) ? getenv(nbc_var) : "");
  if (kn_dist_init() != KN_OK) {
    printf("FAIL kn_dist_init: %s\n", kn_last_error());
    return 1;
  }
  rank = kn_dist_rank();
  world = kn_dist_world_size();
  const char *mode = argv[1];
  bool finalize = true;
  if (!strcmp(mode, "collectives")) {
    mode_collectives();
  } else if (!strcmp(mode, "skip") || !strcmp(mode, "kill")) {
    mode_fault(!strcmp(mode, "kill"));
    finalize = false;
  } else if (!strcmp(mode, "logs")) {
    mode_logs(argc > 2 ? argv[2] : ".");
  } else if (!strcmp(mode, "ddp")) {
    check_nbc_algorithm("ddp");
    failures += ddp_mode(rank, world, argc > 2 ? argv[2] : ".");
  } else if (!strcmp(mode, "ddp_digits")) {
    failures += ddp_digits_mode(rank, world, KN_FIXTURE_DIR "/digits_256.csv");
  } else if (!strcmp(mode, "ddp_compile")) {
    failures += ddp_compile_mode(rank, world, argc > 2 ? argv[2] : ".");
  } else {
    fprintf(stderr, "dist_check: unknown mode '%s'\n", mode);
    return 2;
  }
  if (finalize) CHECK(kn_dist_finalize() == KN_OK, "finalize");
  if (!failures) printf("rank %d: ok %s\n", rank, mode);
  fflush(stdout);
  return failures ? 1 : 0;
}
