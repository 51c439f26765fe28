/* frame_json.c — a decoded frame as JSON, section by section (see
 * frame_json.h). Scaled integers are printed in their real units: fps is
 * fps_x10 / 10, cpu and gpu are ms (x100 / 100), a GPU sample without a
 * timing is null. */
#include "frame_json.h"

#include <string.h>

#include "spyglass/clock.h"
#include "spyglass/profiler.h"

static void kv_hex(json_out *j, const char *key, uint64_t v) {
  char id[17];
  snprintf(id, sizeof id, "%016llx", (unsigned long long)v);
  jw_key(j, key);
  jw_str(j, id);
}

static void value_json(json_out *j, const spy_value *v) {
  switch (v->kind) {
  case SPY_VAL_FLOAT: jw_num(j, v->v.f[0]); break;
  case SPY_VAL_UINT:
  case SPY_VAL_BITS: jw_uint(j, v->v.u); break;
  case SPY_VAL_INT: jw_int(j, v->v.i); break;
  case SPY_VAL_FLOAT2:
  case SPY_VAL_FLOAT3:
  case SPY_VAL_FLOAT4: {
    int n = spy_value_kind_size(v->kind) / 8;
    jw_arr_begin(j);
    for (int i = 0; i < n; i++)
      jw_num(j, v->v.f[i]);
    jw_arr_end(j);
    break;
  }
  case SPY_VAL_BOOL: jw_bool(j, v->v.b); break;
  case SPY_VAL_STRING: jw_strn(j, v->v.s.ptr, v->v.s.len); break;
  case SPY_VAL_BLOB:
    jw_obj_begin(j);
    jw_key(j, "blob_bytes");
    jw_uint(j, v->v.s.len);
    jw_obj_end(j);
    break;
  default: jw_null(j);
  }
}

static int stats_json(json_out *j, const spy_section *s) {
  spy_stats_batch b;
  int rc = spy_get_stats(s, &b);
  if (rc < 0)
    return rc;
  jw_key(j, "start_frame");
  jw_uint(j, b.start_frame);
  jw_key(j, "count");
  jw_uint(j, b.count);
  jw_key(j, "fps");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < b.count; i++)
    jw_num(j, spy_stats_fps_x10(&b, i) / 10.0);
  jw_arr_end(j);
  jw_key(j, "cpu_ms");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < b.count; i++)
    jw_num(j, spy_stats_cpu_x100(&b, i) / 100.0);
  jw_arr_end(j);
  jw_key(j, "gpu_ms");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < b.count; i++) {
    uint16_t g = spy_stats_gpu_x100(&b, i);
    if (g == SPY_GPU_NONE)
      jw_null(j);
    else
      jw_num(j, g / 100.0);
  }
  jw_arr_end(j);
  jw_key(j, "counters");
  jw_arr_begin(j);
  for (uint32_t c = 0; c < b.n_counters; c++) {
    jw_arr_begin(j);
    for (uint32_t i = 0; i < b.count; i++)
      jw_uint(j, spy_stats_counter(&b, c, i));
    jw_arr_end(j);
  }
  jw_arr_end(j);
  return 0;
}

static int delta_json(json_out *j, const spy_section *s) {
  spy_delta_iter it;
  int rc = spy_get_delta(s, &it);
  if (rc < 0)
    return rc;
  jw_key(j, "full");
  jw_bool(j, it.flags & SPY_DELTA_FULL);
  jw_key(j, "entries");
  jw_arr_begin(j);
  spy_delta_entry e;
  while (spy_delta_next(&it, &e)) {
    jw_obj_begin(j);
    jw_key(j, "key");
    jw_strn(j, e.key, e.key_len);
    jw_key(j, "state");
    jw_str(j, e.state == SPY_DELTA_SET    ? "set"
              : e.state == SPY_DELTA_META ? "meta"
                                          : "cleared");
    if (e.state == SPY_DELTA_META) {
      jw_key(j, "kind");
      jw_str(j, spy_value_kind_name(e.value.kind));
    }
    if (e.state == SPY_DELTA_SET) {
      jw_key(j, "kind");
      jw_str(j, spy_value_kind_name(e.value.kind));
      jw_key(j, "value");
      value_json(j, &e.value);
    }
    jw_obj_end(j);
  }
  jw_arr_end(j);
  return 0;
}

