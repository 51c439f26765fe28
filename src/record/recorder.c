/* recorder.c — `spyglass record`'s engine: one receiving thread per
 * provider (a consumer whose on_data hook turns frames into rows), one
 * bounded row queue, one writer thread (record.h for the rules).
 *
 * What becomes which row, per DATA frame:
 *   STATS     -> frame rows (cpu, gpu, fps) + counter rows per counter;
 *                a jump in frame numbers -> a loss row ("samples")
 *   ENV, REGISTRY, BUFFERS -> value rows (every change, with its state);
 *                numeric registry values also counter rows ("typed series")
 *   HEALTH    -> counter rows on health.* tracks
 *   MSGPROF   -> msgprof rows (when the summary changed)
 *   buffer:chunk, buffer:raw frames (with desc.buffers) -> IVF / PNG files
 *                and chunk rows (rec_buffers.c)
 *   ZONES     -> zones, read back from the consumer state's spans as
 *                they close (ids given in begin order, so a parent's id is
 *                known before its children end): slice rows, or (packed,
 *                SQLite's default) gathered per thread into blocks of up
 *                to ZB_ZONES zones / ZB_NS, sorted and encoded (zblock.h)
 *                on this thread, one zone_block row each; zone_loc rows
 * Bus overruns and sequence gaps (frames_lost) become loss rows ("frames").
 * A provider that goes away ends its process and threads (end_ts). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "record/rec.h"
#include "record/rec_buffers.h"
#include "record/rec_frames.h"
#include "record/rec_trace.h"
#include "record/zblock.h"
#include "spyglass/bus.h"
#include "spyglass/consumer.h"

#define BATCH_MS 100
#define BATCH_ROWS 16384
#define MAX_SOURCES 64
#define MAX_PENDING 4096 /* open spans waiting for their end, per thread */
#define MAX_NAMES 4096   /* counter tracks per source */
#define STAGE_ROWS 256   /* rows a receiver gathers before queueing them */
/* The longest zones wait for the clock sync (a sync takes at most twice
 * the consumer's clock_timeout_ms, 1 s by default) */
#define CLOCK_WAIT_NS 5000000000LL
/* A thread's zone block is sealed at this many zones or this age (what
 * a SIGKILL can lose beyond the uncommitted batch) */
#define ZB_ZONES 8192
#define ZB_NS 250000000LL
/* Buffer chunk rows held for their frame's row at most (then the oldest
 * is written without waiting), and how long a stopped recorder goes on
 * receiving for the frames they wait for (four stats flush periods) */
#define CHUNK_WAIT_MAX 1024
#define STOP_WAIT_NS 1000000000LL
/* What a recording subscribes to when the desc says nothing */
#define SPY_REC_DEFAULT_FEATURES                                               \
  (SPY_FEAT_STATS | SPY_FEAT_ENV | SPY_FEAT_REGISTRY | SPY_FEAT_HEALTH |       \
   SPY_FEAT_MSGPROF | SPY_FEAT_ZONES | SPY_FEAT_TRACE)

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- per-thread zone bookkeeping -------------------------------------- */
typedef struct pend {
  uint64_t abs; /* absolute span index in the state's ring */
  int64_t id, parent;
  int64_t off; /* the clock offset its tree is written with */
} pend;

typedef struct zthr {
  uint32_t thread;
  int64_t utid, track;
  char name[64];
  int ended;
  uint64_t next; /* next span index not yet visited */
  int64_t stack[SPY_ZONE_DEPTH_MAX];
  /* The clock offset each open level is written with: a whole tree of
   * zones takes the offset its root was seen with, so a sync finishing
   * while the root is open cannot move the root (written when it ends)
   * against its children (written before): both map by one offset. */
  int64_t stack_off[SPY_ZONE_DEPTH_MAX];
  pend *pending;
  uint32_t npend;
  spy_zb_zone *blk; /* packed: the block being gathered */
  uint32_t nblk;
  int64_t blk_t0; /* when its first zone came */
} zthr;

typedef struct named_track {
  char *name;
  int64_t id;
} named_track;

typedef struct source {
  struct spy_recorder *r;
  spy_consumer *c;
  char want[SPY_NAME_MAX + 1];
  int has_want;
  pthread_t thread;
  int started;
  _Atomic int done;      /* thread finished (provider gone in --all) */
  _Atomic int connected; /* for the progress line (read by the caller) */
  /* the provider being recorded */
  uint64_t provider_id;
  int64_t upid;
  int live;
  int64_t begun_ns; /* when this provider's process row was written */
  uint64_t last_frame;
  int have_frame;
  uint64_t frames_lost_seen;
  uint64_t msgprof_seen;
  rec_trace_seen build_seen; /* BUILD: builds written (rec_trace.c) */
  uint32_t n_locs_seen;
  int64_t *loc_seen; /* by loc id - SPY_ZONES_LOC_ID_MIN: its zone_loc.id,
                        0: not recorded yet */
  zthr *thr;
  uint32_t nthr;
  named_track *tracks;
  uint32_t ntracks;
  uint64_t health_last[SPY_HEALTH_FIELD_COUNT];
  uint64_t clock_seen; /* clock_syncs when last recorded */
  int64_t args_set;
  _Atomic int64_t cpu_ns;    /* this receiving thread's CPU so far */
  rec_row stage[STAGE_ROWS]; /* rows not in the shared queue yet */
  uint32_t nstage;
  rec_bufs *bufs;   /* buffers recorded (NULL: none asked for) */
  rec_frames *held; /* frame rows waiting for their time (rec_frames.c) */
  /* chunk rows waiting for the row of their frame (hold_chunk) */
  rec_row *chunk_wait;
  uint32_t nchunk_wait, chunk_wait_cap;
  uint64_t frame_written; /* the newest frame row written (have_written) */
  int have_written;
  uint32_t bufs_known; /* --buffers all: metadata entries asked for */
} source;

struct spy_recorder {
  spy_recorder_desc d;
  const rec_backend_ops *ops;
  void *db;
  int64_t rec_id, start_ns;
  /* queue */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rec_row *q;
  uint32_t cap, head, n; /* ring */
  int stop_writer;
  pthread_t writer;
  int writer_started;
  /* ids, given by receivers */
  _Atomic int64_t next_id;
  /* stats */
  _Atomic uint64_t frames, rows, rows_lost, batches, bytes, samples_lost,
      frames_lost;
  _Atomic int error;
  _Atomic int stop;
  _Atomic int64_t writer_cpu_ns;
  int zmode; /* SPY_RECORD_ZONES_ROWS / _PACKED / _BOTH */
  _Atomic uint64_t zones, blocks;
  source *src[MAX_SOURCES];
  uint32_t nsrc;
  uint64_t seen_ids[MAX_SOURCES * 4];
  uint32_t nseen;
  spy_channel *disc;
  uint8_t *disc_buf;
  uint64_t next_query_ns;
  /* --all with connect: the bridge's discovery channel goes through this
   * link (each provider's consumer makes its own) */
  const spy_channel_ops *remote;
  void *link;
  uint64_t next_link_ns; /* when to try the link again after a failure */
  int link_error;        /* the last failure reported (not repeated) */
  rec_bufs_cfg bcfg;     /* buffers asked for (has_bufs) */
  int has_bufs;
};

