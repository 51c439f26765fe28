/* rec_frames.c — frame rows held until their time is known (rec_frames.h).
 *
 * A frame's time is its zone frame marker (when the provider's frame
 * began, on its clock) mapped with the connection's clock offset. Both
 * can come later than the frame's stats sample: the marker travels in a
 * ZONES section that may leave the provider after the flush that carried
 * the sample, and the offset is 0 until the first clock sync has its
 * result. A row written before either would be on another time base
 * (the arrival estimate, or the provider's clock unmapped): the frame
 * table jumped by that difference at every batch's last frames and once
 * more by the offset when the sync finished. So samples wait here, in
 * order, and are written once both are known; the arrival estimate is
 * the fallback only for a frame whose marker can no longer come (the
 * state's markers passed it), one held longer than the clock sync may
 * take, and the held ones when the provider's recording ends. */
#include "record/rec_frames.h"

#include <stdlib.h>
#include <string.h>

#include "record/rec.h"

#define HOLD_MAX 8192 /* samples held at most (then the oldest goes) */
/* Longer than the recorder waits for a clock sync (CLOCK_WAIT_NS) */
#define HOLD_NS 6000000000LL

struct rec_frames {
  rec_frame_sample *s; /* ring */
  uint32_t cap, head, n;
};

rec_frames *spy__rec_frames_new(void) { return calloc(1, sizeof(rec_frames)); }

void spy__rec_frames_free(rec_frames *q) {
  if (!q)
    return;
  free(q->s);
  free(q);
}

/* The marker of `frame` in the state (1, *start set), 0 if it is not
 * there; *newest: the newest frame the state has a marker of (0, *any 0:
 * none). */
static int marker(const spy_state *st, uint64_t frame, uint64_t *start,
                  uint64_t *newest, int *any) {
  *any = 0;
  for (uint32_t age = 0; age < st->zones.n_frames; age++) {
    uint64_t f, s, e;
    if (!spy_state_zone_frame(st, age, &f, &s, &e))
      break;
    if (!age) {
      *newest = f;
      *any = 1;
    }
    if (f == frame) {
      *start = s;
      return 1;
    }
    if (f < frame)
      break;
  }
  return 0;
}

static void write_one(const rec_frame_sample *p, int64_t ts, int64_t upid,
                      void (*emit)(void *ctx, rec_row *r), void *ctx) {
  rec_row r;
  memset(&r, 0, sizeof r);
  r.stmt = S_FRAME;
  cint(&r, upid);
  cint(&r, (int64_t)p->frame);
  cint(&r, ts);
  cdbl(&r, p->cpu_ms);
  cdbl(&r, p->gpu_ms); /* NAN: NULL, no GPU timing */
  cdbl(&r, p->fps);
  emit(ctx, &r);
  for (uint32_t c = 0; c < p->n_counters; c++) {
    if (!p->track[c])
      continue;
    memset(&r, 0, sizeof r);
    r.stmt = S_COUNTER;
    cint(&r, ts);
    cint(&r, p->track[c]);
    cdbl(&r, (double)p->counter[c]);
    emit(ctx, &r);
  }
}

/* Writes the oldest held sample: with its marker when `use_marker` and
 * the state has it, else with its estimate. */
static void pop(rec_frames *q, const spy_state *st, int use_marker,
                int64_t upid, void (*emit)(void *ctx, rec_row *r), void *ctx) {
  const rec_frame_sample *p = &q->s[q->head];
  uint64_t start = 0, newest = 0;
  int any;
  int64_t ts = p->est;
  if (use_marker && marker(st, p->frame, &start, &newest, &any))
    ts = spy_state_zone_local_ns(st, start);
  write_one(p, ts, upid, emit, ctx);
  q->head = (q->head + 1) % q->cap;
  q->n--;
}

void spy__rec_frames_add(rec_frames *q, const rec_frame_sample *s,
                         const spy_state *st, int64_t upid,
                         void (*emit)(void *ctx, rec_row *r), void *ctx) {
  if (q->n == q->cap && q->cap < HOLD_MAX) {
    uint32_t cap = q->cap ? q->cap * 2 : 64;
    rec_frame_sample *n = malloc(cap * sizeof *n);
    if (n) {
      for (uint32_t i = 0; i < q->n; i++)
        n[i] = q->s[(q->head + i) % q->cap];
      free(q->s);
      q->s = n;
      q->cap = cap;
      q->head = 0;
    }
  }
  if (q->n == q->cap) {
    if (!q->cap) { /* no memory at all: written as it comes */
      write_one(s, s->est, upid, emit, ctx);
      return;
    }
    pop(q, st, 1, upid, emit, ctx);
  }
  q->s[(q->head + q->n) % q->cap] = *s;
  q->n++;
}

void spy__rec_frames_stub(const spy_state *st, int zones, int settled,
                          uint64_t frame, int64_t est, int64_t upid,
                          void (*emit)(void *ctx, rec_row *r), void *ctx) {
  uint64_t start = 0, newest = 0;
  int any;
  int64_t ts = est;
  if (zones && settled && marker(st, frame, &start, &newest, &any))
    ts = spy_state_zone_local_ns(st, start);
  rec_row r;
  memset(&r, 0, sizeof r);
  r.stmt = S_FRAME;
  cint(&r, upid);
  cint(&r, (int64_t)frame);
  cint(&r, ts);
  for (int i = 0; i < 3; i++)
    cnull(&r); /* cpu_ms, gpu_ms, fps: no sample */
  emit(ctx, &r);
}

void spy__rec_frames_drain(rec_frames *q, const spy_state *st, int zones,
                           int settled, int final, int64_t now, int64_t upid,
                           void (*emit)(void *ctx, rec_row *r), void *ctx) {
  while (q->n) {
    const rec_frame_sample *p = &q->s[q->head];
    uint64_t start, newest = 0;
    int any;
    int have = zones && marker(st, p->frame, &start, &newest, &any);
    if (!zones || final || (settled && have) ||
        (settled && any && newest > p->frame) || now - p->seen > HOLD_NS) {
      pop(q, st, zones && settled, upid, emit, ctx);
      continue;
    }
    break; /* the marker (or the clock) is still to come */
  }
}
