/* test_buffers.c — named image buffers end to end: the conversions of each
 * pixel type and display mode, a provider's buffers reaching a consumer as
 * raw frames (exact) and VP9 streams (PSNR), key frames (resize, the 2 s
 * interval, a consumer joining mid-stream), nothing copied without a
 * subscriber, an empty pool dropping and counting, payloads in parts, the
 * BUFFERS metadata, and vpxdec (libvpx's own tool) decoding an IVF file
 * written from the chunks. */
#include <math.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "spyglass/buffers.h"
#include "spyglass/codec.h"
#include "spyglass/consumer.h"
#include "spyglass/media.h"
#include "spyglass/provider.h"
#include "spyglass/vpx.h"
#include "testlib.h"
#include "testutil.h"

static char dir[256];
static uint32_t rig_ring;     /* the provider's ring_bytes; 0 = default */
static uint32_t rig_features; /* the consumer's extra features */

/* ---- test images --------------------------------------------------------- */

/* A w x h image of `type` with a known pattern; returns its bytes (caller
 * frees), rows packed. */
static void *make_image(uint32_t type, uint32_t w, uint32_t h) {
  uint32_t bpp = spy_pixel_bytes(type);
  uint8_t *p = malloc((size_t)w * h * bpp);
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *d = p + ((size_t)y * w + x) * bpp;
      float fx = (float)x / (float)(w - 1), fy = (float)y / (float)(h - 1);
      float rgba[4] = {fx, fy, 0.5f * (fx + fy), 1.0f - 0.5f * fx};
      switch (type) {
      case SPY_PIXEL_RGBA8:
        for (int c = 0; c < 4; c++)
          d[c] = (uint8_t)(rgba[c] * 255.0f + 0.5f);
        break;
      case SPY_PIXEL_BGRA8:
        d[0] = (uint8_t)(rgba[2] * 255.0f + 0.5f);
        d[1] = (uint8_t)(rgba[1] * 255.0f + 0.5f);
        d[2] = (uint8_t)(rgba[0] * 255.0f + 0.5f);
        d[3] = (uint8_t)(rgba[3] * 255.0f + 0.5f);
        break;
      case SPY_PIXEL_R8: d[0] = (uint8_t)(fx * 255.0f + 0.5f); break;
      case SPY_PIXEL_RGBA32F: memcpy(d, rgba, 16); break;
      case SPY_PIXEL_RGBA16F:
        for (int c = 0; c < 4; c++) {
          uint16_t hv = spy_float_to_half(rgba[c]);
          d[2 * c] = (uint8_t)hv, d[2 * c + 1] = (uint8_t)(hv >> 8);
        }
        break;
      default: { /* R32F: depth-like, 10..30 */
        float v = 10.0f + 20.0f * fx;
        memcpy(d, &v, 4);
      }
      }
    }
  return p;
}

static double psnr(const uint8_t *a, const uint8_t *b, size_t px) {
  double se = 0;
  for (size_t i = 0; i < px; i++)
    for (int c = 0; c < 3; c++) {
      double d = (double)a[i * 4 + c] - b[i * 4 + c];
      se += d * d;
    }
  double mse = se / (double)(px * 3);
  return mse == 0 ? 99.0 : 10.0 * log10(255.0 * 255.0 / mse);
}

/* ---- conversions ----------------------------------------------------------
 */

TEST(convert_each_type_to_known_rgba8) {
  uint32_t types[] = {SPY_PIXEL_RGBA8, SPY_PIXEL_BGRA8, SPY_PIXEL_R8,
                      SPY_PIXEL_RGBA16F, SPY_PIXEL_RGBA32F};
  uint32_t w = 16, h = 8;
  uint8_t *ref = make_image(SPY_PIXEL_RGBA8, w, h);
  uint8_t out[16 * 8 * 4];
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
    void *img = make_image(types[t], w, h);
    size_t stride = (size_t)w * spy_pixel_bytes(types[t]);
    CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, img, w, h, stride, types[t],
                                     SPY_DISPLAY_COLORS),
             0);
    for (uint32_t i = 0; i < w * h; i++) {
      if (types[t] == SPY_PIXEL_R8) {
        CHECK_EQ(out[i * 4], ref[i * 4]);
        CHECK_EQ(out[i * 4 + 1], ref[i * 4]);
        CHECK_EQ(out[i * 4 + 3], 255);
        continue;
      }
      for (int c = 0; c < 4; c++) /* halves: within one step */
        CHECK(abs((int)out[i * 4 + c] - (int)ref[i * 4 + c]) <=
              (types[t] == SPY_PIXEL_RGBA16F ? 1 : 0));
    }
    free(img);
  }
  free(ref);
}

TEST(convert_display_modes) {
  uint32_t w = 8, h = 4;
  float *d = make_image(SPY_PIXEL_R32F, w, h); /* 10..30 along x */
  uint8_t out[8 * 4 * 4];
  /* default for R32F is normalize: x = 0 black, x = w-1 white */
  CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, d, w, h, w * 4, SPY_PIXEL_R32F,
                                   SPY_DISPLAY_DEFAULT),
           0);
  CHECK_EQ(out[0], 0);
  CHECK_EQ(out[(w - 1) * 4], 255);
  CHECK_EQ(spy_display_resolve(SPY_PIXEL_R32F, 0), SPY_DISPLAY_NORMALIZE);
  /* signed: all positive, so white..red; the largest is pure red */
  CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, d, w, h, w * 4, SPY_PIXEL_R32F,
                                   SPY_DISPLAY_SIGNED),
           0);
  CHECK_EQ(out[(w - 1) * 4], 255);
  CHECK_EQ(out[(w - 1) * 4 + 1], 0);
  /* a negative value is blue */
  d[0] = -30.0f;
  CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, d, w, h, w * 4, SPY_PIXEL_R32F,
                                   SPY_DISPLAY_SIGNED),
           0);
  CHECK_EQ(out[0], 0);
  CHECK_EQ(out[2], 255);
  free(d);
  /* alpha and mono of RGBA8 */
  uint8_t *c = make_image(SPY_PIXEL_RGBA8, w, h);
  CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, c, w, h, w * 4, SPY_PIXEL_RGBA8,
                                   SPY_DISPLAY_ALPHA),
           0);
  CHECK_EQ(out[4 * 5], c[4 * 5 + 3]);
  CHECK_EQ(out[4 * 5 + 1], c[4 * 5 + 3]);
  CHECK_EQ(spy_image_to_rgba8_mode(out, w, h, c, w, h, w * 4, SPY_PIXEL_RGBA8,
                                   SPY_DISPLAY_MONO),
           0);
  CHECK_EQ(out[4 * 5 + 2], c[4 * 5]);
  CHECK_EQ(
      spy_image_to_rgba8_mode(out, w, h, c, w, h, w * 4, SPY_PIXEL_RGBA8, 9),
      SPY_EINVAL);
  free(c);
  /* normalize of HDR floats beyond 1 */
  float hdr[4 * 4] = {0, 0, 0, 1, 4, 4, 4, 1, 2, 2, 2, 1, 8, 8, 8, 1};
  uint8_t o4[4 * 4];
  CHECK_EQ(spy_image_to_rgba8_mode(o4, 4, 1, hdr, 4, 1, 64, SPY_PIXEL_RGBA32F,
                                   SPY_DISPLAY_NORMALIZE),
           0);
  CHECK_EQ(o4[0], 0);
  CHECK_EQ(o4[12], 255);
  CHECK_EQ(o4[4], 128);
}

TEST(thumbnail_is_an_area_filter) {
  uint8_t src[4 * 2 * 4] = {0}; /* 4x2: left half 0, right half 200 */
  for (int y = 0; y < 2; y++)
    for (int x = 2; x < 4; x++)
      for (int c = 0; c < 4; c++)
        src[(y * 4 + x) * 4 + c] = 200;
  uint8_t out[2 * 1 * 4];
  CHECK_EQ(spy_image_to_rgba8(out, 2, 1, src, 4, 2, 16, SPY_PIXEL_RGBA8), 0);
  CHECK_EQ(out[0], 0);
  CHECK_EQ(out[4], 200);
  uint32_t tw, th;
  spy_thumbnail_size(1280, 720, 0, &tw, &th);
  CHECK_EQ(tw, 256);
  CHECK_EQ(th, 144);
}

