/* buffers.h — named image buffers of the inspected program (framebuffer,
 * depth, normals, any render target) shown to consumers as thumbnails,
 * raw frames or VP9 streams.
 *
 *   int fb = spy_buffer_declare(p, &(spy_buffer_desc){
 *       .name = "framebuffer", .pixel_type = SPY_PIXEL_RGBA8,
 *       .width = 1280, .height = 720});
 *   for (;;) {
 *     spy_frame_begin(p);
 *     render(pixels);
 *     spy_buffer_submit(p, fb, pixels, 1280 * 4);
 *     spy_frame_end(p);
 *   }
 *
 * Nothing is read unless a subscriber asked for the buffer (the union of
 * the subscriptions' `buffers` maps; a buffer no one named gets metadata
 * only). While nobody is watching at all, a submit is one branch; while
 * somebody watches but not this buffer, one call and one load. When it is
 * wanted and a capture is due (at most max_fps per second), the submit
 * copies the rows once into a pooled 16 MiB buffer and queues it; the
 * conversion to RGBA8, the thumbnail filter, the VP9 encode and the posts
 * run on the transport's worker (transport.h, codec.h). No pooled buffer
 * free → the capture is dropped and counted, never waited for; the frame
 * thread allocates nothing (the 16 MiB tier is made by the service when a
 * subscription first wants pixels).
 *
 * Each subscriber gets the variant it asked for (thumbnail or stream,
 * display mode, long edge): up to SPY_BUFFER_VARIANTS_MAX (4) distinct
 * variants per buffer, all made from the one capture; a request beyond
 * that gets no pixels (counted in refused). Every PIXELS frame names its
 * variant (wire.h), so a consumer keeps only its own.
 *
 * A raw image larger than a frame may carry (1 MiB, or a quarter of the
 * provider's ring_bytes if less) is sent in parts; a consumer that falls a
 * whole ring behind loses a part and that image. Streaming raw images of
 * several MB (no VP9 codec, or the inline transport), give the provider a
 * ring_bytes of a few images (e.g. 16 MiB for 1280x720).
 *
 * Metadata (type, size, mode served, last frame captured, counts) travels
 * in the BUFFERS feature (SPY_FEAT_BUFFERS) as a delta list: an entry is
 * sent when it changed (docs/wire.md, spy_buffer_meta in wire.h).
 *
 * Threads: declare, resize and submit belong to the frame thread (declare
 * may also be called before the first frame from the thread that created
 * the provider). Declare takes a mutex (setup); submit takes none.
 */
#ifndef SPYGLASS_BUFFERS_H
#define SPYGLASS_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/media.h"
#include "spyglass/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPY_BUFFERS_MAX 32u /* named buffers per provider */

typedef struct spy_buffer_desc {
  const char *name;       /* 1..255 bytes, unique in the provider */
  uint32_t pixel_type;    /* spy_pixel_type */
  uint32_t width, height; /* 1..16384; width * height * bytes per pixel
                             at most 16 MiB */
  uint32_t max_fps;       /* captures per second at most; default 4 */
} spy_buffer_desc;

/* Declares a buffer (or, for a name already declared, changes its type
 * and size). Returns its handle (>= 0), or SPY_EINVAL (bad desc),
 * SPY_ENOSPC (SPY_BUFFERS_MAX declared already). */
int spy_buffer_declare(spy_provider *p, const spy_buffer_desc *d);
/* A new size for a buffer (a stream then restarts with a key frame).
 * Returns 0 or SPY_EINVAL. */
int spy_buffer_resize(spy_provider *p, int handle, uint32_t width,
                      uint32_t height);

typedef struct spy_buffer_stats {
  uint64_t submits;  /* submit calls while watched */
  uint64_t captured; /* copies queued for the worker */
  uint64_t dropped;  /* wanted and due, but no pool buffer / queue full */
  uint64_t bytes_copied;
  uint32_t wanted;   /* buffers some subscriber asks pixels of, now */
  uint32_t variants; /* distinct images served per capture, all buffers */
  uint32_t refused;  /* requests refused now: their buffer already serves
                        SPY_BUFFER_VARIANTS_MAX other variants */
} spy_buffer_stats;
/* Totals over every buffer. Any thread. */
void spy_buffer_get_stats(const spy_provider *p, spy_buffer_stats *out);

int spy__buffer_submit(spy_provider *p, int handle, const void *pixels,
                       size_t stride);

/* Hands this frame's pixels of a buffer to whoever asked for them. rows
 * are `stride` bytes apart (>= width * bytes per pixel). The pixels are
 * read during the call only. Returns 1 (captured), 0 (nothing to do: not
 * watched, not wanted, not due, or waiting while a buffer the empty pool
 * turned away captures first), SPY_EPOOLEMPTY (dropped and counted), or
 * SPY_EINVAL. */
static inline int spy_buffer_submit(spy_provider *p, int handle,
                                    const void *pixels, size_t stride) {
  if (!spy__watched(p))
    return 0;
  return spy__buffer_submit(p, handle, pixels, stride);
}

#ifdef SPY_ENABLE
#define SPY_BUFFER_SUBMIT(p, h, px, stride)                                    \
  spy_buffer_submit((p), (h), (px), (stride))
#else
#define SPY_BUFFER_SUBMIT(p, h, px, stride) ((void)0)
#endif

#ifdef __cplusplus
}
#endif
#endif
