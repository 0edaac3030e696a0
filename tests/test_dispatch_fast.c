/*
** test_dispatch_fast.c: the dispatcher's fast path for pointwise calls
** (ops/dispatch.c, docs/KERNELS.md "The per-op path").
**
** Every case runs a public op twice: once as is (taking the fast path when
** it applies) and once under a pass-through dispatcher mode, which makes
** the call go the general way (mode stack, autograd layer, meta function,
** output allocation, kernel). The two results must be identical bit for
** bit, in dtype, sizes, strides and bytes, and errors must carry the same
** message; the mode must see every call. The cases cover dtypes, shapes,
** single-element broadcasting, strided and offset views, aliasing, mixed
** dtypes and scalar arguments; kn__dispatch_fast_calls tells which cases
** took the fast path, which is checked against the rule (every tensor
** operand of one shape or a one-element shape of no more dims). A second
** implementation checks a few float32 results against double arithmetic.
** Then autograd, autocast, the profiler, meta tensors and in-place ops
** each show that they still see the op shapes the fast path takes.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/opdef.h"
#include "tensor/handles.h"
#include "tensor/tensor.h"

/* Checked handles (KILN_DEBUG, on in debug builds) route every call the
** general way: the suite runs unchecked, as release builds do, except
** where a test switches them on. */
static void unchecked(void) {
  cr_assert_eq(kn__handles_set_checked(false), KN_OK, "%s", kn_last_error());
}

TestSuite(dispatch_fast, .init = unchecked);

/* ---- a pass-through mode ---------------------------------------------------------- */

static int seen; /* calls the mode handled */

static kn_status pass(kn__mode *self, kn__call *c, kn__outs *out) {
  seen++;
  return kn__dispatch_below(self, c, out);
}

static kn__mode pass_mode = {.name = "pass", .handle = pass};

/* ---- inputs ------------------------------------------------------------------------ */

/* Element i of a test tensor: negatives, zeros and fractions for signed
** dtypes, small counts for unsigned ones, 0/1 for bool. */
static double value(kn_dtype dt, int64_t i, int salt) {
  int64_t k = (i * 37 + salt * 11) % 23;
  if (dt == KN_BOOL) return (double)(k % 2);
  if (dt == KN_UINT8) return (double)k;
  if (kn_dtype_is_floating(dt)) return (double)(k - 11) * 0.37;
  return (double)(k - 11);
}

static kn_tensor *filled(kn_dtype dt, int nd, const int64_t *sizes, int salt) {
  kn_tensor *t = kn_empty(nd, sizes, dt);
  cr_assert_not_null(t, "%s", kn_last_error());
  char *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++)
    kn__store_double(p + i * (int64_t)kn_dtype_size(dt), dt, value(dt, i, salt));
  return t;
}

/* ---- the ops under test --------------------------------------------------------------- */

typedef kn_tensor *(*op2)(kn_tensor *a, kn_tensor *b);

