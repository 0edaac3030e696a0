/*
** tests/test_inductor_kir.c: inductor's kernel IR (src/inductor/kir.h) and
** targets (target.h), on plans built by hand (each node's kind, slot and
** whether it is inlined are set here, not by the scheduler):
**   - the memory-planning pass: which output is written in place over a
**     read that dies in its kernel, which takes over a dead buffer of the
**     same sizes and dtype, which buffers are freed before or after which
**     item and at the end (literals worked out from the rules in kir.c);
**   - the verifier rejects a corrupted IR with a message naming the item
**     and the slot;
**   - the printer's text for a small plan (golden text);
**   - the targets: "c" prints OpenMP pragmas and vector-ABI functions,
**     "c_scalar" neither; KILN_INDUCTOR_TARGET picks one and rejects an
**     unknown name; the target's name is part of the cache key (a compiled
**     function, in a cache directory of its own).
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "graph_util.h"
#include "inductor_util.h"
#include "support/log_capture.h"
#include "inductor/kir.h"
#include "inductor/target.h"
#include "ops/threads.h"
#include "kiln/kiln.h"

/* A plan of g made by hand: inputs get a slot; calls with an inductor
** formula are pointwise (a slot unless inlined[i]), others extern steps. */
static void plan_by_hand(kn__graph *g, const bool *inlined, kn__ind_plan *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->nnodes = kn__graph_num_nodes(g);
  size_t nn = (size_t)p->nnodes + 1;
  p->nodes = calloc(nn, sizeof *p->nodes);
  p->step_node = calloc(nn, sizeof *p->step_node);
  p->slot_node = calloc(4 * nn, sizeof *p->slot_node);
  p->slot_out = calloc(4 * nn, sizeof *p->slot_out);
  cr_assert(p->nodes && p->step_node && p->slot_node && p->slot_out);
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    kn__ind_node *in = &p->nodes[i];
    *in = (kn__ind_node){.slot = -1, .group = -1, .hz = -1, .epi = -1};
    if (n->op == KN__GN_PLACEHOLDER) {
      in->kind = KN__IND_INPUT;
      in->slot = kn__ind_new_slots(p, n, 1);
    } else if (n->op == KN__GN_OUTPUT) {
      in->kind = KN__IND_SKIP;
    } else if (kn__ind_formula_for(n, &in->f)) {
      in->kind = KN__IND_PW;
      in->inlined = inlined && inlined[i];
      if (!in->inlined) in->slot = kn__ind_new_slots(p, n, 1);
    } else {
      in->kind = KN__IND_EXTERN;
      in->step = p->nsteps;
      p->step_node[p->nsteps++] = n;
      in->slot = kn__ind_new_slots(p, n, n->nout);
    }
  }
}

static kn__gnode *input(kn__graph *g, const char *name, int64_t r, int64_t c) {
  kn__vmeta m = tmeta(KN_FLOAT64, 2, (int64_t[]){r, c});
  return kn__graph_placeholder(g, name, &m);
}

static kn__gnode *call1(kn__graph *g, int op, kn__gnode *a) {
  kn__garg args[1] = {KN_GA_T(a)};
  return kn__graph_call(g, &kn__ops[op], 1, args, 1, &a->meta[0]);
}

/* a op b with the broadcast sizes of a and b (2-d, float64). */
static kn__gnode *call2(kn__graph *g, int op, kn__gnode *a, kn__gnode *b) {
  int64_t r = a->meta[0].sizes[0].c > b->meta[0].sizes[0].c ? a->meta[0].sizes[0].c
                                                             : b->meta[0].sizes[0].c;
  kn__vmeta m = tmeta(KN_FLOAT64, 2, (int64_t[]){r, b->meta[0].sizes[1].c});
  kn__garg args[2] = {KN_GA_T(a), KN_GA_T(b)};
  return kn__graph_call(g, &kn__ops[op], 2, args, 1, &m);
}

