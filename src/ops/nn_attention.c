/*
** ops/nn_attention.c: scaled dot-product attention as one fused op.
**
**   scaled_dot_product_attention   the public op (composite): checks its
**       arguments as torch 2's does and calls the fused op below;
**   _scaled_dot_product_fused_attention   the kernel: a blocked online
**       softmax (ops/nn_attention_body.h) that never holds more than a
**       [64, 128] block of scores per thread; returns the output, the
**       logsumexp of every query row and the dropout's Philox state;
**   _scaled_dot_product_fused_attention_backward   the gradients, with the
**       same blocking, recomputing the probabilities from the logsumexp.
**
** Shapes: query [..., L, E], key [..., S, E], value [..., S, Ev] with the
** same leading (batch, head) sizes; attn_mask broadcastable to [..., L, S],
** bool (true = take part in attention, as torch's SDPA) or of the query's
** dtype (added to the scores). is_causal masks key j > query i (top-left
** aligned, torch's tril(ones(L, S))). float32 (matrix blocks through
** oneDNN's sgemm) and float64; bfloat16 and float16 compute in float32
** (FlashAttention's accumulation type): the inputs widened once, the
** outputs and gradients rounded once, the logsumexp kept in float32, so a
** 16-bit call gives the float32 kernel's results rounded (at_widen,
** ops/iter.h's kn__widen16 and kn__narrow16).
** Dropout keeps each probability with 1 - p, counter-based: element
** (head, i, j) of the [heads, L, S] weights uses Philox block
** first + n / 4, lane n % 4 (n its row-major index), so the mask does not
** depend on threads or blocking. The backward regenerates it from the seed
** and first block (the rng_state output, int64 [2]); no mask is stored.
** A query row whose every key is masked gives NaN (0 / 0, as the softmax of
** -inf scores does); with no keys at all (S = 0) the output is 0.
** Threads: forward over (head, row block) tasks, backward over heads
** (OpenMP, above AT_PAR_MIN multiply-adds as the other eager kernels).
** On the GPU the public op computes the math form instead (sdpa_math).
*/
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/gemm_select.h"
#include "ops/nn_dnnl.h"
#include "ops/symsize.h"
#include "ops/vmath.h"
#include "tensor/random.h"

#define AT_BR 64  /* query rows per block */
#define AT_BC 128 /* keys per block */
#define AT_PAR_MIN ((int64_t)1 << 16)

enum { AT_MASK_NONE, AT_MASK_BOOL, AT_MASK_ADD };

/* The operands of one call, flattened to BH heads. */
typedef struct at_geom {
  int64_t BH, L, S, E, Ev;
  int nlead;
  int64_t lead[KN_MAX_DIMS];
  int64_t qb[KN_MAX_DIMS], kb[KN_MAX_DIMS], vb[KN_MAX_DIMS], mb[KN_MAX_DIMS]; /* lead strides */
  int64_t qld, kld, vld, mld_l, mld_s;
  const void *q, *k, *v, *mask; /* element 0 of each */
  int mkind;
  bool causal;
  double scale, p;
  uint64_t seed, first;
} at_geom;

/* Element offset of head bh in a tensor with leading strides st. */
static int64_t at_base(const at_geom *g, const int64_t *st, int64_t bh) {
  int64_t off = 0;
  for (int d = g->nlead - 1; d >= 0; d--) {
    off += (bh % g->lead[d]) * st[d];
    bh /= g->lead[d];
  }
  return off;
}

/* keep[0..n) for elements (bh, i, j0..j0+n) of the [BH, L, S] dropout mask. */
static void at_keep(const at_geom *g, int64_t bh, int64_t i, int64_t j0, int64_t n,
                    unsigned char *keep) {
  float kp = (float)(1.0 - g->p);
  int64_t e0 = (bh * g->L + i) * g->S + j0, blk = -1;
  uint32_t r[4] = {0, 0, 0, 0};
  for (int64_t j = 0; j < n; j++) {
    int64_t e = e0 + j;
    if (e / 4 != blk) kn__philox(g->seed, g->first + (uint64_t)(blk = e / 4), r);
    keep[j] = kn__u01_float(r[e % 4]) < kp;
  }
}

/* Per-thread scratch: score blocks, row statistics, a row of keep flags. */
typedef struct at_work {
  void *s, *pd, *dp;
  double *m, *l, *alpha, *dsum;
  unsigned char *keep;
} at_work;

static void at_work_free(at_work *w) {
  free(w->s), free(w->pd), free(w->dp), free(w->m), free(w->l), free(w->alpha), free(w->dsum);
  free(w->keep);
}

