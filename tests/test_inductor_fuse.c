/*
** tests/test_inductor_fuse.c: inductor's scheduler beyond reduction groups:
** recomputation of cheap producers in each of their readers (the merged
** `ones` of the seed's example_fn), horizontal fusion of pointwise loops
** over the same sizes that read a common input (one loop, several outputs),
** and outputs written in place over a dead intermediate's buffer.
**
** Schedules and fusion decisions are compared with literals (which nodes
** share a kernel, and the reason of each decision); results with the eager
** ops bit for bit (the same formulas and vector-math functions, element by
** element), in float32 and float64 and with dynamic sizes.
*/
#include "inductor_util.h"
#include "kiln/autograd.h"
#include "kiln/log.h"
#include "support/log_capture.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(5);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_fuse, .init = setup, .fini = teardown, .timeout = 300);

/* Kernels, new buffers, buffers written in place and extern calls. */
static void expect_code(int kernels, int allocs, int inplace, int exts) {
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), kernels, "kernels in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), allocs, "buffers in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "in place over slot"), inplace, "in-place writes in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), exts, "extern calls in\n%s", src);
  free(src);
}

static kn_compile_options opts(kn_dynamic dyn) {
  return (kn_compile_options){.backend = "inductor", .dynamic = dyn};
}

/* Start capturing the schedule and fusion artifacts. */
static void logs_begin(kn_test_records *r) {
  kn_set_logs_str("schedule,fusion");
  kn_test_capture_begin(r);
}
static void logs_end(kn_test_records *r) {
  kn_test_capture_end(r);
  kn_set_logs_str("");
}

/* The one record containing text; the records are listed when there is none. */
static void expect_record(const kn_test_records *r, const char *text) {
  if (kn_test_get_record(r, text)) return;
  cr_expect_fail("no single log record containing '%s'", text);
  for (size_t i = 0; i < r->n; i++) cr_log_info("record: %s", r->v[i].message);
}

static int count_records(const kn_test_records *r, const char *text) {
  int n = 0;
  for (size_t i = 0; i < r->n; i++) n += r->v[i].message && strstr(r->v[i].message, text);
  return n;
}

/* ---- recomputation: the seed's example_fn, times two --------------------------------- */

/* The seed's example_fn with twos for its ones (its a * ones is a, which the
** joint-graph pass removes: test_inductor_trace.c). */
static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *out = kn_mul(a, kn_full(KN_SHAPE(1000, 1000), kn_float(2), KN_FLOAT32));
  return kn_add(out, kn_full(KN_SHAPE(1000, 1000), kn_float(2), KN_FLOAT32));
}

/* AOT's CSE merges the two fulls into one with two readers; it is a
** constant, so it is an expression in both: one kernel, one buffer (the
** result), and the result is eager's bit for bit. */
Test(inductor_fuse, example_fn_is_one_kernel) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compile_options o = opts(KN_DYNAMIC_FALSE);
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(1000, 1000), NULL, KN_FLOAT32);
  cr_expect(ind_close(kn_call_t(f, a), example_fn(a), 0, 0, "example_fn"));
  kn_scope_end();
  kn_compiled_free(f);
  logs_end(&r);
  const kn_test_record *s = kn_test_get_record(&r, "schedule: ");
  cr_assert_not_null(s);
  cr_expect_str_eq(s->message, "schedule: 1 kernels, 0 extern calls, 2 nodes fused, 0 reduction "
                               "groups\n  kernel3: pointwise add [1000, 1000]\n");
  expect_record(&r, "fusion: full recomputed in its 2 readers: a constant (no tensor inputs)");
  expect_record(&r, "fusion: mul inlined into add: its only user, same sizes");
  kn_test_records_free(&r);
  expect_code(1, 1, 0, 0);
}

/* mul(a, ones) keeps the promoted dtype and the broadcast sizes: a
** float32 [4] times float64 ones [3, 4] is float64 [3, 4]; int64 times
** float32 ones is float32; no kernel reads the ones from memory. */
static kn_tensor *mul_ones_f64(kn_tensor *a) {
  return kn_mul(a, kn_ones(KN_SHAPE(3, 4), KN_FLOAT64));
}
static kn_tensor *mul_ones_f32(kn_tensor *a) {
  kn_tensor *one = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  return kn_add(kn_mul(a, one), one);
}