TEST(half_floats_round_trip) {
  float v[] = {0.0f, 1.0f, -2.5f, 0.333f, 65504.0f, 6.1e-5f};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    float r = spy_half_to_float(spy_float_to_half(v[i]));
    CHECK(fabsf(r - v[i]) <= fabsf(v[i]) * 1e-3f + 1e-7f);
  }
  CHECK(isinf(spy_half_to_float(spy_float_to_half(1e6f))));
}

/* ---- through a provider and a consumer ---------------------------------- */

typedef struct rig {
  spy_provider *p;
  spy_consumer *c;
  int h[8];
  void *img[8];
  size_t stride[8];
  uint32_t n;
} rig;

static int rig_open(rig *r, spy_transport_kind kind,
                    const spy_buffer_request *req, uint32_t nreq) {
  memset(r, 0, sizeof *r);
  tu_rundir(dir, sizeof dir);
  spy_provider_desc d = {.name = "bufs",
                         .dir = dir,
                         .transport = kind,
                         .flush_ms = 20,
                         .ring_bytes = rig_ring};
  if (spy_provider_create(&r->p, &d) < 0)
    return -1;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features =
                              SPY_FEAT_STATS | SPY_FEAT_BUFFERS | rig_features,
                          .buffers = req,
                          .n_buffers = nreq};
  return spy_consumer_create(&r->c, &cd);
}

static int rig_add(rig *r, const char *name, uint32_t type, uint32_t w,
                   uint32_t h, uint32_t fps) {
  spy_buffer_desc bd = {.name = name,
                        .pixel_type = type,
                        .width = w,
                        .height = h,
                        .max_fps = fps};
  int hd = spy_buffer_declare(r->p, &bd);
  if (hd < 0)
    return hd;
  r->h[r->n] = hd;
  r->img[r->n] = make_image(type, w, h);
  r->stride[r->n] = (size_t)w * spy_pixel_bytes(type);
  r->n++;
  return hd;
}

/* One provider frame submitting every buffer, then the consumer polls. */
static void rig_frame(rig *r, spy_consumer *other) {
  spy_frame_begin(r->p);
  for (uint32_t i = 0; i < r->n; i++)
    spy_buffer_submit(r->p, r->h[i], r->img[i], r->stride[i]);
  spy_frame_end(r->p);
  spy_consumer_poll(r->c, 2);
  if (other)
    spy_consumer_poll(other, 0);
}

static void rig_close(rig *r) {
  spy_consumer_destroy(r->c);
  spy_provider_destroy(r->p);
  for (uint32_t i = 0; i < r->n; i++)
    free(r->img[i]);
  tu_rm_rf(dir);
}

#define RIG_UNTIL(r, other, secs, cond)                                        \
  ({                                                                           \
    double end_ = tu_now_s() + (secs);                                         \
    int ok_ = 0;                                                               \
    while (!(ok_ = ((cond) != 0)) && tu_now_s() < end_)                        \
      rig_frame((r), (other));                                                 \
    ok_;                                                                       \
  })

TEST(submit_rejects_a_short_stride) {
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, NULL, 0), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 16, 16, 100) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 10,
                  spy_consumer_state(r.c)->conn == SPY_CONN_CONNECTED));
  spy_frame_begin(r.p);
  CHECK_EQ(spy_buffer_submit(r.p, r.h[0], r.img[0], 8), SPY_EINVAL);
  CHECK_EQ(spy_buffer_submit(r.p, 99, r.img[0], 64), SPY_EINVAL);
  spy_frame_end(r.p);
  spy_buffer_desc bad = {.name = "big",
                         .pixel_type = SPY_PIXEL_RGBA32F,
                         .width = 4096,
                         .height = 4096};
  CHECK_EQ(spy_buffer_declare(r.p, &bad), SPY_EINVAL); /* > 16 MiB */
  bad.pixel_type = 77;
  bad.width = bad.height = 4;
  CHECK_EQ(spy_buffer_declare(r.p, &bad), SPY_EINVAL);
  rig_close(&r);
}

static const uint32_t all_types[] = {SPY_PIXEL_RGBA8,   SPY_PIXEL_BGRA8,
                                     SPY_PIXEL_R8,      SPY_PIXEL_RGBA16F,
                                     SPY_PIXEL_RGBA32F, SPY_PIXEL_R32F};
static const char *const type_buf[] = {"rgba8",   "bgra8",   "r8",
                                       "rgba16f", "rgba32f", "r32f"};

static int all_images(const spy_state *s, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    const spy_state_image *im = spy_state_image_find(s, type_buf[i]);
    if (!im || !im->images)
      return 0;
  }
  return 1;
}

/* Every type as a full-size "thumbnail" (long edge larger than the
 * image): the consumer's RGBA8 equals the conversion done here. */
TEST(raw_images_of_every_type_arrive_exact) {
  spy_buffer_request req[6];
  for (int i = 0; i < 6; i++)
    req[i] = (spy_buffer_request){
        .name = type_buf[i], .mode = SPY_BUFFER_THUMBNAIL, .long_edge = 1024};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, req, 6), 0);
  uint32_t w = 96, h = 40;
  for (int i = 0; i < 6; i++)
    CHECK(rig_add(&r, type_buf[i], all_types[i], w, h, 200) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 20, all_images(spy_consumer_state(r.c), 6)));
  const spy_state *s = spy_consumer_state(r.c);
  uint8_t *want = malloc((size_t)w * h * 4);
  for (int i = 0; i < 6; i++) {
    const spy_state_image *im = spy_state_image_find(s, type_buf[i]);
    CHECK_EQ(im->width, w);
    CHECK_EQ(im->height, h);
    CHECK_EQ(im->codec, SPY_CODEC_RGBA8);
    CHECK_EQ(im->pixel_type, all_types[i]);
    spy_image_to_rgba8_mode(want, w, h, r.img[i], w, h,
                            (size_t)w * spy_pixel_bytes(all_types[i]),
                            all_types[i], 0);
    CHECK(memcmp(want, im->rgba, (size_t)w * h * 4) == 0);
  }
  free(want);
  /* The metadata: type, size, mode served, captures (the flush after
   * the capture carries it). */
  spy_buffer_meta m;
  CHECK(RIG_UNTIL(&r, NULL, 10, ({
    const spy_state_entry *e_ =
        spy_state_find(&spy_consumer_state(r.c)->buffers, "r32f");
    e_ &&spy_buffer_meta_decode(&e_->value, &m) == 0 && m.captured >= 1;
  })));
  CHECK_EQ(m.pixel_type, SPY_PIXEL_R32F);
  CHECK_EQ(m.width, w);
  CHECK_EQ(m.mode, SPY_BUFFER_THUMBNAIL);
  CHECK_EQ(m.display, SPY_DISPLAY_NORMALIZE);
  CHECK(m.captured >= 1);
  rig_close(&r);
}

TEST(thumbnail_long_edge_and_display_mode_are_served) {
  spy_buffer_request req = {.name = "depth",
                            .mode = SPY_BUFFER_THUMBNAIL,
                            .long_edge = 32,
                            .display = SPY_DISPLAY_SIGNED};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_INLINE, &req, 1), 0);
  CHECK(rig_add(&r, "depth", SPY_PIXEL_R32F, 128, 64, 200) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 20,
                  spy_state_image_find(spy_consumer_state(r.c), "depth")));
  const spy_state_image *im =
      spy_state_image_find(spy_consumer_state(r.c), "depth");
  CHECK_EQ(im->width, 32);
  CHECK_EQ(im->height, 16);
  CHECK_EQ(im->display, SPY_DISPLAY_SIGNED);
  uint8_t want[32 * 16 * 4];
  spy_image_to_rgba8_mode(want, 32, 16, r.img[0], 128, 64, 128 * 4,
                          SPY_PIXEL_R32F, SPY_DISPLAY_SIGNED);
  CHECK(memcmp(want, im->rgba, sizeof want) == 0);
  rig_close(&r);
}

