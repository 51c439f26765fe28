// web_zones_state.test.mjs — the page's zone state (web/zones_state.js) and
// the panel's self-time helper on golden ZONES frames written by the C
// encoder (test/web_helper.c golden): spans, nesting, self time, an end
// before join, unknown locations, dropped counts. Run by test/web_zones.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wire = await import(join(here, '..', 'web', 'wire.js'));
const { ZoneState } = await import(join(here, '..', 'web', 'zones_state.js'));
const dir = process.env.SPY_GOLDEN_DIR;
const frame = (n) => {
  const f = wire.decodeFrame(new Uint8Array(readFileSync(join(dir, `${n}.bin`))));
  return wire.decodeAll(f).zones;
};
const base = 123456789012345;

test('the full section rebuilds nested spans with self times', () => {
  const z = new ZoneState();
  z.apply(frame('zones_full'));
  assert.equal(z.locs.get(17).name, 'substep ünï');
  assert.equal(z.locs.get(16).color, 0x3080ff);
  const t = z.threads.get(1);
  assert.equal(t.name, 'frame');
  assert.equal(t.dropped, 3);
  assert.equal(z.dropped, 3);
  assert.deepEqual(t.spans.map((s) => [s.loc, s.depth, s.start - base, s.end - s.start]),
    [[16, 0, 10, 8999999991], [17, 1, 300, 5000000], [65535, 1, 5000301, 8994999699]]);
  assert.equal(t.open.length, 0);
  assert.deepEqual(z.frames, [{ frame: 9007199254740000, start: base + 10 }]);
  assert.equal(z.spans, 3);
  // Sums of the second each span ended in.
  const l16 = z.locs.get(16);
  assert.equal(l16.cur.calls, 1);
  assert.equal(l16.cur.self, 8999999991 - 5000000 - 8994999699);
  assert.ok(z.threads.has(2) && z.threads.get(2).spans.length === 0);
});

test('a delta section: an end before join is counted, an unknown location kept open', () => {
  const z = new ZoneState();
  z.apply(frame('zones_full'));
  z.apply(frame('zones_delta'));
  const d = z.threads.get(7);
  assert.equal(d.name, 'device');
  assert.ok(d.gone);
  assert.equal(d.unmatched, 1);
  assert.equal(z.unmatched, 1);
  assert.equal(d.spans.length, 1);
  assert.equal(d.spans[0].loc, 300);
  assert.equal(d.spans[0].end, 0);
  assert.equal(z.frames.length, 2);
  assert.equal(z.frame(0).frame, 5);
  assert.equal(z.frame(1).end, base + 1000000);
  // A reset on thread 1 (its flags) cuts nothing: nothing was open.
  assert.equal(z.cut, 0);
});

test('a lost frame cuts the open zones', () => {
  const z = new ZoneState();
  z.apply(frame('zones_delta'));
  z.apply(frame('zones_events_ok'), 1);
  assert.equal(z.cut, 1);
  assert.equal(z.threads.get(7).spans[0].flags & 1, 1);
});

test('the panel\'s self time and frame sums', async () => {
  // zones.js touches the DOM only in its class: the helpers are pure.
  globalThis.document ??= undefined;
  const { withSelf, frameSums } = await import(join(here, '..', 'web', 'zones.js'));
  const z = new ZoneState();
  z.apply(frame('zones_full'));
  const t = z.threads.get(1);
  const self = withSelf(t.spans).map(([, s]) => s);
  assert.deepEqual(self, [8999999991 - 5000000 - 8994999699, 5000000, 8994999699]);
  const s = frameSums([{ spans: t.spans }]);
  assert.equal(s.get(17).total, 5000000);
  assert.equal(s.get(16).calls, 1);
});

test('mutated ZONES frames: the JS decoder accepts and refuses exactly what C does', async () => {
  const { execFileSync } = await import('node:child_process');
  const { mkdtempSync, writeFileSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { decodeZones } = await import(join(here, '..', 'web', 'wire_zones.js'));
  const helper = process.env.SPY_HELPER;
  assert.ok(helper, 'SPY_HELPER not set (run test/web_zones.sh)');
  const out = mkdtempSync(join(tmpdir(), 'spy-zfuzz-'));
  let x = 0x2545f491;
  const rnd = (n) => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) % n; };
  const js = new Map();
  try {
    for (const name of ['zones_full', 'zones_delta', 'zones_events_ok']) {
      const base = new Uint8Array(readFileSync(join(dir, `${name}.bin`)));
      for (let k = 0; k < 1500; k++) {
        const b = base.slice();
        const dv = new DataView(b.buffer);
        for (let e = 1 + rnd(3); e > 0; e--) {
          const what = rnd(4);
          const o = 40 + rnd(b.length - 40);
          if (what === 0) b[o] = rnd(256);
          else if (what === 1) b[o] ^= 1 << rnd(8);
          else if (what === 2 && o + 4 <= b.length) dv.setUint32(o & ~3, rnd(300), true);
          else if (what === 3) dv.setUint32(36, rnd(dv.getUint32(36, true) + 1), true);
        }
        const id = `${name}_${k}`;
        writeFileSync(join(out, `${id}.bin`), b);
        let r = 'ok';
        try {
          const f = wire.decodeFrame(b);
          for (const s of f.sections) if (s.id === wire.SEC.ZONES) decodeZones(f, s);
        } catch (err) {
          assert.ok(err instanceof wire.WireError, `${id}: ${err}`);
          r = err.code;
        }
        js.set(id, r);
      }
    }
    const c = new Map(execFileSync(helper, ['zcheck', out], { encoding: 'utf8', maxBuffer: 1 << 24 })
      .trim().split('\n').map((l) => l.split(' ')));
    let ok = 0, refused = 0;
    for (const [id, r] of js) {
      assert.equal(r, c.get(id), `${id}: JS ${r}, C ${c.get(id)}`);
      if (r === 'ok') ok++; else refused++;
    }
    assert.ok(ok > 100 && refused > 100, `${ok} accepted, ${refused} refused`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('a zone open for long stays in the spans overlapping a later range', () => {
  const z = new ZoneState();
  z.locs.set(16, { id: 16, name: 'long' });
  const t = z.thread(1);
  z.begin(t, 100, 16);
  for (let i = 0; i < 200; i++) { z.begin(t, 1000 + i * 10, 16); z.end(t, 1005 + i * 10); }
  const [o] = z.overlapping(50000, 0);
  assert.deepEqual(o.spans.map((s) => s.start), [100]);
  const [w] = z.overlapping(1000, 1020);
  assert.deepEqual(w.spans.map((s) => [s.start, s.depth]), [[100, 0], [1000, 1], [1010, 1]]);
});

test('an end a little behind the newest of its location counts in the second before', () => {
  // Blocks of one section come thread after thread: thread 2's zone ended
  // in second 1 although thread 1's, applied first, ended in second 2.
  const z = new ZoneState();
  z.locs.set(16, { id: 16, name: 'shared' });
  const a = z.thread(1), b = z.thread(2);
  z.begin(a, 1.9e9, 16); z.end(a, 2.1e9);
  z.begin(b, 1.5e9, 16); z.end(b, 1.6e9);
  z.latestNs = 2.5e9; // second 2 in progress: second 1 is b's
  assert.deepEqual([z.lastSecond(z.locs.get(16)).calls, z.lastSecond(z.locs.get(16)).total], [1, 1e8]);
  z.latestNs = 3.5e9; // second 2 whole: a's, not lost to b's
  assert.deepEqual([z.lastSecond(z.locs.get(16)).calls, z.lastSecond(z.locs.get(16)).total], [1, 2e8]);
});
