/* env.c — the environment feature: adapter, resolution, debug mode, paused
 * and idle, memory, and any field the application adds.
 *
 * Setters may run on any thread; they serialise among themselves with a
 * mutex and publish through a seqlock, so the frame thread reads a
 * consistent copy at flush time without ever taking a lock. Each field has
 * a version; a flush sends only the fields whose version moved. A flush
 * that finds the sequence number where it was and no local field changed
 * sends nothing and copies nothing.
 */
#include <stdio.h>
#include <string.h>

#include "platform/platform.h"
#include "provider/provider_internal.h"

void spy__env_init(env_table *e) {
  memset(e, 0, sizeof *e);
  pthread_mutex_init(&e->writers, NULL);
}

void spy__env_free(env_table *e) { pthread_mutex_destroy(&e->writers); }

static int same_value(const env_field *f, const spy_value *v) {
  if (f->value.kind != v->kind)
    return 0;
  if (v->kind == SPY_VAL_STRING)
    return f->value.v.s.len == v->v.s.len &&
           memcmp(f->str, v->v.s.ptr, v->v.s.len) == 0;
  return memcmp(&f->value.v, &v->v, sizeof v->v) == 0;
}

static void store(env_field *f, const char *key, const spy_value *v) {
  if (key != f->key)
    snprintf(f->key, sizeof f->key, "%s", key);
  f->value = *v;
  if (v->kind == SPY_VAL_STRING) {
    uint32_t n = v->v.s.len < ENV_STR_MAX ? v->v.s.len : ENV_STR_MAX;
    memcpy(f->str, v->v.s.ptr, n);
    f->value.v.s.ptr = f->str;
    f->value.v.s.len = n;
  }
  f->version++;
}

void spy__env_set(env_table *e, const char *key, const spy_value *v) {
  size_t klen = strlen(key);
  if (klen == 0 || klen >= sizeof e->f[0].key)
    return;
  pthread_mutex_lock(&e->writers);
  uint32_t i = 0;
  while (i < e->n && strcmp(e->f[i].key, key) != 0)
    i++;
  if (i == ENV_MAX || (i < e->n && same_value(&e->f[i], v))) {
    pthread_mutex_unlock(&e->writers);
    return;
  }
  atomic_fetch_add_explicit(&e->seq, 1, memory_order_acq_rel); /* odd */
  atomic_thread_fence(memory_order_release);
  store(&e->f[i], key, v);
  if (i == e->n)
    atomic_fetch_add_explicit(&e->n, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&e->seq, 1, memory_order_release); /* even */
  pthread_mutex_unlock(&e->writers);
}

void spy__env_set_local(env_table *e, uint32_t slot, const char *key,
                        const spy_value *v) {
  if (slot >= 8)
    return;
  env_field *f = &e->local[slot];
  if (f->key[0] && same_value(f, v))
    return;
  store(f, key, v);
  e->local_dirty = 1;
  if (slot >= e->local_n)
    e->local_n = slot + 1;
}

/* Copies the shared table under the seqlock; 0 if a writer kept racing
 * (the previous copy is kept and tried again next flush). */
SPY_NO_TSAN static void copy_fields(env_field *dst, const env_field *src,
                                    uint32_t n) {
  memcpy(dst, src, n * sizeof *src);
}

static int snapshot(env_table *e) {
  for (int tries = 0; tries < 4; tries++) {
    uint32_t s0 = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (s0 & 1)
      continue;
    uint32_t n = atomic_load_explicit(&e->n, memory_order_relaxed);
    if (n > ENV_MAX)
      n = ENV_MAX;
    copy_fields(e->snap, e->f, n);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s0) {
      e->snap_n = n;
      e->snap_seq = s0;
      e->snap_ok = 1;
      for (uint32_t i = 0; i < n; i++)
        if (e->snap[i].value.kind == SPY_VAL_STRING)
          e->snap[i].value.v.s.ptr = e->snap[i].str;
      return 1;
    }
  }
  return 0;
}

static void put_field(spy_delta_writer *d, const env_field *f) {
  spy_delta_put(d, SPY_DELTA_SET, f->key, (uint32_t)strlen(f->key), &f->value);
}

void spy__env_encode(env_table *e, spy_frame_writer *w, int full) {
  /* The shared table as copied last time (every field in it sent) and no
   * local change: nothing to send, and nothing to copy or look at. */
  int same = e->snap_ok &&
             atomic_load_explicit(&e->seq, memory_order_acquire) == e->snap_seq;
  if (same && !full && !e->local_dirty)
    return;
  if (!same)
    snapshot(e);
  e->local_dirty = 0;
  size_t mark = w->len;
  spy_delta_writer d;
  spy_delta_begin(&d, w, SPY_SEC_ENV, full ? SPY_DELTA_FULL : 0);
  for (uint32_t i = 0; i < e->snap_n; i++) {
    if (full || e->sent_version[i] != e->snap[i].version) {
      put_field(&d, &e->snap[i]);
      e->sent_version[i] = e->snap[i].version;
    }
  }
  for (uint32_t i = 0; i < e->local_n; i++) {
    if (e->local[i].key[0] &&
        (full || e->local_sent[i] != e->local[i].version)) {
      put_field(&d, &e->local[i]);
      e->local_sent[i] = e->local[i].version;
    }
  }
  spy_delta_end(&d);
  if (!full && d.count == 0 && !w->err) {
    w->len = mark;
    w->sec_start = 0;
  }
}
