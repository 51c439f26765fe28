/* zones.c — the ZONES section: CPU zones as per-thread event streams.
 *
 * A section holds the location records that are new to its readers (or
 * all of them, FULL), then one block per thread with that thread's begin,
 * end and frame events since the last section, as varints: the time
 * delta from the previous event shifted left by two, ORed with the kind,
 * then the location id (begin) or frame number (frame). An empty zone in a
 * tight loop costs about three bytes. Layout in docs/wire.md.
 *
 * spy_get_zones() walks the whole section once and checks every length,
 * varint, kind, id and time before handing anything out, so the iterators
 * after it need no checks of their own. spy_zones_unpack() is the same
 * walk, also writing every event as a packed word: a reader that applies
 * the events (the consumer state) reads the bytes once, not twice.
 */
#include <string.h>

#include "spyglass/wire.h"

#define HDR 24u        /* section header bytes */
#define LOC_HDR 16u    /* location record header */
#define THREAD_HDR 24u /* thread block header */
#define NAME_MAX_ 255u
#define THREAD_NAME_MAX 63u

static size_t pad4(size_t n) { return (n + 3u) & ~(size_t)3u; }

/* ---- encoding ------------------------------------------------------------ */

static void put_pad(spy_zones_writer *z) {
  spy_frame_writer *w = z->w;
  size_t rel = w->len - z->hdr;
  size_t n = pad4(rel) - rel;
  static const uint8_t zero[4];
  if (n)
    spy_frame_put(w, zero, n);
}

void spy_zones_begin(spy_zones_writer *z, spy_frame_writer *w, uint16_t flags,
                     uint64_t base_ns) {
  memset(z, 0, sizeof *z);
  z->w = w;
  z->base_ns = base_ns;
  spy_frame_section_begin(w, SPY_SEC_ZONES);
  uint8_t *h = spy_frame_reserve(w, HDR);
  if (!h)
    return;
  z->hdr = (size_t)(h - w->buf);
  memset(h, 0, HDR);
  spy_wr16(h, flags);
  spy_wr64(h + 16, base_ns);
}

void spy_zones_put_loc(spy_zones_writer *z, const spy_zone_loc_info *l) {
  spy_frame_writer *w = z->w;
  if (w->err || !z->hdr)
    return;
  if (z->thr || l->id < SPY_ZONES_LOC_ID_MIN || l->id > SPY_ZONES_LOC_ID_MAX ||
      z->n_threads) {
    w->err = SPY_EINVAL; /* locations come first */
    return;
  }
  uint32_t nl = l->name_len > NAME_MAX_ ? NAME_MAX_ : l->name_len;
  uint32_t fl = l->function_len > NAME_MAX_ ? NAME_MAX_ : l->function_len;
  uint32_t ff = l->file_len, skip = 0;
  if (ff > SPY_ZONES_FILE_MAX) { /* keep the end of a long path */
    skip = ff - SPY_ZONES_FILE_MAX;
    ff = SPY_ZONES_FILE_MAX;
  }
  uint8_t *h = spy_frame_reserve(w, LOC_HDR);
  if (!h)
    return;
  spy_wr32(h, l->id);
  spy_wr32(h + 4, l->line);
  spy_wr32(h + 8, l->color);
  h[12] = (uint8_t)nl;
  h[13] = (uint8_t)fl;
  spy_wr16(h + 14, (uint16_t)ff);
  spy_frame_put(w, l->name, nl);
  spy_frame_put(w, l->function, fl);
  spy_frame_put(w, l->file ? l->file + skip : NULL, ff);
  put_pad(z);
  z->n_locs++;
}

void spy_zones_thread_begin(spy_zones_writer *z,
                            const spy_zone_thread_info *t) {
  spy_frame_writer *w = z->w;
  spy_zones_thread_end(z);
  if (w->err || !z->hdr)
    return;
  uint32_t nl = t->name_len > THREAD_NAME_MAX ? THREAD_NAME_MAX : t->name_len;
  if (!t->thread) {
    w->err = SPY_EINVAL;
    return;
  }
  uint8_t *h = spy_frame_reserve(w, THREAD_HDR);
  if (!h)
    return;
  z->thr = (size_t)(h - w->buf);
  spy_wr32(h, t->thread);
  spy_wr32(h + 4, t->os_tid);
  h[8] = (uint8_t)(t->flags & 7u);
  h[9] = (uint8_t)nl;
  spy_wr16(h + 10, 0);
  spy_wr32(h + 12, 0); /* event bytes, at thread_end */
  spy_wr64(h + 16, t->dropped);
  spy_frame_put(w, t->name, nl);
  z->last_ns = z->base_ns;
  z->n_threads++;
}

