/*
** tests/test_data.c: datasets, shuffled mini-batch loaders and the CSV
** reader (kiln/data.h) on the first rows of scikit-learn's digits
** (tests/fixtures/digits_head.csv, from scripts/fetch-digits.sh); the CSV
** reader's edge cases are in test_csv.c.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kiln/data.h"
#include "kiln/kiln.h"

Test(data, csv_reads_the_digits_rows) {
  kn_scope_begin();
  kn_tensor *t = kn_load_csv(KN_FIXTURE_DIR "/digits_head.csv", KN_FLOAT32);
  cr_assert_not_null(t, "%s", kn_last_error());
  cr_assert_eq(kn_size(t, 0), 12);
  cr_assert_eq(kn_size(t, 1), 65);
  /* digits.images[0][0] in scikit-learn: the top row of the first "0" */
  const double row0[8] = {0, 0, 5, 13, 9, 1, 0, 0};
  for (int j = 0; j < 8; j++) cr_assert_eq(kn_get(t, (int64_t[]){0, j}), row0[j]);
  /* digits.target starts 0, 1, ..., 9, 0, 1 */
  for (int i = 0; i < 12; i++) cr_assert_eq(kn_get(t, (int64_t[]){i, 64}), i % 10);
  kn_scope_end();
}

/* x[i] = i, y[i] = 10 i: a batch keeps samples paired. */
static kn_dataset *ten(void) {
  kn_tensor *x = kn_arange_dtype(kn_int(0), kn_int(10), kn_int(1), KN_FLOAT32);
  kn_tensor *y = kn_mul_scalar(x, kn_float(10));
  return kn_dataset_new(2, (kn_tensor *[]){kn_reshape(x, 2, (int64_t[]){10, 1}), y});
}

static void epoch(kn_loader *ld, int64_t *order, int64_t *sizes, int *nb) {
  kn_tensor *b[2];
  int k = 0;
  *nb = 0;
  while (kn_loader_next(ld, b)) {
    sizes[(*nb)++] = kn_size(b[0], 0);
    cr_assert_eq(kn_ndim(b[0]), 2);
    for (int64_t i = 0; i < kn_size(b[0], 0); i++) {
      double x = kn_get(b[0], (int64_t[]){i, 0}), y = kn_get(b[1], (int64_t[]){i});
      cr_assert_eq(y, 10 * x);
      order[k++] = (int64_t)x;
    }
  }
  cr_assert_eq(kn_last_status(), KN_OK);
}

Test(data, loader_batches_cover_every_sample_once_last_smaller) {
  kn_scope_begin();
  kn_dataset *ds = ten();
  kn_loader *ld = kn_loader_new(ds, 4, true, false, 42);
  cr_assert_eq(kn_loader_num_batches(ld), 3);
  int64_t o1[10], o2[10], o3[10], sizes[4];
  int nb;
  epoch(ld, o1, sizes, &nb);
  cr_assert_eq(nb, 3);
  cr_assert(sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2);
  bool seen[10] = {0}, shuffled = false;
  for (int i = 0; i < 10; i++) seen[o1[i]] = true, shuffled |= o1[i] != i;
  for (int i = 0; i < 10; i++) cr_assert(seen[i], "sample %d missing", i);
  cr_assert(shuffled);
  kn_loader_reset(ld);
  epoch(ld, o2, sizes, &nb);
  cr_assert(memcmp(o1, o2, sizeof o1), "a new epoch draws a new permutation");
  kn_loader *same = kn_loader_new(ds, 4, true, false, 42);
  epoch(same, o3, sizes, &nb);
  cr_assert(!memcmp(o1, o3, sizeof o1), "the same seed gives the same batches");
  kn_loader_free(same);
  kn_loader *drop = kn_loader_new(ds, 4, false, true, 0);
  cr_assert_eq(kn_loader_num_batches(drop), 2);
  epoch(drop, o3, sizes, &nb);
  cr_assert_eq(nb, 2);
  for (int i = 0; i < 8; i++) cr_assert_eq(o3[i], i);
  kn_loader_free(drop);
  kn_loader_free(ld);
  kn_dataset_slice(ds, 8, 3);
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  kn_dataset *tail = kn_dataset_slice(ds, 7, 3);
  cr_assert_eq(kn_dataset_len(tail), 3);
  cr_assert_eq(kn_get(kn_dataset_tensor(tail, 1), (int64_t[]){0}), 70);
  kn_dataset_free(tail);
  kn_dataset_free(ds);
  cr_assert_null(kn_dataset_new(2, (kn_tensor *[]){kn_ones(KN_SHAPE(3), KN_FLOAT32),
                                                   kn_ones(KN_SHAPE(4), KN_FLOAT32)}));
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
  kn_scope_end();
}
