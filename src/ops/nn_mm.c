/*
** ops/nn_mm.c: mm, bmm, addmm, dot, mv: meta functions and kernels.
** All run on kn__nn_gemm (ops/nn_gemm.c); their derivative rules live in
** ops/nn_mm_grad.c, the composites matmul and linear in ops/nn_matmul.c.
** Error texts follow PyTorch 1.13 ("mat1 and mat2 shapes cannot be
** multiplied (3x4 and 5x6)", "expected scalar type Float but found Double").
*/
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "kiln/ops_nn.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/threads.h"

/* "3x4" for two symbolic sizes. */
static void fmt_x(kn_sym a, kn_sym b, char *buf, size_t n) {
  char x[48], y[48];
  kn__sym_format(a, x, sizeof x);
  kn__sym_format(b, y, sizeof y);
  snprintf(buf, n, "%sx%s", x, y);
}

static kn_status mat_shape_error(kn_sym a0, kn_sym a1, kn_sym b0, kn_sym b1) {
  char x[100], y[100];
  fmt_x(a0, a1, x, sizeof x);
  fmt_x(b0, b1, y, sizeof y);
  return kn__error(KN_ESHAPE, "mat1 and mat2 shapes cannot be multiplied (%s and %s)", x, y);
}

static kn_status scalar_type_error(kn_dtype want, kn_dtype got) {
  return kn__error(KN_EDTYPE, "expected scalar type %s but found %s",
                   kn__nn_scalar_type_name(want), kn__nn_scalar_type_name(got));
}

static kn__mat mat_of(const kn_tensor *t, int d0, int d1) {
  return (kn__mat){kn_data(t), t->strides[d0], t->strides[d1]};
}

/* ---- mm ------------------------------------------------------------------ */

kn_status kn__meta_mm(const kn__call *c, kn__metas *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  if (a->ndim != 2) return kn__error(KN_ESHAPE, "self must be a matrix");
  if (b->ndim != 2) return kn__error(KN_ESHAPE, "mat2 must be a matrix");
  kn_sym sa[2], sb[2];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  if (!kn__sym_guard_eq(sa[1], sb[0])) return mat_shape_error(sa[0], sa[1], sb[0], sb[1]);
  if (a->dtype != b->dtype) return scalar_type_error(a->dtype, b->dtype);
  kn_sym os[2] = {sa[0], sb[1]};
  return kn__metas_push_sizes(out, a->dtype, 2, os) ? KN_OK : kn__oom();
}

kn_status kn__k_mm(const kn__call *c, kn__outs *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  kn_tensor *o = out->t[0];
  return kn__nn_gemm("addmm_impl_cpu_", a->dtype, a->sizes[0], b->sizes[1], a->sizes[1],
                     mat_of(a, 0, 1), mat_of(b, 0, 1), kn_data(o), o->sizes[1], 1.0, 0.0);
}

/* ---- bmm ----------------------------------------------------------------- */

kn_status kn__meta_bmm(const kn__call *c, kn__metas *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  if (a->ndim != 3) return kn__error(KN_ESHAPE, "batch1 must be a 3D tensor");
  if (b->ndim != 3) return kn__error(KN_ESHAPE, "batch2 must be a 3D tensor");
  kn_sym sa[3], sb[3];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  if (!kn__sym_guard_eq(sa[0], sb[0]) || !kn__sym_guard_eq(sa[2], sb[1])) {
    char e0[48], e1[48], g0[48], g1[48];
    kn__sym_format(sa[0], e0, sizeof e0);
    kn__sym_format(sa[2], e1, sizeof e1);
    kn__sym_format(sb[0], g0, sizeof g0);
    kn__sym_format(sb[1], g1, sizeof g1);
    return kn__error(KN_ESHAPE,
                     "Expected size for first two dimensions of batch2 tensor to be: [%s, %s] "
                     "but got: [%s, %s].", e0, e1, g0, g1);
  }
  if (a->dtype != b->dtype) return scalar_type_error(a->dtype, b->dtype);
  kn_sym os[3] = {sa[0], sa[1], sb[2]};
  return kn__metas_push_sizes(out, a->dtype, 3, os) ? KN_OK : kn__oom();
}

