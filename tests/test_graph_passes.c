/*
** test_graph_passes.c: the graph layer's editing API (users, replace-all-
** uses, insert-before, copy, subgraph), the text parser (graph code in ->
** graph -> the same code out), and the passes (dead-code and common-
** subexpression elimination, no-op removal) as text in -> literal text out, each checked
** against the interpreter on random inputs (a pass must not change results).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "kiln/kiln.h"

#define F3 "\"f32[3][1]cpu\""
#define HEAD(params) "class GraphModule(torch.nn.Module):\n    def forward(self, " params "):\n"

static char *code_of(const kn__graph *g) {
  kn__gprint_opts o = KN__GPRINT_DEFAULT;
  return kn__graph_code(g, &o);
}

static kn__graph *parse_ok(const char *text) {
  kn__graph *g = kn__graph_parse(text, NULL, 0);
  cr_assert_not_null(g, "%s", kn_last_error());
  return g;
}

/* Run g on inputs (borrowed); outputs are new references. */
static void run(const kn__graph *g, kn_tensor **in, int nin, kn_tensor **out, int nout) {
  kn__gprog *p = NULL;
  cr_assert_eq(kn__gprog_new(g, &p), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__gprog_run(p, in, nin, out, nout), KN_OK, "%s", kn_last_error());
  kn__gprog_free(p);
}

/* The pass left results unchanged: before and after agree on random
** float32 inputs of the placeholders' sizes, three draws. */
static void same_results(const kn__graph *before, const kn__graph *after) {
  int nin = kn__graph_num_inputs(before);
  int nout = kn__graph_output_node(before)->nargs;
  cr_assert_eq(kn__graph_num_inputs(after), nin);
  cr_assert_eq(kn__graph_output_node(after)->nargs, nout);
  for (int draw = 0; draw < 3; draw++) {
    kn_manual_seed(100 + (uint64_t)draw);
    kn_scope_begin(); /* inputs and flattened views */
    kn_tensor *in[8], *a[8], *b[8];
    for (int i = 0; i < nin; i++) {
      const kn__vmeta *m = kn__graph_input(before, i)->meta;
      int64_t sz[KN_MAX_DIMS];
      for (int d = 0; d < m->ndim; d++) sz[d] = m->sizes[d].c;
      in[i] = kn_randn(m->ndim, sz, NULL, m->dtype);
    }
    run(before, in, nin, a, nout);
    run(after, in, nin, b, nout);
    for (int k = 0; k < nout; k++) {
      cr_assert_eq(kn_numel(a[k]), kn_numel(b[k]));
      kn_tensor *fa = kn_flatten(a[k], 0, -1), *fb = kn_flatten(b[k], 0, -1);
      for (int64_t e = 0; e < kn_numel(a[k]); e++) {
        double x = kn_get(fa, (int64_t[]){e}), y = kn_get(fb, (int64_t[]){e});
        cr_assert(x == y || (isnan(x) && isnan(y)), "output %d element %lld: %g vs %g", k,
                  (long long)e, x, y);
      }
      kn_release(a[k]);
      kn_release(b[k]);
    }
    kn_scope_end();
  }
}

TestSuite(graph_passes, .init = NULL);

/* ---- parser ------------------------------------------------------------------ */

static const char *roundtrip_text =
    HEAD("L_x_: \"f32[4, 3][3, 1]cpu\", L_y_: \"f32[3][1]cpu\"")
    "        l_x_ = L_x_\n"
    "        l_y_ = L_y_\n"
    "        \n"
    "         # File: /nonexistent/user.c:12 in f, code: kn_split(x, 2, 0)\n"
    "        split = kiln.ops.split(l_x_, 2, 0);  l_x_ = None\n"
    "        getitem: \"f32[2, 3][3, 1]cpu\" = split[0]\n"
    "        getitem_1: \"f32[2, 3][3, 1]cpu\" = split[1];  split = None\n"
    "        \n"
    "        # No stacktrace found for following nodes\n"
    "        add: \"f32[2, 3][3, 1]cpu\" = kiln.ops.add(getitem, getitem_1, alpha = 0.5);  "
    "getitem = getitem_1 = None\n"
    "        mul: \"f32[2, 3][3, 1]cpu\" = kiln.ops.mul(add, l_y_);  add = l_y_ = None\n"
    "        add_1: \"f32[2, 3][3, 1]cpu\" = kiln.ops.add(mul, 1e-05);  mul = None\n"
    "        ones: \"f32[2, 3][3, 1]cpu\" = kiln.ops.full([2, 3], 1, dtype = kiln.float32)\n"
    "        sum_1: \"f32[][]cpu\" = kiln.ops.sum(ones);  ones = None\n"
    "        return (add_1, sum_1)\n"
    "        ";

