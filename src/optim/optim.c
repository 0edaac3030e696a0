/*
** optim/optim.c: SGD, Adam, AdamW and RMSprop (kiln/optim.h), written with
** kiln ops on tensors read from the optimizer's state tree, so the same
** update runs eagerly and inside a compiled function (where the state tree
** is the traced argument and kn_module_get returns its stand-ins).
*/
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/dynamo.h"
#include "kiln/kiln.h"
#include "kiln/optim.h"
#include "optim/optim_int.h"
#include "profiler/profiler.h"

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_RMSPROP } opt_kind;
static const char *const kind_names[] = {"SGD", "Adam", "AdamW", "RMSprop"};
static const char *const step_names[] = {"SGD.step", "Adam.step", "AdamW.step",
                                         "RMSprop.step"};

struct kn_optimizer {
  opt_kind kind;
  kn_optim_options o; /* defaults resolved */
  int n;
  kn_tensor **params; /* retained */
  kn_module *state;   /* owned: "lr", children "<i>" */
  kn_compiled *compiled;
  int64_t steps;
};

/* ---- construction ---------------------------------------------------------------- */
/* The rules every set of hyperparameters obeys, at construction and when a
** checkpoint is loaded (kn__optim_validate): PyTorch's, with its messages.
** The failing kn_optim_options field goes to *field (may be NULL). */
static kn_status check_hyper(const kn_optim_options *o, opt_kind k, const char **field) {
  const struct { const char *field, *what; double v; } checks[] = {
      {"lr", "learning rate", o->lr}, {"eps", "epsilon value", o->eps},
      {"momentum", "momentum value", o->momentum},
      {"weight_decay", "weight_decay value", o->weight_decay},
      {"alpha", "alpha value", k == OPT_RMSPROP ? o->alpha : 0}};
  const char *bad = NULL;
  kn_status st = KN_OK;
  for (size_t i = 0; i < sizeof checks / sizeof *checks && !bad; i++)
    if (!(checks[i].v >= 0))
      bad = checks[i].field,
      st = kn__error(KN_EINVAL, "Invalid %s: %g", checks[i].what, checks[i].v);
  if (!bad && (k == OPT_ADAM || k == OPT_ADAMW)) {
    const double betas[2] = {o->beta1, o->beta2};
    for (int i = 0; i < 2 && !bad; i++)
      if (!(betas[i] >= 0 && betas[i] < 1))
        bad = i ? "beta2" : "beta1",
        st = kn__error(KN_EINVAL, "Invalid beta parameter at index %d: %g", i, betas[i]);
  }
  if (!bad && k == OPT_SGD && o->nesterov && (o->momentum <= 0 || o->dampening != 0))
    bad = "nesterov",
    st = kn__error(KN_EINVAL, "Nesterov momentum requires a momentum and zero dampening");
  if (field) *field = bad;
  return st;
}

static kn_optim_options resolve(const kn_optim_options *in, opt_kind k) {
  kn_optim_options o = in ? *in : (kn_optim_options){0};
  if (o.lr == 0 && k != OPT_SGD) o.lr = k == OPT_RMSPROP ? 1e-2 : 1e-3;
  if (o.beta1 == 0) o.beta1 = 0.9;
  if (o.beta2 == 0) o.beta2 = 0.999;
  if (o.eps == 0) o.eps = 1e-8;
  if (o.alpha == 0) o.alpha = 0.99;
  if (k == OPT_ADAMW && o.weight_decay == 0) o.weight_decay = 1e-2;
  if (o.weight_decay < 0) o.weight_decay = 0;
  return o;
}

/* A 0-d float64 tensor on the device of `like` (owned, in no scope): the
** state of parameters on the GPU lives there, so an update never mixes
** devices or copies from the host. */
static kn_tensor *scalar64(double v, const kn_tensor *like) {
  kn_scope_begin();
  kn_tensor *t = kn_scalar_tensor(kn_float(v), KN_FLOAT64), *d = t;
  if (t && kn_tensor_device(like) == KN_CUDA && kn_to_device(t, KN_CUDA, &d) != KN_OK) d = NULL;
  t = kn_retain(d);
  kn_scope_end();
  return t;
}

