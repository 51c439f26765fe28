/* stats.c — the STATS section (columnar per-frame samples), the name-list
 * section used for counter names, and the HEALTH section.
 *
 * Samples are stored column by column so the provider's ring copies into a
 * frame with one memcpy per column, and a consumer reads a column without
 * touching the others. Columns are little-endian; on a little-endian host
 * encoding is a plain copy.
 */
#include <string.h>

#include "spyglass/wire.h"

#define STATS_PREFIX 16u

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static void put_col16(spy_frame_writer *w, const void *src, uint32_t n) {
  uint8_t *d = spy_frame_reserve(w, (size_t)n * 2);
  if (!d)
    return;
  if (HOST_LE) {
    memcpy(d, src, (size_t)n * 2);
  } else {
    const uint16_t *s = src;
    for (uint32_t i = 0; i < n; i++)
      spy_wr16(d + 2 * i, s[i]);
  }
}

static void put_col32(spy_frame_writer *w, const void *src, size_t n) {
  uint8_t *d = spy_frame_reserve(w, n * 4);
  if (!d)
    return;
  if (HOST_LE) {
    memcpy(d, src, n * 4);
  } else {
    const uint32_t *s = src;
    for (size_t i = 0; i < n; i++)
      spy_wr32(d + 4 * i, s[i]);
  }
}

void spy_put_stats(spy_frame_writer *w, const spy_stats_batch *b) {
  if (b->count > SPY_STATS_MAX_SAMPLES ||
      b->n_counters > SPY_STATS_MAX_COUNTERS) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, SPY_SEC_STATS);
  uint8_t *h = spy_frame_reserve(w, STATS_PREFIX);
  if (!h)
    return;
  spy_wr64(h, b->start_frame);
  spy_wr32(h + 8, b->count);
  spy_wr16(h + 12, b->n_counters);
  spy_wr16(h + 14, b->flags);
  uint32_t stride = b->counter_stride ? b->counter_stride : b->count;
  if (stride == b->count) {
    if (b->n_counters)
      put_col32(w, b->counters, (size_t)b->n_counters * b->count);
  } else {
    for (uint32_t c = 0; c < b->n_counters; c++)
      put_col32(w, (const uint32_t *)b->counters + (size_t)c * stride,
                b->count);
  }
  put_col16(w, b->fps_x10, b->count);
  put_col16(w, b->cpu_x100, b->count);
  put_col16(w, b->gpu_x100, b->count);
  spy_frame_section_end(w);
}

int spy_get_stats(const spy_section *s, spy_stats_batch *out) {
  memset(out, 0, sizeof *out);
  if (s->len < STATS_PREFIX)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data;
  uint32_t count = spy_rd32(p + 8);
  uint16_t nc = spy_rd16(p + 12);
  if (count > SPY_STATS_MAX_SAMPLES || nc > SPY_STATS_MAX_COUNTERS)
    return SPY_EBADVALUE;
  /* Both bounded above, so this cannot overflow. */
  size_t want = STATS_PREFIX + (size_t)nc * count * 4 + (size_t)count * 6;
  if (s->len != want)
    return SPY_EBADSECTION;
  out->start_frame = spy_rd64(p);
  out->count = count;
  out->n_counters = nc;
  out->flags = spy_rd16(p + 14);
  p += STATS_PREFIX;
  out->counters = p;
  p += (size_t)nc * count * 4;
  out->fps_x10 = p;
  out->cpu_x100 = p + (size_t)count * 2;
  out->gpu_x100 = p + (size_t)count * 4;
  return 0;
}

int16_t spy_stats_fps_x10(const spy_stats_batch *b, uint32_t i) {
  return (int16_t)spy_rd16((const uint8_t *)b->fps_x10 + 2 * (size_t)i);
}
uint16_t spy_stats_cpu_x100(const spy_stats_batch *b, uint32_t i) {
  return spy_rd16((const uint8_t *)b->cpu_x100 + 2 * (size_t)i);
}
uint16_t spy_stats_gpu_x100(const spy_stats_batch *b, uint32_t i) {
  return spy_rd16((const uint8_t *)b->gpu_x100 + 2 * (size_t)i);
}
uint32_t spy_stats_counter(const spy_stats_batch *b, uint32_t c, uint32_t i) {
  return spy_rd32((const uint8_t *)b->counters +
                  4 * ((size_t)c * b->count + i));
}

/* ---- name lists -------------------------------------------------------- */

void spy_put_name_list(spy_frame_writer *w, uint32_t section_id,
                       const char *const *names, uint32_t n) {
  if (n > SPY_SUB_MAX_NAMES) {
    if (!w->err)
      w->err = SPY_EINVAL;
    return;
  }
  spy_frame_section_begin(w, section_id);
  spy_frame_put_u16(w, (uint16_t)n);
  spy_frame_put_u16(w, 0);
  for (uint32_t i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    if (len > SPY_KEY_MAX) {
      if (!w->err)
        w->err = SPY_EINVAL;
      return;
    }
    spy_frame_put_u16(w, (uint16_t)len);
    spy_frame_put(w, names[i], len);
  }
  spy_frame_section_end(w);
}

int spy_get_name_list(const spy_section *s, spy_name_iter *it) {
  memset(it, 0, sizeof *it);
  if (s->len < 4)
    return SPY_EBADSECTION;
  uint32_t n = spy_rd16(s->data);
  if (n > SPY_SUB_MAX_NAMES)
    return SPY_EBADVALUE;
  const uint8_t *p = s->data + 4, *end = s->data + s->len;
  for (uint32_t i = 0; i < n; i++) {
    if (end - p < 2)
      return SPY_EBADSECTION;
    uint32_t len = spy_rd16(p);
    if (len > SPY_KEY_MAX)
      return SPY_EBADVALUE;
    if ((size_t)(end - p - 2) < len)
      return SPY_EBADSECTION;
    p += 2 + len;
  }
  if (p != end)
    return SPY_EBADSECTION;
  it->p = s->data + 4;
  it->end = end;
  it->left = n;
  return (int)n;
}

int spy_name_next(spy_name_iter *it, const char **name, uint32_t *len) {
  if (!it->left)
    return 0;
  *len = spy_rd16(it->p);
  *name = (const char *)it->p + 2;
  it->p += 2 + *len;
  it->left--;
  return 1;
}

/* ---- health ------------------------------------------------------------ */

void spy_put_health(spy_frame_writer *w, const uint64_t *values, uint32_t n) {
  spy_frame_section_begin(w, SPY_SEC_HEALTH);
  spy_frame_put_u32(w, n);
  spy_frame_put_u32(w, 0);
  for (uint32_t i = 0; i < n; i++)
    spy_frame_put_u64(w, values[i]);
  spy_frame_section_end(w);
}

int spy_get_health(const spy_section *s, uint64_t *out, uint32_t max) {
  if (s->len < 8)
    return SPY_EBADSECTION;
  uint32_t n = spy_rd32(s->data);
  if (n > 1024)
    return SPY_EBADVALUE;
  if (s->len != 8 + (size_t)n * 8)
    return SPY_EBADSECTION;
  for (uint32_t i = 0; i < max; i++)
    out[i] = i < n ? spy_rd64(s->data + 8 + 8 * (size_t)i) : 0;
  return (int)n;
}
