/*
** test_seeds_doc.c: docs/SEEDS.md maps every seed test. Every `def test_`
** name of the seed files (PyTorch's tests, not part of the repository: their
** names are committed in tests/fixtures/seed_tests.txt, which says how it was
** generated) has a row, and every kiln test a row names (`test_x.c: suite::name`)
** exists in tests/.
*/
#include <criterion/criterion.h>
#include <ctype.h>
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

static void expect_row(const char *doc, const char *name) {
  char row[200];
  snprintf(row, sizeof row, "\n| %s |", name);
  cr_expect(strstr(doc, row), "docs/SEEDS.md has no row for seed test %s", name);
}

/* Each line of the committed list of seed test names has a row. */
Test(seeds_doc, every_seed_test_has_a_row) {
  char *doc = read_or_fail(KN_SOURCE_DIR "/docs/SEEDS.md");
  char *list = read_or_fail(KN_FIXTURE_DIR "/seed_tests.txt");
  int names = 0;
  char *save = NULL;
  for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    size_t n = strlen(line);
    cr_expect(!strncmp(line, "test_", 5) && strspn(line, "abcdefghijklmnopqrstuvwxyz"
              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n,
              "seed_tests.txt: expected a test name, found '%s'", line);
    expect_row(doc, line);
    names++;
  }
  /* 81 names in the five seed files (82 `def test_`, one defined twice in 004). */
  cr_expect_eq(names, 81, "seed_tests.txt has %d names, expected 81", names);
  free(list);
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
