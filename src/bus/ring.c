/* ring.c — the single-writer broadcast ring (see ring.h for the scheme). */
#include "bus/ring.h"

#include "platform/platform.h"

#include <string.h>

#include "spyglass/error.h"
#include "spyglass/wire.h"

#define ALIGN16(n) (((n) + 15u) & ~(uint64_t)15u)

void spy__ring_init(spy_ring_hdr *h, uint32_t data_bytes, uint64_t owner_id) {
  h->data_bytes = data_bytes;
  h->owner_id = owner_id;
  atomic_store_explicit(&h->tail_intent, 0, memory_order_relaxed);
  atomic_store_explicit(&h->head, 0, memory_order_relaxed);
  atomic_store_explicit(&h->oldest, 0, memory_order_relaxed);
  atomic_store_explicit(&h->records, 0, memory_order_relaxed);
  h->version = SPY_RING_VERSION;
  /* The magic last: a reader that sees it sees an initialised header. */
  atomic_thread_fence(memory_order_release);
  h->magic = SPY_RING_MAGIC;
}

int spy__ring_check(const spy_ring_hdr *h, size_t map_bytes) {
  if (map_bytes < SPY_RING_HEADER_BYTES || h->magic != SPY_RING_MAGIC ||
      h->version != SPY_RING_VERSION)
    return SPY_EBADSEGMENT;
  uint32_t n = h->data_bytes;
  if (n < 4096 || (n & (n - 1)) ||
      (size_t)n != map_bytes - SPY_RING_HEADER_BYTES)
    return SPY_EBADSEGMENT;
  return 0;
}

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

int spy__ring_write(spy_ring_hdr *h, const void *frame, uint32_t len) {
  uint64_t size = h->data_bytes, mask = size - 1;
  uint64_t rec = ALIGN16((uint64_t)SPY_RING_RECORD_HEADER + len);
  if (len == 0 || rec > size / 4)
    return SPY_ETOOBIG;
  uint8_t *data = spy__ring_data(h);
  uint64_t pos = atomic_load_explicit(&h->head, memory_order_relaxed);
  uint64_t off = pos & mask, pad = 0;
  if (off + rec > size)
    pad = size - off;
  uint64_t end = pos + pad + rec;
  /* Retire every record whose bytes the write will reach. */
  uint64_t oldest = atomic_load_explicit(&h->oldest, memory_order_relaxed);
  while (end > size && oldest < end - size && oldest < pos) {
    uint32_t total;
    memcpy(&total, data + (oldest & mask) + 4, 4);
    oldest += total;
  }
  atomic_store_explicit(&h->oldest, oldest, memory_order_relaxed);
  atomic_store_explicit(&h->tail_intent, end, memory_order_relaxed);
  /* Readers must see tail_intent before any byte below changes. */
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t seq = atomic_load_explicit(&h->records, memory_order_relaxed);
  if (pad) {
    put_header(data + off, 0, (uint32_t)pad, seq);
    if (oldest == pos)
      atomic_store_explicit(&h->oldest, pos + pad, memory_order_relaxed);
    pos += pad;
    off = 0;
  }
  put_header(data + off, len, (uint32_t)rec, seq);
  copy_in(data + off + SPY_RING_RECORD_HEADER, frame, len);
  atomic_store_explicit(&h->records, seq + 1, memory_order_relaxed);
  atomic_store_explicit(&h->head, end, memory_order_release);
  return 0;
}

void spy__ring_cursor_at_head(const spy_ring_hdr *h, spy_ring_cursor *c) {
  c->pos = atomic_load_explicit(&h->head, memory_order_acquire);
  c->next_seq = atomic_load_explicit(&h->records, memory_order_acquire);
}

void spy__ring_cursor_at_oldest(const spy_ring_hdr *h, spy_ring_cursor *c) {
  c->pos = atomic_load_explicit(&h->oldest, memory_order_acquire);
  c->next_seq = 0; /* records before the oldest count as lost */
}

int spy__ring_pending(const spy_ring_hdr *h, const spy_ring_cursor *c) {
  return atomic_load_explicit(&h->head, memory_order_acquire) != c->pos;
}

int spy__ring_read(const spy_ring_hdr *h, spy_ring_cursor *c, void *buf,
                   size_t cap, uint64_t *lost, uint32_t *len_out) {
  const uint64_t size = h->data_bytes, mask = size - 1;
  const uint8_t *data = spy__ring_data(h);
  *lost = 0;
  for (int attempts = 0; attempts < 64; attempts++) {
    uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);
    if (c->pos == head)
      return 0;
    uint64_t oldest = atomic_load_explicit(&h->oldest, memory_order_acquire);
    if (head - c->pos > size || c->pos < oldest || c->pos > head) {
      c->pos = oldest; /* lapped: resume at the oldest intact record */
      continue;
    }
    uint64_t off = c->pos & mask;
    uint8_t hdr[SPY_RING_RECORD_HEADER];
    copy_out(hdr, data + off, sizeof hdr);
    uint32_t len, total;
    uint64_t seq;
    memcpy(&len, hdr, 4);
    memcpy(&total, hdr + 4, 4);
    memcpy(&seq, hdr + 8, 8);
    int bad = total < SPY_RING_RECORD_HEADER || (total & 15) ||
              off + total > size || c->pos + total > head ||
              (len && ALIGN16((uint64_t)SPY_RING_RECORD_HEADER + len) != total);
    int copied = 0;
    if (!bad && len && len <= cap) {
      copy_out(buf, data + off + SPY_RING_RECORD_HEADER, len);
      copied = 1;
    }
    atomic_thread_fence(memory_order_acquire);
    uint64_t intent =
        atomic_load_explicit(&h->tail_intent, memory_order_relaxed);
    if (intent > c->pos + size)
      continue; /* the writer reached these bytes while we read: retry */
    if (bad)
      return SPY_EBADSEGMENT;
    c->pos += total;
    if (len == 0)
      continue; /* padding to the end of the data area */
    if (seq > c->next_seq)
      *lost += seq - c->next_seq;
    c->next_seq = seq + 1;
    if (!copied) {
      *len_out = len;
      return SPY_ENOBUFS;
    }
    *len_out = len;
    return (int)len;
  }
  return SPY_EAGAIN; /* the writer kept lapping us; try again later */
}
