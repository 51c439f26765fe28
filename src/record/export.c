/* export.c — a recording (SQLite file or PostgreSQL, through rec_read.c)
 * as a Perfetto trace (protobuf `Trace`,
 * hand-encoded: the few TracePacket / TrackDescriptor / TrackEvent /
 * InternedData fields it needs) or as Chrome trace-event JSON.
 *
 * Streaming: rows are read with ORDER BY on the recording's indexes and
 * each packet / event is written as it is read. What is held in memory is
 * bounded by the recording's shape, not its length: the interned names
 * (one per distinct slice name and process) and, per track, the ends of
 * the slices still open at the row being read (at most the nesting
 * depth). Packed zones (zone_block) come through rec_zones.c's merge,
 * a few decoded blocks at a time.
 *
 * Perfetto layout: one trusted_packet_sequence_id per process (each
 * provider is one writer); its first packet clears the incremental state
 * and describes the process track; threads get thread tracks, counters
 * (stats counters, numeric values, health, frame cpu / gpu / fps) counter
 * tracks under their process; slices are SLICE_BEGIN / SLICE_END pairs
 * with interned names. Timestamps: the recording's CLOCK_MONOTONIC ns. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/rec.h"
#include "record/zblock.h"

/* ---- protobuf encoding ----------------------------------------------- */
typedef struct pb {
  uint8_t *b;
  size_t n, cap;
  int oom;
} pb;

