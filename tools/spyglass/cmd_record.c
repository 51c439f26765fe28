/* cmd_record.c — `spyglass record`: records one provider (or every
 * provider on the host or behind a bridge, --all) into a SQLite file or a
 * PostgreSQL database until the time is up or SIGINT / SIGTERM; a
 * progress line on a terminal. The engine is src/record (record.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "remote.h"
#include "spyglass/net.h"
#include "spyglass/record.h"
#include "spyglass/wire.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void help(FILE *f) {
  fprintf(
      f,
      "usage: spyglass record [ID|NAME|--all] [-o FILE.db | --db URI]\n"
      "                       [-s SECONDS] [--features LIST] [--dir DIR]\n"
      "                       [--connect HOST:PORT [--token-file F]]\n"
      "                       [--buffers NAME[,NAME…]|all [--buffer-mode M]\n"
      "                        [--long-edge N] [--buffers-dir DIR]]\n\n"
      "Records what a provider sends into a SQLite file (-o, a new file)\n"
      "or a PostgreSQL database (--db postgres://…, a `recording` row per\n"
      "run, many recorders may share it): per-frame stats (frame), counters\n"
      "and numeric values (counter on a track), every value change (value),\n"
      "health, the message profile (msgprof), CPU zones as slices with\n"
      "depth and parent (slice, zone_loc), threads and processes, each\n"
      "traced build a provider publishes (build, build_hook: per plugin\n"
      "and hook calls and time, hook_call: its slowest calls), and the\n"
      "images of the buffers asked for (chunk; the files beside it); loss\n"
      "is counted (loss). Query it with plain SQL, e.g.\n"
      "  sqlite3 run.db 'SELECT name, count(*), avg(dur) FROM slice GROUP BY "
      "1'\n\n"
      "  ID|NAME          the provider (16-hex id or name; default: the\n"
      "                   first found)\n"
      "  --all            every provider on the host (with --connect: that\n"
      "                   the bridge exposes), and new ones as they appear,\n"
      "                   into one recording (one process each)\n"
      "  -o, --output F   SQLite file to create (default run.db)\n"
      "  --db URI         PostgreSQL: postgres://user@host:port/db or a\n"
      "                   libpq conninfo (\"host=… dbname=…\")\n"
      "  -s, --seconds N  stop after N seconds (default: until Ctrl-C)\n"
      "  --features LIST  comma list of stats,env,registry,buffers,health,\n"
      "                   msgprof,zones,trace (default: all but buffers)\n"
      "  --dir DIR        bus runtime directory\n"
      "  --connect H:P    a provider of another host, through its bridge\n"
      "                   (`spyglass serve`; default $SPYGLASS_CONNECT)\n"
      "  --token-file F   the bridge's token (default $SPYGLASS_TOKEN)\n"
      "  --buffers LIST   also record these buffers' images (names, comma\n"
      "                   separated, or all: every buffer the provider\n"
      "                   declares); adds the buffers feature\n"
      "  --buffer-mode M  stream (default): the VP9 stream, appended to one\n"
      "                   IVF file per buffer and size (vpxdec, ffprobe and\n"
      "                   players open it); raw: full-size RGBA8 images,\n"
      "                   one PNG each; thumb: the same at --long-edge px\n"
      "  --long-edge N    thumb: the longer side in px (default 256)\n"
      "  --buffers-dir D  where the files go (default FILE.db.buffers beside\n"
      "                   the SQLite file; recording-ID.buffers here for\n"
      "                   PostgreSQL); chunk.path names each file and\n"
      "                   file_offset / len the chunk's bytes in it\n\n"
      "SIGINT / SIGTERM stop cleanly, everything committed. Rows are written\n"
      "by a writer thread in batches (<= 100 ms): a killed recorder loses at\n"
      "most the batch in progress. A provider that exits ends its tracks;\n"
      "the recording goes on.\n\n"
      "exit codes: 0 recorded, 1 database or bus failure, 2 bad usage\n");
}

static int parse_features(const char *list, uint32_t *out) {
  static const struct {
    const char *n;
    uint32_t f;
  } names[] = {{"stats", SPY_FEAT_STATS},       {"env", SPY_FEAT_ENV},
               {"registry", SPY_FEAT_REGISTRY}, {"buffers", SPY_FEAT_BUFFERS},
               {"health", SPY_FEAT_HEALTH},     {"msgprof", SPY_FEAT_MSGPROF},
               {"zones", SPY_FEAT_ZONES},       {"trace", SPY_FEAT_TRACE}};
  *out = 0;
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    int found = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
      if (strlen(names[i].n) == n && strncmp(p, names[i].n, n) == 0) {
        *out |= names[i].f;
        found = 1;
      }
    if (!found) {
      fprintf(stderr,
              "spyglass record: --features: unknown feature '%.*s' (stats, "
              "env, registry, buffers, health, msgprof, zones, trace)\n",
              (int)n, p);
      return -1;
    }
    p += n;
    if (*p == ',')
      p++;
  }
  return *out ? 0 : -1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cmd_record(int argc, char **argv) {
  int all = 0;
  const char *out = NULL, *out_short = NULL, *db = NULL, *features = NULL,
             *dir = NULL;
  tool_remote rem;
  memset(&rem, 0, sizeof rem);
  double seconds = 0, seconds_short = 0;
  const char *buffers = NULL, *buffer_mode = NULL, *buffers_dir = NULL;
  int long_edge = 0;
  const cli_opt opts[] = {
      {"--all", CLI_FLAG, &all, 0, 0, 0, NULL},
      {"--output", CLI_STR, &out, 0, 0, 0, "a file name"},
      {"-o", CLI_STR, &out_short, 0, 0, 0, "a file name"},
      {"--db", CLI_STR, &db, 0, 0, 0, "a PostgreSQL URI"},
      {"--seconds", CLI_DOUBLE, &seconds, 0.01, 1e7, 0, "a number of seconds"},
      {"-s", CLI_DOUBLE, &seconds_short, 0.01, 1e7, 0, "a number of seconds"},
      {"--features", CLI_STR, &features, 0, 0, 0, "a feature list"},
      {"--dir", CLI_STR, &dir, 0, 0, 0, "a directory"},
      {"--connect", CLI_STR, &rem.connect, 0, 0, 0, "HOST:PORT"},
      {"--token-file", CLI_STR, &rem.token_file, 0, 0, 0, "a file"},
      {"--buffers", CLI_STR, &buffers, 0, 0, 0, "buffer names or all"},
      {"--buffer-mode", CLI_STR, &buffer_mode, 0, 0, 0, "stream, raw or thumb"},
      {"--long-edge", CLI_INT, &long_edge, 1, 16384, 0, "a number of pixels"},
      {"--buffers-dir", CLI_STR, &buffers_dir, 0, 0, 0, "a directory"},
  };
  const char *pos[1] = {NULL};
  int npos = 0;
  int rc = cli_parse("record", argc, argv, opts, sizeof opts / sizeof opts[0],
                     pos, 1, &npos, help);
  if (rc)
    return rc == 1 ? EXIT_OK : EXIT_USAGE;
  if (out_short)
    out = out_short;
  if (seconds_short > 0)
    seconds = seconds_short;
  if (all && npos) {
    fprintf(stderr, "spyglass record: give a provider or --all, not both\n");
    return EXIT_USAGE;
  }
  if (out && db) {
    fprintf(stderr, "spyglass record: give -o FILE or --db URI, not both\n");
    return EXIT_USAGE;
  }
  if (remote_resolve("record", &rem) < 0)
    return EXIT_USAGE;
  spy_recorder_desc d = {0};
  if (buffer_mode) {
    d.buffer_mode =
        strcmp(buffer_mode, "stream") == 0  ? SPY_RECORD_BUFFERS_STREAM
        : strcmp(buffer_mode, "raw") == 0   ? SPY_RECORD_BUFFERS_RAW
        : strcmp(buffer_mode, "thumb") == 0 ? SPY_RECORD_BUFFERS_THUMB
                                            : -1;
    if (d.buffer_mode < 0) {
      fprintf(stderr,
              "spyglass record: --buffer-mode wants stream, raw or thumb, "
              "not '%s'\n",
              buffer_mode);
      return EXIT_USAGE;
    }
  }
  if (!buffers && (buffer_mode || long_edge || buffers_dir)) {
    fprintf(stderr, "spyglass record: --buffer-mode, --long-edge and "
                    "--buffers-dir go with --buffers\n");
    return EXIT_USAGE;
  }
  if (long_edge && d.buffer_mode != SPY_RECORD_BUFFERS_THUMB) {
    fprintf(stderr, "spyglass record: --long-edge is for --buffer-mode "
                    "thumb\n");
    return EXIT_USAGE;
  }
  d.buffers = buffers;
  d.buffer_long_edge = (uint32_t)long_edge;
  d.buffers_dir = buffers_dir;
  if (features && parse_features(features, &d.features) < 0)
    return EXIT_USAGE;
  d.db = db ? db : out ? out : "run.db";
  d.pg = db != NULL;
  d.dir = dir;
  d.all = all;
  if (rem.connect) {
    d.connect = rem.connect;
    d.token = remote_token(&rem);
    d.remote = spy_net_channel_ops();
  }
  char args[1024];
  size_t o = 0;
  args[0] = 0;
  /* the command line goes into the recording row, without the database
   * address (it may hold a password) */
  for (int i = 0; i < argc && o < sizeof args - 1; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--db=", 5) == 0)
      a = "--db=(address)";
    else if (i > 0 && strcmp(argv[i - 1], "--db") == 0)
      a = "(address)";
    o += (size_t)snprintf(args + o, sizeof args - o, "%s%s", i ? " " : "", a);
  }
  d.args = args;
  spy_recorder *r;
  rc = spy_recorder_create(&r, &d);
  if (rc < 0) {
    if (rc == SPY_EINVAL || rc == SPY_EEXIST)
      return EXIT_USAGE;
    return EXIT_FAIL;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (!all && (rc = spy_recorder_add(r, npos ? pos[0] : NULL)) < 0) {
    spy_recorder_destroy(r);
    if (rem.connect)
      return remote_fail("record", &rem, rc);
    fprintf(stderr, "spyglass record: cannot open the bus: %s\n",
            spy_strerror(rc));
    return EXIT_FAIL;
  }
  /* --all --connect: the bridge must answer at the start (as with one
   * provider); later it is tried again while it is away */
  if (all && rem.connect && (rc = spy_recorder_step(r, 0)) < 0) {
    spy_recorder_destroy(r);
    return remote_fail("record", &rem, rc);
  }
  int tty = isatty(STDERR_FILENO);
  double start = now_s(), next_line = start;
  while (!stop_requested && (seconds <= 0 || now_s() - start < seconds)) {
    rc = spy_recorder_step(r, 100);
    if (rc < 0 && rem.connect)
      fprintf(stderr,
              "%sspyglass record: the bridge %s: %s (trying again every "
              "2 s)\n",
              tty ? "\n" : "", rem.connect, spy_strerror(rc));
    if (tty && now_s() >= next_line) {
      spy_recorder_stats st;
      spy_recorder_get_stats(r, &st);
      fprintf(stderr,
              "\r%7.1fs  %u/%u providers  frames %llu  rows %llu  %.1f MB  "
              "lost %llu ",
              now_s() - start, st.connected, st.sources,
              (unsigned long long)st.frames, (unsigned long long)st.rows,
              (double)st.bytes / 1e6,
              (unsigned long long)(st.rows_lost + st.samples_lost +
                                   st.frames_lost));
      next_line = now_s() + 0.5;
    }
  }
  spy_recorder_stats st;
  spy_recorder_get_stats(r, &st);
  rc = spy_recorder_destroy(r);
  spy_recorder_stats fin = st;
  char chunks[96] = "";
  if (buffers)
    snprintf(chunks, sizeof chunks,
             ", %llu buffer chunks (%.1f MB; %llu not "
             "recorded)",
             (unsigned long long)fin.chunks, (double)fin.chunk_bytes / 1e6,
             (unsigned long long)fin.chunks_lost);
  fprintf(stderr,
          "%sspyglass record: %s: recording %lld, %llu frames, %llu rows "
          "before close%s, lost: %llu rows, %llu samples, %llu bus "
          "frames%s\n",
          tty ? "\n" : "", d.db == out || !db ? d.db : "postgres",
          (long long)fin.recording_id, (unsigned long long)fin.frames,
          (unsigned long long)fin.rows, chunks,
          (unsigned long long)fin.rows_lost,
          (unsigned long long)fin.samples_lost,
          (unsigned long long)fin.frames_lost, rc ? " (database errors)" : "");
  return rc ? EXIT_FAIL : EXIT_OK;
}
