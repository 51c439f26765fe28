/* media.h — pixels: the source formats a provider can hand over, and their
 * conversion to display-ready RGBA8, downscaled for thumbnails. Used by
 * the transport's convert step (transport.h); pure functions, no state. */
#ifndef SPYGLASS_MEDIA_H
#define SPYGLASS_MEDIA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spy_pixel_type {
  SPY_PIXEL_RGBA8 = 0,   /* 8-bit RGBA */
  SPY_PIXEL_BGRA8 = 1,   /* 8-bit BGRA (swapchain order) */
  SPY_PIXEL_RGBA32F = 2, /* float RGBA, 0..1 shown, clamped */
  SPY_PIXEL_R32F = 3,    /* one float channel (depth, masks): grey, the
                            image's own min..max stretched to 0..255 */
  SPY_PIXEL_R8 = 4,      /* one 8-bit channel: grey */
  SPY_PIXEL_RGBA16F = 5  /* half-float RGBA (IEEE binary16), like RGBA32F */
} spy_pixel_type;
#define SPY_PIXEL_TYPE_COUNT 6u

/* How a buffer's values become colours (a subscription's display byte). */
typedef enum spy_display_mode {
  SPY_DISPLAY_DEFAULT = 0,   /* normalize for R32F, colors for the rest */
  SPY_DISPLAY_COLORS = 1,    /* channels as they are, floats clamped 0..1 */
  SPY_DISPLAY_NORMALIZE = 2, /* colour channels stretched from the image's
                                own min..max (NaN / inf left out) */
  SPY_DISPLAY_MONO = 3,      /* the first channel as grey */
  SPY_DISPLAY_SIGNED = 4,    /* around 0, scaled by the image's largest
                                |value|: one channel as a blue-white-red
                                map, colour channels as 0.5 + 0.5 v */
  SPY_DISPLAY_ALPHA = 5      /* the alpha channel as grey (255 without) */
} spy_display_mode;

/* The display mode a request resolves to for a type (never DEFAULT). */
uint32_t spy_display_resolve(uint32_t type, uint32_t display);
/* Short names: "rgba8", "bgra8", "rgba32f", "r32f", "r8", "rgba16f" and
 * "default", "colors", "normalize", "mono", "signed", "alpha"; NULL for an
 * unknown value. The parsers return the value or -1. */
const char *spy_pixel_type_name(uint32_t type);
const char *spy_display_name(uint32_t display);
int spy_display_parse(const char *name);

#define SPY_IMAGE_MAX_EDGE 16384u

/* The long edge a buffer request names, as providers and consumers both
 * compare it: a thumbnail's 0 is 256; anything else as asked (a stream's
 * 0 is its full size). mode is a spy_buffer_mode (wire.h). */
static inline uint16_t spy_variant_long_edge(uint8_t mode, uint16_t long_edge) {
  return mode == 1 && long_edge == 0 ? (uint16_t)256 : long_edge;
}

/* Bytes per pixel of a type, or 0 for an unknown type. */
uint32_t spy_pixel_bytes(uint32_t type);
/* The size that fits w x h into long_edge on its longer side (never
 * larger than the source; long_edge 0 means 256). */
void spy_thumbnail_size(uint32_t w, uint32_t h, uint32_t long_edge,
                        uint32_t *tw, uint32_t *th);
/* Converts a src_w x src_h image of `type` (rows `stride` bytes apart) to
 * RGBA8 at dst_w x dst_h (<= the source; each destination pixel averages
 * the source block it covers) into dst (dst_w * dst_h * 4 bytes).
 * Returns 0, or SPY_EINVAL for a bad type, size or stride. */
int spy_image_to_rgba8(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                       const void *src, uint32_t src_w, uint32_t src_h,
                       size_t stride, uint32_t type);
/* The same in a display mode (spy_display_mode; DEFAULT resolves as
 * spy_display_resolve says). Returns 0 or SPY_EINVAL (also for an unknown
 * mode). Pure: any thread. */
int spy_image_to_rgba8_mode(uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                            const void *src, uint32_t src_w, uint32_t src_h,
                            size_t stride, uint32_t type, uint32_t display);
/* binary16 -> float (for RGBA16F sources and their producers' tests) and
 * back (round to nearest even). */
float spy_half_to_float(uint16_t h);
uint16_t spy_float_to_half(float f);

#ifdef __cplusplus
}
#endif
#endif
