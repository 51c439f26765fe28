/* test_wire.c — the frame codec: round trips of every section and message,
 * and every decoder error path fed the malformed bytes it must reject. */
#include <math.h>

#include "spyglass/wire.h"
#include "testlib.h"

static uint8_t buf[1 << 16];

static int make_ping(uint8_t *b, size_t cap, uint32_t seq) {
  spy_frame_writer w;
  spy_frame_start(&w, b, cap, SPY_MSG_PING, 1700000000123ull, seq, 0);
  return spy_frame_finish(&w);
}

TEST(frame_round_trips_header_and_frame_section) {
  int n = make_ping(buf, sizeof buf, 77);
  CHECK_EQ(n, SPY_FRAME_MIN);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK_EQ(f.type, SPY_MSG_PING);
  CHECK_EQ(f.ts_ms, 1700000000123ull);
  CHECK_EQ(f.seq, 77);
  CHECK_EQ(f.version, SPY_WIRE_VERSION);
  CHECK_EQ(f.len, n);
  spy_section s;
  size_t cur = 0;
  CHECK_EQ(spy_frame_next_section(&f, &cur, &s), 0);
  /* Header fields at their documented offsets. */
  CHECK_EQ(spy_rd32(buf), n);
  CHECK_EQ(spy_rd32(buf + 4), SPY_MSG_PING);
  CHECK_EQ(spy_rd32(buf + 8), (uint32_t)1700000000123ull);
  CHECK_EQ(spy_rd32(buf + 12), 1700000000123ull >> 32);
}

static void fill_stats(int16_t *fps, uint16_t *cpu, uint16_t *gpu,
                       uint32_t *ctr, uint32_t n, uint32_t nc) {
  for (uint32_t i = 0; i < n; i++) {
    fps[i] = (int16_t)(600 - (int)i);
    cpu[i] = (uint16_t)(100 + i);
    gpu[i] = i % 7 == 0 ? SPY_GPU_NONE : (uint16_t)(200 + i);
    for (uint32_t c = 0; c < nc; c++)
      ctr[c * n + i] = c * 1000 + i;
  }
}

TEST(stats_round_trip_240_samples_8_counters) {
  enum { N = 240, NC = 8 };
  static int16_t fps[N];
  static uint16_t cpu[N], gpu[N];
  static uint32_t ctr[NC * N];
  fill_stats(fps, cpu, gpu, ctr, N, NC);
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 2, 0);
  spy_stats_batch b = {.start_frame = 123456789012ull,
                       .count = N,
                       .n_counters = NC,
                       .fps_x10 = fps,
                       .cpu_x100 = cpu,
                       .gpu_x100 = gpu,
                       .counters = ctr};
  spy_put_stats(&w, &b);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_STATS, &s));
  spy_stats_batch d;
  CHECK_OK(spy_get_stats(&s, &d));
  CHECK_EQ(d.start_frame, 123456789012ull);
  CHECK_EQ(d.count, N);
  CHECK_EQ(d.n_counters, NC);
  for (uint32_t i = 0; i < N; i++) {
    CHECK_EQ(spy_stats_fps_x10(&d, i), fps[i]);
    CHECK_EQ(spy_stats_cpu_x100(&d, i), cpu[i]);
    CHECK_EQ(spy_stats_gpu_x100(&d, i), gpu[i]);
    for (uint32_t c = 0; c < NC; c++)
      CHECK_EQ(spy_stats_counter(&d, c, i), ctr[c * N + i]);
  }
}

TEST(stats_rejects_length_mismatch_and_bounds) {
  uint8_t sec[64] = {0};
  spy_section s = {SPY_SEC_STATS, 16, sec};
  spy_stats_batch d;
  spy_wr32(sec + 8, 2); /* count 2, no counters: wants 16 + 12 bytes */
  CHECK_EQ(spy_get_stats(&s, &d), SPY_EBADSECTION);
  s.len = 28;
  CHECK_OK(spy_get_stats(&s, &d));
  s.len = 30;
  CHECK_EQ(spy_get_stats(&s, &d), SPY_EBADSECTION);
  spy_wr32(sec + 8, SPY_STATS_MAX_SAMPLES + 1);
  CHECK_EQ(spy_get_stats(&s, &d), SPY_EBADVALUE);
  spy_wr32(sec + 8, 1);
  spy_wr16(sec + 12, SPY_STATS_MAX_COUNTERS + 1);
  CHECK_EQ(spy_get_stats(&s, &d), SPY_EBADVALUE);
  s.len = 8;
  CHECK_EQ(spy_get_stats(&s, &d), SPY_EBADSECTION);
}

