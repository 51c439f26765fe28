/* src_codec.c — blobs at rest: source payloads and action batches,
 * zstd-compressed when that saves space, raw otherwise; a new source
 * payload compressed as a delta of the one stored before it when that is
 * clearly smaller (the packer); and the files around them (mkdir -p, read
 * a whole file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zstd.h>

#include "src_delta.h"
#include "store.h"

int spy__src_pack(spy__buf *out, void **cctx, const char *p, size_t n,
                  int level) {
  out->len = 0;
  if (n >= 128 && !*cctx) {
    *cctx = ZSTD_createCCtx(); /* reused: a context per call costs faults */
    /* minMatch 7 (level 1 uses 6): fewer, longer matches — faster on
     * source text at the same or a better ratio (measured on the bench
     * trees: +8..35 % MB/s) */
    if (*cctx)
      ZSTD_CCtx_setParameter(*cctx, ZSTD_c_minMatch, 7);
  }
  if (n >= 128 && *cctx) {
    size_t bound = ZSTD_compressBound(n);
    if (spy__buf_reserve(out, bound) == 0) {
      ZSTD_CCtx_setParameter(*cctx, ZSTD_c_compressionLevel, level);
      ZSTD_CCtx_setParameter(*cctx, ZSTD_c_hashLog, 0); /* the level's */
      size_t z = ZSTD_compress2(*cctx, out->p, bound, p, n);
      if (!ZSTD_isError(z) && z < n - n / 16) {
        out->len = z;
        return SPY__CODEC_ZSTD;
      }
    }
  }
  out->len = 0;
  spy__buf_put(out, p, n);
  return SPY__CODEC_RAW;
}

int spy__src_unpack(spy__buf *out, void **dctx, int codec, const void *p,
                    size_t n, size_t size, const void *base, size_t base_n) {
  out->len = 0;
  if (codec == SPY__CODEC_RAW) {
    spy__buf_put(out, p, n);
    return out->err;
  }
  if ((codec != SPY__CODEC_ZSTD && codec != SPY__CODEC_ZSTD_DELTA &&
       codec != SPY__CODEC_COPY) ||
      size > ((size_t)1 << 31))
    return SPY_EBADVALUE;
  if (codec != SPY__CODEC_ZSTD && !base)
    return SPY_EBADVALUE;
  if (spy__buf_reserve(out, size + 1) < 0)
    return out->err;
  void *own = NULL, **dc = dctx ? dctx : &own;
  if (codec == SPY__CODEC_COPY) {
    int rc = spy__delta_decode(dc, p, n, base, base_n, out->p, size);
    ZSTD_freeDCtx(own);
    if (rc < 0)
      return rc == -2 ? SPY_ENOMEM : SPY_EBADVALUE;
    out->len = size;
    return 0;
  }
  if (!*dc && !(*dc = ZSTD_createDCtx()))
    return SPY_ENOMEM;
  ZSTD_DCtx *d = *dc;
  /* a prefix is for one frame only: the context is reusable after */
  size_t r = 0;
  if (codec == SPY__CODEC_ZSTD_DELTA)
    r = ZSTD_DCtx_refPrefix(d, base, base_n);
  if (!ZSTD_isError(r))
    r = ZSTD_decompressDCtx(d, out->p, size + 1, p, n);
  if (ZSTD_isError(r))
    ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
  ZSTD_freeDCtx(own);
  if (ZSTD_isError(r) || r != size)
    return SPY_EBADVALUE;
  out->len = r;
  return 0;
}

void spy__abatch_add(spy__abatch *b, uint64_t seq, const char *rec, size_t n) {
  if (!b->n)
    b->first = seq;
  b->last = seq;
  b->n++;
  spy__buf_put(&b->text, rec, n);
}

int spy__abatch_pack(spy__abatch *b) {
  return spy__src_pack(&b->packed, &b->cctx, b->text.p ? b->text.p : "",
                       b->text.len, 1);
}

