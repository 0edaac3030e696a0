/*
** aot/aot_cache.c: the graphs a compile hands to its compilers, traced and
** partitioned or taken from the AOT cache (PyTorch's AOTAutogradCache).
**
** The key is the SHA-256 of: the captured graph's canonical text
** (graph_serial.c: ops, constants, example metadata), each input's
** requires_grad, whether an inference graph is made, the AOT configuration
** text (partitioner ...) and the identity of the kiln build (path, size and
** modification time of the file holding this code: a rebuilt library, whose
** derivative rules may differ, never reads an older build's entries). A hit copies the forward/backward
** (or inference) graphs and the calling convention and skips the joint
** trace and the partition. Graphs with symbolic sizes bypass the cache (the
** joint trace adds guards on sizes, which a hit would not add), and so do
** graphs using a user generator (the graph borrows it). Trace artifacts
** aotautograd_cache_miss / _hit / _bypass carry {"key", "reason"}.
** In memory, process-wide, at most MAX_ENTRIES (the oldest goes); and on
** disk under the cache root unless KILN_AOT_DISK_CACHE=0 (aot_cache_disk.c):
** a memory miss reads the disk, a build writes both.
*/
#include <pthread.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot_cache_int.h"
#include "core/codeid.h"
#include "core/error.h"
#include "core/strbuf.h"

#define MAX_ENTRIES 256

typedef struct centry {
  char key[65];
  kn__aot_prepared p; /* fw/bw/arrays owned; id and config unused */
  struct centry *next;
} centry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static centry *head; /* newest first */
static int nentries, nhits;

/* ---- the key --------------------------------------------------------------------- */

static bool sym_meta(const kn__vmeta *m) {
  bool sym = m && !kn__sym_is_const(m->offset);
  for (int d = 0; m && d < m->ndim; d++)
    sym = sym || !kn__sym_is_const(m->sizes[d]) || !kn__sym_is_const(m->strides[d]);
  return sym;
}

/* Why g cannot be cached, or NULL. */
static const char *bypass_reason(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_inputs(g); i++)
    if (sym_meta(kn__graph_input(g, i)->meta))
      return "graph has symbolic sizes (the joint trace adds guards on them)";
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    for (int a = 0; n->op == KN__GN_CALL && a < n->nargs; a++)
      if (n->args[a].kind == KN__GA_GEN && n->args[a].u.gen)
        return "graph uses a user generator (borrowed by the graph)";
  }
  return NULL;
}

static pthread_once_t build_once = PTHREAD_ONCE_INIT;
static char build_id[4400];

static void find_build_id(void) { kn__code_ident(build_id, sizeof build_id); }

static kn_status cache_key(const kn__graph *g, const bool *rg, int n, bool inference,
                           const char *config, char key[65]) {
  char *ser = kn__graph_serialize(g);
  if (!ser) return kn_last_status();
  kn__sb sb;
  kn__sb_init(&sb);
  pthread_once(&build_once, find_build_id);
  kn__sb_printf(&sb, "kiln-aot-cache 1\nbuild: %s\n", build_id);
  kn__sb_puts(&sb, ser);
  kn__sb_puts(&sb, "\nrequires_grad:");
  for (int i = 0; i < n; i++) kn__sb_putc(&sb, rg && rg[i] ? '1' : '0');
  kn__sb_printf(&sb, "\ninference: %d\n", inference ? 1 : 0);
  kn__sb_puts(&sb, config);
  free(ser);
  kn_status st = kn__sb_failed(&sb) ? kn__oom() : KN_OK;
  if (st == KN_OK) SHA256Data((const uint8_t *)kn__sb_cstr(&sb), sb.len, key);
  kn__sb_fini(&sb);
  return st;
}

/* ---- entries ----------------------------------------------------------------------- */

static void parts_free(kn__aot_prepared *p) {
  kn__graph_free(p->fw);
  kn__graph_free(p->bw);
  free(p->out_diff);
  free(p->grad_input);
  p->fw = p->bw = NULL;
  p->out_diff = NULL;
  p->grad_input = NULL;
}

/* Copy the graphs and arrays of src into dst (id and config untouched). */
static kn_status parts_copy(const kn__aot_prepared *src, kn__aot_prepared *dst) {
  dst->inference = src->inference;
  dst->nuser = src->nuser;
  dst->ngrads = src->ngrads;
  dst->nsaved = src->nsaved;
  dst->fw = kn__graph_copy(src->fw);
  dst->bw = src->bw ? kn__graph_copy(src->bw) : NULL;
  dst->out_diff = calloc((size_t)src->nuser + 1, sizeof *dst->out_diff);
  dst->grad_input = calloc((size_t)src->ngrads + 1, sizeof *dst->grad_input);
  if (!dst->fw || (src->bw && !dst->bw) || !dst->out_diff || !dst->grad_input) {
    parts_free(dst);
    return kn__oom();
  }
  if (src->out_diff) memcpy(dst->out_diff, src->out_diff, (size_t)src->nuser * sizeof(bool));
  if (src->grad_input) memcpy(dst->grad_input, src->grad_input, (size_t)src->ngrads * sizeof(int));
  return KN_OK;
}

