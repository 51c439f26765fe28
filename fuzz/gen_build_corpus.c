/* gen_build_corpus.c — writes the seed corpus for fuzz_build: BUILD
 * section bodies (an empty build, a running one with plugins and slow
 * calls, an ended one). Run by hand (`gen_build_corpus fuzz/corpus/build`)
 * when the section changes; its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/wire.h"

static void save(const char *dir, const char *name,
                 const spy_build_progress *b) {
  static uint8_t buf[65536];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 0, 0, 0);
  spy_put_build(&w, b);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_section s;
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (n <= 0 || spy_frame_decode(buf, (size_t)n, &f, NULL) < 0 ||
      !spy_frame_find_section(&f, SPY_SEC_BUILD, &s)) {
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
    fprintf(stderr, "usage: gen_build_corpus DIR\n");
    return 2;
  }
  static spy_build_progress b;
  memset(&b, 0, sizeof b);
  b.build = 1;
  b.started_us = 1000;
  save(argv[1], "empty", &b);
  b.modules_done = 3;
  b.hook_calls = 9;
  b.hook_us = 900;
  b.n_plugins = 2;
  strcpy(b.plugins[0].name, "demo:resolver");
  b.plugins[0].calls[1] = 3;
  b.plugins[0].total_us[1] = 300;
  strcpy(b.plugins[1].name, "demo:banner");
  b.plugins[1].calls[0] = 6;
  b.plugins[1].total_us[0] = 600;
  b.plugins[1].max_us = 200;
  b.n_slow = 2;
  b.slow[0] = (spy_build_slow){.hook = 0, .plugin = 1, .dur_us = 200};
  strcpy(b.slow[0].module, "d0/f1.h");
  b.slow[1] = (spy_build_slow){.hook = 1, .plugin = 0, .dur_us = 100};
  strcpy(b.slow[1].module, "d0/f0.h");
  save(argv[1], "running", &b);
  b.flags = SPY_BUILD_ENDED;
  b.ended_us = 5000;
  b.modules_total = 3;
  save(argv[1], "ended", &b);
  return 0;
}