Test(inductor_fuse, mul_by_ones_keeps_dtype_and_broadcast) {
  kn_compile_options o = opts(KN_DYNAMIC_FALSE);
  kn_compiled *f = KN_COMPILE(mul_ones_f64, &o), *g = KN_COMPILE(mul_ones_f32, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(4), NULL, KN_FLOAT32);
  kn_tensor *got = kn_call_t(f, a);
  cr_assert_not_null(got, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_dtype(got), KN_FLOAT64);
  cr_expect_eq(kn_ndim(got), 2);
  cr_expect_eq(kn_size(got, 0), 3);
  cr_expect(ind_close(got, mul_ones_f64(a), 0, 0, "float32 [4] * float64 ones [3, 4]"));
  kn_tensor *i = kn_to(kn_mul_scalar(kn_randn(KN_SHAPE(2, 5), NULL, KN_FLOAT32), kn_float(50)),
                       KN_INT64);
  kn_tensor *gi = kn_call_t(g, i);
  cr_assert_not_null(gi, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_dtype(gi), KN_FLOAT32);
  cr_expect(ind_close(gi, mul_ones_f32(i), 0, 0, "int64 * float32 ones [1] + ones"));
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  expect_code(2, 2, 0, 0);
}

/* ---- recomputation with tensor inputs -------------------------------------------------- */

/* t = x * 2 is one cheap operation over x, which both readers read anyway:
** computed again in each, never stored; the readers are one loop. exp(x)
** is transcendental: it gets a buffer, computed once. */
/* A function of one tensor with two results: the body (eager reference)
** and its kn_fn form (compiled). */
typedef void (*body2)(kn_tensor *x, kn_tensor **out);
static kn_value tuple_of(body2 b, const kn_value *args) {
  kn_tensor *o[2];
  b(args[0].u.t, o);
  kn_value items[2] = {kn_vtensor(o[0]), kn_vtensor(o[1])};
  return kn_tuple(2, items);
}
#define TUPLE_FN(name)                                                                   \
  static kn_value name##_fn(const kn_value *args, int nargs, void *ud) {                \
    (void)nargs, (void)ud;                                                              \
    return tuple_of(name, args);                                                        \
  }

static void cheap(kn_tensor *x, kn_tensor **out) {
  kn_tensor *t = kn_mul_scalar(x, kn_float(2));
  out[0] = kn_add(t, x);
  out[1] = kn_mul(t, x);
}
TUPLE_FN(cheap)
static void expx(kn_tensor *x, kn_tensor **out) {
  kn_tensor *e = kn_exp(x);
  out[0] = kn_add(e, x);
  out[1] = kn_mul(e, x);
}
TUPLE_FN(expx)

/* Call f on x; compare both outputs with the body's, bit for bit. */
static void check_tuple(kn_compiled *f, body2 ref, kn_tensor *x, const char *what) {
  kn_value out, arg = kn_vtensor(x);
  cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s: %s", what, kn_last_error());
  kn_tensor *want[2];
  ref(x, want);
  cr_assert_eq(out.kind, KN_VTUPLE);
  cr_assert_eq(out.n, 2);
  for (int i = 0; i < 2; i++)
    cr_expect(ind_close(out.u.items[i].u.t, want[i], 0, 0, what), "%s output %d", what, i);
  kn_value_release(out);
}

