/* test_prof_cli.c — the profiler and clock as the CLI shows them: `spyglass
 * decode` printing MSGPROF and CLOCK sections (and refusing a malformed
 * one), and `spyglass bench clock|msgprof --quick --json` running to the
 * end with a table. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spyglass/clock.h"
#include "spyglass/profiler.h"
#include "testlib.h"
#include "testutil.h"

static char out[1 << 16];

/* Runs a shell command, captures stdout into `out`, returns the exit
 * code (-1 if it did not exit). */
static int run(const char *cmd) { return tu_run_capture(cmd, out, sizeof out); }

/* Writes b[0..n) to a scratch file and runs `spyglass decode` on it;
 * returns decode's exit code, or -1 if the file could not be written. */
static int decode_bytes(const uint8_t *b, int n) {
  char path[] = "/tmp/spy_prof_cli_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  ssize_t w = n > 0 ? write(fd, b, (size_t)n) : -1;
  close(fd);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s decode %s 2>/dev/null", SPY_TOOL_PATH, path);
  int rc = w == n ? run(cmd) : -1;
  unlink(path);
  return rc;
}

TEST(decode_prints_msgprof_and_clock_sections) {
  static uint8_t b[4096];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 1, 1, 0);
  static spy_msgprof_summary s = {.messages = 3,
                                  .n_types = 1,
                                  .types = {{.type = SPY_MSG_BUFFER_RAW,
                                             .count = 3,
                                             .bytes = 3145980,
                                             .encode = {1, 2, 3, 4},
                                             .post = {5, 6, 7, 8}}}};
  spy_put_msgprof(&w, &s);
  int n = spy_frame_finish(&w);
  spy_frame_start(&w, b + n, sizeof b - (size_t)n, SPY_MSG_CLOCK, 1, 2, 0);
  spy_clock_msg c = {.op = SPY_CLOCK_OP_RESULT,
                     .rounds = 5,
                     .provider = 1,
                     .consumer = 2,
                     .offset_ns = -1234567000,
                     .rtt_ns = 480};
  spy_put_clock(&w, &c);
  int m = spy_frame_finish(&w);
  CHECK(n > 0 && m > 0);
  CHECK_EQ(decode_bytes(b, n + m), 0);
  CHECK(strstr(out, "\"name\":\"msgprof\""));
  CHECK(strstr(out, "\"type\":\"buffer:raw\""));
  CHECK(strstr(out, "\"post\":{\"mean_ns\":5,\"p50_ns\":6,\"p99_ns\":7"));
  CHECK(strstr(out, "\"name\":\"clock\""));
  CHECK(strstr(out, "\"op\":\"result\""));
  CHECK(strstr(out, "\"offset_ns\":-1234567000"));
}

TEST(decode_rejects_a_malformed_msgprof_section) {
  uint8_t b[256];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 1, 1, 0);
  spy_frame_section_begin(&w, SPY_SEC_MSGPROF);
  spy_frame_put_u32(&w, 1); /* one entry announced, none present */
  uint8_t zero[28] = {0};
  spy_frame_put(&w, zero, sizeof zero);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  CHECK_EQ(decode_bytes(b, n), 2);
}

TEST(bench_clock_and_msgprof_run_with_json) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s bench clock --quick --json", SPY_TOOL_PATH);
  CHECK_EQ(run(cmd), 0);
  CHECK(strstr(out, "\"bench\":"));
  CHECK(strstr(out, "thread <-> thread"));
  CHECK(strstr(out, "process <-> process"));
  CHECK(strstr(out, "\"err_p50_us\":"));
  snprintf(cmd, sizeof cmd, "%s bench msgprof --quick --json", SPY_TOOL_PATH);
  CHECK_EQ(run(cmd), 0);
  CHECK(strstr(out, "flush: post, profiler hooked"));
  CHECK(strstr(out, "1 MiB raw: measure()"));
  CHECK(strstr(out, "\"x_unhooked\":"));
  snprintf(cmd, sizeof cmd, "%s bench clock --bogus 2>/dev/null",
           SPY_TOOL_PATH);
  CHECK_EQ(run(cmd), 2);
}

/* The x_unhooked of row `op` in bench JSON, or -1. */
static double row_ratio(const char *json, const char *op) {
  char key[128];
  snprintf(key, sizeof key, "\"op\":\"%s\"", op);
  const char *p = strstr(json, key);
  p = p ? strstr(p, "\"x_unhooked\":") : NULL;
  return p ? atof(p + strlen("\"x_unhooked\":")) : -1;
}

/* "encode only" is a part of "post, no hook" (acquire + the same encode +
 * the enqueue), timed interleaved with it: its median cannot be well
 * above the post's unless the two start from unlike states. They did
 * (the post found its buffers still in this core's cache after "encode
 * only", the others took them back from the worker's CPU): 3-12x with
 * the two threads on two CPUs. A ratio of two medians of the same run,
 * not a speed: the bound is loose (1.5 on the median of three runs) for
 * a loaded machine. */
TEST(bench_msgprof_encode_only_is_not_above_the_post_that_includes_it) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s bench msgprof --quick --json", SPY_TOOL_PATH);
  double r[3];
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(run(cmd), 0);
    r[i] = row_ratio(out, "flush: encode only");
    fprintf(stderr, "  flush: encode only = %.2f x post, no hook\n", r[i]);
    CHECK(r[i] > 0);
  }
  /* the median of the three runs: one run on a busy machine may read
   * 1.4; the defect read 3-12 in every run */
  double lo = r[0] < r[1] ? r[0] : r[1], hi = r[0] < r[1] ? r[1] : r[0];
  double mid = r[2] < lo ? lo : r[2] > hi ? hi : r[2];
  CHECK(mid <= 1.5);
}

TEST_MAIN(
    TEST_CASE(decode_prints_msgprof_and_clock_sections),
    TEST_CASE(decode_rejects_a_malformed_msgprof_section),
    TEST_CASE(bench_clock_and_msgprof_run_with_json),
    TEST_CASE(bench_msgprof_encode_only_is_not_above_the_post_that_includes_it))
