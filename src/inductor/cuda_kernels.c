/*
** inductor/cuda_kernels.c: the CUDA target's kernels (target_cuda.c), one
** `extern "C" __global__` function per kernel item of the kernel IR, with
** the element expressions of codegen.c's printer (cgen.h): the same fused
** trees, formulas, loads through strides and 16-bit conversions as the C
** targets, inside CUDA loops.
**
**   pointwise  a grid-stride loop over the space's numel (64-bit indices):
**              a flat index when every read is contiguous with the space's
**              sizes or one element, else each read's offset from its
**              strides (broadcast dims stride 0); a horizontal set stores
**              every root in the same loop. A flat float32 kernel first
**              tries a loop of float4 loads and stores (four elements per
**              thread) when the count is a multiple of 4 and every buffer
**              is 16-byte aligned (vec_loop)
**   reduction  one block per row of the group's kept dims (a grid-stride
**              loop over rows); each reduction member is a pass of the
**              block's threads over the row (thread t takes elements t,
**              t + blockDim.x, ... in order, with the fused producers
**              computed per element), its accumulator combined across the
**              block by kn_block_fold / kn_block_arg (warp shuffles, then
**              one warp over the warps' results in shared memory), then
**              finalised by every thread; per-row members are computed by
**              every thread and stored by thread 0; a last pass stores the
**              per-element members read outside the group. The combine,
**              init, prep and finalize are the reduction table's
**              (reduce_lower.c's prelude): var/std take a mean pass then a
**              pass of squared deviations, argmax/argmin carry the first
**              index of the extreme (row-major over the reduced dims).
** Symbolic sizes are kernel parameters (const int64_t S<i>), the ones the
** kernel reads, in index order; the host program passes them (cu_info).
** Blocks are 256 threads (a multiple of 32, at most 1024: the block
** combine's assumption).
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/cgen.h"
#include "inductor/cuda_target.h"

/* The kernel's parameter list: outputs, reads not written in place (group
** kernels: every read), then the symbols used. */
static void params(kctx *k, kn__sb *ker) {
  int nouts = k->g ? k->nouts : k->nroots;
  for (int o = 0; o < nouts; o++) {
    const kn__gnode *on = k->g ? kn__graph_node(k->p->g, k->outs[o]) : k->roots[o];
    kn__sb_printf(ker, "%s%s *__restrict__ ", o ? ", " : "", kn__ind_ctype(on->meta[0].dtype));
    if (!k->g && nouts == 1) kn__sb_puts(ker, "out");
    else kn__sb_printf(ker, "out%d", o);
  }
  for (int i = 0; i < k->nleaves; i++)
    if (k->leaves[i].slot >= 0 && (k->g || k->alias[i] < 0))
      kn__sb_printf(ker, ", const %s *__restrict__ in%d", kn__ind_ctype(k->leaves[i].m->dtype), i);
  for (int i = 0; i < k->nused; i++)
    if (k->used[i]) kn__sb_printf(ker, ", const int64_t S%d", i);
  kn__sb_puts(ker, ") {\n");
}

/* Copy what the host needs from k into info (when not NULL). */
static kn_status keep_info(kctx *k, kn__sb *grid, cu_info *info) {
  if (!info) return KN_OK;
  info->used = k->nused ? malloc((size_t)k->nused) : NULL;
  info->grid = kn__sb_take(grid);
  if ((k->nused && !info->used) || !info->grid) return kn__oom();
  if (k->nused) memcpy(info->used, k->used, (size_t)k->nused);
  info->nused = k->nused;
  info->per_thread = 1;
  return KN_OK;
}

void kn__cu_info_free(cu_info *info) {
  free(info->used);
  free(info->grid);
  memset(info, 0, sizeof *info);
}

/* ---- pointwise --------------------------------------------------------------------- */

static bool vec_ok(const kctx *k);
static void vec_loop(kctx *k, kn__sb *sb, const char *body);

