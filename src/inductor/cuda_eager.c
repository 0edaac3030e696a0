/*
** inductor/cuda_eager.c: eager ops on CUDA tensors as single-op graphs
** (as tinygrad runs everything through its code generator). The ops layer
** runs copies, fills and GEMMs on the GPU itself (ops/cuda_ops.h); every
** other op on a CUDA tensor reaches kn__ind_cuda_eager, the dispatcher's
** device backend for KN_CUDA (registered with the built-in backends,
** dynamo/backends.c).
**
** A call becomes a graph of one call node over placeholders with the
** arguments' metadata (dtype, sizes, strides, on CUDA), compiled by the
** inductor backend (post-grad decomposition, plan, the cuda target, the
** code cache) and kept in a process-wide table keyed by the op, every
** tensor's dtype, sizes and strides and every other argument's value (a
** new shape compiles a new program: sizes are static). A run computes the
** result into the output the dispatcher made (or copies it there). An
** in-place op runs as its functional partner, into self when self is
** contiguous and the result fits it, else through a copy. An op
** whose plan keeps an extern step (no kernel: it would call itself) fails
** with "aten.<op>: no CUDA kernel: the code generator cannot lower it
** (cuda:0)", and is remembered as such; an extern step of an op the ops
** layer runs on the GPU itself (GEMMs, nll_loss's target check) is fine.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "graph/graph.h"
#include "inductor/inductor.h"
#include "kiln/autograd.h"
#include "kiln/graph.h"
#include "ops/cuda_ops.h"
#include "ops/opfacts.h"
#include "tensor/tensor.h"

typedef struct entry {
  char *key;
  kn_graph_module *gm;  /* the single-op graph (its eager program serves cg) */
  kn_compiled_graph cg; /* zero when the op cannot be lowered */
  char *why;            /* then: the reason */
  int nin;              /* tensor inputs, in argument order */
  struct entry *next;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table; /* process-wide, entries never removed (like loaded code) */

/* ---- the key -------------------------------------------------------------------------- */
static void key_tensor(kn__sb *sb, const kn_tensor *t) {
  kn__sb_printf(sb, "T%d[", (int)t->dtype);
  for (int d = 0; d < t->ndim; d++)
    kn__sb_printf(sb, "%lld:%lld,", (long long)t->sizes[d], (long long)t->strides[d]);
  kn__sb_putc(sb, ']');
}

static bool key_arg(kn__sb *sb, const kn__arg *a) {
  switch (a->kind) {
  case KN__A_NONE: kn__sb_puts(sb, "N"); return true;
  case KN__A_TENSOR:
    if (a->u.t) key_tensor(sb, a->u.t);
    else kn__sb_puts(sb, "N");
    return true;
  case KN__A_INT: kn__sb_printf(sb, "I%lld", (long long)a->u.i); return true;
  case KN__A_DOUBLE: kn__sb_printf(sb, "D%a", a->u.d); return true;
  case KN__A_BOOL: kn__sb_printf(sb, "B%d", a->u.b); return true;
  case KN__A_DTYPE: kn__sb_printf(sb, "Y%d", (int)a->u.dt); return true;
  case KN__A_SCALAR:
    if (a->u.s.kind == KN_SCALAR_FLOAT) kn__sb_printf(sb, "Sf%a", a->u.s.v.f);
    else if (a->u.s.kind == KN_SCALAR_INT) kn__sb_printf(sb, "Si%lld", (long long)a->u.s.v.i);
    else kn__sb_printf(sb, "Sb%d", a->u.s.v.b);
    return true;
  case KN__A_INTS:
    kn__sb_putc(sb, 'L');
    for (int j = 0; j < a->u.ints.n; j++) kn__sb_printf(sb, "%lld,", (long long)a->u.ints.v[j]);
    return true;
  default: return false; /* tensor lists, generators: not single-op graphs here */
  }
}

/* ---- building ---------------------------------------------------------------------------- */
typedef struct lookup_ctx { kn__graph *g; int n; } lookup_ctx;

