/* test_top_cli.c — `spyglass ls` and `spyglass top` as a user runs them:
 * against `spyglass demo --headless` and against provider processes forked
 * here with known timings (GPU time reported late, so it is attributed),
 * the real tool, JSON read back; the full-screen overlay in a
 * real terminal (tmux, 120x40), its screen read back with its colours;
 * the reconnect path with a provider killed and restarted; error paths
 * and exit codes. Each case has its own runtime directory and tmux
 * server. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "overlay.h"
#include "spyglass/provider.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256], sock[64];
static char out[1 << 17], screen[1 << 17];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

/* A provider process named `name`: frames of cpu_us of work, GPU time
 * gpu_ms resolved one frame late (as timestamp queries arrive), counters,
 * named values and environment; until killed. */
static int extra_values; /* "item.NN" values a provider also sets */

static void provider_main(const char *name, int cpu_us, double gpu_ms) {
  static const char *const app[] = {"enemies"};
  spy_provider_desc d = {.name = name,
                         .dir = dir,
                         .flush_ms = 50,
                         .counters = app,
                         .n_counters = 1};
  spy_provider *p;
  if (spy_provider_create(&p, &d) < 0)
    _exit(3);
  spy_env_set_adapter(p, "test adapter (software)");
  spy_env_set_resolution(p, 640, 480, 2.0);
  for (uint64_t f = 1;; f++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, 3);
    spy_counter_set(p, SPY_COUNTER_PASSES, 1);
    spy_counter_set(p, SPY_COUNTER_PARTICLES, 500);
    spy_counter_set(p, SPY_COUNTER_BUILTIN, 7);
    spy_gpu_issued(p, f);
    if (f > 1)
      spy_gpu_resolved(p, f - 1, gpu_ms);
    spy_value_set_f64(p, "scene.time", (double)f / 60.0);
    spy_value_set_str(p, "scene.name", "test scene");
    for (int i = 0; i < extra_values; i++) {
      char key[32];
      snprintf(key, sizeof key, "item.%02d", i);
      spy_value_set_i64(p, key, i);
    }
    usleep((useconds_t)cpu_us);
    spy_frame_end(p);
    usleep(1000);
  }
}

static void cleanup(void);

/* tu_fork() that keeps this file's cleanup (tmux too) after each case. */
static pid_t fork_child(void) {
  pid_t pid = tu_fork();
  spy_test_after_each_ = cleanup;
  return pid;
}

/* `spyglass demo --headless --name NAME`: the real program to inspect,
 * its GPU times coming late from its device thread. */
