/*
** graph/interp.c: the graph interpreter, the "eager" backend's program.
**
** kn__gprog_new compiles a graph into steps: per call node a dispatcher
** call template with every constant argument filled in, and "patches" that
** drop in the run's tensors (value slots), tensor lists and symbolic ints
** evaluated from the symbol values bound from the inputs' sizes. A run
** copies a template, applies its patches and calls kn__dispatch; values are
** released after their last use, as FX's generated code does. The per-run
** scratch (a frame) is allocated once with the program. A replay on
** tensors that carry the graph's size symbols (AOT's joint trace) passes
** symbolic arguments with their symbols (kn__arg.sym), so what a recording
** mode records from it stays symbolic.
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"
#include "kiln/autograd.h"

enum { P_TENSOR, P_LIST, P_SYMINT, P_SYMINTS, P_SYMSCALAR };

typedef struct patch {
  int kind, arg;
  int value;            /* P_TENSOR: value slot, -1 for an absent tensor */
  int off, n;           /* P_LIST/P_SYMINTS: offset into the frame scratch, count */
  const int *values;    /* P_LIST: n value slots (program-owned) */
  const kn_sym *syms;   /* P_SYMINT(S): graph-owned */
} patch;

typedef struct step {
  const kn__opdef *op;  /* NULL: getitem (value = retain(values[src])) */
  int nargs, src;
  kn__arg tmpl[KN__MAX_ARGS];
  int p0, p1;           /* patches [p0, p1) */
  int out, nout;        /* value slots [out, out + nout) */
  int f0, f1;           /* owned slots to release after the step: frees[f0..f1) */
  const char *name;     /* for error messages (graph-owned) */
  signed char grad_mode; /* -1: the caller's, else the node's */
  bool set_requires_grad;
} step;

typedef struct binding { int input, dim, sym; } binding;

typedef struct frame {
  kn_tensor **values;
  kn_tensor **lists;
  int64_t *ints;
  int64_t *symvals;
  bool symbolic;  /* the inputs carry the graph's size symbols (see bind_inputs) */
} frame;

struct kn__gprog {
  const kn__graph *g;
  int ninputs, noutputs, nvalues, nsteps, nlists, nints, nsyms, nbind;
  int *in_ndim;          /* per input: expected rank, -1 unknown */
  step *steps;
  patch *patches;
  int *frees;
  int *outs;             /* value slot per output */
  bool *borrowed;        /* per value slot: placeholder/get_attr (not owned) */
  int nattr;             /* get_attr constants: slot and tensor (graph-owned) */
  int *attr_slot;
  kn_tensor **attr_t;
  binding *binds;
  void *mem;             /* one block holding the arrays above */
  frame fr;              /* the program's own frame */
  void *frmem;
  atomic_flag busy;
};

/* ---- building ------------------------------------------------------------ */

/* Index of a plain symbol ("s12" -> 12), or -1 for a constant/expression. */
typedef struct counts { int nvalues, nsteps, npatch, nfree, nlistv, nints, nbind; } counts;

static void count(const kn__graph *g, counts *c, int *slot) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    slot[i] = c->nvalues;
    c->nvalues += n->nout;
    if (n->op == KN__GN_PLACEHOLDER && n->meta[0].kind == KN__V_TENSOR)
      c->nbind += n->meta[0].ndim;
    if (n->op != KN__GN_CALL) continue;
    c->nsteps++;
    c->nfree += n->nargs * 1 + 1;
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      c->npatch++;
      if (ga->kind == KN__GA_TENSORS) c->nlistv += ga->u.ts.n, c->nfree += ga->u.ts.n;
      if (ga->kind == KN__GA_INTS) c->nints += ga->u.ints.n;
    }
  }
}

static int value_of(const int *slot, kn__gref r) { return r.node ? slot[r.node->index] + r.idx : -1; }

static bool sym_args(const kn__garg *ga) {
  if (ga->kind == KN__GA_INT) return !kn__sym_is_const(ga->u.i);
  if (ga->kind != KN__GA_INTS) return false;
  for (int j = 0; j < ga->u.ints.n; j++)
    if (!kn__sym_is_const(ga->u.ints.v[j])) return true;
  return false;
}