static kn_tensor *add_alpha(kn_tensor *a, kn_tensor *b) { return kn_add_scaled(a, b, kn_float(0.5)); }
static kn_tensor *sub_alpha(kn_tensor *a, kn_tensor *b) { return kn_sub_scaled(a, b, kn_int(2)); }
static kn_tensor *div_floor(kn_tensor *a, kn_tensor *b) { return kn_div_mode(a, b, KN_ROUND_FLOOR); }
static kn_tensor *div_trunc(kn_tensor *a, kn_tensor *b) { return kn_div_mode(a, b, KN_ROUND_TRUNC); }
static kn_tensor *thr_bw(kn_tensor *a, kn_tensor *b) { return kn_threshold_backward(a, b, kn_float(0.2)); }
static kn_tensor *gelu_bw(kn_tensor *a, kn_tensor *b) { return kn_gelu_backward(a, b, KN_GELU_TANH); }
/* unary ops and ops with a scalar operand (b unused) */
static kn_tensor *add_s(kn_tensor *a, kn_tensor *b) { (void)b; return kn_add_scalar(a, kn_float(1.25)); }
static kn_tensor *mul_s(kn_tensor *a, kn_tensor *b) { (void)b; return kn_mul_scalar(a, kn_int(3)); }
static kn_tensor *div_s(kn_tensor *a, kn_tensor *b) { (void)b; return kn_div_scalar(a, kn_int(4)); }
static kn_tensor *pow_s(kn_tensor *a, kn_tensor *b) { (void)b; return kn_pow_scalar(a, kn_int(2)); }
static kn_tensor *s_pow(kn_tensor *a, kn_tensor *b) { (void)b; return kn_scalar_pow(kn_float(1.5), a); }
static kn_tensor *lt_s(kn_tensor *a, kn_tensor *b) { (void)b; return kn_lt_scalar(a, kn_float(0.5)); }
static kn_tensor *neg(kn_tensor *a, kn_tensor *b) { (void)b; return kn_neg(a); }
static kn_tensor *abs_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_abs(a); }
static kn_tensor *exp_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_exp(a); }
static kn_tensor *log_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_log(a); }
static kn_tensor *sqrt_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_sqrt(a); }
static kn_tensor *tanh_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_tanh(a); }
static kn_tensor *sigmoid(kn_tensor *a, kn_tensor *b) { (void)b; return kn_sigmoid(a); }
static kn_tensor *relu(kn_tensor *a, kn_tensor *b) { (void)b; return kn_relu(a); }
static kn_tensor *gelu(kn_tensor *a, kn_tensor *b) { (void)b; return kn_gelu(a, KN_GELU_NONE); }
static kn_tensor *gelu_t(kn_tensor *a, kn_tensor *b) { (void)b; return kn_gelu(a, KN_GELU_TANH); }
static kn_tensor *silu(kn_tensor *a, kn_tensor *b) { (void)b; return kn_silu(a); }
static kn_tensor *erf_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_erf(a); }
static kn_tensor *floor_(kn_tensor *a, kn_tensor *b) { (void)b; return kn_floor(a); }
static kn_tensor *recip(kn_tensor *a, kn_tensor *b) { (void)b; return kn_reciprocal(a); }
static kn_tensor *lnot(kn_tensor *a, kn_tensor *b) { (void)b; return kn_logical_not(a); }
static kn_tensor *softplus(kn_tensor *a, kn_tensor *b) {
  (void)b;
  return kn_softplus(a, kn_float(2), kn_float(3));
}
static kn_tensor *clamp(kn_tensor *a, kn_tensor *b) {
  (void)b;
  kn_scalar lo = kn_float(-0.5), hi = kn_int(2);
  return kn_clamp(a, &lo, &hi);
}
static kn_tensor *clamp_none(kn_tensor *a, kn_tensor *b) { (void)b; return kn_clamp(a, NULL, NULL); }

typedef struct opcase {
  const char *name;
  op2 f;
  bool binary;     /* reads b */
  bool float_only; /* its formula has no integer loop: integer outputs are
                      not written (by either path), so only floating dtypes
                      are compared */
} opcase;

static const opcase ops[] = {
  {"add", kn_add, true, false}, {"add_alpha", add_alpha, true, false}, {"sub", kn_sub, true, false},
  {"sub_alpha", sub_alpha, true, false}, {"mul", kn_mul, true, false}, {"div", kn_div, true, false},
  {"div_floor", div_floor, true, false}, {"div_trunc", div_trunc, true, false},
  {"maximum", kn_maximum, true, false}, {"minimum", kn_minimum, true, false}, {"pow", kn_pow, true, false},
  {"eq", kn_eq, true, false}, {"lt", kn_lt, true, false}, {"ge", kn_ge, true, false},
  {"logical_and", kn_logical_and, true, false}, {"logical_or", kn_logical_or, true, false},
  {"threshold_backward", thr_bw, true, true}, {"gelu_backward", gelu_bw, true, true},
  {"add_scalar", add_s, false, false}, {"mul_scalar", mul_s, false, false}, {"div_scalar", div_s, false, false},
  {"pow_scalar", pow_s, false, false}, {"scalar_pow", s_pow, false, false}, {"lt_scalar", lt_s, false, false},
  {"neg", neg, false, false}, {"abs", abs_, false, false}, {"exp", exp_, false, false}, {"log", log_, false, false},
  {"sqrt", sqrt_, false, false}, {"tanh", tanh_, false, false}, {"sigmoid", sigmoid, false, false},
  {"relu", relu, false, false}, {"gelu", gelu, false, false}, {"gelu_tanh", gelu_t, false, false},
  {"silu", silu, false, false}, {"erf", erf_, false, false}, {"floor", floor_, false, false},
  {"reciprocal", recip, false, false}, {"logical_not", lnot, false, false}, {"softplus", softplus, false, false},
  {"clamp", clamp, false, false}, {"clamp_none", clamp_none, false, false},
};
#define NOPS ((int)(sizeof ops / sizeof *ops))

