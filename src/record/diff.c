/* diff.c — compares two SQLite recordings for CI: frame CPU, GPU and
 * frame-interval percentiles (p50 / p95 / p99) and, per zone name, the
 * calls and the p50 / p95 of self time (duration minus the children's).
 *
 * Noise. Every figure is also computed per second of each recording
 * (the p50 of second 1, of second 2, …); the spread of a figure is the
 * interquartile range of those per-second values. A figure regresses
 * only when the new value exceeds the base by more than the threshold
 * (relative) AND by more than the larger of the two runs' spreads, so a
 * change that the runs' own second-to-second variation covers is
 * reported as noise, not as a regression; nor is a change below the
 * figure's resolution floor (FRAME_FLOOR, ZONE_FLOOR). Figures with fewer than
 * 20 samples in either run, and the frame p99s, are shown but not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "record/diff_hooks.h"
#include "record/rec.h"

/* Changes smaller than these are never a regression: two steps of the
 * wire's 0.01 ms for frame times; 1 us for zone self times (a zone of a
 * few hundred ns differs by its clock reads between runs). */
#define FRAME_FLOOR 0.02 /* ms */
#define ZONE_FLOOR 1.0   /* us */

typedef struct series {
  double *v;
  int64_t *sec; /* the second each value belongs to */
  size_t n, cap;
} series;

static int push(series *s, double v, int64_t sec) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    double *nv = realloc(s->v, cap * sizeof *nv);
    if (!nv)
      return -1;
    s->v = nv;
    int64_t *ns = realloc(s->sec, cap * sizeof *ns);
    if (!ns)
      return -1;
    s->sec = ns;
    s->cap = cap;
  }
  s->v[s->n] = v;
  s->sec[s->n++] = sec;
  return 0;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* q-quantile of sorted values (nearest rank, linear between) */
