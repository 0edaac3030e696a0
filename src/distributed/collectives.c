/*
** distributed/collectives.c: all_reduce, broadcast, all_gather and
** reduce_scatter on float32 / float64 / int64 CPU tensors, synchronous and
** asynchronous (kiln/distributed.h). Each packs a non-contiguous tensor to
** a contiguous buffer, starts the non-blocking MPI collective and returns a
** work (dist.c) that divides (AVG) and writes the result back when done.
** Without MPI started (one process) the collective completes at once.
*/
#include <limits.h>
#include <string.h>

#include "core/error.h"
#include "distributed/dist_int.h"
#include "ops/iter.h"

static kn_status check_tensor(const char *what, const char *arg, const kn_tensor *t) {
  if (!t) return kn__error(KN_EINVAL, "%s: expected a tensor for %s, found NULL", what, arg);
  if (t->device != KN_CPU || t->is_fake || !t->storage->data)
    return kn__error(KN_EINVAL, "%s: expected a CPU tensor with data for %s, found a %s tensor",
                     what, arg, t->is_fake ? "fake (traced)" : "meta");
  MPI_Datatype dt;
  if (!kn__dist_mpi_type(t->dtype, &dt))
    return kn__error(KN_EDTYPE, "%s: expected a float32, float64 or int64 tensor for %s, found %s",
                     what, arg, kn_dtype_name(t->dtype));
  if (kn_numel(t) > INT_MAX)
    return kn__error(KN_ERANGE, "%s: expected at most %d elements in %s, found %lld", what,
                     INT_MAX, arg, (long long)kn_numel(t));
  return KN_OK;
}

static kn_status check_op(const char *what, kn_reduce_op op) {
  if ((unsigned)op <= KN_REDUCE_MIN) return KN_OK;
  return kn__error(KN_EINVAL, "%s: expected a reduce op (KN_REDUCE_SUM, _AVG, _MAX or _MIN), "
                   "found %d", what, (int)op);
}

static MPI_Op mpi_op(kn_reduce_op op) {
  return op == KN_REDUCE_MAX ? MPI_MAX : op == KN_REDUCE_MIN ? MPI_MIN : MPI_SUM;
}

/* A contiguous buffer holding t's values (t itself when contiguous). Owned. */
static kn_tensor *packed(kn_tensor *t) {
  return kn_is_contiguous(t) ? kn_retain(t) : kn__contiguous_copy(t, t->dtype);
}

/* A contiguous buffer for results going to t (t itself when contiguous). */
static kn_tensor *result_buf(kn_tensor *t) {
  return kn_is_contiguous(t) ? kn_retain(t) : kn__empty(t->ndim, t->sizes, t->dtype, KN_CPU);
}

/* out and in of a gather/scatter: one is `world` times the other along dim
** 0, either as a new leading dim ([world, *small]) or stacked ([world*n, ...]). */
static kn_status check_gather_sizes(const char *what, const kn_tensor *big, const char *bigname,
                                    const kn_tensor *small, const char *smallname) {
  int w = kn_dist_world_size();
  if (big->dtype != small->dtype)
    return kn__error(KN_EDTYPE, "%s: expected %s and %s of one dtype, found %s and %s", what,
                     bigname, smallname, kn_dtype_name(big->dtype), kn_dtype_name(small->dtype));
  bool lead = big->ndim == small->ndim + 1 && big->sizes[0] == w &&
              !memcmp(big->sizes + 1, small->sizes, (size_t)small->ndim * sizeof(int64_t));
  bool stack = big->ndim == small->ndim && big->ndim > 0 &&
               big->sizes[0] == (int64_t)w * small->sizes[0] &&
               !memcmp(big->sizes + 1, small->sizes + 1, (size_t)(big->ndim - 1) * sizeof(int64_t));
  if (lead || stack) return KN_OK;
  char bs[256], ss[256];
  kn__format_sizes(big->ndim, big->sizes, bs, sizeof bs);
  kn__format_sizes(small->ndim, small->sizes, ss, sizeof ss);
  return kn__error(KN_ESHAPE, "%s: expected %s of sizes [%d, *%s] or %s's with dim 0 times %d, "
                   "found %s of sizes %s", what, bigname, w, ss, smallname, w, bigname, bs);
}

/* Finish starting w: rc is its MPI call's, made with kiln's MPI lock held
** (kn__dist_lock right before it). Releases the lock and hands w to the
** progress thread; on failure w carries the error. */
static kn_status start(kn_dist_work *w, int rc, const char *call) {
  kn__dist_unlock();
  if (rc != MPI_SUCCESS) return kn__dist_work_mpi_error(w, call, rc);
  kn__dist_progress_add(w);
  return KN_OK;
}

