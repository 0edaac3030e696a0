/*
** test_nn_rnn.c: the fused LSTM cell (kn_fused_lstm_cell, its backward op)
** against the unfused formula written with kiln ops, finite differences
** (float64) and torch 1.13 (tests/fixtures/rnn.json, tools/ref/gen_rnn.py);
** the LSTM layer's outputs, final states and every gradient against torch's
** LSTM; and a compiled (inductor) LSTM training step against the eager one.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"
#include "support/gradcheck.h"
#include "support/leakcheck.h"

TestSuite(nn_rnn, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* Distinct values in [-1.6, 1.6], float64 or float32, requiring grad. */
static kn_tensor *leaf(kn_dtype dt, int ndim, const int64_t *sizes, double start) {
  kn_tensor *t = kn_empty(ndim, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = 1.6 * sin(start + 1.37 * (double)i);
  t = dt == KN_FLOAT64 ? t : kn_to(t, dt);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}

/* The cell with kiln's unfused ops: what nn/rnn.c computed before. */
static kn_tensor *unfused(kn_tensor *ig, kn_tensor *hg, kn_tensor *cx, kn_tensor *ib,
                          kn_tensor *hb, kn_tensor **cy) {
  kn_tensor *gates = kn_add(ig, hg), *g[4];
  if (ib) gates = kn_add(gates, kn_add(ib, hb));
  cr_assert_eq(kn_chunk(gates, 4, 1, g, 4), 4);
  *cy = kn_add(kn_mul(kn_sigmoid(g[1]), cx), kn_mul(kn_sigmoid(g[0]), kn_tanh(g[2])));
  return kn_mul(kn_sigmoid(g[3]), kn_tanh(*cy));
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  kn_tensor *d = kn_amax(kn_abs(kn_sub(kn_to(a, KN_FLOAT64), kn_to(b, KN_FLOAT64))), NULL, 0,
                         false);
  double v = INFINITY;
  cr_assert_eq(kn_item_double(d, &v), KN_OK);
  return v;
}

/* input_gates as a strided view (one time step of [B, T, 4H]), as the LSTM
** layer passes it. */
static kn_tensor *step_view(kn_dtype dt, int64_t B, int64_t H, double start) {
  kn_tensor *all = leaf(dt, KN_SHAPE(B, 3, 4 * H), start);
  return kn_select(all, 1, 1);
}

Test(nn_rnn, fused_cell_forward_and_backward_match_the_unfused_ops) {
  kn_scope_begin();
  for (int k = 0; k < 2; k++) {
    kn_dtype dt = k ? KN_FLOAT32 : KN_FLOAT64;
    double tol = k ? 2e-6 : 1e-14;
    int64_t B = 5, H = 37; /* rows not a multiple of the vector width */
    kn_tensor *ig = step_view(dt, B, H, 0.1), *hg = leaf(dt, KN_SHAPE(B, 4 * H), 0.7);
    kn_tensor *cx = leaf(dt, KN_SHAPE(B, H), 1.3), *ib = leaf(dt, KN_SHAPE(4 * H), 2.1);
    kn_tensor *hb = leaf(dt, KN_SHAPE(4 * H), 2.9), *cy, *cy0, *ws;
    kn_tensor *hy = kn_fused_lstm_cell(ig, hg, cx, ib, hb, &cy, &ws);
    cr_assert_not_null(hy, "%s", kn_last_error());
    cr_assert_str_eq(kn_grad_fn_name(hy), "ThnnFusedLstmCellBackward0");
    kn_tensor *hy0 = unfused(ig, hg, cx, ib, hb, &cy0);
    cr_expect_leq(max_diff(hy, hy0), tol, "%s hy", kn_dtype_name(dt));
    cr_expect_leq(max_diff(cy, cy0), tol, "%s cy", kn_dtype_name(dt));
    cr_expect_eq(kn_size(ws, 1), 4 * H);
    /* gradients of <hy, a> + <cy, b> for every input, both ways */
    kn_tensor *a = kn_cos(kn_detach(hy0)), *b = kn_sin(kn_detach(cy0));
    kn_tensor *ins[5] = {ig, hg, cx, ib, hb}, *g1[5], *g0[5];
    cr_assert_eq(kn_autograd_grad((kn_tensor *[]){hy, cy}, 2, ins, 5, (kn_tensor *[]){a, b},
                                  false, false, false, g1), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_autograd_grad((kn_tensor *[]){hy0, cy0}, 2, ins, 5, (kn_tensor *[]){a, b},
                                  false, false, false, g0), KN_OK, "%s", kn_last_error());
    for (int i = 0; i < 5; i++) {
      cr_expect_leq(max_diff(g1[i], g0[i]), 4 * tol, "%s grad of input %d",
                    kn_dtype_name(dt), i);
    }
  }
  kn_scope_end();
}

/* gradcheck functions: hy and cy joined, or one of them alone (the other
** output's gradient is then None). */
static kn_tensor *f_cell(kn_tensor *const *x, int n, void *ud) {
  int which = *(const int *)ud;
  kn_tensor *cy;
  kn_tensor *hy = kn_fused_lstm_cell(x[0], x[1], x[2], n > 3 ? x[3] : NULL, n > 4 ? x[4] : NULL,
                                     &cy, NULL);
  return which == 0 ? hy : which == 1 ? cy : kn_cat((kn_tensor *[]){hy, cy}, 2, 1);
}

Test(nn_rnn, fused_cell_gradients_match_finite_differences) {
  kn_scope_begin();
  int64_t B = 3, H = 4;
  for (int which = 0; which < 3; which++) {
    kn_tensor *in[5] = {step_view(KN_FLOAT64, B, H, 0.2), leaf(KN_FLOAT64, KN_SHAPE(B, 4 * H), 0.9),
                        leaf(KN_FLOAT64, KN_SHAPE(B, H), 1.7), leaf(KN_FLOAT64, KN_SHAPE(4 * H), 2.3),
                        leaf(KN_FLOAT64, KN_SHAPE(4 * H), 3.1)};
    char why[1024] = "";
    cr_expect(kn_gradcheck(f_cell, in, 5, &which, why, sizeof why), "output %d, biases: %s",
              which, why);
    cr_expect(kn_gradcheck(f_cell, in, 3, &which, why, sizeof why), "output %d: %s", which, why);
  }
  kn_scope_end();
}

Test(nn_rnn, fused_cell_rejects_bad_shapes_naming_both) {
  kn_scope_begin();
  kn_tensor *ig = kn_zeros(KN_SHAPE(2, 8), KN_FLOAT32), *cx = kn_zeros(KN_SHAPE(2, 2), KN_FLOAT32);
  cr_expect_null(kn_fused_lstm_cell(ig, kn_zeros(KN_SHAPE(2, 4), KN_FLOAT32), cx, NULL, NULL,
                                    NULL, NULL));
  cr_expect(strstr(kn_last_error(), "expected hidden_gates of shape [2, 8]"), "%s",
            kn_last_error());
  cr_expect_null(kn_fused_lstm_cell(ig, ig, kn_zeros(KN_SHAPE(2, 3), KN_FLOAT32), NULL, NULL,
                                    NULL, NULL));
  cr_expect(strstr(kn_last_error(), "expected cx of shape [2, 2]"), "%s", kn_last_error());
  cr_expect_null(kn_fused_lstm_cell(kn_zeros(KN_SHAPE(2, 7), KN_FLOAT32), ig, cx, NULL, NULL,
                                    NULL, NULL));
  cr_expect(strstr(kn_last_error(), "not a multiple of 4"), "%s", kn_last_error());
  cr_expect_null(kn_fused_lstm_cell(ig, kn_zeros(KN_SHAPE(2, 8), KN_FLOAT64), cx, NULL, NULL,
                                    NULL, NULL));
  cr_expect(strstr(kn_last_error(), "expected hidden_gates of dtype float32, found float64"),
            "%s", kn_last_error());
  cr_expect_null(kn_fused_lstm_cell(ig, ig, cx, kn_zeros(KN_SHAPE(4), KN_FLOAT32), NULL, NULL,
                                    NULL));
  cr_expect(strstr(kn_last_error(), "expected a bias of shape [8]"), "%s", kn_last_error());
  kn_scope_end();
}

/* ---- against torch 1.13 ------------------------------------------------------------- */
static void expect_close(kn_tensor *t, const json_t *enc, double rtol, double atol,
                         const char *cname, const char *what) {
  char why[256] = "";
  cr_expect(kn_fixture_close(t, enc, rtol, atol, why, sizeof why), "%s: %s: %s", cname, what,
            why);
}

static void cell_case(const json_t *c) {
  const char *cname = kn_fixture_name(c);
  int n = kn_fixture_ninputs(c);
  kn_tensor *in[5] = {NULL}, *cy;
  for (int i = 0; i < n; i++) in[i] = kn_fixture_tensor(kn_fixture_input(c, i));
  kn_tensor *hy = kn_fused_lstm_cell(in[0], in[1], in[2], in[3], in[4], &cy, NULL);
  cr_assert_not_null(hy, "%s: %s", cname, kn_last_error());
  expect_close(hy, kn_fixture_output(c, 0), 1e-12, 1e-13, cname, "hy");
  expect_close(cy, kn_fixture_output(c, 1), 1e-12, 1e-13, cname, "cy");
  kn_tensor *outs[2] = {hy, cy}, *go[2], *g[5];
  for (int i = 0; i < 2; i++) {
    const json_t *e = kn_fixture_grad_output(c, i);
    go[i] = e && !json_is_null(e) ? kn_fixture_tensor(e) : NULL;
  }
  kn_tensor *ko[2], *kg[2];
  int nk = 0;
  for (int i = 0; i < 2; i++)
    if (go[i]) ko[nk] = outs[i], kg[nk++] = go[i];
  cr_assert_eq(kn_autograd_grad(ko, nk, in, n, kg, false, false, false, g), KN_OK, "%s: %s",
               cname, kn_last_error());
  for (int i = 0; i < n; i++) {
    char what[32];
    snprintf(what, sizeof what, "grad of input %d", i);
    expect_close(g[i], kn_fixture_grad(c, i), 1e-11, 1e-12, cname, what);
  }
}

static void lstm_case(const json_t *c) {
  const char *cname = kn_fixture_name(c);
  const json_t *cfg = kn_fixture_param(c, "cfg"), *names = kn_fixture_param(c, "names");
  int64_t in = json_integer_value(json_object_get(cfg, "in"));
  int64_t hidden = json_integer_value(json_object_get(cfg, "hidden"));
  int layers = (int)json_integer_value(json_object_get(cfg, "layers"));
  kn_module *m = kn_nn_lstm(in, hidden, layers, json_is_true(json_object_get(cfg, "bias")),
                            json_is_true(json_object_get(cfg, "batch_first")), NULL);
  cr_assert_not_null(m, "%s", kn_last_error());
  int n = kn_fixture_ninputs(c);
  kn_tensor *ins[3 + 16] = {NULL};
  for (int i = 0; i < 3; i++) ins[i] = kn_fixture_tensor(kn_fixture_input(c, i));
  bool prev = kn_no_grad_begin();
  for (int j = 0; j + 3 < n; j++) {
    ins[3 + j] = kn_module_get(m, json_string_value(json_array_get(names, (size_t)j)));
    cr_assert_not_null(ins[3 + j], "%s: weight %d", cname, j);
    cr_assert_eq(kn_copy_(ins[3 + j], kn_fixture_tensor(kn_fixture_input(c, 3 + j))), KN_OK);
  }
  kn_no_grad_end(prev);
  kn_tensor *hn, *cn;
  kn_tensor *y = kn_nn_lstm_forward(m, ins[0], ins[1], ins[2], &hn, &cn);
  cr_assert_not_null(y, "%s: %s", cname, kn_last_error());
  kn_tensor *outs[3] = {y, hn, cn}, *go[3], *g[3 + 16];
  static const char *const onames[3] = {"y", "h_n", "c_n"};
  for (int i = 0; i < 3; i++) {
    expect_close(outs[i], kn_fixture_output(c, i), 1e-4, 1e-5, cname, onames[i]);
    go[i] = kn_fixture_tensor(kn_fixture_grad_output(c, i));
  }
  cr_assert_eq(kn_autograd_grad(outs, 3, ins, n, go, false, false, false, g), KN_OK, "%s: %s",
               cname, kn_last_error());
  for (int i = 0; i < n; i++) {
    char what[48];
    snprintf(what, sizeof what, "grad of %s",
             i < 3 ? (const char *[]){"x", "h0", "c0"}[i]
                   : json_string_value(json_array_get(names, (size_t)i - 3)));
    expect_close(g[i], kn_fixture_grad(c, i), 1e-4, 2e-5, cname, what);
  }
  kn_module_free(m);
}

Test(nn_rnn, cell_and_lstm_match_torch) {
  kn_fixture *f = kn_fixture_load_named("rnn.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int nlstm = 0;
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    kn_scope_begin();
    const json_t *c = kn_fixture_case(f, i);
    if (!strcmp(kn_fixture_op(c), "LSTM")) lstm_case(c), nlstm++;
    else cell_case(c);
    kn_scope_end();
  }
  cr_expect_eq(nlstm, 2);
  kn_fixture_free(f);
}

/* ---- kn_lstm_layer: finite differences, and the step-by-step cell ------------------------ */
/* which: 0 y, 1 h_n, 2 c_n, 3 all three joined */
static kn_tensor *f_layer(kn_tensor *const *x, int n, void *ud) {
  (void)n;
  int which = *(const int *)ud;
  kn_tensor *hn, *cn, *y = kn_lstm_layer(x[0], x[1], x[2], x[3], &hn, &cn);
  if (!y) return NULL;
  kn_tensor *parts[3] = {kn_reshape(y, KN_SHAPE(-1)), kn_reshape(hn, KN_SHAPE(-1)),
                         kn_reshape(cn, KN_SHAPE(-1))};
  return which < 3 ? parts[which] : kn_cat(parts, 3, 0);
}

Test(nn_rnn, lstm_layer_gradients_match_finite_differences) {
  kn_scope_begin();
  int64_t B = 2, T = 3, H = 3;
  for (int which = 0; which < 4; which++) {
    kn_tensor *in[4] = {leaf(KN_FLOAT64, KN_SHAPE(B, T, 4 * H), 0.3),
                        leaf(KN_FLOAT64, KN_SHAPE(B, H), 1.1), leaf(KN_FLOAT64, KN_SHAPE(B, H), 1.9),
                        kn_mul_scalar(leaf(KN_FLOAT64, KN_SHAPE(4 * H, H), 2.7), kn_float(0.5))};
    char why[1024] = "";
    cr_expect(kn_gradcheck(f_layer, in, 4, &which, why, sizeof why), "output %d: %s", which,
              why);
  }
  kn_scope_end();
}

Test(nn_rnn, lstm_layer_equals_the_fused_cell_step_by_step) {
  kn_scope_begin();
  int64_t B = 4, T = 6, H = 19;
  kn_tensor *ig = leaf(KN_FLOAT32, KN_SHAPE(B, T, 4 * H), 0.4);
  kn_tensor *h = leaf(KN_FLOAT32, KN_SHAPE(B, H), 1.2), *c = leaf(KN_FLOAT32, KN_SHAPE(B, H), 2.2);
  kn_tensor *w = kn_mul_scalar(leaf(KN_FLOAT32, KN_SHAPE(4 * H, H), 3.3), kn_float(0.2));
  kn_tensor *ins[4] = {ig, h, c, w}, *hn, *cn, *steps[6];
  kn_tensor *y = kn_lstm_layer(ig, h, c, w, &hn, &cn);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_str_eq(kn_grad_fn_name(y), "LstmLayerBackward0");
  kn_tensor *h1 = h, *c1 = c;
  for (int t = 0; t < T; t++)
    steps[t] = h1 = kn_fused_lstm_cell(kn_select(ig, 1, t), kn_mm(h1, kn_t(w)), c1, NULL, NULL,
                                       &c1, NULL);
  kn_tensor *y1 = kn_stack(steps, (int)T, 1);
  cr_expect_leq(max_diff(y, y1), 2e-6);
  cr_expect_leq(max_diff(hn, h1), 2e-6);
  cr_expect_leq(max_diff(cn, c1), 2e-6);
  kn_tensor *gy = kn_cos(kn_detach(y1)), *gh = kn_sin(kn_detach(h1)), *gc = kn_cos(kn_detach(c1));
  kn_tensor *g0[4], *g1[4];
  cr_assert_eq(kn_autograd_grad((kn_tensor *[]){y, hn, cn}, 3, ins, 4,
                                (kn_tensor *[]){gy, gh, gc}, false, false, false, g0), KN_OK,
               "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad((kn_tensor *[]){y1, h1, c1}, 3, ins, 4,
                                (kn_tensor *[]){gy, gh, gc}, false, false, false, g1), KN_OK,
               "%s", kn_last_error());
  for (int i = 0; i < 4; i++) cr_expect_leq(max_diff(g0[i], g1[i]), 2e-5, "grad of input %d", i);
  kn_scope_end();
}

