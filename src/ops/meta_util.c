/*
** ops/meta_util.c: helpers shared by meta functions: broadcasting and
** PyTorch's result_type.
*/
#include <stdio.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "ops/opdef.h"

static void format_symsizes(kn__sb *sb, int n, const kn_sym *s) {
  char buf[128];
  kn__sb_putc(sb, '[');
  for (int d = 0; d < n; d++) {
    kn__sym_format(s[d], buf, sizeof buf);
    kn__sb_printf(sb, d ? ", %s" : "%s", buf);
  }
  kn__sb_putc(sb, ']');
}

kn_status kn__broadcast_shapes(int na, const kn_sym *a, int nb, const kn_sym *b,
                               int *nout, kn_sym *out) {
  int n = na > nb ? na : nb;
  kn_sym res[KN_MAX_DIMS];
  /* From the last dimension back, as torch's infer_size: the error names the
  ** innermost mismatching dimension. */
  for (int i = n - 1; i >= 0; i--) {
    int ia = na - n + i, ib = nb - n + i;
    kn_sym sa = ia >= 0 ? a[ia] : kn__sym_const(1);
    kn_sym sb = ib >= 0 ? b[ib] : kn__sym_const(1);
    if (kn__sym_guard_eq_int(sa, 1)) res[i] = sb;
    else if (kn__sym_guard_eq_int(sb, 1)) res[i] = sa;
    else if (kn__sym_guard_eq(sa, sb)) res[i] = sa;
    else {
      char xa[64], xb[64];
      kn__sym_format(sa, xa, sizeof xa);
      kn__sym_format(sb, xb, sizeof xb);
      kn__sb msg = KN__SB_INIT;
      kn__sb_printf(&msg, "The size of tensor a (%s) must match the size of tensor b (%s) "
                          "at non-singleton dimension %d (shapes ", xa, xb, i);
      format_symsizes(&msg, na, a);
      kn__sb_puts(&msg, " and ");
      format_symsizes(&msg, nb, b);
      kn__sb_puts(&msg, ")");
      kn_status st = kn__error(KN_ESHAPE, "%s", kn__sb_cstr(&msg));
      kn__sb_fini(&msg);
      return st;
    }
  }
  for (int i = 0; i < n; i++) out[i] = res[i];
  *nout = n;
  return KN_OK;
}

/* c10's combine_categories: a higher-priority class wins unless a lower one
** is of a higher category (bool < integral < floating). */
static int category(kn_dtype dt) {
  return kn_dtype_is_floating(dt) ? 2 : dt == KN_BOOL ? 0 : 1;
}

static kn_dtype combine(int have_hi, kn_dtype hi, int have_lo, kn_dtype lo, int *have) {
  *have = have_hi || have_lo;
  if (!have_hi) return lo;
  if (!have_lo) return hi;
  if (category(hi) == 2) return hi;
  if (hi == KN_BOOL || category(lo) == 2) return category(lo) > category(hi) ? lo : hi;
  return hi;
}

static void update(int *have, kn_dtype *acc, kn_dtype dt) {
  *acc = *have ? kn_promote_types(*acc, dt) : dt;
  *have = 1;
}

/* The common case: the first two operands are tensors with dims of one
** floating dtype and the rest are scalars. Zero-dim tensors and scalars
** then cannot change the result (a floating dimensioned tensor wins over
** both), so the result is that dtype. false: not this case. */
static bool same_float_pair(const kn__call *c, int nopnds, kn_dtype *dt) {
  if (nopnds < 2 || c->nargs < 2 || c->args[0].kind != KN__A_TENSOR ||
      c->args[1].kind != KN__A_TENSOR)
    return false;
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  if (!a || !b || a->dtype != b->dtype || a->ndim == 0 || b->ndim == 0 ||
      !kn_dtype_is_floating(a->dtype))
    return false;
  for (int i = 2; i < nopnds && i < c->nargs; i++)
    if (c->args[i].kind == KN__A_TENSOR || c->args[i].kind == KN__A_TENSORS) return false;
  *dt = a->dtype;
  return true;
}

kn_dtype kn__result_type(const kn__call *c, int nopnds) {
  kn_dtype fast;
  if (same_float_pair(c, nopnds, &fast)) return fast;
  int hd = 0, hz = 0, hs = 0;
  kn_dtype dim = KN_BOOL, zero = KN_BOOL, scal = KN_BOOL;
  for (int i = 0; i < nopnds && i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t) {
      if (a->u.t->ndim > 0) update(&hd, &dim, a->u.t->dtype);
      else update(&hz, &zero, a->u.t->dtype);
    } else if (a->kind == KN__A_TENSORS) {
      for (int j = 0; j < a->u.ts.n; j++) {
        const kn_tensor *t = a->u.ts.v[j];
        if (t->ndim > 0) update(&hd, &dim, t->dtype);
        else update(&hz, &zero, t->dtype);
      }
    } else if (a->kind == KN__A_SCALAR) {
      kn_dtype dt = a->u.s.kind == KN_SCALAR_FLOAT ? kn_default_dtype()
                    : a->u.s.kind == KN_SCALAR_INT ? KN_INT64 : KN_BOOL;
      update(&hs, &scal, dt);
    }
  }
  int h1, h2;
  kn_dtype lo = combine(hz, zero, hs, scal, &h1);
  kn_dtype r = combine(hd, dim, h1, lo, &h2);
  return h2 ? r : kn_default_dtype();
}
