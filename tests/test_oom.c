/*
** test_oom.c: allocation failure is an error, never an abort and never a
** leak. Each main path (tensor creation and ops, autograd backward,
** compile + call, logging, trace writing) runs with the N-th allocation
** failing, for N = 1, 2, ... until a run completes without reaching the
** N-th allocation. Every run must either succeed with the right answer or
** fail with KN_ENOMEM, and leave no tensor or storage behind (and, in the
** ASan build, nothing for LeakSanitizer).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc_hook.h"
#include "core/error.h"
#include "kiln/kiln.h"
#include "support/trace_util.h"
#include "tensor/tensor.h"

/* The capture layer's allocation failures: the interpreter backend (the
** code generator's own paths are not swept here). */
static const kn_compile_options eager = {.backend = "eager"};

#define MAX_RUNS 20000

/* A path returns KN_OK after checking its own result, or the first error. */
typedef kn_status (*path_fn)(void);

static kn_status wrong(const char *what, double got, double want) {
  return kn__error(KN_EINTERNAL, "%s: got %g, expected %g", what, got, want);
}

/* ---- the paths ------------------------------------------------------------------ */

static kn_status ops_path(void) {
  kn_status st = KN_ENOMEM;
  kn_scope_begin();
  kn_tensor *a = kn_arange_dtype(kn_int(0), kn_int(6), kn_int(1), KN_FLOAT32);
  kn_tensor *m = kn_reshape(a, KN_SHAPE(2, 3));
  kn_tensor *p = kn_matmul(m, kn_t(m));                        /* [[5, 14], [14, 50]] */
  kn_tensor *c = kn_cat((kn_tensor *[]){p, kn_ones(KN_SHAPE(1, 2), KN_FLOAT32)}, 2, 0);
  kn_tensor *s = kn_sum(kn_softmax(c, 1));                      /* each row sums to 1 */
  kn_tensor *t = kn_sum(c);
  double sv = NAN, tv = NAN;
  if (s && t && kn_item_double(s, &sv) == KN_OK && kn_item_double(t, &tv) == KN_OK)
    st = fabs(sv - 3) > 1e-5 ? wrong("softmax rows", sv, 3) : tv != 85 ? wrong("sum", tv, 85) : KN_OK;
  else
    st = kn_last_status();
  kn_scope_end();
  return st;
}

static kn_status backward_path(void) {
  kn_status st;
  kn_scope_begin();
  kn_tensor *x = kn_from_doubles((double[]){0.5, -1, 2}, KN_SHAPE(3));
  st = x ? kn_set_requires_grad(x, true) : kn_last_status();
  kn_tensor *y = st == KN_OK ? kn_sum(kn_mul(kn_tanh(x), x)) : NULL;
  if (st == KN_OK) st = y ? kn_backward(y, NULL) : kn_last_status();
  if (st == KN_OK) {
    /* d/dx x tanh x = tanh x + x (1 - tanh^2 x) */
    double want = tanh(2) + 2 * (1 - tanh(2) * tanh(2));
    kn_tensor *g = kn_grad(x);
    double got = g ? kn_get(g, (int64_t[]){2}) : NAN;
    st = fabs(got - want) > 1e-9 ? wrong("grad", got, want) : KN_OK;
  }
  kn_scope_end();
  return st;
}

static kn_tensor *compiled_body(kn_tensor *a, kn_tensor *b) {
  return kn_relu(kn_add(kn_mul(a, b), kn_sum_dims(b, (int64_t[]){0}, 1, true)));
}

/* Two calls with different sizes: trace, guard miss, recompile. */
static kn_status compile_path(void) {
  kn_status st = KN_OK;
  kn_compiled *f = KN_COMPILE(compiled_body, &eager);
  if (!f) return kn_last_status();
  for (int64_t n = 2; st == KN_OK && n <= 3; n++) {
    kn_scope_begin();
    kn_tensor *a = kn_full(KN_SHAPE(n, 2), kn_float(2), KN_FLOAT32);
    kn_tensor *b = kn_ones(KN_SHAPE(n, 2), KN_FLOAT32);
    kn_tensor *y = a && b ? kn_call_t(f, a, b) : NULL;
    /* 2 * 1 + n */
    double got = y ? kn_get(y, (int64_t[]){n - 1, 1}) : NAN;
    st = !y ? kn_last_status() : got != (double)(2 + n) ? wrong("compiled", got, 2.0 + (double)n) : KN_OK;
    kn_scope_end();
  }
  kn_compiled_free(f);
  kn_reset();
  return st;
}

