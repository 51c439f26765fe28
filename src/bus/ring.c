/* ring.c — the single-writer broadcast ring (see ring.h for the scheme and
 * for who trusts what). */
#include "bus/ring.h"

#include "platform/platform.h"

#include <string.h>

#include "spyglass/error.h"
#include "spyglass/wire.h"

#define ALIGN16(n) (((n) + 15u) & ~(uint64_t)15u)
#define READ_ATTEMPTS 8

/* The data copies race with readers by design (they detect it and discard
 * the copy), so ThreadSanitizer is told not to instrument them. */
#define NO_TSAN SPY_NO_TSAN

NO_TSAN static void copy_in(uint8_t *dst, const void *src, size_t n) {
  memcpy(dst, src, n);
}
NO_TSAN static void copy_out(void *dst, const uint8_t *src, size_t n) {
  memcpy(dst, src, n);
}
NO_TSAN static void put_header(uint8_t *p, uint32_t len, uint32_t total,
                               uint64_t seq) {
  memcpy(p, &len, 4);
  memcpy(p + 4, &total, 4);
  memcpy(p + 8, &seq, 8);
}

void spy__ring_writer_init(spy_ring_writer *w, void *mem, uint32_t data_bytes,
                           uint64_t owner_id, uint32_t pid,
                           uint64_t created_mono_ns) {
  spy_ring_hdr *h = mem;
  memset(w, 0, sizeof *w);
  w->h = h;
  w->data = (uint8_t *)mem + SPY_RING_HEADER_BYTES;
  w->size = data_bytes;
  w->mask = (uint64_t)data_bytes - 1;
  w->shift = (unsigned)__builtin_ctz(data_bytes) - 3;
  w->ident.magic = SPY_RING_MAGIC;
  w->ident.version = SPY_RING_VERSION;
  w->ident.data_bytes = data_bytes;
  w->ident.pid = pid;
  w->ident.owner_id = owner_id;
  w->ident.created_mono_ns = created_mono_ns;
  h->data_bytes = data_bytes;
  h->pid = pid;
  h->owner_id = owner_id;
  h->created_mono_ns = created_mono_ns;
  atomic_store_explicit(&h->tail_intent, 0, memory_order_relaxed);
  atomic_store_explicit(&h->head, 0, memory_order_relaxed);
  atomic_store_explicit(&h->resume, 0, memory_order_relaxed);
  atomic_store_explicit(&h->records, 0, memory_order_relaxed);
  h->version = SPY_RING_VERSION;
  /* The magic last: a reader that sees it sees an initialised header. */
  atomic_thread_fence(memory_order_release);
  h->magic = SPY_RING_MAGIC;
}

NO_TSAN int spy__ring_repair(spy_ring_writer *w) {
  spy_ring_hdr *h = w->h;
  if (h->magic == w->ident.magic && h->version == w->ident.version &&
      h->data_bytes == w->ident.data_bytes && h->pid == w->ident.pid &&
      h->owner_id == w->ident.owner_id &&
      h->created_mono_ns == w->ident.created_mono_ns)
    return 0;
  h->magic = 0;
  atomic_thread_fence(memory_order_release);
  h->version = w->ident.version;
  h->data_bytes = w->ident.data_bytes;
  h->pid = w->ident.pid;
  h->owner_id = w->ident.owner_id;
  h->created_mono_ns = w->ident.created_mono_ns;
  atomic_thread_fence(memory_order_release);
  h->magic = w->ident.magic;
  return 1;
}

void *spy__ring_reserve(spy_ring_writer *w, uint32_t max_len) {
  const uint64_t size = w->size, mask = w->mask;
  uint64_t rec = ALIGN16((uint64_t)SPY_RING_RECORD_HEADER + max_len);
  if (max_len == 0 || rec > size / 4)
    return NULL;
  uint64_t pos = w->head;
  uint64_t off = pos & mask, pad = 0;
  if (off + rec > size)
    pad = size - off;
  uint64_t end = pos + pad + rec;
  /* Never lower: a smaller record after a larger reservation must not
   * tell readers that the bytes the caller may have written past it are
   * still the old ones. */
  if (end > w->intent)
    w->intent = end;
  atomic_store_explicit(&w->h->tail_intent, w->intent, memory_order_relaxed);
  /* Readers must see tail_intent before any byte below changes. */
  atomic_thread_fence(memory_order_seq_cst);
  if (pad) {
    put_header(w->data + off, 0, (uint32_t)pad, w->seq);
    off = 0;
  }
  w->res_start = pos + pad;
  w->res_max = max_len;
  return w->data + off + SPY_RING_RECORD_HEADER;
}

