/* test_profiler.c — the message profiler: ring wrap-around, summary
 * percentiles on known inputs, measure() and its error flag, attach/detach
 * on a fake transport's hook (its ops never touched), detaching while
 * another thread posts, the MSGPROF section, and recording from several
 * threads at once, each into its own lane. */
#include <pthread.h>
#include <unistd.h>

#include "profiler/profiler_internal.h"
#include "spyglass/profiler.h"
#include "testlib.h"
#include "testutil.h"

/* ---- synthetic records ----------------------------------------------- */

static void rec(spy_profiler *p, uint32_t type, uint64_t enc, uint64_t post,
                uint32_t bytes, uint32_t flags) {
  spy_msg_record r;
  memset(&r, 0, sizeof r);
  r.type = type;
  r.encode_ns = enc;
  r.post_ns = post;
  r.bytes = bytes;
  r.flags = flags;
  r.t_ns = 1;
  spy__profiler_record(p, &r);
}

TEST(create_resolves_defaults_and_rejects_bad_capacity) {
  spy_profiler *p;
  CHECK_OK(spy_profiler_create(&p, NULL));
  spy_profiler_desc d;
  spy_profiler_get_desc(p, &d);
  CHECK_EQ(d.capacity, 256);
  CHECK_EQ(d.scratch_bytes, SPY_PROFILER_DEFAULT_SCRATCH);
  CHECK_EQ(d.lanes, SPY_PROFILER_DEFAULT_LANES);
  CHECK_EQ(d.lane_capacity, 256);
  CHECK_EQ(d.no_size, 0);
  spy_profiler_destroy(p);
  spy_profiler_desc bad = {.capacity = 100};
  CHECK_EQ(spy_profiler_create(&p, &bad), SPY_EINVAL);
  CHECK(p == NULL);
  bad = (spy_profiler_desc){.scratch_bytes = SPY_FRAME_MAX + 4};
  CHECK_EQ(spy_profiler_create(&p, &bad), SPY_EINVAL);
  CHECK_EQ(spy_profiler_create(NULL, NULL), SPY_EINVAL);
  spy_profiler_destroy(NULL);
}

TEST(ring_wraps_around_and_returns_oldest_first) {
  spy_profiler *p;
  spy_profiler_desc d = {.capacity = 8};
  CHECK_OK(spy_profiler_create(&p, &d));
  for (int i = 0; i < 20; i++)
    rec(p, 1, (uint64_t)i, 0, 10, 0);
  CHECK_EQ(spy_profiler_count(p), 20);
  spy_msg_record out[16];
  CHECK_EQ(spy_profiler_messages(p, out, 16), 8);
  for (int i = 0; i < 8; i++) {
    CHECK_EQ(out[i].index, 12 + i);
    CHECK_EQ(out[i].encode_ns, 12 + i);
  }
  /* Fewer than the ring holds: the most recent ones, still in order. */
  CHECK_EQ(spy_profiler_messages(p, out, 3), 3);
  CHECK_EQ(out[0].index, 17);
  CHECK_EQ(out[2].index, 19);
  spy_profiler_reset(p);
  CHECK_EQ(spy_profiler_count(p), 0);
  CHECK_EQ(spy_profiler_messages(p, out, 16), 0);
  rec(p, 1, 5, 0, 10, 0);
  CHECK_EQ(spy_profiler_messages(p, out, 16), 1);
  CHECK_EQ(out[0].index, 0);
  spy_profiler_destroy(p);
}