/* ---- rows --------------------------------------------------------------- */
static void row_free(rec_row *r) {
  for (int i = 0; i < r->n; i++)
    if (r->c[i].t == C_TEXT || r->c[i].t == C_BLOB)
      free(r->c[i].v.s);
  r->n = 0;
}

static void row_init(rec_row *r, int stmt) {
  memset(r, 0, sizeof *r);
  r->stmt = (uint8_t)stmt;
}

/* Queues a row; never waits. Rows gather in the source's stage and go
 * into the shared queue STAGE_ROWS at a time (one lock per stage, not per
 * row); a full queue drops them (counted). */
static void flush_stage(source *s) {
  struct spy_recorder *rc = s->r;
  uint32_t k = s->nstage;
  if (!k)
    return;
  pthread_mutex_lock(&rc->mu);
  uint32_t room = rc->cap - rc->n, take = k < room ? k : room;
  uint32_t tail = (rc->head + rc->n) % rc->cap;
  uint32_t k1 = rc->cap - tail < take ? rc->cap - tail : take;
  memcpy(&rc->q[tail], s->stage, k1 * sizeof *s->stage);
  memcpy(rc->q, s->stage + k1, (take - k1) * sizeof *s->stage);
  uint32_t before = rc->n;
  rc->n += take;
  if (before < rc->cap / 4 && rc->n >= rc->cap / 4)
    pthread_cond_signal(&rc->cv);
  pthread_mutex_unlock(&rc->mu);
  for (uint32_t i = take; i < k; i++)
    row_free(&s->stage[i]);
  if (take < k)
    rc->rows_lost += k - take;
  s->nstage = 0;
}

static void push(source *s, rec_row *r) {
  if (s->nstage == STAGE_ROWS)
    flush_stage(s);
  s->stage[s->nstage++] = *r;
}

static int64_t new_id(struct spy_recorder *r) {
  return atomic_fetch_add(&r->next_id, 1);
}

/* ---- the writer thread -------------------------------------------------- */
static void *writer_main(void *arg) {
  struct spy_recorder *r = arg;
  rec_row *batch = malloc(BATCH_ROWS * sizeof *batch);
  if (!batch) {
    r->error = SPY_ENOMEM;
    return NULL;
  }
  pthread_mutex_lock(&r->mu);
  for (;;) {
    if (r->n == 0 && !r->stop_writer) {
      struct timespec dl;
      clock_gettime(CLOCK_REALTIME, &dl);
      dl.tv_nsec += BATCH_MS * 1000000L;
      if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    }
    if (r->n == 0 && r->stop_writer)
      break;
    if (r->n < BATCH_ROWS && !r->stop_writer) {
      /* let a batch gather (bounded latency) */
      struct timespec dl;
      clock_gettime(CLOCK_REALTIME, &dl);
      dl.tv_nsec += BATCH_MS * 1000000L;
      if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&r->cv, &r->mu, &dl);
    }
    uint32_t k = r->n < BATCH_ROWS ? r->n : BATCH_ROWS;
    /* two copies at most (the ring wraps once): the lock is held for a
     * memcpy, not a loop over rows */
    uint32_t k1 = r->cap - r->head < k ? r->cap - r->head : k;
    memcpy(batch, &r->q[r->head], k1 * sizeof *batch);
    memcpy(batch + k1, r->q, (k - k1) * sizeof *batch);
    r->head = (r->head + k) % r->cap;
    r->n -= k;
    pthread_mutex_unlock(&r->mu);
    if (k) {
      int rc = r->ops->begin(r->db);
      uint64_t nz = 0, nb = 0;
      for (uint32_t i = 0; i < k; i++) {
        if (!rc && r->ops->row(r->db, &batch[i]) < 0)
          rc = SPY_EIO;
        if (batch[i].stmt == S_ZONE_BLOCK)
          nb++, nz += (uint64_t)batch[i].c[5].v.i;
        else if (batch[i].stmt == S_SLICE && r->zmode != SPY_RECORD_ZONES_BOTH)
          nz++;
        row_free(&batch[i]);
      }
      if (r->ops->commit(r->db) < 0)
        rc = SPY_EIO;
      if (rc) {
        r->rows_lost += k;
        int z = 0;
        atomic_compare_exchange_strong(&r->error, &z, rc);
      } else {
        r->rows += k;
        r->batches++;
        r->zones += nz;
        r->blocks += nb;
      }
      r->writer_cpu_ns = thread_cpu_ns();
    }
    pthread_mutex_lock(&r->mu);
  }
  pthread_mutex_unlock(&r->mu);
  free(batch);
  return NULL;
}

/* ---- from frames to rows ----------------------------------------------- */
static int64_t track_for(source *s, const char *name, const char *type,
                         const char *unit) {
  for (uint32_t i = 0; i < s->ntracks; i++)
    if (strcmp(s->tracks[i].name, name) == 0)
      return s->tracks[i].id;
  if (s->ntracks == MAX_NAMES)
    return 0;
  if (!s->tracks) {
    s->tracks = calloc(MAX_NAMES, sizeof *s->tracks);
    if (!s->tracks)
      return 0;
  }
  char *copy = strdup(name);
  if (!copy)
    return 0;
  int64_t id = new_id(s->r);
  s->tracks[s->ntracks++] = (named_track){copy, id};
  rec_row r;
  row_init(&r, S_TRACK);
  cint(&r, id);
  ctext(&r, name);
  ctext(&r, type);
  cint(&r, s->upid);
  cnull(&r);
  ctext(&r, unit);
  push(s, &r);
  return id;
}

static void counter_row(source *s, int64_t ts, int64_t track, double v) {
  if (!track)
    return;
  rec_row r;
  row_init(&r, S_COUNTER);
  cint(&r, ts);
  cint(&r, track);
  cdbl(&r, v);
  push(s, &r);
}

static void loss_row(source *s, int64_t ts, const char *what, uint64_t n) {
  rec_row r;
  row_init(&r, S_LOSS);
  cint(&r, s->upid);
  cint(&r, ts);
  cconst(&r, what);
  cint(&r, (int64_t)n);
  push(s, &r);
}

static void arg_row(source *s, int64_t set, const char *key, int64_t i,
                    const char *str) {
  rec_row r;
  row_init(&r, S_ARG);
  cint(&r, set);
  ctext(&r, key);
  if (str) {
    cnull(&r);
    cnull(&r);
    ctext(&r, str);
  } else {
    cint(&r, i);
    cnull(&r);
    cnull(&r);
  }
  push(s, &r);
}

static void zone_out(source *s, zthr *z, const spy_zone_span *sp, int64_t id,
                     int64_t parent, int64_t off);
static void seal(source *s, zthr *z);
static void drain_frames(source *s, const spy_state *st, int64_t now,
                         int final);
static void push_row(void *src, rec_row *r);
static int clock_settled(const source *s, const spy_state *st, int64_t now);

