/* src_delta.h — the copy/insert delta of a source payload against its base
 * (the sources codec SPY__CODEC_COPY, schema version 5): the payload as
 * copies of base ranges and inserted literal bytes, the whole program
 * zstd-compressed when that pays. Cheap to make (the base is indexed at
 * line starts, the payload walked mostly by 8-byte compares) where a zstd
 * delta reloads the base as a prefix every time.
 *
 * No dependency but libc and libzstd: the SQLite extension
 * (libspyglass_sqlite) compiles it too. */
#ifndef SPY_SRC_DELTA_H
#define SPY_SRC_DELTA_H

#include <stddef.h>
#include <stdint.h>

/* Encoder scratch (the base index), reused across calls; zero-initialise,
 * release with spy__delta_free. Not thread-safe: one per packer. */
typedef struct spy__delta {
  uint32_t *head; /* anchor hash -> (epoch, last anchor) */
  uint32_t *next; /* anchor -> the earlier one of its hash */
  uint32_t *pos;  /* anchor -> base offset */
  uint64_t *nl;   /* the base's newlines, a bit a byte */
  size_t cap_nl;  /* words */
  uint32_t epoch; /* of the current base */
  int indexed;    /* the current base is in head/next/pos */
  size_t cap_anchors, nanchors, hbits, cap_bits;
  uint8_t *prog; /* the uncompressed program */
  size_t cap_prog;
  void *cctx; /* ZSTD_CCtx for the program */
  /* the encoder's portable loop even on a CPU with AVX2 (tests and the
   * fuzzer compare the two: they make the same blob) */
  int portable;
  /* set by an encode that gave up early (under 1/4 of the bytes walked
   * copied, an eighth of the payload or more walked): the payload is
   * mostly unlike its base, so another delta against it will hardly pay
   * either */
  int hopeless;
} spy__delta;

/* Encodes p[0..n) against base[0..nb) into out (capacity cap, at least
 * spy__delta_bound(n)). Returns the blob's length, 0 when the blob would
 * not be shorter than limit (the caller stores something else), or a
 * negative SPY_ENOMEM. */
long spy__delta_encode(spy__delta *d, const char *base, size_t nb,
                       const char *p, size_t n, uint8_t *out, size_t cap,
                       size_t limit);
/* Room spy__delta_encode needs for an n-byte payload. */
size_t spy__delta_bound(size_t n);
void spy__delta_free(spy__delta *d);

/* Decodes a blob made by spy__delta_encode against base[0..nb) into
 * out[0..size) (out has size bytes of room). *dctx is the caller's
 * reusable ZSTD_DCtx (NULL at first; release with ZSTD_freeDCtx). Every
 * length and offset is checked: returns 0, or -1 when the blob is corrupt
 * or does not decode to exactly size bytes, -2 when out of memory. */
int spy__delta_decode(void **dctx, const uint8_t *blob, size_t nblob,
                      const char *base, size_t nb, char *out, size_t size);

#endif
