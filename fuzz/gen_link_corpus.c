/* gen_link_corpus.c — writes the seed corpus for fuzz_link: a client's
 * whole session (HELLO, OPEN, FRAMEs, CLOCK, CLOSE) as one stream, and a
 * server's answers. Run by hand (`build/…/fuzz/gen_link_corpus
 * fuzz/corpus/link`); its output is committed. */
#include <stdio.h>
#include <string.h>

#include "spyglass/net.h"
#include "spyglass/wire.h"

static uint8_t stream[1 << 16];
static size_t len;

static void add(uint8_t op, uint16_t chan, const void *a, size_t alen,
                const void *b, size_t blen) {
  int n = spy_link_encode(stream + len, sizeof stream - len, op, chan, a, alen,
                          b, blen);
  if (n > 0)
    len += (size_t)n;
}

static void save(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  fwrite(stream, 1, len, f);
  fclose(f);
  len = 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_link_corpus DIR\n");
    return 2;
  }
  uint8_t h[12 + 32], fr[256], pre[8] = {0}, t[24] = {0};
  spy_wr32(h, SPY_LINK_MAGIC);
  spy_wr32(h + 4, SPY_LINK_VERSION);
  spy_wr16(h + 8, 32);
  spy_wr16(h + 10, 0);
  memset(h + 12, 'a', 32);
  /* The client (its first byte odd or even picks the fuzzer's bound). */
  add(SPY_LINK_HELLO, 0, h, sizeof h, NULL, 0);
  add(SPY_LINK_OPEN, 1, "spyglass", 8, NULL, 0);
  add(SPY_LINK_OPEN, 2, "spyglass:0123456789abcdef", 25, NULL, 0);
  spy_frame_writer w;
  spy_frame_start(&w, fr, sizeof fr, SPY_MSG_PROVIDER_QUERY, 1, 0, 0);
  spy_put_peer(&w, 7, 0);
  int n = spy_frame_finish(&w);
  add(SPY_LINK_FRAME, 1, pre, 8, fr, (size_t)n);
  spy_subscription sub = {.consumer = 7, .features = 0xe};
  spy_frame_start(&w, fr, sizeof fr, SPY_MSG_SUBSCRIBE, 1, 0, 0);
  spy_put_subscription(&w, &sub);
  n = spy_frame_finish(&w);
  add(SPY_LINK_FRAME, 2, pre, 8, fr, (size_t)n);
  add(SPY_LINK_CLOCK, 0, t, 8, NULL, 0);
  add(SPY_LINK_CLOSE, 2, pre, 4, NULL, 0);
  save(argv[1], "client");
  /* The server's answers. */
  uint8_t wel[8];
  spy_wr32(wel, 1);
  spy_wr32(wel + 4, 65536);
  add(SPY_LINK_WELCOME, 0, wel, 8, NULL, 0);
  add(SPY_LINK_OPENED, 1, t, 8, NULL, 0);
  spy_frame_start(&w, fr, sizeof fr, SPY_MSG_PING, 1, 5, 0);
  n = spy_frame_finish(&w);
  pre[0] = 2;
  add(SPY_LINK_FRAME, 1, pre, 8, fr, (size_t)n);
  add(SPY_LINK_CLOCK, 0, t, 24, NULL, 0);
  add(SPY_LINK_ERROR, 0, "\xf3\xff\xff\xffwrong token", 15, NULL, 0);
  save(argv[1], "server");
  return 0;
}