static void pw_loop(kctx *k, kn__sb *sb, const char *body) {
  int nd = k->shape->ndim;
  kn__sb_puts(sb, "  const int64_t n = ");
  kn__cg_numel_text(k, sb, nd);
  kn__sb_puts(sb, ";\n");
  if (!k->flat) {
    kn__sb_puts(sb, "  const int64_t len = ");
    kn__cg_sym_text(k, sb, k->shape->sizes[nd - 1]);
    kn__sb_puts(sb, ";\n");
  }
  if (vec_ok(k)) vec_loop(k, sb, body);
  kn__sb_puts(sb, "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
                  "       i += (int64_t)gridDim.x * blockDim.x) {\n");
  if (!k->flat) {
    kn__sb_puts(sb, "    const int64_t r = i / len, j = i % len;\n");
    kn__cg_offsets_begin(k, sb, "r");
    for (int d = nd - 2; d >= 0; d--) kn__cg_offsets_dim(k, sb, d);
    kn__sb_puts(sb, "    (void)t;\n");
  }
  kn__sb_puts(sb, body);
  for (int o = 0; o < k->nroots; o++) {
    if (k->nroots == 1) kn__sb_puts(sb, "      out[i] = ");
    else kn__sb_printf(sb, "      out%d[i] = ", o);
    kn__sb_printf(sb, "%s(v%d);\n", kn__cg_st_fn(k->roots[o]->meta[0].dtype), k->roots[o]->index);
  }
  kn__sb_puts(sb, "  }\n");
}

/* ---- 16-byte accesses ---- */
/* Can the flat loop also run four float32 elements per thread through
** float4 loads and stores? Every root float32, every leaf float32 (read at
** i, not in place) or a broadcast scalar. The kernel takes that path when
** the element count is a multiple of 4 and every buffer is 16-byte aligned
** (a runtime test; otherwise the scalar loop runs). */
static bool vec_ok(const kctx *k) {
  if (!k->flat || k->shape->ndim == 0) return false;
  for (int o = 0; o < k->nroots; o++)
    if (k->roots[o]->meta[0].dtype != KN_FLOAT32) return false;
  for (int i = 0; i < k->nleaves; i++)
    if (!kn__cg_leaf_scalar(k->leaves[i].m) &&
        (k->leaves[i].m->dtype != KN_FLOAT32 || k->alias[i] >= 0))
      return false;
  return true;
}

static bool vec_leaf(const kctx *k, int i) { return !kn__cg_leaf_scalar(k->leaves[i].m); }

static void out_name(const kctx *k, kn__sb *sb, int o) {
  if (k->nroots == 1) kn__sb_puts(sb, "out");
  else kn__sb_printf(sb, "out%d", o);
}

/* Does an identifier end just before p (so "in0" at p is part of it)? */
static bool after_ident(const char *body, const char *p) {
  return p > body && (p[-1] == '_' || isalnum((unsigned char)p[-1]));
}

/* body with each vector leaf's load in<L>[i] replaced by lane c of kn_v<L>. */
static void lane_body(const kctx *k, kn__sb *sb, const char *body, char c) {
  for (const char *p = body; *p;) {
    int li = -1, len = 0;
    if (p[0] == 'i' && p[1] == 'n' && !after_ident(body, p) &&
        sscanf(p, "in%d[i]%n", &li, &len) == 1 && len > 0 && li < k->nleaves && vec_leaf(k, li)) {
      kn__sb_printf(sb, "kn_v%d.%c", li, c);
      p += len;
    } else {
      kn__sb_putc(sb, *p++);
    }
  }
}

static void vec_loop(kctx *k, kn__sb *sb, const char *body) {
  kn__sb_puts(sb, "  if ((n & 3) == 0 && (((unsigned long long)");
  for (int o = 0; o < k->nroots; o++) {
    if (o) kn__sb_puts(sb, " | (unsigned long long)");
    out_name(k, sb, o);
  }
  for (int i = 0; i < k->nleaves; i++)
    if (vec_leaf(k, i)) kn__sb_printf(sb, " | (unsigned long long)in%d", i);
  kn__sb_puts(sb, ") & 15) == 0) { /* 16-byte loads and stores */\n"
                  "    for (int64_t i4 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "         i4 < n / 4;\n"
                  "         i4 += (int64_t)gridDim.x * blockDim.x) {\n");
  for (int i = 0; i < k->nleaves; i++)
    if (vec_leaf(k, i))
      kn__sb_printf(sb, "      const float4 kn_v%d = ((const float4 *)in%d)[i4];\n", i, i);
  for (int o = 0; o < k->nroots; o++) kn__sb_printf(sb, "      float4 kn_o%d;\n", o);
  static const char lanes[] = "xyzw";
  for (int c = 0; c < 4; c++) {
    kn__sb_printf(sb, "      {\n      const int64_t i = i4 * 4 + %d;\n      (void)i;\n", c);
    lane_body(k, sb, body, lanes[c]);
    for (int o = 0; o < k->nroots; o++)
      kn__sb_printf(sb, "      kn_o%d.%c = %s(v%d);\n", o, lanes[c],
                    kn__cg_st_fn(k->roots[o]->meta[0].dtype), k->roots[o]->index);
    kn__sb_puts(sb, "      }\n");
  }
  for (int o = 0; o < k->nroots; o++) {
    kn__sb_puts(sb, "      ((float4 *)");
    out_name(k, sb, o);
    kn__sb_printf(sb, ")[i4] = kn_o%d;\n", o);
  }
  kn__sb_puts(sb, "    }\n    return;\n  }\n");
}

