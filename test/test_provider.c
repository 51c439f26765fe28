/* test_provider.c — what the provider samples and sends, seen on its data
 * channel by a hand-driven subscriber: GPU attribution (and bad GPU input:
 * ids never issued, device resets, impossible durations), the sample ring,
 * deltas, typed by-handle setters, collection only of what is watched, a
 * dropped flush when the pool is empty, skipped frames, the inline
 * fallback, compiled-out macros.
 */
#include <math.h>
#include <pthread.h>

#include "sniffer.h"
#include "spyglass/provider.h"
#include "testlib.h"

static char dir[256];
static sniffer sn;

static spy_provider *make(spy_transport_kind kind, int fail_worker) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
  spy_provider *p = NULL;
  const char *app[] = {"enemies", "bullets"};
  spy_provider_desc d = {.name = "ptest",
                         .dir = dir,
                         .transport = kind,
                         .flush_ms = 100000,
                         .idle_ping_ms = 100000,
                         .ack_grace_ms = 100000,
                         .checkpoint_ms = 100000,
                         .counters = app,
                         .n_counters = 2,
                         .simulate_worker_failure = fail_worker};
  if (spy_provider_create(&p, &d) < 0)
    return NULL;
  return p;
}

static int wait_features(spy_provider *p, uint32_t want) {
  spy_provider_stats st;
  double end = tu_now_s() + 5;
  do {
    spy_provider_get_stats(p, &st);
    if ((st.features & want) == want)
      return 1;
    usleep(1000);
  } while (tu_now_s() < end);
  return 0;
}

static void frame(spy_provider *p) {
  spy_frame_begin(p);
  spy_frame_end(p);
}

static int get_stats(spy_stats_batch *b) {
  spy_section s;
  return spy_frame_find_section(&sn.f, SPY_SEC_STATS, &s) &&
         spy_get_stats(&s, b) == 0;
}

TEST(gpu_time_attributed_coalesced_out_of_order_and_forward_filled) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  frame(p);                      /* frame 0: no GPU timing known yet */
  for (int i = 0; i < 10; i++) { /* frames 1..10 issue GPU frames 100..109 */
    spy_frame_begin(p);
    spy_gpu_issued(p, 100 + (uint64_t)i);
    spy_frame_end(p);
  }
  spy_gpu_resolved(p, 103, 5.0); /* coalesced: 100..103 take this value */
  spy_gpu_resolved(p, 109, 7.0); /* newer first ... */
  spy_gpu_resolved(p, 105, 6.0); /* ... an older one late: nothing left */
  frame(p);                      /* frame 11: forward-filled */
  for (int i = 0; i < 2; i++) {  /* frames 12, 13: flushed before resolve */
    spy_frame_begin(p);
    spy_gpu_issued(p, 110 + (uint64_t)i);
    spy_frame_end(p);
  }
  CHECK_OK(spy_provider_flush(p));
  spy_gpu_resolved(p, 111, 9.0);
  frame(p); /* frame 14 */
  CHECK_OK(spy_provider_flush(p));

  spy_stats_batch b;
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.count, 14);
  static const uint16_t want[14] = {SPY_GPU_NONE, 500, 500, 500, 500, 700, 700,
                                    700,          700, 700, 700, 700, 700, 700};
  for (uint32_t i = 0; i < 14; i++)
    CHECK_EQ(spy_stats_gpu_x100(&b, i), want[i]);
  uint64_t first = b.start_frame;
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.count, 1);
  CHECK_EQ(b.start_frame, first + 14);
  CHECK_EQ(spy_stats_gpu_x100(&b, 0), 900);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

/* One frame that issues GPU frame `id`. */
static void gpu_frame(spy_provider *p, uint64_t id) {
  spy_frame_begin(p);
  spy_gpu_issued(p, id);
  spy_frame_end(p);
}

/* Flushes and reads the GPU column of the batch into v (count returned). */
static int flush_gpu(spy_provider *p, uint16_t *v, int max) {
  spy_stats_batch b;
  if (spy_provider_flush(p) != 0 || !sniff_data(&sn, 5) || !get_stats(&b))
    return -1;
  int n = (int)b.count < max ? (int)b.count : max;
  for (int i = 0; i < n; i++)
    v[i] = spy_stats_gpu_x100(&b, (uint32_t)i);
  return (int)b.count;
}

