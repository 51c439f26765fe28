/* writer_sqlite.c — the SQLite writer: one trace.db per session directory,
 * WAL journal, one transaction per batch, a prepared insert per table of
 * the schema derived from the catalog (an application kind's tables are
 * created when its first action arrives), one action_batches row per
 * batch (its seq range and count, and the binary records of the actions
 * the tables cannot give back exactly: application kinds, rows whose
 * JSON lists changed bytes), the rowid range of the session's rows in
 * each table (session_rows, for the reader), the index by plugin built at
 * close. A hook call is one hook_calls row (store schema 6, see store.h):
 * its Start and End have no rows of their own when the row gives them
 * back (a third of the rows schema 5 wrote per call); the odd ones go to
 * <kind>_kept, and each hook kind's name is a view over both. Rows are
 * gathered per table (sources rows too) and inserted 64 at a time (one
 * multi-row INSERT: a cursor opened and a statement ended per 64 rows,
 * not per row), what is left before each COMMIT; a parameter that already
 * holds its value (a NULL, the same integer, the session id, a hook's or
 * an interned plugin's name) is not bound again. Source payloads go to the
 * sources table once, zstd-compressed, most as deltas of the payload stored
 * before them (src_codec.c); a row that may not have reached the database (a
 * failed insert or commit) is never used as a base. A process killed mid-build
 * leaves a database that opens cleanly and holds every batch committed
 * before the kill. The sources key (schema 7: a unique index,
 * sources_id) is built at close of a store this writer creates, not
 * updated per commit (key_sources()); a store that already holds sources
 * keeps it. A database written by another schema version is refused
 * (PRAGMA user_version), but for schema 4, 5 and 6 stores, which are
 * migrated in place.
 *
 * Loss accounting: a batch is one transaction, stored whole or not at
 * all. When any statement of it fails (a full disk: SPY_ENOSPC) it is
 * rolled back and every action it held is counted as lost, so that the
 * sessions row, the summary and what the file holds agree. The final
 * counts must reach the sessions row even then: the writer holds a small
 * reserve file (trace.db-reserve, allocated at open) and deletes it just
 * before writing them. A clean close checkpoints the WAL and lets SQLite
 * remove trace.db-wal and -shm (most of the WAL copied by a second
 * connection on a thread of its own while the indexes are built). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#define RESERVE_BYTES (256 << 10) /* room for the final sessions row */

/* The rowids each session's rows of a table lie between: a reader of one
 * session of a store that holds several reads that range by rowid
 * instead of scanning the whole table. Written once, at a clean close
 * (an upsert per table per commit cost 9 k instructions each): a session
 * without rows here (killed, still being written, reopened by
 * spy_trace_recover, or by an older writer) is read by scanning. A table
 * the session has no row in has no row here. */
#define SESSION_ROWS_SQL                                                       \
  "CREATE TABLE IF NOT EXISTS session_rows(session INTEGER NOT NULL,tbl "      \
  "TEXT NOT NULL,lo INTEGER NOT NULL,hi INTEGER NOT NULL,PRIMARY "             \
  "KEY(session,tbl));\n"

#include "store.h"

/* A hook call whose Start is stored. Its hook_calls row is gathered at
 * its End, or inserted at the commit of a batch that ends with it open
 * (so the batch's Start is in the file; the End then updates the row),
 * or at close when it never ends. The generations undo what a rolled
 * back batch did: a Start it stored is forgotten, an End it stored is
 * taken back, a row it inserted is not there. */
typedef struct ocall {
  spy__ocall call;
  uint32_t start_gen, end_gen; /* end_gen 0: open */
  uint32_t row_gen;            /* the transaction that inserted the row */
  int pl_interned;             /* call.plugin is one of w->plugins */
  int64_t rowid; /* its hook_calls row when inserted before its End */
} ocall;

/* A text cell whose bytes stay put for the writer's life (the session
 * id, a hook's name, an interned plugin name): gathered by pointer, not
 * copied, and not bound again to a parameter that already holds it. */
#define COL_STEXT 's'
#define NPLUGINS 32

/* Rows of one derived table gathered for multi-row INSERTs: MULTI rows
 * go in with one statement (one cursor opened, one halt), not MULTI; a
 * commit sends what is left in runs of 32, 16, 8, 4, 2 and 1 (64 rows
 * per statement, not 16: 6,598 -> 3,555 steps, 237 -> 227 M
 * instructions on the 2,000-module tree). */
#define MULTI 64
#define NMULTI 6 /* statements of 64, 32, 16, 8, 4 and 2 rows */
typedef struct pend {
  sqlite3_stmt *one; /* the table's one-row INSERT */
  const char *sql;   /* … its text (the multi-row ones extend it) */
  const char *name;  /* the table's name (its session_rows key) */
  char *kept;        /* a hook End's: <end>_kept (name points here) */
  int ncols;
  int64_t lo, hi;   /* rowids the open transaction inserted (hi 0: none) */
  int64_t clo, chi; /* … and the committed ones of the session */
  sqlite3_stmt *multi[NMULTI];  /* multi[k]: MULTI >> k rows; on first use */
  spy__cell *bound[NMULTI + 1]; /* what multi[k] (one: [NMULTI]) holds */
  spy__cell *cells; /* MULTI rows; a text or blob cell's bytes are at
                       offset i of text (i < 0: a NULL pointer) */
  spy__buf text;
  int n;
} pend;

typedef struct sqlw {
  sqlite3 *db;
  int prepared; /* sq_setup done: the store is set up for the session */
  char *cwd, *dir;
  sqlite3_stmt *ins[SPY__T_COUNT];
  sqlite3_stmt **gins; /* per derived table */
  pend *pend;          /* per derived table */
  int ngins;
  pend hpend; /* hook_calls */
  pend spend; /* sources */
  sqlite3_stmt *finish;
  sqlite3_stmt *hcall;  /* INSERT INTO hook_calls */
  sqlite3_stmt *ranges; /* upsert of a session_rows row */
  sqlite3_stmt *txn[2]; /* BEGIN, COMMIT: prepared once, not parsed per
                           batch (sqlite3_exec compiles its text each time) */
  spy__hookcols hcols[SPY__NHOOKS];
  int hc_ncols;       /* hook_calls columns: SPY__HC_STD, ours, the extras */
  sqlite3_stmt *hend; /* UPDATE of a row inserted before its End */
  int8_t updcol[SPY__HC_MAX]; /* … the columns it sets */
  int nupd;
  char *plugins[NPLUGINS]; /* plugin names, interned (STEXT cells) */
  int nplugins;
  ocall *oc; /* open calls, in Start order */
  size_t noc, capoc;
  uint32_t *ocix; /* hash of (build, call_id) → oc index + 1 */
  size_t ixcap;   /* a power of two, > 2 noc */
  uint32_t gen;   /* the open transaction's generation */
  spy__schema schema;
  spy__buf rec;         /* one action's binary record */
  spy__abatch batch;    /* records the tables cannot hold exactly */
  spy__batch_mark mark; /* the whole batch: its action_batches row */
  int all_records;      /* SPY_TRACE_SQL_RECORDS=all: as schema 3 did */
  spy__src_pipe *pipe;  /* packs sources on its own thread */
  spy__buf sql;
  char *session_id;
  size_t session_n;
  char *reserve;         /* path of the reserve file, or NULL */
  spy__lost_src lostsrc; /* payloads of failed transactions */
  int in_txn;
  int reopened;     /* by spy_trace_recover: no session_rows (see there) */
  int unkeyed;      /* sources has no key yet: built at close */
  int txn_failed;   /* a statement of the open transaction failed */
  uint32_t txn_n;   /* actions in the open transaction */
  uint64_t actions; /* actions committed */
  _Atomic uint64_t lost;
  void (*report)(void *, int, const char *);
  void *report_ctx;
} sqlw;

/* The SPY_E* code of the connection's last error: a full disk is
 * SPY_ENOSPC, an OS error its errno, anything else SPY_EIO. */
