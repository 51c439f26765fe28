/* json_escape.c — the project's one JSON string escaper (see
 * json_escape.h).
 *
 * Source text has a byte to escape every few dozen bytes (a newline every
 * 17 in the bench's trees), so the escaper does not stop and restart at
 * each one. It takes 64 bytes at a time and finds, in one pass (SSE2, or
 * eight 64-bit words elsewhere), a bit mask of the bytes that are not
 * copied as they are: `"`, `\`, the control bytes and every byte from 0x80
 * up. Then it walks that mask: each clean run before a flagged byte is
 * copied with 16-byte moves, each ASCII escape comes from a table (one
 * 8-byte store), and a byte from 0x80 up is decoded as UTF-8 (kept when
 * valid, U+FFFD when not). Moves may run up to 15 bytes past what they
 * need, in and out, so the block loops run only while that much input is
 * left and the block's worst case fits in out; the last bytes (and a
 * nearly full out) go through a byte loop that stops exactly where the
 * next piece does not fit. Whatever path a byte takes, the output is the
 * same (test_json_escape checks it against a plain byte loop).
 *
 * Where the CPU has AVX2 (x86-64, checked once at load) a loop of 32-byte
 * blocks runs first, with its own path for the commonest block of source
 * text: one whose only bytes to escape are newlines, escaped by table
 * shuffles with no branch per newline (below). 150 M instructions went to
 * the 40 MB of the 2,000-module bench tree's payloads before it, 86 M
 * with it. */
#include "json_escape.h"

#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

size_t spy__utf8_seq(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len;
  unsigned min;
  if (c < 0x80)
    return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    min = 0x80;
    c &= 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    min = 0x800;
    c &= 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    min = 0x10000;
    c &= 0x07;
  } else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    c = (c << 6) | (p[i] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    return 0;
  return len;
}

uint64_t spy__utf8_invalid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  uint64_t bad = 0;
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    size_t l = spy__utf8_seq(p + i, n - i);
    bad += l == 0;
    i += l ? l : 1;
  }
  return bad;
}

/* ---- the escapes -------------------------------------------------------- */

/* The escape of each ASCII byte that has one, padded to 8 bytes (one
 * store), its length in the last byte: \" \\ \n \t \r, \u00XX for the
 * other control bytes. */
#define HEXD(d) ((char)((d) < 10 ? '0' + (d) : 'a' + (d)-10))
#define U00(c)                                                                 \
  { '\\', 'u', '0', '0', HEXD((c) >> 4), HEXD((c)&15), 0, 6 }
#define U00x4(c) U00(c), U00(c + 1), U00(c + 2), U00(c + 3)
static const char esc[0x5d][8] = {
    U00x4(0x00),
    U00x4(0x04),
    U00(0x08),
    {'\\', 't', 0, 0, 0, 0, 0, 2},
    {'\\', 'n', 0, 0, 0, 0, 0, 2},
    U00(0x0b),
    U00(0x0c),
    {'\\', 'r', 0, 0, 0, 0, 0, 2},
    U00(0x0e),
    U00(0x0f),
    U00x4(0x10),
    U00x4(0x14),
    U00x4(0x18),
    U00x4(0x1c),
    ['"'] = {'\\', '"', 0, 0, 0, 0, 0, 2},
    ['\\'] = {'\\', '\\', 0, 0, 0, 0, 0, 2},
};
static const char fffd[8] = "\\ufffd";

