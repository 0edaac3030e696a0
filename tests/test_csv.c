/*
** tests/test_csv.c: kn_load_csv (kiln/data.h, src/data/csv.c) against
** literal expectations: every line ending, integers read exactly, floats
** correctly rounded to each float dtype (the expected values are C
** literals, which the compiler rounds correctly, or bit patterns worked out
** by hand), and every malformed field an error naming line and column.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/data.h"
#include "kiln/kiln.h"

static char path_buf[128];

static const char *write_tmp(const char *text) {
  snprintf(path_buf, sizeof path_buf, "/tmp/kn_csv_%d.csv", (int)getpid());
  FILE *f = fopen(path_buf, "wb");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  return path_buf;
}

/* Load text as dtype dt; the tensor must be [rows, cols]. */
static kn_tensor *load(const char *text, kn_dtype dt, int64_t rows, int64_t cols) {
  kn_tensor *t = kn_load_csv(write_tmp(text), dt);
  remove(path_buf);
  cr_assert_not_null(t, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(t), dt);
  cr_assert_eq(kn_ndim(t), 2);
  cr_assert_eq(kn_size(t, 0), rows, "%lld rows", (long long)kn_size(t, 0));
  cr_assert_eq(kn_size(t, 1), cols, "%lld cols", (long long)kn_size(t, 1));
  return t;
}

/* Loading text as dt fails with exactly "<path>: <msg>". */
static void fails(const char *text, kn_dtype dt, const char *msg) {
  cr_assert_null(kn_load_csv(write_tmp(text), dt), "loaded: %s", text);
  cr_assert_eq(kn_last_status(), KN_EPARSE);
  char expect[512];
  snprintf(expect, sizeof expect, "%s: %s", path_buf, msg);
  cr_assert_str_eq(kn_last_error(), expect);
  remove(path_buf);
}

static void expect_doubles(kn_tensor *t, const double *v, int n) {
  const double *d = kn_data(t);
  for (int i = 0; i < n; i++)
    cr_assert(memcmp(&d[i], &v[i], sizeof *d) == 0, "element %d: %.17g, expected %.17g", i, d[i],
              v[i]);
}

Test(csv, every_line_ending_keeps_every_row) {
  kn_scope_begin();
  const double v[4] = {1, 2, 3, 4};
  expect_doubles(load("1,2\r3,4\r", KN_FLOAT64, 2, 2), v, 4); /* classic Mac */
  expect_doubles(load("1,2\r\n3,4\r\n", KN_FLOAT64, 2, 2), v, 4);
  expect_doubles(load("1,2\n3,4", KN_FLOAT64, 2, 2), v, 4); /* no final newline */
  const double w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  expect_doubles(load("1,2\r\n3,4\n5,6\r7,8", KN_FLOAT64, 4, 2), w, 8);
  /* blank lines are skipped but counted; a byte order mark is skipped */
  expect_doubles(load("\xef\xbb\xbf\n1,2\r\n\r\n \t\n3,4\n\n", KN_FLOAT64, 2, 2), v, 4);
  expect_doubles(load(" 1 ,\t2\t\n3,  4  \n", KN_FLOAT64, 2, 2), v, 4);
  fails("1,2\r3,4\r5,x\r", KN_FLOAT64, "line 3, column 2: expected a number (float64), found 'x'");
  fails("1,2\r\n\r\n3,4\r\n\r\n5,x\r\n", KN_FLOAT64,
        "line 5, column 2: expected a number (float64), found 'x'");
  kn_scope_end();
}

