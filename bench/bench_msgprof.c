/* bench_msgprof.c — `spyglass bench msgprof`: what the message profiler
 * adds to a post. For a small message (bench wire's stats flush) and a
 * large one (a 1 MiB buffer:raw), in one run, through the real offload
 * transport on a real channel: acquire + encode + post on the posting
 * thread with the transport's profiler hook clear (the baseline) and set,
 * encode alone, and measure() alone, as ratios to the baseline.
 *
 * Each message is timed on its own with the frame clock, in bursts of as
 * many as the tier has buffers, after waiting (untimed) until the worker
 * has returned every buffer: so the figure is what the posting thread pays
 * for one post — the enqueue to the worker — never time spent waiting
 * behind the worker, and never the drop path of an empty pool. The four
 * variants take turns burst by burst and each reports its median message,
 * so a preemption on a loaded machine hits one message of one variant,
 * not a figure. The worker's tick naps 100 µs (a provider's tick waits on
 * its channels instead), so the untimed waits stay short.
 *
 * Every burst starts from the buffers' state in a provider: posted and
 * read by the worker on another CPU (the two threads are pinned apart
 * when the process may use two), so writing them again means taking
 * their cache lines back. The variants used to inherit each other's
 * state instead: the post after "encode only" found its buffers still
 * dirty in this core's cache and skipped that cost, so "encode only" and
 * the hooked post (both after a variant whose buffers the worker had
 * read) showed 3-12x a post that includes the same encode. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "platform/platform.h"
#include "spyglass/profiler.h"
#include "spyglass/transport.h"

enum { PX_W = 512, PX_H = 512 }; /* RGBA8: 1 MiB */
static uint8_t *pixels;

/* The flush: a provider's data frame, 240 samples of fps/cpu/gpu and 10
 * counters plus 64 registry values, from columns of the bench's own on the
 * heap. (Not bench wire's static fixture: how fast glibc copies its
 * columns depends on where the linker happened to put it relative to the
 * heap buffers, 0.3 or 3 µs from one build to the next.) */
enum { FL_SAMPLES = 240, FL_COUNTERS = 10, FL_VALUES = 64 };
typedef struct flush_fixture {
  int16_t fps[FL_SAMPLES];
  uint16_t cpu[FL_SAMPLES], gpu[FL_SAMPLES];
  uint32_t counters[FL_COUNTERS * FL_SAMPLES];
  char keys[FL_VALUES][16];
} flush_fixture;
static flush_fixture *fl;

static int put_small(spy_frame_writer *w, void *ctx) {
  (void)ctx;
  spy_stats_batch b = {.start_frame = 1000,
                       .count = FL_SAMPLES,
                       .n_counters = FL_COUNTERS,
                       .fps_x10 = fl->fps,
                       .cpu_x100 = fl->cpu,
                       .gpu_x100 = fl->gpu,
                       .counters = fl->counters,
                       .counter_stride = FL_SAMPLES};
  spy_put_stats(w, &b);
  spy_delta_writer d;
  spy_delta_begin(&d, w, SPY_SEC_REGISTRY, 0);
  for (int e = 0; e < FL_VALUES; e++) {
    spy_value v = {.kind = SPY_VAL_FLOAT};
    v.v.f[0] = e * 0.25;
    spy_delta_put(&d, SPY_DELTA_SET, fl->keys[e], (uint32_t)strlen(fl->keys[e]),
                  &v);
  }
  spy_delta_end(&d);
  return 0;
}

