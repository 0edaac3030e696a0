/*
** tests/cuda/gpu_prog.c: see gpu_prog.h.
*/
#include "gpu_prog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "cuda/cuda.h"
#include "inductor/kir.h"
#include "inductor/target.h"
#include "tensor/tensor.h"

/* ---- building ------------------------------------------------------------------------ */
static char *gen_source(void *ud) {
  gpu_prog *p = ud;
  kn__sb sb;
  kn__sb_init(&sb);
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(p->g));
  kn_status st = kn__ind_codegen_target(&p->plan, &kn__ind_target_cuda, &sb);
  kn__shape_env_set_current(prev);
  char *src = st == KN_OK ? kn__sb_take(&sb) : NULL;
  kn__sb_fini(&sb);
  return src;
}

static kn_status build(const kn__graph *g, gpu_prog *p) {
  kn_status st = kn__ind_post_grad(g, &p->g);
  if (st == KN_OK) st = kn__ind_plan_build(p->g, false, &p->plan);
  if (st != KN_OK) return st;
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(p->g));
  char *text = kn__graph_serialize(p->g);
  kn__shape_env_set_current(prev);
  if (!text) return kn__oom();
  kn__ind_loaded ld;
  st = kn__ind_load_graph(text, false, &kn__ind_target_cuda, gen_source, p, &ld);
  free(text);
  if (st == KN_OK) p->call = ld.call;
  return st;
}

/* The capturing backend: build the program once, then run eagerly. */
static kn_status capture(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                         kn_compiled_graph *out) {
  gpu_prog *p = ud;
  if (!p->ready && p->st == KN_OK) {
    p->st = build(kn__graph_module_graph(gm), p);
    if (p->st != KN_OK) snprintf(p->err, sizeof p->err, "%s", kn_last_error());
    p->ready = p->st == KN_OK;
  }
  return kn_backend_compile("eager", gm, ex, n, out);
}

kn_status gpu_prog_build(void (*fn)(void), int nargs, kn_tensor *const *args, gpu_prog *p) {
  memset(p, 0, sizeof *p);
  kn_compile_options o = {.backend_fn = capture, .backend_ud = p, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = kn_compile_tensor_fn(fn, nargs, "gpu_case", __FILE__, __LINE__, &o);
  if (!f) return kn__error(KN_EINVAL, "gpu_prog: cannot compile: %s", kn_last_error());
  kn_scope_begin();
  kn_tensor *r = kn_call_tensors(f, args, nargs);
  kn_scope_end();
  kn_compiled_free(f);
  if (p->st != KN_OK) return kn__error(p->st, "%s", p->err);
  if (!r) return kn__error(KN_EINVAL, "gpu_prog: the traced call failed: %s", kn_last_error());
  if (!p->ready) return kn__error(KN_EINVAL, "gpu_prog: the function made no graph");
  return KN_OK;
}

void gpu_prog_free(gpu_prog *p) {
  if (p->ready || p->g) kn__ind_plan_free(&p->plan);
  kn__graph_free(p->g);
  memset(p, 0, sizeof *p);
}

/* ---- running --------------------------------------------------------------------------- */
static size_t slot_bytes(const gpu_prog *p, int slot) {
  const kn__vmeta *m = kn__kir_slot_meta(&p->plan, slot);
  size_t n = 1;
  for (int d = 0; d < m->ndim; d++) n *= (size_t)m->sizes[d].c;
  return n * kn_dtype_size(m->dtype);
}

static int d_ext(void *ctx, int step) {
  gpu_run *r = ctx;
  kn__error(KN_EUNSUPPORTED, "gpu_prog: extern step %d (%s) needs eager CUDA ops", step,
            r->p->plan.step_node[step]->target);
  return -1;
}
static int d_alloc(void *ctx, int slot, void **out) {
  gpu_run *r = ctx;
  if (r->own[slot]) kn__cuda_free(r->buf[slot]); /* an output of the previous call */
  r->own[slot] = false;
  if (kn__cuda_alloc(slot_bytes(r->p, slot), out) != KN_OK) return -1;
  r->buf[slot] = *out;
  r->own[slot] = true;
  return 0;
}
static void *d_ptr(void *ctx, int slot) { return ((gpu_run *)ctx)->buf[slot]; }
static void d_release(void *ctx, int slot) {
  gpu_run *r = ctx;
  if (r->own[slot]) kn__cuda_free(r->buf[slot]);
  r->buf[slot] = NULL;
  r->own[slot] = false;
}
static const void *d_vmath(void) { return NULL; }
static int d_reuse(void *ctx, int from, int to, void **out) {
  gpu_run *r = ctx;
  r->buf[to] = r->buf[from];
  r->own[to] = r->own[from];
  r->buf[from] = NULL;
  r->own[from] = false;
  *out = r->buf[to];
  return 0;
}
static int d_launch(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                    unsigned shmem, void **args) {
  (void)ctx;
  return kn__cuda_launch(fn, grid, block, shmem, args) == KN_OK ? 0 : -1;
}
static const kn__ind_rt d_rt = {d_ext, d_alloc, d_ptr, d_release, d_vmath, d_reuse, d_launch,
                               NULL}; /* CUDA programs run no epilogues */

/* Elements from t's data pointer to its last element. */
static int64_t span(const kn_tensor *t) {
  int64_t s = 1;
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] == 0) return 0;
    else s += (t->sizes[d] - 1) * t->strides[d];
  return s;
}