static size_t varint(uint8_t *d, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    d[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  d[n++] = (uint8_t)v;
  return n;
}

void spy_zones_put_event(spy_zones_writer *z, uint8_t kind, uint64_t t_ns,
                         uint64_t value) {
  spy_frame_writer *w = z->w;
  if (w->err || !z->thr)
    return;
  if (kind > SPY_ZONE_EV_FRAME) {
    w->err = SPY_EINVAL;
    return;
  }
  uint64_t d = t_ns > z->last_ns ? t_ns - z->last_ns : 0;
  if (d >> 62) /* cannot be shifted: a broken clock; keep order */
    d = 0;
  z->last_ns += d;
  uint8_t b[SPY_ZONES_EVENT_MAX];
  size_t n = varint(b, d << 2 | kind);
  if (kind != SPY_ZONE_EV_END)
    n += varint(b + n, value);
  if (w->cap - w->len < n) {
    w->err = SPY_ENOBUFS;
    return;
  }
  memcpy(w->buf + w->len, b, n);
  w->len += n;
}

void spy_zones_thread_end(spy_zones_writer *z) {
  spy_frame_writer *w = z->w;
  if (!z->thr)
    return;
  size_t start = z->thr + THREAD_HDR + w->buf[z->thr + 9];
  if (!w->err)
    spy_wr32(w->buf + z->thr + 12, (uint32_t)(w->len - start));
  z->thr = 0;
  if (!w->err)
    put_pad(z);
}

void spy_zones_end(spy_zones_writer *z) {
  spy_frame_writer *w = z->w;
  spy_zones_thread_end(z);
  if (w->err || !z->hdr)
    return;
  spy_wr32(w->buf + z->hdr + 4, z->n_locs);
  spy_wr32(w->buf + z->hdr + 8, z->n_threads);
  spy_frame_section_end(w);
}

/* ---- decoding ------------------------------------------------------------ */

/* Reads a varint of at most 10 bytes ending before end; 0 on a bad one. */
static inline int rd_varint(const uint8_t **pp, const uint8_t *end,
                            uint64_t *out) {
  const uint8_t *p = *pp;
  if (__builtin_expect(p < end && !(*p & 0x80), 1)) {
    *out = *p; /* one byte: most deltas and ids */
    *pp = p + 1;
    return 1;
  }
  uint64_t v = 0;
  for (int i = 0; i < 10; i++) {
    if (p >= end)
      return 0;
    uint8_t b = *p++;
    if (i == 9 && b > 1)
      return 0; /* more than 64 bits */
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *pp = p;
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* A varint that may be longer than a byte (rd_varint), out of the loops
 * below and returning both the value and where it ends in registers (a
 * pointer passed by address would keep the loop's cursor in memory).
 * p is NULL on a bad one. */
typedef struct varint_at {
  const uint8_t *p;
  uint64_t v;
} varint_at;

static __attribute__((noinline)) varint_at rd_varint_long(const uint8_t *p,
                                                          const uint8_t *end) {
  varint_at r = {p, 0};
  if (!rd_varint(&r.p, end, &r.v))
    r.p = NULL;
  return r;
}

/* Decodes one event (validated or not); returns 0 or an error. */
static inline int event(const uint8_t **pp, const uint8_t *end, uint64_t *t,
                        spy_zone_event *out) {
  uint64_t v, val = 0;
  if (!rd_varint(pp, end, &v))
    return SPY_EBADVALUE;
  uint8_t kind = (uint8_t)(v & 3u);
  uint64_t d = v >> 2;
  if (kind > SPY_ZONE_EV_FRAME)
    return SPY_EBADVALUE;
  if (kind != SPY_ZONE_EV_END) {
    if (!rd_varint(pp, end, &val))
      return SPY_EBADVALUE;
    if (kind == SPY_ZONE_EV_BEGIN &&
        (val < SPY_ZONES_LOC_ID_MIN || val > SPY_ZONES_LOC_ID_MAX))
      return SPY_EBADVALUE;
  }
  if (*t + d < *t)
    return SPY_EBADVALUE; /* time overflows */
  *t += d;
  out->kind = kind;
  out->t_ns = *t;
  out->value = val;
  return 0;
}

/* Checks the events of one block [p, pend) from time t as event() does;
 * with `w`, also writes them there as packed words (wire.h, SPY_ZPK_*)
 * and a block-end word, *nw words so far. 0 or SPY_EBADVALUE. Every
 * event takes at least as many bytes as words (a begin 2 bytes, 1 word; a
 * frame 2 bytes, 2 words; a delta over 46 bits 7 bytes, 2 more words),
 * so a section never needs more words than its length: the block-end
 * words fit in the block headers' 24 bytes. */
static inline __attribute__((always_inline)) int walk(const uint8_t *p,
                                                      const uint8_t *pend,
                                                      uint64_t t, uint64_t *w,
                                                      size_t *nw) {
  size_t n = w ? *nw : 0;
  while (p < pend) {
    uint64_t v, val = 0;
    if (__builtin_expect(!(*p & 0x80), 1)) {
      v = *p++;
    } else if (pend - p >= 2 && !(p[1] & 0x80)) {
      v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7; /* a 2-byte delta */
      p += 2;
    } else {
      varint_at r = rd_varint_long(p, pend);
      if (!r.p)
        return SPY_EBADVALUE;
      p = r.p;
      v = r.v;
    }
    uint64_t kind = v & 3u, d = v >> 2;
    if (kind == SPY_ZONE_EV_BEGIN || kind == SPY_ZONE_EV_FRAME) {
      if (__builtin_expect(p < pend && !(*p & 0x80), 1)) {
        val = *p++;
      } else if (pend - p >= 2 && !(p[1] & 0x80)) {
        val = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7; /* id >= 128 */
        p += 2;
      } else {
        varint_at r = rd_varint_long(p, pend);
        if (!r.p)
          return SPY_EBADVALUE;
        p = r.p;
        val = r.v;
      }
      if (kind == SPY_ZONE_EV_BEGIN &&
          (val < SPY_ZONES_LOC_ID_MIN || val > SPY_ZONES_LOC_ID_MAX))
        return SPY_EBADVALUE;
    } else if (kind != SPY_ZONE_EV_END) {
      return SPY_EBADVALUE;
    }
    if (t + d < t)
      return SPY_EBADVALUE; /* time overflows */
    t += d;
    if (w) {
      if (__builtin_expect(d >> (64 - SPY_ZPK_DELTA_SHIFT), 0)) {
        w[n++] = SPY_ZPK_SPECIAL | SPY_ZPK_ADVANCE << 2;
        w[n++] = d;
        d = 0;
      }
      w[n++] = d << SPY_ZPK_DELTA_SHIFT |
               (kind == SPY_ZONE_EV_BEGIN ? val << 2 : 0) | kind;
      if (kind == SPY_ZONE_EV_FRAME)
        w[n++] = val;
    }
  }
  if (w) {
    w[n++] = SPY_ZPK_SPECIAL | SPY_ZPK_BLOCK_END << 2;
    *nw = n;
  }
  return 0;
}

/* The whole section checked once; with `w`, the events unpacked too. */
static int parse(const spy_section *s, spy_zones_iter *it, uint64_t *w,
                 size_t *nw) {
  memset(it, 0, sizeof *it);
  if (s->id != SPY_SEC_ZONES || s->len < HDR)
    return SPY_EBADSECTION;
  const uint8_t *b = s->data, *end = s->data + s->len;
  uint16_t flags = spy_rd16(b);
  if ((flags & ~SPY_ZONES_FULL) || spy_rd16(b + 2) || spy_rd32(b + 12))
    return SPY_EBADVALUE;
  uint32_t nl = spy_rd32(b + 4), nt = spy_rd32(b + 8);
  uint64_t base = spy_rd64(b + 16);
  /* Each record takes at least its header: counts beyond the bytes are
   * refused before anything is walked. */
  if ((uint64_t)nl * LOC_HDR + (uint64_t)nt * THREAD_HDR > s->len - HDR)
    return SPY_EBADSECTION;
  size_t off = HDR;
  for (uint32_t i = 0; i < nl; i++) {
    if (s->len - off < LOC_HDR)
      return SPY_EBADSECTION;
    const uint8_t *h = b + off;
    uint32_t id = spy_rd32(h);
    uint32_t fl = spy_rd16(h + 14);
    if (id < SPY_ZONES_LOC_ID_MIN || id > SPY_ZONES_LOC_ID_MAX ||
        fl > SPY_ZONES_FILE_MAX)
      return SPY_EBADVALUE;
    size_t body = (size_t)h[12] + h[13] + fl;
    if (s->len - off - LOC_HDR < body)
      return SPY_EBADSECTION;
    off = pad4(off + LOC_HDR + body);
    if (off > s->len)
      off = s->len;
  }
  for (uint32_t i = 0; i < nt; i++) {
    if (s->len - off < THREAD_HDR)
      return SPY_EBADSECTION;
    const uint8_t *h = b + off;
    if (!spy_rd32(h) || (h[8] & ~7u) || h[9] > THREAD_NAME_MAX ||
        spy_rd16(h + 10))
      return SPY_EBADVALUE;
    uint32_t ev = spy_rd32(h + 12);
    if (s->len - off - THREAD_HDR < (size_t)h[9] + ev)
      return SPY_EBADSECTION;
    const uint8_t *p = h + THREAD_HDR + h[9];
    int rc = w ? walk(p, p + ev, base, w, nw) : walk(p, p + ev, base, NULL, 0);
    if (rc < 0)
      return rc;
    off = pad4(off + THREAD_HDR + h[9] + ev);
    if (off > s->len)
      off = s->len;
  }
  if (off != s->len)
    return SPY_EBADSECTION; /* bytes after the last block */
  it->flags = flags;
  it->n_locs = it->locs_left = nl;
  it->n_threads = it->threads_left = nt;
  it->base_ns = base;
  it->p = b + HDR;
  it->end = end;
  return 0;
}

int spy_get_zones(const spy_section *s, spy_zones_iter *it) {
  return parse(s, it, NULL, NULL);
}

int spy_zones_unpack(const spy_section *s, spy_zones_iter *it, uint64_t *words,
                     size_t cap, size_t *n_words) {
  *n_words = 0;
  if (cap < s->len) {
    memset(it, 0, sizeof *it);
    return SPY_ENOBUFS;
  }
  int rc = parse(s, it, words, n_words);
  if (rc < 0)
    *n_words = 0;
  return rc;
}

/* Records start 4-aligned relative to the section's data (validated). */
static void advance(spy_zones_iter *it, size_t n) { it->p += n; }

int spy_zones_next_loc(spy_zones_iter *it, spy_zone_loc_info *out) {
  if (!it->locs_left)
    return 0;
  const uint8_t *h = it->p;
  out->id = spy_rd32(h);
  out->line = spy_rd32(h + 4);
  out->color = spy_rd32(h + 8);
  out->name_len = h[12];
  out->function_len = h[13];
  out->file_len = spy_rd16(h + 14);
  out->name = (const char *)h + LOC_HDR;
  out->function = out->name + out->name_len;
  out->file = out->function + out->function_len;
  size_t n = pad4(LOC_HDR + out->name_len + out->function_len + out->file_len);
  size_t avail = (size_t)(it->end - h);
  advance(it, n > avail ? avail : n);
  it->locs_left--;
  return 1;
}

int spy_zones_next_thread(spy_zones_iter *it, spy_zone_thread_info *out,
                          spy_zone_event_iter *ev) {
  spy_zone_loc_info l;
  while (it->locs_left)
    spy_zones_next_loc(it, &l);
  if (!it->threads_left)
    return 0;
  const uint8_t *h = it->p;
  out->thread = spy_rd32(h);
  out->os_tid = spy_rd32(h + 4);
  out->flags = h[8];
  out->name_len = h[9];
  out->name = (const char *)h + THREAD_HDR;
  out->dropped = spy_rd64(h + 16);
  uint32_t n = spy_rd32(h + 12);
  ev->p = h + THREAD_HDR + h[9];
  ev->end = ev->p + n;
  ev->t_ns = it->base_ns;
  size_t len = pad4(THREAD_HDR + (size_t)h[9] + n);
  size_t avail = (size_t)(it->end - h);
  advance(it, len > avail ? avail : len);
  it->threads_left--;
  return 1;
}

int spy_zone_event_next(spy_zone_event_iter *ev, spy_zone_event *out) {
  if (ev->p >= ev->end)
    return 0;
  return event(&ev->p, ev->end, &ev->t_ns, out) == 0;
}
