/* bench_wire.c — `spyglass bench wire`: encode and decode of a
 * representative stats flush (240 samples of fps, cpu, gpu and 8 counters,
 * plus a registry delta of 50 entries) against a memcpy of the same number
 * of bytes, measured in the same run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "spyglass/wire.h"

enum { SAMPLES = 240, COUNTERS = 8, ENTRIES = 50 };

typedef struct wire_fixture {
  int16_t fps[SAMPLES];
  uint16_t cpu[SAMPLES], gpu[SAMPLES];
  uint32_t counters[COUNTERS * SAMPLES];
  char keys[ENTRIES][24];
  uint32_t key_len[ENTRIES];
  spy_value values[ENTRIES];
  uint8_t encoded[ENTRIES * 64]; /* registry entries kept in wire form */
  size_t encoded_len;
  uint8_t frame[64 * 1024];
  uint8_t copy[64 * 1024];
  size_t frame_len;
  uint64_t frame_no;
} wire_fixture;

static wire_fixture fx;

static void fixture_init(void) {
  for (int i = 0; i < SAMPLES; i++) {
    fx.fps[i] = (int16_t)(600 + i % 30);
    fx.cpu[i] = (uint16_t)(400 + i * 3);
    fx.gpu[i] = (uint16_t)(800 + i * 5);
    for (int c = 0; c < COUNTERS; c++)
      fx.counters[c * SAMPLES + i] = (uint32_t)(c * 100 + i);
  }
  static const char *const words[] = {"camera.pos", "scene.time", "load",
                                      "adapter", "visible"};
  for (int e = 0; e < ENTRIES; e++) {
    fx.key_len[e] = (uint32_t)snprintf(fx.keys[e], sizeof fx.keys[e], "%s.%02d",
                                       words[e % 5], e);
    spy_value *v = &fx.values[e];
    switch (e % 5) {
    case 0:
      v->kind = SPY_VAL_FLOAT3;
      v->v.f[0] = e;
      v->v.f[1] = 2;
      v->v.f[2] = -e;
      break;
    case 1:
      v->kind = SPY_VAL_FLOAT;
      v->v.f[0] = e * 0.25;
      break;
    case 2:
      v->kind = SPY_VAL_INT;
      v->v.i = -e;
      break;
    case 3:
      v->kind = SPY_VAL_STRING;
      v->v.s.ptr = "software rasteriser";
      v->v.s.len = 19;
      break;
    default:
      v->kind = SPY_VAL_BOOL;
      v->v.b = e & 1;
      break;
    }
    int n = spy_delta_encode_entry(fx.encoded + fx.encoded_len,
                                   sizeof fx.encoded - fx.encoded_len,
                                   SPY_DELTA_SET, fx.keys[e], fx.key_len[e], v);
    fx.encoded_len += n > 0 ? (size_t)n : 0;
  }
}

/* The flush's sections: stats, then the registry delta. provider_path:
 * registry entries pre-encoded and copied as one run; else every entry
 * encoded field by field. */
static void put_flush(spy_frame_writer *w, uint64_t frame_no,
                      int provider_path) {
  spy_stats_batch b = {.start_frame = frame_no,
                       .count = SAMPLES,
                       .n_counters = COUNTERS,
                       .fps_x10 = fx.fps,
                       .cpu_x100 = fx.cpu,
                       .gpu_x100 = fx.gpu,
                       .counters = fx.counters};
  spy_put_stats(w, &b);
  spy_delta_writer d;
  spy_delta_begin(&d, w, SPY_SEC_REGISTRY, 0);
  if (provider_path)
    spy_delta_put_encoded(&d, fx.encoded, fx.encoded_len, ENTRIES);
  else
    for (int e = 0; e < ENTRIES; e++)
      spy_delta_put(&d, SPY_DELTA_SET, fx.keys[e], fx.key_len[e],
                    &fx.values[e]);
  spy_delta_end(&d);
}

void bench_put_stats_flush(spy_frame_writer *w) {
  if (!fx.encoded_len)
    fixture_init();
  put_flush(w, fx.frame_no, 1);
}