static double quant(const double *v, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double f = pos - (double)i;
  return i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

typedef struct figure {
  double value, spread;
  size_t n;
} figure;

/* The q-quantile of all values, and the IQR of per-second q-quantiles. */
static figure fig(const series *s, double q) {
  figure f = {NAN, 0, s->n};
  if (!s->n)
    return f;
  double *all = malloc(s->n * sizeof *all);
  if (!all)
    return f;
  memcpy(all, s->v, s->n * sizeof *all);
  qsort(all, s->n, sizeof *all, cmpd);
  f.value = quant(all, s->n, q);
  /* per-second figures: values are in time order within a series */
  double *per = malloc(s->n * sizeof *per), *buf = all;
  size_t np = 0;
  if (per) {
    size_t i = 0;
    while (i < s->n) {
      size_t j = i, k = 0;
      while (j < s->n && s->sec[j] == s->sec[i])
        buf[k++] = s->v[j++];
      if (k >= 5) { /* a second with a handful of samples says little */
        qsort(buf, k, sizeof *buf, cmpd);
        per[np++] = quant(buf, k, q);
      }
      i = j;
    }
    if (np >= 3) {
      qsort(per, np, sizeof *per, cmpd);
      f.spread = quant(per, np, 0.75) - quant(per, np, 0.25);
    }
  }
  free(per);
  free(all);
  return f;
}

typedef struct run {
  sqlite3 *db;
  series cpu, gpu, interval;
  /* zones: names, one series each */
  char **names;
  series *zones;
  size_t nz;
} run;

static void run_free(run *r) {
  free(r->cpu.v), free(r->cpu.sec), free(r->gpu.v), free(r->gpu.sec);
  free(r->interval.v), free(r->interval.sec);
  for (size_t i = 0; i < r->nz; i++) {
    free(r->names[i]);
    free(r->zones[i].v);
    free(r->zones[i].sec);
  }
  free(r->names);
  free(r->zones);
  if (r->db)
    sqlite3_close(r->db);
}

static int bad(const char *path, sqlite3 *db, const char *what) {
  fprintf(stderr, "spyglass diff: %s: %s%s%s\n", path, what, db ? ": " : "",
          db ? sqlite3_errmsg(db) : "");
  return SPY_EINVAL;
}

static int load(run *r, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "spyglass diff: cannot open %s\n", path);
    return SPY_EINVAL;
  }
  fclose(f);
  if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    return bad(path, r->db, "cannot open");
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(r->db,
                         "SELECT f.upid, f.frame, f.ts, f.cpu_ms, f.gpu_ms, "
                         "f.ts - (SELECT started_ns FROM recording LIMIT 1) "
                         "FROM frame f ORDER BY f.upid, f.frame",
                         -1, &st, NULL) != SQLITE_OK)
    return bad(path, r->db, "not a recording");
  int64_t pu = -1, pf = -1, pts = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int64_t upid = sqlite3_column_int64(st, 0);
    int64_t fr = sqlite3_column_int64(st, 1), ts = sqlite3_column_int64(st, 2);
    int64_t sec = sqlite3_column_int64(st, 5) / 1000000000;
    if (push(&r->cpu, sqlite3_column_double(st, 3), sec) < 0)
      return SPY_ENOMEM;
    if (sqlite3_column_type(st, 4) != SQLITE_NULL &&
        push(&r->gpu, sqlite3_column_double(st, 4), sec) < 0)
      return SPY_ENOMEM;
    if (upid == pu && fr == pf + 1 && ts > pts &&
        push(&r->interval, (double)(ts - pts) / 1e6, sec) < 0)
      return SPY_ENOMEM;
    pu = upid, pf = fr, pts = ts;
  }
  sqlite3_finalize(st);
  /* self time: the children's time per parent, in a temporary table (the
   * recording itself is opened read-only) */
  char *err = NULL;
  if (sqlite3_exec(r->db,
                   "CREATE TEMP TABLE kids AS SELECT parent_id AS id, "
                   "SUM(dur) AS d FROM slice WHERE parent_id IS NOT NULL "
                   "GROUP BY parent_id; CREATE INDEX temp.kids_id ON kids(id);",
                   NULL, NULL, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return bad(path, r->db, "not a recording");
  }
  if (sqlite3_prepare_v2(r->db,
                         "SELECT s.name, s.dur - COALESCE(k.d, 0), "
                         "s.ts - (SELECT started_ns FROM recording LIMIT 1) "
                         "FROM slice s LEFT JOIN kids k ON k.id = s.id "
                         "ORDER BY s.name, s.ts",
                         -1, &st, NULL) != SQLITE_OK)
    return bad(path, r->db, "not a recording");
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if (!name)
      name = "?";
    if (!r->nz || strcmp(r->names[r->nz - 1], name) != 0) {
      char **nn = realloc(r->names, (r->nz + 1) * sizeof *nn);
      if (!nn)
        return SPY_ENOMEM;
      r->names = nn;
      series *ns = realloc(r->zones, (r->nz + 1) * sizeof *ns);
      if (!ns)
        return SPY_ENOMEM;
      r->zones = ns;
      memset(&r->zones[r->nz], 0, sizeof *ns);
      if (!(r->names[r->nz] = strdup(name)))
        return SPY_ENOMEM;
      r->nz++;
    }
    if (push(&r->zones[r->nz - 1], sqlite3_column_double(st, 1) / 1e3,
             sqlite3_column_int64(st, 2) / 1000000000) < 0)
      return SPY_ENOMEM;
  }
  sqlite3_finalize(st);
  return 0;
}

typedef struct out {
  FILE *f;
  int json, first, regressions;
  double thr;
} out;

