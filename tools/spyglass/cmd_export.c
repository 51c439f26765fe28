/* cmd_export.c — `spyglass export` (a recording as a Perfetto or Chrome
 * trace) and `spyglass diff` (two recordings compared, for CI). The work
 * is in src/record (export.c, diff.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "spyglass/record.h"

static void export_help(FILE *f) {
  fprintf(f,
          "usage: spyglass export RUN.db -f perfetto|chrome -o FILE\n"
          "                       [--from SECONDS] [--to SECONDS]\n"
          "       spyglass export --db postgres://… [--recording N] …\n\n"
          "Writes a recording (`spyglass record`: a SQLite file, or one\n"
          "recording of a PostgreSQL database) as a Perfetto trace\n"
          "(protobuf: open it in ui.perfetto.dev or trace_processor) or as\n"
          "Chrome trace-event JSON (chrome://tracing, Perfetto, speedscope):\n"
          "zones as slices on their threads, one process per provider,\n"
          "counters (stats counters, numeric values, health, frame cpu /\n"
          "gpu / fps). Streams: memory does not grow with the recording.\n\n"
          "  -f, --format F   perfetto or chrome\n"
          "  -o, --output F   the file to write (- for stdout)\n"
          "  --db URI         a PostgreSQL database (instead of RUN.db)\n"
          "  --recording N    its recording N (recording.id; default: the\n"
          "                   newest; a SQLite file's first)\n"
          "  --from S, --to S only what starts between S seconds from the\n"
          "                   recording's start and --to\n"
          "  --zones FORM     the zones' stored form to read: packed or rows\n"
          "                   (default: packed if the recording has blocks;\n"
          "                   `record --zones both` keeps both)\n\n"
          "exit codes: 0 written, 1 write failure, 2 bad usage or not a "
          "recording\n");
}

int cmd_export(int argc, char **argv) {
  const char *fmt = NULL, *fmt_s = NULL, *out = NULL, *out_s = NULL;
  double from = 0, to = -1;
  const char *db = NULL, *zones = NULL;
  uint64_t recording = 0;
  const cli_opt opts[] = {
      {"--db", CLI_STR, &db, 0, 0, 0, "a postgres:// URI"},
      {"--recording", CLI_U64, &recording, 1, 1e15, 0, "a recording id"},
      {"--format", CLI_STR, &fmt, 0, 0, 0, "perfetto or chrome"},
      {"-f", CLI_STR, &fmt_s, 0, 0, 0, "perfetto or chrome"},
      {"--output", CLI_STR, &out, 0, 0, 0, "a file name"},
      {"-o", CLI_STR, &out_s, 0, 0, 0, "a file name"},
      {"--from", CLI_DOUBLE, &from, 0, 1e9, 1, "a number of seconds"},
      {"--to", CLI_DOUBLE, &to, 0, 1e9, 1, "a number of seconds"},
      {"--zones", CLI_STR, &zones, 0, 0, 0, "packed or rows"},
  };
  const char *pos[1] = {NULL};
  int npos = 0;
  int rc = cli_parse("export", argc, argv, opts, sizeof opts / sizeof opts[0],
                     pos, 1, &npos, export_help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  if (fmt_s)
    fmt = fmt_s;
  if (out_s)
    out = out_s;
  if (db && npos) {
    fprintf(stderr, "spyglass export: RUN.db or --db, not both\n");
    return EXIT_USAGE;
  }
  if (db)
    pos[0] = db, npos = 1;
  if (!npos || !fmt || !out) {
    fprintf(stderr, "spyglass export: wants RUN.db (or --db URI), -f FORMAT "
                    "and -o FILE\n");
    return EXIT_USAGE;
  }
  if (strcmp(fmt, "perfetto") && strcmp(fmt, "chrome")) {
    fprintf(stderr, "spyglass export: -f wants perfetto or chrome, not '%s'\n",
            fmt);
    return EXIT_USAGE;
  }
  int zf = !zones                         ? 0
           : strcmp(zones, "rows") == 0   ? SPY_RECORD_ZONES_ROWS
           : strcmp(zones, "packed") == 0 ? SPY_RECORD_ZONES_PACKED
                                          : -1;
  if (zf < 0) {
    fprintf(stderr, "spyglass export: --zones wants packed or rows, not '%s'\n",
            zones);
    return EXIT_USAGE;
  }
  if (to >= 0 && to < from) {
    fprintf(stderr, "spyglass export: --to is before --from\n");
    return EXIT_USAGE;
  }
  FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "wb");
  if (!f) {
    fprintf(stderr, "spyglass export: cannot create %s\n", out);
    return EXIT_FAIL;
  }
  rc =
      spy_record_export_zones(pos[0], (int64_t)recording, fmt, f, from, to, zf);
  if (f != stdout && fclose(f) != 0 && !rc)
    rc = SPY_EIO;
  if (rc && f != stdout)
    remove(out);
  return rc == 0 ? EXIT_OK : rc == SPY_EINVAL ? EXIT_USAGE : EXIT_FAIL;
}

static void diff_help(FILE *f) {
  fprintf(
      f,
      "usage: spyglass diff BASE NEW [--threshold PCT] [--json]\n\n"
      "BASE and NEW: a SQLite recording file or a postgres:// URI, either\n"
      "with #N for recording N (default: the file's first, the database's\n"
      "newest), e.g. 'postgres://host/db#3' 'postgres://host/db#4'.\n\n"
      "Compares two recordings: p50 / p95 / p99 of frame CPU, GPU and frame\n"
      "interval, and per zone the calls and the p50 / p95 of self time\n"
      "(its duration less its children's). Every figure is also taken per\n"
      "second of each run; its spread is the interquartile range of those\n"
      "per-second values. A figure regressed when NEW exceeds BASE by more\n"
      "than the threshold AND the two IQRs do not overlap; a larger\n"
      "change inside the spread is reported as noise, and so is one below\n"
      "the resolution floor (0.02 ms for frames, 1 us for zones). Figures\n"
      "with fewer than 20 samples, and the frame p99s, are shown, not\n"
      "judged. Build traces: per plugin its median hook call, judged the\n"
      "same way after dividing out the run-wide median change of all\n"
      "plugins (a machine slower for everything), with the spread the\n"
      "per-build IQR or the median's resolution (12.5 %%).\n\n"
      "  --threshold PCT  relative change that counts (default 5%%; '5' or\n"
      "                   '5%%')\n"
      "  --json           one JSON object instead of the table\n\n"
      "exit codes: 0 no regression, 1 a figure regressed, 2 bad usage or a\n"
      "            file that is not a recording\n");
}

int cmd_diff(int argc, char **argv) {
  const char *thr_s = NULL;
  int json = 0;
  const cli_opt opts[] = {
      {"--threshold", CLI_STR, &thr_s, 0, 0, 0, "a percentage"},
      {"--json", CLI_FLAG, &json, 0, 0, 0, NULL},
  };
  const char *pos[2] = {NULL, NULL};
  int npos = 0;
  int rc = cli_parse("diff", argc, argv, opts, sizeof opts / sizeof opts[0],
                     pos, 2, &npos, diff_help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  if (npos != 2) {
    fprintf(stderr, "spyglass diff: wants BASE.db and NEW.db\n");
    return EXIT_USAGE;
  }
  double thr = 5;
  if (thr_s) {
    char *end;
    thr = strtod(thr_s, &end);
    if (end == thr_s || (*end && strcmp(end, "%") != 0) || !(thr >= 0) ||
        thr > 1000) {
      fprintf(stderr,
              "spyglass diff: --threshold wants a percentage 0..1000, not "
              "'%s'\n",
              thr_s);
      return EXIT_USAGE;
    }
  }
  rc = spy_record_diff(pos[0], pos[1], thr / 100, json, stdout);
  return rc < 0 ? EXIT_USAGE : rc;
}
