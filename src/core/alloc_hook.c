/*
** core/alloc_hook.c: the armed allocation failure (see alloc_hook.h).
*/
#include "core/alloc_hook.h"

atomic_long kn__alloc_countdown;
static atomic_bool fired;

bool kn__alloc_tick(void) {
  long left = atomic_load(&kn__alloc_countdown);
  while (left > 0) {
    if (atomic_compare_exchange_weak(&kn__alloc_countdown, &left, left - 1)) {
      if (left != 1) return false;
      atomic_store(&fired, true);
      return true;
    }
  }
  return false;
}

void kn__alloc_fail_at(long n) {
  atomic_store(&fired, false);
  atomic_store(&kn__alloc_countdown, n > 0 ? n : 0);
}

bool kn__alloc_failed(void) { return atomic_load(&fired); }
