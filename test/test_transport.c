/* test_transport.c — the producer transports over a real channel: the
 * tiered pool, sequence stamping in posting order, posts that cannot be
 * made, and converting pixels to RGBA8 buffer:raw frames; plus the media
 * conversions themselves. */
#include <math.h>

#include "spyglass/bus.h"
#include "spyglass/media.h"
#include "spyglass/transport.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];
static spy_channel *tx, *rx;
static uint8_t frame[SPY_POOL_LARGE_BYTES + 4096];

static spy_transport *make(spy_transport_kind kind) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
  spy_channel_desc d = {.name = "t", .dir = dir, .ring_bytes = 64u << 20};
  spy_channel_open(&rx, &d);
  spy_channel_open(&tx, &d);
  spy_transport *t = NULL;
  spy_transport_desc td = {.kind = kind, .channel = tx};
  if (spy_transport_create(&t, &td) < 0)
    return NULL;
  return t;
}

static void done(spy_transport *t) {
  t->ops->dispose(t);
  spy_channel_close(tx);
  spy_channel_close(rx);
}

static int post_ping(spy_transport *t) {
  spy_buffer *b = spy_transport_acquire(t, SPY_TIER_SMALL);
  if (!b)
    return SPY_EPOOLEMPTY;
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, SPY_MSG_PING, 1, 0, 0);
  int n = spy_frame_finish(&w);
  return spy_transport_post(t, b, (size_t)n);
}

static int recv_frame(spy_frame *f) {
  int n = spy_channel_recv(rx, frame, sizeof frame, 3000, NULL);
  return n > 0 && spy_frame_decode(frame, (size_t)n, f, NULL) == 0;
}

static void pool_and_sequence(spy_transport_kind kind) {
  spy_transport *t = make(kind);
  CHECK(t);
  spy_pool_stats ps;
  t->ops->pool_stats(t, &ps);
  CHECK_EQ(ps.total[SPY_TIER_SMALL], 8);
  CHECK_EQ(ps.total[SPY_TIER_MEDIUM], 4);
  CHECK_EQ(ps.total[SPY_TIER_LARGE], 0); /* made only when needed */
  spy_buffer *held[8];
  for (int i = 0; i < 8; i++)
    CHECK((held[i] = spy_transport_acquire(t, SPY_TIER_SMALL)) != NULL);
  CHECK(spy_transport_acquire(t, SPY_TIER_SMALL) == NULL); /* never waits */
  t->ops->pool_stats(t, &ps);
  CHECK_EQ(ps.free[SPY_TIER_SMALL], 0);
  CHECK_EQ(ps.acquire_failed, 1);
  for (int i = 0; i < 8; i++)
    t->ops->release_unused(t, held[i]);
  spy_buffer *big = spy_transport_acquire(t, SPY_TIER_LARGE);
  CHECK(big && big->cap == SPY_POOL_LARGE_BYTES);
  t->ops->release_unused(t, big);
  t->ops->pool_stats(t, &ps);
  CHECK_EQ(ps.total[SPY_TIER_LARGE], 4);
  CHECK_EQ(ps.free[SPY_TIER_LARGE], 4);
  for (int i = 0; i < 20; i++) {
    int rc;
    while ((rc = post_ping(t)) == SPY_EPOOLEMPTY)
      usleep(200); /* the worker returns buffers as it posts */
    CHECK_OK(rc);
  }
  spy_frame f;
  for (uint32_t i = 0; i < 20; i++) {
    CHECK(recv_frame(&f));
    CHECK_EQ(f.seq, i); /* stamped at posting, in order */
  }
  /* A post longer than its buffer is refused and the buffer comes back. */
  spy_buffer *b = spy_transport_acquire(t, SPY_TIER_SMALL);
  CHECK_EQ(spy_transport_post(t, b, SPY_POOL_SMALL_BYTES + 1), SPY_EINVAL);
  CHECK_EQ(spy_transport_post(t, NULL, 10), SPY_EINVAL);
  double end = tu_now_s() + 5; /* the worker's last release may trail */
  do
    t->ops->pool_stats(t, &ps);
  while (ps.free[SPY_TIER_SMALL] != 8 && tu_now_s() < end);
  CHECK_EQ(ps.free[SPY_TIER_SMALL], 8);
  CHECK(ps.post_failed >= 1);
  CHECK_EQ(t->ops->codec_supported(t), 0);
  done(t);
}

TEST(offload_pool_tiers_and_sequence_stamping) {
  pool_and_sequence(SPY_TRANSPORT_OFFLOAD);
}
TEST(inline_pool_tiers_and_sequence_stamping) {
  pool_and_sequence(SPY_TRANSPORT_INLINE);
}

