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
    'bad_pass_parent', 'bad_batches', 'bad_sub_display', 'raw_variant',
    'vp9_variant_part', 'bad_variant_mode', 'bad_variant_reserved', 'bad_variant_flag',
    'probe', 'bad_probe_x', 'bad_probe_count', 'buffer_variants', 'bad_variants_mode']) {
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
      } else if (k === 'bufferVariants') {
        assert.equal(got.bufferVariants.full, v.full);
        v.entries.forEach((e, i) => {
          const g = got.bufferVariants.entries[i];
          assert.ok(g, `bufferVariants entry ${i}`);
          same(g.key, e.key, `bufferVariants[${i}].key`);
          same(g.value, e.value, `bufferVariants[${i}].value`);
          if (e.variants.error) {
            assert.throws(() => px.decodeBufferVariants(g.value),
              (err) => err instanceof wire.WireError && err.code === e.variants.error);
          } else {
            same(px.decodeBufferVariants(g.value), e.variants, `bufferVariants[${i}].variants`);
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

test('a cell keeps only the variant it asked for, as the C consumer does', () => {
  const raw = wire.decodeAll(wire.decodeFrame(load('raw_variant').bytes)).pixels;
  assert.equal(raw.variantMode, 1);
  assert.equal(raw.variantLongEdge, 64);
  assert.equal(raw.display, 3);
  const name = raw.name;
  assert.ok(px.answersRequest({ name, mode: 1, display: 3, longEdge: 64 }, raw));
  assert.ok(!px.answersRequest({ name, mode: 1, display: 3, longEdge: 0 }, raw), 'another long edge');
  assert.ok(!px.answersRequest({ name, mode: 1, display: 1, longEdge: 64 }, raw), 'another display');
  assert.ok(!px.answersRequest({ name, mode: 2, display: 3, longEdge: 64 }, raw), 'a stream');
  assert.ok(!px.answersRequest({ name: 'other', mode: 1, display: 3, longEdge: 64 }, raw));
  const vp9 = wire.decodeAll(wire.decodeFrame(load('vp9_variant_part').bytes)).pixels;
  assert.equal(vp9.variantMode, 2);
  assert.equal(vp9.variantLongEdge, 256);
  assert.equal(vp9.partOffset, 2);
  assert.deepEqual(Array.from(vp9.data), [0x83, 0x42, 0x00]);
  // display 0 resolves as the type's default (colors for rgba8)
  assert.ok(px.answersRequest({ name: vp9.name, mode: 2, display: 0, longEdge: 256 }, vp9));
  // a thumbnail asked with long edge 0 is the 256 px one
  const t256 = { ...raw, variantLongEdge: 256 };
  assert.ok(px.answersRequest({ name, mode: 1, display: 3, longEdge: 0 }, t256));
  // a frame that does not say its variant matches by name
  const old = wire.decodeAll(wire.decodeFrame(load('raw_whole').bytes)).pixels;
  assert.equal(old.variantMode, 0);
  assert.ok(px.answersRequest({ name: old.name, mode: 2, display: 1, longEdge: 9 }, old));
});

test('probe answers read as numbers by pixel type', () => {
  const pr = wire.decodeAll(wire.decodeFrame(load('probe').bytes)).probe;
  assert.equal(pr.length, 2);
  assert.deepEqual(pr[0].source, [502.25]);
  assert.deepEqual(pr[1].source, [-0.25, 0.25, 0.75, 1.25]);
  const q = px.encodeProbe('00000000000000ab', 'depthf', 7, 5);
  const f = wire.decodeFrame(q);
  assert.equal(f.type, px.MSG_BUFFER_PROBE);
  const d = wire.decodeAll(f);
  assert.deepEqual(d.probe.map((e) => [e.name, e.x, e.y, e.frame]), [['depthf', 7, 5, 0]]);
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
