/* zones_state.c — a consumer's CPU-zone state, rebuilt from ZONES sections
 * (see consumer.h "CPU zones" and docs/wire.md).
 *
 * Per thread, a begin takes the next slot of a ring of spans (span number
 * a lives at a & (cap - 1), so a slot never moves) and pushes its number
 * on the thread's open stack; an end pops the innermost and fills its end
 * time. Frame markers go to a ring of the last frames; spans that ended
 * before the oldest frame kept are let go. An end with nothing open
 * belongs to a zone that began before this state saw the thread (a late
 * join, a gap, a reset): it is counted and ignored, which keeps every
 * later span exact because ends always close the innermost zone.
 *
 * What costs per span is only that: no allocation (the rings grow by
 * doubling until they hold keep_spans, then are reused), no lookup. The
 * per-location sums of the last second (self time needs every open zone's
 * children's time) are kept only once somebody asks for them
 * (spy_state_zone_last_second): a second variant of the loop does them,
 * in a dense array indexed by location id.
 *
 * A section is read once: spy_zones_unpack checks all of it and writes
 * its events as packed words into a scratch the state keeps (a section's
 * length in words at most), and only a good section is applied, from the
 * words, with the thread's ring and stack in locals (run()); the general
 * begin_slow() / end_slow() / frame_marker() handle the rest.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "consumer/zones_state.h"

#define DEF_FRAMES 16u
#define DEF_SPANS 65536u
#define MAX_THREADS 1024u
#define NS_PER_S 1000000000ull

/* One location's sums: the second `second` in progress, and the one
 * before it in `last` (zero if that second had no calls). The blocks of a
 * section come thread after thread, so an end may be a little older than
 * the newest one summed: it goes to `last` when it falls in that second. */
struct spy__zone_sum {
  uint64_t second;
  spy_zone_sums cur, last;
  uint64_t known; /* its location record came: summed from then on */
};

void spy_state_zones_keep(spy_state *s, uint32_t frames, uint32_t spans) {
  s->zones.keep_frames = frames;
  s->zones.keep_spans = spans;
}

static uint32_t keep_frames(const spy_zone_state *z) {
  uint32_t f = z->keep_frames ? z->keep_frames : DEF_FRAMES;
  return f < SPY_ZONE_FRAMES_MAX - 1 ? f : SPY_ZONE_FRAMES_MAX - 1;
}

/* A power of two: ring positions are masks, not divisions. */
static uint32_t keep_spans(const spy_zone_state *z) {
  uint32_t n = z->keep_spans ? z->keep_spans : DEF_SPANS, p = 16;
  while (p < n && p < (1u << 30))
    p <<= 1;
  return p;
}

void spy__state_zones_free(spy_state *s) {
  spy_zone_state *z = &s->zones;
  for (uint32_t i = 0; i < z->n_locs; i++)
    if (z->locs[i]) {
      free(z->locs[i]->name);
      free(z->locs[i]->function);
      free(z->locs[i]->file);
      free(z->locs[i]);
    }
  free(z->locs);
  free(z->sums);
  for (uint32_t i = 0; i < z->n_threads; i++) {
    free(z->threads[i].spans);
    free(z->threads[i].open);
    free(z->threads[i].child_ns);
  }
  free(z->threads);
  free(z->scratch);
  uint32_t kf = z->keep_frames, ks = z->keep_spans;
  memset(z, 0, sizeof *z);
  z->keep_frames = kf;
  z->keep_spans = ks;
}

const spy_zone_location *spy_state_zone_loc(const spy_state *s, uint32_t id) {
  const spy_zone_state *z = &s->zones;
  if (id < SPY_ZONES_LOC_ID_MIN || id - SPY_ZONES_LOC_ID_MIN >= z->n_locs)
    return NULL;
  return z->locs[id - SPY_ZONES_LOC_ID_MIN];
}

const spy_zone_span *spy_zone_thread_span(const spy_zone_thread *t,
                                          uint32_t i) {
  if (i >= t->n)
    return NULL;
  return &t->spans[(t->first + i) & (t->cap - 1)];
}

int spy_state_zone_frame(const spy_state *s, uint32_t age, uint64_t *frame,
                         uint64_t *start_ns, uint64_t *end_ns) {
  const spy_zone_state *z = &s->zones;
  if (age >= z->n_frames)
    return 0;
  uint32_t i =
      (z->frames_head + SPY_ZONE_FRAMES_MAX - 1 - age) % SPY_ZONE_FRAMES_MAX;
  if (frame)
    *frame = z->frames[i].frame;
  if (start_ns)
    *start_ns = z->frames[i].start_ns;
  if (end_ns)
    *end_ns = age ? z->frames[(i + 1) % SPY_ZONE_FRAMES_MAX].start_ns : 0;
  return 1;
}

