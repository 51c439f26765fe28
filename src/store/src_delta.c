/* src_delta.c — the copy/insert delta of a source payload against its base
 * (src_delta.h).
 *
 * A blob is a flag byte, then the program: raw (flag 0), or (flag 1) its
 * length as a varint and one zstd frame of it. The program is
 *   varint nops, varint nlit, nops ops, nlit literal bytes
 * and an op is three varints: lit (literal bytes to insert, taken in turn
 * from the literals), copy (bytes to copy from the base) and the copy's
 * start as a zigzag difference from where the previous copy ended (0 at
 * first). The literals go last, apart from the ops, so zstd sees them as
 * one text.
 *
 * The encoder indexes the base at line starts (and every 32 bytes along a
 * longer line) by a hash of the 8 bytes there; it walks the payload, at
 * each position where no copy runs looking the 8 bytes up among the
 * base's anchors, taking the candidate nearest to where the last copy
 * ended (edits keep the order of the text), extending the copy backwards
 * over the pending literals and forwards by 8-byte compares. Where a probe
 * fails it skips to the payload's next line start when one is near, so a
 * text costs about one lookup per edit, not one per byte. */
#include "src_delta.h"

#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#define ANCHOR_SPAN 32 /* an anchor at least every 32 bytes of a line */
#define LOCAL 8        /* anchors after the last copy's end tried first */
#define CHAIN 16       /* then candidates of the same hash */
#define SKIP 64        /* a failed probe skips to a line start this near */
#define ZSTD_MIN 4096  /* shorter programs are stored raw */
#define NONE UINT32_MAX