/* ---- buffer chunks wait for their frame's row ---------------------------
 * A chunk names the frame it was captured in, and a user joins chunk to
 * frame on it. The chunk leaves the provider as soon as it is encoded;
 * that frame's stats sample only with the first flush after the frame
 * ended (up to a flush period later, longer after a slow frame), and its
 * row may then wait for the frame's time (rec_frames.c). So a chunk row
 * is written once the frame rows have reached its frame; a recording
 * that ends first writes a frame row without stats for it
 * (spy__rec_frames_stub), so that every chunk's frame has a row. */
static void release_chunks(source *s) {
  if (!s->nchunk_wait)
    return; /* (chunk_wait may be NULL: none held yet) */
  uint32_t k = 0;
  while (k < s->nchunk_wait && s->have_written &&
         (uint64_t)s->chunk_wait[k].c[3].v.i <= s->frame_written)
    push(s, &s->chunk_wait[k++]);
  memmove(s->chunk_wait, s->chunk_wait + k,
          (s->nchunk_wait - k) * sizeof *s->chunk_wait);
  s->nchunk_wait -= k;
}

/* The emit of rec_frames.c: a frame row (or a counter row of it). */
static void frame_row(void *src, rec_row *r) {
  source *s = src;
  int frame = r->stmt == S_FRAME;
  if (frame && (!s->have_written || (uint64_t)r->c[1].v.i > s->frame_written)) {
    s->frame_written = (uint64_t)r->c[1].v.i;
    s->have_written = 1;
  }
  push(s, r);
  if (frame)
    release_chunks(s);
}

/* The emit of rec_buffers.c: a chunk row (cells: upid, ts, buffer, frame,
 * …), written now or held for its frame's row. */
static void hold_chunk(void *src, rec_row *r) {
  source *s = src;
  if (!(s->r->d.features & SPY_FEAT_STATS) ||
      (!s->nchunk_wait && s->have_written &&
       (uint64_t)r->c[3].v.i <= s->frame_written)) {
    push(s, r); /* no frame rows recorded, or its row is written */
    return;
  }
  if (s->nchunk_wait == s->chunk_wait_cap &&
      s->chunk_wait_cap < CHUNK_WAIT_MAX) {
    uint32_t cap = s->chunk_wait_cap ? s->chunk_wait_cap * 2 : 16;
    rec_row *n = realloc(s->chunk_wait, cap * sizeof *n);
    if (n) {
      s->chunk_wait = n;
      s->chunk_wait_cap = cap;
    }
  }
  if (s->nchunk_wait == s->chunk_wait_cap) {
    if (!s->nchunk_wait) { /* no memory: written at once */
      push(s, r);
      return;
    }
    push(s, &s->chunk_wait[0]); /* held too long: the oldest goes */
    memmove(s->chunk_wait, s->chunk_wait + 1,
            (s->nchunk_wait - 1) * sizeof *s->chunk_wait);
    s->nchunk_wait--;
  }
  s->chunk_wait[s->nchunk_wait++] = *r;
}

/* The provider's recording ends (after the final frame rows): the chunks
 * still waiting get a frame row without stats each, then are written. */
static void end_chunks(source *s, const spy_state *st, int64_t now) {
  for (uint32_t k = 0; k < s->nchunk_wait; k++) {
    rec_row *c = &s->chunk_wait[k];
    uint64_t f = (uint64_t)c->c[3].v.i;
    if (!s->have_written || f > s->frame_written) {
      spy__rec_frames_stub(st, (s->r->d.features & SPY_FEAT_ZONES) != 0,
                           clock_settled(s, st, now), f, c->c[1].v.i, s->upid,
                           push_row, s);
      s->frame_written = f;
      s->have_written = 1;
    }
    push(s, c);
  }
  s->nchunk_wait = 0;
}

/* Zones still open when a provider's recording ends are written as cut
 * at the newest time seen (their children point at them). */
static void close_open(source *s, const spy_state *st) {
  const spy_zone_state *zs = &st->zones;
  for (uint32_t i = 0; i < s->nthr; i++) {
    zthr *z = &s->thr[i];
    const spy_zone_thread *t = NULL;
    for (uint32_t k = 0; k < zs->n_threads && !t; k++)
      if (zs->threads[k].thread == z->thread)
        t = &zs->threads[k];
    for (uint32_t k = 0; t && k < z->npend; k++) {
      const spy_zone_span *sp =
          z->pending[k].abs >= t->first
              ? spy_zone_thread_span(t,
                                     (uint32_t)(z->pending[k].abs - t->first))
              : NULL;
      if (!sp)
        continue;
      spy_zone_span cut = *sp;
      if (!cut.end_ns) {
        cut.end_ns =
            zs->latest_ns > cut.start_ns ? zs->latest_ns : cut.start_ns;
        cut.flags |= SPY_ZONE_SPAN_CUT;
      }
      zone_out(s, z, &cut, z->pending[k].id, z->pending[k].parent,
               z->pending[k].off);
    }
    z->npend = 0;
    seal(s, z);
  }
}

static void end_source(source *s, int64_t now) {
  if (!s->live)
    return;
  close_open(s, spy_consumer_state(s->c));
  drain_frames(s, spy_consumer_state(s->c), now, 1);
  end_chunks(s, spy_consumer_state(s->c), now);
  spy__rec_trace_end(spy_consumer_state(s->c), s->upid, &s->build_seen,
                     push_row, s); /* a build still running: ended 0 */
  rec_row r;
  for (uint32_t i = 0; i < s->nthr; i++) {
    if (s->thr[i].ended)
      continue;
    s->thr[i].ended = 1;
    row_init(&r, S_THREAD_END);
    cint(&r, now);
    cint(&r, s->thr[i].utid);
    push(s, &r);
  }
  row_init(&r, S_PROCESS_END);
  cint(&r, now);
  cint(&r, s->upid);
  push(s, &r);
  spy__rec_bufs_end(s->bufs); /* IVF frame counts; a new provider, new files */
  flush_stage(s);
  s->live = 0;
}

static void reset_provider(source *s) {
  for (uint32_t i = 0; i < s->nthr; i++) {
    free(s->thr[i].pending);
    free(s->thr[i].blk);
  }
  free(s->thr);
  s->thr = NULL;
  s->nthr = 0;
  for (uint32_t i = 0; i < s->ntracks; i++)
    free(s->tracks[i].name);
  s->ntracks = 0;
  free(s->loc_seen);
  s->loc_seen = NULL;
  s->have_frame = 0;
  s->have_written = 0;
  s->msgprof_seen = 0;
  memset(s->health_last, 0xff, sizeof s->health_last);
}

