/*
** autograd/hooks.c: post-accumulate-grad hooks of leaves (kiln/autograd.h).
** The list lives on the tensor (tensor/tensor.h, kn__acc_hook) and dies
** with it; the engine runs it after AccumulateGrad (engine.c, run_accum).
*/
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/autograd.h"

kn_status kn_register_post_accumulate_grad_hook(kn_tensor *leaf, kn_post_accumulate_grad_hook fn,
                                                void *ud, int *id) {
  if (!leaf || !fn)
    return kn__error(KN_EINVAL, "kn_register_post_accumulate_grad_hook: expected a tensor and a "
                     "function, found NULL");
  if (leaf->grad_fn || !leaf->requires_grad)
    return kn__error(KN_EAUTOGRAD, "post accumulate grad hooks cannot be registered on "
                     "non-leaf tensors or tensors that do not require grad");
  kn__acc_hook *h = calloc(1, sizeof *h), **tail = &leaf->acc_hooks;
  if (!h) return kn__oom();
  int last = 0;
  for (; *tail; tail = &(*tail)->next) last = (*tail)->id;
  *h = (kn__acc_hook){.fn = fn, .ud = ud, .id = last + 1};
  *tail = h;
  if (id) *id = h->id;
  return KN_OK;
}

kn_status kn_remove_post_accumulate_grad_hook(kn_tensor *leaf, int id) {
  if (!leaf)
    return kn__error(KN_EINVAL, "kn_remove_post_accumulate_grad_hook: expected a tensor, found "
                     "NULL");
  for (kn__acc_hook **p = &leaf->acc_hooks; *p; p = &(*p)->next) {
    if ((*p)->id != id) continue;
    kn__acc_hook *dead = *p;
    *p = dead->next;
    free(dead);
    return KN_OK;
  }
  return kn__error(KN_EINVAL, "kn_remove_post_accumulate_grad_hook: expected the id of a hook "
                   "registered on this tensor, found %d", id);
}

kn_status kn__run_acc_hooks(kn_tensor *leaf) {
  for (kn__acc_hook *h = leaf->acc_hooks; h; h = h->next) {
    kn_status st = h->fn(h->ud, leaf);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}