TEST(nothing_is_copied_without_a_subscriber_for_the_buffer) {
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, NULL, 0), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 64, 64, 1000) >= 0);
  /* Nobody at all yet: not even counted (one branch). */
  spy_frame_begin(r.p);
  CHECK_EQ(spy_buffer_submit(r.p, r.h[0], r.img[0], 256), 0);
  spy_frame_end(r.p);
  spy_buffer_stats st;
  spy_buffer_get_stats(r.p, &st);
  CHECK_EQ(st.submits, 0);
  /* A subscriber that did not ask for the buffer: metadata only. */
  CHECK(RIG_UNTIL(&r, NULL, 10,
                  spy_state_find(&spy_consumer_state(r.c)->buffers, "fb")));
  for (int i = 0; i < 50; i++)
    rig_frame(&r, NULL);
  spy_buffer_get_stats(r.p, &st);
  CHECK(st.submits > 0);
  CHECK_EQ(st.captured, 0);
  CHECK_EQ(st.bytes_copied, 0);
  CHECK_EQ(st.wanted, 0);
  spy_pool_stats ps;
  spy_transport *t = spy_provider_transport(r.p);
  t->ops->pool_stats(t, &ps);
  CHECK_EQ(ps.total[SPY_TIER_LARGE], 0); /* the 16 MiB tier was never made */
  spy_buffer_meta m;
  CHECK_EQ(
      spy_buffer_meta_decode(
          &spy_state_find(&spy_consumer_state(r.c)->buffers, "fb")->value, &m),
      0);
  CHECK_EQ(m.mode, 0);
  CHECK_EQ(m.served_width, 0);
  rig_close(&r);
}

TEST(an_empty_pool_drops_and_counts) {
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_THUMBNAIL};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 64, 64, 1000) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 20,
                  spy_state_image_find(spy_consumer_state(r.c), "fb")));
  /* Hold every 16 MiB buffer: the next captures find none. */
  spy_transport *t = spy_provider_transport(r.p);
  spy_buffer *held[SPY_POOL_LARGE_COUNT];
  uint32_t n = 0;
  double end = tu_now_s() + 10;
  while (n < SPY_POOL_LARGE_COUNT && tu_now_s() < end)
    if (!(held[n] = spy_transport_acquire(t, SPY_TIER_LARGE)))
      usleep(1000); /* the worker still converts one */
    else
      n++;
  CHECK_EQ(n, SPY_POOL_LARGE_COUNT);
  spy_buffer_stats before, after;
  spy_buffer_get_stats(r.p, &before);
  int drops = 0;
  for (int i = 0; i < 20; i++) {
    usleep(2000); /* due again (1000 fps at most) */
    spy_frame_begin(r.p);
    drops += spy_buffer_submit(r.p, r.h[0], r.img[0], 256) == SPY_EPOOLEMPTY;
    spy_frame_end(r.p);
  }
  spy_buffer_get_stats(r.p, &after);
  CHECK_EQ(drops, 20);
  CHECK_EQ(after.dropped - before.dropped, 20);
  CHECK_EQ(after.captured, before.captured);
  for (uint32_t i = 0; i < n; i++)
    t->ops->release_unused(t, held[i]);
  /* and it recovers */
  CHECK(RIG_UNTIL(&r, NULL, 10, ({
    spy_buffer_get_stats(r.p, &after);
    after.captured > before.captured;
  })));
  rig_close(&r);
}

static uint64_t images_of(spy_consumer *c, const char *name) {
  const spy_state_image *im = spy_state_image_find(spy_consumer_state(c), name);
  return im ? im->images : 0;
}

/* Six buffers due at once and a pool of four: the last ones submitted
 * were starved while the first ones took every buffer the worker gave
 * back. A buffer whose due capture found the pool empty captures next,
 * before the others take a pool buffer again. */
TEST(a_buffer_the_pool_turned_away_captures_first) {
  spy_buffer_request req[6];
  for (int i = 0; i < 6; i++)
    req[i] =
        (spy_buffer_request){.name = type_buf[i], .mode = SPY_BUFFER_THUMBNAIL};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, req, 6), 0);
  for (int i = 0; i < 6; i++)
    CHECK(rig_add(&r, type_buf[i], all_types[i], 96, 40, 1000) >= 0);
  /* Only the last two are submitted until both arrived and, in the last
   * frame, both captured (a slow worker may have emptied the pool before:
   * then one of them was owed, and the others would wait for it): the
   * pool is made, nothing is owed, the first four never turned away. */
  double end = tu_now_s() + 20;
  int both = 0;
  while ((!images_of(r.c, "rgba32f") || !images_of(r.c, "r32f") || !both) &&
         tu_now_s() < end) {
    spy_frame_begin(r.p);
    both = 1;
    for (uint32_t i = 4; i < 6; i++)
      if (spy_buffer_submit(r.p, r.h[i], r.img[i], r.stride[i]) != 1)
        both = 0;
    spy_frame_end(r.p);
    spy_consumer_poll(r.c, 2);
  }
  CHECK(images_of(r.c, "rgba32f") && images_of(r.c, "r32f") && both);
  spy_transport *t = spy_provider_transport(r.p);
  spy_buffer *held[SPY_POOL_LARGE_COUNT];
  uint32_t n = 0;
  end = tu_now_s() + 10;
  while (n < SPY_POOL_LARGE_COUNT && tu_now_s() < end)
    if (!(held[n] = spy_transport_acquire(t, SPY_TIER_LARGE)))
      usleep(1000); /* the worker still converts one */
    else
      n++;
  CHECK_EQ(n, SPY_POOL_LARGE_COUNT);
  /* The pool is empty: the last two are turned away. */
  usleep(2000); /* due again (1000 fps at most) */
  spy_frame_begin(r.p);
  for (uint32_t i = 4; i < 6; i++)
    CHECK_EQ(spy_buffer_submit(r.p, r.h[i], r.img[i], r.stride[i]),
             SPY_EPOOLEMPTY);
  spy_frame_end(r.p);
  /* Two come back and all six are due: the two turned away take them,
   * the first four wait (still due) instead of taking them again. */
  t->ops->release_unused(t, held[--n]);
  t->ops->release_unused(t, held[--n]);
  usleep(2000);
  int rc[6];
  spy_frame_begin(r.p);
  for (uint32_t i = 0; i < 6; i++)
    rc[i] = spy_buffer_submit(r.p, r.h[i], r.img[i], r.stride[i]);
  spy_frame_end(r.p);
  for (int i = 0; i < 4; i++)
    CHECK_EQ(rc[i], 0);
  CHECK_EQ(rc[4], 1);
  CHECK_EQ(rc[5], 1);
  while (n)
    t->ops->release_unused(t, held[--n]);
  /* and then the others capture too */
  CHECK(RIG_UNTIL(&r, NULL, 20, all_images(spy_consumer_state(r.c), 6)));
  rig_close(&r);
}

/* Two consumers on one provider, each asking for another buffer: the
 * channel carries both buffers' frames to both, and each decodes only its
 * own (the other's are counted as ignored, never copied or decoded). */
TEST(a_consumer_decodes_only_the_buffers_it_asked_for) {
  spy_buffer_request ra = {.name = "a", .mode = SPY_BUFFER_THUMBNAIL},
                     rb = {.name = "b", .mode = SPY_BUFFER_THUMBNAIL};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &ra, 1), 0);
  CHECK(rig_add(&r, "a", SPY_PIXEL_RGBA8, 64, 32, 200) >= 0);
  CHECK(rig_add(&r, "b", SPY_PIXEL_R8, 48, 48, 200) >= 0);
  spy_consumer *b;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS,
                          .buffers = &rb,
                          .n_buffers = 1};
  CHECK_EQ(spy_consumer_create(&b, &cd), 0);
  CHECK(RIG_UNTIL(&r, b, 30,
                  images_of(r.c, "a") >= 3 && images_of(b, "b") >= 3 &&
                      spy_consumer_state(r.c)->images_ignored >= 2 &&
                      spy_consumer_state(b)->images_ignored >= 2));
  CHECK(spy_state_image_find(spy_consumer_state(r.c), "b") == NULL);
  CHECK(spy_state_image_find(spy_consumer_state(b), "a") == NULL);
  CHECK_EQ(spy_consumer_state(b)->n_images, 1);
  CHECK_EQ(spy_state_image_find(spy_consumer_state(b), "b")->width, 48);
  spy_consumer_destroy(b);
  rig_close(&r);
}

