/*
** inductor/gemm.c: GEMM and convolution extern calls with fused epilogues.
**
** Before planning, an activation (relu, gelu, sigmoid, silu, tanh) whose
** input is an addmm, mm or convolution node of float32 or float64 used by
** nothing else is folded into that node: the pair becomes one extern node
** (_addmm_activation, _mm_activation, _linear_activation (2-D input),
** _convolution_activation: the inner
** op's arguments, then the activation's code and gelu's approximation),
** and the intermediate never exists. Running it:
**   - addmm / mm / linear: the output is computed in blocks of rows (about 256 KiB):
**     the bias rows, the GEMM of the block through the eager kernel
**     (kn__nn_gemm: oneDNN for float32, OpenBLAS for float64), then the
**     activation over the block while it is in cache;
**   - convolution: the eager op (oneDNN adds the bias), then the activation
**     in one loop right after.
** The activation is the eager kernel's (kiln's vector math; relu as
** max(x, 0) keeping NaN), so results equal addmm followed by the activation.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "ops/nn.h"
#include "ops/vmath.h"
#include "tensor/tensor.h"

enum { ACT_RELU, ACT_GELU, ACT_SIGMOID, ACT_SILU, ACT_TANH };

/* The fused ops, one per producer role (KN__IND_R_EP_ADDMM + k). They are
** not ops of the op table (id -1): they exist only in graphs this pass
** rewrote, and run through kn__ind_epilogue_run. */
#define EP_SCHEMA(x) x ", int act, int approximate) -> Tensor"
#define NEP 4
static const kn__opdef ep_ops[NEP] = {
  {-1, "_addmm_activation", "",
   EP_SCHEMA("_addmm_activation(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
             "Scalar alpha=1"), 0, NULL, NULL, kn__bw_none, ""},
  {-1, "_mm_activation", "", EP_SCHEMA("_mm_activation(Tensor self, Tensor mat2"), 0,
   NULL, NULL, kn__bw_none, ""},
  {-1, "_convolution_activation", "",
   EP_SCHEMA("_convolution_activation(Tensor input, Tensor weight, Tensor? bias, int[] stride, "
             "SymInt[] padding, int[] dilation, bool transposed, SymInt[] output_padding, "
             "int groups"), 0, NULL, NULL, kn__bw_none, ""},
  {-1, "_linear_activation", "",
   EP_SCHEMA("_linear_activation(Tensor input, Tensor weight, Tensor? bias=None"), 0, NULL, NULL,
   kn__bw_none, ""},
};

bool kn__ind_is_epilogue(const kn__gnode *n) {
  return n->opdef >= ep_ops && n->opdef < ep_ops + NEP;
}

/* ---- the rewrite ------------------------------------------------------------------ */

/* The activation code of n (its role in the lowering table, with gelu's
** approximation in *approx), or -1. */
static int act_of(const kn__gnode *n, int64_t *approx) {
  *approx = 0;
  if (!n->opdef || n->nout != 1) return -1;
  switch (kn__ind_lowering_of(n->opdef)->role) {
  case KN__IND_R_ACT_RELU: return ACT_RELU;
  case KN__IND_R_ACT_SIGMOID: return ACT_SIGMOID;
  case KN__IND_R_ACT_SILU: return ACT_SILU;
  case KN__IND_R_ACT_TANH: return ACT_TANH;
  case KN__IND_R_ACT_GELU:
    if (n->nargs > 1 && n->args[1].kind == KN__GA_INT) *approx = n->args[1].u.i.c;
    return n->nargs > 1 && n->args[1].kind == KN__GA_INT && !kn__sym_is_const(n->args[1].u.i)
               ? -1 : ACT_GELU;
  default: return -1;
  }
}

/* Are m's strides provably contiguous (constant sizes and strides)? */
static bool contiguous_meta(const kn__vmeta *m) {
  int64_t want = 1;
  for (int d = m->ndim - 1; d >= 0; d--) {
    if (!kn__sym_is_const(m->sizes[d]) || !kn__sym_is_const(m->strides[d])) return false;
    if (m->sizes[d].c != 1 && m->strides[d].c != want) return false;
    want *= m->sizes[d].c;
  }
  return true;
}

