/* bench_msgprof.c — `spyglass bench msgprof`: what the message profiler
 * adds. For a small message (bench wire's stats flush) and a large one (a
 * 1 MiB buffer:raw), in one run: encode + post through an unwrapped
 * transport (the baseline), the same through the wrapped transport, and
 * measure() alone, as ratios to the baseline.
 *
 * The transport is a minimal one defined here, whose post copies the
 * frame into a 4 MiB ring (one memcpy), standing in for the real
 * transport until it lands; the table says so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "spyglass/profiler.h"

/* ---- the in-bench transport: post = memcpy into a ring ---------------- */

typedef struct copy_transport {
  spy_transport base;
  spy_buffer buf;
  uint8_t *ring;
  size_t ring_cap, head;
} copy_transport;

static spy_buffer *copy_acquire(spy_transport *t, spy_tier tier) {
  (void)tier;
  return &((copy_transport *)t)->buf;
}

static int copy_post(spy_transport *t, spy_buffer *b, size_t len) {
  copy_transport *c = (copy_transport *)t;
  if (len > c->ring_cap)
    return SPY_ETOOBIG;
  if (c->head + len > c->ring_cap)
    c->head = 0;
  memcpy(c->ring + c->head, b->data, len);
  c->head += (len + 7) & ~(size_t)7;
  return 0;
}

static void copy_release(spy_transport *t, spy_buffer *b) {
  (void)t;
  (void)b;
}

static const spy_transport_ops copy_ops = {.name = "bench-memcpy",
                                           .acquire = copy_acquire,
                                           .post = copy_post,
                                           .release_unused = copy_release};

/* ---- the messages -------------------------------------------------------- */

enum { PX_W = 512, PX_H = 512 }; /* RGBA8: 1 MiB */
enum { REPEATS = 7 };
static uint8_t *pixels;

static int put_small(spy_frame_writer *w, void *ctx) {
  (void)ctx;
  bench_put_stats_flush(w);
  return 0;
}

static int put_large(spy_frame_writer *w, void *ctx) {
  (void)ctx;
  spy_pixels px = {.frame = 1,
                   .width = PX_W,
                   .height = PX_H,
                   .name = "color",
                   .name_len = 5,
                   .data = pixels,
                   .data_len = PX_W * PX_H * 4};
  spy_put_pixels(w, &px);
  return 0;
}

typedef struct case_arg {
  spy_transport *t;
  spy_profiler *p;
  spy_msg msg;
} case_arg;

/* What a provider does per flush: acquire, encode (timing itself when the
 * transport asks), post. */
static void encode_and_post(void *arg) {
  case_arg *a = arg;
  spy_transport *t = a->t;
  spy_buffer *b = spy_transport_acquire(t, SPY_TIER_MEDIUM);
  int timed = t->timing_wanted;
  uint64_t t0 = timed ? bench_now_ns() : 0;
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, a->msg.type, 1700000000000ull, 1, 0);
  a->msg.encode(&w, a->msg.ctx);
  int n = spy_frame_finish(&w);
  if (timed)
    b->encode_ns = bench_now_ns() - t0;
  if (n < 0 || spy_transport_post(t, b, (size_t)n) < 0)
    bench_sink(1);
}

static void measure_only(void *arg) {
  case_arg *a = arg;
  spy_msg_record r;
  spy_profiler_measure(a->p, &a->msg, &r);
  bench_sink(r.bytes);
}

static void clock_read(void *arg) {
  (void)arg;
  bench_sink(bench_now_ns());
}

static void encode_only(void *arg) {
  case_arg *a = arg;
  spy_buffer *b = spy_transport_acquire(a->t, SPY_TIER_MEDIUM);
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, a->msg.type, 1700000000000ull, 1, 0);
  a->msg.encode(&w, a->msg.ctx);
  bench_sink((uint64_t)spy_frame_finish(&w));
}

