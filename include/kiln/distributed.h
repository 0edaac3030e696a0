/*
** kiln/distributed.h: data-parallel training on MPI (torch.distributed and
** DistributedDataParallel in C). Processes are started by Open MPI's mpirun:
**
**   mpirun -np 2 ./train            (root: add --allow-run-as-root)
**
**   kn_dist_init();                            // rank and world size from mpirun
**   kn_ddp *ddp = kn_ddp_wrap(net, NULL);      // rank 0's parameters everywhere
**   for (...) {                                // each rank: its share of the batch
**     kn_tensor *loss = ...forward(kn_ddp_module(ddp), x_rank)...;
**     kn_backward(loss, NULL);                 // gradients averaged over ranks
**     kn_optim_step(opt);
**   }
**   kn_ddp_free(ddp); kn_dist_finalize();
**
** Process group: kn_dist_init reads the launcher's environment
** (OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE from Open MPI's mpirun, or
** PMI_RANK / PMI_SIZE) and starts MPI. Without a launcher it does not start
** MPI: the group is the one process (rank 0 of 1) and every collective is
** the identity on that one contribution, so one program runs with and
** without mpirun. Before kn_dist_init, kn_dist_rank() is 0 and
** kn_dist_world_size() 1.
**
** Timeouts: every collective (and barrier) is started non-blocking and
** polled against a deadline: KILN_DIST_TIMEOUT seconds (read by
** kn_dist_init; default 600; kn_dist_set_timeout changes it). A collective
** that does not complete in time, because a rank never entered it (it
** skipped it, hangs elsewhere, or died), fails with KN_ESTATE and a message
** naming the collective, its sequence number and the ranks that did not
** arrive ("all_reduce #3 did not complete within 2 s: rank 1 did not enter
** it (1 of 2 ranks missing)"). A rank that dies makes its survivors fail the
** same way (run mpirun with --enable-recovery so Open MPI does not end the
** survivors first). After such a failure the group is broken: later
** collectives fail at once with KN_ESTATE, and the process should report and
** exit (kn_dist_finalize then returns KN_ESTATE without waiting for the
** others).
**
** Progress: Open MPI moves a non-blocking collective forward only inside
** MPI calls, so kn_dist_init starts one progress thread per process that
** tests the collectives in flight every 50 us (and sleeps while there are
** none): an asynchronous collective, such as DDP's bucket all-reduces during
** backward, completes while the caller computes. KILN_DIST_PROGRESS=none
** (read by kn_dist_init; 'thread' is the default, anything else is
** KN_EINVAL) runs without it: collectives then move only inside kn_dist_test
** / kn_dist_wait. kiln takes one lock around its MPI calls and asks MPI for
** MPI_THREAD_SERIALIZED; a program that makes MPI calls of its own while
** kiln's collectives are in flight must not overlap them with kiln's.
**
** Tensors: float32, float64 and int64 CPU tensors with data; any strides
** (a non-contiguous tensor is packed to a contiguous buffer and the result
** written back). Collectives run without autograd (like torch.distributed).
** Every rank must call the same collectives in the same order with
** tensors of the same sizes and dtype.
**
** Compiled DDP: kn_compile of a function that uses a wrapped model splits
** the captured graph at its buckets (kn_ddp_options.optimize_ddp, PyTorch's
** DDPOptimizer; docs/DISTRIBUTED.md).
**
** Errors are values (kn_status, kn_last_error()). A build without MPI
** (cmake -DKN_WITH_MPI=OFF, or libopenmpi-dev missing) has every function
** below: kn_dist_available() is false and the others fail with
** KN_EUNSUPPORTED, "kiln was built without MPI".
*/
#ifndef KILN_DISTRIBUTED_H
#define KILN_DISTRIBUTED_H