/* Each tensor argument becomes the next placeholder (argument order). */
static kn_status lookup(void *ud, kn_tensor *t, kn__gref *out) {
  lookup_ctx *lc = ud;
  kn__vmeta m;
  kn__vmeta_from_tensor(t, &m);
  m.offset = kn__sym_const(0); /* the program reads from the tensor's data pointer */
  char src[32];
  snprintf(src, sizeof src, "L['x%d']", lc->n++);
  kn__gnode *ph = kn__graph_placeholder(lc->g, src, &m);
  if (!ph) return kn__oom();
  *out = (kn__gref){ph, 0};
  return KN_OK;
}

/* Does the plan of g compute everything in kernels, or in extern calls of
** ops the ops layer runs on the GPU itself (a GEMM, nll_loss's target
** check: they never come back here)? */
static kn_status all_kernels(const kn__graph *g, bool *yes, char *why, size_t n) {
  kn__graph *pg = NULL;
  kn__ind_plan plan;
  memset(&plan, 0, sizeof plan);
  kn_status st = kn__ind_post_grad(g, &pg);
  if (st == KN_OK) st = kn__ind_plan_build(pg, false, &plan);
  int bad = -1;
  for (int k = 0; st == KN_OK && bad < 0 && k < plan.nsteps; k++) {
    const kn__opdef *op = plan.step_node[k]->opdef;
    if (!op || !kn__cuda_own_kernel(op->id)) bad = k;
  }
  *yes = st == KN_OK && bad < 0;
  if (st == KN_OK && bad >= 0)
    snprintf(why, n, "its graph keeps %s as an extern call", plan.step_node[bad]->target);
  if (st == KN_OK || pg) kn__ind_plan_free(&plan);
  kn__graph_free(pg);
  return st;
}

static kn_status build(const kn__call *c, const kn__outs *out, entry *e) {
  kn__graph *g = kn__graph_new();
  if (!g) return kn__oom();
  lookup_ctx lc = {g, 0};
  kn__vmeta metas[KN__INLINE_OUTS];
  if (out->n > KN__INLINE_OUTS) {
    kn__graph_free(g);
    return kn__error(KN_EUNSUPPORTED, "more than %d outputs", KN__INLINE_OUTS);
  }
  for (int k = 0; k < out->n; k++) kn__vmeta_from_tensor(out->t[k], &metas[k]);
  kn__gnode *n = kn__graph_call_from(g, c, lookup, &lc, out->n, metas);
  kn__gref refs[KN__INLINE_OUTS];
  for (int k = 0; n && k < out->n; k++) refs[k] = kn__graph_value(g, n, k);
  if (!n || !kn__graph_output(g, out->n, refs)) {
    kn__graph_free(g);
    return kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  }
  e->nin = lc.n;
  char why[300] = "";
  bool ok = false;
  kn_status st = all_kernels(g, &ok, why, sizeof why);
  if (st == KN_OK && !ok) {
    kn__graph_free(g);
    e->why = strdup(why);
    return e->why ? KN_OK : kn__oom();
  }
  if (st != KN_OK) {
    kn__graph_free(g);
    return st;
  }
  st = kn__graph_module_new(g, &e->gm); /* takes g; kept with the entry */
  return st == KN_OK ? kn__inductor_compile(e->gm, NULL, 0, NULL, &e->cg) : st;
}

/* The entry of call c (built on a miss), or NULL after setting the error. */
static entry *find(const kn__call *c, const kn__outs *out) {
  kn__sb key;
  kn__sb_init(&key);
  kn__sb_printf(&key, "%s/%d:", c->op->name, out->n);
  for (int a = 0; a < c->nargs; a++)
    if (!key_arg(&key, &c->args[a])) {
      kn__sb_fini(&key);
      kn__error(KN_EUNSUPPORTED, "argument %d's kind", a);
      return NULL;
    }
  if (kn__sb_failed(&key)) {
    kn__sb_fini(&key);
    kn__oom();
    return NULL;
  }
  pthread_mutex_lock(&lock);
  entry *e = table;
  while (e && strcmp(e->key, kn__sb_cstr(&key))) e = e->next;
  if (!e && (e = calloc(1, sizeof *e)) && (e->key = kn__sb_take(&key))) {
    if (build(c, out, e) == KN_OK) {
      e->next = table;
      table = e;
    } else { /* not kept: a later call tries again (the code cache keeps what compiled) */
      if (e->gm) kn_graph_module_free(e->gm);
      free(e->key);
      free(e);
      e = NULL;
    }
  } else if (!e) {
    free(e);
    kn__oom();
  }
  pthread_mutex_unlock(&lock);
  kn__sb_fini(&key);
  return e;
}