TEST(gpu_resolve_for_an_id_never_issued_is_ignored_and_counted) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  for (uint64_t id = 100; id < 105; id++)
    gpu_frame(p, id);
  spy_gpu_resolved(p, UINT64_MAX, 50.0); /* bogus: never issued */
  spy_gpu_resolved(p, 105, 40.0);        /* one ahead: never issued either */
  spy_gpu_resolved(p, 102, 2.0);         /* real: frames of 100..102 */
  gpu_frame(p, 105);
  spy_gpu_resolved(p, 105, 3.0); /* the newest real one moves the fill */
  frame(p);
  uint16_t v[16];
  CHECK_EQ(flush_gpu(p, v, 16), 7);
  /* 100..102 took 2 ms, 103..105 (coalesced into 105) 3 ms, and the last
   * frame the fill from 105: nothing pinned at the bogus 50 ms. */
  static const uint16_t want[7] = {200, 200, 200, 300, 300, 300, 300};
  for (int i = 0; i < 7; i++)
    CHECK_EQ(v[i], want[i]);
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.gpu_unknown_ids, 2);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(gpu_device_reset_restarts_the_mapping) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  gpu_frame(p, 1000000);
  gpu_frame(p, 1000001);
  spy_gpu_resolved(p, 1000000, 8.0);
  /* The device restarts: ids from 1 again; 1000001 never resolves. */
  gpu_frame(p, 1);
  gpu_frame(p, 2);
  spy_gpu_resolved(p, 1, 4.0);
  spy_gpu_resolved(p, 2, 5.0);
  frame(p);
  uint16_t v[8];
  CHECK_EQ(flush_gpu(p, v, 8), 5);
  CHECK_EQ(v[0], 800);
  CHECK_EQ(v[1], SPY_GPU_NONE); /* 1000001: lost with the reset */
  CHECK_EQ(v[2], 400);          /* frame of new id 1 */
  CHECK_EQ(v[3], 500);          /* frame of new id 2 */
  CHECK_EQ(v[4], 500);          /* the fill follows the new numbering */
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.gpu_resets, 1);
  CHECK_EQ(st.gpu_unknown_ids, 0);
  /* A little out of order is not a reset. */
  gpu_frame(p, 3);
  gpu_frame(p, 2);
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.gpu_resets, 1);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

uint16_t spy__ms_x100(double ms); /* provider.c */

TEST(nan_negative_and_huge_gpu_durations_are_rejected_and_counted) {
  CHECK_EQ(spy__ms_x100(NAN), 0); /* defined, not an undefined cast */
  CHECK_EQ(spy__ms_x100(-1.0), 0);
  CHECK_EQ(spy__ms_x100(1e300), 65534);
  CHECK_EQ(spy__ms_x100(1.234), 123);
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  gpu_frame(p, 10);
  spy_gpu_resolved(p, 10, 5.0);
  gpu_frame(p, 11);
  spy_gpu_resolved(p, 11, NAN);
  gpu_frame(p, 12);
  spy_gpu_resolved(p, 12, -3.0);
  gpu_frame(p, 13);
  spy_gpu_resolved(p, 13, 1e9);
  frame(p);
  uint16_t v[8];
  CHECK_EQ(flush_gpu(p, v, 8), 5);
  for (int i = 0; i < 5; i++)
    CHECK_EQ(v[i], 500); /* the last good reading, never 0 or saturated */
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.gpu_bad_durations, 3);
  /* The rejected ids are still pending: a good resolve covers them. */
  gpu_frame(p, 14);
  spy_gpu_resolved(p, 14, 6.0);
  frame(p);
  CHECK_EQ(flush_gpu(p, v, 8), 2);
  CHECK_EQ(v[0], 600);
  CHECK_EQ(v[1], 600);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(a_full_sample_ring_flushes_before_its_time) {
  /* flush_ms is 100 s here: only the ring filling can bring a flush */
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  for (int i = 0; i < 300; i++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)i);
    spy_frame_end(p);
  }
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.flushes_dropped, 0);
  CHECK_EQ(st.samples_dropped, 0);
  spy_stats_batch b;
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.count, SPY_SAMPLE_RING); /* sent as the ring filled */
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_DRAWS, 0), 0);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_DRAWS, 239), 239);
  uint64_t first = b.start_frame;
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.start_frame, first + SPY_SAMPLE_RING); /* no gap */
  CHECK_EQ(b.count, 300 - SPY_SAMPLE_RING);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_DRAWS, 0), SPY_SAMPLE_RING);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(full_sample_ring_drops_the_newest_and_counts_them) {
  /* the early flush finds the pool empty: the samples are kept, and the
   * ring, full, drops the newest */
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  spy_transport *t = spy_provider_transport(p);
  spy_buffer *held[SPY_POOL_MEDIUM_COUNT];
  for (unsigned i = 0; i < SPY_POOL_MEDIUM_COUNT; i++)
    CHECK((held[i] = spy_transport_acquire(t, SPY_TIER_MEDIUM)) != NULL);
  for (int i = 0; i < 300; i++) {
    spy_frame_begin(p);
    spy_counter_set(p, SPY_COUNTER_DRAWS, (uint32_t)i);
    spy_frame_end(p);
  }
  for (unsigned i = 0; i < SPY_POOL_MEDIUM_COUNT; i++)
    t->ops->release_unused(t, held[i]);
  CHECK_OK(spy_provider_flush(p));
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.flushes_dropped, 1); /* the one the ring's filling brought */
  CHECK_EQ(st.samples_dropped, 60);
  spy_stats_batch b;
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.count, SPY_SAMPLE_RING);
  CHECK_EQ(b.n_counters, SPY_COUNTER_BUILTIN + 2);
  /* The oldest were kept, the newest dropped. */
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_DRAWS, 0), 0);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_DRAWS, 239), 239);
  uint64_t first = b.start_frame;
  frame(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && get_stats(&b));
  CHECK_EQ(b.start_frame, first + 300); /* frame keys show the gap */
  sniff_close(&sn);
  spy_provider_destroy(p);
}

