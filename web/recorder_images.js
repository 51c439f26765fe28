// recorder_images.js — the flight recorder's images (buffers.js): every
// cell of the buffer inspector keeps the images it received (raw frames
// as they came, VP9 frames as decoded), keyed by provider frame, at most
// HISTORY_IMAGES per cell and HISTORY_BYTES for all cells together, the
// oldest frame (of any cell) out first. A parked view shows, per cell, the
// newest image at or before the parked frame; while parked the image a
// cell shows is never evicted, nothing is evicted for the byte bound, and
// new images are kept only while there is room. Back live, the bound
// applies again.
//
// No DOM here (node tests it: test/web_recorder.test.mjs). The functions
// work on plain objects: a *track* (a cell) is {hist, histBytes, parked},
// hist = [{frame, w, h, rgba}] oldest first, parked = the image shown
// while parked (or null / {none}); the *pool* (the panel) is {histBytes,
// parkedFrame} (parkedFrame null while live).
export const HISTORY_BYTES = 64 * 1024 * 1024;
export const HISTORY_IMAGES = 256;

const size = (x) => x.w * x.h * 4;

// Index in track.hist of its oldest image not shown, or -1.
function oldestIndex(track) {
  const i = track.hist[0] === track.parked ? 1 : 0;
  return track.hist[i] ? i : -1;
}

// Room for `bytes` more images within the byte bound.
export function room(pool, bytes) { return pool.histBytes + bytes <= HISTORY_BYTES; }

// Drops track's oldest image not shown; false if there is none.
export function evictOldest(pool, track) {
  const i = oldestIndex(track);
  if (i < 0) return false;
  const [x] = track.hist.splice(i, 1);
  track.histBytes -= size(x);
  pool.histBytes -= size(x);
  return true;
}

// Evicts the oldest images of any of `tracks` beyond the byte bound
// (while live only: parked, record() adds only what fits).
export function trim(pool, tracks) {
  const all = [...tracks];
  while (pool.histBytes > HISTORY_BYTES && pool.parkedFrame === null) {
    let oldest = null, of = Infinity;
    for (const t of all) {
      const i = oldestIndex(t);
      if (i >= 0 && t.hist[i].frame < of) { oldest = t; of = t.hist[i].frame; }
    }
    if (!oldest || !evictOldest(pool, oldest)) break;
  }
}

// Keeps an image of `track` (one per frame, frames ascending); `tracks`:
// every track of the pool, for the byte bound. Returns false if it was not
// kept (an older or repeated frame, or no room while parked).
export function record(pool, track, tracks, frame, w, h, rgba) {
  const last = track.hist[track.hist.length - 1];
  if (last && last.frame >= frame) return false; // one image per frame
  const bytes = w * h * 4;
  if (pool.parkedFrame !== null && !room(pool, bytes)) return false;
  track.hist.push({ frame, w, h, rgba });
  track.histBytes += bytes;
  pool.histBytes += bytes;
  while (track.hist.length > HISTORY_IMAGES && evictOldest(pool, track)) { /* bound */ }
  trim(pool, tracks);
  return true;
}

// The newest image of track at or before `frame`, or null.
export function imageAt(track, frame) {
  for (let i = track.hist.length - 1; i >= 0; i--) if (track.hist[i].frame <= frame) return track.hist[i];
  return null;
}

// Forgets a track's images (its cell closed).
export function drop(pool, track) {
  pool.histBytes -= track.histBytes;
  track.hist = []; track.histBytes = 0;
}
