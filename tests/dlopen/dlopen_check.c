/*
** tests/dlopen/dlopen_check.c: libkiln.so loaded with dlopen by a program
** not linked with kiln, and used from several threads.
**
** A plugin host, a language binding or a test runner loads kiln this way.
** The library's thread-local state (the last error, autorelease scopes,
** dispatch modes) is read through TLS descriptors (-mtls-dialect=gnu2 on
** x86-64, CMakeLists.txt), which must also work in a module loaded after
** the program started, where the dynamic TLS block of each thread is
** allocated lazily. Each of NT threads, at once:
**   - adds tensors in a loop inside its own scope and checks the sums;
**   - makes an op fail with sizes of its own and, once every thread has
**     failed, reads kn_last_error(): it must name its own sizes (an error
**     of another thread would mean shared state);
**   - calls one compiled function (inductor: the generated code's shared
**     object calls back into the dlopened library) and compares it with the
**     eager op on its own input.
** Expectations: sums computed in closed form; the compiled result against
** eager within float rounding. Prints one line and exits 0 on success.
** Usage: dlopen_check <path of libkiln.so>.
*/
#define _GNU_SOURCE /* pthread_barrier_t */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

#define NT 4
#define ROUNDS 200

/* The entry points, found with dlsym (this program never links kiln). */
static struct {
  __typeof__(&kn_ones) ones;
  __typeof__(&kn_full) full;
  __typeof__(&kn_add) add;
  __typeof__(&kn_sub) sub;
  __typeof__(&kn_abs) abs_;
  __typeof__(&kn_amax) amax;
  __typeof__(&kn_tanh) tanh_;
  __typeof__(&kn_softmax) softmax;
  __typeof__(&kn_data) data;
  __typeof__(&kn_item_double) item;
  __typeof__(&kn_release) release;
  __typeof__(&kn_scope_begin) scope_begin;
  __typeof__(&kn_scope_end) scope_end;
  __typeof__(&kn_last_error) last_error;
  __typeof__(&kn_compile_tensor_fn) compile;
  __typeof__(&kn_call_tensors) call;
  __typeof__(&kn_compiled_free) compiled_free;
} K;

static pthread_barrier_t failed_all;
static kn_compiled *compiled;
static char messages[NT][512];

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("dlopen_check: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *sym(void *h, const char *name) {
  void *p = dlsym(h, name);
  if (!p) fail("dlsym(%s): %s", name, dlerror());
  return p;
}

static void bind(void *h) {
  K.ones = sym(h, "kn_ones"), K.full = sym(h, "kn_full"), K.add = sym(h, "kn_add");
  K.sub = sym(h, "kn_sub"), K.abs_ = sym(h, "kn_abs"), K.amax = sym(h, "kn_amax");
  K.tanh_ = sym(h, "kn_tanh"), K.softmax = sym(h, "kn_softmax"), K.data = sym(h, "kn_data");
  K.item = sym(h, "kn_item_double"), K.release = sym(h, "kn_release");
  K.scope_begin = sym(h, "kn_scope_begin"), K.scope_end = sym(h, "kn_scope_end");
  K.last_error = sym(h, "kn_last_error"), K.compile = sym(h, "kn_compile_tensor_fn");
  K.call = sym(h, "kn_call_tensors"), K.compiled_free = sym(h, "kn_compiled_free");
}

/* The compiled function: softmax(tanh(x) + x) over the last dim. */
static kn_tensor *fn(kn_tensor *x) { return K.softmax(K.add(K.tanh_(x), x), -1); }

/* Thread id's sums: ones of n elements added ROUNDS times. */
static void sums(int id) {
  int64_t n = 100 + id;
  K.scope_begin();
  kn_tensor *one = K.ones(1, &n, KN_FLOAT32), *s = K.full(1, &n, kn_float(0), KN_FLOAT32);
  for (int r = 0; r < ROUNDS; r++) s = K.add(s, one);
  const float *d = s ? K.data(s) : NULL;
  if (!d) fail("thread %d: add: %s", id, K.last_error());
  for (int64_t i = 0; i < n; i++)
    if (d[i] != (float)ROUNDS) fail("thread %d: element %lld is %g, expected %d", id,
                                    (long long)i, (double)d[i], ROUNDS);
  K.scope_end();
}

/* Thread id's own error, read after every thread has made its own. */
static void own_error(int id) {
  int64_t a = 10 + id, b = 20 + id;
  K.scope_begin();
  kn_tensor *x = K.ones(1, &a, KN_FLOAT32), *y = K.ones(1, &b, KN_FLOAT32);
  if (K.add(x, y)) fail("thread %d: adding [%lld] and [%lld] succeeded", id, (long long)a,
                        (long long)b);
  pthread_barrier_wait(&failed_all);
  snprintf(messages[id], sizeof messages[id], "%s", K.last_error());
  char want[64];
  snprintf(want, sizeof want, "(%lld) must match the size of tensor b (%lld)", (long long)a,
           (long long)b);
  if (!strstr(messages[id], want))
    fail("thread %d: kn_last_error() is '%s', expected its own sizes: '%s'", id, messages[id],
         want);
  K.scope_end();
}

/* The compiled function on thread id's input against eager. */
static void compiled_call(int id) {
  int64_t sizes[2] = {8 + id, 64};
  K.scope_begin();
  kn_tensor *x = K.full(2, sizes, kn_float(0.25 * (id + 1)), KN_FLOAT32);
  kn_tensor *got = K.call(compiled, &x, 1), *want = fn(x);
  if (!got || !want) fail("thread %d: compiled call: %s", id, K.last_error());
  double diff = NAN;
  const int64_t all[2] = {0, 1};
  if (K.item(K.amax(K.abs_(K.sub(got, want)), all, 2, false), &diff) != KN_OK || !(diff <= 1e-6))
    fail("thread %d: compiled and eager differ by %g", id, diff);
  K.scope_end();
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  sums(id);
  own_error(id);
  compiled_call(id);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) fail("usage: dlopen_check <libkiln.so>");
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) fail("dlopen(%s): %s", argv[1], dlerror());
  bind(h);
  kn_compile_options o = {.backend = "inductor"};
  compiled = K.compile((void (*)(void))fn, 1, "fn", __FILE__, __LINE__, &o);
  if (!compiled) fail("compile: %s", K.last_error());
  pthread_barrier_init(&failed_all, NULL, NT);
  pthread_t t[NT];
  for (int i = 0; i < NT; i++)
    if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i)) fail("pthread_create");
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&failed_all);
  K.compiled_free(compiled);
  printf("dlopen_check: %d threads on a dlopened libkiln.so: sums, own errors and compiled "
         "calls as expected\n", NT);
  return 0;
}