static int delta_count(uint32_t sec_id, spy_delta_iter *it) {
  spy_section s;
  if (!spy_frame_find_section(&sn.f, sec_id, &s))
    return 0;
  return spy_get_delta(&s, it);
}

static int delta_has(uint32_t sec_id, const char *key) {
  spy_delta_iter it;
  spy_delta_entry e;
  if (delta_count(sec_id, &it) <= 0)
    return 0;
  while (spy_delta_next(&it, &e))
    if (e.key_len == strlen(key) && memcmp(e.key, key, e.key_len) == 0)
      return 1;
  return 0;
}

TEST(typed_setters_by_handle_send_their_kinds) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  int hf = spy_value_handle(p, "f"), hi = spy_value_handle(p, "i"),
      hu = spy_value_handle(p, "u"), hb = spy_value_handle(p, "b"),
      h2 = spy_value_handle(p, "v2"), h3 = spy_value_handle(p, "v3"),
      h4 = spy_value_handle(p, "v4");
  CHECK(hf >= 0 && h4 >= 0);
  /* Nobody watching: nothing stored (and, by construction, nothing
   * built: the value is made past the check). */
  spy_frame_begin(p);
  spy_value_set_f64_at(p, hf, 9.0);
  spy_frame_end(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_REGISTRY));
  CHECK(wait_features(p, SPY_FEAT_REGISTRY));
  spy_frame_begin(p);
  spy_value_set_f64_at(p, hf, 1.5);
  spy_value_set_i64_at(p, hi, -7);
  spy_value_set_u64_at(p, hu, 1ull << 40);
  spy_value_set_bool_at(p, hb, 5);
  spy_value_set_vec2_at(p, h2, 1, 2);
  spy_value_set_vec3_at(p, h3, 1, 2, 3);
  spy_value_set_vec4_at(p, h4, 1, 2, 3, 4);
  spy_value_set_f64_at(p, -1, 1.0); /* bad handles: ignored */
  spy_value_set_f64_at(p, 9999, 1.0);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  spy_delta_iter it;
  spy_delta_entry e;
  CHECK_EQ(delta_count(SPY_SEC_REGISTRY, &it), 7);
  int seen = 0;
  while (spy_delta_next(&it, &e)) {
    if (e.key_len == 1 && e.key[0] == 'f')
      seen += e.value.kind == SPY_VAL_FLOAT && e.value.v.f[0] == 1.5;
    else if (e.key_len == 1 && e.key[0] == 'i')
      seen += e.value.kind == SPY_VAL_INT && e.value.v.i == -7;
    else if (e.key_len == 1 && e.key[0] == 'u')
      seen += e.value.kind == SPY_VAL_UINT && e.value.v.u == 1ull << 40;
    else if (e.key_len == 1 && e.key[0] == 'b')
      seen += e.value.kind == SPY_VAL_BOOL && e.value.v.b == 1;
    else if (e.key_len == 2 && e.key[1] == '2')
      seen += e.value.kind == SPY_VAL_FLOAT2 && e.value.v.f[1] == 2;
    else if (e.key_len == 2 && e.key[1] == '3')
      seen += e.value.kind == SPY_VAL_FLOAT3 && e.value.v.f[2] == 3;
    else if (e.key_len == 2 && e.key[1] == '4')
      seen += e.value.kind == SPY_VAL_FLOAT4 && e.value.v.f[3] == 4;
  }
  CHECK_EQ(seen, 7);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

