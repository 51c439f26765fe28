/* state.c — a consumer's accumulated state: every data frame is applied to
 * it (absent = keep, cleared = reset, present = replace; a FULL list
 * replaces a whole table), and stats batches append to per-field rings, so
 * a UI renders from its own running copy rather than from any one packet.
 * A MSGPROF summary replaces the message-profile rows, with per-type
 * rates taken over the provider's own clock (elapsed_ns), one second at a
 * time. ZONES sections rebuild per-thread spans (zones_state.c).
 * A section is validated whole before any of it is applied. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/drawlist_state.h"
#include "consumer/images.h"
#include "consumer/zones_state.h"
/* trace_state.c */
int spy__state_build_apply(spy_state *s, const spy_section *sec);
#include "spyglass/consumer.h"

#define NFIELDS (3 + SPY_STATS_MAX_COUNTERS)

int spy_state_init(spy_state *s, uint32_t history) {
  memset(s, 0, sizeof *s);
  s->history = history ? history : 600;
  s->rings = malloc((size_t)NFIELDS * s->history * sizeof(float));
  if (!s->rings)
    return SPY_ENOMEM;
  for (size_t i = 0; i < (size_t)NFIELDS * s->history; i++)
    s->rings[i] = NAN;
  return 0;
}

static void table_clear(spy_state_table *t) {
  for (uint32_t i = 0; i < t->n; i++)
    free(t->e[i].text);
  free(t->e);
  memset(t, 0, sizeof *t);
}

void spy_state_free(spy_state *s) {
  if (!s)
    return;
  free(s->rings);
  table_clear(&s->env);
  table_clear(&s->registry);
  table_clear(&s->buffers);
  table_clear(&s->buffer_variants);
  spy__state_zones_free(s);
  spy__state_images_free(s);
  spy__state_drawlist_free(s);
  s->rings = NULL;
}

float spy_state_sample(const spy_state *s, uint32_t field, uint32_t age) {
  if (field >= NFIELDS || age >= s->len || !s->rings)
    return NAN;
  uint32_t idx = (s->head + s->history - 1 - age) % s->history;
  return s->rings[(size_t)field * s->history + idx];
}

const spy_state_entry *spy_state_find(const spy_state_table *t,
                                      const char *name) {
  for (uint32_t i = 0; i < t->n; i++)
    if (strcmp(t->e[i].name, name) == 0)
      return &t->e[i];
  return NULL;
}

int spy_state_counter(const spy_state *s, const char *name) {
  for (uint32_t c = 0; c < s->n_counters; c++)
    if (strcmp(s->counter_names[c], name) == 0)
      return (int)c;
  return -1;
}

static spy_state_entry *upsert(spy_state_table *t, const char *key,
                               uint32_t klen) {
  for (uint32_t i = 0; i < t->n; i++)
    if (strlen(t->e[i].name) == klen && memcmp(t->e[i].name, key, klen) == 0)
      return &t->e[i];
  if (t->n == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 16;
    spy_state_entry *e = realloc(t->e, cap * sizeof *e);
    if (!e)
      return NULL;
    t->e = e;
    t->cap = cap;
  }
  spy_state_entry *e = &t->e[t->n++];
  memset(e, 0, sizeof *e);
  memcpy(e->name, key, klen);
  e->name[klen] = 0;
  return e;
}

static void remove_at(spy_state_table *t, uint32_t i) {
  free(t->e[i].text);
  t->e[i] = t->e[t->n - 1];
  t->n--;
}

static int set_value(spy_state_entry *e, const spy_value *v) {
  char *keep = e->text;
  uint32_t cap = e->text_cap;
  if (v->kind == SPY_VAL_STRING || v->kind == SPY_VAL_BLOB) {
    if (v->v.s.len + 1 > cap) {
      char *t = realloc(keep, v->v.s.len + 1);
      if (!t)
        return SPY_ENOMEM;
      keep = t;
      cap = v->v.s.len + 1;
    }
    memcpy(keep, v->v.s.ptr, v->v.s.len);
    keep[v->v.s.len] = 0;
  }
  e->value = *v;
  e->text = keep;
  e->text_cap = cap;
  if (v->kind == SPY_VAL_STRING || v->kind == SPY_VAL_BLOB)
    e->value.v.s.ptr = keep;
  return 0;
}

static int in_filter(const spy_state *s, const char *key, uint32_t len) {
  for (uint32_t i = 0; i < s->n_registry_names; i++)
    if (strlen(s->registry_names[i]) == len &&
        memcmp(s->registry_names[i], key, len) == 0)
      return 1;
  return 0;
}