static int sq_err(sqlw *w) {
  if (!w->db)
    return SPY_EIO;
  int ext = sqlite3_extended_errcode(w->db);
  if ((ext & 0xff) == SQLITE_FULL)
    return SPY_ENOSPC;
  if ((ext & 0xff) == SQLITE_NOMEM)
    return SPY_ENOMEM;
  int e = sqlite3_system_errno(w->db);
  if ((ext & 0xff) == SQLITE_IOERR && e > 0)
    return -e;
  return SPY_EIO;
}

static int fail(sqlw *w, const char *what) {
  char msg[512];
  int err = sq_err(w);
  const char *nl = strchr(what, '\n'); /* a script: its first statement */
  int n = nl ? (int)(nl - what) : (int)strlen(what);
  snprintf(msg, sizeof msg, "sqlite: %.*s%s: %.250s", n < 200 ? n : 200, what,
           nl ? " …" : "", w->db ? sqlite3_errmsg(w->db) : "cannot open");
  if (w->in_txn)
    w->txn_failed = 1;
  if (w->report)
    w->report(w->report_ctx, err, msg);
  return err;
}

static int exec(sqlw *w, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(w->db, sql, NULL, NULL, &err) != SQLITE_OK) {
    sqlite3_free(err);
    return fail(w, sql);
  }
  return 0;
}

static int prepare(sqlw *w, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v3(w->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
      SQLITE_OK)
    return fail(w, sql);
  return 0;
}

/* The first column of a one-row query as an integer: 0 without a row, or
 * an SPY_E* code. */
static int64_t query_int(sqlw *w, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(w->db, sql, -1, &st, NULL) != SQLITE_OK)
    return fail(w, sql);
  int step = sqlite3_step(st);
  int64_t v = step == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return step == SQLITE_ROW || step == SQLITE_DONE ? v : fail(w, sql);
}

/* The sources table's key by content id: its primary key up to schema 6
 * (sqlite_autoindex_sources_1), the unique index sources_id from 7. A
 * store this writer creates gets it at close, not row by row: its keys
 * are content hashes, so every commit's new payloads dirtied leaves all
 * over the index (87 k -> 60 k pwrite64 for the 20,000-module tree's
 * build, writer instructions on the 2,000-module tree 507 -> 467 M with
 * the key built at close); the session stores each payload once (its own dedup
 * set), so nothing needs the key before then. A store that already holds
 * sources keeps it while written (INSERT OR IGNORE needs it: another session's
 * payloads are not in this one's set). Two sessions that filled an
 * unkeyed store at once may have stored a payload twice: the copies are
 * the same bytes under the same id, and all but the first go. */
#define SOURCES_KEYED_SQL                                                      \
  "SELECT count(*) FROM pragma_index_list('sources') WHERE \"unique\""
#define SOURCES_KEY_SQL                                                        \
  "CREATE UNIQUE INDEX IF NOT EXISTS sources_id ON sources(source_id)"
static int key_sources(sqlw *w) {
  if (sqlite3_exec(w->db, SOURCES_KEY_SQL, NULL, NULL, NULL) == SQLITE_OK)
    return 0;
  if (sqlite3_errcode(w->db) != SQLITE_CONSTRAINT)
    return fail(w, SOURCES_KEY_SQL);
  int rc = exec(w, "DELETE FROM sources WHERE rowid NOT IN (SELECT "
                   "min(rowid) FROM sources GROUP BY source_id)");
  return rc ? rc : exec(w, SOURCES_KEY_SQL);
}

/* BEGIN (0) or COMMIT (1), by its prepared statement. */
static int txn(sqlw *w, int commit) {
  sqlite3_stmt *st = w->txn[commit];
  if (!st)
    return exec(w, commit ? "COMMIT" : "BEGIN");
  int rc = sqlite3_step(st) == SQLITE_DONE
               ? 0
               : fail(w, commit ? "COMMIT" : "BEGIN");
  sqlite3_reset(st);
  return rc;
}

/* Reads the store's schema version; refuses a newer one. */
int spy__sqlite_check_version(sqlite3 *db);
int spy__sqlite_check_version(sqlite3 *db) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
    return SPY_EIO;
  int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  return v > SPY__SQLITE_SCHEMA ? SPY_EBADSCHEMA : v;
}

static int64_t sq_close(void *state);
static int run(sqlw *w, sqlite3_stmt *st, const spy__cell *c, int n);
static int run_cached(sqlw *w, sqlite3_stmt *st, const spy__cell *c, int n,
                      spy__cell *bound);
static int run_one(sqlw *w, pend *p, const spy__cell *c);
static int gather(sqlw *w, pend *p, const spy__cell *c, int n);
static void note_rows(sqlw *w, pend *p, int rows);

/* A packed sources row, on the writer thread: gathered like a derived
 * table's, 64 to an INSERT OR IGNORE (a statement per row cost ~3 k
 * instructions more each on the 2,000-module tree). */
static int source_sink(void *arg, const uint64_t hash[2],
                       const spy__cell c[5]) {
  (void)hash;
  sqlw *w = arg;
  return gather(w, &w->spend, c, 5);
}

/* The hook whose Start (*end 0) or End kind k is, or NULL. */
static const spy__hook *call_hook(const spy_trace_kind *k, int *end) {
  for (const spy__hook *h = spy__hooks; h->hook; h++)
    if (h->start == k || h->end == k) {
      *end = h->end == k;
      return h;
    }
  return NULL;
}

/* Creates derived tables [from, schema.n) and prepares their inserts (a
 * hook End's table is <end>_kept: see spy__end_views_sql). */
static int add_tables(sqlw *w, int from) {
  int n = w->schema.n;
  sqlite3_stmt **g = realloc(w->gins, (size_t)n * sizeof *g);
  if (!g)
    return SPY_ENOMEM;
  w->gins = g;
  pend *pd = realloc(w->pend, (size_t)n * sizeof *pd);
  if (!pd)
    return SPY_ENOMEM;
  w->pend = pd;
  for (int t = from; t < n; t++) {
    const spy__gtable *gt = &w->schema.t[t];
    int end = 0;
    const spy__hook *h = gt->depth == 0 ? call_hook(gt->rec, &end) : NULL;
    w->gins[t] = NULL;
    w->pend[t] = (pend){0};
    w->pend[t].name = gt->name;
    if (h) { /* the End's view is over this table and hook_calls */
      char kept[160];
      spy__call_kept_name(kept, sizeof kept, h, end);
      if (!(w->pend[t].kept = strdup(kept)))
        return SPY_ENOMEM;
      w->pend[t].name = w->pend[t].kept;
    }
    w->sql.len = 0;
    spy__create_table_sql(&w->sql, w->pend[t].name, gt->cols, gt->types, NULL,
                          0);
    spy__buf_putc(&w->sql, 0);
    int rc = w->sql.err ? w->sql.err : exec(w, w->sql.p);
    if (rc)
      return rc;
    w->sql.len = 0;
    spy__insert_sql(&w->sql, "INSERT INTO", w->pend[t].name, gt->cols,
                    gt->ncols);
    spy__buf_putc(&w->sql, 0);
    if ((rc = w->sql.err ? w->sql.err : prepare(w, w->sql.p, &w->gins[t])))
      return rc;
    w->pend[t].one = w->gins[t];
    w->pend[t].sql = sqlite3_sql(w->gins[t]);
    w->pend[t].ncols = w->schema.t[t].ncols;
    w->ngins = t + 1;
  }
  return 0;
}

/* ---- hook_calls, filled as calls end --------------------------------------
 */

static void hook_cols(sqlw *w) {
  int i = 0;
  char col[128], type;
  w->hc_ncols = spy__hook_calls_ncols(NULL);
  /* what an End updates in a row inserted before it */
  static const int8_t endcols[] = {8, 10, SPY__HC_END, SPY__HC_KEPT};
  w->nupd = 0;
  for (size_t k = 0; k < sizeof endcols; k++)
    w->updcol[w->nupd++] = endcols[k];
  for (int k = SPY__HC_KEPT + 1; k < w->hc_ncols; k++)
    if (spy__hook_calls_extra(k - SPY__HC_STD, col, sizeof col, &type) &&
        strncmp(col, "end_", 4) == 0)
      w->updcol[w->nupd++] = (int8_t)k;
  for (const spy__hook *h = spy__hooks; h->hook && i < SPY__NHOOKS; h++, i++)
    spy__hookcols_init(&w->hcols[i], h, w->hc_ncols);
}

