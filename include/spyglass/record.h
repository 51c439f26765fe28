/* record.h — recordings: store what consumers receive from providers into
 * SQLite or PostgreSQL, read it back as Perfetto / Chrome traces, and
 * compare two recordings (library spyglass_record, above the consumer and
 * the store's databases).
 *
 *   spy_recorder *r;
 *   spy_recorder_desc d = {.db = "run.db"};      // or "postgres://…"
 *   spy_recorder_create(&r, &d);                  // starts the writer
 *   spy_recorder_add(r, NULL);                    // first provider found
 *   while (!stop) spy_recorder_step(r, 100);      // discovery (--all)
 *   spy_recorder_destroy(r);                      // commits everything
 *
 * Threads. Every source (one provider) has its own receiving thread: a
 * consumer whose on_data hook turns each DATA frame into rows and pushes
 * them into one bounded queue; the queue never blocks a receiver: when it
 * is full the rows are dropped and counted (spy_recorder_stats.rows_lost,
 * and a `loss` row). One writer thread takes the queued rows and writes
 * them in one transaction per batch (at most every 100 ms, or 16384 rows),
 * so a recorder killed with SIGKILL loses at most the batch in progress.
 *
 * Schema (docs/recording.md): recording, process, thread, track, slice,
 * counter, args, frame, value, zone_loc, msgprof, loss, chunk. All times
 * are nanoseconds of the recorder host's CLOCK_MONOTONIC: a provider's
 * zone times are mapped with its clock-sync offset (process.clock_offset_ns)
 * so processes of one --all recording share one time line.
 *
 * The create / destroy and step functions are used from one thread. */
#ifndef SPYGLASS_RECORD_H
#define SPYGLASS_RECORD_H

#include <stdint.h>
#include <stdio.h>

#include "spyglass/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spy_recorder spy_recorder;

typedef struct spy_recorder_desc {
  const char *db;      /* a file name (SQLite) or postgres:// / postgresql://
                          URI or "host=… dbname=…" conninfo with
                          pg = 1; required */
  int pg;              /* 1: db is a libpq conninfo (set for URIs) */
  const char *dir;     /* bus runtime directory; NULL = default */
  uint32_t features;   /* 0 = STATS|ENV|REGISTRY|HEALTH|MSGPROF|ZONES */
  const char *args;    /* the command line, kept in the recording row */
  uint32_t queue_rows; /* queue capacity in rows (~220 B each); default
                          131072 */
  int all;             /* 1: spy_recorder_step adds new providers (this
                          host's bus, or the bridge's with connect) */
  /* Remote: a provider of another host through its bridge (consumer.h
   * spy_consumer_desc.connect / token / remote). NULL: this host's bus. */
  const char *connect, *token;
  const struct spy_channel_ops *remote;
  /* Buffers. NULL: none (SPY_FEAT_BUFFERS in features records their
   * metadata only, as value rows). A comma list of buffer names, or
   * "all" (every buffer the provider declares, also later ones): their
   * images are recorded too (SPY_FEAT_BUFFERS is added) — stream: VP9
   * chunks appended to one IVF file per buffer and size; raw (full size)
   * or thumb (long edge buffer_long_edge, default 256): one PNG per
   * image — each indexed by a `chunk` row. The files go in buffers_dir
   * (made if missing), default `<db>.buffers` beside a SQLite file, or
   * `recording-<id>.buffers` in the working directory for PostgreSQL. */
  const char *buffers;
  int buffer_mode; /* SPY_RECORD_BUFFERS_*; 0 = stream */
  uint32_t buffer_long_edge;
  const char *buffers_dir;
} spy_recorder_desc;

enum {
  SPY_RECORD_BUFFERS_STREAM = 1,
  SPY_RECORD_BUFFERS_RAW = 2,
  SPY_RECORD_BUFFERS_THUMB = 3
};

typedef struct spy_recorder_stats {
  uint64_t frames, rows, rows_lost, batches, bytes; /* bytes received */
  uint64_t samples_lost, frames_lost;               /* provider / bus */
  uint32_t sources, connected;
  int64_t recording_id;
  int error;    /* the writer's first error (0: none) */
  double cpu_s; /* CPU of the recorder's own threads (receivers + writer)
                   so far; not the index build at destroy */
  /* Buffers: chunk rows made, bytes in their files, chunks not recorded
   * (waiting for a key frame, a part missing, a file error). */
  uint64_t chunks, chunk_bytes, chunks_lost;
} spy_recorder_stats;

/* Opens the database (creating the schema, or adding a recording row to
 * an existing PostgreSQL one) and starts the writer. A SQLite file that
 * exists is refused (SPY_EEXIST): a recording is one file. Errors:
 * SPY_EINVAL, SPY_ENOMEM, SPY_EEXIST, SPY_EIO (message on stderr). */
int spy_recorder_create(spy_recorder **out, const spy_recorder_desc *d);
/* Starts recording the provider `want` names (16-hex id or name; NULL:
 * the first one found). Returns 0 or a consumer error. */
int spy_recorder_add(spy_recorder *r, const char *want);
/* With desc.all: looks for providers not recorded yet (waits up to
 * wait_ms) and adds them. Otherwise it only sleeps wait_ms. */
int spy_recorder_step(spy_recorder *r, int wait_ms);
void spy_recorder_get_stats(spy_recorder *r, spy_recorder_stats *out);
/* Stops the sources, writes everything queued, ends open tracks, builds
 * the indexes, closes. Returns the writer's first error or 0. NULL ok. */
int spy_recorder_destroy(spy_recorder *r);

/* Export. db: a SQLite file or a postgres:// URI; recording: its id
 * (recording.id), 0 = a file's first / a database's newest. fmt
 * "perfetto" (protobuf Trace) or "chrome" (trace-event JSON); from_s /
 * to_s: seconds from the recording's start (to_s < 0: the end). Streams:
 * the file is written while rows are read (PostgreSQL: single-row mode).
 * Returns 0, SPY_EINVAL (format, no such recording), SPY_EIO (message on
 * stderr). */
int spy_record_export(const char *db, int64_t recording, const char *fmt,
                      FILE *out, double from_s, double to_s);

/* Diff: writes the comparison of two recordings to out (a table, or JSON)
 * and returns 1 if a watched figure regressed beyond threshold (a
 * fraction, 0.05 = 5 %) and outside the runs' spread, 0 if not, a
 * negative error for unreadable input (message on stderr). */
int spy_record_diff(const char *base, const char *cand, double threshold,
                    int json, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