/* Buffer frames are posted by the worker from its own scratch, yet the
 * message profiler counts them like any other message, in their own rows
 * of the per-type table. */
TEST(buffer_frames_show_in_the_message_profiler) {
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_THUMBNAIL};
  rig r;
  rig_features = SPY_FEAT_MSGPROF;
  int rc = rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1);
  rig_features = 0;
  CHECK_EQ(rc, 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 64, 64, 200) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 30, ({
    const spy_state_msgprof_row *row_ =
        spy_state_msgprof_type(spy_consumer_state(r.c), SPY_MSG_BUFFER_RAW);
    row_ && row_->count >= 2 && images_of(r.c, "fb") >= 2;
  })));
  const spy_state_msgprof_row *row =
      spy_state_msgprof_type(spy_consumer_state(r.c), SPY_MSG_BUFFER_RAW);
  /* a 64x64 thumbnail is 16 KiB of pixels plus its frame */
  CHECK(row->bytes >= row->count * 64u * 64u * 4u);
  CHECK(row->encode.max_ns > 0); /* the conversion is timed as the encode */
  rig_close(&r);
}

/* A raw 1280x720 frame is 3.6 MB: more than one frame may be (1 MiB at
 * most), so it travels in parts and is put back together. The ring holds
 * several images' worth, as buffers.h asks for raw frames this size. */
TEST(a_large_raw_image_travels_in_parts) {
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  rig_ring = 16u << 20;
  int rc = rig_open(&r, SPY_TRANSPORT_INLINE, &req, 1);
  rig_ring = 0;
  CHECK_EQ(rc, 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 1280, 720, 100) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 30, ({
    const spy_state_image *im_ =
        spy_state_image_find(spy_consumer_state(r.c), "fb");
    im_ && im_->images;
  })));
  const spy_state_image *im =
      spy_state_image_find(spy_consumer_state(r.c), "fb");
  CHECK_EQ(im->width, 1280);
  CHECK_EQ(im->codec, SPY_CODEC_RGBA8); /* inline: no encoder */
  CHECK(memcmp(im->rgba, r.img[0], 1280u * 720u * 4u) == 0);
  rig_close(&r);
}

/* ---- VP9 ----------------------------------------------------------------- */

/* A second reader on the provider's data channel that logs every chunk. */
typedef struct chunk_log {
  spy_channel *ch;
  uint8_t *buf;
  struct {
    uint64_t frame, captured_ms, at_ms;
    uint32_t w, h, len;
    int key;
    uint8_t display, mode;
    uint16_t long_edge;
    char name[16];
    uint8_t *data;
  } c[512];
  int n;
  uint64_t subscribe_ms[4];
  int n_subscribes;
} chunk_log;

static uint64_t mono_ms(void) { return (uint64_t)(tu_now_s() * 1000.0); }

static int log_open(chunk_log *l, spy_provider *p) {
  memset(l, 0, sizeof *l);
  char name[64];
  snprintf(name, sizeof name, "spyglass:%016llx",
           (unsigned long long)spy_provider_id(p));
  spy_channel_desc cd = {.name = name, .dir = dir};
  l->buf = malloc(SPY_FRAME_MAX);
  return spy_channel_open(&l->ch, &cd);
}

static void log_poll(chunk_log *l) {
  int n;
  while ((n = spy_channel_recv(l->ch, l->buf, SPY_FRAME_MAX, 0, NULL)) > 0 ||
         n == SPY_ENOBUFS) {
    spy_frame f;
    spy_section s;
    spy_pixels px;
    if (n <= 0 || spy_frame_decode(l->buf, (size_t)n, &f, NULL) < 0)
      continue;
    if (f.type == SPY_MSG_SUBSCRIBE && l->n_subscribes < 4)
      l->subscribe_ms[l->n_subscribes++] = f.ts_ms;
    if (f.type != SPY_MSG_BUFFER_CHUNK || l->n == 512 ||
        !spy_frame_find_section(&f, SPY_SEC_PIXELS, &s) ||
        spy_get_pixels(&s, &px) < 0 || px.part_total)
      continue;
    l->c[l->n].frame = px.frame;
    l->c[l->n].captured_ms = px.captured_ms;
    l->c[l->n].at_ms = mono_ms();
    l->c[l->n].w = px.width;
    l->c[l->n].h = px.height;
    l->c[l->n].len = px.data_len;
    l->c[l->n].key = px.key_frame;
    l->c[l->n].display = px.display;
    l->c[l->n].mode = px.variant_mode;
    l->c[l->n].long_edge = px.variant_long_edge;
    snprintf(l->c[l->n].name, sizeof l->c[l->n].name, "%.*s", (int)px.name_len,
             px.name);
    l->c[l->n].data = malloc(px.data_len);
    memcpy(l->c[l->n].data, px.data, px.data_len);
    l->n++;
  }
}

static void log_close(chunk_log *l) {
  for (int i = 0; i < l->n; i++)
    free(l->c[i].data);
  free(l->buf);
  spy_channel_close(l->ch);
}

static int decoded(spy_consumer *c, const char *name, uint64_t n) {
  const spy_state_image *im = spy_state_image_find(spy_consumer_state(c), name);
  return im && im->images >= n;
}

TEST(vp9_stream_decodes_within_psnr) {
  spy_vpx_register();
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 320, 180, 30) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 30, decoded(r.c, "fb", 3)));
  const spy_state_image *im =
      spy_state_image_find(spy_consumer_state(r.c), "fb");
  CHECK_EQ(im->codec, SPY_CODEC_VP9);
  CHECK_EQ(im->width, 320);
  CHECK(im->key_frames >= 1);
  double q = psnr(im->rgba, r.img[0], 320u * 180u);
  fprintf(stderr, "  vp9 psnr %.1f dB\n", q);
  CHECK(q > 35.0);
  CHECK_EQ(spy_provider_transport(r.p)->ops->codec_supported(
               spy_provider_transport(r.p)),
           1);
  spy_buffer_meta m;
  CHECK(RIG_UNTIL(&r, NULL, 5,
                  spy_state_find(&spy_consumer_state(r.c)->buffers, "fb")));
  spy_buffer_meta_decode(
      &spy_state_find(&spy_consumer_state(r.c)->buffers, "fb")->value, &m);
  CHECK_EQ(m.codec, SPY_CODEC_VP9);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

TEST(without_a_codec_a_stream_is_sent_raw) {
  spy_video_codec_unregister(SPY_CODEC_VP9);
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_BGRA8, 64, 32, 30) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 30, decoded(r.c, "fb", 1)));
  const spy_state_image *im =
      spy_state_image_find(spy_consumer_state(r.c), "fb");
  CHECK_EQ(im->codec, SPY_CODEC_RGBA8);
  CHECK_EQ(spy_provider_transport(r.p)->ops->codec_supported(
               spy_provider_transport(r.p)),
           0);
  rig_close(&r);
}

