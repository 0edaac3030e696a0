/*
** distributed/dist.c: the process group (kn_dist_init ... finalize), the
** collective timeout and the work engine: arrival messages, polling against
** the deadline, the error naming the ranks that did not arrive (see
** dist_int.h and kiln/distributed.h).
**
** Process-wide state (documented in kiln/distributed.h): one group per
** process, used from one thread at a time; the progress thread
** (progress.c) only tests requests, under the lock every MPI call takes.
*/
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "distributed/dist_int.h"
#include "kiln/autograd.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "kiln/ops_pointwise.h"
#include "logging/log.h"
#include "profiler/profiler.h"

#define KN__DIST_DEFAULT_TIMEOUT 600.0
#define KN__DIST_TAG_SPAN 32000 /* MPI guarantees tags up to 32767 */
/* kn_dist_wait polls without pause this long, then sleeps 20 us between
** polls (a rank that waits long leaves the core to others). Open MPI moves
** a collective forward only inside MPI calls, and each of its rounds waits
** for the next poll: with a sleep after 200 polls instead, a 7.4 MB
** all-reduce on 2 ranks took 8.0-8.6 ms, spinning 5 ms 4.8-6.1 ms. */
#define KN__DIST_SPIN_S 5e-3

static struct {
  bool init, mpi, broken;
  bool progress; /* KILN_DIST_PROGRESS: run the progress thread (default) */
  int rank, world;
  double timeout;
  MPI_Comm comm, arrivals;
  uint64_t seq;
  int pending;
  kn_dist_work *abandoned;
} G = {.world = 1, .timeout = KN__DIST_DEFAULT_TIMEOUT, .progress = true};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool kn_dist_available(void) { return true; }
bool kn_dist_is_initialized(void) { return G.init; }
int kn_dist_rank(void) { return G.rank; }
int kn_dist_world_size(void) { return G.world; }
double kn_dist_timeout(void) { return G.timeout; }
MPI_Comm kn__dist_comm(void) { return G.mpi ? G.comm : MPI_COMM_NULL; }
int kn__dist_pending(void) { return G.pending; }

kn_status kn_dist_set_timeout(double seconds) {
  if (!(seconds > 0) || !isfinite(seconds))
    return kn__error(KN_EINVAL, "kn_dist_set_timeout: expected a positive number of seconds, "
                     "found %g", seconds);
  G.timeout = seconds;
  return KN_OK;
}

bool kn__dist_mpi_type(kn_dtype dt, MPI_Datatype *out) {
  switch (dt) {
  case KN_FLOAT32: *out = MPI_FLOAT; return true;
  case KN_FLOAT64: *out = MPI_DOUBLE; return true;
  case KN_INT64: *out = MPI_INT64_T; return true;
  default: return false;
  }
}

static kn_status mpi_fail(const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
  return kn__error(KN_EINTERNAL, "%s failed: %s", call, msg);
}

