/*
** inductor/target.c: the code generator's targets (target.h) and the
** choice of one (KILN_INDUCTOR_TARGET). Both are C: the printer is
** codegen.c's, the compiler and loader toolchain.c's; they differ in the
** dialect (OpenMP, vector ABI) and the default compiler flags.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/target.h"
#include "inductor/toolchain.h"

/* Every item the IR has today is C: pointwise loops and reduction groups
** over float, int and bool dtypes that formula.c lowered (kn__ind_ctype). */
static bool c_supports(const kn__ind_target *t, const kn__kir *ir, int j, const char **why) {
  (void)t;
  const kn__kir_item *it = &ir->items[j];
  for (int w = 0; w < it->nwrites; w++) {
    const kn__gnode *n = kn__graph_node(ir->p->g, it->writes[w].node);
    if (!kn__ind_ctype(n->meta[0].dtype)) {
      *why = "an output's dtype has no C type";
      return false;
    }
  }
  return true;
}

const kn__ind_target kn__ind_target_c = {
    .name = "c",
    .cflags = "-O3 -march=native -fopenmp -ffp-contract=off -fno-math-errno -fno-trapping-math",
    .fast_cflags = "-O1",
    .supports = c_supports,
    .prelude = kn__ind_c_prelude,
    .emit_kernel = kn__ind_c_emit_kernel,
    .emit_entry = kn__ind_c_emit_entry,
    .emit_launch = kn__ind_c_emit_launch,
    .compile = kn__ind_cc,
    .load = kn__ind_load_fd,
    .openmp = true,
    .vector_abi = true,
    .epilogues = true,
    .inline_exact = true,
};

const kn__ind_target kn__ind_target_c_scalar = {
    .name = "c_scalar",
    .cflags = "-O2 -ffp-contract=off",
    .fast_cflags = "-O1",
    .supports = c_supports,
    .prelude = kn__ind_c_prelude,
    .emit_kernel = kn__ind_c_emit_kernel,
    .emit_entry = kn__ind_c_emit_entry,
    .emit_launch = kn__ind_c_emit_launch,
    .compile = kn__ind_cc,
    .load = kn__ind_load_fd,
    .openmp = false,
    .vector_abi = false,
    .epilogues = true,
};

static const kn__ind_target *const targets[] = {&kn__ind_target_c, &kn__ind_target_c_scalar};

const kn__ind_target *kn__ind_target_find(const char *name) {
  for (size_t i = 0; name && i < sizeof targets / sizeof targets[0]; i++)
    if (!strcmp(targets[i]->name, name)) return targets[i];
  return NULL;
}

kn_status kn__ind_target_current(const kn__ind_target **out) {
  const char *v = getenv("KILN_INDUCTOR_TARGET");
  *out = v && *v ? kn__ind_target_find(v) : &kn__ind_target_c;
  if (*out) return KN_OK;
  return kn__error(KN_EINVAL, "inductor: KILN_INDUCTOR_TARGET: expected one of c, c_scalar; "
                   "found '%.100s'", v);
}
