/*
** tools/cmd_report.c: `kiln report`, the HTML trace report (tlparse's
** command line). Parses the flags, picks the input (a file, the latest log
** of a directory, or every rank with --all-ranks-html) and runs the report
** in tools/report/.
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "report/report.h"

static const char *help =
    "usage: kiln report [-o OUT] [--overwrite] [--no-browser] [--strict]\n"
    "                   [--strict-compile-id] [--latest] [--all-ranks-html]\n"
    "                   [--custom-header-html FILE] [-p] [--max-record-mb N]\n"
    "                   [-v] FILE|DIR\n"
    "\n"
    "Turn a structured trace (KILN_TRACE, or PyTorch's TORCH_TRACE) into a\n"
    "self-contained HTML report: index.html with a summary, the stack trie of\n"
    "compiles, every compile id with its graphs, guards, generated code and\n"
    "compilation metrics, failures and restarts, recompiles (guards next to\n"
    "the guard that failed), graph breaks by source location, symbolic\n"
    "shapes, a compile timeline (SVG); plus raw.jsonl,\n"
    "compile_directory.json and chromium_events.json (Perfetto).\n"
    "\n"
    "  FILE|DIR               a trace log; for a directory the most recently\n"
    "                         modified regular file in it is read\n"
    "  -o OUT                 output directory (default tl_out); it must be\n"
    "                         empty or absent unless --overwrite is given,\n"
    "                         and not a symbolic link\n"
    "  --overwrite            delete the contents of OUT first (symlinks in\n"
    "                         it are removed, never followed)\n"
    "  --no-browser           accepted for tlparse compatibility; kiln never\n"
    "                         opens a browser itself: open OUT/index.html\n"
    "  --strict               exit 1 at the first defect (bad header, JSON,\n"
    "                         payload MD5, record of another rank, bad\n"
    "                         metrics field), naming file, line and defect;\n"
    "                         without it defects are counted in the report\n"
    "  --strict-compile-id    also treat a record without a compile id\n"
    "                         (other than chromium events) as a defect\n"
    "  --latest               DIR: read its most recently modified file\n"
    "                         (the default for a directory anyway)\n"
    "  --all-ranks-html       DIR holds dedicated_log_torch_trace_rank_<N>*.log\n"
    "                         files: one report per rank in OUT/rank_<N>/ and\n"
    "                         a landing page comparing the ranks\n"
    "  --custom-header-html FILE  HTML put at the top of the index pages\n"
    "  -p, --plain-text       generated code as .txt instead of .html\n"
    "  --max-record-mb N      a record (header and payload) larger than N MB\n"
    "                         is a defect and skipped (default 256), which\n"
    "                         bounds memory on hostile traces\n"
    "  -v, --verbose          print every defect on stderr\n"
    "  -h, --help             this help\n"
    "\n"
    "Exit status: 0 on success, 1 on an error (or a defect with --strict),\n"
    "2 on a usage error.\n";

typedef struct args {
  rp_opts o;
  bool latest, all_ranks;
  const char *header_file, *input;
} args;

static int usage_error(const char *fmt, const char *what) {
  fprintf(stderr, "kiln report: ");
  fprintf(stderr, fmt, what);
  fprintf(stderr, "\n(see 'kiln report --help')\n");
  return 2;
}

/* Returns -1 when parsing succeeded, else the exit status. */
static int parse(int argc, char **argv, args *a) {
  a->o.out = "tl_out";
  a->o.max_record_bytes = (size_t)256 << 20;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
      fputs(help, stdout);
      return 0;
    } else if (!strcmp(s, "-o") || !strcmp(s, "--out")) {
      if (++i >= argc) return usage_error("%s needs a directory", s);
      a->o.out = argv[i];
    } else if (!strcmp(s, "--max-record-mb")) {
      char *end;
      long mb = ++i < argc ? strtol(argv[i], &end, 10) : -1;
      if (mb <= 0 || mb > 1 << 20 || *end)
        return usage_error("%s needs a positive number of MB", s);
      a->o.max_record_bytes = (size_t)mb << 20;
    } else if (!strcmp(s, "--custom-header-html")) {
      if (++i >= argc) return usage_error("%s needs a file", s);
      a->header_file = argv[i];
    } else if (!strcmp(s, "--overwrite")) a->o.overwrite = true;
    else if (!strcmp(s, "--no-browser")) continue;
    else if (!strcmp(s, "--strict")) a->o.strict = true;
    else if (!strcmp(s, "--strict-compile-id")) a->o.strict_compile_id = true;
    else if (!strcmp(s, "--latest")) a->latest = true;
    else if (!strcmp(s, "--all-ranks-html")) a->all_ranks = true;
    else if (!strcmp(s, "-p") || !strcmp(s, "--plain-text")) a->o.plain_text = true;
    else if (!strcmp(s, "-v") || !strcmp(s, "--verbose")) a->o.verbose = true;
    else if (s[0] == '-' && s[1]) return usage_error("unknown option '%s'", s);
    else if (a->input) return usage_error("more than one input ('%s')", s);
    else a->input = s;
  }
  if (!a->input) return usage_error("%s", "missing the trace FILE or DIR");
  if (a->latest && a->all_ranks)
    return usage_error("%s", "--latest and --all-ranks-html exclude each other");
  return -1;
}

