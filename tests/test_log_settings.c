/*
** test_log_settings.c: KILN_LOGS parsing (grammar, resolution order, every
** invalid form with the exact error text), kn_set_logs semantics and typed
** errors, the precedence of KILN_LOGS over the API, help output, and open
** registration of user loggers and artifacts.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging/log.h"
#include "logging/log_int.h"
#include "support/log_capture.h"

static const char *const qnames[] = {
#define QNAME(id, q) q,
    KN_LOGGER_MAP(QNAME)
#undef QNAME
};

/* The effective level a logger prints at: the lowest level enabled. */
static int level_of(int id) {
  const int levels[] = {KN_DEBUG, KN_INFO, KN_WARNING, KN_ERROR, KN_CRITICAL};
  for (int i = 0; i < 5; i++)
    if (kn_log_enabled(id, levels[i])) return levels[i];
  return -1;
}

#define VALID_LIST                                                                    \
  "all, aot, aot_graphs, aot_joint_graph, autograd, bytecode, c10d, compiled_autograd, " \
  "compiled_autograd_verbose, cuda, cudagraphs, ddp, ddp_graphs, "                                  \
  "distributed, dynamic, dynamo, export, fsdp, fusion, graph, graph_breaks, "          \
  "graph_code, graph_sizes, guards, inductor, kernel_code, kernel_ir, kiln, "          \
  "output_code, "                                                                     \
  "overlap, perf_hints, post_grad_graphs, pp, recompiles, recompiles_verbose, "        \
  "schedule, sym_node, trace_bytecode, trace_call, trace_source, verbose_guards"

static void expect_invalid(const char *spec) {
  char want[2048];
  snprintf(want, sizeof want,
           "\nInvalid log settings: %s, must be a comma separated list of fully\n"
           "qualified module names, registered log names or registered artifact names.\n"
           "For more info on various settings, try KILN_LOGS=\"help\"\n"
           "Valid settings:\n" VALID_LIST "\n", spec);
  cr_assert_eq(kn_set_logs_str(spec), KN_EINVAL, "accepted \"%s\"", spec);
  cr_assert_str_eq(kn_last_error(), want);
}

TestSuite(log_settings, .init = kn_test_log_clean);

Test(log_settings, defaults_are_warnings_only) {
  for (int i = 0; i < KN__LOGGER_COUNT; i++) cr_assert_eq(level_of(i), KN_WARNING, "%s", qnames[i]);
  for (int a = 0; a < KN__ARTIFACT_COUNT; a++) cr_assert_not(KN_ARTIFACT_ENABLED(a));
}

Test(log_settings, grammar_accepts) {
  const char *ok[] = {"", "dynamo", "+dynamo", "-dynamo", "dynamo, +inductor",
                      "dynamo,\t aot", "+all", "kiln.dynamo.output_graph",
                      "guards,recompiles", "+guards"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    cr_assert_eq(kn_set_logs_str(ok[i]), KN_OK, "%s: %s", ok[i], kn_last_error());
}

Test(log_settings, every_invalid_form_has_the_exact_text) {
  const char *bad[] = {"dynamo ,inductor", "dynamo,", "+-dynamo", "dyn-amo", ",dynamo",
                       " dynamo", "dynamo;aot", "++dynamo", "unknown", "dynamo,unknown",
                       "kiln.nosuch", "help,dynamo", "kiln.dynamo.guards.__recompiles", "+"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_invalid(bad[i]);
}

Test(log_settings, invalid_value_changes_nothing) {
  cr_assert_eq(kn_set_logs_str("+dynamo,guards"), KN_OK);
  expect_invalid("dynamo,bogus");
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_DEBUG);
  cr_assert(KN_ARTIFACT_ENABLED(KN_ART_GUARDS));
  kn_log_setting bad[] = {KN_LOG_LEVEL("aot", KN_INFO), KN_LOG_LEVEL("aot_graphs", 5)};
  cr_assert_eq(kn_set_logs(bad, 2), KN_EINVAL);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_DEBUG);
  cr_assert_eq(level_of(KN_LOG_AOT), KN_WARNING);
}

