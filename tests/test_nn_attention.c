/*
** test_nn_attention.c: MultiheadAttention and TransformerEncoderLayer with
** attention masks (attn_mask bool/float, [L, S] / [N * heads, L, S],
** key_padding_mask bool/float, is_causal) against torch 1.13
** (tests/fixtures/attention.json, tools/ref/gen_attention.py): outputs,
** averaged attention weights and the gradients of every input and parameter,
** eagerly and compiled on the eager, aot_eager and inductor backends.
** Finite differences (float64) check the gradients of queries, keys,
** values, a float mask and every parameter; is_causal is checked against the
** explicit causal mask (a second implementation), fully masked rows give
** NaN as in torch, and bad masks fail naming what was expected.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dynamo/dynamo.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/fixture.h"
#include "support/gradcheck.h"

/* -O0: generated code compiles faster, with the same results. */
static void setup(void) {
  kn_test_dynamo_setup();
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
}
TestSuite(attention, .init = setup, .fini = kn_test_dynamo_teardown, .timeout = 600);

/* ---- one fixture case ---------------------------------------------------------------- */

typedef struct acase {
  const json_t *c;
  kn_module *m;
  bool mha, need_weights;
  kn_tensor *role[5]; /* query, key, value, attn_mask, key_padding_mask (NULL: absent) */
  int nin;
  kn_tensor *in[32];       /* every fixture input in order (state: the module's tensor) */
  const char *state[32];   /* state name of input i, or NULL */
} acase;

static const char *const ROLES[5] = {"query", "key", "value", "attn_mask", "key_padding_mask"};

static kn_module *build(const json_t *cfg, bool mha) {
  int64_t heads = json_integer_value(json_object_get(cfg, mha ? "heads" : "nhead"));
  bool bf = json_is_true(json_object_get(cfg, "batch_first"));
  if (mha)
    return kn_nn_multihead_attention(json_integer_value(json_object_get(cfg, "e")), heads, 0.0,
                                     bf, NULL);
  return kn_nn_transformer_encoder_layer(json_integer_value(json_object_get(cfg, "d")), heads,
                                         json_integer_value(json_object_get(cfg, "ff")), 0.0, bf,
                                         NULL);
}

static void load(acase *a, const json_t *c) {
  memset(a, 0, sizeof *a);
  a->c = c;
  a->mha = !strcmp(kn_fixture_op(c), "mha");
  a->need_weights = a->mha && kn_fixture_param_bool(c, "need_weights", false);
  a->m = build(kn_fixture_param(c, "cfg"), a->mha);
  cr_assert_not_null(a->m, "%s", kn_last_error());
  const json_t *roles = kn_fixture_param(c, "roles");
  a->nin = (int)json_array_size(roles);
  for (int i = 0; i < a->nin; i++) {
    const char *r = json_string_value(json_array_get(roles, (size_t)i));
    kn_tensor *t = kn_fixture_tensor(kn_fixture_input(c, i));
    cr_assert_not_null(t, "%s", kn_last_error());
    if (!strncmp(r, "state:", 6)) {
      a->state[i] = r + 6;
      a->in[i] = kn_module_get(a->m, r + 6);
      cr_assert_not_null(a->in[i], "%s: no %s", kn_fixture_name(c), r);
      bool prev = kn_no_grad_begin();
      cr_assert_eq(kn_copy_(a->in[i], t), KN_OK);
      kn_no_grad_end(prev);
      continue;
    }
    a->in[i] = t;
    for (int k = 0; k < 5; k++)
      if (!strcmp(r, ROLES[k])) a->role[k] = t;
  }
}

static kn_attention_mask mask_of(kn_tensor *const *role, bool causal) {
  return (kn_attention_mask){role[3], role[4], causal};
}

/* The call itself: out and (mha with need_weights) the weights. */
static kn_tensor *call(kn_module *m, bool mha, kn_tensor *const *role, bool causal,
                       kn_tensor **w) {
  kn_attention_mask mk = mask_of(role, causal);
  if (mha) return kn_nn_multihead_attention_forward(m, role[0], role[1], role[2], &mk, w);
  return kn_nn_transformer_encoder_layer_forward(m, role[0], &mk);
}

