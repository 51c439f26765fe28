/* rec.h — internals of the recorder: the row that travels from a receiving
 * thread to the writer, the statements of the schema (rec_schema.c), and
 * the database backends behind one table of function pointers
 * (rec_sqlite.c, rec_pg.c). */
#ifndef SPY_REC_H
#define SPY_REC_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spyglass/record.h"

#define SPY_RECORD_VERSION                                                     \
  "3" /* schema version, in recording.version                                  \
        (3: zone_block, packed zones) */

/* One cell of a row: NULL, integer, real, text or blob (C_TEXT and
 * C_BLOB are owned by the row: malloc'ed by the receiver, freed by the
 * writer; C_CONST points at a string literal, nothing to free; a blob's
 * length is len). */
enum { C_NULL = 0, C_INT = 1, C_REAL = 2, C_TEXT = 3, C_CONST = 4, C_BLOB = 5 };
typedef struct rec_cell {
  uint8_t t;
  uint32_t len; /* C_BLOB */
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
  S_SLICE,         /* id, ts, dur, track_id, name_id, depth, parent, flags */
  S_COUNTER,       /* ts, track_id, value */
  S_ARG,           /* arg_set_id, key, int, real, string */
  S_FRAME,         /* upid, frame, ts, cpu_ms, gpu_ms, fps */
  S_VALUE,         /* upid, ts, source, name, kind, state, int, real, string */
  S_ZONE_LOC,      /* id, upid, loc_id, name, function, file, line, color */
  S_MSGPROF,       /* upid, ts, type, count, errors, bytes, msgs/s, bytes/s,
                      encode p50, p99, post p50, p99 */
  S_LOSS,          /* upid, ts, what, count */
  S_PROCESS_CLOCK, /* clock_offset_ns, upid */
  S_BUILD,         /* rec_trace.c: upid, build, started, ended, modules, … */
  S_BUILD_HOOK,    /* upid, build, plugin, hook, calls, total_us, max_us */
  S_HOOK_CALL,     /* upid, build, plugin, hook, module, dur_us */
  S_ZONE_BLOCK,    /* track_id, ts0, ts1, id0, id1, n, data (zblock.h) */
  S_CHUNK,         /* rec_buffers.c: upid, ts, buffer, frame, w, h, … */
  S_COUNT
} rec_stmt;

#define REC_CELLS 13
typedef struct rec_row {
  uint8_t stmt, n;
  rec_cell c[REC_CELLS];
} rec_row;

/* Appending a cell to a row (the caller keeps r->n < REC_CELLS). */
static inline void cint(rec_row *r, int64_t v) {
  r->c[r->n].t = C_INT;
  r->c[r->n++].v.i = v;
}
/* a real; NaN or infinite: NULL */
static inline void cdbl(rec_row *r, double v) {
  if (isfinite(v)) {
    r->c[r->n].t = C_REAL;
    r->c[r->n++].v.r = v;
  } else {
    r->c[r->n++].t = C_NULL;
  }
}
static inline void cnull(rec_row *r) { r->c[r->n++].t = C_NULL; }
/* a copy of len bytes of s as text (s NULL or out of memory: NULL) */
static inline void ctextn(rec_row *r, const char *s, size_t len) {
  char *t = s ? malloc(len + 1) : NULL;
  if (t) {
    memcpy(t, s, len);
    t[len] = 0;
    r->c[r->n].t = C_TEXT;
    r->c[r->n++].v.s = t;
  } else {
    r->c[r->n++].t = C_NULL;
  }
}
static inline void ctext(rec_row *r, const char *s) {
  ctextn(r, s, s ? strlen(s) : 0);
}
/* text the row takes over (malloc'ed; NULL: a NULL cell) */
static inline void ctake(rec_row *r, char *s) {
  r->c[r->n].t = s ? C_TEXT : C_NULL;
  r->c[r->n++].v.s = s;
}
/* A string literal: no copy, nothing to free. */
static inline void cconst(rec_row *r, const char *s) {
  r->c[r->n].t = C_CONST;
  r->c[r->n++].v.s = (char *)s;
}

/* The SQL of statement s: parameters $1 (recording id) then the cells as
 * $2.. in order. */
