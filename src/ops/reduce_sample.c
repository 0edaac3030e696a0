/*
** ops/reduce_sample.c: topk (the k largest or smallest elements along a dim
** and their indices) and multinomial (draws from the categorical
** distributions given by the rows of a 1-D or 2-D tensor of weights).
**
** Order: NaN is larger than every number (as torch's topk); equal values
** keep their index order, so results are deterministic; sorted=false gives
** the sorted order too (torch leaves it unspecified). Integer inputs are
** compared as int64, exactly.
**
** multinomial draws from Philox blocks reserved per call: row r uses the
** blocks (first + r * per_row + j), so results depend on the generator's
** seed and position only, never on the thread count. With replacement,
** sample j of a row inverts the row's cumulative distribution at a uniform
** draw (per_row = num_samples); without replacement, every category gets the
** key p / E with E ~ Exp(1) and the num_samples largest keys win (per_row =
** the number of categories): the same distribution as drawing one category
** at a time and removing it.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/reduce.h"
#include "ops/symsize.h"
#include "tensor/random.h"
#include "ops/threads.h"

/* ---- selection of the first k elements of a line in an order ---------------- */

/* The keys of one line: doubles, or int64 when ints. */
typedef struct keys {
  const double *d;
  const int64_t *i;
  bool ints, largest;
} keys;

/* Does element a come before element b? NaN is the largest value; ties go
** to the smaller index. */
static bool before(const keys *k, int64_t a, int64_t b) {
  if (k->ints) {
    if (k->i[a] != k->i[b]) return k->largest ? k->i[a] > k->i[b] : k->i[a] < k->i[b];
    return a < b;
  }
  double x = k->d[a], y = k->d[b];
  bool xn = isnan(x), yn = isnan(y);
  if (xn || yn) return xn && yn ? a < b : k->largest ? xn : yn;
  if (x != y) return k->largest ? x > y : x < y;
  return a < b;
}

/* heap[0..n) is a heap whose root comes last in the order; restore it below i. */
static void sift_down(const keys *k, int64_t *heap, int64_t n, int64_t i) {
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, w = i;
    if (l < n && before(k, heap[w], heap[l])) w = l;
    if (r < n && before(k, heap[w], heap[r])) w = r;
    if (w == i) return;
    int64_t t = heap[i];
    heap[i] = heap[w], heap[w] = t;
    i = w;
  }
}

static void sift_up(const keys *k, int64_t *heap, int64_t i) {
  while (i > 0) {
    int64_t p = (i - 1) / 2;
    if (!before(k, heap[p], heap[i])) return;
    int64_t t = heap[i];
    heap[i] = heap[p], heap[p] = t;
    i = p;
  }
}

/* The indices of the first m of n elements, in order, into out[0..m):
** a heap of the best m seen so far, O(n log m). */
static void select_first(const keys *k, int64_t n, int64_t m, int64_t *out) {
  int64_t size = 0;
  for (int64_t e = 0; e < n && m > 0; e++) {
    if (size < m) {
      out[size] = e;
      sift_up(k, out, size++);
    } else if (before(k, e, out[0])) {
      out[0] = e;
      sift_down(k, out, size, 0);
    }
  }
  for (int64_t s = size - 1; s > 0; s--) { /* pop the last in order to the back */
    int64_t t = out[0];
    out[0] = out[s], out[s] = t;
    sift_down(k, out, s, 0);
  }
}

/* ---- topk --------------------------------------------------------------------- */
/* topk(self, k, dim, largest, sorted) -> (values, indices) */

