/* gen_drawlist_corpus.c — writes the seed corpora for fuzz_batches and
 * fuzz_passes: BATCHES and PASSES section bodies (empty lists, a few
 * batches of two kinds, a nested pass tree, names at the 255-byte bound).
 * Run by hand (`gen_drawlist_corpus fuzz/corpus`) when the sections grow;
 * its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/wire.h"

static void save(const char *dir, const char *sub, const char *name,
                 uint32_t id, const uint8_t *buf, int n) {
  spy_frame f;
  spy_section s;
  char path[512];
  snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
  if (n <= 0 || spy_frame_decode(buf, (size_t)n, &f, NULL) < 0 ||
      !spy_frame_find_section(&f, id, &s)) {
    fprintf(stderr, "cannot make %s/%s\n", sub, name);
    return;
  }
  FILE *o = fopen(path, "wb");
  if (!o) {
    perror(path);
    return;
  }
  fwrite(s.data, 1, s.len, o);
  fclose(o);
}

static int batches(uint8_t *b, size_t cap, uint32_t version,
                   const spy_batch_info *x, uint32_t n) {
  spy_frame_writer w;
  spy_frame_start(&w, b, cap, SPY_MSG_DATA, 0, 0, 0);
  spy_put_batches(&w, version, x, n);
  return spy_frame_finish(&w);
}

static int passes(uint8_t *b, size_t cap, uint32_t version,
                  const spy_pass_info *x, uint32_t n) {
  spy_frame_writer w;
  spy_frame_start(&w, b, cap, SPY_MSG_DATA, 0, 0, 0);
  spy_put_passes(&w, version, x, n);
  return spy_frame_finish(&w);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_drawlist_corpus DIR (with batches/ and "
                    "passes/ in it)\n");
    return 2;
  }
  static uint8_t b[1 << 16];
  static char longname[256];
  memset(longname, 'x', 255);
  const char *d = argv[1];
  save(d, "batches", "empty", SPY_SEC_BATCHES, b,
       batches(b, sizeof b, 1, NULL, 0));
  spy_batch_info bi[] = {
      {.kind = "mesh", .key = "rock.mat", .instances = 120, .draws = 3},
      {.kind = "mesh", .key = "tree.mat", .instances = 40, .draws = 2},
      {.kind = "sprite", .key = "ui", .instances = 300, .draws = 1},
      {.kind = "text", .key = "", .instances = 1, .draws = 1}};
  save(d, "batches", "four", SPY_SEC_BATCHES, b,
       batches(b, sizeof b, 7, bi, 4));
  spy_batch_info lb = {
      .kind = longname, .key = longname, .instances = 1, .draws = 1};
  save(d, "batches", "long_names", SPY_SEC_BATCHES, b,
       batches(b, sizeof b, 2, &lb, 1));
  save(d, "passes", "empty", SPY_SEC_PASSES, b,
       passes(b, sizeof b, 1, NULL, 0));
  spy_pass_info pi[] = {{.label = "frame",
                         .parent = SPY_PASS_ROOT,
                         .draws = 10,
                         .triangles = 90000,
                         .cpu_us = 5000},
                        {.label = "shadow",
                         .parent = 0,
                         .draws = 3,
                         .triangles = 48000,
                         .cpu_us = 1200},
                        {.label = "cascade 0",
                         .parent = 1,
                         .draws = 1,
                         .triangles = 16000,
                         .cpu_us = 400},
                        {.label = "main",
                         .parent = 0,
                         .draws = 6,
                         .triangles = 40000,
                         .cpu_us = 3000},
                        {.label = "ui",
                         .parent = SPY_PASS_ROOT,
                         .draws = 1,
                         .triangles = 2000,
                         .cpu_us = 100}};
  save(d, "passes", "tree", SPY_SEC_PASSES, b, passes(b, sizeof b, 9, pi, 5));
  spy_pass_info lp = {.label = longname, .parent = SPY_PASS_ROOT};
  save(d, "passes", "long_label", SPY_SEC_PASSES, b,
       passes(b, sizeof b, 3, &lp, 1));
  return 0;
}
