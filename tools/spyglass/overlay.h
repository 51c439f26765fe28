/* overlay.h — what the stats overlay shows, apart from how it is drawn:
 * the colour thresholds, the counter labels, value formatting and the
 * environment fields the overlay reads (paused, idle, memory, resolution,
 * adapter). Shared by the ncurses screen, the line output and JSON. */
#ifndef SPY_TOOL_OVERLAY_H
#define SPY_TOOL_OVERLAY_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/consumer.h"

/* The reference's colour thresholds. */
typedef enum overlay_level {
  LEVEL_NONE = 0, /* no value (n/a) */
  LEVEL_GOOD = 1, /* green */
  LEVEL_WARN = 2, /* yellow */
  LEVEL_BAD = 3   /* red */
} overlay_level;

#define OVERLAY_BUDGET_MS 16.7f /* the sparkline's reference line */
#define OVERLAY_SPARK_SAMPLES 60

/* The CPU chart's scale for samples ms[0..n) (NAN = none): the top of the
 * chart follows the largest sample shown (25 % headroom), so sub-millisecond
 * frames are bars, not a flat line. The 16.7 ms line is kept (the scale
 * lifted to show it) while the largest sample is at least a tenth of it;
 * below that the bars would be slivers, and *line_shown is 0. */
float overlay_chart_top(const float *ms, size_t n, int *line_shown);

/* FPS: green from 55, yellow from 30, red below. */
overlay_level overlay_fps_level(float fps);
/* CPU / GPU ms: green under 8, yellow under 16, red from 16. */
overlay_level overlay_ms_level(float ms);
/* Render passes: yellow above 2, red above 7. */
overlay_level overlay_passes_level(float passes);

/* A value as text ("3.25", "(1, 2, 3)", "true", the string itself with
 * control characters replaced); "-" without a value. */
void overlay_value_text(const spy_value *v, int has_value, char *buf,
                        size_t cap);
/* Replaces control bytes (and, if ascii_only, every byte >= 0x80) with
 * '?', in place. */
void overlay_sanitize(char *s, int ascii_only);

/* Environment fields; NULL / 0 / NAN when absent. */
const char *overlay_env_str(const spy_state *s, const char *key);
int overlay_env_flag(const spy_state *s, const char *key);
/* A number from a uint/int/float entry; NAN when absent. */
double overlay_env_num(const spy_state *s, const char *key);

/* Bytes as "12.3 MiB". */
void overlay_bytes(char *buf, size_t cap, double bytes);

/* The last value of counter `name`, NAN if the provider has none. */
float overlay_counter(const spy_state *s, const char *name);

/* One summary line: name, fps, cpu, gpu, draws, rx, state. */
void overlay_summary_line(const spy_state *s, char *buf, size_t cap);

/* Registry indices sorted by name (the table itself reorders on removal).
 * idx must hold s->registry.n entries. */
void overlay_sorted_registry(const spy_state *s, uint32_t *idx);

#endif
