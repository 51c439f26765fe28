/* writer_jsonl.c — the JSON-lines writer (default, no dependency):
 * Rolldown's devtools layout, a session directory holding meta.json (the
 * SessionMeta events) and logs.json (every other event, and each large
 * payload once as a StringRef line before its first use), plus
 * spyglass.json with the schema version and the final counts (among
 * them the bytes that were not UTF-8 and became U+FFFD).
 *
 * Lines are gathered in memory and written with write(2) at commit, or
 * as soon as 256 KiB have gathered: a buffer that stays in the L2 cache
 * makes the kernel's copy into the page cache several times cheaper than
 * 4 MiB pieces did (550 MB written from a fresh buffer: 0.12 s of CPU in
 * 256 KiB writes, 0.28-0.58 s in 4 MiB ones). A batch is kept whole or
 * not at all: when a write fails (a full disk: SPY_ENOSPC) both files are
 * truncated back to where the batch began and its actions are counted as
 * lost, so the files hold only complete lines and the counts in
 * spyglass.json agree with them. spyglass.json is created at open with
 * room for its final counts (a full disk at close cannot keep them out);
 * until a clean close it holds no counts ("unknown"). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store.h"

#define SPILL_BYTES ((size_t)256 << 10) /* lines gathered before a write */
#define STATUS_BYTES 128                /* room for spyglass.json's counts */

typedef struct jfile {
  int fd;
  spy__buf buf; /* lines not written yet */
  off_t start;  /* file size where the batch began */
  off_t size;   /* bytes written so far */
} jfile;

typedef struct jsonl {
  jfile meta, logs;
  int status_fd; /* spyglass.json */
  spy__buf line;
  uint64_t actions;        /* actions in committed batches */
  uint64_t replaced;       /* their bytes that were not UTF-8 (now U+FFFD) */
  uint32_t batch_n;        /* actions of the open batch */
  uint64_t batch_replaced; /* and their replaced bytes */
  int batch_err;           /* the open batch's first write error */
  _Atomic uint64_t lost;
  spy__lost_src lostsrc; /* payloads of failed batches */
} jsonl;

static int open_in(const char *dir, const char *name, int flags) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return open(path, flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
}

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -errno;
    if (w == 0)
      return SPY_EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes what f gathered; the first error sticks to the batch. */
static int spill(jsonl *j, jfile *f) {
  if (!f->buf.len)
    return 0;
  int rc = j->batch_err ? j->batch_err : write_all(f->fd, f->buf.p, f->buf.len);
  if (rc == 0)
    f->size += (off_t)f->buf.len;
  else if (!j->batch_err)
    j->batch_err = rc;
  f->buf.len = 0;
  return rc;
}

static int jl_open(void **state, const spy_trace_writer_cfg *cfg) {
  jsonl *j = calloc(1, sizeof *j);
  if (!j)
    return SPY_ENOMEM;
  *state = j;
  j->meta.fd = j->logs.fd = j->status_fd = -1;
  j->meta.fd = open_in(cfg->dir, "meta.json", O_APPEND);
  j->logs.fd = open_in(cfg->dir, "logs.json", O_APPEND);
  if (j->meta.fd < 0 || j->logs.fd < 0)
    return -errno;
  j->meta.start = j->meta.size = lseek(j->meta.fd, 0, SEEK_END);
  j->logs.start = j->logs.size = lseek(j->logs.fd, 0, SEEK_END);
  j->status_fd = open_in(cfg->dir, "spyglass.json", O_TRUNC);
  if (j->status_fd < 0)
    return -errno;
  char s[STATUS_BYTES];
  int n = snprintf(s, sizeof s, "{\"schema_version\":%d}",
                   SPY_TRACE_SCHEMA_VERSION);
  memset(s + n, ' ', sizeof s - (size_t)n - 1);
  s[sizeof s - 1] = '\n';
  return write_all(j->status_fd, s, sizeof s);
}

static int put_line(jsonl *j, jfile *f, const char *p, size_t n) {
  spy__buf_put(&f->buf, p, n);
  spy__buf_putc(&f->buf, '\n');
  if (f->buf.err)
    return f->buf.err;
  return f->buf.len >= SPILL_BYTES ? spill(j, f) : 0;
}

