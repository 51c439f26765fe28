/* session.c — a trace session: the bounded byte queue between emitters and
 * the writer thread, and the writer loop (decode once, hash and dedup large
 * payloads, serialise once — JSON only for writers that want it — hand to
 * the writer, commit per batch).
 *
 * The queue is a ring of encoded records (codec.c). An emitter measures its
 * record, takes the lock, waits while there is no room (counting the
 * wait), encodes in place and leaves; a record that does not fit
 * contiguously at the end leaves a zero word there and starts again at
 * offset 0; a record larger than a quarter of the ring is copied to the
 * heap and queued as a pointer. The writer takes every complete record
 * present (up to a batch), processes them without the lock, then frees
 * their space in one step and commits. Emitters wake the writer only when
 * work appears after idleness or the queue passes an eighth full; a woken
 * writer lets a batch gather for up to 2 ms, so a futex wake is paid per
 * batch, not per action.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

#define MARK_WRAP 0u
#define WAIT_IDLE 1
#define WAIT_GATHER 2
#define GATHER_NS 2000000 /* a batch gathers for at most 2 ms */
#define COMMIT_NS                                                              \
  100000000 /* a writer behind commits at least every 100 ms                   \
             */
#define MARK_HEAP 1u
#define HEAP_REC 16u

struct spy_trace {
  spy_trace_hot hot; /* first: read by the inline emitters */
  /* resolved desc */
  char *session_id, *cwd, *dir, *conninfo;
  const spy_trace_writer_ops *ops;
  void *ops_arg;
  uint32_t batch;
  size_t retry_bytes;
  uint32_t retry_ms;
  void (*on_error)(void *, int, const char *);
  void *on_error_arg;
  /* queue */
  pthread_mutex_t mu;
  pthread_cond_t nonempty, space, committed_cv;
  uint8_t *ring;
  size_t qcap, head, tail, used;
  int closing, writer_waiting, flush_req;
  uint64_t seq, committed_seq;
  _Atomic uint32_t cur_build, builds;
  /* counters (under mu) */
  spy_trace_stats st;
  /* writer thread only */
  pthread_t thread;
  int thread_started;
  void *wstate;
  spy_trace_arena arena;
  spy__buf json;
  spy__hset seen; /* content hashes of the payloads stored */
  const spy_trace_kind *app_kinds[64]; /* application kinds seen (mu) */
  uint32_t n_app;
};

uint64_t spy__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const spy_trace_writer_ops *spy_trace_writer_find(const char *name) {
  static const spy_trace_writer_ops *const all[] = {
      &spy__writer_jsonl, &spy__writer_sqlite, &spy__writer_pg};
  if (!name)
    return NULL;
  if (strcmp(name, "postgresql") == 0)
    name = "postgres";
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0)
      return all[i];
  return NULL;
}

static void default_report(void *arg, int err, const char *msg) {
  (void)arg;
  fprintf(stderr, "spyglass trace: %s (%s)\n", msg, spy_err_name(err));
}

/* Called by writers (cfg.report) and by the loop on a failed op. */
static void report(void *ctx, int err, const char *msg) {
  spy_trace *t = ctx;
  pthread_mutex_lock(&t->mu);
  t->st.writer_errors++;
  pthread_mutex_unlock(&t->mu);
  t->on_error(t->on_error_arg, err, msg);
}

/* ---- dedup set ---------------------------------------------------------- */