TEST(summary_percentiles_on_known_inputs) {
  spy_profiler *p;
  spy_profiler_desc d = {.capacity = 128};
  CHECK_OK(spy_profiler_create(&p, &d));
  /* Type 1: encode 1..100 ns, post 10..1000 ns, in a scrambled order. */
  for (int i = 0; i < 100; i++) {
    uint64_t v = (uint64_t)((i * 37) % 100) + 1;
    rec(p, SPY_MSG_DATA, v, 10 * v, 1000, 0);
  }
  /* Type 6: three messages, one of them an error (left out of times). */
  rec(p, SPY_MSG_PING, 4, 8, 32, 0);
  rec(p, SPY_MSG_PING, 6, 12, 32, 0);
  rec(p, SPY_MSG_PING, 0, 0, 0, SPY_MSGREC_ERROR);
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.messages, 103);
  CHECK_EQ(s.errors, 1);
  CHECK_EQ(s.n_types, 2);
  const spy_msgprof_type *t = &s.types[0];
  CHECK_EQ(t->type, SPY_MSG_DATA);
  CHECK_EQ(t->count, 100);
  CHECK_EQ(t->bytes, 100000);
  CHECK_EQ(t->encode.mean_ns, 50); /* 5050 / 100, truncated */
  CHECK_EQ(t->encode.p50_ns, 50);  /* nearest rank */
  CHECK_EQ(t->encode.p99_ns, 99);
  CHECK_EQ(t->encode.max_ns, 100);
  CHECK_EQ(t->post.mean_ns, 505);
  CHECK_EQ(t->post.p50_ns, 500);
  CHECK_EQ(t->post.p99_ns, 990);
  CHECK_EQ(t->post.max_ns, 1000);
  t = &s.types[1];
  CHECK_EQ(t->type, SPY_MSG_PING);
  CHECK_EQ(t->count, 3);
  CHECK_EQ(t->errors, 1);
  CHECK_EQ(t->bytes, 64);
  CHECK_EQ(t->encode.mean_ns, 5);
  CHECK_EQ(t->encode.p50_ns, 4);
  CHECK_EQ(t->encode.p99_ns, 6);
  CHECK_EQ(t->encode.max_ns, 6);
  spy_profiler_destroy(p);
}

TEST(summary_percentiles_cover_the_ring_totals_cover_everything) {
  spy_profiler *p;
  spy_profiler_desc d = {.capacity = 16};
  CHECK_OK(spy_profiler_create(&p, &d));
  for (int i = 1; i <= 100; i++)
    rec(p, 3, (uint64_t)i, (uint64_t)i, 1, 0);
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.types[0].count, 100);
  CHECK_EQ(s.types[0].encode.mean_ns, 50);
  CHECK_EQ(s.types[0].encode.max_ns, 100);
  CHECK_EQ(s.types[0].encode.p50_ns, 92); /* last 16: 85..100 */
  CHECK_EQ(s.types[0].encode.p99_ns, 100);
  spy_profiler_destroy(p);
}

TEST(summary_folds_types_beyond_the_limit_into_zero) {
  spy_profiler *p;
  CHECK_OK(spy_profiler_create(&p, NULL));
  for (uint32_t t = 1; t <= SPY_PROFILER_MAX_TYPES + 10; t++)
    rec(p, t, t, 0, 1, 0);
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.n_types, SPY_PROFILER_MAX_TYPES);
  CHECK_EQ(s.types[0].type, 0);
  CHECK_EQ(s.types[0].count, 11);
  uint64_t total = 0;
  for (uint32_t i = 0; i < s.n_types; i++)
    total += s.types[i].count;
  CHECK_EQ(total, SPY_PROFILER_MAX_TYPES + 10);
  CHECK_EQ(s.types[0].encode.p99_ns, SPY_PROFILER_MAX_TYPES + 10);
  spy_profiler_destroy(p);
}

/* ---- measure ------------------------------------------------------------ */

static int encode_peer(spy_frame_writer *w, void *ctx) {
  spy_put_peer(w, *(uint64_t *)ctx, SPY_FEAT_STATS);
  return 0;
}

static int encode_fails(spy_frame_writer *w, void *ctx) {
  (void)w;
  (void)ctx;
  return SPY_EBADVALUE;
}

static int encode_big(spy_frame_writer *w, void *ctx) {
  (void)ctx;
  spy_frame_section_begin(w, SPY_SEC_HEALTH);
  static uint8_t junk[4096];
  spy_frame_put(w, junk, sizeof junk);
  return 0;
}

static int calls;
static spy_msg_record last;
static void on_message(const spy_msg_record *r, void *user) {
  calls++;
  last = *r;
  CHECK(user == &calls);
}

