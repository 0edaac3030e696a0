/*
** ops/nn_attention_body.h: the blocked attention kernels of ops/nn_attention.c
** for one element type, included there twice after defining
**   AT_T        the element type (float or double)
**   AT_NAME(n)  the function's name for that type (n ## _f32, n ## _f64)
**   AT_EXP      the vector exp over an array of AT_T (y, x, n)
** and the type's matrix product AT_NAME(gemm) (row-major, transpose flags),
** row maximum AT_NAME(at_rowmax) and row sum or dot product AT_NAME(at_rowdot).
**
** Forward (FlashAttention's schedule): a block of AT_BR query rows walks the
** keys in blocks of AT_BC. Each block's scores S = scale * Q K^T (+ masks)
** update the running row maximum m and sum l; the output rows, kept
** unnormalised, are rescaled by exp(m_old - m_new) before P V is added. At
** the end out = O / l and logsumexp = m + log(l). Only a [AT_BR, AT_BC]
** block of scores exists at any time.
** Backward (FlashAttention-2): per head, key blocks outer and query blocks
** inner; P is recomputed from the saved logsumexp, D = rowsum(dO * O),
** dS = P * (dP - D); dK and dV of the key block and dQ of the head
** accumulate in place (one thread owns a head, so nothing races).
*/

/* Scores of rows i0.. (br) and keys j0.. (bc) of head bh: s = scale * Q K^T
** with the causal mask and attn_mask applied (-inf where masked). */
static void AT_NAME(scores)(const at_geom *g, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                            int64_t bc, AT_T *s) {
  const AT_T *q = (const AT_T *)g->q + at_base(g, g->qb, bh) + i0 * g->qld;
  const AT_T *k = (const AT_T *)g->k + at_base(g, g->kb, bh) + j0 * g->kld;
  AT_NAME(gemm)(false, true, br, bc, g->E, g->scale, q, g->qld, k, g->kld, 0.0, s, bc);
  if (g->mkind != AT_MASK_NONE) {
    int64_t mb = at_base(g, g->mb, bh) + i0 * g->mld_l + j0 * g->mld_s;
    for (int64_t i = 0; i < br; i++)
      for (int64_t j = 0; j < bc; j++) {
        int64_t e = mb + i * g->mld_l + j * g->mld_s;
        AT_T *x = &s[i * bc + j];
        if (g->mkind == AT_MASK_BOOL) *x = ((const bool *)g->mask)[e] ? *x : (AT_T)-INFINITY;
        else *x += ((const AT_T *)g->mask)[e];
      }
  }
  if (g->causal)
    for (int64_t i = 0; i < br; i++)
      for (int64_t j = i0 + i + 1 - j0; j < bc; j++)
        if (j >= 0) s[i * bc + j] = (AT_T)-INFINITY;
}

/* Multiplies row i (keys j0.., bc) of p by the dropout keep mask / (1 - p);
** dp too when given. */
static void AT_NAME(drop)(const at_geom *g, at_work *w, int64_t bh, int64_t i, int64_t j0,
                          int64_t bc, AT_T *p, AT_T *dp) {
  at_keep(g, bh, i, j0, bc, w->keep);
  AT_T sc = (AT_T)(1.0 / (1.0 - g->p));
  for (int64_t j = 0; j < bc; j++) {
    AT_T z = w->keep[j] ? sc : (AT_T)0;
    p[j] *= z;
    if (dp) dp[j] *= z;
  }
}

/* One key block of the online softmax for rows i0.. (br): updates m, l and
** the unnormalised output rows o. */
static void AT_NAME(fwd_block)(const at_geom *g, at_work *w, int64_t bh, int64_t i0, int64_t br,
                               int64_t j0, int64_t bc, AT_T *o) {
  AT_T *s = w->s;
  AT_NAME(scores)(g, bh, i0, br, j0, bc, s);
  for (int64_t i = 0; i < br; i++) {
    AT_T *row = s + i * bc;
    double mx = AT_NAME(at_rowmax)(row, bc), mn = mx > w->m[i] ? mx : w->m[i];
    w->alpha[i] = mn == -INFINITY ? 1.0 : exp(w->m[i] - mn);
    AT_T sub = mn == -INFINITY ? (AT_T)0 : (AT_T)mn; /* all masked so far: exp(-inf) = 0 */
    _Pragma("omp simd") for (int64_t j = 0; j < bc; j++) row[j] -= sub;
    w->m[i] = mn;
  }
  AT_EXP(s, s, br * bc);
  for (int64_t i = 0; i < br; i++) {
    AT_T *row = s + i * bc, *orow = o + i * g->Ev;
    double a = w->alpha[i];
    w->l[i] = w->l[i] * a + AT_NAME(at_rowdot)(row, NULL, bc);
    if (a != 1.0)
      _Pragma("omp simd") for (int64_t e = 0; e < g->Ev; e++) orow[e] = (AT_T)(orow[e] * a);
    if (g->p > 0) AT_NAME(drop)(g, w, bh, i0 + i, j0, bc, row, NULL);
  }
  const AT_T *v = (const AT_T *)g->v + at_base(g, g->vb, bh) + j0 * g->vld;
  AT_NAME(gemm)(false, false, br, g->Ev, bc, 1.0, s, bc, v, g->vld, 1.0, o, g->Ev);
}