/* The most recently modified regular file in dir (ties: the greater name).
** Owned string or NULL with an error set. */
static char *latest_in(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    kn__error(KN_EIO, "cannot open directory '%s'", dir);
    return NULL;
  }
  char *best = NULL;
  struct timespec bt = {0, 0};
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    kn__sb p = KN__SB_INIT;
    kn__sb_printf(&p, "%s/%s", dir, e->d_name);
    struct stat st;
    bool newer = false;
    if (!kn__sb_failed(&p) && stat(kn__sb_cstr(&p), &st) == 0 &&
        S_ISREG(st.st_mode)) {
      struct timespec t = st.st_mtim;
      newer = !best || t.tv_sec > bt.tv_sec ||
              (t.tv_sec == bt.tv_sec && (t.tv_nsec > bt.tv_nsec ||
               (t.tv_nsec == bt.tv_nsec && strcmp(kn__sb_cstr(&p), best) > 0)));
      if (newer) bt = t;
    }
    if (newer) {
      free(best);
      best = kn__sb_take(&p);
    } else {
      kn__sb_fini(&p);
    }
  }
  closedir(d);
  if (!best) kn__error(KN_EINVAL, "directory '%s' holds no trace file", dir);
  return best;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    kn__error(KN_EIO, "cannot read '%s'", path);
    return NULL;
  }
  kn__sb sb = KN__SB_INIT;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) kn__sb_putn(&sb, buf, n);
  fclose(f);
  return kn__sb_take(&sb);
}

static kn_status run(args *a) {
  struct stat st;
  if (stat(a->input, &st) != 0)
    return kn__error(KN_EIO, "'%s' does not exist", a->input);
  bool dir = S_ISDIR(st.st_mode);
  if (a->all_ranks) {
    if (!dir) return kn__error(KN_EINVAL, "--all-ranks-html needs a directory, "
                               "'%s' is not one", a->input);
    return rp_report_all_ranks(&a->o, a->input);
  }
  if (a->latest && !dir)
    return kn__error(KN_EINVAL, "--latest needs a directory, '%s' is not one",
                     a->input);
  if (!dir) return rp_report_file(&a->o, a->input, NULL);
  char *file = latest_in(a->input);
  if (!file) return kn_last_status();
  kn_status s = rp_report_file(&a->o, file, NULL);
  free(file);
  return s;
}

int kn_cmd_report(int argc, char **argv) {
  args a;
  memset(&a, 0, sizeof a);
  int rc = parse(argc, argv, &a);
  if (rc >= 0) return rc;
  char *header = NULL;
  if (a.header_file) {
    header = read_file(a.header_file);
    if (!header) {
      fprintf(stderr, "kiln report: %s\n", kn_last_error());
      return 1;
    }
    a.o.custom_header = header;
  }
  kn_status s = run(&a);
  free(header);
  if (s) {
    fprintf(stderr, "kiln report: error: %s\n", kn_last_error());
    return 1;
  }
  return 0;
}
