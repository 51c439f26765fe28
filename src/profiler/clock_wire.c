/* clock_wire.c — the CLOCK section (id 13) of a clock message: how a
 * consumer and a provider arrange a sync over the bus (clock.h,
 * docs/wire.md). Fixed 40 bytes, every field range-checked. */
#include <string.h>

#include "spyglass/clock.h"

void spy_put_clock(spy_frame_writer *w, const spy_clock_msg *m) {
  spy_frame_section_begin(w, SPY_SEC_CLOCK);
  spy_frame_put_u8(w, m->op);
  spy_frame_put_u8(w, m->rounds);
  spy_frame_put_u16(w, 0);
  spy_frame_put_u32(w, 0);
  spy_frame_put_u64(w, m->provider);
  spy_frame_put_u64(w, m->consumer);
  spy_frame_put_u64(w, (uint64_t)m->offset_ns);
  spy_frame_put_u64(w, (uint64_t)m->rtt_ns);
  spy_frame_section_end(w);
}

int spy_get_clock(const spy_section *s, spy_clock_msg *out) {
  memset(out, 0, sizeof *out);
  if (s->len != SPY_CLOCK_SECTION_BYTES)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data;
  int64_t rtt = (int64_t)spy_rd64(p + 32);
  if (p[0] < SPY_CLOCK_OP_REQUEST || p[0] > SPY_CLOCK_OP_RESULT ||
      p[1] > SPY_CLOCK_MAX_ROUNDS || rtt < 0)
    return SPY_EBADVALUE;
  out->op = p[0];
  out->rounds = p[1];
  out->provider = spy_rd64(p + 8);
  out->consumer = spy_rd64(p + 16);
  out->offset_ns = (int64_t)spy_rd64(p + 24);
  out->rtt_ns = rtt;
  return 0;
}
