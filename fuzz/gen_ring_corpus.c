/* gen_ring_corpus.c — writes the seed corpus for fuzz_ring: rings written
 * by the real writer (empty, a few frames, wrapped, with padding, lapped
 * cursor), in fuzz_ring's input layout. Run by hand
 * (`build/…/fuzz/gen_ring_corpus fuzz/corpus/ring`); its output is
 * committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus/ring.h"

#define PREFIX 18u
#define HDR_FUZZ 160u

static void save(const char *dir, const char *name, uint8_t flags, uint8_t cap,
                 uint64_t pos, uint64_t next_seq, const uint8_t *mem,
                 uint32_t data_bytes) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  uint8_t pre[PREFIX] = {flags, cap};
  memcpy(pre + 2, &pos, 8);
  memcpy(pre + 10, &next_seq, 8);
  fwrite(pre, 1, sizeof pre, f);
  fwrite(mem, 1, HDR_FUZZ, f);
  fwrite(mem + SPY_RING_HEADER_BYTES, 1, data_bytes, f);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_ring_corpus DIR\n");
    return 2;
  }
  const uint32_t db = 4096;
  uint8_t *mem = calloc(1, SPY_RING_HEADER_BYTES + db);
  uint8_t frame[700];
  for (size_t i = 0; i < sizeof frame; i++)
    frame[i] = (uint8_t)i;
  spy_ring_writer w;
  spy__ring_writer_init(&w, mem, db, 42, 7, 1);
  save(argv[1], "empty", 0, 200, 0, 0, mem, db);
  for (uint32_t i = 0; i < 5; i++)
    spy__ring_write(&w, frame, 10 + i * 40);
  save(argv[1], "few", 0, 200, 0, 0, mem, db);
  save(argv[1], "few_small_buffer", 0, 1, 0, 0, mem, db);
  for (uint32_t i = 0; i < 40; i++)
    spy__ring_write(&w, frame, 100 + (i * 77) % 600);
  save(argv[1], "wrapped_lapped", 0, 255, 0, 0, mem, db);
  save(argv[1], "wrapped_at_resume", 8, 255,
       atomic_load(&((spy_ring_hdr *)mem)->resume), 0, mem, db);
  save(argv[1], "wrapped_interleaved", 8, 255, w.head - 256, w.seq - 2, mem,
       db);
  free(mem);
  return 0;
}