/* ---- comparing the two paths -------------------------------------------------------- */

static void same_tensor(const kn_tensor *x, const kn_tensor *y, const char *what) {
  cr_assert_eq(x->dtype, y->dtype, "%s: dtype %s vs %s", what, kn_dtype_name(x->dtype),
               kn_dtype_name(y->dtype));
  cr_assert_eq(x->ndim, y->ndim, "%s: ndim %d vs %d", what, x->ndim, y->ndim);
  for (int d = 0; d < x->ndim; d++) {
    cr_assert_eq(x->sizes[d], y->sizes[d], "%s: size of dim %d", what, d);
    cr_assert_eq(x->strides[d], y->strides[d], "%s: stride of dim %d", what, d);
  }
  cr_assert_eq(x->offset, y->offset, "%s: offset", what);
  cr_assert_eq(x->device, y->device, "%s: device", what);
  cr_assert_eq(kn_requires_grad(x), kn_requires_grad(y), "%s: requires_grad", what);
  size_t n = (size_t)kn_numel(x) * kn_dtype_size(x->dtype);
  cr_assert(n == 0 || !memcmp(kn_data(x), kn_data(y), n), "%s: the bytes differ", what);
}

/* Run op on (a, b) the fast way and through the mode; they must agree.
** Returns whether the fast path took the call. */
static bool both_ways(const opcase *op, kn_tensor *a, kn_tensor *b, const char *what) {
  char msg[512] = "";
  uint64_t before = kn__dispatch_fast_calls();
  kn_tensor *fast = op->f(a, b);
  bool took = kn__dispatch_fast_calls() != before;
  if (!fast) snprintf(msg, sizeof msg, "%s", kn_last_error());
  cr_assert_eq(kn__mode_push(&pass_mode), KN_OK);
  int seen0 = seen;
  kn_tensor *general = op->f(a, b);
  kn__mode_pop(&pass_mode);
  cr_assert_geq(seen - seen0, 1, "%s %s: the mode saw no call", op->name, what);
  cr_assert_eq(kn__dispatch_fast_calls() - before, (uint64_t)took,
               "%s %s: a call under a mode took the fast path", op->name, what);
  if (!fast || !general) {
    cr_assert(!fast && !general, "%s %s: one path failed: %s", op->name, what,
              fast ? kn_last_error() : msg);
    cr_assert_str_eq(msg, kn_last_error(), "%s %s: the two errors differ", op->name, what);
    return took;
  }
  char where[160];
  snprintf(where, sizeof where, "%s %s", op->name, what);
  same_tensor(fast, general, where);
  return took;
}

static const kn_dtype dtypes[] = {KN_FLOAT32, KN_FLOAT64, KN_INT64, KN_INT32,
                                  KN_BOOL,    KN_UINT8,   KN_BFLOAT16, KN_FLOAT16};
#define NDT ((int)(sizeof dtypes / sizeof *dtypes))

typedef struct shp { int nd; int64_t s[3]; } shp;

/* Every op on (a, b); expect: whether the fast path's rule takes the
** binary ones (the unary ones read a alone, always of one shape). */
static void all_ops(kn_tensor *a, kn_tensor *b, bool expect, const char *what) {
  for (int i = 0; i < NOPS; i++) {
    if (ops[i].float_only && !kn_dtype_is_floating(a->dtype)) continue;
    bool took = both_ways(&ops[i], a, b, what);
    cr_assert_eq(took, ops[i].binary ? expect : true, "%s %s: the fast path %s the call",
                 ops[i].name, what, took ? "took" : "declined");
  }
}

