/*
** test_autograd.c: the eager autograd engine on small graphs with literal
** expected gradients (worked out by hand in the comments): accumulation,
** diamonds, .grad across calls, retain_graph, create_graph (second order),
** torch.autograd.grad semantics, sequence numbers and grad_fn names.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "autograd/autograd.h"
#include "kiln/kiln.h"

static int64_t live0;
static void init(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void fini(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(engine, .init = init, .fini = fini);

/* A float64 leaf that requires grad. */
static kn_tensor *leaf(int nd, const int64_t *sz, const double *v) {
  kn_tensor *t = kn_from_doubles(v, nd, sz);
  cr_assert_not_null(t, "%s", kn_last_error());
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  return t;
}
static kn_tensor *val(int nd, const int64_t *sz, const double *v) {
  return kn_from_doubles(v, nd, sz);
}

static void expect(const kn_tensor *t, int n, const double *want) {
  cr_assert_not_null(t, "tensor is NULL: %s", kn_last_error());
  cr_assert_eq(kn_numel(t), n);
  const double *d = kn_data(t);
  cr_assert(kn_is_contiguous(t));
  for (int i = 0; i < n; i++)
    cr_assert_float_eq(d[i], want[i], 1e-12, "element %d: got %g, want %g", i, d[i], want[i]);
}

/* f = x^T x (x used twice: through t() and directly): grad 2x. */
Test(engine, used_twice_accumulates) {
  kn_tensor *x = leaf(KN_SHAPE(3, 1), (double[]){1, -2, 3});
  kn_tensor *f = kn_mm(kn_t(x), x);
  cr_assert_str_eq(kn_grad_fn_name(f), "MmBackward0");
  cr_assert_not(kn_is_leaf(f));
  cr_assert(kn_requires_grad(f));
  cr_assert_eq(kn_backward(f, NULL), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 3, (double[]){2, -4, 6});
}

/* a = M x, b = N x, y = a . b: dy/dx = M^T b + N^T a.
** M = [[1,2],[3,4]], N = [[0,1],[1,0]], x = [1,2]: a = [5,11], b = [2,1],
** M^T b = [5,8], N^T a = [11,5] -> [16,13]. */
Test(engine, diamond) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *M = val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *N = val(KN_SHAPE(2, 2), (double[]){0, 1, 1, 0});
  kn_tensor *a = kn_mm(M, x), *b = kn_mm(N, x);
  kn_tensor *y = kn_mm(kn_t(a), b);
  cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){16, 13});
  cr_assert_null(kn_grad(M), "M does not require grad");
  cr_assert_null(kn_grad(a), "non-leaves do not keep .grad by default");
}

/* .grad accumulates across backward calls; retain_graph allows the second. */
Test(engine, grad_accumulates_across_calls_with_retain_graph) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *f = kn_mm(kn_t(x), x);
  cr_assert_eq(kn_backward_ex(f, NULL, true, false), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){2, 4});
  cr_assert_eq(kn_backward_ex(f, NULL, false, false), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){4, 8});
  /* a fresh graph accumulates too */
  kn_tensor *g = kn_mm(kn_t(x), x);
  cr_assert_eq(kn_backward(g, NULL), KN_OK);
  expect(kn_grad(x), 2, (double[]){6, 12});
  kn_set_grad(x, NULL);
  cr_assert_null(kn_grad(x));
}

/* An explicit grad_output scales the result; the leaf may be the root. */
Test(engine, explicit_grad_output_and_leaf_root) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *A = val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *y = kn_mm(A, x); /* dy/dx with v: A^T v */
  kn_tensor *v = val(KN_SHAPE(2, 1), (double[]){1, -1});
  cr_assert_eq(kn_backward(y, v), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){-2, -2});
  /* backward of a leaf puts the gradient into its own .grad (a copy) */
  kn_tensor *z = leaf(KN_SHAPE(2), (double[]){5, 6});
  kn_tensor *w = val(KN_SHAPE(2), (double[]){0.5, 0.25});
  cr_assert_eq(kn_backward(z, w), KN_OK, "%s", kn_last_error());
  expect(kn_grad(z), 2, (double[]){0.5, 0.25});
  cr_assert_not(kn_same_storage(kn_grad(z), w), ".grad must not alias the caller's tensor");
}