static void output(kn__graph *g, kn__gnode *n) {
  kn__gref r = {n, 0};
  kn__graph_output(g, 1, &r);
}

/* x, y [4, 3]: a = exp(x); b = neg(y); c = a + b; d = exp(x); e = c * d.
** Nodes 0..6, slots x 0, y 1, a 2, b 3, c 4, d 5, e 6. */
static kn__graph *chain_graph_sized(int64_t rows, int64_t cols) {
  kn__graph *g = kn__graph_new();
  kn__gnode *x = input(g, "L['x']", rows, cols), *y = input(g, "L['y']", rows, cols);
  kn__gnode *a = call1(g, KN_OP_EXP, x), *b = call1(g, KN_OP_NEG, y);
  kn__gnode *c = call2(g, KN_OP_ADD, a, b), *d = call1(g, KN_OP_EXP, x);
  output(g, call2(g, KN_OP_MUL, c, d));
  return g;
}
static kn__graph *chain_graph(void) { return chain_graph_sized(4, 3); }

static void build(kn__graph *g, const bool *inlined, kn__ind_plan *p, kn__kir *ir) {
  plan_by_hand(g, inlined, p);
  cr_assert_eq(kn__kir_build(p, ir), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__kir_plan_memory(ir), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__kir_verify(ir), KN_OK, "%s", kn_last_error());
}

static void done(kn__graph *g, kn__ind_plan *p, kn__kir *ir) {
  kn__kir_free(ir);
  kn__ind_plan_free(p);
  kn__graph_free(g);
}

static void expect_write(const kn__kir *ir, int j, int slot, int from, bool inplace) {
  cr_assert_lt(j, ir->nitems);
  const kn__kir_item *it = &ir->items[j];
  cr_assert_eq(it->nwrites, 1, "item %d", j);
  cr_expect_eq(it->writes[0].slot, slot, "item %d writes s%d", j, it->writes[0].slot);
  cr_expect_eq(it->writes[0].from, from, "item %d takes s%d, expected s%d", j,
               it->writes[0].from, from);
  cr_expect_eq(it->writes[0].inplace, inplace, "item %d in place", j);
}

static void expect_slots(const int *got, int n, const int *want, int nwant, const char *what) {
  cr_assert_eq(n, nwant, "%s: %d slots, expected %d", what, n, nwant);
  for (int k = 0; k < n; k++) cr_expect_eq(got[k], want[k], "%s[%d]", what, k);
}

/* c is written over a (a dies in c's kernel, element for element); b dies
** there too but c's buffer is taken, so b's buffer waits in the pool and d
** (same sizes, dtype) takes it; e is written over c; d's buffer is freed
** at the end. No buffer is freed before or after an item. */
Test(inductor_kir, memory_plan_in_place_and_reuse) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  cr_assert_eq(ir.nitems, 5);
  for (int j = 0; j < 5; j++) {
    cr_expect_eq(ir.items[j].kind, KN__KIR_POINTWISE);
    cr_expect_eq(ir.items[j].id, j + 2);
    cr_expect_eq(ir.items[j].nfree_before + ir.items[j].nfree_after, 0, "item %d frees", j);
  }
  expect_write(&ir, 0, 2, -1, false);
  expect_write(&ir, 1, 3, -1, false);
  expect_write(&ir, 2, 4, 2, true);
  expect_write(&ir, 3, 5, 3, false);
  expect_write(&ir, 4, 6, 4, true);
  expect_slots(ir.free_end, ir.nfree_end, (int[]){5}, 1, "free at the end");
  /* liveness: x is read last by item 3, e is an output */
  cr_expect_eq(ir.last[0], 3);
  cr_expect_eq(ir.last[6], ir.nitems);
  done(g, &p, &ir);
}