Test(csv, integer_dtypes_read_exactly_and_check_ranges) {
  kn_scope_begin();
  kn_tensor *t = load("9223372036854775807,-9223372036854775808\n+0,-0\n9007199254740993,"
                      "-9007199254740993\n",
                      KN_INT64, 3, 2);
  const int64_t want[6] = {INT64_MAX, INT64_MIN, 0, 0, 9007199254740993, -9007199254740993};
  const int64_t *d = kn_data(t);
  for (int i = 0; i < 6; i++) cr_assert_eq(d[i], want[i], "element %d: %lld", i, (long long)d[i]);
  kn_tensor *u = load("255,0\n", KN_UINT8, 1, 2);
  cr_assert_eq(((uint8_t *)kn_data(u))[0], 255);
  kn_tensor *b = load("0,1\n1,0\n", KN_BOOL, 2, 2);
  cr_assert(((bool *)kn_data(b))[1] && !((bool *)kn_data(b))[3]);
  kn_tensor *i32 = load("-2147483648,2147483647\n", KN_INT32, 1, 2);
  cr_assert_eq(((int32_t *)kn_data(i32))[0], INT32_MIN);
  cr_assert_eq(((int32_t *)kn_data(i32))[1], INT32_MAX);
  fails("9223372036854775808\n", KN_INT64, "line 1, column 1: '9223372036854775808' is out of "
        "range for int64 [-9223372036854775808, 9223372036854775807]");
  fails("1\n-9223372036854775809\n", KN_INT64, "line 2, column 1: '-9223372036854775809' is out "
        "of range for int64 [-9223372036854775808, 9223372036854775807]");
  fails("1,128\n", KN_INT8, "line 1, column 2: '128' is out of range for int8 [-128, 127]");
  fails("-1\n", KN_UINT8, "line 1, column 1: '-1' is out of range for uint8 [0, 255]");
  fails("1,2\n", KN_BOOL, "line 1, column 2: '2' is out of range for bool [0, 1]");
  fails("1,1.5\n", KN_INT64, "line 1, column 2: expected an integer (int64), found '1.5'");
  fails("1e3\n", KN_INT32, "line 1, column 1: expected an integer (int32), found '1e3'");
  fails("0x10\n", KN_INT64, "line 1, column 1: expected an integer (int64), found '0x10'");
  kn_scope_end();
}

Test(csv, float64_values_are_correctly_rounded) {
  kn_scope_begin();
  kn_tensor *t = load("0.1,9007199254740993,2.2250738585072011e-308\n"
                      "1e-310,4.9406564584124654e-324,-1e-400\n"
                      "1.7976931348623157e308,.5,5.\n",
                      KN_FLOAT64, 3, 3);
  /* 2^53 + 1 is a tie between 2^53 and 2^53 + 2: even, 2^53 */
  const double v[9] = {0.1, 9007199254740992.0, 2.2250738585072011e-308, 1e-310,
                       4.9406564584124654e-324, -0.0, 1.7976931348623157e308, 0.5, 5.0};
  expect_doubles(t, v, 9);
  cr_assert_eq(fpclassify(((double *)kn_data(t))[3]), FP_SUBNORMAL);
  kn_tensor *s = load("nan,-inf,Infinity,+INF,-NaN\n", KN_FLOAT64, 1, 5);
  const double *d = kn_data(s);
  cr_assert(isnan(d[0]) && isnan(d[4]));
  cr_assert(d[1] == -INFINITY && d[2] == INFINITY && d[3] == INFINITY);
  fails("1,1e309\n", KN_FLOAT64, "line 1, column 2: '1e309' is out of range for float64 "
        "(largest finite 1.7976931348623157e+308)");
  fails("-1.8e308\n", KN_FLOAT64, "line 1, column 1: '-1.8e308' is out of range for float64 "
        "(largest finite 1.7976931348623157e+308)");
  kn_scope_end();
}

Test(csv, float32_rounds_once_from_the_decimal) {
  kn_scope_begin();
  /* 1 + 2^-24 + 2^-54 and 1 + 2^-24 - 2^-54: through a double both become
  ** 1 + 2^-24, a float tie, rounded to even (1); read directly, the first is
  ** above the tie (1 + 2^-23), the second below (1). */
  kn_tensor *t = load("1.000000059604644830901776231257827021181583404541015625,"
                      "1.000000059604644719879473768742172978818416595458984375,"
                      "16777217,1e-40,0.1,3.4028235e38\n",
                      KN_FLOAT32, 1, 6);
  const float want[6] = {1.00000011920928955078125f, 1.0f, 16777216.0f, 1e-40f, 0.1f,
                         3.40282347e38f};
  const float *d = kn_data(t);
  for (int i = 0; i < 6; i++)
    cr_assert(memcmp(&d[i], &want[i], 4) == 0, "element %d: %.9g, expected %.9g", i, d[i],
              want[i]);
  cr_assert_eq(fpclassify(d[3]), FP_SUBNORMAL);
  fails("1e39\n", KN_FLOAT32, "line 1, column 1: '1e39' is out of range for float32 (largest "
        "finite 3.4028234663852886e+38)");
  kn_scope_end();
}

static void expect_bits(kn_tensor *t, const uint16_t *want, int n) {
  const uint16_t *d = kn_data(t);
  for (int i = 0; i < n; i++)
    cr_assert_eq(d[i], want[i], "element %d: 0x%04x, expected 0x%04x", i, d[i], want[i]);
}

