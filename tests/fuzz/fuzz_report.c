/*
** fuzz/fuzz_report.c: libFuzzer target for the whole `kiln report`
** pipeline. Each input is written as a trace file into a fresh directory
** and reported into OUT beside it (tolerant mode, then strict mode). After
** each run the output is checked, and any violation aborts:
**   - the directory holds only the input and OUT: nothing was written
**     outside OUT;
**   - OUT holds only directories and regular files (no symlink, FIFO, ...)
**     whose names use the safe alphabet;
**   - every .html page uses only the tags the report writes, has no on*=
**     attribute and no "javascript:" in an attribute value (trace text may
**     say it, escaped), and only index.html has a <script>.
** Built with clang -fsanitize=fuzzer,address,undefined by
** tests/CMakeLists.txt and run for a bounded time as a ctest test.
*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const tags[] = {
    "html", "head", "meta", "title", "style", "body", "base", "h1", "h2", "h3",
    "p", "a", "ul", "li", "table", "tr", "th", "td", "pre", "code", "span",
    "details", "summary", "nav", "div", "label", "input", "script", "small",
    "br", "mark", "b", "svg", "g", "rect", "text", "line", "path", NULL};

static void fail(const char *what, const char *where) {
  fprintf(stderr, "fuzz_report: %s: %s\n", what, where);
  abort();
}

static bool known_tag(const char *p) {
  size_t n = 0;
  while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9')) n++;
  for (int i = 0; tags[i]; i++)
    if (strlen(tags[i]) == n && !strncmp(tags[i], p, n)) return true;
  return false;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *s = malloc((size_t)n + 1);
  if (s) s[fread(s, 1, (size_t)n, f)] = '\0';
  fclose(f);
  return s;
}

/* The attributes of the tag at p (after its name) up to its '>': none may
** be an event handler. Quoted values are skipped. Returns the '>'. */
static const char *check_attrs(const char *p, const char *path) {
  while (*p && *p != '>') {
    if (*p == '"' || *p == '\'') {
      const char *q = strchr(p + 1, *p);
      if (!q) fail("unterminated attribute value", path);
      char *v = strndup(p + 1, (size_t)(q - p - 1));
      if (!v) abort();
      if (strcasestr(v, "javascript:")) fail("javascript: in an attribute", path);
      free(v);
      p = q + 1;
      continue;
    }
    if ((p[0] == 'o' || p[0] == 'O') && (p[1] == 'n' || p[1] == 'N') &&
        (p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n' || p[-1] == '/'))
      fail("event handler attribute", path);
    p++;
  }
  if (!*p) fail("unterminated tag", path);
  return p;
}

static void check_page(const char *path, bool index) {
  char *s = slurp(path);
  if (!s) fail("cannot read", path);
  size_t scripts = 0;
  for (const char *p = s; (p = strchr(p, '<'));) {
    const char *t = p + 1 + (p[1] == '/');
    if (!strncmp(t, "!DOCTYPE", 8)) {
      p = t;
      continue;
    }
    if (!known_tag(t)) fail("unknown tag", path);
    scripts += !strncmp(p, "<script", 7);
    while (*t >= 'a' && *t <= 'z') t++;
    p = check_attrs(t, path);
    /* A script's body is code, not markup: skip to its end tag. */
    if (!strncmp(t - 6, "script", 6) && t[-7] == '<') {
      const char *e = strstr(p, "</script>");
      if (!e) fail("unterminated script", path);
      p = e;
    }
  }
  if (scripts > (index ? 1u : 0u)) fail("script element", path);
  free(s);
}

static bool safe_name(const char *n) {
  if (n[0] == '.') return false;
  for (; *n; n++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                "0123456789._-", *n))
      return false;
  return true;
}

/* Check and remove everything under dir (relative depth given). */
static void walk(const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d) fail("cannot open", dir);
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0) fail("cannot lstat", path);
    if (!safe_name(e->d_name)) fail("unsafe name", path);
    if (S_ISDIR(st.st_mode)) {
      walk(path, depth + 1);
      rmdir(path);
      continue;
    }
    if (!S_ISREG(st.st_mode)) fail("not a regular file", path);
    size_t n = strlen(path);
    if (n > 5 && !strcmp(path + n - 5, ".html"))
      check_page(path, depth == 0 && !strcmp(e->d_name, "index.html"));
    unlink(path);
  }
  closedir(d);
}

static void only_input_and_out(const char *root) {
  DIR *d = opendir(root);
  if (!d) fail("cannot open", root);
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
        strcmp(e->d_name, "t.log") && strcmp(e->d_name, "out"))
      fail("file written outside OUT", e->d_name);
  closedir(d);
}

static void run(const char *root, const char *trace, bool strict) {
  char out[600];
  snprintf(out, sizeof out, "%s/out", root);
  rp_opts o = {.out = out, .strict = strict, .max_record_bytes = 1 << 20};
  (void)rp_report_file(&o, trace, NULL);
  only_input_and_out(root);
  struct stat st;
  if (lstat(out, &st) != 0) return; /* refused before writing (not a trace at all) */
  walk(out, 0);
  rmdir(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char root[512];
  if (!root[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/kiln_fuzz_report_XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(root)) abort();
  }
  char trace[600];
  snprintf(trace, sizeof trace, "%s/t.log", root);
  FILE *f = fopen(trace, "wb");
  if (!f) abort();
  fwrite(data, 1, size, f);
  fclose(f);
  run(root, trace, false);
  run(root, trace, true);
  return 0;
}
