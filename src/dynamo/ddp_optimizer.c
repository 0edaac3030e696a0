/*
** dynamo/ddp_optimizer.c: DDPOptimizer (see ddp_optimizer.h), PyTorch's
** algorithm on kiln's graphs:
**
**  1. buckets: the call nodes in reverse graph order (the order gradients
**     become ready in the backward); each node joins the current bucket
**     with the bytes of the registered parameters its arguments read (each
**     parameter counted once). Before a node joins, a bucket that holds at
**     least its cap (the first bucket: the first-bucket cap) is closed if
**     one of its values is used outside it (else it grows until it has
**     one, so every piece has an output). A leading bucket without
**     parameters joins the next. One bucket: no split.
**  2. pieces: each bucket's nodes, in graph order, become a graph of their
**     own (kn__graph_subgraph_io): the values they read from outside are
**     its placeholders, the values used outside its outputs. submod_0 is
**     the first in graph order (the last bucket to be averaged).
**  3. each piece is compiled by the inner backend with example inputs: the
**     graph's own examples, and meta tensors of the traced geometry for
**     values another piece produces (PyTorch runs the pieces on fake
**     tensors for that).
** The callable runs the pieces in order, each piece's outputs feeding the
** next ones' inputs. With AOT autograd each piece gets its own backward
** node, so the backward of submod_1 accumulates its parameters' gradients
** (and DDP's hooks start their all-reduce) before submod_0's runs.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/ddp_optimizer.h"
#include "graph/graph.h"
#include "kiln/autograd.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "trace/trace.h"

/* ---- the registry ----------------------------------------------------------------- */
typedef struct ddp_reg {
  const void *owner;
  kn_tensor **params; /* array owned, tensors borrowed */
  int np;
  int64_t cap, first;
  bool optimize;
} ddp_reg;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static ddp_reg *regs;
static int nregs, capregs;

static int find_owner_locked(const void *owner) {
  for (int i = 0; i < nregs; i++)
    if (regs[i].owner == owner) return i;
  return -1;
}

kn_status kn__ddp_optimizer_register(const void *owner, kn_tensor *const *params, int np,
                                     int64_t bucket_bytes, int64_t first_bucket_bytes,
                                     bool optimize) {
  kn_tensor **copy = malloc((size_t)(np > 0 ? np : 1) * sizeof *copy);
  if (!copy) return kn__oom();
  if (np > 0) memcpy(copy, params, (size_t)np * sizeof *copy);
  ddp_reg e = {owner, copy, np, bucket_bytes, first_bucket_bytes, optimize};
  pthread_mutex_lock(&reg_lock);
  int i = find_owner_locked(owner);
  if (i < 0 && nregs == capregs) {
    int cap = capregs ? capregs * 2 : 4;
    ddp_reg *r = realloc(regs, (size_t)cap * sizeof *r);
    if (r) regs = r, capregs = cap;
  }
  kn_status st = KN_OK;
  if (i >= 0) free(regs[i].params), regs[i] = e;
  else if (nregs < capregs) regs[nregs++] = e;
  else st = kn__oom();
  pthread_mutex_unlock(&reg_lock);
  if (st != KN_OK) free(copy);
  return st;
}

void kn__ddp_optimizer_unregister(const void *owner) {
  pthread_mutex_lock(&reg_lock);
  int i = find_owner_locked(owner);
  if (i >= 0) {
    free(regs[i].params);
    regs[i] = regs[--nregs];
  }
  pthread_mutex_unlock(&reg_lock);
}

/* The registered model whose parameters include one of reals: its caps and
** switch, and which inputs are its parameters (is_param[n]). */
static bool find_ddp(kn_tensor *const *reals, int n, bool *is_param, ddp_reg *out) {
  bool found = false;
  pthread_mutex_lock(&reg_lock);
  for (int r = 0; r < nregs && !found; r++) {
    for (int i = 0; i < n; i++) {
      is_param[i] = false;
      for (int p = 0; reals[i] && p < regs[r].np && !is_param[i]; p++)
        is_param[i] = regs[r].params[p] == reals[i] && kn_requires_grad(reals[i]);
      found |= is_param[i];
    }
    if (found) *out = regs[r];
  }
  pthread_mutex_unlock(&reg_lock);
  return found;
}

