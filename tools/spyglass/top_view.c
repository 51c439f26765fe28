/* top_view.c — the ncurses screen of `spyglass top`.
 *
 * Everything is drawn from the consumer's state on each refresh (erase,
 * draw, refresh: ncurses sends only the cells that changed). Text goes
 * through put(), which cuts at the right edge by display columns, so a
 * narrow terminal loses the ends of lines and a short one loses the rows
 * below it, never wraps or fails. The sparkline is a 5-row bar chart of
 * the last 60 CPU samples, in eighth blocks (or ASCII), each bar in its
 * sample's threshold colour, scaled to the samples shown
 * (overlay_chart_top), with the 16.7 ms line dashed across the cells no bar
 * reaches while it is on the scale. */
#include "top_view.h"
#include "spyglass/media.h"
#include "top_build.h"
#include "top_zones.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "overlay.h"

#define CHART_ROWS 5
#define LABEL_W 6 /* "FPS   " and the chart's axis labels */

enum { PAIR_GOOD = 1, PAIR_WARN, PAIR_BAD, PAIR_TITLE, PAIR_DIM };

static int colors;

void top_view_init(top_view *v) {
  (void)v;
  colors = has_colors();
  if (!colors)
    return;
  start_color();
  use_default_colors();
  init_pair(PAIR_GOOD, COLOR_GREEN, -1);
  init_pair(PAIR_WARN, COLOR_YELLOW, -1);
  init_pair(PAIR_BAD, COLOR_RED, -1);
  init_pair(PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
  init_pair(PAIR_DIM, COLOR_BLUE, -1);
}

static attr_t level_attr(overlay_level l) {
  if (!colors)
    return l == LEVEL_BAD ? A_BOLD : A_NORMAL;
  switch (l) {
  case LEVEL_GOOD: return COLOR_PAIR(PAIR_GOOD);
  case LEVEL_WARN: return COLOR_PAIR(PAIR_WARN);
  case LEVEL_BAD: return COLOR_PAIR(PAIR_BAD);
  default: return A_DIM;
  }
}

/* Writes s at (y, x) in attr, cut at the right edge (counting UTF-8
 * characters as one column each: every glyph drawn here is narrow).
 * Returns the column after the text. */
static int put(int y, int x, attr_t attr, const char *s) {
  if (y < 0 || y >= LINES || x >= COLS || x < 0)
    return x;
  int cols = COLS - x;
  const char *p = s;
  int n = 0;
  while (*p && n < cols) {
    p++;
    while ((*p & 0xC0) == 0x80)
      p++;
    n++;
  }
  attron(attr);
  mvaddnstr(y, x, s, (int)(p - s));
  attroff(attr);
  return x + n;
}

static int putf(int y, int x, attr_t attr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int putf(int y, int x, attr_t attr, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return put(y, x, attr, buf);
}

/* A reverse-video bar across the whole row. */
static void bar(int y, const char *left, const char *right) {
  attr_t a = colors ? COLOR_PAIR(PAIR_TITLE) : A_REVERSE;
  attron(a);
  mvhline(y, 0, ' ', COLS);
  attroff(a);
  put(y, 0, a, left);
  int rl = (int)strlen(right);
  if (COLS - rl > (int)strlen(left) + 1)
    put(y, COLS - rl, a, right);
}

static void title(const spy_state *s, const top_view *v) {
  char left[512], right[64];
  if (s->provider.id && s->conn != SPY_CONN_SEARCHING) {
    char name[64], up[32];
    snprintf(name, sizeof name, "%.63s", s->provider_name);
    overlay_sanitize(name, v->ascii);
    uint64_t now = tool_wall_ms();
    cli_format_age(up, sizeof up,
                   now > s->provider.start_ms ? now - s->provider.start_ms : 0);
    snprintf(left, sizeof left,
             " spyglass top  %s  pid %u  id %016llx  %s  up %s", name,
             s->provider.pid, (unsigned long long)s->provider.id,
             s->provider.kind == SPY_PROVIDER_SYSTEM ? "system" : "user", up);
  } else {
    snprintf(left, sizeof left, " spyglass top");
  }
  const char *st = s->conn == SPY_CONN_CONNECTED     ? "live"
                   : s->conn == SPY_CONN_SUBSCRIBING ? "connecting"
                   : s->conn == SPY_CONN_LOST        ? "lost"
                                                     : "searching";
  snprintf(right, sizeof right, "%s ", st);
  bar(0, left, right);
}

static void status_line(const spy_state *s, const top_view *v) {
  if (v->status[0] && s->conn != SPY_CONN_CONNECTED) {
    put(1, 1, A_BOLD | level_attr(LEVEL_WARN), v->status);
    return;
  }
  if (overlay_env_flag(s, "paused"))
    put(1, 1, A_BOLD | level_attr(LEVEL_WARN),
        "PAUSED - nothing is drawn; every number holds its last value");
  else if (overlay_env_flag(s, "idle"))
    put(1, 1, A_BOLD,
        "idle - nothing changed, nothing drawn; CPU holds its last value");
}

static void big_number(int y, const char *label, float v, overlay_level l,
                       const char *unit, float mean) {
  int prec = *unit ? 2 : 1; /* ms to 1/100 as sent, FPS to 1/10 */
  put(y, 1, A_BOLD, label);
  if (isnan(v)) {
    put(y, LABEL_W + 1, A_DIM, "n/a");
    return;
  }
  int x = putf(y, LABEL_W + 1, A_BOLD | level_attr(l), "%7.*f", prec, v);
  x = put(y, x, A_NORMAL, unit);
  if (!isnan(mean))
    putf(y, x + 3, A_DIM, "mean %.*f%s over the last batch", prec, mean, unit);
}

/* The cell of one bar on chart row r (0 = bottom): how many eighths are
 * filled. */
static int eighths(float ms, float top, int r) {
  if (isnan(ms) || ms <= 0)
    return 0;
  int h = (int)lroundf(ms / top * (float)(CHART_ROWS * 8));
  if (h < 1)
    h = 1; /* a frame however short is a visible sliver, not nothing */
  int e = h - r * 8;
  return e < 0 ? 0 : e > 8 ? 8 : e;
}

static void sparkline(int y0, const spy_state *s, const top_view *v) {
  static const char *const uni[9] = {" ", "▁", "▂", "▃", "▄",
                                     "▅", "▆", "▇", "█"};
  static const char *const asc[9] = {" ", ".", ".", "_", "o",
                                     "o", "O", "#", "#"};
  const char *const *glyph = v->ascii ? asc : uni;
  float samples[OVERLAY_SPARK_SAMPLES];
  for (uint32_t age = 0; age < OVERLAY_SPARK_SAMPLES; age++)
    samples[age] = spy_state_sample(s, SPY_FIELD_CPU_MS, age);
  int line_shown;
  float top = overlay_chart_top(samples, OVERLAY_SPARK_SAMPLES, &line_shown);
  putf(y0, 1, A_BOLD, "CPU ms, last %d frames", OVERLAY_SPARK_SAMPLES);
  if (line_shown)
    putf(y0, 1 + 22 + 3, A_DIM, "%s %.1f ms line", v->ascii ? "--" : "╌╌",
         OVERLAY_BUDGET_MS);
  else
    putf(y0, 1 + 22 + 3, A_DIM, "(%.1f ms line above the scale)",
         OVERLAY_BUDGET_MS);
  int line_row = -1; /* from 0 */
  if (line_shown) {
    line_row = (int)(OVERLAY_BUDGET_MS / top * CHART_ROWS);
    if (line_row >= CHART_ROWS)
      line_row = CHART_ROWS - 1;
  }
  for (int r = 0; r < CHART_ROWS; r++) {
    int y = y0 + CHART_ROWS - r;
    if (r == CHART_ROWS - 1)
      putf(y, 1, A_DIM, top < 10 ? "%5.2f" : "%5.1f", top);
    else if (r == 0)
      putf(y, 1, A_DIM, "%5s", "0");
    else if (r == line_row)
      putf(y, 1, A_DIM, "%5.1f", OVERLAY_BUDGET_MS);
    for (int i = 0; i < OVERLAY_SPARK_SAMPLES; i++) {
      uint32_t age = (uint32_t)(OVERLAY_SPARK_SAMPLES - 1 - i);
      float ms = spy_state_sample(s, SPY_FIELD_CPU_MS, age);
      int e = eighths(ms, top, r);
      int x = LABEL_W + 1 + i;
      if (e == 0 && r == line_row)
        put(y, x, A_DIM, (i & 1) ? " " : (v->ascii ? "-" : "╌"));
      else if (e > 0)
        put(y, x, level_attr(overlay_ms_level(ms)), glyph[e]);
    }
  }
}

/* Counters with the overlay's labels, app counters by their own name;
 * wraps over as many rows as needed. Returns the next free row. */
static int counters(int y, const spy_state *s) {
  static const struct {
    const char *name, *label;
  } builtin[] = {{"draws", "DRAW"},   {"passes", "PASS"},   {"mips", "MIP"},
                 {"objects", "OBJS"}, {"particles", "PTS"}, {"dirty", "DIRTY"}};
  int x = 1;
  char item[128];
#define ITEM(attr, ...)                                                        \
  do {                                                                         \
    snprintf(item, sizeof item, __VA_ARGS__);                                  \
    if (x > 1 && x + (int)strlen(item) >= COLS) {                              \
      y++;                                                                     \
      x = 1;                                                                   \
    }                                                                          \
    x = put(y, x, attr, item) + 3;                                             \
  } while (0)
  if (!s->n_counters) {
    put(y, 1, A_DIM, "no counters yet");
    return y + 1;
  }
  for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
    float v = overlay_counter(s, builtin[i].name);
    if (isnan(v))
      continue;
    attr_t a = strcmp(builtin[i].name, "passes") == 0
                   ? level_attr(overlay_passes_level(v))
                   : A_NORMAL;
    ITEM(a, "%s %.0f", builtin[i].label, v);
    if (i == 3) { /* SHAPES n[fast].m[fx] after OBJS */
      float f = overlay_counter(s, "fast"), e = overlay_counter(s, "effect");
      if (!isnan(f) || !isnan(e))
        ITEM(A_NORMAL, "SHAPES %.0f[fast].%.0f[fx]", isnan(f) ? 0 : f,
             isnan(e) ? 0 : e);
    }
  }
  for (uint32_t c = 0; c < s->n_counters; c++) {
    int known = strcmp(s->counter_names[c], "fast") == 0 ||
                strcmp(s->counter_names[c], "effect") == 0;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
      known |= strcmp(s->counter_names[c], builtin[i].name) == 0;
    if (known)
      continue; /* shown above with the overlay's label */
    char name[SPY_KEY_MAX + 1];
    snprintf(name, sizeof name, "%s", s->counter_names[c]);
    overlay_sanitize(name, 0);
    float v = spy_state_last(s, SPY_FIELD_COUNTER0 + c);
    if (isnan(v))
      ITEM(A_NORMAL, "%.60s -", name);
    else
      ITEM(A_NORMAL, "%.60s %.0f", name, v);
  }
#undef ITEM
  return y + 1;
}

static void env_line(int y, const spy_state *s) {
  char rss[32], heap[32];
  double r = overlay_env_num(s, "memory.rss_bytes");
  double h = overlay_env_num(s, "memory.heap_bytes");
  int x = put(y, 1, A_BOLD, "MEM ");
  if (isnan(r) && isnan(h))
    x = put(y, x, A_DIM, "n/a");
  if (!isnan(r)) {
    overlay_bytes(rss, sizeof rss, r);
    x = putf(y, x, A_NORMAL, "%s rss  ", rss);
  }
  if (!isnan(h)) {
    overlay_bytes(heap, sizeof heap, h);
    x = putf(y, x, A_NORMAL, "%s heap", heap);
  }
  x = put(y, x + 4, A_BOLD, "RES ");
  double w = overlay_env_num(s, "width"), hh = overlay_env_num(s, "height");
  double pr = overlay_env_num(s, "pixel_ratio");
  if (isnan(w) || isnan(hh))
    x = put(y, x, A_DIM, "n/a");
  else if (isnan(pr))
    x = putf(y, x, A_NORMAL, "%.0fx%.0f", w, hh);
  else
    x = putf(y, x, A_NORMAL, "%.0fx%.0f @%g", w, hh, pr);
  const char *dbg = overlay_env_str(s, "debug_mode");
  if (dbg && *dbg) {
    char d[64];
    snprintf(d, sizeof d, "%s", dbg);
    overlay_sanitize(d, 0);
    x = put(y, x + 4, A_BOLD, "DEBUG ");
    put(y, x, A_BOLD | level_attr(LEVEL_WARN), d);
  }
}

/* The named values from row y0 to y1 (exclusive), scrolled. */
static void values(int y0, int y1, const spy_consumer *c, top_view *v) {
  const spy_state *s = spy_consumer_state(c);
  int n = (int)s->registry.n, rows = y1 - y0 - 1;
  v->value_rows = rows > 0 ? rows : 0;
  if (rows <= 0)
    return;
  if (v->scroll > n - rows)
    v->scroll = n - rows;
  if (v->scroll < 0)
    v->scroll = 0;
  int x = putf(y0, 1, A_BOLD, "VALUES %d", n);
  if (n > rows)
    putf(y0, x + 2, A_DIM, "%d-%d of %d, %s scroll", v->scroll + 1,
         v->scroll + rows, n, v->ascii ? "up/down" : "↑↓");
  if (!n) {
    put(y0 + 1, 3, A_DIM, "no named values");
    return;
  }
  uint32_t *idx = malloc((size_t)n * sizeof *idx);
  if (!idx)
    return;
  overlay_sorted_registry(s, idx);
  int keyw = 12;
  for (int i = 0; i < n; i++) {
    int l = (int)strlen(s->registry.e[idx[i]].name);
    if (l > keyw)
      keyw = l;
  }
  if (keyw > COLS / 2)
    keyw = COLS / 2;
  for (int r = 0; r < rows && v->scroll + r < n; r++) {
    const spy_state_entry *e = &s->registry.e[idx[v->scroll + r]];
    char name[SPY_KEY_MAX + 1], text[256];
    snprintf(name, sizeof name, "%s", e->name);
    overlay_sanitize(name, v->ascii);
    overlay_value_text(&e->value, e->has_value, text, sizeof text);
    overlay_sanitize(text, v->ascii);
    attr_t a = spy_state_is_stale(c, e) ? A_DIM : A_NORMAL;
    putf(y0 + 1 + r, 3, a, "%-*.*s", keyw, keyw, name);
    put(y0 + 1 + r, 3 + keyw + 2, a, text);
  }
  free(idx);
}

static void bus_line(int y, const spy_state *s) {
  char rx[32];
  overlay_bytes(rx, sizeof rx, s->rx_bytes_per_s);
  int x = put(y, 1, A_BOLD, "BUS ");
  uint64_t dropped = s->health[SPY_HEALTH_FLUSHES_DROPPED] +
                     s->health[SPY_HEALTH_SAMPLES_DROPPED];
  uint64_t lost = s->frames_lost + s->health[SPY_HEALTH_FRAMES_LOST];
  x = putf(y, x, A_NORMAL, "%.1f frames/s  %s/s", s->rx_frames_per_s, rx);
  x = put(y, x + 3, A_NORMAL, "lost ");
  x = putf(y, x, lost ? level_attr(LEVEL_WARN) : A_NORMAL, "%llu",
           (unsigned long long)lost);
  x = put(y, x + 3, A_NORMAL, "dropped ");
  x = putf(y, x, dropped ? level_attr(LEVEL_WARN) : A_NORMAL, "%llu",
           (unsigned long long)dropped);
  putf(y, x + 3, A_NORMAL, "subscribers %llu   samples %llu",
       (unsigned long long)s->health[SPY_HEALTH_SUBSCRIBERS],
       (unsigned long long)s->samples);
}

static void adapter_line(int y, const spy_state *s, const top_view *v) {
  const char *a = overlay_env_str(s, "adapter");
  int x = put(y, 1, A_BOLD, "GPU ");
  if (!a || !*a) {
    put(y, x, A_DIM, "(adapter not reported)");
    return;
  }
  char text[256];
  snprintf(text, sizeof text, "%s", a);
  overlay_sanitize(text, v->ascii);
  put(y, x, A_NORMAL, text);
}

/* The provider's named buffers (buffers.h), one line each: size, type,
 * what is served and the capture rate (from the captured count over the
 * last second or more). Returns the next free row. */
static int buffers_block(int y, const spy_state *s, const top_view *v) {
  static struct {
    char name[64];
    uint64_t captured, at_ms;
    double rate;
  } seen[32];
  if (!s->buffers.n)
    return y;
  put(y++, 1, A_BOLD, "BUFFERS");
  uint64_t now = tool_wall_ms();
  for (uint32_t i = 0; i < s->buffers.n && i < 32; i++) {
    const spy_state_entry *e = &s->buffers.e[i];
    spy_buffer_meta m;
    if (!e->has_value || spy_buffer_meta_decode(&e->value, &m) < 0)
      continue;
    char name[64];
    snprintf(name, sizeof name, "%.63s", e->name);
    if (strcmp(seen[i].name, name) != 0) {
      snprintf(seen[i].name, sizeof seen[i].name, "%s", name);
      seen[i].captured = m.captured;
      seen[i].at_ms = now;
      seen[i].rate = 0;
    } else if (now - seen[i].at_ms >= 1000) {
      seen[i].rate = (double)(m.captured - seen[i].captured) * 1000.0 /
                     (double)(now - seen[i].at_ms);
      seen[i].captured = m.captured;
      seen[i].at_ms = now;
    }
    overlay_sanitize(name, v->ascii);
    const char *type = spy_pixel_type_name(m.pixel_type);
    const char *mode = !m.mode                       ? "metadata only"
                       : m.mode == SPY_BUFFER_STREAM ? "stream"
                                                     : "thumbnail";
    int x = putf(y, 3, A_NORMAL, "%-16.16s %5ux%-5u %-8s", name, m.width,
                 m.height, type ? type : "?");
    /* every variant served when the provider lists them, else the one */
    spy_buffer_variant vs[SPY_BUFFER_VARIANT_LIST_MAX];
    const spy_state_entry *ve = spy_state_find(&s->buffer_variants, e->name);
    int nv = ve && ve->has_value
                 ? spy_buffer_variants_decode(&ve->value, vs,
                                              SPY_BUFFER_VARIANT_LIST_MAX)
                 : -1;
    if (nv > 1) {
      for (int k = 0; k < nv; k++)
        x = putf(y, x + 1, A_NORMAL, "%s %ux%u %s%s",
                 vs[k].mode == SPY_BUFFER_STREAM ? "stream" : "thumbnail",
                 vs[k].served_width, vs[k].served_height,
                 vs[k].codec == SPY_CODEC_VP9 ? "vp9" : "raw",
                 k + 1 < nv ? "," : "");
      x = putf(y, x + 1, A_NORMAL, "%.1f/s", seen[i].rate);
    } else if (m.mode)
      x = putf(y, x + 1, A_NORMAL, "%s %ux%u %s %.1f/s", mode, m.served_width,
               m.served_height, m.codec == SPY_CODEC_VP9 ? "vp9" : "raw",
               seen[i].rate);
    else
      x = put(y, x + 1, A_DIM, mode);
    if (m.dropped)
      putf(y, x + 2, level_attr(LEVEL_WARN), "dropped %llu",
           (unsigned long long)m.dropped);
    y++;
  }
  return y;
}

/* The batch list grouped by kind (instances, draws) and the pass tree
 * (indented, with a totals row), as far as rows allow. Returns the next
 * free row. */
static int drawlist_block(int y, int y_end, const spy_state *s) {
  if (s->n_batches && y < y_end) {
    int x = put(y, 1, A_BOLD, "BATCHES ");
    char kinds[8][64];
    uint64_t inst[8] = {0}, draws[8] = {0};
    int nk = 0;
    for (uint32_t i = 0; i < s->n_batches; i++) {
      int k;
      for (k = 0; k < nk && strcmp(kinds[k], s->batches[i].kind) != 0; k++)
        ;
      if (k == nk && nk < 8)
        snprintf(kinds[nk++], sizeof kinds[0], "%s", s->batches[i].kind);
      if (k < 8) {
        inst[k] += s->batches[i].instances;
        draws[k] += s->batches[i].draws;
      }
    }
    for (int k = 0; k < nk; k++) {
      overlay_sanitize(kinds[k], 1);
      x = putf(y, x + 1, A_NORMAL, "%.16s %llu in %llu draws", kinds[k],
               (unsigned long long)inst[k], (unsigned long long)draws[k]);
    }
    y++;
  }
  if (s->n_passes && y < y_end) {
    uint64_t draws = 0, tris = 0;
    double ms = 0;
    for (uint32_t i = 0; i < s->n_passes; i++)
      if (s->passes[i].parent == SPY_PASS_ROOT) {
        draws += s->passes[i].draws;
        tris += s->passes[i].triangles;
        ms += s->passes[i].cpu_ms;
      }
    putf(y++, 1, A_BOLD, "PASSES %u   total %llu draws %llu tris %.2f ms",
         s->n_passes, (unsigned long long)draws, (unsigned long long)tris, ms);
    for (uint32_t i = 0; i < s->n_passes && y < y_end; i++) {
      int depth = 0;
      for (uint32_t q = s->passes[i].parent; q != SPY_PASS_ROOT && depth < 8;
           q = s->passes[q].parent)
        depth++;
      char label[64];
      snprintf(label, sizeof label, "%s", s->passes[i].label);
      overlay_sanitize(label, 1);
      putf(y++, 3 + 2 * depth, A_NORMAL, "%-20.20s %6u draws %8u tris %7.2f ms",
           label, s->passes[i].draws, s->passes[i].triangles,
           s->passes[i].cpu_ms);
    }
  }
  return y;
}

void top_view_draw(top_view *v, const spy_consumer *c) {
  const spy_state *s = spy_consumer_state(c);
  erase();
  title(s, v);
  status_line(s, v);
  big_number(3, "FPS", spy_state_last(s, SPY_FIELD_FPS),
             overlay_fps_level(spy_state_last(s, SPY_FIELD_FPS)), "",
             s->samples ? s->batch_mean[0] : NAN);
  float cpu = spy_state_last(s, SPY_FIELD_CPU_MS);
  float gpu = spy_state_last(s, SPY_FIELD_GPU_MS);
  big_number(4, "CPU", cpu, overlay_ms_level(cpu), " ms",
             s->samples ? s->batch_mean[1] : NAN);
  big_number(5, "GPU", gpu, overlay_ms_level(gpu), " ms",
             s->samples ? s->batch_mean[2] : NAN);
  sparkline(7, s, v);
  int y = counters(7 + CHART_ROWS + 2, s);
  env_line(y, s);
  y = buffers_block(y + 1, s, v) - 1;
  int footer = LINES - 3;
  if (!v->zones)
    y = drawlist_block(y + 1, footer - 4, s) - 1;
  if (v->zones)
    top_zones_draw(y + 2, footer, s);
  else if (top_build_seen(s)) /* a traced build publishes: its progress */
    top_build_draw(y + 2, footer, s);
  else
    values(y + 2, footer, c, v);
  bus_line(footer, s);
  adapter_line(footer + 1, s, v);
  bar(LINES - 1,
      v->ascii ? " q quit   p pick provider   z zones   up/down scroll"
               : " q quit   p pick provider   z zones   ↑↓ PgUp PgDn scroll",
      "");
}

void top_view_draw_picker(const top_view *v) {
  erase();
  bar(0, " spyglass top  pick a provider", "");
  if (!v->n_list) {
    put(2, 2, A_BOLD, "no providers found on this host");
  }
  uint64_t now = tool_wall_ms();
  for (int i = 0; i < v->n_list; i++) {
    const found_provider *p = &v->list[i];
    char name[64], up[32];
    snprintf(name, sizeof name, "%.63s", p->name);
    overlay_sanitize(name, v->ascii);
    cli_format_age(up, sizeof up,
                   now > p->info.start_ms ? now - p->info.start_ms : 0);
    putf(2 + i, 2, i == v->sel ? A_REVERSE : A_NORMAL,
         "%c %016llx  %-24s  pid %-8u  %-6s  up %-8s  %u subscribers",
         i == v->sel ? '>' : ' ', (unsigned long long)p->info.id, name,
         p->info.pid, p->info.kind == SPY_PROVIDER_SYSTEM ? "system" : "user",
         up, p->info.subscribers);
  }
  bar(LINES - 1,
      v->ascii ? " up/down choose   Enter connect   Esc back"
               : " ↑↓ choose   Enter connect   Esc back",
      "");
}