static pid_t spawn_demo(const char *name) {
  pid_t pid = fork_child();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) ||
        !freopen("/dev/null", "w", stderr))
      _exit(126);
    execl(SPY_TOOL_PATH, "spyglass", "demo", "--headless", "--name", name,
          "--dir", dir, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static pid_t spawn_provider(const char *name, int cpu_us, double gpu_ms) {
  pid_t pid = fork_child();
  if (pid == 0)
    provider_main(name, cpu_us, gpu_ms);
  return pid;
}

/* Runs `spyglass ARGS` (with --dir added by the caller), stdout into
 * `out`; returns the exit code. */
static int run(const char *args) {
  char cmd[2048];
  int n = snprintf(cmd, sizeof cmd, "%s %s 2>%s/err", SPY_TOOL_PATH, args, dir);
  if (n < 0 || (size_t)n >= sizeof cmd)
    return -1;
  return tu_run_capture(cmd, out, sizeof out);
}

/* run() with the arguments formatted and this case's --dir added. */
static int runf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int runf(const char *fmt, ...) {
  char args[768];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  if (n > 0 && (size_t)n < sizeof args)
    snprintf(args + n, sizeof args - (size_t)n, " --dir %s", dir);
  return run(args);
}

static char err_text[4096];
static void read_err(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/err", dir);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(err_text, 1, sizeof err_text - 1, f) : 0;
  err_text[n] = 0;
  if (f)
    fclose(f);
}

/* The number after "key": in a JSON text; NAN if absent or null. */
static double json_number(const char *json, const char *key) {
  char k[128];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = strstr(json, k);
  if (!p || strncmp(p + strlen(k), "null", 4) == 0)
    return NAN;
  return strtod(p + strlen(k), NULL);
}

/* ---- tmux --------------------------------------------------------------- */

static void tmux(const char *args) {
  char cmd[1536];
  snprintf(cmd, sizeof cmd, "tmux -L %s -f /dev/null %s >/dev/null 2>&1", sock,
           args);
  if (system(cmd) != 0) {
    /* kill-server on a server that is gone already: fine */
  }
}

/* Stops this case's tmux server and removes its socket (which a killed
 * server leaves behind). */
static void tmux_stop(void) {
  if (!sock[0])
    return;
  tmux("kill-server");
  const char *tmp = getenv("TMUX_TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/tmux-%d/%s", tmp && *tmp ? tmp : "/tmp",
           (int)getuid(), sock);
  unlink(path);
}

/* Starts `spyglass top TOP_ARGS` full screen in a 120x40 tmux pane. */
static void tmux_top(const char *top_args) {
  snprintf(sock, sizeof sock, "spytop%d", (int)getpid());
  tmux_stop();
  char args[1024];
  snprintf(args, sizeof args,
           "new-session -d -x 120 -y 40 'env LANG=C.UTF-8 LC_ALL=C.UTF-8 "
           "%s top --dir %s %s; sleep 30'",
           SPY_TOOL_PATH, dir, top_args);
  tmux(args);
}

/* The screen, with colour escapes if `escapes`. */
static void capture(int escapes) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "tmux -L %s capture-pane -p %s 2>/dev/null", sock,
           escapes ? "-e" : "");
  tu_run_capture(cmd, screen, sizeof screen);
}

/* Captures until every string in `want` (NULL-terminated) is on the
 * screen, for up to `seconds`. The deadlines are bounds, not expected
 * times: sized for top and the providers under ASan on a loaded machine
 * (a passing case is no slower for them). */
static int screen_shows(double seconds, const char *const *want) {
  double end = tu_now_s() + seconds;
  for (;;) {
    capture(0);
    int all = 1;
    for (int i = 0; want[i]; i++)
      all &= strstr(screen, want[i]) != NULL;
    if (all)
      return 1;
    if (tu_now_s() > end) {
      fprintf(stderr, "  screen was:\n%s\n", screen);
      return 0;
    }
    usleep(100000);
  }
}
#define SHOWS(seconds, ...)                                                    \
  screen_shows((seconds), (const char *const[]){__VA_ARGS__, NULL})

/* The first line of `screen` whose text (colour escapes left out)
 * contains `label`, copied with its escapes into buf. */
static const char *line_with(const char *label, char *buf, size_t cap) {
  for (const char *p = screen; *p;) {
    size_t n = strcspn(p, "\n"), k = 0;
    char text[4096];
    for (size_t i = 0; i < n && k + 1 < sizeof text; i++) {
      if (p[i] == '\033') { /* skip ESC [ params letter */
        while (i < n && !isalpha((unsigned char)p[i]))
          i++;
        continue;
      }
      text[k++] = p[i];
    }
    text[k] = 0;
    if (strstr(text, label)) {
      if (n >= cap)
        n = cap - 1;
      memcpy(buf, p, n);
      buf[n] = 0;
      return buf;
    }
    p += n + (p[n] == '\n');
  }
  return NULL;
}

/* The foreground colour (SGR 30..37, 39 = default) in effect at the first
 * character of `line` after `label` for which `pick` holds, escapes
 * skipped; -1 if there is none. */
static int colour_at(const char *line, const char *label,
                     int (*pick)(const char *p)) {
  const char *start = strstr(line, label);
  if (!start)
    return -1;
  int fg = 39;
  for (const char *p = line; *p;) {
    if (p[0] == '\033' && p[1] == '[') {
      const char *q = p + 2;
      int params[16], n = 0, v = 0, have = 0;
      while (*q && (isdigit((unsigned char)*q) || *q == ';')) {
        if (*q == ';') {
          if (n < 16)
            params[n++] = have ? v : 0;
          v = have = 0;
        } else {
          v = v * 10 + (*q - '0');
          have = 1;
        }
        q++;
      }
      if (n < 16)
        params[n++] = have ? v : 0;
      if (*q == 'm')
        for (int i = 0; i < n; i++) {
          if (params[i] == 0 || params[i] == 39)
            fg = 39;
          else if (params[i] >= 30 && params[i] <= 37)
            fg = params[i];
          else if (params[i] >= 90 && params[i] <= 97)
            fg = params[i] - 60;
          else if (params[i] == 38 || params[i] == 48)
            i += i + 1 < n && params[i + 1] == 5 ? 2 : 4;
        }
      p = *q ? q + 1 : q;
      continue;
    }
    if (p >= start + strlen(label) && pick(p))
      return fg;
    p++;
  }
  return -1;
}

