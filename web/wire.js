// wire.js — the spyglass wire frame in the browser: the JS twin of
// src/wire (docs/wire.md). Decoding validates a whole frame up front the
// way spy_frame_decode does and then reads sections with DataView (or
// typed-array views over aligned columns), straight
// from the bytes the provider encoded; nothing is re-encoded anywhere on
// the way. The few encoders are the consumer's messages (query, subscribe,
// ack, resync, unsubscribe) and the link records (docs/wire.md, "Links").
// Errors are WireError with the C code's name (ETRUNCATED, EBADSECTION, …)
// and the byte offset where the problem was found.
import { decodeZones } from './wire_zones.js';
import { decodeImageSection } from './wire_pixels.js';

import { SEC_BUILD, decodeBuild } from './wire_trace.js';

export const FRAME_HEADER = 16;
export const FRAME_MIN = 32;
export const FRAME_MAX = 16 * 1024 * 1024;
export const KEY_MAX = 255;
export const STRING_MAX = 65535;
export const STATS_MAX_SAMPLES = 4096;
export const STATS_MAX_COUNTERS = 64;
export const SUB_MAX_NAMES = 1024;
export const GPU_NONE = 0xffff;

export const MSG = {
  DATA: 1, SUBSCRIBE: 2, SUBSCRIBE_ACK: 3, ACK: 4, UNSUBSCRIBE: 5, PING: 6,
  PROVIDER_ANNOUNCE: 7, PROVIDER_QUERY: 8, PROVIDER_GONE: 9,
  BUFFER_CHUNK: 16, BUFFER_RAW: 17, RESYNC: 18, TRACE: 19, CLOCK: 20,
  BUFFER_PROBE: 21,
};
const MSG_NAMES = {
  1: 'data', 2: 'subscribe', 3: 'subscribe:ack', 4: 'ack', 5: 'unsubscribe',
  6: 'ping', 7: 'provider:announce', 8: 'provider:query', 9: 'provider:gone',
  16: 'buffer:chunk', 17: 'buffer:raw', 18: 'resync', 19: 'trace', 20: 'clock',
  21: 'buffer:probe',
};
export const SEC = {
  FRAME: 0, STATS: 1, ENV: 2, REGISTRY: 3, BUFFERS: 4, STATS_SCHEMA: 5,
  HEALTH: 6, PROVIDER: 7, PEER: 8, SUBSCRIPTION: 9, PIXELS: 10, TRACE: 11,
  MSGPROF: 12, CLOCK: 13, ZONES: 14,
};
const SEC_NAMES = [
  'frame', 'stats', 'env', 'registry', 'buffers', 'stats_schema', 'health',
  'provider', 'peer', 'subscription', 'pixels', 'trace', 'msgprof', 'clock',
  'zones',
];
SEC_NAMES[17] = 'build'; // BUILD: wire_trace.js
SEC_NAMES[18] = 'probe'; // PROBE: wire_pixels.js
SEC_NAMES[19] = 'buffer_variants'; // BUFFER_VARIANTS: wire_pixels.js
export const FEAT = (id) => (1 << id) >>> 0;
export const FRAME_SNAPSHOT = 1;
export const FRAME_CHECKPOINT = 2;
export const DELTA_FULL = 1;
export const DELTA = { SET: 1, CLEARED: 2, META: 3 };
export const KIND = {
  NONE: 0, FLOAT: 1, UINT: 2, INT: 3, FLOAT2: 4, FLOAT3: 5, FLOAT4: 6,
  BITS: 7, BOOL: 8, STRING: 9, BLOB: 10,
};
const KIND_NAMES = ['none', 'float', 'uint', 'int', 'float2', 'float3',
  'float4', 'bits', 'bool', 'string', 'blob'];
const KIND_SIZES = [0, 8, 8, 8, 16, 24, 32, 8, 1, -1, -1];
export const HEALTH_FIELDS = ['frames_posted', 'bytes_posted',
  'flushes_dropped', 'samples_dropped', 'frames_lost', 'subscribers',
  'pool_small_free', 'pool_medium_free', 'pool_large_free'];
