/* codec.h — video codecs behind one table of function pointers, so the
 * core (libc + pthreads) streams and decodes buffers with a codec that an
 * optional library registers (libspyglass_vpx: spy_vpx_register(), VP9).
 *
 * The transport's worker encodes stream subscriptions with the registered
 * encoder (codec_supported is 1 only while one is registered); consumers
 * decode buffer:chunk frames with the registered decoder. Without one,
 * providers send buffer:raw and consumers ignore chunks (counted).
 *
 * Registration is process-wide (like a SQLite VFS): call it once at start,
 * before providers or consumers are created. Lookups are lock-free atomic
 * loads; the table registered must outlive every user (a static const).
 */
#ifndef SPYGLASS_CODEC_H
#define SPYGLASS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_video_codec_ops {
  const char *name;         /* "vp9" */
  uint16_t codec;           /* spy_codec (wire.h) it produces: SPY_CODEC_VP9 */
  const char *codec_string; /* WebCodecs string, e.g. "vp09.00.10.08" */
  /* An encoder for w x h RGBA8 images at about fps frames per second:
   * realtime, one pass, no lag (each encode returns its frame). Threads:
   * an encoder is used by one thread at a time. 0 or a negative error. */
  int (*encoder_create)(void **enc, uint32_t w, uint32_t h, uint32_t fps);
  /* Encodes one image (w * h * 4 bytes, rows packed) into out[0..cap):
   * *len bytes, *key 1 for a key frame (forced with force_key). Returns 0,
   * SPY_ENOBUFS (cap too small), or SPY_EIO (the codec failed). */
  int (*encode)(void *enc, const uint8_t *rgba, int force_key, uint8_t *out,
                size_t cap, size_t *len, int *key);
  void (*encoder_destroy)(void *enc); /* NULL accepted */
  int (*decoder_create)(void **dec);
  /* Decodes one frame into rgba (w * h * 4 bytes). Returns 0,
   * SPY_EBADVALUE (corrupt data, or its size is not w x h) or SPY_EAGAIN
   * (no picture out of this frame). */
  int (*decode)(void *dec, const uint8_t *data, size_t len, uint8_t *rgba,
                uint32_t w, uint32_t h);
  void (*decoder_destroy)(void *dec); /* NULL accepted */
} spy_video_codec_ops;

/* Registers ops for ops->codec (replacing an earlier one; NULL ops with
 * spy_video_codec_unregister). Returns 0 or SPY_EINVAL. */
int spy_video_codec_register(const spy_video_codec_ops *ops);
void spy_video_codec_unregister(uint32_t codec);
/* The ops registered for a codec, or NULL. Any thread. */
const spy_video_codec_ops *spy_video_codec_get(uint32_t codec);

#ifdef __cplusplus
}
#endif
#endif
