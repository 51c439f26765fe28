/* bench_trace.c — `spyglass bench trace`: `demo build` over a generated
 * tree of 20,000 modules and over a real tree (/usr/include, or
 * $SPY_BENCH_REAL), untraced and traced with each writer, next to the
 * naive baseline measured in the same run (every action one JSON line with
 * its source inline, serialised twice, written and flushed on the build
 * thread — the reference's "before"). PostgreSQL rows need a server:
 * $SPY_BENCH_PG (a conninfo). Also the emitting thread's cost per action,
 * measured directly. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <glob.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>

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

/* ---- a throw-away PostgreSQL server ---------------------------------------
 * When SPY_BENCH_PG is not set, the bench starts its own as test/trace_lib.sh
 * does: initdb in a temporary directory, a free loopback port, the server
 * run as an unprivileged user (postgres, else nobody) when we are root;
 * its default durability settings (fsync on). Stopped and removed at the
 * end. */

static char pg_dir[64], pg_bin[512], pg_user[32], pg_conninfo[256];

static int sh(const char *cmd) {
  int rc = system(cmd);
  return rc == 0 ? 0 : -1;
}

/* Runs cmd as the server's user (runuser when we are root). */
static int as_pg(const char *cmd) {
  char b[3000];
  if (getuid() == 0)
    snprintf(b, sizeof b, "runuser -u %s -- %s", pg_user, cmd);
  else
    snprintf(b, sizeof b, "%s", cmd);
  return sh(b);
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t n = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &n) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

/* Starts the server; returns its conninfo, or NULL with why in `why`. */
static const char *pg_local_start(char *why, size_t cap) {
  glob_t g;
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0 ||
      g.gl_pathc == 0) {
    snprintf(why, cap, "PostgreSQL is not installed");
    return NULL;
  }
  snprintf(pg_bin, sizeof pg_bin, "%.*s",
           (int)(strlen(g.gl_pathv[g.gl_pathc - 1]) - 9),
           g.gl_pathv[g.gl_pathc - 1]);
  globfree(&g);
  snprintf(pg_dir, sizeof pg_dir, "/tmp/spy-bench-pg-XXXXXX");
  if (!mkdtemp(pg_dir)) {
    snprintf(why, cap, "cannot make a directory for it");
    return NULL;
  }
  snprintf(pg_user, sizeof pg_user, "%s",
           getuid() != 0          ? ""
           : getpwnam("postgres") ? "postgres"
                                  : "nobody");
  if (getuid() == 0) {
    struct passwd *pw = getpwnam(pg_user);
    if (!pw || chown(pg_dir, pw->pw_uid, pw->pw_gid) != 0) {
      snprintf(why, cap, "cannot give %s to %s", pg_dir, pg_user);
      return NULL;
    }
  }
  chmod(pg_dir, 0700);
  char cmd[2000];
  snprintf(cmd, sizeof cmd,
           "%s/initdb -D %s/data -U spy --auth=trust -E UTF8 --no-sync "
           ">%s/initdb.log 2>&1",
           pg_bin, pg_dir, pg_dir);
  int port = free_port();
  if (as_pg(cmd) != 0 || port < 0) {
    snprintf(why, cap, "initdb failed (see %s/initdb.log)", pg_dir);
    return NULL;
  }
  snprintf(cmd, sizeof cmd,
           "%s/pg_ctl -D %s/data -l %s/server.log -w -t 60 -o \"-p %d -k %s "
           "-c listen_addresses=127.0.0.1\" start >/dev/null",
           pg_bin, pg_dir, pg_dir, port, pg_dir);
  if (as_pg(cmd) != 0) {
    snprintf(why, cap, "the server did not start (see %s/server.log)", pg_dir);
    return NULL;
  }
  snprintf(pg_conninfo, sizeof pg_conninfo,
           "host=127.0.0.1 port=%d user=spy dbname=postgres "
           "connect_timeout=5",
           port);
  return pg_conninfo;
}

/* Runs one statement on conninfo's database; 0, or -1. */
static int pg_exec(const char *conninfo, const char *sql) {
  PGconn *c = PQconnectdb(conninfo);
  PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
  int ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
  PQclear(r);
  PQfinish(c);
  return ok ? 0 : -1;
}

/* The bench's own server: each postgres run traces into a database of
 * its own (a first session into an empty store, as every run before
 * --rounds measured; later sessions into one store find its indexes
 * built and maintain them per row). Sets `out` to its conninfo and
 * `name` to the database; 0, or -1 (then the run uses conninfo as is). */
