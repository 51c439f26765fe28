/* store.h — internal interfaces of the store layer: a growable byte
 * buffer, the JSON-lines form of an action, the relational rows an action
 * maps to (shared by the SQLite and PostgreSQL writers), the source codec
 * and the built-in writers. */
#ifndef SPY_STORE_INTERNAL_H
#define SPY_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "spyglass/trace.h"

/* ---- byte buffer ----------------------------------------------------------
 */
typedef struct spy__buf {
  char *p;
  size_t len, cap;
  int err;           /* sticky SPY_ENOMEM */
  uint64_t replaced; /* invalid UTF-8 bytes spy__json_str made U+FFFD */
} spy__buf;
int spy__buf_reserve(spy__buf *b, size_t extra);
void spy__buf_put(spy__buf *b, const void *p, size_t n);
void spy__buf_puts(spy__buf *b, const char *s);
void spy__buf_putc(spy__buf *b, char c);
void spy__buf_i64(spy__buf *b, int64_t v);
void spy__buf_u64(spy__buf *b, uint64_t v);
void spy__buf_free(spy__buf *b);

/* ---- content-hash set (hashset.c) --------------------------------------- */
typedef struct spy__hset {
  uint64_t *v; /* pairs; cap slots, a power of two */
  size_t n, cap;
} spy__hset;
/* 1 when h was added, 0 when already there, or SPY_ENOMEM. */
int spy__hset_add(spy__hset *s, const uint64_t h[2]);
/* 1 when h was there (and is removed), else 0. */
int spy__hset_take(spy__hset *s, const uint64_t h[2]);
void spy__hset_free(spy__hset *s);
/* The payloads of a batch that did not reach the store: `batch` collects
 * the hashes of the payloads a writer stored since its last commit
 * (spy__lost_src_note); when the batch fails they move to `gone`
 * (spy__lost_src_fail), and an action that names one of them has it
 * stored again first (spy__lost_src_resend calls store). */
typedef struct spy__lost_src {
  spy__buf batch; /* 16-byte hashes */
  spy__hset gone;
} spy__lost_src;
void spy__lost_src_note(spy__lost_src *l, const uint64_t hash[2]);
int spy__lost_src_fail(spy__lost_src *l);
void spy__lost_src_commit(spy__lost_src *l);
int spy__lost_src_resend(spy__lost_src *l, const spy_trace_val *v,
                         int (*store)(void *, const uint64_t[2], const char *,
                                      size_t),
                         void *arg);
void spy__lost_src_free(spy__lost_src *l);

/* ---- catalog helpers
 * --------------------------------------------------------- */
/* The field `name` of a decoded record described by k, or NULL. */
const spy_trace_val *spy__field(const spy_trace_kind *k,
                                const spy_trace_val *rec, const char *name);
/* The hook a kind is a call of ("transform", "load", "resolve_id",
 * "render_chunk": SPY_TRACE_HOOKS in the catalog), or NULL. */
const char *spy__hook_type(const spy_trace_kind *k);
/* One plugin hook of the catalog (SPY_TRACE_HOOKS): its Start and End
 * kinds and the Start field naming its subject ("_": none). The table
 * ends with a NULL hook. */
typedef struct spy__hook {
  const char *hook;
  const spy_trace_kind *start, *end;
  const char *subject;
} spy__hook;
extern const spy__hook spy__hooks[];
/* Reads a whole file into a NUL-terminated heap buffer (*n bytes), or NULL. */
char *spy__slurp(const char *path, size_t *n);

/* A lent payload (spy_trace_text.release) in a record of the session's
 * own queues: u32 length, then its pointer, release and owner. Never on
 * a wire or in a file; spy_trace_decode refuses it. */
#define SPY__TV_LENT 0x40
/* Lending in spy__trace_encode_lend: with on set a lent payload is written
 * as SPY__TV_LENT, not copied. owner (in and out): the owner of the
 * queue's last lent payload; a payload of the same owner is held once, so
 * counted once. Out: bytes, what was lent; held, of it what is counted
 * against lend_bytes. */
typedef struct spy__lend {
  int on;
  const void *owner;
  uint64_t bytes, held;
} spy__lend;
/* spy_trace_encode, lending as `lend` says (NULL: copies). */
int64_t spy__trace_encode_lend(const spy_trace_kind *kind, const void *act,
                               uint64_t seq, uint64_t ts_us, uint32_t build,
                               void *buf, size_t cap, spy__lend *lend);
