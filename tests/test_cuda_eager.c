/*
** test_cuda_eager.c: eager ops on CUDA tensors run as single-op graphs
** cached per op, dtype and rank (inductor/cuda_eager.c), without a GPU: the
** fake driver runs the generated kernels on the host. One program serves
** every size of a contiguous pattern (sizes of 2 or more are symbols; equal
** sizes share one, 0 and 1 stay constants); strided inputs take programs of
** their sizes. Also what else eager and compiled GPU code gained with it:
** dropout on the device (the CPU's Philox mask, bit for bit), 0-dim host
** tensors as compiled-graph inputs. Every value is compared with the same
** op on the CPU, and the programs are counted in a private code cache.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "cuda_fake_util.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"

TestSuite(cuda_eager, .init = cuda_fake_setup, .fini = cuda_fake_teardown, .timeout = 300);

static kn_tensor *rnd(int nd, const int64_t *sizes, kn_dtype dt) {
  return kn_randn(nd, sizes, NULL, dt);
}

static void expect_close(kn_tensor *got_dev, kn_tensor *want, const char *what) {
  cr_assert_not_null(got_dev, "%s: %s", what, kn_last_error());
  cr_expect_eq(kn_tensor_device(got_dev), KN_CUDA, "%s", what);
  cr_expect(ind_close(dev(got_dev, KN_CPU), want, 1e-6, 1e-6, what), "%s", what);
}

/* Compiled programs in the private cache so far. */
static int programs(void) { return ind_count(cuda_fake_cache, ".so"); }

