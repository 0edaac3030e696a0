/*
** distributed/nompi.c: the distributed API of a kiln built without MPI
** (cmake -DKN_WITH_MPI=OFF, or no MPI found; see cmake/deps.cmake). Every
** entry point exists, so programs link either way; kn_dist_available() is
** false and the others fail with KN_EUNSUPPORTED naming the cause. The rank
** and world size read 0 and 1, as before kn_dist_init in an MPI build.
*/
#include "core/error.h"
#include "kiln/distributed.h"

static kn_status no_mpi(const char *what) {
  return kn__error(KN_EUNSUPPORTED, "%s: kiln was built without MPI (install Open MPI, Debian's "
                   "libopenmpi-dev and openmpi-bin, and reconfigure with -DKN_WITH_MPI=ON)", what);
}

bool kn_dist_available(void) { return false; }
kn_status kn_dist_init(void) { return no_mpi("kn_dist_init"); }
bool kn_dist_is_initialized(void) { return false; }
int kn_dist_rank(void) { return 0; }
int kn_dist_world_size(void) { return 1; }
double kn_dist_timeout(void) { return 0; }
kn_status kn_dist_set_timeout(double seconds) {
  (void)seconds;
  return no_mpi("kn_dist_set_timeout");
}
kn_status kn_dist_barrier(void) { return no_mpi("kn_dist_barrier"); }
kn_status kn_dist_finalize(void) { return KN_OK; }

kn_status kn_dist_all_reduce(kn_tensor *t, kn_reduce_op op) {
  (void)t, (void)op;
  return no_mpi("kn_dist_all_reduce");
}
kn_status kn_dist_broadcast(kn_tensor *t, int src) {
  (void)t, (void)src;
  return no_mpi("kn_dist_broadcast");
}
kn_status kn_dist_all_gather(kn_tensor *out, kn_tensor *in) {
  (void)out, (void)in;
  return no_mpi("kn_dist_all_gather");
}
kn_status kn_dist_reduce_scatter(kn_tensor *out, kn_tensor *in, kn_reduce_op op) {
  (void)out, (void)in, (void)op;
  return no_mpi("kn_dist_reduce_scatter");
}
kn_status kn_dist_all_reduce_async(kn_tensor *t, kn_reduce_op op, kn_dist_work **work) {
  (void)t, (void)op;
  if (work) *work = NULL;
  return no_mpi("kn_dist_all_reduce_async");
}
kn_status kn_dist_broadcast_async(kn_tensor *t, int src, kn_dist_work **work) {
  (void)t, (void)src;
  if (work) *work = NULL;
  return no_mpi("kn_dist_broadcast_async");
}
kn_status kn_dist_all_gather_async(kn_tensor *out, kn_tensor *in, kn_dist_work **work) {
  (void)out, (void)in;
  if (work) *work = NULL;
  return no_mpi("kn_dist_all_gather_async");
}
kn_status kn_dist_reduce_scatter_async(kn_tensor *out, kn_tensor *in, kn_reduce_op op,
                                       kn_dist_work **work) {
  (void)out, (void)in, (void)op;
  if (work) *work = NULL;
  return no_mpi("kn_dist_reduce_scatter_async");
}
kn_status kn_dist_wait(kn_dist_work *work) {
  (void)work;
  return no_mpi("kn_dist_wait");
}
bool kn_dist_work_is_completed(const kn_dist_work *work) {
  (void)work;
  return false;
}
kn_status kn_dist_test(kn_dist_work *work, bool *done) {
  (void)work;
  if (done) *done = false;
  return no_mpi("kn_dist_test");
}
void kn_dist_work_free(kn_dist_work *work) { (void)work; }

kn_ddp_options kn_ddp_default_options(void) {
  return (kn_ddp_options){.bucket_cap_mb = 25.0, .broadcast_buffers = true,
                          .optimize_ddp = true};
}
kn_ddp *kn_ddp_wrap(kn_module *module, const kn_ddp_options *options) {
  (void)module, (void)options;
  no_mpi("kn_ddp_wrap");
  return NULL;
}
void kn_ddp_free(kn_ddp *ddp) { (void)ddp; }
kn_module *kn_ddp_module(kn_ddp *ddp) {
  (void)ddp;
  return NULL;
}
kn_tensor *kn_ddp_forward(kn_ddp *ddp, kn_tensor *input) {
  (void)ddp, (void)input;
  no_mpi("kn_ddp_forward");
  return NULL;
}
kn_status kn_ddp_finish_backward(kn_ddp *ddp) {
  (void)ddp;
  return no_mpi("kn_ddp_finish_backward");
}
bool kn_ddp_set_sync(kn_ddp *ddp, bool sync) {
  (void)ddp, (void)sync;
  return true;
}
int kn_ddp_num_buckets(const kn_ddp *ddp) {
  (void)ddp;
  return 0;
}
kn_tensor *const *kn_ddp_bucket_params(const kn_ddp *ddp, int b, int *n) {
  (void)ddp, (void)b;
  if (n) *n = 0;
  no_mpi("kn_ddp_bucket_params");
  return NULL;
}
int kn_ddp_buckets_launched_in_backward(const kn_ddp *ddp) {
  (void)ddp;
  return 0;
}