// include/spyglass/error.h, the protocol codes.
export const ERR = {
  ETRUNCATED: -1001, ETOOBIG: -1002, EBADTYPE: -1003, EBADSECTION: -1004,
  EBADVERSION: -1005, EBADVALUE: -1006, EBADHEADER: -1007, ENOSECTION: -1008,
};

export const msgTypeName = (t) => MSG_NAMES[t] ?? null;
export const sectionName = (id) => SEC_NAMES[id] ?? null;
export const kindName = (k) => KIND_NAMES[k] ?? 'unknown';

export class WireError extends Error {
  constructor(code, offset, what) {
    super(`${code}${what ? ': ' + what : ''} at byte ${offset}`);
    this.code = code;
    this.offset = offset;
  }
}
const fail = (code, off, what) => { throw new WireError(code, off, what); };

const utf8 = new TextDecoder('utf-8');
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// Registry keys repeat in every data frame: a small cache from the key's
// bytes to its string saves a TextDecoder call (the costliest step of a
// delta list) for every key seen before. ASCII keys only (what the
// providers use); others are decoded every time. Bounded: cleared when full.
const KEY_CACHE_MAX = 4096;
const keyCache = new Map();
function keyString(b, p, len) {
  let h = len, ascii = true;
  for (let i = 0; i < len; i++) {
    const c = b[p + i];
    if (c >= 0x80) { ascii = false; break; }
    h = Math.imul(h ^ c, 16777619);
  }
  if (!ascii) return utf8.decode(b.subarray(p, p + len));
  const hit = keyCache.get(h);
  if (hit !== undefined && hit.length === len) {
    let same = true;
    for (let i = 0; i < len; i++) {
      if (hit.charCodeAt(i) !== b[p + i]) { same = false; break; }
    }
    if (same) return hit;
  }
  const str = len <= 32 ? String.fromCharCode.apply(null, b.subarray(p, p + len))
    : utf8.decode(b.subarray(p, p + len));
  if (keyCache.size >= KEY_CACHE_MAX) keyCache.clear();
  keyCache.set(h, str);
  return str;
}
const utf8enc = new TextEncoder();
const pad4 = (n) => (n + 3) & ~3;

