/*
** tools/report/compiles.c: the per-compile-id summary entries.
**
** Entries are found through an open-addressing table keyed by the four id
** fields, and the directory name and label share one allocation, so a
** compile id costs a few hundred bytes however many there are. Past
** RP_MAX_COMPILES distinct ids, new ids are refused (the caller counts a
** defect).
*/
#include <stdlib.h>
#include <string.h>

#include "core/hashmap.h"
#include "report/report.h"

static void fmt_field(char *p, size_t n, int64_t v) {
  if (v < 0) snprintf(p, n, "-");
  else snprintf(p, n, "%lld", (long long)v);
}

static uint64_t key_hash(int64_t ca, int64_t frame, int64_t fcid,
                         int64_t attempt) {
  uint64_t h = kn__hash_u64((uint64_t)ca);
  h = kn__hash_u64(h ^ (uint64_t)frame);
  h = kn__hash_u64(h ^ (uint64_t)fcid);
  return kn__hash_u64(h ^ (uint64_t)attempt);
}

static bool same_key(const rp_compile *c, int64_t ca, int64_t frame,
                     int64_t fcid, int64_t attempt) {
  return c->ca == ca && c->frame == frame && c->fcid == fcid &&
         c->attempt == attempt;
}

/* Slot of the key: holding its index + 1, or 0 where it would go. */
static size_t *slot(const rp_report *r, uint64_t h, int64_t ca, int64_t frame,
                    int64_t fcid, int64_t attempt) {
  size_t mask = r->cid_cap - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    size_t v = r->cid_tab[i];
    if (!v || same_key(r->compiles[v - 1], ca, frame, fcid, attempt))
      return &r->cid_tab[i];
  }
}

static bool reserve(rp_report *r) {
  if ((r->ncompiles + 1) * 2 <= r->cid_cap &&
      r->ncompiles < r->capcompiles)
    return true;
  if (r->ncompiles == r->capcompiles) {
    size_t nc = r->capcompiles ? r->capcompiles * 2 : 16;
    rp_compile **p = realloc(r->compiles, nc * sizeof *p);
    if (!p) return false;
    r->compiles = p;
    r->capcompiles = nc;
  }
  if ((r->ncompiles + 1) * 2 <= r->cid_cap) return true;
  size_t nc = r->cid_cap ? r->cid_cap * 2 : 64;
  size_t *t = calloc(nc, sizeof *t);
  if (!t) return false;
  free(r->cid_tab);
  r->cid_tab = t;
  r->cid_cap = nc;
  for (size_t i = 0; i < r->ncompiles; i++) {
    const rp_compile *c = r->compiles[i];
    *slot(r, key_hash(c->ca, c->frame, c->fcid, c->attempt), c->ca, c->frame,
          c->fcid, c->attempt) = i + 1;
  }
  return true;
}

/* "dir\0label\0" in one allocation. */
static char *names(int64_t ca, int64_t frame, int64_t fcid, int64_t attempt) {
  char f[4][24], buf[256], ca_part[32] = "";
  fmt_field(f[0], 24, ca);
  fmt_field(f[1], 24, frame);
  fmt_field(f[2], 24, fcid);
  fmt_field(f[3], 24, attempt);
  if (ca >= 0) snprintf(ca_part, sizeof ca_part, "!%lld/", (long long)ca);
  int n = snprintf(buf, sizeof buf, "%s_%s_%s_%s", f[0], f[1], f[2], f[3]);
  if (attempt > 0)
    snprintf(buf + n + 1, sizeof buf - n - 1, "[%s%s/%s_%s]", ca_part, f[1],
             f[2], f[3]);
  else
    snprintf(buf + n + 1, sizeof buf - n - 1, "[%s%s/%s]", ca_part, f[1], f[2]);
  size_t len = (size_t)n + 1 + strlen(buf + n + 1) + 1;
  char *p = malloc(len);
  if (p) memcpy(p, buf, len);
  return p;
}

rp_compile *rp_compile_find(const rp_report *r, int64_t ca, int64_t frame,
                            int64_t fcid, int64_t attempt) {
  if (!r->cid_cap) return NULL;
  size_t v = *slot(r, key_hash(ca, frame, fcid, attempt), ca, frame, fcid,
                   attempt);
  return v ? r->compiles[v - 1] : NULL;
}

rp_compile *rp_compile_get(rp_report *r, int64_t ca, int64_t frame,
                           int64_t fcid, int64_t attempt) {
  rp_compile *c = rp_compile_find(r, ca, frame, fcid, attempt);
  if (c || r->ncompiles >= RP_MAX_COMPILES || !reserve(r)) return c;
  c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->dir = names(ca, frame, fcid, attempt);
  if (!c->dir) {
    free(c);
    return NULL;
  }
  c->label = c->dir + strlen(c->dir) + 1;
  c->ca = ca, c->frame = frame, c->fcid = fcid, c->attempt = attempt;
  c->co_firstlineno = -1;
  c->guards_off = -1;
  c->idx = r->ncompiles;
  *slot(r, key_hash(ca, frame, fcid, attempt), ca, frame, fcid, attempt) =
      r->ncompiles + 1;
  r->compiles[r->ncompiles++] = c;
  return c;
}

bool rp_compile_add_artifact(rp_compile *c, const char *url, const char *name,
                             uint64_t number, const char *suffix,
                             const char *readable_url) {
  if (c->narts == c->caparts) {
    size_t nc = c->caparts ? c->caparts * 2 : 4;
    rp_artifact *p = realloc(c->arts, nc * sizeof *p);
    if (!p) return false;
    c->arts = p;
    c->caparts = nc;
  }
  rp_artifact *a = &c->arts[c->narts];
  a->url = strdup(url);
  a->name = strdup(name);
  a->number = number;
  a->suffix = suffix;
  a->readable_url = readable_url ? strdup(readable_url) : NULL;
  if (!a->url || !a->name || (readable_url && !a->readable_url)) {
    free(a->url), free(a->name), free(a->readable_url);
    return false;
  }
  c->narts++;
  return true;
}

void rp_compile_free(rp_compile *c) {
  for (size_t i = 0; i < c->narts; i++) {
    free(c->arts[i].url);
    free(c->arts[i].name);
    free(c->arts[i].readable_url);
  }
  free(c->arts);
  free(c->co_name), free(c->co_filename), free(c->fail_type);
  free(c->fail_reason), free(c->metrics_url);
  free(c->guards_url), free(c->fn_name);
  free(c->dir);
  json_decref(c->recompile_reasons);
  free(c);
}