TEST(delta_round_trips_every_kind) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, SPY_FRAME_SNAPSHOT);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_REGISTRY, SPY_DELTA_FULL);
  spy_value v;
  v.kind = SPY_VAL_FLOAT;
  v.v.f[0] = 3.25;
  spy_delta_put(&d, SPY_DELTA_SET, "f", 1, &v);
  v.kind = SPY_VAL_UINT;
  v.v.u = UINT64_MAX;
  spy_delta_put(&d, SPY_DELTA_SET, "u", 1, &v);
  v.kind = SPY_VAL_INT;
  v.v.i = -42;
  spy_delta_put(&d, SPY_DELTA_SET, "int", 3, &v);
  v.kind = SPY_VAL_FLOAT3;
  v.v.f[0] = 1;
  v.v.f[1] = -2;
  v.v.f[2] = 0.5;
  spy_delta_put(&d, SPY_DELTA_SET, "cam.pos", 7, &v);
  v.kind = SPY_VAL_BOOL;
  v.v.b = 1;
  spy_delta_put(&d, SPY_DELTA_SET, "paused", 6, &v);
  v.kind = SPY_VAL_STRING;
  v.v.s.ptr = "software";
  v.v.s.len = 8;
  spy_delta_put(&d, SPY_DELTA_SET, "adapter", 7, &v);
  spy_delta_put(&d, SPY_DELTA_CLEARED, "gone", 4, NULL);
  spy_delta_end(&d);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);

  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK_EQ(f.flags, SPY_FRAME_SNAPSHOT);
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_REGISTRY, &s));
  spy_delta_iter it;
  CHECK_EQ(spy_get_delta(&s, &it), 7);
  CHECK_EQ(it.flags, SPY_DELTA_FULL);
  spy_delta_entry e;
  CHECK(spy_delta_next(&it, &e));
  CHECK(e.value.kind == SPY_VAL_FLOAT && e.value.v.f[0] == 3.25);
  CHECK(spy_delta_next(&it, &e));
  CHECK(e.value.v.u == UINT64_MAX);
  CHECK(spy_delta_next(&it, &e));
  CHECK_EQ(e.value.v.i, -42);
  CHECK_EQ(e.key_len, 3);
  CHECK(memcmp(e.key, "int", 3) == 0);
  CHECK(spy_delta_next(&it, &e));
  CHECK(e.value.kind == SPY_VAL_FLOAT3 && e.value.v.f[1] == -2 &&
        e.value.v.f[2] == 0.5);
  CHECK(spy_delta_next(&it, &e));
  CHECK(e.value.kind == SPY_VAL_BOOL && e.value.v.b == 1);
  CHECK(spy_delta_next(&it, &e));
  CHECK(e.value.kind == SPY_VAL_STRING && e.value.v.s.len == 8 &&
        memcmp(e.value.v.s.ptr, "software", 8) == 0);
  CHECK(spy_delta_next(&it, &e));
  CHECK_EQ(e.state, SPY_DELTA_CLEARED);
  CHECK_EQ(e.value.kind, SPY_VAL_NONE);
  CHECK_EQ(spy_delta_next(&it, &e), 0);
}

/* Builds a one-entry delta section by hand: state, kind, key, value. */
static size_t raw_entry(uint8_t *sec, uint8_t state, uint8_t kind,
                        uint16_t klen, uint32_t vlen) {
  memset(sec, 0, 64);
  spy_wr32(sec + 4, 1);
  sec[8] = state;
  sec[9] = kind;
  spy_wr16(sec + 10, klen);
  spy_wr32(sec + 12, vlen);
  memset(sec + 16, 'k', klen < 40 ? klen : 40);
  size_t raw = 16 + klen + vlen;
  return (raw + 3) & ~(size_t)3;
}

