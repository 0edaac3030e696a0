/*
** test_graph_print.c: golden tests of the graph printers against literal
** text in the forms the spec and PyTorch's logs show: print_readable code
** (graph_code / dynamo_output_graph payload), the tabulate table (graph),
** graph_sizes with symbols and their concrete values, the
** dynamo_output_graph "sizes" JSON, and Python's float repr.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "graph/graph_int.h"
#include "graph_util.h"
#include "kiln/kiln.h"

#define F32 "\"f32[1000, 1000][1000, 1]cpu\""

Test(graph_print, example_fn_code) {
  kn__graph *g = example_graph(1000);
  char *code = kn__graph_code(g, NULL);
  const char *expect =
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, L_a_: " F32 "):\n"
      "        l_a_ = L_a_\n"
      "        \n"
      "         # File: " GRAPH_SRC ":3 in example_fn, code: kn_tensor *output = kn_mul(a, "
      "kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));\n"
      "        ones: " F32 " = kiln.ops.full([1000, 1000], 1, dtype = kiln.float32)\n"
      "        output: " F32 " = kiln.ops.mul(l_a_, ones);  l_a_ = ones = None\n"
      "        \n"
      "         # File: " GRAPH_SRC ":4 in example_fn, code: output = kn_add(output, "
      "kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));\n"
      "        ones_1: " F32 " = kiln.ops.full([1000, 1000], 1, dtype = kiln.float32)\n"
      "        output_1: " F32 " = kiln.ops.add(output, ones_1);  output = ones_1 = None\n"
      "        return (output_1,)\n"
      "        ";
  cr_assert_str_eq(code, expect);
  free(code);
  kn__gprint_opts plain = {false, false};
  code = kn__graph_code(g, &plain);
  cr_assert(strstr(code, "def forward(self, L_a_: \"f32[1000, 1000]\"):\n"), "%s", code);
  free(code);
  kn__graph_free(g);
}

Test(graph_print, traced_graph_wrappers) {
  char *s = kn__graph_format_traced("===== __compiled_fn_1 =====\n", "/tmp/x.c", "BODY");
  cr_assert_str_eq(s, "TRACED GRAPH\n ===== __compiled_fn_1 =====\n /tmp/x.c BODY\n");
  free(s);
  s = kn__graph_format_traced("__compiled_fn_1", "/tmp/x.c", "TABLE");
  cr_assert_str_eq(s, "TRACED GRAPH\n __compiled_fn_1 /tmp/x.c TABLE\n");
  free(s);
}

Test(graph_print, example_fn_tabular) {
  kn__graph *g = example_graph(1000);
  char *t = kn__graph_tabular(g);
  const char *expect =
      "opcode         name      target         args               kwargs\n"
      "-------------  --------  -------------  -----------------  -----------------------\n"
      "placeholder    l_a_      L_a_           ()                 {}\n"
      "call_function  ones      kiln.ops.full  ([1000, 1000], 1)  {'dtype': kiln.float32}\n"
      "call_function  output    kiln.ops.mul   (l_a_, ones)       {}\n"
      "call_function  ones_1    kiln.ops.full  ([1000, 1000], 1)  {'dtype': kiln.float32}\n"
      "call_function  output_1  kiln.ops.add   (output, ones_1)   {}\n"
      "output         output_2  output         ((output_1,),)     {}";
  cr_assert_str_eq(t, expect);
  free(t);
  kn__graph_free(g);
}

Test(graph_print, example_fn_sizes_and_json) {
  kn__graph *g = example_graph(1000);
  char *s = kn__graph_sizes(g, "__compiled_fn_1");
  cr_assert_str_eq(s, "TRACED GRAPH TENSOR SIZES\n"
                      "===== __compiled_fn_1 =====\n"
                      "l_a_: (1000, 1000)\n"
                      "ones: (1000, 1000)\n"
                      "output: (1000, 1000)\n"
                      "ones_1: (1000, 1000)\n"
                      "output_1: (1000, 1000)\n");
  free(s);
  json_t *j = kn__graph_sizes_json(g);
  char *txt = json_dumps(j, 0);
  /* seed 001 (test_example_fn with two adds): the dynamo_output_graph metadata */
  cr_assert_str_eq(txt, "{\"sizes\": {\"l_a_\": [1000, 1000], \"ones\": [1000, 1000], "
                        "\"output\": [1000, 1000], \"ones_1\": [1000, 1000], "
                        "\"output_1\": [1000, 1000]}}");
  free(txt);
  json_decref(j);
  kn__graph_free(g);
}