/* floor: the smallest change judged at all (the figure's resolution) */
static void row(out *o, const char *what, const char *stat, const series *a,
                const series *b, double q, int watched, double floor) {
  figure x = fig(a, q), y = fig(b, q);
  double delta = y.value - x.value;
  double rel = x.value > 0 ? delta / x.value : 0;
  double noise = x.spread > y.spread ? x.spread : y.spread;
  if (noise < floor)
    noise = floor;
  watched = watched && x.n >= 20 && y.n >= 20 && isfinite(delta);
  int regressed = watched && rel > o->thr && delta > noise;
  const char *verdict = !watched                          ? "-"
                        : regressed                       ? "REGRESSED"
                        : rel > o->thr                    ? "noise"
                        : rel < -o->thr && -delta > noise ? "faster"
                                                          : "ok";
  o->regressions += regressed;
  if (o->json) {
    fprintf(o->f,
            "%s\n    {\"figure\": \"%s\", \"stat\": \"%s\", \"base\": %.6g, "
            "\"new\": %.6g, \"delta_pct\": %.3f, \"base_spread\": %.6g, "
            "\"new_spread\": %.6g, \"base_n\": %zu, \"new_n\": %zu, "
            "\"verdict\": \"%s\"}",
            o->first ? "" : ",", what, stat, isfinite(x.value) ? x.value : 0,
            isfinite(y.value) ? y.value : 0, isfinite(rel) ? rel * 100 : 0,
            x.spread, y.spread, x.n, y.n, verdict);
    o->first = 0;
    return;
  }
  fprintf(o->f, "%-28.28s %-4s %10.3f %10.3f %+8.1f%% %9.3f %9.3f  %s\n", what,
          stat, x.value, y.value, rel * 100, x.spread, y.spread, verdict);
}

int spy_record_diff(const char *base, const char *cand, double thr, int json,
                    FILE *f) {
  run a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  int rc = load(&a, base);
  if (!rc)
    rc = load(&b, cand);
  if (rc) {
    run_free(&a);
    run_free(&b);
    return rc;
  }
  out o = {f, json, 1, 0, thr};
  if (json)
    fprintf(f, "{\"threshold_pct\": %.3f, \"figures\": [", thr * 100);
  else
    fprintf(f,
            "%-28s %-4s %10s %10s %9s %9s %9s  %s\n"
            "(ms for frames, us of self time for zones; spread = IQR of "
            "per-second values)\n",
            "figure", "stat", "base", "new", "delta", "spread0", "spread1",
            "verdict");
  static const double qs[3] = {0.5, 0.95, 0.99};
  static const char *const qn[3] = {"p50", "p95", "p99"};
  /* p99 is shown, not judged: a second's stall moves it between two runs
   * of the same program more than any threshold a CI step would use */
  for (int k = 0; k < 3; k++)
    row(&o, "frame cpu_ms", qn[k], &a.cpu, &b.cpu, qs[k], k < 2, FRAME_FLOOR);
  for (int k = 0; k < 3; k++)
    row(&o, "frame gpu_ms", qn[k], &a.gpu, &b.gpu, qs[k], k < 2, FRAME_FLOOR);
  for (int k = 0; k < 3; k++)
    row(&o, "frame interval_ms", qn[k], &a.interval, &b.interval, qs[k], k < 2,
        FRAME_FLOOR);
  for (size_t i = 0; i < a.nz; i++) {
    size_t j = 0;
    while (j < b.nz && strcmp(a.names[i], b.names[j]) != 0)
      j++;
    if (j == b.nz)
      continue; /* only in the base */
    char what[96];
    snprintf(what, sizeof what, "zone %s", a.names[i]);
    if (json) {
      fprintf(f,
              "%s\n    {\"figure\": \"%s\", \"stat\": \"calls\", \"base\": "
              "%zu, \"new\": %zu}",
              o.first ? "" : ",", what, a.zones[i].n, b.zones[j].n);
      o.first = 0;
    } else {
      fprintf(f, "%-28.28s %-4s %10zu %10zu\n", what, "n", a.zones[i].n,
              b.zones[j].n);
    }
    row(&o, what, "p50", &a.zones[i], &b.zones[j], 0.5, 1, ZONE_FLOOR);
    row(&o, what, "p95", &a.zones[i], &b.zones[j], 0.95, 1, ZONE_FLOOR);
  }
  /* build traces: per-plugin hook time (diff_hooks.c) */
  o.regressions += spy__diff_hooks(a.db, b.db, thr, json, &o.first, f);
  if (json)
    fprintf(f, "\n  ], \"regressions\": %d}\n", o.regressions);
  else
    fprintf(f, "%d regression%s beyond %.1f%% and the runs' spread\n",
            o.regressions, o.regressions == 1 ? "" : "s", thr * 100);
  run_free(&a);
  run_free(&b);
  return o.regressions ? 1 : 0;
}
