/* rec_buffers.h — buffers in a recording (rec_buffers.c): the `chunk`
 * table, its statement, and the per-source writer that turns a provider's
 * buffer:chunk / buffer:raw frames into files beside the database (VP9
 * chunks appended to one IVF file per buffer and size, raw and thumbnail
 * images one PNG each) and a chunk row per file piece. */
#ifndef SPY_REC_BUFFERS_H
#define SPY_REC_BUFFERS_H

#include <stdint.h>

#include "spyglass/consumer.h"
#include "spyglass/record.h"

/* One row per encoded chunk or image recorded: which process (upid) and
 * buffer, the provider frame it was read on (joins frame.frame), when it
 * arrived (ts, the recording's clock), its size as served, the source's
 * pixel type (spy_pixel_type_name), the mode asked for (stream, raw,
 * thumb), key frame (1/0), codec (vp9, rgba8), and where its bytes are:
 * path (relative to the SQLite file's directory when beside it, else
 * absolute), file_offset and len inside that file (an IVF chunk's bytes
 * after its 12-byte frame header; a PNG: the whole file). data is for
 * bytes kept inline (not written by this recorder: NULL). */
#define SPY_REC_BUFFERS_DDL                                                    \
  "CREATE TABLE IF NOT EXISTS chunk(recording_id BIGINT NOT NULL,"             \
  " upid BIGINT, ts BIGINT, buffer TEXT, codec TEXT, width BIGINT,"            \
  " height BIGINT, frame BIGINT, keyframe BIGINT, path TEXT,"                  \
  " file_offset BIGINT, len BIGINT, data BYTEA, pixel_type TEXT,"              \
  " mode TEXT);\n"
#define SPY_REC_SQL_CHUNK                                                      \
  "INSERT INTO chunk(recording_id, upid, ts, buffer, frame, width, height,"    \
  " pixel_type, mode, keyframe, codec, path, file_offset, len)"                \
  " VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)"
/* PostgreSQL databases made by an earlier version: the columns added
 * since (chunk.pixel_type, chunk.mode, build.ended, build.partial). */
#define SPY_REC_PG_UPGRADE                                                     \
  "ALTER TABLE chunk ADD COLUMN IF NOT EXISTS pixel_type TEXT,"                \
  " ADD COLUMN IF NOT EXISTS mode TEXT;\n"                                     \
  "ALTER TABLE build ADD COLUMN IF NOT EXISTS ended BIGINT,"                   \
  " ADD COLUMN IF NOT EXISTS partial BIGINT;\n"

/* What a recorder asks for (from spy_recorder_desc): the buffer requests
 * (a list of names, or all: names learnt from the provider's metadata),
 * the mode, and where the files go. Made once by the recorder; read-only
 * afterwards (every source thread reads it). */
typedef struct rec_bufs_cfg {
  int all;                 /* 1: every buffer the provider declares */
  spy_buffer_request *req; /* the named ones (all: none) */
  uint32_t n_req;
  uint8_t wire_mode;     /* SPY_BUFFER_STREAM or SPY_BUFFER_THUMBNAIL */
  uint16_t long_edge;    /* what each request asks for */
  const char *mode_name; /* "stream", "raw", "thumb" (chunk.mode) */
  char dir[4096];        /* where the files go (made at the first) */
  char rel[4096];        /* what chunk.path starts with */
} rec_bufs_cfg;

/* Fills cfg from the desc (list "a,b" or "all", mode, directory). db is
 * the SQLite file (NULL for PostgreSQL), rec_id the recording. Returns 0,
 * 1 when no buffers are asked for (cfg unused), SPY_EINVAL (message on
 * stderr), SPY_ENOMEM. */
int spy__rec_bufs_cfg(rec_bufs_cfg *cfg, const spy_recorder_desc *d,
                      const char *sqlite_db, int64_t rec_id);
void spy__rec_bufs_cfg_free(rec_bufs_cfg *cfg);

/* What one provider's buffers have become: open IVF files, a payload
 * being put together from parts, counts. One per source, used by its
 * receiving thread only. */
typedef struct rec_bufs rec_bufs;

struct rec_row;
typedef void (*rec_emit_fn)(void *ctx, struct rec_row *r);

/* Returns a writer or NULL (out of memory). */
rec_bufs *spy__rec_bufs_new(const rec_bufs_cfg *cfg);
/* A buffer:chunk or buffer:raw frame of provider upid (arrived at ts):
 * its bytes go to a file and its chunk row to emit. Chunks before a
 * stream's first key frame, and after a gap in the provider's frames
 * (st->frames_lost moved) until the next key frame, are skipped: the IVF
 * file must decode from its first chunk. Bad input is counted, never
 * written. */
void spy__rec_bufs_frame(rec_bufs *b, const spy_frame *f, const spy_state *st,
                         int64_t upid, int64_t ts, rec_emit_fn emit, void *ctx);
/* The provider's recording ended: IVF headers get their frame counts and
 * every file is closed (a new provider starts new files). */
void spy__rec_bufs_end(rec_bufs *b);
/* Counts so far: chunk rows made, bytes written, chunks not recorded
 * (skipped waiting for a key frame, a part missing, a write failed). */
void spy__rec_bufs_counts(const rec_bufs *b, uint64_t *chunks, uint64_t *bytes,
                          uint64_t *lost);
void spy__rec_bufs_free(rec_bufs *b); /* ends first; NULL ok */

/* --buffers all: the requests this provider's metadata names now (the
 * state's buffers table), in *out (malloc'ed, names point into st: valid
 * until the next poll). Returns how many, or -1 (out of memory). */
int spy__rec_bufs_wanted(const rec_bufs_cfg *cfg, const spy_state *st,
                         spy_buffer_request **out);

#endif