/* The same through the descriptor walk every kind can take (built-in kinds
 * have generated encoders; tests check both write the same bytes). */
int64_t spy__trace_encode_generic(const spy_trace_kind *kind, const void *act,
                                  uint64_t seq, uint64_t ts_us, uint32_t build,
                                  void *buf, size_t cap, spy__lend *lend);
/* A lent payload met while decoding one of the session's own records:
 * the SRC value it became, its release and owner, and the bytes it counts
 * against lend_bytes (0 for one of the same owner as the one before). */
typedef struct spy__lent {
  const spy_trace_val *val;
  void (*release)(void *owner);
  void *owner;
  uint64_t held;
} spy__lent;
typedef struct spy__lentv {
  spy__lent *v;
  uint32_t n, cap;
  int lost; /* an entry could not be kept (no memory): not all are here */
} spy__lentv;
/* spy_trace_decode that also takes SPY__TV_LENT (as a SRC pointing at the
 * lent bytes), listing each in *lv (reset first): for records of the
 * session's own memory queues only. */
int spy__trace_decode_lent(const void *p, size_t n, spy_trace_arena *arena,
                           spy_trace_action *out, spy__lentv *lv);
/* Calls release once for each lent payload the record references (a
 * record spy__trace_encode_lend wrote); returns their counted bytes. */
uint64_t spy__trace_release_record(const void *rec, size_t n);
/* Calls release once for each lent payload of an action struct (an emit
 * that copied them, or failed); returns how many. */
int spy__trace_release_act(const spy_trace_kind *kind, const void *act);

/* Appends the action's binary record (docs/wire.md, TRACE) to b, every
 * hashed SRC written as its SRCREF: the form the SQL stores keep in
 * action_batches. Returns 0 or a negative code. */
int spy__trace_record_put(spy__buf *b, const spy_trace_action *a);

/* ---- JSON ------------------------------------------------------------------
 */
/* Appends s[0..n) as a JSON string literal (quotes included); bytes that
 * are not UTF-8 become U+FFFD and are counted in b->replaced. */
void spy__json_str(spy__buf *b, const char *s, size_t n);
/* Appends the action's JSON-lines object (no newline), Rolldown's devtools
 * log form: timestamp (ms, string), session_id, build_id (when in a
 * build), action, then the fields; a hashed SRC prints as "$ref:<id>". */
void spy__trace_json(spy__buf *b, const char *session_id,
                     const spy_trace_action *a);
/* Appends {"action":"StringRef","id":…,"content":…}. */
void spy__trace_json_stringref(spy__buf *b, const uint64_t hash[2],
                               const char *p, size_t n);

/* One JSON-lines line, parsed (json_parse.c, with jansson). */
typedef struct spy__jline {
  int is_ref;              /* a StringRef line: hash and size are set */
  uint64_t hash[2];        /* its content id */
  size_t size;             /* its content's bytes */
  uint64_t replaced;       /* bytes of the line that were not UTF-8 */
  spy_trace_action action; /* an event: the decoded action */
} spy__jline;
/* Parses one line p[0..n). Returns 0 for an event (out->action, its tree
 * and strings in arena, SRC as SRCREF when the value is "$ref:<id>"), 1
 * for a StringRef (its content appended to `content` when not NULL),
 * SPY_EBADVALUE with a reason in msg (not JSON, not an event, fields that
 * do not match the kind) or SPY_ENOMEM. Bytes that are not UTF-8 are read
 * as U+FFFD and counted in out->replaced. */
int spy__json_line(const char *p, size_t n, spy_trace_arena *a, spy__jline *out,
                   spy__buf *content, char *msg, size_t msgcap);
/* Reads the integer members keys[0..nkeys) of the JSON object p[0..n)
 * into vals (others left as they are). Returns 0 or SPY_EBADVALUE. */
int spy__json_ints(const char *p, size_t n, const char *const *keys,
                   int64_t *vals, int nkeys);
/* Parses a 32-hex content id; returns 0 or SPY_EBADVALUE. */
int spy__hash_parse(const char *s, size_t n, uint64_t out[2]);

