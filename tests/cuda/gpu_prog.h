/*
** tests/cuda/gpu_prog.h: running a kiln function's graph as a compiled
** CUDA program on raw device buffers, for the GPU programs (gpu_sweep.c,
** gpu_bench.c). The function is traced on the CPU; its graph goes through
** inductor's post-grad passes, plan and the `cuda` target, and the code
** cache compiles it (NVRTC and gcc) and loads it; a run copies the inputs'
** bytes to the device, calls the program with a runtime table over device
** buffers (kn__cuda_alloc, kn__cuda_launch) and copies the outputs back.
** Extern steps (eager ops) are refused: these programs check the generated
** kernels alone.
*/
#ifndef KN_TESTS_GPU_PROG_H
#define KN_TESTS_GPU_PROG_H

#include "graph/graph.h"
#include "inductor/inductor.h"
#include "kiln/kiln.h"

typedef struct gpu_prog {
  kn__graph *g;       /* post-grad graph (owned) */
  kn__ind_plan plan;  /* its plan */
  kn__ind_call_fn call;
  bool ready;         /* plan built and program loaded */
  kn_status st;       /* the capture's status (kn_last_error() then) */
  char err[1024];
} gpu_prog;

/* Compile fn (a tensor function of nargs tensors) for CUDA, tracing it on
** args (static shapes). *p receives the program; KN_OK, or the failure. */
kn_status gpu_prog_build(void (*fn)(void), int nargs, kn_tensor *const *args, gpu_prog *p);
/* Device buffers of one run: the inputs' bytes copied in (each input's
** storage span), outputs allocated by the program. */
typedef struct gpu_run {
  const gpu_prog *p;
  void **buf;
  bool *own;
} gpu_run;
/* Copy the inputs in (gpu_run_begin), call the program (gpu_run_call,
** again and again: timed loops), copy output k out into a new CPU tensor
** (gpu_run_output: a reference the caller releases), free every buffer (gpu_run_end). */
kn_status gpu_run_begin(const gpu_prog *p, kn_tensor *const *in, int nin, gpu_run *r);
kn_status gpu_run_call(gpu_run *r);
kn_tensor *gpu_run_output(gpu_run *r, int k);
void gpu_run_end(gpu_run *r);
void gpu_prog_free(gpu_prog *p);

#endif
