/* codec.c — the process-wide table of registered video codecs (codec.h):
 * one atomic pointer per codec id. */
#include <stdatomic.h>

#include "spyglass/codec.h"
#include "spyglass/wire.h"

#define CODEC_SLOTS 4

static _Atomic(const spy_video_codec_ops *) slots[CODEC_SLOTS];

int spy_video_codec_register(const spy_video_codec_ops *ops) {
  if (!ops || ops->codec == SPY_CODEC_RGBA8 || ops->codec >= CODEC_SLOTS ||
      !ops->encoder_create || !ops->encode || !ops->decoder_create ||
      !ops->decode)
    return SPY_EINVAL;
  atomic_store_explicit(&slots[ops->codec], ops, memory_order_release);
  return 0;
}

void spy_video_codec_unregister(uint32_t codec) {
  if (codec < CODEC_SLOTS)
    atomic_store_explicit(&slots[codec], NULL, memory_order_release);
}

const spy_video_codec_ops *spy_video_codec_get(uint32_t codec) {
  return codec < CODEC_SLOTS
             ? atomic_load_explicit(&slots[codec], memory_order_acquire)
             : NULL;
}
