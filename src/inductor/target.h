/*
** inductor/target.h: the code generator's targets (internal to
** src/inductor; see docs/INDUCTOR.md, "Kernel IR and targets").
**
** A target turns the kernel IR (kir.h) into a program and that program into
** loaded code. codegen.c walks the IR and calls the target: prelude once,
** supports and emit_kernel per kernel item, emit_entry around emit_launch
** per item; codecache.c calls compile and load on a cache miss. A target
** prints what the IR and its memory plan say: it decides no fusion, no
** buffer lifetime.
**
** Targets (target.c), chosen by KILN_INDUCTOR_TARGET (read at each
** compile; default "c"):
**   c         C with OpenMP over blocks and rows, vector-math functions
**             declared `simd` with x86-64 vector-ABI versions (gcc
**             vectorises loops calling them), sqrt inline; "-O3
**             -march=native -fopenmp -ffp-contract=off -fno-math-errno
**             -fno-trapping-math" (no FP exception is ever inspected: gcc
**             may then compute both sides of a where, and vectorises a
**             row's `where(class == target, v, 0)`, which it otherwise
**             sinks into a branch per element);
**   c_scalar  the same loops as plain scalar C: no pragmas, no vector ABI,
**             no -march=native, no -fopenmp ("-O2 -ffp-contract=off"); the
**             reference of differential tests.
** The target's name is part of the cache keys (codecache.c).
*/
#ifndef KN_INDUCTOR_TARGET_H
#define KN_INDUCTOR_TARGET_H

#include "inductor/kir.h"

typedef struct kn__ind_tool kn__ind_tool;
typedef struct kn__ind_target kn__ind_target;

struct kn__ind_target {
  const char *name;   /* KILN_INDUCTOR_TARGET's value; part of the cache keys */
  const char *cflags; /* compile's default flags (KILN_CFLAGS replaces them) */
  /* Flags appended to them for the first tier of a tiered compile
  ** (KILN_INDUCTOR_TIERED, codecache.c): a build that compiles fast and
  ** computes the same values; NULL: no first tier (tiered compiles build
  ** the optimised program directly). */
  const char *fast_cflags;
  /* Can the target emit item j? false with why (a static or borrowed text)
  ** when not: the compile fails naming it. */
  bool (*supports)(const kn__ind_target *t, const kn__kir *ir, int j, const char **why);
  /* The program's prelude: the runtime table type, helpers, the formulas'
  ** vocabulary. */
  kn_status (*prelude)(const kn__ind_target *t, const kn__kir *ir, kn__sb *sb);
  /* The kernel of kernel item j (a function of the program). May add size
  ** expressions to the plan's table (kn__ind_symx). */
  kn_status (*emit_kernel)(const kn__ind_target *t, kn__kir *ir, int j, kn__sb *sb);
  /* The entry point's start (begin) or end (with the IR's free_end). */
  kn_status (*emit_entry)(const kn__ind_target *t, const kn__kir *ir, bool begin, kn__sb *sb);
  /* The statements of item j in the entry point: its buffers as the memory
  ** plan says (take over, free, allocate), then the launch or extern call. */
  kn_status (*emit_launch)(const kn__ind_target *t, const kn__kir *ir, int j, kn__sb *sb);
  /* Compile the source file src into so in dir (toolchain.h's kn__ind_cc
  ** contract), and load the result open on fd (kn__ind_load_fd's). */
  kn_status (*compile)(const kn__ind_tool *tool, const char *dir, const char *src, const char *so,
                       const char *shown);
  kn_status (*load)(int fd, bool noexec, const char *shown, kn__ind_call_fn *out);
  /* The C family's dialect (read by codegen.c's C printer). */
  bool openmp;     /* `#pragma omp parallel for` over blocks and rows */
  bool vector_abi; /* simd declarations, x86-64 vector-ABI versions, GCC vectoriser pragmas */
  /* The target runs epilogue items (kir.h): the scheduler fuses pointwise
  ** kernels into GEMM / convolution extern steps only for such a target. */
  bool epilogues;
  /* Vector-math functions that every table rounds correctly (sqrt,
  ** kn__vm_exact_c) printed as the C library's call, which -fno-math-errno
  ** lets the compiler inline and vectorise (the same bits as the table's,
  ** without a call per vector that spills every live register). */
  bool inline_exact;
};

/* The C targets (target.c). */
extern const kn__ind_target kn__ind_target_c, kn__ind_target_c_scalar;
/* The CUDA target (target_cuda.c): device code for NVRTC and a C host
** program in one text (docs/INDUCTOR.md, "The CUDA target"). */
extern const kn__ind_target kn__ind_target_cuda;
/* The target named name (static), or NULL. */
const kn__ind_target *kn__ind_target_find(const char *name);
/* The target KILN_INDUCTOR_TARGET selects ("c" when unset or empty);
** KN_EINVAL naming the known targets when it names none. */
kn_status kn__ind_target_current(const kn__ind_target **out);

/* The C printer (codegen.c), the emit_* functions of the C targets. */
kn_status kn__ind_c_prelude(const kn__ind_target *t, const kn__kir *ir, kn__sb *sb);
kn_status kn__ind_c_emit_kernel(const kn__ind_target *t, kn__kir *ir, int j, kn__sb *sb);
kn_status kn__ind_c_emit_entry(const kn__ind_target *t, const kn__kir *ir, bool begin, kn__sb *sb);
kn_status kn__ind_c_emit_launch(const kn__ind_target *t, const kn__kir *ir, int j, kn__sb *sb);

/* Generate the program of plan p for target t into sb: build the kernel
** IR, plan memory, verify it (every compile: linear in the IR's size), log
** it (kernel_ir artifact), then walk it calling the target. A plan the
** verifier rejects is KN_EINTERNAL; a kernel the target does not support,
** KN_EUNSUPPORTED naming it. */
kn_status kn__ind_codegen_target(kn__ind_plan *p, const kn__ind_target *t, kn__sb *sb);

#endif
