/* fuzz_link.c — libFuzzer target for the link record decoder, fed as a
 * bridge reads a client: a stream of records with the client's bound;
 * each FRAME's wire frame then goes through the frame decoder. Whatever
 * the bytes: an error or records within the bytes given, never a crash,
 * an overread or an unbounded allocation. */
#include <stddef.h>
#include <stdint.h>

#include "spyglass/net.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  /* The first byte picks the bound: small (a client) or the largest. */
  size_t bound = size && (data[0] & 1) ? SPY_LINK_PAYLOAD_MAX : 4096;
  while (off < size) {
    spy_link_rec r;
    int n = spy_link_parse(data + off, size - off, bound, &r);
    if (n <= 0)
      break;
    uint64_t acc = r.op + r.chan + r.len + r.id + r.t[0] + r.t[1] + r.t[2];
    if (r.text_len)
      acc += (uint8_t)r.text[r.text_len - 1];
    if (r.op == SPY_LINK_FRAME) {
      spy_frame f;
      acc += r.frame[r.frame_len - 1];
      if (spy_frame_decode(r.frame, r.frame_len, &f, NULL) == 0) {
        size_t cur = 0;
        spy_section s;
        while (spy_frame_next_section(&f, &cur, &s))
          acc += s.len ? s.data[s.len - 1] : 0;
      }
    }
    sink += acc;
    off += (size_t)n;
  }
  return 0;
}