static kn_status add_owned(kn_module *m, const char *name, kn_tensor *t, bool param) {
  if (!t) return kn_last_status() ? kn_last_status() : kn__oom();
  kn_status st = param ? kn_module_add_param(m, name, t) : kn_module_add_buffer(m, name, t);
  kn_release(t);
  return st;
}

/* Does parameter i get a float32 master copy (master_weights, a bfloat16 or
** float16 parameter)? */
static bool has_master(const kn_optimizer *opt, int i) {
  kn_dtype dt = kn_tensor_dtype(opt->params[i]);
  return opt->o.master_weights && (dt == KN_BFLOAT16 || dt == KN_FLOAT16);
}

/* The "master" buffer: param widened to float32 (no history). */
static kn_status add_master(kn_module *c, kn_tensor *param) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_tensor *m = kn_to_copy(param, KN_FLOAT32);
  kn_status st = m ? kn_module_add_buffer(c, "master", m) : kn_last_status();
  kn_no_grad_end(prev);
  kn_scope_end();
  return st;
}

static kn_status build_state(kn_optimizer *opt) {
  opt->state = kn_module_new();
  if (!opt->state) return kn__oom();
  kn_status st = add_owned(opt->state, "lr", scalar64(opt->o.lr, opt->params[0]), false);
  for (int i = 0; i < opt->n && st == KN_OK; i++) {
    char name[16];
    snprintf(name, sizeof name, "%d", i);
    kn_module *c = kn_module_new();
    st = c ? kn_module_add_child(opt->state, name, c) : kn__oom();
    if (st != KN_OK) kn_module_free(c);
    if (st == KN_OK) st = kn_module_add_param(c, "param", opt->params[i]);
    if (st == KN_OK && has_master(opt, i)) st = add_master(c, opt->params[i]);
  }
  return st;
}

static kn_optimizer *create(opt_kind k, kn_tensor *const *params, int n,
                            const kn_optim_options *in) {
  kn_optim_options o = resolve(in, k);
  if (n <= 0 || !params) {
    kn__error(KN_EINVAL, "optimizer got an empty parameter list");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!params[i] || !kn_is_leaf(params[i]) || !kn_requires_grad(params[i])) {
      kn__error(KN_EINVAL, "%s: parameter %d must be a leaf tensor that requires grad",
                kind_names[k], i);
      return NULL;
    }
  if (check_hyper(&o, k, NULL) != KN_OK) return NULL;
  kn_optimizer *opt = calloc(1, sizeof *opt);
  kn_tensor **ps = calloc((size_t)n, sizeof *ps);
  if (!opt || !ps) {
    free(opt), free(ps);
    kn__oom();
    return NULL;
  }
  *opt = (kn_optimizer){k, o, n, ps, NULL, NULL, 0};
  for (int i = 0; i < n; i++) ps[i] = kn_retain(params[i]);
  if (build_state(opt) != KN_OK) {
    kn_optim_free(opt);
    return NULL;
  }
  return opt;
}

kn_optimizer *kn_sgd(kn_tensor *const *p, int n, const kn_optim_options *o) {
  if (!o || o->lr == 0) { /* 0 means "not given"; a negative one fails as any other's */
    kn__error(KN_EINVAL, "Invalid learning rate: %g (SGD needs an explicit lr > 0)",
              o ? o->lr : 0.0);
    return NULL;
  }
  return create(OPT_SGD, p, n, o);
}
kn_optimizer *kn_adam(kn_tensor *const *p, int n, const kn_optim_options *o) {
  return create(OPT_ADAM, p, n, o);
}
kn_optimizer *kn_adamw(kn_tensor *const *p, int n, const kn_optim_options *o) {
  return create(OPT_ADAMW, p, n, o);
}
kn_optimizer *kn_rmsprop(kn_tensor *const *p, int n, const kn_optim_options *o) {
  return create(OPT_RMSPROP, p, n, o);
}

void kn_optim_free(kn_optimizer *opt) {
  if (!opt) return;
  kn_compiled_free(opt->compiled);
  kn_module_free(opt->state);
  for (int i = 0; i < opt->n; i++) kn_release(opt->params[i]);
  free(opt->params);
  free(opt);
}

/* ---- state ----------------------------------------------------------------------- */
typedef struct pstate {
  kn_module *root; /* the state tree (or its traced stand-in source) */
  char prefix[24]; /* "<i>." */
  kn_tensor *lr;
  const char *param; /* the tensor updated: "param", or "master" (float32 copy) */
} pstate;

