/*
** tools/main.c: the `kiln` command. Each subcommand is one row of the table
** below and lives in its own file under tools/.
*/
#include <stdio.h>
#include <string.h>

#include "kiln/core.h"
#include "commands.h"

static int cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("kiln %s\n", kn_version());
  return 0;
}

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"version", cmd_version, "print the version"},
    KN_TOOL_COMMANDS
};

static void usage(FILE *f) {
  fprintf(f, "usage: kiln <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\n'kiln <command> --help' describes one command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) return cmd_version(0, NULL);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
