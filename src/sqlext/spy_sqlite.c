/* spy_sqlite.c — libspyglass_sqlite.so, a loadable SQLite extension for
 * trace stores (`.load libspyglass_sqlite` in the sqlite3 shell, or
 * sqlite3_load_extension). It adds one SQL function:
 *
 *   spy_source(id)  the decoded bytes of the payload whose content id
 *                   (sources.source_id, 32 hex digits) is id, as TEXT;
 *                   a row stored as a delta (codec 2, zstd with the base
 *                   as prefix; codec 3, copies of the base and literals,
 *                   src/store/src_delta.h) is decoded over its
 *                   base_source_id chain (at most 16 deep). NULL for a
 *                   NULL id; an error for an id not in sources, a broken
 *                   chain or a corrupt blob.
 *
 * so that `SELECT module_id, spy_source(output_source_id) FROM hook_calls`
 * works in the tools users already have. Reads the sources table of the
 * database the function is called on, through SQLite's own API table
 * (sqlite3ext.h), and decodes with libzstd (one decompression context per
 * call, for the whole chain). Thread-safe as SQLite is: no state outside
 * the call. */
#include <sqlite3ext.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "store/src_delta.h"
SQLITE_EXTENSION_INIT1

/* Codecs of a sources row (the store's schema versions 3 and 5). */
enum { CODEC_RAW = 0, CODEC_ZSTD = 1, CODEC_ZSTD_DELTA = 2, CODEC_COPY = 3 };
enum { MAX_DEPTH = 16 };
#define MAX_SIZE ((sqlite3_int64)1 << 31)

typedef struct blob {
  void *z;
  int nz, codec;
  sqlite3_int64 size;
  char id[33], base[33];
} blob;

static void blob_free(blob *b) {
  sqlite3_free(b->z);
  b->z = NULL;
}

/* The sources row `id` into b. 0, 1 not found, -1 error (msg set). */
static int fetch(sqlite3 *db, sqlite3_stmt *st, const char *id, blob *b,
                 char *msg, size_t cap) {
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE)
    return 1;
  if (rc != SQLITE_ROW) {
    sqlite3_snprintf((int)cap, msg, "spy_source: %s", sqlite3_errmsg(db));
    return -1;
  }
  memset(b, 0, sizeof *b);
  sqlite3_snprintf(sizeof b->id, b->id, "%s", id);
  b->size = sqlite3_column_int64(st, 0);
  b->codec = sqlite3_column_int(st, 1);
  b->nz = sqlite3_column_bytes(st, 2);
  const void *z = sqlite3_column_blob(st, 2);
  b->z = sqlite3_malloc(b->nz ? b->nz : 1);
  if (!b->z) {
    sqlite3_snprintf((int)cap, msg, "spy_source: out of memory");
    return -1;
  }
  if (b->nz)
    memcpy(b->z, z, (size_t)b->nz);
  const unsigned char *base = sqlite3_column_text(st, 3);
  if (base && sqlite3_column_bytes(st, 3) == 32)
    memcpy(b->base, base, 33);
  if (b->size < 0 || b->size > MAX_SIZE) {
    sqlite3_snprintf((int)cap, msg, "spy_source: source %s: bad size", id);
    return -1;
  }
  return 0;
}

/* Decodes b over base (NULL unless a delta) into a new buffer *out; *dctx
 * is the call's zstd context. */
static int unpack(void **dctx, const blob *b, const char *base, size_t nbase,
                  char **out, size_t *nout) {
  *out = sqlite3_malloc64((sqlite3_uint64)b->size + 1);
  if (!*out)
    return -1;
  if (b->codec == CODEC_RAW) {
    if (b->nz != b->size && b->size != 0)
      return -1;
    memcpy(*out, b->z, (size_t)b->nz);
    *nout = (size_t)b->nz;
    return 0;
  }
  if (b->codec == CODEC_COPY) {
    if (!base || spy__delta_decode(dctx, b->z, (size_t)b->nz, base, nbase, *out,
                                   (size_t)b->size) < 0)
      return -1;
    *nout = (size_t)b->size;
    return 0;
  }
  if (b->codec != CODEC_ZSTD && b->codec != CODEC_ZSTD_DELTA)
    return -1;
  if (!*dctx && !(*dctx = ZSTD_createDCtx()))
    return -1;
  ZSTD_DCtx *d = *dctx;
  size_t r = 0;
  if (b->codec == CODEC_ZSTD_DELTA)
    r = ZSTD_DCtx_refPrefix(d, base, nbase);
  if (!ZSTD_isError(r))
    r = ZSTD_decompressDCtx(d, *out, (size_t)b->size + 1, b->z, (size_t)b->nz);
  if (ZSTD_isError(r)) /* a prefix left referenced would meet the next */
    ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
  if (ZSTD_isError(r) || r != (size_t)b->size)
    return -1;
  *nout = r;
  return 0;
}

