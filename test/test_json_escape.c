/* test_json_escape.c — the block JSON escaper (core/json_escape.c) writes
 * exactly what a plain byte loop, kept here as the reference, writes: for
 * random mixes of plain ASCII, quotes, backslashes, control bytes, valid
 * and invalid UTF-8, at every output capacity from the minimum up (so "out
 * is full" lands on every position); for every kind of byte at every
 * position of every length 0..100 and at every alignment of the input;
 * for uniformly random bytes; for source-like text (lines, mostly
 * newlines to escape); and when the input is escaped in pieces. Each
 * with the AVX2 loop on (where the CPU has AVX2) and off.
 * Inputs and outputs sit in buffers of exactly their size, so under ASan
 * a read or write past either end fails the test. Also: the catalog's
 * field names, which the JSON-lines form copies without escaping, are all
 * plain identifiers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_escape.h"
#include "spyglass/trace.h"
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

/* Escapes s[0..n) with both, from a copy in a buffer of exactly n bytes
 * starting `align` bytes past a 64-byte boundary, into buffers of exactly
 * cap bytes; 0 when they differ. */
static int same_at(const char *s, size_t n, size_t align, size_t cap) {
  char *blk = malloc(align + n + 1), *in = blk + align;
  char *exact = malloc(n ? n : 1);
  char *a = malloc(cap ? cap : 1), *b = malloc(cap ? cap : 1);
  int ok = blk && exact && a && b;
  if (ok) {
    memcpy(exact, s, n);
    memcpy(in, s, n);
    const char *srcs[2] = {exact, in};
    for (int k = 0; k < 2 && ok; k++) {
      size_t ua = 0, ub = 0;
      uint64_t ra = 0, rb = 0;
      size_t wa = spy__json_escape(a, cap, srcs[k], n, &ua, &ra);
      size_t wb = ref_escape(b, cap, srcs[k], n, &ub, &rb);
      ok = wa == wb && ua == ub && ra == rb && memcmp(a, b, wa) == 0;
    }
  }
  free(blk);
  free(exact);
  free(a);
  free(b);
  return ok;
}

/* The bytes that take another path than plain ASCII: every control
 * byte, `"`, `\`, DEL, and from 0x80 up lone continuation bytes,
 * overlong and surrogate leads, leads of every length, and bytes that
 * never start a sequence. */
static const unsigned char odd[] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09,
    0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
    0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
    0x1e, 0x1f, '"',  '\\', 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2,
    0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xf8, 0xfe, 0xff};

/* Valid and invalid multi-byte sequences. */
static const char *const seqs[] = {
    "\xc3\xa9",         "\xe2\x82\xac",    "\xf0\x9f\x98\x80",
    "\xf4\x8f\xbf\xbf", "\xef\xbf\xbd",    "\xc0\x80",
    "\xe0\x80\x80",     "\xed\xa0\x80",    "\xf4\x90\x80\x80",
    "\xe2\x82",         "\xf0\x9f\x98",    "\xc3\x28",
    "\xe2\x28\xa1",     "\xf0\x28\x8c\xbc"};

TEST(every_odd_byte_at_every_position_length_and_alignment) {
  char s[100];
  for (size_t n = 0; n <= 100; n++)
    for (size_t pos = 0; pos < n; pos++)
      for (size_t k = 0; k < sizeof odd; k++) {
        for (size_t i = 0; i < n; i++)
          s[i] = (char)('a' + (i * 7 + n) % 26);
        s[pos] = (char)odd[k];
        size_t align = (n * 31 + pos * 7 + k) % 64;
        if (!same_at(s, n, align, SPY__JSON_ESC_MAX * n)) {
          fprintf(stderr,
                  "  "
                  "n %zu pos %zu byte 0x%02x align %zu"
                  "\n",
                  n, pos, odd[k], align);
          CHECK(!"odd byte differs");
        }
      }
}

TEST(every_sequence_at_every_position_and_length) {
  char s[104];
  for (size_t n = 0; n <= 100; n++)
    for (size_t pos = 0; pos < n; pos++)
      for (size_t k = 0; k < sizeof seqs / sizeof seqs[0]; k++) {
        size_t l = strlen(seqs[k]);
        if (pos + l > n)
          continue;
        for (size_t i = 0; i < n; i++)
          s[i] = (char)(i % 5 == 4 ? '\n' : 'x');
        memcpy(s + pos, seqs[k], l);
        if (!same_at(s, n, (pos + k) % 64, SPY__JSON_ESC_MAX * n)) {
          fprintf(stderr,
                  "  "
                  "n %zu pos %zu seq %zu"
                  "\n",
                  n, pos, k);
          CHECK(!"sequence differs");
        }
      }
}

TEST(random_bytes_at_every_alignment) {
  char s[300];
  for (int round = 0; round < 400; round++) {
    size_t n = next() % (sizeof s + 1);
    /* all bytes uniform; or text with a few of each kind */
    for (size_t i = 0; i < n; i++)
      s[i] = round % 2 ? (char)next()
                       : (char)(next() % 8 ? 0x20 + next() % 0x5f
                                           : odd[next() % sizeof odd]);
    for (size_t align = 0; align < 64; align++)
      if (!same_at(s, n, align, SPY__JSON_ESC_MAX * n)) {
        fprintf(stderr,
                "  "
                "round %d n %zu align %zu"
                "\n",
                round, n, align);
        CHECK(!"random bytes differ");
      }
  }
}

