/* test_zones_state.c — the consumer's zone state (src/consumer/zones_state.c)
 * against a plain model of what it must hold: random streams of begins,
 * ends and frame markers on several threads, encoded as ZONES sections and
 * applied to a state, and the same events played through the model (every
 * span ever begun in one array, no ring, no fast path). After every
 * section the spans the state keeps (which ones, their times, depth,
 * flags), the open stacks and the counters must be the model's, and so must
 * the per-location sums of the last second: through the ring filling,
 * wrapping and growing, frames pruning, zones deeper than the state keeps,
 * ends of zones it never saw, threads reset, and time jumps too large for
 * a packed word. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/consumer.h"
#include "spyglass/wire.h"
#include "testlib.h"

#define NS_PER_S 1000000000ull
#define THREADS 3
#define LOCS 6 /* ids 16 .. 21; 21's record comes with section LATE_LOC */
#define LATE_LOC 50

/* ---- the model ----------------------------------------------------------- */

typedef struct mspan {
  uint64_t s, e;
  uint32_t loc;
  uint16_t depth, flags;
} mspan;

typedef struct msum { /* one summed end */
  uint32_t loc;
  uint64_t sec, dur, self;
} msum;

typedef struct mthread {
  uint32_t id;
  mspan *sp;
  uint64_t n, cap, first; /* every span begun; the oldest kept */
  uint64_t open[SPY_ZONE_DEPTH_MAX], child[SPY_ZONE_DEPTH_MAX];
  uint32_t depth, too_deep;
  uint64_t unmatched;
} mthread;

typedef struct model {
  mthread th[THREADS];
  uint64_t max_spans; /* the state's ring size */
  uint32_t keep_frames;
  uint64_t *frames; /* start times of every frame */
  uint64_t n_frames, frames_cap;
  uint64_t latest, events, spans, cut, unmatched;
  msum *sums;
  uint64_t n_sums, sums_cap;
  int late_known; /* location 21's record came */
} model;

static void *grow(void *p, uint64_t *cap, uint64_t need, size_t size) {
  if (need <= *cap)
    return p;
  uint64_t c = *cap ? *cap : 1024;
  while (c < need)
    c *= 2;
  void *q = realloc(p, c * size);
  if (!q)
    abort();
  *cap = c;
  return q;
}

static void m_begin(model *m, mthread *t, uint64_t ns, uint32_t loc) {
  m->events++;
  if (t->depth >= SPY_ZONE_DEPTH_MAX || t->too_deep) {
    t->too_deep++;
    return;
  }
  if (t->n - t->first == m->max_spans)
    t->first++; /* the ring is full: the oldest goes, open or not */
  t->sp = grow(t->sp, &t->cap, t->n + 1, sizeof *t->sp);
  t->sp[t->n] = (mspan){ns, 0, loc, (uint16_t)t->depth, 0};
  t->open[t->depth] = t->n;
  t->child[t->depth] = 0;
  t->depth++;
  t->n++;
}

static void m_end(model *m, mthread *t, uint64_t ns) {
  m->events++;
  if (t->too_deep) {
    t->too_deep--;
    return;
  }
  if (!t->depth) {
    t->unmatched++;
    m->unmatched++;
    return;
  }
  t->depth--;
  uint64_t a = t->open[t->depth];
  if (a < t->first)
    return;
  mspan *sp = &t->sp[a];
  sp->e = ns > sp->s ? ns : sp->s;
  m->spans++;
  uint64_t dur = sp->e - sp->s, ch = t->child[t->depth];
  if (t->depth)
    t->child[t->depth - 1] += dur;
  if (sp->loc == 16 + LOCS - 1 && !m->late_known)
    return; /* not summed before its location is known */
  m->sums = grow(m->sums, &m->sums_cap, m->n_sums + 1, sizeof *m->sums);
  m->sums[m->n_sums++] =
      (msum){sp->loc, sp->e / NS_PER_S, dur, dur > ch ? dur - ch : 0};
}

static void m_frame(model *m, uint64_t ns) {
  m->events++;
  m->frames =
      grow(m->frames, &m->frames_cap, m->n_frames + 1, sizeof(uint64_t));
  m->frames[m->n_frames++] = ns;
  if (m->n_frames <= m->keep_frames)
    return;
  uint64_t keep = m->frames[m->n_frames - m->keep_frames];
  for (int i = 0; i < THREADS; i++) {
    mthread *t = &m->th[i];
    while (t->first < t->n && t->sp[t->first].e && t->sp[t->first].e < keep)
      t->first++;
  }
}

