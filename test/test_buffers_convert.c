/* test_buffers_convert.c — the conversion to display RGBA8 gives, byte for
 * byte, what the generic implementation it replaced gave (convert_ref.h):
 * every pixel type, every display mode, same size and thumbnails of
 * uneven ratios, padded strides, on crafted values (NaN of both signs and
 * payloads, ±Inf, float and half subnormals, ±0, huge, out of 0..1) and on
 * random bits; images with no finite value or one value only (an empty or
 * flat range). Half floats widen exactly for all 65536 inputs. */
#include <stdio.h>
#include <stdlib.h>

#include "convert_ref.h"
#include "spyglass/media.h"
#include "testlib.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static const uint32_t float_specials[] = {
    0x7fc00000u, /* quiet NaN */
    0xffc00000u, /* negative quiet NaN */
    0x7f800001u, /* signalling NaN */
    0x7fbfffffu, /* NaN, largest payload below quiet */
    0x7f800000u, /* +Inf */
    0xff800000u, /* -Inf */
    0x00000001u, /* smallest subnormal */
    0x807fffffu, /* largest negative subnormal */
    0x00400000u, /* a subnormal */
    0x80000000u, /* -0 */
    0x00000000u, /* +0 */
    0x3f800000u, /* 1 */
    0xbf800000u, /* -1 */
    0x3f000000u, /* 0.5 */
    0x7f7fffffu, /* largest finite */
    0xff7fffffu, /* most negative finite */
    0x3c000000u, /* 1/128 */
    0x40490fdbu, /* pi */
    0x3f7fffffu, /* just below 1 */
    0x3f800001u, /* just above 1 */
};
static const uint16_t half_specials[] = {
    0x7e00u, 0xfe00u, 0x7c01u, 0x7dffu, /* NaNs */
    0x7c00u, 0xfc00u,                   /* ±Inf */
    0x0001u, 0x83ffu, 0x0200u,          /* subnormals */
    0x8000u, 0x0000u,                   /* ±0 */
    0x3c00u, 0xbc00u, 0x3800u,          /* 1, -1, 0.5 */
    0x7bffu, 0xfbffu,                   /* ±65504 */
    0x3bffu, 0x3c01u, 0x0400u,          /* around 1; smallest normal */
};
#define N_FS (sizeof float_specials / sizeof float_specials[0])
#define N_HS (sizeof half_specials / sizeof half_specials[0])

/* kind 0: specials mixed with ordinary values; 1: random bits; 2: no
 * finite value; 3: one value everywhere. */
static void fill(uint8_t *img, uint32_t type, uint32_t w, uint32_t h,
                 size_t stride, int kind) {
  uint32_t bpp = spy_pixel_bytes(type);
  uint32_t flat = rnd();
  for (uint32_t y = 0; y < h; y++) {
    uint8_t *row = img + y * stride;
    for (uint32_t b = 0; b < (uint32_t)stride - w * bpp; b++)
      row[w * bpp + b] = (uint8_t)rnd(); /* padding: must be ignored */
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *p = row + (size_t)x * bpp;
      if (type == SPY_PIXEL_RGBA32F || type == SPY_PIXEL_R32F) {
        for (uint32_t c = 0; c < bpp / 4; c++) {
          uint32_t r = rnd(), bits;
          float f;
          if (kind == 1) {
            bits = r;
          } else if (kind == 2) {
            bits = float_specials[r % 6]; /* NaNs and infinities */
          } else if (kind == 3) {
            bits = flat;
          } else if (r % 3 == 0) {
            bits = float_specials[(r >> 8) % N_FS];
          } else {
            f = (float)((int)(r >> 8) % 4000 - 1500) / 1000.0f;
            memcpy(&bits, &f, 4);
          }
          memcpy(p + 4 * c, &bits, 4);
        }
      } else if (type == SPY_PIXEL_RGBA16F) {
        for (uint32_t c = 0; c < 4; c++) {
          uint32_t r = rnd();
          uint16_t v;
          if (kind == 1)
            v = (uint16_t)r;
          else if (kind == 2)
            v = half_specials[r % 6];
          else if (kind == 3)
            v = (uint16_t)flat;
          else if (r % 3 == 0)
            v = half_specials[(r >> 8) % N_HS];
          else
            v = spy_float_to_half((float)((int)(r >> 8) % 4000 - 1500) /
                                  1000.0f);
          p[2 * c] = (uint8_t)v;
          p[2 * c + 1] = (uint8_t)(v >> 8);
        }
      } else {
        for (uint32_t c = 0; c < bpp; c++)
          p[c] = (uint8_t)(kind == 3 ? flat : rnd());
      }
    }
  }
}

