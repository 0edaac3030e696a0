/*
** inductor/codegen_call.c: the C targets' program text around the kernels
** (codegen.c prints the kernels): the prelude (includes, the runtime
** table type kn_rt, OpenMP's team helpers, the float16/bfloat16 bit
** conversions) and the entry point call(), which runs the kernel IR's
** items in order with the memory plan's buffer events.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/cgen.h"

static const char prelude[] =
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "#include <tgmath.h>\n\n"
    "#define KN_BLOCK 4096\n"
    "#define KN_VB 256 /* elements of a vector-math block (codegen_vmblock.c) */\n"
    "#define KN_PF_ROW 16384 /* longest row (bytes) a row kernel prefetches */\n\n"
    "typedef struct kn_rt {\n"
    "  int (*ext)(void *ctx, int step);\n"
    "  int (*alloc)(void *ctx, int slot, void **p);\n"
    "  void *(*ptr)(void *ctx, int slot);\n"
    "  void (*release)(void *ctx, int slot);\n"
    "  const void *(*vmath)(void);\n"
    "  int (*reuse)(void *ctx, int from, int to, void **p);\n"
    "  void (*launch)(void);\n"
    "  int (*ext_epi)(void *ctx, int step, void (*epi)(void *const *a, void *g, int64_t r0,\n"
    "                 int64_t r1), void *const *a, void *into);\n"
    "} kn_rt;\n\n"
    "/* compiled as several translation units (KN_TU_PART, toolchain.c), the\n"
    "** file's definitions shared by all of them are in the one of KN_TU_MAIN */\n"
    "#if !defined(KN_TU_PART) || defined(KN_TU_MAIN)\n"
    "#define KN_TU_DEFS 1\n"
    "#else\n"
    "#define KN_TU_DEFS 0\n"
    "#endif\n"
    "#define KN_HID __attribute__((visibility(\"hidden\")))\n\n"
    "int kn_ind_abi(void);\n"
    "#if KN_TU_DEFS\n"
    "int kn_ind_abi(void) { return 5; }\n"
    "#endif\n\n";

/* The OpenMP targets' team sizes (run_parts): a kernel of `work` elements
** in `units` pieces (elements, rows) takes one thread per grain elements,
** at most one per piece and the threads set (kn_set_num_threads, which sets
** OpenMP's count on every calling thread); under two it runs on the calling
** thread and calls nothing of OpenMP's. The grain is KN_GRAIN for kernels
** that compute (vector math, reductions), KN_GRAIN_MEM for those that only
** move data with a few operations an element; ops/threads.h's KN__GRAIN
** and KN__GRAIN_MEM, the eager kernels' grains, are the same values and
** docs/KERNELS.md, "Threads", has the measurements behind them. A team's
** region closes as the eager kernels' (ops/threads.h, kn__par_join): thread
** 0 waits for the others spinning, while all of them have started and for
** at most as long as its own share took, instead of sleeping at the
** closing barrier under the passive wait policy (a second wake-up per
** region); kn_join_wait is kn__par_wait_rule. The team's pieces go in
** parts taken as threads finish; kn_parts is kn__par_parts (KN__PAR_PARTS
** is its 8). */
static const char omp_prelude[] =
    "#define KN_GRAIN 32768\n"
    "#define KN_GRAIN_MEM 131072\n"
    "#include <stdatomic.h>\n"
    "int omp_get_max_threads(void);\n"
    "int omp_get_thread_num(void);\n"
    "int omp_get_num_threads(void);\n"
    "double omp_get_wtime(void);\n"
    "typedef struct kn_join { _Atomic int started, arrived; double t0; } kn_join;\n"
    "static inline void kn_join_enter(kn_join *j) {\n"
    "  if (omp_get_thread_num() == 0) j->t0 = omp_get_wtime();\n"
    "  else atomic_fetch_add_explicit(&j->started, 1, memory_order_relaxed);\n"
    "}\n"
    "static inline bool kn_join_wait(int nt, int started, int arrived, double part, double waited) {\n"
    "  return arrived < nt - 1 && started == nt - 1 && waited <= part;\n"
    "}\n"
    "static inline void kn_join_close(kn_join *j) {\n"
    "  if (omp_get_thread_num() != 0) {\n"
    "    atomic_fetch_add_explicit(&j->arrived, 1, memory_order_release);\n"
    "    return;\n"
    "  }\n"
    "  const int nt = omp_get_num_threads();\n"
    "  const double t = omp_get_wtime(), part = t - j->t0;\n"
    "  while (kn_join_wait(nt, atomic_load_explicit(&j->started, memory_order_relaxed),\n"
    "                      atomic_load_explicit(&j->arrived, memory_order_acquire), part,\n"
    "                      omp_get_wtime() - t)) {\n"
    "#if defined(__x86_64__) || defined(__i386__)\n"
    "    for (int k = 0; k < 32; k++) __builtin_ia32_pause();\n"
    "#endif\n"
    "  }\n"
    "}\n"
    "static inline int kn_team(int64_t work, int64_t units, int64_t grain) {\n"
    "  int64_t t = work / grain;\n"
    "  if (t > units) t = units;\n"
    "  if (t < 2) return 1;\n"
    "  const int m = omp_get_max_threads();\n"
    "  return t < m ? (int)t : m;\n"
    "}\n"
    "/* parts of a loop of units pieces for a team of nt: 8 a thread, each at least\n"
    "** a quarter grain of work and one piece, taken as threads finish\n"
    "** (ops/threads.h, kn__par_parts) */\n"
    "static inline int kn_parts(int nt, int64_t work, int64_t units, int64_t grain) {\n"
    "  int64_t p = (int64_t)nt * 8, q = work / (grain / 4 > 0 ? grain / 4 : 1);\n"
    "  if (p > q) p = q;\n"
    "  if (p > units) p = units;\n"
    "  return p < nt ? nt : (int)p;\n"
    "}\n"
    "/* the first piece of share i of n pieces over nt threads (multiples of align) */\n"
    "static inline int64_t kn_share(int64_t n, int i, int nt, int64_t align) {\n"
    "  int64_t c = (n + nt - 1) / nt;\n"
    "  c = (c + align - 1) / align * align;\n"
    "  return (int64_t)i * c < n ? (int64_t)i * c : n;\n"
    "}\n\n";