/* ud of the compiled form: bit 0 mha, bit 1 need_weights, bit 2 is_causal. */
static kn_value attn_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs;
  int flags = (int)(intptr_t)ud;
  kn_tensor *role[5];
  for (int k = 0; k < 5; k++) role[k] = args[k + 1].kind == KN_VTENSOR ? args[k + 1].u.t : NULL;
  kn_tensor *w = NULL;
  kn_tensor *y = call(args[0].u.m, flags & 1, role, flags & 4, (flags & 2) ? &w : NULL);
  if (!(flags & 2)) return kn_vtensor(y);
  return kn_tuple(2, (kn_value[]){kn_vtensor(y), kn_vtensor(w)});
}

/* Run the case eagerly (backend NULL) or compiled; outs[0..n) are in the
** scope. Returns n. */
static int run(acase *a, const char *backend, bool causal, kn_tensor **outs) {
  int flags = a->mha | (a->need_weights << 1) | (causal << 2);
  if (!backend) {
    outs[0] = call(a->m, a->mha, a->role, causal, a->need_weights ? &outs[1] : NULL);
    cr_assert_not_null(outs[0], "%s: %s", kn_fixture_name(a->c), kn_last_error());
    return a->need_weights ? 2 : 1;
  }
  kn_compile_options o = {.backend = backend};
  kn_compiled *f = kn_compile_fn(attn_fn, (void *)(intptr_t)flags, 6, "attn_fn", __FILE__,
                                 __LINE__, &o);
  kn_value args[6] = {kn_vmodule(a->m)}, out;
  for (int k = 0; k < 5; k++) args[k + 1] = a->role[k] ? kn_vtensor(a->role[k]) : kn_vnone();
  cr_assert_eq(kn_call(f, args, 6, &out), KN_OK, "%s on %s: %s", kn_fixture_name(a->c), backend,
               kn_last_error());
  int n = out.kind == KN_VTUPLE ? out.n : 1;
  for (int k = 0; k < n; k++) /* keep them in the scope past the release */
    outs[k] = kn_clone(out.kind == KN_VTUPLE ? out.u.items[k].u.t : out.u.t);
  kn_value_release(out);
  kn_compiled_free(f);
  return n;
}

static void check_case(acase *a, const char *backend) {
  const char *name = kn_fixture_name(a->c);
  const char *how = backend ? backend : "eagerly";
  kn_nn_zero_grad(a->m);
  for (int i = 0; i < a->nin; i++)
    if (!a->state[i] && kn_requires_grad(a->in[i])) kn_set_grad(a->in[i], NULL);
  kn_tensor *outs[2] = {NULL, NULL};
  int n = run(a, backend, false, outs);
  cr_assert_eq(n, kn_fixture_noutputs(a->c), "%s %s: %d outputs", name, how, n);
  char why[256];
  for (int k = 0; k < n; k++)
    cr_assert(kn_fixture_close(outs[k], kn_fixture_output(a->c, k), 1e-4, 1e-5, why, sizeof why),
              "%s %s, output %d: %s", name, how, k, why);
  if (!kn_fixture_grad_output(a->c, 0)) return;
  kn_tensor *loss = NULL;
  for (int k = 0; k < n; k++) {
    kn_tensor *term = kn_sum(kn_mul(outs[k], kn_fixture_tensor(kn_fixture_grad_output(a->c, k))));
    loss = loss ? kn_add(loss, term) : term;
  }
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s %s: %s", name, how, kn_last_error());
  for (int i = 0; i < a->nin; i++) {
    const json_t *g = kn_fixture_grad(a->c, i);
    if (!g) continue;
    kn_tensor *got = kn_grad(a->in[i]);
    cr_assert_not_null(got, "%s %s: input %d (%s) has no gradient", name, how, i,
                       a->state[i] ? a->state[i] : "a mask or input");
    cr_assert(kn_fixture_close(got, g, 1e-3, 1e-4, why, sizeof why), "%s %s, gradient of %s: %s",
              name, how, a->state[i] ? a->state[i] : json_string_value(json_array_get(
                                                         kn_fixture_param(a->c, "roles"),
                                                         (size_t)i)), why);
  }
}

