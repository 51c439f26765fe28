/* gen_corpus.c — writes the seed corpus for fuzz_frame: one valid frame of
 * each message type and section kind, plus a stream of several. Run by
 * hand (`build/…/fuzz/gen_corpus fuzz/corpus/frame`) when the wire format
 * grows; its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/clock.h"
#include "spyglass/profiler.h"
#include "spyglass/wire.h"

static const char *dir;

static void save(const char *name, const uint8_t *p, int n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || n <= 0) {
    fprintf(stderr, "cannot write %s (%d)\n", path, n);
    return;
  }
  fwrite(p, 1, (size_t)n, f);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus DIR\n");
    return 2;
  }
  dir = argv[1];
  static uint8_t b[1 << 16], stream[1 << 17];
  size_t slen = 0;
  spy_frame_writer w;
  int n;
#define KEEP(name)                                                             \
  do {                                                                         \
    n = spy_frame_finish(&w);                                                  \
    save(name, b, n);                                                          \
    if (n > 0 && slen + (size_t)n <= sizeof stream) {                          \
      memcpy(stream + slen, b, (size_t)n);                                     \
      slen += (size_t)n;                                                       \
    }                                                                          \
  } while (0)

  spy_frame_start(&w, b, sizeof b, SPY_MSG_PING, 1700000000000ull, 1, 0);
  KEEP("ping");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_PROVIDER_ANNOUNCE, 1, 2, 0);
  spy_provider_info p = {.id = 42, .pid = 7, .name = "demo", .subscribers = 1};
  spy_put_provider(&w, &p);
  KEEP("announce");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_ACK, 1, 3, 0);
  spy_put_peer(&w, 9, SPY_FEAT_STATS);
  KEEP("ack");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_SUBSCRIBE, 1, 4, 0);
  const char *reg[] = {"camera"};
  spy_buffer_request br = {.name = "color", .mode = SPY_BUFFER_THUMBNAIL};
  spy_subscription sub = {.consumer = 9,
                          .features = 0xFF,
                          .flags = SPY_SUB_REGISTRY_FILTER,
                          .n_registry = 1,
                          .n_buffers = 1,
                          .registry = reg,
                          .buffers = &br};
  spy_put_subscription(&w, &sub);
  KEEP("subscribe");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 1, 5, SPY_FRAME_SNAPSHOT);
  int16_t fps[3] = {600, 590, 580};
  uint16_t cpu[3] = {100, 200, 300}, gpu[3] = {SPY_GPU_NONE, 50, 60};
  uint32_t ctr[6] = {1, 2, 3, 4, 5, 6};
  spy_stats_batch sb = {.start_frame = 1,
                        .count = 3,
                        .n_counters = 2,
                        .fps_x10 = fps,
                        .cpu_x100 = cpu,
                        .gpu_x100 = gpu,
                        .counters = ctr};
  spy_put_stats(&w, &sb);
  const char *names[] = {"draws", "passes"};
  spy_put_name_list(&w, SPY_SEC_STATS_SCHEMA, names, 2);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_REGISTRY, SPY_DELTA_FULL);
  spy_value v = {.kind = SPY_VAL_FLOAT3, .v.f = {1, 2, 3}};
  spy_delta_put(&d, SPY_DELTA_SET, "camera", 6, &v);
  v.kind = SPY_VAL_STRING;
  v.v.s.ptr = "hello";
  v.v.s.len = 5;
  spy_delta_put(&d, SPY_DELTA_SET, "greeting", 8, &v);
  spy_delta_put(&d, SPY_DELTA_CLEARED, "old", 3, NULL);
  spy_delta_end(&d);
  uint64_t h[SPY_HEALTH_FIELD_COUNT] = {1, 2, 3};
  spy_put_health(&w, h, SPY_HEALTH_FIELD_COUNT);
  KEEP("data");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_BUFFER_RAW, 1, 6, 0);
  uint8_t rgba[16] = {0};
  spy_pixels px = {
      .width = 2, .height = 2, .name = "color", .data = rgba, .data_len = 16};
  spy_put_pixels(&w, &px);
  KEEP("pixels");
  /* A data frame carrying a profiler summary of two types. */
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 1, 7, 0);
  static spy_msgprof_summary ms = {
      .messages = 12,
      .errors = 1,
      .elapsed_ns = 1000000000,
      .n_types = 2,
      .types = {{.type = SPY_MSG_DATA,
                 .count = 10,
                 .bytes = 108320,
                 .encode = {350, 340, 500, 600},
                 .post = {700, 690, 900, 950}},
                {.type = SPY_MSG_BUFFER_RAW,
                 .count = 2,
                 .errors = 1,
                 .bytes = 1048660,
                 .encode = {34000, 34000, 34000, 34000},
                 .post = {40000, 40000, 40000, 40000}}}};
  spy_put_msgprof(&w, &ms);
  KEEP("msgprof");
  spy_frame_start(&w, b, sizeof b, SPY_MSG_CLOCK, 1, 8, 0);
  spy_clock_msg cm = {.op = SPY_CLOCK_OP_RESULT,
                      .rounds = 5,
                      .provider = 42,
                      .consumer = 9,
                      .offset_ns = -1234567000,
                      .rtt_ns = 470};
  spy_put_clock(&w, &cm);
  KEEP("clock");
  save("stream", stream, (int)slen);
  return 0;
}