TEST(measure_reports_encode_time_and_exact_bytes) {
  spy_profiler *p;
  calls = 0;
  spy_profiler_desc d = {.on_message = on_message, .user = &calls};
  CHECK_OK(spy_profiler_create(&p, &d));
  uint64_t id = 42;
  spy_msg m = {.type = SPY_MSG_ACK, .encode = encode_peer, .ctx = &id};
  spy_msg_record r;
  CHECK_OK(spy_profiler_measure(p, &m, &r));
  /* The same message encoded independently. */
  uint8_t buf[256];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_ACK, 0, 0, 0);
  spy_put_peer(&w, 42, SPY_FEAT_STATS);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  CHECK_EQ(r.bytes, n);
  CHECK_EQ(r.type, SPY_MSG_ACK);
  CHECK_EQ(r.flags, SPY_MSGREC_MEASURED);
  CHECK_EQ(r.post_ns, 0);
  CHECK(r.encode_ns > 0);
  CHECK_EQ(r.err, 0);
  CHECK_EQ(calls, 1);
  CHECK_EQ(last.bytes, n);
  CHECK_EQ(spy_profiler_count(p), 1);
  /* measure() records have no post: post figures stay empty. */
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.types[0].post.p50_ns, 0);
  CHECK_EQ(s.types[0].encode.max_ns, r.encode_ns);
  CHECK_EQ(spy_profiler_measure(p, NULL, NULL), SPY_EINVAL);
  m.encode = NULL;
  CHECK_EQ(spy_profiler_measure(p, &m, NULL), SPY_EINVAL);
  spy_profiler_destroy(p);
}

TEST(measure_flags_an_encode_failure_with_zero_cost) {
  spy_profiler *p;
  spy_profiler_desc d = {.scratch_bytes = 1024};
  CHECK_OK(spy_profiler_create(&p, &d));
  spy_msg m = {.type = SPY_MSG_DATA, .encode = encode_fails};
  spy_msg_record r;
  CHECK_EQ(spy_profiler_measure(p, &m, &r), 0); /* not our failure */
  CHECK_EQ(r.flags, SPY_MSGREC_MEASURED | SPY_MSGREC_ERROR);
  CHECK_EQ(r.err, SPY_EBADVALUE);
  CHECK_EQ(r.encode_ns, 0);
  CHECK_EQ(r.bytes, 0);
  /* Too big for the scratch buffer: the writer's sticky error counts. */
  m.encode = encode_big;
  CHECK_EQ(spy_profiler_measure(p, &m, &r), 0);
  CHECK(r.flags & SPY_MSGREC_ERROR);
  CHECK_EQ(r.err, SPY_ENOBUFS);
  CHECK_EQ(r.encode_ns, 0);
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.errors, 2);
  CHECK_EQ(s.types[0].errors, 2);
  CHECK_EQ(s.types[0].encode.max_ns, 0);
  spy_profiler_destroy(p);
}

TEST(size_accounting_off_records_zero_bytes) {
  spy_profiler *p;
  spy_profiler_desc d = {.no_size = 1};
  CHECK_OK(spy_profiler_create(&p, &d));
  uint64_t id = 1;
  spy_msg m = {.type = SPY_MSG_ACK, .encode = encode_peer, .ctx = &id};
  spy_msg_record r;
  CHECK_OK(spy_profiler_measure(p, &m, &r));
  CHECK_EQ(r.bytes, 0);
  CHECK(r.encode_ns > 0);
  spy_msgprof_summary s;
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.flags, SPY_MSGPROF_NO_SIZE);
  CHECK_EQ(s.types[0].bytes, 0);
  spy_profiler_destroy(p);
}

/* ---- attach / detach on a fake transport ------------------------------ */

typedef struct fake_transport {
  spy_transport base;
  spy_buffer buf;
  uint8_t data[512];
  int post_rc;
  int posts, acquires, stats_calls, releases, disposed;
  uint32_t last_len;
} fake_transport;

static spy_buffer *fake_acquire(spy_transport *t, spy_tier tier) {
  fake_transport *f = (fake_transport *)t;
  (void)tier;
  f->acquires++;
  f->buf.data = f->data;
  f->buf.cap = sizeof f->data;
  f->buf.encode_ns = 999; /* stale: the encoder overwrites it */
  return &f->buf;
}
static int fake_post(spy_transport *t, spy_buffer *b, size_t len) {
  fake_transport *f = (fake_transport *)t;
  (void)b;
  f->posts++;
  f->last_len = (uint32_t)len;
  return f->post_rc;
}
static int fake_codec(spy_transport *t) {
  (void)t;
  return 1;
}
static void fake_release(spy_transport *t, spy_buffer *b) {
  (void)b;
  ((fake_transport *)t)->releases++;
}
static void fake_stats(spy_transport *t, spy_pool_stats *out) {
  ((fake_transport *)t)->stats_calls++;
  memset(out, 0, sizeof *out);
  out->posted = 7;
}
static void fake_dispose(spy_transport *t) {
  ((fake_transport *)t)->disposed++;
}
static const spy_transport_ops fake_ops = {.name = "fake",
                                           .acquire = fake_acquire,
                                           .post = fake_post,
                                           .convert = NULL,
                                           .codec_supported = fake_codec,
                                           .release_unused = fake_release,
                                           .pool_stats = fake_stats,
                                           .dispose = fake_dispose};

