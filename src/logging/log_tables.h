/*
** logging/log_tables.h: the build-time registry of kiln's log names, one row
** each, expanded into enums (array indexes) and tables by registry.c.
**   KN_LOGGER_MAP     module loggers: id, dotted qualified name
**   KN_COMPONENT_MAP  components (aliases): id, name, the loggers it sets
**   KN_ARTIFACT_MAP   artifacts: id, name, emitting logger, flags, help text
** Artifact names are PyTorch's, so record counts per artifact compare 1:1.
*/
#ifndef KN_LOGGING_LOG_TABLES_H
#define KN_LOGGING_LOG_TABLES_H

#define KN_LOGGER_MAP(X)                                                   \
  X(KN_LOG_KILN, "kiln")                                                   \
  X(KN_LOG_LOGGING, "kiln.logging")                                        \
  X(KN_LOG_DYNAMO, "kiln.dynamo")                                          \
  X(KN_LOG_DYNAMO_GUARDS, "kiln.dynamo.guards")                            \
  X(KN_LOG_DYNAMO_CONVERT_FRAME, "kiln.dynamo.convert_frame")              \
  X(KN_LOG_DYNAMO_OUTPUT_GRAPH, "kiln.dynamo.output_graph")                \
  X(KN_LOG_DYNAMO_SYMBOLIC_CONVERT, "kiln.dynamo.symbolic_convert")        \
  X(KN_LOG_DYNAMO_EXC, "kiln.dynamo.exc")                                  \
  X(KN_LOG_DYNAMO_UTILS, "kiln.dynamo.utils")                              \
  X(KN_LOG_DYNAMO_COMPILED_AUTOGRAD, "kiln.dynamo.compiled_autograd")      \
  X(KN_LOG_DYNAMO_DISTRIBUTED, "kiln.dynamo.backends.distributed")         \
  X(KN_LOG_SYMBOLIC_SHAPES, "kiln.symbolic_shapes")                        \
  X(KN_LOG_SYM_NODE, "kiln.sym_node")                                      \
  X(KN_LOG_AOT, "kiln.aot")                                                \
  X(KN_LOG_AUTOGRAD, "kiln.autograd")                                      \
  X(KN_LOG_INDUCTOR, "kiln.inductor")                                      \
  X(KN_LOG_INDUCTOR_GRAPH, "kiln.inductor.graph")                          \
  X(KN_LOG_INDUCTOR_COMPILE_FX, "kiln.inductor.compile_fx")                \
  X(KN_LOG_INDUCTOR_SCHEDULER, "kiln.inductor.scheduler")                  \
  X(KN_LOG_INDUCTOR_CODEGEN, "kiln.inductor.codegen")                      \
  X(KN_LOG_INDUCTOR_CODECACHE, "kiln.inductor.codecache")                  \
  X(KN_LOG_INDUCTOR_CUDAGRAPH_TREES, "kiln.inductor.cudagraph_trees")      \
  X(KN_LOG_DISTRIBUTED, "kiln.distributed")                                \
  X(KN_LOG_C10D, "kiln.distributed.c10d")                                  \
  X(KN_LOG_DDP, "kiln.distributed.ddp")                                    \
  X(KN_LOG_FSDP, "kiln.distributed.fsdp")                                  \
  X(KN_LOG_PP, "kiln.distributed.pipelining")                              \
  X(KN_LOG_EXPORT, "kiln.export")                                          \
  X(KN_LOG_TRACE, "kiln.trace")                                            \
  X(KN_LOG_CUDA, "kiln.cuda")

