// wire_pixels.js — the image and draw-list sections in the browser, the
// JS twins of spy_get_pixels, spy_buffer_meta_decode, spy_get_batches and
// spy_get_passes (docs/wire.md: PIXELS (10), BUFFERS (4) entries, BATCHES
// (15), PASSES (16)). Each validates the whole section before returning
// anything and refuses what the C decoder refuses, with its error name.
// Also the reassembly of PIXELS parts into one payload.
//
// wire.js dispatches to decodeImageSection from decodeAll; nothing here
// touches wire.js bindings at load time (the two modules import each
// other).
import { WireError, FrameWriter, decodeDelta } from './wire.js';

export const SEC_PIXELS = 10;
export const SEC_BATCHES = 15;
export const SEC_PASSES = 16;
export const SEC_PROBE = 18;
export const SEC_BUFFER_VARIANTS = 19;
export const BUFFER_VARIANT_BYTES = 16;
export const BUFFER_VARIANT_LIST_MAX = 16;
export const MSG_BUFFER_PROBE = 21;
export const PROBE_MAX = 32;
export const PROBE_STOP = 0xffffffff;
const SEC_PEER = 8;
const PROBE_ENTRY = 36;
export const PIXELS_KEY = 0x1;
export const PIXELS_PART = 0x2;
export const PIXELS_VARIANT = 0x4;
export const PIXELS_TOTAL_MAX = 64 * 1024 * 1024;
export const BUFFER_META_BYTES = 48;
export const BATCHES_MAX = 4096;
export const PASSES_MAX = 1024;
export const PASS_ROOT = 0xffff;
export const CODEC = { RGBA8: 0, VP9: 1 };
export const PIXEL_TYPES = ['rgba8', 'bgra8', 'rgba32f', 'r32f', 'r8', 'rgba16f'];
export const DISPLAY_MODES = ['default', 'colors', 'normalize', 'mono', 'signed', 'alpha'];
export const BUFFER_MODES = ['none', 'thumbnail', 'stream'];

// The display mode a request resolves to for a pixel type (media.h
// spy_display_resolve): default is normalize for r32f, colors otherwise.
export function displayResolve(pixelType, display) {
  return display ? display : (pixelType === 3 ? 2 : 1);
}

// Whether a buffer request {name, mode, display, longEdge} gets a decoded
// PIXELS frame's variant (a frame that does not say matches by name) —
// src/consumer/images.c answers().
export function answersRequest(req, px) {
  if (req.name !== px.name) return false;
  if (!px.variantMode) return true;
  const edge = req.mode === 1 && !req.longEdge ? 256 : (req.longEdge ?? 0);
  return req.mode === px.variantMode && edge === px.variantLongEdge &&
    displayResolve(px.pixelType, req.display ?? 0) === px.display;
}

const PIXELS_FIXED = 36;
const fail = (code, off, what) => { throw new WireError(code, off, what); };
const pad4 = (n) => (n + 3) & ~3;
const utf8 = new TextDecoder('utf-8');
const u64 = (dv, o) =>
  dv.getUint32(o, true) + dv.getUint32(o + 4, true) * 4294967296;