static int pg_fresh_db(const char *conninfo, char *out, size_t cap, char *name,
                       size_t ncap) {
  static int made;
  const char *db = strstr(conninfo, "dbname=postgres");
  if (!pg_conninfo[0] || strcmp(conninfo, pg_conninfo) != 0 || !db)
    return -1;
  snprintf(name, ncap, "bench_run_%d", ++made);
  char sql[128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  if (pg_exec(conninfo, sql) < 0)
    return -1;
  snprintf(out, cap, "%.*sdbname=%s%s", (int)(db - conninfo), conninfo, name,
           db + strlen("dbname=postgres"));
  return 0;
}

static void pg_local_stop(void) {
  if (!pg_dir[0])
    return;
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "%s/pg_ctl -D %s/data -m fast -w stop >/dev/null 2>&1", pg_bin,
           pg_dir);
  if (pg_conninfo[0])
    as_pg(cmd);
  rmrf(pg_dir);
  pg_dir[0] = 0;
}

/* CPU time (ms) the bench's own server has used so far: the postmaster's,
 * its exited children's (reaped: a session's backend) and its live
 * children's (checkpointer, WAL writer, …), from /proc; -1 when the server
 * is not the bench's own (SPY_BENCH_PG) or cannot be read. */
static double pg_server_cpu_ms(void) {
  if (!pg_dir[0])
    return -1;
  char path[600];
  snprintf(path, sizeof path, "%s/data/postmaster.pid", pg_dir);
  FILE *f = fopen(path, "r");
  long pm = 0;
  if (!f)
    return -1;
  if (fscanf(f, "%ld", &pm) != 1)
    pm = 0;
  fclose(f);
  if (pm <= 0)
    return -1;
  DIR *d = opendir("/proc");
  if (!d)
    return -1;
  unsigned long long ticks = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    char b[1024];
    f = fopen(path, "r");
    size_t n = f ? fread(b, 1, sizeof b - 1, f) : 0;
    if (f)
      fclose(f);
    b[n] = 0;
    char *c = strrchr(b, ')'); /* the command may hold spaces */
    long ppid;
    unsigned long long ut, st, cut, cst;
    if (!c || sscanf(c + 2,
                     "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                     "%llu %llu",
                     &ppid, &ut, &st, &cut, &cst) != 5)
      continue;
    long pid = atol(e->d_name);
    if (pid == pm)
      ticks += ut + st + cut + cst;
    else if (ppid == pm)
      ticks += ut + st;
  }
  closedir(d);
  return (double)ticks * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* ---- one tree --------------------------------------------------------------
 */

typedef struct run {
  const char *name, *trace;
  demo_build_result r;
  double wall_ms;
  double server_ms; /* postgres: the bench's server's CPU meanwhile */
  uint64_t bytes;
  int ok;
  void (*work)(const char *, size_t); /* per-transform work, or NULL */
  int old_layout; /* the trace threads as before issue 17: a packer thread
                     of its own, the writer at the build's priority */
  int discard;    /* the writer thread takes every record and drops it:
                   what the emitting side alone costs the build */
  int copied;     /* payloads copied at the emit, not lent (as before
                     lending: SPY_TRACE_LEND_BYTES=1) */
  /* --rounds: the medians of the rounds' ratios to their untraced build,
   * and the build ratio's range (0: one round, ratios from the row) */
  double build_x, durable_x, build_x_min, build_x_max;
} run;

/* --runs: the only runs made (comma-separated names; untraced always) */
static const char *runs_only;
/* --rounds N: every run N times, interleaved (untraced, then each traced
 * run, N times over); a row then shows the median round, and its ratios
 * are the medians of each round's ratio to that round's untraced build */
static int bench_rounds = 1;
#define MAX_ROUNDS 15
static int run_wanted(const char *name) {
  if (strcmp(name, "untraced") == 0)
    return 1;
  if (!runs_only)
    return !strstr(name, "-copied") && !strstr(name, "-old-layout");
  size_t n = strlen(name);
  for (const char *p = runs_only; *p;) {
    const char *e = strchr(p, ',');
    size_t k = e ? (size_t)(e - p) : strlen(p);
    if (k == n && memcmp(p, name, n) == 0)
      return 1;
    p += k + (e != NULL);
  }
  return 0;
}