int spy__ring_commit(spy_ring_writer *w, uint32_t len) {
  uint32_t max = w->res_max;
  w->res_max = 0;
  if (max == 0 || len > max)
    return SPY_EINVAL;
  if (len == 0)
    return 0; /* cancelled: nothing published */
  spy_ring_hdr *h = w->h;
  uint64_t rec = ALIGN16((uint64_t)SPY_RING_RECORD_HEADER + len);
  uint64_t start = w->res_start, end = start + rec;
  uint64_t seq = w->seq;
  put_header(w->data + (start & w->mask), len, (uint32_t)rec, seq);
  w->seq = seq + 1;
  w->head = end;
  uint64_t e8 = start >> w->shift;
  if (e8 != w->eighth) {
    /* The first record in a new eighth (a long record may skip some: they
     * get this start too, a later one, which is safe). Publish the mark of
     * five eighths back: any byte the writer reaches before the next
     * eighth lies less than a ring ahead of it. */
    for (uint64_t k = w->eighth + 1; k <= e8; k++)
      w->marks[k & 7] = start;
    w->eighth = e8;
    atomic_store_explicit(&h->resume, e8 >= 5 ? w->marks[(e8 - 5) & 7] : 0,
                          memory_order_relaxed);
  }
  atomic_store_explicit(&h->records, seq + 1, memory_order_relaxed);
  atomic_store_explicit(&h->head, end, memory_order_release);
  return 0;
}

int spy__ring_write(spy_ring_writer *w, const void *frame, uint32_t len) {
  uint8_t *p = spy__ring_reserve(w, len);
  if (!p)
    return SPY_ETOOBIG;
  copy_in(p, frame, len);
  return spy__ring_commit(w, len);
}

/* Moves the cursor to the head; the loss is counted from the sequence of
 * the next record read, bounded by the bytes passed over. */
static void resync(spy_ring_reader *r, uint64_t head) {
  uint64_t gap = head > r->pos ? head - r->pos : r->size;
  r->skipped += gap;
  r->pos = head;
}

/* Lapped: carry on from the writer's resume point if it is plausible (a
 * 16-aligned position less than a ring behind the head and ahead of us),
 * else from the head. */
static void lapped(spy_ring_reader *r, uint64_t head) {
  uint64_t at = atomic_load_explicit(&r->h->resume, memory_order_acquire);
  if ((at & 15) || at > head || head - at > r->size || at <= r->pos)
    at = head;
  resync(r, at);
}

int spy__ring_reader_init(spy_ring_reader *r, const void *mem,
                          size_t map_bytes) {
  const spy_ring_hdr *h = mem;
  memset(r, 0, sizeof *r);
  if (map_bytes < SPY_RING_HEADER_BYTES + 4096u || h->magic != SPY_RING_MAGIC ||
      h->version != SPY_RING_VERSION)
    return SPY_EBADSEGMENT;
  /* One load: the value checked is the value kept. */
  uint32_t n = *(const volatile uint32_t *)&h->data_bytes;
  if (n < 4096 || (n & (n - 1)) ||
      (size_t)n != map_bytes - SPY_RING_HEADER_BYTES)
    return SPY_EBADSEGMENT;
  r->h = h;
  r->data = (const uint8_t *)mem + SPY_RING_HEADER_BYTES;
  r->size = n;
  r->mask = (uint64_t)n - 1;
  spy__ring_reader_at_head(r);
  return 0;
}

void spy__ring_reader_at_head(spy_ring_reader *r) {
  r->pos = atomic_load_explicit(&r->h->head, memory_order_acquire);
  r->next_seq = atomic_load_explicit(&r->h->records, memory_order_acquire);
  r->skipped = 0;
}