/* ---- running ------------------------------------------------------------------------------ */
static kn_status run(const entry *e, const kn__call *c, kn__outs *out) {
  kn_tensor *in[KN__MAX_ARGS];
  int nin = 0;
  for (int a = 0; a < c->nargs && nin < KN__MAX_ARGS; a++)
    if (c->args[a].kind == KN__A_TENSOR && c->args[a].u.t) in[nin++] = c->args[a].u.t;
  if (nin != e->nin) return kn__error(KN_EINTERNAL, "%d tensor inputs, %d expected", nin, e->nin);
  kn_tensor *res[KN__INLINE_OUTS] = {0};
  /* the results are autoreleased (kn__inductor_run_into): a scope of our
  ** own releases them once they are copied out */
  kn_scope_begin();
  bool grad = kn_set_grad_enabled(false); /* kernels: no autograd inside */
  kn_status st = kn__inductor_run_into(&e->cg, in, nin, res, out->n, out->t);
  kn_set_grad_enabled(grad);
  for (int k = 0; st == KN_OK && k < out->n; k++)
    if (res[k] != out->t[k]) st = kn__cuda_copy_into(out->t[k], res[k]);
  kn_scope_end();
  return st;
}

static kn_status run(const entry *e, const kn__call *c, kn__outs *out);
static entry *find(const kn__call *c, const kn__outs *out);

/* Does the functional call fc give a result of self's dtype and sizes (so
** that it can be computed into self)? */
static bool fits_self(kn__call *fc, const kn_tensor *self) {
  kn__outs m;
  kn__outs_init(&m);
  if (kn__dispatch_backend_meta(fc, &m) != KN_OK) return false;
  bool ok = m.n == 1 && m.t[0]->dtype == self->dtype && m.t[0]->ndim == self->ndim;
  for (int d = 0; ok && d < self->ndim; d++) ok = m.t[0]->sizes[d] == self->sizes[d];
  kn__outs_fini(&m);
  return ok;
}

/* An in-place op (sub_, mul_, ...) as its functional partner (sub, mul),
** so that the single-op graphs stay functional: computed into self when it
** fits, else into a temporary copied into self with copy_'s conversion
** (PyTorch's in-place semantics). */
static kn_status inplace(const kn__call *c, const kn__opdef *f, kn__outs *out) {
  kn__call fc = *c;
  fc.op = f;
  kn_tensor *self = out->t[0];
  if (kn__contiguous(self) && fits_self(&fc, self)) {
    /* the program computes into self itself (an input it may write:
    ** kn__inductor_run_into's donation), or copies its result there */
    entry *e = find(&fc, out);
    if (e && !e->why) return run(e, &fc, out);
  }
  kn__outs o;
  kn__outs_init(&o);
  kn_status st = kn__dispatch_backend(&fc, &o);
  if (st == KN_OK) st = o.n == 1 ? kn__cuda_copy_into(out->t[0], o.t[0])
                                 : kn__error(KN_EINTERNAL, "%s: %d results", f->name, o.n);
  if (st == KN_OK) kn__outs_fini(&o); /* (on failure the backend already did) */
  return st;
}

kn_status kn__ind_cuda_eager(const kn__call *c, kn__outs *out) {
  int partner = (c->op->flags & KN_OPF_INPLACE) ? kn__op_facts(c->op->id)->partner : -1;
  if (partner >= 0 && !(kn__ops[partner].flags & KN_OPF_INPLACE) && out->n == 1)
    return inplace(c, &kn__ops[partner], out);
  entry *e = find(c, out);
  if (!e)
    return kn__error(kn_last_status() == KN_ENOMEM ? KN_ENOMEM : KN_EUNSUPPORTED,
                     "aten.%s: no CUDA kernel: the code generator cannot compile it (cuda:0): %s",
                     c->op->name, kn_last_error());
  if (e->why)
    return kn__error(KN_EUNSUPPORTED, "aten.%s: no CUDA kernel: the code generator cannot lower "
                     "it (cuda:0): %s", c->op->name, e->why);
  kn_status st = run(e, c, out);
  if (st != KN_OK)
    return kn__error(st, "aten.%s on cuda:0 (a compiled single-op graph): %s", c->op->name,
                     kn_last_error());
  return KN_OK;
}
