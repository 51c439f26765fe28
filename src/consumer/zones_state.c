/* zones_state.c — a consumer's CPU-zone state, rebuilt from ZONES sections
 * (see consumer.h "CPU zones" and docs/wire.md).
 *
 * Per thread, a begin takes the next slot of a ring of spans and pushes
 * it on the thread's open stack; an end pops the innermost, fills its end
 * time and adds to its location's sums (self time = duration minus the
 * children's durations, which each end adds to its parent). Frame markers
 * go to a ring of the last frames; spans that ended before the oldest
 * frame kept are let go. An end with nothing open belongs to a zone that
 * began before this state saw the thread (a late join, a gap, a reset):
 * it is counted and ignored, which keeps every later span exact because
 * ends always close the innermost zone.
 *
 * A section is read once: spy_zones_unpack checks all of it and writes
 * its events as packed words into a scratch the state keeps (a section's
 * length in words at most), and only a good section is applied, from the
 * words, with the thread's ring and stack in locals (apply_block).
 */
#include <stdlib.h>
#include <string.h>

#include "consumer/zones_state.h"

#define DEF_FRAMES 16u
#define DEF_SPANS 65536u
#define MAX_THREADS 1024u

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
  return &t->spans[(t->start + i) & (t->cap - 1)];
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

spy_zone_sums spy_state_zone_last_second(const spy_state *s,
                                         const spy_zone_location *l) {
  spy_zone_sums none = {0, 0, 0, 0};
  uint64_t now = s->zones.latest_ns / 1000000000ull;
  if (!l)
    return none;
  if (l->second == now)
    return l->last; /* `last` is the second before this one, if adjacent */
  if (l->second + 1 == now)
    return l->cur;
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
    spy_zone_location **v = realloc(z->locs, n * sizeof *v);
    if (!v)
      return SPY_ENOMEM;
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
      spy_zone_span *sp =
          &t->spans[(t->start + (uint32_t)(a - t->first)) & (t->cap - 1)];
      sp->end_ns = z->latest_ns > sp->start_ns ? z->latest_ns : sp->start_ns;
      sp->flags |= SPY_ZONE_SPAN_CUT;
    }
    z->cut++;
  }
  t->depth = 0;
  t->too_deep = 0;
}

/* Lets go of the oldest spans: past capacity, or ended before `keep_ns`. */
static void prune(spy_zone_thread *t, uint64_t keep_ns) {
  while (t->n) {
    spy_zone_span *sp = &t->spans[t->start];
    if (!sp->end_ns || sp->end_ns >= keep_ns)
      break;
    t->start = (t->start + 1) & (t->cap - 1);
    t->n--;
    t->first++;
  }
}

/* What one section's apply keeps at hand: the span cap, and the second
 * the last end fell in (a division per span otherwise). */
typedef struct apply_ctx {
  spy_zone_location **locs; /* z->locs, z->n_locs: unchanged by events */
  uint32_t n_locs;
  uint32_t max_spans;
  uint64_t sec, sec_lo_ns; /* end times in [sec_lo_ns, + 1 s) are in sec */
} apply_ctx;

static int begin(spy_zone_thread *t, const apply_ctx *c, uint64_t ns,
                 uint32_t loc) {
  if (__builtin_expect(t->depth >= SPY_ZONE_DEPTH_MAX || t->too_deep, 0)) {
    t->too_deep++;
    return 0;
  }
  uint32_t max = c->max_spans;
  if (__builtin_expect(t->n == t->cap, 0) &&
      t->cap < max) { /* grow, unrolling the ring */
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    if (cap > max)
      cap = max;
    spy_zone_span *v = malloc((size_t)cap * sizeof *v);
    if (!v)
      return SPY_ENOMEM;
    for (uint32_t i = 0; i < t->n; i++)
      v[i] = t->spans[(t->start + i) & (t->cap - 1)];
    free(t->spans);
    t->spans = v;
    t->cap = cap;
    t->start = 0;
  }
  if (t->n == t->cap) { /* full: the oldest goes, open or not */
    t->start = (t->start + 1) & (t->cap - 1);
    t->n--;
    t->first++;
  }
  if (t->depth == t->open_cap) {
    uint32_t cap = t->open_cap ? t->open_cap * 2 : 16;
    uint64_t *o = realloc(t->open, cap * sizeof *o);
    if (!o)
      return SPY_ENOMEM;
    t->open = o;
    uint64_t *ch = realloc(t->child_ns, cap * sizeof *ch);
    if (!ch)
      return SPY_ENOMEM;
    t->child_ns = ch;
    t->open_cap = cap;
  }
  spy_zone_span *sp = &t->spans[(t->start + t->n) & (t->cap - 1)];
  sp->start_ns = ns;
  sp->end_ns = 0;
  sp->loc = loc;
  sp->depth = (uint16_t)t->depth;
  sp->flags = 0;
  t->open[t->depth] = t->first + t->n;
  t->child_ns[t->depth] = 0;
  t->depth++;
  t->n++;
  return 0;
}