static void begin_provider(source *s, const spy_state *st, int64_t now) {
  /* a provider that replaced another (no ID given): the state holds the
   * new one's spans now, the old one's open zones are lost */
  for (uint32_t i = 0; i < s->nthr; i++) {
    s->thr[i].npend = 0;
    seal(s, &s->thr[i]); /* its closed zones are still the old one's */
  }
  end_source(s, now);
  reset_provider(s);
  s->provider_id = st->provider.id;
  s->upid = new_id(s->r);
  s->live = 1;
  s->begun_ns = now;
  s->frames_lost_seen = st->frames_lost;
  int64_t set = new_id(s->r);
  s->args_set = set;
  s->clock_seen = st->clock_syncs;
  char idhex[20];
  snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)st->provider.id);
  rec_row r;
  row_init(&r, S_PROCESS);
  cint(&r, s->upid);
  cint(&r, st->provider.pid);
  ctext(&r, idhex);
  ctext(&r, st->provider_name);
  cint(&r, now);
  cint(&r, st->clock_offset_ns);
  cint(&r, set);
  push(s, &r);
  arg_row(s, set, "provider.kind", st->provider.kind, NULL);
  arg_row(s, set, "provider.start_ms", (int64_t)st->provider.start_ms, NULL);
  arg_row(s, set, "clock.synced", st->clock_synced, NULL);
  arg_row(s, set, "clock.rtt_ns", st->clock_rtt_ns, NULL);
}

static double value_real(const spy_value *v, int *ok) {
  *ok = 1;
  switch (v->kind) {
  case SPY_VAL_FLOAT:
  case SPY_VAL_FLOAT2:
  case SPY_VAL_FLOAT3:
  case SPY_VAL_FLOAT4: return v->v.f[0];
  case SPY_VAL_UINT:
  case SPY_VAL_BITS: return (double)v->v.u;
  case SPY_VAL_INT: return (double)v->v.i;
  case SPY_VAL_BOOL: return v->v.b;
  default: *ok = 0; return 0;
  }
}

static void on_delta(source *s, const spy_section *sec, const char *src,
                     int64_t now) {
  spy_delta_iter it;
  if (spy_get_delta(sec, &it) < 0)
    return;
  spy_delta_entry e;
  while (spy_delta_next(&it, &e)) {
    rec_row r;
    row_init(&r, S_VALUE);
    cint(&r, s->upid);
    cint(&r, now);
    cconst(&r, src);
    ctextn(&r, e.key, e.key_len);
    cconst(&r, spy_value_kind_name(e.value.kind));
    cconst(&r, e.state == SPY_DELTA_SET       ? "set"
               : e.state == SPY_DELTA_CLEARED ? "cleared"
                                              : "meta");
    const spy_value *v = &e.value;
    int ok;
    double x = value_real(v, &ok);
    if (e.state != SPY_DELTA_SET)
      ok = 0;
    char buf[128];
    if (e.state == SPY_DELTA_SET &&
        (v->kind == SPY_VAL_UINT || v->kind == SPY_VAL_BITS))
      cint(&r, (int64_t)v->v.u);
    else if (e.state == SPY_DELTA_SET && v->kind == SPY_VAL_INT)
      cint(&r, v->v.i);
    else if (e.state == SPY_DELTA_SET && v->kind == SPY_VAL_BOOL)
      cint(&r, v->v.b);
    else
      cnull(&r);
    if (ok)
      cdbl(&r, x);
    else
      cnull(&r);
    if (e.state == SPY_DELTA_SET &&
        (v->kind == SPY_VAL_STRING || v->kind == SPY_VAL_BLOB)) {
      ctextn(&r, v->v.s.ptr, v->v.s.len);
    } else if (e.state == SPY_DELTA_SET && v->kind >= SPY_VAL_FLOAT2 &&
               v->kind <= SPY_VAL_FLOAT4) {
      int k = v->kind - SPY_VAL_FLOAT2 + 2;
      int o = 0;
      for (int i = 0; i < k; i++)
        o += snprintf(buf + o, sizeof buf - (size_t)o, "%s%.9g", i ? "," : "",
                      v->v.f[i]);
      ctext(&r, buf);
    } else {
      cnull(&r);
    }
    push(s, &r);
    if (ok && strcmp(src, "registry") == 0) {
      char tn[SPY_KEY_MAX + 16];
      int k = v->kind >= SPY_VAL_FLOAT2 && v->kind <= SPY_VAL_FLOAT4
                  ? v->kind - SPY_VAL_FLOAT2 + 2
                  : 1;
      for (int i = 0; i < k; i++) {
        if (k == 1)
          snprintf(tn, sizeof tn, "%.*s", (int)e.key_len, e.key);
        else
          snprintf(tn, sizeof tn, "%.*s.%c", (int)e.key_len, e.key, "xyzw"[i]);
        counter_row(s, now, track_for(s, tn, "counter", NULL),
                    k == 1 ? x : v->v.f[i]);
      }
    }
  }
}

static const char *const health_names[SPY_HEALTH_FIELD_COUNT] = {
    "health.frames_posted",   "health.bytes_posted",
    "health.flushes_dropped", "health.samples_dropped",
    "health.frames_lost",     "health.subscribers",
    "health.pool_small_free", "health.pool_medium_free",
    "health.pool_large_free"};

/* Frame rows wait for their zone frame marker and the clock sync
 * (rec_frames.c); those whose time is known now are written. */
static void drain_frames(source *s, const spy_state *st, int64_t now,
                         int final) {
  if (s->held)
    spy__rec_frames_drain(s->held, st, (s->r->d.features & SPY_FEAT_ZONES) != 0,
                          clock_settled(s, st, now), final, now, s->upid,
                          frame_row, s);
}

static void on_stats(source *s, const spy_section *sec, const spy_state *st,
                     int64_t now) {
  spy_stats_batch b;
  if (spy_get_stats(sec, &b) < 0 || b.count == 0)
    return;
  if (s->have_frame && b.start_frame > s->last_frame + 1) {
    uint64_t gap = b.start_frame - s->last_frame - 1;
    s->r->samples_lost += gap;
    loss_row(s, now, "samples", gap);
  }
  int64_t est = now;
  int64_t ts[SPY_STATS_MAX_SAMPLES];
  for (uint32_t k = b.count; k-- > 0;) {
    ts[k] = est;
    double fps = spy_stats_fps_x10(&b, k) / 10.0;
    est -= fps > 0.5 ? (int64_t)(1e9 / fps) : 16666667;
  }
  uint32_t nc = b.n_counters < SPY_STATS_MAX_COUNTERS ? b.n_counters
                                                      : SPY_STATS_MAX_COUNTERS;
  int64_t ctrack[SPY_STATS_MAX_COUNTERS];
  for (uint32_t c = 0; c < nc; c++) {
    char tn[SPY_KEY_MAX + 16];
    if (c < st->n_counters && st->counter_names[c][0])
      snprintf(tn, sizeof tn, "%s", st->counter_names[c]);
    else
      snprintf(tn, sizeof tn, "counter%u", c);
    ctrack[c] = track_for(s, tn, "counter", "count");
  }
  if (!s->held && !(s->held = spy__rec_frames_new()))
    return;
  rec_frame_sample fs;
  for (uint32_t i = 0; i < b.count; i++) {
    uint64_t fno = b.start_frame + i;
    if (s->have_frame && fno <= s->last_frame)
      continue; /* a resent sample */
    fs.frame = fno;
    fs.est = ts[i];
    fs.seen = now;
    fs.cpu_ms = spy_stats_cpu_x100(&b, i) / 100.0;
    uint16_t g = spy_stats_gpu_x100(&b, i);
    fs.gpu_ms = g == SPY_GPU_NONE ? NAN : g / 100.0;
    fs.fps = spy_stats_fps_x10(&b, i) / 10.0;
    fs.n_counters = nc;
    for (uint32_t c = 0; c < nc; c++) {
      fs.counter[c] = spy_stats_counter(&b, c, i);
      fs.track[c] = ctrack[c];
    }
    spy__rec_frames_add(s->held, &fs, st, s->upid, frame_row, s);
    s->last_frame = fno;
    s->have_frame = 1;
  }
  drain_frames(s, st, now, 0);
}