static void each_case(const char *backend, const char *only) {
  kn_fixture *f = kn_fixture_load_named("attention.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    if (only && !strstr(only, kn_fixture_name(c))) continue;
    kn_scope_begin();
    acase a;
    load(&a, c);
    check_case(&a, backend);
    kn_module_free(a.m);
    kn_scope_end();
    kn_reset();
  }
  kn_fixture_free(f);
}

Test(attention, masks_match_torch_eagerly) { each_case(NULL, NULL); }
Test(attention, masks_match_torch_on_the_eager_backend) { each_case("eager", NULL); }
Test(attention, masks_match_torch_on_aot_eager) { each_case("aot_eager", NULL); }
/* one graph per case is compiled to C: the cases that cover every mask kind */
Test(attention, masks_match_torch_on_inductor) {
  each_case("inductor", "mha_causal_and_padding mha_float_mask_2d_with_grad mha_bool_mask_3d "
                        "mha_float_padding mha_cross_separate_kv mha_fully_masked_row_nan "
                        "encoder_causal_float_and_padding");
}

/* ---- is_causal -------------------------------------------------------------------------- */

/* is_causal without a mask gives what the explicit causal mask gives (a bool
** triu mask, and kn_nn_square_subsequent_mask), and is only a hint when a
** mask is given. */
Test(attention, is_causal_is_the_causal_mask) {
  const char *backends[] = {NULL, "eager", "aot_eager", "inductor"};
  kn_fixture *f = kn_fixture_load_named("attention.json");
  for (int b = 0; b < 4; b++) {
    kn_scope_begin();
    acase a;
    load(&a, kn_fixture_find(f, "mha_causal_and_padding"));
    kn_tensor *ref[2], *got[2];
    run(&a, NULL, false, ref);
    kn_tensor *given = a.role[3];
    a.role[3] = NULL;
    run(&a, backends[b], true, got);
    char why[256];
    for (int k = 0; k < 2; k++)
      cr_assert(kn_tensors_close(got[k], ref[k], 1e-5, 1e-6, true, why, sizeof why),
                "%s, output %d: %s", backends[b] ? backends[b] : "eager", k, why);
    a.role[3] = kn_nn_square_subsequent_mask(5);
    run(&a, backends[b], false, got);
    cr_assert(kn_tensors_close(got[0], ref[0], 1e-5, 1e-6, true, why, sizeof why), "%s", why);
    /* a hint: the given mask wins (here a mask that is not causal at all) */
    a.role[3] = kn_logical_not(given);
    kn_tensor *nc[2];
    run(&a, NULL, false, nc);
    run(&a, backends[b], true, got);
    cr_assert(kn_tensors_close(got[0], nc[0], 1e-5, 1e-6, true, why, sizeof why), "%s", why);
    kn_module_free(a.m);
    kn_scope_end();
    kn_reset();
  }
  kn_fixture_free(f);
}

Test(attention, square_subsequent_mask_and_uint8_masks) {
  kn_scope_begin();
  kn_tensor *m = kn_nn_square_subsequent_mask(3);
  cr_assert_eq(kn_tensor_dtype(m), KN_FLOAT32);
  const float *p = kn_data(m);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      cr_expect(j > i ? isinf(p[i * 3 + j]) && p[i * 3 + j] < 0 : p[i * 3 + j] == 0, "[%d, %d]", i,
                j);
  cr_expect_null(kn_nn_square_subsequent_mask(-1));
  /* a uint8 mask is read as bool (torch converts it, with a deprecation warning) */
  kn_fixture *f = kn_fixture_load_named("attention.json");
  acase a;
  load(&a, kn_fixture_find(f, "mha_causal_and_padding"));
  kn_tensor *ref[2], *got[2];
  run(&a, NULL, false, ref);
  a.role[3] = kn_to(a.role[3], KN_UINT8);
  a.role[4] = kn_to(a.role[4], KN_UINT8);
  run(&a, NULL, false, got);
  char why[256];
  cr_assert(kn_tensors_close(got[0], ref[0], 0, 0, true, why, sizeof why), "%s", why);
  kn_module_free(a.m);
  kn_fixture_free(f);
  kn_scope_end();
}

