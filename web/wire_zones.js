// wire_zones.js — the ZONES section (14) in the browser: the JS twin of
// spy_get_zones (src/wire/zones.c, docs/wire.md "ZONES"). The whole section
// is walked and checked once — every length, varint, kind, location id and
// time — before anything is handed out, so a malformed section is refused
// whole with the C decoder's error code, never half applied.
//
// decodeZones(f, s) → {flags, baseNs, locs: [{id, line, color, name,
// function, file}], threads: [{thread, osTid, flags, name, dropped, ev}]}
// where ev is a Float64Array of (kind, t_ns, value) triples: kind 0 end,
// 1 begin (value: location id), 2 frame marker (value: frame number).
// Times are provider CLOCK_MONOTONIC nanoseconds as JS numbers: exact up to
// 2^53 ns (104 days of uptime); the overflow check is the C one (2^64).
import { WireError } from './wire.js';

export const ZONES_FULL = 0x1;
export const THREAD_RESET = 0x1;
export const THREAD_NAMED = 0x2;
export const THREAD_GONE = 0x4;
export const LOC_ID_MIN = 16;
export const LOC_ID_MAX = 65535;
export const FILE_MAX = 1023;
export const EV = { END: 0, BEGIN: 1, FRAME: 2 };

const HDR = 24, LOC_HDR = 16, THREAD_HDR = 24, THREAD_NAME_MAX = 63;
const U64_MAX = 18446744073709551615;
const pad4 = (n) => (n + 3) & ~3;
const utf8 = new TextDecoder('utf-8');
const fail = (code, off, what) => { throw new WireError(code, off, what); };
const u64 = (dv, o) =>
  dv.getUint32(o, true) + dv.getUint32(o + 4, true) * 4294967296;

// Reads the events of one thread block [p, end) into out (an array of
// numbers), as spy_get_zones checks them; returns nothing, throws.
function events(b, p, end, t, out) {
  while (p < end) {
    // The first varint: delta << 2 | kind. Read as a low byte (kind) plus
    // the rest as a number; at most 10 bytes, the 10th at most 1.
    let v = 0, mul = 1, i = 0, kind = 0;
    const at = p;
    for (;; i++) {
      if (i === 10 || p >= end) fail('EBADVALUE', at, 'zone event varint');
      const x = b[p++];
      if (i === 9 && x > 1) fail('EBADVALUE', at, 'zone event varint');
      if (i === 0) kind = x & 3;
      v += (x & 0x7f) * mul;
      mul *= 128;
      if (!(x & 0x80)) break;
    }
    if (kind > EV.FRAME) fail('EBADVALUE', at, 'zone event kind');
    const d = Math.floor(v / 4);
    let val = 0;
    if (kind !== EV.END) {
      mul = 1;
      const vat = p;
      for (i = 0; ; i++) {
        if (i === 10 || p >= end) fail('EBADVALUE', vat, 'zone event value');
        const x = b[p++];
        if (i === 9 && x > 1) fail('EBADVALUE', vat, 'zone event value');
        val += (x & 0x7f) * mul;
        mul *= 128;
        if (!(x & 0x80)) break;
      }
      if (kind === EV.BEGIN && (val < LOC_ID_MIN || val > LOC_ID_MAX)) {
        fail('EBADVALUE', vat, 'zone location id');
      }
    }
    if (t + d > U64_MAX) fail('EBADVALUE', at, 'zone time overflows');
    t += d;
    out.push(kind, t, val);
  }
}

export function decodeZones(f, s) {
  const b = f.bytes, dv = f.dv, o = s.off, len = s.len;
  if (len < HDR) fail('EBADSECTION', o, 'ZONES header');
  const flags = dv.getUint16(o, true);
  if ((flags & ~ZONES_FULL) || dv.getUint16(o + 2, true) || dv.getUint32(o + 12, true)) {
    fail('EBADVALUE', o, 'ZONES flags or reserved');
  }
  const nl = dv.getUint32(o + 4, true), nt = dv.getUint32(o + 8, true);
  const baseNs = u64(dv, o + 16);
  if (nl * LOC_HDR + nt * THREAD_HDR > len - HDR) fail('EBADSECTION', o + 4, 'ZONES counts');
  let off = HDR;
  const locs = [];
  for (let i = 0; i < nl; i++) {
    if (len - off < LOC_HDR) fail('EBADSECTION', o + off, 'zone location');
    const h = o + off;
    const id = dv.getUint32(h, true), fl = dv.getUint16(h + 14, true);
    if (id < LOC_ID_MIN || id > LOC_ID_MAX || fl > FILE_MAX) {
      fail('EBADVALUE', h, 'zone location id or file');
    }
    const nn = b[h + 12], fn = b[h + 13];
    const body = nn + fn + fl;
    if (len - off - LOC_HDR < body) fail('EBADSECTION', h, 'zone location strings');
    const q = h + LOC_HDR;
    locs.push({
      id, line: dv.getUint32(h + 4, true), color: dv.getUint32(h + 8, true),
      name: utf8.decode(b.subarray(q, q + nn)),
      function: utf8.decode(b.subarray(q + nn, q + nn + fn)),
      file: utf8.decode(b.subarray(q + nn + fn, q + body)),
    });
    off = Math.min(pad4(off + LOC_HDR + body), len);
  }
  const threads = [];
  for (let i = 0; i < nt; i++) {
    if (len - off < THREAD_HDR) fail('EBADSECTION', o + off, 'zone thread block');
    const h = o + off;
    const thread = dv.getUint32(h, true), tf = b[h + 8], nn = b[h + 9];
    if (!thread || (tf & ~7) || nn > THREAD_NAME_MAX || dv.getUint16(h + 10, true)) {
      fail('EBADVALUE', h, 'zone thread header');
    }
    const evLen = dv.getUint32(h + 12, true);
    if (len - off - THREAD_HDR < nn + evLen) fail('EBADSECTION', h + 12, 'zone thread events');
    const p = h + THREAD_HDR + nn;
    const ev = [];
    events(b, p, p + evLen, baseNs, ev);
    threads.push({
      thread, osTid: dv.getUint32(h + 4, true), flags: tf,
      name: utf8.decode(b.subarray(h + THREAD_HDR, h + THREAD_HDR + nn)),
      dropped: u64(dv, h + 16), ev: Float64Array.from(ev),
    });
    off = Math.min(pad4(off + THREAD_HDR + nn + evLen), len);
  }
  if (off !== len) fail('EBADSECTION', o + off, 'bytes after the last ZONES block');
  return { flags, baseNs, locs, threads };
}