static kn_tensor *get(const pstate *s, const char *name) {
  char path[64];
  snprintf(path, sizeof path, "%s%s", s->prefix, name);
  return kn_module_get(s->root, path);
}

/* The state tree's child of parameter i (borrowed): entry i + 1 after "lr". */
static kn_module *child(const kn_optimizer *opt, int i) {
  int kind;
  kn_tensor *t;
  kn_module *c = NULL;
  kn__module_item(opt->state, i + 1, &kind, &t, &c);
  return c;
}

/* Does parameter i's state hold an entry named name? (Its own entries, so
** a missing one raises no error: kn_module_get would set one, with the
** nearest paths, on every step.) */
static bool holds(const kn_optimizer *opt, int i, const char *name) {
  kn_module *c = child(opt, i);
  for (int k = 0; c && k < kn__module_nitems(c); k++) {
    int kind;
    kn_tensor *t;
    kn_module *sub = NULL;
    const char *nm = kn__module_item(c, k, &kind, &t, &sub);
    if (nm && !strcmp(nm, name)) return true;
  }
  return false;
}

static bool has_state(kn_optimizer *opt, int i) {
  if (opt->kind == OPT_SGD) return opt->o.momentum == 0 || holds(opt, i, "momentum_buffer");
  return holds(opt, i, "step");
}

/* Does opt, with its current options, keep a state entry called name? */
static bool uses_state(const kn_optimizer *opt, const char *name) {
  bool rms = opt->kind == OPT_RMSPROP, adam = opt->kind == OPT_ADAM || opt->kind == OPT_ADAMW;
  if (!strcmp(name, "momentum_buffer"))
    return opt->kind == OPT_SGD ? opt->o.momentum != 0 : rms && opt->o.momentum > 0;
  if (!strcmp(name, "grad_avg")) return rms && opt->o.centered;
  if (!strcmp(name, "square_avg")) return rms;
  if (!strcmp(name, "exp_avg") || !strcmp(name, "exp_avg_sq")) return adam;
  if (!strcmp(name, "step")) return opt->kind != OPT_SGD;
  if (!strcmp(name, "master")) return opt->o.master_weights;
  return true;
}

/* The tensor-shaped state buffers, in the order they are created. */
static const char *const state_bufs[] = {"exp_avg", "exp_avg_sq", "square_avg",
                                         "momentum_buffer", "grad_avg"};

/* A zeros_like(param i) buffer called name in parameter i's state. */
static kn_status add_zeros(kn_optimizer *opt, int i, const char *name) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_tensor *base = has_master(opt, i) ? kn_to(opt->params[i], KN_FLOAT32) : opt->params[i];
  kn_tensor *z = kn_detach(kn_mul_scalar(base, kn_float(0))); /* the updated tensor's dtype */
  kn_status st = z ? kn_module_add_buffer(child(opt, i), name, z) : kn_last_status();
  kn_no_grad_end(prev);
  kn_scope_end();
  return st;
}

/* PyTorch's lazy state: created on the first step that sees a gradient
** (SGD's momentum buffer by its first update instead). */
static kn_status init_state(kn_optimizer *opt, int i) {
  if (opt->kind == OPT_SGD) return KN_OK;
  kn_tensor *step = scalar64(0, opt->params[i]);
  kn_status st = add_owned(child(opt, i), "step", step, false);
  for (size_t k = 0; k < sizeof state_bufs / sizeof *state_bufs && st == KN_OK; k++)
    if (uses_state(opt, state_bufs[k])) st = add_zeros(opt, i, state_bufs[k]);
  return st;
}

/* ---- updates (grad mode off; inside a scope) --------------------------------------- */
static kn_tensor *with_decay(const kn_optimizer *opt, kn_tensor *g, kn_tensor *p) {
  double wd = opt->o.weight_decay;
  return wd != 0 && opt->kind != OPT_ADAMW ? kn_add_scaled(g, p, kn_float(wd)) : g;
}

