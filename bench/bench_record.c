/* bench_record.c — `spyglass bench record`: a provider thread at up to
 * 1000 frames/s with 20 values and 200 zones a frame, recorded into a
 * SQLite file by the recorder in the same process, zones packed (the
 * default) and as rows, alternating (rows, packed, rows, packed: the
 * machine is shared); against each, a plain SQLite loop inserting the
 * same number of rows (a zone counts as a row however it is stored;
 * prepared statement, 16384 rows a transaction) in the same run. Reports
 * rows per CPU second of each (the recorder's CPU is its receiving and
 * writer threads' and its close), loss, bytes on disk per zone (the
 * file, and the zones' own tables from dbstat), and the Perfetto
 * export's throughput and peak RSS at 1 M and 10 M zones (2 M quick). */
#define SPY_ENABLE 1
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench.h"
#include "record/zblock.h"
#include "spyglass/provider.h"
#include "spyglass/record.h"
#include "spyglass/zones.h"

typedef struct prov_arg {
  const char *dir;
  double seconds;
  _Atomic int ready, done;
  uint64_t frames, zones;
  uint64_t pre;         /* frames made while waiting for the recorder */
  uint64_t pre_watched; /* of those, the ones numbered: a frame whose
                           begin nobody watched gets no number, so the
                           measured frames start at this number */
  double cpu_s;         /* this thread's CPU */
} prov_arg;

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *prov_main(void *v) {
  prov_arg *a = v;
  spy_provider_desc d = {.name = "bench-record", .dir = a->dir};
  spy_provider *p;
  if (spy_provider_create(&p, &d) < 0) {
    a->done = 1;
    return NULL;
  }
  static spy_zone_loc frame_loc = {"frame", "prov_main", "bench_record.c",
                                   1,       0,           0};
  static spy_zone_loc item_loc = {"item", "prov_main", "bench_record.c",
                                  2,      0,           0};
  char names[20][16];
  for (int i = 0; i < 20; i++)
    snprintf(names[i], sizeof names[i], "bench.v%02d", i);
  a->ready = 1;
  /* wait for the recorder to subscribe (zones on), at most 10 s */
  uint64_t t0 = bench_now_ns();
  while (spy__zone_epoch(p) == 0 && bench_now_ns() - t0 < 10000000000ull) {
    spy_frame_begin(p);
    a->pre_watched += spy__watched(p) != 0;
    spy_frame_end(p);
    a->pre++;
    usleep(1000);
  }
  double cpu0 = thread_cpu_s();
  uint64_t start = bench_now_ns(), next = start;
  while (bench_now_ns() - start < (uint64_t)(a->seconds * 1e9)) {
    spy_frame_begin(p);
    spy_zone_begin(p, &frame_loc);
    for (int i = 0; i < 199; i++) {
      spy_zone_begin(p, &item_loc);
      spy_zone_end(p);
    }
    spy_zone_end(p);
    for (int i = 0; i < 20; i++)
      spy_value_set_f64(p, names[i], (double)a->frames + i);
    spy_frame_end(p);
    a->frames++;
    a->zones += 200;
    next += 1000000; /* 1000 frames/s at most */
    uint64_t now = bench_now_ns();
    if (next > now)
      usleep((useconds_t)((next - now) / 1000));
    else
      next = now;
  }
  a->cpu_s = thread_cpu_s() - cpu0;
  /* The samples of the frames since the last periodic flush leave with
   * the next frame's flush; a program that stops making frames must
   * flush them itself (the 1000 fps "frame gap" was this tail: the last
   * flush interval's frames, never sent, not lost anywhere). */
  for (int i = 0; i < 200 && spy_provider_flush(p) == SPY_EPOOLEMPTY; i++)
    usleep(1000); /* a dropped flush keeps the samples: try again */
  usleep(600000);
  spy_provider_destroy(p);
  a->done = 1;
  return NULL;
}