/* float16 and bfloat16 elements are their bits (uint16_t); values are float:
** a load widens exactly, a node's value is rounded to its dtype (as the eager
** kernel rounds every op's result: compiled equals eager), a store takes the
** bits. The rounding is the eager conversions' (tensor/dtype.c, ops/cvt16.h):
** nearest even, float16 overflow gives infinity, subnormals are kept; a NaN
** is made quiet and keeps its upper payload bits, as the x86 instructions
** (F16C, AVX-512) that the eager tables use on such CPUs do (tensor/dtype.c's
** scalar float16 conversions give another quiet NaN). */
static const char half_bits[] =
    "static inline uint32_t kn_fbits(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }\n"
    "static inline float kn_bitsf(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }\n";
const char kn__cg_half_prelude[] =
    "/* c ? a : b as masks: no branch for gcc to sink a float op into (it does not\n"
    "** speculate those, and the loop would not vectorise) */\n"
    "static inline uint32_t kn_sel(bool c, uint32_t a, uint32_t b) { return b ^ ((a ^ b) & (0u - (uint32_t)c)); }\n"
    "static inline float kn_ld_bf16(uint16_t h) { return kn_bitsf((uint32_t)h << 16); }\n"
    "static inline uint16_t kn_st_bf16(float f) {\n"
    "  uint32_t x = kn_fbits(f), r = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;\n"
    "  return (uint16_t)kn_sel((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x40, r);\n"
    "}\n"
    "static inline float kn_ld_f16(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = h & 0x7c00u, m = h & 0x3ffu;\n"
    "  uint32_t sub = kn_fbits((float)m * 0x1p-24f); /* zero and subnormals: exact */\n"
    "  uint32_t nrm = ((uint32_t)(h & 0x7fff) << 13) + (112u << 23);\n"
    "  uint32_t inf = 0x7f800000u | (m << 13) | kn_sel(m != 0, 0x400000u, 0);\n"
    "  return kn_bitsf(sign | kn_sel(e == 0x7c00u, inf, kn_sel(e == 0, sub, nrm)));\n"
    "}\n"
    "static inline uint16_t kn_st_f16(float f) {\n"
    "  uint32_t x = kn_fbits(f), ax = x & 0x7fffffffu, sign = (x >> 16) & 0x8000u;\n"
    "  /* below 2^-14: |f| + 0.5 rounds |f| to units of 2^-24, nearest even */\n"
    "  uint32_t sub = kn_fbits(kn_bitsf(ax) + 0.5f) - 0x3f000000u;\n"
    "  uint32_t nrm = (ax - (112u << 23) + 0xfffu + ((ax >> 13) & 1)) >> 13; /* 65520 up: inf */\n"
    "  uint32_t big = kn_sel(ax > 0x7f800000u, 0x7e00u | ((ax >> 13) & 0x3ffu), 0x7c00u);\n"
    "  return (uint16_t)(sign | kn_sel(ax >= 0x47800000u, big, kn_sel(ax < 0x38800000u, sub, nrm)));\n"
    "}\n"
    "static inline float kn_rnd_bf16(float f) { return kn_ld_bf16(kn_st_bf16(f)); }\n"
    "static inline float kn_rnd_f16(float f) { return kn_ld_f16(kn_st_f16(f)); }\n\n";

