/* profiler.c — the message profiler's lanes, history ring, per-type
 * totals, measure() and summary().
 *
 * Recording (a hooked post, measure()) writes one record into the calling
 * thread's lane: a single-producer ring that thread claimed once with a
 * compare-and-swap, found again through a thread-local cache. No lock, no
 * wait: a full lane (or no free lane) drops the record and counts it. The
 * reader folds the lanes into a power-of-two history ring (overwriting
 * the oldest) and the running totals per message type whenever it looks
 * (summary, messages, count, reset): totals (count, bytes, mean, max)
 * cover everything since the last reset; percentiles are computed from the
 * history, so they describe the last `capacity` messages. All memory is
 * allocated at create: recording, folding and summarising allocate
 * nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "profiler/profiler_internal.h"

static _Atomic uint64_t next_uid = 1;

/* The calling thread's token (the address of a thread-local: unique among
 * live threads) and its last lane lookup. */
static _Thread_local char thread_token;
static _Thread_local struct {
  uint64_t uid;
  struct spy__lane *lane;
} lane_cache;

static int pow2(uint32_t v) { return v && !(v & (v - 1)); }

int spy_profiler_create(spy_profiler **out, const spy_profiler_desc *desc) {
  if (!out)
    return SPY_EINVAL;
  *out = NULL;
  spy_profiler_desc d = {0};
  if (desc)
    d = *desc;
  if (!d.capacity)
    d.capacity = SPY_PROFILER_DEFAULT_CAPACITY;
  if (!d.scratch_bytes)
    d.scratch_bytes = SPY_PROFILER_DEFAULT_SCRATCH;
  if (!d.lanes)
    d.lanes = SPY_PROFILER_DEFAULT_LANES;
  if (!d.lane_capacity)
    d.lane_capacity = d.capacity > 256 ? d.capacity : 256;
  if (!pow2(d.capacity) || d.capacity > (1u << 24) || !pow2(d.lane_capacity) ||
      d.lane_capacity > (1u << 20) || d.lanes > 256 ||
      d.scratch_bytes > SPY_FRAME_MAX || d.scratch_bytes < SPY_FRAME_MIN)
    return SPY_EINVAL;
  spy_profiler *p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
  if (!p)
    return SPY_ENOMEM;
  memset(p, 0, sizeof *p);
  p->desc = d;
  p->mask = d.capacity - 1;
  p->lane_mask = d.lane_capacity - 1;
  p->ring = calloc(d.capacity, sizeof *p->ring);
  p->sort_buf = calloc(d.capacity, sizeof *p->sort_buf);
  p->scratch = malloc(d.scratch_bytes);
  p->lanes = aligned_alloc(64, d.lanes * sizeof *p->lanes);
  p->lane_mem = calloc((size_t)d.lanes * d.lane_capacity, sizeof *p->lane_mem);
  if (!p->ring || !p->sort_buf || !p->scratch || !p->lanes || !p->lane_mem) {
    free(p->ring);
    free(p->sort_buf);
    free(p->scratch);
    free(p->lanes);
    free(p->lane_mem);
    free(p);
    return SPY_ENOMEM;
  }
  memset(p->lanes, 0, d.lanes * sizeof *p->lanes);
  for (uint32_t i = 0; i < d.lanes; i++)
    p->lanes[i].rec = p->lane_mem + (size_t)i * d.lane_capacity;
  /* Touch the scratch pages now so measure() never times a page fault. */
  memset(p->scratch, 0, d.scratch_bytes);
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->measure_mu, NULL);
  p->uid = atomic_fetch_add(&next_uid, 1);
  p->t_reset = spy__mono_ns();
  p->hook.on_post = spy__profiler_on_post;
  p->hook.ctx = p;
  *out = p;
  return 0;
}

void spy_profiler_destroy(spy_profiler *p) {
  if (!p)
    return;
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->measure_mu);
  free(p->ring);
  free(p->sort_buf);
  free(p->scratch);
  free(p->lanes);
  free(p->lane_mem);
  free(p);
}

void spy_profiler_get_desc(const spy_profiler *p, spy_profiler_desc *out) {
  *out = p->desc;
}

/* Readers serialise among themselves, unless the owner promised one. */
static void rd_lock(spy_profiler *p) {
  if (!p->desc.single_reader)
    pthread_mutex_lock(&p->mu);
}
static void rd_unlock(spy_profiler *p) {
  if (!p->desc.single_reader)
    pthread_mutex_unlock(&p->mu);
}

/* ---- recording (any thread, no lock) ------------------------------------ */

/* The calling thread's lane, claiming a free one the first time; NULL if
 * every lane belongs to another thread. */
static struct spy__lane *my_lane(spy_profiler *p) {
  if (lane_cache.uid == p->uid)
    return lane_cache.lane;
  uintptr_t me = (uintptr_t)&thread_token;
  struct spy__lane *l = NULL;
  for (uint32_t i = 0; !l && i < p->desc.lanes; i++)
    if (atomic_load_explicit(&p->lanes[i].owner, memory_order_relaxed) == me)
      l = &p->lanes[i];
  for (uint32_t i = 0; !l && i < p->desc.lanes; i++) {
    uintptr_t none = 0;
    if (atomic_compare_exchange_strong(&p->lanes[i].owner, &none, me))
      l = &p->lanes[i];
  }
  if (l) {
    lane_cache.uid = p->uid;
    lane_cache.lane = l;
  }
  return l;
}