// PIXELS: {frame, capturedMs, width, height, pixelType, display, key,
// part, codec, name, data (a view into the frame's bytes, the part header
// excluded), partOffset, partTotal (0: the whole payload is here),
// variantMode (0: not said; 1 thumbnail, 2 stream), variantLongEdge}.
export function decodePixels(f, s) {
  const dv = f.dv, o = s.off;
  if (s.len < PIXELS_FIXED) fail('EBADSECTION', o);
  const nlen = dv.getUint16(o + 30, true);
  let dlen = dv.getUint32(o + 32, true);
  const width = dv.getUint32(o + 16, true), height = dv.getUint32(o + 20, true);
  const codec = dv.getUint16(o + 28, true), flags = dv.getUint8(o + 27);
  if (nlen === 0 || nlen > 255 || codec > CODEC.VP9 ||
      (flags & ~(PIXELS_KEY | PIXELS_PART | PIXELS_VARIANT))) fail('EBADVALUE', o + 27);
  if (width > 16384 || height > 16384) fail('EBADVALUE', o + 16);
  const vb = flags & PIXELS_VARIANT ? 4 : 0;
  if (s.len !== PIXELS_FIXED + pad4(nlen) + vb + dlen) fail('EBADSECTION', o + 32);
  let d = o + PIXELS_FIXED + pad4(nlen);
  let variantMode = 0, variantLongEdge = 0;
  if (vb) {
    variantMode = dv.getUint8(d);
    variantLongEdge = dv.getUint16(d + 2, true);
    if (variantMode < 1 || variantMode > 2 || dv.getUint8(d + 1)) fail('EBADVALUE', d);
    d += vb;
  }
  let partOffset = 0, partTotal = 0;
  if (flags & PIXELS_PART) {
    if (dlen < 8) fail('EBADSECTION', d);
    partOffset = dv.getUint32(d, true);
    partTotal = dv.getUint32(d + 4, true);
    d += 8;
    dlen -= 8;
    if (partTotal === 0 || partTotal > PIXELS_TOTAL_MAX || partOffset > partTotal ||
        dlen > partTotal - partOffset) fail('EBADVALUE', d - 8);
  }
  const whole = partTotal || dlen;
  if (codec === CODEC.RGBA8 && width * height * 4 !== whole) fail('EBADVALUE', o + 16);
  return {
    frame: u64(dv, o), capturedMs: u64(dv, o + 8), width, height,
    pixelType: dv.getUint16(o + 24, true), display: dv.getUint8(o + 26),
    key: (flags & PIXELS_KEY) !== 0, part: (flags & PIXELS_PART) !== 0, codec,
    name: utf8.decode(f.bytes.subarray(o + PIXELS_FIXED, o + PIXELS_FIXED + nlen)),
    data: f.bytes.subarray(d, d + dlen), partOffset, partTotal,
    variantMode, variantLongEdge,
  };
}

// A BUFFERS entry's value (a 48-byte blob): {pixelType, mode, display,
// width, height, servedWidth, servedHeight, codec, maxFps, lastFrame,
// captured, dropped}. Throws EBADVALUE like spy_buffer_meta_decode.
export function decodeBufferMeta(blob) {
  if (!(blob instanceof Uint8Array) || blob.length !== BUFFER_META_BYTES) {
    fail('EBADVALUE', 0, 'buffer metadata is not a 48-byte blob');
  }
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.length);
  const m = {
    pixelType: dv.getUint16(0, true), mode: blob[2], display: blob[3],
    width: dv.getUint32(4, true), height: dv.getUint32(8, true),
    servedWidth: dv.getUint32(12, true), servedHeight: dv.getUint32(16, true),
    codec: dv.getUint16(20, true), maxFps: dv.getUint16(22, true),
    lastFrame: u64(dv, 24), captured: u64(dv, 32), dropped: u64(dv, 40),
  };
  if (m.mode > 2 || m.codec > CODEC.VP9) fail('EBADVALUE', 2);
  return m;
}

// BATCHES: {version, batches: [{kind, key, instances, draws}]}.
export function decodeBatches(f, s) {
  const dv = f.dv, o = s.off, end = o + s.len;
  if (s.len < 8) fail('EBADSECTION', o);
  const n = dv.getUint32(o + 4, true);
  if (n > BATCHES_MAX) fail('EBADVALUE', o + 4);
  let p = o + 8;
  for (let i = 0; i < n; i++) {
    if (end - p < 12) fail('EBADSECTION', p);
    const kl = dv.getUint16(p, true), ml = dv.getUint16(p + 2, true);
    if (kl > 255 || ml > 255) fail('EBADVALUE', p);
    if (end - p - 12 < pad4(kl + ml)) fail('EBADSECTION', p);
    p += 12 + pad4(kl + ml);
  }
  if (p !== end) fail('EBADSECTION', p);
  const batches = [];
  p = o + 8;
  for (let i = 0; i < n; i++) {
    const kl = dv.getUint16(p, true), ml = dv.getUint16(p + 2, true);
    batches.push({
      kind: utf8.decode(f.bytes.subarray(p + 12, p + 12 + kl)),
      key: utf8.decode(f.bytes.subarray(p + 12 + kl, p + 12 + kl + ml)),
      instances: dv.getUint32(p + 4, true), draws: dv.getUint32(p + 8, true),
    });
    p += 12 + pad4(kl + ml);
  }
  return { version: dv.getUint32(o, true), batches };
}