/* ---- 1. buckets ------------------------------------------------------------------------ */
typedef struct bucket {
  int64_t size;
  int nparams;
  int extended;      /* nodes added past the cap to reach an external output */
  int64_t size_at_cap;
} bucket;

typedef struct splitter {
  const kn__graph *g;
  const bool *is_param;    /* per input */
  const kn_tensor *const *reals;
  const ddp_reg *ddp;
  int *bucket_of;          /* per node: creation index of its bucket, -1 none */
  bool *counted;           /* per input: its parameter is in a bucket */
  bucket *b;               /* in creation order (graph end first) */
  int nb;
  kn__sb names;            /* "bucket k: name, name" lines for the debug log */
} splitter;

/* Does bucket k have a value used by a node outside it (or the output)? */
static bool has_external_output(const splitter *s, int k) {
  for (int i = 0; i < kn__graph_num_nodes(s->g); i++) {
    kn__gnode *n = kn__graph_node(s->g, i);
    if (s->bucket_of[i] != k) continue;
    kn__gnode *users[64];
    int nu = kn__graph_users(s->g, n, users, 64);
    for (int u = 0; u < nu && u < 64; u++)
      if (s->bucket_of[users[u]->index] != k) return true;
    if (nu > 64) return true; /* conservatively: many users, one is outside */
  }
  return false;
}

static void add_param(splitter *s, const kn__gnode *ph) {
  int i = ph->index; /* placeholders come first: their index is their input position */
  if (ph->op != KN__GN_PLACEHOLDER || !s->is_param[i] || s->counted[i]) return;
  s->counted[i] = true;
  bucket *b = &s->b[s->nb - 1];
  const kn_tensor *p = s->reals[i];
  b->size += kn_numel(p) * (int64_t)kn_dtype_size(kn_tensor_dtype(p));
  kn__sb_printf(&s->names, "%s%s", b->nparams++ ? ", " : "", ph->target);
}

static void add_node_params(splitter *s, const kn__gnode *n) {
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *g = &n->args[a];
    if (g->kind == KN__GA_TENSOR && g->u.t.node) add_param(s, g->u.t.node);
    for (int j = 0; g->kind == KN__GA_TENSORS && j < g->u.ts.n; j++)
      if (g->u.ts.v[j].node) add_param(s, g->u.ts.v[j].node);
  }
}

static kn_status new_bucket(splitter *s) {
  bucket *nb = realloc(s->b, (size_t)(s->nb + 1) * sizeof *nb);
  if (!nb) return kn__oom();
  s->b = nb;
  s->b[s->nb++] = (bucket){0};
  if (s->nb > 1) kn__sb_printf(&s->names, "\n");
  kn__sb_printf(&s->names, "  bucket %d: ", s->nb - 1);
  return KN_OK;
}

static kn_status assign_buckets(splitter *s) {
  kn_status st = new_bucket(s);
  for (int i = kn__graph_num_nodes(s->g) - 1; st == KN_OK && i >= 0; i--) {
    kn__gnode *n = kn__graph_node(s->g, i);
    if (n->op != KN__GN_CALL) continue;
    bucket *cur = &s->b[s->nb - 1];
    if (cur->size >= s->ddp->cap || (s->nb == 1 && cur->size >= s->ddp->first)) {
      if (has_external_output(s, s->nb - 1)) {
        st = new_bucket(s);
      } else {
        if (!cur->extended) cur->size_at_cap = cur->size;
        cur->extended++;
      }
    }
    if (st != KN_OK) break;
    add_node_params(s, n);
    s->bucket_of[i] = s->nb - 1;
  }
  if (st == KN_OK && s->nb > 1 && s->b[s->nb - 1].size == 0) { /* a preamble without parameters */
    for (int i = 0; i < kn__graph_num_nodes(s->g); i++)
      if (s->bucket_of[i] == s->nb - 1) s->bucket_of[i] = s->nb - 2;
    s->nb--;
  }
  return st;
}

