/* top_zones.c — the zones view of `spyglass top`: see top_zones.h. */
#include "top_zones.h"

#include <curses.h>
#include <stdlib.h>
#include <string.h>

#include "overlay.h"

static int by_total(const void *a, const void *b) {
  const top_zone_row *x = a, *y = b;
  if (x->sums.total_ns != y->sums.total_ns)
    return x->sums.total_ns < y->sums.total_ns ? 1 : -1;
  return x->loc->id < y->loc->id ? -1 : x->loc->id > y->loc->id;
}

int top_zones_rows(const spy_state *s, top_zone_row *out, int max) {
  const spy_zone_state *z = &s->zones;
  int n = 0, total = 0;
  top_zone_row *all = calloc(z->n_locs ? z->n_locs : 1, sizeof *all);
  if (!all)
    return 0;
  for (uint32_t i = 0; i < z->n_locs; i++) {
    const spy_zone_location *l = z->locs[i];
    if (!l)
      continue;
    spy_zone_sums sm = spy_state_zone_last_second(s, l);
    if (!sm.calls)
      continue;
    all[n].loc = l;
    all[n].sums = sm;
    n++;
  }
  qsort(all, (size_t)n, sizeof *all, by_total);
  total = n;
  if (n > max)
    n = max;
  memcpy(out, all, (size_t)n * sizeof *out);
  free(all);
  return total;
}

static void line(int y, attr_t a, const char *text) {
  if (y < 0 || y >= LINES)
    return;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", text);
  overlay_sanitize(buf, 1);
  if ((int)strlen(buf) > COLS)
    buf[COLS > 0 ? COLS : 0] = 0;
  attron(a);
  mvaddstr(y, 0, buf);
  attroff(a);
}

void top_zones_draw(int y0, int y1, const spy_state *s) {
  char b[512];
  const spy_zone_state *z = &s->zones;
  if (y0 >= y1)
    return;
  snprintf(b, sizeof b,
           " zones, last second of the provider's clock   %llu spans, %llu "
           "dropped",
           (unsigned long long)z->spans, (unsigned long long)z->dropped);
  line(y0++, A_BOLD, b);
  if (!z->events) {
    line(y0, A_DIM, " (no zones yet: instrument with SPY_ZONE, zones.h)");
    return;
  }
  snprintf(b, sizeof b, " %-28s %8s %10s %10s %10s", "location", "calls",
           "total ms", "self ms", "max ms");
  line(y0++, A_UNDERLINE, b);
  int room = y1 - y0 - 1;
  if (room < 1)
    return;
  top_zone_row rows[256];
  int max = room < 256 ? room : 256;
  int total = top_zones_rows(s, rows, max);
  if (!total && z->latest_ns / 1000000000ull < z->sums_from + 1)
    line(y0, A_DIM, " (summing the first whole second since the view opened)");
  for (int i = 0; i < total && i < max; i++) {
    const spy_zone_location *l = rows[i].loc;
    snprintf(b, sizeof b, " %-28.28s %8llu %10.3f %10.3f %10.3f",
             l->name ? l->name : "?", (unsigned long long)rows[i].sums.calls,
             (double)rows[i].sums.total_ns / 1e6,
             (double)rows[i].sums.self_ns / 1e6,
             (double)rows[i].sums.max_ns / 1e6);
    line(y0++, A_NORMAL, b);
  }
  size_t off = 0;
  off += (size_t)snprintf(b, sizeof b, " threads:");
  for (uint32_t i = 0; i < z->n_threads && off < sizeof b - 40; i++) {
    const spy_zone_thread *t = &z->threads[i];
    off += (size_t)snprintf(b + off, sizeof b - off, " %s%s(%u)",
                            t->name[0] ? t->name : "thread",
                            t->gone ? "[gone]" : "", t->os_tid);
  }
  line(y1 - 1, A_DIM, b);
}
