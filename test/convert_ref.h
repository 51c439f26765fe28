/* convert_ref.h — the conversion to RGBA8 as it was before the fast paths
 * (convert.c at the time the float types ran at 420-465 MB/s), kept
 * verbatim for test_buffers_convert.c: the fast code must give the same
 * bytes for every type, mode and size. Test-only; static functions. */
#ifndef SPY_TEST_CONVERT_REF_H
#define SPY_TEST_CONVERT_REF_H
#include <math.h>
#include <string.h>

#include "spyglass/error.h"
#include "spyglass/media.h"

static int one_channel(uint32_t type) {
  return type == SPY_PIXEL_R32F || type == SPY_PIXEL_R8;
}

static float ref_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f,
           m = h & 0x3ffu, bits;
  if (e == 0) {
    if (m == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      e = 127 - 15 + 1;
      while (!(m & 0x400u)) {
        m <<= 1;
        e--;
      }
      bits = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    bits = sign | 0x7f800000u | (m << 13);
  } else {
    bits = sign | ((e + 127 - 15) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* One source texel's values. */
static inline void values(const uint8_t *p, uint32_t type, float v[4]) {
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
      v[i] = ref_half_to_float((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
    break;
  case SPY_PIXEL_R32F:
    memcpy(v, p, 4);
    v[1] = v[2] = v[0];
    v[3] = 1.0f;
    break;
  default: /* R8 */ v[0] = v[1] = v[2] = p[0] * (1.0f / 255.0f); v[3] = 1.0f;
  }
}

static float clamp01(float v) {
  return v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

typedef struct range {
  float lo, scale; /* normalize: (v - lo) * scale */
  float inv_abs;   /* signed: v * inv_abs in -1..1 */
} range;

/* Min, max and largest |v| of the colour channels (the one channel of a
 * one-channel type), finite values only. */
static range image_range(const uint8_t *s, uint32_t w, uint32_t h,
                         size_t stride, uint32_t type) {
  uint32_t bpp = spy_pixel_bytes(type);
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
  range r = {0.0f, 1.0f, 1.0f};
  if (mx >= mn) {
    r.lo = mn;
    r.scale = mx > mn ? 1.0f / (mx - mn) : 0.0f;
    float a = fabsf(mn) > fabsf(mx) ? fabsf(mn) : fabsf(mx);
    r.inv_abs = a > 0.0f ? 1.0f / a : 0.0f;
  }
  return r;
}

/* Values -> display colour in 0..1. */
static inline void display(const float v[4], uint32_t type, uint32_t mode,
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

static int ref_image_to_rgba8_mode(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                                   const void *src, uint32_t src_w,
                                   uint32_t src_h, size_t stride, uint32_t type,
                                   uint32_t disp) {
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
  range r = {0.0f, 1.0f, 1.0f};
  if (mode == SPY_DISPLAY_NORMALIZE || mode == SPY_DISPLAY_SIGNED)
    r = image_range(s, src_w, src_h, stride, type);
  /* Column bounds once per image, not two divisions per pixel. */
  uint32_t xb[SPY_IMAGE_MAX_EDGE + 1];
  for (uint32_t x = 0; x <= dst_w; x++)
    xb[x] = (uint32_t)((uint64_t)x * src_w / dst_w);
  int same = dst_w == src_w && dst_h == src_h;
  if (mode == SPY_DISPLAY_COLORS && bpp <= 4 &&
      (type == SPY_PIXEL_RGBA8 || type == SPY_PIXEL_BGRA8 ||
       type == SPY_PIXEL_R8))
    return box8(dst, dst_w, dst_h, s, src_w, src_h, stride, type, xb);
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
  return 0;
}

#endif