/* ---- 2. pieces and their wiring ---------------------------------------------------------- */
typedef enum src_kind { SRC_INPUT, SRC_PIECE, SRC_CONST } src_kind;
typedef struct src {
  src_kind kind;
  int a, b;           /* input a; or output b of piece a */
  kn_tensor *konst;   /* SRC_CONST: the graph's constant (borrowed from the graph) */
} src;

typedef struct piece {
  kn_graph_module *gm;   /* owned: the callable may borrow it */
  kn_compiled_graph cg;
  kn__graph_io io;       /* which values of the whole graph it reads and returns (owned) */
  src *in;               /* [io.nin] owned */
} piece;

typedef struct split_fn {
  int npieces;
  piece *p;              /* owned */
  int nout;
  src *out;              /* [nout] owned */
  kn_graph_module *whole; /* borrowed: holds the constants */
} split_fn;

static void split_free(void *state) {
  split_fn *f = state;
  if (!f) return;
  for (int k = 0; k < f->npieces; k++) {
    piece *p = &f->p[k];
    if (p->cg.free_state) p->cg.free_state(p->cg.state);
    kn_graph_module_free(p->gm);
    free(p->io.in);
    free(p->io.out);
    free(p->in);
  }
  free(f->p);
  free(f->out);
  free(f);
}

/* Where value v of the whole graph comes from at run time. */
static src source_of(const split_fn *f, kn__gref v) {
  if (v.node->op == KN__GN_PLACEHOLDER) return (src){SRC_INPUT, v.node->index, 0, NULL};
  if (v.node->op == KN__GN_GET_ATTR) return (src){SRC_CONST, 0, 0, v.node->attr};
  for (int k = 0; k < f->npieces; k++)
    for (int j = 0; j < f->p[k].io.nout; j++)
      if (f->p[k].io.out[j].node == v.node && f->p[k].io.out[j].idx == v.idx)
        return (src){SRC_PIECE, k, j, NULL};
  return (src){SRC_CONST, 0, 0, NULL}; /* not reached: every value read has a producer */
}

static kn_tensor *resolve(const src *s, kn_tensor *const *in, kn_tensor ***outs) {
  switch (s->kind) {
  case SRC_INPUT: return in[s->a];
  case SRC_PIECE: return outs[s->a][s->b];
  default: return s->konst;
  }
}

static kn_status split_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  split_fn *f = state;
  (void)nin;
  kn_tensor ***outs = calloc((size_t)f->npieces + 1, sizeof *outs);
  kn_status st = outs ? KN_OK : kn__oom();
  for (int k = 0; st == KN_OK && k < f->npieces; k++) {
    piece *p = &f->p[k];
    kn_tensor **args = calloc((size_t)p->io.nin + 1, sizeof *args);
    outs[k] = calloc((size_t)p->io.nout + 1, sizeof *outs[k]);
    if (!args || !outs[k]) st = kn__oom();
    for (int j = 0; st == KN_OK && j < p->io.nin; j++) args[j] = resolve(&p->in[j], in, outs);
    /* each piece's outputs are new references in the open scope, as an op's */
    if (st == KN_OK) st = p->cg.run(p->cg.state, args, p->io.nin, outs[k], p->io.nout);
    free(args);
  }
  for (int i = 0; st == KN_OK && i < nout; i++) {
    out[i] = kn_retain(resolve(&f->out[i], in, outs));
    kn__autorelease(out[i]);
  }
  for (int k = 0; outs && k < f->npieces; k++) free(outs[k]);
  free(outs);
  return st;
}