/* 1 for the bytes copied as they are: printable ASCII but `"` and `\`. */
static int plain(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* ---- finding the bytes to escape ---------------------------------------- */

#define ONES 0x0101010101010101ull
#define LOW7 0x7f7f7f7f7f7f7f7full
#define HIGH 0x8080808080808080ull

/* Bit 7 of byte k of x (from the low end) set when that byte is not
 * plain. Every test is exact per byte (no borrow crosses bytes): low7 +
 * 0x60 reaches bit 7 only from 0x20 up, and low7 + 0x7f only when not
 * zero. */
static inline uint64_t flags8(uint64_t x) {
  uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
  uint64_t ctl = ~((x & LOW7) + ONES * 0x60);
  uint64_t isq = ~(((q & LOW7) + LOW7) | q);
  uint64_t isb = ~(((b & LOW7) + LOW7) | b);
  return (x | ctl | isq | isb) & HIGH;
}

static inline uint64_t load8(const unsigned char *p) {
  uint64_t x;
  memcpy(&x, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  x = __builtin_bswap64(x);
#endif
  return x;
}

#ifdef __SSE2__
/* Bit k set when byte k of the 16 at p is not plain: a signed compare with 0x20
 * catches both the control bytes and those from 0x80 up. */
static inline unsigned mask16(const unsigned char *p) {
  __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i m =
      _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                   _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
  return (unsigned)_mm_movemask_epi8(m);
}
#else
/* Bit k set when byte k of the 8 at p is not plain. */
static inline unsigned mask8(const unsigned char *p) {
  /* gather bit 7 of byte k into bit 56 + k */
  return (unsigned)(((flags8(load8(p)) >> 7) * 0x0102040810204080ull) >> 56);
}

static inline unsigned mask16(const unsigned char *p) {
  return mask8(p) | mask8(p + 8) << 8;
}
#endif

static inline uint64_t mask64(const unsigned char *p) {
  return (uint64_t)mask16(p) | (uint64_t)mask16(p + 16) << 16 |
         (uint64_t)mask16(p + 32) << 32 | (uint64_t)mask16(p + 48) << 48;
}

/* 1 when all n bytes at p (n < 32) are plain; reads only those bytes. */
static inline int all_plain(const unsigned char *p, size_t n) {
  if (n >= 16)
    return (mask16(p) | mask16(p + n - 16)) == 0;
  if (n >= 8)
    return (flags8(load8(p)) | flags8(load8(p + n - 8))) == 0;
  if (n >= 4) { /* both ends' four bytes in one word */
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + n - 4, 4);
    return flags8(lo | (uint64_t)hi << 32) == 0;
  }
  for (size_t i = 0; i < n; i++)
    if (!plain(p[i]))
      return 0;
  return 1;
}

/* ---- the block loop ----------------------------------------------------- */

/* len bytes from s to d in 16-byte moves (len a constant once inlined). */
static inline void moves(char *d, const unsigned char *s, size_t len) {
  for (size_t k = 0; k < len; k += 16)
    memcpy(d + k, s + k, 16);
}

/* Escapes the block of `len` bytes at p (len is 16 or 64, a constant once
 * inlined), whose bytes to escape are the bits of m, to d; returns the
 * end of what it wrote. A clean run is copied with len/16 moves whatever
 * its length (no branch on it), so this reads p[0 .. 2 * len) (a UTF-8
 * sequence never past end) and writes up to len bytes past the result.
 * *next receives the first input byte not consumed: p + len, or further
 * when a UTF-8 sequence runs past the block. */
static inline char *block(char *d, const unsigned char *p, size_t len,
                          const unsigned char *end, uint64_t m,
                          const unsigned char **next, uint64_t *bad) {
  const unsigned char *s = p; /* the first byte not written yet */
  while (m) {
    const unsigned char *q = p + __builtin_ctzll(m);
    moves(d, s, len); /* only q - s count */
    d += q - s;
    unsigned c = *q;
    if (c == '\n') { /* the commonest by far in source text */
      memcpy(d, "\\n", 2);
      d += 2;
      s = q + 1;
      m &= m - 1;
      continue;
    }
    if (c < 0x80) {
      memcpy(d, esc[c], 8);
      d += (unsigned char)esc[c][7];
      s = q + 1;
      m &= m - 1;
      continue;
    }
    size_t l = spy__utf8_seq(q, (size_t)(end - q));
    if (l) {
      memcpy(d, q, 4); /* only the first l count */
      d += l;
    } else {
      memcpy(d, fffd, 8);
      d += 6;
      l = 1;
      (*bad)++;
    }
    s = q + l;
    size_t r = (size_t)(s - p);
    m = r < 64 ? m & (~0ull << r) : 0;
  }
  if (s < p + len) {
    moves(d, s, len); /* only p + len - s count */
    d += p + len - s;
    s = p + len;
  }
  *next = s;
  return d;
}

/* The worst case of one block in out: every byte \u00XX, plus the moves'
 * overrun. */
#define ROOM(len) ((SPY__JSON_ESC_MAX + 1) * (len))

/* Everything but a short plain string (kept out of line so that one pays
 * for no more than a call). */
__attribute__((noinline)) static size_t
escape(char *out, size_t cap, const unsigned char *p, size_t n, size_t i,
       size_t o, uint64_t bad, size_t *used, uint64_t *replaced) {
  const unsigned char *next;
  /* 64 bytes at a time while 128 can be read */
  while (n - i >= 128 && cap - o >= ROOM(64)) {
    uint64_t m = mask64(p + i);
    if (!m) {
      memcpy(out + o, p + i, 64);
      i += 64;
      o += 64;
      continue;
    }
    o = (size_t)(block(out + o, p + i, 64, p + n, m, &next, &bad) - out);
    i = (size_t)(next - p);
  }
  /* then 16 at a time while 32 can be */
  while (n - i >= 32 && cap - o >= ROOM(16)) {
    o = (size_t)(block(out + o, p + i, 16, p + n, mask16(p + i), &next, &bad) -
                 out);
    i = (size_t)(next - p);
  }
  /* the rest (short strings are often all plain), byte by byte */
  if (i < n && cap - o >= n - i && n - i < 32 && all_plain(p + i, n - i)) {
    spy__small_copy(out + o, p + i, n - i);
    o += n - i;
    i = n;
  }
  while (i < n) {
    unsigned char c = p[i];
    if (plain(c)) {
      if (o == cap)
        break; /* out is full */
      out[o++] = (char)c;
      i++;
      continue;
    }
    if (c < 0x80) { /* `"`, `\` or a control byte */
      size_t e = (unsigned char)esc[c][7];
      if (cap - o < e)
        break;
      memcpy(out + o, esc[c], e);
      o += e;
      i++;
      continue;
    }
    size_t l = spy__utf8_seq(p + i, n - i);
    if (l) {
      if (cap - o < l)
        break;
      memcpy(out + o, p + i, l);
      o += l;
      i += l;
    } else {
      if (cap - o < 6)
        break;
      memcpy(out + o, fffd, 6);
      o += 6;
      i++;
      bad++;
    }
  }
  *used = i;
  if (replaced)
    *replaced += bad;
  return o;
}

/* ---- the AVX2 loop ------------------------------------------------------
 * In source text nearly every byte to escape is a newline (2.95 M of the
 * 2.98 M escapes in the 2,000-module bench tree's 40 MB). So a 32-byte
 * block whose only bytes to escape are newlines (most blocks of text) is
 * escaped without a branch per newline: each newline becomes 'n', and each
 * 8 bytes are spread out to their places, a backslash before each 'n',
 * by one byte shuffle from a table indexed by their 8 newline bits. Any
 * other block goes through block() as above. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(SPY_NO_AVX2)
#include <immintrin.h>
#define HAVE_AVX2_LOOP 1

/* For 8 bytes whose newlines are the bits of m: where each output byte
 * comes from (0-7 the input, 8 the backslash), and how many there are. */
static unsigned char nl_shuf[256][16] __attribute__((aligned(16)));
static unsigned char nl_len[256];
static int avx2_ok, avx2_on;

__attribute__((constructor)) static void escape_init(void) {
  for (unsigned m = 0; m < 256; m++) {
    unsigned j = 0;
    for (unsigned k = 0; k < 8; k++) {
      if (m >> k & 1)
        nl_shuf[m][j++] = 8;
      nl_shuf[m][j++] = (unsigned char)k;
    }
    nl_len[m] = (unsigned char)j;
    while (j < 16)
      nl_shuf[m][j++] = 8;
  }
  __builtin_cpu_init();
  avx2_ok = avx2_on = !!__builtin_cpu_supports("avx2");
}

/* The 8 bytes in the low half of x (its high half all backslashes),
 * newlines bits m, to d; returns the end of what counts (16 are
 * written). */
__attribute__((target("avx2"))) static inline char *spread8(char *d, __m128i x,
                                                            unsigned m) {
  __m128i sh = _mm_load_si128((const __m128i *)(const void *)nl_shuf[m]);
  _mm_storeu_si128((__m128i *)(void *)d, _mm_shuffle_epi8(x, sh));
  return d + nl_len[m];
}

/* One block of 32 that has other bytes to escape than newlines (kept
 * out of the loop: the loop keeps its registers). */
__attribute__((noinline)) static char *
block32(char *d, const unsigned char *p, const unsigned char *end, uint32_t m,
        const unsigned char **next, uint64_t *bad) {
  return block(d, p, 32, end, m, next, bad);
}

__attribute__((target("avx2"))) static size_t
escape_avx2(char *out, size_t cap, const unsigned char *p, size_t n,
            size_t *used, uint64_t *replaced) {
  uint64_t bad = 0;
  const unsigned char *s = p, *end = p + n;
  char *d = out;
  if (n < 64 || cap < ROOM(32))
    return escape(out, cap, p, n, 0, 0, 0, used, replaced);
  /* 32 bytes at a time while 64 can be read (block() reads that far) */
  const unsigned char *last = end - 64;
  char *dlast = out + cap - ROOM(32);
  const __m256i sp = _mm256_set1_epi8(0x20), qu = _mm256_set1_epi8('"'),
                bs = _mm256_set1_epi8('\\'), nl = _mm256_set1_epi8('\n'),
                to_n = _mm256_set1_epi8('n' - '\n');
  const __m128i bs16 = _mm_set1_epi8('\\');
  while (s <= last && d <= dlast) {
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)s);
    /* signed: the control bytes and those from 0x80 up */
    __m256i e = _mm256_or_si256(
        _mm256_cmpgt_epi8(sp, x),
        _mm256_or_si256(_mm256_cmpeq_epi8(x, qu), _mm256_cmpeq_epi8(x, bs)));
    uint32_t m = (uint32_t)_mm256_movemask_epi8(e);
    if (!m) {
      _mm256_storeu_si256((__m256i *)(void *)d, x);
      s += 32;
      d += 32;
      continue;
    }
    __m256i isnl = _mm256_cmpeq_epi8(x, nl);
    if ((uint32_t)_mm256_movemask_epi8(isnl) == m) {
      __m256i y = _mm256_add_epi8(x, _mm256_and_si256(isnl, to_n));
      __m128i lo = _mm256_castsi256_si128(y);
      __m128i hi = _mm256_extracti128_si256(y, 1);
      d = spread8(d, _mm_unpacklo_epi64(lo, bs16), m & 0xff);
      d = spread8(d, _mm_unpackhi_epi64(lo, bs16), m >> 8 & 0xff);
      d = spread8(d, _mm_unpacklo_epi64(hi, bs16), m >> 16 & 0xff);
      d = spread8(d, _mm_unpackhi_epi64(hi, bs16), m >> 24);
      s += 32;
      continue;
    }
    const unsigned char *next;
    d = block32(d, s, end, m, &next, &bad);
    s = next;
  }
  return escape(out, cap, p, n, (size_t)(s - p), (size_t)(d - out), bad, used,
                replaced);
}
#endif

int spy__json_escape_avx2(int on) {
#ifdef HAVE_AVX2_LOOP
  int was = avx2_on;
  avx2_on = on && avx2_ok;
  return was;
#else
  (void)on;
  return 0;
#endif
}

size_t spy__json_escape(char *out, size_t cap, const char *s, size_t n,
                        size_t *used, uint64_t *replaced) {
  const unsigned char *p = (const unsigned char *)s;
  if (n < 32 && cap >= n && all_plain(p, n)) { /* names, ids, paths */
    spy__small_copy(out, p, n);
    *used = n;
    return n;
  }
#ifdef HAVE_AVX2_LOOP
  if (avx2_on && n >= 64)
    return escape_avx2(out, cap, p, n, used, replaced);
#endif
  return escape(out, cap, p, n, 0, 0, 0, used, replaced);
}

size_t spy__json_plain_len(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  for (; n - i >= 16; i += 16) {
    unsigned m = mask16(p + i);
    if (m)
      return i + (size_t)__builtin_ctz(m);
  }
  while (i < n && plain(p[i]))
    i++;
  return i;
}