/* ---- the per-location sums ----------------------------------------------- */

/* The open zones' children's time, from the spans still held: every closed
 * span one deeper than an open zone and begun after it is its child. */
static void rebuild_child(spy_zone_thread *t) {
  if (!t->child_ns)
    return;
  uint64_t *child = t->child_ns + 1;
  for (uint32_t d = 0; d < t->depth; d++)
    child[d] = 0;
  if (!t->depth || !t->n)
    return;
  uint64_t a = t->open[0] > t->first ? t->open[0] : t->first;
  for (; a < t->first + t->n; a++) {
    const spy_zone_span *sp = &t->spans[a & (t->cap - 1)];
    uint32_t d = sp->depth;
    if (sp->end_ns && d >= 1 && d <= t->depth && a > t->open[d - 1])
      child[d - 1] += sp->end_ns - sp->start_ns;
  }
}

void spy_state_zones_sums(spy_state *s, int on) {
  spy_zone_state *z = &s->zones;
  if (!on) {
    z->sums_on = 0;
    return;
  }
  if (z->sums_on)
    return;
  z->sums_on = 1;
  /* The second in progress is only partly seen: sums count from the next
   * one on. */
  z->sums_from = z->latest_ns / NS_PER_S + 1;
  if (z->sums)
    for (uint32_t i = 0; i < z->n_locs; i++)
      z->sums[i] = (spy__zone_sum){.known = z->locs[i] != NULL};
  for (uint32_t i = 0; i < z->n_threads; i++)
    rebuild_child(&z->threads[i]);
}

spy_zone_sums spy_state_zone_last_second(const spy_state *s,
                                         const spy_zone_location *l) {
  spy_zone_sums none = {0, 0, 0, 0};
  const spy_zone_state *z = &s->zones;
  if (!z->sums_on) {
    /* Asked for: kept from now on (the state is not const where it lives:
     * the consumer's, or the caller's own). */
    spy_state_zones_sums((spy_state *)(uintptr_t)s, 1);
    return none;
  }
  uint64_t now = z->latest_ns / NS_PER_S;
  if (!l || !z->sums || l->id < SPY_ZONES_LOC_ID_MIN ||
      l->id - SPY_ZONES_LOC_ID_MIN >= z->n_locs || now < z->sums_from + 1)
    return none; /* before the first whole second summed */
  const spy__zone_sum *m = &z->sums[l->id - SPY_ZONES_LOC_ID_MIN];
  if (m->second == now)
    return m->last; /* `last` is the second before this one, if adjacent */
  if (m->second + 1 == now)
    return m->cur;
  return none;
}

/* ---- applying ------------------------------------------------------------ */

static char *dup_n(const char *p, uint32_t n) {
  char *d = malloc((size_t)n + 1);
  if (d) {
    memcpy(d, p, n);
    d[n] = 0;
  }
  return d;
}

static int put_loc(spy_zone_state *z, const spy_zone_loc_info *li) {
  uint32_t slot = li->id - SPY_ZONES_LOC_ID_MIN;
  if (slot >= z->n_locs) {
    uint32_t n = z->n_locs ? z->n_locs : 64;
    while (n <= slot)
      n *= 2;
    if (n > SPY_ZONES_LOC_ID_MAX - SPY_ZONES_LOC_ID_MIN + 1)
      n = SPY_ZONES_LOC_ID_MAX - SPY_ZONES_LOC_ID_MIN + 1;
    spy__zone_sum *m = realloc(z->sums, n * sizeof *m);
    if (!m)
      return SPY_ENOMEM;
    memset(m + z->n_locs, 0, (n - z->n_locs) * sizeof *m);
    z->sums = m;
    spy_zone_location **v = realloc(z->locs, n * sizeof *v);
    if (!v)
      return SPY_ENOMEM; /* sums has room for n: harmless */
    memset(v + z->n_locs, 0, (n - z->n_locs) * sizeof *v);
    z->locs = v;
    z->n_locs = n;
  }
  spy_zone_location *l = z->locs[slot];
  if (!l) {
    l = calloc(1, sizeof *l);
    if (!l)
      return SPY_ENOMEM;
    z->locs[slot] = l;
    z->sums[slot].known = 1;
  }
  char *name = dup_n(li->name, li->name_len);
  char *fn = dup_n(li->function, li->function_len);
  char *file = dup_n(li->file, li->file_len);
  if (!name || !fn || !file) {
    free(name);
    free(fn);
    free(file);
    return SPY_ENOMEM;
  }
  free(l->name);
  free(l->function);
  free(l->file);
  l->name = name;
  l->function = fn;
  l->file = file;
  l->id = li->id;
  l->line = li->line;
  l->color = li->color;
  return 0;
}