/* ---- 3. compiling the pieces -------------------------------------------------------------- */
/* Example inputs of piece k: the graph's own, constants, and meta tensors
** of the traced geometry for other pieces' values (owned in metas[]). */
static kn_status piece_examples(const split_fn *f, int k, kn_tensor *const *examples,
                                kn_tensor **ex, kn_tensor **metas) {
  const piece *p = &f->p[k];
  for (int j = 0; j < p->io.nin; j++) {
    const src *s = &p->in[j];
    if (s->kind == SRC_INPUT) ex[j] = examples[s->a];
    else if (s->kind == SRC_CONST) ex[j] = s->konst;
    else {
      kn__gref v = p->io.in[j];
      const kn__vmeta *m = &v.node->meta[v.idx];
      if (!(metas[j] = kn__aot_meta_of(m, false))) return kn_last_status();
      if (m->requires_grad) kn_set_requires_grad(metas[j], true);
      ex[j] = metas[j];
    }
  }
  return KN_OK;
}

static kn_status compile_piece(split_fn *f, int k, kn_tensor *const *examples,
                               kn__ddp_inner_fn compile, void *ud) {
  piece *p = &f->p[k];
  size_t n = (size_t)p->io.nin + 1;
  kn_tensor **ex = calloc(n, sizeof *ex), **metas = calloc(n, sizeof *metas);
  kn_status st = ex && metas ? KN_OK : kn__oom();
  if (st == KN_OK) st = piece_examples(f, k, examples, ex, metas);
  if (st == KN_OK && KN_ARTIFACT_ENABLED(KN_ART_DDP_GRAPHS)) {
    char *code = kn__graph_code(kn__graph_module_graph(p->gm), NULL);
    if (code) KN_LOG_ARTIFACT(KN_ART_DDP_GRAPHS, "\n---submod_%d graph---\n%s", k, code);
    free(code);
  }
  if (st == KN_OK) st = compile(ud, p->gm, ex, p->io.nin, &p->cg);
  if (st != KN_OK) kn__error_context("DDPOptimizer: compiling submod_%d", k);
  for (size_t j = 0; metas && j < n; j++) kn_release(metas[j]);
  free(ex);
  free(metas);
  return st;
}

/* The pieces of the whole graph, in graph order, with their wiring. */
static kn_status make_pieces(split_fn *f, const splitter *s) {
  const kn__graph *g = s->g;
  int nn = kn__graph_num_nodes(g);
  kn__gnode **sel = malloc((size_t)(nn + 1) * sizeof *sel);
  f->p = calloc((size_t)s->nb, sizeof *f->p);
  kn_status st = sel && f->p ? KN_OK : kn__oom();
  for (int k = 0; st == KN_OK && k < s->nb; k++) {
    int b = s->nb - 1 - k, m = 0; /* piece k: the bucket created k-th from the end */
    for (int i = 0; i < nn; i++)
      if (s->bucket_of[i] == b) sel[m++] = kn__graph_node(g, i);
    kn__graph *pg = kn__graph_subgraph_io(g, sel, m, &f->p[k].io);
    f->npieces = k + 1;
    st = pg ? kn__graph_module_new(pg, &f->p[k].gm) : kn_last_status();
  }
  free(sel);
  for (int k = 0; st == KN_OK && k < f->npieces; k++) {
    piece *p = &f->p[k];
    if (!(p->in = calloc((size_t)p->io.nin + 1, sizeof *p->in))) st = kn__oom();
    for (int j = 0; st == KN_OK && j < p->io.nin; j++) p->in[j] = source_of(f, p->io.in[j]);
  }
  const kn__gnode *o = kn__graph_output_node(g);
  f->nout = o ? o->nargs : 0;
  if (st == KN_OK && !(f->out = calloc((size_t)f->nout + 1, sizeof *f->out))) st = kn__oom();
  for (int i = 0; st == KN_OK && i < f->nout; i++) f->out[i] = source_of(f, o->args[i].u.t);
  return st;
}

/* ---- the split graph as code (optimize_ddp_split_graph, ddp_graphs) ---------------------- */
/* The name of piece k's output j in the split graph. */
static void value_name(const split_fn *f, const src *s, const kn__graph *g, char *buf, size_t n) {
  if (s->kind == SRC_INPUT) snprintf(buf, n, "%s", kn__graph_input(g, s->a)->name);
  else if (s->kind == SRC_CONST) snprintf(buf, n, "self._tensor_constant");
  else if (f->p[s->a].io.nout == 1) snprintf(buf, n, "submod_%d", s->a);
  else snprintf(buf, n, "getitem_%d_%d", s->a, s->b);
}

