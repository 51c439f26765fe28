/* main.c — the `spyglass` command: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "spyglass/spyglass.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"demo", cmd_demo, "run the demo scene, inspected live"},
    {"decode", cmd_decode, "print a stream of wire frames as JSON lines"},
    {"bench", cmd_bench,
     "run a benchmark (wire, bus, provider, clock, msgprof, trace)"},
    {"trace", cmd_trace, "summarise a recorded trace (trace summary STORE)"},
};

int cli_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: spyglass <command> [options]\n\n"
             "live devtools telemetry for C programs (version %s)\n\n"
             "commands:\n",
          SPY_VERSION_STRING);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'spyglass <command> --help' describes one command.\n"
             "exit codes: 0 success, 1 failure, 2 bad usage or input\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  if (cli_is_help(argv[1])) {
    usage(stdout);
    return EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("spyglass %s\n", SPY_VERSION_STRING);
    return EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "spyglass: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return EXIT_USAGE;
}
