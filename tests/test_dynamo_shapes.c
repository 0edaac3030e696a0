/*
** test_dynamo_shapes.c: dynamic (batch, sequence) shapes through matmul,
** linear, flatten, unflatten and a transformer encoder layer (one compile
** for every (B, S) after the automatic-dynamic recompile, results and
** gradients equal to eager), and the shape guards of a compile: simplified
** and deduplicated as they are added, failure reasons in PyTorch's order
** (sizes before strides) and without repeats, and each guard's origin (op,
** user line) in the trace records the report's symbolic-shapes page shows.
*/
/* Keep the frames of functions that end in a tail call to a kiln op, so
** traced ops have their exact source lines (see docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/fixture.h"
#include "support/trace_util.h"

TestSuite(shapes, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* 20 (batch, sequence) pairs, none 0 or 1 (those sizes are specialised). */
static void shape_of(int k, int64_t *b, int64_t *s) {
  *b = 2 + k % 4;
  *s = 3 + (k * 7) % 11;
}

/* ---- matmul and linear on [B, S, K] --------------------------------------------- */
static kn_tensor *proj(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *v) {
  kn_tensor *h = kn_linear(x, w, b);            /* [B, S, 8] */
  kn_tensor *g = kn_matmul(x, kn_t(v));         /* [B, S, 8] */
  kn_tensor *r = kn_mul(kn_relu(h), g);
  return r;
}

/* Issue 21 (3): a new (B, S) used to recompile on Eq(16*s0*s1, ...) and hit
** the cache limit after 8 shapes. */
static void proj_compiles_once(const char *backend) {
  kn_manual_seed(3);
  kn_tensor *w = kn_randn(KN_SHAPE(8, 16), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(8), NULL, KN_FLOAT32);
  kn_tensor *v = kn_randn(KN_SHAPE(8, 16), NULL, KN_FLOAT32);
  kn_compile_counter cc = {0, 0, backend};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .arg_names = (const char *[]){"x", "w", "b", "v", NULL}};
  kn_compiled *f = KN_COMPILE(proj, &o);
  for (int k = 0; k < 20; k++) {
    int64_t bs, sq;
    shape_of(k, &bs, &sq);
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(bs, sq, 16), NULL, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x, w, b, v);
    cr_assert(y, "%s", kn_last_error());
    cr_assert_eq(kn_size(y, 0), bs);
    cr_assert_eq(kn_size(y, 1), sq);
    char why[256];
    cr_assert(kn_tensors_close(y, proj(x, w, b, v), 1e-5, 1e-5, true, why, sizeof why),
              "%s at (%lld, %lld): %s", backend, (long long)bs, (long long)sq, why);
    kn_scope_end();
  }
  cr_assert_eq(cc.frame_count, 2, "%s: %d compiles for 20 shapes", backend, cc.frame_count);
  kn_compiled_free(f);
  kn_release(w), kn_release(b), kn_release(v);
}

Test(shapes, linear_and_matmul_keep_batch_and_sequence_symbolic) { proj_compiles_once("eager"); }
Test(shapes, linear_and_matmul_keep_batch_and_sequence_symbolic_aot) {
  proj_compiles_once("aot_eager");
}

/* Once size(0) and size(1) are dynamic, the trace needs no shape guard on
** them: the folded rows are the product of the symbols, not a number. */
Test(shapes, folding_the_batch_adds_no_shape_guard) {
  cr_assert_eq(kn_set_logs_str("guards"), KN_OK);
  kn_compile_options o = {.backend = "eager",
                          .arg_names = (const char *[]){"x", "w", "b", "v", NULL}};
  kn_compiled *f = KN_COMPILE(proj, &o);
  kn_scope_begin();
  kn_tensor *w = kn_ones(KN_SHAPE(8, 16), KN_FLOAT32), *b = kn_ones(KN_SHAPE(8), KN_FLOAT32);
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4, 8, 16), KN_FLOAT32), w, b, w));
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(6, 12, 16), KN_FLOAT32), w, b, w));
  kn_test_capture_end(&r);
  const kn_test_record *g = kn_test_get_record(&r, "TREE_GUARD_MANAGER");
  cr_assert(g);
  /* only the two sizes' lower bounds: nothing relates or pins them */
  cr_assert_eq(kn_test_count_sub(g->message, "SHAPE_ENV:"), 2, "%s", g->message);
  cr_assert(strstr(g->message, "| | +- SHAPE_ENV: 2 <= L['x'].size()[0]\n"
                               "| | +- SHAPE_ENV: 2 <= L['x'].size()[1]"), "%s", g->message);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- flatten and unflatten ------------------------------------------------------ */
