/*
** examples/explain.c: kn_explain, kiln's torch._dynamo.explain. It traces a
** function on some arguments and reports the graphs, their ops, the graph
** breaks (reason and source line) and the guards, without compiling
** anything into the function's cache. Build your own code with -g
** -fno-optimize-sibling-calls so the breaks have source lines.
*/
#include <stdio.h>
#include <stdlib.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"

/* Normalise x, then scale it by a factor read from its data: kn_item needs
** the real value, so it ends the first graph (a graph break). */
static kn_tensor *normalize_and_scale(kn_tensor *x) {
  kn_tensor *centered = kn_sub(x, kn_mean(x));
  double peak = kn_item(kn_amax(kn_abs(centered), NULL, 0, false));
  kn_tensor *scaled = kn_div_scalar(centered, kn_float(peak > 0 ? peak : 1));
  return kn_tanh(scaled);
}

int main(void) {
  kn_compiled *f = KN_COMPILE(normalize_and_scale, NULL);
  kn_scope_begin();
  kn_tensor *x = kn_from_floats((float[]){1, 2, 3, 4, 5, 6}, KN_SHAPE(2, 3));
  kn_explanation *e = kn_explain_t(f, x);
  if (!e) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    kn_scope_end();
    kn_compiled_free(f);
    return 1;
  }
  char *text = kn_explanation_str(e);
  printf("%s", text ? text : "(out of memory)\n");
  printf("\nThe first graph as code:\n%s", e->graphs[0].code);
  free(text);
  kn_explanation_free(e);
  kn_scope_end();
  kn_compiled_free(f);
  return 0;
}