static int flush_fixture_init(void) {
  fl = calloc(1, sizeof *fl);
  if (!fl)
    return -1;
  for (int i = 0; i < FL_SAMPLES; i++) {
    fl->fps[i] = (int16_t)(600 + i % 30);
    fl->cpu[i] = (uint16_t)(400 + i * 3);
    fl->gpu[i] = (uint16_t)(800 + i * 5);
    for (int c = 0; c < FL_COUNTERS; c++)
      fl->counters[c * FL_SAMPLES + i] = (uint32_t)(c * 100 + i);
  }
  for (int e = 0; e < FL_VALUES; e++)
    snprintf(fl->keys[e], sizeof fl->keys[e], "value.%02d", e);
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

/* The variants, interleaved burst by burst so that whatever the loaded
 * machine does meanwhile hits all of them alike. */
typedef enum variant {
  V_ENCODE,
  V_PLAIN,
  V_HOOKED,
  V_MEASURE,
  V_COUNT
} variant;

typedef struct case_arg {
  spy_transport *t;
  spy_profiler *p;
  spy_msg msg;
  spy_tier tier;
} case_arg;

/* Untimed: until the worker has posted everything and returned the
 * buffers of the tier. */
static void wait_idle(spy_transport *t, spy_tier tier) {
  spy_pool_stats ps;
  for (;;) {
    t->ops->pool_stats(t, &ps);
    if (ps.free[tier] == ps.total[tier])
      return;
    spy__cpu_relax();
  }
}

/* Two CPUs of this process's set, or -1: the posting thread runs on the
 * first and the worker on the second, as in a provider on a multi-core
 * machine, so the cost of taking the buffers' cache lines back from the
 * worker is paid on every run, not only when the scheduler happened to
 * place the two threads apart. */
static int cpu_post = -1, cpu_worker = -1;
static cpu_set_t cpus_before;

static void pin_to(int cpu) {
  if (cpu < 0)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void pick_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return;
  cpus_before = set;
  bench_two_cpus(&cpu_post, &cpu_worker);
}

static void worker_nap(void *ctx, int wait_ms) {
  (void)ctx;
  (void)wait_ms;
  static _Thread_local int pinned;
  if (!pinned) {
    pinned = 1;
    pin_to(cpu_worker);
  }
  usleep(100);
}

/* One timed op of variant v, in ns. */
static double one_op(case_arg *a, variant v) {
  uint64_t t0 = spy__ticks();
  if (v == V_MEASURE) {
    spy_msg_record r;
    spy_profiler_measure(a->p, &a->msg, &r);
    bench_sink(r.bytes);
  } else {
    /* What a provider does per flush: acquire, encode (timing itself when
     * the transport is timed), post. */
    spy_buffer *b = spy_transport_acquire(a->t, a->tier);
    if (!b) {
      bench_sink(1);
      return -1;
    }
    int timed = spy_transport_timed(a->t);
    uint64_t e0 = timed ? spy__mono_ns() : 0;
    spy_frame_writer w;
    spy_frame_start(&w, b->data, b->cap, a->msg.type, 1700000000000ull, 1, 0);
    a->msg.encode(&w, a->msg.ctx);
    int len = spy_frame_finish(&w);
    if (timed)
      b->encode_ns = spy__mono_ns() - e0;
    if (v == V_ENCODE || len < 0)
      a->t->ops->release_unused(a->t, b);
    else if (spy_transport_post(a->t, b, (size_t)len) < 0)
      bench_sink(2);
  }
  return (double)(spy__ticks() - t0) * spy__ns_per_tick();
}

/* `bursts` rounds of the four variants, each a burst of as many ops as the
 * tier has buffers, the worker idle before each (untimed); out[v] gets the
 * median op of variant v. The hook is set only around the hooked burst. */
enum { MAX_SAMPLES = 4096 };
static int run_case(case_arg *a, int bursts, double out[V_COUNT]) {
  static double d[V_COUNT][MAX_SAMPLES];
  int k[V_COUNT] = {0};
  int burst = a->tier == SPY_TIER_LARGE ? (int)SPY_POOL_LARGE_COUNT
                                        : (int)SPY_POOL_MEDIUM_COUNT;
  for (int r = 0; r < bursts; r++) {
    for (int v = 0; v < V_COUNT; v++) {
      /* Every variant starts from the buffers' state in a provider: last
       * written here, posted, and read by the worker (on another core,
       * usually). Without this, a variant that follows "encode only" got
       * buffers still dirty in this core's cache (no coherence traffic to
       * write them again) while the others paid for taking the lines back
       * from the worker: "encode only" read 3.4x a post that includes it. */
      wait_idle(a->t, a->tier);
      for (int i = 0; i < burst; i++)
        one_op(a, V_PLAIN);
      wait_idle(a->t, a->tier);
      if (v == V_HOOKED && spy_profiler_attach(a->p, a->t) < 0)
        return -1;
      for (int i = 0; i < burst && k[v] < MAX_SAMPLES; i++) {
        double ns = one_op(a, (variant)v);
        if (ns >= 0)
          d[v][k[v]++] = ns;
      }
      if (v == V_HOOKED)
        spy_profiler_detach(a->p, a->t);
    }
    if (r % 64 == 63)
      spy_profiler_reset(a->p); /* keep the lane from filling */
  }
  for (int v = 0; v < V_COUNT; v++)
    out[v] = bench_quantile(d[v], (size_t)k[v], 0.5);
  spy_profiler_reset(a->p);
  return 0;
}

static void clock_read(void *arg) {
  (void)arg;
  bench_sink(spy__mono_ns());
}

int bench_msgprof(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench msgprof [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  static char dir[128];
  if (bench_tempdir(dir, sizeof dir) < 0)
    return 1;
  spy__ticks_init();
  pick_cpus();
  pin_to(cpu_post);
  spy_channel *ch = NULL;
  spy_channel_desc cd = {
      .name = "bench-msgprof", .ring_bytes = 16u << 20, .dir = dir};
  spy_transport *tr = NULL;
  spy_transport_desc td = {.kind = SPY_TRANSPORT_OFFLOAD, .tick = worker_nap};
  pixels = malloc(PX_W * PX_H * 4);
  spy_profiler *p = NULL;
  /* Lanes deep enough for a repeat's records between two reads. */
  spy_profiler_desc pd = {
      .scratch_bytes = 2u << 20, .lanes = 2, .lane_capacity = 16384};
  if (!pixels || flush_fixture_init() < 0 || spy_channel_open(&ch, &cd) < 0 ||
      (td.channel = ch, spy_transport_create(&tr, &td) < 0) ||
      spy_profiler_create(&p, &pd) < 0) {
    fprintf(stderr, "bench msgprof: cannot set up the transport\n");
    return 1;
  }
  for (size_t i = 0; i < (size_t)PX_W * PX_H * 4; i++)
    pixels[i] = (uint8_t)(i * 31);
  int rounds = o.quick ? 3 : 7;
  bench_table t = {.title = "bench msgprof: what the message profiler adds "
                            "to encode + post (real offload transport)",
                   .cols = {"op", "bytes", "ns_per_msg", "x_unhooked"},
                   .ncols = 4};
  static const struct {
    const char *name;
    uint32_t type;
    spy_msg_encode_fn fn;
    spy_tier tier;
    int n, quick_n;
  } msgs[] = {
      {"flush", SPY_MSG_DATA, put_small, SPY_TIER_MEDIUM, 500, 40},
      {"1 MiB raw", SPY_MSG_BUFFER_RAW, put_large, SPY_TIER_LARGE, 40, 4}};
  for (size_t m = 0; m < sizeof msgs / sizeof msgs[0]; m++) {
    case_arg a = {.t = tr,
                  .p = p,
                  .tier = msgs[m].tier,
                  .msg = {.type = msgs[m].type, .encode = msgs[m].fn}};
    spy_msg_record r;
    spy_profiler_measure(p, &a.msg, &r);
    if (r.flags & SPY_MSGREC_ERROR) {
      fprintf(stderr, "bench msgprof: %s does not encode: %s\n", msgs[m].name,
              spy_strerror(r.err));
      return 1;
    }
    int bursts = o.quick ? msgs[m].quick_n : msgs[m].n;
    double warm[V_COUNT], res[V_COUNT];
    run_case(&a, 2, warm); /* the LARGE tier is made on first use */
    double bytes = r.bytes;
    if (run_case(&a, bursts, res) < 0) {
      fprintf(stderr, "bench msgprof: attach failed\n");
      return 1;
    }
    double t_enc = res[V_ENCODE], t_plain = res[V_PLAIN];
    double t_hook = res[V_HOOKED], t_meas = res[V_MEASURE];
    char name[64];
    snprintf(name, sizeof name, "%s: encode only", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_enc, t_enc / t_plain});
    snprintf(name, sizeof name, "%s: post, no hook", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_plain, 1.0});
    snprintf(name, sizeof name, "%s: post, profiler hooked", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_hook, t_hook / t_plain});
    snprintf(name, sizeof name, "%s: measure()", msgs[m].name);
    bench_row(&t, name, (double[]){bytes, t_meas, t_meas / t_plain});
  }
  spy_pool_stats ps;
  tr->ops->pool_stats(tr, &ps);
  static char posted[200];
  snprintf(posted, sizeof posted,
           "post = acquire + encode + post through the offload transport "
           "(the enqueue to its worker, which posted %llu frames to a real "
           "channel, %llu refused); each op timed alone, the worker idle",
           (unsigned long long)ps.posted, (unsigned long long)ps.post_failed);
  t.notes[t.nnotes++] = posted;
  t.notes[t.nnotes++] =
      "hooked: the encoder times itself (spy_transport_timed) and the hook "
      "times the post and records it into the thread's lane, no lock; "
      "measure(): encode into the profiler's scratch buffer, no post";
  t.notes[t.nnotes++] = "flush: a data frame of 240 samples x (fps, cpu, "
                        "gpu, 10 counters) + 64 registry values; 1 MiB raw: "
                        "a buffer:raw frame of 512x512 RGBA8";
  static char clock_note[160];
  snprintf(clock_note, sizeof clock_note,
           "one CLOCK_MONOTONIC read costs %.0f ns here; a hooked post "
           "makes four (two in the encoder, two around the post)",
           bench_time_op(clock_read, NULL, rounds, o.quick ? 2 : 10));
  t.notes[t.nnotes++] = clock_note;
  t.notes[t.nnotes++] = "medians of single messages, the four variants "
                        "interleaved burst by burst; x_unhooked = time / post "
                        "with no hook, same message";
  static char cpu_note[200];
  if (cpu_post >= 0)
    snprintf(cpu_note, sizeof cpu_note,
             "posting thread on CPU %d, worker on CPU %d; before each "
             "timed burst the tier's buffers are posted once (untimed), "
             "so each is written after the worker read it, as in a provider",
             cpu_post, cpu_worker);
  else
    snprintf(cpu_note, sizeof cpu_note,
             "one CPU: posting thread and worker share it; before each "
             "timed burst the tier's buffers are posted once (untimed)");
  t.notes[t.nnotes++] = cpu_note;
  bench_print(&t, &o);
  if (spy_profiler_dropped(p))
    fprintf(stderr, "bench msgprof: %llu records dropped (lanes full)\n",
            (unsigned long long)spy_profiler_dropped(p));
  spy_profiler_destroy(p);
  tr->ops->dispose(tr);
  spy_channel_close(ch);
  free(pixels);
  free(fl);
  spy_bus_sweep(dir);
  rmdir(dir);
  if (cpu_post >= 0)
    pthread_setaffinity_np(pthread_self(), sizeof cpus_before, &cpus_before);
  return 0;
}
