/* delta.c — delta-list sections (ENV, REGISTRY, BUFFERS) and typed values.
 *
 * A delta list carries only the keys that changed since the last packet:
 * a key not listed is unchanged, CLEARED resets it, SET replaces it. With
 * SPY_DELTA_FULL the list is the whole state (a snapshot or checkpoint).
 * spy_get_delta() validates every entry before iteration starts, so a
 * consumer never applies half of a malformed list.
 */
#include <string.h>

#include "spyglass/wire.h"

#define ENTRY_HEADER 8u
#define PAD4(n) (((n) + 3u) & ~(size_t)3u)

/* Value size by kind: >= 0 fixed, -1 variable (string, blob). */
static const int8_t kind_sizes[] = {0, 8, 8, 8, 16, 24, 32, 8, 1, -1, -1};
#define KIND_COUNT (sizeof kind_sizes / sizeof kind_sizes[0])

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

/* Copies n bytes with word moves the compiler keeps inline: a call to
 * memcpy for a 12-byte key costs more than the whole rest of an entry.
 * Reads and writes stay within [s, s+n) and [d, d+n). */
static inline void copy_small(uint8_t *d, const uint8_t *s, size_t n) {
  if (n > 64) {
    memcpy(d, s, n);
  } else if (n >= 8) {
    uint64_t x;
    for (size_t i = 0; i + 8 < n; i += 8) {
      memcpy(&x, s + i, 8);
      memcpy(d + i, &x, 8);
    }
    memcpy(&x, s + n - 8, 8);
    memcpy(d + n - 8, &x, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + n - 4, 4);
    memcpy(d, &a, 4);
    memcpy(d + n - 4, &b, 4);
  } else {
    for (size_t i = 0; i < n; i++)
      d[i] = s[i];
  }
}

int spy_value_kind_size(uint32_t kind) {
  return kind < KIND_COUNT ? kind_sizes[kind] : -2;
}

