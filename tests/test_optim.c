/*
** tests/test_optim.c: optimizers, clipping and schedules against torch 1.13
** (tests/fixtures/optim.json, tools/ref/gen_optim.py): the same parameters
** and gradients for 5 steps give the same parameters after every step,
** eagerly and with the step compiled into one graph.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "support/fixture.h"

#define NP 3
#define STEPS 5

static kn_optim_options options_of(const json_t *c) {
  const json_t *o = kn_fixture_param(c, "options");
  kn_optim_options r = {0};
  r.lr = json_number_value(json_object_get(o, "lr"));
  r.momentum = json_number_value(json_object_get(o, "momentum"));
  r.dampening = json_number_value(json_object_get(o, "dampening"));
  r.weight_decay = json_number_value(json_object_get(o, "weight_decay"));
  r.nesterov = json_is_true(json_object_get(o, "nesterov"));
  r.beta1 = json_number_value(json_object_get(o, "beta1"));
  r.beta2 = json_number_value(json_object_get(o, "beta2"));
  r.eps = json_number_value(json_object_get(o, "eps"));
  r.alpha = json_number_value(json_object_get(o, "alpha"));
  r.centered = json_is_true(json_object_get(o, "centered"));
  return r;
}

static kn_optimizer *make(const char *name, kn_tensor **ps, const kn_optim_options *o) {
  if (!strcmp(name, "SGD")) return kn_sgd(ps, NP, o);
  if (!strcmp(name, "Adam")) return kn_adam(ps, NP, o);
  if (!strcmp(name, "AdamW")) return kn_adamw(ps, NP, o);
  return kn_rmsprop(ps, NP, o);
}

static void run_optim_case(const json_t *c, bool compiled, kn_compile_counter *cc) {
  const char *name = kn_fixture_name(c);
  kn_tensor *ps[NP];
  for (int i = 0; i < NP; i++) {
    ps[i] = kn_clone(kn_fixture_tensor(kn_fixture_input(c, i)));
    cr_assert_eq(kn_set_requires_grad(ps[i], true), KN_OK);
  }
  kn_optim_options o = options_of(c);
  kn_optimizer *opt = make(kn_fixture_op(c), ps, &o);
  cr_assert_not_null(opt, "%s: %s", name, kn_last_error());
  kn_compile_options co = {.backend_fn = kn_compile_counter_backend, .backend_ud = cc};
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < NP; i++)
      kn_set_grad(ps[i], kn_fixture_tensor(kn_fixture_input(c, NP + s * NP + i)));
    kn_status st = compiled ? kn_optim_step_compiled(opt, &co) : kn_optim_step(opt);
    cr_assert_eq(st, KN_OK, "%s step %d: %s", name, s, kn_last_error());
    for (int i = 0; i < NP; i++) {
      char why[256];
      cr_assert(kn_fixture_close(ps[i], kn_fixture_output(c, s * NP + i), 1e-5, 1e-6, why,
                                 sizeof why),
                "%s%s: param %d after step %d: %s", name, compiled ? " (compiled)" : "", i,
                s + 1, why);
    }
  }
  cr_assert_eq(kn_optim_steps(opt), STEPS);
  kn_optim_free(opt);
}

static void run_all(bool compiled) {
  kn_fixture *f = kn_fixture_load_named("optim.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int n = 0;
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    if (!kn_fixture_param(c, "opt")) continue;
    kn_compile_counter cc = {0, 0, "eager"};
    kn_scope_begin();
    run_optim_case(c, compiled, &cc);
    kn_scope_end();
    if (compiled) /* the first step is eager (it creates the state); then one graph */
      cr_assert_eq(cc.frame_count, 1, "%s: %d graphs", kn_fixture_name(c), cc.frame_count);
    n++;
  }
  cr_assert_eq(n, 10);
  kn_fixture_free(f);
}

Test(optim, eager_steps_match_torch) { run_all(false); }
Test(optim, compiled_steps_match_torch_in_one_graph) { run_all(true); }