Test(graph_passes, parse_prints_back_the_same_code) {
  kn__graph *g = parse_ok(roundtrip_text);
  char *code = code_of(g);
  cr_assert_str_eq(code, roundtrip_text);
  free(code);
  /* overloads are told apart by their arguments: add.Tensor and add.Scalar */
  cr_assert_str_eq(kn__graph_find(g, "add")->opdef->overload, "Tensor");
  const kn__gnode *a1 = kn__graph_find(g, "add_1");
  cr_assert_str_eq(a1->opdef->overload, "Scalar");
  cr_assert_eq(a1->nargs, 2); /* positional arguments as printed */
  const kn__gnode *s1 = kn__graph_find(g, "sum_1");
  cr_assert_eq(s1->nargs, 2); /* the keyword-only dtype at its default */
  cr_assert_eq(s1->args[1].kind, KN__GA_NONE);
  cr_assert_eq(kn__graph_find(g, "split")->nout, 2);
  cr_assert_eq(kn__graph_find(g, "split")->stack[0].line, 12);
  kn__graph_free(g);
}

Test(graph_passes, parse_errors_name_the_line) {
  const char *bad_op = HEAD("L_x_: " F3) "        l_x_ = L_x_\n"
                       "        y: " F3 " = kiln.ops.frobnicate(l_x_)\n        return (y,)\n";
  cr_assert_null(kn__graph_parse(bad_op, NULL, 0));
  cr_assert_str_eq(kn_last_error(), "graph parse: line 4: no overload of frobnicate takes (l_x_)");
  const char *bad_ref = HEAD("L_x_: " F3) "        l_x_ = L_x_\n"
                        "        y: " F3 " = kiln.ops.relu(nope)\n        return (y,)\n";
  cr_assert_null(kn__graph_parse(bad_ref, NULL, 0));
  cr_assert_str_eq(kn_last_error(), "graph parse: line 4: no overload of relu takes (nope)");
  const char *sym = HEAD("L_x_: \"f32[s0][1]cpu\"") "        return (l_x_,)\n";
  cr_assert_null(kn__graph_parse(sym, NULL, 0));
  cr_assert(strstr(kn_last_error(), "line 2: expected constant sizes"), "%s", kn_last_error());
  const char *no_const = HEAD("L_x_: " F3) "        c: " F3 " = self.c\n        return (c,)\n";
  cr_assert_null(kn__graph_parse(no_const, NULL, 0));
  cr_assert_str_eq(kn_last_error(), "graph parse: line 3: no constant named 'c' was given");
}

Test(graph_passes, parse_get_attr_from_given_constants) {
  kn_tensor *c = kn_full(KN_SHAPE(3), kn_float(2.5), KN_FLOAT32);
  kn__gparse_const consts[] = {{"_tensor_constant0", c}};
  const char *text = HEAD("L_x_: " F3) "        l_x_ = L_x_\n"
                     "        _tensor_constant0: " F3 " = self._tensor_constant0\n"
                     "        add: " F3 " = kiln.ops.add(l_x_, _tensor_constant0);  l_x_ = "
                     "_tensor_constant0 = None\n"
                     "        return (add,)\n        ";
  kn__graph *g = kn__graph_parse(text, consts, 1);
  cr_assert_not_null(g, "%s", kn_last_error());
  kn_release(c); /* the graph keeps its own reference */
  kn_tensor *x = kn_full(KN_SHAPE(3), kn_float(1), KN_FLOAT32), *y;
  run(g, &x, 1, &y, 1);
  cr_assert_eq(kn_get(y, (int64_t[]){2}), 3.5);
  char *code = code_of(g);
  cr_assert_str_eq(code, text);
  free(code);
  kn_release(x);
  kn_release(y);
  kn__graph_free(g);
}

/* ---- dead code ------------------------------------------------------------------ */