static bool at_work_alloc(at_work *w, const at_geom *g, size_t es, bool bwd) {
  memset(w, 0, sizeof *w);
  size_t blk = (size_t)AT_BR * AT_BC * es;
  w->s = malloc(blk);
  w->m = malloc(AT_BR * sizeof(double));
  w->l = malloc(AT_BR * sizeof(double));
  w->alpha = malloc(AT_BR * sizeof(double));
  w->keep = malloc(AT_BC);
  bool ok = w->s && w->m && w->l && w->alpha && w->keep;
  if (bwd) {
    w->pd = malloc(blk);
    w->dp = malloc(blk);
    w->dsum = malloc((size_t)(g->L + 1) * sizeof(double));
    ok = ok && w->pd && w->dp && w->dsum;
  }
  return ok;
}

/* Matrix products C = alpha * op(A) @ op(B) + beta * C, row-major. */
static void gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, double beta,
                        float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0.0f : (float)(beta * C[i * ldc + j]);
    return;
  }
  /* arguments are valid by construction (leading dims >= the row lengths) */
  (void)kn__nn_sgemm(ta, tb, M, N, K, (float)alpha, A, lda > 0 ? lda : 1, B, ldb > 0 ? ldb : 1,
                     (float)beta, C, ldc > 0 ? ldc : 1);
}

static void gemm_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                        const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                        double *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
      C[i * ldc + j] = alpha * acc + (beta == 0 ? 0.0 : beta * C[i * ldc + j]);
    }
}

/* The largest of x[0..n) (NaN skipped; -inf when n is 0 or all are NaN),
** in 4-lane vectors (GCC's vector extension: an `omp simd` max reduction
** keeps its accumulator in memory at -O2, a store and a load an iteration). */
typedef float at_v4f __attribute__((vector_size(16), aligned(4)));
typedef int32_t at_v4i __attribute__((vector_size(16)));

static at_v4f at_vmax(at_v4f x, at_v4f m) {
  at_v4i c = x > m;
  return (at_v4f)((c & (at_v4i)x) | (~c & (at_v4i)m));
}

