/*
** test_seeds_doc.c: docs/SEEDS.md maps every seed test. Every `def test_`
** name found in the seed files (the .txt files of ../shared/seeds) has a row, and every
** kiln test a row names (`test_x.c: suite::name`) exists in tests/.
*/
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/files.h"

static char *read_or_fail(const char *path) {
  char *s = kn_test_read_file(path, NULL);
  cr_assert(s, "cannot read %s", path);
  return s;
}

static bool ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Calls fn for each `def test_<name>` of text; returns the count. */
static int each_seed_test(const char *text, void (*fn)(const char *name, void *ud), void *ud) {
  int n = 0;
  for (const char *p = strstr(text, "def test_"); p; p = strstr(p + 1, "def test_")) {
    const char *b = p + 4, *e = b;
    while (ident(*e)) e++;
    char name[160];
    snprintf(name, sizeof name, "%.*s", (int)(e - b), b);
    fn(name, ud);
    n++;
  }
  return n;
}

static void expect_row(const char *name, void *ud) {
  const char *doc = ud;
  char row[200];
  snprintf(row, sizeof row, "\n| %s |", name);
  cr_expect(strstr(doc, row), "docs/SEEDS.md has no row for seed test %s", name);
}

Test(seeds_doc, every_seed_test_has_a_row) {
  char *doc = read_or_fail(KN_SOURCE_DIR "/docs/SEEDS.md");
  DIR *d = opendir(KN_SHARED_DIR "/seeds");
  cr_assert(d, "cannot open %s", KN_SHARED_DIR "/seeds");
  int files = 0, names = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 4, ".txt")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/seeds/%s", KN_SHARED_DIR, e->d_name);
    char *text = read_or_fail(path);
    names += each_seed_test(text, expect_row, doc);
    files++;
    free(text);
  }
  closedir(d);
  cr_expect_geq(files, 5, "seed files found: %d", files);
  cr_expect_geq(names, 69, "seed tests found: %d", names);
  free(doc);
}

/* `test_x.c: suite::name` references point at existing Criterion tests. */
Test(seeds_doc, named_kiln_tests_exist) {
  char *doc = read_or_fail(KN_SOURCE_DIR "/docs/SEEDS.md");
  int refs = 0;
  for (const char *p = strstr(doc, "`test_"); p; p = strstr(p + 1, "`test_")) {
    char file[128], suite[128], test[128];
    if (sscanf(p, "`%127[a-z_0-9].c: %127[a-z_0-9]::%127[a-z_0-9]`", file, suite, test) != 3)
      continue;
    char path[512], want[300];
    snprintf(path, sizeof path, "%s/tests/%s.c", KN_SOURCE_DIR, file);
    char *src = kn_test_read_file(path, NULL);
    cr_expect(src, "docs/SEEDS.md names %s.c, which does not exist", file);
    snprintf(want, sizeof want, "Test(%s, %s", suite, test);
    const char *at = src ? strstr(src, want) : NULL;
    while (at && ident(at[strlen(want)])) at = strstr(at + 1, want);
    cr_expect(at, "docs/SEEDS.md names %s.c: %s::%s, which does not exist", file, suite, test);
    free(src);
    refs++;
  }
  cr_expect_geq(refs, 40, "references found: %d", refs);
  free(doc);
}