#include "kiln/compile.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- process group ----------------------------------------------------------- */
/* True when kiln was built with MPI (the functions below work). */
KN_API bool kn_dist_available(void);
/* Join the process group (MPI_Init when launched by mpirun; see above).
** KN_ESTATE if already initialised; KN_EINVAL when KILN_DIST_TIMEOUT is not
** a positive number of seconds; KN_EINTERNAL when MPI's rank or size
** disagree with the launcher's environment. */
KN_API kn_status kn_dist_init(void);
KN_API bool kn_dist_is_initialized(void);
/* This process's rank (0 before kn_dist_init) and the number of ranks (1). */
KN_API int kn_dist_rank(void);
KN_API int kn_dist_world_size(void);
/* The collective timeout in seconds; set it (> 0; KN_EINVAL otherwise). */
KN_API double kn_dist_timeout(void);
KN_API kn_status kn_dist_set_timeout(double seconds);
/* Wait until every rank called kn_dist_barrier (with the timeout). */
KN_API kn_status kn_dist_barrier(void);
/* Leave the group (MPI_Finalize). No-op before kn_dist_init. KN_ESTATE
** (MPI left as it is) when a collective failed or is still pending. */
KN_API kn_status kn_dist_finalize(void);

/* ---- collectives ----------------------------------------------------------------- */
typedef enum kn_reduce_op {
  KN_REDUCE_SUM,
  KN_REDUCE_AVG, /* the sum divided by the world size (int64: truncated) */
  KN_REDUCE_MAX,
  KN_REDUCE_MIN
} kn_reduce_op;

/* An asynchronous collective in flight (torch's Work). Owned by the caller:
** kn_dist_work_free after it completed (kn_dist_wait, or kn_dist_test
** reporting done). Freeing one still in flight waits for it first. */
typedef struct kn_dist_work kn_dist_work;

/* t <- op over ranks of t, in place (every rank gets the result). */
KN_API kn_status kn_dist_all_reduce(kn_tensor *t, kn_reduce_op op);
/* t <- rank src's t, in place. */
KN_API kn_status kn_dist_broadcast(kn_tensor *t, int src);
/* out <- the inputs of ranks 0..world-1 stacked along a new first dim:
** out has sizes [world, *in.sizes] (or, equivalently sized, in's dim 0
** times world; torch's all_gather_into_tensor), same dtype. */
KN_API kn_status kn_dist_all_gather(kn_tensor *out, kn_tensor *in);
/* out <- rank r's slice of op over ranks of in: in has sizes
** [world * n, ...] (or [world, ...]), out the size of one slice (n, ...);
** rank r receives slice r (torch's reduce_scatter_tensor). */
KN_API kn_status kn_dist_reduce_scatter(kn_tensor *out, kn_tensor *in, kn_reduce_op op);

/* The same, asynchronous: *work receives the handle (NULL on error). The
** tensors must stay alive and unmodified until the work completed; the
** result is in them after kn_dist_wait / a kn_dist_test that says done. */
KN_API kn_status kn_dist_all_reduce_async(kn_tensor *t, kn_reduce_op op, kn_dist_work **work);
KN_API kn_status kn_dist_broadcast_async(kn_tensor *t, int src, kn_dist_work **work);
KN_API kn_status kn_dist_all_gather_async(kn_tensor *out, kn_tensor *in, kn_dist_work **work);
KN_API kn_status kn_dist_reduce_scatter_async(kn_tensor *out, kn_tensor *in, kn_reduce_op op,
                                              kn_dist_work **work);
/* Block until the work completed (or timed out: KN_ESTATE, see above).
** Waiting again on a completed work returns its status again. */
KN_API kn_status kn_dist_wait(kn_dist_work *work);
/* *done <- whether the work completed, without blocking (it fails with the
** timeout error once the deadline passed). */
KN_API kn_status kn_dist_test(kn_dist_work *work, bool *done);
/* Whether MPI has completed the work (successfully or not), without calling
** MPI or blocking (torch's Work.is_completed): true once the progress thread
** or a kn_dist_test / kn_dist_wait saw it complete. The tensors hold the
** result only after kn_dist_wait (or a kn_dist_test that says done), which
** also reports any error. false for NULL. */
KN_API bool kn_dist_work_is_completed(const kn_dist_work *work);
KN_API void kn_dist_work_free(kn_dist_work *work);

