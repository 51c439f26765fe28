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
  SPY_PIXEL_R8 = 4       /* one 8-bit channel: grey */
} spy_pixel_type;

#define SPY_IMAGE_MAX_EDGE 16384u

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

#ifdef __cplusplus
}
#endif
#endif