/* The value of `key` in the last data frame's registry section: its
 * entry (state, kind, value) in *out; 0 if absent. */
static int reg_entry_of(const char *key, spy_delta_entry *out) {
  spy_delta_iter it;
  spy_delta_entry e;
  int found = 0;
  if (delta_count(SPY_SEC_REGISTRY, &it) <= 0)
    return 0;
  while (spy_delta_next(&it, &e))
    if (e.key_len == strlen(key) && memcmp(e.key, key, e.key_len) == 0) {
      *out = e;
      found = 1;
    }
  return found;
}

/* The typed by-handle setters keep the value in a slot until the flush;
 * whatever way an entry is set, the last set before the flush is what is
 * sent, and a set through a handle not registered yet leaves nothing for
 * the entry that gets that index later. */
TEST(the_last_set_of_an_entry_wins_whichever_setter_made_it) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  /* stats too: every flush of a frame sends something */
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p),
                      SPY_FEAT_REGISTRY | SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_REGISTRY | SPY_FEAT_STATS));
  int ha = spy_value_handle(p, "a");
  CHECK(ha >= 0);
  spy_delta_entry e;
  /* typed, then by name */
  spy_frame_begin(p);
  spy_value_set_f64_at(p, ha, 1.0);
  spy_value_set_f64(p, "a", 2.0);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && reg_entry_of("a", &e));
  CHECK(e.value.kind == SPY_VAL_FLOAT && e.value.v.f[0] == 2.0);
  /* by name, by spy_value, then typed */
  spy_frame_begin(p);
  spy_value_set_f64(p, "a", 3.0);
  spy_value v = {.kind = SPY_VAL_FLOAT};
  v.v.f[0] = 3.5;
  spy_value_set_at(p, ha, &v);
  spy_value_set_f64_at(p, ha, 4.0);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && reg_entry_of("a", &e));
  CHECK(e.value.kind == SPY_VAL_FLOAT && e.value.v.f[0] == 4.0);
  /* typed twice, the second of another kind; then a vector */
  spy_frame_begin(p);
  spy_value_set_f64_at(p, ha, 5.0);
  spy_value_set_i64_at(p, ha, -5);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && reg_entry_of("a", &e));
  CHECK(e.value.kind == SPY_VAL_INT && e.value.v.i == -5);
  spy_frame_begin(p);
  spy_value_set_bool_at(p, ha, 1);
  spy_value_set_vec2_at(p, ha, 6, 7);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && reg_entry_of("a", &e));
  CHECK(e.value.kind == SPY_VAL_FLOAT2 && e.value.v.f[1] == 7);
  /* the same value again: nothing sent */
  spy_frame_begin(p);
  spy_value_set_vec2_at(p, ha, 6, 7);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && !reg_entry_of("a", &e));
  /* a handle nobody was given yet, then the name that gets it */
  spy_frame_begin(p);
  spy_value_set_f64_at(p, ha + 1, 9.0);
  spy_frame_end(p);
  CHECK_EQ(spy_value_handle(p, "z"), ha + 1);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5) && reg_entry_of("z", &e));
  CHECK_EQ(e.state, SPY_DELTA_META); /* registered, never set */
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(registry_and_env_send_only_what_changed) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p),
                      SPY_FEAT_REGISTRY | SPY_FEAT_ENV | SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_REGISTRY | SPY_FEAT_ENV));
  spy_env_set_adapter(p, "soft");
  spy_frame_begin(p);
  spy_value_set_f64(p, "a", 1.0);
  spy_value_set_i64(p, "b", 2);
  spy_counter_set(p, SPY_COUNTER_PASSES, 3);
  spy_frame_end(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK(sn.f.flags & SPY_FRAME_SNAPSHOT); /* a new subscriber: whole */
  spy_delta_iter it;
  CHECK_EQ(delta_count(SPY_SEC_REGISTRY, &it), 2);
  CHECK(it.flags & SPY_DELTA_FULL);
  CHECK(delta_has(SPY_SEC_ENV, "adapter"));
  CHECK(delta_has(SPY_SEC_ENV, "paused"));
  spy_section sec;
  CHECK(spy_frame_find_section(&sn.f, SPY_SEC_STATS_SCHEMA, &sec));

  /* Same values again, one changed, new env field. */
  spy_frame_begin(p);
  spy_value_set_f64(p, "a", 1.0);
  spy_value_set_i64(p, "b", 3);
  spy_counter_set(p, SPY_COUNTER_PASSES, 4);
  spy_frame_end(p);
  spy_env_set_resolution(p, 800, 600, 1.0);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK(!(sn.f.flags & SPY_FRAME_SNAPSHOT));
  CHECK_EQ(delta_count(SPY_SEC_REGISTRY, &it), 1);
  CHECK(!(it.flags & SPY_DELTA_FULL));
  CHECK(delta_has(SPY_SEC_REGISTRY, "b"));
  CHECK_EQ(delta_count(SPY_SEC_ENV, &it), 3); /* width, height, ratio */
  CHECK(!delta_has(SPY_SEC_ENV, "adapter"));
  CHECK(!spy_frame_find_section(&sn.f, SPY_SEC_STATS_SCHEMA, &sec));
  spy_stats_batch b;
  CHECK(get_stats(&b) && b.count == 1);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_PASSES, 0), 4);

  /* Nothing changed: no registry or env section at all. */
  frame(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK_EQ(delta_count(SPY_SEC_REGISTRY, &it), 0);
  CHECK_EQ(delta_count(SPY_SEC_ENV, &it), 0);

  /* A resync makes the next one whole again. */
  sniff_post(&sn, SPY_MSG_RESYNC, NULL, 0, 0);
  usleep(100000);
  frame(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK(sn.f.flags & SPY_FRAME_SNAPSHOT);
  CHECK_EQ(delta_count(SPY_SEC_REGISTRY, &it), 2);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(unwatched_features_are_never_collected) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  spy_provider_stats st;
  for (int i = 0; i < 50; i++) { /* nobody watching at all */
    spy_frame_begin(p);
    spy_value_set_f64(p, "x", i);
    spy_frame_end(p);
  }
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.frames, 0);
  CHECK_EQ(st.stats_samples, 0);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  for (int i = 0; i < 50; i++) {
    spy_frame_begin(p);
    spy_value_set_f64(p, "x", i);
    spy_frame_end(p);
  }
  CHECK_OK(spy_provider_flush(p));
  usleep(100000);
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.stats_samples, 50);
  CHECK_EQ(st.env_samples, 0);      /* no RSS reads for nobody */
  CHECK_EQ(st.registry_flushes, 0); /* registry never encoded */
  CHECK_EQ(st.health_flushes, 0);
  CHECK(sniff_data(&sn, 5));
  spy_section s;
  CHECK(!spy_frame_find_section(&sn.f, SPY_SEC_REGISTRY, &s));
  CHECK(!spy_frame_find_section(&sn.f, SPY_SEC_ENV, &s));
  /* Now someone wants the environment: it is sampled. */
  sn.features |= SPY_FEAT_ENV;
  sniff_post(&sn, SPY_MSG_SUBSCRIBE, NULL, 0, 0);
  CHECK(wait_features(p, SPY_FEAT_ENV));
  double end = tu_now_s() + 5;
  do {
    usleep(10000);
    spy_provider_get_stats(p, &st);
  } while (!st.env_samples && tu_now_s() < end);
  CHECK(st.env_samples > 0);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