kn_status kn__meta_topk(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  int dim = 0;
  kn_status st = kn__wrap_dim(c->args[2].u.i, t->ndim > 0 ? t->ndim : 1, &dim);
  if (st != KN_OK) return st;
  int64_t k = c->args[1].u.i;
  kn_sym size[KN_MAX_DIMS];
  kn__tensor_symsizes(t, size);
  kn_sym n = t->ndim > 0 ? size[dim] : kn__sym_const(1);
  if (k < 0 || kn__sym_guard_lt(n, kn__sym_const(k)))
    return kn__error(KN_ERANGE, "selected index k out of range (k = %lld, size of dim %d = "
                                "%lld)", (long long)k, dim, (long long)(t->ndim ? t->sizes[dim] : 1));
  for (int o = 0; o < 2; o++) {
    kn__outmeta *m = kn__metas_push_like(out, t, o ? KN_INT64 : t->dtype);
    if (!m) return kn__oom();
    if (t->ndim > 0) m->sizes[dim] = kn__sym_const(k);
  }
  return KN_OK;
}

/* Buffers of one thread: the line's keys and the selected indices. */
typedef struct linebuf {
  double *d;
  int64_t *i, *sel;
} linebuf;

static bool linebuf_init(linebuf *b, int64_t n, bool ints) {
  size_t len = (size_t)(n > 0 ? n : 1);
  b->d = ints ? NULL : malloc(len * sizeof *b->d);
  b->i = ints ? malloc(len * sizeof *b->i) : NULL;
  b->sel = malloc(len * sizeof *b->sel);
  return (ints ? b->i != NULL : b->d != NULL) && b->sel;
}

static void linebuf_fini(linebuf *b) { free(b->d), free(b->i), free(b->sel); }

/* Line o of the topk call: select, then copy the chosen elements' bytes. */
static void topk_line(const kn__lines *l, int64_t o, int64_t k, keys *ks, linebuf *b,
                      kn_dtype dt) {
  const char *x = kn__lines_at(l, 0, o);
  if (ks->ints)
    for (int64_t e = 0; e < l->len; e++) b->i[e] = kn__load_int(x + e * l->st[0], dt);
  else kn__line_load(x, l->st[0], dt, l->len, b->d);
  select_first(ks, l->len, k, b->sel);
  char *v = (char *)kn__lines_at(l, 1, o), *ix = (char *)kn__lines_at(l, 2, o);
  size_t es = kn_dtype_size(dt);
  for (int64_t j = 0; j < k; j++) {
    memcpy(v + j * l->st[1], x + b->sel[j] * l->st[0], es);
    *(int64_t *)(ix + j * l->st[2]) = b->sel[j];
  }
}

kn_status kn__k_topk(const kn__call *c, kn__outs *out) {
  kn_tensor *t = c->args[0].u.t, *v = out->t[0], *ix = out->t[1];
  int64_t k = c->args[1].u.i;
  if (t->ndim == 0) { /* a 0-dim tensor is its own top element */
    memcpy(kn_data(v), kn_data(t), kn_dtype_size(t->dtype));
    *(int64_t *)kn_data(ix) = 0;
    return KN_OK;
  }
  int dim = 0;
  kn__wrap_dim(c->args[2].u.i, t->ndim, &dim);
  const kn_tensor *ts[3] = {t, v, ix};
  kn__lines l;
  kn__lines_init(&l, 3, ts, dim);
  bool ints = !kn_dtype_is_floating(t->dtype), oom = false;
  keys ks0 = {.ints = ints, .largest = c->args[3].u.b};
  KN__PAR_REGION(kn__par_team(l.nlines * l.len, l.nlines, KN__GRAIN),
  {
    linebuf b;
    keys ks = ks0;
    bool ok = linebuf_init(&b, l.len, ints);
    ks.d = b.d, ks.i = b.i;
    if (!ok) {
      _Pragma("omp atomic write")
      oom = true;
    }
    _Pragma("omp for schedule(static)")
    for (int64_t o = 0; o < l.nlines; o++)
      if (ok) topk_line(&l, o, k, &ks, &b, t->dtype);
    linebuf_fini(&b);
  });
  return oom ? kn__oom() : KN_OK;
}