static float at_rowmax_f32(const float *x, int64_t n) {
  float m = -INFINITY;
  int64_t j = 0;
  if (n >= 8) {
    at_v4f a = {m, m, m, m}, b = a;
    for (; j + 8 <= n; j += 8)
      a = at_vmax(*(const at_v4f *)(x + j), a), b = at_vmax(*(const at_v4f *)(x + j + 4), b);
    for (int l = 0; l < 4; l++) {
      m = a[l] > m ? a[l] : m;
      m = b[l] > m ? b[l] : m;
    }
  }
  for (; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

static double at_rowmax_f64(const double *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}

/* sum(x[j] * y[j]) over j < n (sum(x) when y is NULL) in double, in four
** running sums (element j goes to sum j % 4), float32 in 2-lane vectors (SSE2
** registers: a 4-lane double vector would live on the stack). */
typedef float at_v2f __attribute__((vector_size(8), aligned(4)));
typedef double at_v2d __attribute__((vector_size(16)));

static at_v2d at_v2(const float *x) { return __builtin_convertvector(*(const at_v2f *)x, at_v2d); }

static double at_rowdot_f32(const float *x, const float *y, int64_t n) {
  at_v2d s0 = {0, 0}, s1 = s0;
  int64_t j = 0;
  if (y)
    for (; j + 4 <= n; j += 4)
      s0 += at_v2(x + j) * at_v2(y + j), s1 += at_v2(x + j + 2) * at_v2(y + j + 2);
  else
    for (; j + 4 <= n; j += 4) s0 += at_v2(x + j), s1 += at_v2(x + j + 2);
  for (; j < n; j++) s0[0] += (double)x[j] * (y ? (double)y[j] : 1.0);
  return (s0[0] + s0[1]) + (s1[0] + s1[1]);
}

static double at_rowdot_f64(const double *x, const double *y, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; l++) s[l] += x[j + l] * (y ? y[j + l] : 1.0);
  for (; j < n; j++) s[0] += x[j] * (y ? y[j] : 1.0);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

static void at_exp_f32(float *y, const float *x, int64_t n) { kn__vmath_get()->f32[KN__VM_EXP](y, x, n); }
static void at_exp_f64(double *y, const double *x, int64_t n) {
  kn__vmath_get()->f64[KN__VM_EXP](y, x, n);
}

#define AT_T float
#define AT_NAME(n) n##_f32
#define AT_EXP at_exp_f32
#include "ops/nn_attention_body.h"
#undef AT_T
#undef AT_NAME
#undef AT_EXP
#define AT_T double
#define AT_NAME(n) n##_f64
#define AT_EXP at_exp_f64
#include "ops/nn_attention_body.h"
#undef AT_T
#undef AT_NAME
#undef AT_EXP

/* ---- checks (meta) ------------------------------------------------------------------ */

/* The type the kernel computes in, and the logsumexp's type: float32 for
** 16-bit inputs (FlashAttention's accumulation type), else the input's. */
static kn_dtype at_work_dtype(kn_dtype dt) { return kn__is16(dt) ? KN_FLOAT32 : dt; }

static kn_status check_mask(const char *op, const kn_tensor *m, const kn_tensor *q, int nd,
                            const kn_sym *want) {
  if (m->dtype != KN_BOOL && m->dtype != q->dtype)
    return kn__error(KN_EDTYPE, "%s: Expected attn_mask dtype to be bool or to match query "
                                "dtype (torch.%s), but got attn_mask.dtype: torch.%s", op,
                     kn_dtype_name(q->dtype), kn_dtype_name(m->dtype));
  kn_sym ms[KN_MAX_DIMS];
  kn__tensor_symsizes(m, ms);
  bool ok = m->ndim <= nd;
  for (int d = 0; ok && d < m->ndim; d++) {
    kn_sym w = want[nd - m->ndim + d];
    ok = kn__sym_guard_eq_int(ms[d], 1) || kn__sym_guard_eq(ms[d], w);
  }
  if (!ok)
    return kn__error(KN_ESHAPE, "%s: attn_mask of %dD shape with sizes %lld x %lld (last two) "
                                "is not broadcastable to the attention weights [..., %lld, %lld] "
                                "(query length L, key length S)", op, m->ndim,
                     (long long)(m->ndim > 1 ? m->sizes[m->ndim - 2] : 1),
                     (long long)(m->ndim > 0 ? m->sizes[m->ndim - 1] : 1),
                     (long long)kn__sym_hint(want[nd - 2]), (long long)kn__sym_hint(want[nd - 1]));
  return KN_OK;
}

/* query, key, value (and mask) agree; *lead_ok on success. */
static kn_status check_qkv(const char *op, const kn_tensor *q, const kn_tensor *k,
                           const kn_tensor *v, const kn_tensor *m) {
  const kn_tensor *t[3] = {q, k, v};
  const char *names[3] = {"query", "key", "value"};
  for (int i = 0; i < 3; i++) {
    if (t[i]->dtype != KN_FLOAT32 && t[i]->dtype != KN_FLOAT64 && !kn__is16(t[i]->dtype))
      return kn__error(KN_EDTYPE, "%s: expected %s of dtype float32, float64, bfloat16 or "
                                  "float16, found %s", op, names[i], kn_dtype_name(t[i]->dtype));
    if (t[i]->dtype != q->dtype)
      return kn__error(KN_EDTYPE, "%s: Expected query, key, and value to have the same dtype, "
                                  "but got query.dtype: torch.%s key.dtype: torch.%s and "
                                  "value.dtype: torch.%s instead.", op, kn_dtype_name(q->dtype),
                       kn_dtype_name(k->dtype), kn_dtype_name(v->dtype));
    if (t[i]->ndim < 2 || t[i]->ndim != q->ndim)
      return kn__error(KN_ESHAPE, "%s: expected query, key and value of the same rank >= 2 "
                                  "([..., L, E], [..., S, E], [..., S, Ev]), found %dD, %dD and "
                                  "%dD", op, q->ndim, k->ndim, v->ndim);
  }
  int nd = q->ndim;
  kn_sym qs[KN_MAX_DIMS], ks[KN_MAX_DIMS], vs[KN_MAX_DIMS], want[KN_MAX_DIMS];
  kn__tensor_symsizes(q, qs), kn__tensor_symsizes(k, ks), kn__tensor_symsizes(v, vs);
  for (int d = 0; d < nd - 2; d++)
    if (!kn__sym_guard_eq(qs[d], ks[d]) || !kn__sym_guard_eq(qs[d], vs[d]))
      return kn__error(KN_ESHAPE, "%s: query, key and value must have the same batch sizes, "
                                  "found %lld, %lld and %lld at dimension %d", op,
                       (long long)q->sizes[d], (long long)k->sizes[d], (long long)v->sizes[d], d);
  if (!kn__sym_guard_eq(qs[nd - 1], ks[nd - 1]))
    return kn__error(KN_ESHAPE, "%s: query and key must have the same embedding size, found %lld "
                                "and %lld", op, (long long)q->sizes[nd - 1],
                     (long long)k->sizes[nd - 1]);
  if (!kn__sym_guard_eq(ks[nd - 2], vs[nd - 2]))
    return kn__error(KN_ESHAPE, "%s: key and value must have the same sequence length, found "
                                "%lld and %lld", op, (long long)k->sizes[nd - 2],
                     (long long)v->sizes[nd - 2]);
  if (!m) return KN_OK;
  memcpy(want, qs, sizeof(kn_sym) * (size_t)(nd - 1));
  want[nd - 1] = ks[nd - 2];
  return check_mask(op, m, q, nd, want);
}

static kn_status check_p(const char *op, double p) {
  if (!(p >= 0 && p < 1))
    return kn__error(KN_EINVAL, "%s: dropout probability has to be in [0, 1), but got %g", op, p);
  return KN_OK;
}

static const kn_tensor *opt_t(const kn__call *c, int i) {
  return c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
}

/* Output of q's leading sizes and then `n` more sizes. */
static kn_status push_out(kn__metas *out, const kn_tensor *q, kn_dtype dt, int keep,
                          int n, const kn_sym *more) {
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  kn_sym qs[KN_MAX_DIMS];
  kn__tensor_symsizes(q, qs);
  m->ndim = keep + n;
  for (int d = 0; d < keep; d++) m->sizes[d] = qs[d];
  for (int d = 0; d < n; d++) m->sizes[keep + d] = more[d];
  return KN_OK;
}

/* args: query, key, value, dropout_p, is_causal, attn_mask, scale, generator */
kn_status kn__meta_sdpa_fused(const kn__call *c, kn__metas *out) {
  static const char op[] = "_scaled_dot_product_fused_attention";
  const kn_tensor *q = c->args[0].u.t, *k = c->args[1].u.t, *v = c->args[2].u.t;
  kn_status st = check_qkv(op, q, k, v, opt_t(c, 5));
  if (st == KN_OK) st = check_p(op, c->args[3].u.d);
  if (st != KN_OK) return st;
  kn_sym vs[KN_MAX_DIMS];
  kn__tensor_symsizes(v, vs);
  int nd = q->ndim;
  st = push_out(out, q, q->dtype, nd - 1, 1, &vs[nd - 1]);                  /* [..., L, Ev] */
  if (st == KN_OK) st = push_out(out, q, at_work_dtype(q->dtype), nd - 1, 0, NULL); /* [..., L] */
  kn_sym two = kn__sym_const(2);
  if (st == KN_OK) st = push_out(out, q, KN_INT64, 0, 1, &two);              /* [2] */
  return st;
}

/* ---- kernels ------------------------------------------------------------------------- */

/* Leading strides and row stride of t, or false when its rows are not
** unit-stride with a row stride BLAS accepts (then the caller copies). */
static bool at_layout(const kn_tensor *t, int nlead, int64_t *lead, int64_t *ld) {
  int nd = t->ndim;
  int64_t rows = t->sizes[nd - 2], cols = t->sizes[nd - 1];
  if (cols > 1 && t->strides[nd - 1] != 1) return false;
  *ld = rows > 1 ? t->strides[nd - 2] : cols;
  if (*ld < cols) return false;
  for (int d = 0; d < nlead; d++) lead[d] = t->sizes[d] > 1 ? t->strides[d] : 0;
  return true;
}

/* t itself, or a contiguous copy kept in *tmp (owned by the caller). */
static const kn_tensor *at_usable(const kn_tensor *t, int nlead, int64_t *lead, int64_t *ld,
                                  kn_tensor **tmp) {
  if (at_layout(t, nlead, lead, ld)) return t;
  *tmp = kn__contiguous_copy(t, t->dtype);
  if (!*tmp || !at_layout(*tmp, nlead, lead, ld)) return NULL;
  return *tmp;
}

/* Element 0 of t (NULL for a tensor without elements). */
static const void *at_ptr(const kn_tensor *t) {
  if (!t->storage->data) return NULL;
  return (const char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype);
}

/* The mask's strides broadcast to [lead..., L, S] (0 on broadcast dims). */
static void at_mask_geom(at_geom *g, const kn_tensor *m) {
  int nd = g->nlead + 2, off = nd - m->ndim;
  int64_t st[KN_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int md = d - off;
    st[d] = md >= 0 && m->sizes[md] != 1 ? m->strides[md] : 0;
  }
  memcpy(g->mb, st, sizeof(int64_t) * (size_t)g->nlead);
  g->mld_l = st[nd - 2], g->mld_s = st[nd - 1];
  g->mask = at_ptr(m);
  g->mkind = m->dtype == KN_BOOL ? AT_MASK_BOOL : AT_MASK_ADD;
}

/* Geometry of q, k, v, mask; copies (if any) go to tmp[0..3). */
static kn_status at_geom_init(at_geom *g, const kn_tensor *q, const kn_tensor *k,
                              const kn_tensor *v, const kn_tensor *m, bool causal,
                              const kn__arg *scale, double p, kn_tensor **tmp) {
  memset(g, 0, sizeof *g);
  int nd = q->ndim;
  g->nlead = nd - 2;
  g->BH = 1;
  for (int d = 0; d < nd - 2; d++) g->BH *= (g->lead[d] = q->sizes[d]);
  g->L = q->sizes[nd - 2], g->S = k->sizes[nd - 2], g->E = q->sizes[nd - 1];
  g->Ev = v->sizes[nd - 1];
  q = at_usable(q, g->nlead, g->qb, &g->qld, &tmp[0]);
  k = q ? at_usable(k, g->nlead, g->kb, &g->kld, &tmp[1]) : NULL;
  v = k ? at_usable(v, g->nlead, g->vb, &g->vld, &tmp[2]) : NULL;
  if (!v) return kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  g->q = at_ptr(q), g->k = at_ptr(k), g->v = at_ptr(v);
  if (m) at_mask_geom(g, m);
  g->causal = causal;
  g->scale = scale->kind == KN__A_DOUBLE ? scale->u.d : 1.0 / sqrt((double)g->E);
  g->p = p;
  return KN_OK;
}

/* 16-bit tensors among t[0..n) (NULL entries stay) replaced by float32
** copies kept in keep[i] (kn__widen16; owned by the caller): attention on
** bfloat16 and float16 computes and accumulates in float32, so its results
** are those of the float32 kernel on the widened inputs, rounded once at
** the end (kn__stand_in16, kn__narrow16). */
static kn_status at_widen(const kn_tensor **t, int n, kn_tensor **keep) {
  for (int i = 0; i < n; i++)
    if (t[i] && !(t[i] = kn__widen16(t[i], &keep[i]))) return kn_last_status();
  return KN_OK;
}

kn_status kn__k_sdpa_fused(const kn__call *c, kn__outs *out) {
  at_geom g;
  memset(&g, 0, sizeof g);
  const kn_tensor *t[4] = {c->args[0].u.t, c->args[1].u.t, c->args[2].u.t, opt_t(c, 5)};
  kn_tensor *tmp[3] = {NULL, NULL, NULL}, *w32[4] = {NULL, NULL, NULL, NULL}, *o32 = NULL;
  kn_tensor *o = NULL;
  kn_status st = at_widen(t, 4, w32);
  if (st == KN_OK)
    st = at_geom_init(&g, t[0], t[1], t[2], t[3], c->args[4].u.b, &c->args[6], c->args[3].u.d,
                      tmp);
  if (st == KN_OK && !(o = kn__stand_in16(out->t[0], &o32))) st = kn_last_status();
  int64_t *rng = kn_data(out->t[2]);
  if (st == KN_OK && g.p > 0) {
    kn_generator *gen = kn__generator_or_default(c->args[7].kind == KN__A_GEN ? c->args[7].u.gen
                                                                                : NULL);
    g.seed = gen->seed;
    g.first = kn__generator_reserve(gen, (uint64_t)(g.BH * g.L * g.S + 3) / 4);
  }
  rng[0] = (int64_t)g.seed, rng[1] = (int64_t)g.first;
  if (st == KN_OK && g.BH * g.L > 0)
    st = t[0]->dtype == KN_FLOAT32 ? fwd_f32(&g, kn_data(o), kn_data(out->t[1]))
                                   : fwd_f64(&g, kn_data(o), kn_data(out->t[1]));
  st = kn__narrow16(st, out->t[0], o32);
  for (int i = 0; i < 3; i++) kn_release(tmp[i]);
  for (int i = 0; i < 4; i++) kn_release(w32[i]);
  return st;
}

/* args: grad_out, query, key, value, out, logsumexp, rng_state, dropout_p,
** is_causal, attn_mask, scale, mask_grad */
kn_status kn__meta_sdpa_fused_backward(const kn__call *c, kn__metas *out) {
  static const char op[] = "_scaled_dot_product_fused_attention_backward";
  const kn_tensor *q = c->args[1].u.t, *k = c->args[2].u.t, *v = c->args[3].u.t;
  const kn_tensor *m = opt_t(c, 9);
  kn_status st = check_qkv(op, q, k, v, m);
  if (st == KN_OK) st = check_p(op, c->args[7].u.d);
  if (st != KN_OK) return st;
  for (int i = 1; i <= 3; i++)
    if (!kn__metas_push_like(out, c->args[i].u.t, q->dtype)) return kn__oom();
  kn_sym ks[KN_MAX_DIMS], zero = kn__sym_const(0);
  kn__tensor_symsizes(k, ks);
  bool want = m && c->args[11].u.b;
  return want ? push_out(out, q, q->dtype, q->ndim - 1, 1, &ks[q->ndim - 2])
              : push_out(out, q, q->dtype, 0, 1, &zero);
}

/* The gradients of a call with keys (g filled in): the saved tensors in the
** kernel's type wd, 16-bit outputs through float32 stand-ins. */
static kn_status at_bwd_run(const kn__call *c, at_geom *g, kn_dtype wd, kn__outs *out) {
  kn_tensor *sv[4] = {kn__contiguous_copy(c->args[0].u.t, wd),
                      kn__contiguous_copy(c->args[4].u.t, wd),
                      kn__contiguous_copy(c->args[5].u.t, wd),
                      kn__contiguous_copy(c->args[6].u.t, KN_INT64)};
  kn_tensor *w[4] = {NULL, NULL, NULL, NULL};
  void *p[4] = {NULL, NULL, NULL, NULL};
  kn_status st = sv[0] && sv[1] && sv[2] && sv[3] ? KN_OK : kn_last_status();
  if (st == KN_OK && kn_numel(sv[3]) != 2)
    st = kn__error(KN_ESHAPE, "_scaled_dot_product_fused_attention_backward: expected rng_state "
                              "of 2 elements, found %lld", (long long)kn_numel(sv[3]));
  bool gm = kn_numel(out->t[3]) && g->mkind != AT_MASK_NONE;
  for (int i = 0; i < (gm ? 4 : 3) && st == KN_OK; i++) {
    kn_tensor *d = kn__stand_in16(out->t[i], &w[i]);
    if (d) p[i] = kn_data(d);
    else st = kn_last_status();
  }
  if (st == KN_OK) {
    const int64_t *rng = kn_data(sv[3]);
    g->seed = (uint64_t)rng[0], g->first = (uint64_t)rng[1];
    st = wd == KN_FLOAT32 ? bwd_f32(g, kn_data(sv[0]), kn_data(sv[1]), kn_data(sv[2]), p[0], p[1],
                                    p[2], p[3])
                          : bwd_f64(g, kn_data(sv[0]), kn_data(sv[1]), kn_data(sv[2]), p[0], p[1],
                                    p[2], p[3]);
  }
  for (int i = 0; i < 4; i++) st = kn__narrow16(st, out->t[i], w[i]), kn_release(sv[i]);
  return st;
}

kn_status kn__k_sdpa_fused_backward(const kn__call *c, kn__outs *out) {
  at_geom g;
  memset(&g, 0, sizeof g);
  const kn_tensor *q = c->args[1].u.t;
  const kn_tensor *t[4] = {q, c->args[2].u.t, c->args[3].u.t, opt_t(c, 9)};
  kn_tensor *tmp[3] = {NULL, NULL, NULL}, *w32[4] = {NULL, NULL, NULL, NULL};
  kn_status st = at_widen(t, 4, w32);
  if (st == KN_OK)
    st = at_geom_init(&g, t[0], t[1], t[2], t[3], c->args[8].u.b, &c->args[10], c->args[7].u.d,
                      tmp);
  if (st == KN_OK && g.BH * g.L * g.S == 0) { /* nothing attends: every gradient is 0 */
    for (int i = 0; i < 4; i++)
      if (kn_numel(out->t[i]))
        memset(kn_data(out->t[i]), 0, (size_t)kn_numel(out->t[i]) * kn_dtype_size(q->dtype));
  } else if (st == KN_OK) {
    st = at_bwd_run(c, &g, at_work_dtype(q->dtype), out);
  }
  for (int i = 0; i < 3; i++) kn_release(tmp[i]);
  for (int i = 0; i < 4; i++) kn_release(w32[i]);
  return st;
}

/* ---- derivative rule ----------------------------------------------------------------- */

kn_status kn__bw_sdpa_fused(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *m = c->args[5].kind == KN__A_TENSOR ? c->args[5].u.t : NULL;
  int fm = m ? kn__bw_input_index(c, 5, 0) : -1;
  bool mgrad = fm >= 0 && ctx->needs_input_grad[fm];
  if (!ctx->grad_outputs[0]) return KN_OK; /* only the logsumexp was used: no gradient flows */
  kn__arg args[12] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], c->args[1], c->args[2],
                      KN_A_T(ctx->outputs[0]), KN_A_T(ctx->outputs[1]), KN_A_T(ctx->outputs[2]),
                      c->args[3], c->args[4], c->args[5], c->args[6], KN_A_B(mgrad)};
  kn_tensor *r[4];
  if (kn__invoke_multi(KN_OP_SDPA_FUSED_BACKWARD, 12, args, r, 4) != 4) return kn_last_status();
  for (int i = 0; i < 3; i++)
    if (ctx->needs_input_grad[i]) ctx->grad_inputs[i] = r[i];
  if (mgrad && !(ctx->grad_inputs[fm] = kn__sum_to_like(r[3], m))) return kn_last_status();
  return KN_OK;
}