static void pw_header(kctx *k, kn__sb *ker) {
  const kn__gnode *last = k->roots[k->nroots - 1];
  kn__sb_printf(ker, "/* kernel %d: ", last->index);
  for (int o = 0; o < k->nroots; o++) {
    if (o) kn__sb_putc(ker, ' ');
    kn__cg_put_safe(ker, k->roots[o]->name);
  }
  kn__sb_printf(ker, " (grid-stride, %s%s, %d inputs) */\nextern \"C\" __global__ void kernel%d(",
                k->flat ? "flat" : "strided", k->nroots > 1 ? ", horizontal" : "", k->nleaves,
                last->index);
  params(k, ker);
}

static kn_status pw_kernel(kn__ind_plan *p, const kn__kir_item *it, kn__sb *ker, cu_info *info) {
  kctx *k = kn__cg_kctx_new(p, 1, 0);
  if (!k) return kn__oom();
  k->it = it;
  k->shape = it->space;
  k->nroots = it->nroots;
  for (int o = 0; o < it->nroots; o++) k->roots[o] = kn__graph_node(p->g, it->roots[o]);
  kn__cg_item_leaves(k);
  for (int li = 0; li < k->nleaves; li++)
    k->alias[li] = kn__cg_inplace_output(it, k->leaves[li].slot);
  k->flat = k->shape->ndim == 0;
  if (!k->flat) {
    k->flat = true;
    for (int i = 0; i < k->nleaves; i++)
      k->flat &= kn__cg_leaf_same(k, k->leaves[i].m) || kn__cg_leaf_scalar(k->leaves[i].m);
  }
  kn__sb body, loop, grid;
  kn__sb_init(&body);
  kn__sb_init(&loop);
  kn__sb_init(&grid);
  for (int o = 0; o < k->nroots; o++) kn__cg_stmts(k, &body, k->roots[o]);
  pw_loop(k, &loop, kn__sb_cstr(&body));
  kn__cg_numel_text(k, &grid, k->shape->ndim);
  pw_header(k, ker);
  kn__sb_puts(ker, kn__sb_cstr(&loop));
  kn__sb_puts(ker, "}\n\n");
  kn_status st = kn__cg_kernel_status(k, kn__sb_failed(&body) || kn__sb_failed(&loop) ||
                                             kn__sb_failed(&grid));
  if (st == KN_OK) st = keep_info(k, &grid, info);
  if (st == KN_OK && info && vec_ok(k)) info->per_thread = 4; /* the float4 loop's threads */
  kn__sb_fini(&body);
  kn__sb_fini(&loop);
  kn__sb_fini(&grid);
  kn__cg_kctx_free(k);
  return st;
}

/* ---- reductions ---------------------------------------------------------------------- */

static const char *sfx(kn_dtype xdt) { return xdt == KN_FLOAT64 ? "f64" : "f32"; }

static bool nan_flags(const kn__red_row *r) {
  return r->shape == KN__RSHAPE_FOLD && r->nan == KN__RNAN_WINS;
}

/* Element j's offsets p<L>_<depth-1> of every leaf: the row's o<L> plus the
** reduced dims' indices (j row-major over them) times the leaf's strides. */
static void elem_offsets(kctx *k, kn__sb *sb) {
  int dims[KN_MAX_DIMS], nd = kn__cg_red_dims(k, dims), t = k->depth - 1;
  for (int li = 0; li < k->nleaves; li++) kn__sb_printf(sb, "      int64_t p%d_%d = o%d;\n", li, t, li);
  kn__sb_puts(sb, "      int64_t tj = j;\n");
  for (int q = nd - 1; q >= 0; q--) {
    kn__sb_puts(sb, "      {\n        const int64_t sz = ");
    kn__cg_sym_text(k, sb, k->shape->sizes[dims[q]]);
    kn__sb_puts(sb, ", id = tj % sz;\n        tj /= sz;\n");
    for (int li = 0; li < k->nleaves; li++) {
      kn__sb_printf(sb, "        p%d_%d += id * (", li, t);
      kn__cg_leaf_stride(k, sb, &k->leaves[li], dims[q]);
      kn__sb_puts(sb, ");\n");
    }
    kn__sb_puts(sb, "      }\n");
  }
  kn__sb_puts(sb, "      (void)tj;\n");
}