TEST(key_frames_on_resize_and_every_two_seconds) {
  spy_vpx_register();
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 160, 96, 20) >= 0);
  chunk_log *l = calloc(1, sizeof *l);
  CHECK_EQ(log_open(l, r.p), 0);
  /* 2.6 s of stream: the first chunk, then one about 2 s later */
  double end = tu_now_s() + 60;
  while (tu_now_s() < end &&
         !(l->n && l->c[l->n - 1].captured_ms - l->c[0].captured_ms > 2600)) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  CHECK(l->n > 4);
  CHECK(l->c[0].key);
  /* The transport makes a key frame when it encodes a frame 2 s after
   * the last key's encode, whatever the load: a frame is captured before
   * its encode, and a key is encoded before the log reads it (at_ms, on
   * the monotonic clock; captured_ms is the wall clock: off converts). So
   * a frame captured 2 s after the last key was read must be a key. */
  struct timespec wt;
  clock_gettime(CLOCK_REALTIME, &wt);
  int64_t off =
      ((int64_t)wt.tv_sec * 1000 + wt.tv_nsec / 1000000) - (int64_t)mono_ms();
  int64_t last_key_read = (int64_t)l->c[0].at_ms + off;
  uint64_t last_key = l->c[0].captured_ms;
  int keys = 0;
  for (int i = 1; i < l->n; i++) {
    /* 5 ms: the two clocks' rounding */
    CHECK(l->c[i].key ||
          (int64_t)l->c[i].captured_ms < last_key_read + 2000 + 5);
    if (l->c[i].key) {
      keys++;
      last_key = l->c[i].captured_ms;
      last_key_read = (int64_t)l->c[i].at_ms + off;
    }
  }
  CHECK(keys >= 1);
  /* resize: the first chunk of the new size is a key frame */
  int before = l->n;
  static uint8_t bigger[200 * 120 * 4];
  memset(bigger, 90, sizeof bigger);
  CHECK_EQ(spy_buffer_resize(r.p, r.h[0], 200, 120), 0);
  free(r.img[0]);
  r.img[0] = malloc(sizeof bigger);
  memcpy(r.img[0], bigger, sizeof bigger);
  r.stride[0] = 200 * 4;
  end = tu_now_s() + 30;
  while (tu_now_s() < end && l->n < before + 3) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  int first_new = -1;
  for (int i = before; i < l->n && first_new < 0; i++)
    if (l->c[i].w == 200)
      first_new = i;
  CHECK(first_new >= 0);
  CHECK(l->c[first_new].key);
  CHECK(l->c[first_new].captured_ms - last_key < 1800); /* forced, early */
  CHECK(RIG_UNTIL(&r, NULL, 10, ({
    const spy_state_image *im_ =
        spy_state_image_find(spy_consumer_state(r.c), "fb");
    im_ && im_->width == 200;
  })));
  log_close(l);
  free(l);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

TEST(a_consumer_joining_mid_stream_starts_on_a_key_frame) {
  spy_vpx_register();
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 160, 96, 20) >= 0);
  chunk_log *l = calloc(1, sizeof *l);
  CHECK_EQ(log_open(l, r.p), 0);
  /* stream for a while, so the next interval key frame is far off */
  double end = tu_now_s() + 30;
  while (
      tu_now_s() < end &&
      !(l->n > 2 && l->c[l->n - 1].captured_ms - l->c[0].captured_ms > 300)) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  int joined_at = l->n;
  uint64_t join_ms = l->n ? l->c[l->n - 1].captured_ms : 0;
  spy_consumer *b;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS,
                          .buffers = &req,
                          .n_buffers = 1};
  CHECK_EQ(spy_consumer_create(&b, &cd), 0);
  end = tu_now_s() + 30;
  while (tu_now_s() < end && !decoded(b, "fb", 2)) {
    rig_frame(&r, b);
    log_poll(l);
  }
  const spy_state_image *im = spy_state_image_find(spy_consumer_state(b), "fb");
  CHECK(im && im->images >= 2);
  CHECK(im->key_frames >= 1);
  /* the provider forced a key frame for the joiner, well before the 2 s
   * interval would have */
  int key_after = -1;
  for (int i = joined_at; i < l->n && key_after < 0; i++)
    if (l->c[i].key)
      key_after = i;
  CHECK(key_after >= 0);
  CHECK(l->c[key_after].captured_ms - join_ms < 1500);
  CHECK(psnr(im->rgba, r.img[0], 160u * 96u) > 30.0);
  spy_consumer_destroy(b);
  log_close(l);
  free(l);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

/* The provider's key frames forced for a new subscriber are for the
 * streams it asked for: a second subscriber to "a" makes a key frame on
 * a's stream, none on b's (whose next key frame is its 2 s interval). */
TEST(a_new_subscriber_forces_key_frames_only_on_its_streams) {
  spy_vpx_register();
  spy_buffer_request req[2] = {{.name = "a", .mode = SPY_BUFFER_STREAM},
                               {.name = "b", .mode = SPY_BUFFER_STREAM}};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, req, 2), 0);
  CHECK(rig_add(&r, "a", SPY_PIXEL_RGBA8, 160, 96, 20) >= 0);
  CHECK(rig_add(&r, "b", SPY_PIXEL_RGBA8, 160, 96, 20) >= 0);
  chunk_log *l = calloc(1, sizeof *l);
  CHECK_EQ(log_open(l, r.p), 0);
  /* both streams for a while: their first key frames are behind us */
  int seen_a = 0, seen_b = 0;
  uint64_t first_ms = 0;
  double end = tu_now_s() + 30;
  while (tu_now_s() < end && !(seen_a > 2 && seen_b > 2 &&
                               l->c[l->n - 1].captured_ms - first_ms > 300)) {
    rig_frame(&r, NULL);
    int before = l->n;
    log_poll(l);
    for (int i = before; i < l->n; i++) {
      if (!first_ms)
        first_ms = l->c[i].captured_ms;
      seen_a += strcmp(l->c[i].name, "a") == 0;
      seen_b += strcmp(l->c[i].name, "b") == 0;
    }
  }
  CHECK(seen_a > 2 && seen_b > 2);
  int joined_at = l->n;
  uint64_t join_ms = l->c[l->n - 1].captured_ms;
  uint64_t resyncs = spy_consumer_state(r.c)->resyncs;
  uint64_t subs = spy_consumer_state(r.c)->subscribes;
  spy_consumer *x;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS,
                          .buffers = &req[0],
                          .n_buffers = 1};
  CHECK_EQ(spy_consumer_create(&x, &cd), 0);
  end = tu_now_s() + 30;
  while (tu_now_s() < end && !decoded(x, "a", 2)) {
    rig_frame(&r, x);
    log_poll(l);
  }
  CHECK(decoded(x, "a", 2));
  /* a few more frames of b after the join's key frame */
  for (int k = 0; k < 10; k++) {
    rig_frame(&r, x);
    log_poll(l);
  }
  int key_a = -1;
  for (int i = joined_at; i < l->n && key_a < 0; i++)
    if (l->c[i].key && strcmp(l->c[i].name, "a") == 0)
      key_a = i;
  CHECK(key_a >= 0);
  CHECK(l->c[key_a].captured_ms - join_ms < 1500); /* forced for x */
  if (spy_consumer_state(r.c)->resyncs != resyncs ||
      spy_consumer_state(r.c)->subscribes != subs) {
    /* the first consumer saw a gap (or, stalled past the provider's ack
     * grace, subscribed again) and asked for key frames itself */
    fprintf(stderr, "  the first consumer resynced: b's keys not judged\n");
  } else {
    uint64_t last_b = 0;
    int forced_b = 0;
    for (int i = 0; i < l->n; i++) {
      if (strcmp(l->c[i].name, "b") != 0 || !l->c[i].key)
        continue;
      /* after the join, a key frame on b only at its 2 s interval */
      if (i >= joined_at && l->c[i].captured_ms - last_b < 1800)
        forced_b++;
      last_b = l->c[i].captured_ms;
    }
    CHECK_EQ(forced_b, 0);
  }
  spy_consumer_destroy(x);
  log_close(l);
  free(l);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

/* The variants a consumer's state lists for a buffer (BUFFER_VARIANTS). */
static int variants_of(spy_consumer *c, const char *name,
                       spy_buffer_variant *out) {
  const spy_state_entry *e =
      spy_state_find(&spy_consumer_state(c)->buffer_variants, name);
  return e ? spy_buffer_variants_decode(&e->value, out, 4) : -1;
}

/* BUFFERS names one variant (the stream, as older readers expect);
 * BUFFER_VARIANTS lists each one served, with its mode, display, long
 * edge, size and codec, and follows the subscriptions. */
