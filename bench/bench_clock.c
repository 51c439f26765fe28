/* bench_clock.c — `spyglass bench clock`: how close clock sync gets to the
 * truth. The peer reads CLOCK_MONOTONIC plus a fixed injected offset
 * (+1234.567 ms), so the true offset is known exactly; 1,000 syncs of 5
 * rounds each, thread <-> thread over an anonymous segment and process <->
 * process over a named one, and the p50/p99 of |error| and of the RTT. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "spyglass/clock.h"

#define INJECTED_NS 1234567000ll

typedef struct peer {
  spy_clock_seg *seg;
  int syncs, rc;
} peer;

static int serve_n(spy_clock_seg *seg, int n) {
  spy_clock_opts o = {.test_offset_ns = INJECTED_NS, .timeout_ms = 5000};
  for (int i = 0; i < n; i++) {
    int rc = spy_clock_serve(seg, &o);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static void *peer_thread(void *arg) {
  peer *p = arg;
  p->rc = serve_n(p->seg, p->syncs);
  return NULL;
}

/* Runs n syncs; err[i] = |offset error| µs, rtt[i] µs. */
static int run_syncs(spy_clock_seg *seg, int n, double *err, double *rtt) {
  spy_clock_opts o = {.timeout_ms = 5000};
  for (int i = 0; i < n; i++) {
    spy_clock_result r;
    int rc = spy_clock_sync(seg, &o, &r);
    if (rc < 0)
      return rc;
    err[i] = fabs((double)(r.offset_ns + INJECTED_NS) / 1e3);
    rtt[i] = (double)r.rtt_ns / 1e3;
  }
  return 0;
}

static void add_row(bench_table *t, const char *name, int n, double *err,
                    double *rtt, double goal) {
  double e50 = bench_quantile(err, (size_t)n, 0.5);
  double e99 = bench_quantile(err, (size_t)n, 0.99);
  double emax = bench_quantile(err, (size_t)n, 1.0);
  double r50 = bench_quantile(rtt, (size_t)n, 0.5);
  double r99 = bench_quantile(rtt, (size_t)n, 0.99);
  bench_row(t, name, (double[]){n, e50, e99, emax, r50, r99, goal});
}

int bench_clock(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench clock [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  int n = o.quick ? 50 : 1000;
  double *err = calloc((size_t)n, sizeof *err);
  double *rtt = calloc((size_t)n, sizeof *rtt);
  if (!err || !rtt) {
    fprintf(stderr, "bench clock: out of memory\n");
    return 1;
  }
  bench_table t = {.title = "bench clock: sync error against an injected "
                            "+1234.567 ms offset (5 rounds per sync)",
                   .cols = {"pair", "syncs", "err_p50_us", "err_p99_us",
                            "err_max_us", "rtt_p50_us", "rtt_p99_us",
                            "goal_p50_us"},
                   .ncols = 8};

  /* Thread <-> thread, anonymous shared mapping. */
  spy_clock_seg *seg;
  if ((rc = spy_clock_create(&seg, NULL, NULL)) < 0)
    goto fail;
  peer pa = {.seg = seg, .syncs = n};
  pthread_t th;
  if (pthread_create(&th, NULL, peer_thread, &pa) != 0) {
    rc = SPY_EAGAIN;
    spy_clock_close(seg);
    goto fail;
  }
  rc = run_syncs(seg, n, err, rtt);
  pthread_join(th, NULL);
  spy_clock_close(seg);
  if (rc < 0 || (rc = pa.rc) < 0)
    goto fail;
  add_row(&t, "thread <-> thread", n, err, rtt, 5);

  /* Process <-> process, named segment in the runtime directory. */
  char name[64];
  snprintf(name, sizeof name, "bench-clock-%ld", (long)getpid());
  if ((rc = spy_clock_create(&seg, name, NULL)) < 0)
    goto fail;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    spy_clock_seg *mine;
    if (spy_clock_open(&mine, name, NULL) < 0)
      _exit(3);
    int crc = serve_n(mine, n);
    spy_clock_close(mine);
    _exit(crc < 0 ? 4 : 0);
  }
  rc = pid < 0 ? SPY_EAGAIN : run_syncs(seg, n, err, rtt);
  int status = 0;
  if (pid > 0)
    waitpid(pid, &status, 0);
  spy_clock_close(seg);
  if (rc < 0)
    goto fail;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench clock: the peer process failed\n");
    free(err);
    free(rtt);
    return 1;
  }
  add_row(&t, "process <-> process", n, err, rtt, 20);
  t.notes[t.nnotes++] = "err = |recovered offset - injected offset|; rtt of "
                        "the round kept (median RTT of 5)";
  t.notes[t.nnotes++] = "process <-> process: fork, the child opens the "
                        "named segment in the runtime directory by name";
  bench_print(&t, &o);
  free(err);
  free(rtt);
  return 0;
fail:
  fprintf(stderr, "bench clock: %s\n", spy_strerror(rc));
  free(err);
  free(rtt);
  return 1;
}