void spy__profiler_record(spy_profiler *p, spy_msg_record *r) {
  struct spy__lane *l = my_lane(p);
  uint64_t h = l ? atomic_load_explicit(&l->head, memory_order_relaxed) : 0;
  if (!l ||
      h - atomic_load_explicit(&l->tail, memory_order_acquire) > p->lane_mask) {
    atomic_fetch_add_explicit(&p->dropped, 1, memory_order_relaxed);
  } else {
    r->index = l->seq++;
    l->rec[h & p->lane_mask] = *r;
    atomic_store_explicit(&l->head, h + 1, memory_order_release);
  }
  if (p->desc.on_message)
    p->desc.on_message(r, p->desc.user);
}

/* ---- folding (the reader) ------------------------------------------------ */

/* The totals of `type`; past SPY_PROFILER_MAX_TYPES distinct types, new
 * ones share the totals of type 0. */
static struct spy__type_acc *acc_of(spy_profiler *p, uint32_t type) {
  for (int pass = 0; pass < 2; pass++, type = 0) {
    for (uint32_t i = 0; i < p->n_acc; i++)
      if (p->acc[i].type == type)
        return &p->acc[i];
    /* The last slot is kept for type 0, "other". */
    if (p->n_acc < SPY_PROFILER_MAX_TYPES - 1 ||
        (type == 0 && p->n_acc < SPY_PROFILER_MAX_TYPES)) {
      struct spy__type_acc *a = &p->acc[p->n_acc++];
      memset(a, 0, sizeof *a);
      a->type = type;
      return a;
    }
  }
  return &p->acc[SPY_PROFILER_MAX_TYPES - 1]; /* not reached: see above */
}

static void fold_one(spy_profiler *p, spy_msg_record *r) {
  int bad = (r->flags & (SPY_MSGREC_ERROR | SPY_MSGREC_POST_FAILED)) != 0;
  r->index = p->n++;
  p->ring[r->index & p->mask] = *r;
  struct spy__type_acc *a = acc_of(p, r->type);
  a->count++;
  a->bytes += r->bytes;
  if (bad) {
    a->errors++;
    p->errors++;
  } else {
    a->enc_sum += r->encode_ns;
    a->enc_n++;
    if (r->encode_ns > a->enc_max)
      a->enc_max = r->encode_ns;
    if (!(r->flags & SPY_MSGREC_MEASURED)) {
      a->post_sum += r->post_ns;
      a->post_n++;
      if (r->post_ns > a->post_max)
        a->post_max = r->post_ns;
    }
  }
}

