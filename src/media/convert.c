/* convert.c — pixel formats to display-ready RGBA8 in a display mode,
 * with an area-filter (box) downscale for thumbnails (see media.h).
 *
 * Every source texel is first read as four floats ("values": 8-bit types
 * as v / 255, float types as they are), then mapped to display colours in
 * 0..1 by the mode, and the colours of the source block that a destination
 * pixel covers are averaged. Normalize and signed need the image's range:
 * one pass over the source before the conversion. Same-size RGBA8, BGRA8
 * and R8 in colors mode take copying fast paths (the common stream case).
 *
 * Speed: the per-texel steps are forced inline and the loops are
 * instantiated once per (pixel type, display mode), so no texel goes
 * through a switch or a call; half floats are widened with integer
 * operations (exact, no table, no branch). The arithmetic is the same
 * expression for expression as the one generic loop it replaced, so the
 * bytes are the same (test_buffers_convert.c checks them against it).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "spyglass/error.h"
#include "spyglass/media.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE uint32_t bytes_of(uint32_t type) {
  switch (type) {
  case SPY_PIXEL_RGBA8:
  case SPY_PIXEL_BGRA8: return 4;
  case SPY_PIXEL_RGBA32F: return 16;
  case SPY_PIXEL_R32F: return 4;
  case SPY_PIXEL_R8: return 1;
  case SPY_PIXEL_RGBA16F: return 8;
  default: return 0;
  }
}

uint32_t spy_pixel_bytes(uint32_t type) { return bytes_of(type); }

static const char *const type_names[SPY_PIXEL_TYPE_COUNT] = {
    "rgba8", "bgra8", "rgba32f", "r32f", "r8", "rgba16f"};
static const char *const display_names[] = {"default", "colors", "normalize",
                                            "mono",    "signed", "alpha"};
#define N_DISPLAY (sizeof display_names / sizeof display_names[0])

const char *spy_pixel_type_name(uint32_t type) {
  return type < SPY_PIXEL_TYPE_COUNT ? type_names[type] : NULL;
}
const char *spy_display_name(uint32_t display) {
  return display < N_DISPLAY ? display_names[display] : NULL;
}
int spy_display_parse(const char *name) {
  for (uint32_t i = 0; name && i < N_DISPLAY; i++)
    if (strcmp(name, display_names[i]) == 0)
      return (int)i;
  return -1;
}

static int one_channel(uint32_t type) {
  return type == SPY_PIXEL_R32F || type == SPY_PIXEL_R8;
}

uint32_t spy_display_resolve(uint32_t type, uint32_t display) {
  if (display != SPY_DISPLAY_DEFAULT)
    return display;
  return type == SPY_PIXEL_R32F ? SPY_DISPLAY_NORMALIZE : SPY_DISPLAY_COLORS;
}

void spy_thumbnail_size(uint32_t w, uint32_t h, uint32_t long_edge,
                        uint32_t *tw, uint32_t *th) {
  if (!long_edge)
    long_edge = 256;
  uint32_t l = w > h ? w : h;
  if (l <= long_edge || l == 0) {
    *tw = w;
    *th = h;
    return;
  }
  *tw = (uint32_t)((uint64_t)w * long_edge / l);
  *th = (uint32_t)((uint64_t)h * long_edge / l);
  if (*tw == 0)
    *tw = 1;
  if (*th == 0)
    *th = 1;
}

/* binary16 -> binary32, exactly (every half is a float): normals re-biased
 * in the exponent field, subnormals as their integer mantissa times 2^-24
 * (a normal float, exact), Inf and NaN with their payload. No branch, no
 * table, no subnormal float operand. */
ALWAYS_INLINE float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
  uint32_t norm = (em << 13) + (112u << 23);
  uint32_t special = (em << 13) | 0x7f800000u;
  float sub = (float)em * 0x1p-24f; /* em < 0x400 when it is used */
  uint32_t subb;
  memcpy(&subb, &sub, 4);
  uint32_t bits = sign | (em < 0x400u ? subb : em >= 0x7c00u ? special : norm);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

float spy_half_to_float(uint16_t h) { return half_to_float(h); }

