/* fuzz_zones.c — libFuzzer target for the ZONES section decoder and the
 * consumer's zone state: the input is a section body, wrapped in a data
 * frame; whatever the bytes, spy_get_zones() refuses them or every
 * location, block and event it then hands out lies within the input, and
 * applying the frame to a consumer state (twice, so spans carry over from
 * one section to the next) never crashes, hangs or grows without bound. */
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
  spy_section s = {.id = SPY_SEC_ZONES, .len = (uint32_t)size, .data = data};
  spy_zones_iter it;
  uint64_t acc = 0;
  if (spy_get_zones(&s, &it) == 0) {
    spy_zone_loc_info l;
    while (spy_zones_next_loc(&it, &l))
      acc += l.id + (l.name_len ? (uint8_t)l.name[l.name_len - 1] : 0) +
             (l.file_len ? (uint8_t)l.file[l.file_len - 1] : 0);
    spy_zone_thread_info t;
    spy_zone_event_iter ev;
    spy_zone_event e;
    while (spy_zones_next_thread(&it, &t, &ev)) {
      acc += t.thread + (t.name_len ? (uint8_t)t.name[t.name_len - 1] : 0);
      while (spy_zone_event_next(&ev, &e))
        acc += e.kind + e.t_ns + e.value;
    }
  }
  size_t cap = size + 64;
  uint8_t *buf = malloc(cap);
  if (!buf)
    return 0;
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 0, 0, 0);
  spy_frame_section_begin(&w, SPY_SEC_ZONES);
  spy_frame_put(&w, data, size);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_state st;
  if (n > 0 && spy_frame_decode(buf, (size_t)n, &f, NULL) == 0 &&
      spy_state_init(&st, 4) == 0) {
    spy_state_zones_keep(&st, 2, 64);
    spy_state_apply(&st, &f, 1);
    spy_state_apply(&st, &f, 2);
    for (uint32_t i = 0; i < st.zones.n_threads; i++)
      for (uint32_t k = 0; k < st.zones.threads[i].n; k++)
        acc += spy_zone_thread_span(&st.zones.threads[i], k)->start_ns;
    spy_state_free(&st);
  }
  free(buf);
  sink = acc;
  return 0;
}
