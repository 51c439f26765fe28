/* reader_jsonl.c — the reader's JSON-lines backend: a session directory
 * holding meta.json (SessionMeta events), logs.json (every other event and
 * the StringRef lines carrying payloads) and spyglass.json (the writer's
 * schema version and final counts).
 *
 * The two event files are read a line at a time (a 64 KiB block buffer,
 * no file held in memory) and merged by seq; each is in seq order as the
 * one writer thread wrote it (a line whose seq goes backwards is read in
 * file order, with a warning). Every line is parsed with
 * the JSON library (json_parse.c); nothing is found by byte offsets inside
 * a line. StringRef lines are indexed as they go by — content id → the
 * line's offset and length — and a payload asked for before the
 * iteration reached it is found by scanning ahead on a stream of its own;
 * its content is then read back from that one line.
 *
 * A writer stopped mid-line (a full disk, a killed process) leaves a last
 * line with no newline that is not valid JSON: the trace is read up to the
 * line before it, with a warning naming the line and its byte offset. A
 * bad line anywhere else is an error naming the same. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"

#define BLK (64u << 10)
/* Longest line read (a StringRef of a payload of up to ~170 MiB escaped
 * at worst, ~1 GiB of plain text). */
#define MAX_LINE (1u << 30)
/* Largest spyglass.json read. */
#define MAX_META (64u << 10)

enum { F_META, F_LOGS };
static const char *const fname[2] = {"meta.json", "logs.json"};

typedef struct jstream {
  int file; /* F_META or F_LOGS */
  char *blk;
  size_t bpos, blen;
  uint64_t fpos; /* file offset just past blk's bytes */
  spy__buf line;
  uint64_t line_no; /* of the last line read, from 1 */
  uint64_t off;     /* offset of the next line */
  int eof, has;
  uint64_t last_seq; /* of the previous event */
  spy_trace_arena arena;
  spy_trace_action act;
} jstream;

typedef struct jref {
  uint64_t hash[2];
  uint64_t off; /* the StringRef line in logs.json */
  size_t len;
  size_t size; /* its content's bytes */
} jref;

typedef struct jl {
  char *dir;
  int fd[2];
  jstream ev[2];       /* the merge: meta.json, logs.json */
  jstream scan;        /* logs.json ahead of the iteration, for lookups */
  uint64_t hw[2];      /* bytes of each file examined so far */
  uint64_t hw_line[2]; /* and their lines */
  jref *refs;
  size_t nrefs, cap_refs;
  uint32_t *slots; /* open addressing: index + 1 into refs */
  size_t nslots;
  int64_t lost, written_replaced;
  uint64_t read_replaced; /* bytes mended while reading (old writers) */
} jl;

/* ---- lines ------------------------------------------------------------- */

static void stream_reset(jstream *s) {
  s->last_seq = 0;
  s->bpos = s->blen = 0;
  s->fpos = s->off = s->line_no = 0;
  s->eof = s->has = 0;
}

/* The next line of the stream's file into p and n (valid until the next
 * call), its offset in *at; *complete is 0 when it ends at EOF without a
 * newline. Returns 1, 0 at EOF or a negative code. */
static int read_line(spy_trace_reader *r, jl *j, jstream *s, const char **p,
                     size_t *n, uint64_t *at, int *complete) {
  s->line.len = 0;
  *at = s->off;
  int whole = 0; /* the line lies in blk: no copy */
  for (;;) {
    if (s->bpos == s->blen) {
      ssize_t k = pread(j->fd[s->file], s->blk, BLK, (off_t)s->fpos);
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0)
        return spy__reader_err(r, -errno, "%s/%s: %s", j->dir, fname[s->file],
                               strerror(errno));
      if (k == 0) {
        if (s->line.len == 0)
          return 0;
        *complete = 0;
        break;
      }
      s->bpos = 0;
      s->blen = (size_t)k;
      s->fpos += (uint64_t)k;
    }
    const char *b = s->blk + s->bpos;
    size_t left = s->blen - s->bpos;
    const char *nl = memchr(b, '\n', left);
    size_t take = nl ? (size_t)(nl - b) : left;
    if (s->line.len + take > MAX_LINE)
      return spy__reader_err(r, SPY_EBADVALUE,
                             "%s/%s: line %llu at byte %llu is longer than "
                             "%u bytes",
                             j->dir, fname[s->file],
                             (unsigned long long)s->line_no + 1,
                             (unsigned long long)*at, MAX_LINE);
    s->bpos += take + (nl != NULL);
    if (nl && s->line.len == 0) {
      *p = b;
      *n = take;
      whole = 1;
      *complete = 1;
      break;
    }
    spy__buf_put(&s->line, b, take);
    if (s->line.err)
      return spy__reader_err(r, SPY_ENOMEM, "out of memory reading %s",
                             fname[s->file]);
    if (nl) {
      *complete = 1;
      break;
    }
  }
  if (!whole) {
    *p = s->line.p ? s->line.p : "";
    *n = s->line.len;
  }
  s->line_no++;
  s->off = *at + *n + (uint64_t)*complete;
  return 1;
}