static void convert_cases(spy_transport_kind kind) {
  spy_transport *t = make(kind);
  CHECK(t);
  /* 512 x 256 BGRA8: left half (x < 256) blue, right half red. */
  spy_buffer *px = spy_transport_acquire(t, SPY_TIER_LARGE);
  CHECK(px);
  for (uint32_t y = 0; y < 256; y++)
    for (uint32_t x = 0; x < 512; x++) {
      uint8_t *p = px->data + ((size_t)y * 512 + x) * 4;
      p[0] = x < 256 ? 255 : 0; /* B */
      p[1] = 0;
      p[2] = x < 256 ? 0 : 255; /* R */
      p[3] = 255;
    }
  spy_convert_request req = {.name = "color",
                             .frame = 77,
                             .width = 512,
                             .height = 256,
                             .pixel_type = SPY_PIXEL_BGRA8,
                             .mode = SPY_BUFFER_THUMBNAIL,
                             .long_edge = 128};
  CHECK_OK(t->ops->convert(t, &req, px));
  spy_frame f;
  spy_section s;
  spy_pixels out;
  CHECK(recv_frame(&f));
  CHECK_EQ(f.type, SPY_MSG_BUFFER_RAW);
  CHECK(spy_frame_find_section(&f, SPY_SEC_PIXELS, &s));
  CHECK_OK(spy_get_pixels(&s, &out));
  CHECK(out.width == 128 && out.height == 64 && out.frame == 77);
  CHECK_EQ(out.codec, SPY_CODEC_RGBA8);
  const uint8_t *d = out.data;
  CHECK(d[0] == 0 && d[2] == 255);                 /* blue, as RGBA */
  CHECK(d[127 * 4] == 255 && d[127 * 4 + 2] == 0); /* red */
  /* A float depth image, streamed (no codec here: raw, full size). */
  px = spy_transport_acquire(t, SPY_TIER_LARGE);
  CHECK(px);
  float *z = (float *)px->data;
  for (int i = 0; i < 64 * 32; i++)
    z[i] = 10.0f + (float)(i % 64); /* 10 .. 73 across each row */
  req = (spy_convert_request){.name = "depth",
                              .width = 64,
                              .height = 32,
                              .pixel_type = SPY_PIXEL_R32F,
                              .mode = SPY_BUFFER_STREAM};
  CHECK_OK(t->ops->convert(t, &req, px));
  CHECK(recv_frame(&f));
  CHECK(spy_frame_find_section(&f, SPY_SEC_PIXELS, &s));
  CHECK_OK(spy_get_pixels(&s, &out));
  CHECK(out.width == 64 && out.height == 32);
  d = out.data;
  CHECK_EQ(d[0], 0);        /* the minimum */
  CHECK_EQ(d[63 * 4], 255); /* the maximum */
  /* A request that does not fit its pixels: refused, buffer returned. */
  px = spy_transport_acquire(t, SPY_TIER_SMALL);
  req.width = 4096;
  CHECK_EQ(t->ops->convert(t, &req, px), SPY_EINVAL);
  req.width = 2;
  req.pixel_type = 99;
  px = spy_transport_acquire(t, SPY_TIER_SMALL);
  CHECK_EQ(t->ops->convert(t, &req, px), SPY_EINVAL);
  spy_pool_stats ps;
  t->ops->pool_stats(t, &ps);
  CHECK_EQ(ps.free[SPY_TIER_SMALL], 8);
  done(t);
}

TEST(offload_converts_pixels_to_rgba8_thumbnails_and_streams) {
  convert_cases(SPY_TRANSPORT_OFFLOAD);
}
TEST(inline_converts_pixels_to_rgba8_thumbnails_and_streams) {
  convert_cases(SPY_TRANSPORT_INLINE);
}

TEST(media_sizes_and_box_filter) {
  uint32_t w, h;
  spy_thumbnail_size(1920, 1080, 0, &w, &h);
  CHECK(w == 256 && h == 144);
  spy_thumbnail_size(100, 50, 256, &w, &h);
  CHECK(w == 100 && h == 50); /* never enlarged */
  spy_thumbnail_size(10000, 1, 256, &w, &h);
  CHECK(w == 256 && h == 1);
  uint8_t src[2 * 2 * 4] = {0,   0,   0,   255, 100, 100, 100, 255,
                            200, 200, 200, 255, 100, 100, 100, 255};
  uint8_t dst[4];
  CHECK_OK(spy_image_to_rgba8(dst, 1, 1, src, 2, 2, 8, SPY_PIXEL_RGBA8));
  CHECK_EQ(dst[0], 100); /* (0 + 100 + 200 + 100) / 4 */
  float f[4] = {2.0f, -1.0f, 0.5f, NAN};
  CHECK_OK(spy_image_to_rgba8(dst, 1, 1, f, 1, 1, 16, SPY_PIXEL_RGBA32F));
  CHECK(dst[0] == 255 && dst[1] == 0 && dst[2] == 128 && dst[3] == 0);
  CHECK_EQ(spy_image_to_rgba8(dst, 2, 1, src, 1, 1, 4, SPY_PIXEL_RGBA8),
           SPY_EINVAL); /* no enlarging */
  CHECK_EQ(spy_image_to_rgba8(dst, 1, 1, src, 2, 2, 4, SPY_PIXEL_RGBA8),
           SPY_EINVAL); /* stride too small */
  CHECK_EQ(spy_pixel_bytes(SPY_PIXEL_RGBA32F), 16);
  CHECK_EQ(spy_pixel_bytes(42), 0);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(offload_pool_tiers_and_sequence_stamping),
      TEST_CASE(inline_pool_tiers_and_sequence_stamping),
      TEST_CASE(offload_converts_pixels_to_rgba8_thumbnails_and_streams),
      TEST_CASE(inline_converts_pixels_to_rgba8_thumbnails_and_streams),
      TEST_CASE(media_sizes_and_box_filter)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
