/*
** support/report_util.c: see report_util.h.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <md5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "support/report_util.h"

char *ru_tmpdir(void) {
  char *t = strdup("/tmp/kiln_report_test_XXXXXX");
  if (t && !mkdtemp(t)) {
    free(t);
    return NULL;
  }
  return t;
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

void ru_rmtree(const char *dir) {
  if (dir) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *ru_read(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kn__sb sb = KN__SB_INIT;
  char buf[8192];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) kn__sb_putn(&sb, buf, k);
  fclose(f);
  if (n) *n = sb.len;
  return kn__sb_take(&sb);
}

int ru_kiln(const char *args, char **err) {
  char errfile[] = "/tmp/kiln_report_err_XXXXXX";
  int fd = mkstemp(errfile);
  if (fd < 0) return -1;
  close(fd);
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd, "timeout 120 '%s' report %s > /dev/null 2> '%s'",
                KN_TOOL_PATH, args, errfile);
  int rc = system(kn__sb_cstr(&cmd));
  kn__sb_fini(&cmd);
  if (err) *err = ru_read(errfile, NULL);
  unlink(errfile);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

size_t ru_lines(const char *path) {
  size_t n = 0, len = 0;
  char *s = ru_read(path, &len);
  if (!s) return 0;
  for (size_t i = 0; i < len; i++) n += s[i] == '\n';
  if (len && s[len - 1] != '\n') n++;
  free(s);
  return n;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk(const char *root, const char *rel, char ***v, size_t *n) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s%s%s", root, *rel ? "/" : "", rel);
  DIR *d = opendir(kn__sb_cstr(&p));
  kn__sb_fini(&p);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    kn__sb r = KN__SB_INIT;
    kn__sb_printf(&r, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    kn__sb full = KN__SB_INIT;
    kn__sb_printf(&full, "%s/%s", root, kn__sb_cstr(&r));
    struct stat st;
    if (lstat(kn__sb_cstr(&full), &st) == 0 && S_ISDIR(st.st_mode)) {
      walk(root, kn__sb_cstr(&r), v, n);
      kn__sb_fini(&r);
    } else {
      *v = realloc(*v, (*n + 1) * sizeof **v);
      (*v)[(*n)++] = kn__sb_take(&r);
    }
    kn__sb_fini(&full);
  }
  closedir(d);
}

char *ru_list(const char *dir) {
  char **v = NULL;
  size_t n = 0;
  walk(dir, "", &v, &n);
  qsort(v, n, sizeof *v, cmp);
  kn__sb out = KN__SB_INIT;
  for (size_t i = 0; i < n; i++) {
    kn__sb_printf(&out, "%s\n", v[i]);
    free(v[i]);
  }
  free(v);
  return kn__sb_take(&out);
}

void ru_record(FILE *f, int line, const char *meta, const char *payload) {
  fprintf(f, "V1121 10:00:00.000000 4242 kiln/trace.c:%d] ", line);
  if (!payload) {
    fprintf(f, "%s\n", meta);
    return;
  }
  char hex[33];
  MD5Data((const unsigned char *)payload, strlen(payload), hex);
  size_t ml = strlen(meta);
  fprintf(f, "%.*s, \"has_payload\": \"%s\"}\n", (int)(ml - 1), meta, hex);
  const char *p = payload;
  for (;;) {
    size_t k = strcspn(p, "\n");
    fprintf(f, "\t%.*s\n", (int)k, p);
    if (!p[k]) break;
    p += k + 1;
  }
}

static size_t check_page(const char *dir, const char *rel, size_t *checked) {
  kn__sb path = KN__SB_INIT;
  kn__sb_printf(&path, "%s/%s", dir, rel);
  char *html = ru_read(kn__sb_cstr(&path), NULL);
  kn__sb_fini(&path);
  if (!html) return 1;
  /* Links resolve from the page's directory, or from its parent for pages
  ** inside compile directories, which use <base href="../">. */
  char reldir[512] = "";
  const char *slash = strrchr(rel, '/');
  if (slash) snprintf(reldir, sizeof reldir, "%.*s/", (int)(slash - rel), rel);
  if (strstr(html, "<base href=\"../\">") && *reldir) {
    reldir[strlen(reldir) - 1] = '\0';
    char *up = strrchr(reldir, '/');
    if (up) up[1] = '\0';
    else reldir[0] = '\0';
  }
  size_t bad = 0;
  for (const char *p = html; (p = strstr(p, "href=\"")); ) {
    p += 6;
    size_t k = strcspn(p, "\"#");
    if (k == 0 || !strncmp(p, "http://", 7) || !strncmp(p, "https://", 8) ||
        !strncmp(p, "../\"", 4)) {
      p += k;
      continue;
    }
    kn__sb t = KN__SB_INIT;
    kn__sb_printf(&t, "%s/%s%.*s", dir, reldir, (int)k, p);
    struct stat st;
    (*checked)++;
    if (stat(kn__sb_cstr(&t), &st) != 0) {
      fprintf(stderr, "broken link in %s: %s\n", rel, kn__sb_cstr(&t));
      bad++;
    }
    kn__sb_fini(&t);
    p += k;
  }
  free(html);
  return bad;
}

size_t ru_check_links(const char *dir, size_t *checked) {
  char *list = ru_list(dir);
  size_t bad = 0;
  *checked = 0;
  for (char *line = list, *nl; line && *line; line = nl + 1) {
    nl = strchr(line, '\n');
    *nl = '\0';
    size_t len = strlen(line);
    if (len > 5 && !strcmp(line + len - 5, ".html"))
      bad += check_page(dir, line, checked);
  }
  free(list);
  return bad;
}