static int one(const char *src, const char *scratch, run *x) {
  char out[4400];
  snprintf(out, sizeof out, "%s/out-%s", scratch, x->name);
  rmrf(out);
  mkdir(out, 0755);
  demo_build_opts o = {.src_dir = src,
                       .out_dir = out,
                       .trace = x->trace,
                       .quiet = 1,
                       .work = x->work};
  int64_t before = 0;
  const char *admin = getenv("SPY_BENCH_PG"), *pg = admin;
  char fresh[512], fresh_name[64] = "", drop[128] = "";
  double server0 = -1;
  if (strcmp(x->name, "postgres") == 0) {
    if (pg_fresh_db(admin, fresh, sizeof fresh, fresh_name,
                    sizeof fresh_name) == 0) {
      o.trace = pg = fresh;
      snprintf(drop, sizeof drop, "DROP DATABASE %s", fresh_name);
    }
    before = pg_db_size(pg);
    server0 = pg_server_cpu_ms();
  }
  if (x->old_layout) {
    setenv("SPY_TRACE_NICE", "0", 1);
    setenv("SPY_TRACE_PACK_INLINE", "0", 1);
  }
  if (x->discard)
    setenv("SPY_TRACE_DISCARD", "1", 1);
  if (x->copied)
    setenv("SPY_TRACE_LEND_BYTES", "1", 1);
  uint64_t t0 = bench_now_ns();
  int rc = demo_build_run(&o, &x->r);
  if (x->old_layout) {
    unsetenv("SPY_TRACE_NICE");
    unsetenv("SPY_TRACE_PACK_INLINE");
  }
  if (x->discard)
    unsetenv("SPY_TRACE_DISCARD");
  if (x->copied)
    unsetenv("SPY_TRACE_LEND_BYTES");
  /* progress on stderr: the bench is long, and this says where it went */
  fprintf(stderr, "bench trace: %s %s: %.1f s\n", src, x->name,
          (double)(bench_now_ns() - t0) / 1e9);
  if (rc < 0) {
    if (drop[0])
      pg_exec(admin, drop);
    return rc;
  }
  x->ok = 1;
  x->wall_ms = x->r.wall_ms;
  x->server_ms = NAN;
  if (strcmp(x->name, "postgres") == 0) {
    /* after the size query: its backend has exited and been reaped by
     * then, or is live (either way counted) */
    x->bytes = (uint64_t)(pg_db_size(pg) - before);
    double server1 = pg_server_cpu_ms();
    if (server0 >= 0 && server1 >= 0)
      x->server_ms = server1 - server0;
    if (drop[0])
      pg_exec(admin, drop);
  } else if (x->r.trace_dir[0])
    x->bytes = du(x->r.trace_dir);
  rmrf(out);
  return 0;
}

/* A realistic plugin's per-module work: tokenise the C text (identifiers
 * interned in a small open-addressed table, numbers, strings, comments,
 * punctuation), the kind of pass real bundler plugins make over every
 * module at tens of MB/s. */
static volatile uint64_t work_sink;
static int is_alpha(char c) {
  return c == '_' || (unsigned)(((unsigned char)c | 32) - 'a') < 26u;
}
static int is_digit(char c) { return (unsigned)((unsigned char)c - '0') < 10u; }
static void work_tokenise(const char *p, size_t n) {
  static uint32_t tab[4096]; /* the module's identifiers */
  uint64_t toks = 0;
  for (int pass = 0; pass < 4; pass++) {
    uint32_t used = 0;
    memset(tab, 0, sizeof tab);
    for (size_t i = 0; i < n;) {
      char c = p[i];
      if (is_alpha(c)) {
        uint32_t h = 2166136261u;
        while (i < n && (is_alpha(p[i]) || is_digit(p[i])))
          h = (h ^ (unsigned char)p[i++]) * 16777619u;
        uint32_t k = h & 4095;
        while (tab[k] && tab[k] != h)
          k = (k + 1) & 4095;
        if (!tab[k] && ++used > 2048) { /* half full: start again */
          memset(tab, 0, sizeof tab);
          used = 1;
        }
        tab[k] = h;
      } else if (is_digit(c)) {
        while (i < n && (is_alpha(p[i]) || is_digit(p[i]) || p[i] == '.'))
          i++;
      } else if (c == '"' || c == '\'') {
        for (i++; i < n && p[i] != c; i++)
          if (p[i] == '\\')
            i++;
        i++;
      } else if (c == '/' && i + 1 < n && p[i + 1] == '*') {
        for (i += 2; i + 1 < n && !(p[i] == '*' && p[i + 1] == '/'); i++)
          ;
        i += 2;
      } else {
        i++;
        if ((unsigned char)c <= ' ')
          continue;
      }
      toks++;
    }
  }
  work_sink += toks;
}

enum {
  C_BUILD,
  C_BUILD_X,
  C_DURABLE,
  C_DURABLE_X,
  C_WRITER_X,
  C_BYTES_X,
  C_WAITS,
  C_SPILL,
  C_BUSY_ACT,
  C_CPU_ACT,
  C_CPU_MB,
  C_SERVER,
  C_EMIT,
  C_BCPU,
  C_BRQ,
  C_BRQ_ACT,
  C_BFLT,
  C_BX_ACT,
  C_BUILD_X_MIN,
  C_BUILD_X_MAX,
  C_N
};

