/*
** dynamo/backends.c: compiling a captured graph. "eager" runs the graph with
** the graph interpreter (each node through the dispatcher); a user backend
** receives the graph module and the example (fake) inputs and returns its
** own callable; the compile counter counts graphs and call nodes, then
** delegates to "eager".
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/dynamo.h"
#include "inductor/inductor.h"
#include "tensor/tensor.h"

static kn_status eager_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  kn_status st = kn__gprog_run(state, in, nin, out, nout);
  return st == KN_OK ? kn__autorelease_many(out, nout) : st;
}

static void eager_free(void *state) { kn__gprog_free(state); }

kn_status kn__eager_compile(kn_graph_module *gm, kn_compiled_graph *out) {
  kn__gprog *p = NULL;
  kn_status st = kn__gprog_new(kn__graph_module_graph(gm), &p);
  if (st != KN_OK) return st;
  *out = (kn_compiled_graph){eager_run, p, eager_free};
  return KN_OK;
}

kn_status kn_compile_counter_backend(kn_graph_module *gm, kn_tensor *const *example_inputs,
                                     int ninputs, void *ud, kn_compiled_graph *out) {
  (void)example_inputs;
  (void)ninputs;
  kn_compile_counter *cc = ud;
  if (!cc || !gm || !out) return kn__error(KN_EINVAL, "CompileCounter: expected a counter");
  if (cc->inner && strcmp(cc->inner, "eager"))
    return kn__error(KN_EINVAL, "CompileCounterWithBackend: unknown backend '%s'", cc->inner);
  /* one counter may serve functions compiled in several threads at once */
  __atomic_fetch_add(&cc->frame_count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&cc->op_count, kn__graph_op_count(kn__graph_module_graph(gm)),
                     __ATOMIC_RELAXED);
  return kn__eager_compile(gm, out);
}

void kn_compile_counter_clear(kn_compile_counter *cc) {
  if (!cc) return;
  cc->frame_count = 0;
  cc->op_count = 0;
}

bool kn__backend_known(const char *name) {
  return !strcmp(name, "eager") || !strcmp(name, "inductor");
}

const char *kn__backend_name(const kn_compiled *f) {
  if (f->opts.backend_fn == kn_compile_counter_backend) return "CompileCounter";
  if (f->opts.backend_fn) return "user_backend";
  return f->opts.backend ? f->opts.backend : "eager";
}

kn_status kn__backend_compile(kn_compiled *f, kn_graph_module *gm, kn_tensor *const *examples,
                              int n, kn_compiled_graph *out) {
  memset(out, 0, sizeof *out);
  kn_status st;
  if (f->opts.backend_fn) st = f->opts.backend_fn(gm, examples, n, f->opts.backend_ud, out);
  else if (f->opts.backend && !strcmp(f->opts.backend, "inductor"))
    st = kn__inductor_compile(gm, examples, n, NULL, out);
  else st = kn__eager_compile(gm, out);
  if (st == KN_OK && !out->run) st = kn__error(KN_EINVAL, "the backend returned no callable");
  if (st != KN_OK) {
    char msg[1800];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    if (out->free_state) out->free_state(out->state);
    memset(out, 0, sizeof *out);
    return kn__error(st, "BackendCompilerFailed: backend='%s' raised:\n%s", kn__backend_name(f),
                     msg);
  }
  return KN_OK;
}