TEST(delta_rejects_malformed_entries) {
  uint8_t sec[64];
  spy_delta_iter it;
  spy_section s = {SPY_SEC_REGISTRY, 0, sec};
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 1, 8);
  CHECK_EQ(spy_get_delta(&s, &it), 1);
  s.len = (uint32_t)raw_entry(sec, 9, SPY_VAL_UINT, 1, 8);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* unknown state */
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_SET, 99, 1, 8);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* unknown kind */
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 1, 4);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* size vs kind */
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 0, 8);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* empty key */
  s.len = 40;
  raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 300, 8);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* key too long */
  raw_entry(sec, SPY_DELTA_SET, SPY_VAL_STRING, 1, 100);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADSECTION); /* past the end */
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_CLEARED, SPY_VAL_UINT, 1, 8);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADVALUE); /* cleared + value */
  s.len = (uint32_t)raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 1, 8) + 4;
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADSECTION); /* trailing bytes */
  s.len = 4;
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADSECTION); /* no count */
  s.len = 16;
  raw_entry(sec, SPY_DELTA_SET, SPY_VAL_UINT, 1, 8);
  spy_wr32(sec + 4, 0xFFFFFFFFu);
  CHECK_EQ(spy_get_delta(&s, &it), SPY_EBADSECTION); /* absurd count */
}

TEST(control_payloads_round_trip) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PROVIDER_ANNOUNCE, 5, 6, 0);
  spy_provider_info p = {.id = 0xABCDEF0123456789ull,
                         .start_ms = 99,
                         .pid = 4242,
                         .kind = SPY_PROVIDER_SYSTEM,
                         .subscribers = 3,
                         .name = "demo"};
  spy_put_provider(&w, &p);
  spy_put_peer(&w, 77, SPY_FEAT_STATS | SPY_FEAT_ENV);
  const char *reg[] = {"camera", "time"};
  spy_buffer_request br[] = {
      {.name = "color", .mode = SPY_BUFFER_THUMBNAIL, .long_edge = 128},
      {.name = "depth", .mode = SPY_BUFFER_STREAM}};
  spy_subscription sub = {.consumer = 77,
                          .features = SPY_FEAT_REGISTRY,
                          .flags = SPY_SUB_REGISTRY_FILTER,
                          .n_registry = 2,
                          .n_buffers = 2,
                          .registry = reg,
                          .buffers = br};
  spy_put_subscription(&w, &sub);
  uint8_t rgba[2 * 3 * 4];
  for (size_t i = 0; i < sizeof rgba; i++)
    rgba[i] = (uint8_t)i;
  spy_pixels px = {.frame = 10,
                   .captured_ms = 11,
                   .width = 2,
                   .height = 3,
                   .name = "color",
                   .data = rgba,
                   .data_len = sizeof rgba,
                   .key_frame = 1};
  spy_put_pixels(&w, &px);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section s;
  spy_provider_info q;
  CHECK(spy_frame_find_section(&f, SPY_SEC_PROVIDER, &s));
  CHECK_OK(spy_get_provider(&s, &q));
  CHECK(q.id == p.id && q.pid == 4242 && q.kind == SPY_PROVIDER_SYSTEM &&
        q.subscribers == 3 && q.name_len == 4 && !memcmp(q.name, "demo", 4));
  spy_peer_info peer;
  CHECK(spy_frame_find_section(&f, SPY_SEC_PEER, &s));
  CHECK_OK(spy_get_peer(&s, &peer));
  CHECK(peer.id == 77 && peer.features == (SPY_FEAT_STATS | SPY_FEAT_ENV));
  spy_subscription d;
  CHECK(spy_frame_find_section(&f, SPY_SEC_SUBSCRIPTION, &s));
  CHECK_OK(spy_get_subscription(&s, &d));
  CHECK(d.consumer == 77 && d.flags == SPY_SUB_REGISTRY_FILTER);
  const uint8_t *cur = NULL;
  const char *name;
  uint32_t len;
  CHECK(spy_subscription_next_registry(&d, &cur, &name, &len));
  CHECK(len == 6 && !memcmp(name, "camera", 6));
  CHECK(spy_subscription_next_registry(&d, &cur, &name, &len));
  CHECK(len == 4 && !memcmp(name, "time", 4));
  CHECK(!spy_subscription_next_registry(&d, &cur, &name, &len));
  spy_buffer_request b;
  cur = NULL;
  CHECK(spy_subscription_next_buffer(&d, &cur, &b));
  CHECK(b.mode == SPY_BUFFER_THUMBNAIL && b.long_edge == 128);
  CHECK(spy_subscription_next_buffer(&d, &cur, &b));
  CHECK(b.mode == SPY_BUFFER_STREAM && b.name_len == 5);
  CHECK(!spy_subscription_next_buffer(&d, &cur, &b));
  spy_pixels dp;
  CHECK(spy_frame_find_section(&f, SPY_SEC_PIXELS, &s));
  CHECK_OK(spy_get_pixels(&s, &dp));
  CHECK(dp.width == 2 && dp.height == 3 && dp.data_len == sizeof rgba &&
        !memcmp(dp.data, rgba, sizeof rgba) && dp.key_frame == 1);
}

