/* test_decode_cli.c — `spyglass decode` as a user runs it: a real process
 * fed real files, checking its JSON, its error messages and exit codes. */
#include <sys/wait.h>
#include <unistd.h>

#include "spyglass/wire.h"
#include "testlib.h"

static char dir[] = "/tmp/spy_decode_XXXXXX";
static char out_text[1 << 16], err_text[4096];

static void write_file(const char *name, const void *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  fwrite(p, 1, n, f);
  fclose(f);
}

static void slurp(const char *path, char *dst, size_t cap) {
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(dst, 1, cap - 1, f) : 0;
  dst[n] = 0;
  if (f)
    fclose(f);
}

/* Runs `spyglass decode ARGS < name` and returns its exit code. */
static int run_decode(const char *args, const char *input) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s decode %s </dev/null >%s/out 2>%s/err",
           SPY_TOOL_PATH, args, dir, dir);
  if (input)
    snprintf(cmd, sizeof cmd, "%s decode %s < %s/%s >%s/out 2>%s/err",
             SPY_TOOL_PATH, args, dir, input, dir, dir);
  int st = system(cmd);
  char path[256];
  snprintf(path, sizeof path, "%s/out", dir);
  slurp(path, out_text, sizeof out_text);
  snprintf(path, sizeof path, "%s/err", dir);
  slurp(path, err_text, sizeof err_text);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t stream_of_three(uint8_t *b, size_t cap) {
  size_t off = 0;
  spy_frame_writer w;
  spy_frame_start(&w, b, cap, SPY_MSG_PROVIDER_ANNOUNCE, 1000, 1, 0);
  spy_provider_info p = {.id = 0x1234, .pid = 42, .name = "demo \"x\""};
  spy_put_provider(&w, &p);
  off += (size_t)spy_frame_finish(&w);
  spy_frame_start(&w, b + off, cap - off, SPY_MSG_DATA, 2000, 2, 0);
  int16_t fps[2] = {600, 595};
  uint16_t cpu[2] = {412, 398}, gpu[2] = {SPY_GPU_NONE, 250};
  uint32_t ctr[2] = {5, 6};
  spy_stats_batch s = {.start_frame = 10,
                       .count = 2,
                       .n_counters = 1,
                       .fps_x10 = fps,
                       .cpu_x100 = cpu,
                       .gpu_x100 = gpu,
                       .counters = ctr};
  spy_put_stats(&w, &s);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_ENV, 0);
  spy_value v = {.kind = SPY_VAL_STRING, .v.s = {"software", 8}};
  spy_delta_put(&d, SPY_DELTA_SET, "adapter", 7, &v);
  spy_delta_end(&d);
  off += (size_t)spy_frame_finish(&w);
  spy_frame_start(&w, b + off, cap - off, SPY_MSG_PING, 3000, 3, 0);
  off += (size_t)spy_frame_finish(&w);
  return off;
}

TEST(decode_prints_one_json_object_per_frame) {
  uint8_t b[4096];
  size_t n = stream_of_three(b, sizeof b);
  write_file("ok.bin", b, n);
  CHECK_EQ(run_decode("", "ok.bin"), 0);
  int lines = 0;
  for (char *p = out_text; *p; p++)
    lines += *p == '\n';
  CHECK_EQ(lines, 3);
  CHECK(strstr(out_text, "\"type\":\"provider:announce\""));
  CHECK(strstr(out_text, "\"name\":\"demo \\\"x\\\"\""));
  CHECK(strstr(out_text, "\"fps\":[60,59.5]"));
  CHECK(strstr(out_text, "\"gpu_ms\":[null,2.5]"));
  CHECK(strstr(out_text, "\"key\":\"adapter\""));
  CHECK(strstr(out_text, "\"type\":\"ping\""));
  CHECK(strstr(out_text, "\"seq\":3"));
  /* The same file by path argument. */
  char arg[256];
  snprintf(arg, sizeof arg, "%s/ok.bin", dir);
  CHECK_EQ(run_decode(arg, NULL), 0);
  CHECK(strstr(out_text, "\"type\":\"ping\""));
}

TEST(decode_names_offset_of_truncated_frame_and_exits_2) {
  uint8_t b[4096];
  size_t n = stream_of_three(b, sizeof b);
  write_file("cut.bin", b, n - 5);
  CHECK_EQ(run_decode("", "cut.bin"), 2);
  CHECK(strstr(err_text, "truncated"));
  char want[64];
  snprintf(want, sizeof want, "byte %zu", n - 5);
  CHECK(strstr(err_text, want));
  /* The frames before the cut were still printed. */
  CHECK(strstr(out_text, "provider:announce"));
}

TEST(decode_refuses_4gb_header_without_allocating) {
  uint8_t b[16] = {0xFC, 0xFF, 0xFF, 0xFF, 1};
  write_file("big.bin", b, sizeof b);
  CHECK_EQ(run_decode("", "big.bin"), 2);
  CHECK(strstr(err_text, "byte 0"));
  CHECK(strstr(err_text, "size limit"));
}

