/*
** core/strdist.c: edit distance between two short strings (one row of the
** dynamic-programming table, on the stack).
*/
#include "core/strdist.h"

#include <ctype.h>
#include <string.h>

#define KN__STRDIST_MAX 255

static bool same(char x, char y, bool fold_case) {
  if (!fold_case) return x == y;
  return tolower((unsigned char)x) == tolower((unsigned char)y);
}

int kn__edit_distance(const char *a, const char *b, bool fold_case) {
  size_t na = strlen(a), nb = strlen(b);
  if (na > KN__STRDIST_MAX || nb > KN__STRDIST_MAX) return 1 << 20;
  int row[KN__STRDIST_MAX + 1];
  for (size_t j = 0; j <= nb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= na; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= nb; j++) {
      int up = row[j];
      int best = diag + !same(a[i - 1], b[j - 1], fold_case);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[nb];
}