Test(optim, clip_grad_norm_matches_torch) {
  kn_fixture *f = kn_fixture_load_named("optim.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int n = 0;
  for (int k = 0; k < kn_fixture_ncases(f); k++) {
    const json_t *c = kn_fixture_case(f, k);
    if (strcmp(kn_fixture_op(c), "clip_grad_norm_")) continue;
    kn_scope_begin();
    kn_tensor *ps[NP];
    for (int i = 0; i < NP; i++) {
      kn_tensor *g = kn_fixture_tensor(kn_fixture_input(c, i));
      ps[i] = kn_zeros(kn_ndim(g), kn_sizes(g), KN_FLOAT32);
      kn_set_requires_grad(ps[i], true);
      kn_set_grad(ps[i], kn_clone(g));
    }
    const json_t *nt = kn_fixture_param(c, "norm_type");
    double norm_type = json_is_string(nt) ? INFINITY : json_number_value(nt);
    double total = 0;
    cr_assert_eq(kn_clip_grad_norm(ps, NP, kn_fixture_param_double(c, "max_norm", 0), norm_type,
                                   &total), KN_OK, "%s", kn_last_error());
    char why[256];
    for (int i = 0; i < NP; i++)
      cr_assert(kn_fixture_close(kn_grad(ps[i]), kn_fixture_output(c, i), 1e-5, 1e-7, why,
                                 sizeof why), "%s: grad %d: %s", kn_fixture_name(c), i, why);
    kn_tensor *tt = kn_from_doubles(&total, KN_SHAPE(1));
    cr_assert(kn_fixture_close(tt, kn_fixture_output(c, NP), 1e-5, 0, why, sizeof why),
              "%s: total norm: %s", kn_fixture_name(c), why);
    kn_scope_end();
    n++;
  }
  /* the fixture's clip_l2, clip_l2_noop, clip_inf and clip_l1 */
  cr_assert_eq(n, 4, "ran %d clip_grad_norm_ cases of optim.json, expected 4", n);
  kn_fixture_free(f);
}

Test(optim, schedules_match_torch) {
  kn_fixture *f = kn_fixture_load_named("optim.json");
  int n = 0;
  for (int k = 0; k < kn_fixture_ncases(f); k++) {
    const json_t *c = kn_fixture_case(f, k);
    const json_t *kind = kn_fixture_param(c, "kind");
    if (!kind) continue;
    const char *ks = json_string_value(kind);
    kn_lr_schedule s = {.kind = !strcmp(ks, "step")     ? KN_LR_STEP
                                : !strcmp(ks, "cosine") ? KN_LR_COSINE
                                                        : KN_LR_LINEAR,
                        .step_size = kn_fixture_param_int(c, "step_size", 0),
                        .gamma = kn_fixture_param_double(c, "gamma", 0),
                        .t_max = kn_fixture_param_int(c, "t_max", 0),
                        .eta_min = kn_fixture_param_double(c, "eta_min", 0),
                        .start_factor = kn_fixture_param_double(c, "start_factor", 0),
                        .end_factor = kn_fixture_param_double(c, "end_factor", 0),
                        .total_iters = kn_fixture_param_int(c, "total_iters", 0)};
    kn_scope_begin();
    double lrs[12];
    for (int e = 0; e < 12; e++) lrs[e] = kn_lr_at(&s, 0.1, e);
    char why[256];
    cr_assert(kn_fixture_close(kn_from_doubles(lrs, KN_SHAPE(12)), kn_fixture_output(c, 0), 1e-9,
                               1e-12, why, sizeof why), "%s: %s", kn_fixture_name(c), why);
    kn_scope_end();
    n++;
  }
  cr_assert_eq(n, 3);
  kn_lr_schedule bad = {.kind = KN_LR_STEP, .step_size = 0};
  cr_assert(isnan(kn_lr_at(&bad, 0.1, 1)));
  kn_fixture_free(f);
}

Test(optim, lr_changes_do_not_recompile_and_bad_hyperparameters_are_errors) {
  kn_scope_begin();
  kn_tensor *p = kn_ones(KN_SHAPE(4), KN_FLOAT32);
  kn_set_requires_grad(p, true);
  kn_optimizer *opt = kn_sgd(&p, 1, &(kn_optim_options){.lr = 0.5, .momentum = 0.5});
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options co = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  for (int s = 0; s < 4; s++) {
    kn_set_grad(p, kn_ones(KN_SHAPE(4), KN_FLOAT32));
    cr_assert_eq(kn_optim_set_lr(opt, 0.5 / (s + 1)), KN_OK);
    cr_assert_eq(kn_optim_step_compiled(opt, &co), KN_OK, "%s", kn_last_error());
  }
  /* buf: 1, 1.5, 1.75, 1.875; p = 1 - (0.5*1 + 0.25*1.5 + 0.5/3*1.75 + 0.125*1.875) */
  double expect = 1 - (0.5 + 0.375 + 1.75 / 6 + 0.234375);
  cr_assert_float_eq(kn_get(p, (int64_t[]){0}), expect, 1e-6);
  cr_assert_eq(cc.frame_count, 1);
  kn_optim_free(opt);
  cr_assert_null(kn_adam(&p, 1, &(kn_optim_options){.lr = -1}));
  cr_assert_str_eq(kn_last_error(), "Invalid learning rate: -1");
  cr_assert_null(kn_adam(&p, 1, &(kn_optim_options){.beta1 = 1.5}));
  cr_assert_str_eq(kn_last_error(), "Invalid beta parameter at index 0: 1.5");
  kn_optimizer *adam = kn_adam(&p, 1, NULL); /* set_lr: the same rule */
  cr_assert_eq(kn_optim_set_lr(adam, -1), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "Invalid learning rate: -1");
  cr_assert_eq(kn_optim_lr(adam), 1e-3);
  kn_optim_free(adam);
  cr_assert_null(kn_sgd(&p, 1, NULL));
  kn_tensor *nograd = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  cr_assert_null(kn_adam(&nograd, 1, NULL));
  cr_assert(strstr(kn_last_error(), "requires grad"), "%s", kn_last_error());
  kn_scope_end();
}

/* 40 parameters with Adam's state are 161 tensor inputs to one graph (the
** capture frontend used to stop at 64 and its guard check overflowed). */
Test(optim, compiled_adam_over_many_parameters_matches_eager) {
  enum { N = 40 };
  kn_scope_begin();
  kn_generator *g = kn_generator_new(5);
  kn_tensor *a[N], *b[N], *grads[N];
  for (int i = 0; i < N; i++) {
    a[i] = kn_randn(KN_SHAPE(1 + i % 7, 3), g, KN_FLOAT32);
    b[i] = kn_clone(a[i]);
    grads[i] = kn_randn(KN_SHAPE(1 + i % 7, 3), g, KN_FLOAT32);
    kn_set_requires_grad(a[i], true), kn_set_requires_grad(b[i], true);
  }
  kn_optim_options o = {.lr = 0.01, .weight_decay = 0.1};
  kn_optimizer *eager = kn_adamw(a, N, &o), *comp = kn_adamw(b, N, &o);
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options co = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  for (int s = 0; s < 4; s++) {
    for (int i = 0; i < N; i++) kn_set_grad(a[i], grads[i]), kn_set_grad(b[i], grads[i]);
    cr_assert_eq(kn_optim_step(eager), KN_OK);
    cr_assert_eq(kn_optim_step_compiled(comp, &co), KN_OK, "%s", kn_last_error());
  }
  char why[256];
  for (int i = 0; i < N; i++)
    cr_assert(kn_tensors_close(b[i], a[i], 1e-6, 1e-7, true, why, sizeof why), "%d: %s", i, why);
  cr_assert_eq(cc.frame_count, 1, "%d graphs", cc.frame_count);
  kn_optim_free(eager), kn_optim_free(comp);
  kn_generator_free(g);
  kn_scope_end();
}
