/*
** test_seeds_doc.c: docs/SEEDS.md maps every seed test. Every `def test_`
** name of the seed files (PyTorch's tests, not part of the repository: their
** names are committed in tests/fixtures/seed_tests.txt, which says how it was
** generated) has a row, every kiln test a row names (`test_x.c: suite::name`)
** exists in tests/, and no row "waits for" a capability the build has (the
** table below; one that is not built is named with its issue).
*/
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/compile.h"
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

/* ---- "waits for" notes against what the build has ---------------------------------- */

/* The capabilities a row may wait for. One with a backend is built when that
** backend is registered; one without is not built, and a row waiting for it
** names its issue. */
typedef struct capability {
  const char *name;    /* as the rows write it */
  const char *backend; /* what shows it is built, or NULL */
  const char *issue;   /* the issue that adds it, when not built */
} capability;

static const capability caps[] = {
    {"AOT", "aot_eager", NULL},             /* AOT autograd */
    {"the code generator", "inductor", NULL},
    {"distributed", NULL, "#24"},
    {"GPU", NULL, "#25"},
};
#define NCAPS ((int)(sizeof caps / sizeof caps[0]))

static kn_tensor *probe_fn(kn_tensor *x) { return x; }

/* Does kn_compile accept backend `name`? (What a user gets, and it links
** the built-in backends into this static test.) */
static bool backend_registered(const char *name) {
  kn_compile_options o = {.backend = name};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))probe_fn, 1, "probe", __FILE__, __LINE__, &o);
  kn_compiled_free(f);
  return f != NULL;
}

static const capability *capability_named(const char *s, size_t len) {
  for (int i = 0; i < NCAPS; i++)
    if (strlen(caps[i].name) == len && !strncmp(s, caps[i].name, len)) return &caps[i];
  return NULL;
}

/* Problems with one capability named in a row's "wait(s) for" clause. */
static int check_waited(const char *row, size_t rowlen, const char *cap, size_t len,
                        char *why, size_t cap_why) {
  const capability *c = capability_named(cap, len);
  if (!c) {
    snprintf(why, cap_why, "waits for '%.*s', which is not in test_seeds_doc.c's capability table",
             (int)len, cap);
    return 1;
  }
  if (c->backend && backend_registered(c->backend)) {
    snprintf(why, cap_why, "waits for %s, which the build has (backend \"%s\")", c->name,
             c->backend);
    return 1;
  }
  if (c->issue && !memmem(row, rowlen, c->issue, strlen(c->issue))) {
    snprintf(why, cap_why, "waits for %s without naming its issue %s", c->name, c->issue);
    return 1;
  }
  return 0;
}

/* The problems of one table row (its text without the newline): each
** "wait for" / "waits for" clause, up to ( ; . , or |, lists capabilities
** joined by " and ". The first problem's text goes to why. */
static int check_row(const char *row, size_t len, char *why, size_t cap_why) {
  int bad = 0;
  for (const char *p = row; (p = memmem(p, (size_t)(row + len - p), "wait", 4)); p += 4) {
    const char *q = p + 4;
    if (*q == 's') q++;
    if (strncmp(q, " for ", 5)) continue;
    q += 5;
    const char *end = q;
    while (end < row + len && !strchr("(;.,|", *end)) end++;
    while (end > q && end[-1] == ' ') end--;
    for (const char *a = q; a < end;) {
      const char *b = memmem(a, (size_t)(end - a), " and ", 5);
      const char *e = b ? b : end;
      bad += check_waited(row, len, a, (size_t)(e - a), bad ? (char[200]){0} : why,
                          bad ? 200 : cap_why);
      a = b ? b + 5 : end;
    }
  }
  return bad;
}

/* Every table row of docs/SEEDS.md. */
Test(seeds_doc, no_row_waits_for_a_built_capability) {
  char *doc = read_or_fail(KN_SOURCE_DIR "/docs/SEEDS.md");
  int rows = 0, waits = 0;
  for (const char *p = strstr(doc, "\n| test_"); p; p = strstr(p + 1, "\n| test_")) {
    const char *nl = strchr(p + 1, '\n');
    size_t len = nl ? (size_t)(nl - p - 1) : strlen(p + 1);
    char why[200] = "";
    int bad = check_row(p + 1, len, why, sizeof why);
    cr_expect_eq(bad, 0, "docs/SEEDS.md: %.*s\n  %s", (int)len, p + 1, why);
    waits += memmem(p + 1, len, "wait", 4) != NULL;
    rows++;
  }
  cr_expect_geq(rows, 75, "rows found: %d", rows);
  cr_expect_geq(waits, 2, "rows waiting for distributed or GPU: %d", waits);
  free(doc);
}

/* The check itself: stale, unknown and issue-less waits are caught; rows
** waiting for what is not built, with the issue, pass. */
Test(seeds_doc, wait_check_catches_stale_rows) {
  cr_assert(backend_registered("inductor") && backend_registered("aot_eager"));
  cr_assert_not(backend_registered("kiln-no-such-backend"));
  const struct { const char *row; int bad; const char *why; } cases[] = {
      {"| test_a | | waits for AOT |", 1, "waits for AOT, which the build has (backend \"aot_eager\")"},
      {"| test_b | | waits for the code generator and GPU (#25) |", 1,
       "waits for the code generator, which the build has (backend \"inductor\")"},
      {"| test_c | | waits for GPU |", 1, "waits for GPU without naming its issue #25"},
      {"| test_d | | waits for a miracle (#1) |", 1,
       "waits for 'a miracle', which is not in test_seeds_doc.c's capability table"},
      {"| test_e | | several processes wait for distributed (#24) |", 0, ""},
      {"| test_f | | waits for GPU (#25); waits for distributed (#24) |", 0, ""},
      {"| test_g | `test_x.c: s::t` | |", 0, ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char why[200] = "";
    cr_expect_eq(check_row(cases[i].row, strlen(cases[i].row), why, sizeof why), cases[i].bad,
                 "%s", cases[i].row);
    cr_expect_str_eq(why, cases[i].why, "%s", cases[i].row);
  }
}