const char *spy__rec_sql(int s);
/* The tables (CREATE … IF NOT EXISTS), pg: PostgreSQL types. */
const char *spy__rec_ddl(int pg);
/* The zone table slice_data and the `slice` view (run after
 * spy__rec_ddl): over slice_data, or with packed = 1 over the packed
 * blocks (`spyglass_slices`, the table libspyglass_sqlite adds). */
const char *spy__rec_slice_ddl(int pg, int packed);
/* Indexes built when a recording closes. */
const char *spy__rec_index_ddl(void);

/* A database backend. Every op runs on the writer thread, except open /
 * close (the creating thread, before and after it). */
typedef struct rec_backend_ops {
  const char *name;
  /* Opens, creates the schema and a recording row (args: command line;
   * packed: the `slice` view reads the packed blocks); returns the
   * backend state or NULL (message on stderr). */
  void *(*open)(const char *db, const char *args, int64_t start_mono_ns,
                int packed, int64_t *recording_id);
  int (*begin)(void *st);
  int (*row)(void *st, const rec_row *r);
  int (*commit)(void *st);
  /* Ends the recording (end time), builds indexes, closes. */
  int (*close)(void *st, int64_t end_mono_ns);
} rec_backend_ops;

/* Reading a recording back (rec_read.c; export, diff): a backend behind
 * one ops table. query() starts one query (?1..?N parameters, int64),
 * next() gives 1 per row, 0 at the end, <0 on error; the column getters
 * read the current row (text valid until the next next()/query()). One
 * query open at a time. */
typedef struct rec_read_ops {
  const char *name;
  void *(*open)(const char *db); /* message on stderr, NULL on failure */
  int (*query)(void *st, const char *sql, int np, const int64_t *p);
  int (*next)(void *st);
  int (*is_null)(void *st, int col);
  int64_t (*i64)(void *st, int col);
  double (*dbl)(void *st, int col);
  const char *(*text)(void *st, int col); /* NULL for NULL */
  const char *(*errmsg)(void *st);
  void (*close)(void *st);
  /* a blob column (NULL op: the backend stores none; *len 0 for NULL) */
  const void *(*blob)(void *st, int col, size_t *len);
} rec_read_ops;

typedef struct rec_rd {
  const rec_read_ops *ops;
  void *st;
  int64_t rec_id; /* the recording read */
} rec_rd;

/* 1 if db is a postgres:// or postgresql:// URI. */
int spy__rec_is_pg(const char *db);
/* Opens db (a SQLite file or a PostgreSQL URI) and finds the recording:
 * `recording` if > 0, else the file's first / the database's newest.
 * Returns 0, SPY_EIO or SPY_ENOENT (message on stderr). */
int spy__rec_read_open(rec_rd *r, const char *db, int64_t recording,
                       int64_t *started_ns);
void spy__rec_read_close(rec_rd *r);

/* A query in the making: prepared (sql kept), parameters bound, run at
 * the first step. For code that reads like the sqlite3 API it replaced. */
typedef struct rec_q {
  rec_rd *rd;
  const char *sql;
  int64_t p[8];
  int np, started, failed;
} rec_q;
void spy__rq_prep(rec_q *q, rec_rd *rd, const char *sql);
void spy__rq_bind(rec_q *q, int i, int64_t v); /* i from 1 */
int spy__rq_step(rec_q *q); /* 1: a row; 0: the end or an error (failed) */
int spy__rq_null(rec_q *q, int col);
int64_t spy__rq_i64(rec_q *q, int col);
double spy__rq_dbl(rec_q *q, int col);
const char *spy__rq_text(rec_q *q, int col); /* NULL for NULL */

/* Packed zones of a recording (rec_zones.c): 1 if it has zone_block
 * rows, 0 if not, <0 on a read error. */
int spy__rec_has_blocks(rec_rd *rd);
/* Calls fn for every zone of the recording's blocks, in (track, ts,
 * depth) order, with the starts in [from, to]; fn returns 0 to go on.
 * Returns 0, the first non-zero of fn, SPY_EBADVALUE (a corrupt block,
 * message on stderr) or SPY_EIO. */
struct spy_zb_zone;
typedef int (*rec_zone_fn)(void *user, int64_t track,
                           const struct spy_zb_zone *z);
int spy__rec_zones_each(rec_rd *rd, int64_t from, int64_t to, rec_zone_fn fn,
                        void *user);

extern const rec_backend_ops spy__rec_sqlite;
extern const rec_backend_ops spy__rec_pg;

#endif