/* ---- finite differences (float64 parameters in place of the module's) ----------------- */

typedef struct subst_map {
  kn_module *root;
  int n;
  const char *names[16];
  kn_tensor *t[16];
} subst_map;

static kn_status subst64(void *ud, kn_module *m, const char *path, kn_tensor **out) {
  subst_map *s = ud;
  for (int i = 0; m == s->root && i < s->n; i++)
    if (!strcmp(path, s->names[i])) *out = s->t[i];
  return KN_OK;
}

static kn_status collect64(void *ud, const char *name, kn_tensor *t) {
  subst_map *s = ud;
  kn_tensor *c = kn_detach(kn_to(t, KN_FLOAT64)); /* a fresh float64 leaf */
  kn_set_requires_grad(c, true);
  s->names[s->n] = strdup(name);
  s->t[s->n++] = c;
  return KN_OK;
}

typedef struct gc_case {
  kn_module *m;
  bool mha;
  int nroles;     /* inputs[0..nroles) are the roles present, in role order */
  int which[5];   /* role index of inputs[k] */
  subst_map *sm;
} gc_case;

static kn_tensor *gc_fn(kn_tensor *const *x, int n, void *ud) {
  gc_case *g = ud;
  kn_tensor *role[5] = {NULL, NULL, NULL, NULL, NULL};
  for (int k = 0; k < g->nroles; k++) role[g->which[k]] = x[k];
  for (int k = g->nroles; k < n; k++) g->sm->t[k - g->nroles] = x[k];
  kn__module_set_subst(subst64, g->sm);
  kn_tensor *w = NULL, *y = call(g->m, g->mha, role, false, g->mha ? &w : NULL);
  kn__module_set_subst(NULL, NULL);
  if (!g->mha || !y) return y;
  return kn_cat((kn_tensor *[]){kn_flatten(y, 0, -1), kn_flatten(w, 0, -1)}, 2, 0);
}

