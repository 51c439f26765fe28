/* main.c — the `spyglass` command: dispatches to one file per subcommand. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "spyglass/spyglass.h"
#ifdef SPY_HAVE_VPX
#include "spyglass/vpx.h"
#endif

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"demo", cmd_demo, "run the demo scene, inspected live"},
    {"decode", cmd_decode, "print a stream of wire frames as JSON lines"},
    {"ls", cmd_ls, "list the live providers on this host"},
    {"top", cmd_top, "the stats overlay of a provider, full screen"},
    {"bench", cmd_bench,
     "run a benchmark (wire, bus, provider, clock, msgprof, trace)"},
    {"trace", cmd_trace, "summarise a recorded trace (trace summary STORE)"},
    {"snap", cmd_snap, "write a provider's named buffer as a PNG"},
    {"serve", cmd_serve,
     "carry this host's bus to other machines (TCP, "
     "WebSocket)"},
};

int cli_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_parse_ms(const char *cmd, const char *opt, const char *arg, int max,
                 int *out) {
  char *end;
  long v = arg ? strtol(arg, &end, 10) : -1;
  if (!arg || !*arg || *end || v < 0 || v > max) {
    fprintf(stderr, "spyglass %s: %s wants a number of milliseconds 0..%d\n",
            cmd, opt, max);
    return -1;
  }
  *out = (int)v;
  return 0;
}

void cli_format_age(char *buf, size_t cap, uint64_t ms) {
  uint64_t s = ms / 1000;
  if (s < 60)
    snprintf(buf, cap, "%llus", (unsigned long long)s);
  else if (s < 3600)
    snprintf(buf, cap, "%llum%02llus", (unsigned long long)(s / 60),
             (unsigned long long)(s % 60));
  else
    snprintf(buf, cap, "%lluh%02llum", (unsigned long long)(s / 3600),
             (unsigned long long)(s / 60 % 60));
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: spyglass <command> [options]\n\n"
          "live devtools telemetry for C programs (version %s)\n\n"
          "commands:\n",
          SPY_VERSION_STRING);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n'spyglass <command> --help' describes one command.\n"
             "exit codes: 0 success, 1 failure, 2 bad usage or input\n");
}

int main(int argc, char **argv) {
#ifdef SPY_HAVE_VPX
  spy_vpx_register(); /* VP9 buffer streams (demo) and their decoding */
#endif
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
