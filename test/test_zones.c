/* test_zones.c — CPU zones end to end: the ZONES codec (round trip,
 * malformed input refused), nothing written while nobody subscribes to
 * zones, nesting and order rebuilt exactly by a consumer in another
 * process (deep nesting, a zone left open across many flushes, frame
 * markers), whole-zone drops that are counted (what arrives plus what was
 * dropped is what was opened), several threads at once with their names,
 * span times as the thread's clock saw them (the drain's batch loop),
 * a late joiner resolving location names, and no allocation on an
 * instrumented thread after its first zone (malloc interposed; skipped
 * under the sanitizers, which own malloc). */
#include <pthread.h>
#include <stdatomic.h>

#define SPY_ENABLE /* SPY_ZONE for real (cleanup attribute) */

#include "spyglass/consumer.h"
#include "spyglass/provider.h"
#include "spyglass/zones.h"
#include "testlib.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#ifndef SANITIZED
#include "alloc_counter.h"
#endif

static char dir[256];

static void fresh_dir(void) {
  if (dir[0])
    tu_rm_rf(dir);
  tu_rundir(dir, sizeof dir);
}

static spy_provider_desc pdesc(uint32_t ring_bytes) {
  spy_provider_desc d = {.name = "zones",
                         .dir = dir,
                         .flush_ms = 20,
                         .idle_ping_ms = 100,
                         .ack_grace_ms = 1000,
                         .checkpoint_ms = 300,
                         .zone_buffer_bytes = ring_bytes};
  return d;
}

static spy_consumer_desc cdesc(uint32_t features) {
  spy_consumer_desc d = {.dir = dir,
                         .features = features,
                         .query_initial_ms = 30,
                         .query_max_ms = 120,
                         .ack_ms = 100,
                         .liveness_ms = 2000,
                         .no_clock_sync = 1,
                         .zone_frames = 250,
                         .zone_spans = 1u << 20};
  return d;
}

/* Waits until p publishes a zone epoch (a zones subscriber is served). */
static int wait_zones_on(spy_provider *p, double seconds) {
  double end = tu_now_s() + seconds;
  while (!spy__zone_epoch(p) && tu_now_s() < end) {
    spy_frame_begin(p); /* the inline transport serves from here */
    spy_frame_end(p);
    usleep(1000);
  }
  return spy__zone_epoch(p) != 0;
}

static const spy_zone_thread *thread_named(const spy_state *s,
                                           const char *name) {
  for (uint32_t i = 0; i < s->zones.n_threads; i++)
    if (strcmp(s->zones.threads[i].name, name) == 0)
      return &s->zones.threads[i];
  return NULL;
}

static const char *span_name(const spy_state *s, const spy_zone_span *sp) {
  const spy_zone_location *l = spy_state_zone_loc(s, sp->loc);
  return l ? l->name : "?";
}

/* Spans of t that are closed. */
static uint32_t closed_spans(const spy_zone_thread *t) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->n; i++)
    n += spy_zone_thread_span(t, i)->end_ns != 0;
  return n;
}

/* ---- the codec ----------------------------------------------------------- */

static int encode_sample(uint8_t *buf, size_t cap) {
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 1, 0, 0);
  spy_zones_writer z;
  spy_zones_begin(&z, &w, SPY_ZONES_FULL, 1000);
  spy_zone_loc_info l = {.id = 16,
                         .line = 42,
                         .color = 0xff0000,
                         .name = "update",
                         .name_len = 6,
                         .function = "tick",
                         .function_len = 4,
                         .file = "game.c",
                         .file_len = 6};
  spy_zones_put_loc(&z, &l);
  l.id = 300;
  l.name = "draw";
  l.name_len = 4;
  spy_zones_put_loc(&z, &l);
  spy_zone_thread_info t = {.thread = 1,
                            .os_tid = 77,
                            .flags = SPY_ZONES_THREAD_RESET,
                            .name = "main",
                            .name_len = 4,
                            .dropped = 5};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, 1000, 9);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 1010, 16);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 1030, 300);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 1000000000, 0);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 1000000001, 0);
  t = (spy_zone_thread_info){.thread = 2};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 2000, 0);
  spy_zones_end(&z);
  return spy_frame_finish(&w);
}