TEST(decode_rejects_bad_section_with_its_offset) {
  uint8_t b[4096];
  size_t n = stream_of_three(b, sizeof b);
  (void)n;
  /* Corrupt the STATS count of the second frame (after the first frame
   * and that frame's FRAME section and STATS header: +8 into the body). */
  size_t first = spy_rd32(b);
  spy_wr32(b + first + SPY_FRAME_MIN + 8 + 8, 3);
  write_file("badsec.bin", b, n);
  CHECK_EQ(run_decode("", "badsec.bin"), 2);
  char want[64];
  snprintf(want, sizeof want, "byte %zu", first + SPY_FRAME_MIN);
  CHECK(strstr(err_text, want));
  CHECK(strstr(err_text, "bad section length"));
}

TEST(decode_rejects_unknown_type_and_version) {
  uint8_t b[64];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_PING, 1, 1, 0);
  int n = spy_frame_finish(&w);
  spy_wr32(b + 4, 11);
  write_file("type.bin", b, (size_t)n);
  CHECK_EQ(run_decode("", "type.bin"), 2);
  CHECK(strstr(err_text, "unknown message type"));
  spy_wr32(b + 4, SPY_MSG_PING);
  spy_wr16(b + 24, 9);
  write_file("ver.bin", b, (size_t)n);
  CHECK_EQ(run_decode("", "ver.bin"), 2);
  CHECK(strstr(err_text, "version"));
}

TEST(decode_handles_empty_input_missing_file_and_help) {
  write_file("empty.bin", "", 0);
  CHECK_EQ(run_decode("", "empty.bin"), 0);
  CHECK_EQ(out_text[0], 0);
  CHECK_EQ(run_decode("/nonexistent/file.bin", NULL), 1);
  CHECK(strstr(err_text, "cannot open"));
  CHECK_EQ(run_decode("--help", NULL), 0);
  CHECK(strstr(out_text, "usage: spyglass decode"));
  CHECK_EQ(run_decode("--bogus", NULL), 2);
}

TEST(decode_shows_zones_locations_threads_and_events) {
  uint8_t b[4096];
  spy_frame_writer w;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 1000, 7, 0);
  spy_zones_writer z;
  spy_zones_begin(&z, &w, SPY_ZONES_FULL, 5000);
  spy_zone_loc_info l = {.id = 16,
                         .line = 42,
                         .color = 0x3080ff,
                         .name = "update",
                         .function = "frame",
                         .file = "demo.c",
                         .name_len = 6,
                         .function_len = 5,
                         .file_len = 6};
  spy_zones_put_loc(&z, &l);
  spy_zone_thread_info t = {.thread = 1,
                            .os_tid = 99,
                            .flags = SPY_ZONES_THREAD_NAMED,
                            .name = "render",
                            .name_len = 6,
                            .dropped = 3};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, 5000, 12);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 5100, 16);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 5350, 0);
  spy_zones_thread_end(&z);
  spy_zones_end(&z);
  size_t n = (size_t)spy_frame_finish(&w);
  write_file("zones.bin", b, n);
  CHECK_EQ(run_decode("", "zones.bin"), 0);
  CHECK(strstr(out_text, "\"name\":\"zones\""));
  CHECK(strstr(out_text, "\"full\":true"));
  CHECK(strstr(out_text, "{\"id\":16,\"name\":\"update\",\"function\":"
                         "\"frame\",\"file\":\"demo.c\",\"line\":42"));
  CHECK(strstr(out_text, "\"thread\":1,\"os_tid\":99,\"name\":\"render\""));
  CHECK(strstr(out_text, "\"dropped\":3"));
  CHECK(strstr(out_text, "{\"kind\":\"frame\",\"t_ns\":5000,\"frame\":12}"));
  CHECK(strstr(out_text, "{\"kind\":\"begin\",\"t_ns\":5100,\"loc\":16}"));
  CHECK(strstr(out_text, "{\"kind\":\"end\",\"t_ns\":5350}"));
}

int main(int argc, char **argv) {
  if (!mkdtemp(dir))
    return 1;
  static const struct spy_test_case cases[] = {
      TEST_CASE(decode_prints_one_json_object_per_frame),
      TEST_CASE(decode_names_offset_of_truncated_frame_and_exits_2),
      TEST_CASE(decode_refuses_4gb_header_without_allocating),
      TEST_CASE(decode_rejects_bad_section_with_its_offset),
      TEST_CASE(decode_rejects_unknown_type_and_version),
      TEST_CASE(decode_handles_empty_input_missing_file_and_help),
      TEST_CASE(decode_shows_zones_locations_threads_and_events)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    rc = rc ? rc : 1;
  return rc;
}