/* ---- the entry point -------------------------------------------------------------- */
/* call(): the items' launches in order, each with the memory plan's buffer
** events: outputs taking over a buffer (in place over a read, or a dead
** buffer of the same sizes and dtype: rt->reuse), dead buffers released
** (rt->release), new buffers (rt->alloc). */
void kn__cg_releases(kn__sb *call, const int *slots, int n) {
  for (int k = 0; k < n; k++) kn__sb_printf(call, "  rt->release(ctx, %d);\n", slots[k]);
}

/* "&o" or "&o[w]": where output w's buffer pointer goes. */
static const char *out_target(char *buf, size_t n, bool single, int w) {
  if (single) snprintf(buf, n, "&o");
  else snprintf(buf, n, "&o[%d]", w);
  return buf;
}

/* The buffers of a kernel launch: in-place takes (in read order), reused
** buffers, releases, then new buffers (in output order). */
void kn__cg_launch_buffers(const kn__kir_item *it, bool single, kn__sb *call) {
  char tg[32];
  for (int r = 0; r < it->nreads; r++) {
    int w = kn__cg_inplace_output(it, it->reads[r].slot);
    if (w >= 0 && it->kind == KN__KIR_EPILOGUE && it->reads[r].slot == it->gemm)
      kn__sb_printf(call, "    if (rt->alloc(ctx, %d, %s)) return -1;  /* the GEMM's output: slot "
                    "%d is computed in it */\n", it->writes[w].slot,
                    out_target(tg, sizeof tg, single, w), it->gemm);
    else if (w >= 0)
      kn__sb_printf(call, "    if (rt->reuse(ctx, %d, %d, %s)) return -1;  /* in place over slot "
                    "%d */\n", it->reads[r].slot, it->writes[w].slot,
                    out_target(tg, sizeof tg, single, w), it->reads[r].slot);
  }
  for (int w = 0; w < it->nwrites; w++)
    if (!it->writes[w].inplace && it->writes[w].from >= 0)
      kn__sb_printf(call, "    if (rt->reuse(ctx, %d, %d, %s)) return -1;  /* slot %d's buffer */\n",
                    it->writes[w].from, it->writes[w].slot, out_target(tg, sizeof tg, single, w),
                    it->writes[w].from);
  kn__cg_releases(call, it->free_before, it->nfree_before);
  for (int w = 0; w < it->nwrites; w++)
    if (it->writes[w].from < 0)
      kn__sb_printf(call, "    if (rt->alloc(ctx, %d, %s)) return -1;\n", it->writes[w].slot,
                    out_target(tg, sizeof tg, single, w));
}

/* The kernel's call: outputs, then the reads not written in place. */
static void launch_call(const kn__kir *ir, const kn__kir_item *it, bool single, kn__sb *call) {
  kn__sb_printf(call, "    kernel%d(s", it->id);
  for (int w = 0; w < it->nwrites; w++) {
    const char *ct = kn__ind_ctype(kn__graph_node(ir->p->g, it->writes[w].node)->meta[0].dtype);
    if (single) kn__sb_printf(call, ", (%s *)o", ct);
    else kn__sb_printf(call, ", (%s *)o[%d]", ct, w);
  }
  for (int r = 0; r < it->nreads; r++)
    if (kn__cg_inplace_output(it, it->reads[r].slot) < 0)
      kn__sb_printf(call, ", (const %s *)rt->ptr(ctx, %d)", kn__ind_ctype(it->reads[r].m->dtype),
                    it->reads[r].slot);
  kn__sb_puts(call, ");\n  }\n");
}

/* An extern step's call in the entry point, after its releases. */
void kn__cg_extern_call(const kn__ind_plan *p, const kn__kir_item *it, kn__sb *call) {
  const kn__gnode *n = kn__graph_node(p->g, it->id);
  kn__cg_releases(call, it->free_before, it->nfree_before);
  kn__sb_printf(call, "  if (rt->ext(ctx, %d)) return -1;  /* extern ", it->step);
  kn__cg_put_safe(call, n->target);
  kn__sb_putc(call, ' ');
  kn__cg_put_safe(call, n->name);
  kn__sb_puts(call, " */\n");
}