TEST(zones_section_round_trips) {
  uint8_t buf[1024];
  int n = encode_sample(buf, sizeof buf);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_ZONES, &s));
  spy_zones_iter it;
  CHECK_OK(spy_get_zones(&s, &it));
  CHECK_EQ(it.n_locs, 2);
  CHECK_EQ(it.n_threads, 2);
  CHECK_EQ(it.flags, SPY_ZONES_FULL);
  spy_zone_loc_info l;
  CHECK(spy_zones_next_loc(&it, &l));
  CHECK_EQ(l.id, 16);
  CHECK_EQ(l.line, 42);
  CHECK_EQ(l.color, 0xff0000);
  CHECK(l.name_len == 6 && memcmp(l.name, "update", 6) == 0);
  CHECK(l.file_len == 6 && memcmp(l.file, "game.c", 6) == 0);
  CHECK(spy_zones_next_loc(&it, &l));
  CHECK_EQ(l.id, 300);
  CHECK(!spy_zones_next_loc(&it, &l));
  spy_zone_thread_info t;
  spy_zone_event_iter ev;
  spy_zone_event e;
  CHECK(spy_zones_next_thread(&it, &t, &ev));
  CHECK_EQ(t.thread, 1);
  CHECK_EQ(t.os_tid, 77);
  CHECK_EQ(t.dropped, 5);
  CHECK_EQ(t.flags, SPY_ZONES_THREAD_RESET);
  CHECK(t.name_len == 4 && memcmp(t.name, "main", 4) == 0);
  static const struct {
    uint8_t kind;
    uint64_t t, v;
  } want[] = {{SPY_ZONE_EV_FRAME, 1000, 9},
              {SPY_ZONE_EV_BEGIN, 1010, 16},
              {SPY_ZONE_EV_BEGIN, 1030, 300},
              {SPY_ZONE_EV_END, 1000000000, 0},
              {SPY_ZONE_EV_END, 1000000001, 0}};
  for (size_t i = 0; i < 5; i++) {
    CHECK(spy_zone_event_next(&ev, &e));
    CHECK_EQ(e.kind, want[i].kind);
    CHECK_EQ(e.t_ns, want[i].t);
    CHECK_EQ(e.value, want[i].v);
  }
  CHECK(!spy_zone_event_next(&ev, &e));
  CHECK(spy_zones_next_thread(&it, &t, &ev));
  CHECK_EQ(t.thread, 2);
  CHECK(spy_zone_event_next(&ev, &e));
  CHECK_EQ(e.t_ns, 2000);
  CHECK(!spy_zones_next_thread(&it, &t, &ev));
}

/* Applies a ZONES section's bytes to a fresh state; returns the error. */
static int decode_section(const uint8_t *data, size_t len) {
  spy_section s = {.id = SPY_SEC_ZONES, .len = (uint32_t)len, .data = data};
  spy_zones_iter it;
  return spy_get_zones(&s, &it);
}

TEST(zones_decoder_rejects_malformed_sections) {
  uint8_t buf[1024];
  int n = encode_sample(buf, sizeof buf);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_ZONES, &s));
  uint8_t b[1024];
  memcpy(b, s.data, s.len);
  CHECK_EQ(decode_section(b, s.len), 0);
  /* Where the second thread's events are (its block is the last). */
  spy_zones_iter it;
  spy_zone_thread_info ti;
  spy_zone_event_iter ev;
  CHECK_OK(spy_get_zones(&s, &it));
  CHECK(spy_zones_next_thread(&it, &ti, &ev));
  CHECK(spy_zones_next_thread(&it, &ti, &ev));
  size_t ev_off = (size_t)(ev.p - s.data), content = (size_t)(ev.end - s.data);
  for (uint32_t cut = 0; cut < content; cut++) /* every cut into content */
    CHECK(decode_section(b, cut) < 0);
  b[2] = 1; /* reserved */
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
  b[2] = 0;
  spy_wr32(b + 8, 1000000); /* more threads than bytes */
  CHECK_EQ(decode_section(b, s.len), SPY_EBADSECTION);
  spy_wr32(b + 8, 2);
  spy_wr32(b + 24, 3); /* a location id below the first */
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
  spy_wr32(b + 24, 16);
  CHECK_EQ(content - ev_off, 2); /* one end event, a 2-byte varint */
  b[ev_off] = 0x83;              /* kind 3 */
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
  b[ev_off] = 0x80; /* a varint that runs to the end of the block */
  b[ev_off + 1] = 0x80;
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
  memcpy(b, s.data, s.len);
  b[ev_off - 16] = 0x08; /* thread flags: an unknown bit */
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
  /* Time overflow: base near the top, then a big delta. */
  memcpy(b, s.data, s.len);
  spy_wr64(b + 16, UINT64_MAX - 5);
  CHECK_EQ(decode_section(b, s.len), SPY_EBADVALUE);
}

/* The sample with a third thread whose deltas do not fit a packed word's
 * 46-bit field (an end 2^50 ns on, a frame 2^55 ns after it). */
static int encode_big(uint8_t *buf, size_t cap) {
  uint8_t tmp[1024];
  int n = encode_sample(tmp, sizeof tmp);
  spy_frame f;
  spy_section s;
  if (n < 0 || spy_frame_decode(tmp, (size_t)n, &f, NULL) ||
      !spy_frame_find_section(&f, SPY_SEC_ZONES, &s))
    return -1;
  spy_frame_writer w;
  spy_frame_start(&w, buf, cap, SPY_MSG_DATA, 1, 0, 0);
  spy_zones_writer z;
  spy_zones_begin(&z, &w, 0, 1000);
  spy_zone_thread_info t = {.thread = 3};
  spy_zones_thread_begin(&z, &t);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 1001, 17);
  spy_zones_put_event(&z, SPY_ZONE_EV_END, 1001 + (1ull << 50), 0);
  spy_zones_put_event(&z, SPY_ZONE_EV_FRAME, 1001 + (1ull << 55), 1u << 30);
  spy_zones_put_event(&z, SPY_ZONE_EV_BEGIN, 1002 + (1ull << 55), 65535);
  spy_zones_end(&z);
  return spy_frame_finish(&w);
}

