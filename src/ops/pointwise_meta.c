/*
** ops/pointwise_meta.c: the facts table of the pointwise family, its type
** rules (PyTorch's result_type, true division to float, bool results for
** comparisons, the in-place cast check) and the shared meta functions and
** kernels of binary and unary pointwise ops. Every dtype and shape error of
** these ops is raised here, with PyTorch's message text.
*/
#include <stdio.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/pointwise.h"
#include "ops/vmath.h"

/* ---- the facts tables (expanded from ops/pointwise_formulas.h) ------------- */

/* Each op's flags, as constants. */
enum {
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) \
  KN__PWFL_##ID = (FLAGS),
#include "ops/ops.def"
#undef KN_OP
};

static const kn__pwinfo infos[KN__OP_COUNT] = {
#define KN__PW_INFO(ID, CODE, KIND, NOPNDS) \
  [KN_OP_##ID] = {KN__PW_##CODE, KN__PWK_##KIND, NOPNDS, (KN__PWFL_##ID & KN_OPF_INPLACE) != 0, true},
    KN__PW_OPS(KN__PW_INFO)
#undef KN__PW_INFO
};

/* Build-time check: as many rows in KN__PW_OPS as ops of the op table whose
** meta function is the shared one (a duplicate row fails -Woverride-init;
** tests/test_pointwise_formulas.c checks the rows name exactly those ops). */
#define KN__PW_SECOND(a, b, ...) b
#define KN__PW_PROBE(...) KN__PW_SECOND(__VA_ARGS__, 0, 0)
#define KN__PW_CAT(a, b) a##b
#define KN__PW_SHARED_kn__meta_pw_binary ~, 1
#define KN__PW_SHARED_kn__meta_pw_unary ~, 1
#define KN__PW_IS_SHARED(META) KN__PW_PROBE(KN__PW_CAT(KN__PW_SHARED_, META))
enum {
  KN__PW_NSHARED = 0
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) \
  +KN__PW_IS_SHARED(META)
#include "ops/ops.def"
#undef KN_OP
};
enum {
  KN__PW_NROWS = 0
#define KN__PW_ONE(ID, CODE, KIND, NOPNDS) +1
  KN__PW_OPS(KN__PW_ONE)
#undef KN__PW_ONE
};
_Static_assert((int)KN__PW_NSHARED == (int)KN__PW_NROWS,
               "a pointwise op that uses kn__meta_pw_binary/unary has no row in KN__PW_OPS "
               "(ops/pointwise_formulas.h), or a row names another op");

const kn__pwinfo *kn__pw_info(int opid) { return &infos[opid]; }