/* ---- the math form (the GPU) --------------------------------------------------------- */

/* A bool tensor [1] of true on x's device, from x's first element (x has
** one): x != 0 or x == 0 holds for every value, NaN included. */
static kn_tensor *device_true(kn_tensor *x) {
  while (x && x->ndim > 1) x = kn_select(x, 0, 0);
  x = x ? kn_narrow(x, 0, 0, 1) : NULL;
  return x ? kn_logical_or(kn_ne_scalar(x, kn_int(0)), kn_eq_scalar(x, kn_int(0))) : NULL;
}

/* Rows of the keep pattern P = [true, false x (S - 1), true x L] (period
** S + L), one per query, contiguous: [L, S + L]. */
static kn_tensor *periodic_rows(kn_tensor *one, kn_sym l, kn_sym s) {
  kn_sym s1 = kn__sym_sub(s, kn__sym_const(1)), p = kn__sym_add(s, l);
  kn_tensor *parts[3] = {one, kn_logical_not(kn__expand_sym(one, 1, &s1)),
                         kn__expand_sym(one, 1, &l)};
  kn_tensor *row = parts[1] && parts[2] ? kn_cat(parts, 3, 0) : NULL;
  row = row ? kn_unsqueeze(row, 0) : NULL;
  return row ? kn_contiguous(kn__expand_sym(row, 2, (kn_sym[]){l, p})) : NULL;
}

