/* rec_zones.c — the packed zones of a recording read back in order:
 * the zone_block rows of one recording, streamed from rec_read.c's query
 * ordered by (track_id, ts0) and merged by zblock.c, so export and diff
 * see the zones as the rows' ORDER BY track_id, ts, depth would give
 * them, holding a few decoded blocks at a time. */
#include <stdio.h>

#include "record/rec.h"
#include "record/zblock.h"

int spy__rec_has_blocks(rec_rd *rd) {
  if (!rd->ops->blob)
    return 0; /* PostgreSQL recordings keep zones as rows */
  rec_q q;
  spy__rq_prep(&q, rd,
               "SELECT count(*) FROM (SELECT 1 FROM zone_block WHERE "
               "recording_id = ?1 LIMIT 1)");
  spy__rq_bind(&q, 1, rd->rec_id);
  int n = spy__rq_step(&q) ? (int)spy__rq_i64(&q, 0) : 0;
  if (q.failed) /* a recording older than zone_block: no blocks */
    return 0;
  while (spy__rq_step(&q))
    ;
  return n > 0;
}

typedef struct fetch_st {
  rec_q q;
  int64_t blocks;
} fetch_st;

static int fetch(void *user, int64_t *track, int64_t *ts0, const void **blob,
                 size_t *len) {
  fetch_st *f = user;
  if (!spy__rq_step(&f->q))
    return f->q.failed ? SPY_EIO : 0;
  *track = spy__rq_i64(&f->q, 0);
  *ts0 = spy__rq_i64(&f->q, 1);
  *blob = f->q.rd->ops->blob(f->q.rd->st, 2, len);
  f->blocks++;
  return 1;
}

int spy__rec_zones_each(rec_rd *rd, int64_t from, int64_t to, rec_zone_fn fn,
                        void *user) {
  if (!rd->ops->blob)
    return 0;
  fetch_st f = {0};
  /* a block holds starts in [ts0, ts1]: those outside the range are
   * never read */
  spy__rq_prep(&f.q, rd,
               "SELECT track_id, ts0, data FROM zone_block WHERE "
               "recording_id = ?1 AND ts1 >= ?2 AND ts0 <= ?3 "
               "ORDER BY track_id, ts0");
  spy__rq_bind(&f.q, 1, rd->rec_id);
  spy__rq_bind(&f.q, 2, from);
  spy__rq_bind(&f.q, 3, to);
  spy_zb_merge m;
  spy__zb_merge_init(&m, fetch, &f);
  int rc, stop = 0;
  int64_t track;
  spy_zb_zone z;
  while ((rc = spy__zb_merge_next(&m, &track, &z)) == 1) {
    if (z.ts < from || z.ts > to)
      continue;
    if ((stop = fn(user, track, &z)) != 0)
      break;
  }
  if (rc == SPY_EBADVALUE)
    fprintf(stderr, "spyglass: zone_block %lld of recording %lld is corrupt\n",
            (long long)f.blocks, (long long)rd->rec_id);
  else if (rc == SPY_EIO)
    fprintf(stderr, "spyglass: reading zone_block: %s\n",
            rd->ops->errmsg(rd->st));
  spy__zb_merge_free(&m);
  /* the query may still be open (fn stopped it): finish it */
  while (!f.q.failed && f.q.started && spy__rq_step(&f.q))
    ;
  return rc < 0 ? rc : stop;
}
