/*
** serialize/safetensors.h: the safetensors container (8-byte little-endian
** header length N, N bytes of JSON header, then the raw little-endian data).
** The header maps each tensor name to {"dtype": "F32", "shape": [..],
** "data_offsets": [begin, end]} (offsets relative to the data section), plus
** an optional "__metadata__" object of string values.
**
** The parser reads a whole file image and validates everything before
** anything is used: header bounds, JSON shape, known dtypes, shapes,
** offsets in range, sizes equal to numel * itemsize (overflow-checked) and
** tensors tiling the data section without gaps or overlaps (as the
** reference reader requires). It depends only on jansson and core/, so the
** fuzz target links it alone.
*/
#ifndef KN_SERIALIZE_SAFETENSORS_H
#define KN_SERIALIZE_SAFETENSORS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/core.h"
#include "kiln/tensor.h"

#define KN__ST_MAX_HEADER (100u << 20) /* as the reference implementation */

typedef struct kn__st_entry {
  const char *name;  /* borrowed from the header JSON */
  kn_dtype dtype;
  int ndim;
  int64_t shape[KN_MAX_DIMS];
  const uint8_t *data; /* borrowed from the image */
  size_t nbytes;
} kn__st_entry;

typedef struct kn__st_file {
  json_t *header; /* owned */
  kn__st_entry *entries; /* owned; file order of the header's keys */
  int n;
  json_t *metadata; /* borrowed from header, or NULL */
} kn__st_file;

/* Parse an image (borrowed: entries point into it). KN_EPARSE with a
** message naming what is wrong; on error *out is left empty. */
kn_status kn__st_parse(const uint8_t *buf, size_t len, kn__st_file *out);
void kn__st_free(kn__st_file *f);
/* The entry called name, or NULL. */
const kn__st_entry *kn__st_find(const kn__st_file *f, const char *name);
/* "F32" <-> KN_FLOAT32. Unknown: NULL / false. */
const char *kn__st_dtype_name(kn_dtype dt);
bool kn__st_dtype(const char *name, kn_dtype *out);

#endif
