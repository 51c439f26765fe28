/* bench_dashboard.c — `spyglass bench dashboard`: the browser dashboard
 * under a real headless Chromium on the demo. This process starts the
 * demo (`spyglass demo --headless`, a child) and a bridge serving the
 * dashboard (in-process, on a free loopback port), times the C decoder on
 * bench wire's stats flush, and runs bench/bench_dashboard.mjs (node +
 * playwright-core + /usr/bin/chromium), which measures over the DevTools
 * protocol: the page's main-thread busy time per second while live, its
 * JS heap before and after the run, and web/wire.js decoding the same
 * flush. Reported next to each other: busy % of one core (goal ≤ 5 %), JS
 * vs C decode (a ratio), heap growth (bounded by the recorder).
 *
 *   spyglass bench dashboard [--seconds N] [--playwright DIR] [--json]
 *
 * --seconds: how long the page is measured live (default 10; the issue's
 * heap figure is after 600). --playwright: playwright-core's directory
 * (default: the build tree's npm cache, where the tests install it). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "spyglass/net.h"
#include "spyglass/wire.h"
#include "web.h"

#ifndef SPY_SOURCE_DIR
#define SPY_SOURCE_DIR "."
#endif
#ifndef SPY_BINARY_DIR
#define SPY_BINARY_DIR "."
#endif

static uint8_t flush_buf[1 << 20];
static int flush_len;

static void c_decode(void *arg) {
  (void)arg;
  spy_frame f;
  uint64_t sink = 0;
  if (spy_frame_decode(flush_buf, (size_t)flush_len, &f, NULL) < 0)
    return;
  size_t cur = 0;
  spy_section s;
  while (spy_frame_next_section(&f, &cur, &s)) {
    if (s.id == SPY_SEC_STATS) {
      spy_stats_batch b;
      if (spy_get_stats(&s, &b) < 0)
        continue;
      /* Every column into values, as the JS decoder does. */
      for (uint32_t i = 0; i < b.count; i++) {
        sink += (uint64_t)spy_stats_fps_x10(&b, i) + spy_stats_cpu_x100(&b, i) +
                spy_stats_gpu_x100(&b, i);
        for (uint32_t c = 0; c < b.n_counters; c++)
          sink += spy_stats_counter(&b, c, i);
      }
    } else if (s.id == SPY_SEC_REGISTRY) {
      spy_delta_iter it;
      spy_delta_entry e;
      if (spy_get_delta(&s, &it) < 0)
        continue;
      while (spy_delta_next(&it, &e))
        sink += e.key_len + e.value.kind;
    }
  }
  bench_sink(sink);
}

/* The number after "key": in a flat JSON object, or NAN. */
static double jnum(const char *js, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(js, pat);
  return p ? strtod(p + strlen(pat), NULL) : NAN;
}

