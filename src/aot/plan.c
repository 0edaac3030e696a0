/*
** aot/plan.c: the runtime plan (written by functionalize.c): its dump, the
** aot_forward_graph_fw_metadata artifact, and applying it after a compiled
** call: each write-back exactly once, then the caller's outputs rebuilt
** (inputs returned as themselves, aliases regenerated as views).
*/
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "kiln/autograd.h"
#include "kiln/ops.h"
#include "tensor/tensor.h"
#include "trace/events.h"
#include "trace/trace.h"

void kn__aot_plan_fini(kn__aot_plan *p) {
  for (int i = 0; p->mutations && i < p->nmutated; i++) kn_release(p->mutations[i].konst);
  free(p->inputs);
  free(p->mutations);
  free(p->outs);
  free(p->binds);
  kn__shape_env_free(p->env);
  memset(p, 0, sizeof *p);
}

/* ---- the dump ------------------------------------------------------------------------- */

/* PyTorch's OutputType names: a view of a user output is
** alias_of_intermediate_base_is_user_output, of a base the forward returns
** only for it alias_of_intermediate_save_as_output. */
static const char *kind_name(const kn__aot_plan *p, const kn__aot_out_info *o) {
  switch (o->kind) {
  case KN__AOT_OUT_NON_ALIAS: return "non_alias: 1";
  case KN__AOT_OUT_IS_INPUT: return "is_input: 3";
  case KN__AOT_OUT_ALIAS_OF_INPUT: return "alias_of_input: 2";
  case KN__AOT_OUT_SAME_AS_OUTPUT: return "alias_of_intermediate_base_is_user_output: 6";
  case KN__AOT_OUT_ALIAS_OF_OUTPUT: break;
  }
  return o->base < p->nmutated + p->nuser ? "alias_of_intermediate_base_is_user_output: 6"
                                          : "alias_of_intermediate_save_as_output: 4";
}

static void put_ints(kn__sb *sb, const int64_t *v, int n) {
  kn__sb_putc(sb, '[');
  for (int i = 0; i < n; i++) kn__sb_printf(sb, "%s%lld", i ? ", " : "", (long long)v[i]);
  kn__sb_putc(sb, ']');
}

static void put_output(kn__sb *sb, const kn__aot_plan *p, const kn__aot_out_info *o) {
  kn__sb_printf(sb, "OutputAliasInfo(output_type=<OutputType.%s>, base_idx=", kind_name(p, o));
  if (o->kind == KN__AOT_OUT_NON_ALIAS) kn__sb_puts(sb, "None");
  else kn__sb_printf(sb, "%d", o->base);
  if (o->kind == KN__AOT_OUT_ALIAS_OF_INPUT || o->kind == KN__AOT_OUT_ALIAS_OF_OUTPUT) {
    kn__sb_puts(sb, ", view=as_strided(size=");
    put_ints(sb, o->view.sizes, o->view.ndim);
    kn__sb_puts(sb, ", stride=");
    put_ints(sb, o->view.strides, o->view.ndim);
    kn__sb_printf(sb, ", storage_offset=%lld)", (long long)o->view.offset);
  }
  kn__sb_putc(sb, ')');
}

static void put_mutation(kn__sb *sb, const kn__aot_mutation *m) {
  if (m->input >= 0) kn__sb_printf(sb, "input %d", m->input);
  else kn__sb_puts(sb, "a captured constant");
  kn__sb_printf(sb, " <- copy_(under %s)", !m->with_grad ? "no_grad"
                                            : m->grad_forced ? "grad" : "the caller's grad mode");
}

char *kn__aot_plan_str(const kn__aot_plan *p, bool is_train) {
  kn__sb sb;
  kn__sb_init(&sb);
  const char *ind = "                    ";
  kn__sb_puts(&sb, "ViewAndMutationMeta(input_info=[");
  for (int i = 0; i < p->ninputs; i++) {
    const kn__aot_input_info *in = &p->inputs[i];
    kn__sb_printf(&sb, "%sInputAliasInfo(mutates_data=%s, mutates_metadata=%s, "
                  "mutations_under_no_grad_or_inference_mode=%s)",
                  i ? ",\n                                " : "", in->mutates_data ? "True" : "False",
                  in->mutates_metadata ? "True" : "False",
                  in->mutated_under_no_grad ? "True" : "False");
  }
  kn__sb_printf(&sb, "],\n%soutput_info=[", ind);
  for (int j = 0; j < p->nuser; j++) {
    if (j) kn__sb_printf(&sb, ",\n%s             ", ind);
    put_output(&sb, p, &p->outs[j]);
  }
  kn__sb_printf(&sb, "],\n%swrite_backs=[", ind);
  for (int i = 0; i < p->nmutated; i++) {
    if (i) kn__sb_puts(&sb, ", ");
    put_mutation(&sb, &p->mutations[i]);
  }
  kn__sb_printf(&sb, "],\n%snum_mutated_inp_runtime_indices=%d,\n%snum_intermediate_bases=%d,\n"
                "%sis_train=%s)\n", ind, p->nmutated, ind, p->nbases, ind, is_train ? "True" : "False");
  if (kn__sb_failed(&sb)) {
    kn__sb_fini(&sb);
    return kn__oom(), NULL;
  }
  return kn__sb_take(&sb);
}

void kn__aot_plan_log(const kn__aot_plan *p, bool is_train) {
  if (!kn__trace_enabled()) return;
  char *s = kn__aot_plan_str(p, is_train);
  if (s) (void)kn__trace_artifact("aot_forward_graph_fw_metadata", "string", s, SIZE_MAX, NULL);
  free(s);
}

/* ---- applying it ------------------------------------------------------------------------ */

