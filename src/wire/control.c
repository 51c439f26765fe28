/* control.c — payload sections of the control messages: PROVIDER (announce,
 * gone), PEER (query, ack, subscribe:ack, unsubscribe, resync),
 * SUBSCRIPTION (subscribe) and PIXELS (buffer:raw, buffer:chunk).
 * Every decoder checks each length against the section before reading. */
#include <string.h>

#include "spyglass/wire.h"

static void set_err(spy_frame_writer *w, int err) {
  if (!w->err)
    w->err = err;
}

/* ---- PROVIDER ---------------------------------------------------------- */

#define PROVIDER_FIXED 28u

void spy_put_provider(spy_frame_writer *w, const spy_provider_info *p) {
  uint32_t nlen =
      p->name ? (p->name_len ? p->name_len : (uint32_t)strlen(p->name)) : 0;
  if (nlen > SPY_NAME_MAX) {
    set_err(w, SPY_EINVAL);
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_PROVIDER);
  spy_frame_put_u64(w, p->id);
  spy_frame_put_u64(w, p->start_ms);
  spy_frame_put_u32(w, p->pid);
  spy_frame_put_u8(w, p->kind);
  spy_frame_put_u8(w, 0);
  spy_frame_put_u16(w, p->subscribers);
  spy_frame_put_u16(w, (uint16_t)nlen);
  spy_frame_put_u16(w, 0);
  spy_frame_put(w, p->name, nlen);
  spy_frame_section_end(w);
}

int spy_get_provider(const spy_section *s, spy_provider_info *out) {
  memset(out, 0, sizeof *out);
  if (s->len < PROVIDER_FIXED)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data;
  uint32_t nlen = spy_rd16(p + 24);
  if (nlen > SPY_NAME_MAX)
    return SPY_EBADVALUE;
  if (s->len != PROVIDER_FIXED + nlen)
    return SPY_EBADSECTION;
  if (p[20] > SPY_PROVIDER_SYSTEM)
    return SPY_EBADVALUE;
  out->id = spy_rd64(p);
  out->start_ms = spy_rd64(p + 8);
  out->pid = spy_rd32(p + 16);
  out->kind = p[20];
  out->subscribers = spy_rd16(p + 22);
  out->name = (const char *)p + PROVIDER_FIXED;
  out->name_len = nlen;
  return 0;
}

/* ---- PEER -------------------------------------------------------------- */

void spy_put_peer(spy_frame_writer *w, uint64_t id, uint32_t features) {
  spy_frame_section_begin(w, SPY_SEC_PEER);
  spy_frame_put_u64(w, id);
  spy_frame_put_u32(w, features);
  spy_frame_put_u32(w, 0);
  spy_frame_section_end(w);
}

int spy_get_peer(const spy_section *s, spy_peer_info *out) {
  memset(out, 0, sizeof *out);
  if (s->len != 16)
    return SPY_EBADSECTION;
  out->id = spy_rd64(s->data);
  out->features = spy_rd32(s->data + 8);
  return 0;
}

/* ---- SUBSCRIPTION ------------------------------------------------------ */

#define SUB_FIXED 20u

void spy_put_subscription(spy_frame_writer *w, const spy_subscription *s) {
  if (s->n_registry > SPY_SUB_MAX_NAMES || s->n_buffers > SPY_SUB_MAX_NAMES ||
      (s->n_registry && !s->registry) || (s->n_buffers && !s->buffers)) {
    set_err(w, SPY_EINVAL);
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_SUBSCRIPTION);
  spy_frame_put_u64(w, s->consumer);
  spy_frame_put_u32(w, s->features);
  spy_frame_put_u16(w, s->flags);
  spy_frame_put_u16(w, s->n_registry);
  spy_frame_put_u16(w, s->n_buffers);
  spy_frame_put_u16(w, 0);
  for (uint32_t i = 0; i < s->n_registry; i++) {
    size_t len = strlen(s->registry[i]);
    if (len == 0 || len > SPY_KEY_MAX) {
      set_err(w, SPY_EINVAL);
      return;
    }
    spy_frame_put_u16(w, (uint16_t)len);
    spy_frame_put(w, s->registry[i], len);
  }
  for (uint32_t i = 0; i < s->n_buffers; i++) {
    const spy_buffer_request *b = &s->buffers[i];
    uint32_t len =
        b->name ? (b->name_len ? b->name_len : (uint32_t)strlen(b->name)) : 0;
    if (len == 0 || len > SPY_KEY_MAX ||
        (b->mode != SPY_BUFFER_THUMBNAIL && b->mode != SPY_BUFFER_STREAM)) {
      set_err(w, SPY_EINVAL);
      return;
    }
    spy_frame_put_u16(w, (uint16_t)len);
    spy_frame_put(w, b->name, len);
    spy_frame_put_u8(w, b->mode);
    spy_frame_put_u8(w, b->display <= SPY_SUB_DISPLAY_MAX ? b->display : 0);
    spy_frame_put_u16(w, b->long_edge);
  }
  spy_frame_section_end(w);
}