/* The launcher's rank and size: Open MPI's mpirun, then the PMI names
** (MPICH's hydra, Slurm). false when none is set. */
static bool launcher_env(int *rank, int *size, const char **rank_var) {
  static const char *const names[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                         {"PMI_RANK", "PMI_SIZE"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *r = getenv(names[i][0]), *s = getenv(names[i][1]);
    if (!r || !s) continue;
    *rank = atoi(r);
    *size = atoi(s);
    *rank_var = names[i][0];
    return true;
  }
  return false;
}

static kn_status read_timeout_env(void) {
  const char *v = getenv("KILN_DIST_TIMEOUT");
  if (!v || !*v) return KN_OK;
  char *end;
  errno = 0;
  double s = strtod(v, &end);
  if (errno || *end || !(s > 0) || !isfinite(s))
    return kn__error(KN_EINVAL, "KILN_DIST_TIMEOUT: expected a positive number of seconds, "
                     "found '%s'", v);
  G.timeout = s;
  return KN_OK;
}

static kn_status read_progress_env(void) {
  const char *v = getenv("KILN_DIST_PROGRESS");
  G.progress = true;
  if (!v || !*v || !strcmp(v, "thread")) return KN_OK;
  if (!strcmp(v, "none")) {
    G.progress = false;
    return KN_OK;
  }
  return kn__error(KN_EINVAL, "KILN_DIST_PROGRESS: expected 'thread' or 'none', found '%s'", v);
}

/* Open MPI's non-blocking all-reduce (coll/libnbc, behind MPI_Iallreduce)
** takes a binomial tree (reduce to rank 0, then broadcast) for fewer than 4
** ranks or an in-place buffer, which DDP's buckets are: one rank idle while
** the other reduces, and the whole buffer sent twice in turn. Its reduce-
** scatter + all-gather (Rabenseifner's; the ring below pof2 elements) sends
** half of it each way at once: on 2 ranks over shared memory a 7.4 MB
** all-reduce took 2.3-2.8 ms instead of 5.5-6.5 ms. Asked for unless the
** user chose (the variable set, `mpirun --mca` sets it too; 0 restores Open
** MPI's own choice). A process-wide setting of MPI_Init's, documented in
** docs/DISTRIBUTED.md. */
#define KN__NBC_ALLREDUCE_VAR "OMPI_MCA_coll_libnbc_iallreduce_algorithm"
#define KN__NBC_ALLREDUCE_REDSCAT_ALLGATHER "3"

static kn_status start_mpi(int env_rank, int env_size, const char *rank_var, int *provided) {
  if (setenv(KN__NBC_ALLREDUCE_VAR, KN__NBC_ALLREDUCE_REDSCAT_ALLGATHER, 0) != 0)
    return kn__error(KN_EINTERNAL, "kn_dist_init: setting %s failed: %s", KN__NBC_ALLREDUCE_VAR,
                     strerror(errno));
  int want = G.progress ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
  int rc = MPI_Init_thread(NULL, NULL, want, provided);
  if (rc != MPI_SUCCESS) return mpi_fail("MPI_Init_thread", rc);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &G.comm)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(MPI_COMM_WORLD, &G.arrivals)) != MPI_SUCCESS)
    return mpi_fail("MPI_Comm_dup", rc);
  MPI_Comm_set_errhandler(G.comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(G.arrivals, MPI_ERRORS_RETURN);
  MPI_Comm_rank(G.comm, &G.rank);
  MPI_Comm_size(G.comm, &G.world);
  G.mpi = true;
  if (G.rank != env_rank || G.world != env_size)
    return kn__error(KN_EINTERNAL, "kn_dist_init: MPI says rank %d of %d, the launcher's "
                     "environment (%s) rank %d of %d", G.rank, G.world, rank_var, env_rank,
                     env_size);
  return KN_OK;
}

/* The progress thread, when asked for, useful (2+ ranks) and allowed by the
** MPI library's thread level. */
static kn_status start_progress(int provided) {
  if (!G.progress || G.world < 2) return KN_OK;
  if (provided < MPI_THREAD_SERIALIZED) {
    KN_LOG(KN_LOG_DISTRIBUTED, KN_WARNING, "the MPI library gives thread level %d, below "
           "MPI_THREAD_SERIALIZED: no progress thread, collectives move only inside kiln's MPI "
           "calls", provided);
    return KN_OK;
  }
  kn_status st = kn__dist_progress_start();
  if (st == KN_OK)
    KN_LOG(KN_LOG_DISTRIBUTED, KN_DEBUG, "progress thread started (polls the collectives in "
           "flight every %d us)", KN__DIST_POLL_US);
  return st;
}

kn_status kn_dist_init(void) {
  if (G.init) return kn__error(KN_ESTATE, "kn_dist_init: the process group is already "
                               "initialised (rank %d of %d)", G.rank, G.world);
  kn_status st = read_timeout_env();
  if (st == KN_OK) st = read_progress_env();
  if (st != KN_OK) return st;
  int rank = 0, size = 1, provided = MPI_THREAD_SINGLE;
  const char *rank_var = NULL;
  if (launcher_env(&rank, &size, &rank_var)) {
    if (size < 1 || rank < 0 || rank >= size)
      return kn__error(KN_EINVAL, "kn_dist_init: expected 0 <= rank < size from the launcher, "
                       "found rank %d of %d (%s)", rank, size, rank_var);
    if ((st = start_mpi(rank, size, rank_var, &provided)) != KN_OK) return st;
  }
  /* as torch.distributed: log lines start with [rankR]: and trace records
  ** carry "rank": R (the trace file's name too, when it is created later) */
  kn_set_log_rank(G.rank);
  kn_trace_set_rank(G.rank);
  if (G.mpi && (st = start_progress(provided)) != KN_OK) {
    kn_set_log_rank(-1);
    kn_trace_set_rank(-1);
    return st;
  }
  G.init = true;
  G.broken = false;
  G.seq = 0;
  return KN_OK;
}