/* ---- SQL schema ------------------------------------------------------------
 */
enum {
  SPY__COL_INT = 'I',
  SPY__COL_TEXT = 'T',
  SPY__COL_BLOB = 'B',
  SPY__COL_JSON = 'J'
};
/* The writers' own fixed tables (rows.c). */
typedef struct spy__table {
  const char *name;
  const char *cols;  /* comma separated */
  const char *types; /* one SPY__COL_* per column */
  const char *key;   /* primary key columns or NULL */
} spy__table;
enum { SPY__T_SOURCES, SPY__T_BATCHES, SPY__T_COUNT };
extern const spy__table spy__tables[SPY__T_COUNT];

typedef struct spy__cell {
  uint8_t kind; /* 0 null, SPY__COL_INT, SPY__COL_TEXT, SPY__COL_BLOB */
  int64_t i;
  const char *s;
  size_t n;
} spy__cell;

/* A table derived from the catalog (schema.c): an action kind's own table
 * or the child table of one of its record lists. */
typedef struct spy__gtable {
  char *name;
  const spy_trace_kind *rec; /* whose fields are the columns */
  uint8_t depth;             /* element index columns i0 … */
  uint16_t ncols;
  char *cols;  /* comma separated */
  char *types; /* one SPY__COL_* per column */
  int *child;  /* per field: the child table, or -1 */
} spy__gtable;

/* The derived schema a writer has seen so far: the built-in kinds' tables
 * first (nbuiltin of them), application kinds' appended as they appear. */
typedef struct spy__schema {
  spy__gtable *t;
  int n, cap, nbuiltin;
  struct {
    const spy_trace_kind *kind;
    int root; /* its table, -1 if its names cannot be tables */
  } * kinds;
  int nkinds, kcap;
  int64_t session; /* the sessions.session key written in every row */
  int utf8_only;   /* the store's text must be UTF-8 (PostgreSQL) */
  int inexact;     /* set by spy__schema_rows: the rows cannot give the
                      action back byte for byte (a string the store's
                      text or JSON changes); the writer then keeps its
                      binary record in action_batches too */
  spy__cell *cells;
  int ccap;
  spy__buf text;
} spy__schema;

/* Adds the tables of every built-in kind. 0 or SPY_ENOMEM. */
int spy__schema_init(spy__schema *s);
void spy__schema_free(spy__schema *s);
/* The table of kind k, adding it (and its child tables) the first time
 * (*fresh = 1). -1 when the kind's names cannot be SQL names (not
 * [a-z_][a-z0-9_]*, too long, a reserved name or column, nested too deep):
 * such a kind is kept in action_batches only. Or SPY_ENOMEM. */
int spy__schema_root(spy__schema *s, const spy_trace_kind *k, int *fresh);
/* CREATE TABLE IF NOT EXISTS name(col type, …[, PRIMARY KEY(key)]) from a
 * comma-separated column list and one SPY__COL_* per column; pg selects
 * the dialect. */
void spy__create_table_sql(spy__buf *b, const char *name, const char *cols,
                           const char *types, const char *key, int pg);
/* "<verb> name(cols) VALUES(?,…)" with ncols placeholders. */
void spy__insert_sql(spy__buf *b, const char *verb, const char *name,
                     const char *cols, size_t ncols);
/* CREATE TABLE IF NOT EXISTS for derived table t. */
void spy__schema_table_sql(const spy__schema *s, int t, spy__buf *b, int pg);
/* The generic index of table t (child tables: by build and parent). */
void spy__schema_index_sql(const spy__schema *s, int t, spy__buf *b);
/* INSERT INTO t(cols) VALUES(?,…) — SQLite's placeholders. */
void spy__schema_insert_sql(const spy__schema *s, int t, spy__buf *b);
/* Calls sink once per row of action a (root: spy__schema_root of its
 * kind; nothing when < 0): its own row, then its list elements', in
 * element order. The cells are valid during the call. Sets s->inexact
 * (cleared first). Returns 0 or the first negative result. */
typedef int (*spy__gsink)(void *arg, int table, const spy__cell *cells, int n);
int spy__schema_rows(spy__schema *s, int root, const spy_trace_action *a,
                     spy__gsink sink, void *arg);

/* The column suffix ("", "_source_id", "_count") and SPY__COL_* type a
 * field gets in its table. */