kn_tensor *kn__causal_keep(kn_tensor *like) {
  if (!like) return NULL;
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(like, sz);
  if (like->ndim < 2 || kn__sym_guard_eq_int(kn__numel_sym(like), 0)) {
    kn__error(KN_EINVAL, "causal mask: expected scores [..., L, S] with at least one element, "
                         "found %dD with %lld elements", like->ndim, (long long)kn_numel(like));
    return NULL;
  }
  kn_sym l = sz[like->ndim - 2], s = sz[like->ndim - 1];
  kn_tensor *one = device_true(like);
  kn_tensor *rows = one ? periodic_rows(one, l, s) : NULL;
  if (!rows) return NULL;
  /* rows read L * (S + L - 1) elements at a time: row i starts i elements
  ** further into the period, so its element j is P[(j - i) mod (S + L)],
  ** which is true for j <= i and false for i < j < S */
  kn_sym w = kn__sym_sub(kn__sym_add(s, l), kn__sym_const(1));
  kn_tensor *flat = kn__reshape_sym(rows, 1, (kn_sym[]){kn__sym_mul(l, kn__sym_add(s, l))});
  flat = flat ? kn__slice_sym(flat, 0, kn__sym_const(0), kn__sym_mul(l, w), 1) : NULL;
  kn_tensor *skew = flat ? kn__view_sym(flat, 2, (kn_sym[]){l, w}) : NULL;
  return skew ? kn__slice_sym(skew, 1, kn__sym_const(0), s, 1) : NULL;
}