Test(csv, float16_and_bfloat16_round_once_from_the_decimal) {
  kn_scope_begin();
  /* float16 around 1 (spacing 2^-10): 1 + 2^-11 is the tie between 0x3c00
  ** and 0x3c01, 1 + 3 * 2^-11 the tie between 0x3c01 and 0x3c02. A hair
  ** above or below a tie rounds to that side; the tie itself goes to the
  ** even pattern. A float in between would round both hairs onto the tie. */
  kn_tensor *h = load("1.00048828125000001,1.00048828125,1.00048828124999999,"
                      "1.00146484374999999,1.00146484375,65504,65519.99,5.9604644775390625e-8,"
                      "-2.98023223876953125e-8,-2.98023223876953126e-8\n",
                      KN_FLOAT16, 1, 10);
  const uint16_t hw[10] = {0x3c01, 0x3c00, 0x3c00, 0x3c01, 0x3c02, 0x7bff, 0x7bff, 0x0001,
                           0x8000, 0x8001};
  expect_bits(h, hw, 10);
  fails("65520\n", KN_FLOAT16,
        "line 1, column 1: '65520' is out of range for float16 (largest finite 65504)");
  /* bfloat16 around 1 (spacing 2^-7): the tie 1 + 2^-8 = 1.00390625. */
  kn_tensor *b = load("1.00390625000001,1.00390625,1.00390624999999,-inf,3.3895313892515355e38\n",
                      KN_BFLOAT16, 1, 5);
  const uint16_t bw[5] = {0x3f81, 0x3f80, 0x3f80, 0xff80, 0x7f7f};
  expect_bits(b, bw, 5);
  fails("3.4e38\n", KN_BFLOAT16, "line 1, column 1: '3.4e38' is out of range for bfloat16 "
        "(largest finite 3.3895313892515355e+38)");
  kn_scope_end();
}

Test(csv, malformed_fields_name_line_and_column) {
  fails("1,2,3\n4,5\n", KN_FLOAT32, "line 2: 2 columns, but the first row (line 1) has 3");
  fails("\n1,2\n3,4,5\n", KN_FLOAT32, "line 3: 3 columns, but the first row (line 2) has 2");
  fails("1,2\n3,x\n", KN_FLOAT32, "line 2, column 2: expected a number (float32), found 'x'");
  fails("1,,3\n", KN_FLOAT32, "line 1, column 2: empty field, expected a number (float32)");
  fails("1,2,\n", KN_FLOAT32, "line 1, column 3: empty field, expected a number (float32) (the "
        "line ends with a comma)");
  fails(",1\n", KN_INT64, "line 1, column 1: empty field, expected an integer (int64)");
  fails("a,b\n1,2\n", KN_FLOAT32, "line 1, column 1: expected a number (float32), found 'a' "
        "(kn_load_csv reads no header row)");
  fails("1,2\n1,two\n", KN_FLOAT32, "line 2, column 2: expected a number (float32), found 'two'");
  fails("0x10\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '0x10'");
  fails("1.2.3\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '1.2.3'");
  fails("1 2\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '1 2'");
  fails("\"1\"\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '\"1\"'");
  fails("1\nnan(1)\n", KN_FLOAT64, "line 2, column 1: expected a number (float64), found 'nan(1)'");
  fails("1e\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '1e'");
  fails("1;2\n", KN_FLOAT64, "line 1, column 1: expected a number (float64), found '1;2'");
  fails("1,\x01\xff'\n", KN_FLOAT64,
        "line 1, column 2: expected a number (float64), found '\\x01\\xff\\x27'");
  fails("", KN_FLOAT32, "no rows (the file is empty or every line is blank)");
  fails("\r\n \n", KN_FLOAT32, "no rows (the file is empty or every line is blank)");
}

Test(csv, paths_that_are_not_csv_files) {
  cr_assert_null(kn_load_csv(NULL, KN_FLOAT32));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "kn_load_csv: expected a path to a CSV file, found NULL");
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/kn_csv_dir_%d", (int)getpid());
  cr_assert_eq(mkdir(dir, 0700), 0);
  cr_assert_null(kn_load_csv(dir, KN_FLOAT32));
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  char expect[160];
  snprintf(expect, sizeof expect, "'%s' is a directory, expected a CSV file", dir);
  cr_assert_str_eq(kn_last_error(), expect);
  rmdir(dir);
  cr_assert_null(kn_load_csv("/nonexistent/x.csv", KN_FLOAT32));
  cr_assert_eq(kn_last_status(), KN_EIO);
  cr_assert_str_eq(kn_last_error(), "cannot open '/nonexistent/x.csv': No such file or directory");
  cr_assert_null(kn_load_csv(write_tmp("1\n"), (kn_dtype)99));
  cr_assert_eq(kn_last_status(), KN_EDTYPE);
  remove(path_buf);
}