static kn_compiled *compile_tuple(kn_fn fn, const char *name, kn_dynamic dyn) {
  kn_compile_options o = opts(dyn);
  kn_compiled *f = kn_compile_fn(fn, NULL, 1, name, __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

Test(inductor_fuse, cheap_producer_is_recomputed) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compiled *f = compile_tuple(cheap_fn, "cheap", KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check_tuple(f, cheap, kn_randn(KN_SHAPE(7, 9), NULL, KN_FLOAT32), "x * 2 recomputed");
  kn_scope_end();
  kn_compiled_free(f);
  logs_end(&r);
  const kn_test_record *s = kn_test_get_record(&r, "schedule: ");
  cr_assert_not_null(s);
  cr_expect_str_eq(s->message, "schedule: 1 kernels, 0 extern calls, 1 nodes fused, 0 reduction "
                               "groups\n  kernel3: pointwise add mul_1 [7, 9] (horizontal)\n");
  expect_record(&r, "fusion: mul recomputed in its 2 readers: a cheap operation over inputs they "
                    "read too");
  expect_record(&r, "fusion: mul_1 fused horizontally with add (kernel 3): same sizes, a common "
                    "input");
  kn_test_records_free(&r);
  expect_code(1, 2, 0, 0);
}

/* exp is not recomputed in its two readers (a transcendental function):
** they join its loop, which computes it once per element (one call of the
** vector-math table a block) and never stores it, since nothing else reads
** it: one kernel, the two outputs its only buffers. */
Test(inductor_fuse, transcendental_is_not_recomputed) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compiled *f = compile_tuple(expx_fn, "expx", KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check_tuple(f, expx, kn_randn(KN_SHAPE(7, 9), NULL, KN_FLOAT64), "exp read twice");
  kn_scope_end();
  kn_compiled_free(f);
  logs_end(&r);
  expect_record(&r, "fusion: exp gets a buffer: 2 readers, not recomputed: a transcendental "
                    "function");
  expect_record(&r, "fusion: add fused with exp (kernel 2): same sizes, it reads a value the "
                    "loop computes");
  expect_record(&r, "fusion: mul fused with add (kernel 3): same sizes, it reads a value the "
                    "loop computes");
  expect_record(&r, "fusion: exp is not stored: only its loop (kernel 3) reads it");
  const kn_test_record *s = kn_test_get_record(&r, "schedule: ");
  cr_assert_not_null(s);
  cr_expect_str_eq(s->message, "schedule: 1 kernels, 0 extern calls, 1 nodes fused, 0 reduction "
                               "groups\n  kernel3: pointwise add mul [7, 9] (horizontal)\n");
  kn_test_records_free(&r);
  expect_code(1, 2, 0, 0);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "f64[0]("), 1, "exp called once a block:\n%s", src);
  free(src);
}

/* ---- vertical fusion: a loop that reads another loop's value ---------------------------- */

/* exp(x) is a result, and the loop of (exp(x) * x) + x reads it: that loop
** joins exp's, which stores exp(x) for the result and hands it on in a
** register: one kernel, read x once, two buffers (the results). */
static void stored_and_read(kn_tensor *x, kn_tensor **out) {
  kn_tensor *e = kn_exp(x);
  out[0] = e;
  out[1] = kn_add(kn_mul(e, x), x);
}
TUPLE_FN(stored_and_read)

/* tanh(exp(x) + x): a vector-math node whose operand's tree reads the
** loop's exp; staged a block at a time, its operand block is filled from
** exp's block. */
static void staged_reader(kn_tensor *x, kn_tensor **out) {
  kn_tensor *e = kn_exp(x);
  out[0] = e;
  out[1] = kn_tanh(kn_add(e, x));
}
TUPLE_FN(staged_reader)

/* The GEMM reads exp(x) between exp's loop and the add's: the add cannot
** join (the set would run at the add, after the GEMM read the buffer). */
static void extern_between(kn_tensor *x, kn_tensor **out) {
  kn_tensor *e = kn_exp(x);
  out[1] = kn_matmul(e, e);
  out[0] = kn_add(e, x);
}
TUPLE_FN(extern_between)

static void vertical_case(kn_fn fn, body2 ref, const char *name, kn_dtype dt, const char **recs,
                          int nrecs, const char *schedule, int kernels, int allocs, int exts) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compiled *f = compile_tuple(fn, name, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check_tuple(f, ref, kn_randn(KN_SHAPE(8, 8), NULL, dt), name);
  kn_scope_end();
  kn_compiled_free(f);
  logs_end(&r);
  for (int i = 0; i < nrecs; i++) expect_record(&r, recs[i]);
  const kn_test_record *s = kn_test_get_record(&r, "schedule: ");
  cr_assert_not_null(s);
  cr_expect_str_eq(s->message, schedule);
  kn_test_records_free(&r);
  expect_code(kernels, allocs, 0, exts);
}