/* Sync form: wait for the work and free it. */
static kn_status finish_sync(kn_status st, kn_dist_work *w) {
  if (st == KN_OK) st = kn_dist_wait(w);
  kn__dist_work_free(w);
  return st;
}

/* Return the work of an async call, or free it on error. */
static kn_status hand_out(kn_status st, kn_dist_work *w, kn_dist_work **out) {
  if (st == KN_OK) st = w->status;
  if (st != KN_OK) {
    kn__dist_work_free(w);
    w = NULL;
  }
  *out = w;
  return st;
}

static kn_status all_reduce_start(kn_tensor *t, kn_reduce_op op, kn_dist_work **out) {
  *out = NULL;
  kn_status st = kn__dist_check_ready("all_reduce");
  if (st == KN_OK) st = check_tensor("all_reduce", "the tensor", t);
  if (st == KN_OK) st = check_op("all_reduce", op);
  if (st != KN_OK) return st;
  kn_dist_work *w = kn__dist_work_begin("all_reduce");
  if (!w) return kn_last_status();
  *out = w;
  w->buf = packed(t);
  if (!w->buf) return kn__dist_work_mpi_error(w, "packing the tensor", MPI_ERR_NO_MEM);
  if (w->buf != t) w->target = kn_retain(t);
  w->divide = op == KN_REDUCE_AVG;
  MPI_Datatype dt;
  kn__dist_mpi_type(t->dtype, &dt);
  MPI_Comm c = kn__dist_comm();
  if (c == MPI_COMM_NULL) return KN_OK;
  kn__dist_lock();
  return start(w, MPI_Iallreduce(MPI_IN_PLACE, kn_data(w->buf), (int)kn_numel(t), dt, mpi_op(op),
                                 c, &w->req), "MPI_Iallreduce");
}

static kn_status broadcast_start(kn_tensor *t, int src, kn_dist_work **out) {
  *out = NULL;
  kn_status st = kn__dist_check_ready("broadcast");
  if (st == KN_OK) st = check_tensor("broadcast", "the tensor", t);
  if (st == KN_OK && (src < 0 || src >= kn_dist_world_size()))
    st = kn__error(KN_EINVAL, "broadcast: expected a source rank in [0, %d), found %d",
                   kn_dist_world_size(), src);
  if (st != KN_OK) return st;
  kn_dist_work *w = kn__dist_work_begin("broadcast");
  if (!w) return kn_last_status();
  *out = w;
  w->buf = packed(t);
  if (!w->buf) return kn__dist_work_mpi_error(w, "packing the tensor", MPI_ERR_NO_MEM);
  if (w->buf != t) w->target = kn_retain(t);
  MPI_Datatype dt;
  kn__dist_mpi_type(t->dtype, &dt);
  MPI_Comm c = kn__dist_comm();
  if (c == MPI_COMM_NULL) return KN_OK;
  kn__dist_lock();
  return start(w, MPI_Ibcast(kn_data(w->buf), (int)kn_numel(t), dt, src, c, &w->req),
               "MPI_Ibcast");
}

/* The shared part of all_gather and reduce_scatter: send <- packed in,
** buf <- out's result buffer. */
static kn_status gather_like_begin(const char *name, kn_tensor *out, kn_tensor *in,
                                   kn_dist_work **wout) {
  kn_dist_work *w = kn__dist_work_begin(name);
  if (!w) return kn_last_status();
  *wout = w;
  w->send = packed(in);
  w->buf = w->send ? result_buf(out) : NULL;
  if (!w->buf) return kn__dist_work_mpi_error(w, "packing the tensors", MPI_ERR_NO_MEM);
  if (w->buf != out) w->target = kn_retain(out);
  if (kn__dist_comm() == MPI_COMM_NULL) /* one process: the result is the input */
    memcpy(kn_data(w->buf), kn_data(w->send), (size_t)kn_numel(out) * kn_dtype_size(out->dtype));
  return KN_OK;
}