/* The statements giving the element x of reduction n at element j. */
static void red_elem(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__gnode *src = n->args[0].u.t.node;
  memset(k->done, 0, (size_t)k->p->nnodes);
  elem_offsets(k, sb);
  const char *ct = kn__ind_ctype(src->meta[n->args[0].u.t.idx].dtype);
  if (kn__cg_member(k, src)) {
    kn__cg_gstmts(k, sb, src);
    kn__sb_printf(sb, "      const %s x = v%d;\n", ct, src->index);
  } else {
    kn__sb_printf(sb, "      const %s x = ", ct);
    kn__cg_load(k, sb, kn__cg_leaf_index(k, kn__ind_value_slot(k->p, n->args[0].u.t),
                                        &src->meta[n->args[0].u.t.idx]));
    kn__sb_puts(sb, ";\n");
  }
}

/* One pass of the block over the row with row r's accumulator accID
** (xv: the element as r combines it), then the block's combine. */
static void red_pass(kctx *k, kn__sb *sb, const kn__gnode *n, const kn__red_row *r,
                     const char *xv) {
  kn_dtype xdt = n->args[0].u.t.node->meta[n->args[0].u.t.idx].dtype;
  const char *A = r->acc == KN__RACC_WIDE ? "double" : kn__ind_ctype(xdt), *s = sfx(xdt);
  int id = n->index;
  kn__sb_printf(sb, "    %s acc%d = %s;\n", A, id, r->init_text);
  if (r->shape == KN__RSHAPE_INDEX) kn__sb_printf(sb, "    int64_t iacc%d = 0;\n", id);
  if (nan_flags(r)) kn__sb_printf(sb, "    int nan%d = 0;\n", id);
  kn__sb_puts(sb, "    for (int64_t j = threadIdx.x; j < red; j += blockDim.x) {\n");
  k->inner = true;
  red_elem(k, sb, n);
  k->inner = false;
  if (r->shape == KN__RSHAPE_INDEX)
    kn__sb_printf(sb, "      const int b_ = kn_red_better_%s_%s(acc%d, x);\n"
                  "      iacc%d = b_ ? j : iacc%d;\n      acc%d = b_ ? x : acc%d;\n", r->kname, s,
                  id, id, id, id, id);
  else
    kn__sb_printf(sb, "      acc%d = kn_red_comb_%s_%s(acc%d, %s);\n", id, r->kname, s, id, xv);
  if (nan_flags(r)) kn__sb_printf(sb, "      nan%d |= x != x;\n", id);
  kn__sb_puts(sb, "    }\n");
  if (r->shape == KN__RSHAPE_INDEX) {
    kn__sb_printf(sb, "    kn_block_arg(acc%d, iacc%d, [](%s a, %s b) { return "
                  "kn_red_better_%s_%s(a, b); });\n", id, id, A, A, r->kname, s);
    return;
  }
  kn__sb_printf(sb, "    acc%d = kn_block_fold(acc%d, (%s)%s, [](%s a, %s b) { return "
                "kn_red_comb_%s_%s(a, b); });\n", id, id, A, r->init_text, A, A, r->kname, s);
  if (nan_flags(r))
    kn__sb_printf(sb, "    if (kn_block_fold(nan%d, 0, [](int a, int b) { return a | b; })) "
                  "acc%d = NAN;\n", id, id);
}

static void red_member(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  kn__sb_puts(sb, "    /* ");
  kn__cg_node_comment(sb, n);
  kn_dtype xdt = n->args[0].u.t.node->meta[n->args[0].u.t.idx].dtype;
  char xv[96];
  if (in->red->shape == KN__RSHAPE_CENTERED) {
    kn__sb_printf(sb, "    double ctr%d;\n    {\n", n->index);
    kn__ind_red_xv(xv, sizeof xv, in, n->index, xdt, 0);
    red_pass(k, sb, n, kn__ind_red_pass_row(in, 0), xv);
    kn__ind_red_center(sb, in, n->index);
    kn__sb_puts(sb, "    }\n");
  }
  kn__ind_red_xv(xv, sizeof xv, in, n->index, xdt, 1);
  red_pass(k, sb, n, in->red, xv);
  kn__ind_red_result(sb, in, n->index, n->meta[0].dtype);
}