/* first: the momentum buffer starts as a copy of the first (decayed)
** gradient, PyTorch's lazy initialisation; that step is always eager. */
static kn_status sgd_update(const kn_optimizer *opt, const pstate *s, int i, kn_tensor *g,
                            bool first) {
  const kn_optim_options *o = &opt->o;
  kn_tensor *p = get(s, s->param), *d = with_decay(opt, g, p);
  kn_status st = KN_OK;
  if (o->momentum != 0) {
    if (first) st = kn_module_add_buffer(child(opt, i), "momentum_buffer", kn_clone(d));
    kn_tensor *buf = get(s, "momentum_buffer");
    if (!first && st == KN_OK) {
      st = kn_mul_scalar_(buf, kn_float(o->momentum));
      if (st == KN_OK) st = kn_add_scaled_(buf, d, kn_float(1 - o->dampening));
    }
    d = o->nesterov ? kn_add_scaled(d, buf, kn_float(o->momentum)) : buf;
  }
  return st == KN_OK ? kn_sub_(p, kn_mul(d, s->lr)) : st;
}

/* 1 - beta^step as a 0-d tensor. */
static kn_tensor *bias_correction(double beta, kn_tensor *step) {
  return kn_add_scalar(kn_neg(kn_scalar_pow(kn_float(beta), step)), kn_float(1));
}

static kn_status adam_update(const kn_optimizer *opt, const pstate *s, kn_tensor *g) {
  const kn_optim_options *o = &opt->o;
  kn_tensor *p = get(s, s->param), *step = get(s, "step");
  kn_tensor *ea = get(s, "exp_avg"), *eas = get(s, "exp_avg_sq");
  kn_status st = kn_add_scalar_(step, kn_float(1));
  if (st == KN_OK && opt->kind == OPT_ADAMW && o->weight_decay != 0)
    st = kn_mul_(p, kn_add_scalar(kn_mul_scalar(s->lr, kn_float(-o->weight_decay)),
                                  kn_float(1)));
  g = with_decay(opt, g, p);
  if (st == KN_OK) st = kn_mul_scalar_(ea, kn_float(o->beta1));
  if (st == KN_OK) st = kn_add_scaled_(ea, g, kn_float(1 - o->beta1));
  if (st == KN_OK) st = kn_mul_scalar_(eas, kn_float(o->beta2));
  if (st == KN_OK) st = kn_add_scaled_(eas, kn_mul(g, g), kn_float(1 - o->beta2));
  if (st != KN_OK) return st;
  kn_tensor *step_size = kn_div(s->lr, bias_correction(o->beta1, step));
  kn_tensor *bc2_sqrt = kn_sqrt(bias_correction(o->beta2, step));
  kn_tensor *denom = kn_add_scalar(kn_div(kn_sqrt(eas), bc2_sqrt), kn_float(o->eps));
  return kn_sub_(p, kn_mul(kn_div(ea, denom), step_size));
}

static kn_status rmsprop_update(const kn_optimizer *opt, const pstate *s, kn_tensor *g) {
  const kn_optim_options *o = &opt->o;
  kn_tensor *p = get(s, s->param), *sq = get(s, "square_avg");
  kn_status st = kn_add_scalar_(get(s, "step"), kn_float(1));
  g = with_decay(opt, g, p);
  if (st == KN_OK) st = kn_mul_scalar_(sq, kn_float(o->alpha));
  if (st == KN_OK) st = kn_add_scaled_(sq, kn_mul(g, g), kn_float(1 - o->alpha));
  kn_tensor *avg = sq;
  if (st == KN_OK && o->centered) {
    kn_tensor *ga = get(s, "grad_avg");
    st = kn_mul_scalar_(ga, kn_float(o->alpha));
    if (st == KN_OK) st = kn_add_scaled_(ga, g, kn_float(1 - o->alpha));
    avg = kn_sub(sq, kn_mul(ga, ga));
  }
  if (st != KN_OK) return st;
  avg = kn_add_scalar(kn_sqrt(avg), kn_float(o->eps));
  kn_tensor *upd = kn_div(g, avg);
  if (o->momentum > 0) {
    kn_tensor *buf = get(s, "momentum_buffer");
    st = kn_mul_scalar_(buf, kn_float(o->momentum));
    if (st == KN_OK) st = kn_add_(buf, upd);
    upd = buf;
  }
  return st == KN_OK ? kn_sub_(p, kn_mul(upd, s->lr)) : st;
}