/* Product i of the batch into its rows of o. */
static kn_status bmm_one(const kn_tensor *a, const kn_tensor *b, kn_tensor *o, int64_t i) {
  int64_t M = a->sizes[1], K = a->sizes[2], N = b->sizes[2];
  int64_t ea = (int64_t)kn_dtype_size(a->dtype);
  kn__mat ma = {(const char *)kn_data(a) + i * a->strides[0] * ea, a->strides[1], a->strides[2]};
  kn__mat mb = {(const char *)kn_data(b) + i * b->strides[0] * ea, b->strides[1], b->strides[2]};
  char *po = (char *)kn_data(o) + i * M * N * ea;
  return kn__nn_gemm("bmm", a->dtype, M, N, K, ma, mb, po, N, 1.0, 0.0);
}

/* The team that takes the batch's products, one library call a product on
** its thread: when one product's own team (KN__GRAIN_MAC) is smaller than
** the threads set, one per grain of the whole batch, at most one a
** product; else 1 (the products one after another, each on every thread).
** Attention's 64 products of 128x128x64 (one grain each) ran one after
** another on the calling thread: 1.3 ms at 1 and at 16 threads. */
static int batch_team(int64_t B, int64_t M, int64_t N, int64_t K) {
  if (B < 2 || kn__par_team(M * N * K, INT64_MAX, KN__GRAIN_MAC) >= omp_get_max_threads())
    return 1;
  return kn__par_team(B * M * N * K, B, KN__GRAIN_MAC);
}

kn_status kn__k_bmm(const kn__call *c, kn__outs *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  kn_tensor *o = out->t[0];
  int64_t B = a->sizes[0];
  kn_status st = kn__nn_gemm_check("bmm", a->dtype);
  if (st != KN_OK) return st;
  int team = batch_team(B, a->sizes[1], b->sizes[2], a->sizes[2]);
  if (team > 1) {
    _Atomic bool failed = false;
    KN__PAR_FOR(team, for (int64_t i = 0; i < B; i++) {
      if (bmm_one(a, b, o, i) != KN_OK) atomic_store(&failed, true);
    });
    if (!atomic_load(&failed)) return KN_OK;
  } /* else, or again on this thread for the error's message */
  for (int64_t i = 0; i < B && st == KN_OK; i++) st = bmm_one(a, b, o, i);
  return st;
}

/* ---- addmm ----------------------------------------------------------------- */

/* Is self (sizes ss) expandable to [M, N]? PyTorch's expand message. */
static kn_status check_expand(const kn_tensor *self, const kn_sym *ss, const kn_sym *target) {
  if (self->ndim > 2)
    return kn__error(KN_ESHAPE,
                     "expand(torch.FloatTensor{...}, size=[...]): the number of sizes provided "
                     "(2) must be greater or equal to the number of dimensions in the tensor (%d)",
                     self->ndim);
  for (int i = 0; i < self->ndim; i++) {
    int td = 2 - self->ndim + i;
    if (kn__sym_guard_eq_int(ss[i], 1) || kn__sym_guard_eq(ss[i], target[td])) continue;
    char t0[48], t1[48], e[48], tsz[128];
    kn__sym_format(target[0], t0, sizeof t0);
    kn__sym_format(target[1], t1, sizeof t1);
    kn__sym_format(ss[i], e, sizeof e);
    kn__format_sizes(self->ndim, self->sizes, tsz, sizeof tsz);
    char tt[48];
    kn__sym_format(target[td], tt, sizeof tt);
    return kn__error(KN_ESHAPE,
                     "The expanded size of the tensor (%s) must match the existing size (%s) at "
                     "non-singleton dimension %d.  Target sizes: [%s, %s].  Tensor sizes: %s",
                     tt, e, td, t0, t1, tsz);
  }
  return KN_OK;
}