/* Takes every lane's pending records: folded, or discarded (reset). */
static void fold(spy_profiler *p, int keep) {
  for (uint32_t i = 0; i < p->desc.lanes; i++) {
    struct spy__lane *l = &p->lanes[i];
    uint64_t h = atomic_load_explicit(&l->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
    for (; keep && t != h; t++) {
      spy_msg_record r = l->rec[t & p->lane_mask];
      fold_one(p, &r);
    }
    atomic_store_explicit(&l->tail, h, memory_order_release);
  }
}

int spy_profiler_measure(spy_profiler *p, const spy_msg *msg,
                         spy_msg_record *out) {
  if (!p || !msg || !msg->encode)
    return SPY_EINVAL;
  spy_msg_record r;
  memset(&r, 0, sizeof r);
  r.type = msg->type;
  r.flags = SPY_MSGREC_MEASURED;
  pthread_mutex_lock(&p->measure_mu);
  uint64_t t0 = spy__mono_ns();
  spy_frame_writer w;
  spy_frame_start(&w, p->scratch, p->desc.scratch_bytes, msg->type, 0, 0, 0);
  int rc = msg->encode(&w, msg->ctx);
  int n = spy_frame_finish(&w);
  uint64_t t1 = spy__mono_ns();
  pthread_mutex_unlock(&p->measure_mu);
  if (rc >= 0 && n < 0)
    rc = n;
  r.t_ns = t1;
  if (rc < 0) {
    /* Cannot be encoded: flagged, zero cost, and not a failure of ours. */
    r.flags |= SPY_MSGREC_ERROR;
    r.err = rc;
  } else {
    r.encode_ns = t1 - t0;
    r.bytes = p->desc.no_size ? 0 : (uint32_t)n;
  }
  spy__profiler_record(p, &r);
  if (out)
    *out = r;
  return 0;
}

size_t spy_profiler_messages(spy_profiler *p, spy_msg_record *out, size_t max) {
  rd_lock(p);
  fold(p, 1);
  uint64_t have = p->n < p->desc.capacity ? p->n : p->desc.capacity;
  if (have > max)
    have = max;
  uint64_t first = p->n - have;
  for (uint64_t i = 0; i < have; i++)
    out[i] = p->ring[(first + i) & p->mask];
  rd_unlock(p);
  return (size_t)have;
}

uint64_t spy_profiler_count(spy_profiler *p) {
  rd_lock(p);
  fold(p, 1);
  uint64_t n = p->n;
  rd_unlock(p);
  return n;
}

uint64_t spy_profiler_dropped(spy_profiler *p) {
  return atomic_load_explicit(&p->dropped, memory_order_relaxed);
}

void spy_profiler_reset(spy_profiler *p) {
  rd_lock(p);
  fold(p, 0);
  p->n = 0;
  p->errors = 0;
  p->n_acc = 0;
  memset(p->ring, 0, (size_t)p->desc.capacity * sizeof *p->ring);
  p->t_reset = spy__mono_ns();
  rd_unlock(p);
}

/* In-place heapsort: glibc's qsort may malloc a scratch array (over 1 KiB
 * of data), and summary() runs on a provider's service, which may be the
 * frame thread (inline transport), which must not allocate. */
static void sift_down(uint64_t *v, size_t root, size_t n) {
  for (;;) {
    size_t c = 2 * root + 1;
    if (c >= n)
      return;
    if (c + 1 < n && v[c + 1] > v[c])
      c++;
    if (v[root] >= v[c])
      return;
    uint64_t t = v[root];
    v[root] = v[c];
    v[c] = t;
    root = c;
  }
}

static void sort_u64(uint64_t *v, size_t n) {
  for (size_t i = n / 2; i-- > 0;)
    sift_down(v, i, n);
  for (size_t end = n; end > 1; end--) {
    uint64_t t = v[0];
    v[0] = v[end - 1];
    v[end - 1] = t;
    sift_down(v, 0, end - 1);
  }
}

/* Insertion sort by type (at most SPY_PROFILER_MAX_TYPES entries). */
static void sort_types(spy_msgprof_type *t, uint32_t n) {
  for (uint32_t i = 1; i < n; i++) {
    spy_msgprof_type x = t[i];
    uint32_t j = i;
    for (; j > 0 && t[j - 1].type > x.type; j--)
      t[j] = t[j - 1];
    t[j] = x;
  }
}

/* Nearest-rank quantile of v[0..n), sorted: the smallest value with at
 * least q·n values at or below it. */
static uint64_t nearest_rank(const uint64_t *v, size_t n, double q) {
  if (!n)
    return 0;
  double r = q * (double)n;
  size_t k = (size_t)r;
  if ((double)k < r)
    k++;
  return v[k ? k - 1 : 0];
}

static int tracked(const spy_profiler *p, uint32_t type) {
  for (uint32_t i = 0; i < p->n_acc; i++)
    if (p->acc[i].type == type)
      return 1;
  return 0;
}

/* p50 / p99 of one cost (post: 1, encode: 0) over the ring's records of
 * `type`. Called by the reader, after fold(). */
static void ring_percentiles(spy_profiler *p, uint32_t type, int post,
                             spy_msgprof_ns *out) {
  uint64_t have = p->n < p->desc.capacity ? p->n : p->desc.capacity;
  size_t k = 0;
  for (uint64_t i = p->n - have; i < p->n; i++) {
    const spy_msg_record *r = &p->ring[i & p->mask];
    if (r->flags & (SPY_MSGREC_ERROR | SPY_MSGREC_POST_FAILED))
      continue;
    if (post && (r->flags & SPY_MSGREC_MEASURED))
      continue;
    /* A type folded into "other" (0) is counted there. */
    if (r->type != type && !(type == 0 && !tracked(p, r->type)))
      continue;
    p->sort_buf[k++] = post ? r->post_ns : r->encode_ns;
  }
  sort_u64(p->sort_buf, k);
  out->p50_ns = nearest_rank(p->sort_buf, k, 0.50);
  out->p99_ns = nearest_rank(p->sort_buf, k, 0.99);
}

void spy_profiler_summary(spy_profiler *p, spy_msgprof_summary *out) {
  memset(out, 0, sizeof *out);
  rd_lock(p);
  fold(p, 1);
  out->messages = p->n;
  out->errors = p->errors;
  out->elapsed_ns = spy__mono_ns() - p->t_reset;
  out->flags = p->desc.no_size ? SPY_MSGPROF_NO_SIZE : 0;
  out->n_types = p->n_acc;
  for (uint32_t i = 0; i < p->n_acc; i++) {
    const struct spy__type_acc *a = &p->acc[i];
    spy_msgprof_type *t = &out->types[i];
    t->type = a->type;
    t->count = a->count;
    t->errors = a->errors;
    t->bytes = a->bytes;
    t->encode.mean_ns = a->enc_n ? a->enc_sum / a->enc_n : 0;
    t->encode.max_ns = a->enc_max;
    t->post.mean_ns = a->post_n ? a->post_sum / a->post_n : 0;
    t->post.max_ns = a->post_max;
    ring_percentiles(p, a->type, 0, &t->encode);
    ring_percentiles(p, a->type, 1, &t->post);
  }
  rd_unlock(p);
  sort_types(out->types, out->n_types);
}