/* kn_autograd_grad: no .grad side effect, gradients w.r.t. non-leaves,
** several inputs, pruning of unrelated branches. */
Test(engine, autograd_grad_semantics) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *A = leaf(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *y = kn_mm(A, x);                    /* [5, 11] */
  kn_tensor *f = kn_mm(kn_t(y), y);              /* |y|^2 */
  kn_tensor *g[3];
  kn_tensor *ins[3] = {x, y, A};
  cr_assert_eq(kn_autograd_grad(&f, 1, ins, 3, NULL, true, false, false, g), KN_OK, "%s",
               kn_last_error());
  expect(g[1], 2, (double[]){10, 22});           /* 2y */
  expect(g[0], 2, (double[]){1 * 10 + 3 * 22, 2 * 10 + 4 * 22}); /* A^T 2y */
  expect(g[2], 4, (double[]){10, 20, 22, 44});   /* 2y x^T */
  cr_assert_null(kn_grad(x), "grad() must not touch .grad");
  cr_assert_null(kn_grad(A));
  /* only the captured input: the graph is pruned, x's branch never runs */
  kn_tensor *gy;
  cr_assert_eq(kn_autograd_grad(&f, 1, &y, 1, NULL, false, false, false, &gy), KN_OK);
  expect(gy, 2, (double[]){10, 22});
}

Test(engine, autograd_grad_unused_inputs) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *u = leaf(KN_SHAPE(2, 1), (double[]){3, 4});
  kn_tensor *f = kn_mm(kn_t(x), x);
  kn_tensor *ins[2] = {x, u}, *g[2] = {NULL, NULL};
  cr_assert_eq(kn_autograd_grad(&f, 1, ins, 2, NULL, true, false, false, g), KN_EAUTOGRAD);
  cr_assert_str_eq(kn_last_error(),
                   "One of the differentiated Tensors appears to not have been used in the "
                   "graph. Set allow_unused=True if this is the desired behavior.");
  cr_assert_null(g[0], "no result on error");
  cr_assert_eq(kn_autograd_grad(&f, 1, ins, 2, NULL, true, false, true, g), KN_OK);
  expect(g[0], 2, (double[]){2, 4});
  cr_assert_null(g[1], "allow_unused: unused input gets NULL");
  kn_tensor *c = val(KN_SHAPE(2, 1), (double[]){1, 1});
  cr_assert_eq(kn_autograd_grad(&f, 1, &c, 1, NULL, true, false, true, g), KN_EAUTOGRAD);
  cr_assert_str_eq(kn_last_error(), "One of the differentiated Tensors does not require grad");
}

/* Several outputs with their grad_outputs, summed. */
Test(engine, several_outputs) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *A = val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *outs[2] = {kn_mm(A, x), kn_mm(kn_t(x), x)};
  kn_tensor *gos[2] = {val(KN_SHAPE(2, 1), (double[]){1, 0}), NULL};
  kn_tensor *g;
  cr_assert_eq(kn_autograd_grad(outs, 2, &x, 1, gos, false, false, false, &g), KN_OK, "%s",
               kn_last_error());
  expect(g, 2, (double[]){1 + 2, 2 + 4}); /* A^T e0 + 2x */
}

/* f(x) = x^T A x: g = (A + A^T) x with history; d(g . v)/dx = (A + A^T) v.
** A = [[1,2],[3,4]], x = [1,2], v = [1,1]: g = [12, 21], second = [7, 13]. */
Test(engine, create_graph_second_order) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *A = val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *f = kn_mm(kn_t(x), kn_mm(A, x));
  kn_tensor *g;
  cr_assert_eq(kn_autograd_grad(&f, 1, &x, 1, NULL, true, true, false, &g), KN_OK, "%s",
               kn_last_error());
  expect(g, 2, (double[]){12, 21});
  cr_assert(kn_requires_grad(g), "create_graph: the gradient has history");
  cr_assert_not_null(kn_grad_fn_name(g));
  kn_tensor *v = val(KN_SHAPE(2, 1), (double[]){1, 1});
  kn_tensor *h;
  cr_assert_eq(kn_autograd_grad(&g, 1, &x, 1, &v, true, false, false, &h), KN_OK, "%s",
               kn_last_error());
  expect(h, 2, (double[]){7, 13});
  /* backward with create_graph: .grad itself has history */
  cr_assert_eq(kn_backward_ex(f, NULL, false, true), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){12, 21});
  cr_assert(kn_requires_grad(kn_grad(x)));
  kn_set_grad(x, NULL); /* drop the grad's graph (it refers back to x) */
}

/* Without create_graph gradients carry no history. */
Test(engine, plain_grads_have_no_history) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *f = kn_mm(kn_t(x), x);
  kn_tensor *g;
  cr_assert_eq(kn_autograd_grad(&f, 1, &x, 1, NULL, false, false, false, &g), KN_OK);
  cr_assert_not(kn_requires_grad(g));
  cr_assert_null(kn_grad_fn_name(g));
}