static int is_digit(const char *p) { return isdigit((unsigned char)*p); }
static int is_full_block(const char *p) { return strncmp(p, "█", 3) == 0; }
/* Any of the eighth blocks ▁..█ (U+2581..U+2588). */
static int is_block(const char *p) {
  return (unsigned char)p[0] == 0xE2 && (unsigned char)p[1] == 0x96 &&
         (unsigned char)p[2] >= 0x81 && (unsigned char)p[2] <= 0x88;
}

/* The colour of the number on the line labelled `label` (FPS, CPU, GPU)
 * and of the first bar matching `bar` on the chart's bottom row, in the
 * last capture with escapes; -1 where there is none. */
static int number_colour(const char *label) {
  char line[4096], spaced[16];
  snprintf(spaced, sizeof spaced, "%s ", label);
  return line_with(spaced, line, sizeof line) ? colour_at(line, label, is_digit)
                                              : -1;
}
static int bar_colour(int (*bar)(const char *p)) {
  char line[4096];
  return line_with("     0 ", line, sizeof line) ? colour_at(line, "0", bar)
                                                 : -1;
}

enum { GREEN = 32, YELLOW = 33, RED = 31 };

static int level_colour(overlay_level l) {
  return l == LEVEL_GOOD ? GREEN : l == LEVEL_WARN ? YELLOW : RED;
}

/* The number after `label` on its line of the last capture (escapes left
 * out); NAN if there is none. */
static double shown_number(const char *label) {
  char line[4096], text[4096], spaced[16];
  snprintf(spaced, sizeof spaced, "%s ", label);
  if (!line_with(spaced, line, sizeof line))
    return NAN;
  size_t k = 0;
  for (const char *p = line; *p && k + 1 < sizeof text; p++) {
    if (*p == '\033') {
      while (*p && !isalpha((unsigned char)*p))
        p++;
      if (!*p)
        break;
      continue;
    }
    text[k++] = *p;
  }
  text[k] = 0;
  const char *at = strstr(text, spaced);
  return at ? strtod(at + strlen(spaced), NULL) : NAN;
}

/* ---- ls ----------------------------------------------------------------- */

TEST(ls_json_lists_a_headless_demo_in_another_process) {
  fresh_dir();
  pid_t pid = spawn_demo("ls-target");
  char want[64];
  snprintf(want, sizeof want, "\"pid\":%d", (int)pid);
  double end = tu_now_s() + 30;
  int rc;
  do /* the provider may still be starting */
    rc = runf("ls --json --wait 500");
  while (rc == 0 && !strstr(out, want) && tu_now_s() < end);
  CHECK_EQ(rc, 0);
  CHECK(strstr(out, "{\"providers\":[{\"id\":\""));
  CHECK(strstr(out, "\"name\":\"ls-target\""));
  CHECK(strstr(out, want));
  CHECK(strstr(out, "\"kind\":\"user\""));
  CHECK(json_number(out, "uptime_ms") >= 0);
  CHECK(json_number(out, "subscribers") == 0);
  /* The table names it too. */
  CHECK_EQ(runf("ls"), 0);
  CHECK(strstr(out, "NAME"));
  CHECK(strstr(out, "ls-target"));
}

TEST(ls_with_no_provider_prints_an_empty_list_and_exits_0) {
  fresh_dir();
  CHECK_EQ(runf("ls --json --wait 100"), 0);
  CHECK_STR(out, "{\"providers\":[]}\n");
  CHECK_EQ(runf("ls --wait 100"), 0);
  CHECK(strstr(out, "no providers"));
}