void spy__field_col(const spy_trace_field *f, const char **suffix, char *type);
/* CREATE TABLE for sessions, sources, action_batches. */
void spy__own_tables_sql(spy__buf *b, int pg);
/* The reference's tables as views over the derived ones. */
void spy__views_sql(spy__buf *b, int pg);
/* SQLite: hook_calls as a table with the hook_calls_live view's columns
 * (the view's join costs too much for interactive questions), filled by
 * the writer as each call ends (writer_sqlite.c); IF NOT EXISTS. Its
 * covering index by plugin: spy__hook_calls_index_sql, built at close. */
void spy__hook_calls_table_sql(spy__buf *b);
void spy__hook_calls_index_sql(spy__buf *b);
/* SQLite, store schema 6: a hook call is one hook_calls row. Its Start
 * and End have no rows of their own when the row can give them back:
 * start_seq and end_seq, the fields the row has columns for, the others
 * as start_<field> and end_<field>; one that cannot be (an End whose
 * plugin differs from its Start's, a list field, no call id) has its row
 * in <kind>_kept and sets bit 1 (Start) or 2 (End) of the row's `kept`.
 * Each hook Start and End kind's name is a view over both.
 * spy__call_role says which column field i of h's Start (end 0) or End
 * gives back; spy__hook_calls_extra names the k-th column hook_calls has
 * beyond the schema 4 ones (0: no more); spy__hook_calls_names lists every
 * column; spy__call_select_sql is the SELECT of a kind's rows (session:
 * the session key's expression; where: NULL for the view, else the
 * reader's filter on hook_calls h, the kept table read for session ?1). */
enum {
  SPY__CALL_ID,
  SPY__CALL_PLUGIN,
  SPY__CALL_PLUGIN_ID,
  SPY__CALL_SUBJECT,
  SPY__CALL_SRC,
  SPY__CALL_EXTRA
};
#define SPY__SQLITE_SCHEMA 7 /* PRAGMA user_version of a SQLite store */
int spy__call_role(const spy__hook *h, int end, uint32_t i);
int spy__hook_calls_extra(int k, char *name, size_t cap, char *type);
void spy__hook_calls_names(spy__buf *b);
void spy__call_kept_name(char *out, size_t cap, const spy__hook *h, int end);
void spy__call_select_sql(spy__buf *b, const spy__hook *h, int end,
                          const char *session, const char *where);
void spy__call_views_sql(spy__buf *b);
/* What both SQL writers use to fill a call's row: hook_calls' columns of
 * schema 4 and 5 come first (SPY__HC_STD of them); a kind's field by
 * name and its first payload field (-1: none); the hook_calls column of
 * a Start's (end 0) or End's field beyond those (-1: none); an action's
 * field i (NULL: none), a string value's bytes (NULL when not a
 * string), the cell of a scalar field of type t (hex receives a
 * payload's id), and whether v is the string s. */
#define SPY__HC_STD 11
int spy__kind_field_ix(const spy_trace_kind *k, const char *name);
int spy__kind_src_ix(const spy_trace_kind *k);
int spy__hook_calls_extra_col(int end, const spy_trace_field *f);
const spy_trace_val *spy__act_field(const spy_trace_action *a, int i);
const char *spy__val_str(const spy_trace_val *v, size_t *n);
spy__cell spy__scalar_cell(uint8_t t, const spy_trace_val *v, char *hex);
int spy__val_is_str(const spy_trace_val *v, const char *s);

/* A hook call whose Start is stored and whose End has not come, as both
 * SQL writers keep it: each embeds one in its own open call beside what
 * only it needs (the batch or transaction that stored the Start, …).
 * The call's strings and its Start extras' text share one block
 * (call_id's), freed by spy__ocall_free. */
