/* rec.h — internals of the recorder: the row that travels from a receiving
 * thread to the writer, the statements of the schema (rec_schema.c), and
 * the database backends behind one table of function pointers
 * (rec_sqlite.c, rec_pg.c). */
#ifndef SPY_REC_H
#define SPY_REC_H

#include <stdint.h>

#include "spyglass/record.h"

#define SPY_RECORD_VERSION "1" /* schema version, in recording.version */

/* One cell of a row: NULL, integer, real or text (text is owned by the
 * row: malloc'ed by the receiver, freed by the writer). */
enum { C_NULL = 0, C_INT = 1, C_REAL = 2, C_TEXT = 3 };
typedef struct rec_cell {
  uint8_t t;
  union {
    int64_t i;
    double r;
    char *s;
  } v;
} rec_cell;

/* What a row is: one statement of the schema each. */
typedef enum rec_stmt {
  S_PROCESS,       /* upid, pid, provider_id, name, start_ts, offset, args */
  S_PROCESS_END,   /* end_ts, upid */
  S_THREAD,        /* utid, upid, tid, thread_no, name (upsert) */
  S_THREAD_END,    /* end_ts, utid */
  S_TRACK,         /* id, name, type, upid, utid, unit */
  S_SLICE,         /* id, ts, dur, track_id, name, depth, parent, loc, flags */
  S_COUNTER,       /* ts, track_id, value */
  S_ARG,           /* arg_set_id, key, int, real, string */
  S_FRAME,         /* upid, frame, ts, cpu_ms, gpu_ms, fps */
  S_VALUE,         /* upid, ts, source, name, kind, state, int, real, string */
  S_ZONE_LOC,      /* upid, loc_id, name, function, file, line, color */
  S_MSGPROF,       /* upid, ts, type, count, errors, bytes, msgs/s, bytes/s,
                      encode p50, p99, post p50, p99 */
  S_LOSS,          /* upid, ts, what, count */
  S_PROCESS_CLOCK, /* clock_offset_ns, upid */
  S_BUILD,         /* rec_trace.c: upid, build, started, ended, modules, … */
  S_BUILD_HOOK,    /* upid, build, plugin, hook, calls, total_us, max_us */
  S_HOOK_CALL,     /* upid, build, plugin, hook, module, dur_us */
  S_COUNT
} rec_stmt;

#define REC_CELLS 13
typedef struct rec_row {
  uint8_t stmt, n;
  rec_cell c[REC_CELLS];
} rec_row;

/* The SQL of statement s: parameters $1 (recording id) then the cells as
 * $2.. in order. */
const char *spy__rec_sql(int s);
/* The tables (CREATE … IF NOT EXISTS), pg: PostgreSQL types. */
const char *spy__rec_ddl(int pg);
/* Indexes built when a recording closes. */
const char *spy__rec_index_ddl(void);

/* A database backend. Every op runs on the writer thread, except open /
 * close (the creating thread, before and after it). */
typedef struct rec_backend_ops {
  const char *name;
  /* Opens, creates the schema and a recording row (args: command line);
   * returns the backend state or NULL (message on stderr). */
  void *(*open)(const char *db, const char *args, int64_t start_mono_ns,
                int64_t *recording_id);
  int (*begin)(void *st);
  int (*row)(void *st, const rec_row *r);
  int (*commit)(void *st);
  /* Ends the recording (end time), builds indexes, closes. */
  int (*close)(void *st, int64_t end_mono_ns);
} rec_backend_ops;

extern const rec_backend_ops spy__rec_sqlite;
extern const rec_backend_ops spy__rec_pg;

#endif