Test(inductor_fuse, a_loop_reading_a_stored_value_joins_its_loop) {
  const char *recs[] = {"fusion: mul inlined into add: its only user, same sizes",
                        "fusion: add fused with exp (kernel 3): same sizes, it reads a value the "
                        "loop computes"};
  vertical_case(stored_and_read_fn, stored_and_read, "stored_and_read", KN_FLOAT32, recs, 2,
                "schedule: 1 kernels, 0 extern calls, 1 nodes fused, 0 reduction groups\n"
                "  kernel3: pointwise exp add [8, 8] (horizontal)\n", 1, 2, 0);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "f32[0]("), 1, "exp called once a block:\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "in1["), 0, "exp read back from memory:\n%s", src);
  free(src);
}

Test(inductor_fuse, a_staged_vector_math_operand_reads_the_loops_value) {
  const char *recs[] = {"fusion: add inlined into tanh: its only user, same sizes",
                        "fusion: tanh fused with exp (kernel 3): same sizes, it reads a value the "
                        "loop computes"};
  vertical_case(staged_reader_fn, staged_reader, "staged_reader", KN_FLOAT64, recs, 2,
                "schedule: 1 kernels, 0 extern calls, 1 nodes fused, 0 reduction groups\n"
                "  kernel3: pointwise exp tanh [8, 8] (horizontal)\n", 1, 2, 0);
}

Test(inductor_fuse, a_reader_before_the_loop_keeps_it_apart) {
  const char *recs[] = {"fusion: add not fused horizontally with exp: a reader of the set comes "
                        "before it"};
  vertical_case(extern_between_fn, extern_between, "extern_between", KN_FLOAT32, recs, 1,
                "schedule: 2 kernels, 1 extern calls, 0 nodes fused, 0 reduction groups\n"
                "  kernel1: pointwise exp [8, 8]\n  extern mm (kiln.ops.mm)\n"
                "  kernel3: pointwise add [8, 8]\n", 2, 2, 1);
}

/* ---- horizontal fusion --------------------------------------------------------------- */

static void sin_cos(kn_tensor *x, kn_tensor **out) {
  out[0] = kn_sin(x);
  out[1] = kn_cos(x);
}
TUPLE_FN(sin_cos)

/* sin(x) and cos(x): one loop writing both (x read once), in float32 and
** float64, equal to eager bit for bit. */
Test(inductor_fuse, sin_and_cos_are_one_loop) {
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int i = 0; i < 2; i++) {
    kn_test_records r = {0};
    logs_begin(&r);
    kn_compiled *f = compile_tuple(sin_cos_fn, "sin_cos", KN_DYNAMIC_FALSE);
    kn_scope_begin();
    check_tuple(f, sin_cos, kn_randn(KN_SHAPE(33, 65), NULL, dts[i]), kn_dtype_name(dts[i]));
    check_tuple(f, sin_cos, kn_t(kn_randn(KN_SHAPE(65, 33), NULL, dts[i])), "transposed");
    kn_scope_end();
    kn_compiled_free(f);
    logs_end(&r);
    cr_expect_eq(kn_test_count_artifact(&r, "schedule"), 2); /* contiguous, transposed */
    cr_expect_eq(count_records(&r, "fusion: cos fused horizontally with sin (kernel 2): same "
                                   "sizes, a common input"), 2);
    kn_test_records_free(&r);
  }
  char *src = kn_test_inductor_sources(cache);
  /* 2 dtypes x (contiguous: a flat loop, transposed: a row loop) */
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 4, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "(flat loop, horizontal, 1 inputs)"), 2, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "(row loop, horizontal, 1 inputs)"), 2, "%s", src);
  free(src);
}

/* Dynamic sizes: rows 6, 7, 9 (the second call compiles the symbolic
** program, the third reuses it); the horizontal loop runs over s0 rows. */
Test(inductor_fuse, horizontal_with_dynamic_sizes) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compiled *f = compile_tuple(sin_cos_fn, "sin_cos", KN_DYNAMIC_AUTO);
  kn_scope_begin();
  int64_t rows[3] = {6, 7, 9};
  for (int i = 0; i < 3; i++) {
    int64_t sz[2] = {rows[i], 5};
    check_tuple(f, sin_cos, kn_randn(2, sz, NULL, KN_FLOAT32), "dynamic rows");
  }
  kn_scope_end();
  kn_compiled_free(f);
  logs_end(&r);
  cr_expect_eq(ind_count(cache, ".so"), 2);
  cr_expect_eq(kn_test_count_artifact(&r, "schedule"), 2);
  cr_expect_eq(count_records(&r, "kernel2: pointwise sin cos [s0, 5] (horizontal)\n"), 1);
  kn_test_records_free(&r);
}