static void free_work_mem(kn_dist_work *w);
static void set_work_error(kn_dist_work *w, kn_status st);

static void free_abandoned(void) {
  while (G.abandoned) {
    kn_dist_work *w = G.abandoned;
    G.abandoned = w->next_abandoned;
    free_work_mem(w);
  }
}

kn_status kn_dist_finalize(void) {
  if (!G.init) return KN_OK;
  kn_set_log_rank(-1);
  kn_trace_set_rank(-1);
  if (G.broken) kn__dist_progress_stop(); /* it may still test abandoned works */
  if (G.broken || G.pending) {
    kn_status st = kn__error(KN_ESTATE, "kn_dist_finalize: %s; MPI is left as it is (exit the "
                             "process)", G.broken ? "a collective failed, the process group is "
                             "broken" : "collectives are still in flight (wait for them first)");
    if (G.broken) {
      free_abandoned(); /* no MPI call follows that could write into them */
      G.init = false;
    }
    return st;
  }
  G.init = false;
  if (!G.mpi) return KN_OK;
  kn__dist_progress_stop();
  MPI_Comm_free(&G.comm);
  MPI_Comm_free(&G.arrivals);
  G.mpi = false;
  G.rank = 0;
  G.world = 1;
  int rc = MPI_Finalize();
  return rc == MPI_SUCCESS ? KN_OK : mpi_fail("MPI_Finalize", rc);
}

kn_status kn__dist_check_ready(const char *what) {
  if (!G.init)
    return kn__error(KN_ESTATE, "%s: the process group is not initialised (call kn_dist_init "
                     "first)", what);
  if (G.broken)
    return kn__error(KN_ESTATE, "%s: an earlier collective failed, the process group is broken",
                     what);
  return KN_OK;
}

/* ---- works ------------------------------------------------------------------------ */

static int peer_of(int i) { return i < G.rank ? i : i + 1; } /* i-th other rank */

static kn_status post_arrivals(kn_dist_work *w) {
  int n = G.world - 1, tag = (int)(w->seq % KN__DIST_TAG_SPAN);
  w->narr = 2 * n;
  w->arr = malloc((size_t)(2 * n) * sizeof *w->arr);
  w->arr_buf = calloc((size_t)n + 1, sizeof *w->arr_buf);
  if (!w->arr || !w->arr_buf) return kn__oom();
  w->arr_buf[n] = (int64_t)w->seq;
  for (int i = 0; i < 2 * n; i++) w->arr[i] = MPI_REQUEST_NULL;
  int rc = MPI_SUCCESS;
  kn__dist_lock();
  for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
    rc = MPI_Irecv(&w->arr_buf[i], 1, MPI_INT64_T, peer_of(i), tag, G.arrivals, &w->arr[i]);
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(&w->arr_buf[n], 1, MPI_INT64_T, peer_of(i), tag, G.arrivals, &w->arr[n + i]);
  }
  kn__dist_unlock();
  return rc == MPI_SUCCESS ? KN_OK : mpi_fail("MPI_Isend of the arrival message", rc);
}

kn_dist_work *kn__dist_work_begin(const char *name) {
  kn_dist_work *w = calloc(1, sizeof *w);
  if (!w) {
    kn__oom();
    return NULL;
  }
  snprintf(w->name, sizeof w->name, "%s", name);
  w->seq = ++G.seq;
  w->deadline = now_s() + G.timeout;
  w->t0_ns = kn__prof_now_ns();
  w->tid = kn__prof_thread_id();
  w->req = MPI_REQUEST_NULL;
  G.pending++;
  kn_status st = G.mpi && G.world > 1 ? post_arrivals(w) : KN_OK;
  if (st != KN_OK) {
    kn__error_context("%s #%llu", w->name, (unsigned long long)w->seq);
    G.broken = true;
    set_work_error(w, st);
  }
  return w;
}