/* d values = zeros of self's shape with the values' gradient scattered
** back to the selected positions (torch's value_selecting_reduction_backward). */
kn_status kn__bw_topk(kn__bwctx *ctx) {
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *x = ctx->call->args[0].u.t, *g = ctx->grad_outputs[0];
  kn_tensor *r = x->ndim == 0 ? kn_clone(g)
                              : kn_scatter(kn__zeros_like_sym(x), ctx->call->args[2].u.i,
                                           ctx->outputs[1], g);
  ctx->grad_inputs[0] = r;
  return r ? KN_OK : kn_last_status();
}

/* ---- multinomial ------------------------------------------------------------------ */
/* multinomial(self, num_samples, replacement, generator?) */

#define MAX_CATEGORIES (INT64_C(1) << 24)

kn_status kn__meta_multinomial(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  int64_t n = c->args[1].u.i;
  if (t->ndim != 1 && t->ndim != 2)
    return kn__error(KN_ESHAPE, "prob_dist must be 1 or 2 dim (found %d dims)", t->ndim);
  if (!kn_dtype_is_floating(t->dtype))
    return kn__error(KN_EDTYPE, "multinomial only supports floating-point dtypes for input, "
                                "got: %s", kn__torch_dtype_name(t->dtype));
  if (n <= 0)
    return kn__error(KN_EINVAL, "cannot sample n_sample <= 0 samples (num_samples = %lld)",
                     (long long)n);
  kn_sym size[KN_MAX_DIMS];
  kn__tensor_symsizes(t, size);
  kn_sym cats = size[t->ndim - 1];
  if (!c->args[2].u.b && kn__sym_guard_lt(cats, kn__sym_const(n)))
    return kn__error(KN_EINVAL, "cannot sample n_sample > prob_dist.size(-1) samples without "
                                "replacement (n_sample = %lld, %lld categories)",
                     (long long)n, (long long)t->sizes[t->ndim - 1]);
  if (kn__sym_guard_lt(kn__sym_const(MAX_CATEGORIES), cats))
    return kn__error(KN_EINVAL, "number of categories cannot exceed 2^24 (found %lld)",
                     (long long)t->sizes[t->ndim - 1]);
  kn__outmeta *m = kn__metas_push_like(out, t, KN_INT64);
  if (!m) return kn__oom();
  m->sizes[t->ndim - 1] = kn__sym_const(n);
  return KN_OK;
}

/* Check row r (p[0..n)): finite, non-negative, a positive sum, and enough
** positive categories to draw `need` without replacement (0: no need). */
static kn_status check_row(const double *p, int64_t n, int64_t r, int64_t need) {
  double sum = 0;
  int64_t positive = 0;
  for (int64_t e = 0; e < n; e++) {
    if (!isfinite(p[e]) || p[e] < 0)
      return kn__error(KN_EINVAL, "probability tensor contains either `inf`, `nan` or element "
                                  "< 0 (row %lld, element %lld is %g)", (long long)r,
                       (long long)e, p[e]);
    sum += p[e];
    positive += p[e] > 0;
  }
  if (!(sum > 0))
    return kn__error(KN_EINVAL, "invalid multinomial distribution (sum of probabilities <= 0) "
                                "(row %lld)", (long long)r);
  if (positive < need)
    return kn__error(KN_EINVAL, "invalid multinomial distribution (with replacement=False, not "
                                "enough non-negative category to sample): row %lld has %lld "
                                "positive probabilities, %lld samples asked", (long long)r,
                     (long long)positive, (long long)need);
  return KN_OK;
}

/* With replacement: invert the cumulative sums cdf[0..n) at uniform draws. */
static void draw_with(const double *cdf, int64_t n, int64_t ns, uint64_t seed, uint64_t block,
                      int64_t *dst, int64_t step) {
  int64_t last = n - 1;
  while (last > 0 && cdf[last - 1] == cdf[last]) last--; /* the last positive category */
  for (int64_t j = 0; j < ns; j++) {
    uint32_t w[4];
    kn__philox(seed, block + (uint64_t)j, w);
    double u = kn__u01_double(w[0], w[1]) * cdf[n - 1];
    int64_t lo = 0, hi = last; /* the first e with cdf[e] > u */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (cdf[mid] > u) hi = mid;
      else lo = mid + 1;
    }
    dst[j * step] = lo;
  }
}