static void fake_init(fake_transport *f) {
  memset(f, 0, sizeof *f);
  f->base.ops = &fake_ops;
}

/* Encodes a ping into an acquired buffer like a provider would. */
static size_t encode_into(spy_buffer *b, uint32_t type) {
  spy_frame_writer w;
  spy_frame_start(&w, b->data, b->cap, type, 1, 2, 0);
  int n = spy_frame_finish(&w);
  return n > 0 ? (size_t)n : 0;
}

TEST(attach_measures_posts_and_leaves_the_ops_alone) {
  spy_profiler *p;
  CHECK_OK(spy_profiler_create(&p, NULL));
  fake_transport f;
  fake_init(&f);
  spy_transport *t = &f.base;
  CHECK(!spy_transport_timed(t));
  CHECK_OK(spy_profiler_attach(p, t));
  CHECK(t->ops == &fake_ops); /* never swapped */
  CHECK(spy_transport_timed(t));
  CHECK(spy_profiler_attached(p, t));
  spy_buffer *b = spy_transport_acquire(t, SPY_TIER_SMALL);
  CHECK(b == &f.buf);
  size_t len = encode_into(b, SPY_MSG_PING);
  b->encode_ns = 1234; /* the encoder timed itself */
  CHECK_EQ(spy_transport_post(t, b, len), 0);
  CHECK_EQ(f.posts, 1);
  CHECK_EQ(f.last_len, len);
  spy_msg_record r;
  CHECK_EQ(spy_profiler_messages(p, &r, 1), 1);
  CHECK_EQ(r.type, SPY_MSG_PING);
  CHECK_EQ(r.bytes, len);
  CHECK_EQ(r.encode_ns, 1234);
  CHECK_EQ(r.flags, 0);
  /* The transport's failure is returned untouched and flagged. */
  f.post_rc = SPY_ETOOBIG;
  b = spy_transport_acquire(t, SPY_TIER_SMALL);
  len = encode_into(b, SPY_MSG_DATA);
  CHECK_EQ(spy_transport_post(t, b, len), SPY_ETOOBIG);
  CHECK_EQ(spy_profiler_messages(p, &r, 1), 1);
  CHECK_EQ(r.flags, SPY_MSGREC_POST_FAILED);
  CHECK_EQ(r.err, SPY_ETOOBIG);
  CHECK_EQ(r.type, SPY_MSG_DATA);
  /* Not a frame: forwarded, flagged, zero cost. */
  f.post_rc = 0;
  CHECK_EQ(spy_transport_post(t, b, 8), 0);
  CHECK_EQ(f.posts, 3);
  CHECK_EQ(spy_profiler_messages(p, &r, 1), 1);
  CHECK_EQ(r.flags, SPY_MSGREC_ERROR);
  CHECK_EQ(r.err, SPY_EBADHEADER);
  CHECK_EQ(r.post_ns, 0);
  CHECK_EQ(spy_profiler_count(p), 3);
  CHECK_OK(spy_profiler_detach(p, t));
  CHECK(!spy_transport_timed(t));
  CHECK(!spy_profiler_attached(p, t));
  /* Posting after detach is not measured. */
  b = spy_transport_acquire(t, SPY_TIER_SMALL);
  CHECK_EQ(spy_transport_post(t, b, encode_into(b, SPY_MSG_PING)), 0);
  CHECK_EQ(spy_profiler_count(p), 3);
  CHECK_EQ(f.posts, 4);
  CHECK(t->ops == &fake_ops);
  spy_profiler_destroy(p);
}

