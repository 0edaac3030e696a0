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

bool kn__autograd_needed(const kn__call *c) {
  if (grad_disabled || (c->op->flags & KN_OPF_NONDIFF)) return false;
  /* walks the arguments once (kn__call_input(c, k) would rescan them per k) */
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t && a->u.t->requires_grad) return true;
    for (int j = 0; a->kind == KN__A_TENSORS && j < a->u.ts.n; j++)
      if (a->u.ts.v[j] && a->u.ts.v[j]->requires_grad) return true;
  }
  return false;
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