/* "kiln" is also reachable as "all". Shared loggers (dynamo, dynamic and
** export all set kiln.symbolic_shapes) take the last write. */
#define KN_COMPONENT_MAP(X)                                                \
  X(KN_COMP_KILN, "kiln", KN_LOG_KILN)                                     \
  X(KN_COMP_DYNAMO, "dynamo", KN_LOG_DYNAMO, KN_LOG_SYMBOLIC_SHAPES,       \
    KN_LOG_SYM_NODE)                                                       \
  X(KN_COMP_AOT, "aot", KN_LOG_AOT)                                        \
  X(KN_COMP_AUTOGRAD, "autograd", KN_LOG_AUTOGRAD)                         \
  X(KN_COMP_INDUCTOR, "inductor", KN_LOG_INDUCTOR)                         \
  X(KN_COMP_DYNAMIC, "dynamic", KN_LOG_SYMBOLIC_SHAPES, KN_LOG_SYM_NODE)   \
  X(KN_COMP_DISTRIBUTED, "distributed", KN_LOG_DISTRIBUTED,                \
    KN_LOG_DYNAMO_DISTRIBUTED, KN_LOG_DDP)                                 \
  X(KN_COMP_C10D, "c10d", KN_LOG_C10D)                                     \
  X(KN_COMP_DDP, "ddp", KN_LOG_DDP, KN_LOG_DYNAMO_DISTRIBUTED)             \
  X(KN_COMP_PP, "pp", KN_LOG_PP)                                           \
  X(KN_COMP_FSDP, "fsdp", KN_LOG_FSDP)                                     \
  X(KN_COMP_EXPORT, "export", KN_LOG_DYNAMO, KN_LOG_EXPORT,                \
    KN_LOG_SYMBOLIC_SHAPES, KN_LOG_SYM_NODE)                               \
  X(KN_COMP_CUDA, "cuda", KN_LOG_CUDA)

#define KN__OFF KN_ARTIFACT_OFF_BY_DEFAULT
#define KN__VIS KN_ARTIFACT_VISIBLE
#define KN__RAW KN_ARTIFACT_RAW
/* Internal flag: the artifact belongs to a layer kiln does not build yet
** (AOT autograd, inductor, distributed, ...) or is not emitted yet. Its
** name is accepted (PyTorch's names) and `kiln logs` marks it. */
#define KN__NYB KN__ARTIFACT_NOT_BUILT
#define KN__ARTIFACT_NOT_BUILT 0x100u