kn_tensor *kn__mask_scores(kn_tensor *scores, kn_tensor *keep) {
  if (!scores || !keep) return NULL;
  kn_tensor *ninf = kn_log(kn_to(keep, scores->dtype)); /* 0 where kept, -inf elsewhere */
  return ninf ? kn_where(keep, scores, ninf) : NULL;
}

/* Attention on the GPU, as PyTorch's math backend computes it:
** softmax(q k^T * scale + mask) v, from the dispatcher's ops (GEMMs through
** cuBLAS, the softmax a generated kernel); autograd and compiled graphs see
** those parts. scale NULL: 1/sqrt(E). A bool mask is applied as a select of
** -inf (masked_fill has no GPU kernel), the causal mask as a bool mask built
** on the device (kn__causal_keep), both when both are given (the fused op's
** contract, ops/nn.h). A tensor of the current scope, or NULL. */
static kn_tensor *sdpa_math(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask, double p,
                            bool causal, const double *scale, kn_generator *gen) {
  double e = (double)q->sizes[q->ndim - 1];
  double sc = scale ? *scale : 1.0 / sqrt(e > 0 ? e : 1);
  kn_tensor *s = kn_mul_scalar(kn_matmul(q, kn_transpose(k, -2, -1)), kn_float(sc));
  if (causal && s && !kn__sym_guard_eq_int(kn__numel_sym(s), 0)) s = kn__mask_scores(s, kn__causal_keep(s));
  if (mask && mask->dtype == KN_BOOL)
    s = kn__mask_scores(s, mask);
  else if (mask)
    s = kn_add(s, mask);
  kn_tensor *a = kn_softmax(s, -1);
  if (p > 0) a = kn_dropout(a, p, true, gen);
  return kn_matmul(a, v);
}