static uint64_t call_hash(uint32_t build, const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull ^ build;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

/* Rebuilds the hash over oc (after a compaction or to grow). */
static int ocix_rebuild(sqlw *w, size_t want) {
  size_t cap = w->ixcap ? w->ixcap : 64;
  while (cap < 2 * want + 2)
    cap *= 2;
  if (cap != w->ixcap) {
    uint32_t *n = realloc(w->ocix, cap * sizeof *n);
    if (!n)
      return SPY_ENOMEM;
    w->ocix = n;
    w->ixcap = cap;
  }
  memset(w->ocix, 0, w->ixcap * sizeof *w->ocix);
  for (size_t i = 0; i < w->noc; i++) {
    const spy__ocall *o = &w->oc[i].call;
    size_t j =
        call_hash(o->build, o->call_id, strlen(o->call_id)) & (w->ixcap - 1);
    while (w->ocix[j])
      j = (j + 1) & (w->ixcap - 1);
    w->ocix[j] = (uint32_t)i + 1;
  }
  return 0;
}

/* The interned copy of plugin name s[0..n), or NULL when there are
 * NPLUGINS already (or no memory): the call keeps its own copy. */
static char *plugin_intern(sqlw *w, const char *s, size_t n) {
  for (int i = 0; i < w->nplugins; i++)
    if (strlen(w->plugins[i]) == n && memcmp(w->plugins[i], s, n) == 0)
      return w->plugins[i];
  if (w->nplugins == NPLUGINS)
    return NULL;
  char *c = malloc(n + 1);
  if (!c)
    return NULL;
  memcpy(c, s, n);
  c[n] = 0;
  return w->plugins[w->nplugins++] = c;
}

/* Room for one more open call in w->oc. 0 or SPY_ENOMEM. */
static int ocall_room(sqlw *w) {
  if (w->noc < w->capoc)
    return 0;
  size_t cap = w->capoc ? 2 * w->capoc : 64;
  ocall *n = realloc(w->oc, cap * sizeof *n);
  if (!n)
    return SPY_ENOMEM;
  w->oc = n;
  w->capoc = cap;
  return 0;
}

/* Keeps a reloaded open call (w->oc[w->noc], room made by ocall_room,
 * its fields set but its strings): see spy__ocall_load. */
static int ocall_keep(sqlw *w, ocall *o, const char *cid, const char *pl,
                      const char *mod, const char *in) {
  if (spy__ocall_load(&o->call, cid, pl, mod, in) < 0)
    return SPY_ENOMEM;
  w->noc++;
  return 0;
}

/* A Start: remembered until its End. Returns 1 when its call's row will
 * hold it (it has no row of its own). */
static int call_start(sqlw *w, const spy__hook *h, const spy__hookcols *c,
                      const spy_trace_action *a) {
  const spy_trace_val *id = spy__act_field(a, c->call);
  if (!id || id->type != SPY_TV_STR)
    return 0;
  if (ocall_room(w) < 0)
    return SPY_ENOMEM;
  if (2 * (w->noc + 1) + 2 > w->ixcap && ocix_rebuild(w, w->noc + 1) < 0)
    return SPY_ENOMEM;
  ocall *o = &w->oc[w->noc];
  *o = (ocall){.start_gen = w->gen};
  int fits = spy__ocall_start(&o->call, h, c, a, 0);
  if (fits < 0)
    return fits;
  const char *pl = o->call.plugin;
  char *ip = pl ? plugin_intern(w, pl, strlen(pl)) : NULL;
  if (ip) { /* else the call's own copy */
    o->call.plugin = ip;
    o->pl_interned = 1;
  }
  size_t j = call_hash(a->build, id->u.s, id->n) & (w->ixcap - 1);
  while (w->ocix[j])
    j = (j + 1) & (w->ixcap - 1);
  w->ocix[j] = (uint32_t)++w->noc;
  return fits;
}

/* The hook_calls row of o in c[hc_ncols] (spy__call_cells), its texts
 * that stay put (the session id, the hook's name, an interned plugin)
 * STEXT cells. */
static void call_cells(sqlw *w, const ocall *o, const spy_trace_action *end,
                       const char *output, const spy__hookcols *hc, int merged,
                       spy__cell *c, char (*hex)[33]) {
  spy__call_cells(&o->call, end, output, hc, merged, w->session_id,
                  w->session_n, w->hc_ncols, c, hex);
  c[0].kind = c[3].kind = COL_STEXT;
  if (o->call.plugin && o->pl_interned)
    c[4].kind = COL_STEXT;
}

/* The hook_calls row of o, gathered (end NULL: never ended). */
static int call_row(sqlw *w, const ocall *o, const spy_trace_action *end,
                    const char *output, const spy__hookcols *hc, int merged) {
  spy__cell c[SPY__HC_MAX];
  char hex[SPY__CALL_FIELDS][33];
  call_cells(w, o, end, output, hc, merged, c, hex);
  return gather(w, &w->hpend, c, w->hc_ncols);
}

/* An End: the row of its open Start (the view's join: an End without a
 * stored Start has none). Returns 1 when that row holds it. */
static int call_end(sqlw *w, const spy__hook *h, const spy__hookcols *c,
                    const spy_trace_action *a) {
  const spy_trace_val *id = spy__act_field(a, c->end_call);
  if (!id || id->type != SPY_TV_STR || !w->ixcap)
    return 0;
  size_t j = call_hash(a->build, id->u.s, id->n) & (w->ixcap - 1);
  for (; w->ocix[j]; j = (j + 1) & (w->ixcap - 1)) {
    ocall *o = &w->oc[w->ocix[j] - 1];
    const spy__ocall *oc = &o->call;
    if (o->end_gen || oc->hook != h || oc->build != a->build ||
        strlen(oc->call_id) != id->n || memcmp(oc->call_id, id->u.s, id->n))
      continue;
    char out[33];
    spy__call_output(c, a, out);
    o->end_gen = w->gen;
    int merged = spy__call_mergeable(c, oc, a);
    if (!o->rowid) {
      int rc = call_row(w, o, a, out, c, merged);
      return rc < 0 ? rc : merged;
    }
    /* its row went in at an earlier commit: the End's columns */
    spy__cell row[SPY__HC_MAX], set[SPY__HC_MAX + 1];
    char hex[SPY__CALL_FIELDS][33];
    call_cells(w, o, a, out, c, merged, row, hex);
    for (int k = 0; k < w->nupd; k++)
      set[k] = row[w->updcol[k]];
    set[w->nupd] = (spy__cell){SPY__COL_INT, o->rowid, NULL, 0};
    int rc = run(w, w->hend, set, w->nupd + 1);
    return rc < 0 ? rc : merged;
  }
  return 0;
}

static int hook_action(sqlw *w, const spy_trace_action *a) {
  if (!a->kind || !w->hcall ||
      (a->kind->role != SPY_ROLE_HOOK_START &&
       a->kind->role != SPY_ROLE_HOOK_END))
    return 0;
  int i, end;
  const spy__hook *h = spy__call_hook(a->kind, &i, &end);
  if (!h)
    return 0;
  return end ? call_end(w, h, &w->hcols[i], a)
             : call_start(w, h, &w->hcols[i], a);
}

/* Before a COMMIT: the open calls whose Starts only their rows hold get
 * those rows now, so the batch's Starts are in the file. */
static int insert_open(sqlw *w) {
  int rc = 0;
  for (size_t i = 0; i < w->noc && rc == 0; i++) {
    ocall *o = &w->oc[i];
    if (o->end_gen || o->rowid || o->call.kept)
      continue;
    spy__cell c[SPY__HC_MAX];
    call_cells(w, o, NULL, NULL, NULL, 0, c, NULL);
    if ((rc = run_one(w, &w->hpend, c)) == 0) {
      o->rowid = sqlite3_last_insert_rowid(w->db);
      o->row_gen = w->gen;
      note_rows(w, &w->hpend, 1);
    }
  }
  return rc;
}

/* Schema 6: the calls of the session whose rows a commit inserted open
 * (their Starts have no rows of their own) are open again. */
static int reload_rows(sqlw *w) {
  sqlite3_stmt *st;
  int rc = prepare(w,
                   "SELECT rowid, hook_type, build_id, call_id, plugin_name, "
                   "plugin_id, module_id, started_at, input_source_id, "
                   "start_seq FROM hook_calls WHERE session_id=?1 AND "
                   "start_seq IS NOT NULL AND kept&1=0 AND ended_at IS NULL "
                   "AND end_seq IS NULL ORDER BY rowid",
                   &st);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, w->session_id, -1, SQLITE_STATIC);
  int step;
  while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *hook = (const char *)sqlite3_column_text(st, 1);
    const char *cid = (const char *)sqlite3_column_text(st, 3);
    const spy__hook *h = spy__hooks;
    while (h->hook && (!hook || strcmp(h->hook, hook) != 0))
      h++;
    if (!h->hook || !cid)
      continue;
    if ((rc = ocall_room(w)) < 0)
      break;
    const char *pl = (const char *)sqlite3_column_text(st, 4);
    const char *mod = (const char *)sqlite3_column_text(st, 6);
    const char *in = (const char *)sqlite3_column_text(st, 8);
    ocall *o = &w->oc[w->noc];
    *o = (ocall){.call = {.hook = h,
                          .build = (uint32_t)sqlite3_column_int64(st, 2),
                          .plugin_id = sqlite3_column_int64(st, 5),
                          .started = sqlite3_column_int64(st, 7),
                          .start_seq = (uint64_t)sqlite3_column_int64(st, 9)},
                 .rowid = sqlite3_column_int64(st, 0)};
    if ((rc = ocall_keep(w, o, cid, pl, mod, in)) < 0)
      break;
  }
  if (rc == 0 && step != SQLITE_DONE)
    rc = fail(w, "reading the open hook calls");
  sqlite3_finalize(st);
  return rc;
}