Test(graph_passes, dce_keeps_side_effects) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: " F3)
      "        l_x_ = L_x_\n"
      "        relu: " F3 " = kiln.ops.relu(l_x_)\n"
      "        neg: " F3 " = kiln.ops.neg(relu);  relu = None\n"
      "        rand: " F3 " = kiln.ops.rand([3], generator = None)\n"
      "        exp: " F3 " = kiln.ops.exp(l_x_);  l_x_ = None\n"
      "        return (exp,)\n");
  kn__graph *before = kn__graph_copy(g);
  cr_assert_eq(kn__graph_eliminate_dead_code(g), 2); /* neg, then relu; rand draws */
  char *code = code_of(g);
  cr_assert_str_eq(code, HEAD("L_x_: " F3)
                   "        l_x_ = L_x_\n"
                   "        rand: " F3 " = kiln.ops.rand([3], generator = None);  rand = None\n"
                   "        exp: " F3 " = kiln.ops.exp(l_x_);  l_x_ = None\n"
                   "        return (exp,)\n        ");
  free(code);
  same_results(before, g);
  kn__graph_free(before);
  kn__graph_free(g);
}

/* ---- common subexpressions ----------------------------------------------------- */

Test(graph_passes, cse_merges_equal_calls) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: " F3 ", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_y_ = L_y_\n"
      "        relu: " F3 " = kiln.ops.relu(l_x_)\n"
      "        relu_1: " F3 " = kiln.ops.relu(l_x_)\n"
      "        add: " F3 " = kiln.ops.add(relu, l_y_)\n"
      "        add_1: " F3 " = kiln.ops.add(relu_1, l_y_)\n"
      "        add_2: " F3 " = kiln.ops.add(relu_1, l_y_, alpha = 2)\n"
      "        mul: " F3 " = kiln.ops.mul(add, add_1)\n"
      "        return (mul, add_2)\n");
  kn__graph *before = kn__graph_copy(g);
  /* relu_1 is relu, so add_1 becomes add; add_2 differs in alpha */
  cr_assert_eq(kn__graph_cse(g), 2);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  char *code = code_of(g);
  cr_assert_str_eq(code, HEAD("L_x_: " F3 ", L_y_: " F3)
                   "        l_x_ = L_x_\n"
                   "        l_y_ = L_y_\n"
                   "        relu: " F3 " = kiln.ops.relu(l_x_);  l_x_ = None\n"
                   "        add: " F3 " = kiln.ops.add(relu, l_y_)\n"
                   "        add_2: " F3 " = kiln.ops.add(relu, l_y_, alpha = 2);  relu = l_y_ = None\n"
                   "        mul: " F3 " = kiln.ops.mul(add, add);  add = None\n"
                   "        return (mul, add_2)\n        ");
  free(code);
  same_results(before, g);
  kn__graph_free(before);
  kn__graph_free(g);
}

Test(graph_passes, cse_leaves_random_and_mutated_values) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: " F3)
      "        l_x_ = L_x_\n"
      "        rand: " F3 " = kiln.ops.rand([3], generator = None)\n"
      "        rand_1: " F3 " = kiln.ops.rand([3], generator = None)\n"
      "        exp: " F3 " = kiln.ops.exp(l_x_)\n"
      "        neg: " F3 " = kiln.ops.neg(l_x_)\n"
      "        add_: " F3 " = kiln.ops.add_(l_x_, rand)\n"
      "        exp_1: " F3 " = kiln.ops.exp(l_x_)\n"
      "        neg_1: " F3 " = kiln.ops.neg(rand_1)\n"
      "        neg_2: " F3 " = kiln.ops.neg(rand_1)\n"
      "        return (exp, exp_1, neg, add_, neg_1, neg_2)\n");
  /* rand/rand_1 draw twice; exp before and after add_ see different data
  ** (x is written in place); neg_1 and neg_2 read the same value: merged */
  cr_assert_eq(kn__graph_cse(g), 1);
  cr_assert_null(kn__graph_find(g, "neg_2"));
  cr_assert_not_null(kn__graph_find(g, "rand_1"));
  cr_assert_not_null(kn__graph_find(g, "exp_1"));
  kn__graph_free(g);
}

/* ---- no-op removal ------------------------------------------------------------------ */

