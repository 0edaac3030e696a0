/*
** tests/test_inductor_capacity.c: no fixed capacity of the code generator
** fails or truncates an ordinary program. The scheduler bounds what one
** kernel reads (KN__KER_MAX_READS = 64 buffers) and splits a kernel that
** would read more; everything else a kernel holds (its inputs, outputs and
** symbolic sizes) is sized from the plan.
**
** Every result is compared with the eager ops bit for bit (the same
** formulas in the same order, float32, no FMA contraction); kernel counts
** are the `schedule` artifact's, compared with literals worked out from the
** splitting rule (a chain splits where its kernel would read a 65th
** buffer, see each test).
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "support/files.h"
#include "support/log_capture.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(11);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_capacity, .init = setup, .fini = teardown, .timeout = 300);

/* ---- helpers ------------------------------------------------------------------------ */
typedef struct shape_fn {
  int nops;    /* operations of a chain */
  int nw;      /* distinct weights a chain cycles through */
  int nout;    /* outputs of a group */
} shape_fn;

static kn_compile_options opts(kn_dynamic dyn) {
  return (kn_compile_options){.backend = "inductor", .dynamic = dyn};
}

/* Compile fn (nargs inputs) under the schedule and fusion logs, call it on
** args and compare every output with fn run eagerly; expect (or NULL):
** text of a fusion record that must be logged. Returns the kernels of the
** last schedule (-1: none logged). KN_TEST_SHOW_SPLITS=1 prints the
** splitting decisions. */
static int run_compare(kn_fn fn, shape_fn *sh, const kn_value *args, int nargs, kn_dynamic dyn,
                       const char *what, const char *expect) {
  kn_test_records r = {0};
  kn_set_logs_str("schedule,fusion");
  kn_test_capture_begin(&r);
  kn_compile_options o = opts(dyn);
  kn_compiled *f = kn_compile_fn(fn, sh, nargs, what, __FILE__, __LINE__, &o);
  cr_assert_not_null(f);
  kn_value got;
  kn_status st = kn_call(f, args, nargs, &got);
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  cr_assert_eq(st, KN_OK, "%s: %s", what, kn_last_error());
  kn_scope_begin();
  kn_value want = fn(args, nargs, sh);
  if (want.kind == KN_VTENSOR) {
    cr_assert_eq(got.kind, KN_VTENSOR);
    cr_expect(ind_close(got.u.t, want.u.t, 0, 0, what));
  } else {
    cr_assert_eq(got.kind, KN_VTUPLE);
    cr_assert_eq(got.n, want.n, "%s: %d outputs, eager %d", what, got.n, want.n);
    for (int i = 0; i < got.n; i++) {
      char name[96];
      snprintf(name, sizeof name, "%s output %d", what, i);
      cr_expect(ind_close(got.u.items[i].u.t, want.u.items[i].u.t, 0, 0, name));
    }
  }
  kn_scope_end();
  kn_value_release(got);
  kn_compiled_free(f);
  int kernels = -1;
  if (expect) cr_expect_not_null(kn_test_get_record(&r, expect), "no record '%s'", expect);
  for (size_t i = 0; i < r.n; i++) { /* the last compile's schedule */
    if (r.v[i].message && getenv("KN_TEST_SHOW_SPLITS") && strstr(r.v[i].message, "split"))
      fprintf(stderr, "%s\n", r.v[i].message);
    if (r.v[i].message && sscanf(r.v[i].message, "schedule: %d kernels", &kernels) == 1) continue;
  }
  kn_test_records_free(&r);
  return kernels;
}

/* n float32 inputs of sizes [rows, cols], uniform in [lo, lo + 1) (owned
** by the open scope). */
static kn_value *inputs(int n, int64_t rows, int64_t cols, double lo) {
  kn_value *v = calloc((size_t)n, sizeof *v);
  cr_assert_not_null(v);
  for (int i = 0; i < n; i++)
    v[i] = kn_vtensor(kn_add_scalar(kn_rand(2, (int64_t[]){rows, cols}, NULL, KN_FLOAT32),
                                    kn_float(lo)));
  return v;
}

/* ---- pointwise chains -------------------------------------------------------------- */
/* y = x, then nops operations alternating y + w and y * w, the k-th
** reading weight k % nw (args[1 + k % nw]); weights in [0.5, 1.5) keep y
** bounded. Each operation is inlined into the next: the kernel of op k
** reads x and the distinct weights up to it, until a 65th buffer would be
** read; then op k - 1 gets a buffer and a new kernel starts, reading that
** buffer and the weights after it: a cut every 63 operations after the
** first 63 (ops 62, 125, 188, ...), as long as nw > 64. */
static kn_value chain(const kn_value *args, int nargs, void *ud) {
  const shape_fn *sh = ud;
  (void)nargs;
  kn_tensor *y = args[0].u.t;
  for (int k = 0; k < sh->nops; k++) {
    kn_tensor *w = args[1 + k % sh->nw].u.t;
    y = k % 2 ? kn_mul(y, w) : kn_add(y, w);
  }
  return kn_vtensor(y);
}

