/* test_src_pipe.c — the source pipe (src/store/src_pipe.c): payloads
 * packed on the packer thread come back in submission order and decode to
 * their bytes; a row the sink refuses never becomes the base of a delivered
 * delta; a reset starts a new chain; the copy/insert delta (codec 3)
 * decodes to the exact bytes, binary ones too, and refuses every
 * truncated or altered blob without reading outside it; content ids are
 * XXH3-128; the pipe keeps no pointer into a caller's payload; a module's
 * first version is a delta of the previous module's; a payload unlike
 * its base is given up early under a limit. The sink here is a
 * table in memory (this is a unit test of the pipe; test_trace covers the
 * stores). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/trace.h"
#include "store/src_delta.h"
#include "store/store.h"
#include "testlib.h"

#define NPAY 40

typedef struct row {
  char id[33], base[33];
  int codec, has_base;
  size_t size;
  char *blob;
  size_t blob_n;
} row;

typedef struct table {
  row rows[NPAY * 2];
  int n;
  int refuse; /* refuse the row with this submission index, -1 none */
  int seen;
} table;

static int sink(void *arg, const uint64_t hash[2], const spy__cell c[5]) {
  table *t = arg;
  (void)hash;
  if (t->seen++ == t->refuse)
    return SPY_EIO;
  row *r = &t->rows[t->n++];
  memcpy(r->id, c[0].s, 32);
  r->id[32] = 0;
  r->size = (size_t)c[1].i;
  r->codec = (int)c[2].i;
  r->has_base = c[3].kind != 0;
  if (r->has_base)
    memcpy(r->base, c[3].s, 32);
  r->base[32] = 0;
  r->blob_n = c[4].n;
  r->blob = malloc(r->blob_n + 1);
  memcpy(r->blob, c[4].s, r->blob_n);
  return 0;
}

static void table_free(table *t) {
  for (int i = 0; i < t->n; i++)
    free(t->rows[i].blob);
}

static const row *find(const table *t, const char *id) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->rows[i].id, id) == 0)
      return &t->rows[i];
  return NULL;
}

/* Decodes a row, following its bases; 0 when it gives want[0..n). */
static int decode(const table *t, const row *r, spy__buf *out, int depth) {
  if (depth > SPY__SRC_MAX_DEPTH)
    return -1;
  spy__buf base = {0};
  if (r->has_base) {
    const row *b = find(t, r->base);
    if (!b || decode(t, b, &base, depth + 1) < 0) {
      spy__buf_free(&base);
      return -1;
    }
  }
  int rc = spy__src_unpack(out, NULL, r->codec, r->blob, r->blob_n, r->size,
                           base.p, base.len);
  spy__buf_free(&base);
  return rc;
}

/* NPAY versions of one text, each a small edit of the one before. */
static char *payload(int i, size_t *n) {
  size_t cap = 8000;
  char *p = malloc(cap);
  size_t len = 0;
  for (int line = 0; line < 120; line++)
    len += (size_t)snprintf(p + len, cap - len,
                            "static int f%d(int x) { return x * %d; }\n", line,
                            line == i % 120 ? i + 1000 : line);
  *n = len;
  return p;
}

static void submit_all(spy__src_pipe *q, char *pays[NPAY], size_t lens[NPAY],
                       uint64_t hashes[NPAY][2]) {
  for (int i = 0; i < NPAY; i++) {
    pays[i] = payload(i, &lens[i]);
    spy_trace_hash(pays[i], lens[i], hashes[i]);
    spy__src_pipe_submit(q, hashes[i], pays[i], lens[i]);
  }
}