static zthr *thread_for(source *s, const spy_zone_thread *t) {
  for (uint32_t i = 0; i < s->nthr; i++)
    if (s->thr[i].thread == t->thread)
      return &s->thr[i];
  zthr *n = realloc(s->thr, (s->nthr + 1) * sizeof *n);
  if (!n)
    return NULL;
  s->thr = n;
  zthr *z = &s->thr[s->nthr++];
  memset(z, 0, sizeof *z);
  z->thread = t->thread;
  z->utid = new_id(s->r);
  z->next = t->first;
  snprintf(z->name, sizeof z->name, "%s", t->name);
  rec_row r;
  row_init(&r, S_THREAD);
  cint(&r, z->utid);
  cint(&r, s->upid);
  cint(&r, t->os_tid);
  cint(&r, t->thread);
  ctext(&r, t->name[0] ? t->name : NULL);
  push(s, &r);
  z->track = new_id(s->r);
  row_init(&r, S_TRACK);
  cint(&r, z->track);
  ctext(&r, t->name[0] ? t->name : "thread");
  ctext(&r, "thread");
  cint(&r, s->upid);
  cint(&r, z->utid);
  cnull(&r);
  push(s, &r);
  return z;
}

/* A slice row holds no text: its name is the location's zone_loc row
 * (name_id; NULL for a location not announced yet). `off` maps the
 * provider's clock to ours (provider − ours), the one of its tree. */
static void slice_row(source *s, zthr *z, const spy_zone_span *sp, int64_t id,
                      int64_t parent, int64_t off) {
  rec_row r;
  row_init(&r, S_SLICE);
  cint(&r, id);
  cint(&r, (int64_t)sp->start_ns - off);
  cint(&r, (int64_t)(sp->end_ns - sp->start_ns));
  cint(&r, z->track);
  uint32_t li = sp->loc - SPY_ZONES_LOC_ID_MIN; /* as in spy_state_zone_loc */
  if (s->loc_seen && sp->loc >= SPY_ZONES_LOC_ID_MIN && li < s->n_locs_seen &&
      s->loc_seen[li])
    cint(&r, s->loc_seen[li]);
  else
    cnull(&r);
  cint(&r, sp->depth);
  if (parent)
    cint(&r, parent);
  else
    cnull(&r);
  cint(&r, sp->flags);
  push(s, &r);
}

/* Packed: the thread's block as one zone_block row (sorted into block
 * order, encoded here so the writer only inserts). */
static void seal(source *s, zthr *z) {
  if (!z->nblk)
    return;
  spy__zb_sort(z->blk, z->nblk);
  uint8_t *b;
  size_t len;
  if (spy__zb_encode(z->blk, z->nblk, 0, &b, &len) < 0) {
    s->r->rows_lost += z->nblk;
    z->nblk = 0;
    return;
  }
  int64_t ts1 = z->blk[0].ts, id0 = z->blk[0].id, id1 = id0;
  for (uint32_t i = 1; i < z->nblk; i++) {
    const spy_zb_zone *e = &z->blk[i];
    ts1 = e->ts > ts1 ? e->ts : ts1;
    id0 = e->id < id0 ? e->id : id0;
    id1 = e->id > id1 ? e->id : id1;
  }
  rec_row r;
  row_init(&r, S_ZONE_BLOCK);
  cint(&r, z->track);
  cint(&r, z->blk[0].ts);
  cint(&r, ts1);
  cint(&r, id0);
  cint(&r, id1);
  cint(&r, z->nblk);
  r.c[r.n].t = C_BLOB;
  r.c[r.n].len = (uint32_t)len;
  r.c[r.n++].v.s = (char *)b;
  push(s, &r);
  z->nblk = 0;
}

/* A closed zone, as a row or into its thread's block (or both). */
static void zone_out(source *s, zthr *z, const spy_zone_span *sp, int64_t id,
                     int64_t parent, int64_t off) {
  int mode = s->r->zmode;
  if (mode & SPY_RECORD_ZONES_ROWS)
    slice_row(s, z, sp, id, parent, off);
  if (!(mode & SPY_RECORD_ZONES_PACKED))
    return;
  if (!z->blk && !(z->blk = malloc(ZB_ZONES * sizeof *z->blk))) {
    s->r->rows_lost++;
    return;
  }
  if (!z->nblk)
    z->blk_t0 = mono_ns();
  uint32_t li = sp->loc - SPY_ZONES_LOC_ID_MIN;
  int64_t name =
      s->loc_seen && sp->loc >= SPY_ZONES_LOC_ID_MIN && li < s->n_locs_seen
          ? s->loc_seen[li]
          : 0;
  z->blk[z->nblk++] = (spy_zb_zone){
      .id = id,
      .ts = (int64_t)sp->start_ns - off,
      .dur = (int64_t)(sp->end_ns - sp->start_ns),
      .name_id = name,
      .parent = parent,
      .depth = sp->depth,
      .flags = sp->flags,
  };
  if (z->nblk == ZB_ZONES)
    seal(s, z);
}

/* Blocks older than ZB_NS are sealed (bounded loss on SIGKILL). */
static void seal_old(source *s, int64_t now) {
  for (uint32_t i = 0; i < s->nthr; i++)
    if (s->thr[i].nblk && now - s->thr[i].blk_t0 >= ZB_NS)
      seal(s, &s->thr[i]);
}

