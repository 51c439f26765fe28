/* fuzz_passes.c — libFuzzer target for the PASSES section decoder (the
 * render-pass tree) and the consumer's copy of it: the input is a section body,
 * wrapped in a data frame; whatever the bytes, spy_get_passes() refuses them
 * or every record it then hands out lies within the input, and applying
 * the frame to a consumer state (twice: the second replaces the first)
 * never crashes, leaks or grows without bound. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spyglass/consumer.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20))
    return 0;
  spy_section s = {.id = SPY_SEC_PASSES, .len = (uint32_t)size, .data = data};
  spy_list_iter it;
  uint64_t acc = 0;
  if (spy_get_passes(&s, &it) >= 0) {
    spy_pass_info x;
    while (spy_passes_next(&it, &x))
      acc += x.parent + x.draws + x.triangles + x.cpu_us +
             (x.label_len ? (uint8_t)x.label[x.label_len - 1] : 0);
  }
  size_t cap = size + 64;
  uint8_t *buf = malloc(cap);
  if (!buf)
    return 0;
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 0, 0, 0);
  spy_frame_section_begin(&w, SPY_SEC_PASSES);
  spy_frame_put(&w, data, size);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_state st;
  if (n > 0 && spy_frame_decode(buf, (size_t)n, &f, NULL) == 0 &&
      spy_state_init(&st, 4) == 0) {
    spy_state_apply(&st, &f, 1);
    spy_state_apply(&st, &f, 2);
    for (uint32_t i = 0; i < st.n_passes; i++)
      acc += st.passes[i].parent + (uint8_t)st.passes[i].label[0];
    spy_state_free(&st);
  }
  free(buf);
  sink = acc;
  return 0;
}
