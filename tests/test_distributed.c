/*
** test_distributed.c: the distributed layer in one process (no mpirun; the
** 2-rank checks are tests/distributed/, run by ctest with mpirun), and the
** post-accumulate-grad hooks DDP is built on. In a build without MPI the
** entry points must say so; the rest is skipped there.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(distributed, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* ---- post-accumulate-grad hooks ------------------------------------------------- */

typedef struct seen {
  int calls;
  float grad0[4];   /* leaf's .grad[0] at each call */
  int order[4];     /* which hook ran, in order */
} seen;

static kn_status hook_a(void *ud, kn_tensor *leaf) {
  seen *s = ud;
  s->grad0[s->calls] = ((float *)kn_data(kn_grad(leaf)))[0];
  s->order[s->calls++] = 1;
  return KN_OK;
}

static kn_status hook_b(void *ud, kn_tensor *leaf) {
  seen *s = ud;
  (void)leaf;
  s->order[s->calls++] = 2;
  return KN_OK;
}

static kn_status hook_fail(void *ud, kn_tensor *leaf) {
  (void)ud, (void)leaf;
  return KN_ESTATE;
}

Test(distributed, hook_runs_after_accumulation_in_order) {
  kn_scope_begin();
  float v[2] = {1.5f, -2.0f};
  kn_tensor *w = kn_from_floats(v, 1, (int64_t[]){2});
  kn_set_requires_grad(w, true);
  seen s = {0};
  int ida, idb;
  cr_assert_eq(kn_register_post_accumulate_grad_hook(w, hook_a, &s, &ida), KN_OK);
  cr_assert_eq(kn_register_post_accumulate_grad_hook(w, hook_b, &s, &idb), KN_OK);
  /* d(sum(w * w * 3))/dw = 6 w: 9 at w[0] = 1.5 */
  kn_tensor *l = kn_sum(kn_mul_scalar(kn_mul(w, w), kn_float(3.0)));
  cr_assert_eq(kn_backward(l, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(s.calls, 2);
  cr_assert_eq(s.order[0], 1);
  cr_assert_eq(s.order[1], 2);
  cr_assert_float_eq(s.grad0[0], 9.0f, 0);
  /* a second backward: the hook sees the accumulated 9 + 9 */
  cr_assert_eq(kn_remove_post_accumulate_grad_hook(w, idb), KN_OK);
  l = kn_sum(kn_mul_scalar(kn_mul(w, w), kn_float(3.0)));
  cr_assert_eq(kn_backward(l, NULL), KN_OK);
  cr_assert_eq(s.calls, 3);
  cr_assert_float_eq(s.grad0[2], 18.0f, 0);
  cr_assert_eq(kn_remove_post_accumulate_grad_hook(w, idb), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "expected the id of a hook registered on this tensor, found"),
            "%s", kn_last_error());
  kn_scope_end();
}

Test(distributed, hook_failure_stops_backward_and_bad_targets_refused) {
  kn_scope_begin();
  kn_tensor *w = kn_ones(1, (int64_t[]){3}, KN_FLOAT32);
  cr_assert_eq(kn_register_post_accumulate_grad_hook(w, hook_a, NULL, NULL), KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(), "cannot be registered on non-leaf tensors or tensors that "
                   "do not require grad"), "%s", kn_last_error());
  kn_set_requires_grad(w, true);
  kn_tensor *y = kn_mul_scalar(w, kn_float(2.0));
  cr_assert_eq(kn_register_post_accumulate_grad_hook(y, hook_a, NULL, NULL), KN_EAUTOGRAD);
  cr_assert_eq(kn_register_post_accumulate_grad_hook(w, hook_fail, NULL, NULL), KN_OK);
  cr_assert_eq(kn_backward(kn_sum(y), NULL), KN_ESTATE);
  kn_scope_end();
}

/* ---- final callbacks (kn_autograd_queue_callback) --------------------------------- */

typedef struct finals {
  kn_tensor *a, *b;    /* two leaves; a's hook queues the callbacks */
  float at_end[2];     /* a.grad[0], b.grad[0] when callback 1 ran */
  int order[4], n;
  kn_status seen_status[4];
  bool fail_first;
} finals;

static kn_status final_2(void *ud, kn_status st) {
  finals *f = ud;
  f->seen_status[f->n] = st;
  f->order[f->n++] = 2;
  return KN_OK;
}