TEST(attached_posts_honour_size_accounting_and_reach_the_callback) {
  spy_profiler *p;
  calls = 0;
  spy_profiler_desc d = {
      .no_size = 1, .on_message = on_message, .user = &calls};
  CHECK_OK(spy_profiler_create(&p, &d));
  fake_transport f;
  fake_init(&f);
  CHECK_OK(spy_profiler_wrap(p, &f.base)); /* the old name still works */
  spy_buffer *b = spy_transport_acquire(&f.base, SPY_TIER_SMALL);
  CHECK_EQ(spy_transport_post(&f.base, b, encode_into(b, SPY_MSG_PING)), 0);
  CHECK_EQ(calls, 1);
  CHECK_EQ(last.type, SPY_MSG_PING);
  CHECK_EQ(last.bytes, 0);
  CHECK_EQ(last.flags, 0);
  CHECK_EQ(last.index, 0);
  CHECK_OK(spy_profiler_unwrap(p, &f.base));
  spy_profiler_destroy(p);
}

TEST(attach_errors_and_several_profilers_and_transports) {
  spy_profiler *a, *b;
  CHECK_OK(spy_profiler_create(&a, NULL));
  CHECK_OK(spy_profiler_create(&b, NULL));
  fake_transport f1, f2, f3;
  fake_init(&f1);
  fake_init(&f2);
  fake_init(&f3);
  CHECK_OK(spy_profiler_attach(a, &f1.base));
  CHECK_EQ(spy_profiler_attach(a, &f1.base), SPY_EEXIST);
  CHECK_EQ(spy_profiler_attach(b, &f1.base), SPY_EBUSY);
  CHECK_EQ(spy_profiler_detach(a, &f2.base), SPY_ENOENT);
  CHECK_EQ(spy_profiler_detach(b, &f1.base), SPY_ENOENT);
  CHECK_OK(spy_profiler_attach(b, &f2.base));
  CHECK_OK(spy_profiler_attach(b, &f3.base)); /* one profiler, two */
  /* Each post lands in its own profiler. */
  spy_buffer *buf = spy_transport_acquire(&f1.base, SPY_TIER_SMALL);
  spy_transport_post(&f1.base, buf, encode_into(buf, SPY_MSG_PING));
  buf = spy_transport_acquire(&f2.base, SPY_TIER_SMALL);
  spy_transport_post(&f2.base, buf, encode_into(buf, SPY_MSG_ACK));
  buf = spy_transport_acquire(&f3.base, SPY_TIER_SMALL);
  spy_transport_post(&f3.base, buf, encode_into(buf, SPY_MSG_ACK));
  CHECK_EQ(spy_profiler_count(a), 1);
  CHECK_EQ(spy_profiler_count(b), 2);
  CHECK_OK(spy_profiler_detach(a, &f1.base));
  CHECK_OK(spy_profiler_detach(b, &f2.base));
  CHECK_OK(spy_profiler_detach(b, &f3.base));
  CHECK(f1.base.ops == &fake_ops && f2.base.ops == &fake_ops);
  CHECK(!spy_transport_timed(&f1.base) && !spy_transport_timed(&f3.base));
  CHECK_EQ(spy_profiler_attach(NULL, &f1.base), SPY_EINVAL);
  CHECK_EQ(spy_profiler_detach(a, NULL), SPY_EINVAL);
  spy_profiler_destroy(a);
  spy_profiler_destroy(b);
}

/* ---- attach and detach while another thread posts ---------------------- */

typedef struct poster_arg {
  spy_transport *t;
  spy_profiler *p;
  int n;
  _Atomic int *stop;
} poster_arg;

static void *poster(void *arg) {
  poster_arg *a = arg;
  for (int i = 0; a->stop ? !atomic_load(a->stop) : i < a->n; i++) {
    spy_buffer *b = spy_transport_acquire(a->t, SPY_TIER_SMALL);
    spy_transport_post(a->t, b, encode_into(b, SPY_MSG_DATA));
    if (!a->stop && i % 16 == 0) {
      uint64_t id = (uint64_t)i;
      spy_msg m = {.type = SPY_MSG_ACK, .encode = encode_peer, .ctx = &id};
      spy_profiler_measure(a->p, &m, NULL);
    }
  }
  return NULL;
}

