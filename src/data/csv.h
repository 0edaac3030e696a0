/*
** data/csv.h: the numeric CSV parser behind kn_load_csv (kiln/data.h).
**
** The text is split into lines at "\n", "\r\n" or a lone "\r" (so files
** from any platform keep every row; a UTF-8 byte order mark at the start is
** skipped), and each line into fields at ','. Blank lines (nothing but
** spaces and tabs) are skipped; spaces and tabs around a value are ignored.
** Lines are counted from 1 and columns (fields) from 1 in every message.
** There is no header row, no quoting and no comment syntax.
**
** What a value may be depends on the dtype the caller asks for:
**   int64, int32, int16, int8, uint8: an integer literal, [+-]digits, read
**     exactly (not through a double) and range-checked for the dtype;
**   bool: the integer literals 0 and 1;
**   float64, float32, float16, bfloat16: a decimal literal,
**     [+-](digits[.digits] | .digits)[(e|E)[+-]digits], or inf, infinity,
**     nan (any case, with a sign), correctly rounded to the dtype (round to
**     nearest, ties to even; directly, never through a wider float). A value
**     below the smallest subnormal rounds to a (signed) zero as IEEE
**     rounding says; one beyond the largest finite value is an error.
** Every other field (empty, a trailing comma, text, hex, "1.5" for an
** integer dtype, an out-of-range integer) is KN_EPARSE naming the file,
** the line and the column and quoting the field; so is a row whose column
** count differs from the first row's. Values are read in the "C" locale
** whatever the program's LC_NUMERIC.
**
** Pure (core/ and the tensor layer's element conversions), so the fuzz
** target links it alone.
*/
#ifndef KN_DATA_CSV_H
#define KN_DATA_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/tensor.h"

typedef struct kn__csv_table {
  void *data; /* owned (free()): rows * cols elements of the dtype, row-major */
  int64_t rows, cols;
} kn__csv_table;

/* Parse text[0..len) (text[len] must be '\0'; NUL bytes inside are bad
** characters) as a table of dtype dt. name is the file name for messages.
** On error *out is empty. */
kn_status kn__csv_parse(const char *text, size_t len, const char *name, kn_dtype dt,
                        kn__csv_table *out);

#endif