/* Translate a constant argument into the template. Constant int lists get
** program-owned int64 copies carved from *ints. */
static void const_arg(const kn__garg *ga, kn__arg *t, int64_t **ints) {
  switch (ga->kind) {
  case KN__GA_NONE: *t = KN_A_NONE; break;
  case KN__GA_TENSOR: *t = KN_A_T(NULL); break;
  case KN__GA_TENSORS: *t = KN_A_TS(NULL, ga->u.ts.n); break;
  case KN__GA_INT: *t = KN_A_I(ga->u.i.c); break;
  case KN__GA_DOUBLE: *t = KN_A_D(ga->u.d); break;
  case KN__GA_BOOL: *t = KN_A_B(ga->u.b); break;
  case KN__GA_SCALAR: *t = KN_A_S(ga->u.s); break;
  case KN__GA_INTS: {
    int64_t *v = *ints;
    for (int j = 0; j < ga->u.ints.n; j++) v[j] = ga->u.ints.v[j].c;
    *ints += ga->u.ints.n;
    *t = KN_A_INTS(v, ga->u.ints.n);
    break;
  }
  case KN__GA_DTYPE: *t = KN_A_DT(ga->u.dt); break;
  case KN__GA_GEN: *t = KN_A_GEN(ga->u.gen); break;
  }
}

/* A symbolic argument must be computable from the inputs' sizes: evaluated
** with the placeholders' hints it must give its own hint. */
static kn_status check_syms(const kn__gprog *p, const kn__gnode *n, const kn__garg *ga,
                            const int64_t *hints) {
  if (!sym_args(ga)) return KN_OK;
  if (!p->g->env)
    return kn__error(KN_EINVAL, "graph program: node '%s' has symbolic arguments but the graph "
                     "has no shape env", n->name);
  const kn_sym *v = ga->kind == KN__GA_INT ? &ga->u.i : ga->u.ints.v;
  int k = ga->kind == KN__GA_INT ? 1 : ga->u.ints.n;
  for (int j = 0; j < k; j++) {
    if (kn__sym_eval(v[j], hints) == kn__sym_hint(v[j])) continue;
    char buf[128];
    kn__sym_format(v[j], buf, sizeof buf);
    return kn__error(KN_EUNSUPPORTED, "graph program: argument %s of node '%s' uses a symbol "
                     "that is not the size of any input", buf, n->name);
  }
  return KN_OK;
}

static void build_bindings(kn__gprog *p) {
  const kn__graph *g = p->g;
  p->nbind = 0;
  p->nsyms = g->env ? kn__shape_env_nsymbols(g->env) : 0;
  for (int i = 0; i < g->ninputs; i++) {
    const kn__vmeta *m = &g->nodes[i]->meta[0];
    p->in_ndim[i] = m->kind == KN__V_TENSOR ? m->ndim : -1;
    if (m->kind != KN__V_TENSOR) continue;
    for (int d = 0; d < m->ndim; d++) {
      int k = kn__sym_symbol_index(m->sizes[d]);
      if (k < 0) continue;
      p->binds[p->nbind++] = (binding){i, d, k};
      if (k + 1 > p->nsyms) p->nsyms = k + 1;
    }
  }
}

/* Mark last uses: lastuse[v] = step index, or -2 for values kept to the end. */
static void last_uses(const kn__graph *g, const int *slot, int *lastuse, int nvalues) {
  for (int v = 0; v < nvalues; v++) lastuse[v] = -1;
  int s = 0;
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    bool out = n->op == KN__GN_OUTPUT;
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      int k = ga->kind == KN__GA_TENSOR ? 1 : ga->kind == KN__GA_TENSORS ? ga->u.ts.n : 0;
      for (int j = 0; j < k; j++) {
        int v = value_of(slot, ga->kind == KN__GA_TENSOR ? ga->u.t : ga->u.ts.v[j]);
        if (v >= 0) lastuse[v] = out ? -2 : s;
      }
    }
    if (n->op == KN__GN_CALL) s++;
  }
}