int bench_msgprof(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench msgprof [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  enum { BUF = 2 << 20, RING = 4 << 20 };
  copy_transport ct = {.base = {.ops = &copy_ops}};
  ct.buf.data = malloc(BUF);
  ct.buf.cap = BUF;
  ct.ring = malloc(RING);
  ct.ring_cap = RING;
  pixels = malloc(PX_W * PX_H * 4);
  spy_profiler *p = NULL;
  spy_profiler_desc pd = {.scratch_bytes = BUF};
  if (!ct.buf.data || !ct.ring || !pixels || spy_profiler_create(&p, &pd) < 0) {
    fprintf(stderr, "bench msgprof: out of memory\n");
    return 1;
  }
  memset(ct.buf.data, 0, BUF); /* no page faults in the timed loops */
  memset(ct.ring, 0, RING);
  for (size_t i = 0; i < (size_t)PX_W * PX_H * 4; i++)
    pixels[i] = (uint8_t)(i * 31);
  int rounds = o.quick ? 3 : 7, reps = o.quick ? 1 : REPEATS;
  double target = o.quick ? 2 : 10;
  bench_table t = {.title = "bench msgprof: what the message profiler adds "
                            "to encode + post",
                   .cols = {"op", "bytes", "ns_per_msg", "x_unwrapped"},
                   .ncols = 4};
  static const struct {
    const char *name;
    uint32_t type;
    spy_msg_encode_fn fn;
  } msgs[] = {{"flush", SPY_MSG_DATA, put_small},
              {"1 MiB raw", SPY_MSG_BUFFER_RAW, put_large}};
  for (size_t m = 0; m < sizeof msgs / sizeof msgs[0]; m++) {
    case_arg a = {.t = &ct.base,
                  .p = p,
                  .msg = {.type = msgs[m].type, .encode = msgs[m].fn}};
    spy_msg_record r;
    spy_profiler_measure(p, &a.msg, &r);
    if (r.flags & SPY_MSGREC_ERROR) {
      fprintf(stderr, "bench msgprof: %s does not encode: %s\n", msgs[m].name,
              spy_strerror(r.err));
      return 1;
    }
    double bytes = r.bytes;
    /* Interleaved repeats, so a drift of the machine (other work on the
     * shared cores, cache state) hits every variant alike. */
    double enc[REPEATS], plain[REPEATS], wrapped[REPEATS], meas[REPEATS];
    for (int k = 0; k < reps; k++) {
      enc[k] = bench_time_op(encode_only, &a, rounds, target);
      plain[k] = bench_time_op(encode_and_post, &a, rounds, target);
      if (spy_profiler_wrap(p, &ct.base) < 0) {
        fprintf(stderr, "bench msgprof: wrap failed\n");
        return 1;
      }
      wrapped[k] = bench_time_op(encode_and_post, &a, rounds, target);
      spy_profiler_unwrap(p, &ct.base);
      meas[k] = bench_time_op(measure_only, &a, rounds, target);
    }
    double t_enc = bench_quantile(enc, (size_t)reps, 0.5);
    double t_plain = bench_quantile(plain, (size_t)reps, 0.5);
    double t_wrap = bench_quantile(wrapped, (size_t)reps, 0.5);
    double t_meas = bench_quantile(meas, (size_t)reps, 0.5);
    char name[64];
    snprintf(name, sizeof name, "%s: encode only", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_enc, t_enc / t_plain});
    snprintf(name, sizeof name, "%s: post unwrapped", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_plain, 1.0});
    snprintf(name, sizeof name, "%s: post wrapped", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_wrap, t_wrap / t_plain});
    snprintf(name, sizeof name, "%s: measure()", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_meas, t_meas / t_plain});
  }
  t.notes[t.nnotes++] =
      "post = acquire + encode + transport post; the transport here is a "
      "minimal in-bench one whose post memcpys the frame into a 4 MiB ring "
      "(the real transport is not on this branch yet)";
  t.notes[t.nnotes++] =
      "wrapped: the encoder times itself (timing_wanted) and the wrapper "
      "times the post and records it; measure(): encode into the "
      "profiler's scratch buffer, no post";
  t.notes[t.nnotes++] = "flush: bench wire's stats flush (data frame); "
                        "1 MiB raw: a buffer:raw frame of 512x512 RGBA8";
  static char clock_note[160];
  snprintf(clock_note, sizeof clock_note,
           "one CLOCK_MONOTONIC read costs %.0f ns here; a wrapped post "
           "makes four (two in the encoder, two around the post)",
           bench_time_op(clock_read, NULL, rounds, target));
  t.notes[t.nnotes++] = clock_note;
  t.notes[t.nnotes++] = "medians over interleaved repeats of medians of "
                        "per-round means; x_unwrapped = time / post "
                        "unwrapped of the same message";
  bench_print(&t, &o);
  spy_profiler_destroy(p);
  free(ct.buf.data);
  free(ct.ring);
  free(pixels);
  return 0;
}