Test(log_settings, prefixes_set_levels) {
  cr_assert_eq(kn_set_logs_str("+dynamo"), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_DEBUG);
  cr_assert_eq(level_of(KN_LOG_SYMBOLIC_SHAPES), KN_DEBUG);
  cr_assert_eq(level_of(KN_LOG_DYNAMO_GUARDS), KN_DEBUG); /* inherits */
  cr_assert_eq(level_of(KN_LOG_AOT), KN_WARNING);
  cr_assert_eq(kn_set_logs_str("-dynamo"), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_ERROR);
  cr_assert_eq(kn_set_logs_str("dynamo"), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_INFO);
  cr_assert_eq(level_of(KN_LOG_KILN), KN_WARNING);
  cr_assert_eq(kn_set_logs_str("all"), KN_OK);
  cr_assert_eq(level_of(KN_LOG_KILN), KN_INFO);
  cr_assert_eq(level_of(KN_LOG_INDUCTOR_SCHEDULER), KN_INFO);
}

Test(log_settings, artifacts_ignore_prefix_and_need_no_component_level) {
  cr_assert_eq(kn_set_logs_str("+guards"), KN_OK);
  cr_assert(KN_ARTIFACT_ENABLED(KN_ART_GUARDS));
  cr_assert_eq(level_of(KN_LOG_DYNAMO_GUARDS), KN_WARNING);
  cr_assert_eq(level_of(KN__ART_LOGGER(KN_ART_GUARDS)), KN_DEBUG);
  cr_assert_not(KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES));
}

Test(log_settings, debug_component_shows_only_default_on_artifacts) {
  cr_assert_eq(kn_set_logs_str("+dynamo"), KN_OK);
  const int on[] = {KN_ART_GUARDS, KN_ART_GRAPH, KN_ART_GRAPH_CODE, KN_ART_GRAPH_SIZES,
                    KN_ART_TRACE_SOURCE, KN_ART_TRACE_CALL, KN_ART_TRACE_BYTECODE,
                    KN_ART_RECOMPILES, KN_ART_GRAPH_BREAKS, KN_ART_DDP_GRAPHS,
                    KN_ART_COMPILED_AUTOGRAD};
  const int off[] = {KN_ART_BYTECODE, KN_ART_VERBOSE_GUARDS, KN_ART_RECOMPILES_VERBOSE,
                     KN_ART_COMPILED_AUTOGRAD_VERBOSE, KN_ART_SYM_NODE, KN_ART_OUTPUT_CODE,
                     KN_ART_AOT_GRAPHS, KN_ART_POST_GRAD_GRAPHS, KN_ART_SCHEDULE};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) cr_assert(KN_ARTIFACT_ENABLED(on[i]));
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
    cr_assert_not(KN_ARTIFACT_ENABLED(off[i]), "artifact %d", off[i]);
  cr_assert_eq(kn_set_logs_str("+all"), KN_OK);
  cr_assert(KN_ARTIFACT_ENABLED(KN_ART_AOT_GRAPHS));
  cr_assert_not(KN_ARTIFACT_ENABLED(KN_ART_OUTPUT_CODE));
}

/* test_all: all=DEBUG, dynamo=INFO; through the API and through KILN_LOGS. */
static void check_all(void) {
  const char *dyn[] = {"kiln.dynamo", "kiln.symbolic_shapes", "kiln.sym_node"};
  for (int i = 0; i < KN__LOGGER_COUNT; i++) {
    bool under = false;
    for (int d = 0; d < 3; d++) under |= !strncmp(qnames[i], dyn[d], strlen(dyn[d]));
    cr_assert_eq(level_of(i), under ? KN_INFO : KN_DEBUG, "%s", qnames[i]);
  }
}

Test(log_settings, all_debug_dynamo_info) {
  kn_log_setting s[] = {KN_LOG_LEVEL("all", KN_DEBUG), KN_LOG_LEVEL("dynamo", KN_INFO)};
  cr_assert_eq(kn_set_logs(s, 2), KN_OK);
  check_all();
  setenv("KILN_LOGS", "+all,dynamo", 1);
  kn__log_reset_for_tests();
  check_all();
}

