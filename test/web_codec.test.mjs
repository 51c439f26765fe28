// web_codec.test.mjs — web/wire.js against golden frames written by the C
// encoder (test/web_helper.c golden): every frame decodes to what the C
// decoder read from it, field by field, and every malformed one is refused
// with the C decoder's error code and offset. Run by test/web_codec.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wire = await import(join(here, '..', 'web', 'wire.js'));
const dir = process.env.SPY_GOLDEN_DIR;
if (!dir) throw new Error('SPY_GOLDEN_DIR not set (run test/web_codec.sh)');

const names = readdirSync(dir).filter((f) => f.endsWith('.bin'))
  .map((f) => f.slice(0, -4)).sort();

// Deep comparison where the C side wrote null for NaN and numbers for the
// JS typed arrays; blobs (Uint8Array) compare as arrays of bytes.
function same(actual, expected, path) {
  if (expected === null) {
    assert.ok(actual === null || Number.isNaN(actual),
      `${path}: ${actual} where C has null/NaN`);
    return;
  }
  if (Array.isArray(expected)) {
    const a = Array.from(actual);
    assert.equal(a.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => same(a[i], e, `${path}[${i}]`));
    return;
  }
  if (typeof expected === 'object') {
    for (const k of Object.keys(expected)) same(actual?.[k], expected[k], `${path}.${k}`);
    return;
  }
  if (typeof expected === 'number' && typeof actual === 'number') {
    // Float32 columns (fps/cpu/gpu) round; everything else is exact.
    if (Number.isInteger(expected) || !path.match(/\.(fps|cpu|gpu)\[/)) {
      assert.equal(actual, expected, path);
    } else {
      assert.ok(Math.abs(actual - expected) <= Math.abs(expected) * 1e-6,
        `${path}: ${actual} vs ${expected}`);
    }
    return;
  }
  assert.equal(actual, expected, path);
}

test('golden frames exist', () => {
  assert.ok(names.length >= 10, `only ${names.length} golden frames`);
  for (const n of ['data_full', 'subscribe', 'announce', 'ack', 'clock']) {
    assert.ok(names.includes(n), n);
  }
});

for (const name of names) {
  test(`frame ${name} decodes as the C decoder does`, () => {
    const bytes = new Uint8Array(readFileSync(join(dir, `${name}.bin`)));
    const want = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
    if (want.error) {
      assert.throws(() => wire.decodeFrame(bytes), (e) => {
        assert.ok(e instanceof wire.WireError, String(e));
        assert.equal(e.code, want.error);
        assert.equal(e.offset, want.offset, 'error offset');
        return true;
      });
      return;
    }
    const f = wire.decodeFrame(bytes);
    for (const k of ['type', 'typeName', 'ts', 'version', 'flags', 'seq', 'len']) {
      assert.equal(f[k], want[k], k);
    }
    assert.deepEqual(f.sections.map((s) => ({ id: s.id, len: s.len })), want.sections);
    if (want.sectionError) {
      assert.throws(() => wire.decodeAll(f), (e) => e.code === want.sectionError.error);
      return;
    }
    const got = wire.decodeAll(f);
    for (const [k, v] of Object.entries(want.decoded)) {
      const key = k === 'health' ? null : k;
      if (key === null) {
        assert.equal(got.health.n, v.n);
        same(wire.HEALTH_FIELDS.map((h) => got.health.values[h]), v.values, 'health');
      } else {
        assert.ok(got[k] !== undefined, `section ${k} missing`);
        same(got[k], v, k);
      }
    }
    // Sections the C side skipped as unknown are skipped here too.
    const known = new Set(Object.keys(want.decoded));
    for (const s of f.sections) {
      const n = wire.sectionName(s.id);
      if (!n) assert.ok(got.unknown.includes(s.id));
      else if (n !== 'frame' && n !== 'stats_schema') assert.ok(known.has(n), n);
    }
  });
}

test('the JS encoder writes what the C golden subscribe holds', () => {
  const want = JSON.parse(readFileSync(join(dir, 'subscribe.json'), 'utf8'));
  const s = want.decoded.subscription;
  const mine = wire.encodeSubscribe({
    consumer: s.consumer, features: s.features, registry: s.registry,
    buffers: s.buffers,
  });
  const c = new Uint8Array(readFileSync(join(dir, 'subscribe.bin')));
  // Same bytes but the header's timestamp (bytes 8..16).
  assert.equal(mine.length, c.length);
  assert.deepEqual(Array.from(mine.subarray(16)), Array.from(c.subarray(16)));
  assert.equal(mine[4], c[4]);
});

test('peer messages round-trip', () => {
  const b = wire.encodePeerMsg(wire.MSG.ACK, '8000000000000001', 0x104e);
  const c = new Uint8Array(readFileSync(join(dir, 'ack.bin')));
  assert.deepEqual(Array.from(b.subarray(16)), Array.from(c.subarray(16)));
  const f = wire.decodeFrame(b);
  assert.equal(wire.decodePeer(f, f.sections[0]).id, '8000000000000001');
});

test('link records: hello, frame, parse', () => {
  const h = wire.encodeHello('tok');
  assert.equal(h.length, 8 + 12 + 3);
  assert.equal(new DataView(h.buffer).getUint32(8, true), 0x4c595053);
  const frame = new Uint8Array(readFileSync(join(dir, 'ack.bin')));
  const rec = wire.encodeLinkFrame(5, frame);
  const r = wire.parseLink(rec);
  assert.equal(r.op, wire.LINK.FRAME);
  assert.equal(r.chan, 5);
  assert.equal(r.lost, 0);
  assert.deepEqual(Array.from(r.frame), Array.from(frame));
  assert.throws(() => wire.parseLink(rec.subarray(0, rec.length - 1)));
  const bad = rec.slice(); bad[5] = 1;
  assert.throws(() => wire.parseLink(bad), (e) => e.code === 'EBADHEADER');
});

test('mutated frames: a WireError or a decoding, never another exception', () => {
  // A small deterministic fuzz (xorshift): flip bytes, cut the tail,
  // rewrite length words of the golden frames.
  let x = 0x9e3779b9;
  const rnd = (n) => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) % n; };
  let decoded = 0, refused = 0;
  for (const name of names) {
    const base = new Uint8Array(readFileSync(join(dir, `${name}.bin`)));
    for (let k = 0; k < 1500; k++) {
      let b = base.slice();
      const edits = 1 + rnd(4);
      for (let e = 0; e < edits; e++) {
        const what = rnd(3);
        if (what === 0 && b.length) b[rnd(b.length)] = rnd(256);
        else if (what === 1 && b.length > 4) {
          const o = rnd(b.length - 3) & ~3;
          new DataView(b.buffer).setUint32(o, rnd(1 << 16), true);
        } else b = b.subarray(0, rnd(b.length + 1));
      }
      try {
        wire.decodeAll(wire.decodeFrame(b));
        decoded++;
      } catch (err) {
        assert.ok(err instanceof wire.WireError, `${name} mutation ${k}: ${err}`);
        refused++;
      }
    }
  }
  assert.ok(decoded > 0 && refused > 0, `${decoded} decoded, ${refused} refused`);
});

test('an unaligned frame decodes the same as an aligned one (views vs DataView)', () => {
  const bin = readFileSync(join(process.env.SPY_GOLDEN_DIR, 'data_full.bin'));
  const aligned = new Uint8Array(new ArrayBuffer(bin.length));
  aligned.set(bin);
  const odd = new Uint8Array(new ArrayBuffer(bin.length + 1), 1);
  odd.set(bin);
  const a = wire.decodeAll(wire.decodeFrame(aligned));
  const b = wire.decodeAll(wire.decodeFrame(odd));
  assert.ok(a.stats && a.stats.count > 0, 'the golden full frame carries stats');
  assert.ok(a.stats.counters[0].buffer === aligned.buffer, 'aligned: counter columns are views of the frame');
  assert.ok(b.stats.counters[0].buffer !== odd.buffer, 'unaligned: copied');
  assert.deepEqual(b, a);
  // Keys seen before come from the cache: still the same strings.
  assert.deepEqual(wire.decodeAll(wire.decodeFrame(aligned)).registry, a.registry);
});
