/* rec_frames.h — the recorder's frame rows held until their time is known
 * (rec_frames.c): a provider's stats sample arrives before (or without)
 * the zone frame marker that says when its frame began, and before the
 * connection's clock sync has the offset that maps that marker onto the
 * recording's clock. */
#ifndef SPY_REC_FRAMES_H
#define SPY_REC_FRAMES_H

#include <stdint.h>

#include "spyglass/consumer.h"

/* One sample of a stats batch: the frame row and its counter rows. */
typedef struct rec_frame_sample {
  uint64_t frame;
  int64_t est;  /* its time estimated back from the batch's arrival */
  int64_t seen; /* when it arrived (recording clock) */
  double cpu_ms, gpu_ms, fps; /* gpu_ms NAN: no GPU timing */
  uint32_t n_counters;
  uint32_t counter[SPY_STATS_MAX_COUNTERS];
  int64_t track[SPY_STATS_MAX_COUNTERS]; /* the counters' tracks (0: none) */
} rec_frame_sample;

typedef struct rec_frames rec_frames; /* per source; one thread */

struct rec_row;
/* Returns a queue or NULL (out of memory). */
rec_frames *spy__rec_frames_new(void);
void spy__rec_frames_free(rec_frames *q); /* NULL ok; held rows are lost */
/* Holds one sample (copied). A full queue first writes its oldest (as
 * spy__rec_frames_drain with final would). */
void spy__rec_frames_add(rec_frames *q, const rec_frame_sample *s,
                         const spy_state *st, int64_t upid,
                         void (*emit)(void *ctx, struct rec_row *r), void *ctx);
/* Writes the held samples, oldest first, whose time is known: a frame's
 * ts is its zone frame marker mapped with the clock offset once the
 * clock has settled (`settled`); with zones not recorded (`zones` 0) it
 * is the estimate at once; a frame whose marker cannot come any more
 * (the state's markers passed it) or that waited longer than the clock
 * may take gets the estimate, as every frame does at `final` (the
 * provider's recording ends). Each frame row and its counter rows share
 * the one ts. */
void spy__rec_frames_drain(rec_frames *q, const spy_state *st, int zones,
                           int settled, int final, int64_t now, int64_t upid,
                           void (*emit)(void *ctx, struct rec_row *r),
                           void *ctx);

/* Writes a frame row for `frame` whose stats sample never came (a buffer
 * chunk names it, the provider's recording ended before the sample):
 * cpu_ms, gpu_ms and fps NULL, ts its zone frame marker as above when
 * known, else `est`. */
void spy__rec_frames_stub(const spy_state *st, int zones, int settled,
                          uint64_t frame, int64_t est, int64_t upid,
                          void (*emit)(void *ctx, struct rec_row *r),
                          void *ctx);

#endif