static spy_zone_thread *get_thread(spy_zone_state *z, uint32_t id) {
  for (uint32_t i = 0; i < z->n_threads; i++)
    if (z->threads[i].thread == id)
      return &z->threads[i];
  if (z->n_threads >= MAX_THREADS)
    return NULL;
  if (z->n_threads == z->threads_cap) {
    uint32_t cap = z->threads_cap ? z->threads_cap * 2 : 8;
    spy_zone_thread *v = realloc(z->threads, cap * sizeof *v);
    if (!v)
      return NULL;
    z->threads = v;
    z->threads_cap = cap;
  }
  spy_zone_thread *t = &z->threads[z->n_threads++];
  memset(t, 0, sizeof *t);
  t->thread = id;
  return t;
}

/* Closes every open zone of t as cut (its end was lost). */
static void cut_open(spy_zone_state *z, spy_zone_thread *t) {
  for (uint32_t d = 0; d < t->depth; d++) {
    uint64_t a = t->open[d];
    if (a >= t->first && a < t->first + t->n) {
      spy_zone_span *sp = &t->spans[a & (t->cap - 1)];
      sp->end_ns = z->latest_ns > sp->start_ns ? z->latest_ns : sp->start_ns;
      sp->flags |= SPY_ZONE_SPAN_CUT;
    }
    z->cut++;
  }
  t->depth = 0;
  t->too_deep = 0;
}

/* Lets go of the oldest spans that ended before `keep_ns`. */
static void prune(spy_zone_thread *t, uint64_t keep_ns) {
  while (t->n) {
    spy_zone_span *sp = &t->spans[t->first & (t->cap - 1)];
    if (!sp->end_ns || sp->end_ns >= keep_ns)
      break;
    t->n--;
    t->first++;
  }
  t->start = (uint32_t)(t->first & (t->cap - 1));
}

/* What one section's apply keeps at hand. */
typedef struct apply_ctx {
  spy__zone_sum *sums; /* z->sums, z->n_locs: unchanged by events */
  uint32_t n_sums;
  uint32_t max_spans;
  uint64_t sec, sec_lo_ns; /* end times in [sec_lo_ns, + 1 s) are in sec */
} apply_ctx;

/* Makes room in t for one more span and one more open zone: the ring
 * doubles (up to the cap; at the cap the oldest span goes, open or not),
 * the open stack doubles. 0 or SPY_ENOMEM (nothing changed). */
static int make_room(spy_zone_thread *t, uint32_t max) {
  if (t->n == t->cap && t->cap < max) {
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    if (cap > max)
      cap = max;
    spy_zone_span *v = malloc((size_t)cap * sizeof *v);
    if (!v)
      return SPY_ENOMEM;
    for (uint64_t a = t->first; a < t->first + t->n; a++)
      v[a & (cap - 1)] = t->spans[a & (t->cap - 1)];
    free(t->spans);
    t->spans = v;
    t->cap = cap;
    t->start = (uint32_t)(t->first & (cap - 1));
  }
  if (t->depth == t->open_cap) {
    uint32_t cap = t->open_cap ? t->open_cap * 2 : 16;
    uint64_t *o = realloc(t->open, cap * sizeof *o);
    if (!o)
      return SPY_ENOMEM;
    t->open = o;
    /* child_ns[0] is the outermost zone's parent: a slot to write to */
    uint64_t *ch = realloc(t->child_ns, (cap + 1) * sizeof *ch);
    if (!ch)
      return SPY_ENOMEM;
    if (!t->open_cap)
      ch[0] = 0;
    t->child_ns = ch;
    t->open_cap = cap;
  }
  return 0;
}