/* The plain loop: n slice rows, 16384 a transaction. Returns CPU s. */
static double baseline(const char *path, uint64_t n, double *wall_s) {
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return NAN;
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
               "CREATE TABLE slice_data(id INTEGER PRIMARY KEY,"
               " recording_id BIGINT, ts BIGINT, dur BIGINT, track_id BIGINT,"
               " name_id BIGINT, depth BIGINT, parent_id BIGINT,"
               " flags BIGINT)",
               NULL, NULL, NULL);
  sqlite3_stmt *st;
  sqlite3_prepare_v2(
      db, "INSERT INTO slice_data VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)", -1, &st,
      NULL);
  double c0 = process_cpu_s();
  uint64_t w0 = bench_now_ns();
  for (uint64_t i = 0; i < n; i++) {
    if (i % 16384 == 0)
      sqlite3_exec(db, i ? "COMMIT; BEGIN" : "BEGIN", NULL, NULL, NULL);
    sqlite3_bind_int64(st, 1, (int64_t)i + 1);
    sqlite3_bind_int64(st, 2, 1);
    sqlite3_bind_int64(st, 3, 3600000000000 + (int64_t)i * 1000);
    sqlite3_bind_int64(st, 4, 400);
    sqlite3_bind_int64(st, 5, 3);
    sqlite3_bind_int64(st, 6, 17);
    sqlite3_bind_int64(st, 7, 1);
    sqlite3_bind_int64(st, 8, (int64_t)(i - i % 200) + 1);
    sqlite3_bind_int64(st, 9, 0);
    sqlite3_step(st);
    sqlite3_reset(st);
  }
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  double cpu = process_cpu_s() - c0;
  *wall_s = (double)(bench_now_ns() - w0) / 1e9;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return cpu;
}

static int64_t count(const char *path, const char *q) {
  sqlite3 *db;
  sqlite3_stmt *st;
  int64_t n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

/* A recording of n zones made directly (the recorder's schema, one
 * process, one thread, frame > 199 items as the provider above makes):
 * what export reads, at a size the live run cannot reach in seconds. */
static int synth(const char *path, int64_t n, int packed) {
  spy_recorder_desc d = {.db = path,
                         .args = "bench record synth",
                         .zones = packed ? SPY_RECORD_ZONES_PACKED
                                         : SPY_RECORD_ZONES_ROWS};
  spy_recorder *r;
  if (spy_recorder_create(&r, &d) < 0)
    return -1;
  spy_recorder_destroy(r); /* schema, recording row, indexes */
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK)
    return -1;
  int rc = sqlite3_exec(
      db,
      "PRAGMA synchronous=OFF; BEGIN;"
      "INSERT INTO process(recording_id, upid, pid, name, start_ts) "
      "VALUES(1, 1, 4242, 'synth', 0);"
      "INSERT INTO thread(recording_id, utid, upid, tid, thread_no, name) "
      "VALUES(1, 2, 1, 4242, 0, 'main');"
      "INSERT INTO track(recording_id, id, name, type, upid, utid) "
      "VALUES(1, 3, 'main', 'thread', 1, 2);"
      "INSERT INTO zone_loc(recording_id, id, upid, loc_id, name) "
      "VALUES(1, 4, 1, 16, 'frame'), (1, 5, 1, 17, 'item');",
      NULL, NULL, NULL);
  sqlite3_stmt *st = NULL;
  if (rc == SQLITE_OK && packed)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO zone_block(recording_id, track_id, "
                            "ts0, ts1, id0, id1, n, data) "
                            "VALUES(1, 3, ?1, ?2, ?5, ?6, ?3, ?4)",
                            -1, &st, NULL);
  else if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO slice_data(id, recording_id, ts, "
                            "dur, track_id, name_id, depth, parent_id, flags) "
                            "VALUES(?1, 1, ?2, ?3, 3, ?4, ?5, ?6, 0)",
                            -1, &st, NULL);
  int64_t t0 = 0, parent = 0; /* the recording's start: export counts from it */
  sqlite3_stmt *q0;
  if (sqlite3_prepare_v2(db, "SELECT started_ns FROM recording", -1, &q0,
                         NULL) == SQLITE_OK) {
    if (sqlite3_step(q0) == SQLITE_ROW)
      t0 = sqlite3_column_int64(q0, 0) + 1000;
    sqlite3_finalize(q0);
  }
  spy_zb_zone *blk = packed ? malloc(8192 * sizeof *blk) : NULL;
  uint32_t nb = 0;
  if (packed && !blk)
    rc = SQLITE_NOMEM;
  for (int64_t i = 0; rc == SQLITE_OK && i < n; i++) {
    int top = i % 200 == 0;
    int64_t id = 10 + i;
    if (top)
      parent = id;
    if (packed) { /* as the recorder packs them: 8192 a block */
      blk[nb++] = (spy_zb_zone){id,
                                t0 + i * 1000 + (top ? 0 : 100),
                                top ? 200000 : 400 + i % 7,
                                top ? 4 : 5,
                                top ? 0 : parent,
                                top ? 0 : 1,
                                0};
      if (nb == 8192 || i == n - 1) {
        uint8_t *b;
        size_t len;
        if (spy__zb_encode(blk, nb, 0, &b, &len) < 0) {
          rc = SQLITE_NOMEM;
          break;
        }
        sqlite3_bind_int64(st, 1, blk[0].ts);
        sqlite3_bind_int64(st, 2, blk[nb - 1].ts);
        sqlite3_bind_int64(st, 3, nb);
        sqlite3_bind_blob(st, 4, b, (int)len, free);
        sqlite3_bind_int64(st, 5, blk[0].id);
        sqlite3_bind_int64(st, 6, blk[nb - 1].id);
        if (sqlite3_step(st) != SQLITE_DONE)
          rc = SQLITE_ERROR;
        sqlite3_reset(st);
        nb = 0;
      }
      continue;
    }
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, t0 + i * 1000 + (top ? 0 : 100));
    sqlite3_bind_int64(st, 3, top ? 200000 : 400);
    sqlite3_bind_int64(st, 4, top ? 4 : 5);
    sqlite3_bind_int64(st, 5, top ? 0 : 1);
    if (top)
      sqlite3_bind_null(st, 6);
    else
      sqlite3_bind_int64(st, 6, parent);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = SQLITE_ERROR;
    sqlite3_reset(st);
    if (i % 1000000 == 999999 && rc == SQLITE_OK)
      rc = sqlite3_exec(db, "COMMIT; BEGIN", NULL, NULL, NULL);
  }
  free(blk);
  sqlite3_finalize(st);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