/* a @ b with dynamic sizes, as seed test_graph_sizes_dynamic: s0..s3 exist,
** s2 was unified with s1. */
static kn__graph *dynamic_matmul(kn__shape_env *env) {
  kn_sym s[4];
  kn__gnode *mm;
  kn__vmeta mo;
  kn__graph *g = dyn_matmul_graph(env, s, &mm, &mo);
  kn__gref r = {mm, 0};
  kn__graph_output(g, 1, &r);
  return g;
}

Test(graph_print, dynamic_sizes_with_symbols) {
  kn__graph *g = dynamic_matmul(kn__shape_env_new());
  char *s = kn__graph_sizes(g, "__compiled_fn_1");
  cr_assert_str_eq(s, "TRACED GRAPH TENSOR SIZES\n"
                      "===== __compiled_fn_1 =====\n"
                      "l_a_: (s0, s1)\n"
                      "l_a_ (concrete): (5, 10)\n"
                      "l_b_: (s1, s3)\n"
                      "l_b_ (concrete): (10, 15)\n"
                      "matmul: (s0, s3)\n"
                      "matmul (concrete): (5, 15)\n");
  free(s);
  json_t *j = kn__graph_sizes_json(g);
  char *txt = json_dumps(j, 0);
  cr_assert_str_eq(txt, "{\"sizes\": {\"l_a_\": [\"s0\", \"s1\"], \"l_b_\": [\"s1\", \"s3\"], "
                        "\"matmul\": [\"s0\", \"s3\"]}}");
  free(txt);
  json_decref(j);
  char *code = kn__graph_code(g, NULL);
  cr_assert_str_eq(code,
                   "class GraphModule(torch.nn.Module):\n"
                   "    def forward(self, L_a_: \"f32[s0, s1][s1, 1]cpu\", "
                   "L_b_: \"f32[s1, s3][s3, 1]cpu\"):\n"
                   "        l_a_ = L_a_\n"
                   "        l_b_ = L_b_\n"
                   "        matmul: \"f32[s0, s3][s3, 1]cpu\" = kiln.ops.matmul(l_a_, l_b_);  "
                   "l_a_ = l_b_ = None\n"
                   "        return (matmul,)\n"
                   "        ");
  free(code);
  kn__graph_free(g);
}