/* filter: the state whose registry filter applies, or NULL. */
static int apply_delta(spy_state_table *t, const spy_section *sec, uint64_t now,
                       const spy_state *filter) {
  spy_delta_iter it;
  int n = spy_get_delta(sec, &it);
  if (n < 0)
    return n;
  int full = it.flags & SPY_DELTA_FULL;
  if (full)
    for (uint32_t i = 0; i < t->n; i++)
      t->e[i].updated_ms = 0; /* used below as "not listed" */
  spy_delta_entry d;
  while (spy_delta_next(&it, &d)) {
    if (d.state == SPY_DELTA_CLEARED) {
      for (uint32_t i = 0; i < t->n; i++)
        if (strlen(t->e[i].name) == d.key_len &&
            memcmp(t->e[i].name, d.key, d.key_len) == 0) {
          remove_at(t, i);
          break;
        }
      continue;
    }
    spy_state_entry *e = upsert(t, d.key, d.key_len);
    if (!e)
      return SPY_ENOMEM;
    if (d.state == SPY_DELTA_META ||
        (filter && !in_filter(filter, d.key, d.key_len))) {
      /* Outside our filter: another subscriber wanted the value. */
      e->has_value = 0;
      e->value.kind = d.value.kind;
    } else {
      if (set_value(e, &d.value) < 0)
        return SPY_ENOMEM;
      e->has_value = 1;
    }
    e->updated_ms = now ? now : 1;
  }
  if (full) {
    for (uint32_t i = 0; i < t->n;) {
      if (t->e[i].updated_ms == 0)
        remove_at(t, i); /* not in the whole list: gone */
      else
        i++;
    }
  }
  return 0;
}

static int apply_stats(spy_state *s, const spy_section *sec) {
  spy_stats_batch b;
  int rc = spy_get_stats(sec, &b);
  if (rc < 0)
    return rc;
  if (s->samples && b.start_frame > s->last_frame + 1)
    s->samples_lost += b.start_frame - s->last_frame - 1;
  double sum[3] = {0, 0, 0};
  uint32_t gpu_n = 0;
  uint32_t nc = b.n_counters < SPY_STATS_MAX_COUNTERS ? b.n_counters
                                                      : SPY_STATS_MAX_COUNTERS;
  for (uint32_t i = 0; i < b.count; i++) {
    float v[3];
    v[0] = (float)spy_stats_fps_x10(&b, i) / 10.0f;
    v[1] = (float)spy_stats_cpu_x100(&b, i) / 100.0f;
    uint16_t g = spy_stats_gpu_x100(&b, i);
    v[2] = g == SPY_GPU_NONE ? NAN : (float)g / 100.0f;
    float *r = s->rings + s->head;
    for (int f = 0; f < 3; f++)
      r[(size_t)f * s->history] = v[f];
    for (uint32_t c = 0; c < nc; c++)
      r[(size_t)(3 + c) * s->history] = (float)spy_stats_counter(&b, c, i);
    for (uint32_t c = nc; c < SPY_STATS_MAX_COUNTERS; c++)
      r[(size_t)(3 + c) * s->history] = NAN;
    s->head = (s->head + 1) % s->history;
    if (s->len < s->history)
      s->len++;
    sum[0] += v[0];
    sum[1] += v[1];
    if (!isnan(v[2])) {
      sum[2] += v[2];
      gpu_n++;
    }
  }
  if (b.count) {
    s->batch_mean[0] = (float)(sum[0] / b.count);
    s->batch_mean[1] = (float)(sum[1] / b.count);
    s->batch_mean[2] = gpu_n ? (float)(sum[2] / gpu_n) : NAN;
    s->last_frame = b.start_frame + b.count - 1;
    s->samples += b.count;
  }
  return 0;
}

static int apply_schema(spy_state *s, const spy_section *sec) {
  spy_name_iter it;
  int n = spy_get_name_list(sec, &it);
  if (n < 0)
    return n;
  const char *name;
  uint32_t len;
  uint32_t c = 0;
  while (spy_name_next(&it, &name, &len) && c < SPY_STATS_MAX_COUNTERS) {
    memcpy(s->counter_names[c], name, len);
    s->counter_names[c][len] = 0;
    c++;
  }
  s->n_counters = c;
  return 0;
}

const spy_state_msgprof_row *spy_state_msgprof_type(const spy_state *s,
                                                    uint32_t type) {
  for (uint32_t i = 0; i < s->msgprof.n; i++)
    if (s->msgprof.rows[i].type == type)
      return &s->msgprof.rows[i];
  return NULL;
}

static double per_s(uint64_t d, uint64_t ns) {
  return ns ? (double)d * 1e9 / (double)ns : 0;
}