/* A session reopened (spy_trace_recover after a kill): the Starts its
 * committed batches stored without a hook_calls row are open again, so
 * the Ends recovered after them still find them. */
static int reload_calls(sqlw *w) {
  int rc = 0;
  for (const spy__hook *h = spy__hooks; h->hook && rc == 0; h++) {
    int si = spy__kind_src_ix(h->start);
    w->sql.len = 0;
    spy__buf_puts(&w->sql, "SELECT s.build_id, s.call_id, s.plugin_name, "
                           "s.plugin_id, ");
    if (strcmp(h->subject, "_") != 0) {
      spy__buf_puts(&w->sql, "s.");
      spy__buf_puts(&w->sql, h->subject);
    } else
      spy__buf_puts(&w->sql, "NULL");
    spy__buf_puts(&w->sql, ", s.ts_us, ");
    if (si >= 0) {
      spy__buf_puts(&w->sql, "s.");
      spy__buf_puts(&w->sql, h->start->fields[si].name);
      spy__buf_puts(&w->sql, "_source_id");
    } else
      spy__buf_puts(&w->sql, "NULL");
    char kept[160];
    spy__call_kept_name(kept, sizeof kept, h, 0);
    spy__buf_puts(&w->sql, " FROM ");
    spy__buf_puts(&w->sql, kept);
    spy__buf_puts(&w->sql, " s WHERE s.session=?1 AND NOT EXISTS (SELECT 1 "
                           "FROM hook_calls c WHERE c.session_id=?2 AND "
                           "c.build_id=s.build_id AND c.call_id=s.call_id "
                           "AND c.hook_type=?3) ORDER BY s.rowid");
    spy__buf_putc(&w->sql, 0);
    if (w->sql.err)
      return w->sql.err;
    sqlite3_stmt *st;
    if ((rc = prepare(w, w->sql.p, &st)))
      return rc;
    sqlite3_bind_int64(st, 1, w->schema.session);
    sqlite3_bind_text(st, 2, w->session_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, h->hook, -1, SQLITE_STATIC);
    int step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
      const char *cid = (const char *)sqlite3_column_text(st, 1);
      if (!cid)
        continue;
      if ((rc = ocall_room(w)) < 0)
        break;
      const char *pl = (const char *)sqlite3_column_text(st, 2);
      const char *mod = (const char *)sqlite3_column_text(st, 4);
      const char *in = (const char *)sqlite3_column_text(st, 6);
      ocall *o = &w->oc[w->noc];
      /* start_gen 0: a rollback now does not forget it */
      *o = (ocall){.call = {.hook = h,
                            .build = (uint32_t)sqlite3_column_int64(st, 0),
                            .kept = 1,
                            .plugin_id = sqlite3_column_int64(st, 3),
                            .started = sqlite3_column_int64(st, 5)}};
      if ((rc = ocall_keep(w, o, cid, pl, mod, in)) < 0)
        break;
    }
    if (rc == 0 && step != SQLITE_DONE)
      rc = fail(w, "reading the open hook calls");
    sqlite3_finalize(st);
  }
  if (rc == 0)
    rc = reload_rows(w);
  return rc == 0 && w->noc ? ocix_rebuild(w, w->noc) : rc;
}

/* The transaction ended (ok: committed): ended calls are done; a rolled
 * back one's Starts are forgotten and its Ends taken back. */
static void calls_txn_end(sqlw *w, int ok) {
  size_t k = 0;
  for (size_t i = 0; i < w->noc; i++) {
    ocall *o = &w->oc[i];
    int drop = ok ? o->end_gen != 0 : o->start_gen == w->gen;
    if (!ok && o->end_gen == w->gen)
      o->end_gen = 0;
    if (!ok && o->rowid && o->row_gen == w->gen)
      o->rowid = 0; /* the row it inserted is gone */
    if (drop)
      spy__ocall_free(&o->call);
    else
      w->oc[k++] = *o;
  }
  w->noc = k;
  w->gen++;
  if (w->ixcap)
    ocix_rebuild(w, w->noc); /* shrinks nothing: cannot fail */
}

/* Schema 4 and 5 stores become 6 in place, in the setup's transaction:
 * each hook End's table is renamed <end>_kept (its rows stay; the view
 * named after the End reads them and the Ends kept in hook_calls rows),
 * hook_calls gains its new columns (NULL in the old rows, whose Ends are
 * all in the kept tables), and the live view is made again over the End
 * views. */
static int migrate(sqlw *w) {
  sqlite3_stmt *st;
  int rc = prepare(w, "SELECT type FROM sqlite_master WHERE name=?1", &st);
  int dropped = 0;
  for (int i = 0; spy__hooks[i / 2].hook && rc == 0; i++) {
    const spy__hook *h = &spy__hooks[i / 2];
    const char *name = (i & 1 ? h->end : h->start)->snake;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    const char *type = sqlite3_step(st) == SQLITE_ROW
                           ? (const char *)sqlite3_column_text(st, 0)
                           : NULL;
    int table = type && strcmp(type, "table") == 0;
    sqlite3_reset(st);
    if (!table)
      continue;
    if (!dropped++ && (rc = exec(w, "DROP VIEW IF EXISTS hook_calls_live")))
      break;
    char kept[160];
    spy__call_kept_name(kept, sizeof kept, h, i & 1);
    w->sql.len = 0;
    spy__buf_puts(&w->sql, "ALTER TABLE ");
    spy__buf_puts(&w->sql, name);
    spy__buf_puts(&w->sql, " RENAME TO ");
    spy__buf_puts(&w->sql, kept);
    spy__buf_putc(&w->sql, 0);
    rc = w->sql.err ? w->sql.err : exec(w, w->sql.p);
  }
  sqlite3_finalize(st);
  if (rc)
    return rc;
  if ((rc = prepare(w,
                    "SELECT count(*), sum(name=?1) FROM "
                    "pragma_table_info('hook_calls')",
                    &st)))
    return rc;
  char name[128], type;
  for (int k = 0; rc == 0 && spy__hook_calls_extra(k, name, sizeof name, &type);
       k++) {
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    int cols = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    int has = step == SQLITE_ROW ? sqlite3_column_int(st, 1) : 0;
    sqlite3_reset(st);
    if (!cols || has) /* no table yet (the setup makes it whole) */
      continue;
    w->sql.len = 0;
    spy__buf_puts(&w->sql, "ALTER TABLE hook_calls ADD COLUMN ");
    spy__buf_puts(&w->sql, name);
    spy__buf_puts(&w->sql, type == SPY__COL_INT ? " INTEGER" : " TEXT");
    spy__buf_putc(&w->sql, 0);
    rc = w->sql.err ? w->sql.err : exec(w, w->sql.p);
  }
  sqlite3_finalize(st);
  return rc;
}

