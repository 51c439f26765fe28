/* diff_hooks.c — `spyglass diff`'s figures for build traces: per plugin,
 * its median hook call (µs) in each recording (the build_hook table,
 * rec_trace.h: the provider's per-build median of the plugin's calls;
 * over several builds, the median of those), base against new.
 *
 * Noise. The median, not the mean: a few calls stalled by a loaded
 * machine move a mean of a few dozen calls a long way and a median not
 * at all. The spread of a plugin's figure is the larger of the
 * interquartile range of its per-build medians (three builds or more in
 * a run, e.g. watch mode) and the median's own resolution (the
 * provider's histogram has 8 buckets per octave: one bucket is 12.5 %).
 * A machine that is uniformly slower in one run moves every plugin: with
 * three plugins or more in common, each plugin's ratio is divided by the
 * median ratio of all of them before it is judged. A plugin regresses
 * when, so adjusted, it is slower by more than the threshold AND by more
 * than its spread and HOOK_FLOOR; plugins with fewer than 20 calls in
 * either run are shown, not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/diff_hooks.h"
#include "record/rec.h"

#define HOOK_FLOOR 2.0 /* us: the wire's clock is µs */
#define MAX_PLUGINS 256

typedef struct pfig {
  char name[64];
  double calls;
  double per_build[64]; /* the median call of each build (first 64) */
  int nb;
  double value, spread;
} pfig;

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double quant(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmpd);
  double pos = q * (n - 1);
  int i = (int)pos;
  double f = pos - i;
  return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

/* Loads the plugins of one recording; returns how many (0 when the
 * recording has no build traces). */
/* The builds judged: those that ended (build.ended 0: the recording
 * stopped while it ran, its totals are not final) and that the recorder
 * saw from their start (build.partial 1: counts since it joined). A
 * recording made before those columns existed: the query without them. */
#define HOOK_ROWS                                                              \
  "SELECT plugin, build, SUM(calls), MAX(plugin_p50_us) FROM build_hook h "    \
  "WHERE recording_id = ?1 "
#define HOOK_GROUP " GROUP BY plugin, upid, build ORDER BY plugin, upid, build"
#define HOOK_SKIP                                                              \
  "AND NOT EXISTS (SELECT 1 FROM build b WHERE b.recording_id = "              \
  "h.recording_id AND b.upid = h.upid AND b.build = h.build AND "
static const char *const hook_sql[3] = {
    HOOK_ROWS HOOK_SKIP "(b.ended = 0 OR b.partial = 1))" HOOK_GROUP,
    HOOK_ROWS HOOK_SKIP "b.ended = 0)" HOOK_GROUP, HOOK_ROWS HOOK_GROUP};

static int load(rec_rd *rd, pfig *p) {
  rec_q q;
  /* which of build.partial and build.ended exist? (an older recording:
   * the probe fails) */
  static const char *const probe[2] = {
      "SELECT ended, partial FROM build WHERE recording_id = ?1 AND 1 = 0",
      "SELECT ended FROM build WHERE recording_id = ?1 AND 1 = 0"};
  int old = 0;
  for (; old < 2; old++) {
    spy__rq_prep(&q, rd, probe[old]);
    spy__rq_bind(&q, 1, rd->rec_id);
    while (spy__rq_step(&q))
      ;
    if (!q.failed)
      break;
  }
  spy__rq_prep(&q, rd, hook_sql[old]);
  spy__rq_bind(&q, 1, rd->rec_id);
  int n = 0;
  while (spy__rq_step(&q)) { /* no rows (or no table: a recording made
                                before build traces) = no plugins */
    const char *name = spy__rq_text(&q, 0);
    if (!name)
      name = "?";
    if (!n || strncmp(p[n - 1].name, name, sizeof p->name - 1) != 0) {
      if (n == MAX_PLUGINS)
        break;
      memset(&p[n], 0, sizeof p[n]);
      snprintf(p[n].name, sizeof p[n].name, "%s", name);
      n++;
    }
    pfig *f = &p[n - 1];
    double calls = spy__rq_dbl(&q, 2);
    f->calls += calls;
    if (calls > 0 && f->nb < 64)
      f->per_build[f->nb++] = spy__rq_dbl(&q, 3);
  }
  for (int i = 0; i < n; i++) {
    pfig *f = &p[i];
    double v[64];
    memcpy(v, f->per_build, (size_t)f->nb * sizeof *v);
    f->value = f->nb ? quant(v, f->nb, 0.5) : NAN;
    f->spread = f->nb ? 0.125 * f->value : 0; /* one histogram bucket */
    if (f->nb >= 3) {
      double iqr = quant(v, f->nb, 0.75) - quant(v, f->nb, 0.25);
      if (iqr > f->spread)
        f->spread = iqr;
    }
  }
  return n;
}