/* One add program for every 2-d float32 shape whose two sizes differ. */
Test(cuda_eager, one_program_serves_every_size_of_a_pattern) {
  static const int64_t shapes[][2] = {{3, 5}, {7, 9}, {130, 2}, {2, 1000}};
  for (int i = 0; i < 4; i++) {
    kn_scope_begin();
    kn_tensor *a = rnd(2, shapes[i], KN_FLOAT32), *b = rnd(2, shapes[i], KN_FLOAT32);
    char what[64];
    snprintf(what, sizeof what, "add [%lld, %lld]", (long long)shapes[i][0],
             (long long)shapes[i][1]);
    expect_close(kn_add(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_add(a, b), what);
    kn_scope_end();
  }
  cr_expect_eq(programs(), 1, "four shapes, one program: %d", programs());
  /* a square matrix is another pattern (both dims one symbol), float64 another dtype */
  kn_scope_begin();
  kn_tensor *a = rnd(2, (int64_t[]){6, 6}, KN_FLOAT32), *b = rnd(2, (int64_t[]){6, 6}, KN_FLOAT32);
  expect_close(kn_add(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_add(a, b), "add [6, 6]");
  kn_tensor *c = rnd(2, (int64_t[]){3, 4}, KN_FLOAT64), *d = rnd(2, (int64_t[]){3, 4}, KN_FLOAT64);
  expect_close(kn_add(dev(c, KN_CUDA), dev(d, KN_CUDA)), kn_add(c, d), "add float64");
  kn_scope_end();
  cr_expect_eq(programs(), 3, "square and float64 patterns: %d programs", programs());
}

/* Broadcasting: which sizes are equal and which are 1 is the key; a size
** that happens to equal another takes the program where they are one
** symbol, and every result matches the CPU. */
Test(cuda_eager, broadcasts_by_pattern) {
  static const int64_t cases[][4] = {
      /* a's two sizes, b's two sizes */
      {4, 5, 1, 5}, {9, 3, 1, 3}, {4, 5, 4, 1}, {8, 8, 1, 8}, {8, 8, 8, 1},
      {5, 1, 1, 7}, {6, 1, 1, 6}, {1, 1, 3, 4}, {0, 5, 1, 5}, {2, 3, 2, 3},
  };
  for (int i = 0; i < 10; i++) {
    kn_scope_begin();
    kn_tensor *a = rnd(2, &cases[i][0], KN_FLOAT32), *b = rnd(2, &cases[i][2], KN_FLOAT32);
    char what[80];
    snprintf(what, sizeof what, "mul [%lld, %lld] x [%lld, %lld]", (long long)cases[i][0],
             (long long)cases[i][1], (long long)cases[i][2], (long long)cases[i][3]);
    expect_close(kn_mul(dev(a, KN_CUDA), dev(b, KN_CUDA)), kn_mul(a, b), what);
    kn_scope_end();
  }
}

/* Strided inputs keep their sizes and strides in the key: a transposed
** operand, an operand at an offset; then the contiguous program again. */
Test(cuda_eager, strided_inputs_take_programs_of_their_sizes) {
  kn_scope_begin();
  kn_tensor *a = rnd(2, (int64_t[]){5, 3}, KN_FLOAT32), *b = rnd(2, (int64_t[]){3, 5}, KN_FLOAT32);
  kn_tensor *da = dev(a, KN_CUDA), *db = dev(b, KN_CUDA);
  expect_close(kn_sub(kn_t(da), db), kn_sub(kn_t(a), b), "transposed operand");
  kn_tensor *c = rnd(2, (int64_t[]){4, 7}, KN_FLOAT32), *d = rnd(2, (int64_t[]){7, 4}, KN_FLOAT32);
  expect_close(kn_sub(kn_t(dev(c, KN_CUDA)), dev(d, KN_CUDA)), kn_sub(kn_t(c), d),
               "transposed operand, other sizes");
  kn_tensor *e = rnd(1, (int64_t[]){20}, KN_FLOAT32);
  kn_tensor *de = dev(e, KN_CUDA);
  expect_close(kn_sub(kn_narrow(de, 0, 3, 15), kn_narrow(de, 0, 0, 15)),
               kn_sub(kn_narrow(e, 0, 3, 15), kn_narrow(e, 0, 0, 15)), "operands at offsets");
  expect_close(kn_sub(db, kn_t(da)), kn_sub(b, kn_t(a)), "contiguous first operand");
  kn_scope_end();
}

/* Reductions and row ops over symbolic sizes, several shapes each: rows
** short and long, one row and more rows than a split serves (the sums of
** 40000 and 66000 elements split by their run-time length). (Few output
** elements: the fake driver runs a block's threads as host threads.) */
Test(cuda_eager, reductions_over_symbolic_sizes) {
  static const int64_t shapes[][2] = {{3, 5}, {8, 300}, {1, 40000}, {2, 33000}, {70, 2}};
  for (int i = 0; i < 5; i++) {
    kn_scope_begin();
    kn_tensor *x = rnd(2, shapes[i], KN_FLOAT32), *dx = dev(x, KN_CUDA);

    char what[64];
    snprintf(what, sizeof what, "[%lld, %lld]", (long long)shapes[i][0], (long long)shapes[i][1]);
    expect_close(kn_sum_dims(dx, (int64_t[]){1}, 1, false), kn_sum_dims(x, (int64_t[]){1}, 1, false),
                 what);
    expect_close(kn_sum(dx), kn_sum(x), what);
    expect_close(kn_mean(dx), kn_mean(x), what);
    expect_close(kn_amax(dx, (int64_t[]){1}, 1, true), kn_amax(x, (int64_t[]){1}, 1, true), what);
    expect_close(kn_softmax(dx, 1), kn_softmax(x, 1), what);
    kn_scope_end();
  }
}

/* native_dropout on the device draws the same Philox blocks of the
** generator as the CPU kernel: a seed gives the same mask and output bit
** for bit, float32 and float64, contiguous or not; the generator moves on
** by the same blocks; the backward (autograd) matches too. */
Test(cuda_eager, dropout_matches_the_cpu_bit_for_bit) {
  static const kn_dtype dts[] = {KN_FLOAT32, KN_FLOAT64};
  for (int t = 0; t < 2; t++) {
    kn_scope_begin();
    kn_tensor *x = rnd(2, (int64_t[]){7, 9}, dts[t]);
    kn_tensor *dx = dev(x, KN_CUDA);
    kn_generator *gc = kn_generator_new(42), *gd = kn_generator_new(42);
    for (int rep = 0; rep < 2; rep++) { /* the second draw comes from the moved generator */
      kn_tensor *mc = NULL, *md = NULL;
      kn_tensor *yc = kn_native_dropout(kn_t(x), 0.3, true, gc, &mc);
      kn_tensor *yd = kn_native_dropout(kn_t(dx), 0.3, true, gd, &md);
      cr_assert_not_null(yd, "%s", kn_last_error());
      cr_expect(ind_close(dev(yd, KN_CPU), yc, 0, 0, "output"), "dtype %d rep %d", t, rep);
      cr_expect(ind_close(dev(md, KN_CPU), mc, 0, 0, "mask"), "dtype %d rep %d", t, rep);
      double kept = 0;
      cr_assert_eq(kn_item_double(kn_sum(kn_to(mc, KN_FLOAT64)), &kept), KN_OK);
      cr_expect(kept > 0 && kept < 63, "some elements kept, some dropped: %g", kept);
    }
    /* gradients through autograd: dropout's backward on the device */
    kn_tensor *xc = kn_clone(x), *xd = dev(x, KN_CUDA);
    cr_assert_eq(kn_set_requires_grad(xc, true), KN_OK);
    cr_assert_eq(kn_set_requires_grad(xd, true), KN_OK);
    kn_generator *g1 = kn_generator_new(7), *g2 = kn_generator_new(7);
    kn_tensor *w = rnd(2, (int64_t[]){7, 9}, dts[t]);
    cr_assert_eq(kn_backward(kn_sum(kn_mul(kn_dropout(xc, 0.5, true, g1), w)), NULL), KN_OK);
    cr_assert_eq(kn_backward(kn_sum(kn_mul(kn_dropout(xd, 0.5, true, g2), dev(w, KN_CUDA))), NULL),
                 KN_OK, "%s", kn_last_error());
    cr_expect(ind_close(dev(kn_grad(xd), KN_CPU), kn_grad(xc), 1e-12, 0, "gradient"), "dtype %d", t);
    kn_generator_free(gc);
    kn_generator_free(gd);
    kn_generator_free(g1);
    kn_generator_free(g2);
    kn_scope_end();
  }
}

/* p = 0 keeps everything, p = 1 drops everything (scale 0), not training
** is the identity with an all-true mask; an integer input is refused. */
Test(cuda_eager, dropout_edge_probabilities) {
  kn_scope_begin();
  kn_tensor *x = rnd(1, (int64_t[]){10}, KN_FLOAT32), *dx = dev(x, KN_CUDA);
  kn_tensor *m = NULL;
  expect_close(kn_native_dropout(dx, 0.0, true, NULL, &m), x, "p = 0");
  expect_close(kn_native_dropout(dx, 1.0, true, NULL, &m), kn_mul_scalar(x, kn_float(0)), "p = 1");
  expect_close(kn_native_dropout(dx, 0.5, false, NULL, &m), x, "not training");
  cr_expect(ind_close(dev(m, KN_CPU), kn_ones(1, (int64_t[]){10}, KN_BOOL), 0, 0, "mask"));
  kn_tensor *i = dev(kn_ones(1, (int64_t[]){4}, KN_INT64), KN_CUDA);
  cr_expect_null(kn_native_dropout(i, 0.5, true, NULL, &m));
  cr_expect(strstr(kn_last_error(), "expected a floating point input, got int64"), "%s",
            kn_last_error());
  kn_scope_end();
}

/* A TransformerEncoderLayer training with PyTorch's default dropout 0.1 on
** the GPU: with the default generator seeded alike, the same elements drop
** as on the CPU, so the output and the gradients of every parameter agree
** with the CPU's. */
Test(cuda_eager, transformer_layer_with_dropout_trains_as_on_the_cpu) {
  kn_generator *g = kn_generator_new(5), *g2 = kn_generator_new(5);
  kn_module *enc = kn_nn_transformer_encoder_layer(8, 2, 16, 0.1, true, g);
  kn_module *enc_d = kn_nn_transformer_encoder_layer(8, 2, 16, 0.1, true, g2);
  cr_assert_eq(kn_module_to_device(enc_d, KN_CUDA), KN_OK, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *x = kn_randn(3, (int64_t[]){2, 5, 8}, g, KN_FLOAT32);
  kn_manual_seed(11);
  kn_tensor *y = kn_nn_forward(enc, x);
  kn_manual_seed(11);
  kn_tensor *yd = kn_nn_forward(enc_d, dev(x, KN_CUDA));
  expect_close(yd, y, "output with dropout");
  kn_nn_train(enc, false); /* dropout did drop something: eval mode differs */
  double diff = 0;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(kn_nn_forward(enc, x), y)), NULL, 0, false),
                              &diff), KN_OK, "%s", kn_last_error());
  cr_expect_gt(diff, 1e-3, "the training forward equals the eval forward: no element dropped");
  kn_nn_train(enc, true);
  cr_assert_eq(kn_backward(kn_sum(kn_mul(y, y)), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(kn_mul(yd, yd)), NULL), KN_OK, "%s", kn_last_error());
  static const char *const names[] = {"linear1.weight", "linear2.bias", "norm1.weight",
                                      "self_attn.in_proj_weight"};
  for (int i = 0; i < 4; i++) {
    kn_tensor *gd = kn_grad(kn_module_get(enc_d, names[i]));
    cr_assert_not_null(gd, "%s has a gradient", names[i]);
    cr_expect(ind_close(dev(gd, KN_CPU), kn_grad(kn_module_get(enc, names[i])), 1e-4, 1e-5,
                        names[i]), "%s", names[i]);
  }
  kn_scope_end();
  kn_module_free(enc), kn_module_free(enc_d);
  kn_generator_free(g), kn_generator_free(g2);
}

