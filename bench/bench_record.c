/* bench_record.c — `spyglass bench record`: a provider thread at up to
 * 1000 frames/s with 20 values and 200 zones a frame, recorded into a
 * SQLite file by the recorder in the same process; against it, a plain
 * SQLite loop inserting the same number of slice rows (prepared statement,
 * 16384 rows a transaction) in the same run. Reports rows per CPU second
 * of each (the recorder's CPU is the process's minus the provider frame
 * thread's), loss, bytes on disk per zone, and the Perfetto export's
 * throughput and the RSS it added. */
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

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0)
      kb = atol(line + 6);
  if (f)
    fclose(f);
  return kb;
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
static int synth(const char *path, int64_t n) {
  spy_recorder_desc d = {.db = path, .args = "bench record synth"};
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
  if (rc == SQLITE_OK)
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
  for (int64_t i = 0; rc == SQLITE_OK && i < n; i++) {
    int top = i % 200 == 0;
    int64_t id = 10 + i;
    if (top)
      parent = id;
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
  sqlite3_finalize(st);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

/* `spyglass export` of db run as its own process: wall seconds, output
 * bytes, and the process's peak RSS (KiB, from wait4). */
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
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return -1;
  *wall_s = (double)(bench_now_ns() - w0) / 1e9;
  struct stat sb;
  *bytes = stat(out, &sb) == 0 ? (long)sb.st_size : 0;
  *rss_kib = ru.ru_maxrss;
  return 0;
}

static long file_bytes(const char *p) {
  struct stat s;
  return stat(p, &s) == 0 ? (long)s.st_size : 0;
}

int bench_record(int argc, char **argv) {
  bench_opts o;
  if (bench_parse(argc, argv, &o,
                  "usage: spyglass bench record [--json] "
                  "[--quick]\n") != 0)
    return 2;
  char dir[256], db[300], base[300], out[300];
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  snprintf(db, sizeof db, "%s/run.db", dir);
  snprintf(base, sizeof base, "%s/base.db", dir);
  snprintf(out, sizeof out, "%s/run.pftrace", dir);
  prov_arg a = {.dir = dir, .seconds = o.quick ? 1.5 : 5};
  spy_recorder_desc d = {.db = db, .dir = dir, .args = "bench record"};
  spy_recorder *r;
  if (spy_recorder_create(&r, &d) < 0)
    return 1;
  pthread_t th;
  pthread_create(&th, NULL, prov_main, &a);
  spy_recorder_add(r, "bench-record");
  double c0 = process_cpu_s();
  uint64_t w0 = bench_now_ns();
  while (!a.done)
    usleep(20000);
  pthread_join(th, NULL);
  usleep(300000);
  spy_recorder_stats rs;
  spy_recorder_get_stats(r, &rs);
  double d0 = process_cpu_s();
  spy_recorder_destroy(r); /* the last batch, indexes, WAL checkpoint */
  double close_cpu = process_cpu_s() - d0;
  double wall = (double)(bench_now_ns() - w0) / 1e9;
  /* the recorder's threads (receiver + writer) and its close; the
   * provider's own threads (frame thread, offload worker) are not it */
  double rec_cpu = rs.cpu_s + close_cpu;
  double all_cpu = d0 - c0 - a.cpu_s + close_cpu;
  int64_t slices = count(db, "SELECT count(*) FROM slice");
  char fq[128];
  snprintf(fq, sizeof fq, "SELECT count(*) FROM frame WHERE frame >= %llu",
           (unsigned long long)a.pre_watched);
  int64_t frames = count(db, fq); /* the measured frames */
  int64_t samples_lost = count(db, "SELECT coalesce(sum(count), 0) FROM loss "
                                   "WHERE what = 'samples'");
  int64_t rows = (int64_t)rs.rows;
  long bytes = file_bytes(db);
  double bwall = NAN;
  double bcpu = baseline(base, (uint64_t)rows, &bwall);
  long base_bytes = file_bytes(base);
  long rss0 = rss_kb();
  FILE *f = fopen(out, "wb");
  uint64_t e0 = bench_now_ns();
  int erc = f ? spy_record_export(db, 0, "perfetto", f, 0, -1) : -1;
  if (f)
    fclose(f);
  double ewall = (double)(bench_now_ns() - e0) / 1e9;
  long ebytes = file_bytes(out);
  long rss1 = rss_kb();

  bench_table t = {.title = "spyglass bench record (SQLite)",
                   .cols = {"figure", "recorder", "plain loop", "ratio"},
                   .ncols = 4};
  double rps = rows / (rec_cpu > 0 ? rec_cpu : NAN);
  double bps = rows / (bcpu > 0 ? bcpu : NAN);
  bench_row(&t, "rows per CPU second", (double[]){rps, bps, rps / bps});
  double aps = rows / (all_cpu > 0 ? all_cpu : NAN);
  bench_row(&t, "rows per CPU s, + provider worker",
            (double[]){aps, bps, aps / bps});
  bench_row(
      &t, "CPU s per MB on disk",
      (double[]){rec_cpu / (bytes / 1e6), bcpu / (base_bytes / 1e6), NAN});
  bench_row(&t, "rows / s (wall)", (double[]){rows / wall, rows / bwall, NAN});
  bench_row(&t, "zones made / recorded",
            (double[]){(double)a.zones, (double)slices,
                       a.zones ? (double)slices / (double)a.zones : NAN});
  bench_row(&t, "frames made / recorded / loss rows",
            (double[]){(double)a.frames, (double)frames, (double)samples_lost});
  bench_row(&t, "rows lost (queue full)",
            (double[]){(double)rs.rows_lost, NAN, NAN});
  bench_row(&t, "samples lost (provider ring)",
            (double[]){(double)rs.samples_lost, NAN, NAN});
  bench_row(&t, "bytes on disk per zone",
            (double[]){slices > 0 ? (double)bytes / (double)slices : NAN,
                       rows > 0 ? (double)base_bytes / (double)rows : NAN,
                       NAN});
  bench_row(&t, "export perfetto MB/s",
            (double[]){erc == 0 ? ebytes / 1e6 / ewall : NAN, NAN, NAN});
  bench_row(&t, "export peak RSS added MB",
            (double[]){(double)(rss1 - rss0) / 1024.0, NAN, NAN});
  /* export at two sizes, each as its own process: bounded means the
   * peak RSS does not grow with the zones */
  int64_t sizes[2] = {1000000, o.quick ? 2000000 : 10000000};
  for (int i = 0; i < 2; i++) {
    char sdb[320], sout[320], label[64];
    snprintf(sdb, sizeof sdb, "%s/synth%d.db", dir, i);
    snprintf(sout, sizeof sout, "%s/synth%d.pftrace", dir, i);
    double sw = NAN;
    long sb = 0, srss = 0;
    int ok = synth(sdb, sizes[i]) == 0 &&
             export_child(sdb, sout, &sw, &sb, &srss) == 0;
    snprintf(label, sizeof label, "export %lldM zones: MB/s, peak RSS MB",
             (long long)(sizes[i] / 1000000));
    bench_row(&t, label,
              (double[]){ok ? sb / 1e6 / sw : NAN,
                         ok ? (double)srss / 1024.0 : NAN, NAN});
    if (getenv("SPY_BENCH_KEEP"))
      fprintf(stderr, "kept %s %s (%ld bytes)\n", sdb, sout, sb);
    else
      remove(sdb), remove(sout);
  }
  t.notes[t.nnotes++] =
      "frames: the measured ones (numbered after the watched frames made "
      "while the recorder subscribed: an unwatched frame has no number); "
      "the provider flushes after its last frame, again while the pool is "
      "empty";
  t.notes[t.nnotes++] =
      "export NM zones: a synthetic recording (one thread, frame > 199 "
      "items) exported to Perfetto by `spyglass export` as its own process; "
      "columns: output MB/s, that process's peak RSS";
  t.notes[t.nnotes++] =
      "recorder CPU = its receiving + writer threads' CPU and its close "
      "(last batch, index build, checkpoint); the second row adds the "
      "provider's offload worker (process CPU minus the frame thread)";
  t.notes[t.nnotes++] = "plain loop: the same number of rows, laid out as "
                        "the recorder's slice_data (integers, rowid id), "
                        "prepared insert, 16384 rows a transaction, no index";
  bench_print(&t, &o);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (!getenv("SPY_BENCH_KEEP") && system(cmd) != 0)
    fprintf(stderr, "bench record: could not remove %s\n", dir);
  return 0;
}
