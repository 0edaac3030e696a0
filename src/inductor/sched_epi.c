/*
** inductor/sched_epi.c: the scheduler's epilogue pass. A GEMM or
** convolution extern step (lowering role EP_*) and a pointwise kernel that
** reads its whole output become one step: the extern call computes its
** output in blocks of rows and the generated kernel runs over each block
** while it is in cache (gemm.c runs it; the kernel is printed by the target
** like any pointwise kernel, kir.h's KN__KIR_EPILOGUE). Any pointwise
** chain fuses: a bias add, activations, gelu(x) * y, a residual add of
** another tensor of the output's sizes, casts, threshold_backward in a
** backward graph.
**
** A kernel (one root r, or a horizontal set whose last root is r: one loop
** writing several outputs) fuses into extern node E when:
**   - its loop reads E's only output with the kernel's own sizes,
**     contiguously (element i of the block is element i of the output);
**     E's output is float32 or float64;
**   - E has no epilogue yet (several candidates: the latest E is taken);
**   - every other buffer the loop reads is computed before E (the kernel
**     now runs at E);
**   - no node inlined into it is recomputed in other readers (its inputs'
**     liveness is that of one kernel).
** E's output keeps its own buffer when anything else reads it (another
** kernel, an extern, the graph's output); otherwise the memory plan writes
** the kernel's output over it, and the GEMM is computed in the output's
** buffer directly (kir.c, codegen.c).
**
** The pass visits each node once and each kernel's operand tree once:
** linear in the graph (no rescans; the work count is logged).
*/
#include <stdio.h>
#include <stdlib.h>

#include "inductor/kir.h"
#include "logging/log.h"

int kn__ind_run_point(const kn__ind_plan *p, int i) {
  const kn__ind_node *in = &p->nodes[i];
  if (in->group >= 0) return p->groups[in->group].root;
  if (in->kind == KN__IND_PW && in->epi >= 0) return in->epi;
  if (in->kind == KN__IND_PW && in->hz >= 0) return in->hz;
  return i;
}

static bool ep_role(const kn__gnode *n) {
  kn__ind_role r = kn__ind_lowering_of(n->opdef)->role;
  return r == KN__IND_R_EP_ADDMM || r == KN__IND_R_EP_MM || r == KN__IND_R_EP_BMM ||
         r == KN__IND_R_EP_CONV;
}

/* Is extern node m a GEMM / convolution whose output can feed an epilogue
** over the sizes `space`? */
static bool producer(const kn__ind_plan *p, const kn__gnode *m, int idx, const kn__vmeta *space) {
  if (p->nodes[m->index].kind != KN__IND_EXTERN || p->nodes[m->index].epi >= 0 || m->nout != 1 ||
      idx != 0 || !m->opdef || !ep_role(m))
    return false;
  kn_dtype dt = m->meta[0].dtype;
  return (dt == KN_FLOAT32 || dt == KN_FLOAT64) && m->meta[0].ndim >= 1 &&
         kn__kir_same_elements(space, &m->meta[0]);
}

/* The walk of one kernel's operand tree. */
typedef struct walk {
  const kn__ind_plan *p;
  const kn__vmeta *space;
  int set;      /* the kernel's last root: its roots' values are the loop's own */
  int ext;      /* the latest candidate producer, or -1 */
  int latest;   /* the latest run point of another read */
  bool refused; /* a recomputed node is inlined in the tree */
  long work;    /* nodes visited */
} walk;

static void note_read(walk *w, const kn__gnode *m, int idx) {
  int at = kn__ind_run_point(w->p, m->index);
  if (producer(w->p, m, idx, w->space)) {
    if (w->ext >= 0 && w->ext != m->index) {
      int older = w->ext < m->index ? w->ext : m->index;
      if (older > w->latest) w->latest = older;
    }
    if (m->index > w->ext) w->ext = m->index;
  } else if (at > w->latest) {
    w->latest = at;
  }
}

static bool pw_root(const kn__ind_node *in) {
  return in->kind == KN__IND_PW && in->group < 0 && !in->inlined && !in->expr && in->slot >= 0;
}

static void visit(walk *w, const kn__gnode *n) {
  const kn__ind_node *in = &w->p->nodes[n->index];
  w->work++;
  int nop = in->f.nopnds < n->nargs ? in->f.nopnds : n->nargs;
  for (int q = 0; q < nop && !w->refused; q++) {
    const kn__garg *a = &n->args[q];
    const kn__gnode *m = a->kind == KN__GA_TENSOR ? a->u.t.node : NULL;
    if (!m || w->p->nodes[m->index].expr) continue;
    if (!w->p->nodes[m->index].inlined && kn__ind_run_point(w->p, m->index) == w->set &&
        pw_root(&w->p->nodes[m->index]))
      continue; /* a root of this loop, computed in it (visited as one) */
    if (!w->p->nodes[m->index].inlined) {
      note_read(w, m, a->u.t.idx);
    } else if (m->nusers != 1) {
      w->refused = true;
    } else {
      visit(w, m);
    }
  }
}

/* prev[m]: the root of m's horizontal set before m (-1: m is its first),
** for every root; so a set's roots are its last root's chain. */
static int *set_chains(const kn__ind_plan *p) {
  int *prev = malloc(((size_t)p->nnodes + 1) * sizeof *prev);
  int *tail = malloc(((size_t)p->nnodes + 1) * sizeof *tail);
  if (!prev || !tail) {
    free(prev);
    free(tail);
    return NULL;
  }
  for (int i = 0; i < p->nnodes; i++) prev[i] = -1, tail[i] = -1;
  for (int m = 0; m < p->nnodes; m++) {
    int h = p->nodes[m].hz;
    if (!pw_root(&p->nodes[m]) || h < 0) continue;
    prev[m] = tail[h];
    tail[h] = m;
  }
  free(tail);
  return prev;
}

/* Fuse the kernel whose last root is r into extern w->ext. */
static void fuse(kn__ind_plan *p, const int *prev, int r, int e, bool log) {
  for (int m = r; m >= 0; m = prev[m]) p->nodes[m].epi = e;
  p->nodes[e].epi = r;
  p->nkernels--;
  p->nepilogues++;
  if (log)
    KN_LOG_ARTIFACT(KN_ART_FUSION, "fusion: %s fused into %s as its epilogue: reads its whole "
                    "output, everything else it reads is ready before it",
                    kn__graph_node(p->g, r)->name, kn__graph_node(p->g, e)->name);
}

int kn__ind_schedule_epilogues(kn__ind_plan *p, bool log) {
  int *prev = set_chains(p);
  if (!prev) return 0; /* out of memory: no epilogue (each kernel stays its own) */
  int fused = 0;
  long work = 0;
  for (int r = 0; r < p->nnodes; r++) {
    const kn__ind_node *in = &p->nodes[r];
    if (!pw_root(in) || (in->hz >= 0 && in->hz != r)) continue;
    walk w = {p, &kn__graph_node(p->g, r)->meta[0], r, -1, -1, false, 0};
    for (int m = r; m >= 0 && !w.refused; m = prev[m]) visit(&w, kn__graph_node(p->g, m));
    work += w.work;
    if (w.ext < 0 || w.refused || w.latest >= w.ext) continue;
    fuse(p, prev, r, w.ext, log);
    fused++;
  }
  free(prev);
  if (log && fused)
    KN_LOG_ARTIFACT(KN_ART_FUSION, "fusion: epilogue pass: %d fused, %ld nodes visited for %d "
                    "nodes", fused, work, p->nnodes);
  p->epi_work = work;
  return fused;
}