TEST(empty_pool_drops_the_flush_and_reports_it) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p),
                      SPY_FEAT_STATS | SPY_FEAT_HEALTH));
  CHECK(wait_features(p, SPY_FEAT_STATS | SPY_FEAT_HEALTH));
  spy_transport *t = spy_provider_transport(p);
  spy_buffer *held[SPY_POOL_MEDIUM_COUNT];
  for (unsigned i = 0; i < SPY_POOL_MEDIUM_COUNT; i++)
    CHECK((held[i] = spy_transport_acquire(t, SPY_TIER_MEDIUM)) != NULL);
  frame(p);
  CHECK_EQ(spy_provider_flush(p), SPY_EPOOLEMPTY);
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  CHECK_EQ(st.flushes_dropped, 1);
  for (unsigned i = 0; i < SPY_POOL_MEDIUM_COUNT; i++)
    t->ops->release_unused(t, held[i]);
  frame(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  spy_section s;
  uint64_t h[SPY_HEALTH_FIELD_COUNT];
  CHECK(spy_frame_find_section(&sn.f, SPY_SEC_HEALTH, &s));
  CHECK(spy_get_health(&s, h, SPY_HEALTH_FIELD_COUNT) > 0);
  CHECK_EQ(h[SPY_HEALTH_FLUSHES_DROPPED], 1); /* visible to consumers */
  spy_stats_batch b;
  CHECK(get_stats(&b));
  CHECK_EQ(b.count, 2); /* the dropped flush's sample was kept */
  sniff_close(&sn);
  spy_provider_destroy(p);
}