/* With c inlined into e, one kernel computes c and e and reads a, b, d:
** e is written over a (the first read that dies with e's layout). */
Test(inductor_kir, inlined_nodes_are_computed_in_their_consumer) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  bool inl[8] = {[4] = true};
  build(g, inl, &p, &ir);
  cr_assert_eq(ir.nitems, 4);
  const kn__kir_item *e = &ir.items[3];
  cr_assert_eq(e->nnodes, 2);
  cr_expect_eq(e->nodes[0], 4);
  cr_expect_eq(e->nodes[1], 6);
  cr_assert_eq(e->nreads, 3);
  int reads[3] = {e->reads[0].slot, e->reads[1].slot, e->reads[2].slot};
  expect_slots(reads, 3, (int[]){2, 3, 4}, 3, "reads of e's kernel");
  expect_write(&ir, 3, 5, 2, true);
  expect_slots(ir.free_end, ir.nfree_end, (int[]){3, 4}, 2, "free at the end");
  done(g, &p, &ir);
}

/* x [1, 3], y [4, 3], w [3, 3]: a = exp(x); b = a + y; m = mm(b, w). a's buffer
** (its sizes differ from b's) dies in b's kernel and waits in the pool,
** released before the extern call; b, read by the extern call, is never
** reused: freed right after it. Slots x 0, y 1, w 2, a 3, b 4, m 5. */
static kn__graph *extern_graph(void) {
  kn__graph *g = kn__graph_new();
  kn__gnode *x = input(g, "L['x']", 1, 3), *y = input(g, "L['y']", 4, 3);
  kn__gnode *w = input(g, "L['w']", 3, 3);
  kn__gnode *b = call2(g, KN_OP_ADD, call1(g, KN_OP_EXP, x), y);
  output(g, call2(g, KN_OP_MM, b, w));
  return g;
}

Test(inductor_kir, memory_plan_around_an_extern_call) {
  kn__graph *g = extern_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  cr_assert_eq(ir.nitems, 3);
  expect_write(&ir, 0, 3, -1, false);
  expect_write(&ir, 1, 4, -1, false);
  const kn__kir_item *mm = &ir.items[2];
  cr_expect_eq(mm->kind, KN__KIR_EXTERN);
  cr_expect_eq(mm->step, 0);
  cr_assert_eq(mm->nreads, 2);
  cr_expect_eq(mm->reads[0].slot, 4);
  cr_expect_eq(mm->reads[1].slot, 2);
  expect_slots(mm->free_before, mm->nfree_before, (int[]){3}, 1, "freed before mm");
  expect_slots(mm->free_after, mm->nfree_after, (int[]){4}, 1, "freed after mm");
  cr_expect_eq(ir.nfree_end, 0);
  done(g, &p, &ir);
}

/* ---- the verifier --------------------------------------------------------------- */
static void expect_rejected(const kn__kir *ir, const char *part1, const char *part2) {
  cr_assert_eq(kn__kir_verify(ir), KN_EINTERNAL);
  const char *msg = kn_last_error();
  cr_expect(strstr(msg, part1) && strstr(msg, part2), "message: %s", msg);
}

Test(inductor_kir, verifier_rejects_a_read_of_a_buffer_taken_over) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  ir.items[3].reads[0].slot = 2; /* a: c was written over it */
  expect_rejected(&ir, "item 3 (pointwise kernel at node 5)",
                  "reads slot 2, which is already freed or taken over");
  done(g, &p, &ir);
}

Test(inductor_kir, verifier_rejects_a_read_before_the_write) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  ir.items[1].reads[0].slot = 5;
  expect_rejected(&ir, "item 1", "reads slot 5, which is not defined yet");
  done(g, &p, &ir);
}

Test(inductor_kir, verifier_rejects_an_early_free_and_a_bad_take) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  int early[1] = {2};
  ir.items[0].free_after = early;
  ir.items[0].nfree_after = 1;
  expect_rejected(&ir, "item 0", "frees slot 2 after it, but the slot is read later");
  ir.items[0].free_after = NULL;
  ir.items[0].nfree_after = 0;
  ir.items[3].writes[0].from = 4; /* c: read by item 4 */
  expect_rejected(&ir, "item 3", "takes over the buffer of slot 4, which is read by this "
                  "kernel or later");
  done(g, &p, &ir);
}