static kn_value drop_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_mul_scalar(kn_dropout(kn_exp(args[0].u.t), 0.25, true, NULL), kn_float(2)));
}

/* A compiled graph with dropout on the GPU (the dropout an extern step of
** the generated program, the ops layer's kernel) draws what eager draws on
** the CPU from the same default-generator seed. */
Test(cuda_eager, compiled_dropout_matches_eager_on_the_cpu) {
  kn_scope_begin();
  kn_tensor *x = rnd(2, (int64_t[]){6, 10}, KN_FLOAT32);
  kn_manual_seed(3);
  kn_value a = kn_vtensor(x);
  kn_tensor *want = drop_fn(&a, 1, NULL).u.t;
  kn_compiled *f = KN_COMPILE(drop_fn, &(kn_compile_options){.backend = "inductor"});
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_manual_seed(3);
  kn_value args[1] = {kn_vtensor(dev(x, KN_CUDA))}, out;
  cr_assert_eq(kn_call(f, args, 1, &out), KN_OK, "%s", kn_last_error());
  expect_close(out.u.t, want, "compiled dropout");
  kn_value_release(out);
  kn_compiled_free(f);
  kn_scope_end();
}

static kn_value scalar_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_add_scalar(kn_mul(kn_exp(args[0].u.t), args[1].u.t), kn_float(1)));
}