static int names_json(json_out *j, const spy_section *s) {
  spy_name_iter it;
  int rc = spy_get_name_list(s, &it);
  if (rc < 0)
    return rc;
  const char *n;
  uint32_t len;
  jw_key(j, "names");
  jw_arr_begin(j);
  while (spy_name_next(&it, &n, &len))
    jw_strn(j, n, len);
  jw_arr_end(j);
  return 0;
}

static int health_json(json_out *j, const spy_section *s) {
  static const char *const names[SPY_HEALTH_FIELD_COUNT] = {
      "frames_posted",   "bytes_posted",     "flushes_dropped",
      "samples_dropped", "frames_lost",      "subscribers",
      "pool_small_free", "pool_medium_free", "pool_large_free"};
  uint64_t v[SPY_HEALTH_FIELD_COUNT];
  int rc = spy_get_health(s, v, SPY_HEALTH_FIELD_COUNT);
  if (rc < 0)
    return rc;
  for (int i = 0; i < SPY_HEALTH_FIELD_COUNT && i < rc; i++) {
    jw_key(j, names[i]);
    jw_uint(j, v[i]);
  }
  return 0;
}

static int provider_json(json_out *j, const spy_section *s) {
  spy_provider_info p;
  int rc = spy_get_provider(s, &p);
  if (rc < 0)
    return rc;
  kv_hex(j, "id", p.id);
  jw_key(j, "name");
  jw_strn(j, p.name, p.name_len);
  jw_key(j, "kind");
  jw_str(j, p.kind == SPY_PROVIDER_SYSTEM ? "system" : "user");
  jw_key(j, "pid");
  jw_uint(j, p.pid);
  jw_key(j, "start_ms");
  jw_uint(j, p.start_ms);
  jw_key(j, "subscribers");
  jw_uint(j, p.subscribers);
  return 0;
}

static int peer_json(json_out *j, const spy_section *s) {
  spy_peer_info p;
  int rc = spy_get_peer(s, &p);
  if (rc < 0)
    return rc;
  kv_hex(j, "id", p.id);
  jw_key(j, "features");
  jw_uint(j, p.features);
  return 0;
}

static int subscription_json(json_out *j, const spy_section *s) {
  spy_subscription sub;
  int rc = spy_get_subscription(s, &sub);
  if (rc < 0)
    return rc;
  kv_hex(j, "consumer", sub.consumer);
  jw_key(j, "features");
  jw_uint(j, sub.features);
  jw_key(j, "registry");
  if (!(sub.flags & SPY_SUB_REGISTRY_FILTER)) {
    jw_null(j); /* no filter: every entry */
  } else {
    jw_arr_begin(j);
    const uint8_t *cur = NULL;
    const char *n;
    uint32_t len;
    while (spy_subscription_next_registry(&sub, &cur, &n, &len))
      jw_strn(j, n, len);
    jw_arr_end(j);
  }
  jw_key(j, "buffers");
  jw_obj_begin(j);
  const uint8_t *cur = NULL;
  spy_buffer_request b;
  while (spy_subscription_next_buffer(&sub, &cur, &b)) {
    char name[SPY_KEY_MAX + 1];
    memcpy(name, b.name, b.name_len);
    name[b.name_len] = 0;
    jw_key(j, name);
    jw_obj_begin(j);
    jw_key(j, "mode");
    jw_str(j, b.mode == SPY_BUFFER_STREAM ? "stream" : "thumbnail");
    jw_key(j, "long_edge");
    jw_uint(j, b.long_edge ? b.long_edge : 256);
    jw_obj_end(j);
  }
  jw_obj_end(j);
  return 0;
}