Test(log_settings, set_logs_typed_errors) {
  const struct { kn_log_setting s; const char *msg; } cases[] = {
      {KN_LOG_LEVEL("aot_graphs", 5), "Expected bool to enable artifact aot_graphs, received 5"},
      {KN_LOG_FLAG("aot_graphs", 2), "Expected bool to enable artifact aot_graphs, received 2"},
      {KN_LOG_FLAG("dynamo", 1), "Unrecognized log level for log dynamo: True, valid level "
                                 "values are: 50,40,30,20,10,0"},
      {KN_LOG_LEVEL("dynamo", 7), "Unrecognized log level for log dynamo: 7, valid level "
                                  "values are: 50,40,30,20,10,0"},
      {KN_LOG_LEVEL("kiln.dynamo.utils", 25), "Unrecognized log level for log "
                                              "kiln.dynamo.utils: 25, valid level values "
                                              "are: 50,40,30,20,10,0"},
      {KN_LOG_LEVEL("foo", KN_INFO), "Unrecognized log or artifact name passed to set_logs: foo"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_eq(kn_set_logs(&cases[i].s, 1), KN_EINVAL);
    cr_assert_str_eq(kn_last_error(), cases[i].msg);
  }
}

Test(log_settings, set_logs_replaces_and_last_write_wins) {
  kn_log_setting a[] = {KN_LOG_LEVEL("dynamo", KN_INFO), KN_LOG_FLAG("guards", 1),
                        KN_LOG_FLAG("recompiles", 0)};
  cr_assert_eq(kn_set_logs(a, 3), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_INFO);
  cr_assert(KN_ARTIFACT_ENABLED(KN_ART_GUARDS));
  cr_assert_not(KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES));
  kn_log_setting b[] = {KN_LOG_LEVEL("aot", KN_DEBUG)};
  cr_assert_eq(kn_set_logs(b, 1), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
  cr_assert_not(KN_ARTIFACT_ENABLED(KN_ART_GUARDS));
  kn_log_setting c[] = {KN_LOG_LEVEL("dynamo", KN_DEBUG), KN_LOG_LEVEL("dynamic", KN_INFO)};
  cr_assert_eq(kn_set_logs(c, 2), KN_OK);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_DEBUG);
  cr_assert_eq(level_of(KN_LOG_SYMBOLIC_SHAPES), KN_INFO);
  cr_assert_eq(kn_set_logs(NULL, 0), KN_OK);
  for (int i = 0; i < KN__LOGGER_COUNT; i++) cr_assert_eq(level_of(i), KN_WARNING);
}

static void set_under_env(void *ud) {
  kn_test_records *r = ud;
  kn_test_capture_begin(r);
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_DEBUG)};
  cr_assert_eq(kn_set_logs(s, 1), KN_OK);
  cr_assert_eq(kn_set_logs_str("+aot"), KN_OK);
  kn_test_capture_end(r);
}

Test(log_settings, env_takes_precedence_even_empty) {
  setenv("KILN_LOGS", "", 1);
  kn__log_reset_for_tests();
  kn_test_records r = {0};
  char *err = kn_test_capture_stderr(set_under_env, &r);
  cr_assert_str_eq(err, "");
  free(err);
  cr_assert_eq(r.n, 2);
  for (size_t i = 0; i < 2; i++) {
    cr_assert_str_eq(r.v[i].message, "Using KILN_LOGS environment variable for log settings, "
                                     "ignoring call to set_logs");
    cr_assert_str_eq(r.v[i].name, "kiln.logging");
    cr_assert_eq(r.v[i].level, KN_WARNING);
  }
  kn_test_records_free(&r);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
  cr_assert_eq(level_of(KN_LOG_AOT), KN_WARNING);
}

/* ---- help, and invalid KILN_LOGS at start-up ----------------------------- */

static const char help_start[] =
    "\nKILN_LOGS Info\n\nExamples:\n"
    "  KILN_LOGS=\"+dynamo,aot\" will set the log level of Dynamo to\n"
    "  DEBUG and AOT to INFO\n";

static void reset_env(void *ud) {
  setenv("KILN_LOGS", ud, 1);
  kn__log_reset_for_tests();
}

