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
** code cache) and kept in a process-wide table. The key is the op, every
** other argument's value, and each tensor's dtype and rank: a contiguous
** tensor's sizes of 2 or more are symbols (equal sizes one symbol, as
** PyTorch's duck sizing; 0 and 1 stay constants), so one program serves
** every shape of that pattern, behind the guards the op's meta function
** recorded in the entry's shape env (a shape that fails them compiles
** another program of the key, up to KN__EAGER_VARIANTS). Strided tensors,
** and ops the code generator cannot build with symbolic sizes, take a
** static key of every size and stride. A run computes the
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
#include "logging/log.h"
#include "ops/cuda_ops.h"
#include "ops/opfacts.h"
#include "tensor/tensor.h"

typedef struct entry {
  char *key;
  kn_graph_module *gm;  /* the single-op graph (its eager program serves cg) */
  kn_compiled_graph cg; /* zero when the op cannot be lowered */
  char *why;            /* then: the reason */
  int nin;              /* tensor inputs, in argument order */
  kn__shape_env *env;   /* a generic entry's symbols and the guards they must pass */
  bool static_only;     /* a generic key whose program could not be built */
  struct entry *next;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table; /* process-wide, entries never removed (like loaded code) */

/* A generic key has at most this many programs (each a set of guards the
** sizes failed before); further shapes take the static key. */
#define KN__EAGER_VARIANTS 8
#define KN__EAGER_SYMS 64

/* The size symbols of a generic key: one per distinct size >= 2 of the
** contiguous tensor arguments (PyTorch's duck sizing: equal sizes share a
** symbol, so the key says which dims are equal), in order of appearance. */
typedef struct syms {
  int n;
  bool full; /* more distinct sizes than KN__EAGER_SYMS */
  int64_t val[KN__EAGER_SYMS];
} syms;

/* ---- the key -------------------------------------------------------------------------- */
/* Does t have exactly the strides of a fresh contiguous tensor (every dim,
** size-1 dims too: the program checks them)? Offsets do not matter: the
** program reads from the data pointer. */
static bool canonical(const kn_tensor *t) {
  int64_t want = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->strides[d] != want) return false;
    want *= t->sizes[d];
  }
  return true;
}

/* The symbol of size v (added on first sight), or -1 when sy is full. */
static int sym_of(syms *sy, int64_t v) {
  for (int k = 0; k < sy->n; k++)
    if (sy->val[k] == v) return k;
  if (sy->n == KN__EAGER_SYMS) {
    sy->full = true;
    return -1;
  }
  sy->val[sy->n] = v;
  return sy->n++;
}

/* Which sizes of a canonical tensor are symbols: 0 and 1 stay constants
** (PyTorch specialises them too). A tensor that is not canonical keeps its
** sizes and strides. */
static bool symbolic_size(int64_t v) { return v >= 2; }

static void key_tensor(kn__sb *sb, const kn_tensor *t, syms *sy) {
  bool gen = sy && canonical(t);
  kn__sb_printf(sb, "%c%d[", gen ? 'G' : 'T', (int)t->dtype);
  for (int d = 0; d < t->ndim; d++) {
    int k = gen && symbolic_size(t->sizes[d]) ? sym_of(sy, t->sizes[d]) : -1;
    if (k >= 0) kn__sb_printf(sb, "s%d,", k);
    else if (gen) kn__sb_printf(sb, "%lld,", (long long)t->sizes[d]);
    else kn__sb_printf(sb, "%lld:%lld,", (long long)t->sizes[d], (long long)t->strides[d]);
  }
  kn__sb_putc(sb, ']');
}