static void m_cut(model *m, mthread *t) {
  for (uint32_t d = 0; d < t->depth; d++) {
    uint64_t a = t->open[d];
    if (a >= t->first) {
      t->sp[a].e = m->latest > t->sp[a].s ? m->latest : t->sp[a].s;
      t->sp[a].flags |= SPY_ZONE_SPAN_CUT;
    }
    m->cut++;
  }
  t->depth = 0;
  t->too_deep = 0;
}

/* ---- the streams ----------------------------------------------------------
 */

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void) { /* xorshift64 */
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 7;
  rnd_state ^= rnd_state << 17;
  return rnd_state;
}

typedef struct stream {
  model m;
  spy_state st;
  uint64_t clock[THREADS];
  uint64_t frame_no;
  int sections;
  int deep_phase; /* thread 1 dives past the depth kept, then comes back */
} stream;

/* One event of thread i at its clock, into the section and the model. */
static void event(stream *x, spy_zones_writer *z, int i, int kind, uint32_t loc,
                  uint64_t *last) {
  mthread *t = &x->m.th[i];
  if (kind == SPY_ZONE_EV_BEGIN) {
    spy_zones_put_event(z, SPY_ZONE_EV_BEGIN, x->clock[i], loc);
    m_begin(&x->m, t, x->clock[i], loc);
  } else if (kind == SPY_ZONE_EV_END) {
    spy_zones_put_event(z, SPY_ZONE_EV_END, x->clock[i], 0);
    m_end(&x->m, t, x->clock[i]);
  } else {
    spy_zones_put_event(z, SPY_ZONE_EV_FRAME, x->clock[i], ++x->frame_no);
    m_frame(&x->m, x->clock[i]);
  }
  *last = x->clock[i];
}

static uint64_t delta(void) {
  uint64_t r = rnd() % 1000;
  if (r < 700)
    return rnd() % 40; /* one byte on the wire */
  if (r < 990)
    return rnd() % 100000;
  if (r < 999)
    return rnd() % (3 * NS_PER_S);    /* across seconds */
  return (1ull << 46) + rnd() % 1000; /* too large for a packed word */
}

/* Encodes and applies one section of up to `n` events per thread. */
static int section(stream *x, uint8_t *buf, size_t cap, int n) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 1, (uint32_t)x->sections, 0);
  uint64_t base = x->clock[0];
  for (int i = 1; i < THREADS; i++)
    base = x->clock[i] < base ? x->clock[i] : base;
  spy_zones_writer z;
  spy_zones_begin(&z, &w, x->sections ? 0 : SPY_ZONES_FULL, base);
  static const char *names[LOCS] = {"a", "b", "c", "d", "e", "late"};
  for (uint32_t l = 0; l < LOCS; l++) {
    if (l == LOCS - 1 ? x->sections != LATE_LOC : x->sections != 0)
      continue;
    spy_zone_loc_info li = {.id = 16 + l,
                            .line = l,
                            .name = names[l],
                            .name_len = (uint32_t)strlen(names[l]),
                            .function = "f",
                            .function_len = 1,
                            .file = "x.c",
                            .file_len = 3};
    spy_zones_put_loc(&z, &li);
    if (l == LOCS - 1)
      x->m.late_known = 1;
  }
  for (int i = 0; i < THREADS; i++) {
    mthread *t = &x->m.th[i];
    char name[8];
    snprintf(name, sizeof name, "t%d", i);
    int reset = x->sections > 3 && rnd() % 40 == 0;
    spy_zone_thread_info ti = {
        .thread = t->id,
        .os_tid = 100 + (uint32_t)i,
        .flags = (uint8_t)(reset ? SPY_ZONES_THREAD_RESET : 0) |
                 SPY_ZONES_THREAD_NAMED,
        .name = name,
        .name_len = (uint32_t)strlen(name)};
    spy_zones_thread_begin(&z, &ti);
    if (reset)
      m_cut(&x->m, t);
    uint64_t last = base;
    int k = 0;
    if (i == 2 && x->sections == 0) /* ends of zones begun before we saw */
      for (; k < 5; k++)
        event(x, &z, i, SPY_ZONE_EV_END, 0, &last);
    for (; k < n; k++) {
      x->clock[i] += delta();
      uint64_t r = rnd() % 100;
      int kind;
      if (i == 1 && x->deep_phase == 1)
        kind = SPY_ZONE_EV_BEGIN;
      else if (i == 1 && x->deep_phase == 2)
        kind = SPY_ZONE_EV_END;
      else if (i == 0 && r < 3)
        kind = SPY_ZONE_EV_FRAME;
      else
        kind = r < 52 + (t->depth < 3 ? 10 : 0) ? SPY_ZONE_EV_BEGIN
                                                : SPY_ZONE_EV_END;
      uint32_t loc = rnd() % 50 == 0 ? 300 : 16 + (uint32_t)(rnd() % LOCS);
      event(x, &z, i, kind, loc, &last);
    }
    if (last > x->m.latest)
      x->m.latest = last; /* the state's too: after each block */
  }
  spy_zones_end(&z);
  int len = spy_frame_finish(&w);
  if (len < 0)
    return len;
  spy_frame f;
  int rc = spy_frame_decode(buf, (size_t)len, &f, NULL);
  if (rc < 0)
    return rc;
  x->sections++;
  return spy_state_apply(&x->st, &f, 0);
}