TEST(buffer_metadata_lists_every_variant_served) {
  spy_vpx_register();
  spy_buffer_request sreq = {.name = "fb",
                             .mode = SPY_BUFFER_STREAM,
                             .display = SPY_DISPLAY_COLORS,
                             .long_edge = 256};
  spy_buffer_request treq = {.name = "fb",
                             .mode = SPY_BUFFER_THUMBNAIL,
                             .display = SPY_DISPLAY_MONO,
                             .long_edge = 64};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &sreq, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 320, 192, 30) >= 0);
  spy_consumer *x;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS | SPY_FEAT_BUFFERS,
                          .buffers = &treq,
                          .n_buffers = 1};
  CHECK_EQ(spy_consumer_create(&x, &cd), 0);
  spy_buffer_variant v[4];
  CHECK(RIG_UNTIL(&r, x, 30, variants_of(r.c, "fb", v) == 2));
  int s = v[0].mode == SPY_BUFFER_STREAM ? 0 : 1, t = 1 - s;
  uint32_t sw, sh, tw, th;
  spy_thumbnail_size(320, 192, 256, &sw, &sh);
  spy_thumbnail_size(320, 192, 64, &tw, &th);
  CHECK_EQ(v[s].mode, SPY_BUFFER_STREAM);
  CHECK_EQ(v[s].display, SPY_DISPLAY_COLORS);
  CHECK_EQ(v[s].long_edge, 256);
  CHECK_EQ(v[s].served_width, sw);
  CHECK_EQ(v[s].served_height, sh);
  CHECK_EQ(v[s].codec, SPY_CODEC_VP9);
  CHECK_EQ(v[t].mode, SPY_BUFFER_THUMBNAIL);
  CHECK_EQ(v[t].display, SPY_DISPLAY_MONO);
  CHECK_EQ(v[t].long_edge, 64);
  CHECK_EQ(v[t].served_width, tw);
  CHECK_EQ(v[t].served_height, th);
  CHECK_EQ(v[t].codec, SPY_CODEC_RGBA8);
  /* the other consumer's state lists the same */
  CHECK(RIG_UNTIL(&r, x, 10, variants_of(x, "fb", v) == 2));
  /* BUFFERS, as before: the stream */
  spy_buffer_meta m;
  CHECK_EQ(
      spy_buffer_meta_decode(
          &spy_state_find(&spy_consumer_state(r.c)->buffers, "fb")->value, &m),
      0);
  CHECK_EQ(m.mode, SPY_BUFFER_STREAM);
  CHECK_EQ(m.served_width, sw);
  /* the thumbnail's subscriber leaves: one variant left */
  spy_consumer_destroy(x);
  CHECK(RIG_UNTIL(&r, NULL, 30, variants_of(r.c, "fb", v) == 1));
  CHECK_EQ(v[0].mode, SPY_BUFFER_STREAM);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

TEST(buffer_variants_decoder_rejects_bad_values) {
  spy_buffer_variant in[2] = {{.mode = 1,
                               .display = 3,
                               .long_edge = 64,
                               .served_width = 64,
                               .served_height = 38},
                              {.mode = 2,
                               .display = 1,
                               .codec = 1,
                               .served_width = 320,
                               .served_height = 192}};
  uint8_t blob[3 * SPY_BUFFER_VARIANT_BYTES] = {0};
  spy_buffer_variants_encode(blob, in, 2);
  spy_buffer_variant out[2];
  spy_value v = {.kind = SPY_VAL_BLOB};
  v.v.s.ptr = (const char *)blob;
  v.v.s.len = 2 * SPY_BUFFER_VARIANT_BYTES;
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), 2);
  CHECK(memcmp(&out[1], &in[1], sizeof out[1]) == 0);
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 1), 2); /* one stored */
  v.v.s.len = 0;
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), 0); /* metadata only */
  v.v.s.len = SPY_BUFFER_VARIANT_BYTES + 4;            /* not whole records */
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
  v.v.s.len = 3 * SPY_BUFFER_VARIANT_BYTES; /* the third: mode 0 */
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
  v.v.s.len = 2 * SPY_BUFFER_VARIANT_BYTES;
  blob[1] = 6; /* display */
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
  blob[1] = 3;
  blob[SPY_BUFFER_VARIANT_BYTES + 2] = 2; /* codec */
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
  v.kind = SPY_VAL_STRING;
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
  v.kind = SPY_VAL_BLOB;
  v.v.s.len = (SPY_BUFFER_VARIANT_LIST_MAX + 1) * SPY_BUFFER_VARIANT_BYTES;
  CHECK_EQ(spy_buffer_variants_decode(&v, out, 2), SPY_EBADVALUE);
}

static void put32(FILE *f, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  fwrite(b, 1, 4, f);
}

/* The chunks are a real VP9 stream: libvpx's own vpxdec decodes an IVF
 * file made of them. */
TEST(vpxdec_decodes_the_chunks_as_ivf) {
  if (system("command -v vpxdec >/dev/null 2>&1") != 0) {
    SKIP("vpxdec (Debian vpx-tools) not installed");
  }
  spy_vpx_register();
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_STREAM};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 160, 96, 30) >= 0);
  chunk_log *l = calloc(1, sizeof *l);
  CHECK_EQ(log_open(l, r.p), 0);
  double end = tu_now_s() + 30;
  while (tu_now_s() < end && l->n < 8) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  CHECK(l->n >= 8);
  char path[512], cmd[1200], out[256];
  snprintf(path, sizeof path, "%s/fb.ivf", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  fwrite("DKIF", 1, 4, f);
  uint8_t hdr[28] = {0, 0, 32, 0, 'V', 'P', '9', '0'};
  hdr[8] = 160, hdr[10] = 96, hdr[12] = 30, hdr[16] = 1;
  hdr[20] = (uint8_t)l->n;
  fwrite(hdr, 1, 28, f);
  for (int i = 0; i < l->n; i++) {
    put32(f, l->c[i].len);
    put32(f, (uint32_t)i);
    put32(f, 0);
    fwrite(l->c[i].data, 1, l->c[i].len, f);
  }
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "vpxdec --i420 -o /dev/null %s 2>&1 && vpxdec --md5 %s 2>&1", path,
           path);
  int rc = tu_run_capture(cmd, out, sizeof out);
  fprintf(stderr, "  vpxdec: %s", out);
  CHECK_EQ(rc, 0);
  log_close(l);
  free(l);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

TEST(pixels_decoder_rejects_bad_parts) {
  uint8_t buf[512];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_BUFFER_RAW, 0, 0, 0);
  uint8_t data[16] = {0};
  spy_pixels px = {.width = 2,
                   .height = 2,
                   .name = "x",
                   .data = data,
                   .data_len = 8,
                   .part_offset = 12,
                   .part_total = 16};
  spy_put_pixels(&w, &px); /* 12 + 8 > 16 */
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  spy_section s;
  spy_pixels out;
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), 0);
  CHECK(spy_frame_find_section(&f, SPY_SEC_PIXELS, &s));
  CHECK_EQ(spy_get_pixels(&s, &out), SPY_EBADVALUE);
  /* a good part round-trips */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_BUFFER_RAW, 0, 0, 0);
  px.part_offset = 8;
  spy_put_pixels(&w, &px);
  n = spy_frame_finish(&w);
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), 0);
  CHECK(spy_frame_find_section(&f, SPY_SEC_PIXELS, &s));
  CHECK_EQ(spy_get_pixels(&s, &out), 0);
  CHECK_EQ(out.part_offset, 8);
  CHECK_EQ(out.part_total, 16);
  CHECK_EQ(out.data_len, 8);
  /* applied alone (no first part) it is dropped, not a crash */
  spy_state st;
  CHECK_EQ(spy_state_init(&st, 8), 0);
  CHECK_EQ(spy_state_apply_pixels(&st, &f, 0), 0);
  CHECK(spy_state_image_find(&st, "x")->rgba == NULL);
  spy_state_free(&st);
}