static kn_status build_steps(kn__gprog *p, const int *slot, const int *lastuse,
                             int *listv, int64_t *ints, const int64_t *hints) {
  const kn__graph *g = p->g;
  int s = 0, np = 0, nf = 0, nl = 0, ni = 0;
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    if (n->op != KN__GN_CALL) continue;
    step *st = &p->steps[s];
    st->op = n->opdef;
    st->nargs = n->nargs;
    st->name = n->name;
    st->grad_mode = n->grad_mode;
    st->set_requires_grad = n->set_requires_grad;
    st->out = slot[i];
    st->nout = n->nout;
    st->src = n->opdef ? -1 : value_of(slot, n->args[0].u.t);
    st->p0 = np;
    for (int a = 0; n->opdef && a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      kn_status e = check_syms(p, n, ga, hints);
      if (e != KN_OK) return e;
      const_arg(ga, &st->tmpl[a], &ints);
      patch *pt = &p->patches[np];
      memset(pt, 0, sizeof *pt);
      pt->arg = a;
      if (ga->kind == KN__GA_TENSOR) {
        pt->kind = P_TENSOR;
        pt->value = value_of(slot, ga->u.t);
        np++;
      } else if (ga->kind == KN__GA_TENSORS) {
        pt->kind = P_LIST;
        pt->off = nl;
        pt->n = ga->u.ts.n;
        for (int j = 0; j < ga->u.ts.n; j++) listv[nl + j] = value_of(slot, ga->u.ts.v[j]);
        pt->values = listv + nl;
        nl += ga->u.ts.n;
        np++;
      } else if (sym_args(ga)) {
        pt->kind = ga->kind == KN__GA_INTS ? P_SYMINTS : kn__schema_arg_is_scalar(n->opdef, a) ? P_SYMSCALAR : P_SYMINT;
        if (pt->kind == P_SYMSCALAR) st->tmpl[a] = KN_A_S(kn_int(ga->u.i.c));
        pt->syms = ga->kind == KN__GA_INT ? &ga->u.i : ga->u.ints.v;
        pt->n = ga->kind == KN__GA_INT ? 1 : ga->u.ints.n;
        pt->off = ni;
        ni += pt->n;
        np++;
      }
    }
    st->p1 = np;
    st->f0 = nf;
    for (int v = 0; v < p->nvalues; v++) /* owned values dying at this step */
      if (lastuse[v] == s && !p->borrowed[v]) p->frees[nf++] = v;
    for (int k = 0; k < n->nout; k++)
      if (lastuse[slot[i] + k] == -1) p->frees[nf++] = slot[i] + k; /* never used */
    st->f1 = nf;
    s++;
  }
  (void)nl;
  (void)ni;
  return KN_OK;
}

static bool frame_alloc(const kn__gprog *p, frame *f, void **mem) {
  size_t nv = (size_t)p->nvalues, nl = (size_t)p->nlists, ni = (size_t)p->nints,
         ns = (size_t)p->nsyms;
  char *m = malloc((nv + nl + 1) * sizeof(kn_tensor *) + (ni + ns + 1) * sizeof(int64_t));
  if (!m) return false;
  f->ints = (int64_t *)m;
  f->symvals = f->ints + ni;
  f->values = (kn_tensor **)(f->symvals + ns + 1);
  f->lists = f->values + nv;
  *mem = m;
  return true;
}

kn_status kn__gprog_new(const kn__graph *g, kn__gprog **out) {
  *out = NULL;
  kn_status st = kn__graph_verify(g);
  if (st != KN_OK) return st;
  kn__gprog *p = calloc(1, sizeof *p);
  int *slot = malloc((size_t)(g->n + 1) * sizeof *slot);
  counts c;
  if (!p || !slot) goto oom;
  count(g, &c, slot);
  size_t sz = (size_t)c.nsteps * sizeof(step) + (size_t)c.npatch * sizeof(patch) +
              (size_t)(c.nfree + c.nlistv + g->ninputs + g->output->nargs + 2 * c.nvalues + 4) *
                  sizeof(int) +
              (size_t)c.nbind * sizeof(binding) + (size_t)c.nints * sizeof(int64_t);
  p->mem = calloc(1, sz);
  p->borrowed = calloc((size_t)c.nvalues + 1, sizeof *p->borrowed);
  p->attr_slot = calloc((size_t)g->n + 1, sizeof *p->attr_slot);
  p->attr_t = calloc((size_t)g->n + 1, sizeof *p->attr_t);
  if (!p->mem || !p->borrowed || !p->attr_slot || !p->attr_t) goto oom;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i]->op == KN__GN_PLACEHOLDER || g->nodes[i]->op == KN__GN_GET_ATTR)
      p->borrowed[slot[i]] = true;
  p->g = g;
  p->nvalues = c.nvalues;
  p->nsteps = c.nsteps;
  p->ninputs = g->ninputs;
  p->noutputs = g->output->nargs;
  p->steps = p->mem;
  p->patches = (patch *)(p->steps + c.nsteps);
  int64_t *ints = (int64_t *)(p->patches + c.npatch);
  p->binds = (binding *)(ints + c.nints);
  p->frees = (int *)(p->binds + c.nbind);
  int *listv = p->frees + c.nfree;
  p->in_ndim = listv + c.nlistv;
  p->outs = p->in_ndim + g->ninputs;
  int *lastuse = p->outs + p->noutputs;
  build_bindings(p);
  last_uses(g, slot, lastuse, c.nvalues);
  for (int i = 0; i < p->noutputs; i++) p->outs[i] = value_of(slot, g->output->args[i].u.t);
  p->nlists = c.nlistv;
  p->nints = c.nints;
  if (!frame_alloc(p, &p->fr, &p->frmem)) goto oom;
  for (int s = 0; s <= p->nsyms; s++) p->fr.symvals[s] = 0;
  for (int b = 0; b < p->nbind; b++) /* the hints, to check symbolic arguments */
    p->fr.symvals[p->binds[b].sym] =
        kn__sym_hint(g->nodes[p->binds[b].input]->meta[0].sizes[p->binds[b].dim]);
  st = build_steps(p, slot, lastuse, listv, ints, p->fr.symvals);
  if (st != KN_OK) {
    free(slot);
    kn__gprog_free(p);
    return st;
  }
  p->nattr = 0;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i]->op == KN__GN_GET_ATTR) {
      p->attr_slot[p->nattr] = slot[i];
      p->attr_t[p->nattr++] = g->nodes[i]->attr;
    }
  atomic_flag_clear(&p->busy);
  free(slot);
  *out = p;
  return KN_OK;