static void add_rows(bench_table *t, const char *label, run *runs, int n) {
  run *base = &runs[0], *naive = &runs[1];
  double naive_tput =
      naive->ok && naive->r.naive_ns
          ? (double)naive->r.actions / (naive->r.naive_ns * 1e-9)
          : NAN;
  for (int i = 0; i < n; i++) {
    run *x = &runs[i];
    if (!x->trace)
      continue;
    char name[64];
    snprintf(name, sizeof name, "%s: %s", label, x->name);
    double v[C_N];
    for (int k = 0; k < C_N; k++)
      v[k] = NAN;
    if (x->ok) {
      v[C_BUILD] = x->r.build_ms;
      v[C_BUILD_X] = x->build_x ? x->build_x : x->r.build_ms / base->r.build_ms;
      v[C_DURABLE] = x->wall_ms;
      v[C_DURABLE_X] = x->durable_x ? x->durable_x : x->wall_ms / base->wall_ms;
      if (x->build_x_min) {
        v[C_BUILD_X_MIN] = x->build_x_min;
        v[C_BUILD_X_MAX] = x->build_x_max;
      }
      if (i > 0 && naive->ok)
        v[C_BYTES_X] = (double)x->bytes / (double)naive->bytes;
      /* where the build thread's wall time went */
      v[C_BCPU] = (double)x->r.build_cpu_ns / 1e6;
      v[C_BRQ] = (double)x->r.build_rq_ns / 1e6;
      if (x->r.actions)
        v[C_BRQ_ACT] = (double)x->r.build_rq_ns / 1e3 / (double)x->r.actions;
      v[C_BFLT] = (double)(x->r.build_minflt + x->r.build_majflt);
      if (i > 0 && x->r.actions)
        v[C_BX_ACT] =
            ((double)x->r.build_cpu_ns - (double)base->r.build_cpu_ns) / 1e3 /
            (double)x->r.actions;
      const spy_trace_stats *st = &x->r.st;
      /* busy: the writer's spells from a round's start to its commit,
       * wall time (waiting for a server's answer included); cpu: the
       * CPU of the same spells; the packer threads' busy time in both */
      uint64_t busy = st->writer_ns + st->packer_ns;
      uint64_t cpu = st->writer_cpu_ns + st->packer_ns;
      if (strcmp(x->name, "naive") == 0) {
        v[C_WRITER_X] = 1;
        cpu = busy = x->r.naive_ns;
      } else if (i > 0) {
        v[C_WAITS] = (double)st->waits;
        v[C_SPILL] = (double)st->spilled_disk;
        if (st->writer_ns)
          v[C_WRITER_X] =
              (double)st->written / (st->writer_ns * 1e-9) / naive_tput;
      }
      if (i > 0 && busy && x->r.actions)
        v[C_BUSY_ACT] = (double)busy / 1e3 / (double)x->r.actions;
      v[C_SERVER] = x->server_ms;
      if (i > 0 && cpu && x->r.actions) {
        v[C_CPU_ACT] = (double)cpu / 1e3 / (double)x->r.actions;
        if (st->source_bytes)
          v[C_CPU_MB] = (double)cpu / 1e6 / ((double)st->source_bytes / 1e6);
      }
    }
    bench_row(t, name, v);
  }
}

/* Each run once, then the untraced build twice more: its median of
 * three is the baseline (one run of a 0.6 s build on a shared VM moved
 * the ratios by 20 %); again2: untraced and sqlite once more, keeping
 * the faster. */
static int one_round(const char *src, const char *scratch, run *runs, int n,
                     int again2) {
  for (int i = 0; i < n; i++) {
    if (!runs[i].trace)
      continue;
    if (one(src, scratch, &runs[i]) < 0)
      fprintf(stderr, "bench trace: %s run failed\n", runs[i].name);
  }
  run un[3] = {runs[0], runs[0], runs[0]};
  for (int k = 1; k < 3; k++)
    if (one(src, scratch, &un[k]) < 0)
      un[k] = runs[0];
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++)
      if (un[b].wall_ms < un[a].wall_ms) {
        run tmp = un[a];
        un[a] = un[b];
        un[b] = tmp;
      }
  runs[0] = un[1];
  if (again2)
    for (int i = 0; i < n; i += 3) {
      if (i > 3)
        break;
      if (!runs[i].trace)
        continue;
      run again = runs[i];
      if (one(src, scratch, &again) == 0 && again.wall_ms < runs[i].wall_ms)
        runs[i] = again;
    }
  return 0;
}

