/*
** autograd/grad_mode.c: grad mode (thread-local) and the dispatcher's hooks
** into autograd. The engine that records nodes and runs backward lands in
** autograd/engine.c.
*/
#include "autograd/autograd.h"
#include "core/error.h"

static _Thread_local bool grad_disabled;

bool kn__grad_enabled(void) { return !grad_disabled; }

bool kn__autograd_needed(const kn__call *c) {
  if (grad_disabled || (c->op->flags & KN_OPF_NONDIFF)) return false;
  for (int k = 0, n = kn__call_ninputs(c); k < n; k++) {
    const kn_tensor *t = kn__call_input(c, k);
    if (t && t->requires_grad) return true;
  }
  return false;
}
