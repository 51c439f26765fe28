/* bench_trace.c — `spyglass bench trace`: `demo build` over a generated
 * tree of 20,000 modules and over a real tree (/usr/include, or
 * $SPY_BENCH_REAL), untraced and traced with each writer, next to the
 * naive baseline measured in the same run (every action one JSON line with
 * its source inline, serialised twice, written and flushed on the build
 * thread — the reference's "before"). PostgreSQL rows need a server:
 * $SPY_BENCH_PG (a conninfo). Also the emitting thread's cost per action,
 * measured directly. */
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bench.h"
#include "demo_build.h"
#include "spyglass/trace.h"

/* ---- the generated tree ------------------------------------------------- */

static const char *const words[] = {"frame",  "buffer", "texture", "queue",
                                    "vertex", "shader", "camera",  "scene"};

static int gen_tree(const char *root, int ndirs, int nfiles) {
  char path[4400];
  snprintf(path, sizeof path, "%s/.complete-%d-%d-v2", root, ndirs, nfiles);
  if (access(path, F_OK) == 0)
    return 0; /* made by an earlier run */
  mkdir(root, 0755);
  for (int d = 0; d < ndirs; d++) {
    snprintf(path, sizeof path, "%s/m%03d", root, d);
    mkdir(path, 0755);
    for (int f = 0; f < nfiles; f++) {
      snprintf(path, sizeof path, "%s/m%03d/%s%03d.%c", root, d, words[f % 8],
               f, f % 4 ? 'c' : 'h');
      FILE *o = fopen(path, "w");
      if (!o)
        return -1;
      fprintf(o,
              "/*\n * m%03d/%s%03d — generated module for spyglass bench "
              "trace.\n *\n * Copyright the spyglass authors. Licensed under "
              "the same terms as\n * the rest of this tree; see LICENSE.\n "
              "*/\n",
              d, words[f % 8], f);
      if (f >= 4)
        fprintf(o, "#include \"%s%03d.h\"\n", words[(f / 4 * 4 - 4) % 8],
                f / 4 * 4 - 4);
      if (d > 0)
        fprintf(o, "#include \"m%03d/%s%03d.h\"\n", d - 1, words[0], 0);
      fprintf(o, "#include <stdint.h>\n\n\n\n");
      for (int k = 0; k < 40; k++)
        fprintf(o,
                "/* %s_%d_%d: step %d of the %s pipeline. */\n"
                "static int %s_%d_%d(int x) {   \n"
                "  int y = x * %d + %d; // scale\n"
                "  if (y > %d)\n    y -= %d;\n\n\n  return y;\n}\n\n",
                words[k % 8], d, f * 40 + k, k, words[(k + 3) % 8],
                words[k % 8], d, f * 40 + k, k + 2, d + f, 1000 + k, 7 + f);
      fprintf(o, "int %s%03d_%03d_entry(void) { return %s_%d_%d(1); }\n",
              words[f % 8], d, f, words[0], d, f * 40);
      fclose(o);
    }
  }
  snprintf(path, sizeof path, "%s/.complete-%d-%d-v2", root, ndirs, nfiles);
  FILE *m = fopen(path, "w");
  if (m)
    fclose(m);
  return 0;
}

/* ---- disk usage -----------------------------------------------------------
 */