static int pixels_json(json_out *j, const spy_section *s) {
  spy_pixels p;
  int rc = spy_get_pixels(s, &p);
  if (rc < 0)
    return rc;
  jw_key(j, "buffer");
  jw_strn(j, p.name, p.name_len);
  jw_key(j, "frame");
  jw_uint(j, p.frame);
  jw_key(j, "captured_ms");
  jw_uint(j, p.captured_ms);
  jw_key(j, "width");
  jw_uint(j, p.width);
  jw_key(j, "height");
  jw_uint(j, p.height);
  jw_key(j, "codec");
  jw_str(j, p.codec == SPY_CODEC_VP9 ? "vp9" : "rgba8");
  jw_key(j, "key_frame");
  jw_bool(j, p.key_frame);
  jw_key(j, "data_bytes");
  jw_uint(j, p.data_len);
  return 0;
}

/* key: unsigned value, the common case of the sections below. */
static void kv_uint(json_out *j, const char *key, uint64_t v) {
  jw_key(j, key);
  jw_uint(j, v);
}

/* key: a 64-bit id as 16 hex digits, as ids are printed everywhere. */

static void cost_json(json_out *j, const char *key, const spy_msgprof_ns *n) {
  jw_key(j, key);
  jw_obj_begin(j);
  kv_uint(j, "mean_ns", n->mean_ns);
  kv_uint(j, "p50_ns", n->p50_ns);
  kv_uint(j, "p99_ns", n->p99_ns);
  kv_uint(j, "max_ns", n->max_ns);
  jw_obj_end(j);
}

static int msgprof_json(json_out *j, const spy_section *s) {
  static spy_msgprof_summary m; /* 6 KiB: not on the stack */
  int rc = spy_get_msgprof(s, &m);
  if (rc < 0)
    return rc;
  kv_uint(j, "messages", m.messages);
  kv_uint(j, "errors", m.errors);
  kv_uint(j, "elapsed_ns", m.elapsed_ns);
  jw_key(j, "size_accounting");
  jw_bool(j, !(m.flags & SPY_MSGPROF_NO_SIZE));
  jw_key(j, "types");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < m.n_types; i++) {
    const spy_msgprof_type *t = &m.types[i];
    const char *tn = spy_msg_type_name(t->type);
    jw_obj_begin(j);
    jw_key(j, "type");
    jw_str(j, tn ? tn : "unknown");
    kv_uint(j, "type_id", t->type);
    kv_uint(j, "count", t->count);
    kv_uint(j, "errors", t->errors);
    kv_uint(j, "bytes", t->bytes);
    cost_json(j, "encode", &t->encode);
    cost_json(j, "post", &t->post);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  return 0;
}

static int clock_json(json_out *j, const spy_section *s) {
  static const char *const ops[] = {"", "request", "ready", "result"};
  spy_clock_msg c;
  int rc = spy_get_clock(s, &c);
  if (rc < 0)
    return rc;
  jw_key(j, "op");
  jw_str(j, ops[c.op]);
  kv_uint(j, "rounds", c.rounds);
  kv_hex(j, "provider", c.provider);
  kv_hex(j, "consumer", c.consumer);
  jw_key(j, "offset_ns");
  jw_int(j, c.offset_ns);
  jw_key(j, "rtt_ns");
  jw_int(j, c.rtt_ns);
  return 0;
}

/* ZONES: the locations, then per thread its block flags and every event
 * with its absolute time (the provider's CLOCK_MONOTONIC ns). */