static int records;
static void count_sink(const kn_log_record *rec, void *ud) {
  (void)ud;
  if (rec->message && rec->message[0]) records++;
}

static kn_status logging_path(void) {
  records = 0;
  kn_status st = kn_log_add_sink(count_sink, NULL, KN_LOG_SINK_EXCLUSIVE);
  if (st != KN_OK) return st;
  st = kn_set_logs_str("+dynamo,graph_code,guards");
  if (st == KN_OK) st = compile_path();
  kn_set_logs(NULL, 0);
  kn_log_remove_sink(count_sink, NULL);
  if (st == KN_OK && records == 0) st = wrong("log records", 0, 1);
  return st;
}

static char trace_dir[256];

static kn_status trace_path(void) {
  kn_status st = kn_trace_enable(trace_dir);
  if (st == KN_OK) st = compile_path();
  kn_trace_disable();
  return st;
}

/* ---- the driver ------------------------------------------------------------------- */

static void run_failing(const char *name, path_fn fn) {
  kn__allocator_empty_cache();
  int64_t t0 = kn_live_tensors(), s0 = kn_live_storages();
  kn__alloc_fail_at(0);
  cr_assert_eq(fn(), KN_OK, "%s without failures: %s", name, kn_last_error());
  int n = 1;
  for (; n < MAX_RUNS; n++) {
    kn_clear_error();
    kn__alloc_fail_at(n);
    kn_status st = fn();
    bool fired = kn__alloc_failed();
    kn__alloc_fail_at(0);
    /* a later call given the NULL result of the failed one says so */
    bool oom = st == KN_ENOMEM || (st == KN_EINVAL && strstr(kn_last_error(), "out of memory"));
    cr_assert(st == KN_OK || oom, "%s, allocation %d failing: status %s: %s", name, n,
              kn_status_name(st), kn_last_error());
    if (oom) cr_assert(fired, "%s: out of memory without a failed allocation", name);
    cr_assert_eq(kn_live_tensors(), t0, "%s, allocation %d failing: %lld tensors leaked", name, n,
                 (long long)(kn_live_tensors() - t0));
    cr_assert_eq(kn_live_storages(), s0, "%s, allocation %d failing: storages leaked", name, n);
    if (!fired) break;
  }
  cr_assert_lt(n, MAX_RUNS, "%s: still allocating after %d runs", name, n);
  cr_log_info("%s: %d allocations", name, n - 1);
}

Test(oom, tensor_creation_and_ops) { run_failing("ops", ops_path); }
Test(oom, autograd_backward) { run_failing("backward", backward_path); }
Test(oom, compile_and_call) { run_failing("compile", compile_path); }
Test(oom, logging) { run_failing("logging", logging_path); }

Test(oom, trace_writing) {
  char *dir = kn_test_tmpdir();
  cr_assert_not_null(dir);
  snprintf(trace_dir, sizeof trace_dir, "%s", dir);
  run_failing("trace", trace_path);
  kn_test_rmdir(dir);
}

Test(oom, disarmed_hook_lets_every_allocation_through) {
  kn__alloc_fail_at(0);
  void *p = malloc(16);
  cr_assert_not_null(p);
  free(p);
  kn__alloc_fail_at(1);
  kn_tensor *t = kn_empty(KN_SHAPE(3), KN_INT64); /* the tensor struct's calloc fails */
  cr_assert(kn__alloc_failed());
  cr_assert_null(t);
  cr_assert_eq(kn_last_status(), KN_ENOMEM, "%s", kn_last_error());
  kn__alloc_fail_at(0);
  cr_assert_not_null(t = kn_empty(KN_SHAPE(3), KN_INT64));
  kn_release(t);
}