TEST(ls_escapes_control_characters_in_provider_names) {
  fresh_dir();
  /* a name that would turn the terminal red and ring its bell */
  spawn_provider("evil\033[31mred\a", 2000, 5.0);
  double end = tu_now_s() + 30;
  int rc;
  do
    rc = runf("ls --wait 300");
  while (rc == 0 && !strstr(out, "evil") && tu_now_s() < end);
  CHECK_EQ(rc, 0);
  CHECK(strstr(out, "evil?[31mred?"));
  CHECK(!strchr(out, '\033'));
  CHECK(!strchr(out, '\a'));
  /* JSON keeps the exact name, escaped */
  CHECK_EQ(runf("ls --json --wait 300"), 0);
  CHECK(strstr(out, "\"name\":\"evil\\u001b[31mred\\u0007\""));
}

/* ---- top --once --json -------------------------------------------------- */

TEST(top_once_json_of_a_headless_demo_has_fps_counters_and_gpu_time) {
  fresh_dir();
  pid_t pid = spawn_demo("once-demo");
  CHECK_EQ(runf("top once-demo --once --json --wait 8000"), 0);
  CHECK(strstr(out, "\"conn\":\"connected\""));
  CHECK(strstr(out, "\"name\":\"once-demo\""));
  char want[64];
  snprintf(want, sizeof want, "\"pid\":%d", (int)pid);
  CHECK(strstr(out, want));
  CHECK(json_number(out, "fps") > 0);
  CHECK(json_number(out, "cpu_ms") >= 0);
  /* The device thread's times, resolved late, were attributed. */
  CHECK(json_number(out, "gpu_ms") > 0);
  CHECK(strstr(out, "\"counters\":{\"draws\":"));
  CHECK(json_number(out, "draws") > 0);
  CHECK(json_number(out, "particles") > 0);
  CHECK(strstr(out, "\"adapter\":\"spyglass software device"));
  CHECK(json_number(out, "width") > 0);
  CHECK(json_number(out, "scene.time") > 0);
  CHECK(strstr(out, "\"camera.position\":["));
  CHECK(strstr(out, "\"cpu_history\":[")); /* the sparkline's samples */
  CHECK(json_number(out, "subscribers") >= 1);
  CHECK(out[strlen(out) - 1] == '\n');
}

TEST(top_once_json_shows_exact_values_of_a_known_provider) {
  fresh_dir();
  spawn_provider("once-target", 2000, 12.5);
  CHECK_EQ(runf("top once-target --once --json --wait 8000"), 0);
  CHECK(fabs(json_number(out, "gpu_ms") - 12.5) < 0.02); /* attributed */
  CHECK(json_number(out, "draws") == 3);
  CHECK(json_number(out, "passes") == 1);
  CHECK(json_number(out, "particles") == 500);
  CHECK(json_number(out, "enemies") == 7);
  CHECK(strstr(out, "\"adapter\":\"test adapter (software)\""));
  CHECK(json_number(out, "width") == 640);
  CHECK(json_number(out, "pixel_ratio") == 2);
  CHECK(strstr(out, "\"scene.name\":\"test scene\""));
  CHECK(strstr(out, "\"paused\":false"));
}

TEST(top_once_json_without_gpu_timings_says_null_not_zero) {
  fresh_dir();
  pid_t pid = fork_child();
  if (pid == 0) {
    spy_provider_desc d = {.name = "no-gpu", .dir = dir, .flush_ms = 50};
    spy_provider *p;
    if (spy_provider_create(&p, &d) < 0)
      _exit(3);
    for (;;) {
      spy_frame_begin(p);
      usleep(1000);
      spy_frame_end(p);
    }
  }
  CHECK_EQ(runf("top --once --json --wait 8000"), 0);
  CHECK(json_number(out, "fps") > 0);
  CHECK(strstr(out, "\"gpu_ms\":null"));
}

/* ---- error paths -------------------------------------------------------- */

