/* buffers.c — the value of a BUFFERS delta entry: a buffer's metadata as
 * a 48-byte BLOB (wire.h spy_buffer_meta, docs/wire.md). */
#include "spyglass/wire.h"

void spy_buffer_meta_encode(uint8_t out[SPY_BUFFER_META_BYTES],
                            const spy_buffer_meta *m) {
  spy_wr16(out, m->pixel_type);
  out[2] = m->mode;
  out[3] = m->display;
  spy_wr32(out + 4, m->width);
  spy_wr32(out + 8, m->height);
  spy_wr32(out + 12, m->served_width);
  spy_wr32(out + 16, m->served_height);
  spy_wr16(out + 20, m->codec);
  spy_wr16(out + 22, m->max_fps);
  spy_wr64(out + 24, m->last_frame);
  spy_wr64(out + 32, m->captured);
  spy_wr64(out + 40, m->dropped);
}

int spy_buffer_meta_decode(const spy_value *v, spy_buffer_meta *out) {
  memset(out, 0, sizeof *out);
  if (!v || v->kind != SPY_VAL_BLOB || v->v.s.len != SPY_BUFFER_META_BYTES ||
      !v->v.s.ptr)
    return SPY_EBADVALUE;
  const uint8_t *p = (const uint8_t *)v->v.s.ptr;
  out->pixel_type = spy_rd16(p);
  out->mode = p[2];
  out->display = p[3];
  out->width = spy_rd32(p + 4);
  out->height = spy_rd32(p + 8);
  out->served_width = spy_rd32(p + 12);
  out->served_height = spy_rd32(p + 16);
  out->codec = spy_rd16(p + 20);
  out->max_fps = spy_rd16(p + 22);
  out->last_frame = spy_rd64(p + 24);
  out->captured = spy_rd64(p + 32);
  out->dropped = spy_rd64(p + 40);
  if (out->mode > SPY_BUFFER_STREAM || out->codec > SPY_CODEC_VP9)
    return SPY_EBADVALUE;
  return 0;
}