#define SPY__CALL_FIELDS 16 /* a Start or End with more keeps its own rows */
#define SPY__START_X 8      /* Start extras an ocall holds */
#define SPY__NHOOKS 8       /* hooks whose calls get rows */
#define SPY__HC_START 11    /* start_seq, end_seq, kept: the next three */
#define SPY__HC_END 12
#define SPY__HC_KEPT 13
#define SPY__HC_MAX 64 /* hook_calls columns at most */
typedef struct spy__ocall {
  const spy__hook *hook;
  uint32_t build;
  int kept; /* 1: the Start has a row of its own */
  int64_t plugin_id, started;
  uint64_t start_seq;
  char *call_id, *plugin, *module; /* one block; NULL: none */
  char input[33];                  /* "" none */
  int nsx;                         /* the Start's extras (kept 0) */
  int8_t sxcol[SPY__START_X];
  spy__cell sx[SPY__START_X]; /* a text's bytes in the block */
} spy__ocall;
/* Where a hook's fields are in its Start and End records, and where each
 * goes in a hook_calls row. */
typedef struct spy__hookcols {
  int call, plugin, plugin_id, subject, src; /* Start; -1 none */
  int end_call, end_src;                     /* End */
  int merge[2]; /* its Starts / Ends may live in hook_calls rows */
  int8_t role[2][SPY__CALL_FIELDS]; /* SPY__CALL_* of each field */
  int8_t col[2][SPY__CALL_FIELDS];  /* an extra's hook_calls column */
} spy__hookcols;
/* The count of hook_calls columns (at most SPY__HC_MAX); types, when not
 * NULL, receives one SPY__COL_INT or SPY__COL_TEXT per column and a NUL. */
int spy__hook_calls_ncols(char *types);
/* Fills c for hook h, whose calls' rows have ncols columns. */
void spy__hookcols_init(spy__hookcols *c, const spy__hook *h, int ncols);
/* The hook (its index in spy__hooks in *ix) whose Start (*end 0) or End
 * kind k is, among the first SPY__NHOOKS; NULL when none. */
const spy__hook *spy__call_hook(const spy_trace_kind *k, int *ix, int *end);
/* Start a of hook h (its call id a string) into o: 1 when the call's row
 * can hold it alone, 0 when it keeps a row of its own, SPY_ENOMEM.
 * text_only: the row's call id, plugin and subject columns take strings
 * only (PostgreSQL's TEXT), so a Start with another value there keeps
 * its row. */
int spy__ocall_start(spy__ocall *o, const spy__hook *h, const spy__hookcols *c,
                     const spy_trace_action *a, int text_only);
/* Copies a call's id, plugin and module (NULL: none), and the text of its
 * Start extras, into o's block. 0 or SPY_ENOMEM. */
int spy__ocall_strs(spy__ocall *o, const char *id, size_t nid, const char *pl,
                    size_t npl, const char *mod, size_t nmod);
/* A call read back from the store: its id, plugin, module (NULL: none)
 * and input payload id (NULL or not 32 characters: none) into o, whose
 * other fields the caller set. 0 or SPY_ENOMEM. */
int spy__ocall_load(spy__ocall *o, const char *id, const char *pl,
                    const char *mod, const char *in);
void spy__ocall_free(spy__ocall *o);
/* Whether End a (its call o's) can live in o's row alone: each of its
 * fields the row has a column for holds what that column holds. */
int spy__call_mergeable(const spy__hookcols *hc, const spy__ocall *o,
                        const spy_trace_action *a);
/* End a's output payload id into out ("" none). */
void spy__call_output(const spy__hookcols *hc, const spy_trace_action *a,
                      char out[33]);
/* The hook_calls row of o in c[ncols], every text a SPY__COL_TEXT cell,
 * ended by `end` (NULL: not ended); with `merged` the End's own fields too
 * (it has no row of its own; hex receives its extras' payload ids). */
void spy__call_cells(const spy__ocall *o, const spy_trace_action *end,
                     const char *output, const spy__hookcols *hc, int merged,
                     const char *session_id, size_t session_n, int ncols,
                     spy__cell *c, char (*hex)[33]);
/* Every index: the questions' and each derived table's generic one
 * (SQLite, !pg: not the hook Starts' by plugin and by module nor the hook
 * Ends' by call, which the hook_calls table's indexes answer). */
void spy__index_sql(const spy__schema *s, spy__buf *b, int pg);