TEST(rows_come_back_in_order_and_decode) {
  table t = {.refuse = -1};
  /* the packer thread (on <= 2 CPUs a session packs inline) */
  setenv("SPY_TRACE_PACK_INLINE", "0", 1);
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  unsetenv("SPY_TRACE_PACK_INLINE");
  CHECK(q);
  char *pays[NPAY];
  size_t lens[NPAY];
  uint64_t h[NPAY][2];
  submit_all(q, pays, lens, h);
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, NPAY);
  int deltas = 0;
  spy__buf out = {0};
  for (int i = 0; i < NPAY; i++) {
    char id[33];
    spy_trace_hash_hex(h[i], id);
    CHECK_STR(t.rows[i].id, id);
    CHECK_OK(decode(&t, &t.rows[i], &out, 0));
    CHECK_EQ(out.len, lens[i]);
    CHECK(memcmp(out.p, pays[i], lens[i]) == 0);
    deltas += t.rows[i].has_base;
    free(pays[i]);
  }
  CHECK(deltas >= NPAY / 2); /* similar versions: mostly deltas */
  CHECK(spy__src_pipe_busy_ns(q) > 0);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

TEST(a_refused_row_is_never_a_base) {
  table t = {.refuse = 2}; /* row 3 is a delta of row 2 */
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  CHECK(q);
  char *pays[NPAY];
  size_t lens[NPAY];
  uint64_t h[NPAY][2];
  submit_all(q, pays, lens, h);
  spy__src_pipe_drain(q);
  CHECK_EQ(t.n, NPAY - 1);
  char refused[33];
  spy_trace_hash_hex(h[2], refused);
  CHECK(find(&t, refused) == NULL);
  spy__buf out = {0};
  for (int i = 0; i < t.n; i++) {
    CHECK(!t.rows[i].has_base || strcmp(t.rows[i].base, refused) != 0);
    CHECK_OK(decode(&t, &t.rows[i], &out, 0)); /* every base is there */
  }
  for (int i = 0; i < NPAY; i++)
    free(pays[i]);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

TEST(reset_starts_a_new_chain) {
  table t = {.refuse = -1};
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  CHECK(q);
  size_t n;
  char *a = payload(1, &n), *b = payload(2, &n);
  uint64_t ha[2], hb[2];
  spy_trace_hash(a, n, ha);
  spy_trace_hash(b, n, hb);
  CHECK_OK(spy__src_pipe_submit(q, ha, a, n));
  CHECK_OK(spy__src_pipe_reset(q));
  CHECK_OK(spy__src_pipe_submit(q, hb, b, n));
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, 2);
  CHECK_EQ(t.rows[1].has_base, 0); /* would be a delta of a without reset */
  free(a);
  free(b);
  spy__src_pipe_free(q);
  table_free(&t);
}

/* Versions of a text on both sides of the packer's small-payload size
 * (16 KiB: level 2 and a small hash table below, level 1 above), one
 * after the other: every row decodes, and both sizes make deltas. */
TEST(small_and_large_versions_decode_and_make_deltas) {
  table t = {.refuse = -1};
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  CHECK(q);
  enum { N = 24 };
  char *pays[N];
  size_t lens[N];
  uint64_t h[N][2];
  for (int i = 0; i < N; i++) {
    int lines = i < N / 2 ? 100 : 1000; /* ~4 KB, then ~40 KB */
    size_t cap = (size_t)lines * 64;
    char *p = malloc(cap);
    size_t len = 0;
    for (int line = 0; line < lines; line++)
      len += (size_t)snprintf(p + len, cap - len,
                              "static long g%d(long y) { return y + %d; }\n",
                              line, line == i % lines ? i * 7 : line);
    pays[i] = p;
    lens[i] = len;
    spy_trace_hash(p, len, h[i]);
    CHECK_OK(spy__src_pipe_submit(q, h[i], p, len));
  }
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, N);
  int small = 0, large = 0;
  spy__buf out = {0};
  for (int i = 0; i < N && i < t.n; i++) {
    CHECK_OK(decode(&t, &t.rows[i], &out, 0));
    CHECK_EQ(out.len, lens[i]);
    CHECK(memcmp(out.p, pays[i], lens[i]) == 0);
    if (t.rows[i].has_base)
      *(lens[i] > 16384 ? &large : &small) += 1;
    free(pays[i]);
  }
  CHECK(small >= N / 4);
  CHECK(large >= N / 4);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