Test(graph_passes, remove_noops_replaces_identities) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: " F3 ", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_y_ = L_y_\n"
      "        relu: " F3 " = kiln.ops.relu(l_x_)\n"
      "        ones: " F3 " = kiln.ops.full([3], 1, dtype = kiln.float32)\n"
      "        zeros: " F3 " = kiln.ops.full([3], 0.0, dtype = kiln.float32)\n"
      "        mul: " F3 " = kiln.ops.mul(relu, ones)\n"
      "        mul_1: " F3 " = kiln.ops.mul(ones, relu)\n"
      "        add: " F3 " = kiln.ops.add(mul, zeros)\n"
      "        add_1: " F3 " = kiln.ops.add(zeros, mul_1)\n"
      "        sub: " F3 " = kiln.ops.sub(add, zeros, alpha = 3)\n"
      "        div: " F3 " = kiln.ops.div(sub, ones)\n"
      "        mul_2: " F3 " = kiln.ops.mul(div, 1)\n"
      "        add_2: " F3 " = kiln.ops.add(mul_2, 0)\n"
      "        div_1: " F3 " = kiln.ops.div(add_1, 1.0)\n"
      "        neg: " F3 " = kiln.ops.neg(add_2)\n"
      "        exp: " F3 " = kiln.ops.exp(div_1)\n"
      "        mul_3: " F3 " = kiln.ops.mul(exp, ones)\n"
      "        mul_4: " F3 " = kiln.ops.mul(l_y_, 2)\n"
      "        return (neg, mul_3, mul_4)\n");
  kn__graph *before = kn__graph_copy(g);
  /* mul, mul_1, add, add_1, sub, div, mul_2, add_2, div_1 read as relu; mul_3
  ** as exp (an output that becomes a computed value: allowed); x * 2 stays */
  cr_assert_eq(kn__graph_remove_noops(g), 10, "%s", kn_last_error());
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  char *code = code_of(g);
  cr_assert_str_eq(code, HEAD("L_x_: " F3 ", L_y_: " F3)
                   "        l_x_ = L_x_\n"
                   "        l_y_ = L_y_\n"
                   "        relu: " F3 " = kiln.ops.relu(l_x_);  l_x_ = None\n"
                   "        neg: " F3 " = kiln.ops.neg(relu)\n"
                   "        exp: " F3 " = kiln.ops.exp(relu);  relu = None\n"
                   "        mul_4: " F3 " = kiln.ops.mul(l_y_, 2);  l_y_ = None\n"
                   "        return (neg, exp, mul_4)\n        ");
  free(code);
  same_results(before, g);
  kn__graph_free(before);
  kn__graph_free(g);
}