TEST(top_unknown_name_is_an_error_with_exit_2) {
  fresh_dir();
  spawn_provider("present", 2000, 5.0);
  double t0 = tu_now_s();
  CHECK_EQ(runf("top absent --once --wait 300"), 2);
  CHECK(tu_now_s() - t0 < 5);
  read_err();
  CHECK(strstr(err_text, "no provider 'absent'"));
  /* Not even full screen: it never starts. */
  CHECK_EQ(runf("top 0123456789abcdef --wait 300"), 2);
}

TEST(bad_options_exit_2_and_help_exits_0) {
  fresh_dir();
  static const char *const bad[] = {
      "top --bogus",      "top --interval", "top --interval abc",
      "top --interval 5", "top --wait -1",  "top a b",
      "ls --bogus",       "ls --wait",      "ls --wait 1x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (runf("%s", bad[i]) != 2) {
      fprintf(stderr, "  '%s' did not exit 2\n", bad[i]);
      CHECK(0);
    }
  }
  CHECK_EQ(run("top --help"), 0);
  CHECK(strstr(out, "usage: spyglass top"));
  CHECK(strstr(out, "exit codes"));
  CHECK_EQ(run("ls --help"), 0);
  CHECK(strstr(out, "usage: spyglass ls"));
  CHECK(strstr(out, "exit codes"));
  CHECK_EQ(run("--help"), 0);
  CHECK(strstr(out, "top"));
}

TEST(top_once_with_no_provider_fails_with_exit_1) {
  fresh_dir();
  CHECK_EQ(runf("top --once --wait 300"), 1);
  read_err();
  CHECK(strstr(err_text, "no provider answered"));
}

TEST(top_without_terminal_prints_a_line_per_interval) {
  fresh_dir();
  spawn_provider("lines", 2000, 5.0);
  char args[512];
  snprintf(args, sizeof args,
           "top --interval 200 --dir %s & p=$!; sleep 2; kill $p", dir);
  run(args); /* in the background: stdout is the pipe, not a terminal */
  CHECK(strstr(out, "lines pid"));
  CHECK(strstr(out, "fps "));
  int n = 0;
  for (const char *p = out; (p = strstr(p, "lines pid")); p++)
    n++;
  CHECK(n >= 3);
}

/* ---- full screen in tmux ------------------------------------------------ */

TEST(top_screen_shows_numbers_sparkline_and_colours) {
  fresh_dir();
  /* ~2 ms of CPU per frame (green), 12 ms of GPU (yellow), FPS in the
   * hundreds (green). */
  spawn_provider("screen-target", 2000, 12.0);
  tmux_top("");
  CHECK(SHOWS(30, "screen-target", "FPS", " ms", "12.00 ms", "DRAW 3",
              "PTS 500", "enemies 7", "RES 640x480 @2",
              "GPU test adapter (software)", "scene.time", "BUS ",
              "subscribers 1", "16.7"));
  /* Each number in its threshold's colour. The FPS and CPU readings
   * follow the machine's load (a 2 ms sleep can take 10 ms on busy cores),
   * so the colour wanted is the one for the number shown; and the first
   * bar is green once a capture finds a 2 ms frame there. */
  int fps_c, cpu_c, want_fps, want_cpu, bar_c, budget;
  char line[4096];
  double end = tu_now_s() + 45;
  do { /* (a slow frame under load rescales the chart for a while: the
          16.7 ms line's label comes back once it has scrolled out) */
    capture(1);
    fps_c = number_colour("FPS");
    cpu_c = number_colour("CPU");
    want_fps = level_colour(overlay_fps_level((float)shown_number("FPS")));
    want_cpu = level_colour(overlay_ms_level((float)shown_number("CPU")));
    bar_c = bar_colour(is_block);
    budget = line_with("  16.7 ", line, sizeof line) != NULL;
  } while (
      (fps_c != want_fps || cpu_c != want_cpu || bar_c != GREEN || !budget) &&
      tu_now_s() < end && usleep(100000) == 0);
  CHECK_EQ(fps_c, want_fps);
  CHECK_EQ(cpu_c, want_cpu);
  CHECK_EQ(number_colour("GPU"), YELLOW); /* 12 ms whatever the load */
  /* The sparkline: bars in block characters, green for 2 ms frames, under
   * its title, with the dashed 16.7 ms line above them. */
  CHECK(strstr(screen, "CPU ms, last 60 frames"));
  CHECK(budget);
  CHECK(strstr(line, "╌ ╌ ╌"));
  CHECK_EQ(bar_colour(is_block), GREEN);
  tmux_stop();
}