Test(dispatch_fast, same_bits_as_the_general_path_across_dtypes_and_shapes) {
  static const shp shapes[] = {{0, {0}}, {1, {1}}, {1, {7}}, {2, {3, 5}}, {3, {2, 3, 4}},
                               {2, {0, 3}}, {1, {300}}};
  for (int di = 0; di < NDT; di++)
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      kn_scope_begin();
      kn_dtype dt = dtypes[di];
      const shp *s = &shapes[si];
      kn_tensor *a = filled(dt, s->nd, s->s, 1), *b = filled(dt, s->nd, s->s, 2);
      kn_tensor *one = filled(dt, 0, NULL, 3);
      int64_t ones[3] = {1, 1, 1};
      kn_tensor *ones_t = filled(dt, s->nd, ones, 4);
      char what[96];
      snprintf(what, sizeof what, "%s ndim %d", kn_dtype_name(dt), s->nd);
      all_ops(a, b, true, what);
      all_ops(a, one, true, what);  /* a 0-dim operand */
      all_ops(one, a, true, what);
      all_ops(ones_t, a, true, what); /* a one-element operand of as many dims */
      all_ops(a, a, true, what);    /* aliasing: the same tensor twice */
      kn_scope_end();
    }
}

Test(dispatch_fast, large_operands_run_on_the_threaded_iterator_alike) {
  kn_scope_begin();
  int64_t n = 70001;
  kn_tensor *a = filled(KN_FLOAT32, 1, &n, 1), *b = filled(KN_FLOAT32, 1, &n, 2);
  for (int i = 0; i < NOPS; i++) cr_assert(both_ways(&ops[i], a, b, "float32 [70001]"));
  kn_scope_end();
}

Test(dispatch_fast, mixed_dtypes_views_and_broadcasts) {
  kn_scope_begin();
  kn_tensor *f = filled(KN_FLOAT32, 2, (int64_t[]){3, 5}, 1);
  kn_tensor *d = filled(KN_FLOAT64, 2, (int64_t[]){3, 5}, 2);
  kn_tensor *i = filled(KN_INT64, 2, (int64_t[]){3, 5}, 3);
  kn_tensor *h = filled(KN_BFLOAT16, 2, (int64_t[]){3, 5}, 4);
  kn_tensor *big = filled(KN_FLOAT32, 2, (int64_t[]){5, 5}, 5);
  kn_tensor *rows = kn_narrow(big, 0, 1, 3);    /* contiguous, offset 5 */
  kn_tensor *cols = kn_narrow(big, 1, 0, 5);    /* the whole: contiguous */
  kn_tensor *tr = kn_t(filled(KN_FLOAT32, 2, (int64_t[]){5, 3}, 6)); /* strided [3, 5] */
  kn_tensor *row = filled(KN_FLOAT32, 2, (int64_t[]){1, 5}, 7);
  kn_tensor *col = filled(KN_FLOAT32, 2, (int64_t[]){3, 1}, 8);
  kn_tensor *vec = filled(KN_FLOAT32, 1, (int64_t[]){5}, 9);
  kn_tensor *one3 = filled(KN_FLOAT32, 3, (int64_t[]){1, 1, 1}, 10);
  kn_tensor *exp_one = kn_expand(filled(KN_FLOAT32, 1, (int64_t[]){1}, 11), 2, (int64_t[]){3, 5});
  cr_assert_not_null(rows);
  cr_assert_not_null(tr);
  cr_assert_not_null(exp_one);
  all_ops(f, d, true, "float32+float64");
  all_ops(i, f, true, "int64+float32");
  all_ops(h, f, true, "bfloat16+float32");
  all_ops(h, d, true, "bfloat16+float64");
  all_ops(rows, f, true, "offset view");
  all_ops(cols, big, true, "whole narrow");
  /* strided operands of the one shape: the general kernel's strided loops */
  all_ops(tr, f, true, "transposed");
  all_ops(f, tr, true, "transposed second");
  all_ops(exp_one, f, true, "expanded");
  all_ops(tr, tr, true, "transposed twice");
  /* not the fast path's: broadcasting, more dims in the one-element operand */
  all_ops(f, row, false, "row broadcast");
  all_ops(col, row, false, "outer broadcast");
  all_ops(f, vec, false, "lower-rank broadcast");
  all_ops(vec, one3, false, "one-element operand of more dims");
  kn_scope_end();
}