TEST(attach_and_detach_while_another_thread_posts) {
  /* The old design swapped the ops table under a posting thread; the hook
   * is set and cleared under it instead, and a profiler may be destroyed
   * as soon as detach returns. (Run under ThreadSanitizer too.) */
  fake_transport f;
  fake_init(&f);
  _Atomic int stop = 0;
  poster_arg arg = {.t = &f.base, .stop = &stop};
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, poster, &arg), 0);
  uint64_t seen = 0;
  /* 200 cycles, and more until one caught a post: on a loaded machine the
   * poster may not run at all for a while (deadline 20 s). */
  double end = tu_now_s() + 20;
  for (int i = 0; i < 200 || (seen == 0 && tu_now_s() < end); i++) {
    spy_profiler *p;
    CHECK_OK(spy_profiler_create(&p, NULL));
    CHECK_OK(spy_profiler_attach(p, &f.base));
    usleep(200);
    CHECK_OK(spy_profiler_detach(p, &f.base));
    seen += spy_profiler_count(p) + spy_profiler_dropped(p);
    spy_profiler_destroy(p);
  }
  atomic_store(&stop, 1);
  pthread_join(th, NULL);
  CHECK(seen > 0); /* posts were measured between attach and detach */
  CHECK(!spy_transport_timed(&f.base));
}

/* ---- MSGPROF section ---------------------------------------------------- */

TEST(msgprof_section_round_trips) {
  spy_profiler *p;
  CHECK_OK(spy_profiler_create(&p, NULL));
  for (int i = 1; i <= 10; i++) {
    rec(p, SPY_MSG_DATA, (uint64_t)i * 100, (uint64_t)i * 7, 10832, 0);
    rec(p, SPY_MSG_BUFFER_RAW, (uint64_t)i * 1000, 5, 1 << 20, 0);
  }
  rec(p, SPY_MSG_PING, 0, 0, 0, SPY_MSGREC_ERROR);
  spy_msgprof_summary s, d;
  spy_profiler_summary(p, &s);
  static uint8_t buf[8192];
  spy_frame_writer w;
  spy_frame_start(&w, buf, sizeof buf, SPY_MSG_DATA, 1, 1, 0);
  spy_put_msgprof(&w, &s);
  int n = spy_frame_finish(&w);
  CHECK(n > 0);
  spy_frame f;
  CHECK_OK(spy_frame_decode(buf, (size_t)n, &f, NULL));
  spy_section sec;
  CHECK(spy_frame_find_section(&f, SPY_SEC_MSGPROF, &sec));
  CHECK_EQ(sec.len, SPY_MSGPROF_HEAD_BYTES + 3 * SPY_MSGPROF_ENTRY_BYTES);
  CHECK_OK(spy_get_msgprof(&sec, &d));
  CHECK(memcmp(&s, &d, sizeof s) == 0);
  CHECK_EQ(d.types[2].type, SPY_MSG_BUFFER_RAW);
  CHECK_EQ(d.types[2].bytes, 10u << 20);
  CHECK_EQ(d.types[0].encode.p99_ns, 1000);
  spy_profiler_destroy(p);
}

TEST(msgprof_decoder_rejects_malformed_sections) {
  uint8_t b[SPY_MSGPROF_HEAD_BYTES + 2 * SPY_MSGPROF_ENTRY_BYTES];
  memset(b, 0, sizeof b);
  spy_msgprof_summary d;
  spy_section s = {.id = SPY_SEC_MSGPROF, .len = 8, .data = b};
  CHECK_EQ(spy_get_msgprof(&s, &d), SPY_EBADSECTION);
  s.len = sizeof b;
  spy_wr32(b, 1); /* says one entry, holds two */
  CHECK_EQ(spy_get_msgprof(&s, &d), SPY_EBADSECTION);
  spy_wr32(b, 1000); /* beyond the type limit */
  CHECK_EQ(spy_get_msgprof(&s, &d), SPY_EBADVALUE);
  spy_wr32(b, 2); /* two entries, same type: not ascending */
  CHECK_EQ(spy_get_msgprof(&s, &d), SPY_EBADVALUE);
  spy_wr32(b + SPY_MSGPROF_HEAD_BYTES + SPY_MSGPROF_ENTRY_BYTES, 5);
  CHECK_OK(spy_get_msgprof(&s, &d));
  CHECK_EQ(d.n_types, 2);
  /* The encoder refuses too many types. */
  static spy_msgprof_summary big;
  big.n_types = SPY_PROFILER_MAX_TYPES + 1;
  uint8_t fb[256];
  spy_frame_writer w;
  spy_frame_start(&w, fb, sizeof fb, SPY_MSG_DATA, 1, 1, 0);
  spy_put_msgprof(&w, &big);
  CHECK_EQ(spy_frame_finish(&w), SPY_EINVAL);
}

