/*
** autograd/grad_mode.c: grad mode (thread-local) and the dispatcher's hooks
** into autograd. The engine that records nodes and runs backward lands in
** autograd/engine.c.
*/
#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/autograd.h"

static _Thread_local bool grad_disabled;

bool kn__grad_enabled(void) { return !grad_disabled; }

static bool requires_grad(const kn_tensor *t) { return t->requires_grad; }

bool kn__autograd_needed(const kn__call *c) {
  if (grad_disabled || (c->op->flags & KN_OPF_NONDIFF)) return false;
  return kn__call_any_input(c, requires_grad);
}

/* ---- public grad-mode API --------------------------------------------------- */

bool kn_set_grad_enabled(bool enabled) {
  bool prev = !grad_disabled;
  grad_disabled = !enabled;
  return prev;
}

bool kn_is_grad_enabled(void) { return !grad_disabled; }

bool kn_no_grad_begin(void) { return kn_set_grad_enabled(false); }

void kn_no_grad_end(bool prev) { kn_set_grad_enabled(prev); }