static kn_tensor *heads_roundtrip(kn_tensor *x) {
  kn_tensor *h = kn_unflatten(x, 2, 2, (int64_t[]){2, -1}); /* [B, S, 2, 8] */
  kn_tensor *t = kn_transpose(h, 1, 2);                      /* [B, 2, S, 8] */
  kn_tensor *r = kn_flatten(kn_transpose(kn_mul_scalar(t, kn_int(3)), 1, 2), 2, 3);
  return r;
}

Test(shapes, unflatten_and_flatten_keep_sizes_symbolic) {
  kn_compile_counter cc = {0, 0, "aot_eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(heads_roundtrip, &o);
  for (int k = 0; k < 6; k++) {
    int64_t bs, sq;
    shape_of(k, &bs, &sq);
    kn_scope_begin();
    kn_tensor *x = kn_reshape(kn_arange(kn_int(0), kn_int(bs * sq * 16), kn_int(1)), 3,
                              (int64_t[]){bs, sq, 16});
    x = kn_to(x, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    cr_assert(y, "%s", kn_last_error());
    cr_assert_eq(kn_ndim(y), 3);
    /* every element tripled, in place: y[b, s, e] = 3 * (b*S*16 + s*16 + e) */
    cr_assert_eq(kn_get(y, (int64_t[]){bs - 1, sq - 1, 15}), 3.0 * (double)(bs * sq * 16 - 1));
    cr_assert_eq(kn_get(y, (int64_t[]){1, 2, 9}), 3.0 * (double)(sq * 16 + 2 * 16 + 9));
    kn_scope_end();
  }
  cr_assert_eq(cc.frame_count, 2, "%d compiles", cc.frame_count);
  kn_compiled_free(f);
}

Test(shapes, unflatten_values_and_errors) {
  kn_scope_begin();
  kn_tensor *x = kn_to(kn_arange(kn_int(0), kn_int(24), kn_int(1)), KN_FLOAT32);
  kn_tensor *y = kn_unflatten(kn_reshape(x, 2, (int64_t[]){2, 12}), 1, 3, (int64_t[]){3, -1, 2});
  cr_assert(y, "%s", kn_last_error());
  cr_assert_eq(kn_ndim(y), 4);
  cr_assert_eq(kn_size(y, 2), 2);
  cr_assert_eq(kn_get(y, (int64_t[]){1, 2, 1, 1}), 23.0);
  cr_assert_eq(kn_get(y, (int64_t[]){0, 1, 0, 1}), 5.0);
  cr_assert_null(kn_unflatten(x, 0, 2, (int64_t[]){5, 5}));
  cr_assert_str_eq(kn_last_error(), "unflatten: Provided sizes [5, 5] don't multiply up to the "
                                    "size of dim 0 (24) in the input tensor");
  cr_assert_null(kn_unflatten(x, 0, 2, (int64_t[]){5, -1}));
  cr_assert_str_eq(kn_last_error(), "unflatten: Provided sizes [5, -1] don't multiply up to the "
                                    "size of dim 0 (24) in the input tensor");
  cr_assert_null(kn_unflatten(x, 0, 2, (int64_t[]){-1, -1}));
  cr_assert_str_eq(kn_last_error(), "only one dimension can be inferred");
  cr_assert_null(kn_unflatten(x, 0, 0, NULL));
  cr_assert_str_eq(kn_last_error(), "unflatten: sizes must be non-empty");
  /* a view: writes through it reach x */
  cr_assert_eq(kn_fill_(kn_select(kn_unflatten(x, 0, 2, (int64_t[]){4, 6}), 0, 1), kn_float(-1)),
               KN_OK);
  cr_assert_eq(kn_get(x, (int64_t[]){7}), -1.0);
  kn_scope_end();
}

/* ---- a transformer encoder layer ------------------------------------------------- */
static kn_value enc_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_nn_forward(args[0].u.m, args[1].u.t));
}

typedef struct grads {
  kn_tensor *x, *p[32];
  int n;
} grads;

static kn_status take_grad(void *ud, const char *name, kn_tensor *t) {
  (void)name;
  grads *g = ud;
  g->p[g->n++] = kn_retain(kn_clone(kn_grad(t)));
  return KN_OK;
}

