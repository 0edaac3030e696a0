/*
** tools/commands.h: the subcommands of `kiln`, one per file. Each takes the
** arguments after `kiln` (argv[0] is the subcommand's name) and returns the
** process exit status.
*/
#ifndef KN_TOOLS_COMMANDS_H
#define KN_TOOLS_COMMANDS_H

/* tools/cmd_report.c */
int kn_cmd_report(int argc, char **argv);

/* Add a declaration and a KN_TOOL_COMMANDS row per subcommand. */
#define KN_TOOL_COMMANDS /* {"name", function, "help"}, */ \
  {"report", kn_cmd_report, "HTML report of a trace (tlparse's flags)"},

#endif