static int begin_slow(spy_zone_thread *t, const apply_ctx *c, uint64_t ns,
                      uint32_t loc) {
  if (t->depth >= SPY_ZONE_DEPTH_MAX || t->too_deep) {
    t->too_deep++;
    return 0;
  }
  int rc = make_room(t, c->max_spans);
  if (rc < 0)
    return rc;
  if (t->n == t->cap) { /* full at the cap: the oldest goes, open or not */
    t->n--;
    t->first++;
    t->start = (uint32_t)(t->first & (t->cap - 1));
  }
  uint64_t a = t->first + t->n;
  t->spans[a & (t->cap - 1)] =
      (spy_zone_span){ns, 0, loc, (uint16_t)t->depth, 0};
  t->open[t->depth] = a;
  t->child_ns[t->depth + 1] = 0;
  t->depth++;
  t->n++;
  return 0;
}

static inline __attribute__((always_inline)) void
add_sums(apply_ctx *c, uint32_t loc, uint64_t end_ns, uint64_t dur,
         uint64_t self) {
  uint32_t i = loc - SPY_ZONES_LOC_ID_MIN;
  if (__builtin_expect(i >= c->n_sums || !c->sums[i].known, 0))
    return; /* not known yet: its name comes with the next pass */
  spy__zone_sum *m = &c->sums[i];
  if (__builtin_expect(end_ns - c->sec_lo_ns >= NS_PER_S, 0)) {
    c->sec = end_ns / NS_PER_S;
    c->sec_lo_ns = c->sec * NS_PER_S;
  }
  uint64_t sec = c->sec;
  spy_zone_sums *to = &m->cur;
  if (__builtin_expect(sec != m->second, 0)) {
    if (sec > m->second) { /* a later second: cur becomes last, if adjacent */
      if (sec == m->second + 1)
        m->last = m->cur;
      else
        memset(&m->last, 0, sizeof m->last);
      memset(&m->cur, 0, sizeof m->cur);
      m->second = sec;
    } else if (sec + 1 == m->second) {
      to = &m->last; /* another thread's block, behind this one in time */
    } else {
      return; /* older than what is kept */
    }
  }
  to->calls++;
  to->total_ns += dur;
  to->self_ns += self;
  if (dur > to->max_ns)
    to->max_ns = dur;
}

/* Closes the innermost open zone of t at ns (the general case). Returns 1
 * if a span was closed. */
static int end_slow(spy_zone_state *z, spy_zone_thread *t, apply_ctx *c,
                    uint64_t ns, int sums) {
  if (t->too_deep) {
    t->too_deep--;
    return 0;
  }
  if (!t->depth) {
    t->unmatched++;
    z->unmatched++;
    return 0;
  }
  t->depth--;
  uint64_t a = t->open[t->depth];
  if (a < t->first)
    return 0; /* its slot was reused: the span is gone, the stack stays right */
  spy_zone_span *sp = &t->spans[a & (t->cap - 1)];
  sp->end_ns = ns > sp->start_ns ? ns : sp->start_ns;
  if (sums) {
    uint64_t dur = sp->end_ns - sp->start_ns, ch = t->child_ns[t->depth + 1];
    t->child_ns[t->depth] += dur;
    add_sums(c, sp->loc, sp->end_ns, dur, dur > ch ? dur - ch : 0);
  }
  return 1;
}

static void frame_marker(spy_zone_state *z, uint64_t frame, uint64_t ns) {
  z->frames[z->frames_head].frame = frame;
  z->frames[z->frames_head].start_ns = ns;
  z->frames_head = (z->frames_head + 1) % SPY_ZONE_FRAMES_MAX;
  if (z->n_frames < SPY_ZONE_FRAMES_MAX)
    z->n_frames++;
  uint32_t kf = keep_frames(z);
  if (z->n_frames > kf) {
    uint64_t keep_ns = z->frames[(z->frames_head + SPY_ZONE_FRAMES_MAX - kf) %
                                 SPY_ZONE_FRAMES_MAX]
                           .start_ns;
    for (uint32_t i = 0; i < z->n_threads; i++)
      prune(&z->threads[i], keep_ns);
  }
}

/* A thread's ring and stack in locals while one block is applied. A begin
 * is fast while the ring has room or is at its cap (then the oldest span
 * goes: `first` moves on when n reaches the cap, n >> shift) and the
 * stack has room below `lim`; an end while something is open and no zone
 * is too deep. `level` counts the zones too deep too (they are the
 * innermost, above a full stack: too_deep > 0 only at SPY_ZONE_DEPTH_MAX),
 * so one compare tells both. Anything else goes to the general functions,
 * on the thread itself, and the locals are loaded again. */
typedef struct hot {
  spy_zone_span *spans;
  uint64_t *open, *child; /* child: child_ns + 1 */
  uint64_t first, head;   /* head: the next span's number */
  uint64_t mask, glim;    /* glim: n below it is fast */
  uint32_t shift, level, lim;
} hot;