static void pb_raw(pb *p, const void *d, size_t n) {
  if (p->n + n > p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    while (cap < p->n + n)
      cap *= 2;
    uint8_t *b = realloc(p->b, cap);
    if (!b) {
      p->oom = 1;
      return;
    }
    p->b = b;
    p->cap = cap;
  }
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void pb_varint(pb *p, uint64_t v) {
  uint8_t t[10];
  int n = 0;
  do {
    t[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      t[n] |= 0x80;
    n++;
  } while (v);
  pb_raw(p, t, (size_t)n);
}
static void pb_u(pb *p, uint32_t field, uint64_t v) {
  pb_varint(p, (uint64_t)field << 3);
  pb_varint(p, v);
}
static void pb_d(pb *p, uint32_t field, double v) {
  pb_varint(p, (uint64_t)field << 3 | 1);
  uint8_t t[8];
  memcpy(t, &v, 8); /* little-endian host */
  pb_raw(p, t, 8);
}
static void pb_bytes(pb *p, uint32_t field, const void *d, size_t n) {
  pb_varint(p, (uint64_t)field << 3 | 2);
  pb_varint(p, n);
  pb_raw(p, d, n);
}
static void pb_str(pb *p, uint32_t field, const char *s) {
  pb_bytes(p, field, s ? s : "", s ? strlen(s) : 0);
}
static void pb_msg(pb *p, uint32_t field, const pb *m) {
  pb_bytes(p, field, m->b, m->n);
}

/* TracePacket / TrackDescriptor / TrackEvent field numbers
 * (perfetto/protos/perfetto/trace/…) */
enum {
  TRACE_PACKET = 1,
  TP_TIMESTAMP = 8,
  TP_SEQ_ID = 10,
  TP_TRACK_EVENT = 11,
  TP_INTERNED = 12,
  TP_SEQ_FLAGS = 13,
  TP_TRACK_DESC = 60,
  TD_UUID = 1,
  TD_NAME = 2,
  TD_PROCESS = 3,
  TD_THREAD = 4,
  TD_PARENT = 5,
  TD_COUNTER = 8,
  PD_PID = 1,
  PD_NAME = 6,
  THD_PID = 1,
  THD_TID = 2,
  THD_NAME = 5,
  TE_TYPE = 9,
  TE_NAME_IID = 10,
  TE_TRACK = 11,
  TE_DOUBLE_VALUE = 44,
  ID_EVENT_NAMES = 2,
  EN_IID = 1,
  EN_NAME = 2,
  SEQ_CLEARED = 1,
  SEQ_NEEDS = 2,
  TYPE_BEGIN = 1,
  TYPE_END = 2,
  TYPE_COUNTER = 4
};

/* ---- interned names: (sequence, name) -> iid ----------------------------- */
typedef struct iname {
  char *s;
  uint32_t seq;
  uint64_t iid;
} iname;
typedef struct itab {
  iname *e;
  size_t cap, n;
  uint64_t next[65];
} itab;

static uint64_t hash(const char *s, uint32_t seq) {
  uint64_t h = 1469598103934665603ull ^ seq;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* Returns the iid and whether it is new (*fresh). 0 on OOM. */
static uint64_t intern(itab *t, uint32_t seq, const char *s, int *fresh) {
  if (t->n * 2 >= t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 256;
    iname *e = calloc(cap, sizeof *e);
    if (!e)
      return 0;
    for (size_t i = 0; i < t->cap; i++)
      if (t->e[i].s) {
        size_t j = hash(t->e[i].s, t->e[i].seq) & (cap - 1);
        while (e[j].s)
          j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
      }
    free(t->e);
    t->e = e;
    t->cap = cap;
  }
  size_t j = hash(s, seq) & (t->cap - 1);
  while (t->e[j].s) {
    if (t->e[j].seq == seq && strcmp(t->e[j].s, s) == 0) {
      *fresh = 0;
      return t->e[j].iid;
    }
    j = (j + 1) & (t->cap - 1);
  }
  char *c = strdup(s);
  if (!c)
    return 0;
  t->e[j] = (iname){c, seq, ++t->next[seq % 65]};
  t->n++;
  *fresh = 1;
  return t->e[j].iid;
}

static void itab_free(itab *t) {
  for (size_t i = 0; i < t->cap; i++)
    free(t->e[i].s);
  free(t->e);
}

/* ---- reading ------------------------------------------------------------- */
typedef struct ex {
  rec_rd rd;
  rec_q q;
  FILE *out;
  int chrome;
  int64_t from, to; /* ns, inclusive range of slice / counter starts */
  int64_t rec_id;
  int first_event; /* chrome: no comma before the first */
  pb pkt, sub, sub2;
  itab names;
  int err;
} ex;

static int prep(ex *x, const char *q, rec_q **st) {
  spy__rq_prep(&x->q, &x->rd, q);
  *st = &x->q;
  return 0;
}

/* The end of a query: a failed one is the export's error. */
static void done(ex *x, rec_q *st) {
  if (st->failed && !x->err) {
    fprintf(stderr, "spyglass export: %s\n", x->rd.ops->errmsg(x->rd.st));
    x->err = SPY_EIO;
  }
}

/* seq id of a process: its upid (small numbers in one file) */
static uint32_t seq_of(int64_t upid) { return (uint32_t)upid; }
static uint64_t uuid_proc(int64_t upid) {
  return (1ull << 40) + (uint64_t)upid;
}
static uint64_t uuid_track(int64_t id) { return (2ull << 40) + (uint64_t)id; }
static uint64_t uuid_frame(int64_t upid, int k) {
  return (3ull << 40) + (uint64_t)upid * 4 + (uint64_t)k;
}

static void put_packet(ex *x) {
  pb frame = {0};
  pb_msg(&frame, TRACE_PACKET, &x->pkt);
  if (frame.oom || x->pkt.oom)
    x->err = SPY_ENOMEM;
  else if (fwrite(frame.b, 1, frame.n, x->out) != frame.n)
    x->err = SPY_EIO;
  free(frame.b);
  x->pkt.n = 0;
}

static void chrome_sep(ex *x) {
  fputs(x->first_event ? "\n" : ",\n", x->out);
  x->first_event = 0;
}

static void json_s(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

static const char *col_text(rec_q *st, int i) {
  const char *t = spy__rq_text(st, i);
  return t ? t : "";
}

static void processes(ex *x) {
  rec_q *st;
  if (prep(x,
           "SELECT upid, pid, name FROM process WHERE recording_id = ?1 "
           "ORDER BY upid",
           &st))
    return;
  spy__rq_bind(st, 1, x->rec_id);
  static const char *const fnames[3] = {"frame.cpu_ms", "frame.gpu_ms",
                                        "frame.fps"};
  while (spy__rq_step(st)) {
    int64_t upid = spy__rq_i64(st, 0);
    int64_t pid = spy__rq_i64(st, 1);
    const char *name = col_text(st, 2);
    if (x->chrome) {
      chrome_sep(x);
      fprintf(x->out,
              "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64
              ",\"tid\":0,\"args\":{\"name\":",
              pid);
      json_s(x->out, name);
      fputs("}}", x->out);
      continue;
    }
    x->sub.n = x->sub2.n = 0;
    pb_u(&x->sub2, PD_PID, (uint64_t)pid);
    pb_str(&x->sub2, PD_NAME, name);
    pb_u(&x->sub, TD_UUID, uuid_proc(upid));
    pb_msg(&x->sub, TD_PROCESS, &x->sub2);
    pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
    pb_u(&x->pkt, TP_SEQ_FLAGS, SEQ_CLEARED);
    pb_msg(&x->pkt, TP_TRACK_DESC, &x->sub);
    put_packet(x);
    for (int k = 0; k < 3; k++) {
      x->sub.n = x->sub2.n = 0;
      pb_u(&x->sub, TD_UUID, uuid_frame(upid, k));
      pb_str(&x->sub, TD_NAME, fnames[k]);
      pb_u(&x->sub, TD_PARENT, uuid_proc(upid));
      pb_msg(&x->sub, TD_COUNTER, &x->sub2); /* empty CounterDescriptor */
      pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
      pb_msg(&x->pkt, TP_TRACK_DESC, &x->sub);
      put_packet(x);
    }
  }
  done(x, st);
}

static void tracks(ex *x) {
  rec_q *st;
  if (prep(x,
           "SELECT t.id, t.name, t.type, t.upid, p.pid, th.tid, th.name "
           "FROM track t JOIN process p ON p.recording_id = t.recording_id "
           "AND p.upid = t.upid LEFT JOIN thread th ON th.recording_id = "
           "t.recording_id AND th.utid = t.utid WHERE t.recording_id = ?1 "
           "ORDER BY t.id",
           &st))
    return;
  spy__rq_bind(st, 1, x->rec_id);
  while (spy__rq_step(st)) {
    int64_t id = spy__rq_i64(st, 0), upid = spy__rq_i64(st, 3);
    int64_t pid = spy__rq_i64(st, 4), tid = spy__rq_i64(st, 5);
    const char *name = col_text(st, 1), *type = col_text(st, 2);
    int thread = strcmp(type, "thread") == 0;
    if (x->chrome) {
      if (!thread)
        continue;
      chrome_sep(x);
      fprintf(x->out,
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64
              ",\"tid\":%" PRId64 ",\"args\":{\"name\":",
              pid, tid);
      json_s(x->out, spy__rq_null(st, 6) ? name : col_text(st, 6));
      fputs("}}", x->out);
      continue;
    }
    x->sub.n = x->sub2.n = 0;
    pb_u(&x->sub, TD_UUID, uuid_track(id));
    pb_u(&x->sub, TD_PARENT, uuid_proc(upid));
    if (thread) {
      pb_u(&x->sub2, THD_PID, (uint64_t)pid);
      pb_u(&x->sub2, THD_TID, (uint64_t)tid);
      pb_str(&x->sub2, THD_NAME, name);
      pb_msg(&x->sub, TD_THREAD, &x->sub2);
    } else {
      pb_str(&x->sub, TD_NAME, name);
      pb_msg(&x->sub, TD_COUNTER, &x->sub2);
    }
    pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
    pb_msg(&x->pkt, TP_TRACK_DESC, &x->sub);
    put_packet(x);
  }
  done(x, st);
}

static void slice_end(ex *x, int64_t ts, int64_t track, int64_t upid,
                      int64_t pid, int64_t tid) {
  (void)pid;
  (void)tid;
  if (x->chrome)
    return; /* X events carry their duration */
  x->sub.n = 0;
  pb_u(&x->sub, TE_TYPE, TYPE_END);
  pb_u(&x->sub, TE_TRACK, uuid_track(track));
  pb_u(&x->pkt, TP_TIMESTAMP, (uint64_t)ts);
  pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
  pb_u(&x->pkt, TP_SEQ_FLAGS, SEQ_NEEDS);
  pb_msg(&x->pkt, TP_TRACK_EVENT, &x->sub);
  put_packet(x);
}

#define STACK_MAX 1100
/* The open slices of the track being written (the ends of their
 * begins), as the slices come in (track, ts, depth) order. */
typedef struct sl {
  int64_t ends[STACK_MAX];
  int depth;
  int64_t track, upid, pid, tid;
} sl;

static void slice_one(ex *x, sl *k, int64_t ts, int64_t dur, int64_t track,
                      const char *name, int64_t upid, int64_t pid,
                      int64_t tid) {
  if (dur < 0)
    dur = 0;
  if (track != k->track) {
    while (k->depth > 0)
      slice_end(x, k->ends[--k->depth], k->track, k->upid, k->pid, k->tid);
    k->track = track;
    k->upid = upid;
    k->pid = pid;
    k->tid = tid;
  }
  while (k->depth > 0 && k->ends[k->depth - 1] <= ts)
    slice_end(x, k->ends[--k->depth], track, upid, pid, tid);
  if (x->chrome) {
    chrome_sep(x);
    fprintf(x->out,
            "{\"ph\":\"X\",\"cat\":\"zone\",\"pid\":%" PRId64
            ",\"tid\":%" PRId64 ",\"ts\":%.3f,\"dur\":%.3f,\"name\":",
            pid, tid, ts / 1e3, dur / 1e3);
    json_s(x->out, name);
    fputc('}', x->out);
    return;
  }
  int fresh = 0;
  uint64_t iid = intern(&x->names, seq_of(upid), name, &fresh);
  if (!iid) {
    x->err = SPY_ENOMEM;
    return;
  }
  x->sub.n = x->sub2.n = 0;
  pb_u(&x->sub, TE_TYPE, TYPE_BEGIN);
  pb_u(&x->sub, TE_TRACK, uuid_track(track));
  pb_u(&x->sub, TE_NAME_IID, iid);
  pb_u(&x->pkt, TP_TIMESTAMP, (uint64_t)ts);
  pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
  pb_u(&x->pkt, TP_SEQ_FLAGS, SEQ_NEEDS);
  pb_msg(&x->pkt, TP_TRACK_EVENT, &x->sub);
  if (fresh) {
    pb en = {0};
    pb_u(&en, EN_IID, iid);
    pb_str(&en, EN_NAME, name);
    pb_msg(&x->sub2, ID_EVENT_NAMES, &en);
    free(en.b);
    pb_msg(&x->pkt, TP_INTERNED, &x->sub2);
  }
  put_packet(x);
  /* children end before their parent; a child that claims to outlast
   * it (clock jitter) is clipped to the parent's end */
  int64_t end = ts + dur;
  if (k->depth > 0 && end > k->ends[k->depth - 1])
    end = k->ends[k->depth - 1];
  if (k->depth < STACK_MAX)
    k->ends[k->depth++] = end;
}

static void slices_end(ex *x, sl *k) {
  while (k->depth > 0)
    slice_end(x, k->ends[--k->depth], k->track, k->upid, k->pid, k->tid);
}

static void slices(ex *x) {
  rec_q *st;
  /* slice_data, not the `slice` view: in a packed file the view needs
   * the extension (and its rows are in the blocks) */
  prep(x,
       "SELECT s.ts, s.dur, s.track_id, COALESCE(l.name, '?'), t.upid, "
       "p.pid, th.tid FROM slice_data s JOIN track t ON t.recording_id "
       "= s.recording_id AND t.id = s.track_id JOIN process p ON "
       "p.recording_id = s.recording_id AND p.upid = t.upid LEFT JOIN "
       "thread th ON th.recording_id = s.recording_id AND th.utid = "
       "t.utid LEFT JOIN zone_loc l ON l.recording_id = s.recording_id "
       "AND l.id = s.name_id WHERE s.recording_id = ?1 AND s.ts >= ?2 "
       "AND s.ts <= ?3 ORDER BY s.track_id, s.ts, s.depth",
       &st);
  spy__rq_bind(st, 1, x->rec_id);
  spy__rq_bind(st, 2, x->from);
  spy__rq_bind(st, 3, x->to);
  sl k = {.track = -1};
  while (!x->err && spy__rq_step(st))
    slice_one(x, &k, spy__rq_i64(st, 0), spy__rq_i64(st, 1), spy__rq_i64(st, 2),
              col_text(st, 3), spy__rq_i64(st, 4), spy__rq_i64(st, 5),
              spy__rq_i64(st, 6));
  slices_end(x, &k);
  done(x, st);
}

/* ---- packed zones ---------------------------------------------------------
 * The blocks carry track and name ids: the thread tracks and the zone
 * locations of the recording are read first (bounded by its shape). */
typedef struct tinfo {
  int64_t id, upid, pid, tid;
} tinfo;
typedef struct ninfo {
  int64_t id;
  char *name;
} ninfo;
typedef struct pk {
  ex *x;
  sl k;
  tinfo *t;
  size_t nt;
  ninfo *n;
  size_t nn;
} pk;

static int cmp_t(const void *a, const void *b) {
  int64_t x = ((const tinfo *)a)->id, y = ((const tinfo *)b)->id;
  return x < y ? -1 : x > y;
}
static int cmp_n(const void *a, const void *b) {
  int64_t x = ((const ninfo *)a)->id, y = ((const ninfo *)b)->id;
  return x < y ? -1 : x > y;
}

static int packed_zone(void *user, int64_t track, const spy_zb_zone *z) {
  pk *p = user;
  tinfo kt = {.id = track};
  const tinfo *t = bsearch(&kt, p->t, p->nt, sizeof *p->t, cmp_t);
  if (!t)
    return 0; /* a track the recording does not describe: as the rows' JOIN */
  ninfo kn = {.id = z->name_id};
  const ninfo *n =
      z->name_id ? bsearch(&kn, p->n, p->nn, sizeof *p->n, cmp_n) : NULL;
  slice_one(p->x, &p->k, z->ts, z->dur, track, n && n->name ? n->name : "?",
            t->upid, t->pid, t->tid);
  return p->x->err;
}

static void slices_packed(ex *x) {
  pk p = {.x = x, .k = {.track = -1}};
  rec_q *st;
  prep(x,
       "SELECT t.id, t.upid, p.pid, th.tid FROM track t JOIN process p ON "
       "p.recording_id = t.recording_id AND p.upid = t.upid LEFT JOIN "
       "thread th ON th.recording_id = t.recording_id AND th.utid = t.utid "
       "WHERE t.recording_id = ?1",
       &st);
  spy__rq_bind(st, 1, x->rec_id);
  size_t cap = 0;
  while (!x->err && spy__rq_step(st)) {
    if (p.nt == cap) {
      cap = cap ? cap * 2 : 64;
      tinfo *nt = realloc(p.t, cap * sizeof *nt);
      if (!nt) {
        x->err = SPY_ENOMEM;
        break;
      }
      p.t = nt;
    }
    p.t[p.nt++] = (tinfo){spy__rq_i64(st, 0), spy__rq_i64(st, 1),
                          spy__rq_i64(st, 2), spy__rq_i64(st, 3)};
  }
  done(x, st);
  prep(x, "SELECT id, name FROM zone_loc WHERE recording_id = ?1", &st);
  spy__rq_bind(st, 1, x->rec_id);
  cap = 0;
  while (!x->err && spy__rq_step(st)) {
    if (p.nn == cap) {
      cap = cap ? cap * 2 : 64;
      ninfo *nn = realloc(p.n, cap * sizeof *nn);
      if (!nn) {
        x->err = SPY_ENOMEM;
        break;
      }
      p.n = nn;
    }
    const char *name = spy__rq_text(st, 1);
    p.n[p.nn] = (ninfo){spy__rq_i64(st, 0), strdup(name ? name : "?")};
    if (!p.n[p.nn++].name)
      x->err = SPY_ENOMEM;
  }
  done(x, st);
  if (!x->err) {
    qsort(p.t, p.nt, sizeof *p.t, cmp_t);
    qsort(p.n, p.nn, sizeof *p.n, cmp_n);
    int rc = spy__rec_zones_each(&x->rd, x->from, x->to, packed_zone, &p);
    if (rc < 0 && !x->err)
      x->err = rc == SPY_EBADVALUE ? SPY_EIO : rc;
    slices_end(x, &p.k);
  }
  free(p.t);
  for (size_t i = 0; i < p.nn; i++)
    free(p.n[i].name);
  free(p.n);
}

static void counter_event(ex *x, int64_t ts, uint64_t uuid, int64_t upid,
                          int64_t pid, const char *name, double v) {
  if (x->chrome) {
    chrome_sep(x);
    fprintf(x->out,
            "{\"ph\":\"C\",\"pid\":%" PRId64 ",\"ts\":%.3f,\"name\":", pid,
            ts / 1e3);
    json_s(x->out, name);
    fprintf(x->out, ",\"args\":{\"value\":%.17g}}", isfinite(v) ? v : 0.0);
    return;
  }
  x->sub.n = 0;
  pb_u(&x->sub, TE_TYPE, TYPE_COUNTER);
  pb_u(&x->sub, TE_TRACK, uuid);
  pb_d(&x->sub, TE_DOUBLE_VALUE, v);
  pb_u(&x->pkt, TP_TIMESTAMP, (uint64_t)ts);
  pb_u(&x->pkt, TP_SEQ_ID, seq_of(upid));
  pb_u(&x->pkt, TP_SEQ_FLAGS, SEQ_NEEDS);
  pb_msg(&x->pkt, TP_TRACK_EVENT, &x->sub);
  put_packet(x);
}

static void counters(ex *x) {
  rec_q *st;
  if (prep(x,
           "SELECT c.ts, c.value, c.track_id, t.upid, p.pid, t.name FROM "
           "counter c JOIN track t ON t.recording_id = c.recording_id AND "
           "t.id = c.track_id JOIN process p ON p.recording_id = "
           "c.recording_id AND p.upid = t.upid WHERE c.recording_id = ?1 AND "
           "c.ts >= ?2 AND c.ts <= ?3 ORDER BY c.track_id, c.ts",
           &st))
    return;
  spy__rq_bind(st, 1, x->rec_id);
  spy__rq_bind(st, 2, x->from);
  spy__rq_bind(st, 3, x->to);
  while (!x->err && spy__rq_step(st))
    counter_event(x, spy__rq_i64(st, 0), uuid_track(spy__rq_i64(st, 2)),
                  spy__rq_i64(st, 3), spy__rq_i64(st, 4), col_text(st, 5),
                  spy__rq_dbl(st, 1));
  done(x, st);
  if (prep(x,
           "SELECT f.ts, f.upid, p.pid, f.cpu_ms, f.gpu_ms, f.fps FROM frame f "
           "JOIN process p ON p.recording_id = f.recording_id AND p.upid = "
           "f.upid WHERE f.recording_id = ?1 AND f.ts >= ?2 AND f.ts <= ?3 "
           "ORDER BY f.upid, f.frame",
           &st))
    return;
  spy__rq_bind(st, 1, x->rec_id);
  spy__rq_bind(st, 2, x->from);
  spy__rq_bind(st, 3, x->to);
  static const char *const fnames[3] = {"frame.cpu_ms", "frame.gpu_ms",
                                        "frame.fps"};
  while (!x->err && spy__rq_step(st)) {
    int64_t ts = spy__rq_i64(st, 0), upid = spy__rq_i64(st, 1);
    for (int k = 0; k < 3; k++)
      if (!spy__rq_null(st, 3 + k))
        counter_event(x, ts, uuid_frame(upid, k), upid, spy__rq_i64(st, 2),
                      fnames[k], spy__rq_dbl(st, 3 + k));
  }
  done(x, st);
}

int spy_record_export(const char *path, int64_t recording, const char *fmt,
                      FILE *out, double from_s, double to_s) {
  return spy_record_export_zones(path, recording, fmt, out, from_s, to_s, 0);
}

int spy_record_export_zones(const char *path, int64_t recording,
                            const char *fmt, FILE *out, double from_s,
                            double to_s, int zones) {
  ex x;
  memset(&x, 0, sizeof x);
  if (strcmp(fmt, "perfetto") == 0)
    x.chrome = 0;
  else if (strcmp(fmt, "chrome") == 0)
    x.chrome = 1;
  else
    return SPY_EINVAL;
  int64_t t0 = 0;
  int rc = spy__rec_read_open(&x.rd, path, recording, &t0);
  if (rc < 0)
    return rc == SPY_ENOENT ? SPY_EINVAL : SPY_EIO;
  x.out = out;
  x.rec_id = x.rd.rec_id;
  x.from = t0 + (int64_t)(from_s * 1e9);
  x.to = to_s < 0 ? INT64_MAX : t0 + (int64_t)(to_s * 1e9);
  x.first_event = 1;
  if (!x.err) {
    if (x.chrome)
      fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", out);
    processes(&x);
    if (!x.err)
      tracks(&x);
    int packed =
        zones == SPY_RECORD_ZONES_PACKED ||
        (zones != SPY_RECORD_ZONES_ROWS && spy__rec_has_blocks(&x.rd) > 0);
    if (!x.err && packed)
      slices_packed(&x);
    else if (!x.err)
      slices(&x);
    if (!x.err)
      counters(&x);
    if (x.chrome)
      fputs("\n]}\n", out);
  }
  if (fflush(out) != 0 || ferror(out)) {
    fprintf(stderr, "spyglass export: write failed\n");
    x.err = SPY_EIO;
  }
  free(x.pkt.b);
  free(x.sub.b);
  free(x.sub2.b);
  itab_free(&x.names);
  spy__rec_read_close(&x.rd);
  return x.err;
}