int spy_get_subscription(const spy_section *s, spy_subscription *out) {
  memset(out, 0, sizeof *out);
  if (s->len < SUB_FIXED)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data, *end = s->data + s->len;
  uint16_t nreg = spy_rd16(p + 14), nbuf = spy_rd16(p + 16);
  if (nreg > SPY_SUB_MAX_NAMES || nbuf > SPY_SUB_MAX_NAMES)
    return SPY_EBADVALUE;
  const uint8_t *q = p + SUB_FIXED;
  for (uint32_t i = 0; i < nreg; i++) {
    if (end - q < 2)
      return SPY_EBADSECTION;
    uint32_t len = spy_rd16(q);
    if (len == 0 || len > SPY_KEY_MAX)
      return SPY_EBADVALUE;
    if ((size_t)(end - q - 2) < len)
      return SPY_EBADSECTION;
    q += 2 + len;
  }
  const uint8_t *bufs = q;
  for (uint32_t i = 0; i < nbuf; i++) {
    if (end - q < 2)
      return SPY_EBADSECTION;
    uint32_t len = spy_rd16(q);
    if (len == 0 || len > SPY_KEY_MAX)
      return SPY_EBADVALUE;
    if ((size_t)(end - q - 2) < (size_t)len + 4)
      return SPY_EBADSECTION;
    uint8_t mode = q[2 + len];
    if ((mode != SPY_BUFFER_THUMBNAIL && mode != SPY_BUFFER_STREAM) ||
        q[3 + len] > SPY_SUB_DISPLAY_MAX)
      return SPY_EBADVALUE;
    q += 2 + len + 4;
  }
  if (q != end)
    return SPY_EBADSECTION;
  out->consumer = spy_rd64(p);
  out->features = spy_rd32(p + 8);
  out->flags = spy_rd16(p + 12);
  out->n_registry = nreg;
  out->n_buffers = nbuf;
  out->reg_p = p + SUB_FIXED;
  out->buf_p = bufs;
  out->end = end;
  return 0;
}

int spy_subscription_next_registry(const spy_subscription *s,
                                   const uint8_t **cursor, const char **name,
                                   uint32_t *len) {
  const uint8_t *q = *cursor ? *cursor : s->reg_p;
  if (!q || q >= s->buf_p)
    return 0;
  *len = spy_rd16(q);
  *name = (const char *)q + 2;
  *cursor = q + 2 + *len;
  return 1;
}

int spy_subscription_next_buffer(const spy_subscription *s,
                                 const uint8_t **cursor,
                                 spy_buffer_request *out) {
  const uint8_t *q = *cursor ? *cursor : s->buf_p;
  if (!q || q >= s->end)
    return 0;
  out->name_len = spy_rd16(q);
  out->name = (const char *)q + 2;
  out->mode = q[2 + out->name_len];
  out->display = q[3 + out->name_len];
  out->long_edge = spy_rd16(q + 2 + out->name_len + 2);
  *cursor = q + 2 + out->name_len + 4;
  return 1;
}

/* ---- PIXELS ------------------------------------------------------------ */

#define PIXELS_FIXED 36u
#define PAD4(n) (((n) + 3u) & ~(size_t)3u)

static void *pixels_header(spy_frame_writer *w, const spy_pixels *px);

void spy_put_pixels(spy_frame_writer *w, const spy_pixels *px) {
  if (px->data_len && !px->data) {
    set_err(w, SPY_EINVAL);
    return;
  }
  void *d = pixels_header(w, px);
  if (d && px->data_len)
    memcpy(d, px->data, px->data_len);
  spy_frame_section_end(w);
}

void *spy_put_pixels_reserve(spy_frame_writer *w, const spy_pixels *px) {
  return pixels_header(w, px);
}