static void row_member(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (in->kind == KN__IND_RED) red_member(k, sb, n);
  else {
    kn__cg_hoist_loads(k, sb, n);
    kn__cg_value_open(sb, "    ", n);
    kn__cg_expand(k, sb, n);
    k->hoisted = NULL;
    kn__sb_puts(sb, "));  /* ");
    kn__cg_node_comment(sb, n);
  }
  int o = kn__cg_out_index(k, n->index);
  if (o >= 0)
    kn__sb_printf(sb, "    if (threadIdx.x == 0) out%d[o] = %s(v%d);\n", o,
                  kn__cg_st_fn(n->meta[0].dtype), n->index);
}

/* The per-element members read outside the group: a last pass storing them. */
static void store_pass(kctx *k, kn__sb *sb) {
  bool any = false;
  for (int o = 0; o < k->nouts; o++) any |= !k->p->nodes[k->outs[o]].row;
  if (!any) return;
  memset(k->done, 0, (size_t)k->p->nnodes);
  kn__sb_puts(sb, "    for (int64_t j = threadIdx.x; j < red; j += blockDim.x) {\n");
  k->inner = true;
  elem_offsets(k, sb);
  for (int o = 0; o < k->nouts; o++)
    if (!k->p->nodes[k->outs[o]].row) kn__cg_gstmts(k, sb, kn__graph_node(k->p->g, k->outs[o]));
  for (int o = 0; o < k->nouts; o++)
    if (!k->p->nodes[k->outs[o]].row)
      kn__sb_printf(sb, "      out%d[p%d_%d] = %s(v%d);\n", o, kn__cg_out_leaf(k, o), k->depth - 1,
                    kn__cg_st_fn(kn__graph_node(k->p->g, k->outs[o])->meta[0].dtype), k->outs[o]);
  k->inner = false;
  kn__sb_puts(sb, "    }\n");
}

static void group_body(kctx *k, kn__sb *sb) {
  kn__sb_puts(sb, "  const int64_t outer = ");
  kn__cg_size_product(k, sb, false);
  kn__sb_puts(sb, ", red = ");
  kn__cg_size_product(k, sb, true);
  kn__sb_puts(sb, ";\n  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {\n");
  kn__sb rows;
  kn__sb_init(&rows);
  for (int i = 0; i < k->g->nmembers; i++) {
    const kn__gnode *n = kn__graph_node(k->p->g, k->g->members[i]);
    if (k->p->nodes[n->index].row) row_member(k, &rows, n);
  }
  store_pass(k, &rows);
  kn__cg_offsets_begin(k, sb, "o");
  for (int d = k->shape->ndim - 1; d >= 0; d--)
    if (!((k->g->mask >> d) & 1)) kn__cg_offsets_dim(k, sb, d);
  kn__sb_puts(sb, "    (void)t;\n");
  kn__sb_puts(sb, kn__sb_cstr(&rows));
  kn__sb_puts(sb, "  }\n");
  if (kn__sb_failed(&rows)) k->failed = true;
  kn__sb_fini(&rows);
}

static void group_header(kctx *k, int root, kn__sb *ker) {
  const kn__gnode *rn = kn__graph_node(k->p->g, k->g->members[0]);
  kn__sb_printf(ker, "/* kernel %d: group of ", root);
  kn__cg_put_safe(ker, rn->name);
  kn__sb_printf(ker, " (block per row, %d nodes, %d outputs) */\nextern \"C\" __global__ void "
                "kernel%d(", k->g->nmembers, k->nouts, root);
  params(k, ker);
}

/* ---- split reductions -------------------------------------------------------------- */
/* A few long rows (a loss's sum over every element) would leave the GPU to
** a few blocks. A group of one fold reduction (sum, mean, prod: no NaN flag,
** no index, no centring) that is its only output, with constant sizes of at
** most KN__CU_SPLIT_ROWS rows of at least KN__CU_SPLIT_MIN elements, splits
** each row into chunks, a block each. When a size is symbolic (an eager
** op's program serves every size of its pattern), the kernel and its
** launch compute the chunk count from the sizes with the same rule (1 for
** rows below KN__CU_SPLIT_MIN or more than KN__CU_SPLIT_ROWS rows: then a
** block folds a whole row and stores it), and the module's arrays hold the
** most rows and chunks. A block folds its chunk into a slot of
** a device array of the module, and the last block of a row to finish (an
** atomic count; __threadfence orders the slots before it) folds the row's
** slots in index order, finalizes and stores. Same sizes, same order: the
** same bits on every run. One kernel runs at a time on kiln's stream, so
** the module's arrays are the kernel's own; the last block resets the
** count for the next launch. */
#define KN__CU_SPLIT_ROWS 64
#define KN__CU_SPLIT_MIN 32768
#define KN__CU_SPLIT_CHUNK 2048

