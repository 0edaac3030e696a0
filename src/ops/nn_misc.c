/*
** ops/nn_misc.c: dropout (native_dropout: a seeded Philox mask, counter
** based so the result does not depend on the number of threads) and
** embedding (row gather) with their backward ops and derivative rules.
*/
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "kiln/random.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/symsize.h"
#include "tensor/random.h"
#include "ops/threads.h"

/* ---- dropout ------------------------------------------------------------------------- */
/* args: input, p, train, generator */

kn_status kn__meta_dropout(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t;
  double p = c->args[1].u.d;
  if (!(p >= 0 && p <= 1))
    return kn__error(KN_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
  if (!kn_dtype_is_floating(x->dtype))
    return kn__error(KN_EDTYPE, "dropout: expected a floating point input, got %s",
                     kn_dtype_name(x->dtype));
  kn_dtype dts[2] = {x->dtype, KN_BOOL};
  for (int i = 0; i < 2; i++) {
    kn__outmeta *m = kn__metas_push_like(out, x, dts[i]);
    if (!m) return kn__oom();
  }
  return KN_OK;
}

kn_status kn__k_dropout(const kn__call *c, kn__outs *out) {
  kn_tensor *x = kn__contiguous_copy(c->args[0].u.t, c->args[0].u.t->dtype);
  if (!x) return kn_last_status();
  double p = c->args[1].u.d, scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
  bool train = c->args[2].kind != KN__A_BOOL || c->args[2].u.b;
  kn_generator *gen = kn__generator_or_default(c->args[3].kind == KN__A_GEN ? c->args[3].u.gen : NULL);
  int64_t n = kn_numel(x), nblocks = (n + 3) / 4;
  uint64_t seed = gen->seed, first = train ? kn__generator_reserve(gen, (uint64_t)nblocks) : 0;
  kn_dtype dt = x->dtype;
  int64_t es = (int64_t)kn_dtype_size(dt);
  const char *xp = kn_data(x);
  char *op = kn_data(out->t[0]);
  bool *mp = kn_data(out->t[1]);
  float keep = (float)(1.0 - p);
  KN__PAR_FOR(kn__par_team(n, nblocks, KN__GRAIN),
  for (int64_t b = 0; b < nblocks; b++) {
    uint32_t r[4] = {0, 0, 0, 0};
    if (train) kn__philox(seed, first + (uint64_t)b, r);
    for (int64_t k = 0; k < 4 && b * 4 + k < n; k++) {
      int64_t i = b * 4 + k;
      bool m = !train || kn__u01_float(r[k]) < keep;
      mp[i] = m;
      kn__nn_st(op + i * es, dt, m ? kn__nn_ld(xp + i * es, dt) * (train ? scale : 1.0) : 0.0);
    }
  });
  kn_release(x);
  return KN_OK;
}

/* args: grad_output, mask, scale */
kn_status kn__meta_dropout_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *g = c->args[0].u.t, *m = c->args[1].u.t;
  bool same = g->ndim == m->ndim;
  for (int d = 0; same && d < g->ndim; d++) same = g->sizes[d] == m->sizes[d];
  if (!same) return kn__error(KN_ESHAPE, "native_dropout_backward: mask and grad_output differ in shape");
  kn__outmeta *o = kn__metas_push_like(out, g, g->dtype);
  if (!o) return kn__oom();
  return KN_OK;
}

kn_status kn__k_dropout_backward(const kn__call *c, kn__outs *out) {
  kn_tensor *g = kn__contiguous_copy(c->args[0].u.t, c->args[0].u.t->dtype);
  kn_tensor *m = kn__contiguous_copy(c->args[1].u.t, KN_BOOL);
  kn_status s = g && m ? KN_OK : kn_last_status();
  if (s == KN_OK) {
    double scale = c->args[2].u.d;
    kn_dtype dt = g->dtype;
    int64_t n = kn_numel(g), es = (int64_t)kn_dtype_size(dt);
    const char *gp = kn_data(g);
    const bool *mp = kn_data(m);
    char *op = kn_data(out->t[0]);
    for (int64_t i = 0; i < n; i++) kn__nn_st(op + i * es, dt, mp[i] ? kn__nn_ld(gp + i * es, dt) * scale : 0.0);
  }
  kn_release(g);
  kn_release(m);
  return s;
}

static double dropout_scale(double p) { return p >= 1 ? 0.0 : 1.0 / (1.0 - p); }

kn_status kn__bw_dropout(kn__bwctx *ctx) {
  kn__arg args[3] = {KN_A_T(ctx->grad_outputs[0]), KN_A_T(ctx->outputs[1]),
                     KN_A_D(dropout_scale(ctx->call->args[1].u.d))};
  ctx->grad_inputs[0] = kn__invoke(KN_OP_DROPOUT_BACKWARD, 3, args);
  return ctx->grad_inputs[0] ? KN_OK : kn_last_status();
}