/* Reads a PNG with libpng into RGBA8 (caller frees). */
static uint8_t *read_png(const char *path, uint32_t *w, uint32_t *h) {
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, path))
    return NULL;
  img.format = PNG_FORMAT_RGBA;
  uint8_t *buf = malloc(PNG_IMAGE_SIZE(img));
  if (!buf || !png_image_finish_read(&img, NULL, buf, 0, NULL)) {
    free(buf);
    png_image_free(&img);
    return NULL;
  }
  *w = img.width;
  *h = img.height;
  return buf;
}

/* `spyglass snap` (another process) subscribes to a buffer of this
 * process's provider and writes a PNG; libpng reads back exactly the
 * conversion of the submitted pixels, in the mode and size asked for. */
TEST(snap_writes_a_png_whose_pixels_match) {
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, NULL, 0), 0);
  CHECK(rig_add(&r, "depth", SPY_PIXEL_R32F, 120, 60, 50) >= 0);
  char png[300], cmd[1200], out[512];
  snprintf(png, sizeof png, "%s/depth.png", dir);
  snprintf(cmd, sizeof cmd,
           "%s snap bufs depth -o %s --mode signed --long-edge 60 --dir %s "
           "--timeout 20000",
           SPY_TOOL_PATH, png, dir);
  FILE *pipe = popen(cmd, "r");
  CHECK(pipe != NULL);
  /* drive frames while snap runs: it exits once written */
  double end = tu_now_s() + 40;
  int done = 0;
  while (!done && tu_now_s() < end) {
    rig_frame(&r, NULL);
    done = access(png, F_OK) == 0;
  }
  for (int i = 0; i < 50; i++)
    rig_frame(&r, NULL); /* let it finish writing */
  size_t n = fread(out, 1, sizeof out - 1, pipe);
  out[n] = 0;
  int rc = pclose(pipe);
  fprintf(stderr, "  snap: %s", out);
  CHECK_EQ(rc, 0);
  uint32_t w = 0, h = 0;
  uint8_t *got = read_png(png, &w, &h);
  CHECK(got != NULL);
  CHECK_EQ(w, 60);
  CHECK_EQ(h, 30);
  uint8_t want[60 * 30 * 4];
  spy_image_to_rgba8_mode(want, 60, 30, r.img[0], 120, 60, 120 * 4,
                          SPY_PIXEL_R32F, SPY_DISPLAY_SIGNED);
  CHECK(memcmp(want, got, sizeof want) == 0);
  free(got);
  if (system("command -v pngcheck >/dev/null 2>&1") == 0) {
    snprintf(cmd, sizeof cmd, "pngcheck -q %s", png);
    CHECK_EQ(system(cmd), 0);
  }
  rig_close(&r);
}

TEST(snap_refuses_bad_usage) {
  char cmd[600], out[512];
  snprintf(cmd, sizeof cmd, "%s snap fb -o /dev/null --mode sepia 2>&1",
           SPY_TOOL_PATH);
  CHECK_EQ(tu_run_capture(cmd, out, sizeof out), 2);
  CHECK(strstr(out, "--mode") != NULL);
  snprintf(cmd, sizeof cmd, "%s snap fb 2>&1", SPY_TOOL_PATH);
  CHECK_EQ(tu_run_capture(cmd, out, sizeof out), 2);
}

/* ---- per-subscriber serving ---------------------------------------------- */

static uint32_t buffer_variants(spy_provider *p) {
  spy_buffer_stats st;
  spy_buffer_get_stats(p, &st);
  return st.variants;
}

static uint32_t subscribers(spy_provider *p) {
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  return st.subscribers;
}

static FILE *snap_start(const char *png, const char *args) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "%s snap bufs fb -o %s %s --dir %s --timeout 30000 2>&1",
           SPY_TOOL_PATH, png, args, dir);
  return popen(cmd, "r");
}

static int snap_finish(FILE *pipe) {
  char out[512];
  size_t n = fread(out, 1, sizeof out - 1, pipe);
  out[n] = 0;
  fprintf(stderr, "  snap: %s", out);
  return pclose(pipe);
}

/* Two other processes ask for one buffer at once, one a raw mono
 * thumbnail of long edge 64, one a VP9 stream in colours at 256, while
 * this process's own consumer streams it at 256 too: each gets exactly
 * its variant (the mono one byte for byte, the streams within a PSNR),
 * from one capture per frame (two variants: the two streams share one).
 * A third process joining the running stream gets a key frame at once,
 * long before the 2 s interval. Before, a buffer had one serving mode for
 * all: the mono snap got the 256 px stream. */
TEST(each_subscriber_gets_the_variant_it_asked_for) {
  spy_vpx_register();
  spy_buffer_request req = {.name = "fb",
                            .mode = SPY_BUFFER_STREAM,
                            .display = SPY_DISPLAY_COLORS,
                            .long_edge = 256};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req, 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 320, 192, 30) >= 0);
  chunk_log *l = calloc(1, sizeof *l);
  CHECK_EQ(log_open(l, r.p), 0);
  uint32_t mw, mh, sw, sh;
  spy_thumbnail_size(320, 192, 64, &mw, &mh);
  spy_thumbnail_size(320, 192, 256, &sw, &sh);
  uint8_t *mono = malloc((size_t)mw * mh * 4),
          *colors = malloc((size_t)sw * sh * 4);
  spy_image_to_rgba8_mode(mono, mw, mh, r.img[0], 320, 192, 320 * 4,
                          SPY_PIXEL_RGBA8, SPY_DISPLAY_MONO);
  spy_image_to_rgba8_mode(colors, sw, sh, r.img[0], 320, 192, 320 * 4,
                          SPY_PIXEL_RGBA8, SPY_DISPLAY_COLORS);

  char png_a[300], png_b[300], png_c[300];
  snprintf(png_a, sizeof png_a, "%s/mono.png", dir);
  snprintf(png_b, sizeof png_b, "%s/stream.png", dir);
  snprintf(png_c, sizeof png_c, "%s/joined.png", dir);
  FILE *a = snap_start(png_a, "--mode mono --long-edge 64");
  FILE *b = snap_start(png_b, "--stream --mode colors --long-edge 256");
  CHECK(a && b);
  /* no buffer frame until all three are subscribed, so each is served
   * while the others are */
  double end = tu_now_s() + 30;
  while (subscribers(r.p) < 3 && tu_now_s() < end) {
    spy_consumer_poll(r.c, 5);
    spy_frame_begin(r.p);
    spy_frame_end(r.p);
  }
  CHECK_EQ(subscribers(r.p), 3);
  CHECK_EQ(buffer_variants(r.p), 2);
  end = tu_now_s() + 40;
  while ((access(png_a, F_OK) || access(png_b, F_OK)) && tu_now_s() < end) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  for (int i = 0; i < 20; i++)
    rig_frame(&r, NULL); /* let them finish writing */
  CHECK_EQ(snap_finish(a), 0);
  CHECK_EQ(snap_finish(b), 0);
  uint32_t w = 0, h = 0;
  uint8_t *got = read_png(png_a, &w, &h);
  CHECK(got != NULL);
  CHECK_EQ(w, mw);
  CHECK_EQ(h, mh);
  CHECK(memcmp(got, mono, (size_t)mw * mh * 4) == 0);
  free(got);
  got = read_png(png_b, &w, &h);
  CHECK(got != NULL);
  CHECK_EQ(w, sw);
  CHECK_EQ(h, sh);
  double q = psnr(got, colors, (size_t)sw * sh);
  fprintf(stderr, "  stream snap: %ux%u, PSNR %.1f dB\n", w, h, q);
  CHECK(q > 30.0);
  free(got);
  /* this process's consumer kept only its stream, never the mono frames */
  const spy_state *st = spy_consumer_state(r.c);
  CHECK(RIG_UNTIL(&r, NULL, 20,
                  st->n_images == 1 && spy_state_image_find_variant(st, &req) &&
                      spy_state_image_find_variant(st, &req)->images >= 1));
  CHECK_EQ(spy_state_image_find(st, "fb")->width, sw);
  CHECK(st->images_ignored >= 1);
  CHECK(psnr(spy_state_image_find(st, "fb")->rgba, colors, (size_t)sw * sh) >
        30.0);

  /* the stream runs on; a third process joins it */
  end = tu_now_s() + 30;
  while (buffer_variants(r.p) != 1 && tu_now_s() < end)
    rig_frame(&r, NULL); /* the snaps are gone: one variant left */
  CHECK_EQ(buffer_variants(r.p), 1);
  log_poll(l);
  int from = l->n;
  end = tu_now_s() + 30;
  while (tu_now_s() < end &&
         !(l->n > from + 2 && l->c[l->n - 1].at_ms - l->c[from].at_ms > 300)) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  uint64_t join_ms = mono_ms();
  int joined_at = l->n;
  FILE *c = snap_start(png_c, "--stream --mode colors --long-edge 256");
  CHECK(c != NULL);
  end = tu_now_s() + 40;
  while (access(png_c, F_OK) && tu_now_s() < end) {
    rig_frame(&r, NULL);
    log_poll(l);
  }
  for (int i = 0; i < 20; i++)
    rig_frame(&r, NULL);
  CHECK_EQ(snap_finish(c), 0);
  int key_after = -1;
  for (int i = joined_at; i < l->n && key_after < 0; i++)
    if (l->c[i].key)
      key_after = i;
  CHECK(key_after >= 0);
  fprintf(stderr, "  key frame %llu ms after the third joined\n",
          (unsigned long long)(l->c[key_after].at_ms - join_ms));
  CHECK(l->c[key_after].at_ms - join_ms < 1500);
  CHECK_EQ(l->c[key_after].mode, SPY_BUFFER_STREAM);
  CHECK_EQ(l->c[key_after].long_edge, 256);
  CHECK_EQ(l->c[key_after].display, SPY_DISPLAY_COLORS);
  got = read_png(png_c, &w, &h);
  CHECK(got != NULL);
  CHECK_EQ(w, sw);
  CHECK(psnr(got, colors, (size_t)sw * sh) > 30.0);
  free(got);
  free(mono);
  free(colors);
  log_close(l);
  free(l);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