/* arg != NULL: the provider's path; NULL: field by field. */
static void encode_once(void *arg) {
  spy_frame_writer w;
  spy_frame_start(&w, fx.frame, sizeof fx.frame, SPY_MSG_DATA, 1700000000000ull,
                  (uint32_t)fx.frame_no, 0);
  put_flush(&w, fx.frame_no, arg != NULL);
  int n = spy_frame_finish(&w);
  fx.frame_len = n > 0 ? (size_t)n : 0;
  fx.frame_no += SAMPLES;
}

/* Decoding in place: validate the frame and every section (all lengths,
 * every registry entry) and get views of the stats columns; with arg != NULL
 * also walk and read every registry entry, as a consumer applying it does. */
static void decode_once(void *arg) {
  spy_frame f;
  spy_section s;
  uint64_t acc = 0;
  if (spy_frame_decode(fx.frame, fx.frame_len, &f, NULL) < 0)
    return;
  size_t cur = 0;
  while (spy_frame_next_section(&f, &cur, &s)) {
    if (s.id == SPY_SEC_STATS) {
      spy_stats_batch b;
      if (spy_get_stats(&s, &b) == 0)
        acc += b.count + spy_stats_cpu_x100(&b, b.count - 1);
    } else if (s.id == SPY_SEC_REGISTRY) {
      spy_delta_iter it;
      spy_delta_entry e;
      int n = spy_get_delta(&s, &it);
      acc += (uint64_t)n;
      if (n >= 0 && arg)
        while (spy_delta_next(&it, &e))
          acc += e.key_len + e.value.kind;
    }
  }
  bench_sink(acc);
}

static void memcpy_once(void *arg) {
  (void)arg;
  memcpy(fx.copy, fx.frame, fx.frame_len);
  bench_sink(fx.copy[fx.frame_len / 2]);
}

int bench_wire(int argc, char **argv) {
  bench_opts o;
  int rc = bench_parse(argc, argv, &o,
                       "usage: spyglass bench wire [--json] [--quick]\n");
  if (rc)
    return rc == 1 ? 0 : rc;
  fixture_init();
  encode_once(NULL);
  size_t len_f = fx.frame_len;
  encode_once(&fx);
  if (!fx.frame_len || fx.frame_len != len_f) {
    fprintf(stderr, "bench wire: encoding failed\n");
    return 1;
  }
  int rounds = o.quick ? 3 : 21;
  double target = o.quick ? 2 : 20;
  double mb = (double)fx.frame_len / 1e6;
  double t_copy = bench_time_op(memcpy_once, NULL, rounds, target);
  double t_enc = bench_time_op(encode_once, &fx, rounds, target);
  double t_enc_f = bench_time_op(encode_once, NULL, rounds, target);
  double t_dec = bench_time_op(decode_once, NULL, rounds, target);
  double t_read = bench_time_op(decode_once, &fx, rounds, target);
  bench_table t = {
      .title = "bench wire: one stats flush (240 samples x "
               "(fps, cpu, gpu, 8 counters) + 50 registry "
               "entries)",
      .cols = {"op", "bytes", "ns_per_frame", "MB_per_s", "x_memcpy"},
      .ncols = 5};
  double n = (double)fx.frame_len;
  bench_row(&t, "memcpy (baseline)",
            (double[]){n, t_copy, mb / (t_copy * 1e-9), 1.0});
  bench_row(&t, "encode (provider path)",
            (double[]){n, t_enc, mb / (t_enc * 1e-9), t_enc / t_copy});
  bench_row(&t, "encode (field by field)",
            (double[]){n, t_enc_f, mb / (t_enc_f * 1e-9), t_enc_f / t_copy});
  bench_row(&t, "decode (validate, views)",
            (double[]){n, t_dec, mb / (t_dec * 1e-9), t_dec / t_copy});
  bench_row(&t, "decode + read every entry",
            (double[]){n, t_read, mb / (t_read * 1e-9), t_read / t_copy});
  t.notes[t.nnotes++] = "provider path: registry entries kept in wire form "
                        "and copied per run; field by field: each entry "
                        "encoded from a spy_value";
  t.notes[t.nnotes++] = "medians of per-round means; x_memcpy = time / "
                        "memcpy time of the same bytes (goal: <= 2)";
  bench_print(&t, &o);
  return 0;
}
