/*
** kiln/autograd.h: eager reverse-mode autodiff. Ops record a graph of
** grad_fn nodes on their outputs while grad mode is on and an input requires
** grad; kn_backward / kn_autograd_grad walk that graph backwards.
**
** Ownership follows kiln/tensor.h: tensor arguments are borrowed; returned
** tensors are new references (recorded in the open autorelease scope).
** Gradients accumulated into a leaf's .grad are owned by the leaf (read them
** with kn_grad(t), borrowed). Errors are values (KN_EAUTOGRAD with PyTorch's
** message texts; see kn_last_error()).
*/
#ifndef KILN_AUTOGRAD_H
#define KILN_AUTOGRAD_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- grad mode (thread-local, on by default) ------------------------------ */
/* Set grad mode; returns the previous state. */
KN_API bool kn_set_grad_enabled(bool enabled);
KN_API bool kn_is_grad_enabled(void);
/* A no_grad scope: `bool prev = kn_no_grad_begin(); ... kn_no_grad_end(prev);`
** Ops inside record no graph. Scopes nest (restore the state they got). */
KN_API bool kn_no_grad_begin(void);
KN_API void kn_no_grad_end(bool prev);

/* ---- tensors ---------------------------------------------------------------- */
/* A new tensor sharing t's storage and geometry, without grad history
** (a leaf that does not require grad). New reference; NULL if t is NULL. */
KN_API kn_tensor *kn_detach(kn_tensor *t);
/* Make a non-leaf keep its .grad during backward (no-op on leaves that
** require grad). KN_EAUTOGRAD if t does not require grad. */
KN_API kn_status kn_retain_grad(kn_tensor *t);

/* The sequence number of t's grad_fn (PyTorch's grad_fn._sequence_nr()):
** nodes are numbered in creation order per thread, and backward runs them
** in decreasing order. -1 when t has no grad_fn (a leaf or no history). */
KN_API int64_t kn_grad_fn_seq_nr(const kn_tensor *t);

/* ---- hooks ------------------------------------------------------------------ */
/* A post-accumulate-grad hook (PyTorch's
** Tensor.register_post_accumulate_grad_hook): called by kn_backward (and
** kn_backward_ex) on the backward's thread right after the gradient of
** `leaf` was accumulated into its .grad (read it with kn_grad(leaf)). A
** non-OK status stops the backward and is returned by it (set
** kn_last_error's message first). Not called by kn_autograd_grad, which
** does not touch .grad. */
typedef kn_status (*kn_post_accumulate_grad_hook)(void *ud, kn_tensor *leaf);
/* Register fn(ud, leaf) on a leaf that requires grad; hooks run in
** registration order. *id (may be NULL) receives a handle for
** kn_remove_post_accumulate_grad_hook. ud stays the caller's. KN_EAUTOGRAD
** if leaf is not a leaf that requires grad. */
KN_API kn_status kn_register_post_accumulate_grad_hook(kn_tensor *leaf,
                                                       kn_post_accumulate_grad_hook fn,
                                                       void *ud, int *id);
/* Remove the hook with that handle; KN_EINVAL when leaf has none such. */
KN_API kn_status kn_remove_post_accumulate_grad_hook(kn_tensor *leaf, int id);

/* A final callback (PyTorch's Variable._execution_engine.queue_callback):
** queued during a backward (from a hook), it runs once on the backward's
** thread after the last node of that backward ran, inside the same
** kn_backward / kn_backward_ex / kn_autograd_grad call, in queue order
** (callbacks may queue more). backward_status is the backward's status so
** far: KN_OK, or the error that stopped it (then the callback should only
** clean up; what it returns is ignored). A callback's non-OK status becomes
** the backward's result, and the later callbacks see it. */
typedef kn_status (*kn_backward_final_fn)(void *ud, kn_status backward_status);
/* Queue fn(ud, status) to run at the end of the backward running on this
** thread (the innermost, for a backward started inside a hook). KN_ESTATE
** outside a backward; KN_EINVAL for a NULL fn. ud stays the caller's. */
KN_API kn_status kn_autograd_queue_callback(kn_backward_final_fn fn, void *ud);

/* ---- backward ------------------------------------------------------------------ */
/* Accumulate d(t)/d(leaf) * grad into the .grad of every leaf that requires
** grad (and of non-leaves with retains_grad). grad may be NULL only when t
** has one element (it is then 1). Frees the graph's saved tensors
** (retain_graph = false). */
KN_API kn_status kn_backward(kn_tensor *t, kn_tensor *grad);
/* The same with PyTorch's options: retain_graph keeps saved tensors for a
** second backward; create_graph records the backward computation itself,
** so the gradients have history (higher-order derivatives). PyTorch's
** default is retain_graph = create_graph: pass both true for a double
** backward through this graph later. */
KN_API kn_status kn_backward_ex(kn_tensor *t, kn_tensor *grad, bool retain_graph,
                                bool create_graph);
/* torch.autograd.grad: gradients of sum_i <outputs[i], grad_outputs[i]>
** with respect to inputs[0..m), written to out_grads[0..m) as new
** references; .grad fields are not touched. grad_outputs may be NULL (all
** outputs must then be one-element) or hold NULL entries (same rule per
** output). An input that does not take part in the graph is an error unless
** allow_unused, in which case its gradient is NULL. On error no reference
** is returned (out_grads entries are NULL). */
KN_API kn_status kn_autograd_grad(kn_tensor *const *outputs, int n,
                                  kn_tensor *const *inputs, int m,
                                  kn_tensor *const *grad_outputs, bool retain_graph,
                                  bool create_graph, bool allow_unused,
                                  kn_tensor **out_grads);

#ifdef __cplusplus
}
#endif
#endif
