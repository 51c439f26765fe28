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
 * The encoder walks the payload and the base side by side, copying while
 * they agree (8-byte compares). At a mismatch it looks for where they
 * agree again, nearest first: every small edit (SMALL bytes inserted and
 * deleted at most), then the payload's next line start against the
 * base's next LINES line starts and the other way round, and only then
 * anywhere in the base through an index of its line starts (made the
 * first time a payload needs it). Edits of text keep its order, so most
 * mismatches cost a few compares; a repeated line elsewhere in the base
 * (every function ends in "return y;") is not mistaken for the next one.
 * A copy found further on is extended backwards over the pending
 * literals. A payload mostly unlike its base (under a quarter of the
 * bytes walked copied, once an eighth of it is walked) is given up
 * (hopeless): on /usr/include's cross-module pairs the walk cost ~55
 * instructions a byte for a delta refused at the end. */
#include "src_delta.h"

#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPY_DELTA_AVX2 1 /* an AVX2 copy of the encoder's loop */
#include <immintrin.h>
#endif

#define ANCHOR_SPAN 32  /* an anchor at least every 32 bytes of a line */
#define SMALL 8         /* edits this small are found by trying them all */
#define LINES 8         /* line starts tried each way after a longer one */
#define CHAIN 16        /* index candidates of a hash looked at */
#define SKIP 64         /* a line start this near is "the next line" */
#define ZSTD_MIN 4096   /* shorter programs are stored raw... */
#define ZSTD_REACH 6    /* ...unless over the limit by less than 6x */
#define HOPE_AFTER 1024 /* bytes walked before a payload is given up... */
#define HOPE_COVER 4    /* ...with under 1/4 of them copied */
#define NONE UINT32_MAX

static inline uint32_t load32(const char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static inline uint64_t load64(const char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t hash8(const char *p, size_t bits) {
  return (uint32_t)((load64(p) * 0x9E3779B185EBCA87ull) >> (64 - bits));
}

/* Bytes a[0..) and b[0..) have in common, at most n: 16 bytes a step
 * where SSE2 is there (every x86-64), else 8. A copy is ~40 bytes on
 * average in the bench trees (an edit every line or so), so the step is
 * most of what a copy costs. */
static inline size_t common(const char *a, const char *b, size_t n) {
  size_t k = 0;
#ifdef __SSE2__
  while (k + 16 <= n) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(a + k));
    __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(b + k));
    unsigned eq = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, y));
    if (eq != 0xffff)
      return k + (size_t)__builtin_ctz(~eq);
    k += 16;
  }
#endif
  while (k + 8 <= n) {
    uint64_t x = load64(a + k) ^ load64(b + k);
    if (x)
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
      return k + (size_t)(__builtin_clzll(x) >> 3);
#else
      return k + (size_t)(__builtin_ctzll(x) >> 3);
#endif
    k += 8;
  }
  while (k < n && a[k] == b[k])
    k++;
  return k;
}

static inline uint8_t *put_var(uint8_t *p, uint64_t v) {
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
static inline uint8_t *put_op(uint8_t *p, uint64_t lit, uint64_t copy,
                              int64_t d) {
  uint64_t zz = ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
  if ((lit | zz) < 7 && copy < 0x80) { /* most ops: two bytes */
    p[0] = (uint8_t)(lit | zz << 3);
    p[1] = (uint8_t)copy;
    return p + 2;
  }
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
  free(d->nl);
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
  /* the base's newlines as a bitmap, 16 bytes a step: the next anchor
   * is then a shift and a count of trailing zeros, not a memchr call
   * (which was a third of the index's cost) */
  size_t words = nb / 64 + 2; /* a word of zeros past the end */
  if (words > d->cap_nl) {
    uint64_t *m = realloc(d->nl, words * sizeof *m);
    if (!m)
      return -1;
    d->nl = m;
    d->cap_nl = words;
  }
  uint64_t *nlm = d->nl;
  size_t q = 0;
#ifdef __SSE2__
  const __m128i nlv = _mm_set1_epi8('\n');
  for (; q + 64 <= nb; q += 64) {
    uint64_t m = 0;
    for (int h = 0; h < 4; h++) {
      __m128i x =
          _mm_loadu_si128((const __m128i *)(const void *)(base + q + 16 * h));
      m |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, nlv))
           << (16 * h);
    }
    nlm[q / 64] = m;
  }
