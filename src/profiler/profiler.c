/* profiler.c — the message profiler's ring of records, per-type totals,
 * measure() and summary().
 *
 * Every record goes into a power-of-two ring (overwriting the oldest) and
 * into running totals per message type, under one mutex held for a few
 * stores. Totals (count, bytes, mean, max) cover everything since the last
 * reset; percentiles are computed at summary() time from the ring, so they
 * describe the last `capacity` messages. All memory is allocated at
 * create: recording, measuring and summarising allocate nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "platform/platform.h"
#include "profiler/profiler_internal.h"

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
  if (!d.max_wrapped)
    d.max_wrapped = 8;
  if ((d.capacity & (d.capacity - 1)) || d.capacity > (1u << 24) ||
      d.scratch_bytes > SPY_FRAME_MAX || d.scratch_bytes < SPY_FRAME_MIN ||
      d.max_wrapped > 1024)
    return SPY_EINVAL;
  spy_profiler *p = calloc(1, sizeof *p);
  if (!p)
    return SPY_ENOMEM;
  p->desc = d;
  p->mask = d.capacity - 1;
  p->ring = calloc(d.capacity, sizeof *p->ring);
  p->sort_buf = calloc(d.capacity, sizeof *p->sort_buf);
  p->scratch = malloc(d.scratch_bytes);
  p->slots = calloc(d.max_wrapped, sizeof *p->slots);
  if (!p->ring || !p->sort_buf || !p->scratch || !p->slots) {
    free(p->ring);
    free(p->sort_buf);
    free(p->scratch);
    free(p->slots);
    free(p);
    return SPY_ENOMEM;
  }
  /* Touch the scratch pages now so measure() never times a page fault. */
  memset(p->scratch, 0, d.scratch_bytes);
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->measure_mu, NULL);
  p->t_reset = spy__mono_ns();
  *out = p;
  return 0;
}

void spy_profiler_destroy(spy_profiler *p) {
  if (!p)
    return;
  spy__profiler_unwrap_all(p);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->measure_mu);
  free(p->ring);
  free(p->sort_buf);
  free(p->scratch);
  free(p->slots);
  free(p);
}

void spy_profiler_get_desc(const spy_profiler *p, spy_profiler_desc *out) {
  *out = p->desc;
}

/* The totals of `type`; past SPY_PROFILER_MAX_TYPES distinct types, new
 * ones share the totals of type 0. Called with p->mu held. */
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

void spy__profiler_record(spy_profiler *p, spy_msg_record *r) {
  int bad = (r->flags & (SPY_MSGREC_ERROR | SPY_MSGREC_POST_FAILED)) != 0;
  pthread_mutex_lock(&p->mu);
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
  pthread_mutex_unlock(&p->mu);
  if (p->desc.on_message)
    p->desc.on_message(r, p->desc.user);
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
  pthread_mutex_lock(&p->mu);
  uint64_t have = p->n < p->desc.capacity ? p->n : p->desc.capacity;
  if (have > max)
    have = max;
  uint64_t first = p->n - have;
  for (uint64_t i = 0; i < have; i++)
    out[i] = p->ring[(first + i) & p->mask];
  pthread_mutex_unlock(&p->mu);
  return (size_t)have;
}

uint64_t spy_profiler_count(spy_profiler *p) {
  pthread_mutex_lock(&p->mu);
  uint64_t n = p->n;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void spy_profiler_reset(spy_profiler *p) {
  pthread_mutex_lock(&p->mu);
  p->n = 0;
  p->errors = 0;
  p->n_acc = 0;
  memset(p->ring, 0, (size_t)p->desc.capacity * sizeof *p->ring);
  p->t_reset = spy__mono_ns();
  pthread_mutex_unlock(&p->mu);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_acc(const void *a, const void *b) {
  uint32_t x = ((const spy_msgprof_type *)a)->type;
  uint32_t y = ((const spy_msgprof_type *)b)->type;
  return x < y ? -1 : x > y;
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
 * `type`. Called with p->mu held. */
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
  qsort(p->sort_buf, k, sizeof *p->sort_buf, cmp_u64);
  out->p50_ns = nearest_rank(p->sort_buf, k, 0.50);
  out->p99_ns = nearest_rank(p->sort_buf, k, 0.99);
}

void spy_profiler_summary(spy_profiler *p, spy_msgprof_summary *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&p->mu);
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
  pthread_mutex_unlock(&p->mu);
  qsort(out->types, out->n_types, sizeof out->types[0], cmp_acc);
}