/* ---- DistributedDataParallel ------------------------------------------------------- */
typedef struct kn_ddp_options {
  /* Bucket size for gradient averaging, in MiB (PyTorch's default 25; the
  ** first bucket, the last layers' gradients, closes at 1 MiB as PyTorch's).
  ** A bucket closes once it holds at least its limit. <= 0: the default. */
  double bucket_cap_mb;
  /* Parameters that get no gradient in a backward are still averaged (with
  ** zeros), found when kn_ddp_finish_backward runs, so every rank launches
  ** the same all-reduces. Off: every parameter must get a gradient in
  ** every synchronised backward (an error names the ones that did not). */
  bool find_unused_parameters;
  /* Broadcast rank 0's buffers (running statistics) before each forward
  ** that goes through kn_ddp_forward (PyTorch's broadcast_buffers). */
  bool broadcast_buffers;
  /* Compiled DDP (PyTorch's torch._dynamo.config.optimize_ddp, the
  ** DDPOptimizer): a graph kn_compile captures that reads this model's
  ** parameters is split at bucket boundaries (the buckets above, counted
  ** over the graph's ops from its end) into submod_0, submod_1, ... each
  ** compiled on its own, so each bucket's all-reduce starts while the
  ** compiled backward of the earlier layers still runs. Off: one graph,
  ** whose backward hands out every gradient at its end. */
  bool optimize_ddp;
  /* PyTorch's gradient_as_bucket_view: after a synchronised backward each
  ** parameter's .grad is a view into its bucket's buffer, where the
  ** all-reduce left the average, instead of a copy of it (saves a pass over
  ** every gradient per step). The view is overwritten by the next
  ** synchronised backward's averaging: copy a gradient to keep it across
  ** backwards. */
  bool gradient_as_bucket_view;
} kn_ddp_options;
/* The defaults: bucket_cap_mb 25, find_unused_parameters false,
** broadcast_buffers true, optimize_ddp true, gradient_as_bucket_view false.
** Start from them: a zero-initialised struct turns broadcast_buffers and
** optimize_ddp off. */
KN_API kn_ddp_options kn_ddp_default_options(void);

typedef struct kn_ddp kn_ddp;
/* Wrap a model for data-parallel training: broadcasts rank 0's parameters
** and buffers to every rank, groups the parameters in buckets (PyTorch's
** compute_bucket_assignment_by_size in reverse registration order: a
** bucket of one dtype closes once it holds bucket_cap_mb, the first one
** min(1 MiB, bucket_cap_mb)) and registers post-accumulate-grad hooks
** (kiln/autograd.h) so that each bucket's gradients are averaged over the
** ranks by an asynchronous all-reduce launched as soon as all of them were
** accumulated during backward; the backward's end (a final callback,
** kn_autograd_queue_callback) waits for the last ones and writes the
** averaged gradients. The model stays the caller's and must outlive the wrapper.
** options may be NULL (defaults). Needs kn_dist_init. Owned (kn_ddp_free),
** or NULL with kn_last_error(). */
KN_API kn_ddp *kn_ddp_wrap(kn_module *module, const kn_ddp_options *options);
KN_API void kn_ddp_free(kn_ddp *ddp);
/* The wrapped module (borrowed). */
KN_API kn_module *kn_ddp_module(kn_ddp *ddp);
/* kn_nn_forward of the wrapped module, after broadcasting buffers when the
** options ask for it. New reference, or NULL. */
KN_API kn_tensor *kn_ddp_forward(kn_ddp *ddp, kn_tensor *input);
/* Not needed: the end of every backward in which a parameter of the model
** got a gradient already launched the buckets left (unused parameters),
** waited for every all-reduce and wrote the averaged gradients (an error
** there is kn_backward's). Kept for programs written against the earlier
** API: after such a backward it does nothing and returns KN_OK; after a
** synchronised backward in which no parameter got a gradient it averages
** as that backward's end would have (zeros, or find_unused_parameters'
** flags). Without synchronisation (kn_ddp_set_sync false) it does nothing. */
KN_API kn_status kn_ddp_finish_backward(kn_ddp *ddp);
/* no_sync: while off, backwards accumulate local gradients without any
** communication (gradient accumulation); the first synchronised backward
** after it averages the accumulated gradients. Returns the previous state. */
KN_API bool kn_ddp_set_sync(kn_ddp *ddp, bool sync);
/* The number of buckets and the parameters of bucket b (borrowed tensors,
** in the order they sit in the bucket; *n receives their count). */
KN_API int kn_ddp_num_buckets(const kn_ddp *ddp);
KN_API kn_tensor *const *kn_ddp_bucket_params(const kn_ddp *ddp, int b, int *n);
/* How many buckets the last synchronised backward launched from its
** hooks, while its nodes ran (the rest were launched at its end). */
KN_API int kn_ddp_buckets_launched_in_backward(const kn_ddp *ddp);

#ifdef __cplusplus
}
#endif
#endif
