/* writer_jsonl.c — the JSON-lines writer (default, no dependency):
 * Rolldown's devtools layout, a session directory holding meta.json (the
 * SessionMeta events) and logs.json (every other event, and each large
 * payload once as a StringRef line before its first use), plus
 * spyglass.json with the schema version and the final counts (among
 * them the bytes that were not UTF-8 and became U+FFFD). Writes are
 * buffered and flushed per batch, on the writer thread. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

typedef struct jsonl {
  FILE *meta, *logs;
  char *dir;
  spy__buf line;
  uint64_t actions;
  uint64_t replaced; /* action bytes that were not UTF-8 (now U+FFFD) */
  _Atomic uint64_t lost;
  const spy_trace_writer_cfg *cfg;
  void (*report)(void *, int, const char *);
  void *report_ctx;
} jsonl;

static FILE *open_in(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "a");
  if (f)
    setvbuf(f, NULL, _IOFBF, 1 << 20);
  return f;
}

static int64_t jl_close(void *state);

static int jl_open(void **state, const spy_trace_writer_cfg *cfg) {
  jsonl *j = calloc(1, sizeof *j);
  if (!j)
    return SPY_ENOMEM;
  *state = j;
  j->dir = strdup(cfg->dir);
  j->report = cfg->report;
  j->report_ctx = cfg->report_ctx;
  if (!j->dir)
    return SPY_ENOMEM;
  j->meta = open_in(cfg->dir, "meta.json");
  j->logs = open_in(cfg->dir, "logs.json");
  if (!j->meta || !j->logs)
    return -errno;
  return 0;
}

static int put_line(jsonl *j, FILE *f, const char *p, size_t n) {
  if (fwrite(p, 1, n, f) != n || fputc('\n', f) == EOF) {
    atomic_fetch_add(&j->lost, 1);
    return SPY_EIO;
  }
  return 0;
}

static int jl_source(void *state, const uint64_t hash[2], const char *p,
                     size_t n) {
  jsonl *j = state;
  j->line.len = 0;
  spy__trace_json_stringref(&j->line, hash, p, n);
  if (j->line.err)
    return j->line.err;
  return put_line(j, j->logs, j->line.p, j->line.len) < 0 ? SPY_EIO : 0;
}

static int jl_action(void *state, const spy_trace_record *r) {
  jsonl *j = state;
  int meta = r->action->kind == &spy_kind_session_meta;
  j->actions++;
  j->replaced += r->json_replaced;
  return put_line(j, meta ? j->meta : j->logs, r->json, r->json_len);
}

static int jl_commit(void *state) {
  jsonl *j = state;
  int bad = fflush(j->meta) != 0;
  bad |= fflush(j->logs) != 0;
  return bad ? SPY_EIO : 0;
}

static uint64_t jl_lost(void *state) {
  return atomic_load(&((jsonl *)state)->lost);
}

static int64_t jl_close(void *state) {
  jsonl *j = state;
  if (!j)
    return 0;
  if (j->meta && fclose(j->meta) != 0)
    atomic_fetch_add(&j->lost, 1);
  if (j->logs && fclose(j->logs) != 0)
    atomic_fetch_add(&j->lost, 1);
  if (j->dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/spyglass.json", j->dir);
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f,
              "{\"schema_version\":%d,\"actions\":%llu,\"lost\":%llu,"
              "\"replaced\":%llu}\n",
              SPY_TRACE_SCHEMA_VERSION, (unsigned long long)j->actions,
              (unsigned long long)atomic_load(&j->lost),
              (unsigned long long)(j->replaced + j->line.replaced));
      fclose(f);
    }
  }
  int64_t lost = (int64_t)atomic_load(&j->lost);
  spy__buf_free(&j->line);
  free(j->dir);
  free(j);
  return lost;
}

const spy_trace_writer_ops spy__writer_jsonl = {
    "jsonl", jl_open, jl_source, jl_action, jl_commit, jl_close, jl_lost};