static void set_work_error(kn_dist_work *w, kn_status st) {
  free(w->error);
  w->error = strdup(kn_last_error());
  w->status = st;
  if (!w->done) G.pending--;
  w->done = true;
  if (G.mpi) kn__dist_progress_remove(w);
}

kn_status kn__dist_work_mpi_error(kn_dist_work *w, const char *call, int rc) {
  kn_status st = w->status != KN_OK ? w->status : mpi_fail(call, rc);
  kn__error_context("%s #%llu", w->name, (unsigned long long)w->seq);
  G.broken = true;
  set_work_error(w, st);
  return st;
}

/* The ranks whose arrival message for w has not come ("1, 3" into sb);
** returns their count. */
static int missing_ranks(kn_dist_work *w, kn__sb *sb) {
  int n = G.world - 1, missing = 0;
  for (int i = 0; i < n; i++) {
    int flag = 1;
    kn__dist_lock();
    if (w->arr[i] != MPI_REQUEST_NULL) MPI_Test(&w->arr[i], &flag, MPI_STATUS_IGNORE);
    kn__dist_unlock();
    if (flag) continue;
    kn__sb_printf(sb, "%s%d", missing ? ", " : "", peer_of(i));
    missing++;
  }
  return missing;
}

/* Fail w: "all_reduce #3 did not complete within 2 s: rank 1 did not enter
** it (1 of 2 ranks missing)". */
static kn_status fail_work(kn_dist_work *w, const char *why) {
  kn__sb sb;
  kn__sb_init(&sb);
  int missing = w->narr ? missing_ranks(w, &sb) : 0;
  kn_status st;
  if (missing)
    st = kn__error(KN_ESTATE, "%s #%llu %s: %s %s did not enter it (%d of %d ranks missing)",
                   w->name, (unsigned long long)w->seq, why, missing > 1 ? "ranks" : "rank",
                   kn__sb_cstr(&sb), missing, G.world);
  else
    st = kn__error(KN_ESTATE, "%s #%llu %s: every rank entered it but it did not finish (a rank "
                   "died during it, or the ranks passed tensors of different sizes)", w->name,
                   (unsigned long long)w->seq, why);
  kn__sb_fini(&sb);
  G.broken = true;
  set_work_error(w, st);
  return st;
}

/* d[0..n) of element type T divided by wd: times 1 / wd when wd is a power of
** two (exact), else divided. */
#define KN__DIST_DIVIDE(T, d, n, wd)                     \
  do {                                                   \
    T *restrict p_ = (d);                                \
    const T f_ = (T)(wd), r_ = (T)1 / f_;                \
    if (((wd) & ((wd) - 1)) == 0) {                      \
      _Pragma("omp simd") for (int64_t i_ = 0; i_ < (n); i_++) p_[i_] *= r_; \
    } else {                                             \
      _Pragma("omp simd") for (int64_t i_ = 0; i_ < (n); i_++) p_[i_] /= f_; \
    }                                                    \
  } while (0)

/* AVG's division of the summed buffer by the world size, in vectorised
** loops: the scalar divisions took 2.3 ms of a 3.6 ms all-reduce of 1.86M
** float32 gradients on 2 ranks (a division is about 1.2 ns; SUM alone took
** 1.3 ms). A power-of-two world multiplies by its reciprocal, which is
** exact: x * 2^-k and x / 2^k are the same correctly rounded value. */
static void divide_by_world(kn_tensor *buf) {
  int64_t n = kn_numel(buf);
  const int wd = G.world;
  if (buf->dtype == KN_FLOAT32) {
    KN__DIST_DIVIDE(float, kn_data(buf), n, wd);
  } else if (buf->dtype == KN_FLOAT64) {
    KN__DIST_DIVIDE(double, kn_data(buf), n, wd);
  } else {
    int64_t *d = kn_data(buf);
    for (int64_t i = 0; i < n; i++) d[i] /= wd;
  }
}

