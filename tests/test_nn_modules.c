/*
** tests/test_nn_modules.c: the layers of kiln/nn.h against torch 1.13
** (tests/fixtures/layers.json, tools/ref/gen_layers.py): the same weights
** are copied into the kiln layer, then the forward output, the state after
** the forward (running statistics), the state names and print(model) must
** match. Initialisation distributions are checked statistically.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "support/fixture.h"

static int64_t ci(const json_t *cfg, const char *k) {
  return json_integer_value(json_object_get(cfg, k));
}
static double cd(const json_t *cfg, const char *k) {
  return json_number_value(json_object_get(cfg, k));
}
static bool cb(const json_t *cfg, const char *k) {
  return json_is_true(json_object_get(cfg, k));
}
static int64_t cl(const json_t *cfg, const char *k, int i) {
  return json_integer_value(json_array_get(json_object_get(cfg, k), (size_t)i));
}

static kn_module *conv_from(const json_t *c) {
  kn_conv2d_options o = {{cl(c, "stride", 0), cl(c, "stride", 1)},
                         {cl(c, "padding", 0), cl(c, "padding", 1)},
                         cb(c, "same"),
                         {cl(c, "dilation", 0), cl(c, "dilation", 1)},
                         ci(c, "groups"),
                         !cb(c, "bias")};
  return kn_nn_conv2d(ci(c, "in"), ci(c, "out"), cl(c, "kernel", 0), cl(c, "kernel", 1), &o,
                      NULL);
}

static kn_module *cnn(void) {
  kn_conv2d_options pad1 = {.padding = {1, 1}};
  return kn_nn_sequential(6, (kn_module *[]){kn_nn_conv2d(1, 4, 3, 3, &pad1, NULL),
                                             kn_nn_batchnorm2d(4, 1e-5, 0.1, true, true),
                                             kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0),
                                             kn_nn_flatten(1, -1), kn_nn_linear(64, 10, true,
                                                                                NULL)});
}

/* The kiln layer for a fixture case. */
static kn_module *build(const char *op, const json_t *c) {
  if (!strcmp(op, "Linear")) return kn_nn_linear(ci(c, "in"), ci(c, "out"), cb(c, "bias"), NULL);
  if (!strcmp(op, "Conv2d")) return conv_from(c);
  if (!strcmp(op, "BatchNorm1d") || !strcmp(op, "BatchNorm2d"))
    return (ci(c, "dims") == 1 ? kn_nn_batchnorm1d : kn_nn_batchnorm2d)(
        ci(c, "c"), cd(c, "eps"), cd(c, "momentum"), cb(c, "affine"), cb(c, "track"));
  if (!strcmp(op, "LayerNorm")) {
    int64_t shape[2] = {cl(c, "shape", 0), cl(c, "shape", 1)};
    return kn_nn_layernorm((int)json_array_size(json_object_get(c, "shape")), shape,
                           cd(c, "eps"), cb(c, "affine"));
  }
  if (!strcmp(op, "Embedding"))
    return kn_nn_embedding(ci(c, "num"), ci(c, "dim"), ci(c, "padding_idx"), NULL);
  if (!strcmp(op, "ReLU")) return kn_nn_relu();
  if (!strcmp(op, "GELU")) return kn_nn_gelu(cb(c, "tanh"));
  if (!strcmp(op, "SiLU")) return kn_nn_silu();
  if (!strcmp(op, "Tanh")) return kn_nn_tanh();
  if (!strcmp(op, "Sigmoid")) return kn_nn_sigmoid();
  if (!strcmp(op, "Dropout")) return kn_nn_dropout(cd(c, "p"), NULL);
  if (!strcmp(op, "Flatten")) return kn_nn_flatten(ci(c, "start"), ci(c, "end"));
  if (!strcmp(op, "MaxPool2d")) return kn_nn_maxpool2d(ci(c, "k"), ci(c, "s"), ci(c, "p"));
  if (!strcmp(op, "AvgPool2d")) return kn_nn_avgpool2d(ci(c, "k"), ci(c, "s"), ci(c, "p"));
  if (!strcmp(op, "Sequential")) return cnn();
  if (!strcmp(op, "LSTM"))
    return kn_nn_lstm(ci(c, "in"), ci(c, "hidden"), (int)ci(c, "layers"), cb(c, "bias"),
                      cb(c, "batch_first"), NULL);
  if (!strcmp(op, "MultiheadAttention"))
    return kn_nn_multihead_attention(ci(c, "e"), ci(c, "heads"), 0.0, cb(c, "batch_first"), NULL);
  if (!strcmp(op, "TransformerEncoderLayer"))
    return kn_nn_transformer_encoder_layer(ci(c, "d"), ci(c, "nhead"), ci(c, "ff"),
                                           cd(c, "dropout"), cb(c, "batch_first"), NULL);
  return NULL;
}