void spy__ring_reader_at_start(spy_ring_reader *r) {
  uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
  /* Until the writer first wraps, every record from 0 is intact. */
  r->pos = 0;
  r->next_seq = 0; /* records before count as lost */
  r->skipped = 0;
  if (head > r->size)
    lapped(r, head);
}

int spy__ring_pending(const spy_ring_reader *r) {
  return atomic_load_explicit(&r->h->head, memory_order_acquire) != r->pos;
}

/* The next record: copied into buf (view NULL), or, with a view, left in
 * place (*view = its bytes, *at = its position for spy__ring_intact). */
static int next_record(spy_ring_reader *r, void *buf, size_t cap,
                       const uint8_t **view, uint64_t *at, uint64_t *lost,
                       uint32_t *len_out) {
  const uint64_t size = r->size, mask = r->mask;
  const uint8_t *data = r->data;
  const spy_ring_hdr *h = r->h;
  *lost = 0;
  for (int attempts = 0; attempts < READ_ATTEMPTS; attempts++) {
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    uint64_t pos = r->pos;
    if (pos == head)
      return 0;
    if (head < pos || (head & 15) || (pos & 15)) {
      resync(r, head); /* positions only grow, on 16-byte boundaries */
      return SPY_EBADSEGMENT;
    }
    if (head - pos > size) {
      lapped(r, head);
      continue;
    }
    uint64_t off = pos & mask; /* 16-aligned, so off + 16 <= size */
    uint8_t hdr[SPY_RING_RECORD_HEADER];
    copy_out(hdr, data + off, sizeof hdr);
    uint32_t len, total;
    uint64_t seq;
    memcpy(&len, hdr, 4);
    memcpy(&total, hdr + 4, 4);
    memcpy(&seq, hdr + 8, 8);
    int bad =
        total < SPY_RING_RECORD_HEADER || (total & 15) || off + total > size ||
        pos + total > head ||
        (len ? (uint64_t)total > size / 4 ||
                   ALIGN16((uint64_t)SPY_RING_RECORD_HEADER + len) != total
             : off + total != size);
    int copied = 0;
    if (!bad && len && !view && len <= cap) {
      copy_out(buf, data + off + SPY_RING_RECORD_HEADER, len);
      copied = 1;
    }
    atomic_thread_fence(memory_order_acquire);
    uint64_t intent =
        atomic_load_explicit(&h->tail_intent, memory_order_relaxed);
    if (intent > pos + size) {
      /* The writer reached these bytes while we read: the copy (or the
       * header) may be torn. Carry on from the resume point. */
      lapped(r, atomic_load_explicit(&h->head, memory_order_acquire));
      continue;
    }
    if (bad) {
      resync(r, head);
      return SPY_EBADSEGMENT;
    }
    r->pos = pos + total;
    if (len == 0)
      continue; /* padding to the end of the data area */
    if (seq > r->next_seq) {
      uint64_t n = seq - r->next_seq, cap_n = r->skipped / SPY_RING_MIN_RECORD;
      *lost = n < cap_n ? n : cap_n; /* a garbage seq cannot inflate it */
      if (*lost == 0 && r->skipped)
        *lost = 1;
    }
    r->next_seq = seq + 1;
    r->skipped = 0;
    *len_out = len;
    if (view) {
      /* In bounds whatever happens next: off + total <= size was checked
       * on our private copy of the header. */
      *view = data + off + SPY_RING_RECORD_HEADER;
      *at = pos;
      return (int)len;
    }
    return copied ? (int)len : SPY_ENOBUFS;
  }
  return SPY_EAGAIN; /* the writer kept lapping us; try again later */
}

int spy__ring_read(spy_ring_reader *r, void *buf, size_t cap, uint64_t *lost,
                   uint32_t *len_out) {
  return next_record(r, buf, cap, NULL, NULL, lost, len_out);
}

int spy__ring_peek(spy_ring_reader *r, const uint8_t **data, uint64_t *at,
                   uint64_t *lost, uint32_t *len_out) {
  return next_record(r, NULL, 0, data, at, lost, len_out);
}

int spy__ring_intact(const spy_ring_reader *r, uint64_t at) {
  /* Order the caller's loads of the record before the check. */
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&r->h->tail_intent, memory_order_relaxed) <=
         at + r->size;
}