static inline __attribute__((always_inline)) void
add_sums(spy_zone_state *z, apply_ctx *c, uint32_t loc, uint64_t end_ns,
         uint64_t dur, uint64_t self) {
  (void)z;
  if (loc < SPY_ZONES_LOC_ID_MIN || loc - SPY_ZONES_LOC_ID_MIN >= c->n_locs ||
      !c->locs[loc - SPY_ZONES_LOC_ID_MIN])
    return; /* not known yet: its name comes with the next pass */
  spy_zone_location *l = c->locs[loc - SPY_ZONES_LOC_ID_MIN];
  if (__builtin_expect(end_ns - c->sec_lo_ns >= 1000000000ull, 0)) {
    c->sec = end_ns / 1000000000ull;
    c->sec_lo_ns = c->sec * 1000000000ull;
  }
  uint64_t sec = c->sec;
  if (sec != l->second) {
    if (sec == l->second + 1)
      l->last = l->cur;
    else
      memset(&l->last, 0, sizeof l->last);
    memset(&l->cur, 0, sizeof l->cur);
    l->second = sec;
  }
  l->cur.calls++;
  l->cur.total_ns += dur;
  l->cur.self_ns += self;
  if (dur > l->cur.max_ns)
    l->cur.max_ns = dur;
}