static uint64_t du_total;
static int du_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *f) {
  (void)p, (void)f;
  if (flag == FTW_F)
    du_total += (uint64_t)sb->st_size;
  return 0;
}
static uint64_t du(const char *path) {
  du_total = 0;
  nftw(path, du_cb, 16, FTW_PHYS);
  return du_total;
}
static int rm_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *f) {
  (void)sb, (void)flag, (void)f;
  return remove(p);
}
static void rmrf(const char *path) {
  nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static int64_t pg_db_size(const char *conninfo) {
  PGconn *c = PQconnectdb(conninfo);
  int64_t v = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PQclear(PQexec(c, "CHECKPOINT"));
    PGresult *r = PQexec(c, "SELECT pg_database_size(current_database())");
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
      v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(c);
  return v;
}

/* ---- one tree --------------------------------------------------------------
 */

typedef struct run {
  const char *name, *trace;
  demo_build_result r;
  double wall_ms;
  uint64_t bytes;
  int ok;
} run;

static int one(const char *src, const char *scratch, run *x) {
  char out[4400];
  snprintf(out, sizeof out, "%s/out-%s", scratch, x->name);
  rmrf(out);
  mkdir(out, 0755);
  demo_build_opts o = {
      .src_dir = src, .out_dir = out, .trace = x->trace, .quiet = 1};
  int64_t before = 0;
  const char *pg = getenv("SPY_BENCH_PG");
  if (strcmp(x->name, "postgres") == 0)
    before = pg_db_size(pg);
  int rc = demo_build_run(&o, &x->r);
  if (rc < 0)
    return rc;
  x->ok = 1;
  x->wall_ms = x->r.wall_ms;
  if (strcmp(x->name, "postgres") == 0)
    x->bytes = (uint64_t)(pg_db_size(pg) - before);
  else if (x->r.trace_dir[0])
    x->bytes = du(x->r.trace_dir);
  rmrf(out);
  return 0;
}

static void add_rows(bench_table *t, const char *label, run *runs, int n) {
  run *base = &runs[0], *naive = &runs[1];
  double naive_tput =
      naive->r.naive_ns ? (double)naive->r.actions / (naive->r.naive_ns * 1e-9)
                        : NAN;
  for (int i = 0; i < n; i++) {
    run *x = &runs[i];
    char name[64];
    snprintf(name, sizeof name, "%s: %s", label, x->name);
    if (!x->ok) {
      bench_row(t, name, (double[]){NAN, NAN, NAN, NAN, NAN, NAN, NAN});
      continue;
    }
    double actions = (double)(i == 0 ? runs[1].r.actions : x->r.actions);
    double tput = NAN, emit = NAN;
    if (i == 1)
      tput = naive_tput;
    else if (i > 1 && x->r.st.writer_ns)
      tput = (double)x->r.st.written / (x->r.st.writer_ns * 1e-9);
    if (i > 0)
      emit = (x->r.build_ms - base->r.build_ms) * 1e6 / actions;
    bench_row(t, name,
              (double[]){x->wall_ms, x->wall_ms / base->wall_ms,
                         i ? actions / (x->wall_ms * 1e-3) : NAN, tput / 1e3,
                         i ? (double)x->bytes / 1e6 : NAN,
                         i ? (double)x->bytes / (double)naive->bytes : NAN,
                         emit});
  }
}

static int bench_tree(bench_table *t, const char *label, const char *src,
                      const char *scratch, int quick, char *note,
                      size_t note_len) {
  const char *pg = getenv("SPY_BENCH_PG");
  run runs[] = {{"untraced", "none"},
                {"naive", "naive"},
                {"jsonl", "jsonl"},
                {"sqlite", "sqlite"},
                {"postgres", pg}};
  int n = sizeof runs / sizeof runs[0];
  /* warm the page cache, then the runs; untraced and sqlite twice (the
   * closest comparison), keeping the faster */
  run warm = {"untraced", "none"};
  if (one(src, scratch, &warm) < 0)
    return -1;
  for (int i = 0; i < n; i++) {
    if (!runs[i].trace)
      continue;
    if (one(src, scratch, &runs[i]) < 0)
      fprintf(stderr, "bench trace: %s run failed\n", runs[i].name);
  }
  if (!quick)
    for (int i = 0; i < n; i += 3) {
      run again = runs[i];
      if (one(src, scratch, &again) == 0 && again.wall_ms < runs[i].wall_ms)
        runs[i] = again;
    }
  add_rows(t, label, runs, n);
  snprintf(note, note_len,
           "%s: %s — %u modules, %u include edges, %u chunks, %.1f MB of "
           "source, %llu actions per traced build",
           label, src, runs[0].r.modules, runs[0].r.edges, runs[0].r.chunks,
           (double)runs[0].r.source_bytes / 1e6,
           (unsigned long long)runs[1].r.actions);
  return 0;
}

/* ---- the emitter alone
 * ------------------------------------------------------- */

typedef struct emit_fx {
  spy_trace *t;
  char src[2048];
  int kind;
} emit_fx;

static void emit_once(void *arg) {
  emit_fx *e = arg;
  if (e->kind == 0)
    spy_emit_hook_transform_call_start(
        e->t, &(spy_act_hook_transform_call_start){"m042/frame001.c",
                                                   {e->src, sizeof e->src},
                                                   "demo:strip-comments",
                                                   2,
                                                   "c123456",
                                                   0});
  else
    spy_emit_hook_resolve_id_call_start(
        e->t, &(spy_act_hook_resolve_id_call_start){
                  "m042/frame001.c", "frame000.h", "import-statement",
                  "demo:resolver", 0, "automatic", "c123457", 0});
}

static int null_open(void **s, const spy_trace_writer_cfg *c) {
  (void)c;
  *s = NULL;
  return 0;
}
static int null_action(void *s, const spy_trace_record *r) {
  (void)s, (void)r;
  return 0;
}
static int64_t null_close(void *s) {
  (void)s;
  return 0;
}
static const spy_trace_writer_ops null_ops = {
    "null", null_open, NULL, null_action, NULL, null_close, NULL};

/* Two threads emitting into one session at once: each has its own queue,
 * so neither waits for the other (the cost per action stays the
 * one-thread cost when the cores are free). */
typedef struct emit_par {
  emit_fx e;
  pthread_barrier_t *go;
  uint64_t ns;
} emit_par;
enum { PAR_N = 20000 };
static void *emit_par_thread(void *arg) {
  emit_par *p = arg;
  emit_once(&p->e); /* its queue is made here, outside the timing */
  pthread_barrier_wait(p->go);
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < PAR_N; i++)
    emit_once(&p->e);
  p->ns = bench_now_ns() - t0;
  return NULL;
}
static double emit_two_threads(void) {
  static emit_par p[2];
  spy_trace *t;
  spy_trace_desc d = {
      .enabled = 1, .ops = &null_ops, .queue_bytes = (size_t)64 << 20};
  if (spy_trace_create(&t, &d) < 0)
    return NAN;
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    memset(p[i].e.src, 'a' + i, sizeof p[i].e.src);
    p[i].e.t = t;
    p[i].e.kind = 0;
    p[i].go = &go;
    pthread_create(&th[i], NULL, emit_par_thread, &p[i]);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  spy_trace_stats st;
  spy_trace_get_stats(t, &st);
  spy_trace_destroy(t);
  pthread_barrier_destroy(&go);
  return (double)(p[0].ns + p[1].ns - st.wait_ns) / (2.0 * PAR_N);
}