static uint64_t load64(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t hash8(const char *p, size_t bits) {
  return (uint32_t)((load64(p) * 0x9E3779B185EBCA87ull) >> (64 - bits));
}

/* Bytes a[0..) and b[0..) have in common, at most n. */
static size_t common(const char *a, const char *b, size_t n) {
  size_t k = 0;
  while (k + 8 <= n) {
    uint64_t x = load64(a + k) ^ load64(b + k);
    if (x)
      return k + (size_t)(__builtin_ctzll(x) >> 3);
    k += 8;
  }
  while (k < n && a[k] == b[k])
    k++;
  return k;
}

static uint8_t *put_var(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static int get_var(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int s = 0; s < 64; s += 7) {
    if (*p >= end)
      return -1;
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << s;
    if (!(b & 0x80)) {
      *v = r;
      return 0;
    }
  }
  return -1;
}

/* An op: a byte holding lit (bits 0-2) and the zigzag delta (bits 3-5),
 * each 7 meaning "a varint follows", then the copy length, then the
 * varints. */
static uint8_t *put_op(uint8_t *p, uint64_t lit, uint64_t copy, int64_t d) {
  uint64_t zz = ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
  *p++ = (uint8_t)((lit < 7 ? lit : 7) | (zz < 7 ? zz : 7) << 3);
  p = put_var(p, copy);
  if (lit >= 7)
    p = put_var(p, lit);
  if (zz >= 7)
    p = put_var(p, zz);
  return p;
}

size_t spy__delta_bound(size_t n) {
  /* flag + a 10-byte varint + the worst program (all literal: its header
   * and one op) or its zstd frame, whichever is larger */
  size_t prog = n + 40;
  size_t z = ZSTD_compressBound(prog);
  return 1 + 10 + (z > prog ? z : prog);
}

void spy__delta_free(spy__delta *d) {
  free(d->head);
  free(d->next);
  free(d->pos);
  free(d->prog);
  ZSTD_freeCCtx(d->cctx);
  memset(d, 0, sizeof *d);
}

/* Makes room for want anchors; 0 or -1 (no memory). */
static int grow(spy__delta *d, size_t want) {
  if (want <= d->cap_anchors)
    return 0;
  size_t cap = d->cap_anchors ? d->cap_anchors : 256;
  while (cap < want)
    cap *= 2;
  uint32_t *nx = realloc(d->next, cap * sizeof *nx);
  if (nx)
    d->next = nx;
  uint32_t *ps = nx ? realloc(d->pos, cap * sizeof *ps) : NULL;
  if (!ps)
    return -1;
  d->pos = ps;
  d->cap_anchors = cap;
  return 0;
}

/* Indexes base's anchors; returns 0 or -1 (no memory). */
static int index_base(spy__delta *d, const char *base, size_t nb) {
  /* sized for a line per 16 bytes; grown when there are more */
  size_t want = nb / 16 + 16;
  if (grow(d, want) < 0)
    return -1;
  size_t bits = 8;
  while (((size_t)1 << bits) < 2 * want && bits < 20)
    bits++;
  if (bits > d->cap_bits) { /* a larger table: all slots of no epoch */
    uint32_t *h = realloc(d->head, ((size_t)2 << bits) * sizeof *h);
    if (!h)
      return -1;
    memset(h, 0, ((size_t)2 << bits) * sizeof *h);
    d->head = h;
    d->cap_bits = bits;
    d->epoch = 0;
  }
  d->hbits = bits;
  /* a slot is (epoch, anchor): a stale epoch is an empty slot, so a new
   * base needs no clearing of the table */
  if (++d->epoch == 0) {
    memset(d->head, 0, ((size_t)2 << d->cap_bits) * sizeof *d->head);
    d->epoch = 1;
  }
  uint32_t na = 0;
  size_t at = 0; /* the next anchor */
  while (at + 8 <= nb) {
    if (na == d->cap_anchors && grow(d, (size_t)na + 1) < 0)
      return -1;
    uint32_t *slot = d->head + 2 * hash8(base + at, bits);
    d->pos[na] = (uint32_t)at;
    d->next[na] = slot[0] == d->epoch ? slot[1] : NONE;
    slot[0] = d->epoch;
    slot[1] = na++;
    size_t span = nb - at - 1 < ANCHOR_SPAN ? nb - at - 1 : ANCHOR_SPAN;
    const char *nl = memchr(base + at, '\n', span);
    at = nl ? (size_t)(nl - base) + 1 : at + ANCHOR_SPAN;
  }
  d->nanchors = na;
  return 0;
}

long spy__delta_encode(spy__delta *d, const char *base, size_t nb,
                       const char *p, size_t n, uint8_t *out, size_t cap,
                       size_t limit) {
  if (nb >= NONE || n >= NONE || cap < spy__delta_bound(n))
    return 0;
  if (index_base(d, base, nb) < 0)
    return -2;
  /* the program: room for its header (20 bytes), the ops (at most one
   * per 8 payload bytes, 3 varints each), then the literals */
  size_t ops_cap = 20 + (n / 8 + 2) * 30;
  if (ops_cap + n > d->cap_prog) {
    uint8_t *np = realloc(d->prog, ops_cap + n);
    if (!np)
      return -2;
    d->prog = np;
    d->cap_prog = ops_cap + n;
  }
  uint8_t *op = d->prog + 20, *lit = d->prog + ops_cap;
  size_t nlit = 0, nops = 0;
  size_t i = 0, lit0 = 0, bexp = 0;
  size_t bits = d->hbits, na = d->nanchors, j = 0;
  const uint32_t *pos = d->pos;
  while (i + 8 <= n) {
    uint64_t w = load64(p + i);
    size_t best = NONE, bestd = (size_t)-1;
    /* first the anchors just around where the last copy ended: edits keep
     * the text's order, and a repeated line elsewhere is the wrong one */
    while (j < na && pos[j] < bexp)
      j++;
    for (size_t t = j > 2 ? j - 2 : 0; t < na && t < j + LOCAL; t++) {
      size_t bp = pos[t];
      if (bp > bexp && bp - bexp >= bestd)
        break;
      if (load64(base + bp) != w)
        continue;
      size_t dist = bp > bexp ? bp - bexp : bexp - bp;
      if (dist < bestd) {
        best = bp;
        bestd = dist;
      }
    }
    int k = 0;
    const uint32_t *slot = d->head + 2 * hash8(p + i, bits);
    for (uint32_t a = best == NONE && slot[0] == d->epoch ? slot[1] : NONE;
         a != NONE && k < CHAIN; a = d->next[a], k++) {
      size_t bp = pos[a];
      if (load64(base + bp) != w)
        continue;
      size_t dist = bp > bexp ? bp - bexp : bexp - bp;
      if (dist < bestd) {
        best = bp;
        bestd = dist;
      }
    }
    if (best == NONE) {
      size_t span = n - i - 1 < SKIP ? n - i - 1 : SKIP;
      const char *nl = p[i] == '\n' ? NULL : memchr(p + i, '\n', span);
      i = nl ? (size_t)(nl - p) + 1 : i + 1;
      continue;
    }
    size_t back = 0;
    while (i - back > lit0 && best - back > 0 &&
           p[i - back - 1] == base[best - back - 1])
      back++;
    size_t len =
        8 + common(p + i + 8, base + best + 8,
                   n - i - 8 < nb - best - 8 ? n - i - 8 : nb - best - 8);
    size_t l = i - back - lit0, bp = best - back;
    memcpy(lit + nlit, p + lit0, l);
    nlit += l;
    op = put_op(op, l, len + back, (int64_t)bp - (int64_t)bexp);
    nops++;
    bexp = best + len;
    if (j > 0 && pos[j - 1] >= bexp) { /* a copy from before: find j again */
      size_t lo = 0, hi = j;
      while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pos[mid] < bexp)
          lo = mid + 1;
        else
          hi = mid;
      }
      j = lo;
    }
    i += len;
    lit0 = i;
    if (i < n && p[i - 1] != '\n') { /* mid-line: the next line start */
      size_t span = n - i < SKIP ? n - i : SKIP;
      const char *nl = memchr(p + i, '\n', span);
      if (nl)
        i = (size_t)(nl - p) + 1;
    }
    if ((size_t)(op - d->prog) + 30 > ops_cap)
      return 0; /* cannot happen: an op covers at least 8 bytes */
  }
  if (lit0 < n) { /* the tail: literals only */
    memcpy(lit + nlit, p + lit0, n - lit0);
    nlit += n - lit0;
    op = put_op(op, n - lit0, 0, 0);
    nops++;
  }
  /* the header right before the ops, then the literals after them */
  uint8_t hdr[20], *h = put_var(put_var(hdr, nops), nlit);
  size_t nh = (size_t)(h - hdr);
  uint8_t *prog = d->prog + 20 - nh;
  memcpy(prog, hdr, nh);
  memmove(op, lit, nlit);
  size_t plen = (size_t)(op + nlit - prog);
  if (plen >= ZSTD_MIN) {
    if (!d->cctx && !(d->cctx = ZSTD_createCCtx()))
      return -2;
    uint8_t *q = put_var(out + 1, plen);
    size_t room = cap - (size_t)(q - out);
    size_t z = ZSTD_compressCCtx(d->cctx, q, room, prog, plen, 1);
    if (!ZSTD_isError(z) && (size_t)(q - out) + z < 1 + plen) {
      out[0] = 1;
      size_t len = (size_t)(q - out) + z;
      return len < limit ? (long)len : 0;
    }
  }
  if (1 + plen >= limit)
    return 0;
  out[0] = 0;
  memcpy(out + 1, prog, plen);
  return (long)(1 + plen);
}

