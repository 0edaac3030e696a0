/*
** dynamo/backends.c: compiling a captured graph with the function's backend:
** a registered one (graph/backend.c: "eager", this file: "inductor", the
** default, and what kn_register_backend added; resolved by kn_compile) or a
** user backend_fn; both receive the graph
** module and the example (fake) inputs and return a callable. "aot_eager"
** (aot/runtime.c) is AOT autograd with the interpreter for both graphs;
** "inductor" is AOT autograd with the code generator compiling the forward,
** backward and inference graphs (graphs AOT does not handle yet go to the
** code generator as captured). The compile counter counts graphs and call
** nodes, then delegates to its inner backend.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "kiln/autograd.h"
#include "core/error.h"
#include "dynamo/ddp_optimizer.h"
#include "dynamo/dynamo.h"
#include "inductor/inductor.h"
#include "ops/cuda_ops.h"
#include "logging/log.h"
#include "tensor/tensor.h"

/* ---- "inductor": AOT autograd + the code generator ------------------------------ */

/* The inference compiler AOT calls: inductor, noting a failure (a compiler
** error is the backend's error, never a fallback). */
static kn_status ind_graph(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                           kn_compiled_graph *out) {
  kn_status st = kn__inductor_compile(gm, ex, n, NULL, out);
  if (st != KN_OK) *(bool *)ud = true;
  return st;
}

/* The forward and backward compiler of a training graph: under mode
** reduce-overhead each is wrapped in CUDA graphs of its own (PyTorch
** records forward and backward apart too), whose outputs a replay never
** overwrites while they are in use (saved activations, gradients). */
static kn_status ind_train_graph(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                 kn_compiled_graph *out) {
  kn_status st = ind_graph(gm, ex, n, ud, out);
  kn__compile_ctx *cx = kn__compile_ctx_get();
  if (st != KN_OK || !cx->cudagraphs) return st;
  st = kn__cudagraphs_wrap_guarded(gm, out);
  if (st == KN_OK) cx->cudagraphs_inner = true;
  else *(bool *)ud = true;
  return st;
}

static kn_status inductor_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                  kn_compiled_graph *out) {
  (void)ud;
  if (!gm || !out) return kn__error(KN_EINVAL, "inductor: expected a graph module and an output");
  bool failed = false;
  /* min-cut, as PyTorch's inductor: of equal cuts it saves an activation
  ** rather than its GEMM's output, so GEMM + activation stay one call */
  kn__aot_config cfg = {.fw_compiler = ind_train_graph, .fw_ud = &failed,
                        .bw_compiler = ind_train_graph, .bw_ud = &failed,
                        .inference_compiler = ind_graph, .partitioner = KN__AOT_PART_MINCUT,
                        .fw_run_into = kn__inductor_run_into,
                        .inference_passes = kn__ind_joint_graph_passes};
  kn_status st = kn__aot_compile(gm, ex, n, &cfg, out);
  if (st == KN_OK || failed) return st;
  KN_LOG(KN_LOG_INDUCTOR, KN_INFO, "inductor: AOT autograd failed (%s); compiling the captured "
         "graph", kn_last_error());
  memset(out, 0, sizeof *out);
  return kn__inductor_compile(gm, ex, n, NULL, out);
}

/* The backends built into kiln besides the graph layer's "eager": the code
** generator (a lower layer than dynamo, which may not call up into this
** one), registered when the library is loaded, so every listing reads
** "eager", "inductor", then what the program registered. */
__attribute__((constructor)) static void register_builtin(void) {
  (void)kn_register_backend("inductor", inductor_backend, NULL);
  /* eager ops on CUDA tensors: single-op graphs through the cuda target */
  (void)kn__dispatch_set_device_backend(KN_CUDA, kn__ind_cuda_eager);
  (void)kn_register_backend("aot_eager", kn__aot_eager_compile, NULL);
}