#endif
  for (; q < nb; q += 64) {
    uint64_t m = 0;
    for (size_t h = q; h < nb && h < q + 64; h++)
      m |= (uint64_t)(base[h] == '\n') << (h - q);
    nlm[q / 64] = m;
  }
  nlm[words - 1] = 0;
  if (words >= 2 && (nb & 63) == 0)
    nlm[words - 2] = 0;
  /* anchors: every line start, and every ANCHOR_SPAN bytes of a longer
   * line, walked newline by newline through the bitmap */
  uint32_t na = 0;
  size_t at = 0; /* the next anchor */
#define ANCHOR()                                                               \
  do {                                                                         \
    if (na == d->cap_anchors && grow(d, (size_t)na + 1) < 0)                   \
      return -1;                                                               \
    uint32_t *slot = d->head + 2 * hash8(base + at, bits);                     \
    d->pos[na] = (uint32_t)at;                                                 \
    d->next[na] = slot[0] == d->epoch ? slot[1] : NONE;                        \
    slot[0] = d->epoch;                                                        \
    slot[1] = na++;                                                            \
  } while (0)
  for (size_t wi = 0; wi < words; wi++)
    for (uint64_t m = nlm[wi]; m; m &= m - 1) {
      size_t e = wi * 64 + (size_t)__builtin_ctzll(m); /* at <= e */
      for (;;) {
        if (at + 8 > nb)
          goto indexed;
        ANCHOR();
        if (e - at < ANCHOR_SPAN)
          break;
        at += ANCHOR_SPAN;
      }
      at = e + 1;
    }
  for (; at + 8 <= nb; at += ANCHOR_SPAN) /* past the last newline */
    ANCHOR();
#undef ANCHOR
indexed:
  d->nanchors = na;
  return 0;
}

/* The nearest small edit at a mismatch of p[0..) and b[0..) (both with
 * SMALL + 8 bytes readable): a bytes inserted and c deleted, a + c <= SMALL
 * and the fewest first, such that the 8 bytes after them agree. The words
 * are loaded as the edit grows and the pairs compared unrolled: most
 * edits are found within a few (a one-byte change is the second pair). */
static inline int small_edit(const char *p, const char *b, size_t *pa,
                             size_t *pc) {
#define W(k) uint64_t P##k = load64(p + k), B##k = load64(b + k)
#define T(x, y)                                                                \
  if (P##x == B##y) {                                                          \
    *pa = x;                                                                   \
    *pc = y;                                                                   \
    return 1;                                                                  \
  }
  W(0);
  W(1);
  T(0, 1) T(1, 0);
  W(2);
  T(0, 2) T(1, 1) T(2, 0);
  W(3);
  T(0, 3) T(1, 2) T(2, 1) T(3, 0);
  W(4);
  T(0, 4) T(1, 3) T(2, 2) T(3, 1) T(4, 0);
  W(5);
  T(0, 5) T(1, 4) T(2, 3) T(3, 2) T(4, 1) T(5, 0);
  W(6);
  T(0, 6) T(1, 5) T(2, 4) T(3, 3) T(4, 2) T(5, 1) T(6, 0);
  W(7);
  T(0, 7) T(1, 6) T(2, 5) T(3, 4) T(4, 3) T(5, 2) T(6, 1) T(7, 0);
  W(8);
  T(0, 8) T(1, 7) T(2, 6) T(3, 5) T(4, 4) T(5, 3) T(6, 2) T(7, 1) T(8, 0);
  return 0;
#undef W
#undef T
}