/* ---- the comparison -------------------------------------------------------
 */

static int same_span(const spy_zone_span *a, const mspan *b) {
  return a->start_ns == b->s && a->end_ns == b->e && a->loc == b->loc &&
         a->depth == b->depth && a->flags == b->flags;
}

/* 0 if the state holds what the model does; else prints the first
 * difference. */
static int differs(const stream *x) {
  const spy_zone_state *z = &x->st.zones;
  const model *m = &x->m;
  if (z->events != m->events || z->spans != m->spans || z->cut != m->cut ||
      z->unmatched != m->unmatched || z->latest_ns != m->latest) {
    fprintf(stderr,
            "  counters: events %llu/%llu spans %llu/%llu cut %llu/%llu "
            "unmatched %llu/%llu latest %llu/%llu\n",
            (unsigned long long)z->events, (unsigned long long)m->events,
            (unsigned long long)z->spans, (unsigned long long)m->spans,
            (unsigned long long)z->cut, (unsigned long long)m->cut,
            (unsigned long long)z->unmatched, (unsigned long long)m->unmatched,
            (unsigned long long)z->latest_ns, (unsigned long long)m->latest);
    return 1;
  }
  for (int i = 0; i < THREADS; i++) {
    const mthread *t = &m->th[i];
    const spy_zone_thread *s = NULL;
    for (uint32_t k = 0; k < z->n_threads; k++)
      if (z->threads[k].thread == t->id)
        s = &z->threads[k];
    if (!s)
      return fprintf(stderr, "  thread %u missing\n", t->id), 1;
    if (s->first != t->first || s->n != t->n - t->first ||
        s->depth != t->depth || s->too_deep != t->too_deep ||
        s->unmatched != t->unmatched) {
      fprintf(stderr,
              "  thread %u: first %llu/%llu n %u/%llu depth %u/%u too_deep "
              "%u/%u unmatched %llu/%llu\n",
              t->id, (unsigned long long)s->first, (unsigned long long)t->first,
              s->n, (unsigned long long)(t->n - t->first), s->depth, t->depth,
              s->too_deep, t->too_deep, (unsigned long long)s->unmatched,
              (unsigned long long)t->unmatched);
      return 1;
    }
    for (uint32_t k = 0; k < s->n; k++)
      if (!same_span(spy_zone_thread_span(s, k), &t->sp[t->first + k])) {
        const spy_zone_span *a = spy_zone_thread_span(s, k);
        const mspan *b = &t->sp[t->first + k];
        fprintf(stderr,
                "  thread %u span %llu: %llu-%llu loc %u depth %u flags %u, "
                "model %llu-%llu loc %u depth %u flags %u\n",
                t->id, (unsigned long long)(t->first + k),
                (unsigned long long)a->start_ns, (unsigned long long)a->end_ns,
                a->loc, a->depth, a->flags, (unsigned long long)b->s,
                (unsigned long long)b->e, b->loc, b->depth, b->flags);
        return 1;
      }
    for (uint32_t d = 0; d < s->depth; d++)
      if (s->open[d] != t->open[d])
        return fprintf(stderr, "  thread %u open[%u]\n", t->id, d), 1;
    if (spy_zone_thread_span(s, s->n))
      return fprintf(stderr, "  thread %u: a span past n\n", t->id), 1;
  }
  return 0;
}

/* The state's sums of the last second for every location are the model's
 * (ends summed from second `from` on). */
static int sums_differ(stream *x, uint64_t from) {
  uint64_t now = x->m.latest / NS_PER_S;
  for (uint32_t l = 0; l < LOCS; l++) {
    spy_zone_sums want = {0, 0, 0, 0};
    if (now >= from + 1)
      for (uint64_t k = 0; k < x->m.n_sums; k++) {
        const msum *e = &x->m.sums[k];
        if (e->loc != 16 + l || e->sec != now - 1)
          continue;
        want.calls++;
        want.total_ns += e->dur;
        want.self_ns += e->self;
        want.max_ns = e->dur > want.max_ns ? e->dur : want.max_ns;
      }
    spy_zone_sums got =
        spy_state_zone_last_second(&x->st, spy_state_zone_loc(&x->st, 16 + l));
    if (memcmp(&got, &want, sizeof got) != 0) {
      fprintf(stderr,
              "  loc %u second %llu: calls %llu/%llu total %llu/%llu self "
              "%llu/%llu max %llu/%llu\n",
              16 + l, (unsigned long long)(now - 1),
              (unsigned long long)got.calls, (unsigned long long)want.calls,
              (unsigned long long)got.total_ns,
              (unsigned long long)want.total_ns,
              (unsigned long long)got.self_ns, (unsigned long long)want.self_ns,
              (unsigned long long)got.max_ns, (unsigned long long)want.max_ns);
      return 1;
    }
  }
  return 0;
}

