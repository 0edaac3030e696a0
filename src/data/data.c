/*
** data/data.c: in-memory datasets, shuffled mini-batch loaders and
** kn_load_csv (kiln/data.h; the parser is data/csv.c).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fileio.h"
#include "data/csv.h"
#include "kiln/data.h"
#include "kiln/kiln.h"
#include "tensor/tensor.h"

#define MAX_TENSORS 8

struct kn_dataset {
  int n;
  kn_tensor *t[MAX_TENSORS]; /* retained */
};

struct kn_loader {
  const kn_dataset *ds;
  int64_t batch, pos, len;
  bool shuffle, drop_last;
  uint64_t rng;
  int64_t *perm;
};

/* ---- datasets --------------------------------------------------------------------- */
kn_dataset *kn_dataset_new(int n, kn_tensor *const *ts) {
  if (n < 1 || n > MAX_TENSORS || !ts) {
    kn__error(KN_EINVAL, "kn_dataset_new: expected 1 to %d tensors, found %d", MAX_TENSORS, n);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!ts[i] || kn_ndim(ts[i]) < 1 || kn_size(ts[i], 0) != kn_size(ts[0], 0) ||
        kn_size(ts[0], 0) == 0) {
      kn__error(KN_ESHAPE, "kn_dataset_new: tensor %d must have a first dimension equal to "
                           "tensor 0's (%lld samples, not 0)", i,
                (long long)(ts[0] && kn_ndim(ts[0]) ? kn_size(ts[0], 0) : 0));
      return NULL;
    }
  kn_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    kn__oom();
    return NULL;
  }
  ds->n = n;
  for (int i = 0; i < n; i++) ds->t[i] = kn_retain(ts[i]);
  return ds;
}

void kn_dataset_free(kn_dataset *ds) {
  for (int i = 0; ds && i < ds->n; i++) kn_release(ds->t[i]);
  free(ds);
}

int64_t kn_dataset_len(const kn_dataset *ds) { return ds ? kn_size(ds->t[0], 0) : 0; }
int kn_dataset_num_tensors(const kn_dataset *ds) { return ds ? ds->n : 0; }
kn_tensor *kn_dataset_tensor(const kn_dataset *ds, int i) {
  return ds && i >= 0 && i < ds->n ? ds->t[i] : NULL;
}

kn_dataset *kn_dataset_slice(const kn_dataset *ds, int64_t start, int64_t length) {
  int64_t n = kn_dataset_len(ds);
  if (!ds || start < 0 || length < 1 || start > n - length) {
    kn__error(KN_ERANGE, "kn_dataset_slice: [%lld, %lld) is not a non-empty range of the %lld "
                         "samples", (long long)start, (long long)(start + length), (long long)n);
    return NULL;
  }
  kn_tensor *views[MAX_TENSORS];
  kn_scope_begin();
  for (int i = 0; i < ds->n; i++) views[i] = kn_narrow(ds->t[i], 0, start, length);
  kn_dataset *r = kn_dataset_new(ds->n, views);
  kn_scope_end();
  return r;
}

/* ---- loaders ------------------------------------------------------------------------ */
/* splitmix64: the loader's own seeded stream for permutations. */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias. */
static int64_t below(uint64_t *s, uint64_t n) {
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
  do v = next_u64(s);
  while (v >= lim);
  return (int64_t)(v % n);
}

void kn_loader_reset(kn_loader *ld) {
  if (!ld) return;
  ld->pos = 0;
  for (int64_t i = 0; i < ld->len; i++) ld->perm[i] = i;
  if (!ld->shuffle) return;
  for (int64_t i = ld->len - 1; i > 0; i--) {
    int64_t j = below(&ld->rng, (uint64_t)i + 1), t = ld->perm[i];
    ld->perm[i] = ld->perm[j];
    ld->perm[j] = t;
  }
}

kn_loader *kn_loader_new(const kn_dataset *ds, int64_t batch_size, bool shuffle, bool drop_last,
                         uint64_t seed) {
  if (!ds || batch_size < 1) {
    kn__error(KN_EINVAL, "kn_loader_new: expected a dataset and batch_size >= 1, found %lld",
              (long long)batch_size);
    return NULL;
  }
  kn_loader *ld = calloc(1, sizeof *ld);
  int64_t len = kn_dataset_len(ds);
  int64_t *perm = calloc((size_t)len, sizeof *perm);
  if (!ld || !perm) {
    free(ld), free(perm);
    kn__oom();
    return NULL;
  }
  *ld = (kn_loader){ds, batch_size, 0, len, shuffle, drop_last, seed, perm};
  kn_loader_reset(ld);
  return ld;
}

void kn_loader_free(kn_loader *ld) {
  if (!ld) return;
  free(ld->perm);
  free(ld);
}

int64_t kn_loader_num_batches(const kn_loader *ld) {
  if (!ld) return 0;
  return ld->drop_last ? ld->len / ld->batch : (ld->len + ld->batch - 1) / ld->batch;
}

bool kn_loader_next(kn_loader *ld, kn_tensor **out) {
  kn_clear_error();
  if (!ld || !out) return false;
  int64_t left = ld->len - ld->pos, n = left < ld->batch ? left : ld->batch;
  if (n <= 0 || (ld->drop_last && n < ld->batch)) return false;
  kn_scope_begin();
  const char *prev = kn__data_api_begin("kn_loader_next");
  kn_tensor *idx = kn_from_ints(ld->perm + ld->pos, KN_SHAPE(n));
  kn__data_api_end(prev);
  bool ok = idx != NULL;
  for (int i = 0; i < ld->ds->n; i++) {
    out[i] = ok ? kn_retain(kn_index_select(ld->ds->t[i], 0, idx)) : NULL;
    ok = ok && out[i];
  }
  kn_scope_end();
  for (int i = 0; i < ld->ds->n; i++) {
    if (!ok) kn_release(out[i]), out[i] = NULL;
    else kn__autorelease(out[i]); /* recorded in the caller's scope */
  }
  ld->pos += n;
  return ok;
}

/* ---- CSV ------------------------------------------------------------------------------- */
kn_tensor *kn_load_csv(const char *path, kn_dtype dt) {
  if (!path) {
    kn__error(KN_EINVAL, "kn_load_csv: expected a path to a CSV file, found NULL");
    return NULL;
  }
  char *text = NULL;
  size_t len = 0;
  kn__csv_table tab;
  kn_status st = kn__file_read(path, "a CSV file", &text, &len);
  if (st == KN_OK) st = kn__csv_parse(text, len, path, dt, &tab);
  free(text);
  if (st != KN_OK) return NULL;
  kn_scope_begin();
  const char *prev = kn__data_api_begin("kn_load_csv");
  kn_tensor *r = kn_retain(kn_from_array(tab.data, 2, (int64_t[]){tab.rows, tab.cols}, dt));
  kn__data_api_end(prev);
  kn_scope_end();
  free(tab.data);
  if (r) kn__autorelease(r);
  return r;
}
