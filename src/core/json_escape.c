/* json_escape.c — the project's one JSON string escaper (see
 * json_escape.h). Plain ASCII is tested and copied eight bytes at a time;
 * anything else is decoded one sequence at a time. */
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

/* 1 for the bytes copied as they are: printable ASCII but `"` and `\`. */
static int plain(unsigned char c) {
  return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

#define ONES 0x0101010101010101ull
#define HIGH 0x8080808080808080ull

/* Flags (bit 7 of the byte) where v has a zero byte; where x has a byte
 * below 0x20 (x's bytes all under 0x80). Extra flags come only from a
 * borrow, and a borrow only runs upwards from a byte that matched, so the
 * lowest flag is exact. */
#define HAS_ZERO(v) (((v)-ONES) & ~(v)&HIGH)
#define HAS_CTRL(x) (((x)-ONES * 0x20) & ~(x)&HIGH)

/* How many of x's eight bytes (in memory order) are plain before the
 * first one that is not: 8 when all are. */
static unsigned plain8(uint64_t x) {
  uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
  uint64_t t = (x & HIGH) | HAS_CTRL(x) | HAS_ZERO(q) | HAS_ZERO(b);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return t ? (unsigned)__builtin_ctzll(t) / 8 : 8;
#else
  return t ? 0 : 8; /* the lowest flag is the last byte: go byte by byte */
#endif
}

#ifdef __SSE2__
/* The same for sixteen bytes at p: a signed compare with 0x20 catches
 * both the control bytes and the bytes from 0x80 up. */
static unsigned plain16(const unsigned char *p) {
  __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i m =
      _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                   _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
  unsigned mask = (unsigned)_mm_movemask_epi8(m);
  return mask ? (unsigned)__builtin_ctz(mask) : 16;
}
#endif

size_t spy__json_escape(char *out, size_t cap, const char *s, size_t n,
                        size_t *used, uint64_t *replaced) {
  static const char hx[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, o = 0;
  uint64_t bad = 0;
  while (i < n) {
    /* whole plain words (source text is mostly these), then one byte */
#ifdef __SSE2__
    while (n - i >= 16 && cap - o >= 16) {
      unsigned k = plain16(p + i);
      memcpy(out + o, p + i, 16); /* only the first k count */
      i += k;
      o += k;
      if (k == 16)
        continue;
      if (p[i] != '\n' || cap - o < 2)
        goto special;
      out[o++] = '\\'; /* the commonest escape in source text, in line */
      out[o++] = 'n';
      i++;
    }
#endif
    while (n - i >= 8 && cap - o >= 8) {
      uint64_t x;
      memcpy(&x, p + i, 8);
      unsigned k = plain8(x);
      memcpy(out + o, &x, 8); /* only the first k count */
      i += k;
      o += k;
      if (k < 8)
        break;
    }
#ifdef __SSE2__
  special:
#endif
    if (i == n)
      break;
    unsigned char c = p[i];
    if (plain(c)) {
      if (o == cap)
        break; /* out is full */
      out[o++] = (char)c;
      i++;
      continue;
    }
    if (c < 0x80) { /* `"`, `\` or a control byte */
      char e = c == '"'    ? '"'
               : c == '\\' ? '\\'
               : c == '\n' ? 'n'
               : c == '\t' ? 't'
               : c == '\r' ? 'r'
                           : 0;
      size_t need = e ? 2 : 6;
      if (cap - o < need)
        break;
      out[o++] = '\\';
      if (e)
        out[o++] = e;
      else {
        memcpy(out + o, "u00", 3);
        out[o + 3] = hx[c >> 4];
        out[o + 4] = hx[c & 15];
        o += 5;
      }
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
      memcpy(out + o, "\\ufffd", 6);
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
