/*
** kiln/graph.h: graph modules, the callable result of capturing a function
** (kn_export) or of a backend that keeps the captured graph as is.
**
** A graph module owns its graph (the ops the function performed, in order)
** and the constants the graph uses. Calling it runs the graph's ops eagerly
** through the dispatcher, so autograd records as usual.
*/
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_graph_module kn_graph_module;

/* Run the module: n inputs (borrowed; as many as the graph's placeholders)
** and m outputs (as many as the graph returns). outputs[i] receive NEW
** references, also recorded in the current autorelease scope when one is
** open (see kiln/tensor.h). On failure no output is set and kn_last_error()
** says what was expected and what was found. */
KN_API kn_status kn_graph_module_call(kn_graph_module *gm, kn_tensor *const *inputs, int n,
                                      kn_tensor **outputs, int m);
/* Number of inputs and outputs of the module; -1 for NULL. */
KN_API int kn_graph_module_num_inputs(const kn_graph_module *gm);
KN_API int kn_graph_module_num_outputs(const kn_graph_module *gm);
/* The graph as readable code (the "graph_code" form: class GraphModule ...).
** Owned: free() it. NULL on OOM or for NULL. */
KN_API char *kn_graph_module_code(const kn_graph_module *gm);
/* Frees the module, its graph and its references to constants. NULL is
** ignored. */
KN_API void kn_graph_module_free(kn_graph_module *gm);

#ifdef __cplusplus
}
#endif
#endif
