/* zblock.h — packed zones: a block of CPU zones (one thread's track) as
 * one blob, the form a SQLite recording stores them in (table
 * zone_block, docs/recording.md). Encoder on the recorder's receiving
 * thread, decoder in export, diff and libspyglass_sqlite's
 * `spyglass_slices` table. A recording file is external input: the
 * decoder checks every length and count and rejects what does not add up
 * (SPY_EBADVALUE), never reading outside the blob or allocating more than
 * SPY_ZB_MAX zones.
 *
 * Blob: "ZB" 0x01 (magic, version), varint n (zones), varint raw_len,
 * then a zstd frame of raw_len bytes holding 7 columns of n varints each,
 * in (ts, depth, id) order:
 *   id      zigzag delta from the previous zone's id (the first: from 0)
 *   ts      zigzag delta from the previous ts (the first: from 0)
 *   dur     zigzag
 *   depth   varint (< SPY_ZB_DEPTH_MAX)
 *   name_id zigzag delta from the previous zone's (0 = NULL, as stored)
 *   parent  0: the last zone decoded one level up in this block (NULL at
 *           depth 0 or when there is none); 1: NULL; k >= 2: zigzag of
 *           (id - parent_id) is k - 2
 *   flags   varint
 * Columns of small deltas compress to a few bits a zone. */
#ifndef SPY_ZBLOCK_H
#define SPY_ZBLOCK_H

#include <stddef.h>
#include <stdint.h>

#define SPY_ZB_MAX 65536u       /* zones a block may hold */
#define SPY_ZB_DEPTH_MAX 65536u /* depth bound of the decoder */

/* One zone as slice_data has it (name_id, parent: 0 for NULL). */
typedef struct spy_zb_zone {
  int64_t id, ts, dur, name_id, parent;
  uint32_t depth, flags;
} spy_zb_zone;

/* Sorts z[0..n) into block order (ts, depth, id). */
void spy__zb_sort(spy_zb_zone *z, uint32_t n);

/* Encodes n (1..SPY_ZB_MAX) zones, already in block order, into a new
 * malloc'ed blob (*out, *len; the caller frees). level: zstd level (0:
 * default 3). Returns 0, SPY_EINVAL, SPY_ENOMEM. Thread-safe (no shared
 * state; a context per call). */
int spy__zb_encode(const spy_zb_zone *z, uint32_t n, int level, uint8_t **out,
                   size_t *len);

/* A decoder with its buffers, reused across blocks (one thread). */
typedef struct spy_zb_dec {
  void *dctx;   /* ZSTD_DCtx */
  uint8_t *raw; /* decompressed columns */
  size_t raw_cap;
  spy_zb_zone *z; /* the decoded zones */
  uint32_t z_cap;
} spy_zb_dec;

/* Decodes blob into d->z (valid until the next decode); *n zones.
 * Returns 0, SPY_EBADVALUE (not a block, corrupt: lengths, counts, varints,
 * depth), SPY_ENOMEM. spy__zb_dec_free releases the buffers (zeroed
 * struct: nothing to free). */
int spy__zb_decode(spy_zb_dec *d, const void *blob, size_t len, uint32_t *n);
void spy__zb_dec_free(spy_zb_dec *d);

/* ---- reading blocks in order -------------------------------------------
 * Blocks come from a query ordered by (track, ts0); a late zone (one that
 * was still open when its neighbours were sealed) sits in a later block
 * with an earlier start, so blocks may overlap in time. The merge keeps
 * every block whose ts0 has been reached open and hands out zones in
 * (track, ts, depth, id) order: memory is the overlapping blocks (two or
 * three in practice), at most SPY_ZB_OPEN_MAX (beyond it, order is only
 * per block). */
#define SPY_ZB_OPEN_MAX 256u

/* The next block: 1 (its track, ts0 and blob, valid until the next call),
 * 0 at the end, <0 on error. */
typedef int (*spy_zb_fetch_fn)(void *user, int64_t *track, int64_t *ts0,
                               const void **blob, size_t *len);

typedef struct spy_zb_open {
  spy_zb_dec dec;
  int64_t track;
  uint32_t n, i;
} spy_zb_open;

typedef struct spy_zb_merge {
  spy_zb_fetch_fn fetch;
  void *user;
  int ahead, ended; /* a fetched block not decoded yet; no more blocks */
  int64_t a_track, a_ts0;
  uint8_t *a_blob;
  size_t a_len, a_cap;
  spy_zb_open *open; /* SPY_ZB_OPEN_MAX slots, nopen in use */
  uint32_t nopen;
} spy_zb_merge;

void spy__zb_merge_init(spy_zb_merge *m, spy_zb_fetch_fn fetch, void *user);
/* The next zone: 1 (*track, *z), 0 at the end, <0: the fetch's error,
 * SPY_EBADVALUE (a corrupt block) or SPY_ENOMEM. */
int spy__zb_merge_next(spy_zb_merge *m, int64_t *track, spy_zb_zone *z);
void spy__zb_merge_free(spy_zb_merge *m);
#endif