/* Loops that are not fused horizontally, with the reason: other sizes
** (x + y over [4, 5] and y * 2 over [5] both read y), and a reader of the
** first loop's result (an extern mm) that runs before the second. */
static void differ(kn_tensor *x, kn_tensor **out) {
  kn_tensor *y = kn_sum_dims(x, (const int64_t[]){0}, 1, false); /* [5] */
  out[0] = kn_add(x, kn_exp(y));
  out[1] = kn_mul_scalar(kn_exp(y), kn_float(2));
}
TUPLE_FN(differ)
static void blocked(kn_tensor *x, kn_tensor **out) {
  kn_tensor *a = kn_mul_scalar(x, kn_float(3));
  kn_tensor *m = kn_mm(a, a);
  out[0] = kn_add(m, kn_mul_scalar(x, kn_float(4)));
  out[1] = kn_sin(x);
}
TUPLE_FN(blocked)

Test(inductor_fuse, refusals_are_logged) {
  kn_test_records r = {0};
  logs_begin(&r);
  kn_compiled *f = compile_tuple(differ_fn, "differ", KN_DYNAMIC_FALSE);
  kn_compiled *g = compile_tuple(blocked_fn, "blocked", KN_DYNAMIC_FALSE);
  kn_scope_begin();
  check_tuple(f, differ, kn_randn(KN_SHAPE(4, 5), NULL, KN_FLOAT64), "sizes differ");
  check_tuple(g, blocked, kn_randn(KN_SHAPE(5, 5), NULL, KN_FLOAT64), "a reader between");
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(g);
  logs_end(&r);
  expect_record(&r, "not fused horizontally with add: sizes differ");
  expect_record(&r, "not fused horizontally with mul: a reader of the set comes before it");
  kn_test_records_free(&r);
}

/* ---- writing in place ------------------------------------------------------------------ */

/* exp(x) is also read by an extern call (mm, which may return a view of
** its input): its buffer is never written over; nor is a graph input (x
** dies in the same loop), which keeps its values. The two outputs are one
** horizontal loop reading mm's output: mm's epilogue, whose first output
** the GEMM is computed in (no kernel writes in place over a read). */
static void shared_exp(kn_tensor *x, kn_tensor **out) {
  kn_tensor *e = kn_exp(x);
  kn_tensor *m = kn_mm(e, e);
  out[0] = kn_add(kn_add(e, x), m);
  out[1] = kn_mul(e, x);
}
TUPLE_FN(shared_exp)

Test(inductor_fuse, no_in_place_over_extern_reads_or_inputs) {
  kn_compiled *f = compile_tuple(shared_exp_fn, "shared_exp", KN_DYNAMIC_FALSE);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(6, 6), NULL, KN_FLOAT32), *copy = kn_clone(x);
  check_tuple(f, shared_exp, x, "exp read by mm");
  cr_expect(ind_close(x, copy, 0, 0, "the input after the call"));
  kn_scope_end();
  kn_compiled_free(f);
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "in place over slot"), 0, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "(epilogue of mm, flat loop, horizontal, 3 inputs)"), 1, "%s",
               src);
  cr_expect_eq(kn_test_count_of(src, "is computed in it"), 1, "%s", src);
  free(src);
}

/* ---- the backward graph ------------------------------------------------------------------ */

static kn_tensor *train_fn(kn_tensor *x, kn_tensor *w) { return kn_sum(kn_mul(kn_sin(x), w)); }

static kn_tensor *leaf(kn_dtype dt, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(23, 17), g, dt);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