static kn_status final_1(void *ud, kn_status st) {
  finals *f = ud;
  f->seen_status[f->n] = st;
  f->order[f->n++] = 1;
  f->at_end[0] = ((float *)kn_data(kn_grad(f->a)))[0];
  f->at_end[1] = ((float *)kn_data(kn_grad(f->b)))[0];
  kn_status q = kn_autograd_queue_callback(final_2, f); /* queued by a callback: runs too */
  if (q != KN_OK) return q;
  /* a failing kiln call: removing a hook that was never registered */
  return f->fail_first ? kn_remove_post_accumulate_grad_hook(f->a, 12345) : KN_OK;
}

static kn_status queue_hook(void *ud, kn_tensor *leaf) {
  (void)leaf;
  return kn_autograd_queue_callback(final_1, ud);
}

/* The callback runs once the whole backward ran: b's gradient (its
** AccumulateGrad runs after a's, b being used first) is already there;
** outside a backward queueing is refused; a failing callback fails the
** backward and the next callback sees the failure. */
Test(distributed, final_callback_runs_at_the_end_of_backward) {
  kn_scope_begin();
  finals f = {0};
  f.a = kn_full(1, (int64_t[]){2}, kn_float(2.0), KN_FLOAT32);
  f.b = kn_full(1, (int64_t[]){2}, kn_float(5.0), KN_FLOAT32);
  kn_set_requires_grad(f.a, true);
  kn_set_requires_grad(f.b, true);
  cr_assert_eq(kn_register_post_accumulate_grad_hook(f.a, queue_hook, &f, NULL), KN_OK);
  /* sum(a * b): da = b = 5, db = a = 2 */
  cr_assert_eq(kn_backward(kn_sum(kn_mul(f.b, f.a)), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(f.n, 2);
  cr_assert_eq(f.order[0], 1);
  cr_assert_eq(f.order[1], 2);
  cr_assert_eq(f.seen_status[0], KN_OK);
  cr_assert_float_eq(f.at_end[0], 5.0f, 0);
  cr_assert_float_eq(f.at_end[1], 2.0f, 0);
  cr_assert_eq(kn_autograd_queue_callback(final_1, &f), KN_ESTATE);
  cr_assert(strstr(kn_last_error(), "final callbacks can only be installed during the backward "
                   "pass"), "%s", kn_last_error());
  cr_assert_eq(kn_autograd_queue_callback(NULL, &f), KN_EINVAL);
  f.n = 0;
  f.fail_first = true;
  cr_assert_eq(kn_backward(kn_sum(kn_mul(f.b, f.a)), NULL), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "expected the id of a hook registered on this tensor"), "%s",
            kn_last_error());
  cr_assert_eq(f.n, 2);
  cr_assert_eq(f.seen_status[1], KN_EINVAL);
  kn_scope_end();
}

/* ---- one process --------------------------------------------------------------------- */

static bool need_mpi_build(void) {
  if (kn_dist_available()) return true;
  cr_assert_eq(kn_dist_init(), KN_EUNSUPPORTED);
  cr_assert(strstr(kn_last_error(), "kiln was built without MPI"), "%s", kn_last_error());
  cr_skip_test("kiln was built without MPI");
  return false;
}

/* Clear the launcher's variables, in case the suite runs under mpirun. */
static void one_process_init(void) {
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMI_RANK");
  unsetenv("PMI_SIZE");
  cr_assert_eq(kn_dist_init(), KN_OK, "%s", kn_last_error());
}

Test(distributed, before_init_and_single_process_default) {
  if (!need_mpi_build()) return;
  cr_assert_eq(kn_dist_rank(), 0);
  cr_assert_eq(kn_dist_world_size(), 1);
  kn_scope_begin();
  kn_tensor *t = kn_ones(1, (int64_t[]){4}, KN_FLOAT32);
  cr_assert_eq(kn_dist_all_reduce(t, KN_REDUCE_SUM), KN_ESTATE);
  cr_assert(strstr(kn_last_error(), "all_reduce: the process group is not initialised (call "
                   "kn_dist_init first)"), "%s", kn_last_error());
  one_process_init();
  cr_assert(kn_dist_is_initialized());
  cr_assert_eq(kn_dist_world_size(), 1);
  cr_assert_eq(kn_dist_init(), KN_ESTATE);
  /* one rank: a sum or average is the contribution itself, on a strided view too */
  kn_tensor *v = kn_t(kn_reshape(kn_arange_dtype(kn_int(0), kn_int(6), kn_int(1), KN_FLOAT64),
                                 2, (int64_t[]){2, 3}));
  cr_assert_eq(kn_dist_all_reduce(v, KN_REDUCE_AVG), KN_OK, "%s", kn_last_error());
  cr_assert_float_eq(kn_get(v, (int64_t[]){2, 1}), 5.0, 0);
  kn_tensor *out = kn_zeros(3, (int64_t[]){1, 3, 2}, KN_FLOAT64);
  cr_assert_eq(kn_dist_all_gather(out, v), KN_OK, "%s", kn_last_error());
  cr_assert_float_eq(kn_get(out, (int64_t[]){0, 2, 1}), 5.0, 0);
  cr_assert_eq(kn_dist_barrier(), KN_OK);
  cr_assert_eq(kn_dist_broadcast(t, 1), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "expected a source rank in [0, 1), found 1"), "%s",
            kn_last_error());
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

Test(distributed, bad_arguments_name_expected_and_found) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_scope_begin();
  kn_tensor *i32 = kn_ones(1, (int64_t[]){4}, KN_INT32);
  cr_assert_eq(kn_dist_all_reduce(i32, KN_REDUCE_MAX), KN_EDTYPE);
  cr_assert(strstr(kn_last_error(), "expected a float32, float64 or int64 tensor for the tensor, "
                   "found int32"), "%s", kn_last_error());
  kn_tensor *in = kn_ones(1, (int64_t[]){4}, KN_FLOAT32);
  kn_tensor *out = kn_ones(1, (int64_t[]){5}, KN_FLOAT32);
  cr_assert_eq(kn_dist_all_gather(out, in), KN_ESHAPE);
  cr_assert(strstr(kn_last_error(), "all_gather: expected the output of sizes [1, *[4]]"), "%s",
            kn_last_error());
  cr_assert(strstr(kn_last_error(), "found the output of sizes [5]"), "%s", kn_last_error());
  cr_assert_eq(kn_dist_reduce_scatter(out, in, (kn_reduce_op)9), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "expected a reduce op"), "%s", kn_last_error());
  cr_assert_eq(kn_dist_set_timeout(-1), KN_EINVAL);
  kn_dist_work *w = (kn_dist_work *)1;
  cr_assert_eq(kn_dist_all_reduce_async(NULL, KN_REDUCE_SUM, &w), KN_EINVAL);
  cr_assert_null(w);
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