TEST(chart_scale_follows_the_samples_and_keeps_the_budget_line) {
  float ms[60];
  int line;
  for (int i = 0; i < 60; i++)
    ms[i] = 0.2f + (float)(i % 3) * 0.1f; /* 0.2..0.4 ms */
  float top = overlay_chart_top(ms, 60, &line);
  CHECK(top >= 0.4f && top <= 0.6f); /* not the old fixed 25 ms */
  CHECK_EQ(line, 0);
  ms[7] = 2.0f; /* a tenth of the budget or more: the line is kept */
  top = overlay_chart_top(ms, 60, &line);
  CHECK_EQ(line, 1);
  CHECK(top > OVERLAY_BUDGET_MS);
  ms[7] = 40.0f; /* over the budget: the scale follows the sample */
  top = overlay_chart_top(ms, 60, &line);
  CHECK_EQ(line, 1);
  CHECK(top >= 40.0f && top <= 50.0f);
  for (int i = 0; i < 60; i++)
    ms[i] = NAN; /* nothing yet */
  top = overlay_chart_top(ms, 60, &line);
  CHECK(top > 0 && isfinite(top));
  CHECK_EQ(line, 0);
}

/* Lines of the chart (the CHART rows under its title) with a bar glyph. */
static int chart_rows_with_bars(void) {
  const char *p = strstr(screen, "CPU ms, last 60 frames");
  if (!p)
    return -1;
  int rows = 0;
  p = strchr(p, '\n');
  for (int r = 0; r < 5 && p; r++) {
    const char *e = strchr(p + 1, '\n');
    for (const char *q = p + 1; q < (e ? e : p + strlen(p)); q++)
      if (is_block(q)) {
        rows++;
        break;
      }
    p = e;
  }
  return rows;
}

TEST(top_chart_scales_sub_millisecond_frames_to_visible_bars) {
  fresh_dir();
  /* ~0.2 ms frames: on a fixed 25 ms scale a flat line of slivers */
  spawn_provider("fast-frames", 200, 1.0);
  tmux_top("fast-frames");
  CHECK(SHOWS(30, "fast-frames", "CPU ms, last 60 frames"));
  /* a loaded machine may stretch a frame past 1.67 ms for a while (then
   * the line is back on the scale): wait for a window without one */
  double end = tu_now_s() + 45;
  int rows = 0;
  do {
    usleep(100000);
    capture(0);
    rows = strstr(screen, "16.7 ms line above the scale")
               ? chart_rows_with_bars()
               : 0;
  } while (rows < 3 && tu_now_s() < end);
  if (rows < 3)
    fprintf(stderr, "  screen was:\n%s\n", screen);
  CHECK(rows >= 3); /* the tallest bars reach 4 of the 5 rows */
  tmux_stop();
}

TEST(top_screen_shows_slow_frames_in_red) {
  fresh_dir();
  /* 40 ms of CPU per frame: FPS ~24 (red), CPU red, GPU 20 ms red; the
   * sparkline's bars are full blocks, red. */
  spawn_provider("slow", 40000, 20.0);
  tmux_top("slow");
  CHECK(SHOWS(30, "slow", "20.00 ms", "CPU ms, last 60 frames"));
  usleep(500000);
  capture(1);
  CHECK_EQ(number_colour("FPS"), RED);
  CHECK_EQ(number_colour("CPU"), RED);
  CHECK_EQ(number_colour("GPU"), RED);
  CHECK_EQ(bar_colour(is_full_block), RED);
  /* q quits: the overlay leaves the screen. */
  tmux("send-keys q");
  double end = tu_now_s() + 20;
  do {
    usleep(100000);
    capture(0);
  } while (strstr(screen, "q quit") && tu_now_s() < end);
  CHECK(!strstr(screen, "q quit"));
  tmux_stop();
}

