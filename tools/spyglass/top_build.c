/* top_build.c — the build view of `spyglass top`: see top_build.h. */
#include "top_build.h"

#include <curses.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "overlay.h"

int top_build_seen(const spy_state *s) { return s->builds.sections > 0; }

static uint64_t plugin_calls(const spy_build_plugin *p) {
  uint64_t n = 0;
  for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++)
    n += p->calls[h];
  return n;
}
static uint64_t plugin_us(const spy_build_plugin *p) {
  uint64_t n = 0;
  for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++)
    n += p->total_us[h];
  return n;
}

void top_build_line(const spy_state *s, char *out, size_t cap) {
  const spy_build_progress *b = &s->builds.cur;
  char total[32] = "", since[64] = "";
  if (b->modules_total)
    snprintf(total, sizeof total, "/%u", b->modules_total);
  if (b->flags & SPY_BUILD_PARTIAL) {
    /* Nobody watched its start: the counts are from started_us on. */
    time_t t = (time_t)(b->started_us / 1000000u);
    struct tm tm;
    localtime_r(&t, &tm);
    snprintf(since, sizeof since,
             " (joined late: counted since %02d:%02d:%02d)", tm.tm_hour,
             tm.tm_min, tm.tm_sec);
  }
  snprintf(out, cap,
           "build %u %s: %u%s modules, %llu hook calls, %.1f ms in hooks%s",
           b->build, (b->flags & SPY_BUILD_ENDED) ? "done" : "running",
           b->modules_done, total, (unsigned long long)b->hook_calls,
           (double)b->hook_us / 1000.0, since);
}

void top_build_draw(int y0, int y1, const spy_state *s) {
  const spy_build_progress *b = &s->builds.cur;
  char line[256];
  int y = y0;
  top_build_line(s, line, sizeof line);
  overlay_sanitize(line, 0);
  if (y < y1)
    mvaddnstr(y++, 2, line, COLS > 4 ? COLS - 4 : 0);
  if (y < y1)
    mvprintw(y++, 2, "%-32s %10s %12s %10s", "plugin", "calls", "time ms",
             "max ms");
  for (uint32_t i = 0; i < b->n_plugins && y < y1; i++) {
    char name[SPY_BUILD_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s", b->plugins[i].name);
    overlay_sanitize(name, 0);
    mvprintw(y++, 2, "%-32.32s %10llu %12.1f %10.1f", name,
             (unsigned long long)plugin_calls(&b->plugins[i]),
             (double)plugin_us(&b->plugins[i]) / 1000.0,
             (double)b->plugins[i].max_us / 1000.0);
  }
  if (b->n_slow && y + 1 < y1) {
    y++;
    mvprintw(y++, 2, "slowest hooks");
  }
  for (uint32_t i = 0; i < b->n_slow && y < y1; i++) {
    const spy_build_slow *sl = &b->slow[i];
    char mod[80];
    snprintf(mod, sizeof mod, "%s", sl->module);
    overlay_sanitize(mod, 0);
    mvprintw(y++, 2, "%10.1f ms  %-12s %-24.24s %s",
             (double)sl->dur_us / 1000.0, spy_build_hook_name(sl->hook),
             b->plugins[sl->plugin].name, mod);
  }
  const spy_build_state *h = &s->builds;
  if (h->n_done && y + 1 < y1) {
    y++;
    mvprintw(y++, 2, "builds done:");
  }
  for (uint32_t i = h->n_done > 4 ? h->n_done - 4 : 0; i < h->n_done && y < y1;
       i++)
    mvprintw(y++, 4, "build %u: %u modules, %llu hook calls, %.1f ms",
             h->done[i].build, h->done[i].modules,
             (unsigned long long)h->done[i].hook_calls,
             h->done[i].ended_us > h->done[i].started_us
                 ? (double)(h->done[i].ended_us - h->done[i].started_us) /
                       1000.0
                 : 0.0);
}

static void ufield(json_out *j, const char *k, uint64_t v) {
  jw_key(j, k);
  jw_uint(j, v);
}

void top_build_json(json_out *j, const spy_state *s) {
  jw_key(j, "build");
  if (!top_build_seen(s)) {
    jw_null(j);
    return;
  }
  const spy_build_progress *b = &s->builds.cur;
  jw_obj_begin(j);
  ufield(j, "build", b->build);
  jw_key(j, "ended");
  jw_bool(j, (b->flags & SPY_BUILD_ENDED) != 0);
  /* true: a watch began after the build did; counts from started_us on */
  jw_key(j, "partial");
  jw_bool(j, (b->flags & SPY_BUILD_PARTIAL) != 0);
  ufield(j, "started_us", b->started_us);
  ufield(j, "ended_us", b->ended_us);
  ufield(j, "modules_done", b->modules_done);
  ufield(j, "modules_total", b->modules_total);
  ufield(j, "hook_calls", b->hook_calls);
  ufield(j, "hook_us", b->hook_us);
  ufield(j, "actions", b->actions);
  ufield(j, "sections", s->builds.sections);
  jw_key(j, "plugins");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < b->n_plugins; i++) {
    const spy_build_plugin *p = &b->plugins[i];
    jw_obj_begin(j);
    jw_key(j, "name");
    jw_str(j, p->name);
    ufield(j, "calls", plugin_calls(p));
    ufield(j, "total_us", plugin_us(p));
    ufield(j, "max_us", p->max_us);
    ufield(j, "p50_us", p->p50_us);
    jw_key(j, "hooks");
    jw_obj_begin(j);
    for (uint32_t h = 0; h < SPY_BUILD_HOOKS; h++) {
      if (!p->calls[h])
        continue;
      jw_key(j, spy_build_hook_name(h));
      jw_obj_begin(j);
      ufield(j, "calls", p->calls[h]);
      ufield(j, "total_us", p->total_us[h]);
      jw_obj_end(j);
    }
    jw_obj_end(j);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  jw_key(j, "slowest");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < b->n_slow; i++) {
    const spy_build_slow *sl = &b->slow[i];
    jw_obj_begin(j);
    jw_key(j, "hook");
    jw_str(j, spy_build_hook_name(sl->hook));
    jw_key(j, "plugin");
    jw_str(j, b->plugins[sl->plugin].name);
    jw_key(j, "module");
    jw_str(j, sl->module);
    ufield(j, "dur_us", sl->dur_us);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  jw_key(j, "done");
  jw_arr_begin(j);
  for (uint32_t i = 0; i < s->builds.n_done; i++) {
    const spy_build_done *d = &s->builds.done[i];
    jw_obj_begin(j);
    ufield(j, "build", d->build);
    ufield(j, "modules", d->modules);
    ufield(j, "hook_calls", d->hook_calls);
    ufield(j, "hook_us", d->hook_us);
    ufield(j, "started_us", d->started_us);
    ufield(j, "ended_us", d->ended_us);
    jw_obj_end(j);
  }
  jw_arr_end(j);
  jw_obj_end(j);
}