/* Index into ep_ops of a producer that takes an epilogue (its role in the
** lowering table), or -1. (linear is one node in graphs AOT traces: its
** derivative comes from its parts.) */
static int producer_of(const kn__gnode *p) {
  if (!p || p->op != KN__GN_CALL || !p->opdef || p->nout != 1 || p->nusers != 1 ||
      p->nargs + 2 > KN__MAX_ARGS)
    return -1;
  kn_dtype dt = p->meta[0].dtype;
  if (dt != KN_FLOAT32 && dt != KN_FLOAT64) return -1;
  switch (kn__ind_lowering_of(p->opdef)->role) {
  case KN__IND_R_EP_ADDMM: return 0;
  case KN__IND_R_EP_MM: return 1;
  case KN__IND_R_EP_CONV: return contiguous_meta(&p->meta[0]) ? 2 : -1;
  case KN__IND_R_EP_LINEAR: return p->meta[0].ndim == 2 && p->args[0].kind == KN__GA_TENSOR &&
                                    p->args[0].u.t.node &&
                                    p->args[0].u.t.node->meta[p->args[0].u.t.idx].ndim == 2
                                ? 3 : -1;
  default: return -1;
  }
}

/* Fold activation node a into its producer p (ep_ops[k]). */
static kn_status fold(kn__graph *g, kn__gnode *a, kn__gnode *p, int k, int act, int64_t approx) {
  kn__garg args[KN__MAX_ARGS];
  memcpy(args, p->args, (size_t)p->nargs * sizeof *args);
  args[p->nargs] = KN_GA_I(act);
  args[p->nargs + 1] = KN_GA_I(approx);
  kn__gnode *prev = kn__graph_set_insert_point(g, a);
  kn__gnode *e = kn__graph_call(g, &ep_ops[k], p->nargs + 2, args, 1, a->meta);
  kn__graph_set_insert_point(g, prev);
  if (!e) return kn_last_status();
  if (kn__graph_replace_all_uses(g, (kn__gref){a, 0}, (kn__gref){e, 0}) < 0)
    return kn_last_status();
  kn_status st = kn__graph_erase_node(g, a);
  return st == KN_OK ? kn__graph_erase_node(g, p) : st;
}

static bool has_pattern(const kn__graph *g) {
  int64_t approx;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (act_of(n, &approx) >= 0 && n->args[0].kind == KN__GA_TENSOR &&
        producer_of(n->args[0].u.t.node) >= 0)
      return true;
  }
  return false;
}

kn__graph *kn__ind_fuse_epilogues(const kn__graph *g, int *nfused) {
  *nfused = 0;
  if (!has_pattern(g)) return NULL;
  kn__graph *c = kn__graph_copy(g);
  if (!c) return NULL;
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < kn__graph_num_nodes(c); i++) {
    kn__gnode *n = kn__graph_node(c, i);
    int64_t approx;
    int act = act_of(n, &approx);
    kn__gnode *p = act >= 0 && n->args[0].kind == KN__GA_TENSOR ? n->args[0].u.t.node : NULL;
    int k = producer_of(p);
    if (k < 0) continue;
    st = fold(c, n, p, k, act, approx);
    if (st == KN_OK) {
      (*nfused)++;
      i = -1; /* indices moved: rescan */
    }
  }
  if (st != KN_OK) {
    kn__graph_free(c);
    return NULL;
  }
  return c;
}

/* ---- running --------------------------------------------------------------------- */

/* The activation over n contiguous elements, in place. */
static void activate(void *p, kn_dtype dt, int64_t n, int act, int64_t approx) {
  if (act == ACT_RELU && dt == KN_FLOAT32) { /* eager's expression, vectorised (no branch) */
    float *y = p;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (y[i] > 0 || y[i] != y[i]) ? y[i] : 0.0f;
    return;
  }
  if (act == ACT_RELU) {
    double *y = p;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = (y[i] > 0 || y[i] != y[i]) ? y[i] : 0.0;
    return;
  }
  kn__vmop op = act == ACT_SIGMOID ? KN__VM_SIGMOID
                : act == ACT_SILU  ? KN__VM_SILU
                : act == ACT_TANH  ? KN__VM_TANH
                : approx           ? KN__VM_GELU_TANH
                                   : KN__VM_GELU;
  const kn__vmath *vm = kn__vmath_get();
  if (dt == KN_FLOAT32) vm->f32[op](p, p, n);
  else vm->f64[op](p, p, n);
}