static const kn__pwform forms[KN__PW_NCODES] = {
#define KN__PW_FORM(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D) \
  [KN__PW_##CODE] = {#CODE, NIN, KN__PW_IS_BOOL_##OUT, CL, VM, MEM},
#define KN__PW_IS_BOOL_T false
#define KN__PW_IS_BOOL_bool true
    KN__PW_FORMULAS(KN__PW_FORM)
#undef KN__PW_FORM
};

const kn__pwform *kn__pw_form(kn__pwcode code) { return &forms[code]; }

/* ---- small helpers ------------------------------------------------------------ */

const char *kn__pw_torch_name(kn_dtype dt) {
  static const char *names[KN_DTYPE_COUNT] = {
    [KN_BOOL] = "Bool", [KN_UINT8] = "Byte", [KN_INT8] = "Char", [KN_INT16] = "Short",
    [KN_INT32] = "Int", [KN_INT64] = "Long", [KN_FLOAT16] = "Half",
    [KN_BFLOAT16] = "BFloat16", [KN_FLOAT32] = "Float", [KN_FLOAT64] = "Double"};
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "?";
}

bool kn__pw_can_cast(kn_dtype from, kn_dtype to) {
  if (kn_dtype_is_floating(from) && !kn_dtype_is_floating(to)) return false;
  if (from != KN_BOOL && to == KN_BOOL) return false;
  return true;
}

double kn__pw_scalar_double(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

int64_t kn__pw_scalar_int(kn_scalar s) {
  if (s.kind == KN_SCALAR_INT) return s.v.i;
  if (s.kind == KN_SCALAR_BOOL) return s.v.b;
  double v = s.v.f;
  return (v > -9.2e18 && v < 9.2e18) ? (int64_t)v : 0;
}

static void format_shape(char *buf, size_t n, int nd, const kn_sym *s) {
  size_t k = 0;
  k += (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < nd && k < n; d++) {
    char x[64];
    kn__sym_format(s[d], x, sizeof x);
    k += (size_t)snprintf(buf + k, n - k, d ? ", %s" : "%s", x);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
}

kn_status kn__pw_check_inplace(const kn_tensor *self, kn_dtype result, int nd,
                               const kn_sym *shape) {
  if (!kn__pw_can_cast(result, self->dtype))
    return kn__error(KN_EDTYPE, "result type %s can't be cast to the desired output type %s",
                     kn__pw_torch_name(result), kn__pw_torch_name(self->dtype));
  kn_sym ss[KN_MAX_DIMS];
  kn__tensor_symsizes(self, ss);
  bool same = nd == self->ndim;
  for (int d = 0; same && d < nd; d++) same = kn__sym_guard_eq(ss[d], shape[d]);
  if (!same) {
    char a[256], b[256];
    format_shape(a, sizeof a, self->ndim, ss);
    format_shape(b, sizeof b, nd, shape);
    return kn__error(KN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s", a, b);
  }
  return KN_OK;
}

/* Is shape (nd dims) t's own constant shape? */
static bool same_const_shape(const kn_tensor *t, int nd, const kn_sym *shape) {
  if (t->sym || t->ndim != nd) return false;
  for (int d = 0; d < nd; d++)
    if (!kn__sym_is_const(shape[d]) || shape[d].c != t->sizes[d]) return false;
  return true;
}

/* Broadcast shape of the tensor operands among args [0, n). The common
** cases (the first operand; an operand of the same constant shape) skip
** the general rule. */
static kn_status operand_shape(const kn__call *c, int n, int *nd, kn_sym *shape) {
  *nd = 0;
  bool first = true;
  for (int i = 0; i < n && i < c->nargs; i++) {
    const kn_tensor *t = c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
    if (!t) continue;
    if (first) {
      first = false;
      *nd = t->ndim;
      kn__tensor_symsizes(t, shape);
      continue;
    }
    if (same_const_shape(t, *nd, shape)) continue;
    kn_sym ts[KN_MAX_DIMS];
    kn__tensor_symsizes(t, ts);
    kn_status st = kn__broadcast_shapes(*nd, shape, t->ndim, ts, nd, shape);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

static bool is_tensor(const kn__call *c, int i) {
  return i < c->nargs && c->args[i].kind == KN__A_TENSOR && c->args[i].u.t;
}

static kn_dtype arg_dtype(const kn__call *c, int i) {
  if (is_tensor(c, i)) return c->args[i].u.t->dtype;
  kn_scalar_kind k = c->args[i].u.s.kind;
  return k == KN_SCALAR_FLOAT ? kn_default_dtype() : k == KN_SCALAR_INT ? KN_INT64 : KN_BOOL;
}

/* Op-specific dtype errors (PyTorch's texts). */
static kn_status check_op_dtypes(const kn__call *c, const kn__pwinfo *pi, kn_dtype promoted) {
  kn_dtype a = arg_dtype(c, 0);
  switch (pi->code) {
  case KN__PW_SUB: {
    kn_dtype b = arg_dtype(c, 1);
    if (a == KN_BOOL && b == KN_BOOL)
      return kn__error(KN_EDTYPE, "Subtraction, the `-` operator, with two bool tensors is not "
                                  "supported. Use the `^` or `logical_xor()` operator instead.");
    if (a == KN_BOOL || b == KN_BOOL)
      return kn__error(KN_EDTYPE, "Subtraction, the `-` operator, with a bool tensor is not "
                                  "supported. If you are trying to invert a mask, use the `~` or "
                                  "`logical_not()` operator instead.");
  } break;
  case KN__PW_NEG:
    if (a == KN_BOOL)
      return kn__error(KN_EDTYPE, "Negation, the `-` operator, on a bool tensor is not supported. "
                                  "If you are trying to invert a mask, use the `~` or "
                                  "`logical_not()` operator instead.");
    break;
  case KN__PW_ABS:
    if (a == KN_BOOL) return kn__error(KN_EDTYPE, "\"abs_cpu\" not implemented for 'Bool'");
    break;
  case KN__PW_RELU:
    if (a == KN_BOOL) return kn__error(KN_EDTYPE, "Boolean inputs not supported for relu");
    break;
  case KN__PW_SOFTPLUS:
    if (!kn_dtype_is_floating(a))
      return kn__error(KN_EDTYPE, "\"softplus_cpu\" not implemented for '%s'",
                       kn__pw_torch_name(a));
    break;
  case KN__PW_THRESHOLD_BW:
    if (promoted == KN_BOOL)
      return kn__error(KN_EDTYPE, "\"threshold_cpu\" not implemented for 'Bool'");
    break;
  case KN__PW_SIGMOID_BW:
  case KN__PW_TANH_BW:
  case KN__PW_GELU_BW: /* floating formulas only, as torch's kernels */
    if (!kn_dtype_is_floating(promoted))
      return kn__error(KN_EDTYPE, "\"%s\" not implemented for '%s'",
                       pi->code == KN__PW_SIGMOID_BW ? "sigmoid_backward_cpu"
                       : pi->code == KN__PW_TANH_BW  ? "tanh_backward_cpu"
                                                     : "GeluBackwardKernelImpl",
                       kn__pw_torch_name(promoted));
    break;
  case KN__PW_CLAMP:
    if (c->args[1].kind != KN__A_SCALAR && c->args[2].kind != KN__A_SCALAR)
      return kn__error(KN_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not be None");
    break;
  case KN__PW_POW:
    if (!kn_dtype_is_floating(promoted) && c->args[1].kind == KN__A_SCALAR &&
        kn__pw_scalar_int(c->args[1].u.s) < 0)
      return kn__error(KN_EINVAL, "Integers to negative integer powers are not allowed.");
    break;
  default: break;
  }
  if ((pi->code == KN__PW_ADD || pi->code == KN__PW_SUB) && c->nargs > 2 &&
      c->args[2].kind == KN__A_SCALAR) {
    kn_scalar al = c->args[2].u.s;
    if (kn_dtype_is_integral(promoted, true) && al.kind == KN_SCALAR_FLOAT)
      return kn__error(KN_EDTYPE, "For integral input tensors, argument alpha must not be a "
                                  "floating point number.");
    if (promoted != KN_BOOL && al.kind == KN_SCALAR_BOOL)
      return kn__error(KN_EDTYPE, "Boolean alpha only supported for Boolean results.");
  }
  return KN_OK;
}

/* The dtype an op computes in (before mapping to a compute type) and the
** dtype of its result (for in-place ops: what must be castable to self). */
static kn_status pw_types(const kn__call *c, const kn__pwinfo *pi, kn_dtype *promoted,
                          kn_dtype *result) {
  kn_dtype rt = kn__result_type(c, pi->nopnds);
  if (pi->kind == KN__PWK_FLOAT && !kn_dtype_is_floating(rt)) rt = kn_default_dtype();
  kn_status st = check_op_dtypes(c, pi, rt);
  if (st != KN_OK) return st;
  *result = pi->kind == KN__PWK_BOOL ? KN_BOOL : rt;
  *promoted = (pi->code == KN__PW_LAND || pi->code == KN__PW_LOR || pi->code == KN__PW_LNOT)
                  ? KN_BOOL : rt;
  return KN_OK;
}

static kn_status pw_meta(const kn__call *c, kn__metas *out) {
  const kn__pwinfo *pi = kn__pw_info(c->op->id);
  if (!pi->present)
    return kn__error(KN_EINVAL, "%s: no row in the pointwise formula table", c->op->name);
  int nd;
  kn_sym shape[KN_MAX_DIMS];
  kn_status st = operand_shape(c, pi->nopnds, &nd, shape);
  kn_dtype promoted, result;
  if (st == KN_OK) st = pw_types(c, pi, &promoted, &result);
  if (st == KN_OK && pi->inplace) st = kn__pw_check_inplace(c->args[0].u.t, result, nd, shape);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, pi->inplace ? c->args[0].u.t->dtype : result);
  if (!m) return kn__oom();
  m->ndim = nd;
  for (int d = 0; d < nd; d++) m->sizes[d] = shape[d];
  if (pi->inplace) m->alias_of = 0;
  return KN_OK;
}

kn_status kn__meta_pw_binary(const kn__call *c, kn__metas *out) { return pw_meta(c, out); }
kn_status kn__meta_pw_unary(const kn__call *c, kn__metas *out) { return pw_meta(c, out); }

/* ---- shared kernels ---------------------------------------------------------------- */

/* Fills *o field by field: building the struct whole and copying it costs
** store-forwarding stalls that show up in a one-element op's time. */
static void operand(const kn__call *c, int i, kn__pwopnd *o) {
  bool tensor = c->args[i].kind == KN__A_TENSOR;
  o->t = tensor ? c->args[i].u.t : NULL;
  if (tensor) o->s = kn_int(0);
  else o->s = c->args[i].u.s;
}

/* The formula actually run: rounding modes and gelu's approximation are
** arguments of one row. */
static kn__pwcode actual_code(const kn__call *c, const kn__pwinfo *pi) {
  if (pi->code == KN__PW_DIV_TRUNC)
    return c->nargs > 2 && c->args[2].kind == KN__A_INT && c->args[2].u.i == 2
               ? KN__PW_DIV_FLOOR : KN__PW_DIV_TRUNC;
  bool tanh_approx = c->nargs > 1 && c->args[c->nargs - 1].kind == KN__A_INT &&
                     c->args[c->nargs - 1].u.i == 1;
  if (pi->code == KN__PW_GELU && tanh_approx) return KN__PW_GELU_TANH;
  if (pi->code == KN__PW_GELU_BW && tanh_approx) return KN__PW_GELU_TANH_BW;
  return pi->code;
}

static void fill_params(const kn__call *c, const kn__pwinfo *pi, kn__pwparams *p) {
  *p = (kn__pwparams){.alpha = 1, .ialpha = 1};
  if ((pi->code == KN__PW_ADD || pi->code == KN__PW_SUB) && c->nargs > 2 &&
      c->args[2].kind == KN__A_SCALAR) {
    p->alpha = kn__pw_scalar_double(c->args[2].u.s);
    p->ialpha = kn__pw_scalar_int(c->args[2].u.s);
  }
  if (pi->code == KN__PW_THRESHOLD_BW) { /* integer inputs compare with it truncated, as torch */
    p->lo = kn__pw_scalar_double(c->args[2].u.s);
    p->ialpha = kn__pw_scalar_int(c->args[2].u.s);
  }
  if (pi->code == KN__PW_SOFTPLUS) {
    p->alpha = kn__pw_scalar_double(c->args[1].u.s);
    p->lo = kn__pw_scalar_double(c->args[2].u.s);
  }
  if (pi->code == KN__PW_CLAMP) {
    p->has_lo = c->args[1].kind == KN__A_SCALAR;
    p->has_hi = c->nargs > 2 && c->args[2].kind == KN__A_SCALAR;
    if (p->has_lo) p->lo = kn__pw_scalar_double(c->args[1].u.s);
    if (p->has_hi) p->hi = kn__pw_scalar_double(c->args[2].u.s);
  }
}

/* The kernel of call c (op facts pi) into its output o, fresh or self. */
static kn_status run_kernel(const kn__call *c, const kn__pwinfo *pi, kn_tensor *o) {
  kn_dtype promoted, result;
  if (!pi->inplace && pi->kind != KN__PWK_BOOL) {
    /* the meta function's result dtype, already checked: the output's */
    promoted = result = o->dtype;
  } else {
    kn_status st = pw_types(c, pi, &promoted, &result);
    if (st != KN_OK) return st;
  }
  kn__pwparams prm;
  fill_params(c, pi, &prm);
  kn__pwopnd in[2];
  int nin = pi->code == KN__PW_CLAMP ? 1 : pi->nopnds;
  for (int k = 0; k < nin; k++) operand(c, k, &in[k]);
  kn_dtype cc = promoted == KN_BOOL && result == KN_BOOL && pi->kind == KN__PWK_BOOL &&
                        (pi->code == KN__PW_LAND || pi->code == KN__PW_LOR ||
                         pi->code == KN__PW_LNOT)
                    ? KN_BOOL : kn__pw_compute_type(promoted);
  return kn__pw_run(o, nin, in, cc, actual_code(c, pi), &prm);
}

static kn_status pw_kernel(const kn__call *c, kn__outs *out) {
  const kn__pwinfo *pi = kn__pw_info(c->op->id);
  if (!pi->present)
    return kn__error(KN_EINVAL, "%s: no row in the pointwise formula table", c->op->name);
  return run_kernel(c, pi, out->t[0]);
}

/* ---- the fast path -------------------------------------------------------------- */

/* Can t take the fast path: a plain CPU tensor (no fake, no symbolic
** sizes, no gradient to record)? */
static bool plain_tensor(const kn_tensor *t, bool grad_on) {
  return t && t->device == KN_CPU && t->storage->device == KN_CPU && !t->is_fake && !t->sym &&
         !(grad_on && t->requires_grad);
}

static bool all_ones(const kn_tensor *t) {
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] != 1) return false;
  return true;
}

/* Is t's shape `like`'s, or a one-element shape of no more dims (so that
** broadcasting t against like gives like's shape)? */
static bool fits_shape(const kn_tensor *t, const kn_tensor *like) {
  if (t->ndim > like->ndim) return false;
  bool same = t->ndim == like->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = t->sizes[d] == like->sizes[d];
  return same || all_ones(t);
}

/* The operand that gives the output its shape (of the most dims, and not
** all ones where another of as many dims is not), when every argument
** allows the fast path; NULL otherwise. */
static const kn_tensor *fast_shape(const kn__call *c, const kn__pwinfo *pi, bool grad_on) {
  const kn_tensor *like = NULL;
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    /* lists, dtypes and generators: kn__dispatch checks them first */
    if (a->sym || a->kind == KN__A_TENSORS || a->kind == KN__A_INTS ||
        a->kind == KN__A_DTYPE || a->kind == KN__A_GEN)
      return NULL;
    if (a->kind == KN__A_SCALAR && (unsigned)a->u.s.kind > KN_SCALAR_FLOAT) return NULL;
    if (a->kind != KN__A_TENSOR) continue;
    if (i >= pi->nopnds || !plain_tensor(a->u.t, grad_on)) return NULL;
    const kn_tensor *t = a->u.t;
    if (!like || t->ndim > like->ndim || (t->ndim == like->ndim && all_ones(like))) like = t;
  }
  for (int i = 0; like && i < pi->nopnds && i < c->nargs; i++)
    if (c->args[i].kind == KN__A_TENSOR && !fits_shape(c->args[i].u.t, like)) return NULL;
  return like;
}

/* A fresh output of like's shape and dtype dt. */
static kn_tensor *fast_output(const kn_tensor *like, kn_dtype dt) {
  bool held = kn__dtype_size(dt) <= kn__dtype_size(like->dtype) &&
              (kn__contiguous(like) || kn__numel(like->ndim, like->sizes) == 1);
  return held ? kn__empty_like_valid(like, dt) : kn__empty(like->ndim, like->sizes, dt, KN_CPU);
}

bool kn__pw_fast(const kn__call *c, bool grad_on, kn_status *st, kn_tensor **out) {
  const kn__pwinfo *pi = kn__pw_info(c->op->id);
  if (!pi->present || pi->inplace) return false;
  const kn_tensor *like = fast_shape(c, pi, grad_on);
  if (!like) return false;
  kn_dtype promoted, result;
  *out = NULL;
  *st = pw_types(c, pi, &promoted, &result);
  if (*st != KN_OK) return true;
  kn_tensor *o = fast_output(like, result);
  *st = o ? run_kernel(c, pi, o) : kn_last_status();
  if (*st == KN_OK) *out = o;
  else kn_release(o);
  return true;
}

kn_status kn__k_pw_binary(const kn__call *c, kn__outs *out) { return pw_kernel(c, out); }
kn_status kn__k_pw_unary(const kn__call *c, kn__outs *out) { return pw_kernel(c, out); }
