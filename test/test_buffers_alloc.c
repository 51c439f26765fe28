/* test_buffers_alloc.c — the frame thread makes no heap allocation while a
 * buffer is streamed: malloc, calloc, realloc and free are interposed and
 * count the calls made on the frame thread between frame 50 and frame
 * 1,500, with a consumer on its own thread streaming one buffer as VP9
 * (offload: encoded on the worker) or raw (inline: converted on the frame
 * thread, into scratch kept from the first capture). (Not built under the
 * sanitizers, which own malloc themselves.) */
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

#include "spyglass/buffers.h"
#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "spyglass/vpx.h"
#include "testlib.h"
#include "testutil.h"

#include "alloc_counter.h"

static char dir[256];
static _Atomic int stop;

static void *consumer_thread(void *arg) {
  spy_consumer *c = arg;
  while (!atomic_load(&stop))
    spy_consumer_poll(c, 20);
  return NULL;
}

static long run(spy_transport_kind kind, uint64_t *captured, uint64_t *images) {
  tu_rundir(dir, sizeof dir);
  spy_provider *p;
  spy_provider_desc d = {
      .name = "balloc", .dir = dir, .transport = kind, .flush_ms = 10};
  if (spy_provider_create(&p, &d) < 0)
    return -1;
  enum { W = 320, H = 180 };
  static uint8_t px[W * H * 4];
  for (size_t i = 0; i < sizeof px; i++)
    px[i] = (uint8_t)(i * 7 + i / 1280);
  spy_buffer_desc bd = {.name = "fb",
                        .pixel_type = SPY_PIXEL_RGBA8,
                        .width = W,
                        .height = H,
                        .max_fps = 200};
  int h = spy_buffer_declare(p, &bd);
  /* two variants of the one capture: the stream and a mono thumbnail */
  spy_buffer_request req[2] = {{.name = "fb", .mode = SPY_BUFFER_STREAM},
                               {.name = "fb",
                                .mode = SPY_BUFFER_THUMBNAIL,
                                .display = SPY_DISPLAY_MONO,
                                .long_edge = 64}};
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS | SPY_FEAT_BUFFERS,
                          .buffers = req,
                          .n_buffers = 2};
  if (h < 0 || spy_consumer_create(&c, &cd) < 0)
    return -1;
  atomic_store(&stop, 0);
  pthread_t t;
  pthread_create(&t, NULL, consumer_thread, c);
  spy_buffer_stats st;
  double end = tu_now_s() + 20;
  do { /* until pixels flow */
    spy_frame_begin(p);
    spy_buffer_submit(p, h, px, W * 4);
    spy_frame_end(p);
    usleep(1000);
    spy_buffer_get_stats(p, &st);
  } while ((st.captured < 3 || st.variants != 2) && tu_now_s() < end);
  if (st.captured < 3 || st.variants != 2)
    return -2;
  atomic_store(&allocs, 0);
  for (int f = 0; f < 1500; f++) {
    if (f == 50)
      counting = 1;
    spy_frame_begin(p);
    px[f % sizeof px] ^= 0x55; /* a changing image */
    spy_buffer_submit(p, h, px, W * 4);
    spy_frame_end(p);
    counting = 0;
    usleep(500);
    counting = f >= 50;
  }
  counting = 0;
  long n = atomic_load(&allocs);
  spy_buffer_get_stats(p, &st);
  *captured = st.captured;
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  const spy_state_image *im =
      spy_state_image_find_variant(spy_consumer_state(c), &req[0]);
  const spy_state_image *mono =
      spy_state_image_find_variant(spy_consumer_state(c), &req[1]);
  *images = im && mono && mono->width == 64 ? im->images : 0;
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
  tu_rm_rf(dir);
  return n;
}

TEST(offload_vp9_stream_frame_thread_allocates_nothing) {
  spy_vpx_register();
  uint64_t captured = 0, images = 0;
  CHECK_EQ(run(SPY_TRANSPORT_OFFLOAD, &captured, &images), 0);
  CHECK(captured > 20); /* pixels really flowed meanwhile */
  CHECK(images > 5);
}

TEST(inline_raw_stream_frame_thread_allocates_nothing) {
  uint64_t captured = 0, images = 0;
  CHECK_EQ(run(SPY_TRANSPORT_INLINE, &captured, &images), 0);
  CHECK(captured > 20);
  CHECK(images > 5);
}

TEST(the_counter_sees_allocations_when_there_are_some) {
  counting = 1;
  void *volatile q = malloc(16);
  counting = 0;
  free(q);
  CHECK(atomic_load(&allocs) > 0);
}

TEST_MAIN(TEST_CASE(offload_vp9_stream_frame_thread_allocates_nothing),
          TEST_CASE(inline_raw_stream_frame_thread_allocates_nothing),
          TEST_CASE(the_counter_sees_allocations_when_there_are_some))