/* A copy of the entry for key into out; false when there is none. */
static bool lookup(const char *key, kn__aot_prepared *out, kn_status *st) {
  pthread_mutex_lock(&lock);
  centry *e = head;
  while (e && strcmp(e->key, key)) e = e->next;
  if (e) *st = parts_copy(&e->p, out);
  if (e && *st == KN_OK) nhits++;
  pthread_mutex_unlock(&lock);
  return e != NULL;
}

static void entry_free(centry *e) {
  parts_free(&e->p);
  free(e);
}

/* Store a copy of p under key (a failed copy is only a later miss). */
static void store(const char *key, const kn__aot_prepared *p) {
  centry *e = calloc(1, sizeof *e);
  if (!e || parts_copy(p, &e->p) != KN_OK) {
    free(e);
    return;
  }
  memcpy(e->key, key, 65);
  pthread_mutex_lock(&lock);
  e->next = head;
  head = e;
  if (++nentries > MAX_ENTRIES) {
    centry **pp = &head;
    while ((*pp)->next) pp = &(*pp)->next;
    entry_free(*pp);
    *pp = NULL;
    nentries--;
  }
  pthread_mutex_unlock(&lock);
}

void kn__aot_cache_stats(int *entries, int *hits) {
  pthread_mutex_lock(&lock);
  if (entries) *entries = nentries;
  if (hits) *hits = nhits;
  pthread_mutex_unlock(&lock);
}

void kn__aot_cache_clear(void) {
  pthread_mutex_lock(&lock);
  while (head) {
    centry *e = head;
    head = e->next;
    entry_free(e);
  }
  nentries = nhits = 0;
  pthread_mutex_unlock(&lock);
}

/* ---- tracing and partitioning ------------------------------------------------------- */

static kn_status build_inference(const kn__graph *g, int n, kn__aot_prepared *out) {
  kn__aot_joint j;
  kn__aot_phase ph;
  kn__aot_phase_begin(&ph, "aot_trace_inference_graph");
  kn_status st = kn__aot_trace_joint(g, NULL, n, true, &j);
  kn__aot_phase_end(&ph);
  if (st != KN_OK) return st;
  out->fw = j.g;
  out->nuser = j.nfw_out;
  j.g = NULL;
  kn__aot_joint_fini(&j);
  return KN_OK;
}

static kn_status build_training(const kn__graph *g, const bool *rg, int n,
                                kn__aot_partitioner how, kn__aot_prepared *out) {
  kn__aot_joint j;
  kn__aot_parts p = {0};
  kn__aot_phase ph;
  kn__aot_phase_begin(&ph, "aot_trace_joint_graph");
  kn_status st = kn__aot_trace_joint(g, rg, n, false, &j);
  kn__aot_phase_end(&ph);
  if (st != KN_OK) return st;
  kn__aot_log_graph(KN__AOT_JOINT, j.g, out->id);
  kn__aot_log_config(out->config);
  kn__aot_phase_begin(&ph, "aot_partition");
  st = kn__aot_partition_with(&j, how, &p);
  kn__aot_phase_end(&ph);
  out->nuser = j.nfw_out;
  out->ngrads = j.ngrads;
  out->nsaved = p.nsaved;
  out->out_diff = j.out_diff;
  out->grad_input = j.grad_input;
  out->fw = p.fw;
  out->bw = p.bw;
  j.out_diff = NULL;
  j.grad_input = NULL;
  kn__aot_joint_fini(&j);
  return st;
}

kn_status kn__aot_prepare(const kn__graph *g, const bool *rg, int n, bool inference,
                          const kn__aot_config *cfg, kn__aot_prepared *out) {
  memset(out, 0, sizeof *out);
  out->inference = inference;
  out->id = kn__aot_next_id();
  const char *from = NULL;
  kn__aot_partitioner how = kn__aot_partitioner_resolve(cfg, &from);
  if (!(out->config = kn__aot_config_text(how, from))) return kn_last_status();
  const char *bypass = bypass_reason(g);
  char key[65] = "";
  kn_status st = bypass ? KN_OK : cache_key(g, rg, n, inference, out->config, key);
  char why[120] = "not in cache";
  const char *hit = NULL;
  if (st == KN_OK && !bypass && lookup(key, out, &st)) hit = "found in memory";
  else if (st == KN_OK && !bypass && kn__aot_disk_load(key, inference, out, why, sizeof why)) {
    hit = "found on disk";
    store(key, out);
  }
  if (hit) {
    if (st == KN_OK) kn__aot_log_cache("aotautograd_cache_hit", key, hit);
    if (st == KN_OK && !inference) kn__aot_log_config(out->config);
    if (st != KN_OK) kn__aot_prepared_fini(out);
    return st;
  }
  if (st == KN_OK && !bypass) kn__aot_log_cache("aotautograd_cache_miss", key, why);
  if (st == KN_OK)
    st = inference ? build_inference(g, n, out) : build_training(g, rg, n, how, out);
  if (st == KN_OK && bypass) kn__aot_log_cache("aotautograd_cache_bypass", "", bypass);
  else if (st == KN_OK) {
    store(key, out);
    kn__aot_disk_store(key, out);
  }
  if (st != KN_OK) kn__aot_prepared_fini(out);
  return st;
}

void kn__aot_prepared_fini(kn__aot_prepared *p) {
  parts_free(p);
  free(p->config);
  memset(p, 0, sizeof *p);
}
