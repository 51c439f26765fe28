// web_recorder.test.mjs — the dashboard flight recorder's image store
// (web/recorder_images.js, used by web/buffers.js): at HISTORY_BYTES
// (64 MiB, all cells together) the oldest frame of any cell goes first,
// the per-cell image bound, and parking: the image a parked cell shows is
// never evicted, nothing is evicted for the byte bound while parked, new
// images are kept only while there is room, and back live the bound holds
// again. Images are sized, not allocated (the store counts w × h × 4).
// Run by test/web_recorder.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const R = await import(join(here, '..', 'web', 'recorder_images.js'));
const MiB = 1024 * 1024;

const pool = () => ({ histBytes: 0, parkedFrame: null });
const track = () => ({ hist: [], histBytes: 0, parked: null });
const frames = (t) => t.hist.map((x) => x.frame);
const sum = (ts) => ts.reduce((a, t) => a + t.hist.reduce((b, x) => b + x.w * x.h * 4, 0), 0);
// A 4 MiB image (1024 × 1024 RGBA8): 16 fill the bound.
const put = (p, t, ts, frame, w = 1024, h = 1024) => R.record(p, t, ts, frame, w, h, null);

test('the bound is 64 MiB and 256 images a cell', () => {
  assert.equal(R.HISTORY_BYTES, 64 * MiB);
  assert.equal(R.HISTORY_IMAGES, 256);
});

test('at 64 MiB the oldest image goes, exactly at the bound', () => {
  const p = pool(), a = track(), ts = [a];
  for (let f = 0; f < 16; f++) assert.ok(put(p, a, ts, f));
  assert.equal(p.histBytes, 64 * MiB); // at the bound: nothing out
  assert.deepEqual(frames(a), [...Array(16).keys()]);
  assert.ok(put(p, a, ts, 16)); // one more: frame 0 out
  assert.deepEqual(frames(a), [...Array(16).keys()].map((f) => f + 1));
  assert.equal(p.histBytes, 64 * MiB);
  assert.equal(a.histBytes, 64 * MiB);
  // a larger image evicts as many as it takes
  assert.ok(put(p, a, ts, 17, 2048, 2048)); // 16 MiB: four out
  assert.deepEqual(frames(a).slice(0, 2), [5, 6]);
  assert.equal(p.histBytes, 64 * MiB);
  assert.equal(sum(ts), p.histBytes);
});

test('the oldest frame of any cell goes first', () => {
  const p = pool(), a = track(), b = track(), ts = [a, b];
  for (let f = 0; f < 16; f++) put(p, f % 2 ? b : a, ts, f); // a: even, b: odd
  assert.equal(p.histBytes, 64 * MiB);
  put(p, b, ts, 17); // frame 0 (a's) out
  assert.deepEqual(frames(a), [2, 4, 6, 8, 10, 12, 14]);
  put(p, a, ts, 18); // frame 1 (b's) out
  assert.deepEqual(frames(b), [3, 5, 7, 9, 11, 13, 15, 17]);
  assert.equal(p.histBytes, 64 * MiB);
  assert.equal(a.histBytes + b.histBytes, p.histBytes);
  assert.equal(sum(ts), p.histBytes);
  // a cell closed: its bytes leave the pool
  R.drop(p, b);
  assert.equal(p.histBytes, a.histBytes);
  assert.equal(sum(ts), p.histBytes);
});

test('one image per frame, frames ascending', () => {
  const p = pool(), a = track(), ts = [a];
  assert.ok(put(p, a, ts, 5, 4, 4));
  assert.equal(put(p, a, ts, 5, 4, 4), false);
  assert.equal(put(p, a, ts, 3, 4, 4), false);
  assert.deepEqual(frames(a), [5]);
  assert.equal(p.histBytes, 64);
});

test('at most 256 images a cell, oldest out', () => {
  const p = pool(), a = track(), ts = [a];
  for (let f = 0; f < 300; f++) put(p, a, ts, f, 8, 8);
  assert.equal(a.hist.length, 256);
  assert.equal(a.hist[0].frame, 44);
  assert.equal(p.histBytes, 256 * 8 * 8 * 4);
});

test('parked: nothing evicted for the bound, new images only while there is room', () => {
  const p = pool(), a = track(), b = track(), ts = [a, b];
  for (let f = 0; f < 12; f++) put(p, a, ts, f); // 48 MiB
  // park on frame 3: a shows its image of frame 3
  p.parkedFrame = 3;
  a.parked = R.imageAt(a, 3);
  assert.equal(a.parked.frame, 3);
  assert.equal(R.imageAt(b, 3), null); // b holds none: it shows nothing
  for (let f = 12; f < 16; f++) assert.ok(put(p, b, ts, f)); // room: kept
  assert.equal(p.histBytes, 64 * MiB);
  assert.equal(put(p, b, ts, 16), false); // full while parked: not kept
  assert.equal(put(p, a, ts, 17, 1, 1), false); // not even a small one
  assert.deepEqual(frames(a), [...Array(12).keys()]); // nothing evicted
  assert.equal(p.histBytes, 64 * MiB);
  assert.equal(sum(ts), p.histBytes);
  // back live: the bound applies again, the oldest out first
  p.parkedFrame = null;
  a.parked = null;
  put(p, b, ts, 18);
  assert.deepEqual(frames(a).slice(0, 1), [1]);
  assert.equal(p.histBytes, 64 * MiB);
});

test('parked on the oldest image: the cell bound evicts around it', () => {
  const p = pool(), a = track(), ts = [a];
  for (let f = 0; f < 256; f++) put(p, a, ts, f, 8, 8);
  p.parkedFrame = 0;
  a.parked = R.imageAt(a, 0);
  assert.equal(a.parked.frame, 0);
  for (let f = 256; f < 266; f++) assert.ok(put(p, a, ts, f, 8, 8));
  assert.equal(a.hist.length, 256);
  assert.equal(a.hist[0], a.parked); // the image shown stays
  assert.equal(a.hist[1].frame, 11); // 1..10 went instead
  // trim while parked evicts nothing, even above the bound
  const big = track();
  big.hist.push({ frame: 0, w: 8192, h: 4096, rgba: null });
  big.histBytes = p.histBytes = 128 * MiB + a.histBytes;
  R.trim(p, [a, big]);
  assert.equal(big.hist.length, 1);
  p.parkedFrame = null;
  a.parked = null;
  R.trim(p, [a, big]); // live: the oldest frames go until under the bound
  assert.equal(big.hist.length, 0); // its frame 0 was among the oldest
  assert.ok(p.histBytes <= 64 * MiB);
  assert.equal(sum([a, big]), p.histBytes);
});