/* A module's versions as the demo build makes them (comments stripped,
 * then whitespace collapsed): each later version is a copy/insert delta
 * of the one before, far smaller than the text. */
TEST(edited_versions_are_copy_deltas_and_decode) {
  table t = {.refuse = -1};
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  CHECK(q);
  enum { N = 3 };
  char *pays[N];
  size_t lens[N];
  uint64_t h[N][2];
  for (int v = 0; v < N; v++) {
    size_t cap = 16000, len = 0;
    char *p = malloc(cap);
    for (int k = 0; k < 60; k++)
      len += (size_t)snprintf(
          p + len, cap - len,
          "%sstatic int f_%d_%d(int x) {%s\n  int y = x * %d - %d, z = y %% "
          "%d;\n"
          "  return z * %d + %d;%s\n}\n%s\n",
          v == 0   ? "/* one step of the pipeline */\n"
          : v == 1 ? " \n"
                   : "",
          k, k * 7919 % 10007, v < 2 ? "   " : "", k * 104729 % 99991,
          k * 31337 % 4099, k * 6007 % 997 + 1, k * 7727 % 8191,
          k * 3571 % 65521, v == 0 ? " // scale" : "", v < 2 ? "\n\n" : "");
    pays[v] = p;
    lens[v] = len;
    spy_trace_hash(p, len, h[v]);
    CHECK_OK(spy__src_pipe_submit(q, h[v], p, len));
  }
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, N);
  spy__buf out = {0};
  for (int v = 0; v < N && v < t.n; v++) {
    CHECK_OK(decode(&t, &t.rows[v], &out, 0));
    CHECK_EQ(out.len, lens[v]);
    CHECK(memcmp(out.p, pays[v], lens[v]) == 0);
    if (v > 0) { /* a delta; the comments' removal a copy delta */
      CHECK(t.rows[v].codec == SPY__CODEC_COPY ||
            t.rows[v].codec == SPY__CODEC_ZSTD_DELTA);
      CHECK(v != 1 || t.rows[v].codec == SPY__CODEC_COPY);
      CHECK(t.rows[v].blob_n < lens[v] / 8);
    }
  }
  for (int v = 0; v < N; v++)
    free(pays[v]);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

/* The delta itself over binary bytes (NULs, no newlines, long runs):
 * encode, decode to the same bytes; every truncation and every one-byte
 * change of the blob either fails or decodes to exactly the size asked,
 * never past the buffers (ASan watches). */
TEST(copy_delta_is_binary_safe_and_refuses_corrupt_blobs) {
  enum { NB = 5000 };
  char *base = malloc(NB), *p = malloc(NB + 64);
  uint32_t x = 12345;
  for (int i = 0; i < NB; i++) {
    x = x * 1103515245u + 12345u;
    base[i] = (char)(i % 97 < 40 ? 0 : (x >> 16)); /* NULs and noise */
  }
  size_t n = 0;
  for (int i = 0; i < NB; i++) { /* the base with bytes dropped/inserted */
    if (i % 700 == 5)
      continue;
    if (i % 900 == 7)
      p[n++] = '\n';
    p[n++] = base[i];
  }
  spy__delta d = {0};
  void *dctx = NULL;
  size_t bound = spy__delta_bound(n);
  uint8_t *blob = malloc(bound);
  long z = spy__delta_encode(&d, base, NB, p, n, blob, bound, bound);
  CHECK(z > 0);
  CHECK((size_t)z < n / 4);
  char *out = malloc(n);
  CHECK_EQ(spy__delta_decode(&dctx, blob, (size_t)z, base, NB, out, n), 0);
  CHECK(memcmp(out, p, n) == 0);
  CHECK(spy__delta_decode(&dctx, blob, (size_t)z, base, NB, out, n - 1) < 0);
  CHECK(spy__delta_decode(&dctx, blob, (size_t)z, base, NB - 100, out, n) < 0);
  for (long cut = 0; cut < z; cut++) /* truncated: never a success */
    CHECK(spy__delta_decode(&dctx, blob, (size_t)cut, base, NB, out, n) < 0);
  for (long i = 0; i < z; i++) { /* altered: refused, or n bytes */
    uint8_t keep = blob[i];
    blob[i] ^= 0x5a;
    spy__delta_decode(&dctx, blob, (size_t)z, base, NB, out, n);
    blob[i] = keep;
  }
  /* through the store's codec entry point, with a NUL-filled payload */
  spy__buf o = {0};
  CHECK_OK(spy__src_unpack(&o, &dctx, SPY__CODEC_COPY, blob, (size_t)z, n, base,
                           NB));
  CHECK(o.len == n && memcmp(o.p, p, n) == 0);
  CHECK(spy__src_unpack(&o, &dctx, SPY__CODEC_COPY, blob, (size_t)z, n, NULL,
                        0) == SPY_EBADVALUE);
  spy__buf_free(&o);
  spy__src_unpack_free(&dctx);
  spy__delta_free(&d);
  free(out);
  free(blob);
  free(base);
  free(p);
}