Test(graph_print, getitem_get_attr_scalars_and_missing_stacks) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 2, (int64_t[]){4, 3});
  kn__vmeta h[2] = {tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3}), tmeta(KN_FLOAT32, 2, (int64_t[]){2, 3})};
  h[1].offset = kn__sym_const(6);
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg sargs[3] = {KN_GA_T(x), KN_GA_I(2), KN_GA_I(0)};
  kn__gnode *sp = kn__graph_call(g, &kn__ops[KN_OP_SPLIT], 3, sargs, 2, h);
  kn__gframe fr = {"/nonexistent/user.c", 12, "f"};
  kn__graph_node_set_stack(sp, &fr, 1, NULL); /* unreadable file: empty code */
  kn__gref g0 = kn__graph_value(g, sp, 0), g1 = kn__graph_value(g, sp, 1);
  kn__graph_node_set_stack(g0.node, &fr, 1, NULL);
  kn__graph_node_set_stack(g1.node, &fr, 1, NULL);
  kn_tensor *c = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn__gnode *k = kn__graph_get_attr(g, "_tensor_constant0", c);
  kn_release(c);
  kn__garg a1[3] = {KN_GA_REF(g0), KN_GA_REF(g1), KN_GA_S(kn_float(0.5))};
  kn__gnode *ad = kn__graph_call(g, &kn__ops[KN_OP_ADD], 3, a1, 1, &h[0]);
  kn__garg a2[2] = {KN_GA_T(ad), KN_GA_T(k)};
  kn__gnode *mu = kn__graph_call(g, &kn__ops[KN_OP_MUL], 2, a2, 1, &h[0]);
  kn__gframe fr2 = {"/nonexistent/user.c", 14, "f"};
  kn__graph_node_set_stack(mu, &fr2, 1, "y = kn_mul(s, c);");
  kn__garg a3[2] = {KN_GA_T(mu), KN_GA_S(kn_float(1e-05))};
  kn__gnode *as = kn__graph_call(g, &kn__ops[KN_OP_ADD_SCALAR], 2, a3, 1, &h[0]);
  kn__gref outs[2] = {{as, 0}, {x, 0}};
  kn__graph_output(g, 2, outs);
  cr_assert_eq(kn__graph_verify(g), KN_OK, "%s", kn_last_error());
  char *code = kn__graph_code(g, NULL);
  cr_assert_str_eq(
      code,
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, L_x_: \"f32[4, 3][3, 1]cpu\"):\n"
      "        l_x_ = L_x_\n"
      "        \n"
      "         # File: /nonexistent/user.c:12 in f, code: \n"
      "        split = kiln.ops.split(l_x_, 2, 0)\n"
      "        getitem: \"f32[2, 3][3, 1]cpu\" = split[0]\n"
      "        getitem_1: \"f32[2, 3][3, 1]cpu\" = split[1];  split = None\n"
      "        \n"
      "        # No stacktrace found for following nodes\n"
      "        _tensor_constant0: \"f32[3][1]cpu\" = self._tensor_constant0\n"
      "        add: \"f32[2, 3][3, 1]cpu\" = kiln.ops.add(getitem, getitem_1, alpha = 0.5);  "
      "getitem = getitem_1 = None\n"
      "        \n"
      "         # File: /nonexistent/user.c:14 in f, code: y = kn_mul(s, c);\n"
      "        mul: \"f32[2, 3][3, 1]cpu\" = kiln.ops.mul(add, _tensor_constant0);  "
      "add = _tensor_constant0 = None\n"
      "        \n"
      "        # No stacktrace found for following nodes\n"
      "        add_1: \"f32[2, 3][3, 1]cpu\" = kiln.ops.add(mul, 1e-05);  mul = None\n"
      "        return (add_1, l_x_)\n"
      "        ");
  free(code);
  char *t = kn__graph_tabular(g);
  cr_assert_str_eq(t,
      "opcode         name               target             args                      kwargs\n"
      "-------------  -----------------  -----------------  ------------------------  --------------\n"
      "placeholder    l_x_               L_x_               ()                        {}\n"
      "call_function  split              kiln.ops.split     (l_x_, 2, 0)              {}\n"
      "call_function  getitem            getitem            (split, 0)                {}\n"
      "call_function  getitem_1          getitem            (split, 1)                {}\n"
      "get_attr       _tensor_constant0  _tensor_constant0  ()                        {}\n"
      "call_function  add                kiln.ops.add       (getitem, getitem_1)      {'alpha': 0.5}\n"
      "call_function  mul                kiln.ops.mul       (add, _tensor_constant0)  {}\n"
      "call_function  add_1              kiln.ops.add       (mul, 1e-05)              {}\n"
      "output         output             output             ((add_1, l_x_),)          {}");
  free(t);
  kn__graph_free(g);
}

Test(graph_print, unused_values_are_deleted_at_once) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 1, (int64_t[]){3});
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg a[1] = {KN_GA_T(x)};
  kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, a, 1, &m); /* unused */
  kn__gnode *r = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, a, 1, &m);
  kn__gref o = {r, 0};
  kn__graph_output(g, 1, &o);
  char *code = kn__graph_code(g, NULL);
  cr_assert_str_eq(code, "class GraphModule(torch.nn.Module):\n"
                         "    def forward(self, L_x_: \"f32[3][1]cpu\"):\n"
                         "        l_x_ = L_x_\n"
                         "        relu: \"f32[3][1]cpu\" = kiln.ops.relu(l_x_);  relu = None\n"
                         "        relu_1: \"f32[3][1]cpu\" = kiln.ops.relu(l_x_);  l_x_ = None\n"
                         "        return (relu_1,)\n"
                         "        ");
  free(code);
  kn__graph_free(g);
}