Test(engine, retain_grad_on_non_leaf) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *A = val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *y = kn_mm(A, x);
  cr_assert_eq(kn_retain_grad(y), KN_OK);
  cr_assert_eq(kn_retain_grad(x), KN_OK, "no-op on a leaf");
  kn_tensor *f = kn_mm(kn_t(y), y);
  cr_assert_eq(kn_backward(f, NULL), KN_OK, "%s", kn_last_error());
  expect(kn_grad(y), 2, (double[]){10, 22});
  expect(kn_grad(x), 2, (double[]){76, 108});
  cr_assert_eq(kn_retain_grad(A), KN_EAUTOGRAD);
  cr_assert_str_eq(kn_last_error(), "can't retain_grad on Tensor that has requires_grad=False");
}

/* A retained non-leaf that dies before its graph does not dangle. */
Test(engine, retained_tensor_dies_before_graph) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_scope_begin();
  kn_tensor *y = kn_t(x);
  cr_assert_eq(kn_retain_grad(y), KN_OK);
  kn_tensor *f = kn_retain(kn_mm(y, x));
  kn_scope_end(); /* y is gone, its node lives on through f */
  cr_assert_eq(kn_backward(f, NULL), KN_OK, "%s", kn_last_error());
  expect(kn_grad(x), 2, (double[]){2, 4});
  kn_release(f);
}

Test(engine, sequence_numbers_and_names) {
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  kn_tensor *a = kn_t(x);
  kn_tensor *b = kn_mm(a, x);
  kn_tensor *c = kn_mm(b, b);
  cr_assert_str_eq(kn_grad_fn_name(a), "TBackward0");
  cr_assert_str_eq(kn_grad_fn_name(b), "MmBackward0");
  cr_assert_null(kn_grad_fn_name(x));
  cr_assert_lt(a->grad_fn->seq, b->grad_fn->seq);
  cr_assert_lt(b->grad_fn->seq, c->grad_fn->seq);
  /* edges: mm(a, x) -> (TBackward0, AccumulateGrad) */
  kn__node *n = b->grad_fn;
  cr_assert_eq(n->nin, 2);
  cr_assert_eq(n->next[0].fn, a->grad_fn);
  cr_assert_str_eq(kn__node_name(n->next[1].fn), "AccumulateGrad");
  cr_assert_eq(n->next[1].fn, a->grad_fn->next[0].fn, "one accumulator per leaf");
  cr_assert_eq(n->next[1].fn->seq, UINT64_MAX);
  cr_assert_eq(c->grad_fn->next[0].fn, n);
  cr_assert_eq(c->grad_fn->next[1].fn, n);
}

/* Ready order: highest sequence number first among ready nodes. */
static int order_len;
static const char *order_seen[8];
static kn_status record_order(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                              const bool *needs, int nin, bool cg) {
  (void)go, (void)nout, (void)cg;
  if (order_len < 8) order_seen[order_len++] = ctx;
  for (int k = 0; k < nin; k++)
    if (needs[k]) gi[k] = go[0];
  return KN_OK;
}

Test(engine, custom_nodes_run_in_dependency_then_sequence_order) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *p = kn_detach(x), *q = kn_detach(x), *r = kn_detach(x);
  /* p = P(x), q = Q(x) (created later: higher seq), r = R(p, q) */
  static char names[3][2] = {"P", "Q", "R"};
  kn__node *P = kn__node_new_custom("PBackward", record_order, names[0], NULL, &x, 1, 1);
  kn__node *Q = kn__node_new_custom("QBackward", record_order, names[1], NULL, &x, 1, 1);
  cr_assert_eq(kn__node_set_output(P, p, 0), KN_OK);
  cr_assert_eq(kn__node_set_output(Q, q, 0), KN_OK);
  kn__node *R = kn__node_new_custom("RBackward", record_order, names[2], NULL,
                                    (kn_tensor *[]){p, q}, 2, 1);
  cr_assert_eq(kn__node_set_output(R, r, 0), KN_OK);
  kn__node_release(P), kn__node_release(Q), kn__node_release(R);
  cr_assert_str_eq(kn_grad_fn_name(r), "RBackward");
  order_len = 0;
  cr_assert_eq(kn_backward(r, val(KN_SHAPE(2), (double[]){1, 1})), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(order_len, 3);
  cr_assert_str_eq(order_seen[0], "R");
  cr_assert_str_eq(order_seen[1], "Q");
  cr_assert_str_eq(order_seen[2], "P");
  expect(kn_grad(x), 2, (double[]){2, 2}); /* both paths pass the gradient through */
}