static kn_tensor *leaf64(int64_t a, int64_t b, int64_t c, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(c ? 3 : 2, c ? (int64_t[]){a, b, c} : (int64_t[]){a, b}, g, KN_FLOAT64);
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

static void gradcheck_module(kn_module *m, bool mha, kn_tensor *const *role) {
  subst_map sm = {.root = m};
  cr_assert_eq(kn_nn_named_tensors(m, true, collect64, &sm), KN_OK);
  gc_case g = {.m = m, .mha = mha, .sm = &sm};
  kn_tensor *in[24];
  for (int k = 0; k < 5; k++)
    if (role[k]) g.which[g.nroles] = k, in[g.nroles++] = role[k];
  for (int i = 0; i < sm.n; i++) in[g.nroles + i] = sm.t[i];
  /* the float64 stand-ins are the ones used: each gets a gradient */
  kn_scope_begin();
  cr_assert_eq(kn_backward(kn_sum(gc_fn(in, g.nroles + sm.n, &g)), NULL), KN_OK, "%s",
               kn_last_error());
  for (int i = 0; i < sm.n; i++) {
    cr_assert_not_null(kn_grad(sm.t[i]), "%s was not used", sm.names[i]);
    kn_set_grad(sm.t[i], NULL);
  }
  kn_scope_end();
  char why[1024] = "";
  kn_gradcheck_opts o = KN_GRADCHECK_DEFAULTS;
  bool ok = kn_gradcheck_ex(gc_fn, in, g.nroles + sm.n, &g, &o, why, sizeof why);
  for (int i = 0; i < sm.n; i++) free((void *)sm.names[i]);
  cr_assert(ok, "%s", why);
}

Test(attention, gradients_match_finite_differences) {
  kn_scope_begin();
  kn_module *mha = kn_nn_multihead_attention(4, 2, 0.0, true, NULL);
  /* cross-attention: query [2, 3, 4], key and value [2, 4, 4], a float mask
  ** that requires grad, and padding */
  kn_tensor *kp = kn_from_ints((int64_t[]){0, 0, 0, 0, 0, 0, 1, 1}, KN_SHAPE(2, 4));
  gradcheck_module(mha, true, (kn_tensor *[]){leaf64(2, 3, 4, 1), leaf64(2, 4, 4, 2),
                                              leaf64(2, 4, 4, 3), leaf64(3, 4, 0, 4),
                                              kn_to(kp, KN_BOOL)});
  /* self-attention with a bool causal mask */
  kn_tensor *causal = kn_lt_scalar(kn_nn_square_subsequent_mask(3), kn_float(0));
  gradcheck_module(mha, true, (kn_tensor *[]){leaf64(2, 3, 4, 5), NULL, NULL, causal, NULL});
  kn_module_free(mha);
  kn_module *enc = kn_nn_transformer_encoder_layer(4, 2, 6, 0.0, true, NULL);
  gradcheck_module(enc, false, (kn_tensor *[]){leaf64(2, 3, 4, 6), NULL, NULL,
                                               kn_to(kn_nn_square_subsequent_mask(3), KN_FLOAT64),
                                               kn_to(kn_slice(kp, 1, 1, 4, 1), KN_BOOL)});
  kn_module_free(enc);
  kn_scope_end();
}

/* ---- compiled once over (N, L) ------------------------------------------------------------ */

static kn_value causal_step(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_attention_mask mk = {.key_padding_mask = args[2].u.t, .is_causal = true};
  return kn_vtensor(kn_sum(kn_nn_transformer_encoder_layer_forward(args[0].u.m, args[1].u.t, &mk)));
}

static void note_failure(const kn_guard_failure *f, void *ud) {
  int *named_mask = ud;
  if (strstr(f->reason, "L['c']")) {
    cr_log_error("a guard on the padding mask failed: %s", f->reason);
    (*named_mask)++;
  }
}

/* A causal encoder layer with padding over several (N, L): the causal mask
** is built from symbolic sizes and the masks are checked symbolically, so
** no guard on the masks ever fails (the recompiles that remain come from
** the 3-D matmuls of the projections, which specialise their flattened
** sizes), and every graph computes what eager computes. */
Test(attention, causal_masks_keep_sizes_symbolic) {
  kn_scope_begin();
  kn_module *enc = kn_nn_transformer_encoder_layer(8, 2, 16, 0.0, true, NULL);
  kn_compile_counter cc = {.inner = "aot_eager"};
  int named_mask = 0;
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = note_failure, .guard_fail_ud = &named_mask};
  kn_compiled *f = kn_compile_fn(causal_step, NULL, 3, "causal_step", __FILE__, __LINE__, &o);
  int64_t shapes[4][2] = {{2, 5}, {3, 7}, {4, 9}, {5, 6}};
  for (int s = 0; s < 4; s++) {
    kn_tensor *x = kn_randn(KN_SHAPE(shapes[s][0], shapes[s][1], 8), NULL, KN_FLOAT32);
    kn_tensor *pad = kn_lt_scalar(kn_rand(KN_SHAPE(shapes[s][0], shapes[s][1]), NULL, KN_FLOAT32),
                                  kn_float(0.2));
    kn_fill_(kn_select(pad, 1, 0), kn_int(0)); /* no row fully masked */
    kn_value args[3] = {kn_vmodule(enc), kn_vtensor(x), kn_vtensor(pad)}, out;
    cr_assert_eq(kn_call(f, args, 3, &out), KN_OK, "%s", kn_last_error());
    kn_attention_mask mk = {.key_padding_mask = pad, .is_causal = true};
    kn_tensor *ref = kn_sum(kn_nn_transformer_encoder_layer_forward(enc, x, &mk));
    char why[256];
    cr_assert(kn_tensors_close(out.u.t, ref, 1e-4, 1e-4, true, why, sizeof why), "%s", why);
    kn_value_release(out);
  }
  cr_log_info("%d graphs for 4 shapes", cc.frame_count);
  cr_expect_eq(named_mask, 0);
  cr_expect_leq(cc.frame_count, 4);
  kn_compiled_free(f);
  kn_module_free(enc);
  kn_scope_end();
}

