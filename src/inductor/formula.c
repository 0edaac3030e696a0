/*
** inductor/formula.c: which pointwise nodes inductor computes inline, in
** which compute type, and with which element formula. The formulas are the
** eager kernels' (ops/pointwise_kern.c) written as C templates: the same
** expressions, the same compute types (float32 for float32, float64, int64
** with wrap-around for integers, bool for logical ops), and <tgmath.h> for
** the same libm functions, so compiled results match eager ones. A node that
** does not fit (float16, integer division, mixed zero-dim promotion, ...)
** returns false and runs as an extern call of the eager op.
*/
#include <string.h>

#include "inductor/inductor.h"
#include "ops/pointwise.h"

const char *kn__ind_ctype(kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return "bool";
  case KN_UINT8: return "uint8_t";
  case KN_INT8: return "int8_t";
  case KN_INT16: return "int16_t";
  case KN_INT32: return "int32_t";
  case KN_INT64: return "int64_t";
  case KN_FLOAT32: return "float";
  case KN_FLOAT64: return "double";
  default: return NULL;
  }
}

/* Formulas by compute class: float ($S is f32/f64), int64, bool. */
typedef struct row { kn__pwcode code; const char *fl, *in, *bo; } row;
static const row rows[] = {
  {KN__PW_ADD, "$a + $b", "kn_wadd($a, $b)", NULL},
  {KN__PW_SUB, "$a - $b", "kn_wadd($a, kn_wneg($b))", NULL},
  {KN__PW_MUL, "$a * $b", "kn_wmul($a, $b)", NULL},
  {KN__PW_DIV, "$a / $b", NULL, NULL},
  {KN__PW_DIV_TRUNC, "trunc($a / $b)", NULL, NULL},
  {KN__PW_DIV_FLOOR, "kn_floordiv_$S($a, $b)", NULL, NULL},
  {KN__PW_MAXIMUM, "kn_max_$S($a, $b)", "($a > $b ? $a : $b)", NULL},
  {KN__PW_MINIMUM, "kn_min_$S($a, $b)", "($a < $b ? $a : $b)", NULL},
  {KN__PW_POW, "pow($a, $b)", NULL, NULL},
  {KN__PW_EQ, "$a == $b", "$a == $b", "$a == $b"},
  {KN__PW_NE, "$a != $b", "$a != $b", "$a != $b"},
  {KN__PW_LT, "$a < $b", "$a < $b", NULL},
  {KN__PW_LE, "$a <= $b", "$a <= $b", NULL},
  {KN__PW_GT, "$a > $b", "$a > $b", NULL},
  {KN__PW_GE, "$a >= $b", "$a >= $b", NULL},
  {KN__PW_LAND, NULL, NULL, "$a && $b"},
  {KN__PW_LOR, NULL, NULL, "$a || $b"},
  {KN__PW_THRESHOLD_BW, "($b <= ($T)$1 ? ($T)0 : $a)", NULL, NULL},
  {KN__PW_SIGMOID_BW, "$a * (($T)1 - $b) * $b", NULL, NULL},
  {KN__PW_TANH_BW, "$a * (($T)1 - $b * $b)", NULL, NULL},
  {KN__PW_GELU_BW, "kn_gelu_bw_$S($a, $b)", NULL, NULL},
  {KN__PW_GELU_TANH_BW, "kn_gelu_tanh_bw_$S($a, $b)", NULL, NULL},
  {KN__PW_NEG, "-$a", "kn_wneg($a)", NULL},
  {KN__PW_ABS, "fabs($a)", "($a < 0 ? kn_wneg($a) : $a)", NULL},
  {KN__PW_SGN, "(($a > 0) - ($a < 0))", "(($a > 0) - ($a < 0))", NULL},
  {KN__PW_RECIPROCAL, "($T)1 / $a", NULL, NULL},
  {KN__PW_EXP, "exp($a)", NULL, NULL},
  {KN__PW_EXP2, "exp2($a)", NULL, NULL},
  {KN__PW_LOG, "log($a)", NULL, NULL},
  {KN__PW_LOG2, "log2($a)", NULL, NULL},
  {KN__PW_LOG1P, "log1p($a)", NULL, NULL},
  {KN__PW_EXPM1, "expm1($a)", NULL, NULL},
  {KN__PW_SQRT, "sqrt($a)", NULL, NULL},
  {KN__PW_RSQRT, "($T)1 / sqrt($a)", NULL, NULL},
  {KN__PW_SIN, "sin($a)", NULL, NULL},
  {KN__PW_COS, "cos($a)", NULL, NULL},
  {KN__PW_TAN, "tan($a)", NULL, NULL},
  {KN__PW_TANH, "tanh($a)", NULL, NULL},
  {KN__PW_SIGMOID, "($T)1 / (($T)1 + exp(-$a))", NULL, NULL},
  {KN__PW_RELU, "(($a > 0 || $a != $a) ? $a : ($T)0)", "($a > 0 ? $a : 0)", NULL},
  {KN__PW_GELU, "($T)0.5 * $a * (($T)1 + erf($a * ($T)KN_SQRT1_2))", NULL, NULL},
  {KN__PW_GELU_TANH, "kn_gelu_tanh_$S($a)", NULL, NULL},
  {KN__PW_SILU, "$a / (($T)1 + exp(-$a))", NULL, NULL},
  {KN__PW_ERF, "erf($a)", NULL, NULL},
  {KN__PW_ROUND, "nearbyint($a)", "$a", NULL},
  {KN__PW_TRUNC, "trunc($a)", "$a", NULL},
  {KN__PW_FLOOR, "floor($a)", "$a", NULL},
  {KN__PW_CEIL, "ceil($a)", "$a", NULL},
  {KN__PW_LNOT, NULL, NULL, "!$a"},
};

