/*
** test_graph_backends.c: the backend registry (kn_register_backend,
** kn_list_backends, kn_compile's `backend` option): built-in "eager", "inductor" and "aot_eager",
** compiling through a registered backend by name, the compile counter
** delegating to a registered inner backend, duplicate and invalid names,
** the error for unknown names listing the registered ones, and registration
** from several threads while other threads compile and call. Also run under
** ThreadSanitizer (make test-tsan).
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(backends, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *affine(kn_tensor *a) {
  kn_tensor *r = kn_add_scalar(kn_mul_scalar(a, kn_int(3)), kn_int(1));
  return r;
}

/* A backend that records what it received and compiles with "eager". */
typedef struct seen {
  atomic_int calls;
  int ninputs, ops;
  int64_t size0;
} seen;

static kn_status recording(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                           kn_compiled_graph *out) {
  seen *s = ud;
  atomic_fetch_add(&s->calls, 1);
  s->ninputs = n;
  s->ops = kn__graph_op_count(kn__graph_module_graph(gm));
  s->size0 = n > 0 ? kn_size(ex[0], 0) : -1;
  return kn__eager_compile(gm, out);
}

Test(backends, eager_and_inductor_are_built_in) {
  const char *names[4] = {0};
  cr_assert_eq(kn_list_backends(names, 4), 3);
  cr_assert_str_eq(names[0], "eager");
  cr_assert_str_eq(names[1], "inductor");
  cr_assert_str_eq(names[2], "aot_eager");
  cr_expect_eq(kn_list_backends(NULL, 0), 3);
  /* by name, and by default */
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = KN_COMPILE(affine, &o);
  cr_assert_not_null(f);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(2), kn_float(2), KN_FLOAT32);
  cr_expect_eq(kn_get(kn_call_t(f, x), (int64_t[]){1}), 7.0);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(backends, registered_backend_compiles_by_name) {
  seen s = {0};
  cr_assert_eq(kn_register_backend("recording", recording, &s), KN_OK);
  const char *names[5] = {0};
  cr_assert_eq(kn_list_backends(names, 5), 4);
  cr_assert_str_eq(names[3], "recording");
  kn_compile_options o = {.backend = "recording"};
  kn_compiled *f = KN_COMPILE(affine, &o);
  cr_assert_not_null(f);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(5), kn_float(2), KN_FLOAT32);
  cr_expect_eq(kn_get(kn_call_t(f, x), (int64_t[]){4}), 7.0);
  cr_expect_eq(kn_get(kn_call_t(f, x), (int64_t[]){0}), 7.0);
  kn_scope_end();
  cr_expect_eq(atomic_load(&s.calls), 1); /* the second call hits the cache */
  cr_expect_eq(s.ninputs, 1);
  cr_expect_eq(s.ops, 2); /* mul, add */
  cr_expect_eq(s.size0, 5);
  kn_compiled_free(f);
}

Test(backends, compile_counter_delegates_to_a_registered_backend) {
  seen s = {0};
  cr_assert_eq(kn_register_backend("inner_rec", recording, &s), KN_OK);
  kn_compile_counter cc = {.inner = "inner_rec"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(affine, &o);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(3), kn_float(1), KN_FLOAT32);
  cr_expect_eq(kn_get(kn_call_t(f, x), (int64_t[]){0}), 4.0);
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 1);
  cr_expect_eq(cc.op_count, 2);
  cr_expect_eq(atomic_load(&s.calls), 1);
  kn_compiled_free(f);
}