int bench_dashboard(int argc, char **argv) {
  const char *usage =
      "usage: spyglass bench dashboard [--seconds N] [--playwright DIR] "
      "[--json] [--quick]\n";
  double seconds = 10;
  const char *pw = SPY_BINARY_DIR "/npm/node_modules/playwright-core";
  char *rest[8];
  int nrest = 0;
  for (int i = 0; i < argc; i++) {
    if (i > 0 && !strcmp(argv[i], "--seconds") && i + 1 < argc) {
      char *end;
      seconds = strtod(argv[++i], &end);
      if (*end || seconds < 1 || seconds > 86400) {
        fprintf(stderr, "spyglass bench dashboard: --seconds wants 1..86400\n");
        return 2;
      }
    } else if (i > 0 && !strcmp(argv[i], "--playwright") && i + 1 < argc) {
      pw = argv[++i];
    } else if (nrest < 7) {
      rest[nrest++] = argv[i];
    }
  }
  rest[nrest] = NULL;
  bench_opts o;
  int rc = bench_parse(nrest, rest, &o, usage);
  if (rc)
    return rc == 1 ? 0 : rc;
  if (o.quick && seconds > 3)
    seconds = 3;
  char pkg[1024];
  snprintf(pkg, sizeof pkg, "%s/package.json", pw);
  if (access(pkg, R_OK) != 0 || access("/usr/bin/chromium", X_OK) != 0) {
    fprintf(stderr,
            "spyglass bench dashboard: needs /usr/bin/chromium and "
            "playwright-core in %s (npm install --prefix DIR playwright-core; "
            "--playwright DIR/node_modules/playwright-core)\n",
            pw);
    return 1;
  }
  char dir[256];
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  /* The C decoder on bench wire's flush. */
  spy_frame_writer w;
  spy_frame_start(&w, flush_buf, sizeof flush_buf, SPY_MSG_DATA, 1, 1, 0);
  bench_put_stats_flush(&w);
  flush_len = spy_frame_finish(&w);
  if (flush_len < 0)
    return 1;
  double c_ns = bench_time_op(c_decode, NULL, o.quick ? 3 : 7, 50);
  char frame_file[300];
  snprintf(frame_file, sizeof frame_file, "%s/flush.bin", dir);
  FILE *ff = fopen(frame_file, "wb");
  if (!ff || fwrite(flush_buf, 1, (size_t)flush_len, ff) != (size_t)flush_len) {
    perror(frame_file);
    return 1;
  }
  fclose(ff);
  /* The demo, and the bridge with the dashboard. */
  pid_t demo = fork();
  if (demo == 0) {
    execl("/proc/self/exe", "spyglass", "demo", "--headless", "--name",
          "bench-dashboard", "--dir", dir, (char *)NULL);
    _exit(127);
  }
  tool_web_install();
  spy_server *srv = NULL;
  spy_server_desc sd = {.listen = "127.0.0.1:0", .dir = dir};
  rc = spy_server_thread_start(&srv, &sd);
  if (rc < 0) {
    fprintf(stderr, "spyglass bench dashboard: bridge: %s\n", spy_strerror(rc));
    kill(demo, SIGTERM);
    waitpid(demo, NULL, 0);
    return 1;
  }
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "SPY_PW='%s' SPY_URL='http://127.0.0.1:%d/' SPY_FRAME='%s' "
           "SPY_SECONDS=%g SPY_PROFILE='%s/profile' node '%s' 2>&1",
           pw, spy_server_port(srv), frame_file, seconds, dir,
           SPY_SOURCE_DIR "/bench/bench_dashboard.mjs");
  FILE *p = popen(cmd, "r");
  char out[8192] = "";
  size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
  out[n] = 0;
  int st = p ? pclose(p) : -1;
  spy_server_thread_stop(srv);
  kill(demo, SIGTERM);
  waitpid(demo, NULL, 0);
  char rm[300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0)
    fprintf(stderr, "spyglass bench dashboard: could not remove %s\n", dir);
  const char *js = strstr(out, "{\"seconds\"");
  if (st != 0 || !js) {
    fprintf(stderr, "spyglass bench dashboard: the browser run failed:\n%s\n",
            out);
    return 1;
  }
  double busy = jnum(js, "busy_pct"), script = jnum(js, "script_pct");
  double h0 = jnum(js, "heap_start_mib"), h1 = jnum(js, "heap_end_mib");
  double js_ns = jnum(js, "js_decode_ns");
  bench_table t = {.title = "bench dashboard: the page's main thread, live "
                            "on the demo (headless Chromium, CDP metrics)",
                   .cols = {"measure", "value", "goal"},
                   .ncols = 3};
  bench_row(&t, "main-thread CPU % of a core",
            (double[]){jnum(js, "cpu_pct"), 5});
  bench_row(&t, "busy % (task wall time)", (double[]){busy, 5});
  bench_row(&t, "  script %", (double[]){script, NAN});
  bench_row(&t, "  style + layout %", (double[]){jnum(js, "layout_pct"), NAN});
  bench_row(&t, "seconds measured", (double[]){jnum(js, "seconds"), NAN});
  bench_row(&t, "frames received",
            (double[]){jnum(js, "frames_received"), NAN});
  t.notes[t.nnotes++] =
      "CPU = ThreadTime, busy = TaskDuration, per wall second "
      "(Performance.getMetrics); busy grows with machine load";
  bench_print(&t, &o);
  bench_table t2 = {.title = "bench dashboard: decode of one stats flush "
                             "(240 samples x 11 columns + 50 values)",
                    .cols = {"decoder", "us_per_flush", "vs_C"},
                    .ncols = 3};
  bench_row(&t2, "C (src/wire)", (double[]){c_ns / 1e3, 1});
  bench_row(&t2, "JS (web/wire.js, page)",
            (double[]){js_ns / 1e3, js_ns / c_ns});
  bench_print(&t2, &o);
  bench_table t3 = {.title = "bench dashboard: the page's JS heap (after GC)",
                    .cols = {"when", "MiB", "recorder_frames"},
                    .ncols = 3};
  bench_row(&t3, "start (live 2 s)", (double[]){h0, NAN});
  bench_row(&t3, "end", (double[]){h1, jnum(js, "ring")});
  t3.notes[t3.nnotes++] =
      "bounded by the recorder (1024 frames) and the log (4000 entries); "
      "--seconds 600 for the 10-minute figure";
  bench_print(&t3, &o);
  return 0;
}
