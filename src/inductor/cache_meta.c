/*
** inductor/cache_meta.c: the text of the code cache's small files (see
** toolchain.h): <key>.meta and <graph key>.fxg. The parsers accept exactly
** what the formatters write (one line, single spaces, lowercase hex,
** decimal without leading zeros, a final newline and nothing after it), so
** anything else is a foreign or damaged entry.
*/
#include <stdio.h>
#include <string.h>

#include "inductor/toolchain.h"

static const char meta_magic[] = "kiln-inductor-cache 2 ";
static const char fxg_magic[] = "kiln-inductor-graph 1 ";

/* Read "<64 lowercase hex>" followed by end (a space or '\n') at *p. */
static bool hex64(const char **p, const char *end, char out[65], char stop) {
  const char *s = *p;
  if (end - s < 65 || s[64] != stop) return false;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  memcpy(out, s, 64);
  out[64] = 0;
  *p = s + 65;
  return true;
}

static bool size_field(const char **p, const char *end, long long *v) {
  const char *s = *p;
  int n = 0;
  *v = 0;
  for (; s + n < end && s[n] >= '0' && s[n] <= '9' && n < 13; n++) *v = *v * 10 + (s[n] - '0');
  if (!n || n > 12 || (n > 1 && s[0] == '0') || s + n >= end || s[n] != ' ' ||
      *v > KN__IND_SO_MAX)
    return false;
  *p = s + n + 1;
  return true;
}

static bool target_field(const char *s, const char *end, char out[KN__IND_TARGET_CAP]) {
  size_t n = 0;
  for (; s + n < end && s[n] != '\n'; n++)
    if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
          (s[n] >= '0' && s[n] <= '9') || s[n] == '.' || s[n] == '-' || s[n] == '_'))
      return false;
  if (!n || n >= KN__IND_TARGET_CAP || s + n + 1 != end) return false;
  memcpy(out, s, n);
  out[n] = 0;
  return true;
}

bool kn__ind_meta_parse(const char *s, size_t len, kn__ind_meta *m, char *why, size_t n) {
  const char *p = s, *end = s + len;
  size_t ml = sizeof meta_magic - 1;
  const char *bad = len < ml || memcmp(s, meta_magic, ml) ? "not a kiln-inductor-cache 2 .meta"
                    : (p += ml, !hex64(&p, end, m->key, ' ')) ? "bad key"
                    : !size_field(&p, end, &m->size)          ? "bad size"
                    : !hex64(&p, end, m->sha256, ' ')         ? "bad SHA-256"
                    : !target_field(p, end, m->target)        ? "bad CPU target or trailing bytes"
                                                              : NULL;
  if (bad) snprintf(why, n, "%s", bad);
  return !bad;
}

int kn__ind_meta_format(const kn__ind_meta *m, char *out, size_t n) {
  return snprintf(out, n, "%s%s %lld %s %s\n", meta_magic, m->key, m->size, m->sha256, m->target);
}

bool kn__ind_fxg_parse(const char *s, size_t len, char gkey[65], char key[65]) {
  const char *p = s + sizeof fxg_magic - 1, *end = s + len;
  return len == sizeof fxg_magic - 1 + 130 && !memcmp(s, fxg_magic, sizeof fxg_magic - 1) &&
         hex64(&p, end, gkey, ' ') && hex64(&p, end, key, '\n') && p == end;
}

int kn__ind_fxg_format(const char *gkey, const char *key, char *out, size_t n) {
  return snprintf(out, n, "%s%s %s\n", fxg_magic, gkey, key);
}
