/* buffers.c — the value of a BUFFERS delta entry: a buffer's metadata as
 * a 48-byte BLOB (wire.h spy_buffer_meta, docs/wire.md); the value of a
 * BUFFER_VARIANTS entry (every variant served); and the PROBE section (a
 * pixel's source value). */
#include <string.h>

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

/* ---- BUFFER_VARIANTS values ------------------------------------------- */

void spy_buffer_variants_encode(uint8_t *out, const spy_buffer_variant *v,
                                uint32_t n) {
  for (uint32_t i = 0; i < n && i < SPY_BUFFER_VARIANT_LIST_MAX; i++) {
    uint8_t *p = out + (size_t)i * SPY_BUFFER_VARIANT_BYTES;
    p[0] = v[i].mode;
    p[1] = v[i].display;
    spy_wr16(p + 2, v[i].codec);
    spy_wr16(p + 4, v[i].long_edge);
    spy_wr16(p + 6, 0);
    spy_wr32(p + 8, v[i].served_width);
    spy_wr32(p + 12, v[i].served_height);
  }
}

int spy_buffer_variants_decode(const spy_value *v, spy_buffer_variant *out,
                               uint32_t max) {
  if (!v || v->kind != SPY_VAL_BLOB || (v->v.s.len && !v->v.s.ptr) ||
      v->v.s.len % SPY_BUFFER_VARIANT_BYTES ||
      v->v.s.len > SPY_BUFFER_VARIANT_LIST_MAX * SPY_BUFFER_VARIANT_BYTES)
    return SPY_EBADVALUE;
  uint32_t n = v->v.s.len / SPY_BUFFER_VARIANT_BYTES;
  const uint8_t *p = (const uint8_t *)v->v.s.ptr;
  for (uint32_t i = 0; i < n; i++, p += SPY_BUFFER_VARIANT_BYTES) {
    spy_buffer_variant x = {.mode = p[0],
                            .display = p[1],
                            .codec = spy_rd16(p + 2),
                            .long_edge = spy_rd16(p + 4),
                            .served_width = spy_rd32(p + 8),
                            .served_height = spy_rd32(p + 12)};
    if (x.mode < SPY_BUFFER_THUMBNAIL || x.mode > SPY_BUFFER_STREAM ||
        x.display > 5 /* alpha */ || x.codec > SPY_CODEC_VP9)
      return SPY_EBADVALUE;
    if (i < max)
      out[i] = x;
  }
  return (int)n;
}

/* ---- PROBE ------------------------------------------------------------- */

#define PROBE_ENTRY 36u
#define PROBE_TYPES 6u /* spy_pixel_type values (media.h) */

void spy_put_probe(spy_frame_writer *w, const spy_probe *items, uint32_t n) {
  if (n > SPY_PROBE_MAX) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_PROBE);
  spy_frame_put_u32(w, n);
  spy_frame_put_u32(w, 0);
  static const uint8_t zeros[4];
  for (uint32_t i = 0; i < n; i++) {
    const spy_probe *e = &items[i];
    uint32_t nlen =
        e->name ? (e->name_len ? e->name_len : (uint32_t)strlen(e->name)) : 0;
    if (nlen == 0 || nlen > SPY_KEY_MAX) {
      if (!w->err)
        w->err = SPY_EINVAL;
      return;
    }
    spy_frame_put_u64(w, e->frame);
    spy_frame_put_u32(w, e->x);
    spy_frame_put_u32(w, e->y);
    spy_frame_put_u16(w, e->pixel_type);
    spy_frame_put_u16(w, (uint16_t)nlen);
    spy_frame_put(w, e->value, 16);
    spy_frame_put(w, e->name, nlen);
    spy_frame_put(w, zeros, ((nlen + 3u) & ~3u) - nlen);
  }
  spy_frame_section_end(w);
}

static int probe_entry(const uint8_t *q, const uint8_t *end,
                       const uint8_t **next) {
  if ((size_t)(end - q) < PROBE_ENTRY)
    return SPY_EBADSECTION;
  uint32_t x = spy_rd32(q + 8), y = spy_rd32(q + 12);
  uint32_t type = spy_rd16(q + 16), nlen = spy_rd16(q + 18);
  if (nlen == 0 || nlen > SPY_KEY_MAX || type >= PROBE_TYPES ||
      (x == SPY_PROBE_STOP) != (y == SPY_PROBE_STOP) ||
      (x != SPY_PROBE_STOP && (x >= 16384 || y >= 16384)))
    return SPY_EBADVALUE;
  size_t len = PROBE_ENTRY + ((nlen + 3u) & ~3u);
  if ((size_t)(end - q) < len)
    return SPY_EBADSECTION;
  *next = q + len;
  return 0;
}

int spy_get_probe(const spy_section *s, uint32_t *n) {
  *n = 0;
  if (s->id != SPY_SEC_PROBE || s->len < 8)
    return SPY_EBADSECTION;
  uint32_t count = spy_rd32(s->data);
  if (count > SPY_PROBE_MAX || spy_rd32(s->data + 4) != 0)
    return SPY_EBADVALUE;
  const uint8_t *q = s->data + 8, *end = s->data + s->len;
  for (uint32_t i = 0; i < count; i++) {
    int rc = probe_entry(q, end, &q);
    if (rc < 0)
      return rc;
  }
  if (q != end)
    return SPY_EBADSECTION;
  *n = count;
  return 0;
}

int spy_probe_next(const spy_section *s, const uint8_t **cursor,
                   spy_probe *out) {
  const uint8_t *q = *cursor ? *cursor : s->data + 8, *end = s->data + s->len;
  const uint8_t *next;
  if (q >= end || probe_entry(q, end, &next) < 0)
    return 0;
  memset(out, 0, sizeof *out);
  out->frame = spy_rd64(q);
  out->x = spy_rd32(q + 8);
  out->y = spy_rd32(q + 12);
  out->pixel_type = spy_rd16(q + 16);
  out->name_len = spy_rd16(q + 18);
  memcpy(out->value, q + 20, 16);
  out->name = (const char *)q + PROBE_ENTRY;
  *cursor = next;
  return 1;
}
