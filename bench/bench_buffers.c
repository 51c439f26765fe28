/* bench_buffers.c — `spyglass bench buffers`: what streaming a named
 * buffer costs. The frame thread's subscribed submit of a 1280x720 RGBA8
 * image (one copy into a pooled buffer) next to a memcpy of the same bytes,
 * and an unsubscribed submit (one branch) next to an empty loop; the
 * worker's conversion throughput per pixel type next to memcpy; VP9 encode
 * frames per second at 640x360 and 1280x720 on one thread, and bytes per
 * second at 4 fps against raw RGBA8 with the decoded PSNR, on the demo's
 * own rendered frames. Ratios to baselines measured in the same run. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "demo_scene.h"
#include "platform/platform.h"
#include "provider/provider_internal.h"
#include "spyglass/buffers.h"
#include "spyglass/codec.h"
#include "spyglass/consumer.h"
#include "spyglass/media.h"
#include "spyglass/provider.h"
#include "spyglass/transport.h"

#define W 1280u
#define H 720u

static double median(double *v, int n) {
  return bench_quantile(v, (size_t)n, 0.5);
}

/* ns of one memcpy of n bytes, median of rounds (cold source each time:
 * the submit reads the application's pixels once too). */
static double memcpy_ns(uint8_t *dst, const uint8_t *src, size_t n,
                        int rounds) {
  double *v = malloc(sizeof(double) * (size_t)rounds);
  for (int r = 0; r < rounds; r++) {
    uint64_t t0 = bench_now_ns();
    memcpy(dst, src, n);
    v[r] = (double)(bench_now_ns() - t0);
    bench_sink(dst[r % n]);
  }
  double m = median(v, rounds);
  free(v);
  return m;
}

/* Page faults this thread took so far (the submit's copy should take
 * none: the service mapped the pool's pages). */
static long minor_faults(void) {
  struct rusage u;
  return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_minflt : 0;
}

typedef struct conv_arg {
  uint8_t *dst;
  const void *src;
  uint32_t type, dw, dh;
} conv_arg;

static void conv_op(void *a) {
  conv_arg *c = a;
  spy_image_to_rgba8_mode(c->dst, c->dw, c->dh, c->src, W, H,
                          (size_t)W * spy_pixel_bytes(c->type), c->type, 0);
  bench_sink(c->dst[0]);
}

typedef struct cpy_arg {
  uint8_t *dst;
  const uint8_t *src;
  size_t n;
} cpy_arg;