/* The emitting thread's own cost: rounds of emits into a fresh session
 * whose queue holds them all, minus any time spent waiting for space
 * (that is writer throughput, reported above), median of the rounds. */
static void bench_emit(bench_table *t, int quick) {
  static emit_fx e;
  memset(e.src, 'a', sizeof e.src);
  const char *names[] = {"emit: transform start, 2 KB", "emit: resolveId start",
                         "emit: disabled session"};
  enum { N = 20000, ROUNDS = 9 };
  for (int k = 0; k < 3; k++) {
    double v[ROUNDS];
    int rounds = quick ? 3 : ROUNDS;
    for (int r = 0; r < rounds; r++) {
      spy_trace_desc d = {
          .enabled = k < 2, .ops = &null_ops, .queue_bytes = (size_t)64 << 20};
      if (spy_trace_create(&e.t, &d) < 0)
        return;
      e.kind = k == 1;
      uint64_t t0 = bench_now_ns();
      for (int i = 0; i < N; i++)
        emit_once(&e);
      uint64_t dt = bench_now_ns() - t0;
      spy_trace_stats st;
      spy_trace_get_stats(e.t, &st);
      spy_trace_destroy(e.t);
      v[r] = (double)(dt - st.wait_ns) / N;
    }
    double ns = bench_quantile(v, (size_t)rounds, 0.5);
    bench_row(t, names[k], (double[]){NAN, NAN, NAN, NAN, NAN, NAN, ns});
  }
  double v[9];
  int rounds = quick ? 3 : 9;
  for (int r = 0; r < rounds; r++)
    v[r] = emit_two_threads();
  bench_row(t, "emit: 2 threads, one session, 2 KB",
            (double[]){NAN, NAN, NAN, NAN, NAN, NAN,
                       bench_quantile(v, (size_t)rounds, 0.5)});
}

int bench_trace(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench trace [--json] [--quick]\n"
                       "env: SPY_BENCH_PG=conninfo adds the PostgreSQL "
                       "writer; SPY_BENCH_REAL=dir the real tree "
                       "(default /usr/include); SPY_BENCH_DIR scratch "
                       "(default /tmp/spyglass-bench)\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  const char *scratch = getenv("SPY_BENCH_DIR");
  if (!scratch)
    scratch = "/tmp/spyglass-bench";
  mkdir(scratch, 0755);
  char gen[4200];
  int ndirs = o.quick ? 20 : 200, nfiles = 100;
  snprintf(gen, sizeof gen, "%s/tree-%d", scratch, ndirs * nfiles);
  if (gen_tree(gen, ndirs, nfiles) < 0) {
    fprintf(stderr, "bench trace: cannot generate %s\n", gen);
    return 1;
  }
  static bench_table t = {
      .title = "bench trace: demo build, untraced vs each writer vs the "
               "naive baseline",
      .cols = {"run", "wall_ms", "x_untraced", "actions_per_s", "writer_kact_s",
               "disk_MB", "bytes_x_naive", "emit_ns_action"},
      .ncols = 8};
  static char n1[512], n2[512];
  char label[32];
  snprintf(label, sizeof label, "gen %dk", ndirs * nfiles / 1000);
  if (bench_tree(&t, label, gen, scratch, o.quick, n1, sizeof n1) < 0)
    return 1;
  t.notes[t.nnotes++] = n1;
  const char *real = getenv("SPY_BENCH_REAL");
  if (!real)
    real = "/usr/include";
  if (!o.quick && bench_tree(&t, "real", real, scratch, 0, n2, sizeof n2) == 0)
    t.notes[t.nnotes++] = n2;
  bench_emit(&t, o.quick);
  t.notes[t.nnotes++] =
      "wall_ms: build + draining the trace; writer_kact_s: actions per "
      "second of trace work, the writer's and its packer thread's busy "
      "time (naive: of time spent serialising and "
      "writing inline); disk_MB: the session's files (postgres: database "
      "growth); emit_ns_action: build rows (traced build - untraced build) "
      "/ actions, emit rows the emitting call alone";
  if (!getenv("SPY_BENCH_PG"))
    t.notes[t.nnotes++] = "postgres rows: set SPY_BENCH_PG to a conninfo";
  bench_print(&t, &o);
  return 0;
}