function view(buf) {
  if (buf instanceof Uint8Array) return buf;
  if (buf instanceof ArrayBuffer) return new Uint8Array(buf);
  if (ArrayBuffer.isView(buf)) {
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  throw new TypeError('bytes wanted');
}
const u64 = (dv, o) =>
  dv.getUint32(o, true) + dv.getUint32(o + 4, true) * 4294967296;
const i64 = (dv, o) =>
  dv.getUint32(o, true) + dv.getInt32(o + 4, true) * 4294967296;
const hex64 = (dv, o) =>
  dv.getUint32(o + 4, true).toString(16).padStart(8, '0') +
  dv.getUint32(o, true).toString(16).padStart(8, '0');

// ---- frame ----------------------------------------------------------------

// The frame length from the first 16 bytes (spy_frame_peek_len).
export function peekLen(bytes) {
  const b = view(bytes);
  if (b.length < FRAME_HEADER) fail('ETRUNCATED', b.length);
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  const used = dv.getUint32(0, true);
  if (used > FRAME_MAX) fail('ETOOBIG', 0);
  if (used < FRAME_MIN || used & 3) fail('EBADHEADER', 0);
  return used;
}

// Validates a whole frame (spy_frame_decode) and returns
// {type, typeName, ts, version, flags, seq, len, bytes, dv, sections:
// [{id, off, len}]} where off is the section body's offset in `bytes`.
export function decodeFrame(bytes) {
  const b = view(bytes);
  const used = peekLen(b);
  if (used > b.length) fail('ETRUNCATED', b.length);
  const dv = new DataView(b.buffer, b.byteOffset, used);
  if (dv.getUint32(16, true) !== SEC.FRAME) fail('ENOSECTION', 16);
  if (dv.getUint32(20, true) !== 8) fail('EBADSECTION', 20);
  const version = dv.getUint16(24, true);
  if (version !== 1) fail('EBADVERSION', 24);
  const type = dv.getUint32(4, true);
  if (!MSG_NAMES[type]) fail('EBADTYPE', 4);
  const sections = [];
  let off = FRAME_MIN;
  while (off < used) {
    if (used - off < 8) fail('ETRUNCATED', off);
    const id = dv.getUint32(off, true), slen = dv.getUint32(off + 4, true);
    if (slen > used - off - 8) fail('EBADSECTION', off + 4);
    if (id === SEC.FRAME) fail('EBADSECTION', off);
    sections.push({ id, off: off + 8, len: slen });
    off += 8 + pad4(slen);
  }
  return {
    type, typeName: MSG_NAMES[type], ts: u64(dv, 8), version,
    flags: dv.getUint16(26, true), seq: dv.getUint32(28, true), len: used,
    bytes: b.subarray(0, used), dv, sections,
  };
}

export const findSection = (f, id) => f.sections.find((s) => s.id === id);

// ---- STATS, STATS_SCHEMA, HEALTH -------------------------------------------

// {startFrame, count, nCounters, flags, fps: Float32Array, cpu, gpu (NaN =
// n/a), counters: [Uint32Array per counter]}.
export function decodeStats(f, s) {
  const dv = f.dv, o = s.off;
  if (s.len < 16) fail('EBADSECTION', o);
  const count = dv.getUint32(o + 8, true), nc = dv.getUint16(o + 12, true);
  if (count > STATS_MAX_SAMPLES || nc > STATS_MAX_COUNTERS) {
    fail('EBADVALUE', o + 8);
  }
  if (s.len !== 16 + nc * count * 4 + count * 6) fail('EBADSECTION', o);
  const fps = new Float32Array(count), cpu = new Float32Array(count);
  const gpu = new Float32Array(count);
  const counters = [];
  const buf = f.bytes.buffer, base = f.bytes.byteOffset;
  let p = o + 16;
  // Sections start 4-aligned in the frame, so on a little-endian machine
  // with an aligned frame the columns are typed arrays over the frame's
  // own bytes: no copy, no per-sample getter.
  const direct = LITTLE && (base & 3) === 0;
  for (let c = 0; c < nc; c++, p += count * 4) {
    if (direct) {
      counters.push(new Uint32Array(buf, base + p, count));
    } else {
      const col = new Uint32Array(count);
      for (let i = 0; i < count; i++) col[i] = dv.getUint32(p + 4 * i, true);
      counters.push(col);
    }
  }
  if (direct) {
    const f10 = new Int16Array(buf, base + p, count);
    const c100 = new Uint16Array(buf, base + p + 2 * count, count);
    const g100 = new Uint16Array(buf, base + p + 4 * count, count);
    for (let i = 0; i < count; i++) {
      fps[i] = f10[i] / 10;
      cpu[i] = c100[i] / 100;
      const g = g100[i];
      gpu[i] = g === GPU_NONE ? NaN : g / 100;
    }
  } else {
    for (let i = 0; i < count; i++) {
      fps[i] = dv.getInt16(p + 2 * i, true) / 10;
      cpu[i] = dv.getUint16(p + 2 * count + 2 * i, true) / 100;
      const g = dv.getUint16(p + 4 * count + 2 * i, true);
      gpu[i] = g === GPU_NONE ? NaN : g / 100;
    }
  }
  return {
    startFrame: u64(dv, o), count, nCounters: nc,
    flags: dv.getUint16(o + 14, true), fps, cpu, gpu, counters,
  };
}

export function decodeNameList(f, s) {
  const dv = f.dv, end = s.off + s.len;
  if (s.len < 4) fail('EBADSECTION', s.off);
  const n = dv.getUint16(s.off, true);
  if (n > SUB_MAX_NAMES) fail('EBADVALUE', s.off);
  const names = [];
  let p = s.off + 4;
  for (let i = 0; i < n; i++) {
    if (end - p < 2) fail('EBADSECTION', p);
    const len = dv.getUint16(p, true);
    if (len > KEY_MAX) fail('EBADVALUE', p);
    if (end - p - 2 < len) fail('EBADSECTION', p);
    names.push(utf8.decode(f.bytes.subarray(p + 2, p + 2 + len)));
    p += 2 + len;
  }
  if (p !== end) fail('EBADSECTION', p);
  return names;
}

// {n, values: {name: number}} (fields this decoder knows; the rest ignored).
export function decodeHealth(f, s) {
  const dv = f.dv;
  if (s.len < 8) fail('EBADSECTION', s.off);
  const n = dv.getUint32(s.off, true);
  if (n > 1024) fail('EBADVALUE', s.off);
  if (s.len !== 8 + n * 8) fail('EBADSECTION', s.off);
  const values = {};
  HEALTH_FIELDS.forEach((k, i) => {
    values[k] = i < n ? u64(dv, s.off + 8 + 8 * i) : 0;
  });
  return { n, values };
}

// ---- delta lists ------------------------------------------------------------

// A value of `kind` at byte o (vlen bytes): number, bigint-free numbers for
// u64/i64 (exact up to 2^53), arrays for vectors, boolean, string, bytes.
function readValue(f, kind, o, vlen) {
  const dv = f.dv;
  switch (kind) {
    case KIND.FLOAT: return dv.getFloat64(o, true);
    case KIND.UINT: case KIND.BITS: return u64(dv, o);
    case KIND.INT: return i64(dv, o);
    case KIND.FLOAT2:
      return [dv.getFloat64(o, true), dv.getFloat64(o + 8, true)];
    case KIND.FLOAT3:
      return [dv.getFloat64(o, true), dv.getFloat64(o + 8, true),
        dv.getFloat64(o + 16, true)];
    case KIND.FLOAT4:
      return [dv.getFloat64(o, true), dv.getFloat64(o + 8, true),
        dv.getFloat64(o + 16, true), dv.getFloat64(o + 24, true)];
    case KIND.BOOL: return dv.getUint8(o) !== 0;
    case KIND.STRING: return utf8.decode(f.bytes.subarray(o, o + vlen));
    case KIND.BLOB: return f.bytes.slice(o, o + vlen);
    default: return null;
  }
}

// {full, count, entries: [{state, kind, key, value}]}; every entry is
// checked before any is returned (spy_get_delta).
export function decodeDelta(f, s) {
  const dv = f.dv, end = s.off + s.len;
  if (s.len < 8) fail('EBADSECTION', s.off);
  const n = dv.getUint32(s.off + 4, true);
  if (n > Math.floor((s.len - 8) / 12) + 1) fail('EBADSECTION', s.off + 4);
  const entries = [];
  let p = s.off + 8;
  for (let i = 0; i < n; i++) {
    const avail = end - p;
    if (avail < 8) fail('EBADSECTION', p);
    const state = dv.getUint8(p), kind = dv.getUint8(p + 1);
    const klen = dv.getUint16(p + 2, true), vlen = dv.getUint32(p + 4, true);
    if (klen < 1 || klen > KEY_MAX || kind >= KIND_SIZES.length) {
      fail('EBADVALUE', p);
    }
    const size = KIND_SIZES[kind];
    if (state === DELTA.SET) {
      if (kind === KIND.NONE ||
          (size >= 0 ? vlen !== size : vlen > STRING_MAX)) fail('EBADVALUE', p);
    } else if (state === DELTA.META) {
      if (kind === KIND.NONE || vlen) fail('EBADVALUE', p);
    } else if (state !== DELTA.CLEARED || kind !== KIND.NONE || vlen) {
      fail('EBADVALUE', p);
    }
    const raw = 8 + klen + vlen;
    if (raw > avail) fail('EBADSECTION', p);
    const key = keyString(f.bytes, p + 8, klen);
    const value = state === DELTA.SET ? readValue(f, kind, p + 8 + klen, vlen)
      : null;
    entries.push({ state, kind, key, value });
    p += Math.min(pad4(raw), avail);
  }
  if (p !== end) fail('EBADSECTION', p);
  return { full: (dv.getUint16(s.off, true) & DELTA_FULL) !== 0, count: n,
    entries };
}

// ---- control payloads ---------------------------------------------------------

export function decodeProvider(f, s) {
  const dv = f.dv, o = s.off;
  if (s.len < 28) fail('EBADSECTION', o);
  const nlen = dv.getUint16(o + 24, true);
  if (nlen > 255) fail('EBADVALUE', o + 24);
  if (s.len !== 28 + nlen) fail('EBADSECTION', o);
  const kind = dv.getUint8(o + 20);
  if (kind > 1) fail('EBADVALUE', o + 20);
  return {
    id: hex64(dv, o), startMs: u64(dv, o + 8), pid: dv.getUint32(o + 16, true),
    kind, subscribers: dv.getUint16(o + 22, true),
    name: utf8.decode(f.bytes.subarray(o + 28, o + 28 + nlen)),
  };
}

export function decodePeer(f, s) {
  if (s.len !== 16) fail('EBADSECTION', s.off);
  return { id: hex64(f.dv, s.off), features: f.dv.getUint32(s.off + 8, true) };
}

export function decodeSubscription(f, s) {
  const dv = f.dv, o = s.off, end = o + s.len;
  if (s.len < 20) fail('EBADSECTION', o);
  const nreg = dv.getUint16(o + 14, true), nbuf = dv.getUint16(o + 16, true);
  if (nreg > SUB_MAX_NAMES || nbuf > SUB_MAX_NAMES) fail('EBADVALUE', o + 14);
  let q = o + 20;
  const registry = [], buffers = [];
  for (let i = 0; i < nreg; i++) {
    if (end - q < 2) fail('EBADSECTION', q);
    const len = dv.getUint16(q, true);
    if (len < 1 || len > KEY_MAX) fail('EBADVALUE', q);
    if (end - q - 2 < len) fail('EBADSECTION', q);
    registry.push(utf8.decode(f.bytes.subarray(q + 2, q + 2 + len)));
    q += 2 + len;
  }
  for (let i = 0; i < nbuf; i++) {
    if (end - q < 2) fail('EBADSECTION', q);
    const len = dv.getUint16(q, true);
    if (len < 1 || len > KEY_MAX) fail('EBADVALUE', q);
    if (end - q - 2 < len + 4) fail('EBADSECTION', q);
    const mode = dv.getUint8(q + 2 + len), display = dv.getUint8(q + 3 + len);
    if ((mode !== 1 && mode !== 2) || display > 5) fail('EBADVALUE', q + 2 + len);
    buffers.push({
      name: utf8.decode(f.bytes.subarray(q + 2, q + 2 + len)), mode, display,
      longEdge: dv.getUint16(q + 2 + len + 2, true),
    });
    q += 2 + len + 4;
  }
  if (q !== end) fail('EBADSECTION', q);
  return {
    consumer: hex64(dv, o), features: dv.getUint32(o + 8, true),
    flags: dv.getUint16(o + 12, true), registry, buffers,
  };
}

// MSGPROF: {nTypes, flags, messages, errors, elapsedNs, types: [{type,
// count, errors, bytes, encode: {mean, p50, p99, max}, post: {…}}]}.
export function decodeMsgprof(f, s) {
  const dv = f.dv, o = s.off;
  if (s.len < 32) fail('EBADSECTION', o);
  const n = dv.getUint32(o, true);
  if (n > 64) fail('EBADVALUE', o);
  if (s.len !== 32 + 96 * n) fail('EBADSECTION', o);
  const ns = (p) => ({ mean: u64(dv, p), p50: u64(dv, p + 8),
    p99: u64(dv, p + 16), max: u64(dv, p + 24) });
  const types = [];
  for (let i = 0; i < n; i++) {
    const p = o + 32 + 96 * i;
    types.push({
      type: dv.getUint32(p, true), count: u64(dv, p + 8),
      errors: u64(dv, p + 16), bytes: u64(dv, p + 24), encode: ns(p + 32),
      post: ns(p + 64),
    });
  }
  return { nTypes: n, flags: dv.getUint32(o + 4, true), messages: u64(dv, o + 8),
    errors: u64(dv, o + 16), elapsedNs: u64(dv, o + 24), types };
}

export function decodeClock(f, s) {
  const dv = f.dv, o = s.off;
  if (s.len !== 40) fail('EBADSECTION', o);
  const op = dv.getUint8(o), rounds = dv.getUint8(o + 1);
  if (op < 1 || op > 3 || rounds > 64) fail('EBADVALUE', o);
  if (dv.getUint32(o + 36, true) & 0x80000000) fail('EBADVALUE', o + 32);
  return { op, rounds, provider: hex64(dv, o + 8), consumer: hex64(dv, o + 16),
    offsetNs: i64(dv, o + 24), rttNs: u64(dv, o + 32) };
}

// Every section of a frame decoded by id, for the protocol log and tests:
// {stats, schema, env, registry, buffers, health, provider, peer,
// subscription, msgprof, clock, unknown: [ids]}.
export function decodeAll(f) {
  const out = { unknown: [] };
  for (const s of f.sections) {
    switch (s.id) {
      case SEC.STATS: out.stats = decodeStats(f, s); break;
      case SEC.STATS_SCHEMA: out.schema = decodeNameList(f, s); break;
      case SEC.ENV: out.env = decodeDelta(f, s); break;
      case SEC.REGISTRY: out.registry = decodeDelta(f, s); break;
      case SEC.BUFFERS: out.buffers = decodeDelta(f, s); break;
      case SEC.HEALTH: out.health = decodeHealth(f, s); break;
      case SEC.PROVIDER: out.provider = decodeProvider(f, s); break;
      case SEC.PEER: out.peer = decodePeer(f, s); break;
      case SEC.SUBSCRIPTION: out.subscription = decodeSubscription(f, s); break;
      case SEC.MSGPROF: out.msgprof = decodeMsgprof(f, s); break;
      case SEC.CLOCK: out.clock = decodeClock(f, s); break;
      case SEC.ZONES: out.zones = decodeZones(f, s); break;
      case SEC_BUILD: out.build = decodeBuild(f, s); break;
      default: if (!decodeImageSection(f, s, out)) out.unknown.push(s.id);
    }
  }
  return out;
}

// ---- encoding (consumer messages) ----------------------------------------

// A growable little-endian writer of one frame (spy_frame_writer's twin).
export class FrameWriter {
  constructor(type, seq = 0, flags = 0, tsMs = Date.now()) {
    this.buf = new Uint8Array(256);
    this.len = 0;
    this.sec = -1;
    this.u32(0); this.u32(type);
    this.u32(tsMs % 4294967296); this.u32(Math.floor(tsMs / 4294967296));
    this.u32(SEC.FRAME); this.u32(8); this.u16(1); this.u16(flags);
    this.u32(seq);
  }
  room(n) {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const nb = new Uint8Array(cap);
    nb.set(this.buf.subarray(0, this.len));
    this.buf = nb;
  }
  dv() { return new DataView(this.buf.buffer); }
  u8(v) { this.room(1); this.buf[this.len++] = v; }
  u16(v) { this.room(2); this.dv().setUint16(this.len, v, true); this.len += 2; }
  u32(v) { this.room(4); this.dv().setUint32(this.len, v >>> 0, true); this.len += 4; }
  hex64(h) {
    const s = String(h).padStart(16, '0');
    this.u32(parseInt(s.slice(8), 16)); this.u32(parseInt(s.slice(0, 8), 16));
  }
  bytes(b) { this.room(b.length); this.buf.set(b, this.len); this.len += b.length; }
  begin(id) { this.end(); this.sec = this.len; this.u32(id); this.u32(0); }
  end() {
    if (this.sec < 0) return;
    this.dv().setUint32(this.sec + 4, this.len - this.sec - 8, true);
    this.sec = -1;
    while (this.len & 3) this.u8(0);
  }
  finish() {
    this.end();
    this.dv().setUint32(0, this.len, true);
    return this.buf.slice(0, this.len);
  }
}

// PEER-carrying messages: provider:query, ack, resync, unsubscribe.
export function encodePeerMsg(type, consumerHex, features = 0) {
  const w = new FrameWriter(type);
  w.begin(SEC.PEER); w.hex64(consumerHex); w.u32(features); w.u32(0);
  return w.finish();
}

// subscribe: {consumer (hex), features, registry: null (everything) or an
// array of names (a filter; [] = metadata only), buffers: [{name, mode,
// display (0..5), longEdge}]}.
export function encodeSubscribe({ consumer, features, registry = null,
  buffers = [] }) {
  const w = new FrameWriter(MSG.SUBSCRIBE);
  const reg = registry ?? [];
  if (reg.length > SUB_MAX_NAMES || buffers.length > SUB_MAX_NAMES) {
    throw new RangeError('too many names in a subscription');
  }
  w.begin(SEC.SUBSCRIPTION); w.hex64(consumer); w.u32(features);
  w.u16(registry ? 1 : 0); w.u16(reg.length); w.u16(buffers.length); w.u16(0);
  for (const name of reg) {
    const b = utf8enc.encode(name);
    if (b.length < 1 || b.length > KEY_MAX) throw new RangeError(`bad name '${name}'`);
    w.u16(b.length); w.bytes(b);
  }
  for (const x of buffers) {
    const b = utf8enc.encode(x.name);
    w.u16(b.length); w.bytes(b); w.u8(x.mode);
    w.u8(x.display >= 0 && x.display <= 5 ? x.display : 0); w.u16(x.longEdge ?? 0);
  }
  return w.finish();
}

// ---- link records (docs/wire.md, "Links") ----------------------------------

export const LINK = { HELLO: 1, WELCOME: 2, OPEN: 3, OPENED: 4, CLOSE: 5,
  FRAME: 6, CLOCK: 7, ERROR: 8 };
export const LINK_MAGIC = 0x4c595053;

export function encodeLink(op, chan, payload = new Uint8Array(0)) {
  const out = new Uint8Array(8 + payload.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, payload.length, true);
  out[4] = op;
  dv.setUint16(6, chan, true);
  out.set(payload, 8);
  return out;
}

export function encodeHello(token = '') {
  const t = utf8enc.encode(token);
  if (t.length > 128) throw new RangeError('token over 128 bytes');
  const p = new Uint8Array(12 + t.length), dv = new DataView(p.buffer);
  dv.setUint32(0, LINK_MAGIC, true); dv.setUint32(4, 1, true);
  dv.setUint16(8, t.length, true); p.set(t, 12);
  return encodeLink(LINK.HELLO, 0, p);
}

export const encodeOpen = (chan, name) =>
  encodeLink(LINK.OPEN, chan, utf8enc.encode(name));

export function encodeLinkFrame(chan, frame) {
  const p = new Uint8Array(8 + frame.length);
  p.set(frame, 8);
  return encodeLink(LINK.FRAME, chan, p);
}

export function encodeClockReq(t0ns) {
  const p = new Uint8Array(8), dv = new DataView(p.buffer);
  dv.setUint32(0, t0ns % 4294967296, true);
  dv.setUint32(4, Math.floor(t0ns / 4294967296), true);
  return encodeLink(LINK.CLOCK, 0, p);
}

// One whole record (a WebSocket message): {op, chan, len, …by op}.
export function parseLink(bytes) {
  const b = view(bytes);
  if (b.length < 8) fail('ETRUNCATED', b.length);
  const dv = new DataView(b.buffer, b.byteOffset, b.length);
  const len = dv.getUint32(0, true), op = b[4], flags = b[5];
  const chan = dv.getUint16(6, true);
  if (len !== b.length - 8) fail('ETRUNCATED', 0, 'record length');
  if (flags || op < 1 || op > 8) fail('EBADHEADER', 4);
  const r = { op, chan, len };
  const p = 8;
  switch (op) {
    case LINK.WELCOME:
      if (len !== 8) fail('EBADVALUE', p);
      r.version = dv.getUint32(p, true); r.maxRecord = dv.getUint32(p + 4, true);
      break;
    case LINK.OPENED:
      if (len !== 8) fail('EBADVALUE', p);
      r.id = hex64(dv, p);
      break;
    case LINK.CLOSE:
      if (len !== 4) fail('EBADVALUE', p);
      r.code = dv.getInt32(p, true);
      break;
    case LINK.FRAME:
      if (len < 8 + FRAME_MIN) fail('EBADVALUE', p);
      r.lost = dv.getUint32(p, true);
      r.frame = b.subarray(p + 8);
      break;
    case LINK.CLOCK:
      if (len !== 24) fail('EBADVALUE', p);
      r.t = [u64(dv, p), u64(dv, p + 8), u64(dv, p + 16)];
      break;
    case LINK.ERROR:
      if (len < 4) fail('EBADVALUE', p);
      r.code = dv.getInt32(p, true);
      r.text = utf8.decode(b.subarray(p + 4));
      break;
    default: break;
  }
  return r;
}