Test(inductor_kir, verifier_rejects_a_kernel_over_capacity) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  kn__kir_item *it = &ir.items[2];
  kn__kir_read *many = calloc(KN__KER_MAX_READS + 1, sizeof *many);
  for (int r = 0; r <= KN__KER_MAX_READS; r++) many[r] = it->reads[0];
  kn__kir_read *saved = it->reads;
  int nsaved = it->nreads;
  it->reads = many;
  it->nreads = KN__KER_MAX_READS + 1;
  expect_rejected(&ir, "item 2", "reads 65 buffers, more than KN__KER_MAX_READS = 64");
  it->reads = saved;
  it->nreads = nsaved;
  free(many);
  done(g, &p, &ir);
}

/* ---- the printer ----------------------------------------------------------------- */
static const char golden[] =
    "kernel_ir: 5 items, 7 slots\n"
    "0: pointwise kernel 2 float64[4, 3] (roots exp)\n"
    "    read s0 float64[4, 3][3, 1]\n"
    "    v2 = exp(s0)\n"
    "    write s2 <- new\n"
    "1: pointwise kernel 3 float64[4, 3] (roots neg)\n"
    "    read s1 float64[4, 3][3, 1]\n"
    "    v3 = neg(s1)\n"
    "    write s3 <- new\n"
    "2: pointwise kernel 4 float64[4, 3] (roots add)\n"
    "    read s2 float64[4, 3][3, 1]\n"
    "    read s3 float64[4, 3][3, 1]\n"
    "    v4 = add(s2, s3)\n"
    "    write s4 <- s2 (in place)\n"
    "3: pointwise kernel 5 float64[4, 3] (roots exp_1)\n"
    "    read s0 float64[4, 3][3, 1]\n"
    "    v5 = exp(s0)\n"
    "    write s5 <- s3 (reused)\n"
    "4: pointwise kernel 6 float64[4, 3] (roots mul)\n"
    "    read s4 float64[4, 3][3, 1]\n"
    "    read s5 float64[4, 3][3, 1]\n"
    "    v6 = mul(s4, s5)\n"
    "    write s6 <- s4 (in place)\n"
    "end: free s5\n";

Test(inductor_kir, printer_golden_text) {
  kn__graph *g = chain_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  kn__sb sb;
  kn__sb_init(&sb);
  cr_assert_eq(kn__kir_print(&ir, &sb), KN_OK);
  cr_expect_str_eq(kn__sb_cstr(&sb), golden);
  kn__sb_fini(&sb);
  done(g, &p, &ir);
}

/* The extern example of docs/INDUCTOR.md ("Kernel IR and targets"). */
static const char golden_extern[] =
    "kernel_ir: 3 items, 6 slots\n"
    "0: pointwise kernel 3 float64[1, 3] (roots exp)\n"
    "    read s0 float64[1, 3][3, 1]\n"
    "    v3 = exp(s0)\n"
    "    write s3 <- new\n"
    "1: pointwise kernel 4 float64[4, 3] (roots add)\n"
    "    read s3 float64[1, 3][3, 1]\n"
    "    read s1 float64[4, 3][3, 1]\n"
    "    v4 = add(s3, s1)\n"
    "    write s4 <- new\n"
    "2: extern step 0 mm (node mm)\n"
    "    free before: s3\n"
    "    read s4 float64[4, 3][3, 1]\n"
    "    read s2 float64[3, 3][3, 1]\n"
    "    write s5 <- new\n"
    "    free after: s4\n";

Test(inductor_kir, printer_golden_text_with_an_extern_step) {
  kn__graph *g = extern_graph();
  kn__ind_plan p;
  kn__kir ir;
  build(g, NULL, &p, &ir);
  kn__sb sb;
  kn__sb_init(&sb);
  cr_assert_eq(kn__kir_print(&ir, &sb), KN_OK);
  cr_expect_str_eq(kn__sb_cstr(&sb), golden_extern);
  kn__sb_fini(&sb);
  done(g, &p, &ir);
}