/* ---- errors ----------------------------------------------------------------------------- */

static void expect_err(kn_tensor *r, kn_status st, const char *needle) {
  cr_expect_null(r);
  cr_expect_eq(kn_last_status(), st, "status %d: %s", kn_last_status(), kn_last_error());
  cr_expect(strstr(kn_last_error(), needle) != NULL, "'%s' not in: %s", needle, kn_last_error());
}

Test(attention, bad_masks_name_what_was_expected) {
  kn_scope_begin();
  kn_module *m = kn_nn_multihead_attention(8, 2, 0.0, true, NULL);
  kn_tensor *x = kn_randn(KN_SHAPE(2, 5, 8), NULL, KN_FLOAT32);
  kn_attention_mask mk = {.attn_mask = kn_zeros(KN_SHAPE(4, 5), KN_BOOL)};
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_ESHAPE,
             "The shape of the 2D attn_mask is [4, 5], but should be [5, 5]");
  mk.attn_mask = kn_zeros(KN_SHAPE(2, 5, 5), KN_BOOL);
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_ESHAPE,
             "The shape of the 3D attn_mask is [2, 5, 5], but should be [4, 5, 5]");
  mk.attn_mask = kn_zeros(KN_SHAPE(1, 2, 5, 5), KN_BOOL);
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_ESHAPE,
             "attn_mask's dimension 4 is not supported");
  mk.attn_mask = kn_zeros(KN_SHAPE(5, 5), KN_INT64);
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_EDTYPE,
             "Only float, byte, and bool types are supported for attn_mask, not Long");
  mk.attn_mask = kn_zeros(KN_SHAPE(5, 5), KN_FLOAT64);
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_EDTYPE,
             "expected attn_mask of dtype Bool or Float (the query's), found Double");
  mk = (kn_attention_mask){.key_padding_mask = kn_zeros(KN_SHAPE(5, 2), KN_BOOL)};
  expect_err(kn_nn_multihead_attention_forward(m, x, NULL, NULL, &mk, NULL), KN_ESHAPE,
             "expecting key_padding_mask shape of [2, 5] ([N, S]), but got [5, 2]");
  kn_tensor *k = kn_randn(KN_SHAPE(2, 6, 8), NULL, KN_FLOAT32);
  kn_tensor *v = kn_randn(KN_SHAPE(2, 7, 8), NULL, KN_FLOAT32);
  expect_err(kn_nn_multihead_attention_forward(m, x, k, v, NULL, NULL), KN_ESHAPE,
             "key and value must have the same sequence length, found 6 and 7");
  expect_err(kn_nn_multihead_attention_forward(m, x, kn_randn(KN_SHAPE(2, 6, 4), NULL, KN_FLOAT32),
                                               NULL, NULL, NULL),
             KN_ESHAPE, "expected key of shape [N, L, 8]");
  kn_tensor *w = x;
  expect_err(kn_nn_multihead_attention_forward(m, NULL, NULL, NULL, NULL, &w), KN_EINVAL,
             "expected a MultiheadAttention layer and a query");
  cr_expect_null(w, "*attn_weights is cleared on error");
  kn_module *lin = kn_nn_linear(8, 8, true, NULL);
  expect_err(kn_nn_transformer_encoder_layer_forward(lin, x, NULL), KN_EINVAL,
             "expected a TransformerEncoderLayer and an input, found Linear");
  kn_module_free(lin);
  kn_module_free(m);
  kn_scope_end();
}