/* Copy v into the mutated tensor, under no_grad when every mutation was. */
static kn_status write_back(const kn__aot_mutation *m, kn_tensor *const *in, kn_tensor *v) {
  kn_tensor *dst = m->input >= 0 ? in[m->input] : m->konst;
  if (v == dst && !m->with_grad) { /* computed in place (run_into): only the version moves */
    kn__bump_version(dst);
    return KN_OK;
  }
  bool prev = kn_set_grad_enabled(m->with_grad && (m->grad_forced || kn_is_grad_enabled()));
  kn_status st = kn_copy_(dst, v);
  kn_set_grad_enabled(prev);
  return st;
}

static bool same_geom(const kn_tensor *t, const kn__aot_geom *g) {
  if (t->ndim != g->ndim) return false;
  for (int d = 0; d < g->ndim; d++)
    if (t->sizes[d] != g->sizes[d] || (g->sizes[d] > 1 && t->strides[d] != g->strides[d])) return false;
  return true;
}

/* g at this call's sizes: the symbols read off the inputs (vals has
** p->nsyms entries). */
static kn_status geom_at(const kn__aot_plan *p, kn_tensor *const *in, const kn__aot_geom *g,
                         kn__aot_geom *out) {
  *out = *g;
  if (!p->nbinds) return KN_OK;
  int64_t small[32], *vals = p->nsyms < 32 ? small : calloc((size_t)p->nsyms + 1, sizeof *vals);
  if (!vals) return kn__oom();
  for (int k = 0; k < p->nsyms; k++) vals[k] = 0;
  for (int b = 0; b < p->nbinds; b++) vals[p->binds[b].sym] = in[p->binds[b].input]->sizes[p->binds[b].dim];
  for (int d = 0; d < g->ndim; d++) {
    out->sizes[d] = kn__sym_eval(g->ssizes[d], vals);
    out->strides[d] = kn__sym_eval(g->sstrides[d], vals);
  }
  out->offset = kn__sym_eval(g->soffset, vals);
  if (vals != small) free(vals);
  return KN_OK;
}

/* A view of base with geometry g, recorded by autograd in grad mode
** `mode` (-1: the caller's), as the view ops it stands for were. */
static kn_tensor *regen(kn_tensor *base, const kn__aot_geom *g, signed char mode) {
  bool prev = kn_set_grad_enabled(mode < 0 ? kn_is_grad_enabled() : mode != 0);
  kn_scope_begin();
  kn_tensor *v = kn_as_strided(base, g->ndim, g->sizes, g->strides, base->offset + g->offset);
  if (v) kn_retain(v);
  kn_scope_end();
  kn_set_grad_enabled(prev);
  return v;
}

static kn_status alias_output(const kn__aot_plan *p, int j, kn_tensor *const *in, kn_tensor **fw,
                              kn_tensor **user) {
  const kn__aot_out_info *o = &p->outs[j];
  kn_tensor *base;
  if (o->kind == KN__AOT_OUT_ALIAS_OF_INPUT) base = in[o->base];
  else if (o->base < p->nmutated + p->nuser) base = user[o->base - p->nmutated];
  else base = fw[o->base];
  if (!base) return kn__error(KN_EINTERNAL, "aot: output %d: its base is missing", j);
  kn__aot_geom view, bg;
  kn_status st = geom_at(p, in, &o->view, &view);
  if (st == KN_OK) st = geom_at(p, in, &o->base_geom, &bg);
  if (st != KN_OK) return st;
  if (o->kind == KN__AOT_OUT_ALIAS_OF_OUTPUT && !same_geom(base, &bg))
    return kn__error(KN_EINTERNAL, "aot: output %d is a view of output %d, whose layout differs "
                     "from the traced one", j, o->base);
  user[j] = regen(base, &view, o->grad_mode);
  return user[j] ? KN_OK : kn_last_status();
}

static kn_status user_outputs(const kn__aot_plan *p, kn_tensor *const *in, kn_tensor **fw,
                              kn_tensor **user) {
  kn_status st = KN_OK;
  for (int j = 0; j < p->nuser; j++) { /* fresh values and inputs first: aliases need them */
    const kn__aot_out_info *o = &p->outs[j];
    if (o->kind == KN__AOT_OUT_NON_ALIAS) {
      user[j] = fw[p->nmutated + j];
      fw[p->nmutated + j] = NULL;
    } else if (o->kind == KN__AOT_OUT_IS_INPUT) {
      user[j] = kn_retain(in[o->base]);
    }
  }
  for (int j = 0; st == KN_OK && j < p->nuser; j++) {
    kn__aot_out_kind k = p->outs[j].kind;
    if (k == KN__AOT_OUT_ALIAS_OF_INPUT || k == KN__AOT_OUT_ALIAS_OF_OUTPUT)
      st = alias_output(p, j, in, fw, user);
  }
  for (int j = 0; st == KN_OK && j < p->nuser; j++)
    if (p->outs[j].kind == KN__AOT_OUT_SAME_AS_OUTPUT) user[j] = kn_retain(user[p->outs[j].base]);
  return st;
}

kn_status kn__aot_plan_apply(const kn__aot_plan *p, kn_tensor *const *in, kn_tensor **fw,
                             kn_tensor **user) {
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < p->nmutated; i++) st = write_back(&p->mutations[i], in, fw[i]);
  for (int j = 0; j < p->nuser; j++) user[j] = NULL;
  if (st == KN_OK) st = user_outputs(p, in, fw, user);
  if (st == KN_OK) return KN_OK;
  for (int j = 0; j < p->nuser; j++) {
    kn_release(user[j]);
    user[j] = NULL;
  }
  return st;
}