Test(log_settings, env_help_prints_help_and_keeps_defaults) {
  char *err = kn_test_capture_stderr(reset_env, (void *)"help");
  char *help = kn_log_help(false);
  cr_assert_str_eq(err, help);
  cr_assert(!strncmp(err, help_start, strlen(help_start)));
  cr_assert(strstr(err, "  well. This is useful when the output is long.\n\n\n"
                        "Visible registered names (use KILN_LOGS='+help' for full list)\n"
                        "  all\n  aot\n  autograd\n  c10d\n"));
  cr_assert(strstr(err, "\n  recompiles                    \tPrints the reason why we "
                        "recompiled a graph. Very, very useful.\n"));
  cr_assert_null(strstr(err, "bytecode"));
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
  free(err);
  free(help);
  err = kn_test_capture_stderr(reset_env, (void *)"+help");
  cr_assert(strstr(err, "\nAll registered names\n  all\n"));
  cr_assert(strstr(err, "\n  bytecode                      \t(not built yet) Prints the original"));
  cr_assert(strstr(err, "\n  perf_hints                    \t\n"), "built: the skipped CUDA graphs");
  cr_assert(strstr(err, "\n  cudagraphs                    \tLogs information from wrapping "
                        "inductor generated code with cudagraphs.\n"));
  free(err);
}

Test(log_settings, env_invalid_is_short_and_continues) {
  char *err = kn_test_capture_stderr(reset_env, (void *)"dynamo ,inductor");
  char *lines[64];
  int n = 0;
  for (char *l = strtok(err, "\n"); l && n < 64; l = strtok(NULL, "\n")) lines[n++] = l;
  cr_assert(n < 50);
  cr_assert_str_eq(lines[0], "kiln: KILN_LOGS is invalid, using the default log settings:");
  cr_assert_str_eq(lines[n - 3], "For more info on various settings, try KILN_LOGS=\"help\"");
  cr_assert_str_eq(lines[n - 2], "Valid settings:");
  cr_assert_str_eq(lines[n - 1], VALID_LIST);
  free(err);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
}

Test(log_settings, kwargs_to_settings) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_DEBUG), KN_LOG_LEVEL("aot", KN_INFO),
                        KN_LOG_LEVEL("inductor", KN_ERROR), KN_LOG_FLAG("guards", 1)};
  char *str = kn_test_settings_string(s, 4);
  cr_assert_str_eq(str, "+dynamo,aot,-inductor,guards");
  free(str);
  kn_log_setting w[] = {KN_LOG_LEVEL("dynamo", KN_WARNING)};
  cr_assert_null(kn_test_settings_string(w, 1));
}

/* ---- open registration ---------------------------------------------------- */

static int hi_logger;
static void say_hi(const kn_test_records *r, void *ud) {
  (void)ud;
  KN_LOG_TO(hi_logger, KN_INFO, "hi");
  cr_assert_eq(r->n, 1);
}

static void settings_test(const char *env, kn_test_body body) {
  kn_test_records r = {0};
  setenv("KILN_LOGS", env, 1);
  kn__log_reset_for_tests();
  kn_test_capture_begin(&r);
  body(&r, NULL);
  kn_test_capture_end(&r);
  kn_test_records_free(&r);
  kn_test_log_clean();
}

Test(log_settings, open_registration_with_registered_parent) {
  hi_logger = KN_LOG_DYNAMO_OUTPUT_GRAPH;
  settings_test("kiln.dynamo.output_graph", say_hi);
}

Test(log_settings, open_registration_of_user_logger) {
  cr_assert_eq(kn_log_get_logger("kiln.utils", &hi_logger), KN_OK);
  settings_test("kiln.utils", say_hi);
  kn_log_setting s[] = {KN_LOG_LEVEL("kiln.utils", KN_INFO)};
  kn_test_logging_twice(s, 1, say_hi, NULL);
}

Test(log_settings, logger_outside_namespace_becomes_its_own_log) {
  int id;
  cr_assert_eq(kn_log_get_logger("myapp.net", &id), KN_OK);
  cr_assert_not(kn_log_enabled(id, KN_CRITICAL)); /* no handler until named */
  int again;
  cr_assert_eq(kn_log_get_logger("myapp.net", &again), KN_OK);
  cr_assert_eq(again, id);
  cr_assert_eq(kn_set_logs_str("+myapp.net"), KN_OK);
  cr_assert_eq(level_of(id), KN_DEBUG);
  cr_assert_eq(kn_log_get_logger("bad..name", &again), KN_EINVAL);
  cr_assert_eq(kn_log_get_logger("", &again), KN_EINVAL);
}