TEST(empty_registry_filter_is_distinct_from_no_filter) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_SUBSCRIBE, 5, 6, 0);
  spy_subscription sub = {.consumer = 1,
                          .features = SPY_FEAT_REGISTRY,
                          .flags = SPY_SUB_REGISTRY_FILTER};
  spy_put_subscription(&w, &sub);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_section s;
  spy_subscription d;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK(spy_frame_find_section(&f, SPY_SEC_SUBSCRIPTION, &s));
  CHECK_OK(spy_get_subscription(&s, &d));
  CHECK(d.flags & SPY_SUB_REGISTRY_FILTER);
  CHECK_EQ(d.n_registry, 0);
}

TEST(decode_rejects_truncated_header) {
  make_ping(buf, sizeof buf, 1);
  spy_frame f;
  size_t off = 99;
  CHECK_EQ(spy_frame_decode(buf, 15, &f, &off), SPY_ETRUNCATED);
  CHECK_EQ(off, 0);
  CHECK_EQ(spy_frame_peek_len(buf, 3), SPY_ETRUNCATED);
}

TEST(decode_rejects_every_truncation_of_a_valid_frame) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, 0);
  spy_put_peer(&w, 1, 2);
  int n = spy_frame_finish(&w);
  spy_frame f;
  for (int i = 0; i < n; i++)
    CHECK_EQ(spy_frame_decode(buf, (size_t)i, &f, NULL), SPY_ETRUNCATED);
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
}

TEST(decode_refuses_a_4gb_frame_before_allocating) {
  make_ping(buf, sizeof buf, 1);
  spy_wr32(buf, 0xFFFFFFFCu);
  spy_frame f;
  CHECK_EQ(spy_frame_peek_len(buf, 16), SPY_ETOOBIG);
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_ETOOBIG);
  spy_wr32(buf, SPY_FRAME_MAX + 4);
  CHECK_EQ(spy_frame_peek_len(buf, 16), SPY_ETOOBIG);
}

TEST(decode_rejects_bad_header_lengths) {
  spy_frame f;
  make_ping(buf, sizeof buf, 1);
  spy_wr32(buf, 16); /* below the minimum */
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_EBADHEADER);
  spy_wr32(buf, SPY_FRAME_MIN + 2); /* not a multiple of 4 */
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_EBADHEADER);
}

TEST(decode_rejects_unknown_type) {
  spy_frame f;
  make_ping(buf, sizeof buf, 1);
  spy_wr32(buf + 4, 10); /* the original's pool message: unused */
  size_t off = 0;
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, &off), SPY_EBADTYPE);
  CHECK_EQ(off, 4);
  spy_wr32(buf + 4, 0xDEAD);
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_EBADTYPE);
}

TEST(decode_rejects_version_mismatch) {
  spy_frame f;
  make_ping(buf, sizeof buf, 1);
  spy_wr16(buf + 24, SPY_WIRE_VERSION + 1);
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_EBADVERSION);
}

TEST(decode_rejects_missing_frame_section) {
  spy_frame f;
  make_ping(buf, sizeof buf, 1);
  spy_wr32(buf + 16, SPY_SEC_STATS);
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_ENOSECTION);
  make_ping(buf, sizeof buf, 1);
  spy_wr32(buf + 20, 12);
  CHECK_EQ(spy_frame_decode(buf, sizeof buf, &f, NULL), SPY_EBADSECTION);
}

TEST(decode_rejects_bad_section_length) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, 0);
  spy_put_peer(&w, 1, 2);
  int n = spy_frame_finish(&w);
  spy_frame f;
  size_t off = 0;
  spy_wr32(buf + SPY_FRAME_MIN + 4, 17); /* runs past used_bytes */
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, &off), SPY_EBADSECTION);
  CHECK_EQ(off, SPY_FRAME_MIN + 4);
  spy_wr32(buf + SPY_FRAME_MIN + 4, 0xFFFFFFF0u); /* wraps if added */
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), SPY_EBADSECTION);
  /* A section header cut in half at the end of the frame. */
  spy_wr32(buf + SPY_FRAME_MIN + 4, 12);
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), SPY_ETRUNCATED);
  /* A second FRAME section. */
  spy_wr32(buf + SPY_FRAME_MIN + 4, 16);
  spy_wr32(buf + SPY_FRAME_MIN, SPY_SEC_FRAME);
  CHECK_EQ(spy_frame_decode(buf, (size_t)n, &f, NULL), SPY_EBADSECTION);
}