/* The backward's pointwise outputs (grad x = g * w * cos(x), grad w = g *
** sin(x)) are one loop; gradients equal eager's in both dtypes. */
Test(inductor_fuse, backward_outputs_are_one_loop) {
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int i = 0; i < 2; i++) {
    kn_test_records r = {0};
    logs_begin(&r);
    kn_compile_options o = opts(KN_DYNAMIC_FALSE);
    kn_compiled *f = KN_COMPILE(train_fn, &o);
    kn_scope_begin();
    kn_tensor *x = leaf(dts[i], 1), *w = leaf(dts[i], 2);
    kn_tensor *xe = leaf(dts[i], 1), *we = leaf(dts[i], 2);
    kn_tensor *y = kn_call_t(f, x, w), *ye = train_fn(xe, we);
    cr_assert_not_null(y, "%s", kn_last_error());
    cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(ye, NULL), KN_OK, "%s", kn_last_error());
    double tol = dts[i] == KN_FLOAT32 ? 1e-6 : 1e-14;
    cr_expect(ind_close(kn_grad(x), kn_grad(xe), tol, tol, "grad x"));
    cr_expect(ind_close(kn_grad(w), kn_grad(we), tol, tol, "grad w"));
    kn_scope_end();
    kn_compiled_free(f);
    logs_end(&r);
    cr_expect_eq(kn_test_count_artifact(&r, "schedule"), 2); /* forward, backward */
    cr_expect_eq(count_records(&r, " (horizontal)\n"), 1, "one schedule with a horizontal loop");
    kn_test_records_free(&r);
  }
}

/* ---- conditional reads ---------------------------------------------------------------- */

static kn_tensor *masked_sum_fn(kn_tensor *x, kn_tensor *y, kn_tensor *z) {
  kn_tensor *m = kn_threshold_backward(x, y, kn_float(0));
  return kn_add(kn_sum(kn_mul(z, m)), kn_sum(kn_where(kn_gt_scalar(x, kn_float(0.5)), y, z)));
}

/* sum(z * (y <= 0 ? 0 : x)) + sum(x > 0.5 ? y : z): formulas that read
** an operand only on a condition, inside a reduction's row loop. gcc 12 at
** -O3 with AVX/AVX2 turned that read into a masked load with a wrong mask
** (half the terms of the sum were lost); the generated code reads every
** operand as a statement before the select. Compared with a plain C loop. */
Test(inductor_fuse, conditional_reads_are_plain_loads) {
  const int64_t shapes[3][2] = {{5, 6}, {37, 11}, {3, 300}};
  for (int s = 0; s < 3; s++) {
    kn_compile_options o = opts(KN_DYNAMIC_FALSE);
    kn_compiled *f = KN_COMPILE(masked_sum_fn, &o);
    kn_scope_begin();
    kn_generator *g = kn_generator_new(11);
    kn_tensor *x = kn_randn(KN_SHAPE(shapes[s][0], shapes[s][1]), g, KN_FLOAT64);
    kn_tensor *y = kn_randn(KN_SHAPE(shapes[s][0], shapes[s][1]), g, KN_FLOAT64);
    kn_tensor *z = kn_randn(KN_SHAPE(shapes[s][0], shapes[s][1]), g, KN_FLOAT64);
    kn_generator_free(g);
    kn_tensor *got = kn_call_t(f, x, y, z);
    cr_assert_not_null(got, "%s", kn_last_error());
    const double *a = kn_data(x), *b = kn_data(y), *c = kn_data(z);
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < kn_numel(x); i++) {
      s1 += c[i] * (b[i] <= 0 ? 0 : a[i]);
      s2 += a[i] > 0.5 ? b[i] : c[i];
    }
    double want = s1 + s2;
    double v = 0;
    cr_assert_eq(kn_item_double(got, &v), KN_OK);
    cr_expect(fabs(v - want) <= 1e-12 * (1 + fabs(want)), "[%lld, %lld]: compiled %.17g, loop %.17g",
              (long long)shapes[s][0], (long long)shapes[s][1], v, want);
    kn_scope_end();
    kn_compiled_free(f);
  }
  char *src = kn_test_inductor_sources(cache);
  cr_expect_eq(kn_test_count_of(src, "? (double)0 : ((double)in"), 0, "a conditional read in\n%s", src);
  cr_expect_gt(kn_test_count_of(src, "const double ld"), 0, "no read bound before a select in\n%s", src);
  free(src);
}