static void stream_init(stream *x, uint32_t frames, uint32_t spans) {
  memset(x, 0, sizeof *x);
  for (int i = 0; i < THREADS; i++) {
    x->m.th[i].id = (uint32_t)i + 1;
    x->clock[i] = 5 * NS_PER_S;
  }
  uint64_t p = 16;
  while (p < spans)
    p <<= 1;
  x->m.max_spans = p;
  x->m.keep_frames = frames;
  spy_state_init(&x->st, 4);
  spy_state_zones_keep(&x->st, frames, spans);
}

static void stream_free(stream *x) {
  for (int i = 0; i < THREADS; i++)
    free(x->m.th[i].sp);
  free(x->m.frames);
  free(x->m.sums);
  spy_state_free(&x->st);
}

/* `sections` sections; sums switched on at section `sums_at` (-1: never),
 * compared from then on. */
static int run_streams(uint32_t frames, uint32_t spans, int sections,
                       int sums_at, uint64_t seed) {
  static uint8_t buf[1 << 20];
  stream *x = malloc(sizeof *x);
  if (!x)
    return 1;
  rnd_state = seed;
  stream_init(x, frames, spans);
  uint64_t from = 0;
  int bad = 0;
  for (int k = 0; k < sections && !bad; k++) {
    if (k == sums_at) {
      spy_state_zones_sums(&x->st, 1);
      from = x->m.latest / NS_PER_S + 1;
    }
    /* thread 1 goes deeper than kept, around section 10, and back */
    x->deep_phase = k == 10 ? 1 : k == 11 ? 2 : 0;
    int n =
        x->deep_phase ? (int)SPY_ZONE_DEPTH_MAX + 300 : 1 + (int)(rnd() % 600);
    int rc = section(x, buf, sizeof buf, n);
    if (rc < 0) {
      fprintf(stderr, "  section %d: %d\n", k, rc);
      bad = 1;
    }
    if (!bad && differs(x)) {
      fprintf(stderr, "  after section %d (seed %llu)\n", k,
              (unsigned long long)seed);
      bad = 1;
    }
    if (!bad && sums_at >= 0 && k >= sums_at && sums_differ(x, from)) {
      fprintf(stderr, "  sums after section %d (seed %llu)\n", k,
              (unsigned long long)seed);
      bad = 1;
    }
  }
  stream_free(x);
  free(x);
  return bad;
}

/* ---- cases ----------------------------------------------------------------
 */

TEST(state_keeps_what_the_model_keeps_small_ring) {
  for (uint64_t seed = 1; seed <= 6; seed++)
    CHECK(!run_streams(2, 64, 120, -1, seed));
}

TEST(state_keeps_what_the_model_keeps_growing_ring) {
  for (uint64_t seed = 11; seed <= 14; seed++)
    CHECK(!run_streams(8, 3000, 160, -1, seed));
}

TEST(sums_of_the_last_second_are_the_models_from_the_start) {
  for (uint64_t seed = 21; seed <= 24; seed++)
    CHECK(!run_streams(4, 4096, 160, 0, seed));
}

TEST(sums_switched_on_midway_count_open_zones_children) {
  for (uint64_t seed = 31; seed <= 34; seed++)
    CHECK(!run_streams(4, 65536, 160, 40, seed));
}

TEST(first_read_of_the_sums_switches_them_on) {
  spy_state st;
  CHECK_OK(spy_state_init(&st, 4));
  CHECK(!st.zones.sums_on);
  spy_zone_sums s = spy_state_zone_last_second(&st, NULL);
  CHECK_EQ(s.calls, 0);
  CHECK(st.zones.sums_on);
  spy_state_zones_sums(&st, 0);
  CHECK(!st.zones.sums_on);
  spy_state_free(&st);
}

TEST_MAIN(TEST_CASE(state_keeps_what_the_model_keeps_small_ring),
          TEST_CASE(state_keeps_what_the_model_keeps_growing_ring),
          TEST_CASE(sums_of_the_last_second_are_the_models_from_the_start),
          TEST_CASE(sums_switched_on_midway_count_open_zones_children),
          TEST_CASE(first_read_of_the_sums_switches_them_on))