/* The events spy_zones_unpack wrote for a block, as the iterator gives
 * them; n events at most. Returns the events, -1 on a malformed word. */
static int packed_events(const uint64_t **wp, uint64_t base,
                         spy_zone_event *out, int n) {
  const uint64_t *w = *wp;
  uint64_t t = base;
  int k = 0;
  for (;;) {
    uint64_t x = *w++;
    t += x >> SPY_ZPK_DELTA_SHIFT;
    if ((x & 3u) == SPY_ZPK_SPECIAL) {
      if (((x >> 2) & 0xffffu) == SPY_ZPK_BLOCK_END)
        break;
      if (((x >> 2) & 0xffffu) != SPY_ZPK_ADVANCE || x >> 18)
        return -1;
      t += *w++;
      continue;
    }
    if (k == n)
      return -1;
    out[k].kind = (uint8_t)(x & 3u);
    out[k].t_ns = t;
    out[k].value = (x & 3u) == SPY_ZPK_BEGIN   ? (x >> 2) & 0xffffu
                   : (x & 3u) == SPY_ZPK_FRAME ? *w++
                                               : 0;
    k++;
  }
  *wp = w;
  return k;
}

/* unpack's verdict and events against spy_get_zones and the iterators;
 * 1 if they agree. */
static int unpack_agrees(const uint8_t *data, size_t len) {
  spy_section s = {.id = SPY_SEC_ZONES, .len = (uint32_t)len, .data = data};
  spy_zones_iter a, b;
  static uint64_t words[1024];
  size_t nw;
  int ra = spy_get_zones(&s, &a);
  int rb = spy_zones_unpack(&s, &b, words, len, &nw);
  if (ra != rb || nw > len)
    return 0;
  if (ra < 0)
    return nw == 0;
  if (spy_zones_unpack(&s, &b, words, len - 1, &nw) != SPY_ENOBUFS)
    return 0;
  if (spy_zones_unpack(&s, &b, words, len, &nw) != 0)
    return 0;
  const uint64_t *w = words;
  spy_zone_thread_info ta, tb;
  spy_zone_event_iter ea, eb;
  while (spy_zones_next_thread(&a, &ta, &ea)) {
    if (!spy_zones_next_thread(&b, &tb, &eb) || ta.thread != tb.thread)
      return 0;
    spy_zone_event got[64], e;
    int n = packed_events(&w, b.base_ns, got, 64), k = 0;
    if (n < 0)
      return 0;
    for (; spy_zone_event_next(&ea, &e); k++)
      if (k >= n || e.kind != got[k].kind || e.t_ns != got[k].t_ns ||
          e.value != got[k].value)
        return 0;
    if (k != n)
      return 0;
  }
  return (size_t)(w - words) == nw;
}

TEST(one_pass_unpack_agrees_with_the_validating_iterators) {
  uint8_t buf[1024], b[1024];
  for (int which = 0; which < 2; which++) {
    int n =
        which ? encode_big(buf, sizeof buf) : encode_sample(buf, sizeof buf);
    CHECK(n > 0);
    spy_frame f;
    spy_section s;
    CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
    CHECK(spy_frame_find_section(&f, SPY_SEC_ZONES, &s));
    CHECK(unpack_agrees(s.data, s.len));
    for (uint32_t cut = 0; cut < s.len; cut++)
      CHECK(unpack_agrees(s.data, cut));
    /* Every byte set to values that matter to varints, kinds and ids. */
    static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x03, 0x0f, 0x10,
                                   0x7f, 0x80, 0x81, 0x83, 0xfe, 0xff};
    for (uint32_t i = 0; i < s.len; i++)
      for (size_t v = 0; v < sizeof vals; v++) {
        memcpy(b, s.data, s.len);
        b[i] = vals[v];
        CHECK(unpack_agrees(b, s.len));
      }
  }
}

TEST(a_bad_section_applies_nothing) {
  /* Thread 1's block is good, thread 2's last event is not: the state
   * must not take thread 1's zones either. */
  uint8_t buf[1024];
  int n = encode_sample(buf, sizeof buf);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_state st;
  CHECK_OK(spy_state_init(&st, 4));
  CHECK_OK(spy_state_apply(&st, &f, 1)); /* good: applied */
  CHECK_EQ(st.zones.spans, 2);
  CHECK_EQ(st.zones.events, 6);
  spy_section s;
  CHECK(spy_frame_find_section(&f, SPY_SEC_ZONES, &s));
  buf[(size_t)(s.data - buf) + s.len - 4] = 0x83; /* thread 2: kind 3 */
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  CHECK_EQ(spy_state_apply(&st, &f, 2), SPY_EBADVALUE);
  CHECK_EQ(st.zones.spans, 2);
  CHECK_EQ(st.zones.events, 6);
  CHECK_EQ(st.zones.threads[0].n, 2);
  spy_state_free(&st);
}

/* ---- the provider ---------------------------------------------------------
 */

