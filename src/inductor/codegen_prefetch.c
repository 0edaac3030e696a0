/*
** inductor/codegen_prefetch.c: a reduction group's software prefetch of
** the rows two ahead (C targets' printer, see cgen.h and docs/INDUCTOR.md,
** "Code generation"): the inputs read along whole contiguous rows, and the
** per-element outputs written so, fetched a block at a time by the row's
** first pass made in blocks, or at the row's start when it makes none.
*/
#include <stdio.h>
#include <string.h>

#include "inductor/cgen.h"

/* Whether text is a stride of one element (the printer's spelling). */
static bool stride_is_one(const char *text) {
  return !strcmp(text, "INT64_C(1)") || !strcmp(text, "1");
}

/* Whether leaf li is read along contiguous rows that move with kept dim d
** (its row stride along d into out): an input's, or with outputs also a
** per-element output's (contiguous over the space). */
static bool leaf_rows(kctx *k, int li, int d, bool outputs, kn__sb *out) {
  if ((k->leaves[li].slot < 0 && !outputs) || kn__cg_leaf_scalar(k->leaves[li].m)) return false;
  kn__sb in;
  kn__sb_init(&in);
  kn__cg_leaf_stride(k, &in, &k->leaves[li], d + 1);
  kn__cg_leaf_stride(k, out, &k->leaves[li], d);
  bool ok = stride_is_one(kn__sb_cstr(&in)) && strcmp(kn__sb_cstr(out), "0");
  if (kn__sb_failed(&in) || kn__sb_failed(out)) k->failed = true;
  kn__sb_fini(&in);
  return ok;
}

/* The pointer leaf li reads or writes: in<L>, or out<O> for an output. */
static void leaf_base(const kctx *k, int li, char *buf, size_t len) {
  int slot = k->leaves[li].slot;
  if (slot >= 0) snprintf(buf, len, "in%d", li);
  else snprintf(buf, len, "out%d", -1 - slot);
}

/* Does the group prefetch (one reduced dim, the last, of a space of 2 or
** more dims)? */
static bool group_prefetches(const kctx *k) {
  int dims[KN_MAX_DIMS], nd = k->shape->ndim;
  return k->t && k->t->vector_abi && nd >= 2 && kn__cg_red_dims(k, dims) == 1 && dims[0] == nd - 1;
}

/* One leaf's prefetch of the row two ahead along the innermost kept dim d
** (in bounds: its index plus 2 stays below its size), when the leaf is read
** (or, an output, written) along contiguous rows that move with d: pfL
** says whether to; at the row's start the whole row's lines of an input,
** unless a pass's blocks fetch them (pf_blocks, kn__cg_block_prefetch). */
static void leaf_prefetch(kctx *k, kn__sb *sb, int li, int d) {
  kn__sb out;
  char p[24];
  kn__sb_init(&out);
  leaf_base(k, li, p, sizeof p);
  if (leaf_rows(k, li, d, li < k->pf_blocks, &out)) {
    kn__sb_printf(sb, "    const int pf%d = o %% (", li);
    kn__cg_sym_text(k, sb, k->shape->sizes[d]);
    kn__sb_puts(sb, ") + 2 < (");
    kn__cg_sym_text(k, sb, k->shape->sizes[d]);
    kn__sb_printf(sb, ") && red * (int64_t)sizeof *%s <= KN_PF_ROW;\n    (void)pf%d;\n", p, li);
    if (li >= k->pf_blocks)
      kn__sb_printf(sb, "    if (pf%d)\n      for (int64_t q = 0; q < red; q += 64 / (int64_t)sizeof *%s)\n"
                        "        __builtin_prefetch(%s + o%d + 2 * (%s) + q);\n",
                    li, p, p, li, kn__sb_cstr(&out));
  }
  if (kn__sb_failed(&out)) k->failed = true;
  kn__sb_fini(&out);
}

/* Prefetch row o + 2 of every input read along whole contiguous rows (one
** reduced dim, the last, element stride 1), rows of at most KN_PF_ROW
** bytes. A group makes several passes over a row (max; exp and sum; the
** store), and while one computes no load runs ahead of it, so the hardware
** prefetcher leaves the memory idle; fetched two rows ahead, the row is in
** cache when its first pass reads it (Zen 3, rows of 1024 floats: softmax
** 7.7 -> 5.7 ms over 4096 rows). The lines are fetched by the first pass
** made in blocks (a sum's, or the store pass), a block's worth after each
** block (kn__cg_block_prefetch): issued all at once at the row's start, 64 of them
** for a row of 1024 floats filled the core's miss buffers and the
** prefetch instructions stalled the row's first pass (cross_entropy
** forward over 4096 rows of 1024 floats, one thread: 18% less time). */
void kn__cg_group_prefetch(kctx *k, kn__sb *sb) {
  if (!group_prefetches(k)) return;
  for (int li = 0; li < k->nleaves; li++) leaf_prefetch(k, sb, li, k->shape->ndim - 2);
}

/* The prefetches of the block [jb, jb + bn) of row o + 2, in the first
** pass made in blocks (see group_prefetch): the inputs' lines, and the
** per-element outputs' for writing (a row's first stores then find their
** lines in cache instead of each waiting for its line's fetch; softmax over
** 4096 rows of 1024 floats, one thread: 6% less time). */
void kn__cg_block_prefetch(kctx *k, kn__sb *sb) {
  if (k->pf_blocks > 0 || !group_prefetches(k)) return;
  k->pf_blocks = k->nleaves;
  for (int li = 0; li < k->nleaves; li++) {
    kn__sb out;
    char p[24];
    kn__sb_init(&out);
    leaf_base(k, li, p, sizeof p);
    if (li != k->pf_call - 1 && leaf_rows(k, li, k->shape->ndim - 2, true, &out))
      kn__sb_printf(sb, "      if (pf%d)\n        for (int64_t q = 0; q < bn; q += 64 / (int64_t)sizeof *%s)\n"
                        "          __builtin_prefetch(%s + o%d + 2 * (%s) + jb + q%s);\n",
                    li, p, p, li, kn__sb_cstr(&out), k->leaves[li].slot < 0 ? ", 1" : "");
    if (kn__sb_failed(&out)) k->failed = true;
    kn__sb_fini(&out);
  }
}

void kn__cg_call_prefetch(kctx *k, int li, kn__sb *sb) {
  kn__sb out;
  char p[24];
  kn__sb_init(&out);
  leaf_base(k, li, p, sizeof p);
  if (k->pf_blocks == 0 && k->leaves[li].slot >= 0 && group_prefetches(k) &&
      leaf_rows(k, li, k->shape->ndim - 2, false, &out)) {
    kn__sb_printf(sb, "pf%d ? %s + o%d + 2 * (%s) + jb : (const float *)0", li, p, li,
                  kn__sb_cstr(&out));
    k->pf_call = li + 1;
  } else {
    kn__sb_puts(sb, "(const float *)0");
  }
  if (kn__sb_failed(&out)) k->failed = true;
  kn__sb_fini(&out);
}