static void on_zones(source *s, const spy_state *st, int64_t now) {
  const spy_zone_state *zs = &st->zones;
  /* new locations */
  if (zs->n_locs > s->n_locs_seen || !s->loc_seen) {
    int64_t *seen = realloc(s->loc_seen, (zs->n_locs + 1) * sizeof *seen);
    if (!seen)
      return;
    if (!s->loc_seen)
      s->n_locs_seen = 0;
    memset(seen + s->n_locs_seen, 0,
           (zs->n_locs + 1 - s->n_locs_seen) * sizeof *seen);
    s->loc_seen = seen;
    s->n_locs_seen = zs->n_locs;
  }
  for (uint32_t i = 0; i < zs->n_locs; i++) {
    const spy_zone_location *l = zs->locs[i];
    if (!l || s->loc_seen[i])
      continue;
    s->loc_seen[i] = new_id(s->r);
    rec_row r;
    row_init(&r, S_ZONE_LOC);
    cint(&r, s->loc_seen[i]);
    cint(&r, s->upid);
    cint(&r, l->id);
    ctext(&r, l->name);
    ctext(&r, l->function);
    ctext(&r, l->file);
    cint(&r, l->line);
    cint(&r, l->color);
    push(s, &r);
  }
  for (uint32_t ti = 0; ti < zs->n_threads; ti++) {
    const spy_zone_thread *t = &zs->threads[ti];
    zthr *z = thread_for(s, t);
    if (!z)
      continue;
    if (t->name[0] && strcmp(z->name, t->name) != 0) {
      snprintf(z->name, sizeof z->name, "%s", t->name);
      rec_row r;
      row_init(&r, S_THREAD);
      cint(&r, z->utid);
      cint(&r, s->upid);
      cint(&r, t->os_tid);
      cint(&r, t->thread);
      ctext(&r, t->name);
      push(s, &r);
    }
    /* spans that were open last time */
    for (uint32_t i = 0; i < z->npend;) {
      pend *p = &z->pending[i];
      const spy_zone_span *sp =
          p->abs >= t->first
              ? spy_zone_thread_span(t, (uint32_t)(p->abs - t->first))
              : NULL;
      if (!sp || sp->end_ns) {
        if (sp)
          zone_out(s, z, sp, p->id, p->parent, p->off);
        else
          loss_row(s, now, "spans", 1); /* left the ring while open */
        z->pending[i] = z->pending[--z->npend];
      } else {
        i++;
      }
    }
    if (z->next < t->first) {
      loss_row(s, now, "spans", t->first - z->next);
      z->next = t->first;
    }
    for (; z->next < t->first + t->n; z->next++) {
      const spy_zone_span *sp =
          spy_zone_thread_span(t, (uint32_t)(z->next - t->first));
      if (!sp)
        break;
      int64_t id = new_id(s->r);
      uint32_t d =
          sp->depth < SPY_ZONE_DEPTH_MAX ? sp->depth : SPY_ZONE_DEPTH_MAX - 1;
      int64_t parent = d ? z->stack[d - 1] : 0;
      int64_t off = d ? z->stack_off[d - 1] : st->clock_offset_ns;
      z->stack[d] = id;
      z->stack_off[d] = off;
      if (sp->end_ns) {
        zone_out(s, z, sp, id, parent, off);
      } else {
        if (!z->pending)
          z->pending = malloc(MAX_PENDING * sizeof *z->pending);
        if (z->pending && z->npend < MAX_PENDING)
          z->pending[z->npend++] = (pend){z->next, id, parent, off};
        else
          loss_row(s, now, "spans", 1);
      }
    }
    if (t->gone && !z->ended && z->npend == 0) {
      z->ended = 1;
      rec_row r;
      row_init(&r, S_THREAD_END);
      cint(&r, now);
      cint(&r, z->utid);
      push(s, &r);
    }
  }
}

/* Zones are written once the connection's clock sync has its result (or
 * has failed, or CLOCK_WAIT_NS passed without one): written before it,
 * they would be mapped with offset 0 and those after it with the synced
 * offset, one recording on two time bases. Meanwhile the state's span
 * ring keeps them (cd.zone_spans, far more than a sync's zones). */
static int clock_settled(const source *s, const spy_state *st, int64_t now) {
  return st->clock_synced || st->clock_failures > 0 ||
         now - s->begun_ns > CLOCK_WAIT_NS;
}

static void on_msgprof(source *s, const spy_state *st, int64_t now) {
  const spy_state_msgprof *m = &st->msgprof;
  if (!m->updated_ms || m->updated_ms == s->msgprof_seen)
    return;
  s->msgprof_seen = m->updated_ms;
  for (uint32_t i = 0; i < m->n; i++) {
    const spy_state_msgprof_row *w = &m->rows[i];
    rec_row r;
    row_init(&r, S_MSGPROF);
    cint(&r, s->upid);
    cint(&r, now);
    cint(&r, w->type);
    cint(&r, (int64_t)w->count);
    cint(&r, (int64_t)w->errors);
    cint(&r, (int64_t)w->bytes);
    cdbl(&r, w->msgs_per_s);
    cdbl(&r, w->bytes_per_s);
    cint(&r, (int64_t)w->encode.p50_ns);
    cint(&r, (int64_t)w->encode.p99_ns);
    cint(&r, (int64_t)w->post.p50_ns);
    cint(&r, (int64_t)w->post.p99_ns);
    push(s, &r);
  }
}

static void push_row(void *src, rec_row *r) { push(src, r); }

/* A buffer:chunk / buffer:raw frame: its bytes to a file, a chunk row. */
static void on_pixels(void *user, const spy_frame *f, const spy_state *st) {
  source *s = user;
  int64_t now = mono_ns();
  if (!s->live || st->provider.id != s->provider_id)
    begin_provider(s, st, now);
  s->r->bytes += f->len;
  spy__rec_bufs_frame(s->bufs, f, st, s->upid, now, hold_chunk, s);
  flush_stage(s);
}

/* --buffers all: ask for every buffer the provider's metadata names (a
 * new subscription when their number changed). */
static void want_all_buffers(source *s, const spy_state *st) {
  if (!s->r->bcfg.all || st->conn != SPY_CONN_CONNECTED ||
      st->buffers.n == s->bufs_known)
    return;
  spy_buffer_request *req;
  int n = spy__rec_bufs_wanted(&s->r->bcfg, st, &req);
  if (n >= 0 && spy_consumer_set_buffers(s->c, req, (uint32_t)n) == 0)
    s->bufs_known = st->buffers.n;
  free(req);
}

static void on_data(void *user, const spy_frame *f, const spy_state *st) {
  source *s = user;
  int64_t now = mono_ns();
  if (!s->live || st->provider.id != s->provider_id)
    begin_provider(s, st, now);
  s->r->frames++;
  s->r->bytes += f->len;
  if (st->clock_syncs != s->clock_seen && st->clock_synced) {
    /* a sync finished after the process row: its offset, and the round
     * trip it came from */
    s->clock_seen = st->clock_syncs;
    rec_row r;
    row_init(&r, S_PROCESS_CLOCK);
    cint(&r, st->clock_offset_ns);
    cint(&r, s->upid);
    push(s, &r);
    arg_row(s, s->args_set, "clock.synced_rtt_ns", st->clock_rtt_ns, NULL);
  }
  if (st->frames_lost > s->frames_lost_seen) {
    uint64_t n = st->frames_lost - s->frames_lost_seen;
    s->r->frames_lost += n;
    loss_row(s, now, "frames", n);
    s->frames_lost_seen = st->frames_lost;
  }
  size_t cur = 0;
  spy_section sec;
  while (spy_frame_next_section(f, &cur, &sec) == 1) {
    switch (sec.id) {
    case SPY_SEC_STATS: on_stats(s, &sec, st, now); break;
    case SPY_SEC_ENV: on_delta(s, &sec, "env", now); break;
    case SPY_SEC_REGISTRY: on_delta(s, &sec, "registry", now); break;
    case SPY_SEC_BUFFERS: on_delta(s, &sec, "buffers", now); break;
    case SPY_SEC_HEALTH: {
      uint64_t h[SPY_HEALTH_FIELD_COUNT];
      memset(h, 0, sizeof h);
      if (spy_get_health(&sec, h, SPY_HEALTH_FIELD_COUNT) < 0)
        break;
      for (int i = 0; i < SPY_HEALTH_FIELD_COUNT; i++) {
        if (h[i] == s->health_last[i])
          continue;
        s->health_last[i] = h[i];
        counter_row(s, now, track_for(s, health_names[i], "counter", NULL),
                    (double)h[i]);
      }
      break;
    }
    default: break;
    }
  }
  if (spy_frame_find_section(f, SPY_SEC_ZONES, &sec) &&
      clock_settled(s, st, now))
    on_zones(s, st, now);
  drain_frames(s, st, now, 0); /* markers, or the clock, may have come */
  if (spy_frame_find_section(f, SPY_SEC_MSGPROF, &sec))
    on_msgprof(s, st, now);
  if (spy_frame_find_section(f, SPY_SEC_BUILD, &sec))
    spy__rec_trace_build(st, s->upid, &s->build_seen, push_row, s);
  seal_old(s, now);
  flush_stage(s);
}