static void spy_source(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const char *id = (const char *)sqlite3_value_text(argv[0]);
  if (!id || sqlite3_value_bytes(argv[0]) != 32) {
    sqlite3_result_error(ctx, "spy_source: an id is 32 hex digits", -1);
    return;
  }
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT size, codec, content, base_source_id FROM "
                         "sources WHERE source_id = ?1",
                         -1, &st, NULL) != SQLITE_OK) {
    sqlite3_result_error(ctx,
                         "spy_source: no sources table (not a spyglass "
                         "trace store of schema version 3?)",
                         -1);
    return;
  }
  blob chain[MAX_DEPTH + 1];
  int depth = 0, rc = 0;
  char msg[256] = "";
  const char *want = id;
  for (;;) {
    if (depth > MAX_DEPTH) {
      sqlite3_snprintf(sizeof msg, msg,
                       "spy_source: source %s: a delta chain longer than %d",
                       id, MAX_DEPTH);
      rc = -1;
      break;
    }
    for (int i = 0; i < depth; i++)
      if (strcmp(chain[i].id, want) == 0) {
        sqlite3_snprintf(sizeof msg, msg,
                         "spy_source: source %s: a cycle of delta bases", id);
        rc = -1;
      }
    if (rc)
      break;
    rc = fetch(db, st, want, &chain[depth], msg, sizeof msg);
    if (rc == 1) {
      sqlite3_snprintf(sizeof msg, msg,
                       depth ? "spy_source: source %s: its delta base %s is "
                               "missing"
                             : "spy_source: no source %s",
                       id, want);
      rc = -1;
    }
    if (rc)
      break;
    depth++;
    blob *b = &chain[depth - 1];
    if (b->codec != CODEC_ZSTD_DELTA && b->codec != CODEC_COPY)
      break;
    if (!b->base[0]) {
      sqlite3_snprintf(sizeof msg, msg,
                       "spy_source: source %s: a delta without a base", id);
      rc = -1;
      break;
    }
    want = b->base;
  }
  sqlite3_finalize(st);
  char *cur = NULL;
  size_t ncur = 0;
  void *dctx = NULL;
  for (int i = depth - 1; rc == 0 && i >= 0; i--) {
    char *next = NULL;
    size_t nnext = 0;
    if (unpack(&dctx, &chain[i], cur, ncur, &next, &nnext) < 0) {
      sqlite3_free(next);
      sqlite3_snprintf(sizeof msg, msg, "spy_source: source %s: a corrupt blob",
                       chain[i].id);
      rc = -1;
    } else {
      sqlite3_free(cur);
      cur = next;
      ncur = nnext;
    }
  }
  ZSTD_freeDCtx(dctx);
  for (int i = 0; i < depth; i++)
    blob_free(&chain[i]);
  if (rc) {
    sqlite3_free(cur);
    sqlite3_result_error(ctx, msg, -1);
    return;
  }
  sqlite3_result_text64(ctx, cur ? cur : "", ncur,
                        cur ? sqlite3_free : SQLITE_STATIC, SQLITE_UTF8);
}

int sqlite3_spyglasssqlite_init(sqlite3 *db, char **err,
                                const sqlite3_api_routines *api);
int spy__slices_vtab_register(sqlite3 *db); /* slices_vtab.c */
/* The entry point sqlite3_load_extension finds for libspyglass_sqlite
 * (the only symbol the library exports). */
__attribute__((visibility("default"))) int
sqlite3_spyglasssqlite_init(sqlite3 *db, char **err,
                            const sqlite3_api_routines *api) {
  (void)err;
  SQLITE_EXTENSION_INIT2(api);
  int rc = sqlite3_create_function(db, "spy_source", 1,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                   spy_source, NULL, NULL);
  /* recordings' packed zones: the spyglass_slices table (slices_vtab.c) */
  if (rc == SQLITE_OK)
    rc = spy__slices_vtab_register(db);
  return rc;
}