/* Linear in grad_output: the same op again (mask and scale fixed). */
kn_status kn__bw_dropout_backward(kn__bwctx *ctx) {
  if (ctx->needs_input_grad[0]) {
    kn__arg args[3] = {KN_A_T(ctx->grad_outputs[0]), ctx->call->args[1], ctx->call->args[2]};
    ctx->grad_inputs[0] = kn__invoke(KN_OP_DROPOUT_BACKWARD, 3, args);
    if (!ctx->grad_inputs[0]) return kn_last_status();
  }
  return KN_OK;
}

/* ---- embedding ----------------------------------------------------------------------- */
/* args: weight, indices, padding_idx, scale_grad_by_freq, sparse */

static kn_status index_dtype(const kn_tensor *idx) {
  if (idx->dtype != KN_INT64 && idx->dtype != KN_INT32)
    return kn__error(KN_EDTYPE, "Expected tensor for argument #1 'indices' to have one of the "
                     "following scalar types: Long, Int; but got torch.%sTensor instead (while "
                     "checking arguments for embedding)", kn__nn_scalar_type_name(idx->dtype));
  return KN_OK;
}

kn_status kn__meta_embedding(const kn__call *c, kn__metas *out) {
  const kn_tensor *w = c->args[0].u.t, *idx = c->args[1].u.t;
  if (w->ndim != 2) return kn__error(KN_ESHAPE, "'weight' must be 2-D");
  kn_status s = index_dtype(idx);
  if (s != KN_OK) return s;
  if (idx->ndim + 1 > KN_MAX_DIMS)
    return kn__error(KN_ESHAPE, "embedding: indices have too many dimensions");
  kn__outmeta *m = kn__metas_push(out, w->dtype);
  if (!m) return kn__oom();
  m->ndim = idx->ndim + 1;
  kn_sym ws[2];
  kn__tensor_symsizes(w, ws);
  kn__tensor_symsizes(idx, m->sizes);
  m->sizes[idx->ndim] = ws[1];
  return KN_OK;
}

/* Copy an embedding row of D elements of es bytes (stride st elements). */
static void embed_row(char *dst, const char *src, int64_t D, int64_t st, int64_t es) {
  if (st == 1) memcpy(dst, src, (size_t)(D * es));
  else
    for (int64_t j = 0; j < D; j++) memcpy(dst + j * es, src + j * st * es, (size_t)es);
}

kn_status kn__k_embedding(const kn__call *c, kn__outs *out) {
  const kn_tensor *w = c->args[0].u.t;
  kn_tensor *idx = kn__contiguous_copy(c->args[1].u.t, KN_INT64);
  if (!idx) return kn_last_status();
  int64_t n = kn_numel(idx), V = w->sizes[0], D = w->sizes[1];
  int64_t es = (int64_t)kn_dtype_size(w->dtype);
  const int64_t *ip = kn_data(idx);
  kn_status s = KN_OK;
  for (int64_t i = 0; i < n && s == KN_OK; i++)
    if (ip[i] < -V || ip[i] >= V) s = kn__error(KN_ERANGE, "index out of range in self");
  const char *wp = kn_data(w);
  char *op = kn_data(out->t[0]);
  if (s == KN_OK)
    KN__PAR_FOR(kn__par_team(n * D, n, KN__GRAIN_MEM), for (int64_t i = 0; i < n; i++) {
      int64_t r = ip[i] < 0 ? ip[i] + V : ip[i];
      embed_row(op + i * D * es, wp + r * w->strides[0] * es, D, w->strides[1], es);
    });
  kn_release(idx);
  return s;
}

/* args: grad_output, indices, num_weights, padding_idx, scale_grad_by_freq */
kn_status kn__meta_embedding_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *g = c->args[0].u.t;
  kn__outmeta *m = kn__metas_push(out, g->dtype);
  if (!m) return kn__oom();
  kn_sym gs[KN_MAX_DIMS];
  kn__tensor_symsizes(g, gs);
  m->ndim = 2;
  m->sizes[0] = kn__arg_symint(&c->args[2]);
  m->sizes[1] = g->ndim ? gs[g->ndim - 1] : kn__sym_const(1);
  return index_dtype(c->args[1].u.t);
}