// PASSES: {version, passes: [{parent (index or PASS_ROOT), label, draws,
// triangles, cpuUs}]}, parents before their children.
export function decodePasses(f, s) {
  const dv = f.dv, o = s.off, end = o + s.len;
  if (s.len < 8) fail('EBADSECTION', o);
  const n = dv.getUint32(o + 4, true);
  if (n > PASSES_MAX) fail('EBADVALUE', o + 4);
  let p = o + 8;
  for (let i = 0; i < n; i++) {
    if (end - p < 16) fail('EBADSECTION', p);
    const parent = dv.getUint16(p, true), l = dv.getUint16(p + 2, true);
    if (l > 255 || (parent !== PASS_ROOT && parent >= i)) fail('EBADVALUE', p);
    if (end - p - 16 < pad4(l)) fail('EBADSECTION', p);
    p += 16 + pad4(l);
  }
  if (p !== end) fail('EBADSECTION', p);
  const passes = [];
  p = o + 8;
  for (let i = 0; i < n; i++) {
    const l = dv.getUint16(p + 2, true);
    passes.push({
      parent: dv.getUint16(p, true),
      label: utf8.decode(f.bytes.subarray(p + 16, p + 16 + l)),
      draws: dv.getUint32(p + 4, true), triangles: dv.getUint32(p + 8, true),
      cpuUs: dv.getUint32(p + 12, true),
    });
    p += 16 + pad4(l);
  }
  return { version: dv.getUint32(o, true), passes };
}

// decodeAll's hook: sets out.pixels / out.batches / out.passes; returns
// false for a section that is not one of these.
// A BUFFER_VARIANTS entry's value: [{mode, display, codec, longEdge,
// servedWidth, servedHeight}], every variant the buffer serves, as
// spy_buffer_variants_decode checks it (docs/wire.md BUFFER_VARIANTS (19)).
export function decodeBufferVariants(blob) {
  if (!(blob instanceof Uint8Array) || blob.length % BUFFER_VARIANT_BYTES ||
      blob.length > BUFFER_VARIANT_LIST_MAX * BUFFER_VARIANT_BYTES) {
    fail('EBADVALUE', 0, 'buffer variants are not a blob of 16-byte records');
  }
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.length);
  const out = [];
  for (let o = 0; o < blob.length; o += BUFFER_VARIANT_BYTES) {
    const v = {
      mode: blob[o], display: blob[o + 1], codec: dv.getUint16(o + 2, true),
      longEdge: dv.getUint16(o + 4, true), servedWidth: dv.getUint32(o + 8, true),
      servedHeight: dv.getUint32(o + 12, true),
    };
    if (v.mode < 1 || v.mode > 2 || v.display > 5 || v.codec > CODEC.VP9) fail('EBADVALUE', o);
    out.push(v);
  }
  return out;
}

export function decodeImageSection(f, s, out) {
  switch (s.id) {
    case SEC_PIXELS: out.pixels = decodePixels(f, s); return true;
    case SEC_BATCHES: out.batches = decodeBatches(f, s); return true;
    case SEC_PASSES: out.passes = decodePasses(f, s); return true;
    case SEC_PROBE: out.probe = decodeProbe(f, s); return true;
    case SEC_BUFFER_VARIANTS: out.bufferVariants = decodeDelta(f, s); return true;
    default: return false;
  }
}