static int zones_json(json_out *j, const spy_section *s) {
  static const char *const kinds[] = {"end", "begin", "frame"};
  spy_zones_iter it;
  int rc = spy_get_zones(s, &it);
  if (rc < 0)
    return rc;
  jw_key(j, "full");
  jw_bool(j, it.flags & SPY_ZONES_FULL);
  kv_uint(j, "base_ns", it.base_ns);
  jw_key(j, "locations");
  jw_arr_begin(j);
  spy_zone_loc_info l;
  while (spy_zones_next_loc(&it, &l)) {
    jw_obj_begin(j);
    kv_uint(j, "id", l.id);
    jw_key(j, "name");
    jw_strn(j, l.name, l.name_len);
    jw_key(j, "function");
    jw_strn(j, l.function, l.function_len);
    jw_key(j, "file");
    jw_strn(j, l.file, l.file_len);
    kv_uint(j, "line", l.line);
    kv_uint(j, "color", l.color);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  jw_key(j, "threads");
  jw_arr_begin(j);
  spy_zone_thread_info t;
  spy_zone_event_iter ev;
  while (spy_zones_next_thread(&it, &t, &ev)) {
    jw_obj_begin(j);
    kv_uint(j, "thread", t.thread);
    kv_uint(j, "os_tid", t.os_tid);
    if (t.flags & SPY_ZONES_THREAD_NAMED) {
      jw_key(j, "name");
      jw_strn(j, t.name, t.name_len);
    }
    jw_key(j, "reset");
    jw_bool(j, t.flags & SPY_ZONES_THREAD_RESET);
    jw_key(j, "gone");
    jw_bool(j, t.flags & SPY_ZONES_THREAD_GONE);
    kv_uint(j, "dropped", t.dropped);
    jw_key(j, "events");
    jw_arr_begin(j);
    spy_zone_event e;
    while ((rc = spy_zone_event_next(&ev, &e)) > 0) {
      jw_obj_begin(j);
      jw_key(j, "kind");
      jw_str(j, e.kind < 3 ? kinds[e.kind] : "unknown");
      kv_uint(j, "t_ns", e.t_ns);
      if (e.kind == SPY_ZONE_EV_BEGIN)
        kv_uint(j, "loc", e.value);
      else if (e.kind == SPY_ZONE_EV_FRAME)
        kv_uint(j, "frame", e.value);
      jw_obj_end(j);
    }
    if (rc < 0)
      return rc;
    jw_arr_end(j);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  return 0;
}

static int section_json(json_out *j, const spy_section *s) {
  switch (s->id) {
  case SPY_SEC_STATS: return stats_json(j, s);
  case SPY_SEC_ENV:
  case SPY_SEC_REGISTRY:
  case SPY_SEC_BUFFERS: return delta_json(j, s);
  case SPY_SEC_STATS_SCHEMA: return names_json(j, s);
  case SPY_SEC_HEALTH: return health_json(j, s);
  case SPY_SEC_PROVIDER: return provider_json(j, s);
  case SPY_SEC_PEER: return peer_json(j, s);
  case SPY_SEC_SUBSCRIPTION: return subscription_json(j, s);
  case SPY_SEC_PIXELS: return pixels_json(j, s);
  case SPY_SEC_MSGPROF: return msgprof_json(j, s);
  case SPY_SEC_CLOCK: return clock_json(j, s);
  case SPY_SEC_ZONES: return zones_json(j, s);
  default: return 0; /* opaque to this tool: id and length only */
  }
}

int frame_to_json(json_out *j, const spy_frame *f, size_t offset,
                  size_t *bad_off) {
  const char *tn = spy_msg_type_name(f->type);
  jw_obj_begin(j);
  jw_key(j, "offset");
  jw_uint(j, offset);
  jw_key(j, "type");
  jw_str(j, tn ? tn : "unknown");
  jw_key(j, "type_id");
  jw_uint(j, f->type);
  jw_key(j, "ts_ms");
  jw_uint(j, f->ts_ms);
  jw_key(j, "seq");
  jw_uint(j, f->seq);
  jw_key(j, "version");
  jw_uint(j, f->version);
  jw_key(j, "snapshot");
  jw_bool(j, f->flags & SPY_FRAME_SNAPSHOT);
  jw_key(j, "checkpoint");
  jw_bool(j, f->flags & SPY_FRAME_CHECKPOINT);
  jw_key(j, "bytes");
  jw_uint(j, f->len);
  jw_key(j, "sections");
  jw_arr_begin(j);
  size_t cur = 0;
  spy_section s;
  while (spy_frame_next_section(f, &cur, &s)) {
    const char *sn = spy_section_name(s.id);
    jw_obj_begin(j);
    jw_key(j, "id");
    jw_uint(j, s.id);
    jw_key(j, "name");
    jw_str(j, sn ? sn : "unknown");
    jw_key(j, "bytes");
    jw_uint(j, s.len);
    int rc = section_json(j, &s);
    if (rc < 0) {
      if (bad_off)
        *bad_off = (size_t)(s.data - f->bytes) - SPY_SECTION_HEADER_BYTES;
      return rc;
    }
    jw_obj_end(j);
  }
  jw_arr_end(j);
  jw_obj_end(j);
  return 0;
}
