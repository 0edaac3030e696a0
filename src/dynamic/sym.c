/*
** dynamic/sym.c: symbolic integers. Constants only for now: the symbolic
** expression engine (shape environments, guards) is not built yet, so no
** symbolic value can exist and the slow paths are unreachable.
*/
#include <stdio.h>
#include <stdlib.h>

#include "dynamic/sym.h"

static kn_sym unreachable(void) {
  abort(); /* no shape env exists yet, so no symbolic operand can reach here */
}

kn_sym kn__sym_add_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_sub_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_mul_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_floordiv_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_mod_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_max_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }
kn_sym kn__sym_min_slow(kn_sym a, kn_sym b) { (void)a; (void)b; return unreachable(); }

bool kn__sym_guard(kn_sym a, kn__sym_rel rel, kn_sym b) {
  switch (rel) {
  case KN__SYM_EQ: return a.c == b.c;
  case KN__SYM_NE: return a.c != b.c;
  case KN__SYM_LT: return a.c < b.c;
  case KN__SYM_LE: return a.c <= b.c;
  case KN__SYM_GT: return a.c > b.c;
  case KN__SYM_GE: return a.c >= b.c;
  }
  return false;
}

int kn__sym_format(kn_sym a, char *buf, size_t n) {
  return snprintf(buf, n, "%lld", (long long)a.c);
}