/* ---- sources ------------------------------------------------------------ */
static void *source_main(void *arg) {
  source *s = arg;
  while (!s->r->stop) {
    int rc = spy_consumer_poll(s->c, 50);
    s->cpu_ns = thread_cpu_ns();
    const spy_state *st = spy_consumer_state(s->c);
    s->connected = st->conn == SPY_CONN_CONNECTED;
    want_all_buffers(s, st);
    if (rc < 0)
      usleep(50000); /* a channel error: do not spin */
    if (rc < 0 || (s->live && (st->conn == SPY_CONN_LOST ||
                               st->conn == SPY_CONN_SEARCHING))) {
      end_source(s, mono_ns());
      if (s->r->d.all)
        break; /* that provider is gone; discovery adds new ones */
    }
  }
  /* Stopped with chunks waiting for their frames' rows: those stats are
   * a flush or so away; received for a bounded time, not abandoned. */
  uint64_t want = 0;
  for (uint32_t i = 0; i < s->nchunk_wait; i++)
    if ((uint64_t)s->chunk_wait[i].c[3].v.i > want)
      want = (uint64_t)s->chunk_wait[i].c[3].v.i;
  int64_t until = mono_ns() + STOP_WAIT_NS;
  while (s->nchunk_wait && (!s->have_written || s->frame_written < want) &&
         s->live && spy_consumer_state(s->c)->conn == SPY_CONN_CONNECTED &&
         mono_ns() < until && spy_consumer_poll(s->c, 50) >= 0)
    ;
  end_source(s, mono_ns());
  flush_stage(s);
  s->connected = 0;
  s->done = 1;
  return NULL;
}

int spy_recorder_add(spy_recorder *r, const char *want) {
  if (r->nsrc == MAX_SOURCES)
    return SPY_ENOSPC;
  source *s = calloc(1, sizeof *s);
  if (!s)
    return SPY_ENOMEM;
  s->r = r;
  if (want) {
    snprintf(s->want, sizeof s->want, "%s", want);
    s->has_want = 1;
  }
  memset(s->health_last, 0xff, sizeof s->health_last);
  spy_consumer_desc cd = {0};
  cd.want = s->has_want ? s->want : NULL;
  cd.features = r->d.features;
  cd.dir = r->d.dir;
  cd.connect = r->d.connect;
  cd.token = r->d.token;
  cd.remote = r->d.remote;
  cd.history = 64;
  cd.zone_frames = SPY_ZONE_FRAMES_MAX - 1;
  cd.zone_spans = 1u << 18;
  cd.recv_bytes = SPY_FRAME_MAX;
  cd.on_data = on_data;
  cd.on_data_user = s;
  if (r->has_bufs) {
    s->bufs = spy__rec_bufs_new(&r->bcfg);
    if (!s->bufs) {
      free(s);
      return SPY_ENOMEM;
    }
    cd.on_pixels = on_pixels;
    cd.buffers = r->bcfg.req; /* all: none until the metadata names them */
    cd.n_buffers = r->bcfg.n_req;
  }
  int rc = spy_consumer_create(&s->c, &cd);
  if (rc < 0) {
    spy__rec_bufs_free(s->bufs);
    free(s);
    return rc;
  }
  if (pthread_create(&s->thread, NULL, source_main, s) != 0) {
    spy_consumer_destroy(s->c);
    spy__rec_bufs_free(s->bufs);
    free(s);
    return SPY_ENOMEM;
  }
  s->started = 1;
  r->src[r->nsrc++] = s;
  return 0;
}

static void source_free(source *s) {
  if (!s)
    return;
  if (s->started)
    pthread_join(s->thread, NULL);
  spy_consumer_destroy(s->c);
  reset_provider(s);
  free(s->tracks);
  spy__rec_bufs_free(s->bufs);
  spy__rec_frames_free(s->held);
  for (uint32_t i = 0; i < s->nchunk_wait; i++)
    row_free(&s->chunk_wait[i]);
  free(s->chunk_wait);
  free(s);
}

/* ---- discovery for --all ------------------------------------------------ */
static int seen_id(spy_recorder *r, uint64_t id) {
  for (uint32_t i = 0; i < r->nseen; i++)
    if (r->seen_ids[i] == id)
      return 1;
  return 0;
}

static int post_query(spy_recorder *r) {
  uint8_t buf[64];
  spy_frame_writer w;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int rc = spy_frame_start(&w, buf, sizeof buf, SPY_MSG_PROVIDER_QUERY,
                           (uint64_t)ts.tv_sec * 1000u, 0, 0);
  if (rc < 0)
    return rc;
  spy_put_peer(&w, (uint64_t)mono_ns() ^ ((uint64_t)getpid() << 40), 0);
  rc = spy_frame_finish(&w);
  if (rc < 0)
    return rc;
  return spy_channel_post(r->disc, buf, (size_t)rc);
}

/* Ends the discovery channel (and the link under it: --all --connect). */
static void close_discovery(spy_recorder *r) {
  if (r->disc)
    spy_channel_close(r->disc);
  r->disc = NULL;
  if (r->link)
    r->remote->link_close(r->link);
  r->link = NULL;
}

/* The discovery channel: this host's bus, or the bridge's (connect)
 * through a link of its own. A bridge that cannot be reached is tried
 * again every 2 s (the sources already recorded reconnect by themselves);
 * its error is returned once. */
static int open_discovery(spy_recorder *r) {
  spy_channel_desc cd = {.name = SPY_DISCOVERY_CHANNEL, .dir = r->d.dir};
  if (r->d.connect) {
    int64_t now = mono_ns();
    if (now < (int64_t)r->next_link_ns)
      return 0;
    r->next_link_ns = (uint64_t)now + 2000000000ull;
    r->remote = r->d.remote ? r->d.remote : spy_channel_remote();
    if (!r->remote || !r->remote->link_open)
      return SPY_ENOTSUP;
    int rc = r->remote->link_open(&r->link, r->d.connect, r->d.token);
    if (rc < 0) {
      r->link = NULL;
      int first = rc != r->link_error;
      r->link_error = rc;
      return first ? rc : 0;
    }
    cd.ops = r->remote;
    cd.ops_arg = r->link;
    cd.ring_bytes = 64u << 10; /* queries only */
  }
  int rc = spy_channel_open(&r->disc, &cd);
  if (rc < 0) {
    r->disc = NULL;
    close_discovery(r);
    return rc;
  }
  r->link_error = 0;
  r->next_query_ns = 0; /* ask at once */
  return 0;
}