static double scalar_of(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* Rows [r0, r1) of out [M, N] set to the bias (broadcast, out's dtype), as
** eager's addmm copies self into its output before the GEMM. */
static void bias_rows(const kn_tensor *b, kn_tensor *out, int64_t r0, int64_t r1) {
  int64_t N = out->sizes[1], rs = 0, cs = 0;
  if (b->ndim == 2) {
    rs = b->sizes[0] == 1 ? 0 : b->strides[0];
    cs = b->sizes[1] == 1 ? 0 : b->strides[1];
  } else if (b->ndim == 1) {
    cs = b->sizes[0] == 1 ? 0 : b->strides[0];
  }
  size_t es = kn_dtype_size(out->dtype);
  const char *bp = kn_data((kn_tensor *)b);
  char *op = kn_data(out);
  for (int64_t r = r0; r < r1; r++) {
    char *row = op + (size_t)(r * N) * es;
    if (cs == 1) memcpy(row, bp + (size_t)(r * rs) * es, (size_t)N * es);
    else
      for (int64_t j = 0; j < N; j++) memcpy(row + (size_t)j * es, bp + (size_t)(r * rs + j * cs) * es, es);
  }
}

static kn__mat mat_of(const kn_tensor *t) {
  return (kn__mat){kn_data((kn_tensor *)t), t->strides[0], t->strides[1]};
}

/* out = act(beta * bias + alpha * x @ w), in blocks of rows. */
static kn_status gemm_act(const kn_tensor *b, const kn_tensor *x, kn__mat B, double beta,
                          double alpha, int act, int64_t approx, kn_tensor *out) {
  int64_t M = x->sizes[0], K = x->sizes[1], N = out->sizes[1];
  size_t es = kn_dtype_size(out->dtype);
  int64_t rb = N > 0 ? (int64_t)((1024 * 1024) / ((size_t)N * es)) : M;
  if (rb < 64) rb = 64;
  bool with_bias = b && beta != 0;
  kn__mat A = mat_of(x);
  for (int64_t r0 = 0; r0 < M; r0 += rb) {
    int64_t r1 = r0 + rb < M ? r0 + rb : M;
    if (with_bias) bias_rows(b, out, r0, r1);
    kn__mat Ab = {(const char *)A.p + r0 * A.s0 * (int64_t)es, A.s0, A.s1};
    void *C = (char *)kn_data(out) + (size_t)(r0 * N) * es;
    kn_status st = kn__nn_gemm("addmm_impl_cpu_", out->dtype, r1 - r0, N, K, Ab, B, C, N, alpha,
                               with_bias ? beta : 0.0);
    if (st != KN_OK) return st;
    activate(C, out->dtype, (r1 - r0) * N, act, approx);
  }
  return KN_OK;
}

kn_status kn__ind_epilogue_run(const kn__gnode *n, kn__call *inner, kn_tensor **out) {
  int na = n->nargs;
  int act = (int)inner->args[na - 2].u.i;
  int64_t approx = inner->args[na - 1].u.i;
  if (n->opdef == &ep_ops[2]) {
    inner->op = kn__ind_role_op(KN__IND_R_EP_CONV); /* the convolution it fused */
    inner->nargs = na - 2;
    kn__outs o;
    kn__outs_init(&o);
    kn_status st = kn__dispatch(inner, &o);
    if (st == KN_OK && (o.n != 1 || !kn_is_contiguous(o.t[0])))
      st = kn__error(KN_EINTERNAL, "inductor: convolution gave no contiguous output");
    if (st == KN_OK) {
      activate(kn_data(o.t[0]), o.t[0]->dtype, kn_numel(o.t[0]), act, approx);
      *out = o.t[0];
      o.n = 0;
    }
    kn__outs_fini(&o);
    return st;
  }
  bool addmm = n->opdef == &ep_ops[0], linear = n->opdef == &ep_ops[3];
  const kn_tensor *b = addmm ? inner->args[0].u.t : linear ? inner->args[2].u.t : NULL;
  const kn_tensor *x = inner->args[addmm ? 1 : 0].u.t, *w = inner->args[addmm ? 2 : 1].u.t;
  double beta = addmm ? scalar_of(inner->args[3].u.s) : 1;
  double alpha = addmm ? scalar_of(inner->args[4].u.s) : 1;
  if (!x || !w || x->ndim != 2 || w->ndim != 2 || x->dtype != w->dtype ||
      x->sizes[1] != w->sizes[linear ? 1 : 0] || (b && (b->ndim > 2 || b->dtype != x->dtype)))
    return kn__error(KN_ESHAPE, "inductor: %s: operands do not match the traced ones",
                     n->opdef->name);
  kn__mat B = mat_of(w); /* linear: weight [N, K] read as [K, N] */
  int64_t N = w->sizes[linear ? 0 : 1];
  if (linear) B = (kn__mat){B.p, B.s1, B.s0};
  kn_tensor *o = kn__empty(2, (int64_t[]){x->sizes[0], N}, x->dtype, KN_CPU);
  if (!o) return kn_last_status();
  kn_status st = gemm_act(b, x, B, beta, alpha, act, approx, o);
  if (st != KN_OK) {
    kn_release(o);
    return st;
  }
  *out = o;
  return KN_OK;
}
