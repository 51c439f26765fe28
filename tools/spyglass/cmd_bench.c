/* cmd_bench.c — `spyglass bench <name>`: runs one benchmark. Each prints a
 * table (or --json) of medians next to a baseline from the same run. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} benches[] = {
    {"wire", bench_wire, "frame encode/decode of a stats flush vs memcpy"},
    {"bus", bench_bus, "channel post cost, throughput, latency vs baselines"},
    {"provider", bench_provider,
     "cost of one instrumented frame vs two clock reads"},
    {"clock", bench_clock, "clock sync error and RTT, threads and processes"},
    {"msgprof", bench_msgprof,
     "message profiler: post with its hook set vs clear"},
    {"trace", bench_trace,
     "demo build untraced vs each trace writer vs the naive baseline"},
    {"zones", bench_zones,
     "one CPU zone: unsubscribed, streaming live vs two clock reads"},
    {"buffers", bench_buffers,
     "buffer submit vs memcpy, conversion MB/s, VP9 fps and bytes"},
    {"serve", bench_serve,
     "bridge latency, throughput, CPU per MB, RSS with a stalled client"},
    {"dashboard", bench_dashboard,
     "the browser dashboard in headless Chromium: busy %, JS vs C decode"},
};

static void help(FILE *f) {
  fprintf(f,
          "usage: spyglass bench <name> [--json] [--quick]\n\nbenchmarks:\n");
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    fprintf(f, "  %-10s %s\n", benches[i].name, benches[i].summary);
}

int cmd_bench(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    help(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : EXIT_OK;
  }
  for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
    if (strcmp(argv[1], benches[i].name) == 0)
      return benches[i].run(argc - 1, argv + 1);
  fprintf(stderr, "spyglass bench: unknown benchmark '%s'\n", argv[1]);
  help(stderr);
  return EXIT_USAGE;
}
