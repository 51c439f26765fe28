/* diff.c — compares two recordings (SQLite files or PostgreSQL, through
 * rec_read.c) for CI: frame CPU, GPU and
 * frame-interval percentiles (p50 / p95 / p99) and, per zone name, the
 * calls and the p50 / p95 of self time (duration minus the children's).
 *
 * Noise. Every figure is also computed per second of each recording
 * (the p50 of second 1, of second 2, …); the spread of a figure is the
 * interquartile range (IQR) of those per-second values. A figure
 * regresses only when the new value exceeds the base by more than the
 * threshold (relative) AND the two runs' IQRs do not overlap (the new
 * run's lower quartile is above the base's upper one), so a change that
 * the runs' own second-to-second variation covers is reported as noise,
 * not as a regression (a slowed run that is also noisier still counts
 * when even its good seconds are slower); nor is a change below the
 * figure's resolution floor (FRAME_FLOOR, ZONE_FLOOR). Figures with fewer than
 * 20 samples in either run, and the frame p99s, are shown but not judged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/diff_hooks.h"
#include "record/rec.h"
#include "record/zblock.h"

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
  double lo, hi; /* q25 / q75 of the per-second figures (value if few) */
  size_t n;
} figure;

/* The q-quantile of all values, and the IQR of per-second q-quantiles. */
static figure fig(const series *s, double q) {
  figure f = {NAN, 0, NAN, NAN, s->n};
  if (!s->n)
    return f;
  double *all = malloc(s->n * sizeof *all);
  if (!all)
    return f;
  memcpy(all, s->v, s->n * sizeof *all);
  qsort(all, s->n, sizeof *all, cmpd);
  f.value = quant(all, s->n, q);
  f.lo = f.hi = f.value;
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
      f.lo = quant(per, np, 0.25);
      f.hi = quant(per, np, 0.75);
      f.spread = f.hi - f.lo;
    }
  }
  free(per);
  free(all);
  return f;
}

typedef struct run {
  rec_rd rd;
  int64_t t0; /* recording.started_ns */
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
  spy__rec_read_close(&r->rd);
}

static int bad(const char *path, run *r, const char *what) {
  fprintf(stderr, "spyglass diff: %s: %s: %s\n", path, what,
          r->rd.ops->errmsg(r->rd.st));
  return SPY_EINVAL;
}

/* The series of zone name `name` (made if new); -1 on OOM. */
static long zone_series(run *r, const char *name) {
  for (size_t i = 0; i < r->nz; i++)
    if (strcmp(r->names[i], name) == 0)
      return (long)i;
  char **nn = realloc(r->names, (r->nz + 1) * sizeof *nn);
  if (!nn)
    return -1;
  r->names = nn;
  series *ns = realloc(r->zones, (r->nz + 1) * sizeof *ns);
  if (!ns)
    return -1;
  r->zones = ns;
  memset(&r->zones[r->nz], 0, sizeof *ns);
  if (!(r->names[r->nz] = strdup(name)))
    return -1;
  return (long)r->nz++;
}

/* ---- self times of packed zones --------------------------------------
 * The zones come in (track, ts, depth) order; the open ones are a stack,
 * a zone's duration is added to its parent's children when the parent is
 * open on it (the rows' SQL sums by parent_id) and a zone's self time is
 * taken when it is popped. */
typedef struct zopen {
  int64_t id, end, dur, child, ts;
  long series;
} zopen;
typedef struct zself {
  run *r;
  int64_t *loc_id; /* zone_loc ids, sorted, their names and series (-1:
                      not made yet: a series is made at its first zone) */
  char **loc_name;
  long *loc_series;
  size_t nloc;
  long unnamed; /* the series "?" */
  zopen st[1100];
  int n;
  int64_t track;
  int err;
} zself;

static void zs_pop(zself *z) {
  zopen *o = &z->st[--z->n];
  if (o->series >= 0 &&
      push(&z->r->zones[o->series], (double)(o->dur - o->child) / 1e3,
           (o->ts - z->r->t0) / 1000000000) < 0)
    z->err = SPY_ENOMEM;
}