/* An epilogue's launch: its buffers, the arguments a[] of kn__ind_epi_fn
** (s, the outputs, the leaves not read through an output or g), then the
** extern step with it (rt->ext_epi; into: the output written over the
** GEMM's, or NULL). */
static void epilogue_launch(const kn__kir *ir, const kn__kir_item *it, kn__sb *call) {
  const kn__gnode *e = kn__graph_node(ir->p->g, it->id);
  int into = -1;
  kn__sb_puts(call, "  {  /* ");
  kn__cg_put_safe(call, e->name);
  kn__sb_printf(call, " with its epilogue */\n    void *o[%d];\n", it->nwrites);
  kn__cg_launch_buffers(it, false, call);
  kn__sb_printf(call, "    void *const a[%d] = {(void *)s", 1 + it->nwrites + it->nreads);
  for (int w = 0; w < it->nwrites; w++) {
    kn__sb_printf(call, ", o[%d]", w);
    if (it->writes[w].inplace && it->writes[w].from == it->gemm) into = w;
  }
  for (int r = 0; r < it->nreads; r++) {
    int sl = it->reads[r].slot;
    if (sl == it->gemm || kn__cg_inplace_output(it, sl) >= 0) kn__sb_puts(call, ", (void *)0");
    else kn__sb_printf(call, ", rt->ptr(ctx, %d)", sl);
  }
  kn__sb_printf(call, "};\n    if (rt->ext_epi(ctx, %d, kernel%d, a, ", it->step, it->id);
  if (into >= 0) kn__sb_printf(call, "o[%d]", into);
  else kn__sb_puts(call, "(void *)0");
  kn__sb_puts(call, ")) return -1;  /* extern ");
  kn__cg_put_safe(call, e->target);
  kn__sb_putc(call, ' ');
  kn__cg_put_safe(call, e->name);
  kn__sb_puts(call, " */\n  }\n");
}

kn_status kn__ind_c_emit_launch(const kn__ind_target *t, const kn__kir *ir, int j, kn__sb *call) {
  (void)t;
  const kn__kir_item *it = &ir->items[j];
  if (kn__kir_has_epilogue(ir, j)) {
    return KN_OK; /* launched with its epilogue (the next item) */
  } else if (it->kind == KN__KIR_EPILOGUE) {
    epilogue_launch(ir, it, call);
  } else if (it->kind == KN__KIR_EXTERN) {
    kn__cg_extern_call(ir->p, it, call);
  } else if (it->kind == KN__KIR_POINTWISE) {
    bool single = it->nwrites == 1;
    kn__sb_puts(call, "  {  /* ");
    kn__cg_put_safe(call, kn__graph_node(ir->p->g, it->id)->name);
    if (single) kn__sb_puts(call, " */\n    void *o;\n");
    else kn__sb_printf(call, " */\n    void *o[%d];\n", it->nwrites);
    kn__cg_launch_buffers(it, single, call);
    launch_call(ir, it, single, call);
  } else {
    kn__sb_printf(call, "  {  /* kernel %d */\n    void *o[%d];\n", it->id, it->nwrites + 1);
    kn__cg_launch_buffers(it, false, call);
    launch_call(ir, it, false, call);
  }
  kn__cg_releases(call, it->free_after, it->nfree_after);
  return kn__sb_failed(call) ? kn__oom() : KN_OK;
}

kn_status kn__ind_c_emit_entry(const kn__ind_target *t, const kn__kir *ir, bool begin,
                               kn__sb *call) {
  (void)t;
  if (begin) {
    kn__sb_puts(call, "int call(const kn_rt *rt, void *ctx, const int64_t *s);\n"
                      "int call(const kn_rt *rt, void *ctx, const int64_t *s) {\n" KN__IND_VM_BIND);
  } else {
    kn__cg_releases(call, ir->free_end, ir->nfree_end);
    kn__sb_puts(call, "  return 0;\n}\n");
  }
  return kn__sb_failed(call) ? kn__oom() : KN_OK;
}

/* Does a kernel of plan p read or compute a float16/bfloat16 value? */
bool kn__cg_plan_has_half(const kn__ind_plan *p) {
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    if (p->nodes[i].kind != KN__IND_PW && p->nodes[i].kind != KN__IND_RED) continue;
    if (kn__ind_half(n->meta[0].dtype)) return true;
    for (int q = 0; q < n->nargs; q++)
      if (n->args[q].kind == KN__GA_TENSOR && n->args[q].u.t.node &&
          kn__ind_half(n->args[q].u.t.node->meta[n->args[q].u.t.idx].dtype))
        return true;
  }
  return false;
}

kn_status kn__ind_c_prelude(const kn__ind_target *t, const kn__kir *ir, kn__sb *sb) {
  kn__sb_puts(sb, "/* generated by kiln inductor */\n");
  kn__sb_puts(sb, prelude);
  if (t->openmp) kn__sb_puts(sb, omp_prelude);
  if (kn__cg_plan_has_half(ir->p)) {
    kn__sb_puts(sb, half_bits);
    kn__sb_puts(sb, kn__cg_half_prelude);
  }
  kn_status st = kn__ind_formula_prelude(ir->p, t->vector_abi, sb);
  return st == KN_OK ? kn__ind_red_prelude(ir->p, sb) : st;
}