static kn_status all_gather_start(kn_tensor *out, kn_tensor *in, kn_dist_work **wout) {
  *wout = NULL;
  kn_status st = kn__dist_check_ready("all_gather");
  if (st == KN_OK) st = check_tensor("all_gather", "the input", in);
  if (st == KN_OK) st = check_tensor("all_gather", "the output", out);
  if (st == KN_OK) st = check_gather_sizes("all_gather", out, "the output", in, "the input");
  if (st == KN_OK) st = gather_like_begin("all_gather", out, in, wout);
  if (st != KN_OK || kn__dist_comm() == MPI_COMM_NULL) return st;
  kn_dist_work *w = *wout;
  MPI_Datatype dt;
  kn__dist_mpi_type(in->dtype, &dt);
  int n = (int)kn_numel(in);
  kn__dist_lock();
  return start(w, MPI_Iallgather(kn_data(w->send), n, dt, kn_data(w->buf), n, dt,
                                 kn__dist_comm(), &w->req), "MPI_Iallgather");
}

static kn_status reduce_scatter_start(kn_tensor *out, kn_tensor *in, kn_reduce_op op,
                                      kn_dist_work **wout) {
  *wout = NULL;
  kn_status st = kn__dist_check_ready("reduce_scatter");
  if (st == KN_OK) st = check_tensor("reduce_scatter", "the input", in);
  if (st == KN_OK) st = check_tensor("reduce_scatter", "the output", out);
  if (st == KN_OK) st = check_op("reduce_scatter", op);
  if (st == KN_OK) st = check_gather_sizes("reduce_scatter", in, "the input", out, "the output");
  if (st == KN_OK) st = gather_like_begin("reduce_scatter", out, in, wout);
  if (st != KN_OK) return st;
  kn_dist_work *w = *wout;
  w->divide = op == KN_REDUCE_AVG;
  if (kn__dist_comm() == MPI_COMM_NULL) return KN_OK;
  MPI_Datatype dt;
  kn__dist_mpi_type(in->dtype, &dt);
  kn__dist_lock();
  return start(w, MPI_Ireduce_scatter_block(kn_data(w->send), kn_data(w->buf), (int)kn_numel(out),
                                            dt, mpi_op(op), kn__dist_comm(), &w->req),
               "MPI_Ireduce_scatter_block");
}

kn_status kn_dist_all_reduce(kn_tensor *t, kn_reduce_op op) {
  kn_dist_work *w;
  kn_status st = all_reduce_start(t, op, &w);
  return w ? finish_sync(st, w) : st;
}

kn_status kn_dist_broadcast(kn_tensor *t, int src) {
  kn_dist_work *w;
  kn_status st = broadcast_start(t, src, &w);
  return w ? finish_sync(st, w) : st;
}

kn_status kn_dist_all_gather(kn_tensor *out, kn_tensor *in) {
  kn_dist_work *w;
  kn_status st = all_gather_start(out, in, &w);
  return w ? finish_sync(st, w) : st;
}

kn_status kn_dist_reduce_scatter(kn_tensor *out, kn_tensor *in, kn_reduce_op op) {
  kn_dist_work *w;
  kn_status st = reduce_scatter_start(out, in, op, &w);
  return w ? finish_sync(st, w) : st;
}

static kn_status check_out(const char *what, kn_dist_work **work) {
  if (work) return KN_OK;
  return kn__error(KN_EINVAL, "%s: expected a pointer for the work, found NULL", what);
}

kn_status kn_dist_all_reduce_async(kn_tensor *t, kn_reduce_op op, kn_dist_work **work) {
  kn_status st = check_out("kn_dist_all_reduce_async", work);
  if (st != KN_OK) return st;
  kn_dist_work *w;
  st = all_reduce_start(t, op, &w);
  return hand_out(st, w, work);
}

kn_status kn_dist_broadcast_async(kn_tensor *t, int src, kn_dist_work **work) {
  kn_status st = check_out("kn_dist_broadcast_async", work);
  if (st != KN_OK) return st;
  kn_dist_work *w;
  st = broadcast_start(t, src, &w);
  return hand_out(st, w, work);
}

kn_status kn_dist_all_gather_async(kn_tensor *out, kn_tensor *in, kn_dist_work **work) {
  kn_status st = check_out("kn_dist_all_gather_async", work);
  if (st != KN_OK) return st;
  kn_dist_work *w;
  st = all_gather_start(out, in, &w);
  return hand_out(st, w, work);
}

kn_status kn_dist_reduce_scatter_async(kn_tensor *out, kn_tensor *in, kn_reduce_op op,
                                       kn_dist_work **work) {
  kn_status st = check_out("kn_dist_reduce_scatter_async", work);
  if (st != KN_OK) return st;
  kn_dist_work *w;
  st = reduce_scatter_start(out, in, op, &w);
  return hand_out(st, w, work);
}