static int zs_zone(void *user, int64_t track, const spy_zb_zone *zb) {
  zself *z = user;
  if (track != z->track)
    while (z->n)
      zs_pop(z);
  z->track = track;
  while (z->n && z->st[z->n - 1].end <= zb->ts &&
         z->st[z->n - 1].id != zb->parent)
    zs_pop(z);
  for (int i = z->n - 1; zb->parent && i >= 0; i--)
    if (z->st[i].id == zb->parent) {
      z->st[i].child += zb->dur;
      break;
    }
  long *se = &z->unnamed;
  const char *name = "?";
  size_t lo = 0, hi = z->nloc;
  while (zb->name_id && lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (z->loc_id[mid] < zb->name_id)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (zb->name_id && lo < z->nloc && z->loc_id[lo] == zb->name_id)
    se = &z->loc_series[lo], name = z->loc_name[lo];
  if (*se < 0 && (*se = zone_series(z->r, name)) < 0)
    return z->err = SPY_ENOMEM;
  if (z->n == (int)(sizeof z->st / sizeof z->st[0]))
    zs_pop(z); /* deeper than export nests: the outermost goes first */
  z->st[z->n++] = (zopen){zb->id, zb->ts + zb->dur, zb->dur, 0, zb->ts, *se};
  return z->err;
}

typedef struct vs {
  double v;
  int64_t sec;
} vs;
static int cmp_vs(const void *a, const void *b) {
  int64_t x = ((const vs *)a)->sec, y = ((const vs *)b)->sec;
  return x < y ? -1 : x > y;
}

static int zones_packed(run *r, const char *path) {
  zself *z = calloc(1, sizeof *z);
  if (!z)
    return SPY_ENOMEM;
  z->r = r;
  z->track = -1;
  int rc = 0;
  z->unnamed = -1;
  rec_q q;
  spy__rq_prep(&q, &r->rd,
               "SELECT id, COALESCE(name, '?') FROM zone_loc WHERE "
               "recording_id = ?1 ORDER BY id");
  spy__rq_bind(&q, 1, r->rd.rec_id);
  size_t cap = 0;
  while (!rc && spy__rq_step(&q)) {
    if (z->nloc == cap) {
      cap = cap ? cap * 2 : 64;
      int64_t *ni = realloc(z->loc_id, cap * sizeof *ni);
      if (ni)
        z->loc_id = ni;
      long *ns = ni ? realloc(z->loc_series, cap * sizeof *ns) : NULL;
      if (ns)
        z->loc_series = ns;
      char **nn = ns ? realloc(z->loc_name, cap * sizeof *nn) : NULL;
      if (!nn) {
        rc = SPY_ENOMEM;
        break;
      }
      z->loc_name = nn;
    }
    const char *name = spy__rq_text(&q, 1);
    z->loc_id[z->nloc] = spy__rq_i64(&q, 0);
    z->loc_series[z->nloc] = -1;
    if (!(z->loc_name[z->nloc++] = strdup(name ? name : "?")))
      rc = SPY_ENOMEM;
  }
  if (!rc && q.failed)
    rc = bad(path, r, "not a recording");
  if (!rc) {
    rc = spy__rec_zones_each(&r->rd, INT64_MIN, INT64_MAX, zs_zone, z);
    while (z->n)
      zs_pop(z);
    if (!rc)
      rc = z->err;
    if (rc == SPY_EBADVALUE || rc == SPY_EIO)
      rc = bad(path, r, "cannot read its zones");
  }
  /* the per-second figures want each series in time order */
  for (size_t i = 0; !rc && i < r->nz; i++) {
    series *se = &r->zones[i];
    vs *t = malloc((se->n ? se->n : 1) * sizeof *t);
    if (!t) {
      rc = SPY_ENOMEM;
      break;
    }
    for (size_t k = 0; k < se->n; k++)
      t[k] = (vs){se->v[k], se->sec[k]};
    qsort(t, se->n, sizeof *t, cmp_vs);
    for (size_t k = 0; k < se->n; k++)
      se->v[k] = t[k].v, se->sec[k] = t[k].sec;
    free(t);
  }
  for (size_t i = 0; i < z->nloc; i++)
    free(z->loc_name[i]);
  free(z->loc_id);
  free(z->loc_name);
  free(z->loc_series);
  free(z);
  return rc;
}

/* path: a SQLite file or a postgres:// URI, either with "#N" for
 * recording N (else the file's first / the database's newest). */
static int load(run *r, const char *path) {
  int64_t want = 0;
  char db[2048];
  snprintf(db, sizeof db, "%s", path);
  char *hash = strrchr(db, '#');
  if (hash && hash[1]) {
    char *end;
    long long v = strtoll(hash + 1, &end, 10);
    if (*end || v <= 0) {
      fprintf(stderr, "spyglass diff: %s: bad recording number\n", path);
      return SPY_EINVAL;
    }
    want = v;
    *hash = 0;
  }
  if (spy__rec_read_open(&r->rd, db, want, &r->t0) < 0) {
    fprintf(stderr, "spyglass diff: %s: cannot read that recording\n", path);
    return SPY_EINVAL;
  }
  rec_q q, *st = &q;
  spy__rq_prep(st, &r->rd,
               "SELECT f.upid, f.frame, f.ts, f.cpu_ms, f.gpu_ms, "
               "f.ts - ?2 FROM frame f WHERE f.recording_id = ?1 "
               "ORDER BY f.upid, f.frame");
  spy__rq_bind(st, 1, r->rd.rec_id);
  spy__rq_bind(st, 2, r->t0);
  int64_t pu = -1, pf = -1, pts = 0;
  while (spy__rq_step(st)) {
    int64_t upid = spy__rq_i64(st, 0);
    int64_t fr = spy__rq_i64(st, 1), ts = spy__rq_i64(st, 2);
    int64_t sec = spy__rq_i64(st, 5) / 1000000000;
    if (!spy__rq_null(st, 3) && push(&r->cpu, spy__rq_dbl(st, 3), sec) < 0)
      return SPY_ENOMEM;
    if (!spy__rq_null(st, 4) && push(&r->gpu, spy__rq_dbl(st, 4), sec) < 0)
      return SPY_ENOMEM;
    if (upid == pu && fr == pf + 1 && ts > pts &&
        push(&r->interval, (double)(ts - pts) / 1e6, sec) < 0)
      return SPY_ENOMEM;
    pu = upid, pf = fr, pts = ts;
  }
  if (st->failed)
    return bad(path, r, "not a recording");
  /* packed zones (zone_block): self times from the blocks, rec_zones.c */
  int packed = spy__rec_has_blocks(&r->rd);
  if (packed > 0)
    return zones_packed(r, path);
  /* self time: a slice's duration minus its children's (summed per
   * parent in a subquery: SQLite indexes it on its own, PostgreSQL hashes
   * it); read-only, the same SQL for both backends */
  spy__rq_prep(st, &r->rd,
               "SELECT COALESCE(l.name, '?'), s.dur - COALESCE(k.d, 0), "
               "s.ts - ?2 FROM slice_data s LEFT JOIN zone_loc l ON "
               "l.recording_id = s.recording_id AND l.id = s.name_id "
               "LEFT JOIN (SELECT parent_id AS id, SUM(dur) AS d FROM "
               "slice_data WHERE recording_id = ?1 AND parent_id IS NOT NULL "
               "GROUP BY parent_id) k ON k.id = s.id "
               "WHERE s.recording_id = ?1 ORDER BY 1, s.ts");
  spy__rq_bind(st, 1, r->rd.rec_id);
  spy__rq_bind(st, 2, r->t0);
  while (spy__rq_step(st)) {
    const char *name = spy__rq_text(st, 0);
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
    if (push(&r->zones[r->nz - 1], spy__rq_dbl(st, 1) / 1e3,
             spy__rq_i64(st, 2) / 1000000000) < 0)
      return SPY_ENOMEM;
  }
  if (st->failed)
    return bad(path, r, "not a recording");
  return 0;
}

typedef struct out {
  FILE *f;
  int json, first, regressions;
  double thr;
} out;

/* v in fmt, or `missing` when it is not a number */
static void num(char *buf, size_t cap, double v, const char *fmt,
                const char *missing) {
  if (isfinite(v))
    snprintf(buf, cap, fmt, v);
  else
    snprintf(buf, cap, "%s", missing);
}

/* floor: the smallest change judged at all (the figure's resolution);
 * none: what a run without values shows instead of a number */
static void row(out *o, const char *what, const char *stat, const series *a,
                const series *b, double q, int watched, double floor,
                const char *none) {
  figure x = fig(a, q), y = fig(b, q);
  double delta = y.value - x.value;
  double rel = x.value > 0 ? delta / x.value : 0;
  /* judged only past the threshold and the resolution floor, and only
   * when the runs' spreads do not overlap: NEW's per-second IQR lies
   * wholly above BASE's (a regression) or below it (faster) */
  watched = watched && x.n >= 20 && y.n >= 20 && isfinite(delta);
  int apart_up = y.lo > x.hi, apart_down = y.hi < x.lo;
  int regressed = watched && rel > o->thr && delta > floor && apart_up;
  const char *verdict = !watched       ? "-"
                        : regressed    ? "REGRESSED"
                        : rel > o->thr ? "noise"
                        : rel < -o->thr && -delta > floor && apart_down
                            ? "faster"
                            : "ok";
  o->regressions += regressed;
  /* a run without the figure (no frames, no GPU timing): said so, not
   * printed as nan */
  char bv[32], nv[32], dv[32];
  num(bv, sizeof bv, x.value, "%.6g", "null");
  num(nv, sizeof nv, y.value, "%.6g", "null");
  if (o->json) {
    fprintf(o->f,
            "%s\n    {\"figure\": \"%s\", \"stat\": \"%s\", \"base\": %s, "
            "\"new\": %s, \"delta_pct\": %.3f, \"base_spread\": %.6g, "
            "\"new_spread\": %.6g, \"base_n\": %zu, \"new_n\": %zu, "
            "\"verdict\": \"%s\"}",
            o->first ? "" : ",", what, stat, bv, nv,
            isfinite(rel) ? rel * 100 : 0, x.spread, y.spread, x.n, y.n,
            verdict);
    o->first = 0;
    return;
  }
  num(bv, sizeof bv, x.value, "%10.3f", none);
  num(nv, sizeof nv, y.value, "%10.3f", none);
  num(dv, sizeof dv, isfinite(x.value) && isfinite(y.value) ? rel * 100 : NAN,
      "%+8.1f%%", "-");
  fprintf(o->f, "%-28.28s %-4s %10s %10s %9s %9.3f %9.3f  %s\n", what, stat, bv,
          nv, dv, x.spread, y.spread, verdict);
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
  if (!a.cpu.n && !b.cpu.n && !json) {
    /* build traces only (or nothing recorded per frame) */
    fprintf(f, "%-28s %-4s %10s %10s\n", "frame", "-", "no frames",
            "no frames");
  } else {
    for (int k = 0; k < 3; k++)
      row(&o, "frame cpu_ms", qn[k], &a.cpu, &b.cpu, qs[k], k < 2, FRAME_FLOOR,
          "no frames");
    for (int k = 0; k < 3; k++)
      row(&o, "frame gpu_ms", qn[k], &a.gpu, &b.gpu, qs[k], k < 2, FRAME_FLOOR,
          a.cpu.n && b.cpu.n ? "no GPU" : "no frames");
    for (int k = 0; k < 3; k++)
      row(&o, "frame interval_ms", qn[k], &a.interval, &b.interval, qs[k],
          k < 2, FRAME_FLOOR, "no frames");
  }
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
    row(&o, what, "p50", &a.zones[i], &b.zones[j], 0.5, 1, ZONE_FLOOR, "none");
    row(&o, what, "p95", &a.zones[i], &b.zones[j], 0.95, 1, ZONE_FLOOR, "none");
  }
  /* build traces: per-plugin hook time (diff_hooks.c) */
  o.regressions += spy__diff_hooks(&a.rd, &b.rd, thr, json, &o.first, f);
  if (json)
    fprintf(f, "\n  ], \"regressions\": %d}\n", o.regressions);
  else
    fprintf(f, "%d regression%s beyond %.1f%% and the runs' spread\n",
            o.regressions, o.regressions == 1 ? "" : "s", thr * 100);
  run_free(&a);
  run_free(&b);
  return o.regressions ? 1 : 0;
}