static void end(spy_zone_state *z, spy_zone_thread *t, apply_ctx *c,
                uint64_t ns) {
  if (__builtin_expect(t->too_deep != 0, 0)) {
    t->too_deep--;
    return;
  }
  if (!t->depth) {
    t->unmatched++;
    z->unmatched++;
    return;
  }
  t->depth--;
  uint64_t a = t->open[t->depth];
  uint64_t child = t->child_ns[t->depth];
  if (a < t->first)
    return; /* its slot was reused: the span is gone, the stack stays right */
  spy_zone_span *sp =
      &t->spans[(t->start + (uint32_t)(a - t->first)) & (t->cap - 1)];
  sp->end_ns = ns > sp->start_ns ? ns : sp->start_ns;
  uint64_t dur = sp->end_ns - sp->start_ns;
  if (t->depth)
    t->child_ns[t->depth - 1] += dur;
  add_sums(z, c, sp->loc, sp->end_ns, dur, dur > child ? dur - child : 0);
  z->spans++;
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

/* A thread's span ring and open stack in locals while one block is
 * applied; the general begin() / end() / frame_marker() take over (on
 * the thread itself) for what the fast cases below do not cover. */
typedef struct hot {
  spy_zone_span *spans;
  uint64_t *open, *child;
  uint64_t first;
  uint32_t mask, start, n, depth, room; /* room: depth < open_cap */
} hot;

static inline __attribute__((always_inline)) void
hot_load(hot *h, const spy_zone_thread *t) {
  h->spans = t->spans;
  h->open = t->open;
  h->child = t->child_ns;
  h->first = t->first;
  h->mask = t->cap - 1;
  h->start = t->start;
  h->n = t->n;
  h->depth = t->depth;
  h->room = t->too_deep || !t->cap ? 0 : t->open_cap - t->depth;
  if (h->room > SPY_ZONE_DEPTH_MAX - t->depth)
    h->room = SPY_ZONE_DEPTH_MAX - t->depth;
}

static inline __attribute__((always_inline)) void
hot_store(const hot *h, spy_zone_thread *t) {
  t->first = h->first;
  t->start = h->start;
  t->n = h->n;
  t->depth = h->depth;
}

/* The block's events from *wp on, up to its block-end word. */
static int apply_block(spy_zone_state *z, spy_zone_thread *t, apply_ctx *cp,
                       const uint64_t **wp, uint64_t *nsp, uint64_t *nev) {
  /* A copy whose address never leaves this function (the general paths
   * get another), so its fields stay in registers across span stores. */
  apply_ctx cl = *cp, *c = &cl;
  const uint64_t *w = *wp;
  uint64_t ns = *nsp, n = 0, spans = 0;
  /* The ring may only grow while it is below the cap: a full ring at the
   * cap drops its oldest span, the fast case here. */
  int at_cap = t->cap >= c->max_spans;
  hot h;
  hot_load(&h, t);
  int rc = 0;
  for (;; n++) {
    uint64_t x = *w++;
    ns += x >> SPY_ZPK_DELTA_SHIFT;
    uint32_t kind = (uint32_t)(x & 3u);
    if (kind == SPY_ZPK_BEGIN) {
      if (__builtin_expect(h.room != 0 && (h.n <= h.mask || at_cap), 1)) {
        if (h.n > h.mask) { /* full: the oldest goes, open or not */
          h.start = (h.start + 1) & h.mask;
          h.n--;
          h.first++;
        }
        spy_zone_span *sp = &h.spans[(h.start + h.n) & h.mask];
        sp->start_ns = ns;
        sp->end_ns = 0;
        sp->loc = (uint32_t)(x >> 2) & 0xffffu;
        sp->depth = (uint16_t)h.depth;
        sp->flags = 0;
        h.open[h.depth] = h.first + h.n;
        h.child[h.depth] = 0;
        h.depth++;
        h.room--;
        h.n++;
        continue;
      }
      hot_store(&h, t);
      rc = begin(t, cp, ns, (uint32_t)(x >> 2) & 0xffffu);
      hot_load(&h, t);
      at_cap = t->cap >= c->max_spans;
      if (rc < 0)
        break;
      continue;
    }
    if (kind == SPY_ZPK_END) {
      if (__builtin_expect(h.depth != 0 && !t->too_deep, 1)) {
        h.depth--;
        h.room++;
        uint64_t a = h.open[h.depth];
        if (a < h.first)
          continue; /* its slot was reused: the span is gone */
        spy_zone_span *sp =
            &h.spans[(h.start + (uint32_t)(a - h.first)) & h.mask];
        uint64_t e = ns > sp->start_ns ? ns : sp->start_ns;
        sp->end_ns = e;
        uint64_t dur = e - sp->start_ns, child = h.child[h.depth];
        if (h.depth)
          h.child[h.depth - 1] += dur;
        add_sums(z, c, sp->loc, e, dur, dur > child ? dur - child : 0);
        spans++;
        continue;
      }
      hot_store(&h, t);
      *cp = cl;
      end(z, t, cp, ns);
      cl = *cp;
      hot_load(&h, t);
      continue;
    }
    if (kind == SPY_ZPK_FRAME) {
      hot_store(&h, t);
      frame_marker(z, *w++, ns); /* prunes every thread, this one too */
      hot_load(&h, t);
      continue;
    }
    if (((x >> 2) & 0xffffu) != SPY_ZPK_ADVANCE)
      break; /* the block's end */
    ns += *w++;
    n--; /* not an event */
  }
  hot_store(&h, t);
  *cp = cl;
  z->spans += spans;
  *wp = w;
  *nsp = ns;
  *nev = n;
  return rc;
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
  apply_ctx c = {.locs = z->locs,
                 .n_locs = z->n_locs,
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
    rc = apply_block(z, t, &c, &w, &ns, &n);
    z->events += n;
    if (ns > z->latest_ns)
      z->latest_ns = ns; /* a block's times only grow */
    if (rc < 0)
      return rc;
  }
  return 0;
}