uint16_t spy_float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffffu;
  if (e == 0xff)
    return (uint16_t)(sign | 0x7c00u | (m ? 0x200u : 0));
  int ne = (int)e - 127 + 15;
  if (ne >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (ne <= 0) {
    if (ne < -10)
      return sign;
    m |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - ne);
    uint32_t hm = m >> shift, rem = m & ((1u << shift) - 1),
             half = 1u << (shift - 1);
    if (rem > half || (rem == half && (hm & 1)))
      hm++;
    return (uint16_t)(sign | hm);
  }
  uint32_t hm = m >> 13, rem = m & 0x1fffu;
  uint32_t out = ((uint32_t)ne << 10) | hm;
  if (rem > 0x1000u || (rem == 0x1000u && (hm & 1)))
    out++; /* may carry into the exponent, which is right */
  return (uint16_t)(sign | out);
}

/* One source texel's values. */
ALWAYS_INLINE void values(const uint8_t *p, uint32_t type, float v[4]) {
  switch (type) {
  case SPY_PIXEL_RGBA8:
    for (int i = 0; i < 4; i++)
      v[i] = p[i] * (1.0f / 255.0f);
    break;
  case SPY_PIXEL_BGRA8:
    v[0] = p[2] * (1.0f / 255.0f), v[1] = p[1] * (1.0f / 255.0f);
    v[2] = p[0] * (1.0f / 255.0f), v[3] = p[3] * (1.0f / 255.0f);
    break;
  case SPY_PIXEL_RGBA32F: memcpy(v, p, 16); break;
  case SPY_PIXEL_RGBA16F:
    for (int i = 0; i < 4; i++)
      v[i] = half_to_float((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    break;
  case SPY_PIXEL_R32F:
    memcpy(v, p, 4);
    v[1] = v[2] = v[0];
    v[3] = 1.0f;
    break;
  default: /* R8 */ v[0] = v[1] = v[2] = p[0] * (1.0f / 255.0f); v[3] = 1.0f;
  }
}

ALWAYS_INLINE float clamp01(float v) {
  return v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

typedef struct range {
  float lo, scale; /* normalize: (v - lo) * scale */
  float inv_abs;   /* signed: v * inv_abs in -1..1 */
} range;

/* The range of finite values lo..hi (lo > hi: none, the identity). */
ALWAYS_INLINE range range_of(float lo, float hi) {
  range r = {0.0f, 1.0f, 1.0f};
  if (hi >= lo) {
    r.lo = lo;
    r.scale = hi > lo ? 1.0f / (hi - lo) : 0.0f;
    float a = fabsf(lo) > fabsf(hi) ? fabsf(lo) : fabsf(hi);
    r.inv_abs = a > 0.0f ? 1.0f / a : 0.0f;
  }
  return r;
}

/* Min, max and largest |v| of the colour channels (the one channel of a
 * one-channel type), finite values only. */
ALWAYS_INLINE range image_range(const uint8_t *s, uint32_t w, uint32_t h,
                                size_t stride, uint32_t type) {
  uint32_t bpp = bytes_of(type);
  int nc = one_channel(type) ? 1 : 3;
  float mn = INFINITY, mx = -INFINITY;
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      float v[4];
      values(s + y * stride + (size_t)x * bpp, type, v);
      for (int c = 0; c < nc; c++)
        if (isfinite(v[c])) {
          mn = v[c] < mn ? v[c] : mn;
          mx = v[c] > mx ? v[c] : mx;
        }
    }
  return range_of(mn, mx);
}

/* Values -> display colour in 0..1. */
ALWAYS_INLINE void display(const float v[4], uint32_t type, uint32_t mode,
                           const range *r, float out[4]) {
  switch (mode) {
  case SPY_DISPLAY_NORMALIZE:
    for (int c = 0; c < 3; c++)
      out[c] = isfinite(v[c]) ? clamp01((v[c] - r->lo) * r->scale) : 0.0f;
    out[3] = 1.0f;
    break;
  case SPY_DISPLAY_MONO:
    out[0] = out[1] = out[2] = clamp01(v[0]);
    out[3] = 1.0f;
    break;
  case SPY_DISPLAY_SIGNED:
    if (one_channel(type)) {
      float t = isfinite(v[0]) ? v[0] * r->inv_abs : 0.0f;
      t = t < -1.0f ? -1.0f : t > 1.0f ? 1.0f : t;
      if (t >= 0.0f) /* white to red */
        out[0] = 1.0f, out[1] = out[2] = 1.0f - t;
      else /* white to blue */
        out[2] = 1.0f, out[0] = out[1] = 1.0f + t;
    } else {
      for (int c = 0; c < 3; c++)
        out[c] =
            isfinite(v[c]) ? clamp01(0.5f + 0.5f * v[c] * r->inv_abs) : 0.5f;
    }
    out[3] = 1.0f;
    break;
  case SPY_DISPLAY_ALPHA:
    out[0] = out[1] = out[2] = one_channel(type) ? 1.0f : clamp01(v[3]);
    out[3] = 1.0f;
    break;
  default: /* colors */
    for (int c = 0; c < 4; c++)
      out[c] = clamp01(v[c]);
  }
}

/* Same size, colors: copies and swizzles without the float path. */
static int fast_path(uint8_t *dst, const uint8_t *s, uint32_t w, uint32_t h,
                     size_t stride, uint32_t type) {
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t *row = s + y * stride;
    uint8_t *d = dst + (size_t)y * w * 4;
    if (type == SPY_PIXEL_RGBA8) {
      memcpy(d, row, (size_t)w * 4);
    } else if (type == SPY_PIXEL_BGRA8) {
      for (uint32_t x = 0; x < w; x++, d += 4, row += 4)
        d[0] = row[2], d[1] = row[1], d[2] = row[0], d[3] = row[3];
    } else { /* R8 */
      for (uint32_t x = 0; x < w; x++, d += 4)
        d[0] = d[1] = d[2] = row[x], d[3] = 255;
    }
  }
  return 0;
}

/* The area filter of an 8-bit type in colors mode, in integers. */
static int box8(uint8_t *dst, uint32_t dst_w, uint32_t dst_h, const uint8_t *s,
                uint32_t src_w, uint32_t src_h, size_t stride, uint32_t type,
                const uint32_t *xb) {
  (void)src_w;
  uint32_t bpp = spy_pixel_bytes(type);
  int r = type == SPY_PIXEL_BGRA8 ? 2 : 0, b = type == SPY_PIXEL_BGRA8 ? 0 : 2;
  for (uint32_t y = 0; y < dst_h; y++) {
    uint32_t y0 = (uint32_t)((uint64_t)y * src_h / dst_h);
    uint32_t y1 = (uint32_t)((uint64_t)(y + 1) * src_h / dst_h);
    uint8_t *d = dst + (size_t)y * dst_w * 4;
    for (uint32_t x = 0; x < dst_w; x++, d += 4) {
      uint32_t x0 = xb[x], x1 = xb[x + 1], acc[4] = {0, 0, 0, 0};
      for (uint32_t yy = y0; yy < y1; yy++) {
        const uint8_t *p = s + yy * stride + (size_t)x0 * bpp;
        if (bpp == 1) {
          for (uint32_t xx = x0; xx < x1; xx++)
            acc[0] += *p++;
        } else {
          for (uint32_t xx = x0; xx < x1; xx++, p += 4) {
            acc[0] += p[r];
            acc[1] += p[1];
            acc[2] += p[b];
            acc[3] += p[3];
          }
        }
      }
      uint32_t n = (x1 - x0) * (y1 - y0), h = n / 2;
      if (!n)
        n = 1;
      if (bpp == 1) {
        d[0] = d[1] = d[2] = (uint8_t)((acc[0] + h) / n);
        d[3] = 255;
      } else {
        for (int k = 0; k < 4; k++)
          d[k] = (uint8_t)((acc[k] + h) / n);
      }
    }
  }
  return 0;
}

/* ---- float types at the same size: the stream and raw-frame case -------
 * One texel per pixel, every channel in scalar locals (no per-texel
 * arrays to spill), the same arithmetic as display() so the same bytes:
 * a clamp that sends NaN and negatives to 0 and values above 1 to 1 gives
 * display()'s bytes (it only differs on -0, which is byte 0 either way). */

ALWAYS_INLINE int is_float_type(uint32_t type) {
  return type == SPY_PIXEL_RGBA32F || type == SPY_PIXEL_R32F ||
         type == SPY_PIXEL_RGBA16F;
}

/* Every half as a float, made once on first need (256 KiB): a load per
 * channel instead of the widening's selects, which random data makes
 * branchy. */
static float half_table[65536];
static pthread_once_t half_once = PTHREAD_ONCE_INIT;
static void half_table_make(void) {
  for (uint32_t h = 0; h < 65536; h++)
    half_table[h] = half_to_float((uint16_t)h);
}

/* Channel c of a float texel. */
ALWAYS_INLINE float chan(const uint8_t *p, uint32_t type, int c) {
  float f;
  if (type == SPY_PIXEL_RGBA16F)
    return half_table[p[2 * c] | (p[2 * c + 1] << 8)];
  memcpy(&f, p + 4 * c, 4);
  return f;
}

ALWAYS_INLINE float clamp01b(float x) {
  x = x > 0.0f ? x : 0.0f; /* NaN too */
  return x < 1.0f ? x : 1.0f;
}

ALWAYS_INLINE uint8_t to_byte(float c) { return (uint8_t)(c * 255.0f + 0.5f); }

ALWAYS_INLINE uint8_t norm_byte(float v, const range *r) {
  return to_byte(isfinite(v) ? clamp01b((v - r->lo) * r->scale) : 0.0f);
}

ALWAYS_INLINE uint8_t signed_byte(float v, const range *r) {
  return to_byte(isfinite(v) ? clamp01b(0.5f + 0.5f * v * r->inv_abs) : 0.5f);
}

ALWAYS_INLINE void row_float(uint8_t *d, const uint8_t *p, uint32_t w,
                             uint32_t type, uint32_t mode, const range *r) {
  uint32_t bpp = bytes_of(type);
  for (uint32_t x = 0; x < w; x++, p += bpp, d += 4) {
    uint8_t o0, o1, o2, o3 = 255;
    if (type == SPY_PIXEL_R32F) {
      float v = chan(p, type, 0);
      if (mode == SPY_DISPLAY_NORMALIZE) {
        o0 = o1 = o2 = norm_byte(v, r);
      } else if (mode == SPY_DISPLAY_SIGNED) {
        float t = isfinite(v) ? v * r->inv_abs : 0.0f;
        t = t < -1.0f ? -1.0f : t > 1.0f ? 1.0f : t;
        if (t >= 0.0f) /* white to red */
          o0 = 255, o1 = o2 = to_byte(1.0f - t);
        else /* white to blue */
          o2 = 255, o0 = o1 = to_byte(1.0f + t);
      } else if (mode == SPY_DISPLAY_ALPHA) {
        o0 = o1 = o2 = 255;
      } else { /* colors, mono */
        o0 = o1 = o2 = to_byte(clamp01b(v));
      }
    } else if (mode == SPY_DISPLAY_MONO) {
      o0 = o1 = o2 = to_byte(clamp01b(chan(p, type, 0)));
    } else if (mode == SPY_DISPLAY_ALPHA) {
      o0 = o1 = o2 = to_byte(clamp01b(chan(p, type, 3)));
    } else {
      float v0 = chan(p, type, 0), v1 = chan(p, type, 1), v2 = chan(p, type, 2);
      if (mode == SPY_DISPLAY_NORMALIZE) {
        o0 = norm_byte(v0, r), o1 = norm_byte(v1, r), o2 = norm_byte(v2, r);
      } else if (mode == SPY_DISPLAY_SIGNED) {
        o0 = signed_byte(v0, r), o1 = signed_byte(v1, r);
        o2 = signed_byte(v2, r);
      } else { /* colors */
        o0 = to_byte(clamp01b(v0)), o1 = to_byte(clamp01b(v1));
        o2 = to_byte(clamp01b(v2)), o3 = to_byte(clamp01b(chan(p, type, 3)));
      }
    }
    d[0] = o0, d[1] = o1, d[2] = o2, d[3] = o3;
  }
}

/* display() of one float texel into scalars (the box filter averages
 * colours, so these are display()'s values, not bytes). */
ALWAYS_INLINE void colors_of(const uint8_t *p, uint32_t type, uint32_t mode,
                             const range *r, float *c0, float *c1, float *c2,
                             float *c3) {
  *c3 = 1.0f;
  if (type == SPY_PIXEL_R32F) {
    float v = chan(p, type, 0);
    if (mode == SPY_DISPLAY_NORMALIZE) {
      *c0 = *c1 = *c2 = isfinite(v) ? clamp01b((v - r->lo) * r->scale) : 0.0f;
    } else if (mode == SPY_DISPLAY_SIGNED) {
      float t = isfinite(v) ? v * r->inv_abs : 0.0f;
      t = t < -1.0f ? -1.0f : t > 1.0f ? 1.0f : t;
      if (t >= 0.0f)
        *c0 = 1.0f, *c1 = *c2 = 1.0f - t;
      else
        *c2 = 1.0f, *c0 = *c1 = 1.0f + t;
    } else if (mode == SPY_DISPLAY_ALPHA) {
      *c0 = *c1 = *c2 = 1.0f;
    } else {
      *c0 = *c1 = *c2 = clamp01b(v);
    }
    return;
  }
  if (mode == SPY_DISPLAY_MONO) {
    *c0 = *c1 = *c2 = clamp01b(chan(p, type, 0));
    return;
  }
  if (mode == SPY_DISPLAY_ALPHA) {
    *c0 = *c1 = *c2 = clamp01b(chan(p, type, 3));
    return;
  }
  float v0 = chan(p, type, 0), v1 = chan(p, type, 1), v2 = chan(p, type, 2);
  if (mode == SPY_DISPLAY_NORMALIZE) {
    *c0 = isfinite(v0) ? clamp01b((v0 - r->lo) * r->scale) : 0.0f;
    *c1 = isfinite(v1) ? clamp01b((v1 - r->lo) * r->scale) : 0.0f;
    *c2 = isfinite(v2) ? clamp01b((v2 - r->lo) * r->scale) : 0.0f;
  } else if (mode == SPY_DISPLAY_SIGNED) {
    *c0 = isfinite(v0) ? clamp01b(0.5f + 0.5f * v0 * r->inv_abs) : 0.5f;
    *c1 = isfinite(v1) ? clamp01b(0.5f + 0.5f * v1 * r->inv_abs) : 0.5f;
    *c2 = isfinite(v2) ? clamp01b(0.5f + 0.5f * v2 * r->inv_abs) : 0.5f;
  } else {
    *c0 = clamp01b(v0), *c1 = clamp01b(v1), *c2 = clamp01b(v2);
    *c3 = clamp01b(chan(p, type, 3));
  }
}

/* The area filter of a float type: the generic loop's sums, in its order. */
ALWAYS_INLINE void box_float(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                             const uint8_t *s, uint32_t src_h, size_t stride,
                             uint32_t type, uint32_t mode, const range *r,
                             const uint32_t *xb) {
  uint32_t bpp = bytes_of(type);
  for (uint32_t y = 0; y < dst_h; y++) {
    uint32_t y0 = (uint32_t)((uint64_t)y * src_h / dst_h);
    uint32_t y1 = (uint32_t)((uint64_t)(y + 1) * src_h / dst_h);
    uint8_t *d = dst + (size_t)y * dst_w * 4;
    for (uint32_t x = 0; x < dst_w; x++, d += 4) {
      uint32_t x0 = xb[x], x1 = xb[x + 1];
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0, c0, c1, c2, c3;
      for (uint32_t yy = y0; yy < y1; yy++) {
        const uint8_t *p = s + yy * stride + (size_t)x0 * bpp;
        for (uint32_t xx = x0; xx < x1; xx++, p += bpp) {
          colors_of(p, type, mode, r, &c0, &c1, &c2, &c3);
          a0 += c0, a1 += c1, a2 += c2, a3 += c3;
        }
      }
      uint32_t n = (x1 - x0) * (y1 - y0);
      float inv = 255.0f / (float)(n ? n : 1);
      d[0] = (uint8_t)(a0 * inv + 0.5f), d[1] = (uint8_t)(a1 * inv + 0.5f);
      d[2] = (uint8_t)(a2 * inv + 0.5f), d[3] = (uint8_t)(a3 * inv + 0.5f);
    }
  }
}

/* image_range for a float type: the same min, max and largest |v| (up to
 * the sign of a zero, which changes no byte), with independent
 * accumulators instead of one chain through every value. */
ALWAYS_INLINE void acc(float v, float *mn, float *mx) {
  float a = isfinite(v) ? v : INFINITY, b = isfinite(v) ? v : -INFINITY;
  *mn = a < *mn ? a : *mn;
  *mx = b > *mx ? b : *mx;
}

ALWAYS_INLINE range float_range(const uint8_t *s, uint32_t w, uint32_t h,
                                size_t stride, uint32_t type) {
  uint32_t bpp = bytes_of(type);
  float mn[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
  float mx[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t *p = s + y * stride;
    uint32_t x = 0;
    if (type == SPY_PIXEL_R32F)
      for (; x + 4 <= w; x += 4, p += 16)
        for (int k = 0; k < 4; k++)
          acc(chan(p + 4 * k, type, 0), &mn[k], &mx[k]);
    for (; x < w; x++, p += bpp) {
      acc(chan(p, type, 0), &mn[0], &mx[0]);
      if (type != SPY_PIXEL_R32F) {
        acc(chan(p, type, 1), &mn[1], &mx[1]);
        acc(chan(p, type, 2), &mn[2], &mx[2]);
      }
    }
  }
  float lo = mn[0], hi = mx[0];
  for (int k = 1; k < 4; k++) {
    lo = mn[k] < lo ? mn[k] : lo;
    hi = mx[k] > hi ? mx[k] : hi;
  }
  return range_of(lo, hi);
}

/* The float path for one (type, mode): the range pass if the mode needs
 * it, then one texel per pixel or the average of a block. Instantiated
 * with constants by convert_typed. */
ALWAYS_INLINE void convert_body(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                                const uint8_t *s, uint32_t src_w,
                                uint32_t src_h, size_t stride, uint32_t type,
                                uint32_t mode, const uint32_t *xb) {
  uint32_t bpp = bytes_of(type);
  if (type == SPY_PIXEL_RGBA16F)
    pthread_once(&half_once, half_table_make);
  range r = {0.0f, 1.0f, 1.0f};
  if (mode == SPY_DISPLAY_NORMALIZE || mode == SPY_DISPLAY_SIGNED)
    r = is_float_type(type) ? float_range(s, src_w, src_h, stride, type)
                            : image_range(s, src_w, src_h, stride, type);
  int same = dst_w == src_w && dst_h == src_h;
  if (same && is_float_type(type)) {
    for (uint32_t y = 0; y < dst_h; y++)
      row_float(dst + (size_t)y * dst_w * 4, s + y * stride, dst_w, type, mode,
                &r);
    return;
  }
  if (is_float_type(type)) {
    box_float(dst, dst_w, dst_h, s, src_h, stride, type, mode, &r, xb);
    return;
  }
  for (uint32_t y = 0; y < dst_h; y++) {
    uint32_t y0 = (uint32_t)((uint64_t)y * src_h / dst_h);
    uint32_t y1 = (uint32_t)((uint64_t)(y + 1) * src_h / dst_h);
    uint8_t *d = dst + (size_t)y * dst_w * 4;
    if (same) { /* one texel per pixel */
      const uint8_t *row = s + y * stride;
      for (uint32_t x = 0; x < dst_w; x++, d += 4) {
        float v[4], c[4];
        values(row + (size_t)x * bpp, type, v);
        display(v, type, mode, &r, c);
        for (int k = 0; k < 4; k++)
          d[k] = (uint8_t)(c[k] * 255.0f + 0.5f);
      }
      continue;
    }
    for (uint32_t x = 0; x < dst_w; x++, d += 4) {
      uint32_t x0 = xb[x], x1 = xb[x + 1];
      float acc[4] = {0, 0, 0, 0}, v[4], c[4];
      uint32_t n = 0;
      for (uint32_t yy = y0; yy < y1; yy++) {
        const uint8_t *p = s + yy * stride + (size_t)x0 * bpp;
        for (uint32_t xx = x0; xx < x1; xx++, n++, p += bpp) {
          values(p, type, v);
          display(v, type, mode, &r, c);
          for (int k = 0; k < 4; k++)
            acc[k] += c[k];
        }
      }
      float inv = 255.0f / (float)(n ? n : 1);
      for (int k = 0; k < 4; k++)
        d[k] = (uint8_t)(acc[k] * inv + 0.5f);
    }
  }
}

/* One instance of convert_body per mode for the pixel type T. */
#define BY_MODE(T)                                                             \
  switch (mode) {                                                              \
  case SPY_DISPLAY_NORMALIZE:                                                  \
    convert_body(dst, dst_w, dst_h, s, src_w, src_h, stride, T,                \
                 SPY_DISPLAY_NORMALIZE, xb);                                   \
    break;                                                                     \
  case SPY_DISPLAY_MONO:                                                       \
    convert_body(dst, dst_w, dst_h, s, src_w, src_h, stride, T,                \
                 SPY_DISPLAY_MONO, xb);                                        \
    break;                                                                     \
  case SPY_DISPLAY_SIGNED:                                                     \
    convert_body(dst, dst_w, dst_h, s, src_w, src_h, stride, T,                \
                 SPY_DISPLAY_SIGNED, xb);                                      \
    break;                                                                     \
  case SPY_DISPLAY_ALPHA:                                                      \
    convert_body(dst, dst_w, dst_h, s, src_w, src_h, stride, T,                \
                 SPY_DISPLAY_ALPHA, xb);                                       \
    break;                                                                     \
  default:                                                                     \
    convert_body(dst, dst_w, dst_h, s, src_w, src_h, stride, T,                \
                 SPY_DISPLAY_COLORS, xb);                                      \
  }

static void convert_typed(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                          const uint8_t *s, uint32_t src_w, uint32_t src_h,
                          size_t stride, uint32_t type, uint32_t mode,
                          const uint32_t *xb) {
  switch (type) {
  case SPY_PIXEL_RGBA8: BY_MODE(SPY_PIXEL_RGBA8); break;
  case SPY_PIXEL_BGRA8: BY_MODE(SPY_PIXEL_BGRA8); break;
  case SPY_PIXEL_RGBA32F: BY_MODE(SPY_PIXEL_RGBA32F); break;
  case SPY_PIXEL_R32F: BY_MODE(SPY_PIXEL_R32F); break;
  case SPY_PIXEL_RGBA16F: BY_MODE(SPY_PIXEL_RGBA16F); break;
  default: BY_MODE(SPY_PIXEL_R8);
  }
}
#undef BY_MODE

int spy_image_to_rgba8_mode(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                            const void *src, uint32_t src_w, uint32_t src_h,
                            size_t stride, uint32_t type, uint32_t disp) {
  uint32_t bpp = spy_pixel_bytes(type);
  if (!bpp || !dst || !src || !dst_w || !dst_h || dst_w > src_w ||
      dst_h > src_h || src_w > SPY_IMAGE_MAX_EDGE ||
      src_h > SPY_IMAGE_MAX_EDGE || stride < (size_t)src_w * bpp ||
      disp > SPY_DISPLAY_ALPHA)
    return SPY_EINVAL;
  uint32_t mode = spy_display_resolve(type, disp);
  const uint8_t *s = src;
  if (mode == SPY_DISPLAY_COLORS && dst_w == src_w && dst_h == src_h &&
      (type == SPY_PIXEL_RGBA8 || type == SPY_PIXEL_BGRA8 ||
       type == SPY_PIXEL_R8))
    return fast_path(dst, s, src_w, src_h, stride, type);
  /* Column bounds once per image, not two divisions per pixel. */
  uint32_t xb[SPY_IMAGE_MAX_EDGE + 1];
  for (uint32_t x = 0; x <= dst_w; x++)
    xb[x] = (uint32_t)((uint64_t)x * src_w / dst_w);
  if (mode == SPY_DISPLAY_COLORS && bpp <= 4 &&
      (type == SPY_PIXEL_RGBA8 || type == SPY_PIXEL_BGRA8 ||
       type == SPY_PIXEL_R8))
    return box8(dst, dst_w, dst_h, s, src_w, src_h, stride, type, xb);
  convert_typed(dst, dst_w, dst_h, s, src_w, src_h, stride, type, mode, xb);
  return 0;
}

int spy_image_to_rgba8(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                       const void *src, uint32_t src_w, uint32_t src_h,
                       size_t stride, uint32_t type) {
  return spy_image_to_rgba8_mode(dst, dst_w, dst_h, src, src_w, src_h, stride,
                                 type, SPY_DISPLAY_DEFAULT);
}