static int run_chain(int nops, int nw, const char *expect) {
  shape_fn sh = {.nops = nops, .nw = nw};
  kn_scope_begin();
  kn_value *a = inputs(1 + nw, 16, 33, 0.5);
  char what[64];
  snprintf(what, sizeof what, "chain of %d ops over %d weights", nops, nw);
  int kernels = run_compare(chain, &sh, a, 1 + nw, KN_DYNAMIC_FALSE, what, expect);
  kn_scope_end();
  free(a);
  return kernels;
}

/* 65 operations over 65 weights read 66 buffers: the code generator failed
** ("more than 64 inputs"); now one cut at op 62: two kernels. */
Test(inductor_capacity, chain_of_65_ops_splits_in_two) {
  cr_expect_eq(run_chain(65, 65, "fusion: add_31 gets a buffer after all: the kernel of mul_31 "
                                 "would read more than 64 buffers (split; this one reads 64)"),
               2);
}

/* Cuts at ops 62, 125, 188, 251: five kernels. */
Test(inductor_capacity, chain_of_300_ops) {
  cr_expect_eq(run_chain(300, 100, NULL), 5);
}

/* Cuts at 62 + 63 j for j = 0..14: sixteen kernels. */
Test(inductor_capacity, chain_of_1000_ops) {
  cr_expect_eq(run_chain(1000, 100, NULL), 16);
}

/* A chain that never reads more than 64 buffers is one kernel, however long. */
Test(inductor_capacity, chain_over_few_weights_is_one_kernel) {
  cr_expect_eq(run_chain(1000, 8, NULL), 1);
}

/* ---- many inputs ---------------------------------------------------------------------- */
/* The sum of nargs inputs as a balanced tree (pairs, then pairs of pairs):
** eager adds in the same tree order. */
static kn_tensor *tree_sum(const kn_value *args, int lo, int hi) {
  if (hi - lo == 1) return args[lo].u.t;
  int mid = lo + (hi - lo) / 2;
  return kn_add(tree_sum(args, lo, mid), tree_sum(args, mid, hi));
}
static kn_value sum_tree(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  return kn_vtensor(tree_sum(args, 0, nargs));
}

/* 300 inputs, halved to subtrees of 150, 75, then 37 and 38 leaves. A
** subtree of 75 would read 75 buffers: its wider operand (38 leaves) is
** stored by a kernel of its own and it reads 38. A subtree of 150 would
** read 76: its first quarter is stored, it reads 39; the root would read
** 78: its first half is stored. Kernels: 4 + 2 + 1 + the root's = 8. */
Test(inductor_capacity, sum_of_300_inputs) {
  shape_fn sh = {0};
  kn_scope_begin();
  kn_value *a = inputs(300, 7, 129, -0.5);
  int kernels = run_compare(sum_tree, &sh, a, 300, KN_DYNAMIC_FALSE, "sum of 300 inputs",
                            "fusion: add_36 gets a buffer after all: the kernel of add_73 would read "
                            "more than 64 buffers (split; this one reads 38)");
  cr_expect_eq(kernels, 8, "%d kernels", kernels);
  kn_scope_end();
  free(a);
}

/* ---- reduction groups with many outputs ------------------------------------------------- */
/* m = mean of each row, then nout row values m * (i + 1) (each computed once
** per row in the group's kernel and written out): more than 64 outputs
** of one kernel. Outputs past the 64th were skipped: never written. */
static kn_value row_outputs(const kn_value *args, int nargs, void *ud) {
  const shape_fn *sh = ud;
  (void)nargs;
  kn_tensor *m = kn_mean_dims(args[0].u.t, (int64_t[]){1}, 1, true);
  kn_value *out = calloc((size_t)sh->nout, sizeof *out);
  cr_assert_not_null(out);
  for (int i = 0; i < sh->nout; i++) out[i] = kn_vtensor(kn_mul_scalar(m, kn_float(i + 1)));
  kn_value t = kn_tuple(sh->nout, out);
  free(out);
  return t;
}

Test(inductor_capacity, group_with_70_row_outputs) {
  shape_fn sh = {.nout = 70};
  kn_scope_begin();
  kn_value *a = inputs(1, 12, 300, -0.5);
  cr_expect_eq(run_compare(row_outputs, &sh, a, 1, KN_DYNAMIC_FALSE, "70 row outputs", NULL), 1);
  kn_scope_end();
  free(a);
}