Test(log_settings, user_artifact_registration) {
  int art, on;
  cr_assert_eq(kn_log_register_artifact("my_artifact", "kiln.myext", "Mine.",
                                        KN_ARTIFACT_OFF_BY_DEFAULT | KN_ARTIFACT_VISIBLE, &art),
               KN_OK);
  cr_assert_eq(kn_log_register_artifact("my_on", "kiln.myext", "On.", 0, &on), KN_OK);
  cr_assert_eq(kn_log_register_artifact("my_artifact", "kiln", "", 0, &art), KN_EINVAL);
  cr_assert_eq(kn_log_register_artifact("guards", "kiln", "", 0, &art), KN_EINVAL);
  cr_assert_eq(kn_log_register_artifact("a.b", "kiln", "", 0, &art), KN_EINVAL);
  cr_assert_eq(kn_set_logs_str("+kiln"), KN_OK);
  cr_assert_not(kn_log_enabled(art, KN_DEBUG));
  cr_assert(kn_log_enabled(on, KN_DEBUG));
  cr_assert_eq(kn_set_logs_str("my_artifact"), KN_OK);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  KN_LOG_TO(art, KN_DEBUG, "mine %d", 1);
  KN_LOG_TO(on, KN_DEBUG, "not shown");
  kn_test_capture_end(&r);
  cr_assert_eq(r.n, 1);
  cr_assert_str_eq(r.v[0].name, "kiln.myext.__my_artifact");
  cr_assert_str_eq(r.v[0].artifact, "my_artifact");
  cr_assert_str_eq(r.v[0].message, "mine 1");
  cr_assert(strstr(r.v[0].formatted, "] [__my_artifact] mine 1"));
  kn_test_records_free(&r);
  char *help = kn_log_help(false);
  cr_assert(strstr(help, "\n  my_artifact                   \tMine.\n"));
  cr_assert_null(strstr(help, "my_on"));
  free(help);
  cr_assert_eq(kn_set_logs_str("nope"), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), ", kernel_code, kernel_ir, kiln, my_artifact, my_on, output_code,"));
}

/* ---- the `kiln logs` command ------------------------------------------------ */

static char *run_tool(const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "env -u KILN_LOGS '%s' %s", KN_TOOL_PATH, args);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  char *out = NULL;
  size_t cap = 0, n = 0, got;
  char buf[4096];
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    if (n + got + 1 > cap) out = realloc(out, cap = (n + got + 1) * 2);
    memcpy(out + n, buf, got);
    n += got;
  }
  cr_assert_eq(pclose(f), 0);
  if (!out) out = calloc(1, 1);
  out[n] = '\0';
  return out;
}

Test(kiln_logs_tool, prints_the_help_and_registry) {
  char *out = run_tool("logs"), *help = kn_log_help(false);
  cr_assert_str_eq(out, help);
  cr_assert(strstr(out, "\n  graph_breaks                  \tPrints whenever Dynamo decides"));
  free(out), free(help);
  out = run_tool("logs --all");
  help = kn_log_help(true);
  cr_assert_str_eq(out, help);
  cr_assert(strstr(out, "\nAll registered names\n"));
  free(out), free(help);
}

/* ---- unknown names get the nearest valid name ------------------------------- */

Test(log_settings, unknown_name_suggests_the_nearest) {
  cr_assert_eq(kn_set_logs_str("guards,graph_cod"), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "try KILN_LOGS=\"help\"\n"
                                    "Unknown name \"graph_cod\"; did you mean \"graph_code\"?\n"
                                    "Valid settings:\n"),
            "%s", kn_last_error());
  cr_assert_eq(kn_set_logs_str("+dynamoo"), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "did you mean \"dynamo\"?"), "%s", kn_last_error());
  cr_assert_eq(kn_set_logs_str("kiln.dynamo.gaurds"), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "did you mean \"kiln.dynamo.guards\"?"), "%s", kn_last_error());
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamp", KN_INFO)};
  cr_assert_eq(kn_set_logs(s, 1), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), "Unrecognized log or artifact name passed to set_logs: "
                                    "dynamp (did you mean \"dynamo\"?)");
  /* nothing close: no suggestion */
  cr_assert_eq(kn_set_logs_str("zzzzzz"), KN_EINVAL);
  cr_assert_null(strstr(kn_last_error(), "did you mean"), "%s", kn_last_error());
}