TEST(lengths_0_to_100_all_plain_and_all_escaped) {
  char s[100];
  for (size_t n = 0; n <= 100; n++)
    for (size_t align = 0; align < 64; align++) {
      memset(s, 'q', n);
      CHECK(same_at(s, n, align, n));
      CHECK(same_at(s, n, align, n ? n - 1 : 0));
      memset(s, '\n', n);
      CHECK(same_at(s, n, align, 2 * n));
      memset(s, 0x01, n);
      CHECK(same_at(s, n, align, SPY__JSON_ESC_MAX * n));
      memset(s, 0xff, n);
      CHECK(same_at(s, n, align, SPY__JSON_ESC_MAX * n));
    }
}

/* Source text as the bench's trees have it: lines of plain bytes, so
 * most 32-byte blocks have newlines and nothing else to escape (the AVX2
 * loop's own path), now and then a quote, a tab, a UTF-8 sequence or an
 * invalid byte; long enough for many blocks, at every alignment, into
 * outputs from too small to the worst case. */
TEST(source_text_at_every_alignment_and_capacity) {
  static const char *const odd_bits[] = {"\"",   "\\",           "\t",  "\r",
                                         "\x01", "\xe2\x80\x94", "\xe9"};
  char s[3000];
  for (int round = 0; round < 200; round++) {
    size_t n = 0, want = next() % sizeof s;
    while (n < want) {
      size_t line = next() % 40;
      for (size_t k = 0; k < line && n < want; k++) {
        char c = (char)(0x20 + next() % 0x5f);
        s[n++] = c == '"' || c == '\\' ? 'x' : c;
      }
      if (n < want)
        s[n++] = '\n';
      if (next() % 16 == 0 && n + 3 <= want) {
        const char *b = odd_bits[next() % (sizeof odd_bits / sizeof *odd_bits)];
        memcpy(s + n, b, strlen(b));
        n += strlen(b);
      }
    }
    size_t align = next() % 64;
    size_t caps[] = {
        SPY__JSON_ESC_MAX * n, 2 * n, n + n / 8, n, n / 2, n / 3 + 7};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++)
      if (!same_at(s, n, align, caps[c])) {
        fprintf(stderr, "  round %d n %zu align %zu cap %zu\n", round, n, align,
                caps[c]);
        CHECK(!"source text differs");
      }
  }
}

TEST(avx2_loop_is_on_where_the_cpu_has_avx2) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    CHECK(spy__json_escape_avx2(1) == 1);
#endif
}

/* Every test of the escaper again with the AVX2 loop off (where the CPU
 * has AVX2 the tests above ran with it on): both paths write the same. */
#define WITHOUT_AVX2(name)                                                     \
  TEST(name##_without_avx2) {                                                  \
    int was = spy__json_escape_avx2(0);                                        \
    name();                                                                    \
    spy__json_escape_avx2(was);                                                \
  }
WITHOUT_AVX2(word_loop_writes_what_the_byte_loop_wrote_at_every_capacity)
WITHOUT_AVX2(pieces_concatenate_to_the_whole)
WITHOUT_AVX2(every_odd_byte_at_every_position_length_and_alignment)
WITHOUT_AVX2(every_sequence_at_every_position_and_length)
WITHOUT_AVX2(random_bytes_at_every_alignment)
WITHOUT_AVX2(lengths_0_to_100_all_plain_and_all_escaped)
WITHOUT_AVX2(source_text_at_every_alignment_and_capacity)

/* json_form.c copies the catalog's names without the escaper. */
static int plain_name(const char *s) {
  if (!*s)
    return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9') || *s == '_'))
      return 0;
  return 1;
}

static int kind_names_plain(const spy_trace_kind *k, int depth) {
  if (!k || depth > 8)
    return 1;
  for (uint32_t i = 0; i < k->nfields; i++)
    if (!plain_name(k->fields[i].name) ||
        !kind_names_plain(k->fields[i].rec, depth + 1)) {
      fprintf(stderr, "  not plain: %s.%s\n", k->name, k->fields[i].name);
      return 0;
    }
  return 1;
}

TEST(catalog_field_names_are_plain_identifiers) {
  for (int i = 1; i <= SPY_TRACE_KIND_COUNT; i++) {
    CHECK(spy_trace_kinds[i] != NULL);
    CHECK(spy_trace_kinds[i]->id == i);
    CHECK(kind_names_plain(spy_trace_kinds[i], 0));
  }
}

TEST_MAIN(
    TEST_CASE(word_loop_writes_what_the_byte_loop_wrote_at_every_capacity),
    TEST_CASE(pieces_concatenate_to_the_whole),
    TEST_CASE(every_odd_byte_at_every_position_length_and_alignment),
    TEST_CASE(every_sequence_at_every_position_and_length),
    TEST_CASE(random_bytes_at_every_alignment),
    TEST_CASE(lengths_0_to_100_all_plain_and_all_escaped),
    TEST_CASE(source_text_at_every_alignment_and_capacity),
    TEST_CASE(avx2_loop_is_on_where_the_cpu_has_avx2),
    TEST_CASE(
        word_loop_writes_what_the_byte_loop_wrote_at_every_capacity_without_avx2),
    TEST_CASE(pieces_concatenate_to_the_whole_without_avx2),
    TEST_CASE(
        every_odd_byte_at_every_position_length_and_alignment_without_avx2),
    TEST_CASE(every_sequence_at_every_position_and_length_without_avx2),
    TEST_CASE(random_bytes_at_every_alignment_without_avx2),
    TEST_CASE(lengths_0_to_100_all_plain_and_all_escaped_without_avx2),
    TEST_CASE(source_text_at_every_alignment_and_capacity_without_avx2),
    TEST_CASE(catalog_field_names_are_plain_identifiers))