/* PostgreSQL, store schema 6 (spyglass_meta's schema_version; a schema 5
 * store, a table per hook Start and End kind, is still written as it is):
 * hook calls as in SQLite's schema 6, one row per call, the odd Start or
 * End in <kind>_kept, each hook kind's name a view over both. The rows are
 * in the table hook_call_rows (SPY__PG_CALL_ROWS; never updated: a call's
 * row goes in with its End, a Start still open when its batch is sent
 * has its own row in <start>_kept); hook_calls is a view over them and a
 * row (ended_at NULL) for each kept Start whose call has no row: a call
 * that never ended, in a session closed or killed.
 * spy__pg_hook_calls_table_sql is hook_call_rows with BIGINT numbers and
 * its index of kept Starts' rows; spy__pg_call_views_sql those views and
 * hook_calls; spy__pg_views_sql the reference views (merged: schema 6);
 * spy__pg_index_sql the indexes built at close (merged: schema 6's). */
#define SPY__PG_SCHEMA 6
#define SPY__PG_CALL_ROWS "hook_call_rows"
void spy__pg_hook_calls_table_sql(spy__buf *b);
void spy__pg_call_views_sql(spy__buf *b);
void spy__pg_views_sql(spy__buf *b, int merged);
void spy__pg_index_sql(const spy__schema *s, spy__buf *b, int merged);

/* One writer batch of actions as binary records back to back (schema
 * version 2; version 1 stored JSON lines), compressed into one
 * action_batches row whose codec carries SPY__CODEC_RECORDS. From schema
 * version 4 the row holds only the records of the batch's actions that
 * their tables cannot give back exactly (application kinds, inexact
 * rows; often none) while first_seq, last_seq and count describe the
 * whole batch: the writer sets them (spy__batch_mark). Zero-
 * initialise. */
typedef struct spy__abatch {
  spy__buf text, packed;
  void *cctx;
  uint64_t first, last;
  uint32_t n;
} spy__abatch;
void spy__abatch_add(spy__abatch *b, uint64_t seq, const char *rec, size_t n);
/* Compresses the batch into b->packed; returns the codec. */
int spy__abatch_pack(spy__abatch *b);
void spy__abatch_clear(spy__abatch *b);
/* Packs the batch and fills the cells of its action_batches row (valid
 * until the batch changes). Returns 0 or SPY_ENOMEM. */
int spy__abatch_row(spy__abatch *b, const char *session_id, spy__cell c[7]);
void spy__abatch_free(spy__abatch *b);
/* Schema 4: the whole batch's range and action count, written over the
 * cells spy__abatch_row filled from the records it holds. */
typedef struct spy__batch_mark {
  uint64_t first, last;
  uint32_t n;
} spy__batch_mark;
void spy__batch_mark_add(spy__batch_mark *m, uint64_t seq);
void spy__batch_mark_cells(const spy__batch_mark *m, spy__cell c[7]);
/* Whether the SQL writers keep action a's binary record in
 * action_batches (schema 4): an application kind, a kind without a
 * table (root < 0), or rows that are inexact. */
int spy__batch_keeps(const spy__schema *s, int root, const spy_trace_action *a);
/* 1 when the environment has SPY_TRACE_SQL_RECORDS=all: the SQL writers
 * then keep every action's record in action_batches, as schema 3 did
 * (read at open; for tests that make stores of the older layouts). */
int spy__sql_all_records(void);

/* ---- source blobs
 * ------------------------------------------------------------ */
/* Codecs of a stored blob. ZSTD_DELTA: zstd with the payload named by the
 * row's base_source_id as prefix dictionary (schema version 3). */
enum {
  SPY__CODEC_RAW = 0,
  SPY__CODEC_ZSTD = 1,
  SPY__CODEC_ZSTD_DELTA = 2,
  SPY__CODEC_COPY = 3 /* copy/insert delta of the base (src_delta.h, v5) */
};
/* action_batches.codec flag: the batch holds binary records, not JSON
 * lines (the low bits are the codec). */
#define SPY__CODEC_RECORDS 16
/* Compresses p[0..n) into out (reset first) when it pays; returns the
 * codec used. *cctx is the caller's reusable zstd context (NULL at first;
 * release it with spy__src_pack_free). */
int spy__src_pack(spy__buf *out, void **cctx, const char *p, size_t n,
                  int level);
void spy__src_pack_free(void **cctx);
/* Decodes a stored blob into out; a ZSTD_DELTA or COPY blob needs its
 * base's decoded bytes (base, base_n), other codecs ignore them. *dctx
 * is the caller's reusable zstd decompression context (NULL at first;
 * release it with spy__src_unpack_free), or dctx NULL for one just for
 * this call. Returns 0, SPY_EBADVALUE or SPY_ENOMEM. */