/* loss = sum(y * probe); the gradients of x and of every parameter. */
static void backward_and_collect(kn_module *m, kn_tensor *x, kn_tensor *y, kn_tensor *probe,
                                 grads *g) {
  kn_nn_zero_grad(m);
  cr_assert_eq(kn_backward(kn_sum(kn_mul(y, probe)), NULL), KN_OK, "%s", kn_last_error());
  g->n = 0;
  g->x = kn_retain(kn_clone(kn_grad(x)));
  cr_assert_eq(kn_nn_named_tensors(m, true, take_grad, g), KN_OK);
}

static void grads_release(grads *g) {
  kn_release(g->x);
  for (int i = 0; i < g->n; i++) kn_release(g->p[i]);
}

static void encoder_compiles_once(const char *backend) {
  kn_manual_seed(21);
  kn_module *enc = kn_nn_transformer_encoder_layer(16, 4, 32, 0.0, true, NULL);
  cr_assert(enc, "%s", kn_last_error());
  kn_compile_counter cc = {0, 0, backend};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = kn_compile_fn(enc_fn, NULL, 2, "encoder", __FILE__, __LINE__, &o);
  for (int k = 0; k < 20; k++) {
    int64_t bs, sq;
    shape_of(k, &bs, &sq);
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(bs, sq, 16), NULL, KN_FLOAT32);
    kn_tensor *probe = kn_randn(KN_SHAPE(bs, sq, 16), NULL, KN_FLOAT32);
    cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
    kn_tensor *want = kn_nn_forward(enc, x);
    cr_assert(want, "%s", kn_last_error());
    grads ge, gc;
    backward_and_collect(enc, x, want, probe, &ge);
    kn_value args[2] = {kn_vmodule(enc), kn_vtensor(x)}, out;
    kn_set_grad(x, NULL);
    cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s: %s", backend, kn_last_error());
    char why[256];
    cr_assert(kn_tensors_close(out.u.t, want, 1e-4, 1e-5, true, why, sizeof why),
              "%s at (%lld, %lld): %s", backend, (long long)bs, (long long)sq, why);
    backward_and_collect(enc, x, out.u.t, probe, &gc);
    cr_assert(kn_tensors_close(gc.x, ge.x, 1e-4, 1e-4, true, why, sizeof why),
              "%s: grad of x at (%lld, %lld): %s", backend, (long long)bs, (long long)sq, why);
    cr_assert_eq(gc.n, ge.n);
    for (int i = 0; i < ge.n; i++)
      cr_assert(kn_tensors_close(gc.p[i], ge.p[i], 1e-4, 1e-4, true, why, sizeof why),
                "%s: parameter %d's grad at (%lld, %lld): %s", backend, i, (long long)bs,
                (long long)sq, why);
    grads_release(&ge), grads_release(&gc);
    kn_value_release(out);
    kn_scope_end();
  }
  cr_assert_leq(cc.frame_count, 2, "%s: %d compiles for 20 shapes", backend, cc.frame_count);
  kn_compiled_free(f);
  kn_module_free(enc);
}

Test(shapes, transformer_encoder_layer_compiles_once_for_every_shape_aot_eager) {
  encoder_compiles_once("aot_eager");
}
Test(shapes, transformer_encoder_layer_compiles_once_for_every_shape_inductor) {
  encoder_compiles_once("inductor");
}

/* ---- issue 26: guards without duplicates, reasons in PyTorch's order -------------------- */
static char failures[8][256], fail_ids[8][16];
static int nfail;
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  if (nfail >= 8) return;
  snprintf(failures[nfail], sizeof failures[0], "%s", g->reason);
  snprintf(fail_ids[nfail++], sizeof fail_ids[0], "%s", g->compile_id);
}

static kn_tensor *pool_mean(kn_tensor *x) {
  kn_tensor *r = kn_mean_dims(x, (int64_t[]){1}, 1, false);
  return r;
}

/* Only size(1) changed: the size is reported, not the stride of dim 0 it
** changed too (PyTorch's TensorCheck checks every size before any stride). */
static void size_before_stride(kn_dynamic dyn, const int64_t *second, const char *want) {
  kn_compile_options o = {.dynamic = dyn, .backend = "eager", .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", NULL}};
  kn_compiled *f = KN_COMPILE(pool_mean, &o);
  kn_scope_begin();
  nfail = 0;
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4, 8, 16), KN_FLOAT32)), "%s", kn_last_error());
  if (dyn == KN_DYNAMIC_AUTO) /* size(0) becomes dynamic */
    cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(6, 8, 16), KN_FLOAT32)), "%s", kn_last_error());
  nfail = 0;
  cr_assert(kn_call_t(f, kn_ones(3, second, KN_FLOAT32)), "%s", kn_last_error());
  kn_scope_end();
  cr_assert_geq(nfail, 1);
  cr_assert_str_eq(failures[0], want);
  kn_compiled_free(f);
}