oom:
  free(slot);
  kn__gprog_free(p);
  return kn__oom();
}

void kn__gprog_free(kn__gprog *p) {
  if (!p) return;
  free(p->frmem);
  free(p->borrowed);
  free(p->attr_slot);
  free(p->attr_t);
  free(p->mem);
  free(p);
}

int kn__gprog_num_inputs(const kn__gprog *p) { return p->ninputs; }
int kn__gprog_num_outputs(const kn__gprog *p) { return p->noutputs; }

/* ---- running ------------------------------------------------------------------ */

static kn_status run_step(const kn__gprog *p, const step *st, frame *f) {
  kn_tensor **val = f->values;
  if (!st->op) {
    val[st->out] = kn_retain(val[st->src]);
    return KN_OK;
  }
  kn__call c;
  c.op = st->op;
  c.nargs = st->nargs;
  memcpy(c.args, st->tmpl, (size_t)st->nargs * sizeof c.args[0]);
  for (int i = st->p0; i < st->p1; i++) {
    const patch *pt = &p->patches[i];
    kn__arg *a = &c.args[pt->arg];
    switch (pt->kind) {
    case P_TENSOR: a->u.t = pt->value >= 0 ? val[pt->value] : NULL; break;
    case P_LIST:
      for (int j = 0; j < pt->n; j++) f->lists[pt->off + j] = val[pt->values[j]];
      a->u.ts.v = f->lists + pt->off;
      break;
    case P_SYMINT: a->u.i = kn__sym_eval(pt->syms[0], f->symvals); break;
    case P_SYMSCALAR: a->u.s = kn_int(kn__sym_eval(pt->syms[0], f->symvals)); break;
    case P_SYMINTS:
      for (int j = 0; j < pt->n; j++) f->ints[pt->off + j] = kn__sym_eval(pt->syms[j], f->symvals);
      a->u.ints.v = f->ints + pt->off;
      break;
    }
    if (pt->kind >= P_SYMINT && f->symbolic) a->sym = pt->syms;
  }
  kn__outs o;
  kn__outs_init(&o);
  bool prev = st->grad_mode >= 0 ? kn_set_grad_enabled(st->grad_mode != 0) : false;
  kn_status s = kn__dispatch(&c, &o);
  if (st->grad_mode >= 0) kn_set_grad_enabled(prev);
  if (s == KN_OK && st->set_requires_grad && o.n > 0) s = kn_set_requires_grad(o.t[0], true);
  if (s != KN_OK) kn__outs_fini(&o);
  if (s != KN_OK) return kn__error_context("while running graph node '%s'", st->name), s;
  if (o.n != st->nout) {
    kn__outs_fini(&o);
    return kn__error(KN_EINTERNAL, "graph node '%s': op %s returned %d outputs, the graph "
                     "expects %d", st->name, st->op->name, o.n, st->nout);
  }
  for (int k = 0; k < o.n; k++) val[st->out + k] = o.t[k];
  o.n = 0;
  kn__outs_fini(&o);
  return KN_OK;
}

