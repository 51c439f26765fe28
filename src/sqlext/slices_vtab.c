/* slices_vtab.c — `spyglass_slices`, the table libspyglass_sqlite adds
 * for recordings whose zones are packed (zone_block, src/record/zblock.h):
 * an eponymous virtual table (no CREATE needed; it reads the zone_block
 * table of the database it is queried in) with slice_data's columns
 *
 *   recording_id, id, ts, dur, track_id, name_id, depth, parent_id, flags
 *
 * A packed recording's `slice` view reads it, so after `.load
 * libspyglass_sqlite` the queries written for rows work unchanged.
 * Constraints recording_id =, track_id = and id = select the blocks read
 * (id: those whose id0..id1 covers it, so a join on id decodes a block or
 * two per lookup, not the recording); rows come in (track_id, ts, depth)
 * order (an ORDER BY of that is consumed).
 * A corrupt block is an error naming it, never a crash (the decoder is
 * fuzzed: fuzz/fuzz_zblock.c). Read-only. */
#include <sqlite3ext.h>
#include <stdlib.h>
#include <string.h>

#include "record/zblock.h"
SQLITE_EXTENSION_INIT3

enum {
  COL_REC,
  COL_ID,
  COL_TS,
  COL_DUR,
  COL_TRACK,
  COL_NAME,
  COL_DEPTH,
  COL_PARENT,
  COL_FLAGS
};

typedef struct vtab {
  sqlite3_vtab base;
  sqlite3 *db;
} vtab;

typedef struct cur {
  sqlite3_vtab_cursor base;
  sqlite3_stmt *st;
  spy_zb_merge m;
  int eof;
  sqlite3_int64 rowid, block;
  int64_t track, rec;
  spy_zb_zone z;
} cur;

static int connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                   sqlite3_vtab **out, char **err) {
  (void)aux, (void)argc, (void)argv, (void)err;
  int rc = sqlite3_declare_vtab(
      db, "CREATE TABLE x(recording_id, id, ts, dur, track_id, name_id, "
          "depth, parent_id, flags)");
  if (rc != SQLITE_OK)
    return rc;
  vtab *v = sqlite3_malloc(sizeof *v);
  if (!v)
    return SQLITE_NOMEM;
  memset(v, 0, sizeof *v);
  v->db = db;
  *out = &v->base;
  return SQLITE_OK;
}

static int disconnect(sqlite3_vtab *v) {
  sqlite3_free(v);
  return SQLITE_OK;
}

/* idxNum bit 1: recording_id = ?, bit 2: track_id = ?, bit 4: id = ?
 * (argv in that order; id is checked again by SQLite: a block holds
 * other ids too) */
static int best_index(sqlite3_vtab *v, sqlite3_index_info *ix) {
  (void)v;
  int rec = -1, trk = -1, id = -1;
  for (int i = 0; i < ix->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &ix->aConstraint[i];
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ)
      continue;
    if (c->iColumn == COL_REC)
      rec = i;
    else if (c->iColumn == COL_TRACK)
      trk = i;
    else if (c->iColumn == COL_ID)
      id = i;
  }
  int n = 0, num = 0;
  if (rec >= 0) {
    ix->aConstraintUsage[rec].argvIndex = ++n;
    ix->aConstraintUsage[rec].omit = 1;
    num |= 1;
  }
  if (trk >= 0) {
    ix->aConstraintUsage[trk].argvIndex = ++n;
    ix->aConstraintUsage[trk].omit = 1;
    num |= 2;
  }
  if (id >= 0) {
    ix->aConstraintUsage[id].argvIndex = ++n;
    num |= 4;
  }
  ix->idxNum = num;
  ix->estimatedCost = id >= 0 ? 1e2 : trk >= 0 ? 1e4 : 1e6;
  ix->estimatedRows = id >= 0 ? 1 : trk >= 0 ? 10000 : 1000000;
  /* our order: track_id, ts, depth (ascending) */
  static const int order[3] = {COL_TRACK, COL_TS, COL_DEPTH};
  int ok = ix->nOrderBy > 0 && ix->nOrderBy <= 3;
  for (int i = 0; ok && i < ix->nOrderBy; i++)
    ok = ix->aOrderBy[i].iColumn == order[i] && !ix->aOrderBy[i].desc;
  ix->orderByConsumed = ok;
  return SQLITE_OK;
}

