/*
** logging/settings.c: KILN_LOGS and kn_set_logs.
**
** KILN_LOGS grammar (Python's regex, fully matched):
**     ((\+|-)?[\w\.]+,\s*)*(\+|-)?[\w\.]+?
** "+" means DEBUG, "-" ERROR, no prefix INFO. A name resolves, in order, as
** "all" (= "kiln"), a component, an artifact (enabled; the prefix is
** ignored), or a known logger qname (a child log if a registered logger is
** above it, else a log of its own). Anything else is an error that lists
** the valid names and changes nothing; except that in the variable, an
** unknown name is skipped with a warning naming it (and the nearest valid
** name) while the others apply. The variable, when present (even empty),
** wins over kn_set_logs.
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "core/strdist.h"
#include "logging/log_int.h"

static bool word_char(char c) {
  return c == '_' || c == '.' || isalnum((unsigned char)c);
}

/* The regex above, as a scanner. */
static bool valid_syntax(const char *s) {
  const char *p = s;
  for (;;) {
    if (*p == '+' || *p == '-') p++;
    const char *start = p;
    while (word_char(*p)) p++;
    if (p == start) return false;
    if (!*p) return true;
    if (*p != ',') return false;
    p++;
    while (isspace((unsigned char)*p)) p++;
  }
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "all", the components and the artifacts, sorted, ", "-joined. */
static void valid_names(kn__sb *sb) {
  const char *names[1 + 64 + KN__ART_MAX];
  int n = 0;
  names[n++] = "all";
  for (int c = 0; c < kn__log_ncomponents(); c++) names[n++] = kn__log_component_name(c);
  for (int a = 0; a < kn__logs.nartifacts; a++) names[n++] = kn__logs.artifacts[a].name;
  qsort(names, (size_t)n, sizeof names[0], cmp_str);
  for (int i = 0; i < n; i++) {
    if (i) kn__sb_puts(sb, ", ");
    kn__sb_puts(sb, names[i]);
  }
}

static void consider(const char *bad, const char *cand, const char **best, int *bestd) {
  int d = kn__edit_distance(bad, cand, true);
  if (d < *bestd) {
    *bestd = d;
    *best = cand;
  }
}

/* The valid name closest to `bad` ("all", components, artifacts, logger
** names), or NULL when none is close (more than a third of its length,
** at least one edit). */
static const char *closest_name(const char *bad) {
  if (!bad || !*bad) return NULL;
  const char *best = NULL;
  int bestd = 1 << 20;
  consider(bad, "all", &best, &bestd);
  for (int c = 0; c < kn__log_ncomponents(); c++)
    consider(bad, kn__log_component_name(c), &best, &bestd);
  for (int a = 0; a < kn__logs.nartifacts; a++)
    consider(bad, kn__logs.artifacts[a].name, &best, &bestd);
  for (int i = 0; i < kn__logs.nloggers; i++)
    if (kn__logs.loggers[i].artifact < 0) consider(bad, kn__logs.loggers[i].name, &best, &bestd);
  int limit = (int)strlen(bad) / 3;
  return bestd <= (limit > 1 ? limit : 1) ? best : NULL;
}

/* bad: the first unknown name, or NULL (a syntax error). */
static kn_status invalid_settings(const char *spec, const char *bad) {
  kn__sb sb = KN__SB_INIT;
  valid_names(&sb);
  const char *near = closest_name(bad);
  char hint[160] = "";
  if (near) snprintf(hint, sizeof hint, "Unknown name \"%s\"; did you mean \"%s\"?\n", bad, near);
  kn_status s = kn__error(
      KN_EINVAL,
      "\nInvalid log settings: %s, must be a comma separated list of fully\n"
      "qualified module names, registered log names or registered artifact names.\n"
      "For more info on various settings, try KILN_LOGS=\"help\"\n"
      "%sValid settings:\n%s\n",
      spec, hint, kn__sb_failed(&sb) ? "(out of memory)" : kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
  return s;
}

/* Set a known logger by qname: a child log under a registered logger,
** otherwise a log with a handler of its own. */
static void set_module(kn__log_state *st, int id, int level) {
  if (!kn__log_has_handler(st, id, false)) st->handler[id] = true;
  st->level[id] = (unsigned char)level;
}

/* Resolve one bare name; false if it is not a known name. */
static bool resolve(kn__log_state *st, const char *name, int level) {
  if (!strcmp(name, "all")) name = "kiln";
  int c = kn__log_find_component(name);
  if (c >= 0) {
    for (const int *l = kn__log_component_loggers(c); *l >= 0; l++)
      st->level[*l] = (unsigned char)level;
    return true;
  }
  int a = kn__log_find_artifact(name);
  if (a >= 0) {
    st->art_on[a] = true;
    return true;
  }
  int id = kn__log_find(name);
  if (id < 0 || kn__logs.loggers[id].artifact >= 0) return false;
  set_module(st, id, level);
  return true;
}

kn_status kn__log_parse(const char *spec, kn__log_state *st, int *help) {
  return kn__log_parse_ex(spec, st, help, NULL);
}

kn_status kn__log_parse_ex(const char *spec, kn__log_state *st, int *help, kn__sb *unknown) {
  *help = 0;
  if (!strcmp(spec, "help")) return (*help = 1), KN_OK;
  if (!strcmp(spec, "+help")) return (*help = 2), KN_OK;
  kn__log_state_default(st);
  if (!*spec) return KN_OK;
  if (!valid_syntax(spec)) return invalid_settings(spec, NULL);
  char item[256];
  const char *p = spec;
  while (*p) {
    size_t n = 0;
    bool too_long = false;
    int level = *p == '+' ? KN_DEBUG : *p == '-' ? KN_ERROR : KN_INFO;
    for (; *p && *p != ','; p++) {
      if (*p == '+' || *p == '-' || isspace((unsigned char)*p)) continue;
      if (n + 1 < sizeof item) item[n++] = *p;
      else too_long = true;
    }
    item[n] = '\0';
    if (*p == ',') p++;
    while (isspace((unsigned char)*p)) p++;
    if (too_long) return invalid_settings(spec, NULL);
    if (resolve(st, item, level)) continue;
    if (!unknown) return invalid_settings(spec, item);
    kn__sb_puts(unknown, item); /* skipped: the caller warns */
    kn__sb_putc(unknown, '\0');
  }
  return KN_OK;
}

/* One line per name KILN_LOGS skipped (NUL-separated in names[0..len)). */
static void warn_unknown(const char *spec, const kn__sb *names) {
  for (size_t i = 0; i < names->len; i += strlen(names->buf + i) + 1) {
    const char *bad = names->buf + i, *near = closest_name(bad);
    char hint[160] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", near);
    fprintf(stderr, "kiln: KILN_LOGS=\"%s\": unknown name \"%s\" ignored%s; the other names "
            "apply. KILN_LOGS=\"help\" lists the valid ones.\n", spec, bad, hint);
  }
}

static char *help_text(bool verbose);

/* Called from the first initialisation (the tables are built, the lock is
** held): the help is printed once, without initialising again. */
static void print_help(int verbose) {
  char *h = help_text(verbose == 2);
  if (h) fputs(h, stderr);
  free(h);
}

void kn__log_read_env_settings(void) {
  const char *v = getenv("KILN_LOGS");
  kn__log_state st;
  kn__log_state_default(&st);
  kn__logs.env_logs = v != NULL;
  if (v) {
    int help;
    kn__log_state parsed;
    kn__sb unknown = KN__SB_INIT; /* names that are not valid: skipped, and warned of */
    if (kn__log_parse_ex(v, &parsed, &help, &unknown) != KN_OK) {
      fprintf(stderr, "kiln: KILN_LOGS is invalid, using the default log settings:\n%s\n",
              kn_last_error());
      kn_clear_error();
    } else if (help) {
      print_help(help);
    } else {
      warn_unknown(v, &unknown);
      st = parsed;
    }
    kn__sb_fini(&unknown);
  }
  kn__log_apply(&st);
}

/* ---- kn_set_logs -------------------------------------------------------- */

static bool env_wins(void) {
  if (!kn__logs.env_logs) return false;
  KN_LOG(KN_LOG_LOGGING, KN_WARNING,
         "Using KILN_LOGS environment variable for log settings, ignoring call to set_logs");
  return true;
}

static void value_text(const kn_log_setting *s, char *buf, size_t n) {
  if (s->kind == KN_LOG_SET_FLAG && (s->value == 0 || s->value == 1))
    snprintf(buf, n, "%s", s->value ? "True" : "False");
  else
    snprintf(buf, n, "%d", s->value);
}

static bool valid_level(const kn_log_setting *s) {
  if (s->kind != KN_LOG_SET_LEVEL) return false;
  switch (s->value) {
  case 50: case 40: case 30: case 20: case 10: case 0: return true;
  default: return false;
  }
}

static kn_status apply_one(kn__log_state *st, const kn_log_setting *s) {
  char val[32];
  value_text(s, val, sizeof val);
  const char *name = s->name ? s->name : "(null)";
  int a = s->name ? kn__log_find_artifact(name) : -1;
  if (a >= 0) {
    if (s->kind != KN_LOG_SET_FLAG || (s->value != 0 && s->value != 1))
      return kn__error(KN_EINVAL, "Expected bool to enable artifact %s, received %s", name, val);
    if (s->value) st->art_on[a] = true;
    return KN_OK;
  }
  const char *alias = s->name && !strcmp(name, "all") ? "kiln" : name;
  int c = s->name ? kn__log_find_component(alias) : -1;
  int id = c < 0 && s->name ? kn__log_find(alias) : -1;
  if (c < 0 && (id < 0 || kn__logs.loggers[id].artifact >= 0)) {
    const char *near = s->name ? closest_name(name) : NULL;
    if (near)
      return kn__error(KN_EINVAL, "Unrecognized log or artifact name passed to set_logs: %s "
                       "(did you mean \"%s\"?)", name, near);
    return kn__error(KN_EINVAL, "Unrecognized log or artifact name passed to set_logs: %s", name);
  }
  if (!valid_level(s))
    return kn__error(KN_EINVAL,
                     "Unrecognized log level for log %s: %s, valid level values are: "
                     "50,40,30,20,10,0", name, val);
  if (c >= 0)
    for (const int *l = kn__log_component_loggers(c); *l >= 0; l++)
      st->level[*l] = (unsigned char)s->value;
  else
    set_module(st, id, s->value);
  return KN_OK;
}

kn_status kn_set_logs(const kn_log_setting *settings, size_t n) {
  if (n && !settings)
    return kn__error(KN_EINVAL, "expected %zu settings, found a NULL array", n);
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  kn_status s = KN_OK;
  if (!env_wins()) {
    kn__log_state st;
    kn__log_state_default(&st);
    for (size_t i = 0; i < n && s == KN_OK; i++) s = apply_one(&st, &settings[i]);
    if (s == KN_OK) kn__log_apply(&st);
  }
  pthread_mutex_unlock(&kn__logs.lock);
  return s;
}

kn_status kn_set_logs_str(const char *spec) {
  if (!spec) return kn__error(KN_EINVAL, "expected a KILN_LOGS string, found NULL");
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  kn_status s = KN_OK;
  if (!env_wins()) {
    kn__log_state st;
    int help;
    s = kn__log_parse(spec, &st, &help);
    if (s == KN_OK && help) print_help(help);
    else if (s == KN_OK) kn__log_apply(&st);
  }
  pthread_mutex_unlock(&kn__logs.lock);
  return s;
}

/* ---- help ---------------------------------------------------------------- */

static const char help_head[] =
    "\n"
    "KILN_LOGS Info\n"
    "\n"
    "Examples:\n"
    "  KILN_LOGS=\"+dynamo,aot\" will set the log level of Dynamo to\n"
    "  DEBUG and AOT to INFO\n"
    "\n"
    "  KILN_LOGS=\"-dynamo,+inductor\" will set the log level of Dynamo to\n"
    "  ERROR and Inductor to DEBUG\n"
    "\n"
    "  KILN_LOGS=\"aot_graphs\" will enable the aot_graphs artifact\n"
    "\n"
    "  KILN_LOGS=\"+dynamo,schedule\" will set the log level of Dynamo\n"
    "  to DEBUG and enable the schedule artifact\n"
    "\n"
    "  KILN_LOGS=\"+some.random.module,schedule\" will set the log level of\n"
    "  some.random.module to DEBUG and enable the schedule artifact\n"
    "\n"
    "  KILN_LOGS_FORMAT=\"%(levelname)s: %(message)s\" or any provided format\n"
    "  string will set the output format\n"
    "  Valid keys are \"levelname\", \"message\", \"pathname\", \"levelno\", \"lineno\",\n"
    "  \"filename\" and \"name\".\n"
    "\n"
    "  KILN_LOGS_OUT=/home/user/output.txt will output the logs to /home/user/output.txt as\n"
    "  well. This is useful when the output is long.\n"
    "\n"
    "\n";

static void help_lines(kn__sb *sb, bool verbose) {
  const char *comps[64];
  int nc = kn__log_ncomponents();
  for (int c = 0; c < nc; c++) comps[c] = kn__log_component_name(c);
  qsort(comps, (size_t)nc, sizeof comps[0], cmp_str);
  kn__sb_puts(sb, "  all\n");
  for (int c = 0; c < nc; c++) kn__sb_printf(sb, "  %s\n", comps[c]);
  char *lines[KN__ART_MAX];
  int n = 0;
  for (int a = 0; a < kn__logs.nartifacts; a++) {
    const kn__artifact *art = &kn__logs.artifacts[a];
    if (!verbose && !(art->flags & KN_ARTIFACT_VISIBLE)) continue;
    kn__sb line = KN__SB_INIT;
    if (art->flags & KN__ARTIFACT_NOT_BUILT)
      kn__sb_printf(&line, "%-30s\t(not built yet)%s%s", art->name, *art->desc ? " " : "",
                    art->desc);
    else
      kn__sb_printf(&line, "%-30s\t%s", art->name, art->desc);
    char *l = kn__sb_take(&line);
    if (l) lines[n++] = l;
    else sb->oom = true;
  }
  qsort(lines, (size_t)n, sizeof lines[0], cmp_str);
  for (int i = 0; i < n; i++) {
    kn__sb_printf(sb, "  %s\n", lines[i]);
    free(lines[i]);
  }
}

static char *help_text(bool verbose) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, help_head);
  kn__sb_puts(&sb, verbose ? "All registered names\n"
                           : "Visible registered names (use KILN_LOGS='+help' for full list)\n");
  pthread_mutex_lock(&kn__logs.lock);
  help_lines(&sb, verbose);
  pthread_mutex_unlock(&kn__logs.lock);
  return kn__sb_take(&sb);
}

char *kn_log_help(bool verbose) {
  kn__log_ensure_init();
  return help_text(verbose);
}

bool kn__log_env_flag(const char *name, bool dflt, int lg, atomic_bool *warned,
                      const char *otherwise, const char *file, int line) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  if (!strcmp(v, "0") || !strcmp(v, "1")) return v[0] == '1';
  if (!atomic_exchange(warned, true) && KN_LOG_ENABLED(lg, KN_WARNING))
    kn__log_emit(lg, KN_WARNING, 0u, file, line, "%s: expected 0 or 1, found '%.100s'; %s", name,
                 v, otherwise);
  return dflt;
}