/* Runs the program prog[0..np) over base into out[0..size). */
static int run(const uint8_t *prog, size_t np, const char *base, size_t nb,
               char *out, size_t size) {
  const uint8_t *c = prog, *end = prog + np;
  uint64_t nops, nlit;
  if (get_var(&c, end, &nops) < 0 || get_var(&c, end, &nlit) < 0 ||
      nlit > (uint64_t)(end - c) || nlit > size)
    return -1;
  const uint8_t *lits = end - nlit, *lend = end;
  end = lits; /* the ops end where the literals start */
  uint64_t o = 0, bexp = 0;
  for (uint64_t k = 0; k < nops; k++) {
    uint64_t l, cp, zz;
    if (c >= end)
      return -1;
    uint8_t b = *c++;
    l = b & 7;
    zz = b >> 3 & 7;
    if ((b & 0xc0) || get_var(&c, end, &cp) < 0 ||
        (l == 7 && get_var(&c, end, &l) < 0) ||
        (zz == 7 && get_var(&c, end, &zz) < 0))
      return -1;
    if (l > (uint64_t)(lend - lits) || l > size - o)
      return -1;
    memcpy(out + o, lits, l);
    lits += l;
    o += l;
    int64_t delta = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
    uint64_t bp = bexp + (uint64_t)delta; /* wraps when negative */
    if (bp > nb || cp > nb - bp || cp > size - o)
      return -1;
    memcpy(out + o, base + bp, cp);
    o += cp;
    bexp = bp + cp;
  }
  return c == end && lits == lend && o == size ? 0 : -1;
}

int spy__delta_decode(void **dctx, const uint8_t *blob, size_t nblob,
                      const char *base, size_t nb, char *out, size_t size) {
  if (nblob < 1 || (!base && nb))
    return -1;
  if (blob[0] == 0)
    return run(blob + 1, nblob - 1, base, nb, out, size);
  if (blob[0] != 1)
    return -1;
  const uint8_t *c = blob + 1, *end = blob + nblob;
  uint64_t plen;
  /* a program is never much longer than its output: ops cover 8 bytes
   * each at least, the literals are output bytes */
  if (get_var(&c, end, &plen) < 0 || plen > 40 + (uint64_t)size * 4)
    return -1;
  uint8_t *prog = malloc(plen ? (size_t)plen : 1);
  if (!prog)
    return -2;
  if (!*dctx && !(*dctx = ZSTD_createDCtx())) {
    free(prog);
    return -2;
  }
  size_t r =
      ZSTD_decompressDCtx(*dctx, prog, (size_t)plen, c, (size_t)(end - c));
  int rc = ZSTD_isError(r) || r != plen
               ? -1
               : run(prog, (size_t)plen, base, nb, out, size);
  free(prog);
  return rc;
}