static void cpy_op(void *a) {
  cpy_arg *c = a;
  memcpy(c->dst, c->src, c->n);
  bench_sink(c->dst[c->n - 1]);
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

/* Frames rendered by the demo scene at w x h (the pixels VP9 sees). */
static uint8_t **demo_frames(spy_provider *p, uint32_t w, uint32_t h, int n) {
  demo_scene *s = demo_scene_create(w, h, 1, p);
  if (!s)
    return NULL;
  uint8_t **f = calloc((size_t)n, sizeof *f);
  for (int i = 0; i < n; i++) {
    demo_stats st;
    demo_scene_wait_ready(s);
    demo_scene_update(s, 0.25, &st); /* 4 fps apart */
    demo_scene_submit(s);
    demo_scene_wait_ready(s);
    demo_scene_wait_ready(s);
    uint32_t fw, fh;
    usleep(1000);
    const uint8_t *px = demo_scene_pixels(s, &fw, &fh);
    f[i] = malloc((size_t)w * h * 4);
    memcpy(f[i], px, (size_t)w * h * 4);
  }
  demo_scene_destroy(s);
  return f;
}

/* VP9: fps of encode on this thread, bytes per frame, PSNR of the decode. */
static void vp9_row(bench_table *t, spy_provider *p, uint32_t w, uint32_t h,
                    int n) {
  const spy_video_codec_ops *vc = spy_video_codec_get(SPY_CODEC_VP9);
  char name[64];
  snprintf(name, sizeof name, "vp9 %ux%u", w, h);
  if (!vc) {
    double v[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    bench_row(t, name, v);
    return;
  }
  uint8_t **f = demo_frames(p, w, h, n);
  void *enc = NULL, *dec = NULL;
  vc->encoder_create(&enc, w, h, 4);
  vc->decoder_create(&dec);
  size_t cap = (size_t)w * h * 4 + 65536, len;
  uint8_t *out = malloc(cap), *back = malloc((size_t)w * h * 4);
  double enc_ns = 0, bytes = 0, q = 0;
  int key;
  for (int i = 0; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    vc->encode(enc, f[i], i == 0 || i % 8 == 0, out, cap, &len, &key);
    enc_ns += (double)(bench_now_ns() - t0);
    bytes += (double)len;
    if (vc->decode(dec, out, len, back, w, h) == 0)
      q += psnr(back, f[i], (size_t)w * h);
  }
  double fps = 1e9 * n / enc_ns, per_s = bytes / n * 4.0,
         raw_s = (double)w * h * 4 * 4.0;
  double v[6] = {fps, fps / 4.0, per_s / 1024.0, raw_s / per_s, q / n, NAN};
  bench_row(t, name, v);
  vc->encoder_destroy(enc);
  vc->decoder_destroy(dec);
  for (int i = 0; i < n; i++)
    free(f[i]);
  free(f);
  free(out);
  free(back);
}

/* ---- submit -> decoded in a consumer in another process ---------------
 * The child is forked before the provider exists (no threads yet, so no
 * lock is held across the fork). Per round the parent sends a mode byte
 * (1 raw, 2 VP9; 0 ends), the child subscribes to "fb" that way and
 * reports (provider frame, CLOCK_MONOTONIC ns) each time its state holds
 * a newer decoded image, then a frame of UINT64_MAX when it has `n` or
 * gave up. CLOCK_MONOTONIC is one clock for both processes. */

typedef struct lat_rec {
  uint64_t frame, t_ns;
} lat_rec;

static void lat_child(const char *dir, int cmd_fd, int rep_fd, int n) {
  uint8_t mode;
  while (read(cmd_fd, &mode, 1) == 1 && mode) {
    spy_buffer_request req = {.name = "fb",
                              .mode = mode == 2 ? SPY_BUFFER_STREAM
                                                : SPY_BUFFER_THUMBNAIL,
                              .long_edge = mode == 2 ? 0 : (uint16_t)W};
    spy_consumer *c;
    spy_consumer_desc cd = {.dir = dir,
                            .query_initial_ms = 20,
                            .no_clock_sync = 1,
                            .features = SPY_FEAT_STATS,
                            .buffers = &req,
                            .n_buffers = 1};
    uint64_t last = UINT64_MAX, end = bench_now_ns() + 30000000000ull;
    int got = 0;
    if (spy_consumer_create(&c, &cd) == 0) {
      while (got < n && bench_now_ns() < end) {
        spy_consumer_poll(c, 1);
        const spy_state_image *im =
            spy_state_image_find(spy_consumer_state(c), "fb");
        if (!im || !im->images || im->frame == last)
          continue;
        last = im->frame;
        lat_rec r = {im->frame, bench_now_ns()};
        if (write(rep_fd, &r, sizeof r) != sizeof r)
          break;
        got++;
      }
      spy_consumer_destroy(c);
    }
    lat_rec done = {UINT64_MAX, 0};
    if (write(rep_fd, &done, sizeof done) != sizeof done)
      break;
  }
  _exit(0);
}

/* One round: submits fb every period_ms until the child has reported n
 * images (or 30 s), matches each report to its submit; p50 and p99 in ms.
 */
static void lat_round(bench_table *t, spy_provider *p, int hb,
                      const uint8_t *img, int cmd_fd, int rep_fd, int mode,
                      int n, uint32_t period_ms, const char *name) {
  enum { SLOTS = 4096 };
  static uint64_t sub_ns[SLOTS];
  memset(sub_ns, 0, sizeof sub_ns);
  double *v = malloc(sizeof(double) * (size_t)n);
  int nv = 0, done = 0;
  uint8_t m = (uint8_t)mode;
  if (write(cmd_fd, &m, 1) != 1)
    done = 1;
  uint64_t next = 0, end = bench_now_ns() + 40000000000ull;
  while (!done && bench_now_ns() < end) {
    spy_frame_begin(p);
    uint64_t now = bench_now_ns();
    if (now >= next) {
      uint64_t f = p->frame_no; /* the frame the capture is stamped with */
      if (spy_buffer_submit(p, hb, img, (size_t)W * 4) == 1)
        sub_ns[f % SLOTS] = bench_now_ns();
      next = now + (uint64_t)period_ms * 1000000u;
    }
    spy_frame_end(p);
    lat_rec r;
    ssize_t k;
    while ((k = read(rep_fd, &r, sizeof r)) == (ssize_t)sizeof r) {
      if (r.frame == UINT64_MAX) {
        done = 1;
        break;
      }
      uint64_t s0 = sub_ns[r.frame % SLOTS];
      if (s0 && r.t_ns > s0 && nv < n)
        v[nv++] = (double)(r.t_ns - s0) / 1e6;
    }
    usleep(1000);
  }
  double row[3] = {nv ? bench_quantile(v, (size_t)nv, 0.5) : NAN,
                   nv ? bench_quantile(v, (size_t)nv, 0.99) : NAN, nv};
  bench_row(t, name, row);
  free(v);
}

int bench_buffers(int argc, char **argv) {
  bench_opts o;
  if (bench_parse(argc, argv, &o,
                  "usage: spyglass bench buffers [--json] [--quick]\n"))
    return 2;
  int rounds = o.quick ? 10 : 60;
  static char dir[128];
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  /* the latency consumer's process, forked while this one has no threads */
  int cmd[2] = {-1, -1}, rep[2] = {-1, -1};
  pid_t kid = -1;
  int lat_n = o.quick ? 8 : 30;
  if (pipe(cmd) == 0 && pipe(rep) == 0 && (kid = fork()) == 0) {
    close(cmd[1]);
    close(rep[0]);
    lat_child(dir, cmd[0], rep[1], lat_n);
  }
  if (kid > 0) {
    close(cmd[0]);
    close(rep[1]);
    fcntl(rep[0], F_SETFL, O_NONBLOCK);
  }
  spy_provider *p;
  spy_provider_desc d = {.name = "bench-buffers",
                         .dir = dir,
                         .transport = SPY_TRANSPORT_OFFLOAD,
                         .ring_bytes = 16u << 20};
  if (spy_provider_create(&p, &d) < 0)
    return 1;
  uint8_t *img = malloc((size_t)W * H * 4), *dst = malloc((size_t)W * H * 4);
  for (size_t i = 0; i < (size_t)W * H * 4; i++)
    img[i] = (uint8_t)(i * 31 + (i >> 12));
  int hb =
      spy_buffer_declare(p, &(spy_buffer_desc){.name = "fb",
                                               .pixel_type = SPY_PIXEL_RGBA8,
                                               .width = W,
                                               .height = H,
                                               .max_fps = 1000});
  bench_table t = {.title = "bench buffers: streaming a named buffer "
                            "(1280x720 unless named)",
                   .cols = {"case", "value", "baseline", "ratio"},
                   .ncols = 4};
  /* unsubscribed: one branch */
  double e[32], s[32];
  for (int r = 0; r < 32; r++) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < 100000; i++)
      __asm__ __volatile__("" ::: "memory");
    uint64_t t1 = bench_now_ns();
    spy_frame_begin(p);
    for (int i = 0; i < 100000; i++) {
      spy_buffer_submit(p, hb, img, (size_t)W * 4);
      __asm__ __volatile__("" ::: "memory");
    }
    spy_frame_end(p);
    uint64_t t2 = bench_now_ns();
    e[r] = (double)(t1 - t0) / 1e5;
    s[r] = (double)(t2 - t1) / 1e5;
  }
  double me = median(e, 32), ms = median(s, 32);
  bench_row(&t, "submit, nobody watching (ns)",
            (double[]){ms, me, me > 0 ? ms / me : NAN});
  /* subscribed: a consumer asks for a thumbnail of fb */
  spy_buffer_request req = {.name = "fb", .mode = SPY_BUFFER_THUMBNAIL};
  spy_consumer *c;
  spy_consumer_desc cd = {.dir = dir,
                          .query_initial_ms = 20,
                          .no_clock_sync = 1,
                          .features = SPY_FEAT_STATS,
                          .buffers = &req,
                          .n_buffers = 1};
  spy_consumer_create(&c, &cd);
  spy_buffer_stats st;
  uint64_t deadline = bench_now_ns() + 10000000000ull;
  do {
    spy_frame_begin(p);
    spy_buffer_submit(p, hb, img, (size_t)W * 4);
    spy_frame_end(p);
    spy_consumer_poll(c, 5);
    spy_buffer_get_stats(p, &st);
  } while (st.captured < 2 && bench_now_ns() < deadline);
  /* The baseline, measured in the same loop under the same conditions: a
   * memcpy of the same bytes into one of SPY_POOL_LARGE_COUNT destinations
   * taken in turn (as the pool hands its buffers out), each already
   * written once (the pool's pages are mapped by the service). A memcpy
   * into one destination copied to again and again finds it in the cache,
   * which no capture does: that figure is shown too, as it flatters. */
  size_t nbytes = (size_t)W * H * 4;
  uint8_t *rot[SPY_POOL_LARGE_COUNT];
  for (uint32_t k = 0; k < SPY_POOL_LARGE_COUNT; k++) {
    rot[k] = malloc(nbytes);
    memset(rot[k], 0, nbytes);
  }
  double *sv = malloc(sizeof(double) * (size_t)rounds);
  double *bv = malloc(sizeof(double) * (size_t)rounds);
  int ns = 0, nb = 0;
  long faults = 0;
  for (int r = 0; r < rounds * 4 && ns < rounds; r++) {
    spy_consumer_poll(c, 10); /* the worker returns the buffer meanwhile */
    if (r & 1) {
      uint8_t *d0 = rot[(unsigned)nb % SPY_POOL_LARGE_COUNT];
      uint64_t t0 = bench_now_ns();
      memcpy(d0, img, nbytes);
      uint64_t t1 = bench_now_ns();
      bench_sink(d0[(unsigned)r % nbytes]);
      if (nb < rounds)
        bv[nb++] = (double)(t1 - t0);
      continue;
    }
    spy_frame_begin(p);
    long f0 = minor_faults();
    uint64_t t0 = bench_now_ns();
    int rc = spy_buffer_submit(p, hb, img, (size_t)W * 4);
    uint64_t t1 = bench_now_ns();
    long f1 = minor_faults();
    spy_frame_end(p);
    if (rc == 1) {
      sv[ns++] = (double)(t1 - t0);
      faults += f1 - f0;
    }
  }
  double sub = ns ? median(sv, ns) : NAN;
  double cpy = nb ? median(bv, nb) : NAN;
  double warm = memcpy_ns(dst, img, nbytes, rounds);
  bench_row(&t, "submit, subscribed (us)",
            (double[]){sub / 1e3, cpy / 1e3, sub / cpy});
  bench_row(&t, "  page faults per subscribed submit",
            (double[]){ns ? (double)faults / ns : NAN, 0, NAN});
  bench_row(&t, "  memcpy, one warm destination (us)",
            (double[]){warm / 1e3, cpy / 1e3, warm / cpy});
  for (uint32_t k = 0; k < SPY_POOL_LARGE_COUNT; k++)
    free(rot[k]);
  free(sv);
  free(bv);
  spy_consumer_destroy(c);
  /* conversion throughput per type, MB/s of source bytes */
  cpy_arg ca = {dst, img, (size_t)W * H * 4};
  double mc = bench_time_op(cpy_op, &ca, o.quick ? 3 : 7, 50);
  double mc_mbs = (double)ca.n / mc * 1e3;
  bench_row(&t, "memcpy 3.7 MB (MB/s)", (double[]){mc_mbs, mc_mbs, 1});
  static const uint32_t types[] = {SPY_PIXEL_RGBA8,   SPY_PIXEL_BGRA8,
                                   SPY_PIXEL_R8,      SPY_PIXEL_RGBA16F,
                                   SPY_PIXEL_RGBA32F, SPY_PIXEL_R32F};
  size_t maxb = (size_t)W * H * 16;
  uint8_t *src = malloc(maxb);
  for (size_t i = 0; i < maxb / 4; i++) {
    float f = (float)(i % 1000) / 999.0f;
    memcpy(src + i * 4, &f, 4);
  }
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    for (int thumb = 0; thumb < 2; thumb++) {
      conv_arg a = {dst, types[k] == SPY_PIXEL_RGBA8 ? img : src, types[k], W,
                    H};
      if (thumb)
        spy_thumbnail_size(W, H, 256, &a.dw, &a.dh);
      double ns1 = bench_time_op(conv_op, &a, o.quick ? 3 : 5, 50);
      double mbs = (double)W * H * spy_pixel_bytes(types[k]) / ns1 * 1e3;
      char name[64];
      snprintf(name, sizeof name, "convert %s%s (MB/s)",
               spy_pixel_type_name(types[k]), thumb ? " -> 256" : "");
      bench_row(&t, name, (double[]){mbs, mc_mbs, mbs / mc_mbs});
    }
  }
  free(src);
  bench_print(&t, &o);
  bench_table v = {.title = "bench buffers: VP9 on the demo's frames, one "
                            "thread, 4 fps stream",
                   .cols = {"size", "encode fps", "headroom at 4 fps",
                            "KiB/s at 4 fps", "raw / vp9", "PSNR dB"},
                   .ncols = 6};
  vp9_row(&v, p, 640, 360, o.quick ? 6 : 24);
  vp9_row(&v, p, 1280, 720, o.quick ? 6 : 24);
  v.notes[v.nnotes++] = "encode fps: frames encoded per second of this "
                        "thread's wall time (key frame every 8th)";
  bench_print(&v, &o);
  bench_table l = {.title = "bench buffers: submit -> decoded in a consumer "
                            "in another process, 1280x720 fb",
                   .cols = {"path", "p50 ms", "p99 ms", "images"},
                   .ncols = 4};
  if (kid > 0) {
    lat_round(&l, p, hb, img, cmd[1], rep[0], 1, lat_n, 100,
              "raw (buffer:raw in parts), 10 fps");
    if (spy_video_codec_get(SPY_CODEC_VP9))
      lat_round(&l, p, hb, img, cmd[1], rep[0], 2, lat_n, 250,
                "vp9 stream, 4 fps");
    uint8_t stop = 0;
    if (write(cmd[1], &stop, 1) != 1)
      kill(kid, SIGKILL);
    close(cmd[1]);
    close(rep[0]);
    waitpid(kid, NULL, 0);
  }
  l.notes[l.nnotes++] = "from the frame thread's submit to the consumer "
                        "process's state holding the decoded RGBA8 image "
                        "(CLOCK_MONOTONIC in both)";
  bench_print(&l, &o);
  spy_provider_destroy(p);
  free(img);
  free(dst);
  return 0;
}