int spy__src_unpack(spy__buf *out, void **dctx, int codec, const void *p,
                    size_t n, size_t size, const void *base, size_t base_n);
void spy__src_unpack_free(void **dctx);

/* Longest chain of deltas a writer makes (base of a base of …): the reader
 * decodes at most this many + 1 blobs per payload (3 before schema 5,
 * when every delta was a zstd one; a copy delta decodes at memcpy speed). */
#define SPY__SRC_MAX_DEPTH 12
/* Longest chain a reader follows before calling the store corrupt. */
#define SPY__SRC_READ_DEPTH 16

/* Per-writer packing state of source payloads (src_codec.c): a reusable
 * zstd context, the previously stored payload and the last keyframe, the
 * candidate bases of the next one. */
typedef struct spy__src_packer spy__src_packer;
spy__src_packer *spy__src_packer_new(void);
void spy__src_packer_free(spy__src_packer *k);
/* Forgets the candidate bases: the next payload is stored alone. A
 * writer calls it whenever a row it packed may not reach the store (a
 * failed insert, a dropped or unsent batch). */
void spy__src_packer_reset(spy__src_packer *k);
/* Packs a payload and fills the cells of its sources row (source_id, size,
 * codec, base_source_id, content; valid until the next call); id receives
 * the hex content id. The payload becomes the next one's candidate base.
 * Returns 0 or SPY_ENOMEM. */
int spy__source_row(spy__src_packer *k, const uint64_t hash[2], const char *p,
                    size_t n, char id[33], spy__cell c[5]);

/* Source payloads packed on a thread of their own (src_pipe.c). The sink
 * receives each packed sources row on the writer's thread, in submission
 * order; a negative result means the row did not reach the store. */
typedef struct spy__src_pipe spy__src_pipe;
typedef int (*spy__src_sink)(void *arg, const uint64_t hash[2],
                             const spy__cell c[5]);
/* Whether a writer's packer runs inside the writer thread rather than a
 * thread of its own: on <= 2 usable CPUs (the build keeps one), or as
 * SPY_TRACE_PACK_INLINE says (1 / 0). session.c. */
int spy__trace_pack_inline(void);
/* CPUs this thread may run on. session.c. */
int spy__trace_cpus(void);
/* Starts the packer thread (packs inline when it cannot, or when
 * spy__trace_pack_inline says so). NULL: no memory. */
spy__src_pipe *spy__src_pipe_new(spy__src_sink sink, void *arg);
void spy__src_pipe_free(spy__src_pipe *q);
/* Queues a copy of a new payload (waits while the queue is full) and
 * delivers the rows packed so far. Returns 0 or the first negative sink
 * result or SPY_ENOMEM. */
int spy__src_pipe_submit(spy__src_pipe *q, const uint64_t hash[2],
                         const char *p, size_t n);
/* Waits until every submitted payload is packed and delivered. */
int spy__src_pipe_drain(spy__src_pipe *q);
/* Drains, then restarts the delta chain: the next payload is stored
 * alone. For when rows already delivered may not reach the store (a
 * failed commit, a dropped or unsent batch). */
int spy__src_pipe_reset(spy__src_pipe *q);
/* Time the packer thread has spent packing (0 without a thread). */
uint64_t spy__src_pipe_busy_ns(spy__src_pipe *q);
/* A pipe that packs inline (spy__trace_pack_inline) gets a packer thread
 * while `on` (a thread waits for the trace: the build's core is free) and
 * packs inline again after (drained first). No-op for a pipe that always
 * has its thread, or with one usable CPU. Returns 0 or the first sink
 * error. */
int spy__src_pipe_hurry(spy__src_pipe *q, int on);

/* ---- writers
 * ------------------------------------------------------------------ */
extern const spy_trace_writer_ops spy__writer_jsonl;
extern const spy_trace_writer_ops spy__writer_sqlite;
extern const spy_trace_writer_ops spy__writer_pg;

/* mkdir -p; returns 0 or a negative errno. */
int spy__mkdirs(const char *path);
/* Wall clock µs since the epoch: the platform's clock (platform.h). */
#include "platform/platform.h"
#define spy__now_us spy__wall_us

#endif