static const row *find_row(kn__pwcode code) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (rows[i].code == code) return &rows[i];
  return NULL;
}

static bool is_float(kn_dtype dt) { return dt == KN_FLOAT32 || dt == KN_FLOAT64; }

static double scalar_double(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}
static int64_t scalar_int(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? (int64_t)s.v.f : s.kind == KN_SCALAR_INT ? s.v.i : s.v.b;
}

/* torch's result_type for the operands, in the cases inductor lowers:
** tensors of one dtype, or tensors that all have dimensions, plus scalars.
** false when zero-dim tensors would need the category rules. */
static bool promoted_type(const kn__gnode *n, int nopnds, kn_dtype *out) {
  bool have = false, zero_dim = false, mixed = false, fscalar = false, iscalar = false;
  kn_dtype pt = KN_BOOL;
  for (int i = 0; i < nopnds && i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    if (a->kind == KN__GA_SCALAR) {
      fscalar |= a->u.s.kind == KN_SCALAR_FLOAT;
      iscalar |= a->u.s.kind == KN_SCALAR_INT;
      continue;
    }
    if (a->kind != KN__GA_TENSOR || !a->u.t.node) return false;
    const kn__vmeta *m = &a->u.t.node->meta[a->u.t.idx];
    if (m->kind != KN__V_TENSOR || !kn__ind_ctype(m->dtype)) return false;
    zero_dim |= m->ndim == 0;
    mixed |= have && m->dtype != pt;
    pt = have ? kn_promote_types(pt, m->dtype) : m->dtype;
    have = true;
  }
  if (!have || (zero_dim && mixed)) return false;
  if (fscalar && !is_float(pt)) pt = KN_FLOAT32;
  else if (iscalar && pt == KN_BOOL) pt = KN_INT64;
  *out = pt;
  return true;
}

static kn__pwcode actual_code(const kn__gnode *n, kn__pwcode code) {
  const kn__garg *last = n->nargs > 1 ? &n->args[n->nargs - 1] : NULL;
  bool tanh_approx = last && last->kind == KN__GA_INT && kn__sym_is_const(last->u.i) &&
                     last->u.i.c == 1;
  if (code == KN__PW_DIV_TRUNC)
    return n->nargs > 2 && n->args[2].kind == KN__GA_INT && n->args[2].u.i.c == 2
               ? KN__PW_DIV_FLOOR : KN__PW_DIV_TRUNC;
  if (code == KN__PW_GELU && tanh_approx) return KN__PW_GELU_TANH;
  if (code == KN__PW_GELU_BW && tanh_approx) return KN__PW_GELU_TANH_BW;
  return code;
}

/* add/sub alpha, threshold, clamp bounds into f; false if unsupported. */
static bool params(const kn__gnode *n, kn__pwcode code, kn__ind_formula *f) {
  f->p1 = 1;
  f->ip1 = 1;
  if ((code == KN__PW_ADD || code == KN__PW_SUB) && n->nargs > 2 &&
      n->args[2].kind == KN__GA_SCALAR) {
    f->p1 = scalar_double(n->args[2].u.s);
    f->ip1 = scalar_int(n->args[2].u.s);
  }
  if (code == KN__PW_THRESHOLD_BW) {
    if (n->nargs < 3 || n->args[2].kind != KN__GA_SCALAR) return false;
    f->p1 = scalar_double(n->args[2].u.s);
  }
  return true;
}