Test(graph_passes, remove_noops_keeps_what_changes_a_value_or_an_alias) {
  const char *text =
      HEAD("L_x_: " F3 ", L_n_: \"i64[3][1]cpu\", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_n_ = L_n_\n"
      "        l_y_ = L_y_\n"
      "        ones: \"f32[2, 3][3, 1]cpu\" = kiln.ops.full([2, 3], 1, dtype = kiln.float32)\n"
      "        zeros: " F3 " = kiln.ops.full([3], 0, dtype = kiln.float32)\n"
      "        mul: \"f32[2, 3][3, 1]cpu\" = kiln.ops.mul(l_x_, ones)\n"
      "        mul_1: \"f32[3][1]cpu\" = kiln.ops.mul(l_n_, 1.0)\n"
      "        add: " F3 " = kiln.ops.add(zeros, l_x_, alpha = 2)\n"
      "        mul_2: " F3 " = kiln.ops.mul(l_x_, 1)\n"
      "        relu: " F3 " = kiln.ops.relu(l_x_)\n"
      "        mul_3: " F3 " = kiln.ops.mul(relu, 1)\n"
      "        mul_4: " F3 " = kiln.ops.mul(l_y_, 1)\n"
      "        add_: " F3 " = kiln.ops.add_(l_y_, 1)\n"
      "        neg: " F3 " = kiln.ops.neg(mul_4)\n"
      "        return (mul, mul_1, add, mul_2, relu, mul_3, neg, add_)\n";
  kn__graph *g = parse_ok(text);
  /* mul broadcasts x to [2, 3]; mul_1 promotes int64 to float32; 0 + 2 * x is
  ** not x; mul_2 would return the input itself and mul_3 the output relu;
  ** mul_4 reads y before add_ writes it */
  cr_assert_eq(kn__graph_remove_noops(g), 0, "%s", kn_last_error());
  kn__graph *ref = parse_ok(text);
  char *a = code_of(g), *b = code_of(ref);
  cr_assert_str_eq(a, b);
  free(a);
  free(b);
  kn__graph_free(ref);
  kn__graph_free(g);
}

/* ---- editing API ------------------------------------------------------------------ */

static const char *chain_text =
    HEAD("L_x_: " F3 ", L_y_: " F3)
    "        l_x_ = L_x_\n"
    "        l_y_ = L_y_\n"
    "        relu: " F3 " = kiln.ops.relu(l_x_);  l_x_ = None\n"
    "        add: " F3 " = kiln.ops.add(relu, l_y_)\n"
    "        mul: " F3 " = kiln.ops.mul(add, relu);  relu = None\n"
    "        neg: " F3 " = kiln.ops.neg(mul);  mul = None\n"
    "        sub: " F3 " = kiln.ops.sub(neg, l_y_);  neg = l_y_ = None\n"
    "        return (sub, add)\n"
    "        ";

Test(graph_passes, users_and_replace_all_uses) {
  kn__graph *g = parse_ok(chain_text);
  kn__gnode *relu = kn__graph_find(g, "relu"), *add = kn__graph_find(g, "add");
  kn__gnode *users[4];
  cr_assert_eq(kn__graph_users(g, relu, users, 4), 2);
  cr_assert_eq(users[0], add);
  cr_assert_str_eq(users[1]->name, "mul");
  cr_assert_eq(kn__graph_users(g, add, NULL, 0), 2); /* mul and the output */
  /* mul(add, relu) -> mul(add, add) */
  cr_assert_eq(kn__graph_replace_all_uses(g, (kn__gref){relu, 0}, (kn__gref){add, 0}), 1);
  cr_assert_eq(relu->nusers, 1); /* add itself */
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  /* a value cannot move to a user that comes before it */
  kn__gnode *neg = kn__graph_find(g, "neg");
  cr_assert_eq(kn__graph_replace_all_uses(g, (kn__gref){relu, 0}, (kn__gref){neg, 0}), -1);
  cr_assert_str_eq(kn_last_error(), "replace_all_uses: 'add' uses 'relu' but comes before 'neg'");
  char *code = code_of(g);
  cr_assert(strstr(code, "mul: " F3 " = kiln.ops.mul(add, add)"), "%s", code);
  free(code);
  kn__graph_free(g);
}

Test(graph_passes, insert_before_then_rewire) {
  kn__graph *g = parse_ok(chain_text);
  kn__graph *before = kn__graph_copy(g);
  /* neg(mul) -> mul * -1, built right before neg */
  kn__gnode *neg = kn__graph_find(g, "neg"), *mul = kn__graph_find(g, "mul");
  kn__gnode *prev = kn__graph_set_insert_point(g, neg);
  kn__garg args[2] = {KN_GA_T(mul), KN_GA_S(kn_int(-1))};
  kn__gnode *m1 = kn__graph_call(g, &kn__ops[KN_OP_MUL_SCALAR], 2, args, 1, neg->meta);
  cr_assert_not_null(m1, "%s", kn_last_error());
  kn__graph_set_insert_point(g, prev);
  cr_assert_eq(m1->index, neg->index - 1);
  cr_assert_eq(kn__graph_replace_all_uses(g, (kn__gref){neg, 0}, (kn__gref){m1, 0}), 1);
  cr_assert_eq(kn__graph_eliminate_dead_code(g), 1);
  char *code = code_of(g);
  cr_assert_str_eq(code, HEAD("L_x_: " F3 ", L_y_: " F3)
                   "        l_x_ = L_x_\n"
                   "        l_y_ = L_y_\n"
                   "        relu: " F3 " = kiln.ops.relu(l_x_);  l_x_ = None\n"
                   "        add: " F3 " = kiln.ops.add(relu, l_y_)\n"
                   "        mul: " F3 " = kiln.ops.mul(add, relu);  relu = None\n"
                   "        mul_1: " F3 " = kiln.ops.mul(mul, -1);  mul = None\n"
                   "        sub: " F3 " = kiln.ops.sub(mul_1, l_y_);  mul_1 = l_y_ = None\n"
                   "        return (sub, add)\n        ");
  free(code);
  same_results(before, g);
  kn__graph_free(before);
  kn__graph_free(g);
}

Test(graph_passes, copy_is_equal_and_independent) {
  kn__graph *g = parse_ok(roundtrip_text);
  kn__graph *c = kn__graph_copy(g);
  cr_assert_not_null(c, "%s", kn_last_error());
  char h1[65], h2[65];
  cr_assert_eq(kn__graph_hash(g, h1), KN_OK);
  cr_assert_eq(kn__graph_hash(c, h2), KN_OK);
  cr_assert_str_eq(h1, h2);
  char *code = code_of(c);
  cr_assert_str_eq(code, roundtrip_text);
  free(code);
  /* editing the copy leaves the original alone */
  cr_assert_eq(kn__graph_eliminate_dead_code(c), 0);
  kn__gnode *ret = kn__graph_output_node(c);
  cr_assert_eq(kn__graph_erase_node(c, ret), KN_OK);
  cr_assert_eq(kn__graph_eliminate_dead_code(c), 8); /* all but the placeholders */
  cr_assert_eq(kn__graph_num_nodes(g), 11);
  kn__graph_free(g);
  kn__graph_free(c);
}

Test(graph_passes, subgraph_of_selected_calls) {
  kn__graph *g = parse_ok(chain_text);
  kn__gnode *sel[2] = {kn__graph_find(g, "neg"), kn__graph_find(g, "mul")};
  kn__graph *s = kn__graph_subgraph(g, sel, 2);
  cr_assert_not_null(s, "%s", kn_last_error());
  char *code = code_of(s);
  cr_assert_str_eq(code, HEAD("add: " F3 ", relu: " F3)
                   "        mul: " F3 " = kiln.ops.mul(add, relu);  add = relu = None\n"
                   "        neg: " F3 " = kiln.ops.neg(mul);  mul = None\n"
                   "        return (neg,)\n        ");
  free(code);
  cr_assert_eq(kn__graph_verify(s), KN_OK, "%s", kn_last_error());
  /* runs like the same ops of the whole graph: neg(add * relu) */
  kn_tensor *in[2] = {kn_full(KN_SHAPE(3), kn_float(2), KN_FLOAT32),
                      kn_full(KN_SHAPE(3), kn_float(3), KN_FLOAT32)};
  kn_tensor *out;
  run(s, in, 2, &out, 1);
  cr_assert_eq(kn_get(out, (int64_t[]){0}), -6.0);
  kn_release(out);
  kn_release(in[0]);
  kn_release(in[1]);
  kn__gnode *ph = kn__graph_find(g, "l_x_");
  cr_assert_null(kn__graph_subgraph(g, &ph, 1));
  cr_assert_str_eq(kn_last_error(), "subgraph: node 0 is not a call node of this graph");
  kn__graph_free(s);
  kn__graph_free(g);
}

/* ---- decomposition ------------------------------------------------------------- */

Test(graph_passes, decompose_composite_ops) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: \"f32[2, 4][4, 1]cpu\", L_w_: \"f32[3, 4][4, 1]cpu\", L_b_: " F3)
      "        l_x_ = L_x_\n"
      "        l_w_ = L_w_\n"
      "        l_b_ = L_b_\n"
      "        linear: \"f32[2, 3][3, 1]cpu\" = kiln.ops.linear(l_x_, l_w_, l_b_)\n"
      "        flatten: \"f32[6][1]cpu\" = kiln.ops.flatten(linear, 0, -1)\n"
      "        relu: \"f32[6][1]cpu\" = kiln.ops.relu(flatten)\n"
      "        return (relu,)\n");
  kn__graph *before = kn__graph_copy(g);
  cr_assert_eq(kn__graph_decompose(g), 3, "%s", kn_last_error()); /* linear, flatten, reshape */
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    cr_assert(!n->opdef || !(n->opdef->flags & KN_OPF_COMPOSITE), "%s is composite", n->name);
  }
  char *code = code_of(g);
  /* as in PyTorch: linear(x, w, b) is addmm(b, x, w.t()); flatten is a
  ** reshape, which on a contiguous input is _reshape_alias */
  cr_assert_str_eq(code, HEAD("L_x_: \"f32[2, 4][4, 1]cpu\", L_w_: \"f32[3, 4][4, 1]cpu\", L_b_: " F3)
                   "        l_x_ = L_x_\n"
                   "        l_w_ = L_w_\n"
                   "        l_b_ = L_b_\n"
                   "        t: \"f32[4, 3][1, 4]cpu\" = kiln.ops.t(l_w_);  l_w_ = None\n"
                   "        addmm: \"f32[2, 3][3, 1]cpu\" = kiln.ops.addmm(l_b_, l_x_, t);  "
                   "l_b_ = l_x_ = t = None\n"
                   "        _reshape_alias: \"f32[6][1]cpu\" = kiln.ops._reshape_alias(addmm, [6], "
                   "[1]);  addmm = None\n"
                   "        relu: \"f32[6][1]cpu\" = kiln.ops.relu(_reshape_alias);  "
                   "_reshape_alias = None\n"
                   "        return (relu,)\n        ");
  free(code);
  same_results(before, g);
  kn__graph_free(before);
  kn__graph_free(g);
}