kn_status kn__meta_addmm(const kn__call *c, kn__metas *out) {
  const kn_tensor *s = c->args[0].u.t, *a = c->args[1].u.t, *b = c->args[2].u.t;
  if (a->ndim != 2)
    return kn__error(KN_ESHAPE, "mat1 must be a matrix, got %d-D tensor", a->ndim);
  if (b->ndim != 2)
    return kn__error(KN_ESHAPE, "mat2 must be a matrix, got %d-D tensor", b->ndim);
  kn_sym sa[2], sb[2], ss[KN_MAX_DIMS];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  kn__tensor_symsizes(s, ss);
  if (!kn__sym_guard_eq(sa[1], sb[0])) return mat_shape_error(sa[0], sa[1], sb[0], sb[1]);
  if (a->dtype != b->dtype) return kn__error(KN_EDTYPE, "mat1 and mat2 must have the same dtype");
  if (s->dtype != b->dtype) return kn__error(KN_EDTYPE, "self and mat2 must have the same dtype");
  kn_sym os[2] = {sa[0], sb[1]};
  kn_status st = check_expand(s, ss, os);
  if (st != KN_OK) return st;
  return kn__metas_push_sizes(out, a->dtype, 2, os) ? KN_OK : kn__oom();
}

static double scalar_value(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* Is self (of addmm's output shape [M, N] after broadcasting) one row
** [N] with unit stride repeated over the rows (linear's bias)? */
static bool bias_row(const kn_tensor *s, int64_t N) {
  if (s->ndim == 1) return s->sizes[0] == N && (s->strides[0] == 1 || N == 1);
  return s->ndim == 2 && s->sizes[1] == N && (s->sizes[0] == 1 || s->strides[0] == 0) &&
         (s->strides[1] == 1 || N == 1);
}

kn_status kn__k_addmm(const kn__call *c, kn__outs *out) {
  const kn_tensor *s = c->args[0].u.t, *a = c->args[1].u.t, *b = c->args[2].u.t;
  double beta = scalar_value(c->args[3].u.s), alpha = scalar_value(c->args[4].u.s);
  kn_tensor *o = out->t[0];
  kn_status st16;
  bool half = a->dtype == KN_BFLOAT16 || a->dtype == KN_FLOAT16;
  if (half && alpha == 1 && beta == 1 && o->sizes[0] > 0 && o->sizes[1] > 0 && a->sizes[1] > 0 &&
      bias_row(s, o->sizes[1]) &&
      kn__nn_gemm16_bias(a->dtype, a->sizes[0], b->sizes[1], a->sizes[1], mat_of(a, 0, 1),
                         mat_of(b, 0, 1), kn_data(s), kn_data(o), o->sizes[1], &st16))
    return st16; /* linear in bfloat16: the bias added by oneDNN before its rounding */
  if (beta != 0 && o->sizes[0] * o->sizes[1] > 0) {
    kn_status st = kn__copy_into(o, s);
    if (st != KN_OK) return st;
  }
  return kn__nn_gemm("addmm_impl_cpu_", a->dtype, a->sizes[0], b->sizes[1], a->sizes[1],
                     mat_of(a, 0, 1), mat_of(b, 0, 1), kn_data(o), o->sizes[1], alpha, beta);
}

/* ---- dot and mv ------------------------------------------------------------- */

kn_status kn__meta_dot(const kn__call *c, kn__metas *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  if (a->ndim != 1 || b->ndim != 1)
    return kn__error(KN_ESHAPE, "1D tensors expected, but got %dD and %dD tensors", a->ndim,
                     b->ndim);
  kn_sym sa, sb;
  kn__tensor_symsizes(a, &sa);
  kn__tensor_symsizes(b, &sb);
  if (!kn__sym_guard_eq(sa, sb)) {
    char x[48], y[48];
    kn__sym_format(sa, x, sizeof x);
    kn__sym_format(sb, y, sizeof y);
    return kn__error(KN_ESHAPE,
                     "inconsistent tensor size, expected tensor [%s] and src [%s] to have the "
                     "same number of elements, but got %s and %s elements respectively",
                     x, y, x, y);
  }
  if (a->dtype != b->dtype)
    return kn__error(KN_EDTYPE, "dot : expected both vectors to have same dtype, but found %s "
                                "and %s", kn__nn_scalar_type_name(a->dtype),
                     kn__nn_scalar_type_name(b->dtype));
  return kn__metas_push_sizes(out, a->dtype, 0, NULL) ? KN_OK : kn__oom();
}

kn_status kn__k_dot(const kn__call *c, kn__outs *out) {
  const kn_tensor *a = c->args[0].u.t, *b = c->args[1].u.t;
  kn__mat ma = {kn_data(a), 0, a->strides[0]}, mb = {kn_data(b), b->strides[0], 0};
  return kn__nn_gemm("dot", a->dtype, 1, 1, a->sizes[0], ma, mb, kn_data(out->t[0]), 1, 1, 0);
}

kn_status kn__meta_mv(const kn__call *c, kn__metas *out) {
  const kn_tensor *a = c->args[0].u.t, *v = c->args[1].u.t;
  if (a->ndim != 2 || v->ndim != 1)
    return kn__error(KN_ESHAPE, "vector + matrix @ vector expected, got 1, %d, %d", a->ndim,
                     v->ndim);
  kn_sym sa[2], sv;
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(v, &sv);
  if (!kn__sym_guard_eq(sa[1], sv)) {
    char x[48], y[48], z[48];
    kn__sym_format(sa[0], x, sizeof x);
    kn__sym_format(sa[1], y, sizeof y);
    kn__sym_format(sv, z, sizeof z);
    return kn__error(KN_ESHAPE, "size mismatch, got %s, %sx%s,%s", x, x, y, z);
  }
  if (a->dtype != v->dtype) return scalar_type_error(a->dtype, v->dtype);
  return kn__metas_push_sizes(out, a->dtype, 1, sa) ? KN_OK : kn__oom();
}

kn_status kn__k_mv(const kn__call *c, kn__outs *out) {
  const kn_tensor *a = c->args[0].u.t, *v = c->args[1].u.t;
  kn__mat mv = {kn_data(v), v->strides[0], 0};
  return kn__nn_gemm("addmv_impl_cpu", a->dtype, a->sizes[0], 1, a->sizes[1], mat_of(a, 0, 1),
                     mv, kn_data(out->t[0]), 1, 1, 0);
}

/* ---- public API -------------------------------------------------------------- */

kn_tensor *kn_mm(kn_tensor *self, kn_tensor *mat2) {
  return kn__invoke(KN_OP_MM, 2, (kn__arg[]){KN_A_T(self), KN_A_T(mat2)});
}

kn_tensor *kn_bmm(kn_tensor *self, kn_tensor *mat2) {
  return kn__invoke(KN_OP_BMM, 2, (kn__arg[]){KN_A_T(self), KN_A_T(mat2)});
}

kn_tensor *kn_addmm(kn_tensor *self, kn_tensor *mat1, kn_tensor *mat2, kn_scalar beta,
                    kn_scalar alpha) {
  return kn__invoke(KN_OP_ADDMM, 5,
                    (kn__arg[]){KN_A_T(self), KN_A_T(mat1), KN_A_T(mat2), KN_A_S(beta),
                                KN_A_S(alpha)});
}

kn_tensor *kn_dot(kn_tensor *self, kn_tensor *other) {
  return kn__invoke(KN_OP_DOT, 2, (kn__arg[]){KN_A_T(self), KN_A_T(other)});
}

kn_tensor *kn_mv(kn_tensor *self, kn_tensor *vec) {
  return kn__invoke(KN_OP_MV, 2, (kn__arg[]){KN_A_T(self), KN_A_T(vec)});
}