TEST(half_to_float_is_exact_for_every_half) {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float a = spy_half_to_float((uint16_t)h),
          b = ref_half_to_float((uint16_t)h);
    uint32_t ab, bb;
    memcpy(&ab, &a, 4);
    memcpy(&bb, &b, 4);
    if (ab != bb && bad++ < 5)
      fprintf(stderr, "  half %04x: %08x, was %08x\n", h, ab, bb);
  }
  CHECK_EQ(bad, 0);
}

static const uint32_t types[] = {SPY_PIXEL_RGBA8,   SPY_PIXEL_BGRA8,
                                 SPY_PIXEL_RGBA32F, SPY_PIXEL_R32F,
                                 SPY_PIXEL_R8,      SPY_PIXEL_RGBA16F};
/* source size, destination size */
static const uint32_t sizes[][4] = {{37, 23, 37, 23},     {37, 23, 19, 11},
                                    {64, 48, 16, 12},     {50, 31, 7, 5},
                                    {33, 65, 33, 1},      {5, 3, 1, 1},
                                    {1, 1, 1, 1},         {300, 7, 256, 5},
                                    {509, 257, 509, 257}, {509, 257, 100, 50}};

TEST(conversion_matches_the_generic_code_byte_for_byte) {
  int cases = 0, bad = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
      for (int kind = 0; kind < 4; kind++) {
        uint32_t type = types[t], w = sizes[z][0], h = sizes[z][1];
        uint32_t dw = sizes[z][2], dh = sizes[z][3];
        size_t stride = (size_t)w * spy_pixel_bytes(type) + 4 * (z & 1);
        uint8_t *img = malloc(stride * h);
        uint8_t *got = malloc((size_t)dw * dh * 4);
        uint8_t *want = malloc((size_t)dw * dh * 4);
        CHECK(img && got && want);
        fill(img, type, w, h, stride, kind);
        for (uint32_t mode = 0; mode <= SPY_DISPLAY_ALPHA; mode++) {
          memset(got, 0xa5, (size_t)dw * dh * 4);
          memset(want, 0x5a, (size_t)dw * dh * 4);
          int rg = spy_image_to_rgba8_mode(got, dw, dh, img, w, h, stride, type,
                                           mode);
          int rw = ref_image_to_rgba8_mode(want, dw, dh, img, w, h, stride,
                                           type, mode);
          cases++;
          if (rg != rw || memcmp(got, want, (size_t)dw * dh * 4) != 0) {
            if (bad++ < 8)
              fprintf(stderr,
                      "  %s %ux%u -> %ux%u kind %d mode %s: rc %d/%d, "
                      "differs\n",
                      spy_pixel_type_name(type), w, h, dw, dh, kind,
                      spy_display_name(mode), rg, rw);
          }
        }
        free(img);
        free(got);
        free(want);
      }
  fprintf(stderr, "  %d conversions compared\n", cases);
  CHECK_EQ(bad, 0);
}

TEST(conversion_refuses_what_the_generic_code_refused) {
  uint8_t src[64] = {0}, dst[64];
  /* bad type, bad mode, short stride, larger destination, zero size */
  CHECK_EQ(spy_image_to_rgba8_mode(dst, 1, 1, src, 1, 1, 16, 99, 0),
           SPY_EINVAL);
  CHECK_EQ(
      spy_image_to_rgba8_mode(dst, 1, 1, src, 1, 1, 16, SPY_PIXEL_RGBA32F, 6),
      SPY_EINVAL);
  CHECK_EQ(
      spy_image_to_rgba8_mode(dst, 2, 1, src, 2, 1, 8, SPY_PIXEL_RGBA32F, 0),
      SPY_EINVAL);
  CHECK_EQ(spy_image_to_rgba8_mode(dst, 2, 2, src, 1, 1, 4, SPY_PIXEL_R32F, 0),
           SPY_EINVAL);
  CHECK_EQ(spy_image_to_rgba8_mode(dst, 0, 1, src, 1, 1, 4, SPY_PIXEL_R32F, 0),
           SPY_EINVAL);
}

TEST_MAIN(TEST_CASE(half_to_float_is_exact_for_every_half),
          TEST_CASE(conversion_matches_the_generic_code_byte_for_byte),
          TEST_CASE(conversion_refuses_what_the_generic_code_refused))