static bool key_arg(kn__sb *sb, const kn__arg *a, syms *sy) {
  switch (a->kind) {
  case KN__A_NONE: kn__sb_puts(sb, "N"); return true;
  case KN__A_TENSOR:
    if (a->u.t) key_tensor(sb, a->u.t, sy);
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

/* The key of call c into *key (initialised here): generic (sizes as duck
** symbols, filled into *sy) when sy is given, else static (every size and
** stride). KN_OK, or the error (an argument kind single-op graphs do not
** take, OOM). */
static kn_status make_key(const kn__call *c, int nout, syms *sy, kn__sb *key) {
  kn__sb_init(key);
  kn__sb_printf(key, "%s/%d:", c->op->name, nout);
  for (int a = 0; a < c->nargs; a++)
    if (!key_arg(key, &c->args[a], sy)) {
      kn__sb_fini(key);
      return kn__error(KN_EUNSUPPORTED, "argument %d's kind", a);
    }
  if (kn__sb_failed(key)) {
    kn__sb_fini(key);
    return kn__oom();
  }
  return KN_OK;
}

/* ---- building ---------------------------------------------------------------------------- */
typedef struct lookup_ctx { kn__graph *g; int n; } lookup_ctx;

/* Each tensor argument becomes the next placeholder (argument order), on
** the GPU (fake stand-ins of a generic build report their real device). */
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

/* The graph of call c (its tensors real or fake) with outputs of the given
** metadata, compiled into e (or e->why set). env: the shape env of a
** generic build (the graph takes a reference), else NULL. */
static kn_status build(const kn__call *c, int nout, const kn__vmeta *metas, kn__shape_env *env,
                       entry *e) {
  kn__graph *g = kn__graph_new();
  if (!g) return kn__oom();
  if (env) kn__graph_set_shape_env(g, env, false);
  lookup_ctx lc = {g, 0};
  kn__gnode *n = kn__graph_call_from(g, c, lookup, &lc, nout, metas);
  kn__gref refs[KN__INLINE_OUTS];
  for (int k = 0; n && k < nout; k++) refs[k] = kn__graph_value(g, n, k);
  if (!n || !kn__graph_output(g, nout, refs)) {
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

static kn_status build_static(const kn__call *c, const kn__outs *out, entry *e) {
  if (out->n > KN__INLINE_OUTS)
    return kn__error(KN_EUNSUPPORTED, "more than %d outputs", KN__INLINE_OUTS);
  kn__vmeta metas[KN__INLINE_OUTS];
  for (int k = 0; k < out->n; k++) kn__vmeta_from_tensor(out->t[k], &metas[k]);
  return build(c, out->n, metas, NULL, e);
}

/* A data-less stand-in of t on its device, its generic dims symbolic. Owned. */
static kn_tensor *fake_of(const kn_tensor *t, const syms *sy, const kn_sym *s) {
  kn__storage *st = kn__storage_new(t->storage->nbytes, KN_META);
  kn_tensor *f = st ? kn__tensor_wrap(st, t->dtype, t->ndim, t->sizes, t->strides, 0) : NULL;
  if (st) kn__storage_release(st);
  bool gen = canonical(t);
  kn__symshape *ss = f && gen ? calloc(1, sizeof *ss) : NULL;
  if (!f || (gen && !ss)) {
    kn_release(f);
    kn__oom();
    return NULL;
  }
  f->is_fake = true;
  f->device = t->device;
  if (!ss) return f;
  kn_sym acc = kn__sym_const(1);
  for (int d = t->ndim - 1; d >= 0; d--) {
    int k = -1;
    for (int j = 0; symbolic_size(t->sizes[d]) && j < sy->n && k < 0; j++)
      if (sy->val[j] == t->sizes[d]) k = j;
    ss->sizes[d] = k >= 0 ? s[k] : kn__sym_const(t->sizes[d]);
    ss->strides[d] = acc;
    acc = kn__sym_mul(acc, ss->sizes[d]);
  }
  ss->offset = kn__sym_const(0);
  f->sym = ss;
  return f;
}

/* Build the generic program of call c: every tensor argument a fake with
** symbolic sizes in a new shape env, the outputs' metadata from the op's
** meta function on them (any guards it needs go into the env). */
static kn_status generic_graph(const kn__call *c, const syms *sy, kn__shape_env *env, entry *e) {
  kn_sym s[KN__EAGER_SYMS];
  kn_status st = KN_OK;
  for (int k = 0; st == KN_OK && k < sy->n; k++)
    st = kn__shape_env_create_symbol(env, sy->val[k], 2, &s[k]);
  kn__call fc = *c;
  for (int a = 0; st == KN_OK && a < c->nargs; a++)
    if (c->args[a].kind == KN__A_TENSOR && c->args[a].u.t) {
      fc.args[a].u.t = fake_of(c->args[a].u.t, sy, s);
      if (!fc.args[a].u.t) st = kn_last_status();
    } else if (c->args[a].kind == KN__A_TENSOR) {
      fc.args[a].u.t = NULL;
    }
  kn__outs m;
  kn__outs_init(&m);
  if (st == KN_OK) st = kn__dispatch_backend_meta(&fc, &m);
  if (st == KN_OK && m.n > KN__INLINE_OUTS)
    st = kn__error(KN_EUNSUPPORTED, "more than %d outputs", KN__INLINE_OUTS);
  kn__vmeta metas[KN__INLINE_OUTS];
  for (int k = 0; st == KN_OK && k < m.n; k++) {
    kn__vmeta_from_tensor(m.t[k], &metas[k]);
    metas[k].device = KN_CUDA;
  }
  if (st == KN_OK) st = build(&fc, m.n, metas, env, e);
  if (st == KN_OK) kn__outs_fini(&m); /* (on failure the backend already did) */
  for (int a = 0; a < c->nargs; a++)
    if (c->args[a].kind == KN__A_TENSOR && fc.args[a].u.t != c->args[a].u.t)
      kn_release(fc.args[a].u.t);
  return st;
}

static kn_status build_generic(const kn__call *c, const syms *sy, entry *e) {
  if (!(e->env = kn__shape_env_new())) return kn__oom();
  kn__shape_env *prev = kn__shape_env_set_current(e->env);
  kn_status st = generic_graph(c, sy, e->env, e);
  kn__shape_env_set_current(prev);
  return st;
}

static void entry_free(entry *e) {
  if (!e) return;
  if (e->cg.free_state) e->cg.free_state(e->cg.state);
  if (e->gm) kn_graph_module_free(e->gm);
  kn__shape_env_free(e->env);
  free(e->why);
  free(e->key);
  free(e);
}

/* ---- the table ------------------------------------------------------------------------------ */
/* An entry of the key whose guards the sizes sy pass (NULL: none), and the
** number of entries of the key so far. Called with the lock held. */
static entry *lookup_entry(const char *key, const syms *sy, int *count) {
  *count = 0;
  for (entry *e = table; e; e = e->next) {
    if (strcmp(e->key, key)) continue;
    ++*count;
    if (e->static_only || !e->env || kn__shape_env_check_guards(e->env, sy->val) < 0) return e;
  }
  return NULL;
}

/* Keep e in the table (it takes the key); or, when the build failed, free
** it and return NULL (a later call tries again: the code cache keeps what
** compiled). */
static entry *keep(entry *e, kn_status built) {
  if (built != KN_OK) {
    entry_free(e);
    return NULL;
  }
  e->next = table;
  table = e;
  return e;
}

/* The static entry of call c (built on a miss), or NULL after setting the
** error. Called with the lock held. */
static entry *find_static(const kn__call *c, const kn__outs *out) {
  kn__sb key;
  if (make_key(c, out->n, NULL, &key) != KN_OK) return NULL;
  syms none = {0};
  int count;
  entry *e = lookup_entry(kn__sb_cstr(&key), &none, &count);
  if (!e && (e = calloc(1, sizeof *e)) && (e->key = kn__sb_take(&key)))
    e = keep(e, build_static(c, out, e));
  else if (!e) kn__oom();
  kn__sb_fini(&key);
  return e;
}

/* A generic build that fails for any reason but memory leaves a marker
** (the key's calls take the static path from then on) and the error state
** as it was. NULL only when memory ran out (error set). */
static entry *add_generic(const kn__call *c, const syms *sy, kn__sb *key) {
  entry *e = calloc(1, sizeof *e);
  if (!e || !(e->key = kn__sb_take(key))) {
    free(e);
    kn__oom();
    return NULL;
  }
  kn__error_state saved;
  kn__error_save(&saved);
  kn_status st = build_generic(c, sy, e);
  if (st == KN_OK || st == KN_ENOMEM) return keep(e, st);
  KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: aten.%s on cuda:0: no program for symbolic "
         "sizes (%s); compiled per size", c->op->name, kn_last_error());
  kn__error_restore(&saved);
  entry *m = calloc(1, sizeof *m);
  if (m && (m->key = strdup(e->key))) {
    m->static_only = true;
    keep(m, KN_OK);
  } else {
    free(m);
    m = NULL;
    kn__oom();
  }
  entry_free(e);
  return m;
}

/* The entry of call c (built on a miss), or NULL after setting the error:
** the generic program of its key whose guards the sizes pass, else a new
** one, else (a key with KN__EAGER_VARIANTS programs, or one the code
** generator cannot build with symbolic sizes) the static program of its
** sizes. */
static entry *find(const kn__call *c, const kn__outs *out) {
  syms sy = {0};
  kn__sb key;
  if (make_key(c, out->n, &sy, &key) != KN_OK) return NULL;
  pthread_mutex_lock(&lock);
  entry *e = NULL;
  bool oom = false;
  if (sy.n > 0 && !sy.full) {
    int count;
    e = lookup_entry(kn__sb_cstr(&key), &sy, &count);
    if (!e && count < KN__EAGER_VARIANTS) oom = !(e = add_generic(c, &sy, &key));
    if (e && e->static_only) e = NULL;
  }
  if (!e && !oom) e = find_static(c, out);
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