#define KN__CU_SPLIT_MAX 1024
#define KN__CU_SPLIT_RUNTIME (-1)

/* The number of chunks a row of k's group is split into: a constant > 1,
** KN__CU_SPLIT_RUNTIME (a symbolic row length: computed at run time), or 0
** (no split). */
static int64_t split_chunks(kctx *k) {
  const kn__ind_group *g = k->g;
  if (g->nmembers != 1 || k->nouts != 1) return 0;
  const kn__gnode *n = kn__graph_node(k->p->g, g->members[0]);
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (in->kind != KN__IND_RED || !in->row || in->red->shape != KN__RSHAPE_FOLD ||
      nan_flags(in->red) || kn__cg_out_index(k, n->index) < 0)
    return 0;
  int64_t outer = 1, red = 1;
  bool sym = false;
  for (int d = 0; d < k->shape->ndim; d++) {
    bool reduced = (g->mask >> d) & 1;
    if (!kn__sym_is_const(k->shape->sizes[d])) sym = true;
    else if (reduced) red *= k->shape->sizes[d].c;
    else outer *= k->shape->sizes[d].c;
  }
  if (outer > KN__CU_SPLIT_ROWS) return 0;
  if (sym) return KN__CU_SPLIT_RUNTIME;
  if (red < KN__CU_SPLIT_MIN) return 0;
  int64_t c = red / KN__CU_SPLIT_CHUNK;
  return c > KN__CU_SPLIT_MAX ? KN__CU_SPLIT_MAX : c;
}

/* The product of k's reduced (or kept) sizes, parenthesised. */
static void size_paren(kctx *k, kn__sb *sb, bool reduced) {
  kn__sb_putc(sb, '(');
  kn__cg_size_product(k, sb, reduced);
  kn__sb_putc(sb, ')');
}

/* The chunk count as C text (the kernel's and the launch's): the constant,
** or the rule of split_chunks over the sizes:
** (rows <= ROWS && len >= MIN ? (len / CHUNK < MAX ? len / CHUNK : MAX) : 1). */
static void chunks_text(kctx *k, int64_t chunks, kn__sb *sb) {
  if (chunks != KN__CU_SPLIT_RUNTIME) {
    kn__sb_printf(sb, "INT64_C(%lld)", (long long)chunks);
    return;
  }
  kn__sb_putc(sb, '(');
  size_paren(k, sb, false);
  kn__sb_printf(sb, " <= %d && ", KN__CU_SPLIT_ROWS);
  size_paren(k, sb, true);
  kn__sb_printf(sb, " >= %d ? (", KN__CU_SPLIT_MIN);
  size_paren(k, sb, true);
  kn__sb_printf(sb, " / %d < %d ? ", KN__CU_SPLIT_CHUNK, KN__CU_SPLIT_MAX);
  size_paren(k, sb, true);
  kn__sb_printf(sb, " / %d : %d) : 1)", KN__CU_SPLIT_CHUNK, KN__CU_SPLIT_MAX);
}

/* What the split kernel's parts print of its one reduction. */
typedef struct split_red {
  const kn__gnode *n;
  const kn__ind_node *in;
  const kn__red_row *r;
  const char *A, *s; /* the accumulator's C type, the combine's suffix */
  int id;
  char comb[160];    /* the combine as a lambda */
} split_red;

static void split_red_of(kctx *k, split_red *q) {
  q->n = kn__graph_node(k->p->g, k->g->members[0]);
  q->in = &k->p->nodes[q->n->index];
  q->r = q->in->red;
  kn_dtype xdt = q->n->args[0].u.t.node->meta[q->n->args[0].u.t.idx].dtype;
  q->A = q->r->acc == KN__RACC_WIDE ? "double" : kn__ind_ctype(xdt);
  q->s = sfx(xdt);
  q->id = q->n->index;
  snprintf(q->comb, sizeof q->comb, "[](%s a, %s b) { return kn_red_comb_%s_%s(a, b); }", q->A,
           q->A, q->r->kname, q->s);
}