/* INSERT INTO hook_calls(<every column>) VALUES(?,…). */
static int hook_calls_insert(sqlw *w) {
  spy__buf cols = {0};
  spy__hook_calls_names(&cols);
  spy__buf_putc(&cols, 0);
  w->sql.len = 0;
  spy__insert_sql(&w->sql, "INSERT INTO", "hook_calls", cols.p ? cols.p : "",
                  (size_t)w->hc_ncols);
  spy__buf_putc(&w->sql, 0);
  int rc =
      cols.err || w->sql.err ? SPY_ENOMEM : prepare(w, w->sql.p, &w->hcall);
  spy__buf_free(&cols);
  return rc;
}

/* UPDATE hook_calls SET <an End's columns> WHERE rowid=?. */
static int hook_calls_update(sqlw *w) {
  w->sql.len = 0;
  spy__buf_puts(&w->sql, "UPDATE hook_calls SET ");
  char name[128], type;
  static const char *const std[] = {
      "session_id",  "build_id",        "call_id",         "hook_type",
      "plugin_name", "plugin_id",       "module_id",       "started_at",
      "ended_at",    "input_source_id", "output_source_id"};
  for (int k = 0; k < w->nupd; k++) {
    int col = w->updcol[k];
    if (col < SPY__HC_STD)
      snprintf(name, sizeof name, "%s", std[col]);
    else
      spy__hook_calls_extra(col - SPY__HC_STD, name, sizeof name, &type);
    spy__buf_puts(&w->sql, k ? "," : "");
    spy__buf_puts(&w->sql, name);
    spy__buf_puts(&w->sql, "=?");
  }
  spy__buf_puts(&w->sql, " WHERE rowid=?");
  spy__buf_putc(&w->sql, 0);
  return w->sql.err ? SPY_ENOMEM : prepare(w, w->sql.p, &w->hend);
}

static int sq_setup(sqlw *w, int v);

static int sq_open(void **state, const spy_trace_writer_cfg *cfg) {
  sqlw *w = calloc(1, sizeof *w);
  if (!w)
    return SPY_ENOMEM;
  *state = w;
  w->report = cfg->report;
  w->report_ctx = cfg->report_ctx;
  w->session_id = strdup(cfg->session_id);
  w->session_n = w->session_id ? strlen(w->session_id) : 0;
  w->pipe = spy__src_pipe_new(source_sink, w);
  if (!w->session_id || !w->pipe)
    return SPY_ENOMEM;
  int rc = spy__schema_init(&w->schema);
  if (rc)
    return rc;
  w->all_records = spy__sql_all_records();
  char path[4096];
  snprintf(path, sizeof path, "%s/trace.db", cfg->dir);
  /* NOMUTEX: only the writer thread uses the connection (the packer
   * thread hands its rows back to it), so the per-call connection mutex
   * — two locked instructions per bind and step — buys nothing */
  if (sqlite3_open_v2(path, &w->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                          SQLITE_OPEN_NOMUTEX,
                      NULL) != SQLITE_OK)
    return fail(w, path);
  sqlite3_busy_timeout(w->db, 5000);
  sqlite3_db_config(w->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
  int v = spy__sqlite_check_version(w->db);
  if (v < 0) {
    if (v == SPY_EBADSCHEMA && w->report)
      w->report(w->report_ctx, v, "sqlite: the store has a newer schema");
    return v;
  }
  /* 5 only added a codec of sources rows (copy deltas) to 4, 6 moved
   * the hook Ends into hook_calls rows (migrate()), and 7 may leave a
   * store's sources unkeyed while written (key_sources()): a schema 4, 5
   * or 6 store is migrated in place (with the setup below, which sets
   * user_version with its CREATE … IF NOT EXISTS, in one transaction);
   * older builds then refuse it as newer, as they must once it may hold
   * rows they cannot read. Older stores' tables differ
   * (test/test_store_v4.c) */
  if (v > 0 && v != SPY__SQLITE_SCHEMA && (v < 4 || v > 6)) {
    if (w->report) {
      char msg[256];
      snprintf(msg, sizeof msg,
               "sqlite: the store has schema version %d, which this build "
               "(schema %d) reads but does not add to; write the trace to a "
               "new directory (a new --out, or spy_trace_desc.dir)",
               v, SPY__SQLITE_SCHEMA);
      w->report(w->report_ctx, SPY_EBADSCHEMA, msg);
    }
    return SPY_EBADSCHEMA;
  }
  /* the rest (the schema, the session's row) is sq_setup's */
  w->cwd = strdup(cfg->cwd ? cfg->cwd : "");
  w->dir = strdup(cfg->dir);
  if (!w->cwd || !w->dir)
    return SPY_ENOMEM;
  /* the set-up runs here, not as the session's prepare on the writer's
   * thread: the build may fill the disk before that thread gets to it
   * (trace_enospc: the store then had no tables; the reserve file for the
   * final counts is made here too). A set-up that failed part-way leaves
   * an open transaction: rolled back; open fails with its error. */
  if ((rc = sq_setup(w, v)) < 0)
    sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL); /* if one is open */
  return rc;
}

/* The store's set-up: pragmas, tables, views, statements and the
 * session's row, run by sq_open. */