static int blank(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
      return 0;
  return 1;
}

/* ---- the StringRef index ------------------------------------------------ */

static size_t slot_of(const jl *j, const uint64_t h[2]) {
  return (size_t)(h[1] ^ (h[0] >> 7)) & (j->nslots - 1);
}

static jref *ref_find(jl *j, const uint64_t h[2]) {
  if (!j->nslots)
    return NULL;
  for (size_t i = slot_of(j, h);; i = (i + 1) & (j->nslots - 1)) {
    uint32_t s = j->slots[i];
    if (!s)
      return NULL;
    jref *f = &j->refs[s - 1];
    if (f->hash[0] == h[0] && f->hash[1] == h[1])
      return f;
  }
}

static int ref_add(jl *j, const jref *ref) {
  if (ref_find(j, ref->hash))
    return 0; /* the first line of an id wins */
  if (j->nrefs >= UINT32_MAX - 1)
    return SPY_ENOMEM;
  if (j->nrefs == j->cap_refs) {
    size_t cap = j->cap_refs ? 2 * j->cap_refs : 256;
    jref *g = realloc(j->refs, cap * sizeof *g);
    if (!g)
      return SPY_ENOMEM;
    j->refs = g;
    j->cap_refs = cap;
  }
  if (2 * (j->nrefs + 1) > j->nslots) { /* grow and re-insert */
    size_t ns = j->nslots ? 2 * j->nslots : 512;
    uint32_t *g = calloc(ns, sizeof *g);
    if (!g)
      return SPY_ENOMEM;
    free(j->slots);
    j->slots = g;
    j->nslots = ns;
    for (size_t k = 0; k < j->nrefs; k++) {
      size_t i = slot_of(j, j->refs[k].hash);
      while (j->slots[i])
        i = (i + 1) & (ns - 1);
      j->slots[i] = (uint32_t)k + 1;
    }
  }
  j->refs[j->nrefs] = *ref;
  size_t i = slot_of(j, ref->hash);
  while (j->slots[i])
    i = (i + 1) & (j->nslots - 1);
  j->slots[i] = (uint32_t)++j->nrefs;
  return 0;
}

/* ---- reading events ---------------------------------------------------- */

/* Reads the stream's next line and parses it. Returns 1 and *l for an
 * event or a StringRef (*is_ref), 0 at the end (a cut last line sets the
 * warning when `warn`), or a negative code. Lines not examined before
 * are indexed and their mended bytes counted. */
static int next_line(spy_trace_reader *r, jl *j, jstream *s, spy__jline *l,
                     int warn) {
  for (;;) {
    const char *p = "";
    size_t n = 0;
    uint64_t at;
    int complete = 1;
    int rc = read_line(r, j, s, &p, &n, &at, &complete);
    if (rc <= 0)
      return rc;
    if (blank(p, n))
      continue;
    char why[200];
    spy_trace_arena_reset(&s->arena);
    rc = spy__json_line(p, n, &s->arena, l, NULL, why, sizeof why);
    if (rc == SPY_EBADVALUE && !complete) {
      if (warn)
        spy__reader_warn(r,
                         "%s/%s: the last line (%llu, at byte %llu) is cut "
                         "short (%s); read up to line %llu",
                         j->dir, fname[s->file], (unsigned long long)s->line_no,
                         (unsigned long long)at, why,
                         (unsigned long long)s->line_no - 1);
      return 0;
    }
    if (rc == SPY_EBADVALUE)
      return spy__reader_err(r, rc, "%s/%s: line %llu at byte %llu: %s", j->dir,
                             fname[s->file], (unsigned long long)s->line_no,
                             (unsigned long long)at, why);
    if (rc < 0)
      return spy__reader_err(r, rc, "%s/%s: line %llu: %s", j->dir,
                             fname[s->file], (unsigned long long)s->line_no,
                             spy_strerror(rc));
    if (at >= j->hw[s->file]) { /* first time this line is examined */
      j->hw[s->file] = s->off;
      j->hw_line[s->file] = s->line_no;
      j->read_replaced += l->replaced;
      if (rc == 1 && s->file == F_LOGS) {
        jref ref = {{l->hash[0], l->hash[1]}, at, n, l->size};
        if (ref_add(j, &ref) < 0)
          return spy__reader_err(r, SPY_ENOMEM, "out of memory indexing %s",
                                 fname[s->file]);
      }
    }
    return 1;
  }
}