int spy_recorder_step(spy_recorder *r, int wait_ms) {
  if (!r->d.all) {
    usleep((useconds_t)wait_ms * 1000u);
    return 0;
  }
  if (!r->disc_buf && !(r->disc_buf = malloc(4096)))
    return SPY_ENOMEM;
  if (!r->disc) {
    int rc = open_discovery(r);
    if (!r->disc) {
      usleep((useconds_t)wait_ms * 1000u);
      return rc;
    }
  }
  int64_t now = mono_ns();
  if (now >= (int64_t)r->next_query_ns) {
    post_query(r); /* announces answer it; new providers announce too */
    r->next_query_ns = (uint64_t)now + 2000000000ull;
  }
  spy_recv_info info;
  int n = spy_channel_recv(r->disc, r->disc_buf, 4096, wait_ms, &info);
  while (n > 0 || n == SPY_ENOBUFS) {
    spy_frame f;
    spy_section sec;
    spy_provider_info p;
    if (n > 0 && spy_frame_decode(r->disc_buf, (size_t)n, &f, NULL) == 0 &&
        f.type == SPY_MSG_PROVIDER_ANNOUNCE &&
        spy_frame_find_section(&f, SPY_SEC_PROVIDER, &sec) &&
        spy_get_provider(&sec, &p) == 0 && !seen_id(r, p.id) &&
        r->nseen < sizeof r->seen_ids / sizeof r->seen_ids[0]) {
      r->seen_ids[r->nseen++] = p.id;
      char idhex[20];
      snprintf(idhex, sizeof idhex, "%016llx", (unsigned long long)p.id);
      spy_recorder_add(r, idhex);
    }
    n = spy_channel_recv(r->disc, r->disc_buf, 4096, 0, &info);
  }
  if (n < 0 && n != SPY_ETIMEDOUT && n != SPY_EAGAIN && r->d.connect) {
    close_discovery(r); /* the link broke: made again at the next step */
    return n;
  }
  return 0;
}

/* ---- create / destroy ---------------------------------------------------- */
int spy_recorder_create(spy_recorder **out, const spy_recorder_desc *d) {
  *out = NULL;
  if (!d || !d->db || !*d->db)
    return SPY_EINVAL;
  int pg = d->pg || strncmp(d->db, "postgres://", 11) == 0 ||
           strncmp(d->db, "postgresql://", 13) == 0;
  /* the buffers asked for, checked before a file is made */
  rec_bufs_cfg bc;
  int brc = spy__rec_bufs_cfg(&bc, d, pg ? NULL : d->db, 0);
  if (brc < 0)
    return brc;
  spy__rec_bufs_cfg_free(&bc);
  spy_recorder *r = calloc(1, sizeof *r);
  if (!r)
    return SPY_ENOMEM;
  r->d = *d;
  if (!r->d.features)
    r->d.features = SPY_REC_DEFAULT_FEATURES;
  if (brc == 0) /* images asked for: their feature too */
    r->d.features |= SPY_FEAT_BUFFERS;
  r->cap = d->queue_rows ? d->queue_rows : 131072;
  r->ops = pg ? &spy__rec_pg : &spy__rec_sqlite;
  /* PostgreSQL keeps rows: its users query with psql, which cannot load
   * our decoder (docs/recording.md) */
  r->zmode =
      pg ? SPY_RECORD_ZONES_ROWS
      : d->zones >= SPY_RECORD_ZONES_ROWS && d->zones <= SPY_RECORD_ZONES_BOTH
          ? d->zones
          : SPY_RECORD_ZONES_PACKED;
  r->next_id = 1;
  r->q = malloc((size_t)r->cap * sizeof *r->q);
  if (!r->q) {
    free(r);
    return SPY_ENOMEM;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->start_ns = mono_ns();
  r->db = r->ops->open(d->db, d->args, r->start_ns,
                       r->zmode == SPY_RECORD_ZONES_PACKED, &r->rec_id);
  if (!r->db) {
    free(r->q);
    free(r);
    return pg ? SPY_EIO : (access(d->db, F_OK) == 0 ? SPY_EEXIST : SPY_EIO);
  }
  /* (again with the recording id: PostgreSQL's default directory) */
  if (brc == 0) {
    brc = spy__rec_bufs_cfg(&r->bcfg, d, pg ? NULL : d->db, r->rec_id);
    if (brc < 0) {
      r->ops->close(r->db, 0);
      free(r->q);
      free(r);
      return brc;
    }
    r->has_bufs = 1;
  }
  if (pthread_create(&r->writer, NULL, writer_main, r) != 0) {
    r->ops->close(r->db, 0);
    free(r->q);
    free(r);
    return SPY_ENOMEM;
  }
  r->writer_started = 1;
  *out = r;
  return 0;
}

void spy_recorder_get_stats(spy_recorder *r, spy_recorder_stats *o) {
  memset(o, 0, sizeof *o);
  o->frames = r->frames;
  o->rows = r->rows;
  o->rows_lost = r->rows_lost;
  o->batches = r->batches;
  o->bytes = r->bytes;
  o->samples_lost = r->samples_lost;
  o->frames_lost = r->frames_lost;
  o->sources = r->nsrc;
  int64_t cpu = r->writer_cpu_ns;
  for (uint32_t i = 0; i < r->nsrc; i++) {
    if (r->src[i]->connected)
      o->connected++;
    cpu += r->src[i]->cpu_ns;
  }
  o->cpu_s = (double)cpu / 1e9;
  for (uint32_t i = 0; i < r->nsrc; i++) {
    uint64_t c, b, l;
    spy__rec_bufs_counts(r->src[i]->bufs, &c, &b, &l);
    o->chunks += c;
    o->chunk_bytes += b;
    o->chunks_lost += l;
  }
  o->recording_id = r->rec_id;
  o->error = r->error;
  o->zones = r->zones;
  o->blocks = r->blocks;
}

int spy_recorder_destroy(spy_recorder *r) {
  if (!r)
    return 0;
  r->stop = 1;
  for (uint32_t i = 0; i < r->nsrc; i++)
    source_free(r->src[i]);
  pthread_mutex_lock(&r->mu);
  r->stop_writer = 1;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (r->writer_started)
    pthread_join(r->writer, NULL);
  int rc = r->error;
  int crc = r->ops->close(r->db, mono_ns());
  if (!rc)
    rc = crc;
  for (uint32_t i = 0; i < r->n; i++)
    row_free(&r->q[(r->head + i) % r->cap]);
  close_discovery(r);
  free(r->disc_buf);
  spy__rec_bufs_cfg_free(&r->bcfg);
  free(r->q);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
  return rc;
}