TEST(top_waits_for_a_provider_and_reconnects_after_it_is_killed) {
  fresh_dir();
  tmux_top("");
  CHECK(SHOWS(20, "waiting for a provider"));
  pid_t p1 = spawn_provider("phoenix", 2000, 5.0);
  char pidtxt[32];
  snprintf(pidtxt, sizeof pidtxt, "pid %d", (int)p1);
  CHECK(SHOWS(30, "phoenix", pidtxt, "live", "FPS"));
  kill(p1, SIGKILL);
  tu_wait(p1, 5);
  CHECK(SHOWS(30, "phoenix", pidtxt, "is gone", "waiting for"));
  pid_t p2 = spawn_provider("phoenix", 2000, 5.0);
  snprintf(pidtxt, sizeof pidtxt, "pid %d", (int)p2);
  CHECK(SHOWS(30, "phoenix", pidtxt, "live", "DRAW 3"));
  CHECK(!strstr(screen, "is gone"));
  tmux_stop();
}

TEST(top_keys_pick_another_provider_and_scroll_the_values) {
  fresh_dir();
  spawn_provider("first", 2000, 5.0);
  tmux_top("first");
  CHECK(SHOWS(30, "first", "live", "VALUES 2"));
  extra_values = 60;                   /* more than the 40-row screen holds */
  spawn_provider("second", 2000, 5.0); /* started later: listed below */
  extra_values = 0;
  double end = tu_now_s() + 30;
  while (!(runf("ls --json --wait 200") == 0 && strstr(out, "\"second\"")) &&
         tu_now_s() < end)
    ;
  tmux("send-keys p");
  CHECK(SHOWS(20, "pick a provider", "first", "second"));
  /* The list is oldest first: "second" is below "first". */
  tmux("send-keys Down Enter");
  CHECK(SHOWS(30, "top  second", "live", "VALUES 62", "1-"));
  CHECK(strstr(screen, "item.00"));
  tmux("send-keys End");
  CHECK(SHOWS(20, "item.59", "of 62"));
  CHECK(!strstr(screen, "item.00"));
  tmux("send-keys Home");
  CHECK(SHOWS(20, "item.00"));
  tmux_stop();
}

TEST(top_screen_survives_a_tiny_terminal_and_a_resize) {
  fresh_dir();
  spawn_provider("tiny", 2000, 5.0);
  tmux_top("");
  CHECK(SHOWS(30, "tiny", "FPS"));
  tmux("resize-window -x 20 -y 5");
  usleep(400000);
  tmux("resize-window -x 100 -y 30");
  CHECK(SHOWS(20, "FPS", "GPU test adapter"));
  capture(0);
  /* Still alive, redrawn to the new size: the key line is the last row. */
  char line[4096];
  CHECK(line_with("q quit", line, sizeof line));
  tmux_stop();
}

static void cleanup(void) {
  tmux_stop();
  tu_reap_children();
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(ls_json_lists_a_headless_demo_in_another_process),
      TEST_CASE(ls_with_no_provider_prints_an_empty_list_and_exits_0),
      TEST_CASE(ls_escapes_control_characters_in_provider_names),
      TEST_CASE(top_once_json_of_a_headless_demo_has_fps_counters_and_gpu_time),
      TEST_CASE(top_once_json_shows_exact_values_of_a_known_provider),
      TEST_CASE(top_once_json_without_gpu_timings_says_null_not_zero),
      TEST_CASE(top_unknown_name_is_an_error_with_exit_2),
      TEST_CASE(bad_options_exit_2_and_help_exits_0),
      TEST_CASE(top_once_with_no_provider_fails_with_exit_1),
      TEST_CASE(top_without_terminal_prints_a_line_per_interval),
      TEST_CASE(top_screen_shows_numbers_sparkline_and_colours),
      TEST_CASE(chart_scale_follows_the_samples_and_keeps_the_budget_line),
      TEST_CASE(top_chart_scales_sub_millisecond_frames_to_visible_bars),
      TEST_CASE(top_screen_shows_slow_frames_in_red),
      TEST_CASE(top_waits_for_a_provider_and_reconnects_after_it_is_killed),
      TEST_CASE(top_keys_pick_another_provider_and_scroll_the_values),
      TEST_CASE(top_screen_survives_a_tiny_terminal_and_a_resize),
  };
  spy_test_after_each_ = cleanup;
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
