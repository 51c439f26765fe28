/* convert.c — pixel formats to display-ready RGBA8 with a box-filter
 * downscale (see media.h). */
#include <math.h>
#include <string.h>

#include "spyglass/error.h"
#include "spyglass/media.h"

uint32_t spy_pixel_bytes(uint32_t type) {
  switch (type) {
  case SPY_PIXEL_RGBA8:
  case SPY_PIXEL_BGRA8: return 4;
  case SPY_PIXEL_RGBA32F: return 16;
  case SPY_PIXEL_R32F: return 4;
  case SPY_PIXEL_R8: return 1;
  default: return 0;
  }
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

static float clamp01(float v) {
  return v != v ? 0.0f : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

/* One source pixel as RGBA in 0..255 floats. */
static void texel(const uint8_t *p, uint32_t type, float lo, float scale,
                  float out[4]) {
  switch (type) {
  case SPY_PIXEL_RGBA8:
    out[0] = p[0], out[1] = p[1], out[2] = p[2], out[3] = p[3];
    break;
  case SPY_PIXEL_BGRA8:
    out[0] = p[2], out[1] = p[1], out[2] = p[0], out[3] = p[3];
    break;
  case SPY_PIXEL_RGBA32F: {
    float f[4];
    memcpy(f, p, sizeof f);
    for (int i = 0; i < 4; i++)
      out[i] = clamp01(f[i]) * 255.0f;
    break;
  }
  case SPY_PIXEL_R32F: {
    float f;
    memcpy(&f, p, 4);
    out[0] = out[1] = out[2] = clamp01((f - lo) * scale) * 255.0f;
    out[3] = 255.0f;
    break;
  }
  default: /* R8 */ out[0] = out[1] = out[2] = p[0]; out[3] = 255.0f;
  }
}

int spy_image_to_rgba8(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                       const void *src, uint32_t src_w, uint32_t src_h,
                       size_t stride, uint32_t type) {
  uint32_t bpp = spy_pixel_bytes(type);
  if (!bpp || !dst || !src || !dst_w || !dst_h || dst_w > src_w ||
      dst_h > src_h || src_w > SPY_IMAGE_MAX_EDGE ||
      src_h > SPY_IMAGE_MAX_EDGE || stride < (size_t)src_w * bpp)
    return SPY_EINVAL;
  const uint8_t *s = src;
  float lo = 0.0f, scale = 1.0f;
  if (type == SPY_PIXEL_R32F) { /* stretch the image's own range */
    float mn = INFINITY, mx = -INFINITY;
    for (uint32_t y = 0; y < src_h; y++)
      for (uint32_t x = 0; x < src_w; x++) {
        float f;
        memcpy(&f, s + y * stride + (size_t)x * 4, 4);
        if (f == f && isfinite(f)) {
          mn = f < mn ? f : mn;
          mx = f > mx ? f : mx;
        }
      }
    if (mx > mn) {
      lo = mn;
      scale = 1.0f / (mx - mn);
    }
  }
  for (uint32_t y = 0; y < dst_h; y++) {
    uint32_t y0 = (uint32_t)((uint64_t)y * src_h / dst_h);
    uint32_t y1 = (uint32_t)((uint64_t)(y + 1) * src_h / dst_h);
    for (uint32_t x = 0; x < dst_w; x++) {
      uint32_t x0 = (uint32_t)((uint64_t)x * src_w / dst_w);
      uint32_t x1 = (uint32_t)((uint64_t)(x + 1) * src_w / dst_w);
      float acc[4] = {0, 0, 0, 0}, t[4];
      uint32_t n = 0;
      for (uint32_t yy = y0; yy < y1; yy++)
        for (uint32_t xx = x0; xx < x1; xx++, n++) {
          texel(s + yy * stride + (size_t)xx * bpp, type, lo, scale, t);
          for (int c = 0; c < 4; c++)
            acc[c] += t[c];
        }
      uint8_t *d = dst + ((size_t)y * dst_w + x) * 4;
      for (int c = 0; c < 4; c++)
        d[c] = (uint8_t)(acc[c] / (float)(n ? n : 1) + 0.5f);
    }
  }
  return 0;
}