/* Fills the stream's next event. 1, 0 at the end, or a negative code. */
static int fill(spy_trace_reader *r, jl *j, jstream *s) {
  for (;;) {
    spy__jline l;
    int rc = next_line(r, j, s, &l, 1);
    if (rc <= 0) {
      s->eof = 1;
      return rc;
    }
    if (l.is_ref)
      continue;
    if (l.action.seq < s->last_seq) /* not from one writer thread */
      spy__reader_warn(r,
                       "%s/%s: line %llu: seq %llu after %llu (the file is "
                       "read in its own order)",
                       j->dir, fname[s->file], (unsigned long long)s->line_no,
                       (unsigned long long)l.action.seq,
                       (unsigned long long)s->last_seq);
    s->last_seq = l.action.seq;
    s->act = l.action;
    s->has = 1;
    return 1;
  }
}

static int jl_next(spy_trace_reader *r, spy_trace_action *a) {
  jl *j = r->st;
  int pick = -1;
  for (int i = 0; i < 2; i++) {
    jstream *s = &j->ev[i];
    if (!s->has && !s->eof && j->fd[i] >= 0) {
      int rc = fill(r, j, s);
      if (rc < 0)
        return rc;
    }
    if (s->has && (pick < 0 || s->act.seq < j->ev[pick].act.seq))
      pick = i;
  }
  if (pick < 0)
    return 0;
  *a = j->ev[pick].act;
  j->ev[pick].has = 0; /* its arena is reset when it is refilled */
  return 1;
}

static int jl_rewind(spy_trace_reader *r) {
  jl *j = r->st;
  stream_reset(&j->ev[0]);
  stream_reset(&j->ev[1]);
  return 0;
}

/* Scans logs.json ahead of what has been examined until `want` is indexed
 * (NULL: to the end). */
static int scan_ahead(spy_trace_reader *r, jl *j, const uint64_t *want) {
  jstream *s = &j->scan;
  if (s->off < j->hw[F_LOGS] || s->eof) { /* restart where examining ends */
    stream_reset(s);
    s->off = s->fpos = j->hw[F_LOGS];
    s->line_no = j->hw_line[F_LOGS];
  }
  while (!(want && ref_find(j, want))) {
    spy__jline l;
    int rc = next_line(r, j, s, &l, 0);
    if (rc < 0)
      return rc;
    if (rc == 0) {
      s->eof = 1;
      break;
    }
  }
  return 0;
}

static int jl_source(spy_trace_reader *r, const uint64_t hash[2],
                     spy__buf *out) {
  jl *j = r->st;
  jref *f = ref_find(j, hash);
  if (!f) {
    int rc = scan_ahead(r, j, hash);
    if (rc < 0)
      return rc;
    if (!(f = ref_find(j, hash)))
      return SPY_ENOENT;
  }
  spy__buf *line = &r->buf2;
  line->len = 0;
  if (spy__buf_reserve(line, f->len) < 0)
    return spy__reader_err(r, SPY_ENOMEM, "out of memory reading a payload");
  ssize_t k = pread(j->fd[F_LOGS], line->p, f->len, (off_t)f->off);
  if (k != (ssize_t)f->len)
    return spy__reader_err(r, SPY_EIO,
                           "%s/logs.json: the StringRef at byte "
                           "%llu cannot be read back",
                           j->dir, (unsigned long long)f->off);
  spy__jline l;
  spy_trace_arena_reset(&r->sarena);
  char why[200];
  int rc =
      spy__json_line(line->p, f->len, &r->sarena, &l, out, why, sizeof why);
  if (rc != 1 || l.hash[0] != hash[0] || l.hash[1] != hash[1])
    return spy__reader_err(r, SPY_EBADVALUE,
                           "%s/logs.json: the StringRef at byte %llu "
                           "changed under the reader",
                           j->dir, (unsigned long long)f->off);
  return 0;
}

