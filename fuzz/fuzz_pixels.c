/* fuzz_pixels.c — libFuzzer target for the buffer chunk decoder: the PIXELS
 * section (spy_get_pixels) and the consumer's images (parts put together,
 * VP9 decoded by the registered libvpx codec). The input is a run of
 * records `u8 type (bit 0: chunk, else raw), u16 length, section body`,
 * each wrapped in a buffer:raw / buffer:chunk frame and applied to one
 * state in order, so parts and decoder state carry over between them;
 * whatever the bytes, nothing crashes, hangs or grows without bound. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spyglass/consumer.h"
#include "spyglass/vpx.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int registered;
  if (!registered)
    registered = spy_vpx_register() == 0;
  if (size > (1u << 20))
    return 0;
  spy_state st;
  if (spy_state_init(&st, 4) < 0)
    return 0;
  uint8_t *buf = malloc(size + 64);
  size_t off = 0;
  while (buf && off + 3 <= size) {
    uint32_t type = data[off] & 1 ? SPY_MSG_BUFFER_CHUNK : SPY_MSG_BUFFER_RAW;
    size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
    off += 3;
    if (len > size - off)
      len = size - off;
    spy_section s = {
        .id = SPY_SEC_PIXELS, .len = (uint32_t)len, .data = data + off};
    spy_pixels px;
    if (spy_get_pixels(&s, &px) == 0 && px.data_len)
      sink += ((const uint8_t *)px.data)[px.data_len - 1] + px.name_len;
    spy_frame_writer w;
    spy_frame_start(&w, buf, size + 64, type, 0, 0, 0);
    spy_frame_section_begin(&w, SPY_SEC_PIXELS);
    spy_frame_put(&w, data + off, len);
    int n = spy_frame_finish(&w);
    spy_frame f;
    if (n > 0 && spy_frame_decode(buf, (size_t)n, &f, NULL) == 0)
      spy_state_apply_pixels(&st, &f, 0);
    off += len;
  }
  for (uint32_t i = 0; i < st.n_images; i++)
    sink += st.images[i].images;
  free(buf);
  spy_state_free(&st);
  return 0;
}