kn_status gpu_run_begin(const gpu_prog *p, kn_tensor *const *in, int nin, gpu_run *r) {
  memset(r, 0, sizeof *r);
  r->p = p;
  r->buf = calloc((size_t)p->plan.nslots + 1, sizeof *r->buf);
  r->own = calloc((size_t)p->plan.nslots + 1, sizeof *r->own);
  if (!r->buf || !r->own) return kn__oom();
  if (nin != kn__graph_num_inputs(p->g))
    return kn__error(KN_EINVAL, "gpu_prog: %d inputs, the graph has %d", nin,
                     kn__graph_num_inputs(p->g));
  for (int i = 0; i < nin; i++) {
    int slot = p->plan.nodes[kn__graph_input(p->g, i)->index].slot;
    size_t nb = (size_t)span(in[i]) * kn_dtype_size(in[i]->dtype);
    kn_status st = kn__cuda_alloc(nb, &r->buf[slot]);
    if (st == KN_OK) r->own[slot] = true;
    if (st == KN_OK) st = kn__cuda_memcpy(r->buf[slot], KN_CUDA, kn_data(in[i]), KN_CPU, nb);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

kn_status gpu_run_call(gpu_run *r) {
  static const int64_t s[1] = {0}; /* static shapes: no symbol is read */
  return r->p->call(&d_rt, r, s) ? KN_EINTERNAL : KN_OK;
}

kn_tensor *gpu_run_output(gpu_run *r, int k) {
  const kn__gnode *o = kn__graph_output_node(r->p->g);
  int slot = kn__ind_value_slot(&r->p->plan, o->args[k].u.t);
  const kn__vmeta *m = kn__kir_slot_meta(&r->p->plan, slot);
  int64_t sizes[KN_MAX_DIMS];
  for (int d = 0; d < m->ndim; d++) sizes[d] = m->sizes[d].c;
  if (!r->buf[slot]) return NULL;
  /* the caller's own reference (kn_empty's would be the open scope's) */
  kn_tensor *t = kn__empty(m->ndim, sizes, m->dtype, KN_CPU);
  if (!t) return NULL;
  size_t nb = (size_t)kn_numel(t) * kn_dtype_size(m->dtype);
  if (kn__cuda_memcpy(kn_data(t), KN_CPU, r->buf[slot], KN_CUDA, nb) != KN_OK) {
    kn_release(t);
    return NULL;
  }
  return t;
}

void gpu_run_end(gpu_run *r) {
  for (int s = 0; r->buf && r->own && s < r->p->plan.nslots; s++)
    if (r->own[s]) kn__cuda_free(r->buf[s]);
  free(r->buf);
  free(r->own);
  memset(r, 0, sizeof *r);
}
