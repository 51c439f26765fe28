/* gen_zones_corpus.c — writes the seed corpus for fuzz_zones: ZONES
 * section bodies (locations, nested zones on two threads, frame markers,
 * a reset, a thread gone). Run by hand (`gen_zones_corpus
 * fuzz/corpus/zones`) when the section grows; its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/wire.h"

static void save(const char *dir, const char *name, const uint8_t *buf, int n) {
  spy_frame f;
  spy_section s;
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (n <= 0 || spy_frame_decode(buf, (size_t)n, &f, NULL) < 0 ||
      !spy_frame_find_section(&f, SPY_SEC_ZONES, &s)) {
    fprintf(stderr, "cannot make %s\n", name);
    return;
  }
  FILE *o = fopen(path, "wb");
  if (o) {
    fwrite(s.data, 1, s.len, o);
    fclose(o);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_zones_corpus DIR\n");
    return 2;
  }
  static uint8_t b[1 << 16];
  spy_frame_writer w;
  spy_zones_writer z;
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 0, 0, 0);
  spy_zones_begin(&z, &w, SPY_ZONES_FULL, 1000000);
  const char *names[] = {"frame", "update", "substep", "draw", "submit"};
  for (uint32_t i = 0; i < 5; i++) {
    spy_zone_loc_info l = {.id = 16 + i,
                           .line = 10 + i,
                           .name = names[i],
                           .name_len = (uint32_t)strlen(names[i]),
                           .function = "demo_frame",
                           .function_len = 10,
                           .file = "demo_scene.c",
                           .file_len = 12};
    spy_zones_put_loc(&z, &l);
  }
  spy_zone_thread_info t = {.thread = 1,
                            .os_tid = 100,
                            .name = "main",
                            .name_len = 4,
                            .flags = SPY_ZONES_THREAD_RESET};
  spy_zones_thread_begin(&z, &t);
  uint64_t ns = 1000000;
  for (int f = 0; f < 3; f++) {
    spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, ns, (uint64_t)f);
    spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, ns += 10, 16);
    spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, ns += 100, 17);
    for (int k = 0; k < 4; k++) {
      spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, ns += 50, 18);
      spy_zones_put_event(&z, SPY_ZONE_EV_END, ns += 700, 0);
    }
    spy_zones_put_event(&z, SPY_ZONE_EV_END, ns += 5, 0);
    spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, ns += 5, 19);
    spy_zones_put_event(&z, SPY_ZONE_EV_END, ns += 3000, 0);
    spy_zones_put_event(&z, SPY_ZONE_EV_END, ns += 9, 0);
  }
  t = (spy_zone_thread_info){.thread = 2,
                             .os_tid = 101,
                             .name = "device",
                             .name_len = 6,
                             .flags = SPY_ZONES_THREAD_NAMED,
                             .dropped = 3};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 1000500, 0); /* began earlier */
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 1000600, 20);
  t = (spy_zone_thread_info){.thread = 3, .flags = SPY_ZONES_THREAD_GONE};
  spy_zones_thread_begin(&z, &t);
  spy_zones_end(&z);
  save(argv[1], "two-threads", b, spy_frame_finish(&w));
  spy_frame_start(&w, b, sizeof b, SPY_MSG_DATA, 0, 0, 0);
  spy_zones_begin(&z, &w, 0, 0);
  t = (spy_zone_thread_info){.thread = 1};
  spy_zones_thread_begin(&z, &t);
  for (int d = 0; d < 40; d++)
    spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, (uint64_t)d * 1000000007ull,
                        16 + (uint64_t)d);
  for (int d = 0; d < 40; d++)
    spy_zones_put_event(&z, SPY_ZONE_EV_END, 50000000000ull + (uint64_t)d, 0);
  spy_zones_end(&z);
  save(argv[1], "deep", b, spy_frame_finish(&w));
  return 0;
}