/* Update parameter i from gradient g, reading tensors through root. */
static kn_status update(const kn_optimizer *opt, kn_module *root, int i, kn_tensor *g,
                        bool first) {
  bool master = has_master(opt, i);
  pstate s = {root, "", kn_module_get(root, "lr"), master ? "master" : "param"};
  snprintf(s.prefix, sizeof s.prefix, "%d.", i);
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  if (master) g = kn_to(g, KN_FLOAT32); /* the update runs in float32 */
  kn_status st = opt->kind == OPT_SGD       ? sgd_update(opt, &s, i, g, first)
                 : opt->kind == OPT_RMSPROP ? rmsprop_update(opt, &s, g)
                                            : adam_update(opt, &s, g);
  if (st == KN_OK && master) st = kn_copy_(get(&s, "param"), get(&s, "master"));
  kn_no_grad_end(prev);
  kn_scope_end();
  return st;
}

static kn_status step_impl(kn_optimizer *opt);

kn_status kn_optim_step(kn_optimizer *opt) {
  if (!opt) return kn__error(KN_EINVAL, "kn_optim_step: expected an optimizer, found NULL");
  if (!KN__PROF_ON()) return step_impl(opt);
  int64_t t0 = kn__prof_range_begin();
  kn_status st = step_impl(opt);
  kn__prof_range_end("Optimizer.step#", step_names[opt->kind], t0);
  return st;
}

static kn_status step_impl(kn_optimizer *opt) {
  for (int i = 0; i < opt->n; i++) {
    kn_tensor *g = kn_grad(opt->params[i]);
    if (!g) continue;
    bool first = !has_state(opt, i);
    kn_status st = first ? init_state(opt, i) : KN_OK;
    if (st == KN_OK) st = update(opt, opt->state, i, g, first);
    if (st != KN_OK) return st;
  }
  opt->steps++;
  return KN_OK;
}

kn_value kn_optim_step_fn(const kn_value *args, int nargs, void *ud) {
  kn_optimizer *opt = ud;
  if (nargs != 2 || args[0].kind != KN_VMODULE || args[1].kind != KN_VLIST ||
      args[1].n != opt->n) {
    kn__error(KN_EINVAL, "kn_optim_step_fn: expected (state module, list of %d gradients)",
              opt->n);
    return kn_vnone();
  }
  for (int i = 0; i < opt->n; i++)
    if (update(opt, args[0].u.m, i, args[1].u.items[i].u.t, false) != KN_OK) break;
  return kn_vnone();
}

kn_status kn_optim_step_compiled(kn_optimizer *opt, const kn_compile_options *copts) {
  if (!opt) return kn__error(KN_EINVAL, "kn_optim_step_compiled: expected an optimizer");
  kn_value *gs = calloc((size_t)opt->n, sizeof *gs);
  if (!gs) return kn__oom();
  bool all_state = true;
  kn_status st = KN_OK;
  for (int i = 0; i < opt->n && st == KN_OK; i++) {
    kn_tensor *g = kn_grad(opt->params[i]);
    if (!g) st = kn__error(KN_EINVAL, "kn_optim_step_compiled: parameter %d has no gradient", i);
    gs[i] = kn_vtensor(g);
    all_state &= has_state(opt, i);
  }
  if (st == KN_OK && !all_state) st = kn_optim_step(opt); /* the first step creates state */
  else if (st == KN_OK) {
    if (!opt->compiled)
      opt->compiled = kn_compile_fn(kn_optim_step_fn, opt, 2, "optimizer_step", __FILE__,
                                    __LINE__, copts);
    kn_value args[2] = {kn_vmodule(opt->state), kn_vlist(opt->n, gs)}, out;
    bool prev = kn_no_grad_begin();
    st = opt->compiled ? kn_call(opt->compiled, args, 2, &out) : kn_last_status();
    kn_no_grad_end(prev);
    if (st == KN_OK) kn_value_release(out), opt->steps++;
  }
  free(gs);
  return st;
}

/* ---- accessors ------------------------------------------------------------------------ */
void kn_optim_zero_grad(kn_optimizer *opt) {
  for (int i = 0; opt && i < opt->n; i++) kn_set_grad(opt->params[i], NULL);
}