TEST(unsubscribed_zones_write_nothing) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  CHECK_OK(spy_provider_create(&p, &d));
  static spy_zone_loc loc = SPY_ZONE_LOC("idle", 0);
  for (int i = 0; i < 100000; i++) {
    spy_zone_begin(p, &loc);
    spy_zone_end(p);
  }
  /* A subscriber without the zones feature: still nothing written. */
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_STATS);
  CHECK_OK(spy_consumer_create(&c, &cd));
  spy_provider_stats st;
  double end = tu_now_s() + 10;
  do {
    spy_frame_begin(p);
    SPY_ZONE(p, "frame"); /* unsubscribed: one load, one branch */
    spy_zone_begin(p, &loc);
    spy_zone_end(p);
    spy_frame_end(p);
    spy_consumer_poll(c, 1);
    spy_provider_get_stats(p, &st);
  } while (!(st.features & SPY_FEAT_STATS) && tu_now_s() < end);
  CHECK(st.features & SPY_FEAT_STATS);
  for (int i = 0; i < 100000; i++) {
    spy_zone_begin(p, &loc);
    spy_zone_end(p);
  }
  spy_provider_get_stats(p, &st);
  CHECK_EQ(spy__zone_epoch(p), 0);
  CHECK_EQ(st.zone_threads, 0); /* no ring was ever made */
  CHECK_EQ(st.zone_records, 0);
  CHECK_EQ(st.zones_dropped, 0);
  CHECK_EQ(__atomic_load_n(&loc.id, __ATOMIC_RELAXED), 0); /* not even that */
  CHECK_EQ(spy_zone_locations(), 0); /* nor any SPY_ZONE location */
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* The known sequence both processes agree on: per frame, a "frame" zone
 * holding "update" with 4 "substep"s, then a recursion of "deep" zones
 * `depth` deep. Zone `long` opens before frame 0 and closes after the
 * last, across many flushes. */
#define FRAMES 12
#define DEEP 200
static spy_zone_loc L_long = {"long", "seq", "test_zones.c", 1, 0, 0};
static spy_zone_loc L_frame = {"frame", "seq", "test_zones.c", 2, 0, 0};
static spy_zone_loc L_update = {"update", "seq", "test_zones.c", 3, 0, 0};
static spy_zone_loc L_sub = {"substep", "seq", "test_zones.c", 4, 0, 0};
static spy_zone_loc L_deep = {"deep", "seq", "test_zones.c", 5, 0xff00, 0};

static void deep(spy_provider *p, int n) {
  if (!n)
    return;
  spy_zone_begin(p, &L_deep);
  deep(p, n - 1);
  spy_zone_end(p);
}

static void sequence(spy_provider *p) {
  spy_zone_begin(p, &L_long);
  for (int f = 0; f < FRAMES; f++) {
    spy_frame_begin(p);
    spy_zone_begin(p, &L_frame);
    spy_zone_begin(p, &L_update);
    for (int k = 0; k < 4; k++) {
      spy_zone_begin(p, &L_sub);
      spy_zone_end(p);
    }
    spy_zone_end(p);
    deep(p, DEEP);
    spy_zone_end(p);
    spy_frame_end(p);
    usleep(30000); /* > flush_ms and many service ticks */
  }
  spy_zone_end(p);
}

/* What the consumer must hold, in begin order: (name, depth). */
static int expected(const char **names, int *depths, int cap) {
  int n = 0;
  names[n] = "long", depths[n++] = 0;
  for (int f = 0; f < FRAMES && n + 6 + DEEP <= cap; f++) {
    names[n] = "frame", depths[n++] = 1;
    names[n] = "update", depths[n++] = 2;
    for (int k = 0; k < 4; k++)
      names[n] = "substep", depths[n++] = 3;
    for (int d = 0; d < DEEP; d++)
      names[n] = "deep", depths[n++] = 2 + d;
  }
  return n;
}

