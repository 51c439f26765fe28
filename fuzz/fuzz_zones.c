/* fuzz_zones.c — libFuzzer target for the ZONES section decoder and the
 * consumer's zone state: the input is a section body, wrapped in a data
 * frame; whatever the bytes, spy_get_zones() refuses them or every
 * location, block and event it then hands out lies within the input, and
 * applying the frame to a consumer state (twice, so spans carry over from
 * one section to the next) never crashes, hangs or grows without bound.
 * spy_zones_unpack (the consumer's one-pass decoder) must refuse exactly
 * what spy_get_zones refuses, with the same code, and else unpack the
 * same events as the iterators hand out: a difference traps. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spyglass/consumer.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

/* The packed words of one block against the iterator's events. */
static const uint64_t *same_events(const uint64_t *w, uint64_t t,
                                   spy_zone_event_iter *ev) {
  spy_zone_event e;
  for (;;) {
    uint64_t x = *w++;
    t += x >> SPY_ZPK_DELTA_SHIFT;
    uint64_t kind = x & 3u, sub = (x >> 2) & 0xffffu;
    if (kind == SPY_ZPK_SPECIAL && sub == SPY_ZPK_ADVANCE) {
      t += *w++;
      continue;
    }
    int more = spy_zone_event_next(ev, &e);
    if (kind == SPY_ZPK_SPECIAL) {
      if (sub != SPY_ZPK_BLOCK_END || more)
        __builtin_trap();
      return w;
    }
    uint64_t v = kind == SPY_ZPK_BEGIN ? sub : kind == SPY_ZPK_FRAME ? *w++ : 0;
    if (!more || e.kind != kind || e.t_ns != t || e.value != v)
      __builtin_trap();
  }
}

static void check_unpack(const spy_section *s, int want) {
  uint64_t *words = malloc(((size_t)s->len + 1) * sizeof *words);
  spy_zones_iter it;
  size_t nw;
  if (!words)
    return;
  int rc = spy_zones_unpack(s, &it, words, s->len, &nw);
  if (rc != want || nw > s->len || (rc < 0 && nw))
    __builtin_trap();
  if (rc == 0) {
    const uint64_t *w = words;
    spy_zone_thread_info t;
    spy_zone_event_iter ev;
    while (spy_zones_next_thread(&it, &t, &ev))
      w = same_events(w, it.base_ns, &ev);
    if ((size_t)(w - words) != nw)
      __builtin_trap();
  }
  free(words);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20))
    return 0;
  spy_section s = {.id = SPY_SEC_ZONES, .len = (uint32_t)size, .data = data};
  spy_zones_iter it;
  uint64_t acc = 0;
  int got = spy_get_zones(&s, &it);
  check_unpack(&s, got);
  if (got == 0) {
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
    spy_state_zones_sums(&st, (int)(size & 1)); /* both loops */
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