/* ---- the public op ------------------------------------------------------------------- */

static kn_status sdpa_math_call(const kn__call *c, kn__outs *out) {
  double scale = c->args[6].kind == KN__A_DOUBLE ? c->args[6].u.d : 0;
  kn_scope_begin();
  kn_tensor *r = sdpa_math(c->args[0].u.t, c->args[1].u.t, c->args[2].u.t,
                           c->args[3].kind == KN__A_TENSOR ? c->args[3].u.t : NULL,
                           c->args[4].u.d, c->args[5].u.b,
                           c->args[6].kind == KN__A_DOUBLE ? &scale : NULL, c->args[7].u.gen);
  kn_status st = r ? KN_OK : kn_last_status();
  if (st == KN_OK && !kn__outs_push(out, kn_retain(r))) st = kn__oom();
  kn_scope_end();
  return st;
}

/* args: query, key, value, attn_mask, dropout_p, is_causal, scale, generator */
kn_status kn__k_sdpa(const kn__call *c, kn__outs *out) {
  if (c->args[3].kind == KN__A_TENSOR && c->args[3].u.t && c->args[5].u.b)
    return kn__error(KN_EINVAL, "scaled_dot_product_attention: Explicit attn_mask should not be "
                                "set when is_causal=True");
  if (kn__value_device(c->args[0].u.t) == KN_CUDA) return sdpa_math_call(c, out);
  kn__arg args[8] = {c->args[0], c->args[1], c->args[2], c->args[4],
                     c->args[5], c->args[3], c->args[6], c->args[7]};
  kn_scope_begin();
  kn_tensor *r[3];
  kn_status st = kn__invoke_multi(KN_OP_SDPA_FUSED, 8, args, r, 3) == 3 ? KN_OK : kn_last_status();
  if (st == KN_OK && !kn__outs_push(out, kn_retain(r[0]))) st = kn__oom();
  kn_scope_end();
  return st;
}