/* Every small edit (a bytes inserted and b deleted, a + b <= 8) at the
 * start, in the middle and at the very end of a text: one literal run
 * and copies around it, so a blob of a few bytes that decodes back. */
TEST(copy_delta_finds_every_small_edit_anywhere) {
  enum { NB = 4000 };
  char *base = malloc(NB), *p = malloc(NB + 16), *out = malloc(NB + 16);
  uint32_t x = 777;
  for (int i = 0; i < NB; i++) { /* text without a repeat of 8 bytes */
    x = x * 1103515245u + 12345u;
    base[i] = (char)('a' + (x >> 16) % 26);
  }
  spy__delta d = {0};
  void *dctx = NULL;
  size_t bound = spy__delta_bound(NB + 16);
  uint8_t *blob = malloc(bound);
  const size_t at[] = {0, 1, NB / 2, NB - 20, NB - 9, NB - 8, NB - 3};
  for (size_t w = 0; w < sizeof at / sizeof at[0]; w++)
    for (size_t a = 0; a <= 8; a++)
      for (size_t b = 0; a + b <= 8 && at[w] + b <= NB; b++) {
        if (a + b == 0)
          continue;
        size_t n = 0;
        memcpy(p, base, at[w]);
        n = at[w];
        for (size_t k = 0; k < a; k++)
          p[n++] = (char)('0' + k); /* digits: never in the base */
        memcpy(p + n, base + at[w] + b, NB - at[w] - b);
        n += NB - at[w] - b;
        long z = spy__delta_encode(&d, base, NB, p, n, blob, bound, bound);
        CHECK(z > 0);
        CHECK(z < 40); /* header, two or three ops, the inserted bytes */
        CHECK_EQ(spy__delta_decode(&dctx, blob, (size_t)z, base, NB, out, n),
                 0);
        CHECK(memcmp(out, p, n) == 0);
      }
  spy__src_unpack_free(&dctx);
  spy__delta_free(&d);
  free(blob);
  free(out);
  free(p);
  free(base);
}

/* A raw program over the caller's limit is tried as a zstd frame (flag
 * 1): an edit on every line compresses well. The frame is kept when it
 * is under the limit, decodes, and refuses every truncation; a limit
 * even the frame misses gives 0 (the caller stores something else). */