static int jl_source(void *state, const uint64_t hash[2], const char *p,
                     size_t n) {
  jsonl *j = state;
  /* formatted in place (payloads are most of the bytes: no second copy);
   * its replaced bytes are counted with the StringRef lines' */
  spy__buf *b = &j->logs.buf;
  size_t at = b->len;
  uint64_t replaced = b->replaced;
  spy__trace_json_stringref(b, hash, p, n);
  spy__buf_putc(b, '\n');
  if (b->err) {
    b->len = at;
    return b->err;
  }
  j->line.replaced += b->replaced - replaced;
  b->replaced = replaced;
  spy__lost_src_note(&j->lostsrc, hash);
  /* a failed write sticks to the batch and is reported at its commit:
   * the action that names this payload must still reach jl_action, or it
   * would be counted neither stored nor lost */
  if (b->len >= SPILL_BYTES)
    spill(j, &j->logs);
  return 0;
}

static int jl_action(void *state, const spy_trace_record *r) {
  jsonl *j = state;
  int meta = r->action->kind == &spy_kind_session_meta;
  j->batch_n++; /* stored or lost with its batch */
  j->batch_replaced += r->json_replaced;
  /* a payload a failed batch took with it goes in again, before its use */
  int rc = spy__lost_src_resend(&j->lostsrc, &r->action->fields, jl_source, j);
  if (rc == 0)
    rc = put_line(j, meta ? &j->meta : &j->logs, r->json, r->json_len);
  if (rc < 0 && !j->batch_err)
    j->batch_err = rc;
  return rc;
}

static int jl_commit(void *state) {
  jsonl *j = state;
  spill(j, &j->meta);
  spill(j, &j->logs);
  int rc = j->batch_err;
  if (rc < 0) { /* all or nothing: cut both files back to the batch start */
    if (ftruncate(j->meta.fd, j->meta.start) == 0)
      j->meta.size = j->meta.start;
    if (ftruncate(j->logs.fd, j->logs.start) == 0)
      j->logs.size = j->logs.start;
    atomic_fetch_add(&j->lost, j->batch_n);
    int r = spy__lost_src_fail(&j->lostsrc);
    if (r < 0)
      rc = r;
  } else {
    j->actions += j->batch_n;
    j->replaced += j->batch_replaced;
    spy__lost_src_commit(&j->lostsrc);
  }
  j->meta.start = j->meta.size;
  j->logs.start = j->logs.size;
  j->batch_n = 0;
  j->batch_replaced = 0;
  j->batch_err = 0;
  return rc;
}

static uint64_t jl_lost(void *state) {
  return atomic_load(&((jsonl *)state)->lost);
}

static int64_t jl_close(void *state) {
  jsonl *j = state;
  if (!j)
    return 0;
  if (j->meta.fd >= 0 && j->logs.fd >= 0)
    jl_commit(j);
  if (j->meta.fd >= 0 && close(j->meta.fd) != 0)
    atomic_fetch_add(&j->lost, 1);
  if (j->logs.fd >= 0 && close(j->logs.fd) != 0)
    atomic_fetch_add(&j->lost, 1);
  if (j->status_fd >= 0) { /* over the room reserved at open */
    char s[STATUS_BYTES];
    int n = snprintf(s, sizeof s,
                     "{\"schema_version\":%d,\"actions\":%llu,\"lost\":%llu,"
                     "\"replaced\":%llu}\n",
                     SPY_TRACE_SCHEMA_VERSION, (unsigned long long)j->actions,
                     (unsigned long long)atomic_load(&j->lost),
                     (unsigned long long)(j->replaced + j->line.replaced));
    if (n > 0 && n < (int)sizeof s &&
        pwrite(j->status_fd, s, (size_t)n, 0) == n)
      (void)!ftruncate(j->status_fd, n);
    close(j->status_fd);
  }
  int64_t lost = (int64_t)atomic_load(&j->lost);
  spy__buf_free(&j->line);
  spy__lost_src_free(&j->lostsrc);
  spy__buf_free(&j->meta.buf);
  spy__buf_free(&j->logs.buf);
  free(j);
  return lost;
}

const spy_trace_writer_ops spy__writer_jsonl = {.name = "jsonl",
                                                .open = jl_open,
                                                .source = jl_source,
                                                .action = jl_action,
                                                .commit = jl_commit,
                                                .close = jl_close,
                                                .lost = jl_lost,
                                                .flags =
                                                    SPY_TRACE_WRITER_MKDIR};
