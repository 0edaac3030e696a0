/*
** autograd/engine.c: graph nodes and the backward engine.
** (Recording is not implemented yet: every recording attempt fails loudly.)
*/
#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/autograd.h"

kn_status kn__autograd_check_inplace(const kn__call *c) {
  (void)c;
  return KN_OK;
}

kn_status kn__autograd_record(const kn__call *c, kn__outs *out) {
  (void)out;
  return kn__error(KN_EUNSUPPORTED, "%s: autograd recording is not available yet",
                   c->op->name);
}

void kn__node_retain(kn__node *n) { (void)n; }
void kn__node_release(kn__node *n) { (void)n; }
const char *kn__node_name(const kn__node *n) {
  (void)n;
  return "";
}

kn_tensor *kn_detach(kn_tensor *t) {
  (void)t;
  kn__error(KN_EUNSUPPORTED, "detach: not available yet");
  return NULL;
}
kn_status kn_retain_grad(kn_tensor *t) {
  (void)t;
  return kn__error(KN_EUNSUPPORTED, "retain_grad: not available yet");
}
kn_status kn_backward(kn_tensor *t, kn_tensor *grad) { return kn_backward_ex(t, grad, false, false); }
kn_status kn_backward_ex(kn_tensor *t, kn_tensor *grad, bool retain_graph, bool create_graph) {
  (void)t; (void)grad; (void)retain_graph; (void)create_graph;
  return kn__error(KN_EUNSUPPORTED, "backward: not available yet");
}
kn_status kn_autograd_grad(kn_tensor *const *outputs, int n, kn_tensor *const *inputs, int m,
                           kn_tensor *const *grad_outputs, bool retain_graph,
                           bool create_graph, bool allow_unused, kn_tensor **out_grads) {
  (void)outputs; (void)n; (void)inputs; (void)grad_outputs; (void)retain_graph;
  (void)create_graph; (void)allow_unused;
  for (int i = 0; i < m; i++) out_grads[i] = NULL;
  return kn__error(KN_EUNSUPPORTED, "autograd.grad: not available yet");
}