TEST(control_decoders_reject_malformed_payloads) {
  uint8_t sec[128] = {0};
  spy_section s = {0, 0, sec};
  spy_provider_info p;
  s.len = 27;
  CHECK_EQ(spy_get_provider(&s, &p), SPY_EBADSECTION);
  s.len = 28;
  spy_wr16(sec + 24, 5); /* name of 5 bytes missing */
  CHECK_EQ(spy_get_provider(&s, &p), SPY_EBADSECTION);
  spy_wr16(sec + 24, 0);
  sec[20] = 7; /* unknown kind */
  CHECK_EQ(spy_get_provider(&s, &p), SPY_EBADVALUE);
  spy_peer_info peer;
  s.len = 12;
  CHECK_EQ(spy_get_peer(&s, &peer), SPY_EBADSECTION);
  spy_subscription sub;
  memset(sec, 0, sizeof sec);
  s.len = 20;
  spy_wr16(sec + 14, 1); /* one registry name, none present */
  CHECK_EQ(spy_get_subscription(&s, &sub), SPY_EBADSECTION);
  spy_wr16(sec + 14, 0);
  spy_wr16(sec + 16, 1); /* one buffer with mode 0 */
  spy_wr16(sec + 20, 1);
  sec[22] = 'c';
  s.len = 27;
  CHECK_EQ(spy_get_subscription(&s, &sub), SPY_EBADVALUE);
  sec[23] = SPY_BUFFER_STREAM;
  CHECK_OK(spy_get_subscription(&s, &sub));
  s.len = 28; /* a trailing byte */
  CHECK_EQ(spy_get_subscription(&s, &sub), SPY_EBADSECTION);
  spy_pixels px;
  memset(sec, 0, sizeof sec);
  spy_wr32(sec + 16, 2);
  spy_wr32(sec + 20, 2);
  spy_wr16(sec + 30, 1);
  spy_wr32(sec + 32, 15); /* RGBA8 2x2 needs 16 */
  s.len = 36 + 4 + 15;
  CHECK_EQ(spy_get_pixels(&s, &px), SPY_EBADVALUE);
  spy_wr32(sec + 16, 100000);
  CHECK_EQ(spy_get_pixels(&s, &px), SPY_EBADVALUE);
  uint64_t h[4];
  memset(sec, 0, sizeof sec);
  spy_wr32(sec, 3);
  s.len = 8 + 16;
  CHECK_EQ(spy_get_health(&s, h, 4), SPY_EBADSECTION);
}

TEST(health_reader_takes_known_fields_and_ignores_extra) {
  spy_frame_writer w;
  uint64_t vals[SPY_HEALTH_FIELD_COUNT + 2];
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
    vals[i] = i * 10;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, 0);
  spy_put_health(&w, vals, SPY_HEALTH_FIELD_COUNT + 2);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_section s;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK(spy_frame_find_section(&f, SPY_SEC_HEALTH, &s));
  uint64_t out[SPY_HEALTH_FIELD_COUNT + 4];
  CHECK_EQ(spy_get_health(&s, out, SPY_HEALTH_FIELD_COUNT + 4),
           SPY_HEALTH_FIELD_COUNT + 2);
  CHECK_EQ(out[SPY_HEALTH_SUBSCRIBERS], SPY_HEALTH_SUBSCRIBERS * 10);
  CHECK_EQ(out[SPY_HEALTH_FIELD_COUNT + 3], 0);
}

TEST(name_list_round_trip_and_rejects) {
  const char *names[] = {"draws", "passes", "mips"};
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, 0);
  spy_put_name_list(&w, SPY_SEC_STATS_SCHEMA, names, 3);
  int n = spy_frame_finish(&w);
  spy_frame f;
  spy_section s;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK(spy_frame_find_section(&f, SPY_SEC_STATS_SCHEMA, &s));
  spy_name_iter it;
  CHECK_EQ(spy_get_name_list(&s, &it), 3);
  const char *nm;
  uint32_t len;
  CHECK(spy_name_next(&it, &nm, &len) && len == 5 && !memcmp(nm, "draws", 5));
  CHECK(spy_name_next(&it, &nm, &len) && len == 6);
  CHECK(spy_name_next(&it, &nm, &len) && len == 4);
  CHECK(!spy_name_next(&it, &nm, &len));
  spy_section bad = s;
  bad.len = s.len - 1;
  CHECK(spy_get_name_list(&bad, &it) < 0);
}