/* Where p[i..) and base[j..) line up again after a mismatch at (i, j)
 * that is not a small edit the encoder's loop found (or too near an end
 * for its unrolled test): sets *pi, *pj to a pair whose 8 bytes agree,
 * nearest first. Returns 0 for a small edit (the bytes before the pair
 * differ), 1 for a pair found further on (the caller extends it
 * backwards), or -1 when nothing was found before i reaches the end, *pi
 * then being where to look next; -2 out of memory. Out of line: the
 * loop's registers stay with the common case. */
static __attribute__((noinline)) int realign(spy__delta *d, const char *base,
                                             size_t nb, const char *p, size_t n,
                                             size_t i, size_t j, size_t *pi,
                                             size_t *pj) {
  /* a small edit near an end: every pair that stays in bounds */
  if (i + SMALL + 8 > n || j + SMALL + 8 > nb)
    for (size_t e = 1; e <= SMALL; e++)
      for (size_t a = 0; a <= e; a++) {
        size_t b = e - a;
        if (i + a + 8 <= n && j + b + 8 <= nb &&
            load64(p + i + a) == load64(base + j + b)) {
          *pi = i + a;
          *pj = j + b;
          return 0;
        }
      }
  /* a longer one within a line or a few: the payload's next line start
   * against the base's next ones, and the other way round */
  const char *nl = memchr(p + i, '\n', n - i < SKIP ? n - i : SKIP);
  size_t li = nl ? (size_t)(nl - p) + 1 : n;
  const char *bl = j < nb ? memchr(base + j, '\n', nb - j) : NULL;
  size_t lj = bl ? (size_t)(bl - base) + 1 : nb;
  /* 4 bytes at line starts will do: short lines ("}" and blank ones)
   * would put an 8-byte window across the next edit */
  if (li + 4 <= n) {
    uint32_t w = load32(p + li);
    size_t jj = lj;
    for (int k = 0; k < LINES && jj + 4 <= nb; k++) {
      if (load32(base + jj) == w) {
        *pi = li;
        *pj = jj;
        return 1;
      }
      const char *e = memchr(base + jj, '\n', nb - jj);
      if (!e)
        break;
      jj = (size_t)(e - base) + 1;
    }
  }
  if (lj + 4 <= nb) {
    uint32_t w = load32(base + lj);
    size_t ii = li;
    for (int k = 0; k < LINES && ii + 4 <= n; k++) {
      if (load32(p + ii) == w) {
        *pi = ii;
        *pj = lj;
        return 1;
      }
      const char *e = memchr(p + ii, '\n', n - ii);
      if (!e)
        break;
      ii = (size_t)(e - p) + 1;
    }
  }
  /* anywhere in the base: its anchors by hash, from the line start on
   * (or, in a long line, from the next byte on) */
  size_t at = nl ? li : i + 1; /* a line start, else the next byte */
  if (at + 8 > n) { /* the payload's last bytes: literals (no index) */
    *pi = n;
    return -1;
  }
  if (!d->indexed) {
    if (index_base(d, base, nb) < 0)
      return -2;
    d->indexed = 1;
  }
  uint64_t w = load64(p + at);
  const uint32_t *slot = d->head + 2 * hash8(p + at, d->hbits);
  size_t best = NONE, bestd = (size_t)-1;
  int k = 0;
  for (uint32_t x = slot[0] == d->epoch ? slot[1] : NONE;
       x != NONE && k < CHAIN; x = d->next[x], k++) {
    size_t bp = d->pos[x];
    if (load64(base + bp) != w)
      continue;
    size_t dist = bp > j ? bp - j : j - bp;
    if (dist < bestd) {
      best = bp;
      bestd = dist;
    }
  }
  *pi = at;
  if (best == NONE)
    return -1; /* look on from there */
  *pj = best;
  return 1;
}

/* The encoder's position: x in the payload, y in the base, l0 the first
 * literal not yet in an op, bx where the last copy ended in the base; the
 * op and literal write pointers and the ops made. */