/* Output rows i0.. (br) of head bh and their logsumexp. */
static void AT_NAME(fwd_rows)(const at_geom *g, at_work *w, int64_t bh, int64_t i0, int64_t br,
                              AT_T *out, AT_T *lse) {
  AT_T *o = out + (bh * g->L + i0) * g->Ev;
  for (int64_t i = 0; i < br; i++) w->m[i] = -INFINITY, w->l[i] = 0;
  memset(o, 0, (size_t)(br * g->Ev) * sizeof(AT_T));
  int64_t jend = g->causal && i0 + br < g->S ? i0 + br : g->S;
  for (int64_t j0 = 0; j0 < jend; j0 += AT_BC)
    AT_NAME(fwd_block)(g, w, bh, i0, br, j0, jend - j0 < AT_BC ? jend - j0 : AT_BC, o);
  for (int64_t i = 0; i < br; i++) {
    /* every key masked: 0 / 0 (NaN, as softmax of -inf scores); no keys: 0 */
    double inv = g->S == 0 ? 0.0 : 1.0 / w->l[i];
    AT_T *orow = o + i * g->Ev;
    _Pragma("omp simd") for (int64_t e = 0; e < g->Ev; e++) orow[e] = (AT_T)(orow[e] * inv);
    lse[bh * g->L + i0 + i] = (AT_T)(w->l[i] > 0 ? w->m[i] + log(w->l[i]) : -INFINITY);
  }
}

/* Forward over every (head, row block) task, in parallel. */
static kn_status AT_NAME(fwd)(const at_geom *g, AT_T *out, AT_T *lse) {
  int64_t nqb = (g->L + AT_BR - 1) / AT_BR, tasks = g->BH * nqb;
  int64_t work = g->BH * g->L * (g->S + 1) * (g->E + g->Ev);
  bool par = tasks > 1 && work >= AT_PAR_MIN;
  int bad = 0;
  KN__PAR_REGION(par ? kn__par_team(work, tasks, KN__GRAIN) : 1,
  {
    at_work w;
    bool ok = at_work_alloc(&w, g, sizeof(AT_T), false);
    if (!ok) {
      _Pragma("omp atomic write")
      bad = 1;
    }
    _Pragma("omp for schedule(dynamic)")
    for (int64_t t = 0; t < tasks; t++) {
      int64_t bh = t / nqb, i0 = (t % nqb) * AT_BR;
      if (ok) AT_NAME(fwd_rows)(g, &w, bh, i0, g->L - i0 < AT_BR ? g->L - i0 : AT_BR, out, lse);
    }
    at_work_free(&w);
  });
  return bad ? kn__oom() : KN_OK;
}

/* P (in s) and dS (in dp) of rows i0.. (br) against keys j0.. (bc); pd gets
** P after dropout (s itself without dropout). */
static AT_T *AT_NAME(bwd_probs)(const at_geom *g, at_work *w, int64_t bh, int64_t i0, int64_t br,
                                int64_t j0, int64_t bc, const AT_T *go, const AT_T *lse,
                                const double *dsum) {
  AT_T *s = w->s, *dp = w->dp, *pd = g->p > 0 ? w->pd : w->s;
  AT_NAME(scores)(g, bh, i0, br, j0, bc, s);
  for (int64_t i = 0; i < br; i++) {
    AT_T *row = s + i * bc, l = lse[i0 + i];
    _Pragma("omp simd") for (int64_t j = 0; j < bc; j++) row[j] -= l;
  }
  AT_EXP(s, s, br * bc);
  const AT_T *v = (const AT_T *)g->v + at_base(g, g->vb, bh) + j0 * g->vld;
  AT_NAME(gemm)(false, true, br, bc, g->Ev, 1.0, go + i0 * g->Ev, g->Ev, v, g->vld, 0.0, dp, bc);
  if (g->p > 0) {
    memcpy(pd, s, (size_t)(br * bc) * sizeof(AT_T));
    for (int64_t i = 0; i < br; i++)
      AT_NAME(drop)(g, w, bh, i0 + i, j0, bc, pd + i * bc, dp + i * bc);
  }
  for (int64_t i = 0; i < br; i++) {
    const AT_T *srow = s + i * bc;
    AT_T *drow = dp + i * bc;
    double d = dsum[i0 + i];
    _Pragma("omp simd") for (int64_t j = 0; j < bc; j++)
      drow[j] = (AT_T)(srow[j] * (drow[j] - d));
  }
  return pd;
}