static int jl_sizes(spy_trace_reader *r, spy__refcount *rs, size_t n) {
  jl *j = r->st;
  int rc = scan_ahead(r, j, NULL);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < n; i++) {
    const jref *f = ref_find(j, rs[i].hash);
    if (f) {
      rs[i].found = 1;
      rs[i].size = rs[i].stored = f->size;
    }
  }
  return 0;
}

static int64_t jl_lost(spy_trace_reader *r) { return ((jl *)r->st)->lost; }

static uint64_t jl_replaced(spy_trace_reader *r) {
  jl *j = r->st;
  return (j->written_replaced > 0 ? (uint64_t)j->written_replaced : 0) +
         j->read_replaced;
}

static void jl_close(spy_trace_reader *r) {
  jl *j = r->st;
  if (!j)
    return;
  jstream *all[3] = {&j->ev[0], &j->ev[1], &j->scan};
  for (int i = 0; i < 3; i++) {
    free(all[i]->blk);
    spy__buf_free(&all[i]->line);
    spy_trace_arena_free(&all[i]->arena);
  }
  for (int i = 0; i < 2; i++)
    if (j->fd[i] >= 0)
      close(j->fd[i]);
  free(j->refs);
  free(j->slots);
  free(j->dir);
  free(j);
  r->st = NULL;
}

/* spyglass.json: the schema version and the writer's final counts. */
static int read_meta(spy_trace_reader *r, jl *j) {
  char path[4096];
  snprintf(path, sizeof path, "%s/spyglass.json", j->dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return 0; /* the writer did not finish: counts unknown */
  struct stat sb;
  char *text = NULL;
  ssize_t k = -1;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= MAX_META) {
    if (!(text = malloc((size_t)sb.st_size + 1))) {
      close(fd);
      return spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", j->dir);
    }
    k = pread(fd, text, (size_t)sb.st_size, 0);
  }
  close(fd);
  static const char *const keys[] = {"schema_version", "lost", "replaced"};
  int64_t v[3] = {0, -1, 0};
  int ok = k >= 0 && spy__json_ints(text, (size_t)k, keys, v, 3) == 0;
  free(text);
  if (!ok)
    return 0; /* unreadable: as if absent */
  if (v[0] > SPY_TRACE_SCHEMA_VERSION)
    return spy__reader_err(
        r, SPY_EBADSCHEMA,
        "%s: written by a newer spyglass (schema version too new)", j->dir);
  j->lost = v[1];
  j->written_replaced = v[2];
  return 0;
}

static int jl_open(spy_trace_reader *r, const char *dir) {
  jl *j = calloc(1, sizeof *j);
  if (!j)
    return SPY_ENOMEM;
  r->st = j;
  j->fd[0] = j->fd[1] = -1;
  j->lost = -1;
  j->ev[0].file = F_META;
  j->ev[1].file = j->scan.file = F_LOGS;
  if (!(j->dir = strdup(dir)) || !(j->ev[0].blk = malloc(BLK)) ||
      !(j->ev[1].blk = malloc(BLK)) || !(j->scan.blk = malloc(BLK)))
    return spy__reader_err(r, SPY_ENOMEM, "%s: out of memory", dir);
  int rc = read_meta(r, j);
  if (rc < 0)
    return rc;
  for (int i = 0; i < 2; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, fname[i]);
    j->fd[i] = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (j->fd[i] >= 0 && (fstat(j->fd[i], &sb) != 0 || !S_ISREG(sb.st_mode))) {
      close(j->fd[i]);
      j->fd[i] = -1;
      return spy__reader_err(r, SPY_EBADVALUE, "%s/%s: not a regular file", dir,
                             fname[i]);
    }
    if (j->fd[i] < 0 && i == F_LOGS)
      return spy__reader_err(r, SPY_ENOENT, "%s: no logs.json", dir);
  }
  return 0;
}

const spy__reader_ops spy__reader_jsonl = {
    "jsonl",   jl_open,  jl_next, jl_rewind,   NULL,
    jl_source, jl_sizes, jl_lost, jl_replaced, jl_close};
