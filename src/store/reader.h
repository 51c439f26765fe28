/* reader.h — the trace reader's backends (internal). One table of
 * function pointers per store, like the writers: JSON-lines
 * (reader_jsonl.c), SQLite (reader_sqlite.c), PostgreSQL (reader_pg.c).
 * Each streams the session's actions in seq order — a line, a row or a
 * cursor batch at a time, never the whole session in memory — and finds
 * payloads by content id; reader.c holds what the three share: the
 * public calls, the derived views and the summary, the hook-call query
 * for stores that cannot answer it themselves, the replay of stored
 * action batches, the actions rebuilt from the kinds' tables (schema 4)
 * and the decoding of delta chains. */
#ifndef SPY_STORE_READER_H
#define SPY_STORE_READER_H

#include "store.h"

/* One stored blob of a payload's delta chain (SQL stores). */
typedef struct spy__blob {
  spy__buf z;
  int codec;
  size_t size;
  char id[33], base[33]; /* base: "" when none */
} spy__blob;

/* The distinct payloads a summary asks about, sorted by hash. */
typedef struct spy__refcount {
  uint64_t hash[2];
  uint64_t uses;
  uint64_t size, stored; /* filled by the backend's sizes op */
  int found;
} spy__refcount;

typedef struct spy__reader_ops {
  const char *name;
  /* Opens `store` for r->session_id (NULL: the latest, which the backend
   * then sets). Returns 0 or a negative code with r's error set. */
  int (*open)(spy_trace_reader *r, const char *store);
  /* The next action of the session in seq order: 1 and *a (valid until
   * the next call), 0 at the end, or a negative code. */
  int (*next)(spy_trace_reader *r, spy_trace_action *a);
  int (*rewind)(spy_trace_reader *r);
  /* SQL stores: the stored blob with the 32-hex id into *b. Returns 0,
   * SPY_ENOENT or SPY_EIO. NULL when `source` is set. */
  int (*fetch)(spy_trace_reader *r, const char *id, spy__blob *b);
  /* The decoded payload into out (JSON-lines). Returns 0, SPY_ENOENT or a
   * negative code. NULL: reader.c follows the delta chain over fetch. */
  int (*source)(spy_trace_reader *r, const uint64_t hash[2], spy__buf *out);
  /* Fills size (decoded bytes), stored (bytes in the store) and found of
   * each of the n payloads, in one pass over the store (one query). */
  int (*sizes)(spy_trace_reader *r, spy__refcount *rs, size_t n);
  /* Actions the writer reported as not stored; -1 unknown. */
  int64_t (*lost)(spy_trace_reader *r);
  /* Bytes that were not UTF-8 and became U+FFFD in the store's JSON
   * (0 for stores that keep the bytes as they were). */
  uint64_t (*replaced)(spy_trace_reader *r);
  /* Frees the backend's state (safe on a half-open one). */
  void (*close)(spy_trace_reader *r);
  /* SQL stores of schema 4+ (r->tables set by open): `next` above gives
   * the records kept in action_batches only, and these the session's rows
   * of derived table t (an index of r->schema) in seq order, elements in
   * their order within an action. tnext steps table t and fills c with
   * its columns (valid until the next tnext of t): 1, 0 at its end, or a
   * negative code with r's error set. trewind restarts every table. */
  int (*tnext)(spy_trace_reader *r, int t, spy__cell *c);
  void (*trewind)(spy_trace_reader *r);
  /* Optional: the session's ended hook calls that match q (never NULL),
   * in q's order, at most q->limit of them, answered by the store from a
   * table the writer kept (SQLite's hook_calls: its WHERE, ORDER BY and
   * LIMIT) instead of every action replayed; cb as
   * spy_trace_reader_hook_calls_query's. Returns 0, a negative code, or
   * SPY_ENOTSUP when the store cannot answer so (reader.c then replays
   * the actions, filtering as it goes and keeping at most q->limit calls). */
  int (*calls)(spy_trace_reader *r, const spy_trace_call_query *q,
               int (*cb)(void *, const spy_trace_hook_call *), void *arg);
} spy__reader_ops;

extern const spy__reader_ops spy__reader_jsonl;
extern const spy__reader_ops spy__reader_sqlite;
extern const spy__reader_ops spy__reader_pg;

struct spy_trace_reader {
  const spy__reader_ops *ops;
  void *st; /* the backend's state */
  char err[512], warn[512];
  char *session_id;
  spy_trace_arena arena, sarena; /* actions; payload lookups */
  spy__buf buf, buf2;
  spy__blob chain[SPY__SRC_READ_DEPTH + 1];
  void *dctx; /* one zstd decompression context for every blob */
  /* the stored action batch being replayed (SQL stores) */
  spy__buf btext;
  size_t boff;
  int brecords; /* binary records (schema 2+), else JSON lines */
  /* schema 4+: actions rebuilt from their tables, merged in seq order
   * with the records of action_batches (reader.c) */
  int tables;
  spy__schema schema;     /* the built-in kinds' tables */
  struct spy__tcur *tc;   /* per table: its current row */
  spy_trace_arena parena; /* the action_batches action waiting */
  spy_trace_action bact;  /* … that action */
  int bstate;             /* 0 none read, 1 bact waits, 2 at the end */
};

/* Schema 4+: sets up the merge of tables and batches (the backend's open
 * calls it). Returns 0 or SPY_ENOMEM. */
int spy__reader_tables(spy_trace_reader *r);

/* SQL stores' hook call queries (store schema 6: a call is one row):
 * the ORDER BY of start order and of the slowest first, ties broken as
 * reader.c's replay breaks them; and a row's hook type and source ids
 * into c (c->hook one of spy__hooks' names). id[k] NULL: no input (k 0)
 * or output (1). Returns 0, or SPY_EBADVALUE with r's error naming
 * `table` when the row is inconsistent. */
#define SPY__CALLS_START_ORDER "started_at, start_seq"
#define SPY__CALLS_SLOW_ORDER                                                  \
  "CASE WHEN ended_at > started_at THEN ended_at - started_at ELSE 0 END "     \
  "DESC, " SPY__CALLS_START_ORDER
int spy__reader_call_row(spy_trace_reader *r, const char *table,
                         const char *hook, const char *const id[2],
                         const size_t idn[2], spy_trace_hook_call *c);

/* Sets the reader's error message; returns rc. */
int spy__reader_err(spy_trace_reader *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets the reader's warning (something it read past). */
void spy__reader_warn(spy_trace_reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Unpacks one stored action_batches row into the batch being replayed.
 * Returns 0 or a negative code (a corrupt batch). */
int spy__reader_batch(spy_trace_reader *r, int codec, const void *p, size_t n,
                      size_t size);
/* The next action of the batch being replayed: 1 and *a, 0 when it is
 * used up, or a negative code. */
int spy__reader_batch_next(spy_trace_reader *r, spy_trace_action *a);

struct sqlite3;
struct pg_conn;
int spy__sqlite_check_version(struct sqlite3 *db);
int spy__pg_check_version(struct pg_conn *c);

#endif