Test(distributed, timeout_from_environment) {
  if (!need_mpi_build()) return;
  setenv("KILN_DIST_TIMEOUT", "2.5", 1);
  one_process_init();
  cr_assert_float_eq(kn_dist_timeout(), 2.5, 0);
  cr_assert_eq(kn_dist_finalize(), KN_OK);
  setenv("KILN_DIST_TIMEOUT", "soon", 1);
  cr_assert_eq(kn_dist_init(), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "KILN_DIST_TIMEOUT: expected a positive number of seconds, "
                   "found 'soon'"), "%s", kn_last_error());
  unsetenv("KILN_DIST_TIMEOUT");
}

/* KILN_DIST_PROGRESS: 'thread' (default) or 'none'; anything else is named. */
Test(distributed, progress_setting_from_environment) {
  if (!need_mpi_build()) return;
  const char *good[] = {"thread", "none", ""};
  for (int i = 0; i < 3; i++) {
    setenv("KILN_DIST_PROGRESS", good[i], 1);
    one_process_init();
    cr_assert_eq(kn_dist_finalize(), KN_OK);
  }
  setenv("KILN_DIST_PROGRESS", "threads", 1);
  cr_assert_eq(kn_dist_init(), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "KILN_DIST_PROGRESS: expected 'thread' or 'none', found "
                   "'threads'"), "%s", kn_last_error());
  cr_assert(!kn_dist_is_initialized());
  unsetenv("KILN_DIST_PROGRESS");
}

/* The async form on one rank: the work is done at the first test. */
Test(distributed, async_work_wait_and_test) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_scope_begin();
  kn_tensor *t = kn_full(1, (int64_t[]){3}, kn_int(7), KN_INT64);
  kn_dist_work *w = NULL;
  cr_assert_eq(kn_dist_all_reduce_async(t, KN_REDUCE_MIN, &w), KN_OK);
  bool done = false;
  cr_assert(!kn_dist_work_is_completed(NULL));
  cr_assert_eq(kn_dist_test(w, &done), KN_OK);
  cr_assert(done);
  cr_assert(kn_dist_work_is_completed(w));
  cr_assert_eq(kn_dist_wait(w), KN_OK);
  kn_dist_work_free(w);
  cr_assert_eq(kn_get(t, (int64_t[]){2}), 7.0);
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