/* A row of one chunk (a run-time count: a short row, or more rows than the
** split serves): the block's fold is the row's result. */
static void split_single(kctx *k, const split_red *q, kn__sb *sb) {
  kn__sb_puts(sb, "    if (chunks == 1) { /* one block folded the whole row */\n");
  kn__ind_red_result(sb, q->in, q->id, q->n->meta[0].dtype);
  kn__sb_printf(sb, "      if (threadIdx.x == 0) out%d[o] = %s(v%d);\n      __syncthreads();\n"
                "      continue;\n    }\n", kn__cg_out_index(k, q->id),
                kn__cg_st_fn(q->n->meta[0].dtype), q->id);
}

/* The last block of a row: the row's chunk results in index order, the
** result, the store and the count reset. */
static void split_tail(kctx *k, int root, const split_red *q, kn__sb *sb) {
  int id = q->id;
  kn__sb_printf(sb, "    if (threadIdx.x == 0) {\n      kn_part%d[b] = acc%d;\n"
                "      __threadfence();\n      kn_last = atomicAdd(&kn_count%d[o], 1u) == "
                "(unsigned)(chunks - 1);\n    }\n    __syncthreads();\n", root, id, root);
  kn__sb_printf(sb, "    if (kn_last) { /* the row's last block: its chunks in order */\n"
                "      __threadfence();\n      acc%d = %s;\n"
                "      for (int64_t q = threadIdx.x; q < chunks; q += blockDim.x)\n"
                "        acc%d = kn_red_comb_%s_%s(acc%d, ((volatile %s *)kn_part%d)[o * chunks + q]);\n"
                "      acc%d = kn_block_fold(acc%d, (%s)%s, %s);\n", id, q->r->init_text, id,
                q->r->kname, q->s, id, q->A, root, id, id, q->A, q->r->init_text, q->comb);
  kn__ind_red_result(sb, q->in, id, q->n->meta[0].dtype);
  kn__sb_printf(sb, "      if (threadIdx.x == 0) {\n        out%d[o] = %s(v%d);\n"
                "        kn_count%d[o] = 0;\n      }\n    }\n    __syncthreads();\n  }\n",
                kn__cg_out_index(k, id), kn__cg_st_fn(q->n->meta[0].dtype), id, root);
}

/* The rows the module's arrays hold: the constant row count, or (symbolic)
** the most a run-time count splits. */
static int64_t split_rows(const kctx *k) {
  int64_t rows = 1;
  for (int d = 0; d < k->shape->ndim; d++)
    if (!((k->g->mask >> d) & 1)) {
      if (!kn__sym_is_const(k->shape->sizes[d])) return KN__CU_SPLIT_ROWS;
      rows *= k->shape->sizes[d].c;
    }
  return rows;
}

/* The globals of the split kernel root (before it) and its body. */
static void split_body(kctx *k, int root, int64_t chunks, kn__sb *glob, kn__sb *sb) {
  split_red q;
  split_red_of(k, &q);
  int id = q.id;
  bool rt = chunks == KN__CU_SPLIT_RUNTIME;
  int64_t rows = split_rows(k);
  kn__sb_printf(glob, "__device__ %s kn_part%d[%lld];\n__device__ unsigned kn_count%d[%lld];\n\n",
                q.A, root, (long long)(rows * (rt ? KN__CU_SPLIT_MAX : chunks)), root,
                (long long)rows);
  char xv[96];
  kn__ind_red_xv(xv, sizeof xv, q.in, id, q.n->args[0].u.t.node->meta[q.n->args[0].u.t.idx].dtype, 1);
  kn__sb_puts(sb, "  const int64_t outer = ");
  kn__cg_size_product(k, sb, false);
  kn__sb_puts(sb, ", red = ");
  kn__cg_size_product(k, sb, true);
  kn__sb_puts(sb, ", chunks = ");
  chunks_text(k, chunks, sb);
  kn__sb_puts(sb, ", chunk = (red + chunks - 1) / chunks;\n"
                  "  __shared__ int kn_last;\n"
                  "  for (int64_t b = blockIdx.x; b < outer * chunks; b += gridDim.x) {\n"
                  "    const int64_t o = b / chunks, c = b % chunks;\n");
  kn__cg_offsets_begin(k, sb, "o");
  for (int d = k->shape->ndim - 1; d >= 0; d--)
    if (!((k->g->mask >> d) & 1)) kn__cg_offsets_dim(k, sb, d);
  kn__sb_puts(sb, "    (void)t;\n    /* ");
  kn__cg_node_comment(sb, q.n);
  kn__sb_printf(sb, "    %s acc%d = %s;\n", q.A, id, q.r->init_text);
  kn__sb_puts(sb, "    for (int64_t j = c * chunk + threadIdx.x; j < red && j < (c + 1) * chunk;"
                  " j += blockDim.x) {\n");
  k->inner = true;
  red_elem(k, sb, q.n);
  k->inner = false;
  kn__sb_printf(sb, "      acc%d = kn_red_comb_%s_%s(acc%d, %s);\n    }\n", id, q.r->kname, q.s,
                id, xv);
  kn__sb_printf(sb, "    acc%d = kn_block_fold(acc%d, (%s)%s, %s);\n", id, id, q.A,
                q.r->init_text, q.comb);
  if (rt) split_single(k, &q, sb);
  split_tail(k, root, &q, sb);
}