/* ---- several threads record at once ------------------------------------ */

static void *record_one(void *arg) {
  poster_arg *a = arg;
  rec(a->p, 2, 1, 1, 1, 0);
  return NULL;
}

TEST(records_from_several_threads_are_all_counted) {
  spy_profiler *p;
  /* Lanes deep enough for every record a thread makes between two reads. */
  spy_profiler_desc d = {.capacity = 64, .lane_capacity = 4096};
  CHECK_OK(spy_profiler_create(&p, &d));
  fake_transport f[2];
  poster_arg args[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    fake_init(&f[i]);
    CHECK_OK(spy_profiler_attach(p, &f[i].base));
    args[i] = (poster_arg){.t = &f[i].base, .p = p, .n = 2000};
    CHECK_EQ(pthread_create(&th[i], NULL, poster, &args[i]), 0);
  }
  spy_msgprof_summary s;
  spy_msg_record recs[64];
  for (int i = 0; i < 50; i++) { /* read while they write */
    spy_profiler_summary(p, &s);
    spy_profiler_messages(p, recs, 64);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CHECK_EQ(spy_profiler_count(p), 2 * (2000 + 125));
  CHECK_EQ(spy_profiler_dropped(p), 0);
  spy_profiler_summary(p, &s);
  CHECK_EQ(s.n_types, 2);
  CHECK_EQ(s.types[0].type, SPY_MSG_DATA);
  CHECK_EQ(s.types[0].count, 4000);
  CHECK_EQ(s.types[1].count, 250);
  size_t n = spy_profiler_messages(p, recs, 64);
  CHECK_EQ(n, 64);
  for (size_t i = 1; i < n; i++)
    CHECK_EQ(recs[i].index, recs[i - 1].index + 1);
  for (int i = 0; i < 2; i++)
    CHECK_OK(spy_profiler_detach(p, &f[i].base));
  spy_profiler_destroy(p);
}

TEST(a_full_lane_drops_and_counts_and_never_waits) {
  spy_profiler *p;
  spy_profiler_desc d = {.lane_capacity = 4, .lanes = 1};
  CHECK_OK(spy_profiler_create(&p, &d));
  for (int i = 0; i < 10; i++)
    rec(p, 1, 1, 1, 1, 0);
  CHECK_EQ(spy_profiler_dropped(p), 6); /* nobody read meanwhile */
  CHECK_EQ(spy_profiler_count(p), 4);
  rec(p, 1, 1, 1, 1, 0); /* read: room again */
  CHECK_EQ(spy_profiler_count(p), 5);
  /* A second thread finds no free lane: dropped, counted. */
  pthread_t th;
  poster_arg a = {.p = p};
  CHECK_EQ(pthread_create(&th, NULL, record_one, &a), 0);
  pthread_join(th, NULL);
  CHECK_EQ(spy_profiler_dropped(p), 7);
  CHECK_EQ(spy_profiler_count(p), 5);
  spy_profiler_destroy(p);
}

TEST_MAIN(
    TEST_CASE(create_resolves_defaults_and_rejects_bad_capacity),
    TEST_CASE(ring_wraps_around_and_returns_oldest_first),
    TEST_CASE(summary_percentiles_on_known_inputs),
    TEST_CASE(summary_percentiles_cover_the_ring_totals_cover_everything),
    TEST_CASE(summary_folds_types_beyond_the_limit_into_zero),
    TEST_CASE(measure_reports_encode_time_and_exact_bytes),
    TEST_CASE(measure_flags_an_encode_failure_with_zero_cost),
    TEST_CASE(size_accounting_off_records_zero_bytes),
    TEST_CASE(attach_measures_posts_and_leaves_the_ops_alone),
    TEST_CASE(attached_posts_honour_size_accounting_and_reach_the_callback),
    TEST_CASE(attach_errors_and_several_profilers_and_transports),
    TEST_CASE(attach_and_detach_while_another_thread_posts),
    TEST_CASE(msgprof_section_round_trips),
    TEST_CASE(msgprof_decoder_rejects_malformed_sections),
    TEST_CASE(records_from_several_threads_are_all_counted),
    TEST_CASE(a_full_lane_drops_and_counts_and_never_waits))