typedef struct names {
  const char *v[16];
  int n;
} names;

static kn_status collect(void *ud, const char *name, kn_tensor *t) {
  (void)t;
  names *ns = ud;
  ns->v[ns->n++] = strdup(name);
  return KN_OK;
}

/* Parameters then buffers: PyTorch's state_dict order for one layer; for
** the Sequential the fixture interleaves per child, so compare as sets. */
static void check_names(kn_module *m, const json_t *expected, const char *cname) {
  names ns = {{0}, 0};
  cr_assert_eq(kn_nn_named_tensors(m, true, collect, &ns), KN_OK);
  cr_assert_eq(kn_nn_named_tensors(m, false, collect, &ns), KN_OK);
  cr_assert_eq((size_t)ns.n, json_array_size(expected), "%s: %d state entries", cname, ns.n);
  for (int i = 0; i < ns.n; i++) {
    bool found = false;
    for (size_t j = 0; j < json_array_size(expected); j++)
      found |= !strcmp(ns.v[i], json_string_value(json_array_get(expected, j)));
    cr_assert(found, "%s: unexpected state entry %s", cname, ns.v[i]);
    free((void *)ns.v[i]);
  }
}

static void load_state(kn_module *m, const json_t *c) {
  const json_t *nm = json_object_get(kn_fixture_param(c, "names"), "x");
  (void)nm;
  const json_t *list = kn_fixture_param(c, "names");
  bool prev = kn_no_grad_begin();
  for (size_t j = 0; j < json_array_size(list); j++) {
    kn_tensor *dst = kn_module_get(m, json_string_value(json_array_get(list, j)));
    cr_assert_not_null(dst, "%s: no tensor %s", kn_fixture_name(c),
                       json_string_value(json_array_get(list, j)));
    cr_assert_eq(kn_copy_(dst, kn_fixture_tensor(kn_fixture_input(c, (int)j + 1))), KN_OK);
  }
  kn_no_grad_end(prev);
}

static void run_case(const json_t *c) {
  const char *cname = kn_fixture_name(c);
  kn_module *m = build(kn_fixture_op(c), json_object_get(c, "params") ?
                       kn_fixture_param(c, "cfg") : NULL);
  cr_assert_not_null(m, "%s: %s", cname, kn_last_error());
  check_names(m, kn_fixture_param(c, "names"), cname);
  char *repr = kn_nn_repr(m);
  cr_assert_str_eq(repr, json_string_value(kn_fixture_param(c, "repr")), "%s", cname);
  free(repr);
  load_state(m, c);
  kn_nn_train(m, kn_fixture_param_bool(c, "training", true));
  kn_tensor *y = kn_nn_forward(m, kn_fixture_tensor(kn_fixture_input(c, 0)));
  cr_assert_not_null(y, "%s: %s", cname, kn_last_error());
  char why[256];
  cr_assert(kn_fixture_close(y, kn_fixture_output(c, 0), 1e-4, 1e-5, why, sizeof why), "%s: %s",
            cname, why);
  const json_t *list = kn_fixture_param(c, "names");
  for (size_t j = 0; j < json_array_size(list); j++) {
    const char *n = json_string_value(json_array_get(list, j));
    cr_assert(kn_fixture_close(kn_module_get(m, n), kn_fixture_output(c, (int)j + 1), 1e-5,
                               1e-6, why, sizeof why),
              "%s: state %s after forward: %s", cname, n, why);
  }
  kn_module_free(m);
}

Test(nn_modules, forward_matches_torch) {
  kn_fixture *f = kn_fixture_load_named("layers.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    kn_scope_begin();
    run_case(kn_fixture_case(f, i));
    kn_scope_end();
  }
  kn_fixture_free(f);
}