kn_status kn_compile_counter_backend(kn_graph_module *gm, kn_tensor *const *example_inputs,
                                     int ninputs, void *ud, kn_compiled_graph *out) {
  kn_compile_counter *cc = ud;
  if (!cc || !gm || !out) return kn__error(KN_EINVAL, "CompileCounter: expected a counter");
  kn_backend_fn inner = NULL;
  void *inner_ud = NULL;
  if (kn__backend_lookup(cc->inner, NULL, &inner, &inner_ud) != KN_OK)
    return kn__error(KN_EINVAL, "CompileCounterWithBackend: %s", kn_last_error());
  /* one counter may serve functions compiled in several threads at once */
  __atomic_fetch_add(&cc->frame_count, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&cc->op_count, kn__graph_op_count(kn__graph_module_graph(gm)),
                     __ATOMIC_RELAXED);
  return inner(gm, example_inputs, ninputs, inner_ud, out);
}

void kn_compile_counter_clear(kn_compile_counter *cc) {
  if (!cc) return;
  cc->frame_count = 0;
  cc->op_count = 0;
}

const char *kn__backend_name(const kn_compiled *f) {
  if (f->opts.backend) return f->opts.backend; /* a registered backend */
  if (f->opts.backend_fn == kn_compile_counter_backend) return "CompileCounter";
  if (f->opts.backend_fn) return "user_backend";
  return "eager";
}

/* The backend of kn_compile when the options name none. */
#define DEFAULT_BACKEND "inductor"

kn_status kn__backend_resolve(kn_compile_options *o) {
  if (o->backend_fn) {
    o->backend = NULL; /* a backend function wins over a name */
    return KN_OK;
  }
  const char *name = o->backend ? o->backend : DEFAULT_BACKEND;
  if (kn__backend_lookup(name, &o->backend, &o->backend_fn, &o->backend_ud) != KN_OK)
    return kn__error(KN_EINVAL, "kn_compile: %s, or pass a backend_fn", kn_last_error());
  return KN_OK;
}

kn_status kn__mode_resolve(kn_compile_options *o) {
  static const char *const modes[] = {"default", "reduce-overhead"};
  if (!o->mode) {
    o->mode = modes[0];
    return KN_OK;
  }
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
    if (!strcmp(o->mode, modes[i])) {
      o->mode = modes[i]; /* static: the caller's string need not outlive kn_compile */
      return KN_OK;
    }
  return kn__error(KN_EINVAL, "kn_compile: Unrecognized mode=%s, should be one of: default, "
                              "reduce-overhead", o->mode);
}

/* f's backend on one graph (the whole captured graph, or a piece of a DDP
** split); under mode reduce-overhead, the callable is wrapped in CUDA graphs. */
static kn_status inner_compile(void *ud, kn_graph_module *gm, kn_tensor *const *examples, int n,
                               kn_compiled_graph *out) {
  kn_compiled *f = ud;
  memset(out, 0, sizeof *out);
  kn__compile_ctx *cx = kn__compile_ctx_get();
  kn__compile_ctx was = *cx;
  cx->cudagraphs = f->opts.mode && !strcmp(f->opts.mode, "reduce-overhead");
  cx->cudagraphs_inner = false;
  kn_status st;
  if (f->opts.backend_fn) st = f->opts.backend_fn(gm, examples, n, f->opts.backend_ud, out);
  else st = kn__eager_compile(gm, out);
  bool wrap = cx->cudagraphs && !cx->cudagraphs_inner;
  cx->cudagraphs = was.cudagraphs;
  cx->cudagraphs_inner = was.cudagraphs_inner;
  if (st == KN_OK && !out->run) st = kn__error(KN_EINVAL, "the backend returned no callable");
  if (st == KN_OK && wrap) st = kn__cudagraphs_wrap(gm, out);
  return st;
}

kn_status kn__backend_compile(kn_compiled *f, kn_graph_module *gm, kn_tensor *const *examples,
                              kn_tensor *const *reals, int n, kn_compiled_graph *out) {
  memset(out, 0, sizeof *out);
  kn_status st = kn__ddp_optimizer_compile(gm, examples, reals, n, inner_compile, f, out);
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