/* ---- targets --------------------------------------------------------------------- */
static char *source_sized(const kn__ind_target *t, int64_t rows, int64_t cols) {
  kn__graph *g = chain_graph_sized(rows, cols);
  kn__ind_plan p;
  bool inl[8] = {[4] = true};
  plan_by_hand(g, inl, &p);
  kn__sb sb;
  kn__sb_init(&sb);
  cr_assert_eq(kn__ind_codegen_target(&p, t, &sb), KN_OK, "%s", kn_last_error());
  char *src = kn__sb_take(&sb);
  kn__sb_fini(&sb);
  kn__ind_plan_free(&p);
  kn__graph_free(g);
  return src;
}
/* Large enough for OpenMP: 300 x 300 elements >= 65536. */
static char *source_for(const kn__ind_target *t) { return source_sized(t, 300, 300); }

/* A loop over constant sizes below 65536 elements (twice the smaller
** grain) has no OpenMP text at all: its team would always be one thread;
** one over more elements sizes its team at run time (kn_team). */
Test(inductor_kir, small_constant_loops_run_without_openmp) {
  char *small = source_sized(&kn__ind_target_c, 4, 3), *edge = source_sized(&kn__ind_target_c, 256, 255);
  char *big = source_sized(&kn__ind_target_c, 256, 256);
  cr_expect(!strstr(small, "#pragma omp parallel"), "%s", small);
  cr_expect(!strstr(edge, "#pragma omp parallel"), "%s", edge);
  cr_expect(!strstr(small, "= kn_team(") && !strstr(edge, "= kn_team("), "%s", small);
  cr_expect(strstr(big, "  const int nt = kn_team(n, n, KN_GRAIN"), "%s", big);
  cr_expect(strstr(big, "  #pragma omp parallel num_threads(omp_get_max_threads())\n  {\n    kn_join_enter(&j);\n"
                        "    #pragma omp for schedule(dynamic, 1) nowait\n"), "%s", big);
  free(small);
  free(edge);
  free(big);
}

/* The prelude function of src that starts at `head`, compiled on its own
** after `incl`, with `body` as main's body, run on the input text `in`: its
** output into out (len bytes, NUL-terminated). */
static void run_prelude_fn(const char *src, const char *head, const char *incl, const char *body,
                           const char *in, char *out, size_t len) {
  const char *a = strstr(src, head), *e = a ? strstr(a, "\n}\n") : NULL;
  cr_assert(a && e, "no %s in:\n%s", head, src);
  char dir[] = "/tmp/kn-prelude-XXXXXX", path[64], cmd[256];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/j.c", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "%s#include <stdio.h>\n%.*s\nint main(void) {\n%s  return 0;\n}\n", incl,
          (int)(e + 3 - a), a, body);
  fclose(f);
  snprintf(path, sizeof path, "%s/in", dir);
  f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(in, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -O2 -o %s/j %s/j.c && %s/j < %s/in > %s/out", dir, dir, dir, dir,
           dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/out", dir);
  f = fopen(path, "r");
  cr_assert_not_null(f);
  size_t n = fread(out, 1, len - 1, f);
  out[n] = 0;
  fclose(f);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(system(cmd), 0);
}