/* Writes the section's fixed part and name and reserves the data. */
static void *pixels_header(spy_frame_writer *w, const spy_pixels *px) {
  uint32_t nlen =
      px->name ? (px->name_len ? px->name_len : (uint32_t)strlen(px->name)) : 0;
  if (nlen == 0 || nlen > SPY_KEY_MAX) {
    set_err(w, SPY_EINVAL);
    return NULL;
  }
  spy_frame_section_begin(w, SPY_SEC_PIXELS);
  spy_frame_put_u64(w, px->frame);
  spy_frame_put_u64(w, px->captured_ms);
  spy_frame_put_u32(w, px->width);
  spy_frame_put_u32(w, px->height);
  spy_frame_put_u16(w, px->pixel_type);
  spy_frame_put_u8(w, px->display);
  if (px->variant_mode > SPY_BUFFER_STREAM) {
    set_err(w, SPY_EINVAL);
    return NULL;
  }
  spy_frame_put_u8(w, (uint8_t)((px->key_frame ? SPY_PIXELS_KEY : 0) |
                                (px->part_total ? SPY_PIXELS_PART : 0) |
                                (px->variant_mode ? SPY_PIXELS_VARIANT : 0)));
  spy_frame_put_u16(w, px->codec);
  spy_frame_put_u16(w, (uint16_t)nlen);
  spy_frame_put_u32(w, px->data_len +
                           (px->part_total ? SPY_PIXELS_PART_HEADER : 0));
  spy_frame_put(w, px->name, nlen);
  static const uint8_t zeros[4];
  spy_frame_put(w, zeros, PAD4(nlen) - nlen);
  if (px->variant_mode) {
    spy_frame_put_u8(w, px->variant_mode);
    spy_frame_put_u8(w, 0);
    spy_frame_put_u16(w, px->variant_long_edge);
  }
  if (px->part_total) {
    spy_frame_put_u32(w, px->part_offset);
    spy_frame_put_u32(w, px->part_total);
  }
  return spy_frame_reserve(w, px->data_len);
}

int spy_get_pixels(const spy_section *s, spy_pixels *out) {
  memset(out, 0, sizeof *out);
  if (s->len < PIXELS_FIXED)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data;
  uint32_t nlen = spy_rd16(p + 30), dlen = spy_rd32(p + 32);
  uint32_t width = spy_rd32(p + 16), height = spy_rd32(p + 20);
  uint16_t codec = spy_rd16(p + 28);
  uint8_t flags = p[27];
  if (nlen == 0 || nlen > SPY_KEY_MAX || codec > SPY_CODEC_VP9 ||
      (flags & ~(SPY_PIXELS_KEY | SPY_PIXELS_PART | SPY_PIXELS_VARIANT)))
    return SPY_EBADVALUE;
  if (width > 16384 || height > 16384)
    return SPY_EBADVALUE;
  size_t vb = flags & SPY_PIXELS_VARIANT ? SPY_PIXELS_VARIANT_BYTES : 0;
  if ((size_t)s->len != PIXELS_FIXED + PAD4(nlen) + vb + (size_t)dlen)
    return SPY_EBADSECTION;
  const uint8_t *data = p + PIXELS_FIXED + PAD4(nlen);
  uint8_t vmode = 0;
  uint16_t vedge = 0;
  if (vb) {
    vmode = data[0];
    vedge = spy_rd16(data + 2);
    if (vmode < SPY_BUFFER_THUMBNAIL || vmode > SPY_BUFFER_STREAM || data[1])
      return SPY_EBADVALUE;
    data += vb;
  }
  uint32_t off = 0, total = 0;
  if (flags & SPY_PIXELS_PART) {
    if (dlen < SPY_PIXELS_PART_HEADER)
      return SPY_EBADSECTION;
    off = spy_rd32(data);
    total = spy_rd32(data + 4);
    data += SPY_PIXELS_PART_HEADER;
    dlen -= SPY_PIXELS_PART_HEADER;
    if (total == 0 || total > SPY_PIXELS_TOTAL_MAX || off > total ||
        dlen > total - off)
      return SPY_EBADVALUE;
  }
  uint64_t whole = total ? total : dlen;
  if (codec == SPY_CODEC_RGBA8 && (uint64_t)width * height * 4 != whole)
    return SPY_EBADVALUE;
  out->frame = spy_rd64(p);
  out->captured_ms = spy_rd64(p + 8);
  out->width = width;
  out->height = height;
  out->pixel_type = spy_rd16(p + 24);
  out->display = p[26];
  out->key_frame = (flags & SPY_PIXELS_KEY) != 0;
  out->codec = codec;
  out->name = (const char *)p + PIXELS_FIXED;
  out->name_len = nlen;
  out->data = data;
  out->data_len = dlen;
  out->part_offset = off;
  out->part_total = total;
  out->variant_mode = vmode;
  out->variant_long_edge = vedge;
  return 0;
}
