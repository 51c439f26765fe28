/* bench_util.c — timing, quantiles and the result table (see bench.h). */
#include "bench.h"

#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "opts.h"

void bench_two_cpus(int *a, int *b) {
  cpu_set_t set;
  *a = *b = -1;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return;
  for (int c = 0; c < CPU_SETSIZE && *b < 0; c++)
    if (CPU_ISSET(c, &set)) {
      if (*a < 0)
        *a = c;
      else
        *b = c;
    }
  if (*b < 0)
    *a = -1; /* one CPU: nothing to place */
}

uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t bench_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_other_threads_cpu_ns(long skip_tid) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return NAN;
  long self = (long)syscall(SYS_gettid);
  double total = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    long tid = atol(e->d_name);
    if (tid <= 0 || tid == self || tid == skip_tid)
      continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f) {
      if (fscanf(f, "%llu", &ns) != 1)
        ns = 0;
      fclose(f);
    }
    total += (double)ns;
  }
  closedir(d);
  return total;
}

double bench_quantile(double *v, size_t n, double q) {
  if (!n)
    return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

static volatile uint64_t sink;
void bench_sink(uint64_t v) { sink += v; }

double bench_time_op(void (*fn)(void *), void *arg, int rounds,
                     double target_ms) {
  /* Calibrate: how many calls fill target_ms? */
  uint64_t iters = 1;
  for (;;) {
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < iters; i++)
      fn(arg);
    double ms = (double)(bench_now_ns() - t0) / 1e6;
    if (ms >= target_ms / 4 || iters >= (1ull << 40))
      break;
    iters *= 4;
  }
  iters *= 4;
  double *ns = calloc((size_t)rounds, sizeof *ns);
  for (int r = 0; r < rounds; r++) {
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < iters; i++)
      fn(arg);
    ns[r] = (double)(bench_now_ns() - t0) / (double)iters;
  }
  double med = bench_quantile(ns, (size_t)rounds, 0.5);
  free(ns);
  return med;
}

void bench_row(bench_table *t, const char *name, const double *values) {
  if (t->nrows >= BENCH_MAX_ROWS)
    return;
  snprintf(t->rows[t->nrows].name, sizeof t->rows[0].name, "%s", name);
  for (int c = 1; c < t->ncols; c++)
    t->rows[t->nrows].v[c] = values[c - 1];
  t->nrows++;
}

void bench_print(const bench_table *t, const bench_opts *o) {
  if (o->json) {
    json_out j;
    jw_init(&j, stdout);
    jw_obj_begin(&j);
    jw_key(&j, "bench");
    jw_str(&j, t->title);
    jw_key(&j, "rows");
    jw_arr_begin(&j);
    for (int r = 0; r < t->nrows; r++) {
      jw_obj_begin(&j);
      jw_key(&j, t->cols[0]);
      jw_str(&j, t->rows[r].name);
      for (int c = 1; c < t->ncols; c++) {
        jw_key(&j, t->cols[c]);
        jw_num(&j, t->rows[r].v[c]);
      }
      jw_obj_end(&j);
    }
    jw_arr_end(&j);
    jw_key(&j, "notes");
    jw_arr_begin(&j);
    for (int i = 0; i < t->nnotes; i++)
      jw_str(&j, t->notes[i]);
    jw_arr_end(&j);
    jw_obj_end(&j);
    jw_newline(&j);
    return;
  }
  printf("%s\n\n", t->title);
  printf("| %-28s", t->cols[0]);
  for (int c = 1; c < t->ncols; c++)
    printf(" | %14s", t->cols[c]);
  printf(" |\n|%s", "------------------------------");
  for (int c = 1; c < t->ncols; c++)
    printf("|%s", "---------------:");
  printf("|\n");
  for (int r = 0; r < t->nrows; r++) {
    printf("| %-28s", t->rows[r].name);
    for (int c = 1; c < t->ncols; c++) {
      double v = t->rows[r].v[c];
      if (isnan(v))
        printf(" | %14s", "-");
      else if (fabs(v) >= 100 || v == floor(v))
        printf(" | %14.0f", v);
      else
        printf(" | %14.3f", v);
    }
    printf(" |\n");
  }
  for (int i = 0; i < t->nnotes; i++)
    printf("%s%s\n", i ? "" : "\n", t->notes[i]);
}

static const char *bench_usage;
static void bench_help(FILE *f) { fprintf(f, "%s", bench_usage); }

int bench_parse(int argc, char **argv, bench_opts *o, const char *usage) {
  memset(o, 0, sizeof *o);
  const cli_opt opts[] = {
      {"--json", CLI_FLAG, &o->json, 0, 0, 0, NULL},
      {"--quick", CLI_FLAG, &o->quick, 0, 0, 0, NULL},
  };
  bench_usage = usage;
  char cmd[64];
  snprintf(cmd, sizeof cmd, "bench %s", argc > 0 ? argv[0] : "");
  int rc = cli_parse(cmd, argc, argv, opts, sizeof opts / sizeof opts[0], NULL,
                     0, NULL, bench_help);
  if (rc == 2)
    fprintf(stderr, "%s", usage);
  return rc;
}

int bench_tempdir(char *buf, size_t cap) {
  snprintf(buf, cap, "/dev/shm/spy_bench_XXXXXX");
  if (mkdtemp(buf))
    return 0;
  snprintf(buf, cap, "/tmp/spy_bench_XXXXXX");
  return mkdtemp(buf) ? 0 : -1;
}