/* Hashes every inline payload of the tree; stores first-seen ones. */
static int dedup(spy_trace *t, spy_trace_val *v, spy_trace_stats *st) {
  if (v->type == SPY_TV_SRC) {
    spy_trace_hash(v->u.s, v->n, v->hash);
    v->has_hash = 1;
    int fresh = spy__hset_add(&t->seen, v->hash);
    if (fresh < 0)
      return fresh;
    if (fresh) {
      if (t->ops->source) {
        int rc = t->ops->source(t->wstate, v->hash, v->u.s, v->n);
        if (rc < 0)
          return rc;
      }
      st->sources++;
      st->source_bytes += v->n;
    } else {
      st->sources_dup++;
      st->saved_bytes += v->n;
    }
  } else if (v->type == SPY_TV_LIST || v->type == SPY_TV_REC) {
    for (uint32_t i = 0; i < v->n; i++) {
      int rc = dedup(t, (spy_trace_val *)&v->u.items[i], st);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

/* Writes one record; returns its length in the ring. */
static size_t process(spy_trace *t, const uint8_t *p, spy_trace_stats *st) {
  uint32_t len;
  memcpy(&len, p, 4);
  const uint8_t *rec = p;
  uint8_t *heap = NULL;
  size_t ring_len = len;
  if (len == MARK_HEAP) {
    memcpy(&heap, p + 8, sizeof heap);
    rec = heap;
    ring_len = HEAP_REC;
    memcpy(&len, rec, 4);
  }
  spy_trace_arena_reset(&t->arena);
  spy_trace_action a;
  int rc = spy_trace_decode(rec, len, &t->arena, &a);
  if (rc >= 0 && !a.kind) { /* an application kind: find its descriptor */
    pthread_mutex_lock(&t->mu);
    for (uint32_t i = 0; i < t->n_app; i++)
      if (strlen(t->app_kinds[i]->name) == a.name_len &&
          memcmp(t->app_kinds[i]->name, a.name, a.name_len) == 0)
        a.kind = t->app_kinds[i];
    pthread_mutex_unlock(&t->mu);
    if (a.kind)
      rc = spy_trace_check(a.kind, &a.fields);
  }
  if (rc >= 0)
    rc = dedup(t, &a.fields, st);
  /* the SQL writers store the binary record: no JSON for them */
  int json = t->ops != &spy__writer_sqlite && t->ops != &spy__writer_pg;
  uint64_t replaced = t->json.replaced;
  if (rc >= 0 && json) {
    t->json.len = 0;
    spy__trace_json(&t->json, t->session_id, &a);
    rc = t->json.err;
  }
  if (rc >= 0) {
    spy_trace_record r = {&a, json ? t->json.p : NULL, json ? t->json.len : 0,
                          t->json.replaced - replaced};
    rc = t->ops->action(t->wstate, &r);
  }
  if (rc < 0)
    report(t, rc, "writing an action failed");
  st->written++;
  free(heap);
  return (ring_len + 3u) & ~(size_t)3u;
}

static void *writer_main(void *arg) {
  spy_trace *t = arg;
  pthread_setname_np(pthread_self(), "spy-trace-wr");
  uint32_t uncommitted = 0;
  uint64_t last_commit = mono_ns();
  pthread_mutex_lock(&t->mu);
  for (;;) {
    while (t->used == 0 && !t->closing && !t->flush_req) {
      t->writer_waiting = WAIT_IDLE;
      pthread_cond_wait(&t->nonempty, &t->mu);
    }
    /* let a batch gather (bounded latency) unless the queue is filling */
    if (t->used < t->qcap / 8 && !t->closing && !t->flush_req) {
      struct timespec dl;
      clock_gettime(CLOCK_REALTIME, &dl);
      dl.tv_nsec += GATHER_NS;
      if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
      }
      t->writer_waiting = WAIT_GATHER;
      pthread_cond_timedwait(&t->nonempty, &t->mu, &dl);
    }
    t->writer_waiting = 0;
    if (t->used == 0 && t->flush_req && !t->closing) {
      t->flush_req = 0;
      pthread_cond_broadcast(&t->committed_cv);
      continue;
    }
    if (t->used == 0 && t->closing)
      break;
    size_t head = t->head, avail = t->used;
    uint64_t last_seq = t->seq;
    pthread_mutex_unlock(&t->mu);

    spy_trace_stats st = {0};
    uint64_t busy0 = mono_ns();
    size_t taken = 0;
    uint32_t n = 0;
    while (taken < avail && n < t->batch) {
      uint32_t mark = MARK_WRAP;
      if (t->qcap - head >= 4)
        memcpy(&mark, t->ring + head, 4);
      if (mark == MARK_WRAP) {
        taken += t->qcap - head;
        head = 0;
        continue;
      }
      size_t l = process(t, t->ring + head, &st);
      head += l;
      taken += l;
      n++;
      if ((n & 63) == 0) { /* hand space back early: the emitter may wait */
        pthread_mutex_lock(&t->mu);
        t->head = head;
        t->used -= taken;
        avail -= taken;
        taken = 0;
        pthread_cond_broadcast(&t->space);
        pthread_mutex_unlock(&t->mu);
      }
    }
    uint64_t now = mono_ns();
    pthread_mutex_lock(&t->mu);
    t->head = head;
    t->used -= taken;
    if (t->used == 0)
      t->head = t->tail = 0;
    t->st.written += st.written;
    t->st.sources += st.sources;
    t->st.sources_dup += st.sources_dup;
    t->st.source_bytes += st.source_bytes;
    t->st.saved_bytes += st.saved_bytes;
    int behind = t->used > 0 && !t->flush_req && !t->closing;
    uint64_t done_seq = t->used == 0 ? last_seq : 0;
    pthread_cond_broadcast(&t->space);
    pthread_mutex_unlock(&t->mu);
    /* commit when caught up, asked to, or the batch is full or old: a
     * writer that is behind commits per batch_actions, not per round (a
     * round is whatever the queue held, often a few hundred actions) */
    uncommitted += n;
    if (!behind || uncommitted >= t->batch || now - last_commit >= COMMIT_NS) {
      int rc = t->ops->commit ? t->ops->commit(t->wstate) : 0;
      if (rc < 0)
        report(t, rc, "committing a batch failed");
      uncommitted = 0;
      last_commit = mono_ns();
      pthread_mutex_lock(&t->mu);
      if (done_seq)
        t->committed_seq = done_seq;
      pthread_cond_broadcast(&t->committed_cv);
    } else
      pthread_mutex_lock(&t->mu);
    t->st.writer_ns += mono_ns() - busy0;
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* ---- emit ------------------------------------------------------------------
 */

int spy_trace_emit(spy_trace *t, const spy_trace_kind *kind, const void *act) {
  if (!t || !t->hot.enabled)
    return 0;
  uint32_t build = atomic_load_explicit(&t->cur_build, memory_order_relaxed);
  uint64_t ts = spy__now_us();
  int64_t need = spy_trace_encode(kind, act, 0, ts, build, NULL, 0);
  if (need < 0)
    return (int)need;
  uint8_t *heap = NULL;
  size_t slot = ((size_t)need + 3u) & ~(size_t)3u;
  if (slot > t->qcap / 4) {
    heap = malloc((size_t)need);
    if (!heap)
      return SPY_ENOMEM;
    slot = HEAP_REC;
  }
  pthread_mutex_lock(&t->mu);
  if (t->closing) {
    pthread_mutex_unlock(&t->mu);
    free(heap);
    return SPY_ECLOSED;
  }
  if (kind->id == 0) {
    uint32_t i = 0;
    while (i < t->n_app && t->app_kinds[i] != kind)
      i++;
    if (i == t->n_app && t->n_app < 64)
      t->app_kinds[t->n_app++] = kind;
  }
  size_t pos, waste;
  int waited = 0;
  uint64_t w0 = 0;
  for (;;) {
    size_t room = t->qcap - t->tail;
    pos = room >= slot ? t->tail : 0;
    waste = room >= slot ? 0 : room;
    if (t->used + waste + slot <= t->qcap)
      break;
    if (!waited) {
      waited = 1;
      w0 = mono_ns();
      t->st.waits++;
    }
    pthread_cond_wait(&t->space, &t->mu);
  }
  if (waited)
    t->st.wait_ns += mono_ns() - w0;
  if (waste >= 4) {
    uint32_t z = MARK_WRAP;
    memcpy(t->ring + t->tail, &z, 4);
  }
  uint64_t seq = ++t->seq;
  if (heap) {
    spy_trace_encode(kind, act, seq, ts, build, heap, (size_t)need);
    uint32_t m = MARK_HEAP;
    memcpy(t->ring + pos, &m, 4);
    memcpy(t->ring + pos + 8, &heap, sizeof heap);
  } else {
    spy_trace_encode(kind, act, seq, ts, build, t->ring + pos, (size_t)need);
  }
  t->tail = pos + slot;
  t->used += waste + slot;
  t->st.emitted++;
  t->st.queued_bytes += (uint64_t)need;
  /* wake the writer once when work appears, and once more when a
   * gathering batch grows large; not per action */
  if (t->writer_waiting == WAIT_IDLE ||
      (t->writer_waiting == WAIT_GATHER && t->used >= t->qcap / 8)) {
    t->writer_waiting = 0;
    pthread_cond_signal(&t->nonempty);
  }
  pthread_mutex_unlock(&t->mu);
  return 0;
}

int spy_trace_flush(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  pthread_mutex_lock(&t->mu);
  uint64_t want = t->seq;
  while (t->committed_seq < want && !t->closing) {
    t->flush_req = 1;
    pthread_cond_signal(&t->nonempty);
    pthread_cond_wait(&t->committed_cv, &t->mu);
  }
  int rc = t->committed_seq >= want ? 0 : SPY_ECLOSED;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int spy_trace_build_begin(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  uint32_t b = atomic_fetch_add(&t->builds, 1) + 1;
  atomic_store(&t->cur_build, b);
  int rc = spy_emit_build_start(t, &(spy_act_build_start){0});
  return rc < 0 ? rc : (int)b;
}

int spy_trace_build_end(spy_trace *t) {
  if (!t || !t->hot.enabled)
    return 0;
  return spy_emit_build_end(t, &(spy_act_build_end){0});
}

/* ---- lifecycle
 * ---------------------------------------------------------------- */

static char *dupstr(const char *s) { return s ? strdup(s) : NULL; }

static void make_session_id(spy_trace *t, char out[64]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t seed[3] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                      (uint64_t)getpid(), (uint64_t)(uintptr_t)t};
  uint64_t h[2];
  spy_trace_hash(seed, sizeof seed, h);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  snprintf(out, 64, "%04d%02d%02d-%02d%02d%02d-%08x", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (unsigned)h[1]);
}

int spy_trace_create(const spy_trace_desc *desc, spy_trace **out) {
  *out = NULL;
  spy_trace_desc d = desc ? *desc : (spy_trace_desc){0};
  spy_trace *t = calloc(1, sizeof *t);
  if (!t)
    return SPY_ENOMEM;
  if (!d.enabled) {
    *out = t;
    return 0;
  }
  const spy_trace_writer_ops *ops =
      d.ops ? d.ops : spy_trace_writer_find(d.writer ? d.writer : "jsonl");
  if (!ops || !ops->open || !ops->action || !ops->close ||
      (ops == &spy__writer_pg && !d.conninfo)) {
    free(t);
    return SPY_EINVAL;
  }
  char idbuf[64];
  if (!d.session_id)
    make_session_id(t, idbuf);
  t->session_id = strdup(d.session_id ? d.session_id : idbuf);
  char cwdbuf[4096];
  if (!d.cwd)
    d.cwd = getcwd(cwdbuf, sizeof cwdbuf) ? cwdbuf : ".";
  t->cwd = strdup(d.cwd);
  if (ops != &spy__writer_pg) {
    if (d.dir)
      t->dir = strdup(d.dir);
    else if (t->cwd && t->session_id) {
      size_t n = strlen(t->cwd) + strlen(t->session_id) + 16;
      if ((t->dir = malloc(n)))
        snprintf(t->dir, n, "%s/.spyglass/%s", t->cwd, t->session_id);
    }
  }
  t->conninfo = dupstr(d.conninfo);
  t->ops = ops;
  t->ops_arg = d.ops_arg;
  t->batch = d.batch_actions ? d.batch_actions : 4096;
  t->retry_bytes = d.retry_bytes ? d.retry_bytes : (size_t)64 << 20;
  t->retry_ms = d.retry_ms ? d.retry_ms : 10000;
  t->on_error = d.on_error ? d.on_error : default_report;
  t->on_error_arg = d.on_error_arg;
  t->qcap = d.queue_bytes ? d.queue_bytes : (size_t)8 << 20;
  if (t->qcap < 65536)
    t->qcap = 65536;
  t->qcap &= ~(size_t)3u;
  t->ring = malloc(t->qcap);
  if (!t->session_id || !t->cwd || (ops != &spy__writer_pg && !t->dir) ||
      (d.conninfo && !t->conninfo) || !t->ring) {
    spy_trace_destroy(t);
    return SPY_ENOMEM;
  }
  /* touch every page now: no page fault on the emitting thread later */
  memset(t->ring, 0xA5, t->qcap); /* nonzero: not folded into calloc */
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->nonempty, NULL);
  pthread_cond_init(&t->space, NULL);
  pthread_cond_init(&t->committed_cv, NULL);
  t->hot.enabled = -1; /* sync objects exist; not yet emitting */

  int rc = 0;
  if (t->dir && ops != &spy__writer_pg && !d.ops)
    rc = spy__mkdirs(t->dir);
  spy_trace_writer_cfg cfg = {t->dir,     t->conninfo,    t->session_id,
                              t->cwd,     t->retry_bytes, t->retry_ms,
                              t->ops_arg, report,         t};
  if (rc == 0)
    rc = ops->open(&t->wstate, &cfg);
  if (rc == 0 && pthread_create(&t->thread, NULL, writer_main, t) != 0)
    rc = SPY_EAGAIN;
  if (rc < 0) {
    if (t->wstate)
      ops->close(t->wstate);
    t->wstate = NULL;
    spy_trace_destroy(t);
    return rc;
  }
  t->thread_started = 1;
  t->hot.enabled = 1;
  *out = t;
  return 0;
}

int64_t spy_trace_destroy(spy_trace *t) {
  if (!t)
    return 0;
  int64_t lost = 0;
  if (t->hot.enabled) {
    if (t->thread_started) {
      pthread_mutex_lock(&t->mu);
      t->closing = 1;
      pthread_cond_broadcast(&t->nonempty);
      pthread_cond_broadcast(&t->committed_cv);
      pthread_mutex_unlock(&t->mu);
      pthread_join(t->thread, NULL);
    }
    if (t->wstate) {
      lost = t->ops->close(t->wstate);
      if (lost < 0)
        lost = 0;
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->nonempty);
    pthread_cond_destroy(&t->space);
    pthread_cond_destroy(&t->committed_cv);
  }
  spy_trace_arena_free(&t->arena);
  spy__buf_free(&t->json);
  spy__hset_free(&t->seen);
  free(t->ring);
  free(t->session_id);
  free(t->cwd);
  free(t->dir);
  free(t->conninfo);
  free(t);
  return lost;
}

const char *spy_trace_session_id(const spy_trace *t) {
  return t ? t->session_id : NULL;
}
const char *spy_trace_dir(const spy_trace *t) { return t ? t->dir : NULL; }
const char *spy_trace_writer_name(const spy_trace *t) {
  return t && t->ops ? t->ops->name : NULL;
}

void spy_trace_get_stats(spy_trace *t, spy_trace_stats *out) {
  memset(out, 0, sizeof *out);
  if (!t || !t->hot.enabled)
    return;
  pthread_mutex_lock(&t->mu);
  *out = t->st;
  pthread_mutex_unlock(&t->mu);
  out->builds = atomic_load(&t->builds);
  if (t->ops->lost && t->wstate)
    out->lost = t->ops->lost(t->wstate); /* read-only counter of the writer */
  if (t->ops->busy_ns && t->wstate)
    out->packer_ns = t->ops->busy_ns(t->wstate); /* thread-safe */
}
