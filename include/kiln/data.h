/*
** kiln/data.h: datasets and mini-batch loaders (torch.utils.data in C), and
** a CSV reader for numeric tables.
**
**   kn_dataset *ds = kn_dataset_new(2, (kn_tensor *[]){images, labels});
**   kn_loader *ld = kn_loader_new(ds, 64, true, false, 1234);   // shuffle, seed
**   kn_tensor *b[2];
**   for (int epoch = 0; epoch < 10; epoch++) {
**     kn_loader_reset(ld);                      // a new permutation per epoch
**     while (kn_loader_next(ld, b)) { ... b[0], b[1] ... }
**   }
**
** A dataset is a set of tensors in memory sharing their first dimension
** (samples). A loader walks it in mini-batches of batch_size samples; the
** last batch is smaller unless drop_last (so a compiled training step sees
** two batch sizes: automatic dynamic shapes mark the batch dimension
** dynamic on the second size instead of recompiling for every size).
** Shuffling draws each epoch's permutation (Fisher-Yates) from the
** loader's own generator, seeded by the caller: the same seed gives the
** same batches on every machine.
**
** Ownership: kn_dataset_new retains the tensors; datasets and loaders are
** owned (kn_dataset_free / kn_loader_free; a loader borrows its dataset,
** which must outlive it). Batches are new references recorded in the open
** scope, like op results. Errors: NULL / negative status with
** kn_last_error().
*/
#ifndef KILN_DATA_H
#define KILN_DATA_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_dataset kn_dataset;
typedef struct kn_loader kn_loader;

/* n (1..8) tensors with equal, non-zero first dimensions. */
KN_API kn_dataset *kn_dataset_new(int n, kn_tensor *const *tensors);
KN_API void kn_dataset_free(kn_dataset *ds);
/* Number of samples. */
KN_API int64_t kn_dataset_len(const kn_dataset *ds);
KN_API int kn_dataset_num_tensors(const kn_dataset *ds);
/* Tensor i (borrowed). */
KN_API kn_tensor *kn_dataset_tensor(const kn_dataset *ds, int i);
/* Samples [start, start + length) as a new dataset of views (train/test
** splits). */
KN_API kn_dataset *kn_dataset_slice(const kn_dataset *ds, int64_t start, int64_t length);

KN_API kn_loader *kn_loader_new(const kn_dataset *ds, int64_t batch_size, bool shuffle,
                                bool drop_last, uint64_t seed);
KN_API void kn_loader_free(kn_loader *ld);
/* Start an epoch: rewind, and draw a new permutation when shuffling. A new
** loader starts at its first epoch already. */
KN_API void kn_loader_reset(kn_loader *ld);
/* The next batch: out[0..num_tensors) receive new references (contiguous
** copies of the selected samples). false at the end of the epoch or on an
** error (then kn_last_status() is not KN_OK). */
KN_API bool kn_loader_next(kn_loader *ld, kn_tensor **out);
/* Batches per epoch. */
KN_API int64_t kn_loader_num_batches(const kn_loader *ld);

/* A numeric CSV file (comma-separated, no header, every row the same
** number of columns) as a [rows, cols] tensor of dtype dt. The caller's
** dtype decides how every value is read (there is no inference): an integer
** dtype takes integer literals, read exactly (INT64_MAX stays INT64_MAX) and
** range-checked; bool takes 0 and 1; a float dtype takes decimal literals
** and inf / nan, correctly rounded to that dtype (subnormals included; a
** value past the largest finite one is an error). Lines may end in "\n",
** "\r\n" or "\r"; blank lines are skipped; spaces and tabs around a value
** are ignored. Anything else (an empty field, a trailing comma, text, a
** ragged row) is KN_EPARSE naming the file, line and column:
**   data.csv: line 3, column 2: expected an integer (int64), found '1.5'
** A NULL path or a directory is KN_EINVAL, an unreadable file KN_EIO. */
KN_API kn_tensor *kn_load_csv(const char *path, kn_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