/* Before: one misspelled name made the whole value invalid, so the valid
** names were dropped too. Now the others apply and each bad one is named. */
Test(log_settings, env_unknown_name_is_skipped_and_the_others_apply) {
  char *err = kn_test_capture_stderr(reset_env, (void *)"+aot,recompile,guards,zzzzzz");
  cr_assert_str_eq(err,
                   "kiln: KILN_LOGS=\"+aot,recompile,guards,zzzzzz\": unknown name "
                   "\"recompile\" ignored (did you mean \"recompiles\"?); the other names apply. "
                   "KILN_LOGS=\"help\" lists the valid ones.\n"
                   "kiln: KILN_LOGS=\"+aot,recompile,guards,zzzzzz\": unknown name "
                   "\"zzzzzz\" ignored; the other names apply. KILN_LOGS=\"help\" lists the "
                   "valid ones.\n");
  free(err);
  cr_assert_eq(level_of(KN_LOG_AOT), KN_DEBUG);
  cr_assert(KN_ARTIFACT_ENABLED(KN_ART_GUARDS));
  cr_assert_not(KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES));
}

Test(log_settings, env_unknown_name_suggests_the_nearest) {
  char *err = kn_test_capture_stderr(reset_env, (void *)"kiln.dynamo.gaurds");
  cr_assert_str_eq(err, "kiln: KILN_LOGS=\"kiln.dynamo.gaurds\": unknown name "
                        "\"kiln.dynamo.gaurds\" ignored (did you mean \"kiln.dynamo.guards\"?); "
                        "the other names apply. KILN_LOGS=\"help\" lists the valid ones.\n");
  free(err);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
}

/* `kiln logs` lists what kiln emits: no test artifacts; artifacts of layers
** that are not built yet are marked. */
Test(kiln_logs_tool, lists_only_what_kiln_emits) {
  char *out = run_tool("logs --all");
  cr_assert_null(strstr(out, "custom_format_test_artifact"));
  cr_assert(strstr(out, "\n  aot_graphs                    \tPrints the forward"), "%s", out);
  cr_assert(strstr(out, "\n  kernel_code                   \t(not built yet) "), "%s", out);
  cr_assert(strstr(out, "\n  output_code                   \tPrints the code"), "%s", out);
  cr_assert(strstr(out, "\n  graph_code                    \tLike `graph`"), "%s", out);
  free(out);
}

/* KILN_LOGS=help read by the first log call of the process: the help is
** printed once and the program goes on (it used to recurse into the
** initialisation until the stack overflowed). */
static void first_log(void *ud) {
  setenv("KILN_LOGS", ud, 1);
  KN_LOG(KN_LOG_DYNAMO, KN_WARNING, "after the help");
}

static int count_of(const char *s, const char *sub) {
  int n = 0;
  for (const char *p = strstr(s, sub); p; p = strstr(p + 1, sub)) n++;
  return n;
}

static void expect_help_once_at_first_init(const char *spec, const char *names_line) {
  /* the test process has logged already: start over as a new process does */
  atomic_store(&kn__logs.ready, false);
  kn__logs.nloggers = 0;
  char *err = kn_test_capture_stderr(first_log, (void *)spec);
  cr_assert_eq(count_of(err, help_start), 1, "%s", err);
  cr_assert_eq(count_of(err, names_line), 1, "%s", err);
  cr_assert(strstr(err, "after the help"), "%s", err);
  cr_assert_eq(level_of(KN_LOG_DYNAMO), KN_WARNING);
  free(err);
}

Test(log_settings, env_help_at_first_init_prints_once) {
  expect_help_once_at_first_init("help", "Visible registered names");
}

Test(log_settings, env_plus_help_at_first_init_prints_once) {
  expect_help_once_at_first_init("+help", "All registered names");
}
