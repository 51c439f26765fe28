/* fuzz_frame.c — libFuzzer target for the frame decoder and every section
 * decoder: whatever the bytes, decoding returns an error or a frame whose
 * sections all decode within bounds; never a crash, hang or overread. Data
 * frames are also applied to a consumer state, as a consumer would. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "spyglass/clock.h"
#include "spyglass/consumer.h"
#include "spyglass/profiler.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk_section(const spy_section *s) {
  uint64_t acc = 0;
  switch (s->id) {
  case SPY_SEC_STATS: {
    spy_stats_batch b;
    if (spy_get_stats(s, &b) == 0)
      for (uint32_t i = 0; i < b.count; i++) {
        acc += (uint64_t)spy_stats_fps_x10(&b, i) + spy_stats_cpu_x100(&b, i) +
               spy_stats_gpu_x100(&b, i);
        for (uint32_t c = 0; c < b.n_counters; c++)
          acc += spy_stats_counter(&b, c, i);
      }
    break;
  }
  case SPY_SEC_ENV:
  case SPY_SEC_REGISTRY:
  case SPY_SEC_BUFFERS:
  case SPY_SEC_BUFFER_VARIANTS: {
    spy_delta_iter it;
    spy_delta_entry e;
    if (spy_get_delta(s, &it) >= 0)
      while (spy_delta_next(&it, &e)) {
        spy_buffer_variant bv[4];
        if (s->id == SPY_SEC_BUFFER_VARIANTS &&
            spy_buffer_variants_decode(&e.value, bv, 4) > 0)
          acc += bv[0].served_width;
        acc += (uint8_t)e.key[e.key_len - 1];
        if (e.value.kind == SPY_VAL_STRING && e.value.v.s.len)
          acc += (uint8_t)e.value.v.s.ptr[e.value.v.s.len - 1];
      }
    break;
  }
  case SPY_SEC_STATS_SCHEMA: {
    spy_name_iter it;
    const char *n;
    uint32_t len;
    if (spy_get_name_list(s, &it) >= 0)
      while (spy_name_next(&it, &n, &len))
        acc += len ? (uint8_t)n[len - 1] : 0;
    break;
  }
  case SPY_SEC_HEALTH: {
    uint64_t v[SPY_HEALTH_FIELD_COUNT];
    if (spy_get_health(s, v, SPY_HEALTH_FIELD_COUNT) >= 0)
      acc += v[0];
    break;
  }
  case SPY_SEC_PROVIDER: {
    spy_provider_info p;
    if (spy_get_provider(s, &p) == 0 && p.name_len)
      acc += (uint8_t)p.name[p.name_len - 1];
    break;
  }
  case SPY_SEC_PEER: {
    spy_peer_info p;
    if (spy_get_peer(s, &p) == 0)
      acc += p.id;
    break;
  }
  case SPY_SEC_SUBSCRIPTION: {
    spy_subscription sub;
    if (spy_get_subscription(s, &sub) == 0) {
      const uint8_t *cur = NULL;
      const char *n;
      uint32_t len;
      while (spy_subscription_next_registry(&sub, &cur, &n, &len))
        acc += (uint8_t)n[len - 1];
      spy_buffer_request b;
      cur = NULL;
      while (spy_subscription_next_buffer(&sub, &cur, &b))
        acc += (uint8_t)b.name[b.name_len - 1] + b.mode;
    }
    break;
  }
  case SPY_SEC_PIXELS: {
    spy_pixels px;
    if (spy_get_pixels(s, &px) == 0 && px.data_len)
      acc += ((const uint8_t *)px.data)[px.data_len - 1];
    break;
  }
  case SPY_SEC_MSGPROF: {
    static spy_msgprof_summary m; /* 6 KiB: keep it off the stack */
    if (spy_get_msgprof(s, &m) == 0)
      for (uint32_t i = 0; i < m.n_types; i++)
        acc += m.types[i].type + m.types[i].bytes + m.types[i].post.p99_ns;
    break;
  }
  case SPY_SEC_CLOCK: {
    spy_clock_msg c;
    if (spy_get_clock(s, &c) == 0)
      acc += c.op + (uint64_t)c.offset_ns + c.provider;
    break;
  }
  default: break;
  }
  sink += acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A stream of frames back to back, as `spyglass decode` reads them. */
  size_t off = 0;
  spy_state st;
  if (spy_state_init(&st, 16) < 0)
    return 0;
  while (off < size) {
    spy_frame f;
    if (spy_frame_decode(data + off, size - off, &f, NULL) < 0)
      break;
    size_t cur = 0;
    spy_section s;
    while (spy_frame_next_section(&f, &cur, &s))
      walk_section(&s);
    if (f.type == SPY_MSG_DATA)
      sink += (uint64_t)spy_state_apply(&st, &f, off + 1);
    off += f.len;
  }
  sink += st.msgprof.n + st.registry.n;
  spy_state_free(&st);
  return 0;
}