/* ---- initialisation, checked by distribution ------------------------------------ */
static void moments(kn_tensor *t, double *lo, double *hi, double *mean, double *var) {
  kn_tensor *d = kn_contiguous(kn_to(t, KN_FLOAT64));
  const double *v = kn_data(d);
  int64_t n = kn_numel(d);
  double s = 0, s2 = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    s += v[i], s2 += v[i] * v[i];
    *lo = fmin(*lo, v[i]), *hi = fmax(*hi, v[i]);
  }
  *mean = s / (double)n;
  *var = s2 / (double)n - *mean * *mean;
}

/* U(-b, b): inside the bounds, reaching close to them, mean 0, variance b^2/3. */
static void check_uniform(kn_tensor *t, double b, const char *what) {
  double lo, hi, mean, var;
  moments(t, &lo, &hi, &mean, &var);
  double n = (double)kn_numel(t);
  cr_assert(lo >= -b && hi < b, "%s: [%g, %g] outside +-%g", what, lo, hi, b);
  cr_assert(lo < -0.98 * b && hi > 0.98 * b, "%s: range [%g, %g] too narrow", what, lo, hi);
  cr_assert(fabs(mean) < 5 * b / sqrt(3 * n), "%s: mean %g", what, mean);
  cr_assert(fabs(var - b * b / 3) < 0.05 * b * b / 3, "%s: variance %g", what, var);
}

Test(nn_modules, linear_and_conv_init_is_kaiming_uniform) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(7);
  kn_module *lin = kn_nn_linear(400, 300, true, g);
  check_uniform(kn_module_get(lin, "weight"), 1 / sqrt(400.0), "Linear.weight");
  kn_module *conv = kn_nn_conv2d(8, 64, 3, 5, &(kn_conv2d_options){.groups = 2}, g);
  check_uniform(kn_module_get(conv, "weight"), 1 / sqrt(4 * 3 * 5.0), "Conv2d.weight");
  cr_assert_eq(kn_numel(kn_module_get(conv, "bias")), 64);
  kn_module *big = kn_nn_linear(100, 4000, true, g); /* enough bias samples */
  check_uniform(kn_module_get(big, "bias"), 1 / sqrt(100.0), "Linear.bias");
  cr_assert(kn_requires_grad(kn_module_get(lin, "weight")));
  cr_assert_eq(kn_nn_num_parameters(lin), 400 * 300 + 300);
  kn_module_free(lin), kn_module_free(conv), kn_module_free(big);
  kn_generator_free(g);
  kn_scope_end();
}

Test(nn_modules, embedding_init_is_standard_normal_with_zero_padding_row) {
  kn_scope_begin();
  kn_module *e = kn_nn_embedding(1000, 64, -1, NULL);
  kn_tensor *w = kn_module_get(e, "weight");
  double lo, hi, mean, var;
  moments(kn_narrow(w, 0, 0, 999), &lo, &hi, &mean, &var);
  cr_assert(fabs(mean) < 0.02 && fabs(var - 1) < 0.03, "mean %g var %g", mean, var);
  moments(kn_select(w, 0, 999), &lo, &hi, &mean, &var);
  cr_assert(lo == 0 && hi == 0, "padding row not zero");
  char *r = kn_nn_repr(e);
  cr_assert_str_eq(r, "Embedding(1000, 64, padding_idx=999)");
  free(r);
  kn_module_free(e);
  kn_scope_end();
}

