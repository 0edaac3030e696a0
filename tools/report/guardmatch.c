/*
** tools/report/guardmatch.c: which guard lines a recompile reason names.
**
** A reason is either a guard's own code (shape guards, ID/EQUALS checks:
** kiln and PyTorch both print the failing code), or one of the tensor-check
** messages both print for TENSOR_MATCH ("tensor 'L['x']' size mismatch at
** index 0. expected 4, actual 8", "... dtype mismatch ...", "expected type
** of 'L['x']' to be a tensor type", "Duplicate tensor found where not
** expected! L['y'] should not alias ...") or "global state changed: ...".
** Tensor messages name a source; the guard line that checks it is the
** TENSOR_MATCH (or aliasing) line holding check_tensor(<source>, ...).
*/
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

/* Every word of 3+ characters of the reason occurs in the line (so the
** reason "___check_obj_id(fn, 1396)" finds "___check_obj_id(L['fn'], 1396)"). */
static bool all_words(const char *line, const char *failed, size_t n) {
  size_t words = 0, len = strlen(line);
  for (size_t i = 0; i < n;) {
    if (!word_char(failed[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < n && word_char(failed[j])) j++;
    if (j - i >= 3) {
      if (!memmem(line, len, failed + i, j - i)) return false;
      words++;
    }
    i = j;
  }
  return words > 0;
}

/* The source a tensor-check message names, copied into src; false if the
** reason is not such a message. */
static bool tensor_source(const char *failed, char *src, size_t cap) {
  const char *s = NULL, *e = NULL;
  if (!strncmp(failed, "tensor '", 8)) {
    s = failed + 8;
    const char *m = strstr(s, " mismatch");
    if (!m) return false;
    for (const char *q = s; q + 1 < m; q++)
      if (q[0] == '\'' && q[1] == ' ') e = q;
  } else if (!strncmp(failed, "expected type of '", 18)) {
    s = failed + 18;
    e = strstr(s, "' to be");
  } else if (!strncmp(failed, "Duplicate tensor found where not expected! ", 43)) {
    s = failed + 43;
    e = strstr(s, "should not alias");
    while (e && e > s && e[-1] == ' ') e--;
  }
  if (!s || !e || e <= s || (size_t)(e - s) >= cap) return false;
  memcpy(src, s, (size_t)(e - s));
  src[e - s] = '\0';
  return true;
}

static bool checks_source(const char *line, const char *src) {
  size_t n = strlen(src);
  for (const char *p = line; (p = strstr(p, src)); p++) {
    char after = p[n], before = p > line ? p[-1] : ' ';
    if ((after == ',' || after == ')' || after == '\0' || after == ' ') &&
        (before == '(' || before == ' ' || before == '='))
      return true;
  }
  return false;
}

bool rp_guard_line_matches(const char *line, const char *failed) {
  if (!failed || !*failed) return false;
  size_t n = strlen(failed);
  while (n && failed[n - 1] == ' ') n--;
  if (n && memmem(line, strlen(line), failed, n)) return true;
  char src[512];
  if (tensor_source(failed, src, sizeof src))
    return (strstr(line, "TENSOR_MATCH") || strstr(line, "TENSOR_ALIASING")) &&
           checks_source(line, src);
  if (!strncmp(failed, "global state changed", 20))
    return strstr(line, "GLOBAL_STATE") != NULL;
  return all_words(line, failed, n);
}