static int sq_setup(sqlw *w, int v) {
  char path[4096];
  int rc;
  /* WAL without fsync: a killed process loses nothing it committed (the
   * bytes are in the OS), an OS crash or power cut may lose the trace —
   * the price of never making the traced build wait for the disk. A
   * checkpoint (on this thread, not the build's) once the WAL holds 256
   * MiB of pages, and one at close: every commit appends the pages it
   * touched whole, so a long trace of small batches would otherwise grow
   * the WAL without bound. 4 KiB pages, not 16: each commit writes the
   * partly filled last page of every table it added to again, and the
   * WAL checksums all of it (90 -> 58 M instructions of 180 commits on
   * the 2,000-module tree). The sources key, whose leaves were
   * most frames on the 20,000-module tree, is built at close of a store
   * this writer creates (key_sources()). */
  if ((rc = exec(w,
                 "PRAGMA page_size=4096; "
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; "
                 "PRAGMA cache_size=-32768; PRAGMA wal_autocheckpoint=65536;")))
    return rc;
  char ver[64];
  snprintf(ver, sizeof ver, "PRAGMA user_version=%d;", SPY__SQLITE_SCHEMA);
  hook_cols(w);
  if ((rc = exec(w, "BEGIN")) ||
      (v && v < SPY__SQLITE_SCHEMA && (rc = migrate(w))))
    return rc;
  w->sql.len = 0;
  spy__own_tables_sql(&w->sql, 0);
  spy__buf_puts(&w->sql, ver);
  spy__buf_putc(&w->sql, 0);
  if ((rc = w->sql.err ? w->sql.err : exec(w, w->sql.p)) ||
      (rc = add_tables(w, 0)))
    return rc;
  int64_t keyed = query_int(w, SOURCES_KEYED_SQL), filled = 0;
  if (keyed < 0 ||
      (!keyed && (filled = query_int(w, "SELECT 1 FROM sources LIMIT 1")) < 0))
    return (int)(keyed < 0 ? keyed : filled);
  if (!keyed && filled && (rc = key_sources(w))) /* a killed session's */
    return rc;
  w->unkeyed = !keyed && !filled;
  w->sql.len = 0;
  spy__call_views_sql(&w->sql);
  spy__views_sql(&w->sql, 0);
  spy__hook_calls_table_sql(&w->sql);
  spy__buf_puts(&w->sql, SESSION_ROWS_SQL);
  spy__buf_putc(&w->sql, 0);
  if ((rc = w->sql.err ? w->sql.err : exec(w, w->sql.p)) ||
      (rc = exec(w, "COMMIT")))
    return rc;
  for (int t = 0; t < SPY__T_COUNT; t++) {
    const spy__table *tb = &spy__tables[t];
    w->sql.len = 0;
    spy__insert_sql(&w->sql,
                    t == SPY__T_SOURCES ? "INSERT OR IGNORE INTO"
                                        : "INSERT OR REPLACE INTO",
                    tb->name, tb->cols, strlen(tb->types));
    spy__buf_putc(&w->sql, 0);
    if (w->sql.err)
      return w->sql.err;
    if ((rc = prepare(w, w->sql.p, &w->ins[t])))
      return rc;
  }
  if ((rc = prepare(w,
                    "UPDATE sessions SET actions=?2, actions_lost=?3 WHERE "
                    "session_id=?1",
                    &w->finish)) ||
      (rc = hook_calls_insert(w)) || (rc = hook_calls_update(w)) ||
      (rc = prepare(w,
                    "INSERT INTO session_rows(session,tbl,lo,hi) "
                    "VALUES(?1,?2,?3,?4) ON CONFLICT(session,tbl) DO UPDATE "
                    "SET lo=min(lo,excluded.lo),hi=max(hi,excluded.hi)",
                    &w->ranges)) ||
      (rc = prepare(w, "BEGIN", &w->txn[0])) ||
      (rc = prepare(w, "COMMIT", &w->txn[1])))
    return rc;
  w->hpend.one = w->hcall;
  w->hpend.sql = sqlite3_sql(w->hcall);
  w->hpend.name = "hook_calls";
  w->hpend.ncols = w->hc_ncols;
  w->spend.one = w->ins[SPY__T_SOURCES];
  w->spend.sql = sqlite3_sql(w->spend.one);
  w->spend.name = "sources";
  w->spend.ncols = 5;
  w->gen = 1; /* end_gen 0 means open */
  /* the session row exists from the start; its key is in every row */
  sqlite3_stmt *s;
  if ((rc = prepare(w,
                    "INSERT INTO sessions(session_id,cwd,created_at,"
                    "schema_version) VALUES(?,?,?,?) ON CONFLICT(session_id) "
                    "DO NOTHING",
                    &s)))
    return rc;
  sqlite3_bind_text(s, 1, w->session_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, w->cwd, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 3, (sqlite3_int64)spy__wall_us());
  sqlite3_bind_int(s, 4, SPY__SQLITE_SCHEMA);
  /* actions / actions_lost stay NULL until a clean close sets them */
  int st = sqlite3_step(s);
  sqlite3_finalize(s);
  if (st != SQLITE_DONE)
    return fail(w, "insert session");
  int reopened = sqlite3_changes(w->db) == 0;
  w->reopened = reopened;
  /* its key (a session reopened by spy_trace_recover keeps its row) */
  if ((rc = prepare(w, "SELECT session FROM sessions WHERE session_id=?1", &s)))
    return rc;
  sqlite3_bind_text(s, 1, w->session_id, -1, SQLITE_STATIC);
  st = sqlite3_step(s);
  w->schema.session = st == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (st != SQLITE_ROW)
    return fail(w, "find session");
  if (reopened && (rc = reload_calls(w)) < 0)
    return rc;
  if (reopened) { /* ranges of a closed writer no longer cover its rows */
    if ((rc = prepare(w, "DELETE FROM session_rows WHERE session=?1", &s)))
      return rc;
    sqlite3_bind_int64(s, 1, w->schema.session);
    st = sqlite3_step(s);
    sqlite3_finalize(s);
    if (st != SQLITE_DONE)
      return fail(w, "delete session_rows");
  }
  /* best effort: without it a full disk may keep the counts out */
  snprintf(path, sizeof path, "%s/trace.db-reserve", w->dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (posix_fallocate(fd, 0, RESERVE_BYTES) == 0)
      w->reserve = strdup(path);
    else
      unlink(path);
    close(fd);
  }
  w->prepared = 1;
  return 0;
}

static int begin(sqlw *w) {
  if (w->in_txn)
    return 0;
  int rc = txn(w, 0);
  if (rc == 0) {
    w->in_txn = 1;
    w->txn_failed = 0;
    w->txn_n = 0;
  }
  return rc;
}

static void bind(sqlite3_stmt *st, int i, const spy__cell *c) {
  switch (c->kind) {
  case SPY__COL_INT: sqlite3_bind_int64(st, i, c->i); break;
  case SPY__COL_TEXT:
  case COL_STEXT:
    sqlite3_bind_text(st, i, c->s, (int)c->n, SQLITE_STATIC);
    break;
  case SPY__COL_BLOB:
    sqlite3_bind_blob(st, i, c->s, (int)c->n, SQLITE_STATIC);
    break;
  default: sqlite3_bind_null(st, i);
  }
}

/* run() for a statement whose parameters' values are kept in bound[n]
 * (kind 0xff: none yet): a parameter that already holds its cell's value
 * — a NULL, the same integer, the same stable text — is not bound again
 * (a statement keeps its bindings across resets): the session id, the
 * build, the hook's name, the NULLs of columns other hooks have — 342 k
 * -> 236 k binds, 18 M fewer writer instructions on the 2,000-module
 * tree. */
static int run_cached(sqlw *w, sqlite3_stmt *st, const spy__cell *c, int n,
                      spy__cell *bound) {
  for (int i = 0; i < n; i++) {
    spy__cell *b = &bound[i];
    if (b->kind == c[i].kind &&
        (c[i].kind == 0 || (c[i].kind == SPY__COL_INT && b->i == c[i].i) ||
         (c[i].kind == COL_STEXT && b->s == c[i].s && b->n == c[i].n)))
      continue;
    *b = c[i];
    bind(st, i + 1, &c[i]);
  }
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : fail(w, "insert");
}

static int run(sqlw *w, sqlite3_stmt *st, const spy__cell *c, int n) {
  for (int i = 0; i < n; i++)
    bind(st, i + 1, &c[i]);
  /* every parameter is bound on every row: no clear_bindings needed */
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? 0 : fail(w, "insert");
}

/* One statement inserted the last `rows` rowids of the connection (one
 * writer at a time: consecutive ones). */
static void note_rows(sqlw *w, pend *p, int rows) {
  int64_t hi = sqlite3_last_insert_rowid(w->db), lo = hi - rows + 1;
  if (!p->hi || lo < p->lo)
    p->lo = lo;
  if (hi > p->hi)
    p->hi = hi;
}

/* A transaction ended: its rows' rowids join the session's (ok) or are
 * forgotten with them. */
static void range_end(pend *p, int ok) {
  if (ok && p->hi) {
    if (!p->chi || p->lo < p->clo)
      p->clo = p->lo;
    if (p->hi > p->chi)
      p->chi = p->hi;
  }
  p->lo = p->hi = 0;
}

static void ranges_end(sqlw *w, int ok) {
  for (int t = 0; t < w->ngins; t++)
    range_end(&w->pend[t], ok);
  range_end(&w->hpend, ok);
}

/* At a clean close: the session's rowid ranges, in one transaction. */
static int save_range(sqlw *w, pend *p) {
  if (!p->chi)
    return 0;
  spy__cell c[4] = {{SPY__COL_INT, w->schema.session, NULL, 0},
                    {SPY__COL_TEXT, 0, p->name, strlen(p->name)},
                    {SPY__COL_INT, p->clo, NULL, 0},
                    {SPY__COL_INT, p->chi, NULL, 0}};
  return run(w, w->ranges, c, 4);
}

static void save_ranges(sqlw *w) {
  if (w->reopened || begin(w) < 0)
    return;
  int rc = 0;
  for (int t = 0; t < w->ngins && rc == 0; t++)
    rc = save_range(w, &w->pend[t]);
  if (rc == 0)
    rc = save_range(w, &w->hpend);
  w->txn_n = 0; /* no actions: nothing to count */
  if (rc < 0 || w->txn_failed || txn(w, 1) < 0) {
    if (!sqlite3_get_autocommit(w->db))
      sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
  }
  w->in_txn = 0;
  w->txn_failed = 0;
}