/* d = x - mean(x) per element, then nout per-element values d * (i + 1)
** and the row's sum of squares of d: a softmax-like group with nout
** per-element outputs (more than 16 failed: "out of memory"). */
static kn_value element_outputs(const kn_value *args, int nargs, void *ud) {
  const shape_fn *sh = ud;
  (void)nargs;
  kn_tensor *x = args[0].u.t;
  kn_tensor *d = kn_sub(x, kn_mean_dims(x, (int64_t[]){1}, 1, true));
  kn_value *out = calloc((size_t)sh->nout + 1, sizeof *out);
  cr_assert_not_null(out);
  for (int i = 0; i < sh->nout; i++) out[i] = kn_vtensor(kn_mul_scalar(d, kn_float(i + 1)));
  out[sh->nout] = kn_vtensor(kn_sum_dims(kn_mul(d, d), (int64_t[]){1}, 1, true));
  kn_value t = kn_tuple(sh->nout + 1, out);
  free(out);
  return t;
}

Test(inductor_capacity, group_with_20_element_outputs) {
  shape_fn sh = {.nout = 20};
  kn_scope_begin();
  kn_value *a = inputs(1, 9, 257, -0.5);
  cr_expect_eq(run_compare(element_outputs, &sh, a, 1, KN_DYNAMIC_FALSE, "20 element outputs", NULL),
               1);
  kn_scope_end();
  free(a);
}

/* 70 element outputs: more than 64 outputs, per element. */
Test(inductor_capacity, group_with_70_element_outputs) {
  shape_fn sh = {.nout = 70};
  kn_scope_begin();
  kn_value *a = inputs(1, 5, 40, -0.5);
  cr_expect_eq(run_compare(element_outputs, &sh, a, 1, KN_DYNAMIC_FALSE, "70 element outputs", NULL),
               1);
  kn_scope_end();
  free(a);
}

/* The row sums of x0 + x1 + ... + x70 (a chain a_k = a_(k-1) + x_(k+1)):
** the adds join the reduction's group as its prologue, newest first; with
** a_k a member the group reads a_(k-1) and x_(k+1)..x_70, 71 - k buffers,
** so a_6 (65) is refused and is a pointwise kernel of its own, reading
** x0..x7: 2 kernels. */
static kn_value sum_rows_of_sum(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  kn_tensor *a = args[0].u.t;
  for (int i = 1; i < nargs; i++) a = kn_add(a, args[i].u.t);
  return kn_vtensor(kn_sum_dims(a, (int64_t[]){1}, 1, false));
}

Test(inductor_capacity, reduction_prologue_over_71_inputs_splits) {
  shape_fn sh = {0};
  kn_scope_begin();
  kn_value *a = inputs(71, 6, 100, -0.5);
  cr_expect_eq(run_compare(sum_rows_of_sum, &sh, a, 71, KN_DYNAMIC_FALSE, "row sums of 71",
                           "fusion: add_6 not fused into group of add_7 (kernel 0): the kernel "
                           "would read more than 64 buffers (split)"),
               2);
  kn_scope_end();
  free(a);
}

/* ---- symbolic sizes --------------------------------------------------------------------- */
/* 300 inputs of sizes [4, i + 3] with dynamic sizes: each second size is
** a symbol of its own (distinct values are not duck-sized together), and
** the sum of their [4, 2] narrowed views reads each through its symbolic
** row stride: 300 symbolic sizes in the plan's table (more than 256
** failed). */
static kn_value sum_narrowed(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  kn_tensor *y = kn_narrow(args[0].u.t, 1, 0, 2);
  for (int i = 1; i < nargs; i++) y = kn_add(y, kn_narrow(args[i].u.t, 1, 0, 2));
  return kn_vtensor(y);
}

Test(inductor_capacity, more_than_256_symbols) {
  shape_fn sh = {0};
  kn_scope_begin();
  kn_value a[300];
  for (int i = 0; i < 300; i++)
    a[i] = kn_vtensor(kn_randn(KN_SHAPE(4, i + 3), NULL, KN_FLOAT32));
  int kernels = run_compare(sum_narrowed, &sh, a, 300, KN_DYNAMIC_TRUE, "300 narrowed inputs",
                            NULL);
  kn_scope_end();
  cr_expect_gt(kernels, 1);
  char *src = kn_test_inductor_sources(cache);
  cr_expect(strstr(src, "= s[299];") != NULL, "no symbol past the 256th read");
  free(src);
}