#define KN_ARTIFACT_MAP(X)                                                  \
  X(KN_ART_GUARDS, "guards", KN_LOG_DYNAMO_GUARDS, KN__VIS,                 \
    "This prints the guards for every compiled Dynamo frame. It does not "  \
    "tell you where the guards come from.")                                 \
  X(KN_ART_VERBOSE_GUARDS, "verbose_guards", KN_LOG_DYNAMO_GUARDS, KN__OFF | KN__NYB, \
    "")                                                                     \
  X(KN_ART_BYTECODE, "bytecode", KN_LOG_DYNAMO_CONVERT_FRAME, KN__OFF | KN__NYB,      \
    "Prints the original and modified IR from Dynamo. Mostly useful if "    \
    "you're debugging our IR generation in Dynamo.")                        \
  X(KN_ART_GRAPH, "graph", KN_LOG_DYNAMO_OUTPUT_GRAPH, 0,                   \
    "Prints the dynamo traced graph (prior to AOTDispatch) in a table. If " \
    "you prefer C code use `graph_code` instead.")                         \
  X(KN_ART_GRAPH_CODE, "graph_code", KN_LOG_DYNAMO_OUTPUT_GRAPH, 0,         \
    "Like `graph`, but gives you the C code instead.")                      \
  X(KN_ART_GRAPH_SIZES, "graph_sizes", KN_LOG_DYNAMO_OUTPUT_GRAPH, 0,       \
    "Prints the sizes of all nodes in the dynamo graph.")                   \
  X(KN_ART_TRACE_SOURCE, "trace_source", KN_LOG_DYNAMO_SYMBOLIC_CONVERT, 0, \
    "As we trace the user function, prints the file name / line number we " \
    "are processing and the actual source code. Useful with `bytecode`")    \
  X(KN_ART_TRACE_CALL, "trace_call", KN_LOG_DYNAMO_OUTPUT_GRAPH, 0,         \
    "Like trace_source, but it will give you the per-expression "           \
    "blow-by-blow.")                                                        \
  X(KN_ART_TRACE_BYTECODE, "trace_bytecode",                                \
    KN_LOG_DYNAMO_SYMBOLIC_CONVERT, KN__NYB,                                      \
    "As we trace, prints each op call and the current stack.")              \
  X(KN_ART_AOT_GRAPHS, "aot_graphs", KN_LOG_AOT, KN__VIS,                             \
    "Prints the forward and backward graph generated by AOTDispatch, "      \
    "after partitioning. Useful to understand what's being given to "       \
    "Inductor")                                                             \
  X(KN_ART_AOT_JOINT_GRAPH, "aot_joint_graph", KN_LOG_AOT, 0,                         \
    "Print the joint graph from AOTAutograd, prior to partitioning. Useful " \
    "for debugging partitioning")                                           \
  X(KN_ART_POST_GRAD_GRAPHS, "post_grad_graphs", KN_LOG_INDUCTOR_COMPILE_FX, \
    0,                                                                      \
    "Prints the graph generated by post grad passes. Useful to understand " \
    "what's being given to Inductor after post grad passes")                \
  X(KN_ART_COMPILED_AUTOGRAD, "compiled_autograd",                          \
    KN_LOG_DYNAMO_COMPILED_AUTOGRAD, KN__VIS | KN__NYB,                               \
    "Prints various logs in compiled_autograd, including but not limited "  \
    "to the graphs. Useful for debugging compiled_autograd.")               \
  X(KN_ART_COMPILED_AUTOGRAD_VERBOSE, "compiled_autograd_verbose",          \
    KN_LOG_DYNAMO_COMPILED_AUTOGRAD, KN__OFF | KN__NYB,                               \
    "Will affect performance. Prints compiled_autograd logs with C info "   \
    "e.g. autograd node -> graph node mapping")                             \
  X(KN_ART_DDP_GRAPHS, "ddp_graphs", KN_LOG_DYNAMO_DISTRIBUTED, 0,                \
    "Only relevant for compiling DDP. DDP splits into multiple graphs to "  \
    "trigger comms early. This will print each individual graph here.")    \
  X(KN_ART_RECOMPILES, "recompiles", KN_LOG_DYNAMO_GUARDS, KN__VIS,         \
    "Prints the reason why we recompiled a graph. Very, very useful.")      \
  X(KN_ART_RECOMPILES_VERBOSE, "recompiles_verbose", KN_LOG_DYNAMO_GUARDS,  \
    KN__OFF | KN__VIS,                                                      \
    "Prints all guard checks that fail during a recompilation. At "         \
    "runtime, Dynamo will stop at the first failed check for each failing " \
    "guard. So not all logged failing checks are actually ran by Dynamo.")  \
  X(KN_ART_GRAPH_BREAKS, "graph_breaks", KN_LOG_DYNAMO_SYMBOLIC_CONVERT,    \
    KN__VIS,                                                                \
    "Prints whenever Dynamo decides that it needs to graph break (i.e. "    \
    "create a new graph). Useful for debugging why kn_compile has poor "    \
    "performance")                                                          \
  X(KN_ART_OUTPUT_CODE, "output_code", KN_LOG_INDUCTOR_GRAPH,               \
    KN__OFF | KN__VIS, "Prints the code that Inductor generates (C)")                 \
  X(KN_ART_KERNEL_CODE, "kernel_code", KN_LOG_INDUCTOR_CODEGEN,             \
    KN__OFF | KN__VIS | KN__NYB,                                                      \
    "Prints the code that Inductor generates (on a per-kernel basis)")      \
  X(KN_ART_SCHEDULE, "schedule", KN_LOG_INDUCTOR_SCHEDULER, KN__OFF,        \
    "Inductor scheduler information. Useful if working on Inductor fusion " \
    "algo")                                                                 \
  X(KN_ART_KERNEL_IR, "kernel_ir", KN_LOG_INDUCTOR_SCHEDULER, KN__OFF,     \
    "The kernel IR of each graph inductor compiles: kernels, the buffers " \
    "they read and write, and the memory plan (reuse, in place, frees)")  \
  X(KN_ART_PERF_HINTS, "perf_hints", KN_LOG_INDUCTOR, KN__OFF, "")                    \
  X(KN_ART_CUDAGRAPHS, "cudagraphs", KN_LOG_INDUCTOR_CUDAGRAPH_TREES, 0,     \
    "Logs information from wrapping inductor generated code with "        \
    "cudagraphs.")                                                          \
  X(KN_ART_FUSION, "fusion", KN_LOG_INDUCTOR_SCHEDULER, KN__OFF,            \
    "Detailed Inductor fusion decisions. More detailed than 'schedule'")    \
  X(KN_ART_OVERLAP, "overlap", KN_LOG_INDUCTOR, KN__OFF | KN__NYB,                    \
    "Detailed Inductor compute/comm overlap decisions")                     \
  X(KN_ART_SYM_NODE, "sym_node", KN_LOG_SYM_NODE, KN__OFF | KN__NYB,        \
    "Logs extra info for various SymNode operations")

#endif