TEST(nesting_and_order_rebuilt_exactly_in_another_process) {
  fresh_dir();
  int go[2], done[2];
  CHECK(pipe(go) == 0 && pipe(done) == 0);
  pid_t pid = tu_fork();
  if (pid == 0) {
    spy_provider *p;
    spy_provider_desc d = pdesc(0);
    if (spy_provider_create(&p, &d) < 0)
      _exit(3);
    spy_thread_name(p, "main");
    if (!wait_zones_on(p, 20))
      _exit(4);
    sequence(p);
    spy_provider_stats st;
    double end = tu_now_s() + 10;
    uint64_t want = 2 * (1 + FRAMES * (6 + DEEP)) + 2 * FRAMES;
    do { /* until the service drained it all */
      usleep(2000);
      spy_provider_get_stats(p, &st);
    } while (st.zone_records < want && tu_now_s() < end);
    char c = st.zones_dropped ? 'D' : 'k';
    if (write(done[1], &c, 1) != 1)
      _exit(5);
    if (read(go[0], &c, 1) != 1) /* the parent has read everything */
      _exit(6);
    spy_provider_destroy(p);
    _exit(0);
  }
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES | SPY_FEAT_STATS);
  CHECK_OK(spy_consumer_create(&c, &cd));
  const spy_state *s = spy_consumer_state(c);
  static const char *names[1 + FRAMES * (6 + DEEP)];
  static int depths[1 + FRAMES * (6 + DEEP)];
  int n = expected(names, depths, (int)(sizeof names / sizeof names[0]));
  const spy_zone_thread *t = NULL;
  /* Until the whole sequence arrived, `long` included. */
  CHECK(POLL_UNTIL(
      c, 30, (t = thread_named(s, "main")) && closed_spans(t) >= (uint32_t)n));
  char ok;
  CHECK(read(done[0], &ok, 1) == 1);
  CHECK_EQ(ok, 'k'); /* nothing dropped: the comparison below is exact */
  spy_consumer_poll(c, 50);
  t = thread_named(s, "main");
  CHECK_EQ(t->n, n);
  for (int i = 0; i < n; i++) {
    const spy_zone_span *sp = spy_zone_thread_span(t, (uint32_t)i);
    CHECK_STR(span_name(s, sp), names[i]);
    CHECK_EQ(sp->depth, depths[i]);
    CHECK(sp->end_ns >= sp->start_ns);
    CHECK_EQ(sp->flags, 0);
  }
  /* Children lie within their parents; siblings follow each other. */
  for (int i = 1; i < n; i++) {
    const spy_zone_span *a = spy_zone_thread_span(t, (uint32_t)i);
    for (int j = i - 1; j >= 0; j--) {
      const spy_zone_span *b = spy_zone_thread_span(t, (uint32_t)j);
      if (b->depth == a->depth - 1) {
        CHECK(a->start_ns >= b->start_ns && a->end_ns <= b->end_ns);
        break;
      }
      if (b->depth == a->depth) {
        CHECK(a->start_ns >= b->end_ns);
        break;
      }
    }
  }
  /* `long` spans every frame: 12 * 30 ms at least. */
  const spy_zone_span *lg = spy_zone_thread_span(t, 0);
  CHECK(lg->end_ns - lg->start_ns >= (uint64_t)FRAMES * 30000000ull);
  /* The frame markers split the timeline: FRAMES frames, in order, each
   * starting before its "frame" zone. */
  CHECK(s->zones.n_frames >= FRAMES);
  uint64_t fno, fstart, prev = 0;
  for (int a = FRAMES - 1; a >= 0; a--) {
    CHECK(spy_state_zone_frame(s, (uint32_t)a, &fno, &fstart, NULL));
    CHECK(fstart >= prev);
    prev = fstart;
  }
  const spy_zone_location *l =
      spy_state_zone_loc(s, spy_zone_thread_span(t, 1)->loc);
  CHECK(l && l->line == 2);
  CHECK_STR(l->file, "test_zones.c");
  CHECK_EQ(s->zones.unmatched, 0);
  CHECK_EQ(s->malformed, 0);
  CHECK(write(go[1], "x", 1) == 1);
  CHECK_EQ(tu_wait(pid, 20), 0);
  spy_consumer_destroy(c);
}

/* A tiny ring, filled far faster than the service drains it: zones are
 * dropped whole and counted; what arrives always nests. */
static uint64_t emit_burst(spy_provider *p, int rounds) {
  static spy_zone_loc a = {"a", "burst", "test_zones.c", 10, 0, 0};
  static spy_zone_loc b = {"b", "burst", "test_zones.c", 11, 0, 0};
  uint64_t zones = 0;
  for (int r = 0; r < rounds; r++) {
    spy_zone_begin(p, &a);
    for (int k = 0; k < 3; k++) {
      spy_zone_begin(p, &b);
      spy_zone_end(p);
    }
    spy_zone_end(p);
    zones += 4;
  }
  return zones;
}

