/*
** dynamo/ddp_optimizer.h: DDPOptimizer, the capture frontend's graph split
** for models under DistributedDataParallel (PyTorch's
** torch/_dynamo/backends/distributed.py; internal).
**
** DDP (src/distributed, a higher layer) registers each wrapped model's
** parameters with its bucket caps here: a downward call, so the capture
** frontend never calls up into the distributed layer. When a captured
** graph reads parameters of a registered model (its placeholders' real
** tensors are among them) and the model's optimize_ddp is on, the graph is
** split at bucket boundaries before the backend sees it, and each piece
** (submod_0, submod_1, ...) is compiled on its own, so the compiled
** backward hands each bucket's gradients to DDP's hooks as soon as that
** piece's backward ran. The registry is process-wide (one mutex), like
** PyTorch's active-DDP-module marker; parameters are borrowed (the DDP
** wrapper unregisters before its model goes).
*/
#ifndef KN_DYNAMO_DDP_OPTIMIZER_H
#define KN_DYNAMO_DDP_OPTIMIZER_H

#include "kiln/compile.h"

/* Register owner's parameters (array copied, tensors borrowed) with its
** bucket caps in bytes (first_bucket_bytes <= bucket_bytes) and whether
** its graphs are split. Registering an owner again replaces its entry.
** KN_ENOMEM. */
kn_status kn__ddp_optimizer_register(const void *owner, kn_tensor *const *params, int np,
                                     int64_t bucket_bytes, int64_t first_bucket_bytes,
                                     bool optimize);
/* Forget owner's entry (no-op when absent). */
void kn__ddp_optimizer_unregister(const void *owner);

/* Compile gm as `compile` would, but split at DDP bucket boundaries when
** its placeholders (real values reals[0..n), NULL where unknown) include
** parameters of a registered model whose optimize_ddp is on and the split
** gives more than one bucket: then *out runs submod_0, submod_1, ... in
** turn, each compiled by `compile`. Otherwise it is compile(gm, ...). The
** trace gets optimize_ddp_split_graph and one optimize_ddp_split_child per
** piece, and KILN_LOGS=ddp_graphs the graphs (PyTorch's records). */
typedef kn_status (*kn__ddp_inner_fn)(void *ud, kn_graph_module *gm, kn_tensor *const *examples,
                                      int n, kn_compiled_graph *out);
kn_status kn__ddp_optimizer_compile(kn_graph_module *gm, kn_tensor *const *examples,
                                    kn_tensor *const *reals, int n, kn__ddp_inner_fn compile,
                                    void *ud, kn_compiled_graph *out);

#endif
