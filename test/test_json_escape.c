/* test_json_escape.c — the word-at-a-time JSON escaper (core/json_escape.c)
 * writes exactly what the byte-at-a-time one before it wrote, kept here as
 * the reference: for random mixes of plain ASCII, quotes, backslashes,
 * control bytes, valid and invalid UTF-8, at every output capacity from
 * the minimum up (so "out is full" lands on every position), and when the
 * input is escaped in pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_escape.h"
#include "testlib.h"

/* The escaper as it was before the word-at-a-time loop. */
static size_t ref_escape(char *out, size_t cap, const char *s, size_t n,
                         size_t *used, uint64_t *replaced) {
  static const char hx[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, o = 0;
  uint64_t bad = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' &&
           p[run] != '\\')
      run++;
    if (run > i) {
      size_t k = run - i;
      if (k > cap - o)
        k = cap - o;
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
      if (i < run)
        break;
      continue;
    }
    unsigned char c = p[i];
    if (c < 0x80) {
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

static uint32_t rng = 12345;
static uint32_t next(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 8;
}

/* A random input: mostly plain runs, with every kind of byte between. */
static size_t make(char *s, size_t max) {
  static const char *bits[] = {
      "\"",   "\\",       "\n",           "\t",
      "\x01", "\x1f",     "\x7f",         " ",
      "~",    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
      "\xe9", "\xc3",     "\x80",         "\xed\xa0\x80",
      "\xff", "\0"};
  size_t n = 0, want = next() % max;
  while (n < want) {
    if (next() % 3) {
      size_t run = next() % 20;
      for (size_t k = 0; k < run && n < max; k++)
        s[n++] = (char)(0x20 + next() % 0x5f);
    } else {
      const char *b = bits[next() % (sizeof bits / sizeof bits[0])];
      size_t l = *b ? strlen(b) : 1;
      if (n + l > max)
        break;
      memcpy(s + n, b, l);
      n += l;
    }
  }
  return n;
}

TEST(word_loop_writes_what_the_byte_loop_wrote_at_every_capacity) {
  char s[200], a[200 * SPY__JSON_ESC_MAX], b[sizeof a];
  for (int round = 0; round < 3000; round++) {
    size_t n = make(s, sizeof s);
    for (size_t cap = 0; cap <= SPY__JSON_ESC_MAX * n; cap++) {
      size_t ua = 0, ub = 0;
      uint64_t ra = 0, rb = 0;
      size_t wa = spy__json_escape(a, cap, s, n, &ua, &ra);
      size_t wb = ref_escape(b, cap, s, n, &ub, &rb);
      if (wa != wb || ua != ub || ra != rb || memcmp(a, b, wa) != 0) {
        CHECK_EQ(wa, wb);
        CHECK_EQ(ua, ub);
        CHECK_EQ(ra, rb);
        CHECK(memcmp(a, b, wa < wb ? wa : wb) == 0);
        return;
      }
      if (ua == n && cap > SPY__JSON_ESC_MAX * n / 2)
        break; /* everything fits from here on */
    }
  }
}

TEST(pieces_concatenate_to_the_whole) {
  char s[400], whole[400 * SPY__JSON_ESC_MAX], got[sizeof whole];
  for (int round = 0; round < 500; round++) {
    size_t n = make(s, sizeof s), used;
    uint64_t bad = 0, bad2 = 0;
    size_t wn = spy__json_escape(whole, sizeof whole, s, n, &used, &bad);
    CHECK_EQ(used, n);
    size_t cap = SPY__JSON_ESC_MAX + next() % 20, gn = 0, off = 0;
    while (off < n) {
      size_t w =
          spy__json_escape(got + gn, cap, s + off, n - off, &used, &bad2);
      CHECK(used > 0);
      if (!used)
        return;
      gn += w;
      off += used;
    }
    CHECK_EQ(gn, wn);
    CHECK(memcmp(got, whole, wn) == 0);
    CHECK_EQ(bad2, bad);
  }
}

TEST_MAIN(
    TEST_CASE(word_loop_writes_what_the_byte_loop_wrote_at_every_capacity),
    TEST_CASE(pieces_concatenate_to_the_whole))