/* The hook for compiled backwards: a custom node computes the gradient. */
static void free_ctx(void *p) { *(int *)p += 100; }
static kn_status triple(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                        const bool *needs, int nin, bool cg) {
  (void)nout, (void)nin, (void)cg;
  (*(int *)ctx)++;
  if (needs[0]) gi[0] = kn_mm(go[0], kn_full(KN_SHAPE(1, 1), kn_float(3), KN_FLOAT64));
  return gi[0] ? KN_OK : kn_last_status();
}

Test(engine, custom_backward_callback) {
  static int calls;
  calls = 0;
  kn_tensor *x = leaf(KN_SHAPE(2, 1), (double[]){1, 2});
  {
    kn_tensor *y = kn_detach(x); /* forward value; history comes from the node */
    kn__node *n = kn__node_new_custom("CompiledFunctionBackward", triple, &calls, free_ctx,
                                      &x, 1, 1);
    cr_assert_not_null(n);
    cr_assert_eq(kn__node_set_output(n, y, 0), KN_OK);
    kn__node_release(n);
    cr_assert_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward");
    cr_assert(kn_requires_grad(y));
    cr_assert_eq(kn_backward(y, val(KN_SHAPE(2, 1), (double[]){1, 2})), KN_OK, "%s",
                 kn_last_error());
    expect(kn_grad(x), 2, (double[]){3, 6});
    cr_assert_eq(calls, 1);
  }
  kn_scope_end();
  cr_assert_eq(calls, 101, "ctx_free ran when the node died");
  kn_scope_begin();
}

Test(engine, long_chain_releases_iteratively) {
  kn_tensor *x = leaf(KN_SHAPE(2, 2), (double[]){1, 0, 0, 1});
  kn_scope_begin();
  kn_tensor *y = x;
  for (int i = 0; i < 20000; i++) y = kn_t(y);
  kn_tensor *keep = kn_retain(y);
  kn_scope_end();
  cr_assert_eq(kn_backward(keep, val(KN_SHAPE(2, 2), (double[]){1, 2, 3, 4})), KN_OK, "%s",
               kn_last_error());
  expect(kn_grad(x), 4, (double[]){1, 2, 3, 4}); /* an even number of transposes */
  kn_release(keep); /* frees 20000 nodes without deep recursion */
}

/* Meta tensors: recording and backward propagate shapes only. */
Test(engine, meta_graph_gives_meta_gradients) {
  kn_tensor *x = kn_empty_meta(KN_SHAPE(3, 4), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *w = kn_empty_meta(KN_SHAPE(4, 2), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(w, true), KN_OK);
  kn_tensor *y = kn_mm(x, w);
  cr_assert_str_eq(kn_grad_fn_name(y), "MmBackward0");
  cr_assert_eq(kn_backward(y, kn_empty_meta(KN_SHAPE(3, 2), KN_FLOAT32)), KN_OK, "%s",
               kn_last_error());
  cr_assert_eq(kn_tensor_device(kn_grad(x)), KN_META);
  cr_assert_eq(kn_size(kn_grad(x), 1), 4);
  cr_assert_eq(kn_size(kn_grad(w), 0), 4);
  cr_assert_eq(kn_size(kn_grad(w), 1), 2);
}

/* The saved-tensor check a compiled backward uses. */
Test(engine, saved_info_for_custom_backwards) {
  kn_tensor *x = leaf(KN_SHAPE(3), (double[]){1, 2, 3});
  kn_tensor *y = kn_t(kn_t(kn_t(x))); /* 1-d: t is identity, output of TBackward0 */
  kn__saved_info info = kn__saved_info_of(y);
  cr_assert_eq(kn__saved_version_error(NULL, y, &info), KN_OK);
  kn__bump_version(x);
  cr_assert_eq(kn__saved_version_error(NULL, y, &info), KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(), "[torch.DoubleTensor [3]], which is output 0 of "
                                    "TBackward0, is at version 1; expected version 0") != NULL,
            "%s", kn_last_error());
}

/* d y / d y is the grad_output, for non-leaves and leaves alike; the same
** input twice gets the gradient twice. */
Test(engine, gradient_of_a_tensor_with_respect_to_itself) {
  kn_tensor *x = leaf(KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *y = kn_t(x);
  kn_tensor *go = val(KN_SHAPE(2), (double[]){3, 4});
  kn_tensor *g[2];
  cr_assert_eq(kn_autograd_grad(&y, 1, (kn_tensor *[]){y, y}, 2, &go, true, false, false, g),
               KN_OK, "%s", kn_last_error());
  expect(g[0], 2, (double[]){3, 4});
  expect(g[1], 2, (double[]){3, 4});
  cr_assert_eq(kn_autograd_grad(&x, 1, &x, 1, &go, false, false, false, g), KN_OK, "%s",
               kn_last_error());
  expect(g[0], 2, (double[]){3, 4});
  cr_assert_null(kn_grad(x));
}