/* The peak RSS (VmHWM, KiB) of a running process; 0 once it is gone. */
static long hwm_kb(pid_t pid) {
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
  FILE *f = fopen(p, "r");
  long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0)
      kb = atol(line + 6);
  if (f)
    fclose(f);
  return kb;
}

/* `spyglass export` of db run as its own process: wall seconds, output
 * bytes, and the process's peak RSS (KiB). Not wait4's ru_maxrss: Linux
 * carries the parent's high-water mark into a child across exec, so it
 * said 47 MB (this bench's own RSS) whatever the export did; VmHWM of the
 * exec'ed image is polled every 2 ms instead (monotonic, so the last
 * reading misses at most the final 2 ms). */
static int export_child(const char *db, const char *out, double *wall_s,
                        long *bytes, long *rss_kib) {
  char exe[4096];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0)
    return -1;
  exe[k] = 0;
  char *argv[] = {exe,        "export", (char *)db,  "-f",
                  "perfetto", "-o",     (char *)out, NULL};
  extern char **environ;
  pid_t pid;
  uint64_t w0 = bench_now_ns();
  if (posix_spawn(&pid, exe, NULL, NULL, argv, environ) != 0)
    return -1;
  int status;
  long peak = 0;
  for (;;) {
    long kb = hwm_kb(pid);
    peak = kb > peak ? kb : peak;
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0)
      return -1;
    usleep(2000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return -1;
  *wall_s = (double)(bench_now_ns() - w0) / 1e9;
  struct stat sb;
  *bytes = stat(out, &sb) == 0 ? (long)sb.st_size : 0;
  *rss_kib = peak;
  return 0;
}

static long file_bytes(const char *p) {
  struct stat s;
  return stat(p, &s) == 0 ? (long)s.st_size : 0;
}

