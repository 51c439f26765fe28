// web_pixels.test.mjs — web/wire_pixels.js against the image golden frames
// of test/web_helper.c (golden DIR → DIR/img): PIXELS (whole, part, VP9),
// BUFFERS metadata, BATCHES, PASSES and a subscription with display modes
// decode to what the C decoder read, field by field; every malformed one
// is refused with the C decoder's error. Run by test/web_pixels.sh.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const wire = await import(join(here, '..', 'web', 'wire.js'));
const px = await import(join(here, '..', 'web', 'wire_pixels.js'));
const dir = process.env.SPY_GOLDEN_DIR;
if (!dir) throw new Error('SPY_GOLDEN_DIR not set (run test/web_pixels.sh)');
const names = readdirSync(dir).filter((f) => f.endsWith('.bin'))
  .map((f) => f.slice(0, -4)).sort();
const load = (n) => ({
  bytes: new Uint8Array(readFileSync(join(dir, `${n}.bin`))),
  want: JSON.parse(readFileSync(join(dir, `${n}.json`), 'utf8')),
});

// Every field the C side wrote, compared exactly (byte arrays as arrays).
function same(actual, expected, path) {
  if (Array.isArray(expected)) {
    const a = Array.from(actual ?? []);
    assert.equal(a.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => same(a[i], e, `${path}[${i}]`));
  } else if (expected !== null && typeof expected === 'object') {
    assert.ok(actual !== undefined && actual !== null, `${path} missing`);
    for (const k of Object.keys(expected)) same(actual[k], expected[k], `${path}.${k}`);
  } else {
    assert.equal(actual, expected, path);
  }
}

test('image golden frames exist', () => {
  for (const n of ['raw_whole', 'raw_part', 'vp9_chunk', 'drawlist', 'subscribe_buffers',
    'bad_part_range', 'bad_part_total', 'bad_pixels_flags', 'bad_pixels_codec',
    'bad_pixels_width', 'bad_pixels_len', 'bad_raw_size', 'bad_meta_mode',
    'bad_pass_parent', 'bad_batches', 'bad_sub_display']) {
    assert.ok(names.includes(n), n);
  }
});

for (const name of names) {
  test(`${name} decodes as the C decoder does`, () => {
    const { bytes, want } = load(name);
    assert.equal(want.error, undefined, 'the frame itself is well formed');
    const f = wire.decodeFrame(bytes);
    assert.equal(f.type, want.type);
    assert.equal(f.seq, want.seq);
    if (want.sectionError) {
      assert.throws(() => wire.decodeAll(f), (e) => {
        assert.ok(e instanceof wire.WireError, String(e));
        assert.equal(e.code, want.sectionError.error);
        return true;
      });
      return;
    }
    const got = wire.decodeAll(f);
    assert.deepEqual(got.unknown, []);
    for (const [k, v] of Object.entries(want.decoded)) {
      if (k === 'buffers') {
        assert.equal(got.buffers.full, v.full);
        v.entries.forEach((e, i) => {
          const g = got.buffers.entries[i];
          assert.ok(g, `buffers entry ${i}`);
          same(g.key, e.key, `buffers[${i}].key`);
          same(g.value, e.value, `buffers[${i}].value`);
          if (e.meta.error) {
            assert.throws(() => px.decodeBufferMeta(g.value),
              (err) => err instanceof wire.WireError && err.code === e.meta.error);
          } else {
            same(px.decodeBufferMeta(g.value), e.meta, `buffers[${i}].meta`);
          }
        });
      } else {
        same(got[k], v, k);
      }
    }
  });
}

test('the JS encoder writes the C subscription with display modes byte for byte', () => {
  const { bytes, want } = load('subscribe_buffers');
  const s = want.decoded.subscription;
  assert.deepEqual(s.buffers.map((b) => b.display), [1, 4, 5]);
  const mine = wire.encodeSubscribe({ consumer: s.consumer, features: s.features,
    registry: s.registry, buffers: s.buffers });
  assert.equal(mine.length, bytes.length);
  assert.deepEqual(Array.from(mine.subarray(16)), Array.from(bytes.subarray(16)));
});

test('parts are put together in order; one out of turn drops the image', () => {
  const whole = wire.decodeAll(wire.decodeFrame(load('raw_whole').bytes)).pixels;
  const part = wire.decodeAll(wire.decodeFrame(load('raw_part').bytes)).pixels;
  assert.equal(part.partOffset, 8);
  // The first part: the same header, bytes 0..8.
  const first = { ...part, partOffset: 0, data: whole.data.subarray(0, 8) };
  const a = new px.PartAssembler();
  assert.equal(a.push(first), null);
  assert.deepEqual(Array.from(a.push(part)), Array.from(whole.data));
  assert.equal(a.dropped, 0);
  assert.equal(a.push(part), null, 'a second part without its first');
  assert.equal(a.dropped, 1);
  assert.equal(a.push(first), null);
  assert.equal(a.push({ ...part, frame: part.frame + 1 }), null, 'another frame');
  assert.equal(a.dropped, 2);
  assert.deepEqual(Array.from(a.push(whole)), Array.from(whole.data), 'a whole one passes');
});

test('mutated image frames: a WireError or a decoding, never another exception', () => {
  let x = 0x2545f491;
  const rnd = (n) => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) % n; };
  let decoded = 0, refused = 0;
  for (const name of names) {
    const base = load(name).bytes;
    for (let k = 0; k < 1500; k++) {
      let b = base.slice();
      for (let e = 1 + rnd(3); e > 0; e--) {
        const what = rnd(3);
        if (what === 0 && b.length) b[rnd(b.length)] = rnd(256);
        else if (what === 1 && b.length > 4) {
          new DataView(b.buffer).setUint32(rnd(b.length - 3) & ~3, rnd(1 << 16), true);
        } else b = b.subarray(0, rnd(b.length + 1));
      }
      try {
        const d = wire.decodeAll(wire.decodeFrame(b));
        for (const e of d.buffers?.entries ?? []) {
          try { px.decodeBufferMeta(e.value); } catch (err) {
            assert.ok(err instanceof wire.WireError, String(err));
          }
        }
        decoded++;
      } catch (err) {
        assert.ok(err instanceof wire.WireError, `${name} mutation ${k}: ${err}`);
        refused++;
      }
    }
  }
  assert.ok(decoded > 0 && refused > 0, `${decoded} decoded, ${refused} refused`);
});