Test(graph_print, python_float_repr) {
  static const struct { double v; const char *s; } cases[] = {
      {0.1, "0.1"},         {1e-05, "1e-05"},     {1.0, "1.0"},
      {1e16, "1e+16"},      {123456789.0, "123456789.0"},
      {0.0001, "0.0001"},   {-2.5, "-2.5"},       {1.5e300, "1.5e+300"},
      {5e-324, "5e-324"},   {0.0, "0.0"},         {1e15, "1000000000000000.0"},
      {2.0 / 3.0, "0.6666666666666666"},          {-0.0, "-0.0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn__sb sb = KN__SB_INIT;
    kn__py_float(&sb, cases[i].v);
    cr_assert_str_eq(kn__sb_cstr(&sb), cases[i].s);
    kn__sb_fini(&sb);
  }
  kn__sb sb = KN__SB_INIT;
  kn__py_float(&sb, 1.0 / 0.0);
  kn__sb_putc(&sb, ' ');
  kn__py_float(&sb, -1.0 / 0.0);
  cr_assert_str_eq(kn__sb_cstr(&sb), "inf -inf");
  kn__sb_fini(&sb);
}

Test(graph_print, schema_argument_names) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int n = kn__schema_args("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", sa);
  cr_assert_eq(n, 3);
  cr_assert(!sa[0].kwonly && !sa[1].kwonly && sa[2].kwonly);
  cr_assert_eq(strncmp(sa[2].name, "alpha", 5), 0);
  cr_assert_eq(sa[2].name_len, 5);
  cr_assert_eq(strncmp(sa[2].def, "1", 1), 0);
  n = kn__schema_args("split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]", sa);
  cr_assert_eq(n, 3);
  cr_assert_eq(strncmp(sa[0].name, "self", 4), 0);
  cr_assert_eq(sa[0].name_len, 4);
  cr_assert(!sa[2].kwonly);
  n = kn__schema_args("f(int[] dims=[0, 1], *, ScalarType? dtype=None) -> Tensor", sa);
  cr_assert_eq(n, 2);
  cr_assert_eq(sa[0].def_len, 6);
  cr_assert_eq(strncmp(sa[1].def, "None", 4), 0);
}

Test(graph_print, a_value_used_twice_is_deleted_once) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT64, 1, (int64_t[]){2});
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg a[2] = {KN_GA_T(x), KN_GA_T(x)};
  kn__gnode *mu = kn__graph_call(g, &kn__ops[KN_OP_MUL], 2, a, 1, &m);
  kn__gref o[2] = {{mu, 0}, {mu, 0}};
  kn__graph_output(g, 2, o);
  char *code = kn__graph_code(g, NULL);
  cr_assert_str_eq(code, "class GraphModule(torch.nn.Module):\n"
                         "    def forward(self, L_x_: \"f64[2][1]cpu\"):\n"
                         "        l_x_ = L_x_\n"
                         "        mul: \"f64[2][1]cpu\" = kiln.ops.mul(l_x_, l_x_);  l_x_ = None\n"
                         "        return (mul, mul)\n"
                         "        ");
  free(code);
  kn__graph_free(g);
}

Test(graph_print, empty_graph_passes) {
  kn__graph *g = kn__graph_new();
  kn__graph_output(g, 0, NULL);
  char *code = kn__graph_code(g, NULL);
  cr_assert_str_eq(code, "class GraphModule(torch.nn.Module):\n"
                         "    def forward(self):\n"
                         "        return ()\n"
                         "        ");
  free(code);
  kn__graph_free(g);
}

Test(graph_print, inlined_calls_show_the_innermost_frame) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 1, (int64_t[]){2});
  kn__gnode *x = kn__graph_placeholder(g, "L['x']", &m);
  kn__garg a[1] = {KN_GA_T(x)};
  kn__gnode *r = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, a, 1, &m);
  cr_assert_eq(kn__gnode_inline_depth(r), -1);
  kn__gframe st[3] = {{"/x/main.c", 40, "train_step"}, {"/x/model.c", 7, "forward"},
                      {GRAPH_SRC, 5, "example_fn"}};
  cr_assert_eq(kn__graph_node_set_stack(r, st, 3, NULL), KN_OK);
  cr_assert_eq(kn__gnode_inline_depth(r), 2);
  cr_assert_str_eq(r->stack[0].func, "train_step");
  cr_assert(r->stack[2].file != st[2].file, "frames are copied");
  kn__gref o = {r, 0};
  kn__graph_output(g, 1, &o);
  char *code = kn__graph_code(g, NULL);
  cr_assert(strstr(code, "\n         # File: " GRAPH_SRC ":5 in example_fn, code: return output;\n"
                         "        relu: "),
            "%s", code);
  free(code);
  kn__graph_free(g);
}
