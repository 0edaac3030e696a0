/*
** autograd/engine.c: graph nodes and the backward engine.
** (Recording is not implemented yet: every recording attempt fails loudly.)
*/
#include "autograd/autograd.h"
#include "core/error.h"

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