static int apply_msgprof(spy_state *s, const spy_section *sec, uint64_t now) {
  spy_msgprof_summary sum; /* 6 KiB; the consumer thread has the stack */
  int rc = spy_get_msgprof(sec, &sum);
  if (rc < 0)
    return rc;
  spy_state_msgprof *m = &s->msgprof;
  spy_state_msgprof old = *m;
  /* A new profiling session (the provider's profiler was reset) or the
   * first summary: rates since the reset. After one second of the
   * provider's clock: rates over that second, then over each next one. */
  int restart = !old.updated_ms || sum.elapsed_ns < old.base_elapsed_ns;
  uint64_t base_ns = restart ? 0 : old.base_elapsed_ns;
  uint64_t dt = sum.elapsed_ns - base_ns;
  int roll = dt >= 1000000000ull;
  int rolled = !restart && old.rate_rolled;
  m->updated_ms = now ? now : 1;
  m->messages = sum.messages;
  m->errors = sum.errors;
  m->elapsed_ns = sum.elapsed_ns;
  m->flags = sum.flags;
  m->n = sum.n_types < SPY_STATE_MSGPROF_ROWS ? sum.n_types
                                              : SPY_STATE_MSGPROF_ROWS;
  m->rows_dropped = sum.n_types - m->n;
  for (uint32_t i = 0; i < m->n; i++) {
    const spy_msgprof_type *t = &sum.types[i];
    spy_state_msgprof_row *r = &m->rows[i];
    const spy_state_msgprof_row *o = NULL;
    for (uint32_t k = 0; !restart && k < old.n; k++)
      if (old.rows[k].type == t->type)
        o = &old.rows[k];
    /* A type not seen at the base point had count 0 there. */
    uint64_t bc = o ? o->base_count : 0, bb = o ? o->base_bytes : 0;
    r->type = t->type;
    r->count = t->count;
    r->errors = t->errors;
    r->bytes = t->bytes;
    r->encode = t->encode;
    r->post = t->post;
    if (roll || !rolled || !o) {
      r->msgs_per_s = per_s(t->count - bc, dt);
      r->bytes_per_s = per_s(t->bytes - bb, dt);
    } else {
      r->msgs_per_s = o->msgs_per_s;
      r->bytes_per_s = o->bytes_per_s;
    }
    r->base_count = roll ? t->count : bc;
    r->base_bytes = roll ? t->bytes : bb;
  }
  m->base_elapsed_ns = roll ? sum.elapsed_ns : base_ns;
  m->rate_rolled = rolled || roll;
  return 0;
}

int spy_state_apply(spy_state *s, const spy_frame *f, uint64_t now_ms) {
  size_t cur = 0;
  spy_section sec;
  int rc = 0;
  if (f->flags & SPY_FRAME_SNAPSHOT)
    s->snapshots++;
  while (rc == 0 && spy_frame_next_section(f, &cur, &sec)) {
    uint32_t feat = sec.id == SPY_SEC_STATS_SCHEMA ? SPY_FEAT_STATS
                    : sec.id == SPY_SEC_BUILD      ? SPY_FEAT_TRACE
                    : sec.id < 32                  ? SPY_FEAT(sec.id)
                                                   : 0;
    if (sec.id == SPY_SEC_BUFFER_VARIANTS) /* BUFFERS' companion */
      feat = SPY_FEAT_BUFFERS;
    if (s->features && !(s->features & feat))
      continue; /* another subscriber's feature */
    switch (sec.id) {
    case SPY_SEC_STATS: rc = apply_stats(s, &sec); break;
    case SPY_SEC_STATS_SCHEMA: rc = apply_schema(s, &sec); break;
    case SPY_SEC_ENV: rc = apply_delta(&s->env, &sec, now_ms, NULL); break;
    case SPY_SEC_REGISTRY:
      rc = apply_delta(&s->registry, &sec, now_ms,
                       s->registry_filter ? s : NULL);
      break;
    case SPY_SEC_BUFFERS:
      rc = apply_delta(&s->buffers, &sec, now_ms, NULL);
      break;
    case SPY_SEC_BUFFER_VARIANTS:
      rc = apply_delta(&s->buffer_variants, &sec, now_ms, NULL);
      break;
    case SPY_SEC_HEALTH: {
      int n = spy_get_health(&sec, s->health, SPY_HEALTH_FIELD_COUNT);
      rc = n < 0 ? n : 0;
      break;
    }
    case SPY_SEC_MSGPROF: rc = apply_msgprof(s, &sec, now_ms); break;
    case SPY_SEC_ZONES: rc = spy__state_zones_apply(s, &sec); break;
    case SPY_SEC_BATCHES:
    case SPY_SEC_PASSES: rc = spy__state_drawlist_apply(s, &sec); break;
    case SPY_SEC_BUILD: rc = spy__state_build_apply(s, &sec); break;
    default: break; /* sections for other layers */
    }
  }
  return rc;
}