/* Without replacement: keys p / Exp(1) in key[0..n), the ns largest win. */
static void draw_without(const double *p, double *key, int64_t n, int64_t ns, uint64_t seed,
                         uint64_t block, int64_t *sel, int64_t *dst, int64_t step) {
  for (int64_t e = 0; e < n; e++) {
    uint32_t w[4];
    kn__philox(seed, block + (uint64_t)e, w);
    double ex = -log1p(-kn__u01_double(w[0], w[1]));
    key[e] = p[e] > 0 ? (ex > 0 ? p[e] / ex : INFINITY) : -1.0;
  }
  keys ks = {.d = key, .largest = true};
  select_first(&ks, n, ns, sel);
  for (int64_t j = 0; j < ns; j++) dst[j * step] = sel[j];
}

/* The rows of t as a kn__lines over its last dim, with the output's. */
static kn_status sample_rows(kn_tensor *t, kn_tensor *o, int64_t ns, bool repl,
                             kn_generator *gen) {
  const kn_tensor *ts[2] = {t, o};
  kn__lines l;
  kn__lines_init(&l, 2, ts, t->ndim - 1);
  int64_t n = l.len;
  double *p = malloc((size_t)(n > 0 ? n : 1) * 2 * sizeof *p);
  int64_t *sel = malloc((size_t)(n > 0 ? n : 1) * sizeof *sel);
  kn_status st = p && sel ? KN_OK : kn__oom();
  for (int64_t r = 0; r < l.nlines && st == KN_OK; r++) { /* every row checked first */
    kn__line_load(kn__lines_at(&l, 0, r), l.st[0], t->dtype, n, p);
    st = check_row(p, n, r, repl ? 0 : ns);
  }
  uint64_t per_row = (uint64_t)(repl ? ns : n), seed = gen->seed;
  uint64_t first = st == KN_OK ? kn__generator_reserve(gen, per_row * (uint64_t)l.nlines) : 0;
  for (int64_t r = 0; r < l.nlines && st == KN_OK; r++) {
    kn__line_load(kn__lines_at(&l, 0, r), l.st[0], t->dtype, n, p);
    int64_t *dst = (int64_t *)kn__lines_at(&l, 1, r), step = l.st[1] / 8;
    uint64_t block = first + (uint64_t)r * per_row;
    if (repl) {
      for (int64_t e = 1; e < n; e++) p[e] += p[e - 1];
      draw_with(p, n, ns, seed, block, dst, step);
    } else {
      draw_without(p, p + n, n, ns, seed, block, sel, dst, step);
    }
  }
  free(p);
  free(sel);
  return st;
}

kn_status kn__k_multinomial(const kn__call *c, kn__outs *out) {
  kn_generator *gen = kn__generator_or_default(c->args[3].kind == KN__A_GEN ? c->args[3].u.gen
                                                                            : NULL);
  return sample_rows(c->args[0].u.t, out->t[0], c->args[1].u.i, c->args[2].u.b, gen);
}

/* ---- public API ------------------------------------------------------------------- */

kn_tensor *kn_topk(kn_tensor *t, int64_t k, int64_t dim, bool largest, bool sorted,
                   kn_tensor **indices) {
  if (indices) *indices = NULL;
  kn__arg args[5] = {KN_A_T(t), KN_A_I(k), KN_A_I(dim), KN_A_B(largest), KN_A_B(sorted)};
  kn_tensor *r[2];
  if (kn__invoke_multi(KN_OP_TOPK, 5, args, r, 2) != 2) return NULL;
  if (indices) *indices = r[1];
  return r[0];
}

kn_tensor *kn_multinomial(kn_tensor *probs, int64_t num_samples, bool replacement,
                          kn_generator *gen) {
  return kn__invoke(KN_OP_MULTINOMIAL, 4, (kn__arg[]){KN_A_T(probs), KN_A_I(num_samples),
                                                      KN_A_B(replacement), KN_A_GEN(gen)});
}