typedef struct walk {
  const char *x, *y, *l0, *bx;
  uint8_t *op, *lw;
  size_t nops;
} walk;

/* Emits the copy of the m bytes at (w->x, w->y), then, while the
 * mismatch after a copy is a small edit, the edit's literals and the next
 * copy; returns at a mismatch that is not one (or too near an end to
 * test, or the payload's end) with w->x, w->y there. The common case in
 * one loop of its own, with its state in registers. Made twice where the
 * compiler can (x86-64): with AVX2 compares of 32 bytes (a copy is ~40
 * bytes) for CPUs that have them, and without. */
#define COPY_ON(name, attrs, common_fn)                                        \
  static attrs void name(walk *w, size_t m, const char *pe, const char *be) {  \
    const char *x = w->x, *y = w->y, *l0 = w->l0, *bx = w->bx;                 \
    uint8_t *op = w->op, *lw = w->lw;                                          \
    size_t nops = w->nops;                                                     \
    for (;;) {                                                                 \
      size_t l = (size_t)(x - l0);                                             \
      if (l <= 8 && l0 + 8 <= pe) /* room: lit has n + 8 bytes */              \
        memcpy(lw, l0, 8);                                                     \
      else                                                                     \
        memcpy(lw, l0, l);                                                     \
      lw += l;                                                                 \
      op = put_op(op, l, m, y - bx);                                           \
      nops++;                                                                  \
      x += m;                                                                  \
      y += m;                                                                  \
      bx = y;                                                                  \
      l0 = x;                                                                  \
      size_t a, b;                                                             \
      /* the unrolled test reads SMALL + 8 bytes on from x and y */            \
      if (pe - x < SMALL + 8 || be - y < SMALL + 8 ||                          \
          !small_edit(x, y, &a, &b))                                           \
        break;                                                                 \
      x += a; /* 8 bytes agree after the edit */                               \
      y += b;                                                                  \
      size_t left = (size_t)(pe - x < be - y ? pe - x : be - y);               \
      m = 8 + common_fn(x + 8, y + 8, left - 8);                               \
    }                                                                          \
    w->x = x;                                                                  \
    w->y = y;                                                                  \
    w->l0 = l0;                                                                \
    w->bx = bx;                                                                \
    w->op = op;                                                                \
    w->lw = lw;                                                                \
    w->nops = nops;                                                            \
  }

COPY_ON(copy_on, __attribute__((noinline)), common)

#ifdef SPY_DELTA_AVX2
/* common() 32 bytes a step. */
static inline __attribute__((target("avx2"))) size_t
common_avx2(const char *a, const char *b, size_t n) {
  size_t k = 0;
  while (k + 32 <= n) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(a + k));
    __m256i y = _mm256_loadu_si256((const __m256i *)(const void *)(b + k));
    unsigned eq = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y));
    if (eq != 0xffffffffu)
      return k + (size_t)__builtin_ctz(~eq);
    k += 32;
  }
  return k + common(a + k, b + k, n - k);
}

COPY_ON(copy_on_avx2, __attribute__((noinline, target("avx2"))), common_avx2)
#endif

