/* cmd_demo.c — `spyglass demo …`: dispatches demo workloads. Only
 * `demo build` exists yet; kept trivial so other demos slot in. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_demo(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "build") == 0)
    return cmd_demo_build(argc - 1, argv + 1);
  FILE *f = argc >= 2 && cli_is_help(argv[1]) ? stdout : stderr;
  fprintf(f, "usage: spyglass demo build SRC_DIR [--trace jsonl|sqlite|"
             "postgres://…] [--out DIR]\n");
  return f == stdout ? EXIT_OK : EXIT_USAGE;
}