Test(dispatch_fast, errors_are_the_general_paths) {
  kn_scope_begin();
  kn_tensor *f = filled(KN_FLOAT32, 1, (int64_t[]){4}, 1);
  kn_tensor *b = filled(KN_BOOL, 1, (int64_t[]){4}, 2);
  kn_tensor *i = filled(KN_INT64, 1, (int64_t[]){4}, 3);
  kn_tensor *z = kn_zeros(KN_SHAPE(4), KN_INT64);
  uint64_t before = kn__dispatch_fast_calls();
  cr_assert_null(kn_add_scaled(f, f, kn_bool(true)));
  cr_assert_str_eq(kn_last_error(), "Boolean alpha only supported for Boolean results.");
  cr_assert_null(kn_sub(b, b));
  cr_assert(strstr(kn_last_error(), "with two bool tensors is not supported"), "%s",
            kn_last_error());
  cr_assert_null(kn_div_mode(i, z, KN_ROUND_FLOOR));
  cr_assert_str_eq(kn_last_error(), "ZeroDivisionError");
  cr_assert_eq(kn__dispatch_fast_calls() - before, 3, "the fast path reported the errors");
  const opcase err[] = {{"sub", kn_sub, true, false}, {"div_floor", div_floor, true, false}};
  both_ways(&err[0], b, b, "bool - bool");
  both_ways(&err[1], i, z, "int / 0");
  kn_scope_end();
}

/* A second implementation: float32 add, sub, mul, div in double, rounded
** once (exact for these: a double holds the float result exactly). */
Test(dispatch_fast, float32_results_match_double_arithmetic) {
  kn_scope_begin();
  int64_t n = 257;
  kn_tensor *a = filled(KN_FLOAT32, 1, &n, 1), *b = filled(KN_FLOAT32, 1, &n, 5);
  const float *pa = kn_data(a), *pb = kn_data(b);
  kn_tensor *r[4] = {kn_add(a, b), kn_sub(a, b), kn_mul(a, b), kn_div(a, b)};
  for (int k = 0; k < 4; k++) {
    const float *p = kn_data(r[k]);
    for (int64_t j = 0; j < n; j++) {
      double x = pa[j], y = pb[j];
      double want = k == 0 ? x + y : k == 1 ? x - y : k == 2 ? x * y : x / y;
      float w = (float)want;
      cr_assert(!memcmp(&p[j], &w, sizeof w) || (isnan(p[j]) && isnan(w)),
                "op %d element %lld: %.9g, want %.9g", k, (long long)j, p[j], w);
    }
  }
  kn_scope_end();
}

/* ---- the layers still see the calls ------------------------------------------------- */

Test(dispatch_fast, autograd_records_what_requires_grad) {
  kn_scope_begin();
  kn_tensor *a = filled(KN_FLOAT32, 1, (int64_t[]){3}, 1);
  kn_tensor *b = filled(KN_FLOAT32, 1, (int64_t[]){3}, 2);
  kn_set_requires_grad(a, true);
  uint64_t before = kn__dispatch_fast_calls();
  kn_tensor *y = kn_mul(a, b);
  cr_assert_eq(kn__dispatch_fast_calls(), before, "a call to record took the fast path");
  cr_assert(kn_requires_grad(y));
  cr_assert_str_eq(kn_grad_fn_name(y), "MulBackward0");
  cr_assert_eq(kn_backward(kn_sum(y), NULL), KN_OK, "%s", kn_last_error());
  const float *g = kn_data(kn_grad(a)), *pb = kn_data(b);
  for (int j = 0; j < 3; j++) cr_assert_eq(g[j], pb[j], "d(a*b)/da = b at %d", j);
  before = kn__dispatch_fast_calls();
  bool prev = kn_no_grad_begin();
  kn_tensor *z = kn_mul(a, b);
  kn_no_grad_end(prev);
  cr_assert_eq(kn__dispatch_fast_calls(), before + 1, "no_grad: the fast path takes it");
  cr_assert(!kn_requires_grad(z));
  cr_assert_null(kn_grad_fn_name(z));
  kn_scope_end();
}