static uint32_t encoders_open(spy_provider *p) {
  spy_transport *t = spy_provider_transport(p);
  spy_pool_stats ps;
  t->ops->pool_stats(t, &ps);
  return ps.encoders;
}

/* Five consumers ask one buffer in five variants: four are served, the
 * fifth request is refused and counted (it gets no image, the others
 * theirs). When a place frees, the refused stream is served with its own
 * encoder; the encoder is closed once its consumer leaves (the next
 * capture no longer names it). */
TEST(variants_are_bounded_and_encoders_freed) {
  spy_vpx_register();
  spy_buffer_request req[5];
  for (int i = 0; i < 4; i++)
    req[i] = (spy_buffer_request){.name = "fb",
                                  .mode = SPY_BUFFER_THUMBNAIL,
                                  .long_edge = (uint16_t)(16 + 16 * i)};
  req[4] = (spy_buffer_request){
      .name = "fb", .mode = SPY_BUFFER_STREAM, .long_edge = 96};
  rig r;
  CHECK_EQ(rig_open(&r, SPY_TRANSPORT_OFFLOAD, &req[0], 1), 0);
  CHECK(rig_add(&r, "fb", SPY_PIXEL_RGBA8, 128, 64, 100) >= 0);
  CHECK(RIG_UNTIL(&r, NULL, 30, subscribers(r.p) == 1));
  spy_consumer *c[4] = {0};
  for (int i = 1; i < 5; i++) {
    spy_consumer_desc cd = {.dir = dir,
                            .query_initial_ms = 20,
                            .no_clock_sync = 1,
                            .features = SPY_FEAT_STATS,
                            .buffers = &req[i],
                            .n_buffers = 1};
    CHECK_EQ(spy_consumer_create(&c[i - 1], &cd), 0);
    /* one at a time, so the stream is the one beyond the bound */
    CHECK(RIG_UNTIL(&r, c[i - 1], 30, subscribers(r.p) == (uint32_t)i + 1));
  }
  spy_buffer_stats bs;
  spy_buffer_get_stats(r.p, &bs);
  CHECK_EQ(bs.variants, 4);
  CHECK_EQ(bs.refused, 1);
  double end = tu_now_s() + 30;
  int ok = 0;
  while (!ok && tu_now_s() < end) {
    rig_frame(&r, NULL);
    ok = decoded(r.c, "fb", 2);
    for (int i = 0; i < 4; i++) {
      spy_consumer_poll(c[i], 0);
      if (i < 3)
        ok = ok && decoded(c[i], "fb", 2);
    }
  }
  CHECK(ok);
  for (int i = 0; i < 3; i++) {
    const spy_state_image *im =
        spy_state_image_find(spy_consumer_state(c[i]), "fb");
    CHECK_EQ(im->width, 32u + 16u * (uint32_t)i);
    CHECK_EQ(im->mode, SPY_BUFFER_THUMBNAIL);
    CHECK_EQ(im->long_edge, 32u + 16u * (uint32_t)i);
  }
  CHECK(spy_state_image_find(spy_consumer_state(c[3]), "fb") == NULL);
  CHECK_EQ(encoders_open(r.p), 0);
  /* a thumbnail consumer leaves: the stream is served now, with its
   * encoder, and gets its images */
  spy_consumer_destroy(c[2]);
  c[2] = NULL;
  end = tu_now_s() + 30;
  while (!decoded(c[3], "fb", 2) && tu_now_s() < end) {
    rig_frame(&r, NULL);
    spy_consumer_poll(c[3], 0);
  }
  CHECK(decoded(c[3], "fb", 2));
  CHECK_EQ(spy_state_image_find(spy_consumer_state(c[3]), "fb")->codec,
           SPY_CODEC_VP9);
  CHECK_EQ(encoders_open(r.p), 1);
  spy_buffer_get_stats(r.p, &bs);
  CHECK_EQ(bs.refused, 0);
  /* the stream's consumer leaves: its encoder goes with the next capture */
  spy_consumer_destroy(c[3]);
  c[3] = NULL;
  CHECK(RIG_UNTIL(&r, NULL, 30, encoders_open(r.p) == 0));
  for (int i = 0; i < 4; i++)
    if (c[i])
      spy_consumer_destroy(c[i]);
  rig_close(&r);
  spy_video_codec_unregister(SPY_CODEC_VP9);
}

TEST_MAIN(TEST_CASE(convert_each_type_to_known_rgba8),
          TEST_CASE(each_subscriber_gets_the_variant_it_asked_for),
          TEST_CASE(variants_are_bounded_and_encoders_freed),
          TEST_CASE(snap_writes_a_png_whose_pixels_match),
          TEST_CASE(snap_refuses_bad_usage), TEST_CASE(convert_display_modes),
          TEST_CASE(thumbnail_is_an_area_filter),
          TEST_CASE(half_floats_round_trip),
          TEST_CASE(submit_rejects_a_short_stride),
          TEST_CASE(raw_images_of_every_type_arrive_exact),
          TEST_CASE(thumbnail_long_edge_and_display_mode_are_served),
          TEST_CASE(nothing_is_copied_without_a_subscriber_for_the_buffer),
          TEST_CASE(an_empty_pool_drops_and_counts),
          TEST_CASE(a_buffer_the_pool_turned_away_captures_first),
          TEST_CASE(a_large_raw_image_travels_in_parts),
          TEST_CASE(a_consumer_decodes_only_the_buffers_it_asked_for),
          TEST_CASE(buffer_frames_show_in_the_message_profiler),
          TEST_CASE(vp9_stream_decodes_within_psnr),
          TEST_CASE(without_a_codec_a_stream_is_sent_raw),
          TEST_CASE(key_frames_on_resize_and_every_two_seconds),
          TEST_CASE(a_consumer_joining_mid_stream_starts_on_a_key_frame),
          TEST_CASE(a_new_subscriber_forces_key_frames_only_on_its_streams),
          TEST_CASE(buffer_metadata_lists_every_variant_served),
          TEST_CASE(buffer_variants_decoder_rejects_bad_values),
          TEST_CASE(vpxdec_decodes_the_chunks_as_ivf),
          TEST_CASE(pixels_decoder_rejects_bad_parts))