static inline __attribute__((always_inline)) void
hot_load(hot *h, const spy_zone_thread *t, uint32_t max_spans) {
  h->spans = t->spans;
  h->open = t->open;
  h->child = t->child_ns ? t->child_ns + 1 : NULL;
  h->first = t->first;
  h->head = t->first + t->n;
  h->mask = t->cap - 1u;
  h->glim = !t->cap ? 0 : t->cap >= max_spans ? (uint64_t)t->cap + 1 : t->cap;
  h->shift = t->cap ? (uint32_t)__builtin_ctz(t->cap) : 0;
  h->level = t->depth + t->too_deep;
  h->lim = t->open_cap < SPY_ZONE_DEPTH_MAX ? t->open_cap : SPY_ZONE_DEPTH_MAX;
}

static inline __attribute__((always_inline)) void
hot_store(const hot *h, spy_zone_thread *t) {
  t->first = h->first;
  t->n = (uint32_t)(h->head - h->first);
  t->start = (uint32_t)(h->first & h->mask);
  t->depth = h->level - t->too_deep; /* the fast paths keep too_deep */
}

/* A new span, its location, depth and flags (0) in one store where the
 * layout allows. */
static inline __attribute__((always_inline)) void
put_span(spy_zone_span *sp, uint64_t ns, uint32_t loc, uint32_t depth) {
  sp->start_ns = ns;
  sp->end_ns = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  _Static_assert(
      offsetof(spy_zone_span, depth) == offsetof(spy_zone_span, loc) + 4 &&
          offsetof(spy_zone_span, flags) == offsetof(spy_zone_span, loc) + 6,
      "loc, depth, flags: one 8-byte word");
  uint64_t meta = loc | (uint64_t)depth << 32;
  memcpy((char *)sp + offsetof(spy_zone_span, loc), &meta, sizeof meta);
#else
  sp->loc = loc;
  sp->depth = (uint16_t)depth;
  sp->flags = 0;
#endif
}

/* The block's events from *wp on, up to its block-end word. `sums` is a
 * constant in each caller: the loop without the sums has none of their
 * work. 0 or SPY_ENOMEM. */
static inline __attribute__((always_inline)) int
run(spy_zone_state *z, spy_zone_thread *t, apply_ctx *cp, const uint64_t **wp,
    uint64_t *nsp, uint64_t *nev, const int sums) {
  /* A copy whose address never leaves this function (the general paths
   * get another), so its fields stay in registers across span stores. */
  apply_ctx cl = *cp, *c = &cl;
  const uint64_t *w = *wp, *w0 = *wp;
  uint64_t ns = *nsp, extra = 0, closed = 0;
  hot h;
  hot_load(&h, t, c->max_spans);
  int rc = 0;
  for (;;) {
    uint64_t x = *w++;
    ns += x >> SPY_ZPK_DELTA_SHIFT;
    uint32_t kind = (uint32_t)(x & 3u);
    if (kind == SPY_ZPK_BEGIN) {
      uint64_t n = h.head - h.first;
      uint32_t loc = (uint32_t)(x >> 2) & 0xffffu;
      if (__builtin_expect(n < h.glim && h.level < h.lim, 1)) {
        h.first += n >> h.shift; /* 1 only when full at the cap */
        put_span(&h.spans[h.head & h.mask], ns, loc, h.level);
        h.open[h.level] = h.head++;
        if (sums)
          h.child[h.level] = 0;
        h.level++;
        continue;
      }
      hot_store(&h, t);
      rc = begin_slow(t, cp, ns, loc);
      hot_load(&h, t, c->max_spans);
      if (rc < 0)
        break;
      continue;
    }
    if (kind == SPY_ZPK_END) {
      if (__builtin_expect(h.level - 1u < SPY_ZONE_DEPTH_MAX, 1)) {
        uint64_t a = h.open[--h.level];
        if (__builtin_expect(a < h.first, 0))
          continue; /* its slot was reused: the span is gone */
        spy_zone_span *sp = &h.spans[a & h.mask];
        uint64_t s0 = sp->start_ns, e = ns > s0 ? ns : s0;
        sp->end_ns = e;
        closed++;
        if (sums) {
          uint64_t dur = e - s0, ch = h.child[h.level];
          h.child[(int64_t)h.level - 1] += dur; /* child_ns[0]: a spare */
          add_sums(c, sp->loc, e, dur, dur > ch ? dur - ch : 0);
        }
        continue;
      }
      hot_store(&h, t);
      *cp = cl;
      closed += (uint64_t)end_slow(z, t, cp, ns, sums);
      cl = *cp;
      hot_load(&h, t, c->max_spans);
      continue;
    }
    if (kind == SPY_ZPK_FRAME) {
      hot_store(&h, t);
      frame_marker(z, *w++, ns); /* prunes every thread, this one too */
      hot_load(&h, t, c->max_spans);
      extra++; /* the frame number's word */
      continue;
    }
    if (((x >> 2) & 0xffffu) != SPY_ZPK_ADVANCE)
      break; /* the block's end */
    ns += *w++;
    extra += 2; /* not an event */
  }
  hot_store(&h, t);
  *cp = cl;
  z->spans += closed;
  *wp = w;
  *nsp = ns;
  /* words less the raw ones, less the block end (or the begin that failed) */
  *nev = (uint64_t)(w - w0) - extra - 1;
  return rc;
}