/* The result is in w->buf: divide (AVG), write back into the target. The
** profiler gets the collective's span, from its start to MPI's completion. */
static kn_status finish_work(kn_dist_work *w) {
  kn_status st = KN_OK;
  if (KN__PROF_ON()) {
    char name[40], dims[40];
    snprintf(name, sizeof name, "mpi:%s", w->name);
    snprintf(dims, sizeof dims, "[[%lld]]", (long long)(w->buf ? kn_numel(w->buf) : 0));
    kn__prof_span(name, strdup(dims), w->t0_ns, w->t1_ns ? w->t1_ns : kn__prof_now_ns(), w->tid);
  }
  if (w->divide) divide_by_world(w->buf);
  if (w->target && w->buf != w->target) {
    bool prev = kn_no_grad_begin();
    st = kn_copy_(w->target, w->buf);
    kn_no_grad_end(prev);
  }
  w->done = true;
  G.pending--;
  w->status = st;
  if (st != KN_OK) set_work_error(w, st);
  return st;
}

kn_status kn__dist_poll(kn_dist_work *w, bool *done) {
  *done = w->done;
  if (w->done) {
    if (w->status != KN_OK) kn__error(w->status, "%s", w->error ? w->error : "");
    return w->status;
  }
  bool mpi_done = true;
  if (G.mpi) {
    kn__dist_lock();
    kn__dist_test_locked(w);
    mpi_done = atomic_load_explicit(&w->mpi_done, memory_order_acquire);
    if (mpi_done) kn__dist_unlink_locked(w);
    kn__dist_unlock();
  }
  if (w->mpi_failed == KN__DIST_FAILED_COLLECTIVE) {
    char why[MPI_MAX_ERROR_STRING + 16];
    int len = 0;
    snprintf(why, sizeof why, "failed");
    if (MPI_Error_string(w->mpi_rc, why + 8, &len) == MPI_SUCCESS) memcpy(why + 6, ": ", 2);
    return fail_work(w, why);
  }
  if (w->mpi_failed) return fail_work(w, "failed while exchanging arrival messages");
  if (mpi_done) {
    *done = true;
    return finish_work(w);
  }
  if (now_s() > w->deadline) {
    char why[64];
    snprintf(why, sizeof why, "did not complete within %g s", G.timeout);
    return fail_work(w, why);
  }
  return KN_OK;
}

kn_status kn_dist_test(kn_dist_work *work, bool *done) {
  if (!work || !done)
    return kn__error(KN_EINVAL, "kn_dist_test: expected a work and a result pointer, found NULL");
  return kn__dist_poll(work, done);
}

bool kn_dist_work_is_completed(const kn_dist_work *work) {
  if (!work) return false;
  return work->done || atomic_load_explicit(&work->mpi_done, memory_order_acquire);
}

kn_status kn_dist_wait(kn_dist_work *work) {
  if (!work) return kn__error(KN_EINVAL, "kn_dist_wait: expected a work, found NULL");
  bool done = false;
  double spin_until = now_s() + KN__DIST_SPIN_S;
  for (;;) {
    kn_status st = kn__dist_poll(work, &done);
    if (st != KN_OK || done) return st;
    if (now_s() > spin_until) nanosleep(&(struct timespec){0, 20000}, NULL); /* yield the core */
  }
}

static void free_work_mem(kn_dist_work *w) {
  kn_release(w->target);
  if (w->buf != w->target) kn_release(w->buf);
  kn_release(w->send);
  free(w->arr);
  free(w->arr_buf);
  free(w->error);
  free(w);
}

void kn__dist_work_free(kn_dist_work *w) {
  if (!w) return;
  if (!w->done) kn_dist_wait(w);
  if (w->status != KN_OK && G.init && G.mpi) {
    w->next_abandoned = G.abandoned; /* MPI may still write its buffers */
    G.abandoned = w;
    return;
  }
  free_work_mem(w);
}

void kn_dist_work_free(kn_dist_work *work) { kn__dist_work_free(work); }

kn_status kn_dist_barrier(void) {
  kn_status st = kn__dist_check_ready("barrier");
  if (st != KN_OK) return st;
  kn_dist_work *w = kn__dist_work_begin("barrier");
  if (!w) return kn_last_status();
  int rc = MPI_SUCCESS;
  if (G.mpi) {
    kn__dist_lock();
    rc = MPI_Ibarrier(G.comm, &w->req);
    kn__dist_unlock();
  }
  if (rc != MPI_SUCCESS) kn__dist_work_mpi_error(w, "MPI_Ibarrier", rc);
  else if (G.mpi) kn__dist_progress_add(w);
  st = kn_dist_wait(w);
  kn__dist_work_free(w);
  return st;
}