TEST(drops_are_whole_zones_and_counted) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(4096); /* 512 records */
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  double end = tu_now_s() + 10;
  while (!spy__zone_epoch(p) && tu_now_s() < end)
    spy_consumer_poll(c, 5);
  CHECK(spy__zone_epoch(p));
  spy_thread_name(p, "burst");
  uint64_t emitted = 0;
  for (int i = 0; i < 20; i++) {
    emitted += emit_burst(p, 2000); /* 16000 records into 512 */
    spy_consumer_poll(c, 5);
  }
  spy_provider_stats st;
  const spy_state *s = spy_consumer_state(c);
  const spy_zone_thread *t = NULL;
  /* Until everything recorded arrived: spans + drops account for all. */
  CHECK(POLL_UNTIL(c, 20,
                   (spy_provider_get_stats(p, &st), 1) &&
                       (t = thread_named(s, "burst")) &&
                       t->dropped == st.zones_dropped &&
                       closed_spans(t) + t->dropped == emitted));
  CHECK(st.zones_dropped > 0);
  CHECK(t->n > 0);
  CHECK_EQ(s->zones.unmatched, 0);
  /* Every span closed, and each "b" lies inside an "a". */
  for (uint32_t i = 0; i < t->n; i++) {
    const spy_zone_span *sp = spy_zone_thread_span(t, i);
    CHECK(sp->end_ns != 0);
    CHECK_EQ(sp->flags, 0);
    if (strcmp(span_name(s, sp), "b") == 0)
      CHECK_EQ(sp->depth, 1);
    else
      CHECK_EQ(sp->depth, 0);
  }
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* Span times as the thread's own clock saw them, through the drain's
 * batch loop: many locations (ids of two varint bytes), zones from empty
 * to tens of microseconds long (deltas of one to three bytes), a child in
 * every other one. Each span lasts at least what the thread measured
 * inside it and at most what it measured around it (2 % and 2 us for the
 * tick rate's error); each starts after the one before it ended. */
#define TIMED 160
static spy_zone_loc L_timed[TIMED];
static uint64_t mono_ns(void) { return (uint64_t)(tu_now_s() * 1e9); }

TEST(span_times_match_the_thread_clock) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  double end = tu_now_s() + 10;
  while (!spy__zone_epoch(p) && tu_now_s() < end)
    spy_consumer_poll(c, 5);
  CHECK(spy__zone_epoch(p));
  spy_thread_name(p, "timed");
  static spy_zone_loc child = {"child", "timed", "test_zones.c", 60, 0, 0};
  static uint64_t inside[TIMED], around[TIMED];
  for (int i = 0; i < TIMED; i++) {
    L_timed[i] = (spy_zone_loc){
        "timed", "timed", "test_zones.c", (uint32_t)(1000 + i), 0, 0};
    uint64_t busy = (uint64_t)(i % 8) * 5000; /* 0 .. 35 us */
    uint64_t t0 = mono_ns();
    spy_zone_begin(p, &L_timed[i]);
    uint64_t t1 = mono_ns();
    if (i % 2) {
      spy_zone_begin(p, &child);
      spy_zone_end(p);
    }
    while (mono_ns() - t1 < busy)
      ;
    uint64_t t2 = mono_ns();
    spy_zone_end(p);
    uint64_t t3 = mono_ns();
    inside[i] = t2 - t1;
    around[i] = t3 - t0;
    if (i % 16 == 0)
      spy_consumer_poll(c, 0);
  }
  CHECK(spy_zone_locations() >= 128); /* the last ids take two bytes */
  const spy_state *s = spy_consumer_state(c);
  const spy_zone_thread *t = NULL;
  CHECK(POLL_UNTIL(c, 20,
                   (t = thread_named(s, "timed")) &&
                       closed_spans(t) + t->dropped >= TIMED + TIMED / 2));
  CHECK_EQ(t->dropped, 0);
  CHECK_EQ(s->zones.unmatched, 0);
  int i = 0;
  const spy_zone_span *prev = NULL;
  for (uint32_t k = 0; k < t->n; k++) {
    const spy_zone_span *sp = spy_zone_thread_span(t, k);
    const spy_zone_location *l = spy_state_zone_loc(s, sp->loc);
    CHECK(l != NULL);
    if (strcmp(l->name, "child") == 0) {
      CHECK_EQ(sp->depth, 1);
      continue;
    }
    CHECK_EQ(sp->depth, 0);
    CHECK_EQ(l->line, 1000u + (uint32_t)i);
    uint64_t dur = sp->end_ns - sp->start_ns;
    if (dur * 1.02 + 2000 < (double)inside[i] ||
        dur > around[i] * 1.02 + 2000) {
      fprintf(stderr, "zone %d: %llu ns, measured %llu inside, %llu around\n",
              i, (unsigned long long)dur, (unsigned long long)inside[i],
              (unsigned long long)around[i]);
      CHECK(0);
    }
    if (prev)
      CHECK(sp->start_ns >= prev->end_ns);
    prev = sp;
    i++;
  }
  CHECK_EQ(i, TIMED);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* Several threads at once, each with its own name and sequence. */
#define THREADS 4
typedef struct worker_arg {
  spy_provider *p;
  int index;
  uint64_t zones;
  _Atomic int *stop;
} worker_arg;

static void *zone_worker(void *arg) {
  worker_arg *w = arg;
  char name[16];
  snprintf(name, sizeof name, "worker-%d", w->index);
  spy_thread_name(w->p, name);
  static spy_zone_loc outer = {"outer", "zone_worker", "test_zones.c", 20, 0,
                               0};
  static spy_zone_loc inner = {"inner", "zone_worker", "test_zones.c", 21, 0,
                               0};
  for (int r = 0; r < 3000; r++) {
    spy_zone_begin(w->p, &outer);
    for (int k = 0; k <= w->index; k++) {
      spy_zone_begin(w->p, &inner);
      spy_zone_end(w->p);
    }
    spy_zone_end(w->p);
    w->zones += 2 + (uint64_t)w->index;
    if (r % 100 == 0)
      usleep(500);
  }
  return NULL;
}

TEST(several_threads_at_once) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  double end = tu_now_s() + 10;
  while (!spy__zone_epoch(p) && tu_now_s() < end)
    spy_consumer_poll(c, 5);
  CHECK(spy__zone_epoch(p));
  pthread_t th[THREADS];
  worker_arg wa[THREADS];
  for (int i = 0; i < THREADS; i++) {
    wa[i] = (worker_arg){.p = p, .index = i};
    CHECK(pthread_create(&th[i], NULL, zone_worker, &wa[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    while (pthread_tryjoin_np(th[i], NULL) != 0)
      spy_consumer_poll(c, 2);
  }
  const spy_state *s = spy_consumer_state(c);
  for (int i = 0; i < THREADS; i++) {
    char name[16];
    snprintf(name, sizeof name, "worker-%d", i);
    const spy_zone_thread *t = NULL;
    CHECK(POLL_UNTIL(c, 20,
                     (t = thread_named(s, name)) && t->gone &&
                         closed_spans(t) + t->dropped == wa[i].zones));
    for (uint32_t k = 0; k < t->n; k++) {
      const spy_zone_span *sp = spy_zone_thread_span(t, k);
      int outer = strcmp(span_name(s, sp), "outer") == 0;
      CHECK_EQ(sp->depth, outer ? 0 : 1);
    }
  }
  CHECK_EQ(s->zones.unmatched, 0);
  /* The exited threads' rings are let go once drained. */
  spy_provider_stats st;
  end = tu_now_s() + 10;
  do {
    spy_consumer_poll(c, 5);
    spy_provider_get_stats(p, &st);
  } while (st.zone_threads && tu_now_s() < end);
  CHECK_EQ(st.zone_threads, 0);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

TEST(late_joiner_resolves_location_names) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  d.checkpoint_ms = 60000; /* the join itself must bring the names */
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *a;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&a, &cd));
  double end = tu_now_s() + 10;
  while (!spy__zone_epoch(p) && tu_now_s() < end)
    spy_consumer_poll(a, 5);
  static spy_zone_loc early = {"early", "late", "test_zones.c", 30, 0, 0};
  for (int i = 0; i < 10; i++) {
    spy_zone_begin(p, &early);
    spy_zone_end(p);
  }
  const spy_state *sa = spy_consumer_state(a);
  CHECK(POLL_UNTIL(a, 10, spy_state_zone_loc(sa, early.id) != NULL));
  /* B joins now: the location was sent long ago. */
  spy_consumer *b;
  CHECK_OK(spy_consumer_create(&b, &cd));
  const spy_state *sb = spy_consumer_state(b);
  CHECK(POLL_UNTIL(b, 10, sb->conn == SPY_CONN_CONNECTED));
  for (int i = 0; i < 10; i++) {
    spy_zone_begin(p, &early);
    spy_zone_end(p);
  }
  CHECK(POLL_UNTIL(b, 10,
                   sb->zones.n_threads && sb->zones.threads[0].n >= 10 &&
                       spy_state_zone_loc(sb, early.id)));
  CHECK_STR(spy_state_zone_loc(sb, early.id)->name, "early");
  CHECK_EQ(spy_state_zone_loc(sb, early.id)->line, 30);
  spy_consumer_destroy(b);
  spy_consumer_destroy(a);
  spy_provider_destroy(p);
}

/* SPY_ZONE closes where its block ends, early return included. */
static int scoped(spy_provider *p, int n) {
  SPY_ZONE(p, "scoped");
  for (int i = 0; i < n; i++) {
    SPY_ZONE_C(p, "iteration", 0x00ff00);
    if (i == 1)
      return i; /* both zones close here */
  }
  return 0;
}

TEST(scoped_zone_closes_at_block_end) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  CHECK(POLL_UNTIL(c, 10, spy__zone_epoch(p) != 0));
  spy_thread_name(p, "scoped");
  CHECK_EQ(scoped(p, 5), 1);
  CHECK_EQ(scoped(p, 0), 0);
  const spy_state *s = spy_consumer_state(c);
  const spy_zone_thread *t = NULL;
  CHECK(POLL_UNTIL(c, 10,
                   (t = thread_named(s, "scoped")) && closed_spans(t) == 4));
  static const char *const want[] = {"scoped", "iteration", "iteration",
                                     "scoped"};
  static const int depth[] = {0, 1, 1, 0};
  for (uint32_t i = 0; i < 4; i++) {
    const spy_zone_span *sp = spy_zone_thread_span(t, i);
    CHECK_STR(span_name(s, sp), want[i]);
    CHECK_EQ(sp->depth, depth[i]);
  }
  CHECK_EQ(spy_state_zone_loc(s, spy_zone_thread_span(t, 1)->loc)->color,
           0x00ff00);
  CHECK_EQ(t->depth, 0);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* The inline transport: the frame thread drains at its service ticks. */
TEST(inline_transport_drains_at_frame_ticks) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  d.transport = SPY_TRANSPORT_INLINE;
  CHECK_OK(spy_provider_create(&p, &d));
  CHECK_STR(spy_provider_transport_name(p), "inline");
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  spy_thread_name(p, "inline");
  static spy_zone_loc f = {"f", "inline", "test_zones.c", 50, 0, 0};
  double end = tu_now_s() + 10;
  int frames = 0;
  const spy_state *s = spy_consumer_state(c);
  const spy_zone_thread *t = NULL;
  while (tu_now_s() < end &&
         !((t = thread_named(s, "inline")) && closed_spans(t) >= 20)) {
    spy_frame_begin(p);
    spy_zone_begin(p, &f);
    usleep(500);
    spy_zone_end(p);
    spy_frame_end(p);
    frames++;
    spy_consumer_poll(c, 0);
  }
  CHECK(t && closed_spans(t) >= 20);
  CHECK(s->zones.n_frames > 0);
  CHECK_EQ(s->zones.unmatched, 0);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

/* The default ring (zone_buffer_bytes 0) holds SPY_ZONE_BUFFER_DEFAULT
 * bytes of records, 16 a zone less its reset record: with the inline
 * transport and no frame tick nothing drains it, so the zones that fit
 * are kept and the first one past it is dropped. */
TEST(default_ring_holds_its_documented_zones) {
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  d.transport = SPY_TRANSPORT_INLINE;
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES);
  CHECK_OK(spy_consumer_create(&c, &cd));
  double end = tu_now_s() + 10;
  while (!spy__zone_epoch(p) && tu_now_s() < end) {
    spy_frame_begin(p); /* the inline transport serves from here */
    spy_frame_end(p);
    spy_consumer_poll(c, 1);
  }
  CHECK(spy__zone_epoch(p));
  static spy_zone_loc f = {"fill", "default_ring", "test_zones.c", 1, 0, 0};
  const uint64_t fit = SPY_ZONE_BUFFER_DEFAULT / 16 - 1; /* the reset */
  spy_provider_stats s0, s1, s2;
  spy_provider_get_stats(p, &s0);
  for (uint64_t i = 0; i < fit; i++) {
    spy_zone_begin(p, &f);
    spy_zone_end(p);
  }
  spy_provider_get_stats(p, &s1);
  CHECK_EQ(s1.zones_dropped - s0.zones_dropped, 0);
  for (int i = 0; i < 10; i++) {
    spy_zone_begin(p, &f);
    spy_zone_end(p);
  }
  spy_provider_get_stats(p, &s2);
  CHECK_EQ(s2.zones_dropped - s1.zones_dropped, 10);
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
}