static int run_plain(spy_zone_state *z, spy_zone_thread *t, apply_ctx *c,
                     const uint64_t **wp, uint64_t *nsp, uint64_t *nev) {
  return run(z, t, c, wp, nsp, nev, 0);
}

static int run_sums(spy_zone_state *z, spy_zone_thread *t, apply_ctx *c,
                    const uint64_t **wp, uint64_t *nsp, uint64_t *nev) {
  return run(z, t, c, wp, nsp, nev, 1);
}

/* The scratch for one section's packed events: s->len words at most. */
static int scratch(spy_zone_state *z, size_t len) {
  if (len <= z->scratch_cap)
    return 0;
  size_t cap = z->scratch_cap ? z->scratch_cap : 4096;
  while (cap < len)
    cap *= 2;
  uint64_t *w = realloc(z->scratch, cap * sizeof *w);
  if (!w)
    return SPY_ENOMEM;
  z->scratch = w;
  z->scratch_cap = cap;
  return 0;
}

int spy__state_zones_apply(spy_state *s, const spy_section *sec) {
  spy_zone_state *z = &s->zones;
  int rc = scratch(z, sec->len);
  if (rc < 0)
    return rc;
  /* One pass over the bytes checks the whole section and unpacks its
   * events; nothing is applied unless all of it is good. */
  spy_zones_iter it;
  size_t nw;
  rc = spy_zones_unpack(sec, &it, z->scratch, z->scratch_cap, &nw);
  if (rc < 0)
    return rc;
  if (s->frames_lost != z->seen_lost) {
    /* Frames were lost: ends of zones open now may be among them. */
    z->seen_lost = s->frames_lost;
    for (uint32_t i = 0; i < z->n_threads; i++)
      cut_open(z, &z->threads[i]);
  }
  spy_zone_loc_info li;
  while (spy_zones_next_loc(&it, &li))
    if ((rc = put_loc(z, &li)) < 0)
      return rc;
  apply_ctx c = {.sums = z->sums,
                 .n_sums = z->n_locs,
                 .max_spans = keep_spans(z),
                 .sec_lo_ns = UINT64_MAX};
  const uint64_t *w = z->scratch;
  spy_zone_thread_info ti;
  spy_zone_event_iter ev;
  while (spy_zones_next_thread(&it, &ti, &ev)) {
    spy_zone_thread *t = get_thread(z, ti.thread);
    if (!t) { /* too many threads: this one is not kept */
      while (*w++ != (SPY_ZPK_SPECIAL | SPY_ZPK_BLOCK_END << 2))
        ;
      continue;
    }
    t->os_tid = ti.os_tid;
    if (ti.flags & SPY_ZONES_THREAD_NAMED) {
      memcpy(t->name, ti.name, ti.name_len);
      t->name[ti.name_len] = 0;
    }
    if (ti.flags & SPY_ZONES_THREAD_RESET)
      cut_open(z, t);
    if (ti.flags & SPY_ZONES_THREAD_GONE)
      t->gone = 1;
    z->dropped += ti.dropped > t->dropped ? ti.dropped - t->dropped : 0;
    t->dropped = ti.dropped;
    uint64_t ns = it.base_ns, n = 0;
    rc = z->sums_on ? run_sums(z, t, &c, &w, &ns, &n)
                    : run_plain(z, t, &c, &w, &ns, &n);
    z->events += n;
    if (ns > z->latest_ns)
      z->latest_ns = ns; /* a block's times only grow */
    if (rc < 0)
      return rc;
  }
  return 0;
}
