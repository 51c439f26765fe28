/* test_zblock.c — the packed zone block codec (src/record/zblock.c): a
 * block decodes to exactly the zones encoded (ids, times, names, parents
 * inferred or explicit, NULLs), corrupt and truncated blobs are rejected
 * with SPY_EBADVALUE, and the merge hands out zones of overlapping blocks
 * in (track, ts, depth) order. */
#include "record/zblock.h"
#include "spyglass/error.h"
#include "testlib.h"

/* A frame tree like the provider's: a root, children, grandchildren,
 * a child whose parent is in another block (explicit), a NULL parent at
 * depth 1 and a NULL name. */
static uint32_t make(spy_zb_zone *z, uint32_t cap) {
  uint32_t n = 0;
  int64_t id = 100, ts = 5000000000000LL;
  for (int f = 0; n + 40 < cap; f++) {
    int64_t root = id++;
    z[n++] = (spy_zb_zone){root, ts, 900000, 7, 0, 0, 0};
    int64_t t = ts + 100;
    for (int c = 0; c < 30; c++) {
      int64_t cid = id++;
      z[n++] = (spy_zb_zone){cid, t, 2000 + c, 8, root, 1, c == 3};
      if (c % 10 == 0)
        z[n++] = (spy_zb_zone){id++, t + 10, 50, 9, cid, 2, 0};
      t += 3000 + (c * 37) % 91;
    }
    z[n++] = (spy_zb_zone){id++, t, 10, 0, 0, 1, 0}; /* NULL name, parent */
    z[n++] = (spy_zb_zone){id++, t + 5, 10, 8, 42, 1, 0}; /* parent elsewhere */
    ts += 1000000;
    id += f % 3; /* ids of other rows in between */
  }
  return n;
}

static int same(const spy_zb_zone *a, const spy_zb_zone *b) {
  return a->id == b->id && a->ts == b->ts && a->dur == b->dur &&
         a->name_id == b->name_id && a->parent == b->parent &&
         a->depth == b->depth && a->flags == b->flags;
}

TEST(block_decodes_to_the_zones_encoded) {
  static spy_zb_zone z[8192];
  uint32_t n = make(z, 8192);
  spy__zb_sort(z, n);
  uint8_t *b;
  size_t len;
  CHECK_EQ(spy__zb_encode(z, n, 0, &b, &len), 0);
  spy_zb_dec d = {0};
  uint32_t got;
  CHECK_EQ(spy__zb_decode(&d, b, len, &got), 0);
  CHECK_EQ(got, n);
  for (uint32_t i = 0; i < n; i++)
    CHECK(same(&z[i], &d.z[i]));
  /* the point of it: a few bytes a zone */
  fprintf(stderr, "  %u zones in %zu bytes (%.2f B/zone)\n", n, len,
          (double)len / n);
  CHECK(len < (size_t)n * 4);
  free(b);
  spy__zb_dec_free(&d);
}

TEST(corrupt_blocks_are_rejected) {
  static spy_zb_zone z[1000];
  uint32_t n = make(z, 1000);
  spy__zb_sort(z, n);
  uint8_t *b;
  size_t len;
  CHECK_EQ(spy__zb_encode(z, n, 0, &b, &len), 0);
  spy_zb_dec d = {0};
  uint32_t got;
  for (size_t cut = 0; cut < len; cut += 1 + cut / 8) /* truncated */
    CHECK_EQ(spy__zb_decode(&d, b, cut, &got), SPY_EBADVALUE);
  uint8_t *c = malloc(len);
  memcpy(c, b, len);
  c[0] = 'X'; /* magic */
  CHECK_EQ(spy__zb_decode(&d, c, len, &got), SPY_EBADVALUE);
  memcpy(c, b, len);
  c[3] ^= 0x40; /* the zone count no longer matches the columns */
  CHECK_EQ(spy__zb_decode(&d, c, len, &got), SPY_EBADVALUE);
  /* flipped payload bytes: rejected or decoded, never out of bounds
   * (ASan watches) */
  for (size_t i = 5; i < len; i += 7) {
    memcpy(c, b, len);
    c[i] ^= 0xa5;
    int rc = spy__zb_decode(&d, c, len, &got);
    CHECK(rc == 0 || rc == SPY_EBADVALUE);
  }
  free(c);
  CHECK_EQ(spy__zb_encode(z, 0, 0, &c, &len), SPY_EINVAL);
  free(b);
  spy__zb_dec_free(&d);
}

typedef struct blocks {
  uint8_t *b[8];
  size_t len[8];
  int64_t track[8], ts0[8];
  int n, i;
} blocks;

static int fetch(void *u, int64_t *track, int64_t *ts0, const void **blob,
                 size_t *len) {
  blocks *bl = u;
  if (bl->i == bl->n)
    return 0;
  *track = bl->track[bl->i];
  *ts0 = bl->ts0[bl->i];
  *blob = bl->b[bl->i];
  *len = bl->len[bl->i++];
  return 1;
}

static void add(blocks *bl, int64_t track, spy_zb_zone *z, uint32_t n) {
  spy__zb_sort(z, n);
  bl->track[bl->n] = track;
  bl->ts0[bl->n] = z[0].ts;
  spy__zb_encode(z, n, 0, &bl->b[bl->n], &bl->len[bl->n]);
  bl->n++;
}

TEST(merge_orders_overlapping_blocks) {
  /* track 1: block A [100..300], block B [400..600] plus a late zone at
   * 50 (it was open when A was sealed); track 2: one block */
  spy_zb_zone a[3] = {{1, 100, 10, 5, 0, 0, 0},
                      {2, 200, 10, 5, 0, 0, 0},
                      {3, 300, 10, 5, 0, 0, 0}};
  spy_zb_zone b[3] = {{5, 400, 10, 5, 0, 0, 0},
                      {6, 600, 10, 5, 0, 0, 0},
                      {4, 50, 1000, 6, 0, 0, 0}};
  spy_zb_zone c[2] = {{7, 10, 5, 5, 0, 0, 0}, {8, 20, 5, 5, 0, 0, 0}};
  blocks bl = {0};
  add(&bl, 1, a, 3);
  add(&bl, 1, b, 3);
  add(&bl, 2, c, 2);
  /* the query orders by (track, ts0): B (ts0 50) before A (ts0 100) */
  blocks q = bl;
  q.b[0] = bl.b[1], q.len[0] = bl.len[1], q.ts0[0] = bl.ts0[1];
  q.b[1] = bl.b[0], q.len[1] = bl.len[0], q.ts0[1] = bl.ts0[0];
  spy_zb_merge m;
  spy__zb_merge_init(&m, fetch, &q);
  int64_t want_id[8] = {4, 1, 2, 3, 5, 6, 7, 8};
  int64_t track, last_track = 0, last_ts = -1;
  spy_zb_zone z;
  int k = 0;
  while (spy__zb_merge_next(&m, &track, &z) == 1) {
    CHECK(k < 8);
    CHECK_EQ(z.id, want_id[k]);
    CHECK(track > last_track || (track == last_track && z.ts >= last_ts));
    last_track = track, last_ts = z.ts, k++;
  }
  CHECK_EQ(k, 8);
  spy__zb_merge_free(&m);
  for (int i = 0; i < bl.n; i++)
    free(bl.b[i]);
}

TEST_MAIN(TEST_CASE(block_decodes_to_the_zones_encoded),
          TEST_CASE(corrupt_blocks_are_rejected),
          TEST_CASE(merge_orders_overlapping_blocks))