int spy__abatch_row(spy__abatch *b, const char *session_id, spy__cell c[7]) {
  int codec = spy__abatch_pack(b);
  if (b->packed.err)
    return b->packed.err;
  c[0] = (spy__cell){SPY__COL_TEXT, 0, session_id, strlen(session_id)};
  c[1] = (spy__cell){SPY__COL_INT, (int64_t)b->first, NULL, 0};
  c[2] = (spy__cell){SPY__COL_INT, (int64_t)b->last, NULL, 0};
  c[3] = (spy__cell){SPY__COL_INT, b->n, NULL, 0};
  c[4] = (spy__cell){SPY__COL_INT, codec | SPY__CODEC_RECORDS, NULL, 0};
  c[5] = (spy__cell){SPY__COL_INT, (int64_t)b->text.len, NULL, 0};
  c[6] = (spy__cell){SPY__COL_BLOB, 0, b->packed.p ? b->packed.p : "",
                     b->packed.len};
  return 0;
}

void spy__abatch_clear(spy__abatch *b) {
  b->text.len = 0;
  b->packed.len = 0;
  b->n = 0;
  b->first = b->last = 0;
}

void spy__abatch_free(spy__abatch *b) {
  spy__buf_free(&b->text);
  spy__buf_free(&b->packed);
  spy__src_pack_free(&b->cctx);
}

void spy__src_unpack_free(void **dctx) {
  ZSTD_freeDCtx(*dctx);
  *dctx = NULL;
}

void spy__src_pack_free(void **cctx) {
  ZSTD_freeCCtx(*cctx);
  *cctx = NULL;
}

/* ---- the source packer ----------------------------------------------------
 * A new payload is stored as a delta of an earlier one when that is
 * clearly smaller than the payload alone, so a module's next version
 * (comments stripped, whitespace collapsed) costs a fraction of a
 * standalone frame. Two kinds of delta (schema version 5):
 * - a copy/insert delta (codec 3, src_delta.c): copies of base ranges and
 *   the literal bytes between, tried first. It costs a few instructions
 *   per byte where any zstd call costs ~50k instructions of table set-up
 *   on top of reloading the base as a prefix (measured with callgrind on
 *   the demo build of tree-2000: 885 M instructions for 6,020 payloads
 *   with zstd deltas only). Kept when under COPY_ACCEPT of the standalone
 *   estimate;
 * - else a zstd delta (codec 2): zstd with the base as prefix, kept when
 *   under DELTA_ACCEPT of the estimate, not tried when the copy delta
 *   gave up on the payload as unlike its base (src_delta.c: on
 *   /usr/include 11 % fewer packer instructions, as many bytes); else
 *   the payload is compressed alone and starts a new chain (a keyframe).
 * The standalone estimate is the running compressed/raw ratio of recent
 * keyframes. The base is the previous payload; else the last "head" (the
 * previous chain's first payload: the previous module's first version,
 * for the next module's first version — nearer than the keyframe, which
 * took tree-2000 from 2.65 to 2.09 MB of zstd-and-copy deltas), provided
 * the head leaves HEAD_ROOM levels of chain for the versions after it;
 * else the last keyframe. A base must keep the chain within
 * SPY__SRC_MAX_DEPTH, and the payload be at most 1.25x the base and the
 * base at most 4x the payload: the transforms shrink a module's text, so
 * a much larger payload is another module or a chunk (trying those
 * against the previous payload anyway cost 22 % more writer instructions
 * on tree-2000 for the same bytes). */
#define DELTA_MIN 128                  /* smaller payloads: raw or alone */
#define DELTA_MAX ((size_t)8 << 20)    /* larger ones: alone, never a base */
#define DELTA_GROW 1.25                /* payload / previous payload, at most */
#define DELTA_SHRINK 4.0               /* previous payload / payload, at most */
#define DELTA_ACCEPT 0.7               /* delta / standalone estimate, under */
#define DELTA_SMALL ((size_t)16 << 10) /* payloads packed with level 2 */
#define COPY_ACCEPT 0.8 /* copy delta / standalone estimate, under */
#define HEAD_ROOM 2     /* chain levels a head leaves for its versions */
#define COPY_MISSES 4
#define COPY_RETRY 16

/* A kept payload, shared by the bases that name it (a module's first
 * version is often the previous payload and the head at once): it is
 * copied once. */
typedef struct slot {
  /* the payload in [0, len); the input being packed is copied right after
   * it: a prefix contiguous with the input lets zstd match across both as
   * one window, not as an external dictionary (measured: 5 % fewer writer
   * instructions on tree-2000) */
  spy__buf b;
  int refs; /* bases naming it */
} slot;
#define NSLOT 4 /* the three bases, and one for the payload kept next */