#ifndef SANITIZED
static _Atomic int alloc_stop;
static void *poller(void *arg) {
  while (!atomic_load(&alloc_stop))
    spy_consumer_poll(arg, 5);
  return NULL;
}
#endif

TEST(no_allocation_on_a_thread_after_its_first_zone) {
#ifdef SANITIZED
  fprintf(stderr, "  skipped: the sanitizer owns malloc\n");
#else
  fresh_dir();
  spy_provider *p;
  spy_provider_desc d = pdesc(0);
  CHECK_OK(spy_provider_create(&p, &d));
  spy_consumer *c;
  spy_consumer_desc cd = cdesc(SPY_FEAT_ZONES | SPY_FEAT_STATS);
  CHECK_OK(spy_consumer_create(&c, &cd));
  CHECK(POLL_UNTIL(c, 10, spy__zone_epoch(p) != 0));
  atomic_store(&alloc_stop, 0);
  pthread_t th;
  pthread_create(&th, NULL, poller, c);
  static spy_zone_loc x = {"x", "alloc", "test_zones.c", 40, 0, 0};
  static spy_zone_loc y = {"y", "alloc", "test_zones.c", 41, 0, 0};
  spy_zone_begin(p, &x); /* the first zone: the ring, the registrations */
  spy_zone_begin(p, &y);
  spy_zone_end(p);
  spy_zone_end(p);
  atomic_store(&allocs, 0);
  counting = 1;
  for (int f = 0; f < 3000; f++) {
    spy_frame_begin(p);
    spy_zone_begin(p, &x);
    for (int k = 0; k < 20; k++) {
      spy_zone_begin(p, &y);
      spy_zone_end(p);
    }
    spy_zone_end(p);
    spy_frame_end(p);
    if (f % 100 == 0)
      usleep(1000);
  }
  counting = 0;
  long n = atomic_load(&allocs);
  spy_provider_stats st;
  spy_provider_get_stats(p, &st);
  atomic_store(&alloc_stop, 1);
  pthread_join(th, NULL);
  CHECK_EQ(n, 0);
  CHECK(st.zone_records > 1000); /* zones really flowed meanwhile */
  spy_consumer_destroy(c);
  spy_provider_destroy(p);
#endif
}

