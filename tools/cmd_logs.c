/*
** tools/cmd_logs.c: `kiln logs`, the KILN_LOGS help and the registry of log
** components and artifacts. `kiln logs --all` (or `+help`) lists every
** artifact, including the ones KILN_LOGS=help hides.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/log.h"
#include "commands.h"

int kn_cmd_logs(int argc, char **argv) {
  bool verbose = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--all") || !strcmp(argv[i], "+help")) {
      verbose = true;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ||
               !strcmp(argv[i], "help")) {
      printf("usage: kiln logs [--all]\n\n"
             "Print the KILN_LOGS help: its syntax, the log components and the\n"
             "visible artifacts (--all: every artifact).\n");
      return 0;
    } else {
      fprintf(stderr, "kiln logs: unknown argument '%s' (expected --all)\n", argv[i]);
      return 2;
    }
  }
  char *help = kn_log_help(verbose);
  if (!help) {
    fprintf(stderr, "kiln logs: out of memory\n");
    return 1;
  }
  fputs(help, stdout);
  free(help);
  return 0;
}
