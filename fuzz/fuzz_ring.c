/* fuzz_ring.c — libFuzzer target for the ring reader: arbitrary bytes are
 * laid out as a ring's header and records (and the reader's cursor), then
 * read the way a consumer reads a peer's ring, with the writer optionally
 * posting in between as the real owner would after a neighbour scribbled
 * on its ring. Whatever the bytes, reads stay inside the mapping, return
 * after a bounded number of steps, and report frames no longer than the
 * buffer.
 *
 * Input: [flags][cap][u64 pos][u64 next_seq][160 header bytes][data…];
 * flags: bits 0-1 data size (4 KiB << n), bit 2 keep a valid identity
 * (magic, version, size) so the read path is reached, bit 3 interleave
 * writes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bus/ring.h"
#include "spyglass/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX 18u
#define HDR_FUZZ 160u

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < PREFIX)
    return 0;
  uint32_t data_bytes = 4096u << (data[0] & 3);
  size_t map = SPY_RING_HEADER_BYTES + data_bytes;
  uint8_t *mem = calloc(1, map); /* exactly the mapping: ASan sees overruns */
  if (!mem)
    return 0;
  spy_ring_writer w;
  spy__ring_writer_init(&w, mem, data_bytes, 42, 7, 1);
  size_t hdr_n = size - PREFIX < HDR_FUZZ ? size - PREFIX : HDR_FUZZ;
  uint8_t keep[12];
  memcpy(keep, mem, sizeof keep);
  memcpy(mem, data + PREFIX, hdr_n);
  if (data[0] & 4)
    memcpy(mem, keep, sizeof keep); /* magic, version, data_bytes */
  if (size > PREFIX + HDR_FUZZ) {
    size_t n = size - PREFIX - HDR_FUZZ;
    memcpy(mem + SPY_RING_HEADER_BYTES, data + PREFIX + HDR_FUZZ,
           n < data_bytes ? n : data_bytes);
  }
  spy_ring_reader r;
  if (spy__ring_reader_init(&r, mem, map) == 0) {
    memcpy(&r.pos, data + 2, 8);
    memcpy(&r.next_seq, data + 10, 8);
    size_t cap = 1 + (size_t)data[1] * 37 % data_bytes;
    uint8_t *buf = malloc(cap);
    uint8_t frame[1024];
    memset(frame, 0xA5, sizeof frame);
    for (int i = 0; buf && i < 64; i++) {
      uint64_t lost = 0;
      uint32_t len = 0;
      int n = spy__ring_read(&r, buf, cap, &lost, &len);
      if (n > 0) {
        if ((size_t)n > cap)
          abort(); /* a frame longer than the buffer was reported */
        sink += buf[n - 1];
      }
      sink += lost + (uint64_t)spy__ring_pending(&r);
      if ((data[0] & 8) && i % 4 == 3) {
        uint32_t fl = 1 + (uint32_t)(i * 13) % (data_bytes / 4 - 32);
        spy__ring_write(&w, frame, fl < sizeof frame ? fl : sizeof frame);
      }
    }
    free(buf);
  }
  spy__ring_repair(&w);
  free(mem);
  return 0;
}