/* DDP on one rank: gradients equal a plain backward's; buckets follow
** PyTorch's rule in reverse parameter order, a bucket closing once it holds
** at least the cap (float32 sizes: 0.weight 4x8 = 128 B, 0.bias 16 B,
** 1.weight 2x4 = 32 B, 1.bias 8 B; cap 48 B: 8 + 32 + 16 = 56 B closes
** [1.bias, 1.weight, 0.bias], then [0.weight]). The averaging happens at
** the end of kn_backward: the buckets are counted before any
** kn_ddp_finish_backward, which then does nothing. */
Test(distributed, ddp_one_rank_buckets_and_gradients) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_scope_begin();
  kn_generator *g = kn_generator_new(1);
  kn_module *net = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(8, 4, true, g),
                                                       kn_nn_linear(4, 2, true, g)});
  kn_ddp_options o = kn_ddp_default_options();
  cr_assert_float_eq(o.bucket_cap_mb, 25.0, 0);
  o.bucket_cap_mb = 48.0 / (1024 * 1024);
  kn_ddp *ddp = kn_ddp_wrap(net, &o);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_num_buckets(ddp), 2);
  int n;
  kn_tensor *const *b0 = kn_ddp_bucket_params(ddp, 0, &n);
  cr_assert_eq(n, 3);
  cr_assert_eq(b0[0], kn_module_get(net, "1.bias"));
  cr_assert_eq(b0[1], kn_module_get(net, "1.weight"));
  cr_assert_eq(b0[2], kn_module_get(net, "0.bias"));
  cr_assert_eq(kn_ddp_bucket_params(ddp, 1, &n)[0], kn_module_get(net, "0.weight"));
  cr_assert_eq(n, 1);
  cr_assert_null(kn_ddp_bucket_params(ddp, 2, &n));
  kn_tensor *x = kn_randn(2, (int64_t[]){5, 8}, g, KN_FLOAT32);
  /* the expectation: a plain backward of the same loss on a copy (same seed) */
  kn_generator *g2 = kn_generator_new(1);
  kn_module *plain = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(8, 4, true, g2),
                                                         kn_nn_linear(4, 2, true, g2)});
  cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(plain, x)), NULL), KN_OK);
  cr_assert_eq(kn_backward(kn_sum(kn_ddp_forward(ddp, x)), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), 2); /* counted at the backward's end */
  cr_assert_eq(kn_ddp_finish_backward(ddp), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), 2);
  const char *names[] = {"0.weight", "0.bias", "1.weight", "1.bias"};
  for (int i = 0; i < 4; i++) {
    kn_tensor *a = kn_grad(kn_module_get(net, names[i])), *b = kn_grad(kn_module_get(plain, names[i]));
    cr_assert(a && b && kn_numel(a) == kn_numel(b) && kn_is_contiguous(a) &&
              !memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * sizeof(float)), "%s", names[i]);
  }
  /* backwards without kn_ddp_finish_backward: each one's end averages, so
  ** the gradients keep accumulating as a plain model's (3 backwards each) */
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(kn_backward(kn_sum(kn_ddp_forward(ddp, x)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(plain, x)), NULL), KN_OK);
    cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), 2);
  }
  for (int i = 0; i < 4; i++) {
    kn_tensor *a = kn_grad(kn_module_get(net, names[i])), *b = kn_grad(kn_module_get(plain, names[i]));
    cr_assert(!memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * sizeof(float)), "%s", names[i]);
  }
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_module_free(plain);
  kn_generator_free(g);
  kn_generator_free(g2);
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

/* no_sync: hooks do nothing; the next synchronised backward averages the
** accumulated gradient (one rank: it stays the sum of both backwards). */
Test(distributed, ddp_no_sync_accumulates) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_scope_begin();
  kn_generator *g = kn_generator_new(2);
  kn_module *net = kn_nn_linear(3, 1, false, g);
  kn_ddp *ddp = kn_ddp_wrap(net, NULL);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  kn_tensor *x = kn_ones(2, (int64_t[]){1, 3}, KN_FLOAT32);
  cr_assert(kn_ddp_set_sync(ddp, false));
  cr_assert_eq(kn_backward(kn_sum(kn_ddp_forward(ddp, x)), NULL), KN_OK);
  cr_assert_eq(kn_ddp_finish_backward(ddp), KN_OK);
  cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), 0);
  cr_assert(!kn_ddp_set_sync(ddp, true));
  cr_assert_eq(kn_backward(kn_sum(kn_ddp_forward(ddp, x)), NULL), KN_OK);
  cr_assert_eq(kn_ddp_finish_backward(ddp), KN_OK);
  cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), 1);
  /* d sum(x w^T)/dw = x = 1 per backward: 2 after both */
  cr_assert_float_eq(kn_get(kn_grad(kn_module_get(net, "weight")), (int64_t[]){0, 2}), 2.0, 0);
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_generator_free(g);
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