/* ---- pattern rewriter ------------------------------------------------------------- */

Test(graph_passes, replace_pattern) {
  kn__graph *g = parse_ok(
      HEAD("L_x_: " F3 ", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_y_ = L_y_\n"
      "        add: " F3 " = kiln.ops.add(l_x_, l_x_)\n"
      "        add_1: " F3 " = kiln.ops.add(l_x_, l_y_)\n"
      "        neg: " F3 " = kiln.ops.neg(add_1)\n"
      "        neg_1: " F3 " = kiln.ops.neg(neg)\n"
      "        mul: " F3 " = kiln.ops.mul(add, neg_1)\n"
      "        add_2: " F3 " = kiln.ops.add(mul, mul)\n"
      "        return (add_2, neg)\n");
  kn__graph *before = kn__graph_copy(g);
  /* x + x -> x * 2 (sizes in a pattern do not matter) */
  kn__graph *p = parse_ok(HEAD("a: \"f32[1][1]cpu\"")
                          "        add: \"f32[1][1]cpu\" = kiln.ops.add(a, a)\n"
                          "        return (add,)\n");
  kn__graph *r = parse_ok(HEAD("a: \"f32[1][1]cpu\"")
                          "        mul: \"f32[1][1]cpu\" = kiln.ops.mul(a, 2)\n"
                          "        return (mul,)\n");
  cr_assert_eq(kn__graph_replace_pattern(g, p, r), 2, "%s", kn_last_error());
  /* neg(neg(a)) -> a; the inner neg is also returned, so it stays */
  kn__graph *p2 = parse_ok(HEAD("a: " F3) "        neg: " F3 " = kiln.ops.neg(a)\n"
                           "        neg_1: " F3 " = kiln.ops.neg(neg)\n        return (neg_1,)\n");
  kn__graph *r2 = parse_ok(HEAD("a: " F3) "        return (a,)\n");
  cr_assert_eq(kn__graph_replace_pattern(g, p2, r2), 1, "%s", kn_last_error());
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  char *code = code_of(g);
  cr_assert_str_eq(code, HEAD("L_x_: " F3 ", L_y_: " F3)
                   "        l_x_ = L_x_\n"
                   "        l_y_ = L_y_\n"
                   "        mul_1: " F3 " = kiln.ops.mul(l_x_, 2)\n"
                   "        add_1: " F3 " = kiln.ops.add(l_x_, l_y_);  l_x_ = l_y_ = None\n"
                   "        neg: " F3 " = kiln.ops.neg(add_1)\n"
                   "        mul: " F3 " = kiln.ops.mul(mul_1, add_1);  mul_1 = add_1 = None\n"
                   "        mul_2: " F3 " = kiln.ops.mul(mul, 2);  mul = None\n"
                   "        return (mul_2, neg)\n        ");
  free(code);
  same_results(before, g);
  /* a replacement that contains its pattern is not rewritten again */
  kn__graph *p3 = parse_ok(HEAD("a: " F3) "        exp: " F3 " = kiln.ops.exp(a)\n"
                           "        return (exp,)\n");
  kn__graph *r3 = parse_ok(HEAD("a: " F3) "        exp: " F3 " = kiln.ops.exp(a)\n"
                           "        relu: " F3 " = kiln.ops.relu(exp)\n        return (relu,)\n");
  kn__graph *h = parse_ok(HEAD("L_x_: " F3) "        l_x_ = L_x_\n"
                          "        exp: " F3 " = kiln.ops.exp(l_x_)\n"
                          "        exp_1: " F3 " = kiln.ops.exp(exp)\n        return (exp_1,)\n");
  cr_assert_eq(kn__graph_replace_pattern(h, p3, r3), 2, "%s", kn_last_error());
  cr_assert_eq(kn__graph_op_count(h), 4); /* relu(exp(relu(exp(x)))) */
  kn__graph_free(h);
  kn__graph_free(p3);
  kn__graph_free(r3);
  /* patterns hold pure ops */
  kn__graph *bad = parse_ok(HEAD("a: " F3) "        add_: " F3 " = kiln.ops.add_(a, a)\n"
                            "        return (add_,)\n");
  cr_assert_eq(kn__graph_replace_pattern(g, bad, r), -1);
  cr_assert_str_eq(kn_last_error(), "replace_pattern: 'add_': patterns hold pure ops only");
  kn__graph_free(bad);
  kn__graph_free(p);
  kn__graph_free(r);
  kn__graph_free(p2);
  kn__graph_free(r2);
  kn__graph_free(before);
  kn__graph_free(g);
}

/* ---- typed arguments ---------------------------------------------------------------- */

Test(graph_passes, enum_arguments_print_and_parse_as_names) {
  const char *text =
      HEAD("L_x_: " F3 ", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_y_ = L_y_\n"
      "        gelu: " F3 " = kiln.ops.gelu(l_x_, approximate = 'tanh')\n"
      "        gelu_1: " F3 " = kiln.ops.gelu(l_x_);  l_x_ = None\n"
      "        mse_loss: \"f32[][]cpu\" = kiln.ops.mse_loss(gelu, l_y_, Sum);  gelu = None\n"
      "        mse_loss_1: \"f32[][]cpu\" = kiln.ops.mse_loss(gelu_1, l_y_, Mean);  "
      "gelu_1 = l_y_ = None\n"
      "        return (mse_loss, mse_loss_1)\n"
      "        ";
  kn__graph *g = parse_ok(text);
  /* kiln passes the ints: gelu's approximate 1 = tanh, ATen's reduction 2 = Sum */
  const kn__gnode *gelu = kn__graph_find(g, "gelu"), *mse = kn__graph_find(g, "mse_loss");
  cr_assert_eq(gelu->args[1].kind, KN__GA_INT);
  cr_assert_eq(gelu->args[1].u.i.c, 1);
  cr_assert_eq(kn__graph_find(g, "gelu_1")->args[1].u.i.c, 0); /* the default, 'none' */
  cr_assert_eq(mse->args[2].u.i.c, 2);
  char *code = code_of(g);
  cr_assert_str_eq(code, text);
  free(code);
  kn__graph_free(g);
}

/* div's rounding mode (kn_rounding_mode 1 = trunc, 2 = floor) is a `str?`
** in the schema: it prints, parses and verifies as the name. */
Test(graph_passes, rounding_mode_prints_and_parses_as_a_name) {
  const char *text =
      HEAD("L_x_: " F3 ", L_y_: " F3)
      "        l_x_ = L_x_\n"
      "        l_y_ = L_y_\n"
      "        div: " F3 " = kiln.ops.div(l_x_, l_y_, rounding_mode = 'trunc')\n"
      "        div_1: " F3 " = kiln.ops.div(l_x_, l_y_, rounding_mode = 'floor');  "
      "l_x_ = l_y_ = None\n"
      "        return (div, div_1)\n"
      "        ";
  kn__graph *g = parse_ok(text);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__graph_find(g, "div")->args[2].u.i.c, 1);
  cr_assert_eq(kn__graph_find(g, "div_1")->args[2].u.i.c, 2);
  char *code = code_of(g);
  cr_assert_str_eq(code, text);
  free(code);
  kn__graph_free(g);
}

Test(graph_passes, verifier_checks_arguments_against_the_schema) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = {.kind = KN__V_TENSOR, .dtype = KN_FLOAT32, .ndim = 1,
                 .sizes = {kn__sym_const(3)}, .strides = {kn__sym_const(1)}};
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg bad[1] = {KN_GA_D(1.5)};
  kn__gnode *r = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, bad, 1, &m);
  kn__gref out = {r, 0};
  kn__graph_output(g, 1, &out);
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "graph verify: node 'relu': argument 0 (self) of relu does not "
                                    "fit the schema relu(Tensor self) -> Tensor: got 1.5");
  kn__graph_free(g);
  g = kn__graph_new();
  x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg extra[2] = {KN_GA_T(x), KN_GA_T(x)};
  r = kn__graph_call(g, &kn__ops[KN_OP_RELU], 2, extra, 1, &m);
  out = (kn__gref){r, 0};
  kn__graph_output(g, 1, &out);
  cr_assert_eq(kn__graph_verify(g), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "graph verify: node 'relu' calls relu with 2 arguments; its schema has 1");
  kn__graph_free(g);
}
