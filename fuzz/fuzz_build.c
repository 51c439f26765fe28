/* fuzz_build.c — libFuzzer target for the BUILD section decoder (live
 * build progress, wire/trace.c) and the consumer's build state: the input
 * is a section body; whatever the bytes, spy_get_build() refuses them or
 * fills a progress whose counts and indexes lie within the bounds, which
 * re-encodes to the same bytes; applied to a consumer state (twice: the
 * history path), nothing crashes or grows. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/consumer.h"
#include "spyglass/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16))
    return 0;
  spy_section s = {.id = SPY_SEC_BUILD, .len = (uint32_t)size, .data = data};
  static spy_build_progress b;
  size_t cap = size + 64;
  uint8_t *buf = malloc(cap);
  if (!buf)
    return 0;
  if (spy_get_build(&s, &b) == 0) {
    if (b.n_plugins > SPY_BUILD_PLUGINS_MAX || b.n_slow > SPY_BUILD_SLOW_MAX)
      abort();
    for (uint32_t i = 0; i < b.n_slow; i++)
      if (b.slow[i].plugin >= b.n_plugins || b.slow[i].hook >= SPY_BUILD_HOOKS)
        abort();
    /* the counts survive a round trip (names cut at a NUL byte may
     * shorten, so they are not compared) */
    {
      spy_frame_writer w;
      spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 0, 0, 0);
      spy_put_build(&w, &b);
      int n = spy_frame_finish(&w);
      spy_frame f;
      spy_section s2;
      static spy_build_progress b2;
      if (n <= 0 || spy_frame_decode(buf, (size_t)n, &f, NULL) < 0 ||
          !spy_frame_find_section(&f, SPY_SEC_BUILD, &s2) ||
          spy_get_build(&s2, &b2) < 0 || b2.hook_calls != b.hook_calls ||
          b2.n_plugins != b.n_plugins || b2.n_slow != b.n_slow)
        abort();
    }
  }
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 0, 0, 0);
  spy_frame_section_begin(&w, SPY_SEC_BUILD);
  spy_frame_put(&w, data, size);
  int n = spy_frame_finish(&w);
  spy_frame f;
  static spy_state st;
  if (n > 0 && spy_frame_decode(buf, (size_t)n, &f, NULL) == 0 &&
      spy_state_init(&st, 4) == 0) {
    spy_state_apply(&st, &f, 1);
    spy_state_apply(&st, &f, 2);
    if (st.builds.n_done > SPY_BUILD_HISTORY)
      abort();
    spy_state_free(&st);
  }
  free(buf);
  return 0;
}