/* Release the owned values still held (error paths and the end of a run). */
static void release_owned(const kn__gprog *p, frame *f) {
  for (int v = 0; v < p->nvalues; v++) {
    if (f->values[v] && !p->borrowed[v]) kn_release(f->values[v]);
    f->values[v] = NULL;
  }
}

/* Is size d of t symbolic, the graph's symbol k? */
static bool is_symbol(const kn_tensor *t, int d, int k) {
  return t->sym && kn__sym_symbol_index(t->sym->sizes[d]) == k;
}

/* Bind the symbols from the inputs' sizes. When every bound size is the
** graph's own symbol (a replay on symbolic tensors, such as AOT's joint
** trace under its recording mode), symbolic arguments are passed with their
** symbols (kn__arg.sym) beside the values, so meta functions and recording
** modes see them: a size list the graph computes from input sizes stays
** symbolic in what the replay records, instead of the traced sizes. */
static kn_status bind_inputs(const kn__gprog *p, frame *f, kn_tensor *const *inputs) {
  const kn__graph *g = p->g;
  for (int i = 0; i < p->ninputs; i++) {
    kn_tensor *t = inputs[i];
    if (!t)
      return kn__error(KN_EINVAL, "graph input %d ('%s') is NULL", i, g->nodes[i]->target);
    if (p->in_ndim[i] >= 0 && t->ndim != p->in_ndim[i])
      return kn__error(KN_ESHAPE, "graph input %d ('%s'): expected a tensor of rank %d, got "
                       "rank %d", i, g->nodes[i]->target, p->in_ndim[i], t->ndim);
    f->values[i] = t;
  }
  f->symbolic = p->nbind > 0;
  for (int b = 0; b < p->nbind; b++) {
    const kn_tensor *t = inputs[p->binds[b].input];
    f->symvals[p->binds[b].sym] = t->sizes[p->binds[b].dim];
    f->symbolic = f->symbolic && is_symbol(t, p->binds[b].dim, p->binds[b].sym);
  }
  for (int a = 0; a < p->nattr; a++) f->values[p->attr_slot[a]] = p->attr_t[a];
  return KN_OK;
}

static kn_status run_frame(const kn__gprog *p, frame *f, kn_tensor *const *inputs,
                           kn_tensor **outputs) {
  memset(f->values, 0, (size_t)p->nvalues * sizeof *f->values);
  kn_status st = bind_inputs(p, f, inputs);
  for (int s = 0; st == KN_OK && s < p->nsteps; s++) {
    const step *sp = &p->steps[s];
    st = run_step(p, sp, f);
    for (int k = sp->f0; st == KN_OK && k < sp->f1; k++) {
      kn_release(f->values[p->frees[k]]);
      f->values[p->frees[k]] = NULL;
    }
  }
  if (st == KN_OK)
    for (int i = 0; i < p->noutputs; i++) outputs[i] = kn_retain(f->values[p->outs[i]]);
  release_owned(p, f);
  return st;
}

kn_status kn__gprog_run(kn__gprog *p, kn_tensor *const *inputs, int ninputs,
                        kn_tensor **outputs, int noutputs) {
  if (!p) return kn__error(KN_EINVAL, "graph program is NULL");
  if (ninputs != p->ninputs || noutputs != p->noutputs)
    return kn__error(KN_EINVAL, "graph program: expected %d inputs and %d outputs, got %d "
                     "inputs and %d outputs", p->ninputs, p->noutputs, ninputs, noutputs);
  if (ninputs && !inputs) return kn__error(KN_EINVAL, "graph program: inputs array is NULL");
  if (noutputs && !outputs) return kn__error(KN_EINVAL, "graph program: outputs array is NULL");
  if (!atomic_flag_test_and_set_explicit(&p->busy, memory_order_acquire)) {
    kn_status st = run_frame(p, &p->fr, inputs, outputs);
    atomic_flag_clear_explicit(&p->busy, memory_order_release);
    return st;
  }
  frame f; /* nested or concurrent run: a temporary frame */
  void *mem;
  if (!frame_alloc(p, &f, &mem)) return kn__oom();
  kn_status st = run_frame(p, &f, inputs, outputs);
  free(mem);
  return st;
}