long spy__delta_encode(spy__delta *d, const char *base, size_t nb,
                       const char *p, size_t n, uint8_t *out, size_t cap,
                       size_t limit) {
  if (nb >= NONE || n >= NONE || cap < spy__delta_bound(n))
    return 0;
  d->indexed = 0; /* the base's index is made when first needed */
  d->hopeless = 0;
  /* the program: room for its header (20 bytes), the ops (a copy covers
   * 4 payload bytes at least, and an op of 32-bit values takes at most
   * 16 bytes), then the literals */
  size_t ops_cap = 20 + (n / 4 + 2) * 16;
  if (ops_cap + n + 8 > d->cap_prog) {
    uint8_t *np = realloc(d->prog, ops_cap + n + 8);
    if (!np)
      return -2;
    d->prog = np;
    d->cap_prog = ops_cap + n + 8;
  }
  uint8_t *op = d->prog + 20, *lit = d->prog + ops_cap;
  walk w = {p, base, p, base, op, lit, 0};
  const char *pe = p + n, *be = base + nb;
  /* (w.x, w.y) where p and the base agree for m bytes; a copy of them is
   * made of 8 bytes at least (at the start, or after a skip), of any m
   * where realign found the pair (it checked 4 bytes at least) or at the
   * end */
  size_t m = common(p, base, n < nb ? n : nb);
  int copy = m >= 8 || (m > 0 && m == n);
  for (;;) {
    if (copy)
#ifdef SPY_DELTA_AVX2
      if (!d->portable && __builtin_cpu_supports("avx2"))
        copy_on_avx2(&w, m, pe, be);
      else
#endif
        copy_on(&w, m, pe, be); /* to a mismatch that is no small edit */
    else {
      w.x += m;
      w.y += m;
    }
    if (w.x >= pe)
      break;
    size_t i = (size_t)(w.x - p), j = (size_t)(w.y - base), ni, nj;
    int rc = realign(d, base, nb, p, n, i, j, &ni, &nj);
    if (rc == -2)
      return -2;
    if (rc < 0) { /* nothing here: look on from ni, the base where it was */
      w.x = p + ni;
      if (w.x >= pe)
        break;
      /* mostly literals so far: a payload unlike its base (another
       * module's text) is given up early, not walked to its end */
      size_t done = (size_t)(w.x - p);
      size_t lits = (size_t)(w.lw - lit) + (size_t)(w.x - w.l0);
      if (limit <= n && done >= HOPE_AFTER && done >= n / 8 &&
          (done - lits) * HOPE_COVER < done) {
        d->hopeless = 1;
        return 0;
      }
      m = w.y < be ? common(w.x, w.y,
                            (size_t)(pe - w.x < be - w.y ? pe - w.x : be - w.y))
                   : 0;
      copy = m >= 8 || (m > 0 && w.x + m == pe);
      continue;
    }
    const char *x = p + ni, *y = base + nj;
    if (rc > 0) /* found further on: the bytes before may agree too */
      while (x > w.l0 && y > base && x[-1] == y[-1]) {
        x--;
        y--;
      }
    w.x = x;
    w.y = y;
    m = common(x, y, (size_t)(pe - x < be - y ? pe - x : be - y));
    copy = 1;
  }
  op = w.op;
  size_t nops = w.nops;
  const char *l0 = w.l0;
  uint8_t *lw = w.lw;
  size_t nlit = (size_t)(lw - lit), lit0 = (size_t)(l0 - p);
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
  /* zstd pays on a long program; on a short one it costs ~20-45k
   * instructions (its tables), so it is tried only when the raw program
   * would be refused but its frame may not be (programs of the bench
   * trees shrink 2-5x): still cheaper than the zstd delta that follows a
   * refusal (~160k) */
  if (plen >= ZSTD_MIN || (1 + plen >= limit && plen / ZSTD_REACH < limit)) {
    if (!d->cctx && !(d->cctx = ZSTD_createCCtx()))
      return -2;
    uint8_t *q = put_var(out + 1, plen);
    size_t room = cap - (size_t)(q - out);
    /* level -1: literals left raw, for 35 % fewer instructions than
     * level 1 at 0.2 % more bytes of sources (tree-2000) */
    size_t z = ZSTD_compressCCtx(d->cctx, q, room, prog, plen, -1);
    if (!ZSTD_isError(z) && (size_t)(q - out) + z < 1 + plen) {
      out[0] = 1;
      size_t len = (size_t)(q - out) + z;
      return len < limit ? (long)len : 0;
    }
  }
  if (1 + plen >= limit || 1 + plen > cap)
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
  /* a program is never much longer than its output: an op covers 4
   * bytes at least, the literals are output bytes */
  if (get_var(&c, end, &plen) < 0 || plen > 64 + (uint64_t)size * 6)
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