/* ---- compiled training ---------------------------------------------------------------- */
static kn_value loss_fn(const kn_value *args, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *y = kn_nn_forward(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_mse_loss(y, args[2].u.t, KN_REDUCTION_MEAN));
}

static double train_step(kn_compiled *f, kn_module *m, kn_optimizer *opt, kn_tensor *x,
                         kn_tensor *target) {
  kn_value args[] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(target)}, out = kn_vnone();
  if (f) cr_assert_eq(kn_call(f, args, 3, &out), KN_OK, "%s", kn_last_error());
  else out = loss_fn(args, 3, NULL);
  cr_assert_not_null(out.u.t, "%s", kn_last_error());
  double v = NAN;
  cr_assert_eq(kn_item_double(out.u.t, &v), KN_OK);
  cr_assert_eq(kn_backward(out.u.t, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_step(opt), KN_OK, "%s", kn_last_error());
  kn_optim_zero_grad(opt);
  if (f) kn_value_release(out);
  return v;
}

/* Training compiled with inductor equals eager training, step for step, over
** sequences of three lengths; the length change compiles once more (the
** sizes become dynamic) and the third length reuses that graph. */
Test(nn_rnn, compiled_training_matches_eager_across_lengths) {
  kn_scope_begin();
  kn_generator *g1 = kn_generator_new(3), *g2 = kn_generator_new(3), *gd = kn_generator_new(4);
  kn_module *mc = kn_nn_lstm(5, 8, 2, true, true, g1), *me = kn_nn_lstm(5, 8, 2, true, true, g2);
  kn_tensor **pc, **pe;
  int nc = kn_nn_parameters(mc, &pc), ne = kn_nn_parameters(me, &pe);
  kn_optim_options so = {.lr = 0.3};
  kn_optimizer *oc = kn_sgd(pc, nc, &so), *oe = kn_sgd(pe, ne, &so);
  kn_compile_counter cc = {.inner = "inductor"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(loss_fn, NULL, 3, "lstm_loss", __FILE__, __LINE__, &o);
  int64_t lengths[4] = {5, 7, 9, 7};
  for (int s = 0; s < 4; s++) {
    kn_tensor *x = kn_randn(KN_SHAPE(3, lengths[s], 5), gd, KN_FLOAT32);
    kn_tensor *target = kn_randn(KN_SHAPE(3, lengths[s], 8), gd, KN_FLOAT32);
    double lc = train_step(f, mc, oc, x, target), le = train_step(NULL, me, oe, x, target);
    cr_expect(fabs(lc - le) <= 1e-5 * fabs(le), "step %d: loss %.9g, eager %.9g", s, lc, le);
  }
  for (int i = 0; i < nc; i++)
    cr_expect_leq(max_diff(pc[i], pe[i]), 1e-5, "parameter %d after 4 steps", i);
  cr_expect_eq(cc.frame_count, 2, "graphs compiled: %d (a static one, then one dynamic in the "
                                   "sequence length)", cc.frame_count);
  kn_compiled_free(f);
  kn_optim_free(oc), kn_optim_free(oe);
  free(pc), free(pe);
  kn_module_free(mc), kn_module_free(me);
  kn_generator_free(g1), kn_generator_free(g2), kn_generator_free(gd);
  kn_scope_end();
}
