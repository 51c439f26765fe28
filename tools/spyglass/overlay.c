/* overlay.c — the overlay's semantics (thresholds, labels, formatting),
 * kept apart from drawing so the screen, the line output and the tests
 * read the same rules. */
#include "overlay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

overlay_level overlay_fps_level(float fps) {
  if (isnan(fps))
    return LEVEL_NONE;
  return fps >= 55 ? LEVEL_GOOD : fps >= 30 ? LEVEL_WARN : LEVEL_BAD;
}

overlay_level overlay_ms_level(float ms) {
  if (isnan(ms))
    return LEVEL_NONE;
  return ms < 8 ? LEVEL_GOOD : ms < 16 ? LEVEL_WARN : LEVEL_BAD;
}

overlay_level overlay_passes_level(float passes) {
  if (isnan(passes))
    return LEVEL_NONE;
  return passes > 7 ? LEVEL_BAD : passes > 2 ? LEVEL_WARN : LEVEL_GOOD;
}

float overlay_chart_top(const float *ms, size_t n, int *line_shown) {
  float max = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(ms[i]) && ms[i] > max)
      max = ms[i];
  float top = max * 1.25f;
  if (top < 0.01f)
    top = 0.01f; /* nothing yet, or all zero: any small scale */
  *line_shown = max >= OVERLAY_BUDGET_MS / 10;
  if (*line_shown && top < OVERLAY_BUDGET_MS * 1.5f)
    top = OVERLAY_BUDGET_MS * 1.5f; /* 25 ms: the line below the top row */
  return top;
}

void overlay_sanitize(char *s, int ascii_only) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80))
      *s = '?';
  }
}

void overlay_value_text(const spy_value *v, int has_value, char *buf,
                        size_t cap) {
  if (!cap)
    return;
  buf[0] = 0;
  if (!has_value) {
    snprintf(buf, cap, "-");
    return;
  }
  switch (v->kind) {
  case SPY_VAL_FLOAT: snprintf(buf, cap, "%.6g", v->v.f[0]); break;
  case SPY_VAL_UINT:
    snprintf(buf, cap, "%llu", (unsigned long long)v->v.u);
    break;
  case SPY_VAL_INT: snprintf(buf, cap, "%lld", (long long)v->v.i); break;
  case SPY_VAL_BITS:
    snprintf(buf, cap, "0x%llx", (unsigned long long)v->v.u);
    break;
  case SPY_VAL_BOOL: snprintf(buf, cap, "%s", v->v.b ? "true" : "false"); break;
  case SPY_VAL_FLOAT2:
  case SPY_VAL_FLOAT3:
  case SPY_VAL_FLOAT4: {
    int n = 2 + (v->kind - SPY_VAL_FLOAT2);
    size_t off = 0;
    for (int i = 0; i < n && off < cap; i++) {
      int w =
          snprintf(buf + off, cap - off, "%s%.4g", i ? ", " : "(", v->v.f[i]);
      off += w > 0 ? (size_t)w : 0;
    }
    if (off < cap)
      snprintf(buf + off, cap - off, ")");
    break;
  }
  case SPY_VAL_STRING:
    snprintf(buf, cap, "%.*s", (int)v->v.s.len, v->v.s.ptr ? v->v.s.ptr : "");
    break;
  case SPY_VAL_BLOB: snprintf(buf, cap, "<%u bytes>", v->v.s.len); break;
  default: snprintf(buf, cap, "-"); break;
  }
  overlay_sanitize(buf, 0);
}

static const spy_state_entry *env(const spy_state *s, const char *key) {
  const spy_state_entry *e = spy_state_find(&s->env, key);
  return e && e->has_value ? e : NULL;
}

const char *overlay_env_str(const spy_state *s, const char *key) {
  const spy_state_entry *e = env(s, key);
  return e && e->value.kind == SPY_VAL_STRING && e->value.v.s.ptr
             ? e->value.v.s.ptr
             : NULL;
}

int overlay_env_flag(const spy_state *s, const char *key) {
  const spy_state_entry *e = env(s, key);
  if (!e)
    return 0;
  if (e->value.kind == SPY_VAL_BOOL)
    return e->value.v.b != 0;
  if (e->value.kind == SPY_VAL_STRING)
    return e->value.v.s.len && strcmp(e->value.v.s.ptr, "0") != 0 &&
           strcmp(e->value.v.s.ptr, "false") != 0;
  return e->value.v.u != 0;
}

double overlay_env_num(const spy_state *s, const char *key) {
  const spy_state_entry *e = env(s, key);
  if (!e)
    return NAN;
  switch (e->value.kind) {
  case SPY_VAL_FLOAT: return e->value.v.f[0];
  case SPY_VAL_UINT: return (double)e->value.v.u;
  case SPY_VAL_INT: return (double)e->value.v.i;
  case SPY_VAL_STRING:
    return e->value.v.s.ptr ? strtod(e->value.v.s.ptr, NULL) : NAN;
  default: return NAN;
  }
}

void overlay_bytes(char *buf, size_t cap, double bytes) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    u++;
  }
  snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

float overlay_counter(const spy_state *s, const char *name) {
  int c = spy_state_counter(s, name);
  return c < 0 ? NAN : spy_state_last(s, SPY_FIELD_COUNTER0 + (uint32_t)c);
}

void overlay_summary_line(const spy_state *s, char *buf, size_t cap) {
  float fps = spy_state_last(s, SPY_FIELD_FPS);
  float cpu = spy_state_last(s, SPY_FIELD_CPU_MS);
  float gpu = spy_state_last(s, SPY_FIELD_GPU_MS);
  char gtxt[32], rx[32];
  if (isnan(gpu))
    snprintf(gtxt, sizeof gtxt, "n/a");
  else
    snprintf(gtxt, sizeof gtxt, "%.2f ms", gpu);
  overlay_bytes(rx, sizeof rx, s->rx_bytes_per_s);
  char name[64];
  snprintf(name, sizeof name, "%.63s", s->provider_name);
  overlay_sanitize(name, 0);
  snprintf(buf, cap,
           "%s pid %u  fps %.1f  cpu %.2f ms  gpu %s  samples %llu  "
           "rx %.1f frames/s %s/s%s%s",
           name, s->provider.pid, fps, cpu, gtxt,
           (unsigned long long)s->samples, s->rx_frames_per_s, rx,
           overlay_env_flag(s, "paused") ? "  PAUSED" : "",
           overlay_env_flag(s, "idle") ? "  idle" : "");
}

static const spy_state *sort_state;
static int by_name(const void *a, const void *b) {
  const uint32_t *x = a, *y = b;
  return strcmp(sort_state->registry.e[*x].name,
                sort_state->registry.e[*y].name);
}

void overlay_sorted_registry(const spy_state *s, uint32_t *idx) {
  for (uint32_t i = 0; i < s->registry.n; i++)
    idx[i] = i;
  sort_state = s;
  qsort(idx, s->registry.n, sizeof *idx, by_name);
}