/* A bool field of the ENV section in the last data frame: 0/1, or -1 when
 * the section or the field is missing. */
static int env_bool(const char *key) {
  spy_section s;
  spy_delta_iter it;
  spy_delta_entry e;
  int v = -1;
  if (!spy_frame_find_section(&sn.f, SPY_SEC_ENV, &s) ||
      spy_get_delta(&s, &it) <= 0)
    return -1;
  while (spy_delta_next(&it, &e))
    if (e.key_len == strlen(key) && !memcmp(e.key, key, e.key_len))
      v = e.value.v.b;
  return v;
}

TEST(skipped_frames_measure_nothing_and_show_paused) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_OK(
      sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS | SPY_FEAT_ENV));
  CHECK(wait_features(p, SPY_FEAT_STATS | SPY_FEAT_ENV));
  /* FPS is the raw 1/delta of each frame's end from the one before, not
   * an average: each lies within what the times taken around the calls
   * allow (a loaded machine stretches the sleeps; nothing about speed is
   * asserted). */
  double t[6];
  t[0] = tu_now_s();
  frame(p);
  t[1] = tu_now_s();
  usleep(10000);
  t[2] = tu_now_s();
  frame(p);
  t[3] = tu_now_s();
  usleep(40000);
  t[4] = tu_now_s();
  spy_frame_begin(p);
  usleep(5000);
  spy_frame_end(p);
  t[5] = tu_now_s();
  for (int i = 0; i < 5; i++)
    spy_frame_skip(p, SPY_SKIP_PAUSED);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  spy_stats_batch b;
  CHECK(get_stats(&b));
  CHECK_EQ(b.count, 3); /* skipped frames add no samples */
  for (int i = 1; i <= 2; i++) {
    /* the delta between the ends of frames i-1 and i */
    double lo = t[2 * i] - t[2 * i - 1], hi = t[2 * i + 1] - t[2 * i - 2];
    double fps_x10 = spy_stats_fps_x10(&b, (uint32_t)i);
    CHECK(fps_x10 >= 10.0 / hi * 0.9 - 1); /* slack: the tick calibration */
    CHECK(fps_x10 <= 10.0 / lo * 1.1 + 1);
  }
  CHECK(spy_stats_cpu_x100(&b, 2) >= 450); /* ~5 ms of CPU work */
  int16_t fps_last = spy_stats_fps_x10(&b, 2);
  CHECK_EQ(env_bool("paused"), 1);
  frame(p); /* drawing again */
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  CHECK_EQ(env_bool("paused"), 0);
  /* No interval across the pause: the first frame after it repeats the
   * FPS of the last one before it, sent in the previous flush. */
  CHECK(get_stats(&b));
  CHECK_EQ(b.count, 1);
  CHECK_EQ(spy_stats_fps_x10(&b, 0), fps_last);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

static _Atomic int loop_stop;
static void *frame_loop(void *arg) {
  spy_provider *p = arg;
  while (!atomic_load(&loop_stop)) {
    spy_frame_begin(p);
    usleep(500);
    spy_frame_end(p);
  }
  return NULL;
}