/* A candidate base: a kept payload with its id and chain depth. */
typedef struct base {
  slot *s; /* NULL: none */
  char id[33];
  int depth; /* deltas between it and its keyframe; -1: none */
  /* copy deltas against this kind of base (the previous payload, the
   * keyframe) refused in a row: past COPY_MISSES they are tried only
   * every COPY_RETRY-th time (a refused one costs its time for nothing) */
  int misses;
} base;

struct spy__src_packer {
  void *cctx;    /* ZSTD_CCtx, shared with spy__src_pack */
  spy__delta dx; /* the copy/insert delta's scratch */
  spy__buf out;  /* the blob of the last row */
  slot slots[NSLOT];
  base prev, key;   /* the previous payload; the last keyframe */
  base head;        /* the last payload based on the keyframe or a head */
  char base_id[33]; /* the last row's base */
  double ratio;     /* running compressed/raw ratio of keyframes */
};

/* Makes b name s (NULL: nothing). */
static void base_set(base *b, slot *s) {
  if (b->s)
    b->s->refs--;
  b->s = s;
  if (s)
    s->refs++;
  if (!s)
    b->depth = -1;
}

spy__src_packer *spy__src_packer_new(void) {
  spy__src_packer *k = calloc(1, sizeof *k);
  if (!k)
    return NULL;
  k->prev.depth = k->key.depth = k->head.depth = -1;
  return k;
}

void spy__src_packer_free(spy__src_packer *k) {
  if (!k)
    return;
  spy__src_pack_free(&k->cctx);
  spy__delta_free(&k->dx);
  spy__buf_free(&k->out);
  for (int i = 0; i < NSLOT; i++)
    spy__buf_free(&k->slots[i].b);
  free(k);
}

void spy__src_packer_reset(spy__src_packer *k) {
  base_set(&k->prev, NULL);
  base_set(&k->key, NULL);
  base_set(&k->head, NULL);
}

/* May an n-byte payload be a delta of b? */
static int fits(const base *b, size_t n) {
  return b->s && b->depth >= 0 && b->depth < SPY__SRC_MAX_DEPTH &&
         n >= DELTA_MIN && n <= DELTA_MAX &&
         (double)n <= DELTA_GROW * (double)b->s->b.len &&
         (double)b->s->b.len <= DELTA_SHRINK * (double)n;
}

/* Compresses p[0..n) against b into k->out; returns the codec when the
 * delta is kept, else 0. */
static int try_delta(spy__src_packer *k, base *b, const char *p, size_t n) {
  ZSTD_CCtx *c = k->cctx;
  /* a delta must come clearly below the standalone estimate */
  size_t want = (size_t)((double)n * k->ratio * DELTA_ACCEPT);
  if (!c || want < 16 || spy__buf_reserve(&k->out, ZSTD_compressBound(n)) < 0)
    return 0;
  if (b->misses < COPY_MISSES || b->misses % COPY_RETRY == 0) {
    size_t bound = spy__delta_bound(n);
    if (spy__buf_reserve(&k->out, bound) < 0)
      return 0;
    size_t cwant = (size_t)((double)n * k->ratio * COPY_ACCEPT);
    long z = spy__delta_encode(&k->dx, b->s->b.p, b->s->b.len, p, n,
                               (uint8_t *)k->out.p, bound, cwant);
    if (z > 0) {
      k->out.len = (size_t)z;
      b->misses = 0;
      return SPY__CODEC_COPY;
    }
    if (k->dx.hopeless) { /* no zstd delta either: the text is another */
      b->misses++;
      return 0;
    }
  }
  b->misses++;
  spy__buf *bb = &b->s->b;
  size_t base_n = bb->len;
  if (spy__buf_reserve(bb, n) < 0) {
    bb->err = 0;
    return 0;
  }
  char *in = bb->p + base_n;
  memcpy(in, p, n);
  /* small payloads (most module versions): level 2 with a 2^13 hash
   * table stored 3.7 % fewer bytes of deltas on tree-2000 than level 1's
   * defaults for 0.7 % fewer instructions; larger ones keep level 1 */
  int small = n <= DELTA_SMALL;
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, small ? 2 : 1);
  ZSTD_CCtx_setParameter(c, ZSTD_c_hashLog, small ? 13 : 0);
  size_t z = ZSTD_CCtx_refPrefix(c, bb->p, base_n);
  if (!ZSTD_isError(z))
    z = ZSTD_compress2(c, k->out.p, ZSTD_compressBound(n), in, n);
  if (ZSTD_isError(z)) {
    ZSTD_CCtx_reset(c, ZSTD_reset_session_only); /* drops the prefix */
    return 0;
  }
  if (z >= want)
    return 0;
  k->out.len = z;
  return SPY__CODEC_ZSTD_DELTA;
}