const char *spy_value_kind_name(uint32_t kind) {
  static const char *const names[] = {"none",   "float",  "uint",   "int",
                                      "float2", "float3", "float4", "bits",
                                      "bool",   "string", "blob"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}

void spy_delta_begin(spy_delta_writer *d, spy_frame_writer *w,
                     uint32_t section_id, uint16_t flags) {
  d->w = w;
  d->count = 0;
  d->count_off = 0;
  spy_frame_section_begin(w, section_id);
  spy_frame_put_u16(w, flags);
  spy_frame_put_u16(w, 0);
  uint8_t *c = spy_frame_reserve(w, 4);
  if (c) {
    spy_wr32(c, 0);
    d->count_off = (size_t)(c - w->buf);
  }
}

static void set_err(spy_frame_writer *w, int err) {
  if (!w->err)
    w->err = err;
}

/* Writes a fixed-size value little-endian (the generic path for
 * big-endian hosts; on little-endian ones the union is copied as is). */
static void put_fixed_le(uint8_t *dst, const spy_value *v, int size) {
  switch (v->kind) {
  case SPY_VAL_BOOL: dst[0] = v->v.b ? 1 : 0; break;
  case SPY_VAL_UINT:
  case SPY_VAL_BITS: spy_wr64(dst, v->v.u); break;
  case SPY_VAL_INT: spy_wr64(dst, (uint64_t)v->v.i); break;
  default:
    for (int i = 0; i < size / 8; i++) {
      uint64_t u;
      memcpy(&u, &v->v.f[i], 8);
      spy_wr64(dst + 8 * i, u);
    }
  }
}

void spy_delta_put(spy_delta_writer *d, uint8_t state, const char *key,
                   uint32_t key_len, const spy_value *value) {
  spy_frame_writer *w = d->w;
  if (w->err)
    return;
  uint32_t kind =
      state != SPY_DELTA_CLEARED && value ? value->kind : SPY_VAL_NONE;
  int size = spy_value_kind_size(kind);
  if (key_len - 1u >= SPY_KEY_MAX || (uint8_t)(state - 1u) > 2u || size == -2 ||
      (state != SPY_DELTA_CLEARED && kind == SPY_VAL_NONE)) {
    set_err(w, SPY_EINVAL);
    return;
  }
  if (state == SPY_DELTA_META)
    size = 0; /* kind only */
  size_t vlen = (size_t)size;
  if (size < 0) {
    vlen = value->v.s.len;
    if (vlen > SPY_STRING_MAX || (vlen && !value->v.s.ptr)) {
      set_err(w, SPY_EINVAL);
      return;
    }
  }
  size_t total = PAD4(ENTRY_HEADER + key_len + vlen);
  if (!w->sec_start || total > w->cap - w->len) {
    set_err(w, w->sec_start ? SPY_ENOBUFS : SPY_EINVAL);
    return;
  }
  uint8_t *e = w->buf + w->len;
  memset(e + total - 4, 0, 4); /* the padding (entries are >= 12 bytes) */
  e[0] = state;
  e[1] = (uint8_t)kind;
  spy_wr16(e + 2, (uint16_t)key_len);
  spy_wr32(e + 4, (uint32_t)vlen);
  copy_small(e + ENTRY_HEADER, (const uint8_t *)key, key_len);
  uint8_t *v = e + ENTRY_HEADER + key_len;
  if (size < 0) {
    copy_small(v, (const uint8_t *)value->v.s.ptr, vlen);
  } else if (kind == SPY_VAL_BOOL) {
    *v = value->v.b ? 1 : 0;
  } else if (!vlen) {
    /* CLEARED: no value */
  } else if (HOST_LE) {
    /* f64 / u64 / i64 are stored little-endian already */
    copy_small(v, (const uint8_t *)&value->v, vlen);
  } else {
    put_fixed_le(v, value, size);
  }
  w->len += total;
  d->count++;
}

size_t spy_delta_entry_size(uint32_t key_len, uint32_t value_len) {
  return PAD4(ENTRY_HEADER + (size_t)key_len + value_len);
}

int spy_delta_encode_entry(void *dst, size_t cap, uint8_t state,
                           const char *key, uint32_t key_len,
                           const spy_value *value) {
  spy_frame_writer w = {.buf = dst, .cap = cap, .sec_start = 1, .len = 0};
  spy_delta_writer d = {.w = &w};
  /* sec_start = 1 only marks "inside a section" for spy_delta_put. */
  spy_delta_put(&d, state, key, key_len, value);
  return w.err ? w.err : (int)w.len;
}

void spy_delta_put_encoded(spy_delta_writer *d, const void *entries,
                           size_t bytes, uint32_t count) {
  void *dst = spy_frame_reserve(d->w, bytes);
  if (!dst)
    return;
  memcpy(dst, entries, bytes);
  d->count += count;
}

void spy_delta_end(spy_delta_writer *d) {
  if (!d->w->err && d->count_off)
    spy_wr32(d->w->buf + d->count_off, d->count);
  spy_frame_section_end(d->w);
}

/* Checks one entry at p (avail bytes); returns its padded size or < 0. */
static long check_entry(const uint8_t *p, size_t avail) {
  if (avail < ENTRY_HEADER)
    return SPY_EBADSECTION;
  uint32_t state = p[0], kind = p[1];
  uint32_t klen = spy_rd16(p + 2), vlen = spy_rd32(p + 4);
  if (klen - 1u >= SPY_KEY_MAX || kind >= KIND_COUNT)
    return SPY_EBADVALUE;
  int size = kind_sizes[kind];
  if (state == SPY_DELTA_SET) {
    if (kind == SPY_VAL_NONE ||
        (size >= 0 ? vlen != (uint32_t)size : vlen > SPY_STRING_MAX))
      return SPY_EBADVALUE;
  } else if (state == SPY_DELTA_META) {
    if (kind == SPY_VAL_NONE || vlen)
      return SPY_EBADVALUE;
  } else if (state != SPY_DELTA_CLEARED || kind != SPY_VAL_NONE || vlen) {
    return SPY_EBADVALUE;
  }
  size_t raw = ENTRY_HEADER + klen + (size_t)vlen;
  if (raw > avail)
    return SPY_EBADSECTION;
  size_t padded = PAD4(raw);
  /* The section's last entry may end without padding (the section length
   * is exact); the walk clamps to the end. */
  return (long)(padded > avail ? avail : padded);
}

int spy_get_delta(const spy_section *s, spy_delta_iter *it) {
  memset(it, 0, sizeof *it);
  if (s->len < 8)
    return SPY_EBADSECTION;
  uint32_t n = spy_rd32(s->data + 4);
  /* Each entry needs at least 12 bytes (header + 1-byte key, padded). */
  if (n > (s->len - 8) / 12 + 1)
    return SPY_EBADSECTION;
  const uint8_t *p = s->data + 8, *end = s->data + s->len;
  for (uint32_t i = 0; i < n; i++) {
    long sz = check_entry(p, (size_t)(end - p));
    if (sz < 0)
      return (int)sz;
    p += sz;
  }
  if (p != end)
    return SPY_EBADSECTION;
  it->flags = spy_rd16(s->data);
  it->p = s->data + 8;
  it->end = end;
  it->left = n;
  return (int)n;
}
