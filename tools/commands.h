/*
** tools/commands.h: the subcommands of `kiln`, one per file. Each takes the
** arguments after `kiln` (argv[0] is the subcommand's name) and returns the
** process exit status.
*/
#ifndef KN_TOOLS_COMMANDS_H
#define KN_TOOLS_COMMANDS_H

int kn_cmd_cache(int argc, char **argv);  /* tools/cmd_cache.c */
int kn_cmd_logs(int argc, char **argv);   /* tools/cmd_logs.c */
int kn_cmd_report(int argc, char **argv); /* tools/cmd_report.c */

/* Add a declaration and a KN_TOOL_COMMANDS row per subcommand. */
#define KN_TOOL_COMMANDS /* {"name", function, "help"}, */ \
  {"cache", kn_cmd_cache, "list or clear the inductor disk cache (--clear, --dir DIR)"}, \
  {"logs", kn_cmd_logs, "KILN_LOGS help: log components and artifacts"}, \
  {"report", kn_cmd_report, "HTML report of a trace (tlparse's flags)"},

#endif
