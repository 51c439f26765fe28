/* drawlist.c — the BATCHES and PASSES sections: what a frame drew (the
 * batch list) and its render-pass tree, each a whole list with a version
 * (docs/wire.md). Decoding validates every record before any is handed
 * out. */
#include "spyglass/wire.h"

#define PAD4(n) (((n) + 3u) & ~(size_t)3u)
static const uint8_t zeros[4];

static uint32_t cut(const char *s, uint32_t max) {
  uint32_t n = 0;
  while (s && s[n] && n < max)
    n++;
  return n;
}

void spy_put_batches(spy_frame_writer *w, uint32_t version,
                     const spy_batch_info *b, uint32_t n) {
  if (n > SPY_BATCHES_MAX) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_BATCHES);
  spy_frame_put_u32(w, version);
  spy_frame_put_u32(w, n);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t kl = b[i].kind_len ? b[i].kind_len : cut(b[i].kind, 255);
    uint32_t ml = b[i].key_len ? b[i].key_len : cut(b[i].key, 255);
    if (kl > 255 || ml > 255) {
      if (!w->err)
        w->err = SPY_EINVAL;
      return;
    }
    spy_frame_put_u16(w, (uint16_t)kl);
    spy_frame_put_u16(w, (uint16_t)ml);
    spy_frame_put_u32(w, b[i].instances);
    spy_frame_put_u32(w, b[i].draws);
    spy_frame_put(w, b[i].kind, kl);
    spy_frame_put(w, b[i].key, ml);
    spy_frame_put(w, zeros, PAD4(kl + ml) - (kl + ml));
  }
  spy_frame_section_end(w);
}

int spy_get_batches(const spy_section *s, spy_list_iter *it) {
  if (s->len < 8)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data + 8, *end = s->data + s->len;
  uint32_t n = spy_rd32(s->data + 4);
  if (n > SPY_BATCHES_MAX)
    return SPY_EBADVALUE;
  for (uint32_t i = 0; i < n; i++) {
    if (end - p < 12)
      return SPY_EBADSECTION;
    size_t l = (size_t)spy_rd16(p) + spy_rd16(p + 2);
    if (spy_rd16(p) > 255 || spy_rd16(p + 2) > 255)
      return SPY_EBADVALUE;
    if ((size_t)(end - p - 12) < PAD4(l))
      return SPY_EBADSECTION;
    p += 12 + PAD4(l);
  }
  if (p != end)
    return SPY_EBADSECTION;
  it->version = spy_rd32(s->data);
  it->count = it->left = n;
  it->p = s->data + 8;
  return (int)n;
}

int spy_batches_next(spy_list_iter *it, spy_batch_info *out) {
  if (!it->left)
    return 0;
  const uint8_t *p = it->p;
  out->kind_len = spy_rd16(p);
  out->key_len = spy_rd16(p + 2);
  out->instances = spy_rd32(p + 4);
  out->draws = spy_rd32(p + 8);
  out->kind = (const char *)p + 12;
  out->key = out->kind + out->kind_len;
  it->p += 12 + PAD4((size_t)out->kind_len + out->key_len);
  it->left--;
  return 1;
}

void spy_put_passes(spy_frame_writer *w, uint32_t version,
                    const spy_pass_info *ps, uint32_t n) {
  if (n > SPY_PASSES_MAX) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_PASSES);
  spy_frame_put_u32(w, version);
  spy_frame_put_u32(w, n);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t l = ps[i].label_len ? ps[i].label_len : cut(ps[i].label, 255);
    if (l > 255 || (ps[i].parent != SPY_PASS_ROOT && ps[i].parent >= i)) {
      if (!w->err)
        w->err = SPY_EINVAL;
      return;
    }
    spy_frame_put_u16(w, ps[i].parent);
    spy_frame_put_u16(w, (uint16_t)l);
    spy_frame_put_u32(w, ps[i].draws);
    spy_frame_put_u32(w, ps[i].triangles);
    spy_frame_put_u32(w, ps[i].cpu_us);
    spy_frame_put(w, ps[i].label, l);
    spy_frame_put(w, zeros, PAD4(l) - l);
  }
  spy_frame_section_end(w);
}

int spy_get_passes(const spy_section *s, spy_list_iter *it) {
  if (s->len < 8)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data + 8, *end = s->data + s->len;
  uint32_t n = spy_rd32(s->data + 4);
  if (n > SPY_PASSES_MAX)
    return SPY_EBADVALUE;
  for (uint32_t i = 0; i < n; i++) {
    if (end - p < 16)
      return SPY_EBADSECTION;
    uint32_t parent = spy_rd16(p), l = spy_rd16(p + 2);
    if (l > 255 || (parent != SPY_PASS_ROOT && parent >= i))
      return SPY_EBADVALUE; /* a parent comes before its children */
    if ((size_t)(end - p - 16) < PAD4(l))
      return SPY_EBADSECTION;
    p += 16 + PAD4(l);
  }
  if (p != end)
    return SPY_EBADSECTION;
  it->version = spy_rd32(s->data);
  it->count = it->left = n;
  it->p = s->data + 8;
  return (int)n;
}

int spy_passes_next(spy_list_iter *it, spy_pass_info *out) {
  if (!it->left)
    return 0;
  const uint8_t *p = it->p;
  out->parent = spy_rd16(p);
  out->label_len = spy_rd16(p + 2);
  out->draws = spy_rd32(p + 4);
  out->triangles = spy_rd32(p + 8);
  out->cpu_us = spy_rd32(p + 12);
  out->label = (const char *)p + 16;
  it->p += 16 + PAD4(out->label_len);
  it->left--;
  return 1;
}