TEST(inline_transport_is_the_fallback_when_the_worker_cannot_start) {
  spy_provider *p = make(SPY_TRANSPORT_AUTO, 1);
  CHECK(p);
  CHECK_STR(spy_provider_transport_name(p), "inline");
  pthread_t t;
  atomic_store(&loop_stop, 0);
  pthread_create(&t, NULL, frame_loop, p); /* the frame thread serves */
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  atomic_store(&loop_stop, 1);
  pthread_join(t, NULL);
  CHECK(wait_features(p, SPY_FEAT_STATS));
  for (int i = 0; i < 10; i++)
    frame(p);
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  spy_stats_batch b;
  CHECK(get_stats(&b) && b.count >= 10);
  sniff_close(&sn);
  spy_provider_destroy(p);
  /* Asked for offload explicitly, a failing worker is an error. */
  spy_provider *q = NULL;
  spy_provider_desc d = {.dir = dir,
                         .transport = SPY_TRANSPORT_OFFLOAD,
                         .simulate_worker_failure = 1};
  CHECK(spy_provider_create(&q, &d) < 0);
  CHECK(q == NULL);
}

TEST(counters_reset_each_frame_and_app_counters_are_named) {
  spy_provider *p = make(SPY_TRANSPORT_OFFLOAD, 0);
  CHECK(p);
  CHECK_EQ(spy_counter_index(p, "draws"), SPY_COUNTER_DRAWS);
  CHECK_EQ(spy_counter_index(p, "bullets"), SPY_COUNTER_BUILTIN + 1);
  CHECK_EQ(spy_counter_index(p, "nope"), SPY_ENOENT);
  CHECK_OK(sniff_open(&sn, dir, spy_provider_id(p), SPY_FEAT_STATS));
  CHECK(wait_features(p, SPY_FEAT_STATS));
  spy_frame_begin(p);
  spy_counter_add(p, SPY_COUNTER_BUILTIN + 1, 2);
  spy_counter_add(p, SPY_COUNTER_BUILTIN + 1, 3);
  spy_frame_end(p);
  frame(p); /* nothing added: back to 0 */
  CHECK_OK(spy_provider_flush(p));
  CHECK(sniff_data(&sn, 5));
  spy_stats_batch b;
  CHECK(get_stats(&b) && b.count == 2);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_BUILTIN + 1, 0), 5);
  CHECK_EQ(spy_stats_counter(&b, SPY_COUNTER_BUILTIN + 1, 1), 0);
  spy_section s;
  spy_name_iter it;
  CHECK(spy_frame_find_section(&sn.f, SPY_SEC_STATS_SCHEMA, &s));
  CHECK_EQ(spy_get_name_list(&s, &it), SPY_COUNTER_BUILTIN + 2);
  sniff_close(&sn);
  spy_provider_destroy(p);
}

/* In compiled_out.c, built without SPY_ENABLE: every macro is a no-op. */
int spy_test_compiled_out_calls(void);

TEST(macros_compile_to_nothing_without_spy_enable) {
  CHECK_EQ(spy_test_compiled_out_calls(), 11);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(gpu_time_attributed_coalesced_out_of_order_and_forward_filled),
      TEST_CASE(gpu_resolve_for_an_id_never_issued_is_ignored_and_counted),
      TEST_CASE(gpu_device_reset_restarts_the_mapping),
      TEST_CASE(nan_negative_and_huge_gpu_durations_are_rejected_and_counted),
      TEST_CASE(typed_setters_by_handle_send_their_kinds),
      TEST_CASE(the_last_set_of_an_entry_wins_whichever_setter_made_it),
      TEST_CASE(a_full_sample_ring_flushes_before_its_time),
      TEST_CASE(full_sample_ring_drops_the_newest_and_counts_them),
      TEST_CASE(registry_and_env_send_only_what_changed),
      TEST_CASE(unwatched_features_are_never_collected),
      TEST_CASE(empty_pool_drops_the_flush_and_reports_it),
      TEST_CASE(skipped_frames_measure_nothing_and_show_paused),
      TEST_CASE(inline_transport_is_the_fallback_when_the_worker_cannot_start),
      TEST_CASE(counters_reset_each_frame_and_app_counters_are_named),
      TEST_CASE(macros_compile_to_nothing_without_spy_enable)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  if (dir[0])
    tu_rm_rf(dir);
  return rc;
}
