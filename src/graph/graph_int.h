/*
** graph/graph_int.h: private pieces shared by the graph IR's files
** (graph.c, graph_names.c, graph_print.c, graph_serial.c, interp.c). Not for
** other subsystems: they use graph/graph.h.
*/
#ifndef KN_GRAPH_GRAPH_INT_H
#define KN_GRAPH_GRAPH_INT_H

#include "core/arena.h"
#include "core/hashmap.h"
#include "core/strbuf.h"
#include "graph/graph.h"

/* FX's _Namespace: names in use and the per-base suffix counters. */
typedef struct kn__gnames {
  kn__hashmap used;   /* name -> node (or NULL) */
  kn__hashmap count;  /* base -> (void*)(intptr_t)last suffix */
} kn__gnames;

struct kn__graph {
  kn__arena arena;        /* nodes, strings and arrays */
  kn__gnode **nodes;      /* owned array of arena nodes, in order */
  int n, cap;
  int ninputs;            /* placeholders come first: nodes[0..ninputs) */
  kn__gnode *output;
  int next_seq;
  kn__gnames names;
  kn__hashmap getitems;   /* (src seq_nr << 20 | k) -> getitem node */
  kn__shape_env *env;
  bool owns_env;
  kn__gnode *insert_before; /* new nodes go before it; NULL: appended */
};

/* Add delta to the user count of every node n's arguments refer to. */
void kn__gnode_count_users(const kn__gnode *n, int delta);

void kn__gnames_init(kn__gnames *ns);
void kn__gnames_fini(kn__gnames *ns);
/* FX's create_name: a unique name for candidate, copied into arena. NULL on
** OOM. */
const char *kn__gnames_create(kn__gnames *ns, kn__arena *a, const char *candidate,
                              kn__gnode *node);
void kn__gnames_release(kn__gnames *ns, const char *name);
/* FX's _snake_case ("L_x_" -> "l_x_", "pascalCase" -> "pascal_case");
** writes into out (cap bytes, truncating). */
void kn__gnames_snake(const char *s, char *out, size_t cap);
/* Is name a Python keyword or builtin (or one of FX's custom builtins)? */
bool kn__gnames_reserved(const char *name);

/* Python repr of a double ("1.0", "0.1", "1e-05", "inf", "nan"). */
void kn__py_float(kn__sb *sb, double v);
/* "kiln.float32" (the dtype in graph code) */
void kn__py_dtype(kn__sb *sb, kn_dtype dt);
/* A kn_sym as Python shows it ("1000", "s0", "s0*s1"). */
void kn__py_sym(kn__sb *sb, kn_sym s);

/* Python repr of a call argument: node names for values ("add",
** "split[1]" for an output without a getitem node), "[a, b]", "[1000, s0]",
** "None", "True", "kiln.float32". */
void kn__gfmt_arg(kn__sb *sb, const kn__garg *a);
/* Argument names of an op's schema, whether each is keyword-only (after
** "*"), and its default value text ("1", "None", "False"; NULL when none).
** Returns the count (at most KN__MAX_ARGS). Names and defaults are borrowed
** views into the schema (len bytes). */
/* The argument's type from the schema: what kind of value it takes, whether
** it is optional ("Tensor?", "int[1]?") and a list, and for enum-like
** arguments (str approximate, int reduction, MemoryFormat) the names of
** their values, printed instead of the ints kiln passes. */
typedef enum kn__ptype {
  KN__PT_TENSOR, KN__PT_INT, KN__PT_FLOAT, KN__PT_BOOL, KN__PT_SCALAR, KN__PT_DTYPE,
  KN__PT_GENERATOR, KN__PT_ENUM, KN__PT_OTHER
} kn__ptype;
typedef struct kn__schema_arg {
  const char *name, *def;
  int name_len, def_len;
  bool kwonly;
  kn__ptype type;
  bool optional, list;
  const char *const *enum_names; /* KN__PT_ENUM: value i prints as enum_names[i] */
  int nenum;
} kn__schema_arg;
int kn__schema_args(const char *schema, kn__schema_arg *out);
/* An argument as kn__gfmt_arg writes it, enum values by name when sa (may be
** NULL) is an enum argument: "approximate = 'tanh'", "reduction = Sum". */
void kn__gfmt_arg_as(kn__sb *sb, const kn__garg *a, const kn__schema_arg *sa);
/* Does argument a fit the schema argument's type? */
bool kn__garg_fits(const kn__garg *a, const kn__schema_arg *sa);
/* Is argument i of n printed as a keyword (kw-only) and is it at its
** default (omitted by the printers)? */
bool kn__gargs_kw_default(const kn__gnode *n, const kn__schema_arg *sa, int nsa, int i);

/* Short dtype names of FX annotations: "f32", "i64", "b8". */
const char *kn__dtype_abbr(kn_dtype dt);

#endif