TEST(copy_delta_over_its_limit_becomes_a_zstd_frame) {
  char *base = malloc(20000), *p = malloc(20000);
  size_t nb = 0, n = 0;
  for (int k = 0; k < 300; k++) {
    nb += (size_t)snprintf(base + nb, 20000 - nb,
                           "static int step_%d(int x) { return x * %d; }\n", k,
                           k);
    n += (size_t)snprintf(p + n, 20000 - n,
                          "static int step_%d(int x) { return x * %d; }\n", k,
                          k + 1);
  }
  spy__delta d = {0};
  void *dctx = NULL;
  size_t bound = spy__delta_bound(n);
  uint8_t *blob = malloc(bound);
  char *out = malloc(n);
  long raw = spy__delta_encode(&d, base, nb, p, n, blob, bound, bound);
  CHECK(raw > 0);
  CHECK_EQ(blob[0], 0); /* short enough to stay raw without a limit */
  long z = spy__delta_encode(&d, base, nb, p, n, blob, bound, (size_t)raw);
  CHECK(z > 0);
  CHECK_EQ(blob[0], 1);
  CHECK(z < raw / 2);
  CHECK_EQ(spy__delta_decode(&dctx, blob, (size_t)z, base, nb, out, n), 0);
  CHECK(memcmp(out, p, n) == 0);
  for (long cut = 0; cut < z; cut++)
    CHECK(spy__delta_decode(&dctx, blob, (size_t)cut, base, nb, out, n) < 0);
  CHECK_EQ(spy__delta_encode(&d, base, nb, p, n, blob, bound, (size_t)z / 4),
           0);
  spy__src_unpack_free(&dctx);
  spy__delta_free(&d);
  free(out);
  free(blob);
  free(p);
  free(base);
}

/* A payload unlike its base (another module's text) is given up early
 * under a real limit (hopeless: the packer then tries no zstd delta
 * either), but not without one: with no limit every payload is encoded
 * and decodes. A payload like its base is never hopeless. */
TEST(copy_delta_gives_up_on_an_unlike_payload_under_a_limit) {
  enum { N = 20000 };
  char *base = malloc(N), *p = malloc(N), *out = malloc(N);
  size_t nb = 0, n = 0;
  uint32_t x = 99;
  while (nb < N - 100) { /* lines of words, every one different */
    x = x * 1103515245u + 12345u;
    nb += (size_t)snprintf(base + nb, N - nb, "int base_%u = %u;\n",
                           (unsigned)x, (unsigned)(x % 977));
  }
  while (n < N - 100) {
    x = x * 1103515245u + 12345u;
    n += (size_t)snprintf(p + n, N - n, "long other_%u(void);\n", (unsigned)x);
  }
  spy__delta d = {0};
  void *dctx = NULL;
  size_t bound = spy__delta_bound(n);
  uint8_t *blob = malloc(bound);
  CHECK_EQ(spy__delta_encode(&d, base, nb, p, n, blob, bound, n / 5), 0);
  CHECK_EQ(d.hopeless, 1);
  long z = spy__delta_encode(&d, base, nb, p, n, blob, bound, bound);
  CHECK(z > 0); /* no limit: all literals, but encoded */
  CHECK_EQ(d.hopeless, 0);
  CHECK_EQ(spy__delta_decode(&dctx, blob, (size_t)z, base, nb, out, n), 0);
  CHECK(memcmp(out, p, n) == 0);
  /* the base itself with a line changed in every ten: copies, kept */
  memcpy(p, base, nb);
  n = nb;
  for (size_t i = 0, line = 0; i < n; i++)
    if (p[i] == '\n' && ++line % 10 == 0 && i + 3 < n)
      p[i + 1] = 'X';
  z = spy__delta_encode(&d, base, nb, p, n, blob, bound, n / 5);
  CHECK(z > 0);
  CHECK_EQ(d.hopeless, 0);
  CHECK_EQ(spy__delta_decode(&dctx, blob, (size_t)z, base, nb, out, n), 0);
  CHECK(memcmp(out, p, n) == 0);
  spy__src_unpack_free(&dctx);
  spy__delta_free(&d);
  free(blob);
  free(out);
  free(p);
  free(base);
}

/* The content id: XXH3-128 whichever implementation the library takes
 * (its CPU dispatch or not), the high half first, in lower-case hex. A
 * changed hash would change every id a store has. */
