/* state_json.c — writes a consumer's accumulated state as JSON. Missing
 * numbers (NAN, e.g. GPU time without timings) are null, never 0. */
#include "state_json.h"

#include <math.h>
#include <stdio.h>

#include "overlay.h"
#include "top_build.h"

static void uint_field(json_out *j, const char *key, uint64_t v) {
  jw_key(j, key);
  jw_uint(j, v);
}

const char *state_conn_name(spy_conn conn) {
  switch (conn) {
  case SPY_CONN_SEARCHING: return "searching";
  case SPY_CONN_SUBSCRIBING: return "subscribing";
  case SPY_CONN_CONNECTED: return "connected";
  case SPY_CONN_LOST: return "lost";
  }
  return "unknown";
}

static void value_json(json_out *j, const spy_state_entry *e) {
  const spy_value *v = &e->value;
  if (!e->has_value) {
    jw_null(j);
    return;
  }
  switch (v->kind) {
  case SPY_VAL_FLOAT: jw_num(j, v->v.f[0]); break;
  case SPY_VAL_UINT:
  case SPY_VAL_BITS: jw_uint(j, v->v.u); break;
  case SPY_VAL_INT: jw_int(j, v->v.i); break;
  case SPY_VAL_BOOL: jw_bool(j, v->v.b); break;
  case SPY_VAL_FLOAT2:
  case SPY_VAL_FLOAT3:
  case SPY_VAL_FLOAT4:
    jw_arr_begin(j);
    for (int i = 0; i < 2 + (v->kind - SPY_VAL_FLOAT2); i++)
      jw_num(j, v->v.f[i]);
    jw_arr_end(j);
    break;
  case SPY_VAL_STRING:
    jw_strn(j, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
    break;
  case SPY_VAL_BLOB:
    jw_obj_begin(j);
    uint_field(j, "blob_bytes", v->v.s.len);
    jw_obj_end(j);
    break;
  default: jw_null(j); break;
  }
}

static void table_json(json_out *j, const spy_state_table *t) {
  jw_obj_begin(j);
  for (uint32_t i = 0; i < t->n; i++) {
    jw_key(j, t->e[i].name);
    value_json(j, &t->e[i]);
  }
  jw_obj_end(j);
}

/* Stats travel as fixed point (fps ×10, ms ×100): print them rounded to
 * 1/100 so a float's binary tail does not pose as precision. */
static double hundredths(double v) { return round(v * 100.0) / 100.0; }

static void num_or_null(json_out *j, const char *key, double v) {
  jw_key(j, key);
  jw_num(j, hundredths(v)); /* NAN prints as null */
}

static const char *const health_names[SPY_HEALTH_FIELD_COUNT] = {
    "frames_posted",   "bytes_posted",     "flushes_dropped",
    "samples_dropped", "frames_lost",      "subscribers",
    "pool_small_free", "pool_medium_free", "pool_large_free"};

void state_to_json(json_out *j, const spy_consumer *c) {
  const spy_state *s = spy_consumer_state(c);
  jw_obj_begin(j);
  jw_key(j, "conn");
  jw_str(j, state_conn_name(s->conn));
  jw_key(j, "provider");
  if (s->provider.id) {
    char id[17];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)s->provider.id);
    jw_obj_begin(j);
    jw_key(j, "id");
    jw_str(j, id);
    jw_key(j, "name");
    jw_str(j, s->provider_name);
    jw_key(j, "kind");
    jw_str(j, s->provider.kind == SPY_PROVIDER_SYSTEM ? "system" : "user");
    uint_field(j, "pid", s->provider.pid);
    uint_field(j, "start_ms", s->provider.start_ms);
    jw_obj_end(j);
  } else {
    jw_null(j);
  }
  num_or_null(j, "fps", spy_state_last(s, SPY_FIELD_FPS));
  num_or_null(j, "cpu_ms", spy_state_last(s, SPY_FIELD_CPU_MS));
  num_or_null(j, "gpu_ms", spy_state_last(s, SPY_FIELD_GPU_MS));
  jw_key(j, "batch_mean");
  jw_obj_begin(j);
  num_or_null(j, "fps", s->batch_mean[0]);
  num_or_null(j, "cpu_ms", s->batch_mean[1]);
  num_or_null(j, "gpu_ms", s->batch_mean[2]);
  jw_obj_end(j);
  uint_field(j, "samples", s->samples);
  uint_field(j, "last_frame", s->last_frame);
  uint_field(j, "samples_lost", s->samples_lost);
  jw_key(j, "cpu_history");
  jw_arr_begin(j);
  uint32_t n = s->len < OVERLAY_SPARK_SAMPLES ? s->len : OVERLAY_SPARK_SAMPLES;
  for (uint32_t age = n; age-- > 0;)
    jw_num(j, hundredths(spy_state_sample(s, SPY_FIELD_CPU_MS, age)));
  jw_arr_end(j);
  jw_key(j, "counters");
  jw_obj_begin(j);
  for (uint32_t i = 0; i < s->n_counters && i < SPY_STATS_MAX_COUNTERS; i++)
    num_or_null(j, s->counter_names[i],
                spy_state_last(s, SPY_FIELD_COUNTER0 + i));
  jw_obj_end(j);
  jw_key(j, "env");
  table_json(j, &s->env);
  jw_key(j, "values");
  table_json(j, &s->registry);
  jw_key(j, "health");
  jw_obj_begin(j);
  for (int i = 0; i < SPY_HEALTH_FIELD_COUNT; i++)
    uint_field(j, health_names[i], s->health[i]);
  jw_obj_end(j);
  jw_key(j, "bus");
  jw_obj_begin(j);
  num_or_null(j, "rx_frames_per_s", s->rx_frames_per_s);
  num_or_null(j, "rx_bytes_per_s", s->rx_bytes_per_s);
  uint_field(j, "frames_received", s->frames_received);
  uint_field(j, "bytes_received", s->bytes_received);
  uint_field(j, "frames_lost", s->frames_lost);
  uint_field(j, "malformed", s->malformed);
  uint_field(j, "reconnects", s->reconnects);
  jw_obj_end(j);
  top_build_json(j, s); /* live build progress (null without) */
  jw_obj_end(j);
}