TEST(the_alloc_counter_sees_allocations) {
#ifndef SANITIZED
  atomic_store(&allocs, 0);
  counting = 1;
  void *volatile q = malloc(16);
  counting = 0;
  free(q);
  CHECK(atomic_load(&allocs) > 0);
#endif
}

static void cleanup(void) {
  if (dir[0])
    tu_rm_rf(dir);
}

int main(int argc, char **argv) {
  static const struct spy_test_case cases[] = {
      TEST_CASE(zones_section_round_trips),
      TEST_CASE(zones_decoder_rejects_malformed_sections),
      TEST_CASE(one_pass_unpack_agrees_with_the_validating_iterators),
      TEST_CASE(a_bad_section_applies_nothing),
      TEST_CASE(unsubscribed_zones_write_nothing),
      TEST_CASE(nesting_and_order_rebuilt_exactly_in_another_process),
      TEST_CASE(drops_are_whole_zones_and_counted),
      TEST_CASE(span_times_match_the_thread_clock),
      TEST_CASE(several_threads_at_once),
      TEST_CASE(late_joiner_resolves_location_names),
      TEST_CASE(scoped_zone_closes_at_block_end),
      TEST_CASE(inline_transport_drains_at_frame_ticks),
      TEST_CASE(default_ring_holds_its_documented_zones),
      TEST_CASE(no_allocation_on_a_thread_after_its_first_zone),
      TEST_CASE(the_alloc_counter_sees_allocations)};
  int rc = spy_test_run(argc, argv, cases, sizeof cases / sizeof cases[0]);
  cleanup();
  return rc;
}