TEST(content_ids_are_xxh3_128_in_hex) {
  char buf[1000], id[33];
  for (int i = 0; i < 1000; i++)
    buf[i] = (char)(i * 31 + 7);
  uint64_t h[2];
  spy_trace_hash(buf, sizeof buf, h);
  spy_trace_hash_hex(h, id);
  CHECK_STR(id, "f534f51e82a81d29989765d0ea7a5ecd");
  spy_trace_hash("spyglass", 8, h);
  spy_trace_hash_hex(h, id);
  CHECK_STR(id, "69157ccd945add029e8c47d60e445b3a");
  const uint64_t k[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  spy_trace_hash_hex(k, id);
  CHECK_STR(id, "0123456789abcdeffedcba9876543210");
}

/* The pipe keeps nothing of the caller's payload: each is packed from one
 * buffer the caller rewrites for the next (the writer's queue record is
 * reused the same way), and every row still decodes to the bytes it was
 * given; on the packer thread and inline. */
static void submit_from_one_buffer(int threaded) {
  table t = {.refuse = -1};
  setenv("SPY_TRACE_PACK_INLINE", threaded ? "0" : "1", 1);
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  unsetenv("SPY_TRACE_PACK_INLINE");
  CHECK(q);
  char *want[NPAY];
  size_t lens[NPAY];
  char *buf = malloc(8000);
  for (int i = 0; i < NPAY; i++) {
    want[i] = payload(i, &lens[i]);
    memcpy(buf, want[i], lens[i]);
    uint64_t h[2];
    spy_trace_hash(buf, lens[i], h);
    CHECK_OK(spy__src_pipe_submit(q, h, buf, lens[i]));
    memset(buf, 'Z', 8000); /* the caller's buffer, reused */
  }
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, NPAY);
  spy__buf out = {0};
  int deltas = 0;
  for (int i = 0; i < NPAY && i < t.n; i++) {
    CHECK_OK(decode(&t, &t.rows[i], &out, 0));
    CHECK_EQ(out.len, lens[i]);
    CHECK(memcmp(out.p, want[i], lens[i]) == 0);
    deltas += t.rows[i].has_base;
    free(want[i]);
  }
  CHECK(deltas >= NPAY / 2);
  free(buf);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

TEST(the_callers_buffer_is_not_kept) {
  submit_from_one_buffer(0);
  submit_from_one_buffer(1);
}

/* Modules as a build makes them, each loaded then transformed twice
 * (comments stripped: the first version is much longer): a module's later
 * versions are deltas of its previous one, and its first version a delta
 * of the previous module's first (the head), the one kept payload named
 * by two bases; every row decodes. */
TEST(a_modules_first_version_is_a_delta_of_the_previous_first) {
  table t = {.refuse = -1};
  spy__src_pipe *q = spy__src_pipe_new(sink, &t);
  CHECK(q);
  enum { MODS = 8, VERS = 3, N = MODS * VERS };
  char *pays[N];
  size_t lens[N];
  uint64_t h[N][2];
  for (int mod = 0; mod < MODS; mod++)
    for (int v = 0; v < VERS; v++) {
      size_t cap = 16000, len = 0;
      char *p = malloc(cap);
      for (int k = 0; k < 80; k++)
        len += (size_t)snprintf(
            p + len, cap - len,
            "static int f_%d_%d(int x) { return x * %d - %d; }%s%s\n", mod, k,
            k * 7919 % 10007, k * 104729 % 99991, v < 2 ? "   " : "",
            v == 0 ? "/* a step of the pipeline, a comment to strip */" : "");
      int i = mod * VERS + v;
      pays[i] = p;
      lens[i] = len;
      spy_trace_hash(p, len, h[i]);
      CHECK_OK(spy__src_pipe_submit(q, h[i], p, len));
    }
  CHECK_OK(spy__src_pipe_drain(q));
  CHECK_EQ(t.n, N);
  spy__buf out = {0};
  int heads = 0;
  for (int i = 0; i < N && i < t.n; i++) {
    CHECK_OK(decode(&t, &t.rows[i], &out, 0));
    CHECK_EQ(out.len, lens[i]);
    CHECK(memcmp(out.p, pays[i], lens[i]) == 0);
    char id[33];
    if (i % VERS && i > VERS) { /* a later version: a delta of the last */
      CHECK(t.rows[i].has_base);
      spy_trace_hash_hex(h[i - 1], id);
      CHECK_STR(t.rows[i].base, id);
    } else if (i % VERS == 0 && i > 0 && t.rows[i].has_base) { /* a first */
      spy_trace_hash_hex(h[i - VERS], id);
      CHECK_STR(t.rows[i].base, id);
      heads++;
    }
  }
  /* (a first version may start a chain while the packer learns how well
   * the text compresses alone) */
  CHECK(heads >= MODS - 3);
  for (int i = 0; i < N; i++)
    free(pays[i]);
  spy__buf_free(&out);
  spy__src_pipe_free(q);
  table_free(&t);
}

/* Copies of every length around the encoder's compare steps (8, 16, 32
 * bytes) between edits, and edits right at the end: the delta decodes to
 * the payload (and ASan sees no read past either buffer), and the
 * encoder's portable loop makes the same blob as its AVX2 one. */
TEST(copy_delta_round_trips_every_copy_length) {
  enum { NB = 6000 };
  char *base = malloc(NB), *p = malloc(NB + 64), *out = malloc(NB + 64);
  uint32_t x = 4242;
  for (int i = 0; i < NB; i++) {
    x = x * 1103515245u + 12345u;
    base[i] = (char)('a' + (x >> 16) % 26);
  }
  spy__delta d = {0}, portable = {.portable = 1};
  void *dctx = NULL;
  size_t bound = spy__delta_bound(NB + 64);
  uint8_t *blob = malloc(bound), *blob2 = malloc(bound);
  for (size_t gap = 1; gap <= 70; gap++) {
    size_t n = 0;
    for (size_t i = 0; i < NB; i++) /* a one-byte change every gap + 1 */
      p[n++] = i % (gap + 1) == gap ? (char)'0' : base[i];
    for (size_t cut = 0; cut < 3; cut++) {
      long z = spy__delta_encode(&d, base, NB, p, n - cut, blob, bound, bound);
      CHECK(z > 0);
      /* the portable loop (no AVX2) makes the same blob */
      long z2 = spy__delta_encode(&portable, base, NB, p, n - cut, blob2, bound,
                                  bound);
      CHECK(z2 == z && memcmp(blob, blob2, (size_t)z) == 0);
      CHECK_EQ(
          spy__delta_decode(&dctx, blob, (size_t)z, base, NB, out, n - cut), 0);
      CHECK(memcmp(out, p, n - cut) == 0);
    }
  }
  spy__src_unpack_free(&dctx);
  spy__delta_free(&d);
  spy__delta_free(&portable);
  free(blob);
  free(blob2);
  free(out);
  free(p);
  free(base);
}

TEST_MAIN(TEST_CASE(rows_come_back_in_order_and_decode),
          TEST_CASE(a_refused_row_is_never_a_base),
          TEST_CASE(reset_starts_a_new_chain),
          TEST_CASE(small_and_large_versions_decode_and_make_deltas),
          TEST_CASE(edited_versions_are_copy_deltas_and_decode),
          TEST_CASE(copy_delta_is_binary_safe_and_refuses_corrupt_blobs),
          TEST_CASE(copy_delta_finds_every_small_edit_anywhere),
          TEST_CASE(copy_delta_over_its_limit_becomes_a_zstd_frame),
          TEST_CASE(copy_delta_gives_up_on_an_unlike_payload_under_a_limit),
          TEST_CASE(content_ids_are_xxh3_128_in_hex),
          TEST_CASE(the_callers_buffer_is_not_kept),
          TEST_CASE(a_modules_first_version_is_a_delta_of_the_previous_first),
          TEST_CASE(copy_delta_round_trips_every_copy_length))