/* A slot holding a copy of p[0..n), or NULL (no memory). */
static slot *keep(spy__src_packer *k, const char *p, size_t n) {
  slot *s = NULL;
  for (int i = 0; i < NSLOT && !s; i++)
    if (k->slots[i].refs == 0)
      s = &k->slots[i];
  s->b.len = 0; /* one is always free: three bases name three at most */
  if (spy__buf_reserve(&s->b, n) < 0) {
    s->b.err = 0;
    return NULL;
  }
  memcpy(s->b.p, p, n);
  s->b.len = n;
  return s;
}

/* Makes s (with its id and depth) the base b. */
static void keep_as(base *b, slot *s, const char *id, int depth) {
  base_set(b, s);
  if (s) {
    memcpy(b->id, id, 33);
    b->depth = depth;
  }
}

int spy__source_row(spy__src_packer *k, const uint64_t hash[2], const char *p,
                    size_t n, char id[33], spy__cell c[5]) {
  spy_trace_hash_hex(hash, id);
  int codec, depth = 0;
  /* the previous payload, else the last head, else the last keyframe */
  int head =
      fits(&k->head, n) && k->head.depth + HEAD_ROOM < SPY__SRC_MAX_DEPTH;
  base *b = fits(&k->prev, n)  ? &k->prev
            : head             ? &k->head
            : fits(&k->key, n) ? &k->key
                               : NULL;
  if (b && (codec = try_delta(k, b, p, n)) != 0) {
    depth = b->depth + 1;
    memcpy(k->base_id, b->id, 33);
  } else {
    codec = spy__src_pack(&k->out, &k->cctx, p, n, 1);
    if (codec == SPY__CODEC_ZSTD) {
      double r = (double)k->out.len / (double)n;
      k->ratio = k->ratio == 0 ? r : k->ratio + (r - k->ratio) / 8;
    }
  }
  if (k->out.err)
    return k->out.err;
  /* an incompressible or tiny payload leaves the chain as it was */
  if (codec != SPY__CODEC_RAW && n <= DELTA_MAX) {
    slot *s = keep(k, p, n); /* on no memory the bases are dropped */
    keep_as(&k->prev, s, id, depth);
    if (depth == 0)
      keep_as(&k->key, s, id, 0);
    if (depth == 0 || b != &k->prev)
      keep_as(&k->head, s, id, depth);
  }
  c[0] = (spy__cell){SPY__COL_TEXT, 0, id, 32};
  c[1] = (spy__cell){SPY__COL_INT, (int64_t)n, NULL, 0};
  c[2] = (spy__cell){SPY__COL_INT, codec, NULL, 0};
  c[3] = depth > 0 ? (spy__cell){SPY__COL_TEXT, 0, k->base_id, 32}
                   : (spy__cell){0, 0, NULL, 0};
  c[4] = (spy__cell){SPY__COL_BLOB, 0, k->out.p ? k->out.p : "", k->out.len};
  return 0;
}

char *spy__slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = len >= 0 ? malloc((size_t)len + 1) : NULL;
  int err = len < 0 ? EIO : p ? 0 : ENOMEM; /* errno for the caller */
  if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
    free(p);
    p = NULL;
    err = EIO;
  }
  fclose(f);
  if (p) {
    p[len] = 0;
    *n = (size_t)len;
  } else
    errno = err;
  return p;
}

int spy__mkdirs(const char *path) {
  char tmp[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof tmp)
    return SPY_ENAMETOOLONG;
  memcpy(tmp, path, n + 1);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}