/* A generated team closes its region as the eager kernels' (kn__par_join):
** the prelude's kn_join_wait, compiled on its own, gives kn__par_wait_rule's
** answer (ns there, seconds here) over a grid of team states. */
Test(inductor_kir, generated_join_waits_by_the_eager_rule) {
  char *src = source_sized(&kn__ind_target_c, 256, 256);
  const long parts[] = {1000, 90000}, waits[] = {0, 10, 999, 1000, 90000, 90001};
  char in[8192] = "", want[1024] = "", out[1024];
  for (int nt = 1; nt <= 4; nt++)
    for (int st = 0; st < nt; st++)
      for (int ar = 0; ar <= st; ar++)
        for (int pi = 0; pi < 2; pi++)
          for (int wi = 0; wi < 6; wi++) {
            snprintf(in + strlen(in), sizeof in - strlen(in), "%d %d %d %ld %ld\n", nt, st, ar,
                     parts[pi], waits[wi]);
            strcat(want, kn__par_wait_rule(nt, st, ar, parts[pi], waits[wi]) ? "1\n" : "0\n");
          }
  run_prelude_fn(src, "static inline bool kn_join_wait(", "#include <stdbool.h>\n",
                 "  int nt, s, r; long p, w;\n"
                 "  while (scanf(\"%d %d %d %ld %ld\", &nt, &s, &r, &p, &w) == 5)\n"
                 "    printf(\"%d\\n\", kn_join_wait(nt, s, r, p * 1e-9, w * 1e-9));\n",
                 in, out, sizeof out);
  cr_expect_str_eq(out, want);
  free(src);
}

/* A generated kernel cuts its team's work into parts as the eager kernels
** do: the prelude's kn_parts, compiled on its own, gives kn__par_parts's
** count over a grid of teams, sizes, piece counts and grains. */
Test(inductor_kir, generated_parts_by_the_eager_rule) {
  char *src = source_sized(&kn__ind_target_c, 256, 256);
  const long work[] = {0, 8191, 65536, 151552, 1L << 20, 1L << 30}, units[] = {1, 5, 37, 4096};
  const long grain[] = {0, 3, 32768, 131072};
  char in[16384] = "", want[4096] = "", out[4096];
  for (int nt = 1; nt <= 4; nt++)
    for (int w = 0; w < 6; w++)
      for (int u = 0; u < 4; u++)
        for (int g = 0; g < 4; g++) {
          snprintf(in + strlen(in), sizeof in - strlen(in), "%d %ld %ld %ld\n", nt, work[w],
                   units[u], grain[g]);
          snprintf(want + strlen(want), sizeof want - strlen(want), "%d\n",
                   kn__par_parts(nt, work[w], units[u], grain[g]));
        }
  run_prelude_fn(src, "static inline int kn_parts(", "#include <stdint.h>\n",
                 "  int nt; long w, u, g;\n"
                 "  while (scanf(\"%d %ld %ld %ld\", &nt, &w, &u, &g) == 4)\n"
                 "    printf(\"%d\\n\", kn_parts(nt, w, u, g));\n",
                 in, out, sizeof out);
  cr_expect_str_eq(out, want);
  free(src);
}

Test(inductor_kir, c_target_prints_pragmas_and_the_vector_abi_scalar_target_neither) {
  char *c = source_for(&kn__ind_target_c), *s = source_for(&kn__ind_target_c_scalar);
  cr_expect(strstr(c, "#pragma omp parallel num_threads(omp_get_max_threads())"));
  cr_expect(strstr(c, "_ZGV"));
  cr_expect(strstr(c, "simd(\\\"notinbranch\\\")") || strstr(c, "simd(\"notinbranch\")"));
  cr_expect(!strstr(s, "#pragma"), "%s", s);
  cr_expect(!strstr(s, "simd"), "%s", s);
  cr_expect(!strstr(s, "_ZGV"), "%s", s);
  /* the same kernels and launches: e's kernel reads a, b, d and is written over a */
  const char *launch = "    if (rt->reuse(ctx, 2, 5, &o)) return -1;  /* in place over slot 2 */\n";
  cr_expect(strstr(c, launch) && strstr(s, launch));
  cr_expect(strstr(c, "static void kernel6(") && strstr(s, "static void kernel6("));
  cr_expect(strstr(kn__ind_target_c.cflags, "-fopenmp"));
  cr_expect(!strstr(kn__ind_target_c_scalar.cflags, "-fopenmp"));
  cr_expect(!strstr(kn__ind_target_c_scalar.cflags, "-march"));
  free(c);
  free(s);
}