Test(nn_modules, lstm_states_and_attention_init) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(9);
  kn_module *lstm = kn_nn_lstm(3, 200, 2, true, true, g);
  check_uniform(kn_module_get(lstm, "weight_hh_l1"), 1 / sqrt(200.0), "LSTM.weight_hh_l1");
  kn_tensor *x = kn_randn(KN_SHAPE(2, 4, 3), g, KN_FLOAT32), *hn, *cn;
  kn_tensor *h0 = kn_randn(KN_SHAPE(2, 2, 200), g, KN_FLOAT32);
  kn_tensor *y = kn_nn_lstm_forward(lstm, x, h0, NULL, &hn, &cn);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_assert_eq(kn_size(hn, 0), 2);
  char why[256];
  /* h_n of the last layer is the output's last step */
  cr_assert(kn_tensors_close(kn_select(hn, 0, 1), kn_select(y, 1, 3), 0, 0, true, why,
                             sizeof why), "%s", why);
  cr_assert_eq(kn_size(cn, 2), 200);
  /* a different h0 changes the output: it is used */
  kn_tensor *y0 = kn_nn_forward(lstm, x);
  cr_assert(!kn_tensors_close(y0, y, 1e-3, 1e-3, true, why, sizeof why));
  kn_module *mha = kn_nn_multihead_attention(64, 4, 0.0, true, g);
  check_uniform(kn_module_get(mha, "in_proj_weight"), sqrt(6.0 / (64 + 192)), "in_proj_weight");
  double lo, hi, mean, var;
  moments(kn_module_get(mha, "out_proj.bias"), &lo, &hi, &mean, &var);
  cr_assert(lo == 0 && hi == 0, "out_proj.bias starts at zero");
  moments(kn_module_get(mha, "in_proj_bias"), &lo, &hi, &mean, &var);
  cr_assert(lo == 0 && hi == 0, "in_proj_bias starts at zero");
  cr_assert_null(kn_nn_multihead_attention(10, 3, 0, true, NULL));
  cr_assert(strstr(kn_last_error(), "divisible by num_heads"), "%s", kn_last_error());
  kn_module_free(lstm), kn_module_free(mha);
  kn_generator_free(g);
  kn_scope_end();
}

Test(nn_modules, dropout_train_zeroes_about_p_and_scales_eval_is_identity) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(3);
  kn_module *d = kn_nn_dropout(0.25, g);
  kn_tensor *x = kn_ones(KN_SHAPE(100000), KN_FLOAT32);
  kn_tensor *y = kn_nn_forward(d, x);
  double lo, hi, mean, var;
  moments(y, &lo, &hi, &mean, &var);
  cr_assert(lo == 0 && fabs(hi - 1 / 0.75) < 1e-6, "values %g..%g", lo, hi);
  cr_assert(fabs(mean - 1) < 0.01, "mean %g (kept fraction times 1/(1-p))", mean);
  kn_nn_train(d, false);
  cr_assert(!kn_nn_is_training(d));
  moments(kn_nn_forward(d, x), &lo, &hi, &mean, &var);
  cr_assert(lo == 1 && hi == 1);
  kn_module_free(d);
  kn_generator_free(g);
  kn_scope_end();
}

Test(nn_modules, parameters_zero_grad_and_train_flags_recurse) {
  kn_scope_begin();
  kn_module *m = cnn();
  kn_tensor **ps = NULL;
  int n = kn_nn_parameters(m, &ps);
  cr_assert_eq(n, 6); /* conv w/b, bn w/b, linear w/b */
  cr_assert_eq(kn_nn_num_parameters(m), 4 * 9 + 4 + 4 + 4 + 640 + 10);
  cr_assert_eq(ps[0], kn_module_get(m, "0.weight"));
  cr_assert_eq(ps[5], kn_module_get(m, "5.bias"));
  kn_tensor *loss = kn_sum(kn_nn_forward(m, kn_randn(KN_SHAPE(2, 1, 8, 8), NULL, KN_FLOAT32)));
  cr_assert_eq(kn_backward(loss, NULL), KN_OK);
  for (int i = 0; i < n; i++) cr_assert_not_null(kn_grad(ps[i]), "param %d has no grad", i);
  kn_nn_zero_grad(m);
  for (int i = 0; i < n; i++) cr_assert_null(kn_grad(ps[i]));
  kn_nn_train(m, false);
  cr_assert(!kn_nn_is_training(m));
  free(ps);
  kn_module_free(m);
  kn_scope_end();
}