/* The cells of pending row k of p, their bytes pointed at again. */
static spy__cell *pend_row(pend *p, int k, int ncols) {
  spy__cell *c = p->cells + (size_t)k * (size_t)ncols;
  for (int i = 0; i < ncols; i++)
    if (c[i].kind == SPY__COL_TEXT || c[i].kind == SPY__COL_BLOB)
      c[i].s = c[i].i < 0 ? NULL : p->text.p ? p->text.p + c[i].i : "";
  return c;
}

/* A statement's kept parameter values, none yet. */
static spy__cell *bound_new(int n) {
  spy__cell *b = malloc((size_t)n * sizeof *b);
  for (int i = 0; b && i < n; i++)
    b[i].kind = 0xff;
  return b;
}

/* One row by p's one-row INSERT (every use of that statement goes
 * through here: its kept values must be what it holds). */
static int run_one(sqlw *w, pend *p, const spy__cell *c) {
  if (!p->bound[NMULTI] && !(p->bound[NMULTI] = bound_new(p->ncols)))
    return SPY_ENOMEM;
  return run_cached(w, p->one, c, p->ncols, p->bound[NMULTI]);
}

/* Inserts table t's pending rows, as few statements as the sizes at
 * hand allow (one when MULTI are pending). */
static int flush_table(sqlw *w, pend *p) {
  int ncols = p->ncols, rc = 0, done = 0;
  for (int k = 0; k < p->n; k++) /* one row's cells after another */
    pend_row(p, k, ncols);
  for (int m = 0; m < NMULTI && rc == 0; m++) {
    int rows = MULTI >> m;
    if (p->n - done < rows)
      continue;
    if (!p->multi[m]) {
      w->sql.len = 0;
      spy__buf_puts(&w->sql, p->sql);
      for (int k = 1; k < rows; k++) {
        spy__buf_puts(&w->sql, ",(");
        for (int i = 0; i < ncols; i++)
          spy__buf_puts(&w->sql, i ? ",?" : "?");
        spy__buf_putc(&w->sql, ')');
      }
      spy__buf_putc(&w->sql, 0);
      if ((rc = w->sql.err ? w->sql.err : prepare(w, w->sql.p, &p->multi[m])))
        break;
    }
    if (!p->bound[m] && !(p->bound[m] = bound_new(rows * ncols))) {
      rc = SPY_ENOMEM;
      break;
    }
    while (rc == 0 && p->n - done >= rows) {
      rc = run_cached(w, p->multi[m], p->cells + (size_t)done * (size_t)ncols,
                      rows * ncols, p->bound[m]);
      if (rc == 0)
        note_rows(w, p, rows);
      done += rows;
    }
  }
  while (rc == 0 && done < p->n) {
    rc = run_one(w, p, p->cells + (size_t)done * (size_t)ncols);
    if (rc == 0)
      note_rows(w, p, 1);
    done++;
  }
  p->n = 0;
  p->text.len = 0;
  return rc;
}

/* Every derived table's pending rows go in (before a COMMIT). */
static int flush_rows(sqlw *w) {
  int rc = 0;
  for (int t = 0; t < w->ngins; t++)
    if (w->pend[t].n) {
      int r = flush_table(w, &w->pend[t]);
      if (rc == 0)
        rc = r;
    }
  pend *own[2] = {&w->hpend, &w->spend};
  for (int k = 0; k < 2; k++)
    if (own[k]->n) {
      int r = flush_table(w, own[k]);
      if (rc == 0)
        rc = r;
    }
  return rc;
}

/* A rolled back transaction's pending rows are gone with it. */
static void drop_rows(sqlw *w) {
  for (int t = 0; t < w->ngins; t++) {
    w->pend[t].n = 0;
    w->pend[t].text.len = 0;
  }
  w->hpend.n = 0;
  w->hpend.text.len = 0;
  w->spend.n = 0;
  w->spend.text.len = 0;
  ranges_end(w, 0);
}

/* A row of derived table `table`: copied to its pending rows (the cells
 * are valid during the call only), inserted MULTI at a time. */
static int gather(sqlw *w, pend *p, const spy__cell *c, int n) {
  if (!p->cells &&
      !(p->cells = calloc((size_t)MULTI * (size_t)n, sizeof *p->cells)))
    return SPY_ENOMEM;
  spy__cell *d = p->cells + (size_t)p->n * (size_t)n;
  for (int i = 0; i < n; i++) {
    d[i] = c[i]; /* a COL_STEXT keeps its pointer */
    if (c[i].kind == SPY__COL_TEXT || c[i].kind == SPY__COL_BLOB) {
      d[i].i = c[i].s ? (int64_t)p->text.len : -1;
      if (c[i].s)
        spy__buf_put(&p->text, c[i].s, c[i].n);
      d[i].s = NULL;
    }
  }
  if (p->text.err) {
    p->text.err = 0;
    return SPY_ENOMEM;
  }
  return ++p->n == MULTI ? flush_table(w, p) : 0;
}

static int sink(void *arg, int table, const spy__cell *c, int n) {
  return gather(arg, &((sqlw *)arg)->pend[table], c, n);
}

static int sq_source(void *state, const uint64_t hash[2], const char *p,
                     size_t n) {
  sqlw *w = state;
  int rc = begin(w);
  if (rc == 0)
    spy__lost_src_note(&w->lostsrc, hash);
  return rc ? rc : spy__src_pipe_submit(w->pipe, hash, p, n);
}

static int sq_action(void *state, const spy_trace_record *r) {
  sqlw *w = state;
  const spy_trace_action *a = r->action;
  /* a payload a failed transaction took with it is stored again */
  int rc = spy__lost_src_resend(&w->lostsrc, &a->fields, sq_source, w);
  if (rc == 0)
    rc = begin(w);
  int root = -1;
  w->schema.inexact = 0;
  if (rc == 0 && a->kind) {
    int fresh, from = w->schema.n;
    root = spy__schema_root(&w->schema, a->kind, &fresh);
    if (root < -1)
      rc = root;
    else if (fresh && root >= 0)
      rc = add_tables(w, from);
    else if (fresh && w->report)
      w->report(w->report_ctx, SPY_EINVAL,
                "sqlite: an action kind whose names cannot be SQL tables is "
                "kept in action_batches only");
    /* a Start or End its call's hook_calls row holds has no row of its
     * own */
    int merged = hook_action(w, a);
    if (merged < 0)
      rc = merged;
    if (rc == 0 && !merged)
      rc = spy__schema_rows(&w->schema, root, a, sink, w);
  }
  /* the binary record only when the tables cannot give the action back */
  if (rc == 0) {
    spy__batch_mark_add(&w->mark, a->seq);
    if (w->all_records || spy__batch_keeps(&w->schema, root, a)) {
      w->rec.len = 0;
      if ((rc = spy__trace_record_put(&w->rec, a)) == 0) {
        spy__abatch_add(&w->batch, a->seq, w->rec.p, w->rec.len);
        rc = w->batch.text.err;
      }
    }
  }
  if (w->in_txn) {
    w->txn_n++; /* stored or lost with its transaction */
    if (rc < 0)
      w->txn_failed = 1;
  } else
    atomic_fetch_add(&w->lost, 1);
  return rc;
}