/* Gradients of head bh. go, o, lse: this head's rows (contiguous). */
static void AT_NAME(bwd_head)(const at_geom *g, at_work *w, int64_t bh, const AT_T *go,
                              const AT_T *o, const AT_T *lse, AT_T *gq, AT_T *gk, AT_T *gv,
                              AT_T *gm) {
  double *dsum = w->dsum;
  for (int64_t i = 0; i < g->L; i++) {
    dsum[i] = AT_NAME(at_rowdot)(go + i * g->Ev, o + i * g->Ev, g->Ev);
  }
  const AT_T *q = (const AT_T *)g->q + at_base(g, g->qb, bh);
  const AT_T *k = (const AT_T *)g->k + at_base(g, g->kb, bh);
  for (int64_t j0 = 0; j0 < g->S; j0 += AT_BC) {
    int64_t bc = g->S - j0 < AT_BC ? g->S - j0 : AT_BC;
    for (int64_t i0 = 0; i0 < g->L; i0 += AT_BR) {
      int64_t br = g->L - i0 < AT_BR ? g->L - i0 : AT_BR;
      if (g->causal && j0 >= i0 + br) continue; /* every key of the block is masked */
      AT_T *pd = AT_NAME(bwd_probs)(g, w, bh, i0, br, j0, bc, go, lse, dsum), *ds = w->dp;
      AT_NAME(gemm)(true, false, bc, g->Ev, br, 1.0, pd, bc, go + i0 * g->Ev, g->Ev, 1.0,
                    gv + j0 * g->Ev, g->Ev);
      for (int64_t i = 0; gm && i < br; i++)
        memcpy(gm + (i0 + i) * g->S + j0, ds + i * bc, (size_t)bc * sizeof(AT_T));
      AT_NAME(gemm)(false, false, br, g->E, bc, g->scale, ds, bc, k + j0 * g->kld, g->kld, 1.0,
                    gq + i0 * g->E, g->E);
      AT_NAME(gemm)(true, false, bc, g->E, br, g->scale, ds, bc, q + i0 * g->qld, g->qld, 1.0,
                    gk + j0 * g->E, g->E);
    }
  }
}

/* Backward over every head, in parallel. go and o contiguous [BH, L, Ev];
** gm (may be NULL) [BH, L, S]. Every gradient is written in full. */
static kn_status AT_NAME(bwd)(const at_geom *g, const AT_T *go, const AT_T *o, const AT_T *lse,
                              AT_T *gq, AT_T *gk, AT_T *gv, AT_T *gm) {
  int64_t work = g->BH * g->L * (g->S + 1) * (g->E + g->Ev);
  bool par = g->BH > 1 && work >= AT_PAR_MIN;
  int bad = 0;
  memset(gq, 0, (size_t)(g->BH * g->L * g->E) * sizeof(AT_T));
  memset(gk, 0, (size_t)(g->BH * g->S * g->E) * sizeof(AT_T));
  memset(gv, 0, (size_t)(g->BH * g->S * g->Ev) * sizeof(AT_T));
  if (gm) memset(gm, 0, (size_t)(g->BH * g->L * g->S) * sizeof(AT_T));
  KN__PAR_REGION(par ? kn__par_team(work, g->BH, KN__GRAIN) : 1,
  {
    at_work w;
    bool ok = at_work_alloc(&w, g, sizeof(AT_T), true);
    if (!ok) {
      _Pragma("omp atomic write")
      bad = 1;
    }
    _Pragma("omp for schedule(dynamic)")
    for (int64_t bh = 0; bh < g->BH; bh++)
      if (ok)
        AT_NAME(bwd_head)(g, &w, bh, go + bh * g->L * g->Ev, o + bh * g->L * g->Ev,
                          lse + bh * g->L, gq + bh * g->L * g->E, gk + bh * g->S * g->E,
                          gv + bh * g->S * g->Ev, gm ? gm + bh * g->L * g->S : NULL);
    at_work_free(&w);
  });
  return bad ? kn__oom() : KN_OK;
}