static int open_cur(sqlite3_vtab *v, sqlite3_vtab_cursor **out) {
  (void)v;
  cur *c = sqlite3_malloc(sizeof *c);
  if (!c)
    return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static void reset(cur *c) {
  sqlite3_finalize(c->st);
  c->st = NULL;
  spy__zb_merge_free(&c->m);
}

static int close_cur(sqlite3_vtab_cursor *b) {
  cur *c = (cur *)b;
  reset(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int fetch(void *user, int64_t *track, int64_t *ts0, const void **blob,
                 size_t *len) {
  cur *c = user;
  int rc = sqlite3_step(c->st);
  if (rc == SQLITE_DONE)
    return 0;
  if (rc != SQLITE_ROW)
    return -1;
  c->rec = sqlite3_column_int64(c->st, 0);
  *track = sqlite3_column_int64(c->st, 1);
  *ts0 = sqlite3_column_int64(c->st, 2);
  *blob = sqlite3_column_blob(c->st, 3);
  *len = *blob ? (size_t)sqlite3_column_bytes(c->st, 3) : 0;
  c->block = sqlite3_column_int64(c->st, 4);
  return 1;
}

static int step(cur *c) {
  int rc = spy__zb_merge_next(&c->m, &c->track, &c->z);
  if (rc == 1) {
    c->rowid++;
    return SQLITE_OK;
  }
  c->eof = 1;
  if (rc == 0)
    return SQLITE_OK;
  sqlite3_vtab *v = c->base.pVtab;
  sqlite3_free(v->zErrMsg);
  v->zErrMsg = rc == -1
                   ? sqlite3_mprintf("spyglass_slices: %s",
                                     sqlite3_errmsg(((vtab *)v)->db))
                   : sqlite3_mprintf("spyglass_slices: zone_block row %lld is "
                                     "corrupt",
                                     (long long)c->block);
  return SQLITE_ERROR;
}

static int filter(sqlite3_vtab_cursor *b, int num, const char *s, int argc,
                  sqlite3_value **argv) {
  (void)s, (void)argc;
  cur *c = (cur *)b;
  vtab *v = (vtab *)b->pVtab;
  reset(c);
  c->eof = 0;
  c->rowid = 0;
  char q[384];
  sqlite3_snprintf(sizeof q, q,
                   "SELECT recording_id, track_id, ts0, data, rowid FROM "
                   "zone_block WHERE 1%s%s%s ORDER BY recording_id, "
                   "track_id, ts0",
                   num & 1 ? " AND recording_id = ?1" : "",
                   num & 2 ? " AND track_id = ?2" : "",
                   num & 4 ? " AND id0 <= ?3 AND id1 >= ?3" : "");
  int rc = sqlite3_prepare_v2(v->db, q, -1, &c->st, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_free(b->pVtab->zErrMsg);
    b->pVtab->zErrMsg = sqlite3_mprintf(
        "spyglass_slices: %s (not a packed recording?)", sqlite3_errmsg(v->db));
    return rc;
  }
  for (int i = 0, k = 0; i < 3; i++)
    if (num & (1 << i))
      sqlite3_bind_value(c->st, i + 1, argv[k++]);
  spy__zb_merge_init(&c->m, fetch, c);
  return step(c);
}

static int next(sqlite3_vtab_cursor *b) { return step((cur *)b); }
static int eof(sqlite3_vtab_cursor *b) { return ((cur *)b)->eof; }

static int column(sqlite3_vtab_cursor *b, sqlite3_context *ctx, int col) {
  cur *c = (cur *)b;
  const spy_zb_zone *z = &c->z;
  switch (col) {
  case COL_REC: sqlite3_result_int64(ctx, c->rec); break;
  case COL_ID: sqlite3_result_int64(ctx, z->id); break;
  case COL_TS: sqlite3_result_int64(ctx, z->ts); break;
  case COL_DUR: sqlite3_result_int64(ctx, z->dur); break;
  case COL_TRACK: sqlite3_result_int64(ctx, c->track); break;
  case COL_NAME:
    if (z->name_id)
      sqlite3_result_int64(ctx, z->name_id);
    else
      sqlite3_result_null(ctx);
    break;
  case COL_DEPTH: sqlite3_result_int64(ctx, z->depth); break;
  case COL_PARENT:
    if (z->parent)
      sqlite3_result_int64(ctx, z->parent);
    else
      sqlite3_result_null(ctx);
    break;
  default: sqlite3_result_int64(ctx, z->flags); break;
  }
  return SQLITE_OK;
}

static int rowid(sqlite3_vtab_cursor *b, sqlite3_int64 *out) {
  *out = ((cur *)b)->rowid;
  return SQLITE_OK;
}

static const sqlite3_module module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: nothing to CREATE */
    .xConnect = connect,
    .xBestIndex = best_index,
    .xDisconnect = disconnect,
    .xDestroy = disconnect,
    .xOpen = open_cur,
    .xClose = close_cur,
    .xFilter = filter,
    .xNext = next,
    .xEof = eof,
    .xColumn = column,
    .xRowid = rowid,
};

int spy__slices_vtab_register(sqlite3 *db);
int spy__slices_vtab_register(sqlite3 *db) {
  return sqlite3_create_module(db, "spyglass_slices", &module, NULL);
}