TEST(encoder_errors_are_sticky_and_reported) {
  uint8_t small[40];
  spy_frame_writer w;
  CHECK_EQ(spy_frame_start(&w, small, 8, SPY_MSG_PING, 0, 0, 0), SPY_ENOBUFS);
  CHECK_EQ(spy_frame_finish(&w), SPY_ENOBUFS);
  CHECK_EQ(spy_frame_start(&w, NULL, 100, SPY_MSG_PING, 0, 0, 0), SPY_EINVAL);
  spy_frame_start(&w, small, sizeof small, SPY_MSG_DATA, 0, 0, 0);
  spy_put_peer(&w, 1, 1); /* needs 24 bytes, 8 left */
  spy_frame_put_u32(&w, 5);
  CHECK_EQ(spy_frame_finish(&w), SPY_ENOBUFS);
  /* Put outside a section is a usage error. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 0, 0, 0);
  spy_frame_put_u32(&w, 1);
  CHECK_EQ(spy_frame_finish(&w), SPY_EINVAL);
  /* Too many samples. */
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 0, 0, 0);
  spy_stats_batch b = {.count = SPY_STATS_MAX_SAMPLES + 1};
  spy_put_stats(&w, &b);
  CHECK_EQ(spy_frame_finish(&w), SPY_EINVAL);
  /* A key over the limit. */
  char key[SPY_KEY_MAX + 1];
  memset(key, 'k', sizeof key);
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 0, 0, 0);
  spy_delta_writer d;
  spy_delta_begin(&d, &w, SPY_SEC_ENV, 0);
  spy_value v = {.kind = SPY_VAL_UINT};
  spy_delta_put(&d, SPY_DELTA_SET, key, sizeof key, &v);
  spy_delta_end(&d);
  CHECK_EQ(spy_frame_finish(&w), SPY_EINVAL);
}

TEST(names_of_types_and_sections) {
  CHECK_STR(spy_msg_type_name(SPY_MSG_SUBSCRIBE_ACK), "subscribe:ack");
  CHECK_STR(spy_msg_type_name(SPY_MSG_BUFFER_RAW), "buffer:raw");
  CHECK(spy_msg_type_name(10) == NULL);
  CHECK(spy_msg_type_name(11) == NULL);
  CHECK_STR(spy_section_name(SPY_SEC_REGISTRY), "registry");
  CHECK(spy_section_name(999) == NULL);
  CHECK_EQ(spy_value_kind_size(SPY_VAL_FLOAT4), 32);
  CHECK_EQ(spy_value_kind_size(77), -2);
}

TEST_MAIN(TEST_CASE(frame_round_trips_header_and_frame_section),
          TEST_CASE(stats_round_trip_240_samples_8_counters),
          TEST_CASE(stats_rejects_length_mismatch_and_bounds),
          TEST_CASE(delta_round_trips_every_kind),
          TEST_CASE(delta_rejects_malformed_entries),
          TEST_CASE(control_payloads_round_trip),
          TEST_CASE(empty_registry_filter_is_distinct_from_no_filter),
          TEST_CASE(decode_rejects_truncated_header),
          TEST_CASE(decode_rejects_every_truncation_of_a_valid_frame),
          TEST_CASE(decode_refuses_a_4gb_frame_before_allocating),
          TEST_CASE(decode_rejects_bad_header_lengths),
          TEST_CASE(decode_rejects_unknown_type),
          TEST_CASE(decode_rejects_version_mismatch),
          TEST_CASE(decode_rejects_missing_frame_section),
          TEST_CASE(decode_rejects_bad_section_length),
          TEST_CASE(control_decoders_reject_malformed_payloads),
          TEST_CASE(health_reader_takes_known_fields_and_ignores_extra),
          TEST_CASE(name_list_round_trip_and_rejects),
          TEST_CASE(encoder_errors_are_sticky_and_reported),
          TEST_CASE(names_of_types_and_sections))