Test(inductor_kir, target_chosen_by_environment) {
  const kn__ind_target *t = NULL;
  unsetenv("KILN_INDUCTOR_TARGET");
  cr_assert_eq(kn__ind_target_current(&t), KN_OK);
  cr_expect_eq(t, &kn__ind_target_c);
  setenv("KILN_INDUCTOR_TARGET", "c_scalar", 1);
  cr_assert_eq(kn__ind_target_current(&t), KN_OK);
  cr_expect_eq(t, &kn__ind_target_c_scalar);
  setenv("KILN_INDUCTOR_TARGET", "cuda", 1);
  cr_expect_eq(kn__ind_target_current(&t), KN_EINVAL);
  cr_expect_str_eq(kn_last_error(),
                   "inductor: KILN_INDUCTOR_TARGET: expected one of c, c_scalar; found 'cuda'");
  unsetenv("KILN_INDUCTOR_TARGET");
}

/* The target's name is part of the cache keys: the same function compiled
** for c and for c_scalar gives two shared objects, and only c's source has
** OpenMP pragmas; both give eager's values. */
static kn_tensor *small_fn(kn_tensor *x) {
  kn_tensor *e = kn_exp(x);
  return kn_mul(e, kn_add_scalar(x, kn_float(1.0)));
}

static kn_tensor *run_on(const char *target, kn_tensor *x) {
  setenv("KILN_INDUCTOR_TARGET", target, 1);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))small_fn, 1, "small", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_tensor *y = kn_call_t(f, x);
  cr_assert_not_null(y, "%s: %s", target, kn_last_error());
  kn_compiled_free(f);
  unsetenv("KILN_INDUCTOR_TARGET");
  return y;
}

Test(inductor_kir, target_name_is_part_of_the_cache_key) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(300, 300), NULL, KN_FLOAT64); /* big enough for a team */
  kn_tensor *want = small_fn(x);
  cr_expect(ind_close(run_on("c", x), want, 1e-12, 1e-12, "c"));
  cr_expect_eq(ind_count(dir, ".so"), 1);
  cr_expect(ind_close(run_on("c_scalar", x), want, 1e-12, 1e-12, "c_scalar"));
  cr_expect_eq(ind_count(dir, ".so"), 2);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "grep -l '#pragma omp' %s/inductor/*.c | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  cr_assert(p && fscanf(p, "%d", &n) == 1);
  pclose(p);
  cr_expect_eq(n, 1, "sources with OpenMP pragmas: %d", n);
  kn_scope_end();
  ind_rm(dir);
}

/* KILN_LOGS=+kernel_ir logs the IR of each graph code is generated for
** (here the inference graph: one kernel, exp and add inlined into mul). */
Test(inductor_kir, kernel_ir_artifact) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_test_log_clean();
  kn_set_logs_str("kernel_ir");
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(3, 4), NULL, KN_FLOAT32);
  kn_tensor *y = run_on("c", x);
  kn_scope_end();
  kn_test_capture_end(&r);
  cr_assert_not_null(y);
  cr_assert_eq(kn_test_count_artifact(&r, "kernel_ir"), 1);
  const kn_test_record *rec = kn_test_get_record(&r, "kernel_ir: ");
  cr_assert_not_null(rec);
  cr_expect_str_eq(rec->message, "kernel_ir: 1 items, 2 slots\n"
                                  "0: pointwise kernel 3 float32[3, 4] (roots mul)\n"
                                  "    read s0 float32[3, 4][4, 1]\n"
                                  "    v1 = exp(s0)\n"
                                  "    v2 = add(s0, 1)\n"
                                  "    v3 = mul(v1, v2)\n"
                                  "    write s1 <- new\n");
  kn_test_records_free(&r);
  kn_test_log_clean();
  ind_rm(dir);
}