/* --rounds: bench_rounds rounds of untraced then every traced run, so each
 * traced build has an untraced one beside it in time. A row is its run's
 * median round (by build time); its ratios are the medians of the
 * rounds' own ratios, and the build ratio's range is kept. */
static int rounds_of(const char *src, const char *scratch, run *runs, int n) {
  static run all[MAX_ROUNDS][16];
  if (n > 16)
    return -1;
  for (int r = 0; r < bench_rounds; r++)
    for (int i = 0; i < n; i++) {
      all[r][i] = runs[i];
      if (runs[i].trace && one(src, scratch, &all[r][i]) < 0)
        fprintf(stderr, "bench trace: %s run failed (round %d)\n", runs[i].name,
                r + 1);
    }
  for (int i = 0; i < n; i++) {
    if (!runs[i].trace)
      continue;
    double b[MAX_ROUNDS], bx[MAX_ROUNDS], dx[MAX_ROUNDS];
    int k = 0;
    for (int r = 0; r < bench_rounds; r++) {
      run *x = &all[r][i], *u = &all[r][0];
      if (!x->ok || !u->ok)
        continue;
      b[k] = x->r.build_ms;
      bx[k] = x->r.build_ms / u->r.build_ms;
      dx[k] = x->wall_ms / u->wall_ms;
      k++;
    }
    if (!k)
      continue; /* runs[i].ok stays 0: a row of "-" */
    double mb = bench_quantile(b, (size_t)k, 0.5);
    for (int r = 0; r < bench_rounds; r++) /* the round at the median build */
      if (all[r][i].ok && all[r][0].ok && all[r][i].r.build_ms >= mb) {
        runs[i] = all[r][i];
        break;
      }
    if (i > 0) {
      runs[i].build_x = bench_quantile(bx, (size_t)k, 0.5);
      runs[i].durable_x = bench_quantile(dx, (size_t)k, 0.5);
      runs[i].build_x_min = bx[0]; /* sorted by bench_quantile */
      runs[i].build_x_max = bx[k - 1];
    }
  }
  return 0;
}

static int bench_tree(bench_table *t, const char *label, const char *src,
                      const char *scratch, int again2, int work, char *note,
                      size_t note_len) {
  const char *pg = getenv("SPY_BENCH_PG");
  run runs[] = {{"untraced", "none"},
                {"naive", work ? NULL : "naive"},
                {"jsonl", "jsonl"},
                {"sqlite", "sqlite"},
                {"postgres", pg},
                {"sqlite-old-layout", "sqlite", .old_layout = 1},
                {"discard", "jsonl", .discard = 1},
                {"jsonl-copied", "jsonl", .copied = 1},
                {"sqlite-copied", "sqlite", .copied = 1},
                {"discard-copied", "jsonl", .discard = 1, .copied = 1}};
  int n = sizeof runs / sizeof runs[0];
  for (int i = 0; i < n; i++)
    if (!run_wanted(runs[i].name))
      runs[i].trace = NULL;
  void (*fn)(const char *, size_t) = work ? work_tokenise : NULL;
  for (int i = 0; i < n; i++)
    runs[i].work = fn;
  /* warm the page cache, then the runs; untraced and sqlite twice (the
   * closest comparison), keeping the faster */
  run warm = {"untraced", "none", .work = fn};
  if (one(src, scratch, &warm) < 0)
    return -1;
  if ((bench_rounds > 1 ? rounds_of(src, scratch, runs, n)
                        : one_round(src, scratch, runs, n, again2)) < 0)
    return -1;
  add_rows(t, label, runs, n);
  if (work)
    snprintf(note, note_len,
             "%s: the same tree, each transform first tokenising its input "
             "4 times (identifiers interned; untraced build %.0f ms)",
             label, runs[0].r.build_ms);
  else {
    /* the actions of the first traced run that ran (--runs may leave out
     * any of them) */
    uint64_t actions = 0;
    for (int i = 1; i < n && !actions; i++)
      if (runs[i].trace)
        actions = runs[i].r.actions;
    snprintf(note, note_len,
             "%s: %s — %u modules, %u include edges, %u chunks, %.1f MB of "
             "source, %llu actions per traced build",
             label, src, runs[0].r.modules, runs[0].r.edges, runs[0].r.chunks,
             (double)runs[0].r.source_bytes / 1e6, (unsigned long long)actions);
  }
  return 0;
}

/* ---- the emitter alone
 * ------------------------------------------------------- */

typedef struct emit_fx {
  spy_trace *t;
  char src[2048];
  int kind;
  _Atomic int refs; /* kind 2: the payload is lent, reference-counted */
} emit_fx;

