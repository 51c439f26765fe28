// web_model.test.mjs — web/model.js, the page's state and flight recorder,
// on data frames built here: the state as of any frame is rebuilt from
// the nearest registry checkpoint plus the deltas after it, keyed by the
// batch's last frame; the ring is bounded; recording goes on while a view
// is parked, and a pinned frame outlives its place in the ring.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { Model, describe } = await import(join(here, '..', 'web', 'model.js'));
const { DELTA, KIND, FRAME_CHECKPOINT, FRAME_SNAPSHOT } = await import(join(here, '..', 'web', 'wire.js'));

// A decoded data frame: a batch [start, start+count) whose values are
// v(start+count−1), a FULL list every `every` batches.
function batch(start, count, full, extra = {}) {
  const last = start + count - 1;
  const z = (n) => new Float32Array(n).fill(1);
  return {
    f: { flags: full ? FRAME_CHECKPOINT : 0, seq: start, ts: 1000 + start },
    d: {
      stats: { startFrame: start, count, nCounters: 1, fps: z(count).fill(60), cpu: z(count),
        gpu: z(count), counters: [Uint32Array.from({ length: count }, (_, i) => start + i)] },
      registry: { full, entries: [
        { state: DELTA.SET, kind: KIND.FLOAT, key: 'x', value: last },
        ...(last % 2 ? [{ state: DELTA.SET, kind: KIND.INT, key: 'odd', value: last }] : []),
      ] },
      ...extra,
    },
  };
}

function feed(m, from, n, per = 10, every = 5) {
  for (let k = 0; k < n; k++) {
    const b = batch(from + k * per, per, k % every === 0);
    m.apply(b.f, b.d, b.f.ts);
  }
}

test('the state as of a frame: checkpoint + deltas, keyed by the batch end', () => {
  const m = new Model(1024);
  m.apply({ flags: FRAME_SNAPSHOT, seq: 0, ts: 0 }, { schema: ['draws'] }, 0);
  feed(m, 0, 40); // frames 0..399, batches end at 9, 19, …
  assert.equal(m.newestFrame(), 399);
  assert.equal(m.registry.get('x').value, 399);
  for (const F of [9, 10, 15, 19, 123, 250, 398]) {
    const at = m.at(F);
    const end = Math.floor((F + 1) / 10) * 10 - 1;
    assert.equal(at.packet.end, end, `packet for frame ${F}`);
    assert.equal(at.registry.get('x').value, end, `x at ${F}`);
    assert.ok(at.complete, 'rebuilt from a checkpoint');
    assert.equal(m.counter(0, at.index), F, 'the sample of that very frame');
  }
  // `odd` was set by every batch (ends are odd) and survives deltas.
  assert.equal(m.at(250).registry.get('odd').value, 249);
});

test('bounded: the ring keeps the last capacity frames, packets are pruned', () => {
  const m = new Model(128);
  feed(m, 0, 100); // 1000 frames
  assert.equal(m.len, 128);
  assert.equal(m.oldestFrame(), 1000 - 128);
  assert.ok(m.packets.length <= 128 / 10 + 10, `${m.packets.length} packets kept`);
  const at = m.at(m.oldestFrame() + 5);
  assert.ok(at.complete, 'a checkpoint at or before the oldest frame is kept');
  assert.equal(at.registry.get('x').value, Math.floor((m.oldestFrame() + 6) / 10) * 10 - 1);
});

test('recording goes on while parked; a pin outlives its frame', () => {
  const m = new Model(64);
  m.apply({ flags: FRAME_SNAPSHOT, seq: 0, ts: 0 }, { schema: ['draws'] }, 0);
  feed(m, 0, 6); // 0..59
  const pin = m.pin(35);
  assert.equal(pin.registry.get('x').value, 29);
  assert.equal(pin.sample.ctr[0], 35, 'the sample of frame 35');
  assert.equal(pin.sample.spark.length, 36, 'the CPU series up to frame 35');
  feed(m, 60, 20); // pushes 0..59 out of a 64-frame ring
  assert.equal(m.newestFrame(), 259, 'no gap: every frame was recorded');
  assert.equal(m.oldestFrame(), 259 - 63);
  assert.equal(m.find(35), -1, 'frame 35 scrolled out');
  assert.equal(pin.registry.get('x').value, 29, 'the pin still holds it');
  assert.equal(pin.sample.ctr[0], 35);
  const at = m.at(m.oldestFrame() + 3);
  assert.ok(at.complete);
  assert.equal(at.registry.get('x').value, Math.floor((m.oldestFrame() + 4) / 10) * 10 - 1);
});

test('FULL lists clear what they do not list; CLEARED resets', () => {
  const m = new Model(64);
  m.apply({ flags: 0, seq: 1, ts: 1 }, { registry: { full: true, entries: [
    { state: DELTA.SET, kind: KIND.BOOL, key: 'a', value: true },
    { state: DELTA.SET, kind: KIND.FLOAT3, key: 'v', value: [1, 2, 3] }] } }, 1);
  m.apply({ flags: 0, seq: 2, ts: 2 }, { registry: { full: false, entries: [
    { state: DELTA.CLEARED, kind: 0, key: 'a', value: null }] } }, 2);
  assert.ok(!m.registry.has('a'));
  m.apply({ flags: 0, seq: 3, ts: 3 }, { registry: { full: true, entries: [
    { state: DELTA.META, kind: KIND.FLOAT, key: 'w', value: null }] } }, 3);
  assert.deepEqual([...m.registry.keys()], ['w']);
  assert.equal(m.registry.get('w').hasValue, false);
});

test('describe: min / p50 / mean / p95 / p99 / max and 32 bins', () => {
  const d = describe(Array.from({ length: 100 }, (_, i) => i + 1).concat([NaN]));
  assert.deepEqual([d.n, d.min, d.p50, d.mean, d.p95, d.p99, d.max], [100, 1, 50, 50.5, 95, 99, 100]);
  assert.equal(d.hist.length, 32);
  assert.equal(d.hist.reduce((a, b) => a + b, 0), 100);
});