/* Bytes of the zones' own tables and indexes (dbstat; NAN without it). */
static double zone_bytes(const char *path) {
  sqlite3 *db;
  sqlite3_stmt *st;
  double b = NAN;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT sum(pgsize) FROM dbstat WHERE name IN "
                         "('slice_data', 'slice_track_ts', 'zone_block', "
                         "'zone_block_track')",
                         -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      b = sqlite3_column_double(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return b;
}

typedef struct live {
  double rps, bps, ratio;   /* rows per CPU s: recorder, plain loop */
  double zones_made, zones; /* made by the provider / recorded */
  double frames_made, frames, samples_lost, rows_lost;
  double file_bpz, zone_bpz; /* bytes per zone: file, zone tables */
  double export_mbs, export_rss_mb;
  int ok;
} live;

/* One live recording of the bench provider into dir/run<k>.db. */
static void live_run(const char *dir, int k, int zones, double seconds,
                     int do_export, live *L) {
  char db[300], base[300], out[300];
  snprintf(db, sizeof db, "%s/run%d.db", dir, k);
  snprintf(base, sizeof base, "%s/base%d.db", dir, k);
  snprintf(out, sizeof out, "%s/run%d.pftrace", dir, k);
  char pdir[300];
  snprintf(pdir, sizeof pdir, "%s/bus%d", dir, k);
  mkdir(pdir, 0700);
  memset(L, 0, sizeof *L);
  prov_arg a = {.dir = pdir, .seconds = seconds};
  spy_recorder_desc d = {
      .db = db, .dir = pdir, .args = "bench record", .zones = zones};
  spy_recorder *r;
  if (spy_recorder_create(&r, &d) < 0)
    return;
  pthread_t th;
  pthread_create(&th, NULL, prov_main, &a);
  spy_recorder_add(r, "bench-record");
  while (!a.done)
    usleep(20000);
  pthread_join(th, NULL);
  usleep(300000);
  spy_recorder_stats rs;
  spy_recorder_get_stats(r, &rs);
  double d0 = process_cpu_s();
  spy_recorder_destroy(r); /* the last batch, indexes, WAL checkpoint */
  double close_cpu = process_cpu_s() - d0;
  double rec_cpu = rs.cpu_s + close_cpu;
  /* a zone is a row however it is stored */
  int64_t rows = (int64_t)(rs.rows - rs.blocks + rs.zones);
  char fq[128];
  snprintf(fq, sizeof fq, "SELECT count(*) FROM frame WHERE frame >= %llu",
           (unsigned long long)a.pre_watched);
  L->frames = (double)count(db, fq); /* the measured frames */
  L->samples_lost = (double)count(db, "SELECT coalesce(sum(count), 0) FROM "
                                      "loss WHERE what = 'samples'");
  L->frames_made = (double)a.frames;
  L->zones_made = (double)a.zones;
  L->zones = (double)rs.zones;
  L->rows_lost = (double)rs.rows_lost;
  long bytes = file_bytes(db);
  L->file_bpz = rs.zones ? (double)bytes / (double)rs.zones : NAN;
  L->zone_bpz = rs.zones ? zone_bytes(db) / (double)rs.zones : NAN;
  double bwall = NAN;
  double bcpu = baseline(base, (uint64_t)rows, &bwall);
  L->rps = rows / (rec_cpu > 0 ? rec_cpu : NAN);
  L->bps = rows / (bcpu > 0 ? bcpu : NAN);
  L->ratio = L->rps / L->bps;
  L->export_mbs = L->export_rss_mb = NAN;
  if (do_export) {
    double ew;
    long eb, erss;
    if (export_child(db, out, &ew, &eb, &erss) == 0) {
      L->export_mbs = eb / 1e6 / ew;
      L->export_rss_mb = (double)erss / 1024.0;
    }
  }
  L->ok = 1;
  if (!getenv("SPY_BENCH_KEEP"))
    remove(db), remove(base), remove(out);
}

int bench_record(int argc, char **argv) {
  bench_opts o;
  if (bench_parse(argc, argv, &o,
                  "usage: spyglass bench record [--json] "
                  "[--quick]\n") != 0)
    return 2;
  char dir[256];
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  double secs = o.quick ? 1.5 : 5;
  /* rows, packed, rows, packed (quick: one each) */
  int nrun = o.quick ? 2 : 4;
  live L[4];
  for (int k = 0; k < nrun; k++)
    live_run(dir, k, k % 2 ? SPY_RECORD_ZONES_PACKED : SPY_RECORD_ZONES_ROWS,
             secs, k >= nrun - 2, &L[k]);
  bench_table t = {.title = "spyglass bench record (SQLite)",
                   .cols = {"figure", "rows", "packed", "plain loop", "ratio"},
                   .ncols = 5};
  for (int k = 0; k < nrun; k += 2) {
    live *R = &L[k], *P = &L[k + 1];
    char label[96];
    snprintf(label, sizeof label, "rows per CPU second (round %d)", k / 2 + 1);
    /* the plain loop column: the packed run's own baseline (each run has
     * its own; the rows run's ratio is in the note) */
    bench_row(&t, label, (double[]){R->rps, P->rps, P->bps, P->ratio});
    snprintf(label, sizeof label, "  ratio of rows run to its plain loop");
    bench_row(&t, label, (double[]){R->ratio, NAN, R->bps, NAN});
  }
  live *R = &L[nrun - 2], *P = &L[nrun - 1];
  bench_row(&t, "zones recorded / made",
            (double[]){R->zones / R->zones_made, P->zones / P->zones_made, NAN,
                       P->zones_made});
  bench_row(&t, "frames recorded / made",
            (double[]){R->frames / R->frames_made, P->frames / P->frames_made,
                       NAN, P->frames_made});
  bench_row(&t, "loss: rows (queue) / samples",
            (double[]){R->rows_lost, P->rows_lost, NAN, P->samples_lost});
  bench_row(&t, "bytes on disk per zone: zone tables",
            (double[]){R->zone_bpz, P->zone_bpz, NAN, NAN});
  bench_row(&t, "bytes on disk per zone: whole file",
            (double[]){R->file_bpz, P->file_bpz, NAN, NAN});
  bench_row(&t, "export perfetto MB/s (live run)",
            (double[]){R->export_mbs, P->export_mbs, NAN, NAN});
  bench_row(&t, "export peak RSS MB (live run)",
            (double[]){R->export_rss_mb, P->export_rss_mb, NAN, NAN});
  /* export at two sizes, each as its own process: bounded means the
   * peak RSS does not grow with the zones */
  int64_t sizes[2] = {1000000, o.quick ? 2000000 : 10000000};
  for (int i = 0; i < 2; i++) {
    double mbs[2] = {NAN, NAN}, rss[2] = {NAN, NAN};
    for (int packed = 0; packed < 2; packed++) {
      if (!packed && sizes[i] > 2000000)
        continue; /* 10 M rows take minutes to insert: packed only */
      char sdb[320], sout[320];
      snprintf(sdb, sizeof sdb, "%s/synth%d%d.db", dir, i, packed);
      snprintf(sout, sizeof sout, "%s/synth%d%d.pftrace", dir, i, packed);
      double sw = NAN;
      long sb = 0, srss = 0;
      if (synth(sdb, sizes[i], packed) == 0 &&
          export_child(sdb, sout, &sw, &sb, &srss) == 0) {
        mbs[packed] = sb / 1e6 / sw;
        rss[packed] = (double)srss / 1024.0;
      }
      if (getenv("SPY_BENCH_KEEP"))
        fprintf(stderr, "kept %s %s (%ld bytes)\n", sdb, sout, sb);
      else
        remove(sdb), remove(sout);
    }
    char label[64];
    snprintf(label, sizeof label, "export %lldM zones: MB/s",
             (long long)(sizes[i] / 1000000));
    bench_row(&t, label, (double[]){mbs[0], mbs[1], NAN, NAN});
    snprintf(label, sizeof label, "export %lldM zones: peak RSS MB",
             (long long)(sizes[i] / 1000000));
    bench_row(&t, label, (double[]){rss[0], rss[1], NAN, NAN});
  }
  t.notes[t.nnotes++] =
      "rows / packed: the recorder with --zones rows (a slice_data row per "
      "zone) and with packed zones (zone_block, the SQLite default), run "
      "alternately; a zone counts as one row in both";
  t.notes[t.nnotes++] =
      "plain loop: the same number of rows, laid out as the recorder's "
      "slice_data (integers, rowid id), prepared insert, 16384 rows a "
      "transaction, no index, timed right after each run; ratio = "
      "recorder / plain loop";
  t.notes[t.nnotes++] =
      "recorder CPU = its receiving + writer threads' CPU and its close "
      "(last batch, index build, checkpoint)";
  t.notes[t.nnotes++] =
      "bytes per zone: zone tables = slice_data + slice_track_ts + "
      "zone_block + its index (dbstat) over zones recorded; whole file also "
      "holds the 20 values a frame as value and counter rows";
  t.notes[t.nnotes++] =
      "frames: the measured ones (numbered after the watched frames made "
      "while the recorder subscribed: an unwatched frame has no number); "
      "the provider flushes after its last frame, again while the pool is "
      "empty";
  t.notes[t.nnotes++] =
      "export NM zones: a synthetic recording (one thread, frame > 199 "
      "items) exported to Perfetto by `spyglass export` as its own process; "
      "peak RSS of that process (VmHWM, polled)";
  bench_print(&t, &o);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!getenv("SPY_BENCH_KEEP") && system(cmd) != 0)
    fprintf(stderr, "bench record: could not remove %s\n", dir);
  return 0;
}