Test(shapes, a_changed_size_is_reported_before_the_strides) {
  size_before_stride(KN_DYNAMIC_FALSE, (int64_t[]){4, 16, 16},
                     "tensor 'L['x']' size mismatch at index 1. expected 8, actual 16");
  /* the case: size(0) dynamic, size(1) static, stride(0) = 16*size(1) */
  size_before_stride(KN_DYNAMIC_AUTO, (int64_t[]){6, 16, 16},
                     "tensor 'L['x']' size mismatch at index 1. expected 8, actual 16");
}

/* Two entries that fail the same way give one line in the recompile message;
** guard_fail_fn still hears from each entry (PyTorch's contract). */
static kn_tensor *add_xy(kn_tensor *x, kn_tensor *y) {
  kn_tensor *r = kn_add(kn_sum(x), kn_sum(y));
  return r;
}

Test(shapes, recompile_messages_do_not_repeat_reasons) {
  cr_assert_eq(kn_set_logs_str("recompiles"), KN_OK);
  kn_compile_options o = {.backend = "eager", .guard_fail_fn = on_fail,
                          .arg_names = (const char *[]){"x", "y", NULL}};
  kn_compiled *f = KN_COMPILE(add_xy, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4), KN_FLOAT32), kn_ones(KN_SHAPE(2), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(4), KN_FLOAT32), kn_ones(KN_SHAPE(3), KN_FLOAT32)));
  nfail = 0;
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(8), KN_FLOAT32), kn_ones(KN_SHAPE(5), KN_FLOAT32));
  kn_test_capture_end(&r);
  cr_assert(y, "%s", kn_last_error());
  double v = 0;
  cr_assert_eq(kn_item_double(y, &v), KN_OK);
  cr_assert_eq(v, 13.0);
  const kn_test_record *m = kn_test_get_record(&r, "Recompiling function add_xy");
  cr_assert(m);
  const char *body = strstr(m->message, "\n");
  cr_assert(body);
  cr_assert_str_eq(body, "\n    triggered by the following guard failure(s):\n"
                         "    - tensor 'L['x']' size mismatch at index 0. expected 4, actual 8");
  cr_assert_eq(nfail, 2);
  cr_assert_str_eq(fail_ids[0], "0/1");
  cr_assert_str_eq(fail_ids[1], "0/0");
  cr_assert_str_eq(failures[0], failures[1]);
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
}

/* Issue 26's gated pooling over [B, S, 16], every size dynamic: each gate
** views one sample's hidden states as 1024 values, and the first as
** [4, 256], which needs 64*S == 1024: the view's size check Eq(64*S, 1024),
** its stride computation's mirror image Eq(1024, 64*S) and the bound
** 256 < 64*S, three times over. The guard list holds the condition once. */
static kn_tensor *W64;
static kn_tensor *gated(kn_tensor *x) {
  kn_tensor *h = kn_linear(x, W64, NULL); /* [B, S, 64] */
  kn_tensor *acc = kn_sum(kn_view(kn_select(h, 0, 0), 2, (int64_t[]){4, 256}));
  for (int64_t k = 0; k < 3; k++) {
    kn_tensor *g = kn_view(kn_select(h, 0, k), 1, (int64_t[]){1024});
    acc = kn_add(acc, kn_sum(kn_mul(g, kn_sigmoid(g))));
  }
  return acc;
}