static int sq_commit(void *state) {
  sqlw *w = state;
  /* every payload the batch's actions name goes in with them, and every
   * row still gathered */
  int rc = spy__src_pipe_drain(w->pipe);
  if (w->in_txn) {
    int r = flush_rows(w);
    if (rc == 0)
      rc = r;
    if (rc == 0 && !w->txn_failed)
      rc = insert_open(w);
  }
  if (w->mark.n && w->in_txn && rc == 0 && !w->txn_failed) {
    spy__cell c[7];
    rc = spy__abatch_row(&w->batch, w->session_id, c);
    spy__batch_mark_cells(&w->mark, c);
    if (rc == 0)
      rc = run(w, w->ins[SPY__T_BATCHES], c, 7);
  }
  spy__abatch_clear(&w->batch);
  w->mark = (spy__batch_mark){0};
  if (!w->in_txn)
    return rc;
  if (rc == 0 && !w->txn_failed)
    rc = txn(w, 1);
  if (rc < 0 || w->txn_failed) {
    /* all or nothing: whatever failed, none of the batch is kept */
    if (!sqlite3_get_autocommit(w->db))
      sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    drop_rows(w);
    atomic_fetch_add(&w->lost, w->txn_n);
    spy__src_pipe_reset(w->pipe); /* its sources are gone too */
    int r = spy__lost_src_fail(&w->lostsrc);
    if (rc == 0)
      rc = r < 0 ? r : SPY_EIO;
    calls_txn_end(w, 0);
  } else {
    w->actions += w->txn_n;
    spy__lost_src_commit(&w->lostsrc);
    calls_txn_end(w, 1);
    ranges_end(w, 1);
  }
  w->in_txn = 0;
  w->txn_n = 0;
  w->txn_failed = 0;
  return rc;
}

static uint64_t sq_busy(void *state) {
  return spy__src_pipe_busy_ns(((sqlw *)state)->pipe);
}

static uint64_t sq_lost(void *state) {
  return atomic_load(&((sqlw *)state)->lost);
}

/* At close: the calls that never ended get their rows (NULL end), as the
 * view's LEFT JOIN gives them. */
static void open_calls(sqlw *w) {
  if (!w->noc || begin(w) < 0)
    return;
  for (size_t i = 0; i < w->noc; i++)
    if (!w->oc[i].end_gen && !w->oc[i].rowid)
      call_row(w, &w->oc[i], NULL, NULL, NULL, 0);
  w->txn_n = 0; /* no actions: nothing to count */
  flush_rows(w);
  if (w->txn_failed || txn(w, 1) < 0) {
    if (!sqlite3_get_autocommit(w->db))
      sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    ranges_end(w, 0);
  } else
    ranges_end(w, 1);
  w->in_txn = 0;
  w->txn_failed = 0;
}

/* A pend's multi-row statements and buffers (not its one-row INSERT). */
static void pend_free(pend *p) {
  for (int m = 0; m < NMULTI; m++)
    sqlite3_finalize(p->multi[m]);
  for (int m = 0; m <= NMULTI; m++)
    free(p->bound[m]);
  free(p->cells);
  free(p->kept);
  spy__buf_free(&p->text);
}

/* At close, while this connection builds the indexes (CPU: sorting) the
 * build is over and the other core is free: a second connection copies
 * the WAL's frames committed so far into trace.db (a PASSIVE checkpoint:
 * a checkpointer may run beside the one writer), then, while the sources
 * key is built, the other indexes' pages, so the checkpoint of the last
 * close has only the key's pages left to copy (the close on the
 * 20,000-module tree: 255-264 -> 211-220 ms wall, medians of 5). Without
 * synchronous=OFF on that connection its checkpoint would fsync the WAL
 * and the file, as the writer never does. Best effort: when it
 * cannot open or start, that last checkpoint copies everything as
 * before. The sorts themselves stay on this connection: PRAGMA threads=2
 * (Debian's SQLite has up to 8 worker threads) sorts in workers only once
 * the keys outgrow the cache, and with a smaller cache to make it do so
 * hook_calls_plugin took 128 -> 155-180 ms, not less. */
typedef struct ckpt {
  pthread_t th;
  char *path;
  int started;
} ckpt;

static void *ckpt_main(void *arg) {
  ckpt *c = arg;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(c->path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    /* not the last connection, but never a checkpoint of its own at close */
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    /* no fsync, as the writer's connection (sq_open); and a connection
     * knows the file is in WAL mode once it has read it */
    if (sqlite3_exec(db, "PRAGMA synchronous=OFF; PRAGMA schema_version", NULL,
                     NULL, NULL) == SQLITE_OK)
      sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
                                NULL);
  }
  sqlite3_close(db);
  return NULL;
}

static void ckpt_start(sqlw *w, ckpt *c) {
  const char *f = sqlite3_db_filename(w->db, "main");
  c->started = 0;
  if (!f || !*f || !(c->path = strdup(f)))
    return;
  if (pthread_create(&c->th, NULL, ckpt_main, c) == 0)
    c->started = 1;
  else {
    free(c->path);
    c->path = NULL;
  }
}

static void ckpt_join(ckpt *c) {
  if (c->started)
    pthread_join(c->th, NULL);
  free(c->path);
  c->started = 0;
  c->path = NULL;
}

static int64_t sq_close(void *state) {
  sqlw *w = state;
  if (!w)
    return 0;
  ckpt ck = {0};
  if (w->prepared) { /* not after a failed open */
    sq_commit(w);
    /* the counts first, in the room the reserve held */
    if (w->reserve)
      unlink(w->reserve);
    spy__cell c[3] = {{SPY__COL_TEXT, 0, w->session_id, strlen(w->session_id)},
                      {SPY__COL_INT, (int64_t)w->actions, NULL, 0},
                      {SPY__COL_INT, (int64_t)atomic_load(&w->lost), NULL, 0}};
    run(w, w->finish, c, 3);
    open_calls(w); /* before the indexes: no index update per row */
    save_ranges(w);
    ckpt_start(w, &ck);
    /* indexes are built once at the end, not updated per insert */
    w->sql.len = 0;
    spy__index_sql(&w->schema, &w->sql, 0);
    spy__hook_calls_index_sql(&w->sql);
    spy__buf_putc(&w->sql, 0);
    if (!w->sql.err && exec(w, w->sql.p) < 0 && !sqlite3_get_autocommit(w->db))
      sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    /* the largest index's pages are copied while the sources key is built */
    ckpt_join(&ck);
    if (w->unkeyed)
      ckpt_start(w, &ck);
    if (w->unkeyed && key_sources(w) < 0 && !sqlite3_get_autocommit(w->db))
      sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
    /* the last connection to close checkpoints and removes the WAL and
     * shared-memory files (unless another connection still reads) */
    sqlite3_db_config(w->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL);
    ckpt_join(&ck);
  }
  for (int t = 0; t < SPY__T_COUNT; t++)
    sqlite3_finalize(w->ins[t]);
  for (int t = 0; t < w->ngins; t++) {
    sqlite3_finalize(w->gins[t]);
    pend_free(&w->pend[t]);
  }
  free(w->gins);
  free(w->pend);
  pend_free(&w->hpend);
  pend_free(&w->spend);
  for (int i = 0; i < w->nplugins; i++)
    free(w->plugins[i]);
  sqlite3_finalize(w->finish);
  sqlite3_finalize(w->hcall);
  sqlite3_finalize(w->hend);
  sqlite3_finalize(w->ranges);
  sqlite3_finalize(w->txn[0]);
  sqlite3_finalize(w->txn[1]);
  for (size_t i = 0; i < w->noc; i++)
    spy__ocall_free(&w->oc[i].call);
  free(w->oc);
  free(w->ocix);
  if (w->db)
    sqlite3_close(w->db);
  int64_t lost = (int64_t)atomic_load(&w->lost);
  spy__schema_free(&w->schema);
  spy__buf_free(&w->rec);
  spy__abatch_free(&w->batch);
  spy__src_pipe_free(w->pipe);
  spy__buf_free(&w->sql);
  if (w->reserve)
    unlink(w->reserve); /* a half-open writer */
  free(w->reserve);
  free(w->cwd);
  free(w->dir);
  spy__lost_src_free(&w->lostsrc);
  free(w->session_id);
  free(w);
  return lost;
}

/* A thread waits for the trace: pack on a second core meanwhile. */
static void sq_hurry(void *state, int on) {
  spy__src_pipe_hurry(((sqlw *)state)->pipe, on);
}

const spy_trace_writer_ops spy__writer_sqlite = {
    .name = "sqlite",
    .open = sq_open,
    .source = sq_source,
    .action = sq_action,
    .commit = sq_commit,
    .close = sq_close,
    .lost = sq_lost,
    .busy_ns = sq_busy,
    .flags = SPY_TRACE_WRITER_RECORDS | SPY_TRACE_WRITER_MKDIR,
    .hurry = sq_hurry};