static const char *alpha_tmpl(kn__pwcode code, bool fl) {
  if (code == KN__PW_ADD) return fl ? "$a + ($T)$1 * $b" : "kn_wadd($a, kn_wmul($i, $b))";
  return fl ? "$a - ($T)$1 * $b" : "kn_wadd($a, kn_wneg(kn_wmul($i, $b)))";
}

static bool pointwise_formula(const kn__gnode *n, kn__ind_formula *f) {
  const kn__pwinfo *pi = kn__pw_info(n->opdef->id);
  if (pi->nopnds <= 0 || pi->inplace || pi->code == KN__PW_CLAMP) return false;
  kn_dtype pt, ot = n->meta[0].dtype;
  if (!promoted_type(n, pi->nopnds, &pt)) return false;
  bool logical = pi->code == KN__PW_LAND || pi->code == KN__PW_LOR || pi->code == KN__PW_LNOT;
  if (logical && pt != KN_BOOL) return false;
  if (pi->kind == KN__PWK_BOOL ? ot != KN_BOOL : ot != pt) return false;
  kn__pwcode code = actual_code(n, pi->code);
  const row *r = find_row(code);
  if (!r) return false;
  f->ct = logical ? KN_BOOL : kn__pw_compute_type(pt);
  f->nopnds = pi->nopnds;
  if (!params(n, code, f)) return false;
  bool fl = is_float(f->ct);
  f->tmpl = f->ct == KN_BOOL ? r->bo : fl ? r->fl : r->in;
  if (f->tmpl && (code == KN__PW_ADD || code == KN__PW_SUB) &&
      (fl ? f->p1 != 1 : f->ip1 != 1))
    f->tmpl = alpha_tmpl(code, fl);
  return f->tmpl != NULL;
}

/* full(size, value, dtype): a constant; _to_copy / clone: a cast. */
static bool other_formula(const kn__gnode *n, kn__ind_formula *f) {
  kn_dtype ot = n->meta[0].dtype;
  if (!kn__ind_ctype(ot) || ot == KN_UINT8 || ot == KN_INT8 || ot == KN_INT16 ||
      ot == KN_INT32)
    return false;
  f->ct = ot;
  switch (n->opdef->id) {
  case KN_OP_FULL:
    if (n->nargs < 2 || n->args[1].kind != KN__GA_SCALAR) return false;
    f->p1 = scalar_double(n->args[1].u.s);
    f->ip1 = scalar_int(n->args[1].u.s);
    f->nopnds = 0;
    f->tmpl = is_float(ot) ? "($T)$1" : ot == KN_BOOL ? "($T)$1" : "($T)$i";
    return true;
  case KN_OP_CLONE:
  case KN_OP_TO_COPY: {
    const kn__garg *a = &n->args[0];
    if (a->kind != KN__GA_TENSOR || !a->u.t.node) return false;
    if (!kn__ind_ctype(a->u.t.node->meta[a->u.t.idx].dtype)) return false;
    f->nopnds = 1;
    f->tmpl = "$a";
    return true;
  }
  default: return false;
  }
}

/* where(cond, self, other): cond is read as bool, the others promoted. */
static bool where_formula(const kn__gnode *n, kn__ind_formula *f) {
  if (n->nargs != 3 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node) return false;
  const kn__vmeta *c = &n->args[0].u.t.node->meta[n->args[0].u.t.idx];
  kn__gnode tmp = *n; /* the value operands alone */
  tmp.args = n->args + 1;
  tmp.nargs = 2;
  kn_dtype pt;
  if (c->dtype != KN_BOOL || !promoted_type(&tmp, 2, &pt) || pt != n->meta[0].dtype) return false;
  f->ct = pt == KN_FLOAT32 || pt == KN_FLOAT64 || pt == KN_BOOL ? pt : KN_INT64;
  f->nopnds = 3;
  f->cond_first = true;
  f->tmpl = "($a ? $b : $c)";
  return true;
}

bool kn__ind_formula_for(const kn__gnode *n, kn__ind_formula *f) {
  memset(f, 0, sizeof *f);
  if (n->op != KN__GN_CALL || !n->opdef || n->nout != 1 || n->meta[0].kind != KN__V_TENSOR)
    return false;
  if (n->set_requires_grad) return false;
  if (!kn__ind_ctype(n->meta[0].dtype) || n->meta[0].device != KN_CPU) return false;
  if (n->opdef->flags & KN_OPF_POINTWISE) {
    if (n->opdef->id == KN_OP_WHERE) return where_formula(n, f);
    if (kn__pw_info(n->opdef->id)->nopnds > 0) return pointwise_formula(n, f);
    return other_formula(n, f);
  }
  return n->opdef->id == KN_OP_FULL && other_formula(n, f);
}