static kn_status split_kernel(kctx *k, int64_t chunks, kn__sb *ker, cu_info *info) {
  const kn__ind_group *g = k->g;
  kn__sb body, glob, grid;
  kn__sb_init(&body);
  kn__sb_init(&glob);
  kn__sb_init(&grid);
  split_body(k, g->root, chunks, &glob, &body);
  kn__cg_size_product(k, &grid, false);
  kn__sb_puts(&grid, " * ");
  chunks_text(k, chunks, &grid);
  kn__sb_puts(ker, kn__sb_cstr(&glob));
  kn__sb_printf(ker, "/* kernel %d: ", g->root);
  kn__cg_put_safe(ker, kn__graph_node(k->p->g, g->members[0])->name);
  if (chunks == KN__CU_SPLIT_RUNTIME)
    kn__sb_printf(ker, " split (up to %d blocks per row by its length, the last one folds "
                  "them) */\nextern \"C\" __global__ void kernel%d(", KN__CU_SPLIT_MAX, g->root);
  else
    kn__sb_printf(ker, " split (%lld blocks per row, the last one folds them) */\n"
                  "extern \"C\" __global__ void kernel%d(", (long long)chunks, g->root);
  params(k, ker);
  kn__sb_puts(ker, kn__sb_cstr(&body));
  kn__sb_puts(ker, "}\n\n");
  kn_status st = kn__cg_kernel_status(k, kn__sb_failed(&body) || kn__sb_failed(&glob) ||
                                             kn__sb_failed(&grid));
  if (st == KN_OK) st = keep_info(k, &grid, info);
  kn__sb_fini(&body);
  kn__sb_fini(&glob);
  kn__sb_fini(&grid);
  return st;
}

static kn_status group_kernel(kn__ind_plan *p, const kn__kir_item *it, kn__sb *ker,
                              cu_info *info) {
  kctx *k = kn__cg_group_kctx(p, NULL, it); /* no stash: every pass recomputes its producers */
  if (!k) return kn__oom();
  int64_t chunks = split_chunks(k);
  if (chunks > 1 || chunks == KN__CU_SPLIT_RUNTIME) {
    kn_status st = split_kernel(k, chunks, ker, info);
    kn__cg_kctx_free(k);
    return st;
  }
  const kn__ind_group *g = k->g;
  kn__sb body, grid;
  kn__sb_init(&body);
  kn__sb_init(&grid);
  group_body(k, &body);
  kn__cg_size_product(k, &grid, false);
  group_header(k, g->root, ker);
  kn__sb_puts(ker, kn__sb_cstr(&body));
  kn__sb_puts(ker, "}\n\n");
  kn_status st = kn__cg_kernel_status(k, kn__sb_failed(&body) || kn__sb_failed(&grid));
  if (st == KN_OK) st = keep_info(k, &grid, info);
  kn__sb_fini(&body);
  kn__sb_fini(&grid);
  kn__cg_kctx_free(k);
  return st;
}

kn_status kn__cu_kernel(kn__ind_plan *p, const kn__kir_item *it, kn__sb *ker, cu_info *info) {
  if (info) memset(info, 0, sizeof *info);
  if (it->kind == KN__KIR_POINTWISE) return pw_kernel(p, it, ker, info);
  if (it->kind == KN__KIR_REDUCTION) return group_kernel(p, it, ker, info);
  return KN_OK;
}