Test(nn_modules, bad_arguments_are_errors) {
  cr_assert_null(kn_nn_linear(0, 3, true, NULL));
  cr_assert(strstr(kn_last_error(), "positive"), "%s", kn_last_error());
  cr_assert_null(kn_nn_conv2d(3, 4, 3, 3, &(kn_conv2d_options){.groups = 2}, NULL));
  cr_assert(strstr(kn_last_error(), "divisible by groups"), "%s", kn_last_error());
  cr_assert_null(kn_nn_conv2d(2, 2, 3, 3,
                              &(kn_conv2d_options){.stride = {2, 2}, .padding_same = true},
                              NULL));
  cr_assert(strstr(kn_last_error(), "padding='same'"), "%s", kn_last_error());
  cr_assert_null(kn_nn_dropout(1.5, NULL));
  cr_assert_null(kn_nn_sequential(2, (kn_module *[]){kn_nn_relu(), NULL}));
  cr_assert(strstr(kn_last_error(), "layer 1 is NULL"), "%s", kn_last_error());
  kn_scope_begin();
  kn_module *bn = kn_nn_batchnorm2d(3, 1e-5, 0.1, true, true);
  cr_assert_null(kn_nn_forward(bn, kn_ones(KN_SHAPE(2, 3), KN_FLOAT32)));
  cr_assert_str_eq(kn_last_error(), "expected 4D input (got 2D input)");
  kn_module *plain = kn_module_new();
  cr_assert_null(kn_nn_forward(plain, kn_ones(KN_SHAPE(2, 3), KN_FLOAT32)));
  cr_assert(strstr(kn_last_error(), "plain kn_module"), "%s", kn_last_error());
  kn_module_free(plain), kn_module_free(bn);
  kn_scope_end();
}

/* ---- a layer inside a compiled function ------------------------------------------------ */
static kn_value fwd_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(args[0].u.m, args[1].u.t));
}

static void compiled_matches_eager(bool training) {
  kn_scope_begin();
  kn_manual_seed(11);
  kn_module *m = cnn();
  kn_nn_train(m, training);
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(fwd_fn, NULL, 2, "fwd", __FILE__, __LINE__, &o);
  for (int step = 0; step < 3; step++) {
    kn_tensor *x = kn_randn(KN_SHAPE(4, 1, 8, 8), NULL, KN_FLOAT32);
    kn_tensor *rm0 = kn_clone(kn_module_get(m, "1.running_mean"));
    kn_tensor *eager = kn_nn_forward(m, x);
    kn_tensor *rm1 = kn_clone(kn_module_get(m, "1.running_mean"));
    bool prev = kn_no_grad_begin(); /* rewind the statistics the eager call moved */
    kn_copy_(kn_module_get(m, "1.running_mean"), rm0);
    kn_no_grad_end(prev);
    kn_value args[2] = {kn_vmodule(m), kn_vtensor(x)}, out;
    cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
    char why[256];
    cr_assert(kn_tensors_close(out.u.t, eager, 1e-5, 1e-6, true, why, sizeof why), "%s", why);
    cr_assert(kn_tensors_close(kn_module_get(m, "1.running_mean"), rm1, 1e-6, 1e-7, true, why,
                               sizeof why), "running_mean after the compiled call: %s", why);
    kn_value_release(out);
  }
  cr_assert_eq(cc.frame_count, 1, "one graph for the whole network, found %d", cc.frame_count);
  kn_compiled_free(f);
  kn_module_free(m);
  kn_scope_end();
}

Test(nn_modules, sequential_compiles_into_one_graph_eval) { compiled_matches_eager(false); }
Test(nn_modules, sequential_compiles_into_one_graph_train) { compiled_matches_eager(true); }

static void compiled_layer_matches_eager(kn_module *m, kn_tensor *x) {
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(fwd_fn, NULL, 2, "fwd", __FILE__, __LINE__, &o);
  for (int i = 0; i < 2; i++) {
    kn_value args[2] = {kn_vmodule(m), kn_vtensor(x)}, out;
    cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
    char why[256];
    cr_assert(kn_tensors_close(out.u.t, kn_nn_forward(m, x), 1e-6, 1e-7, true, why, sizeof why),
              "%s: %s", kn_nn_type(m), why);
    kn_value_release(out);
  }
  cr_assert_eq(cc.frame_count, 1, "%s: %d graphs", kn_nn_type(m), cc.frame_count);
  kn_compiled_free(f);
  kn_module_free(m);
}

Test(nn_modules, lstm_and_transformer_compile_into_one_graph) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(13);
  compiled_layer_matches_eager(kn_nn_lstm(3, 6, 2, true, true, g),
                               kn_randn(KN_SHAPE(2, 5, 3), g, KN_FLOAT32));
  kn_module *enc = kn_nn_transformer_encoder_layer(8, 2, 16, 0.1, true, g);
  kn_nn_train(enc, false);
  compiled_layer_matches_eager(enc, kn_randn(KN_SHAPE(2, 5, 8), g, KN_FLOAT32));
  kn_generator_free(g);
  kn_scope_end();
}