int spy__diff_hooks(rec_rd *base, rec_rd *cand, double thr, int json,
                    int *first, FILE *out) {
  pfig *a = calloc(MAX_PLUGINS, sizeof *a), *b = calloc(MAX_PLUGINS, sizeof *b);
  double *ratios = calloc(MAX_PLUGINS, sizeof *ratios);
  int *pair = calloc(MAX_PLUGINS, sizeof *pair);
  int regressions = 0;
  if (!a || !b || !ratios || !pair)
    goto done;
  int na = load(base, a), nb = load(cand, b), nr = 0;
  for (int i = 0; i < na; i++) {
    pair[i] = -1;
    for (int j = 0; j < nb; j++)
      if (strcmp(a[i].name, b[j].name) == 0)
        pair[i] = j;
    if (pair[i] >= 0 && a[i].value > 0 && isfinite(b[pair[i]].value))
      ratios[nr++] = b[pair[i]].value / a[i].value;
  }
  /* the run-wide factor: a machine slower (or faster) for everything */
  double machine = nr >= 3 ? quant(ratios, nr, 0.5) : 1.0;
  if (!(machine > 0) || !isfinite(machine))
    machine = 1.0;
  for (int i = 0; i < na; i++) {
    if (pair[i] < 0)
      continue;
    const pfig *x = &a[i], *y = &b[pair[i]];
    double delta = y->value - x->value;
    double adj = x->value > 0 ? (y->value / machine - x->value) / x->value : 0;
    double noise = x->spread > y->spread ? x->spread : y->spread;
    if (noise < HOOK_FLOOR)
      noise = HOOK_FLOOR;
    int watched = x->calls >= 20 && y->calls >= 20 && isfinite(delta);
    int regressed = watched && adj > thr && delta > noise;
    const char *verdict = !watched                       ? "-"
                          : regressed                    ? "REGRESSED"
                          : adj > thr                    ? "noise"
                          : adj < -thr && -delta > noise ? "faster"
                                                         : "ok";
    regressions += regressed;
    char what[96];
    snprintf(what, sizeof what, "plugin %s", x->name);
    if (json) {
      fprintf(out,
              "%s\n    {\"figure\": \"%s\", \"stat\": \"p50_us\", \"base\": "
              "%.6g, \"new\": %.6g, \"delta_pct\": %.3f, \"adjusted_pct\": "
              "%.3f, \"base_spread\": %.6g, \"new_spread\": %.6g, "
              "\"base_n\": %.0f, \"new_n\": %.0f, \"verdict\": \"%s\"}",
              *first ? "" : ",", what, isfinite(x->value) ? x->value : 0,
              isfinite(y->value) ? y->value : 0,
              x->value > 0 ? delta / x->value * 100 : 0, adj * 100, x->spread,
              y->spread, x->calls, y->calls, verdict);
      *first = 0;
    } else {
      fprintf(out, "%-28.28s %-4s %10.3f %10.3f %+8.1f%% %9.3f %9.3f  %s\n",
              what, "p50", x->value, y->value,
              x->value > 0 ? delta / x->value * 100 : 0, x->spread, y->spread,
              verdict);
    }
  }
done:
  free(a);
  free(b);
  free(ratios);
  free(pair);
  return regressions;
}