kn_status kn__k_embedding_backward(const kn__call *c, kn__outs *out) {
  kn_tensor *g = kn__contiguous_copy(c->args[0].u.t, KN_FLOAT64);
  kn_tensor *idx = kn__contiguous_copy(c->args[1].u.t, KN_INT64);
  kn_tensor *gw = out->t[0];
  int64_t V = c->args[2].u.i, pad = c->args[3].u.i, D = gw->sizes[1];
  bool freq = c->args[4].u.b;
  double *acc = kn__cached_alloc((size_t)(V * D + 1) * sizeof(double));
  int64_t *cnt = kn__cached_alloc((size_t)(V + 1) * sizeof(int64_t));
  kn_status s = !g || !idx ? kn_last_status() : !acc || !cnt ? kn__oom() : KN_OK;
  if (s == KN_OK) {
    int64_t n = kn_numel(idx), es = (int64_t)kn_dtype_size(gw->dtype);
    const int64_t *ip = kn_data(idx);
    const double *gp = kn_data(g);
    memset(acc, 0, (size_t)(V * D) * sizeof(double));
    memset(cnt, 0, (size_t)V * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) {
      int64_t r = ip[i] < 0 ? ip[i] + V : ip[i];
      if (r >= 0 && r < V) cnt[r]++;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t r = ip[i] < 0 ? ip[i] + V : ip[i];
      if (r < 0 || r >= V || r == pad) continue;
      double f = freq ? 1.0 / (double)cnt[r] : 1.0;
      for (int64_t j = 0; j < D; j++) acc[r * D + j] += gp[i * D + j] * f;
    }
    for (int64_t k = 0; k < V * D; k++) kn__nn_st((char *)kn_data(gw) + k * es, gw->dtype, acc[k]);
  }
  if (acc) kn__cached_free(acc, (size_t)(V * D + 1) * sizeof(double));
  if (cnt) kn__cached_free(cnt, (size_t)(V + 1) * sizeof(int64_t));
  kn_release(g);
  kn_release(idx);
  return s;
}

kn_status kn__bw_embedding(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_sym ws[KN_MAX_DIMS], pad;
  kn__tensor_symsizes(c->args[0].u.t, ws);
  kn__arg args[5] = {KN_A_T(ctx->grad_outputs[0]), c->args[1], KN_A_SYMINT(&ws[0]),
                     kn__arg_known(&c->args[2], &pad), c->args[3]};
  ctx->grad_inputs[0] = kn__invoke(KN_OP_EMBEDDING_BACKWARD, 5, args);
  return ctx->grad_inputs[0] ? KN_OK : kn_last_status();
}

/* ---- public API --------------------------------------------------------------------------- */

kn_tensor *kn_dropout(kn_tensor *input, double p, bool training, kn_generator *gen) {
  if (!input) {
    char h[KN__HINT_CAP];
    kn__error(KN_EINVAL, "dropout: input is a NULL tensor%s", kn__error_hint(h, sizeof h));
    return NULL;
  }
  if (!(p >= 0 && p <= 1)) {
    kn__error(KN_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
    return NULL;
  }
  /* PyTorch returns the input itself when nothing is dropped */
  if (!training || p == 0 || kn_numel(input) == 0) return kn__autorelease(kn_retain(input));
  kn__arg args[4] = {KN_A_T(input), KN_A_D(p), KN_A_B(true), KN_A_GEN(gen)};
  kn_tensor *r[2];
  return kn__invoke_multi(KN_OP_DROPOUT, 4, args, r, 2) == 2 ? r[0] : NULL;
}

kn_tensor *kn_native_dropout(kn_tensor *input, double p, bool training, kn_generator *gen,
                             kn_tensor **mask) {
  kn__arg args[4] = {KN_A_T(input), KN_A_D(p), KN_A_B(training), KN_A_GEN(gen)};
  kn_tensor *r[2];
  if (kn__invoke_multi(KN_OP_DROPOUT, 4, args, r, 2) != 2) return NULL;
  if (mask) *mask = r[1];
  return r[0];
}

kn_tensor *kn_embedding(kn_tensor *input, kn_tensor *weight, int64_t padding_idx,
                        bool scale_grad_by_freq) {
  int64_t pad = -1;
  if (padding_idx != KN_NO_PADDING_IDX && weight) {
    int64_t V = kn_size(weight, 0);
    if (padding_idx >= V || padding_idx < -V) {
      kn__error(KN_ERANGE, padding_idx >= 0 ? "Padding_idx must be within num_embeddings"
                                            : "Padding_idx must be within num_embedding");
      return NULL;
    }
    pad = padding_idx < 0 ? padding_idx + V : padding_idx;
  }
  kn__arg args[5] = {KN_A_T(weight), KN_A_T(input), KN_A_I(pad), KN_A_B(scale_grad_by_freq),
                     KN_A_B(false)};
  return kn__invoke(KN_OP_EMBEDDING, 5, args);
}