Test(shapes, shape_guards_are_simplified_and_deduplicated) {
  W64 = kn_ones(KN_SHAPE(64, 16), KN_FLOAT32);
  cr_assert_eq(kn_set_logs_str("guards"), KN_OK);
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE, .backend_fn = kn_compile_counter_backend,
                          .backend_ud = &cc, .arg_names = (const char *[]){"x", NULL}};
  kn_compiled *f = KN_COMPILE(gated, &o);
  kn_scope_begin();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(4, 16, 16), KN_FLOAT32));
  kn_test_capture_end(&r);
  cr_assert(y, "%s", kn_last_error());
  const kn_test_record *g = kn_test_get_record(&r, "TREE_GUARD_MANAGER");
  cr_assert(g);
  const char *m = g->message;
  cr_assert_eq(kn_test_count_sub(m, "SHAPE_ENV: Eq(64*L['x'].size()[1], 1024)"), 1, "%s", m);
  cr_assert_null(strstr(m, "Eq(1024, "), "%s", m);
  cr_assert_null(strstr(m, "256 < "), "%s", m);
  /* the three lower bounds, the feature size the weight needs, the
  ** sample index and the gates' condition */
  cr_assert_eq(kn_test_count_sub(m, "SHAPE_ENV:"), 6, "%s", m);
  cr_assert(strstr(m, "| +- SHAPE_ENV: Eq(L['x'].size()[2], 16)"), "%s", m);
  cr_assert(strstr(m, "| +- SHAPE_ENV: 2 < L['x'].size()[0]"), "%s", m);
  /* each guard's comment is the line that needed it */
  char want[256];
  snprintf(want, sizeof want, "%-60s  # %s", "Eq(64*L['x'].size()[1], 1024)",
           "kn_tensor *acc = kn_sum(kn_view(kn_select(h, 0, 0), 2, (int64_t[]){4, 256}));  "
           "# test_dynamo_shapes.c:");
  cr_assert(strstr(m, want), "%s", m);
  kn_test_records_free(&r);
  /* another batch size hits the entry */
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(5, 16, 16), KN_FLOAT32)), "%s", kn_last_error());
  cr_assert_eq(cc.frame_count, 1);
  kn_scope_end();
  kn_compiled_free(f);
  kn_release(W64);
}

/* ---- where each guard came from ---------------------------------------------------- */
static kn_tensor *pair(kn_tensor *x, kn_tensor *y) {
  kn_tensor *a = kn_add(x, y); /* guard line */
  kn_tensor *r = kn_sum(kn_add(a, kn_mul(y, x))); /* Eq(s1, s0): the same guard */
  return r;
}

/* guard_added_fast carries the user's line and kiln's frames from the public
** function the user called (PyTorch's user_stack and stack); they were []. */
Test(shapes, guard_records_name_the_op_and_the_user_line) {
  char *dir = kn_test_trace_start();
  cr_assert_eq(kn_set_logs_str("+dynamic"), KN_OK);
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE, .backend = "eager"};
  kn_compiled *f = KN_COMPILE(pair, &o);
  kn_scope_begin();
  kn_test_records logs = {0};
  kn_test_capture_begin(&logs);
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(3), KN_FLOAT32), kn_ones(KN_SHAPE(3), KN_FLOAT32)));
  kn_test_capture_end(&logs);
  kn_scope_end();
  char *m = kn_test_dyn_metadata("guard_added_fast", 0);
  cr_assert(m);
  json_t *j = json_loads(m, 0, NULL);
  json_t *g = j; /* the record's value */
  cr_assert_str_eq(json_string_value(json_object_get(g, "expr")), "Eq(s0, s1)");
  json_t *us = json_object_get(g, "user_stack"), *fw = json_object_get(g, "stack");
  cr_assert_geq(json_array_size(us), 1, "%s", m);
  json_t *inner = json_array_get(us, json_array_size(us) - 1);
  cr_assert_str_eq(json_string_value(json_object_get(inner, "name")), "pair");
  cr_assert_str_eq(json_string_value(json_object_get(inner, "loc")),
                   "kn_tensor *a = kn_add(x, y); /* guard line */");
  cr_assert_geq(json_array_size(fw), 2, "%s", m);
  const char *outer = json_string_value(json_object_get(json_array_get(fw, 0), "name"));
  cr_assert(outer && !strncmp(outer, "kn_add", 6), "%s", m);
  json_decref(j);
  free(m);
  cr_assert_null(kn_test_dyn_metadata("guard_added_fast", 1), "the mirror image is the same guard");
  /* the log line names the user line and the innermost kiln frame */
  const kn_test_record *r = kn_test_get_record(&logs, "eval Eq(s0, s1) [guard added] at ");
  cr_assert(r);
  cr_assert(strstr(r->message, "test_dynamo_shapes.c:"), "%s", r->message);
  cr_assert(strstr(r->message, " in pair (src/ops/"), "%s", r->message);
  kn_test_records_free(&logs);
  kn_compiled_free(f);
  kn_trace_disable();
  kn_test_rmdir(dir);
}