kn_tensor *kn_scaled_dot_product_attention(kn_tensor *query, kn_tensor *key, kn_tensor *value,
                                           kn_tensor *attn_mask, double dropout_p, bool is_causal,
                                           const double *scale, kn_generator *gen) {
  if (!query || !key || !value) {
    kn__error(KN_EINVAL, "scaled_dot_product_attention: expected query, key and value tensors, "
                         "found NULL for %s", !query ? "query" : !key ? "key" : "value");
    return NULL;
  }
  kn__arg args[8] = {KN_A_T(query), KN_A_T(key), KN_A_T(value),
                     attn_mask ? KN_A_T(attn_mask) : KN_A_NONE, KN_A_D(dropout_p),
                     KN_A_B(is_causal), scale ? KN_A_D(*scale) : KN_A_NONE, KN_A_GEN(gen)};
  return kn__invoke(KN_OP_SDPA, 8, args);
}

kn_tensor *kn__sdpa_fused(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask, double p,
                          bool causal, kn_generator *gen) {
  if (q && kn__value_device(q) == KN_CUDA) return sdpa_math(q, k, v, mask, p, causal, NULL, gen);
  kn__arg args[8] = {KN_A_T(q), KN_A_T(k), KN_A_T(v), KN_A_D(p), KN_A_B(causal),
                     mask ? KN_A_T(mask) : KN_A_NONE, KN_A_NONE, KN_A_GEN(gen)};
  kn_tensor *r[3];
  return kn__invoke_multi(KN_OP_SDPA_FUSED, 8, args, r, 3) == 3 ? r[0] : NULL;
}