/* A compiled function under DDP: its compiled backward (AOT autograd)
** reaches the parameters' AccumulateGrad, so the hooks launch every bucket
** during the backward and the gradients equal eager ones. */
static kn_module *compiled_net;

static kn_tensor *compiled_loss(kn_tensor *x) {
  return kn_sum(kn_tanh(kn_nn_forward(compiled_net, x)));
}

Test(distributed, ddp_hooks_fire_from_a_compiled_backward) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_scope_begin();
  kn_generator *g = kn_generator_new(5), *g2 = kn_generator_new(5);
  kn_module *net = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(6, 5, true, g),
                                                       kn_nn_linear(5, 3, true, g)});
  kn_module *plain = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(6, 5, true, g2),
                                                         kn_nn_linear(5, 3, true, g2)});
  kn_ddp_options o = kn_ddp_default_options();
  o.bucket_cap_mb = 64.0 / (1024 * 1024); /* 1.bias+1.weight (72 B): 2 buckets and more */
  kn_ddp *ddp = kn_ddp_wrap(net, &o);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  compiled_net = net;
  kn_compiled *f = KN_COMPILE(compiled_loss, &(kn_compile_options){.backend = "aot_eager",
                                                                     .fullgraph = true});
  kn_tensor *x = kn_randn(2, (int64_t[]){4, 6}, g, KN_FLOAT32);
  kn_tensor *l = kn_call_t(f, x);
  cr_assert_not_null(l, "%s", kn_last_error());
  cr_assert_str_eq(kn_grad_fn_name(l), "CompiledFunctionBackward");
  cr_assert_eq(kn_backward(l, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_finish_backward(ddp), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_buckets_launched_in_backward(ddp), kn_ddp_num_buckets(ddp));
  cr_assert_gt(kn_ddp_num_buckets(ddp), 1);
  cr_assert_eq(kn_backward(kn_sum(kn_tanh(kn_nn_forward(plain, x))), NULL), KN_OK);
  const char *names[] = {"0.weight", "0.bias", "1.weight", "1.bias"};
  for (int i = 0; i < 4; i++) {
    kn_tensor *a = kn_grad(kn_module_get(net, names[i])), *b = kn_grad(kn_module_get(plain, names[i]));
    cr_assert(a && b, "%s", names[i]);
    for (int64_t k = 0; k < kn_numel(a); k++) {
      float fa = ((float *)kn_data(a))[k], fb = ((float *)kn_data(b))[k];
      cr_assert_float_eq(fa, fb, 1e-6f, "%s[%lld]: %g vs %g", names[i], (long long)k, fa, fb);
    }
  }
  kn_compiled_free(f);
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_module_free(plain);
  kn_generator_free(g);
  kn_generator_free(g2);
  kn_scope_end();
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}

/* The default cap (25 MiB) with PyTorch's 1 MiB first bucket: in reverse
** order 2.bias (40 B), 2.weight (24000 B), 1.bias (2400 B) and 1.weight
** (600 x 600 x 4 = 1440000 B) reach 1 MiB and close the first bucket;
** 0.bias and 0.weight (1442400 B, under 25 MiB) stay in the second. */
Test(distributed, ddp_first_bucket_is_one_mib) {
  if (!need_mpi_build()) return;
  one_process_init();
  kn_generator *g = kn_generator_new(4);
  kn_module *net = kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(600, 600, true, g),
                                                       kn_nn_linear(600, 600, true, g),
                                                       kn_nn_linear(600, 10, true, g)});
  kn_ddp *ddp = kn_ddp_wrap(net, NULL);
  cr_assert_not_null(ddp, "%s", kn_last_error());
  cr_assert_eq(kn_ddp_num_buckets(ddp), 2);
  int n0, n1;
  kn_tensor *const *b0 = kn_ddp_bucket_params(ddp, 0, &n0);
  kn_tensor *const *b1 = kn_ddp_bucket_params(ddp, 1, &n1);
  cr_assert_eq(n0, 4);
  cr_assert_eq(b0[3], kn_module_get(net, "1.weight"));
  cr_assert_eq(n1, 2);
  cr_assert_eq(b1[0], kn_module_get(net, "0.bias"));
  cr_assert_eq(b1[1], kn_module_get(net, "0.weight"));
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_generator_free(g);
  cr_assert_eq(kn_dist_finalize(), KN_OK);
}