static void emit_unref(void *owner) {
  atomic_fetch_sub_explicit((_Atomic int *)owner, 1, memory_order_acq_rel);
}

static void emit_once(void *arg) {
  emit_fx *e = arg;
  if (e->kind == 2) {
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    spy_emit_hook_transform_call_start(
        e->t, &(spy_act_hook_transform_call_start){
                  "m042/frame001.c",
                  {e->src, sizeof e->src, emit_unref, &e->refs},
                  "demo:strip-comments",
                  2,
                  "c123456",
                  0});
  } else if (e->kind == 0)
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
  emit_once(&p->e);        /* its queue is made here, outside the timing, */
  spy_trace_flush(p->e.t); /* and its pages faulted in by the writer */
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

static void emit_row(bench_table *t, const char *name, double ns) {
  double v[C_N];
  for (int k = 0; k < C_N; k++)
    v[k] = NAN;
  v[C_EMIT] = ns;
  bench_row(t, name, v);
}

/* ~1 µs of a build's own work between two emits: integer work on a 4 KB
 * buffer in L1, which the compiler cannot drop. */
static uint32_t spin_sink;
static void some_work(const uint8_t *buf, int steps) {
  uint32_t h = spin_sink;
  for (int i = 0; i < steps; i++) {
    h = h * 31u + buf[(i * 7) & 4095];
    __asm__ volatile("" : "+r"(h));
  }
  spin_sink = h;
}

/* The emit's cost inside a loop that does work between emits, as a build
 * does: the same loop with and without the emits, one after the other,
 * in one session whose queue holds them all (no wait); the difference
 * in the thread's CPU time per emit, median of the rounds. The
 * back-to-back rows above measure an emitter whose null writer chases it
 * line by line; here the writer takes whole batches as it does beside a
 * build. */
static void emit_between_work(bench_table *t, int quick) {
  static emit_fx e;
  static uint8_t buf[4096];
  memset(e.src, 'a', sizeof e.src);
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (uint8_t)(i * 13);
  enum { N = 20000, ROUNDS = 9, STEPS = 1500 };
  const char *names[] = {"emit: resolveId start, between ~1 µs of work",
                         "emit: transform start, 2 KB lent, between work"};
  int kinds[] = {1, 2};
  for (int k = 0; k < 2; k++) {
    double v[ROUNDS];
    int rounds = quick ? 3 : ROUNDS;
    for (int r = 0; r < rounds; r++) {
      spy_trace_desc d = {
          .enabled = 1, .ops = &null_ops, .queue_bytes = (size_t)64 << 20};
      if (spy_trace_create(&e.t, &d) < 0)
        return;
      e.kind = kinds[k];
      emit_once(&e);
      spy_trace_flush(e.t);
      uint64_t t0 = bench_thread_cpu_ns();
      for (int i = 0; i < N; i++) {
        some_work(buf, STEPS);
        emit_once(&e);
      }
      uint64_t with = bench_thread_cpu_ns() - t0;
      t0 = bench_thread_cpu_ns();
      for (int i = 0; i < N; i++)
        some_work(buf, STEPS);
      uint64_t without = bench_thread_cpu_ns() - t0;
      spy_trace_stats st;
      spy_trace_get_stats(e.t, &st);
      spy_trace_destroy(e.t);
      v[r] = ((double)with - (double)without) / N; /* (no wait: CPU) */
    }
    emit_row(t, names[k], bench_quantile(v, (size_t)rounds, 0.5));
  }
}

/* A session that lives past its clock's first calibration (20 ms), so the
 * rows' short sessions start with the process's known counter rate, as a
 * build's session is after its first 20 ms. */
static void warm_clock(void) {
  static emit_fx e;
  spy_trace_desc d = {.enabled = 1, .ops = &null_ops};
  if (spy_trace_create(&e.t, &d) < 0)
    return;
  e.kind = 1;
  emit_once(&e);
  spy_trace_flush(e.t);
  struct timespec ts = {0, 25000000};
  nanosleep(&ts, NULL);
  emit_once(&e); /* the writer's round for it calibrates the clock */
  spy_trace_flush(e.t);
  spy_trace_destroy(e.t);
}

/* The emitting thread's own cost: rounds of emits into a fresh session
 * whose queue holds them all, minus any time spent waiting for space
 * (that is writer throughput, reported above), median of the rounds. */
static void bench_emit(bench_table *t, int quick) {
  static emit_fx e;
  memset(e.src, 'a', sizeof e.src);
  const char *names[] = {"emit: transform start, 2 KB copied",
                         "emit: resolveId start", "emit: disabled session",
                         "emit: transform start, 2 KB lent"};
  enum { N = 20000, ROUNDS = 9 };
  warm_clock();
  for (int k = 0; k < 4; k++) {
    double v[ROUNDS];
    int rounds = quick ? 3 : ROUNDS;
    for (int r = 0; r < rounds; r++) {
      spy_trace_desc d = {
          .enabled = k != 2, .ops = &null_ops, .queue_bytes = (size_t)64 << 20};
      if (spy_trace_create(&e.t, &d) < 0)
        return;
      e.kind = k == 3 ? 2 : k == 1;
      /* the thread's queue made and its pages faulted in by the writer
       * (as during a build, where the first emits make them) before the
       * timing: the emits' steady cost */
      emit_once(&e);
      spy_trace_flush(e.t);
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
    emit_row(t, names[k], ns);
  }
  double v[9];
  int rounds = quick ? 3 : 9;
  for (int r = 0; r < rounds; r++)
    v[r] = emit_two_threads();
  emit_row(t, "emit: 2 threads, one session, 2 KB",
           bench_quantile(v, (size_t)rounds, 0.5));
  emit_between_work(t, quick);
}

int bench_trace(int argc, char **argv) {
  bench_opts o;
  /* --full: also the closest runs (untraced, sqlite) twice */
  int full = 0, gen_only = 0, k = 0;
  char *args[64];
  for (int i = 0; i < argc && k < 63; i++) {
    if (strcmp(argv[i], "--full") == 0)
      full = 1;
    else if (strcmp(argv[i], "--gen-only") == 0)
      gen_only = 1;
    else if (strcmp(argv[i], "--emit-only") == 0)
      gen_only = -1;
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs_only = argv[++i];
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      bench_rounds = atoi(argv[++i]);
      if (bench_rounds < 1 || bench_rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench trace: --rounds takes 1 to %d, not %s\n",
                MAX_ROUNDS, argv[i]);
        return 2;
      }
    } else
      args[k++] = argv[i];
  }
  args[k] = NULL;
  int rc = bench_parse(
      k, args, &o,
      "usage: spyglass bench trace [--json] [--quick | --full] [--gen-only | "
      "--emit-only] [--runs NAME,…] [--rounds N]\n"
      "default: the 20,000-module tree and the real tree, each untraced, "
      "naive and with every writer, and the realistic-work build on a "
      "2,000-module tree (about 10 minutes on a loaded 2-core machine); "
      "--quick: the 2,000-module tree and its work build only (about a "
      "minute); --full: the default with the work build on the 20k tree "
      "and the untraced and sqlite runs twice, keeping the faster; "
      "--gen-only: the generated tree only (no real tree, work build or "
      "emit rows); --emit-only: the emit rows only; --runs: only these runs "
      "(untraced, naive, jsonl, "
      "sqlite, postgres, discard; untraced always; opt-in: "
      "sqlite-old-layout, jsonl-copied, sqlite-copied, discard-copied); "
      "--rounds N: every run N times (up to 15), untraced and traced "
      "interleaved; ratios are the medians of each round's, with the build "
      "ratio's range\n"
      "env: SPY_BENCH_PG=conninfo a PostgreSQL server to use (default: one "
      "started for the bench, skipped when PostgreSQL is not installed); "
      "SPY_BENCH_REAL=dir the real tree (default /usr/include); "
      "SPY_BENCH_DIR scratch (default /tmp/spyglass-bench)\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  static char pg_note[400];
  if (!run_wanted("postgres") || gen_only < 0)
    snprintf(pg_note, sizeof pg_note, "postgres rows not asked for (--runs)");
  else if (!getenv("SPY_BENCH_PG")) {
    char why[300];
    const char *ci = pg_local_start(why, sizeof why);
    if (ci) {
      setenv("SPY_BENCH_PG", ci, 1);
      snprintf(pg_note, sizeof pg_note,
               "postgres: a server started for the bench on loopback "
               "(%s), default durability (fsync on); each postgres run "
               "traces into a new database of its own",
               ci);
    } else {
      fprintf(stderr, "bench trace: postgres rows skipped: %s\n", why);
      snprintf(pg_note, sizeof pg_note,
               "postgres rows skipped: %s (or set SPY_BENCH_PG)", why);
      pg_local_stop();
    }
  } else
    snprintf(pg_note, sizeof pg_note, "postgres: SPY_BENCH_PG's server");
  const char *scratch = getenv("SPY_BENCH_DIR");
  if (!scratch)
    scratch = "/tmp/spyglass-bench";
  mkdir(scratch, 0755);
  char gen[4200];
  int ndirs = o.quick ? 20 : 200, nfiles = 100;
  snprintf(gen, sizeof gen, "%s/tree-%d", scratch, ndirs * nfiles);
  if (gen_tree(gen, ndirs, nfiles) < 0) {
    fprintf(stderr, "bench trace: cannot generate %s\n", gen);
    pg_local_stop();
    return 1;
  }
  static bench_table t = {
      .title = "bench trace: demo build, untraced vs each writer vs the "
               "naive baseline",
      .cols = {"run",
               "build_ms",
               "build_x",
               "durable_ms",
               "durable_x",
               "writer_x_naive",
               "bytes_x_naive",
               "queue_waits",
               "spilled_disk",
               "busy_us_action",
               "cpu_us_action",
               "cpu_ms_MB",
               "server_cpu_ms",
               "emit_ns",
               "bthr_cpu_ms",
               "bthr_runq_ms",
               "bthr_runq_us_action",
               "bthr_faults",
               "bthr_extra_us_action",
               "build_x_min",
               "build_x_max"},
      .ncols = 21};
  static char n1[512], n2[512], n3[512];
  char label[32];
  snprintf(label, sizeof label, "gen %dk", ndirs * nfiles / 1000);
  if (gen_only >= 0 &&
      bench_tree(&t, label, gen, scratch, full, 0, n1, sizeof n1) < 0) {
    pg_local_stop();
    return 1;
  }
  if (gen_only >= 0)
    t.notes[t.nnotes++] = n1;
  const char *real = getenv("SPY_BENCH_REAL");
  if (!real)
    real = "/usr/include";
  if (!o.quick && !gen_only &&
      bench_tree(&t, "real", real, scratch, full, 0, n2, sizeof n2) == 0)
    t.notes[t.nnotes++] = n2;
  /* the realistic-work build: its ratio does not need the big tree, so
   * only --full runs it on the 20k one (it takes minutes there) */
  char wlabel[48], wtree[4200];
  snprintf(wtree, sizeof wtree, "%s/tree-2000", scratch);
  if (full || o.quick)
    snprintf(wtree, sizeof wtree, "%s", gen);
  else if (gen_tree(wtree, 20, 100) < 0)
    wtree[0] = 0;
  snprintf(wlabel, sizeof wlabel, "gen %dk work",
           strcmp(wtree, gen) == 0 ? ndirs * nfiles / 1000 : 2);
  if (wtree[0] && !gen_only &&
      bench_tree(&t, wlabel, wtree, scratch, full, 1, n3, sizeof n3) == 0)
    t.notes[t.nnotes++] = n3;
  if (gen_only <= 0)
    bench_emit(&t, o.quick);
  t.notes[t.nnotes++] =
      "build_ms: until the build's outputs are written (emits included; "
      "untraced: the median of three runs, one before and two after the "
      "traced ones; with --rounds N: each row is its run's median round, "
      "its _x the median of the rounds' ratios, build_x_min/max their "
      "range); "
      "durable_ms: until the trace is complete and durable (writer closed); "
      "_x: over the untraced build of the same tree in this run; "
      "writer_x_naive: actions per second of the writer thread's busy time "
      "over the naive baseline's (every action serialised twice, written "
      "and flushed inline); bytes_x_naive: the session's files (postgres: "
      "database growth) over the naive file; queue_waits: emits that found "
      "their queue full and waited; spilled_disk: actions the build "
      "spilled to the spill file (memory bound 64 MiB) instead of waiting; "
      "busy_us_action: the trace threads' busy time per action (wall "
      "time of the writer's rounds, waits for a server's answer included, "
      "+ the packer threads'); cpu_us_action, cpu_ms_MB: the trace's CPU "
      "(the writer's rounds' CPU + the packer threads' busy time) per "
      "action and per MB of new (deduplicated) source; server_cpu_ms: "
      "postgres, the CPU its server used meanwhile (the bench's own "
      "server; not with SPY_BENCH_PG); emit_ns: the emitting call alone; "
      "sqlite-old-layout: "
      "sqlite with the trace threads as before (a packer thread of its "
      "own, the writer at the build's priority); *-copied: payloads copied at "
      "the emit as before lending (SPY_TRACE_LEND_BYTES=1); discard: jsonl "
      "whose writer "
      "thread takes every record and drops it (SPY_TRACE_DISCARD: the "
      "emitting side's cost alone); bthr_*: the build thread "
      "from session create to BuildEnd: its CPU time, the time it waited "
      "runnable for a CPU (schedstat; per action: over the run's actions), "
      "its page faults, and its CPU beyond the untraced build's per action "
      "(the discard row: the emitting side alone; jsonl beside it: plus a "
      "writer busy on the other core; sqlite/postgres: plus the spill)";
  t.notes[t.nnotes++] = pg_note;
  pg_local_stop();
  bench_print(&t, &o);
  return 0;
}