/* Graph code of piece k renamed submod_k and indented one level. */
static void nested_class(kn__sb *sb, const piece *p, int k) {
  char *code = kn__graph_code(kn__graph_module_graph(p->gm), NULL);
  if (!code) return;
  const char *body = strncmp(code, "class GraphModule", 17) ? code : code + 17;
  kn__sb_printf(sb, "\n    class submod_%d", k);
  for (const char *c = body; *c; c++) {
    kn__sb_printf(sb, "%c", *c);
    if (*c == '\n' && c[1] && c[1] != '\n') kn__sb_printf(sb, "    ");
  }
  free(code);
}

static char *split_code(const split_fn *f, const kn__graph *g) {
  kn__sb sb;
  kn__sb_init(&sb);
  kn__sb_printf(&sb, "class GraphModule(torch.nn.Module):\n    def forward(self");
  for (int i = 0; i < kn__graph_num_inputs(g); i++) {
    const kn__gnode *ph = kn__graph_input(g, i);
    char *ann = kn__vmeta_str(ph->meta, NULL);
    kn__sb_printf(&sb, ", %s: \"%s\"", ph->target, ann ? ann : "");
    free(ann);
  }
  kn__sb_printf(&sb, "):\n");
  for (int i = 0; i < kn__graph_num_inputs(g); i++)
    kn__sb_printf(&sb, "        %s = %s\n", kn__graph_input(g, i)->name, kn__graph_input(g, i)->target);
  char name[300];
  for (int k = 0; k < f->npieces; k++) {
    kn__sb_printf(&sb, "        submod_%d = self.submod_%d(", k, k);
    for (int j = 0; j < f->p[k].io.nin; j++) {
      value_name(f, &f->p[k].in[j], g, name, sizeof name);
      kn__sb_printf(&sb, "%s%s", j ? ", " : "", name);
    }
    kn__sb_printf(&sb, ")\n");
    for (int j = 0; f->p[k].io.nout > 1 && j < f->p[k].io.nout; j++)
      kn__sb_printf(&sb, "        getitem_%d_%d = submod_%d[%d]\n", k, j, k, j);
  }
  kn__sb_printf(&sb, "        return (");
  for (int i = 0; i < f->nout; i++) {
    value_name(f, &f->out[i], g, name, sizeof name);
    kn__sb_printf(&sb, "%s%s", name, f->nout == 1 ? "," : i + 1 < f->nout ? ", " : "");
  }
  kn__sb_printf(&sb, ")\n");
  for (int k = 0; k < f->npieces; k++) nested_class(&sb, &f->p[k], k);
  char *s = kn__sb_failed(&sb) ? NULL : strdup(kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
  return s;
}

/* The records PyTorch writes once the graph is split: the ddp_graphs log of
** the whole, split and piece graphs, then optimize_ddp_split_graph and one
** optimize_ddp_split_child per piece in the trace. */
static void report_split(const split_fn *f, const kn__graph *g) {
  bool logs = KN_ARTIFACT_ENABLED(KN_ART_DDP_GRAPHS);
  if (!logs && !kn__trace_enabled()) return;
  char *split = split_code(f, g);
  if (logs) {
    char *orig = kn__graph_code(g, NULL);
    kn__sb sb;
    kn__sb_init(&sb);
    kn__sb_printf(&sb, "\n---orig graph---\n%s\n\n---split graph---\n%s\n", orig ? orig : "",
                  split ? split : "");
    for (int k = 0; k < f->npieces; k++) {
      char *c = kn__graph_code(kn__graph_module_graph(f->p[k].gm), NULL);
      kn__sb_printf(&sb, "\n---submod_%d graph---\n%s\n", k, c ? c : "");
      free(c);
    }
    kn__sb_printf(&sb, "\n---------------\n");
    if (!kn__sb_failed(&sb)) KN_LOG_ARTIFACT(KN_ART_DDP_GRAPHS, "%s", kn__sb_cstr(&sb));
    kn__sb_fini(&sb);
    free(orig);
  }
  if (split) KN_TRACE("optimize_ddp_split_graph", NULL, split);
  for (int k = 0; k < f->npieces && kn__trace_enabled(); k++) {
    char name[32];
    snprintf(name, sizeof name, "submod_%d", k);
    char *c = kn__graph_code(kn__graph_module_graph(f->p[k].gm), NULL);
    if (c) KN_TRACE("optimize_ddp_split_child", json_pack("{s:s}", "name", name), c);
    free(c);
  }
  free(split);
}

static void log_buckets(const splitter *s) {
  KN_LOG(KN_LOG_DYNAMO_DISTRIBUTED, KN_INFO,
         "DDPOptimizer used bucket cap %lld and created %d buckets. Enable debug logs for "
         "detailed bucket info.", (long long)s->ddp->cap, s->nb);
  if (!kn__sb_failed(&s->names))
    KN_LOG(KN_LOG_DYNAMO_DISTRIBUTED, KN_DEBUG,
           "DDPOptimizer produced the following bucket assignments (parameters, graph end "
           "first):\n%s", kn__sb_cstr(&s->names));
  for (int k = 0; k < s->nb; k++)
    if (s->b[k].extended)
      KN_LOG(KN_LOG_DYNAMO_DISTRIBUTED, KN_WARNING,
             "DDPOptimizer extended bucket %d by %d ops (%lld bytes of parameters past its "
             "cap) so that its subgraph has an output", k, s->b[k].extended,
             (long long)(s->b[k].size - s->b[k].size_at_cap));
}

static kn_status split_compile(splitter *s, kn_graph_module *gm, kn_tensor *const *examples,
                               kn__ddp_inner_fn compile, void *ud, kn_compiled_graph *out) {
  split_fn *f = calloc(1, sizeof *f);
  if (!f) return kn__oom();
  f->whole = gm;
  kn_status st = make_pieces(f, s);
  if (st == KN_OK) report_split(f, s->g);
  for (int k = 0; st == KN_OK && k < f->npieces; k++) st = compile_piece(f, k, examples, compile, ud);
  if (st != KN_OK) {
    split_free(f);
    return st;
  }
  if (KN_ARTIFACT_ENABLED(KN_ART_DDP_GRAPHS)) {
    char *c = split_code(f, s->g);
    if (c) KN_LOG_ARTIFACT(KN_ART_DDP_GRAPHS, "\n---final graph---\n%s\n---------------\n", c);
    free(c);
  }
  *out = (kn_compiled_graph){split_run, f, split_free};
  return KN_OK;
}

kn_status kn__ddp_optimizer_compile(kn_graph_module *gm, kn_tensor *const *examples,
                                    kn_tensor *const *reals, int n, kn__ddp_inner_fn compile,
                                    void *ud, kn_compiled_graph *out) {
  const kn__graph *g = kn__graph_module_graph(gm);
  bool *is_param = calloc((size_t)n + 1, sizeof *is_param);
  if (!is_param) return kn__oom();
  ddp_reg ddp;
  if (!reals || !find_ddp(reals, n, is_param, &ddp) || !ddp.optimize) {
    free(is_param);
    return compile(ud, gm, examples, n, out);
  }
  int nn = kn__graph_num_nodes(g);
  splitter s = {g, is_param, (const kn_tensor *const *)reals, &ddp,
                malloc((size_t)(nn + 1) * sizeof(int)), calloc((size_t)n + 1, sizeof(bool)),
                NULL, 0, {0}};
  kn__sb_init(&s.names);
  kn_status st = s.bucket_of && s.counted ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < nn; i++) s.bucket_of[i] = -1;
  if (st == KN_OK) st = assign_buckets(&s);
  if (st == KN_OK) log_buckets(&s);
  if (st == KN_OK && s.nb < 2) st = compile(ud, gm, examples, n, out); /* one bucket: no split */
  else if (st == KN_OK) st = split_compile(&s, gm, examples, compile, ud, out);
  kn__sb_fini(&s.names);
  free(s.bucket_of);
  free(s.counted);
  free(s.b);
  free(is_param);
  return st;
}