/* A 0-dim host tensor is an input of a compiled GPU graph as it joins an
** eager op (PyTorch's rule): copied to the device for each call, so a new
** value is read on the next call; a host tensor of one element but one
** dim is still an error (the recompile for it names both devices). */
Test(cuda_eager, host_scalar_inputs_of_compiled_graphs) {
  kn_scope_begin();
  kn_tensor *x = rnd(2, (int64_t[]){4, 6}, KN_FLOAT32), *dx = dev(x, KN_CUDA);
  kn_compiled *f = KN_COMPILE(scalar_fn, &(kn_compile_options){.backend = "inductor"});
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int i = 0; i < 3; i++) {
    kn_tensor *s = kn_scalar_tensor(kn_float(0.5 + i), KN_FLOAT32);
    kn_value args[2] = {kn_vtensor(dx), kn_vtensor(s)}, out;
    cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
    kn_value want = scalar_fn((kn_value[]){kn_vtensor(x), kn_vtensor(s)}, 2, NULL);
    expect_close(out.u.t, want.u.t, "a host scalar input");
    kn_value_release(out);
  }
  kn_value bad[2] = {kn_vtensor(dx), kn_vtensor(kn_ones(1, (int64_t[]){1}, KN_FLOAT32))}, out;
  cr_expect_neq(kn_call(f, bad, 2, &out), KN_OK);
  cr_expect(strstr(kn_last_error(), "expected all graph inputs on one device, found cuda:0 "
                                    "(input 0) and cpu (input 1)"), "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- a sweep: every elementwise formula class, eagerly on the device, one
** program serving three shapes of a pattern, against the CPU ---- */
typedef kn_tensor *(*fn1)(kn_tensor *);
typedef kn_tensor *(*fn2)(kn_tensor *, kn_tensor *);

static kn_tensor *gelu_tanh(kn_tensor *a) { return kn_gelu(a, KN_GELU_TANH); }
static kn_tensor *pow3(kn_tensor *a) { return kn_pow_scalar(a, kn_float(3)); }
static kn_tensor *where_gt(kn_tensor *a, kn_tensor *b) { return kn_where(kn_gt(a, b), a, b); }

static void sweep_shapes(const char *name, fn1 f1, fn2 f2, kn_dtype dt) {
  static const int64_t shapes[][2] = {{3, 5}, {17, 4}, {2, 129}};
  for (int s = 0; s < 3; s++) {
    kn_scope_begin();
    kn_tensor *a = kn_add_scalar(kn_abs(rnd(2, shapes[s], dt)), kn_float(0.25));
    kn_tensor *b = kn_sub_scalar(rnd(2, shapes[s], dt), kn_float(0.1));
    char what[80];
    snprintf(what, sizeof what, "%s %s [%lld, %lld]", name, kn_dtype_name(dt),
             (long long)shapes[s][0], (long long)shapes[s][1]);
    kn_tensor *got = f1 ? f1(dev(a, KN_CUDA)) : f2(dev(a, KN_CUDA), dev(b, KN_CUDA));
    kn_tensor *want = f1 ? f1(a) : f2(a, b);
    cr_assert_not_null(got, "%s: %s", what, kn_last_error());
    double tol = dt == KN_FLOAT64 ? 1e-12 : 2e-5;
    cr_expect(ind_close(dev(got, KN_CPU), want, tol, tol, what), "%s", what);
    kn_scope_end();
  }
}

Test(cuda_eager, elementwise_sweep_over_shapes) {
  static const struct { const char *name; fn1 f; } un[] = {
      {"neg", kn_neg}, {"exp", kn_exp}, {"log", kn_log}, {"sqrt", kn_sqrt},
      {"rsqrt", kn_rsqrt}, {"tanh", kn_tanh}, {"sigmoid", kn_sigmoid}, {"relu", kn_relu},
      {"gelu_tanh", gelu_tanh}, {"erf", kn_erf}, {"floor", kn_floor},
      {"pow3", pow3}};
  static const struct { const char *name; fn2 f; } bin[] = {
      {"sub", kn_sub}, {"div", kn_div}, {"maximum", kn_maximum}, {"lt", kn_lt},
      {"where_gt", where_gt}};
  for (size_t i = 0; i < sizeof un / sizeof *un; i++) sweep_shapes(un[i].name, un[i].f, NULL, KN_FLOAT32);
  for (size_t i = 0; i < sizeof bin / sizeof *bin; i++)
    sweep_shapes(bin[i].name, NULL, bin[i].f, KN_FLOAT32);
  sweep_shapes("exp", kn_exp, NULL, KN_FLOAT64);
  sweep_shapes("div", NULL, kn_div, KN_FLOAT64);
  cr_expect_leq(programs(), (int)(sizeof un / sizeof *un + sizeof bin / sizeof *bin) + 8,
               "about one program per op and dtype: %d", programs());
}