// PROBE: [{frame, x, y, pixelType, name, value (16 bytes), source (the
// value as numbers: 1 float for r32f / r8, 4 for the RGBA types)}], as
// spy_get_probe checks it (docs/wire.md PROBE (18)).
export function decodeProbe(f, s) {
  const dv = f.dv, o = s.off, end = o + s.len;
  if (s.len < 8) fail('EBADSECTION', o);
  const n = dv.getUint32(o, true);
  if (n > PROBE_MAX || dv.getUint32(o + 4, true) !== 0) fail('EBADVALUE', o);
  let p = o + 8;
  const out = [];
  for (let i = 0; i < n; i++) {
    if (end - p < PROBE_ENTRY) fail('EBADSECTION', p);
    const x = dv.getUint32(p + 8, true), y = dv.getUint32(p + 12, true);
    const type = dv.getUint16(p + 16, true), nlen = dv.getUint16(p + 18, true);
    if (nlen === 0 || nlen > 255 || type >= PIXEL_TYPES.length ||
        (x === PROBE_STOP) !== (y === PROBE_STOP) ||
        (x !== PROBE_STOP && (x >= 16384 || y >= 16384))) fail('EBADVALUE', p);
    if (end - p < PROBE_ENTRY + pad4(nlen)) fail('EBADSECTION', p);
    const value = f.bytes.slice(p + 20, p + 36);
    out.push({ frame: u64(dv, p), x, y, pixelType: type,
      name: utf8.decode(f.bytes.subarray(p + PROBE_ENTRY, p + PROBE_ENTRY + nlen)),
      value, source: sourceValue(type, value) });
    p += PROBE_ENTRY + pad4(nlen);
  }
  if (p !== end) fail('EBADSECTION', p);
  return out;
}

// binary16 → number.
function half(h) {
  const e = (h >> 10) & 31, m = h & 1023, sg = h & 0x8000 ? -1 : 1;
  if (e === 0) return sg * m * 2 ** -24;
  if (e === 31) return m ? NaN : sg * Infinity;
  return sg * (1 + m / 1024) * 2 ** (e - 15);
}

// A pixel's source bytes as numbers, by pixel type.
export function sourceValue(type, bytes) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  switch (PIXEL_TYPES[type]) {
    case 'r32f': return [dv.getFloat32(0, true)];
    case 'rgba32f': return [0, 4, 8, 12].map((o) => dv.getFloat32(o, true));
    case 'rgba16f': return [0, 2, 4, 6].map((o) => half(dv.getUint16(o, true)));
    case 'r8': return [bytes[0]];
    case 'bgra8': return [bytes[2], bytes[1], bytes[0], bytes[3]];
    default: return Array.from(bytes.subarray(0, 4));
  }
}

// The buffer:probe request: the source value of (x, y) of a buffer
// (PROBE_STOP for both: stop).
export function encodeProbe(consumerHex, name, x, y) {
  const w = new FrameWriter(MSG_BUFFER_PROBE);
  w.begin(SEC_PEER); w.hex64(consumerHex); w.u32(0); w.u32(0);
  const b = new TextEncoder().encode(name);
  if (b.length < 1 || b.length > 255) throw new RangeError(`bad name '${name}'`);
  w.begin(SEC_PROBE); w.u32(1); w.u32(0);
  w.u32(0); w.u32(0); w.u32(x); w.u32(y); w.u16(0); w.u16(b.length);
  w.bytes(new Uint8Array(16)); w.bytes(b);
  for (let i = b.length; i % 4; i++) w.u8(0);
  return w.finish();
}

// Puts PIXELS parts together: push(px) returns the whole payload
// (Uint8Array) when px completes one, else null. A part out of turn (a
// gap, another frame) drops what was gathered: the caller then counts a
// loss (and a stream waits for its next key frame).
export class PartAssembler {
  constructor() { this.cur = null; this.dropped = 0; }
  push(px) {
    if (!px.part) { this.cur = null; return px.data; }
    const c = this.cur;
    if (px.partOffset === 0) {
      if (c) this.dropped++;
      this.cur = { name: px.name, frame: px.frame, total: px.partTotal,
        got: 0, buf: new Uint8Array(px.partTotal) };
    } else if (!c || c.name !== px.name || c.frame !== px.frame ||
        c.total !== px.partTotal || c.got !== px.partOffset) {
      this.dropped++;
      this.cur = null;
      return null;
    }
    const a = this.cur;
    a.buf.set(px.data, a.got);
    a.got += px.data.length;
    if (a.got < a.total) return null;
    this.cur = null;
    return a.buf;
  }
}
