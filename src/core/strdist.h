/*
** core/strdist.h: how far apart two names are, for "did you mean"
** suggestions (KILN_LOGS names, module paths).
*/
#ifndef KN_CORE_STRDIST_H
#define KN_CORE_STRDIST_H

#include <stdbool.h>

/* Levenshtein distance (insertions, deletions, substitutions), optionally
** case-insensitive. Strings longer than 255 characters are not compared:
** the result is then 1 << 20 (farther than any real candidate). */
int kn__edit_distance(const char *a, const char *b, bool fold_case);

#endif