Test(backends, compile_counter_with_unknown_inner_fails) {
  kn_compile_counter cc = {.inner = "missing"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(affine, &o);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(3), kn_float(1), KN_FLOAT32);
  cr_expect_null(kn_call_t(f, x));
  cr_expect(strstr(kn_last_error(), "CompileCounterWithBackend: unknown backend 'missing' "
                                    "(registered: \"eager\", \"inductor\", \"aot_eager\")"),
            "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}

Test(backends, unknown_name_lists_the_registered_ones) {
  seen s = {0};
  cr_assert_eq(kn_register_backend("mine", recording, &s), KN_OK);
  kn_compile_options o = {.backend = "no_such_backend"};
  cr_expect_null(KN_COMPILE(affine, &o));
  cr_assert_str_eq(kn_last_error(), "kn_compile: unknown backend 'no_such_backend' (registered: "
                                    "\"eager\", \"inductor\", \"aot_eager\", \"mine\"), or pass a backend_fn");
}

Test(backends, duplicate_and_invalid_registrations) {
  seen s = {0};
  cr_expect_eq(kn_register_backend("eager", recording, &s), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "kn_register_backend: duplicate name: 'eager' is already registered");
  cr_expect_eq(kn_register_backend("twice", recording, &s), KN_OK);
  cr_expect_eq(kn_register_backend("twice", recording, &s), KN_EINVAL);
  cr_expect_eq(kn_register_backend(NULL, recording, &s), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "kn_register_backend: expected a name of letters, digits, "
                                    "'_', '-' or '.', got NULL");
  cr_expect_eq(kn_register_backend("", recording, &s), KN_EINVAL);
  cr_expect_eq(kn_register_backend("a b", recording, &s), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "kn_register_backend: expected a name of letters, digits, "
                                    "'_', '-' or '.', got 'a b'");
  cr_expect_eq(kn_register_backend("nofn", NULL, NULL), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(),
                   "kn_register_backend: expected a backend function for 'nofn', got NULL");
  cr_expect_eq(kn_list_backends(NULL, 0), 4); /* eager, inductor, aot_eager, twice */
}

/* ---- threads ---------------------------------------------------------------- */
#define NTHREADS 4
#define PER_THREAD 16

static seen shared_seen;
static atomic_int dup_ok;

static void *registrar(void *arg) {
  int id = (int)(intptr_t)arg;
  for (int k = 0; k < PER_THREAD; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d_%d", id, k);
    if (kn_register_backend(name, recording, &shared_seen) != KN_OK) return (void *)1;
    if (kn_register_backend("contended", recording, &shared_seen) == KN_OK)
      atomic_fetch_add(&dup_ok, 1);
  }
  return NULL;
}

static void *compiler(void *arg) {
  (void)arg;
  intptr_t bad = 0;
  for (int k = 0; k < 4; k++) {
    kn_compile_options o = {.backend = "eager"};
    kn_compiled *f = KN_COMPILE(affine, &o);
    kn_scope_begin();
    kn_tensor *x = kn_full(KN_SHAPE(k + 1), kn_float(k), KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    if (!y || kn_get(y, (int64_t[]){0}) != 3.0 * k + 1) bad = 1;
    kn_scope_end();
    kn_compiled_free(f);
  }
  return (void *)bad;
}

Test(backends, registration_from_several_threads) {
  pthread_t th[NTHREADS + 1];
  for (int i = 0; i < NTHREADS; i++)
    pthread_create(&th[i], NULL, registrar, (void *)(intptr_t)i);
  pthread_create(&th[NTHREADS], NULL, compiler, NULL);
  for (int i = 0; i <= NTHREADS; i++) {
    void *r = NULL;
    pthread_join(th[i], &r);
    cr_expect_null(r, "thread %d failed", i);
  }
  cr_expect_eq(atomic_load(&dup_ok), 1);
  const char *names[4 + NTHREADS * PER_THREAD + 1];
  int n = kn_list_backends(names, (int)(sizeof names / sizeof names[0]));
  cr_assert_eq(n, 4 + NTHREADS * PER_THREAD); /* eager, inductor, aot_eager, "contended" */
  cr_assert_str_eq(names[0], "eager");
  /* every name once; each thread's names in its registration order */
  for (int i = 0; i < NTHREADS; i++) {
    int last = -1;
    for (int k = 0; k < PER_THREAD; k++) {
      char name[32];
      snprintf(name, sizeof name, "t%d_%d", i, k);
      int at = -1, count = 0;
      for (int j = 0; j < n; j++)
        if (!strcmp(names[j], name)) at = j, count++;
      cr_expect_eq(count, 1, "%s", name);
      cr_expect_gt(at, last, "%s", name);
      last = at;
    }
  }
  /* and every one of them compiles */
  kn_compile_options o = {.backend = "t3_15"};
  kn_compiled *f = KN_COMPILE(affine, &o);
  kn_scope_begin();
  cr_expect_eq(kn_get(kn_call_t(f, kn_full(KN_SHAPE(1), kn_float(1), KN_FLOAT32)), (int64_t[]){0}),
               4.0);
  kn_scope_end();
  cr_expect_eq(atomic_load(&shared_seen.calls), 1);
  kn_compiled_free(f);
}