double kn_optim_lr(const kn_optimizer *opt) { return opt ? opt->o.lr : NAN; }

kn_status kn_optim_set_lr(kn_optimizer *opt, double lr) {
  if (!opt) return kn__error(KN_EINVAL, "kn_optim_set_lr: expected an optimizer, found NULL");
  kn_optim_options o = opt->o;
  o.lr = lr;
  kn_status st = check_hyper(&o, opt->kind, NULL); /* the constructors' rules */
  if (st != KN_OK) return st;
  opt->o.lr = lr;
  return kn_fill_(kn_module_get(opt->state, "lr"), kn_float(lr));
}

int64_t kn_optim_steps(const kn_optimizer *opt) { return opt ? opt->steps : 0; }
const char *kn_optim_name(const kn_optimizer *opt) { return opt ? kind_names[opt->kind] : NULL; }
kn_module *kn_optim_state(kn_optimizer *opt) { return opt ? opt->state : NULL; }
int kn_optim_num_params(const kn_optimizer *opt) { return opt ? opt->n : 0; }
kn_tensor *kn__optim_param(const kn_optimizer *opt, int i) { return opt->params[i]; }

/* ---- checkpoint support ------------------------------------------------------------ */
kn_status kn__optim_ensure_state(kn_optimizer *opt, int i) {
  if (opt->kind != OPT_SGD && !holds(opt, i, "step")) return init_state(opt, i);
  kn_status st = KN_OK;
  for (size_t k = 0; k < sizeof state_bufs / sizeof *state_bufs && st == KN_OK; k++)
    if (uses_state(opt, state_bufs[k]) && !holds(opt, i, state_bufs[k]))
      st = add_zeros(opt, i, state_bufs[k]);
  return st;
}

bool kn__optim_uses_state(const kn_optimizer *opt, const char *name) {
  return uses_state(opt, name);
}

#define FIELD(name, is_bool) {#name, offsetof(kn_optim_options, name), is_bool}
static const kn__optim_field sgd_fields[] = {FIELD(momentum, false), FIELD(dampening, false),
                                             FIELD(weight_decay, false), FIELD(nesterov, true)};
static const kn__optim_field adam_fields[] = {FIELD(beta1, false), FIELD(beta2, false),
                                              FIELD(eps, false), FIELD(weight_decay, false)};
static const kn__optim_field rms_fields[] = {FIELD(alpha, false), FIELD(eps, false),
                                             FIELD(weight_decay, false), FIELD(momentum, false),
                                             FIELD(centered, true)};
#undef FIELD

const kn__optim_field *kn__optim_fields(const kn_optimizer *opt, int *n) {
  switch (opt->kind) {
  case OPT_SGD: *n = (int)(sizeof sgd_fields / sizeof *sgd_fields); return sgd_fields;
  case OPT_RMSPROP: *n = (int)(sizeof rms_fields / sizeof *rms_fields); return rms_fields;
  default: *n = (int)(sizeof adam_fields / sizeof *adam_fields); return adam_fields;
  }
}

kn_optim_options kn__optim_options(const kn_optimizer *opt) { return opt->o; }

kn_status kn__optim_validate(const kn_optimizer *opt, const kn_optim_options *o,
                             const char **field) {
  return check_hyper(o, opt->kind, field);
}

kn_status kn__optim_apply(kn_optimizer *opt, const kn_optim_options *o) {
  kn_status st = kn__optim_validate(opt, o, NULL);
  if (st != KN_OK) return st;
  const kn_optim_options *a = &opt->o;
  bool same = a->momentum == o->momentum && a->dampening == o->dampening &&
              a->weight_decay == o->weight_decay && a->nesterov == o->nesterov &&
              a->beta1 == o->beta1 && a->beta2 == o->beta2 && a->eps == o->eps &&
              a->alpha == o->alpha && a->centered == o->centered;
  if (!same) { /* the compiled step holds them as constants (lr is a tensor) */
    kn_compiled_free(opt->compiled);
    opt->compiled = NULL;
  }
  opt->o = *o;
  return KN_OK;
}

void kn__optim_restored(kn_optimizer *opt, int64_t steps) {
  double lr = opt->o.lr;
  kn_item_double(kn_module_get(opt->state, "lr"), &lr);
  opt->o.lr = lr;
  opt->steps = steps;
}