Test(dispatch_fast, autocast_and_the_profiler_see_the_calls) {
  kn_scope_begin();
  kn_tensor *a = filled(KN_FLOAT32, 2, (int64_t[]){2, 3}, 1);
  uint64_t before = kn__dispatch_fast_calls();
  cr_assert_eq(kn_autocast_begin(KN_BFLOAT16), KN_OK);
  kn_tensor *x = kn_add(a, a);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_not_null(x);
  cr_assert_eq(kn__dispatch_fast_calls(), before, "a call under autocast took the fast path");
  kn_profiler_clear();
  cr_assert_eq(kn_profiler_start(), KN_OK);
  kn_tensor *y = kn_add(a, a);
  cr_assert_eq(kn_profiler_stop(), KN_OK);
  cr_assert_not_null(y);
  cr_assert_eq(kn__dispatch_fast_calls(), before, "a profiled call took the fast path");
  bool found = false;
  kn_profiler_event e;
  for (int i = 0; i < kn_profiler_num_events(); i++)
    if (kn_profiler_get_event(i, &e) && !strcmp(e.name, "aten::add")) {
      found = true;
      cr_assert_str_eq(e.shapes, "[[2, 3], [2, 3], []]");
    }
  cr_assert(found, "the profiler recorded no aten::add");
  kn_profiler_clear();
  kn_scope_end();
}

Test(dispatch_fast, meta_tensors_get_metadata_only) {
  kn_scope_begin();
  kn_tensor *m = kn_empty_meta(2, (int64_t[]){2, 3}, KN_FLOAT32);
  uint64_t before = kn__dispatch_fast_calls();
  kn_tensor *y = kn_add(m, m);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_device(y), KN_META);
  cr_assert_eq(kn__dispatch_fast_calls(), before, "a meta call took the fast path");
  kn_scope_end();
}

Test(dispatch_fast, in_place_ops_bump_the_version_and_read_aliases_right) {
  kn_scope_begin();
  kn_tensor *a = filled(KN_FLOAT32, 1, (int64_t[]){4}, 1);
  kn_tensor *want = kn_add(a, a);
  uint64_t v = kn_tensor_version(a), before = kn__dispatch_fast_calls();
  cr_assert_eq(kn_add_(a, a), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__dispatch_fast_calls(), before, "in-place ops never take the fast path");
  cr_assert_eq(kn_tensor_version(a), v + 1);
  cr_assert(!memcmp(kn_data(a), kn_data(want), 4 * sizeof(float)));
  kn_scope_end();
}


/* Capture: the tracing mode records each op the fast path would take. */
static kn_value add_mul_exp(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *a = args[0].u.t, *b = args[1].u.t;
  return kn_vtensor(kn_exp(kn_mul(kn_add(a, b), kn_mul_scalar(a, kn_float(2)))));
}

Test(dispatch_fast, capture_records_the_calls) {
  kn_scope_begin();
  kn_tensor *a = filled(KN_FLOAT32, 1, (int64_t[]){5}, 1);
  kn_tensor *b = filled(KN_FLOAT32, 1, (int64_t[]){5}, 2);
  kn_tensor *want = kn_exp(kn_mul(kn_add(a, b), kn_mul_scalar(a, kn_float(2))));
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(add_mul_exp, NULL, 2, "add_mul_exp", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_value args[2] = {kn_vtensor(a), kn_vtensor(b)}, out;
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  cr_assert_eq(cc.frame_count, 1);
  cr_assert_eq(cc.op_count, 4, "add, mul.Scalar, mul, exp: got %d ops", cc.op_count);
  cr_assert(!memcmp(kn_data(out.u.t), kn_data(want), 5 * sizeof(float)));
  kn_value_release(out);
  kn_compiled_free(f);
  kn_scope_end();
}

Test(dispatch_fast, checked_handles_take_the_general_path) {
  cr_assert_eq(kn__handles_set_checked(true), KN_OK, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *a = filled(KN_FLOAT32, 1, (int64_t[]){3}, 1);
  uint64_t before = kn__dispatch_fast_calls();
  kn_tensor *y = kn_add(a, a);
  cr_assert_eq(kn__dispatch_fast_calls(), before, "a checked call took the fast path");
  const float *pa = kn_data(a), *py = kn_data(y);
  for (int j = 0; j < 3; j++) cr_assert_eq(py[j], pa[j] + pa[j]);
  kn_scope_end();
  cr_assert_eq(kn__handles_set_checked(false), KN_OK, "%s", kn_last_error());
}
