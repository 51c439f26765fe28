// model.js — what the page knows about its provider: the JS twin of
// src/consumer/state.c (absent = keep, CLEARED = reset, SET = replace, a
// FULL list replaces the table; stats batches append to rings), plus the
// flight recorder: the last `capacity` frames (1024) of samples and every
// data frame's deltas, so any of those frames can be rebuilt — values from
// the nearest registry checkpoint (a FULL list) plus the deltas after it.
//
// Frame accuracy: a data frame's stats batch starts at `start_frame` and
// holds `count` samples; the provider flushes at the end of the batch's
// last frame, so the values in that data frame are the state as of frame
// start_frame + count − 1. The state "as of frame F" is therefore every
// data frame whose batch ended at or before F.
import { DELTA, KIND, HEALTH_FIELDS, FRAME_SNAPSHOT, FRAME_CHECKPOINT } from './wire.js';
import { ZoneState } from './zones_state.js';

const MAXC = 64;
const HIST = 240; // points per value chart
const ZONE_SPANS = 300000; // spans those frames may hold in all

export const numeric = (kind) => kind >= KIND.FLOAT && kind <= KIND.BOOL;

// A value as numbers for charts: vectors per component, bools as 0/1, bit
// sets as their popcount-free number.
export function components(kind, v) {
  if (v === null || v === undefined) return null;
  if (Array.isArray(v)) return v;
  if (typeof v === 'boolean') return [v ? 1 : 0];
  if (typeof v === 'number') return [v];
  return null;
}

function applyDelta(map, delta, now, filter, frame) {
  if (delta.full) for (const e of map.values()) e.listed = false;
  for (const d of delta.entries) {
    if (d.state === DELTA.CLEARED) { map.delete(d.key); continue; }
    let e = map.get(d.key);
    if (!e) { e = { key: d.key, hist: [] }; map.set(d.key, e); }
    e.kind = d.kind;
    const outside = d.state === DELTA.META || (filter && !filter.has(d.key));
    if (outside) {
      e.hasValue = false;
      e.value = null;
    } else {
      e.hasValue = true;
      e.value = d.value;
      if (frame !== null && e.hist) {
        const c = components(d.kind, d.value);
        if (c) {
          e.hist.push({ frame, c });
          if (e.hist.length > HIST) e.hist.shift();
        }
      }
    }
    e.updatedMs = now;
    e.listed = true;
  }
  if (delta.full) for (const [k, e] of map) if (!e.listed) map.delete(k);
}

export class Model {
  constructor(capacity = 1024) {
    this.capacity = capacity;
    this.reset();
  }

  reset() {
    const cap = this.capacity;
    this.key = new Float64Array(cap);
    this.fps = new Float32Array(cap);
    this.cpu = new Float32Array(cap);
    this.gpu = new Float32Array(cap);
    this.ctr = new Float32Array(cap * MAXC);
    this.head = 0; // next write
    this.len = 0;
    this.samples = 0;
    this.samplesLost = 0;
    this.lastFrame = -1;
    this.counterNames = [];
    this.registry = new Map();
    this.env = new Map();
    this.envFrozen = new Map(); // an immutable copy, shared by packets
    this.health = null;
    this.msgprof = null;
    this.held = false;
    this.packets = []; // {start, end, count, flags, reg, envAfter, health, t, seq}
    this.snapshots = 0;
    this.filter = null;
    this.frames = 0;
    this.resetZones();
  }

  setFilter(names) { this.filter = names ? new Set(names) : null; }

  // Applies one decoded data frame (client.js 'data').
  apply(f, d, now) {
    this.frames++;
    if (f.flags & FRAME_SNAPSHOT) this.snapshots++;
    if (d.schema) this.counterNames = d.schema.slice(0, MAXC);
    let end = this.lastFrame >= 0 ? this.lastFrame : null;
    if (d.stats && d.stats.count) {
      const s = d.stats;
      if (this.samples && s.startFrame > this.lastFrame + 1) {
        this.samplesLost += s.startFrame - this.lastFrame - 1;
      }
      if (s.startFrame + s.count - 1 < this.lastFrame) {
        // The provider restarted its frame keys (a new session of it):
        // the recorder starts over rather than mix two timelines.
        this.dropHistory();
      }
      const cap = this.capacity;
      for (let i = 0; i < s.count && !this.held; i++) {
        const h = this.head;
        this.key[h] = s.startFrame + i;
        this.fps[h] = s.fps[i];
        this.cpu[h] = s.cpu[i];
        this.gpu[h] = s.gpu[i];
        for (let c = 0; c < MAXC; c++) {
          this.ctr[c * cap + h] = c < s.nCounters ? s.counters[c][i] : NaN;
        }
        this.head = (h + 1) % cap;
        if (this.len < cap) this.len++;
      }
      this.samples += s.count;
      this.lastFrame = s.startFrame + s.count - 1;
      end = this.lastFrame;
    }
    if (d.registry) applyDelta(this.registry, d.registry, now, this.filter, end);
    if (d.env && d.env.entries.length) {
      applyDelta(this.env, d.env, now, null, null);
      this.envFrozen = new Map([...this.env].map(([k, e]) => [k, { ...e, hist: null }]));
    }
    if (d.buffers) { /* buffer metadata: not shown by this page yet */ }
    if (d.health) this.health = d.health.values;
    if (d.msgprof) this.applyMsgprof(d.msgprof);
    if (d.zones) this.applyZones(d.zones);
    if (end !== null && !this.held) {
      this.packets.push({
        start: d.stats ? d.stats.startFrame : end, end,
        count: d.stats ? d.stats.count : 0, flags: f.flags, seq: f.seq,
        reg: d.registry ?? null, envAfter: this.envFrozen,
        health: this.health, t: f.ts,
        checkpoint: !!(d.registry && d.registry.full),
      });
      this.prune();
    }
  }

  // The recorder holds still while the view is parked (so the frame being
  // looked at cannot scroll out of the ring): the live state goes on, the
  // ring and the packet list do not. On release the recorder starts again
  // from a checkpoint of the live registry (the deltas meanwhile are not
  // kept), after a gap in its frames.
  hold(on) {
    if (on === !!this.held) return;
    this.held = on;
    if (on || this.lastFrame < 0) return;
    const entries = [...this.registry.values()].map((e) => ({
      state: e.hasValue ? DELTA.SET : DELTA.META, kind: e.kind, key: e.key,
      value: e.hasValue ? e.value : null }));
    this.packets.push({ start: this.lastFrame, end: this.lastFrame, count: 0,
      flags: FRAME_CHECKPOINT, seq: null, reg: { full: true, entries },
      envAfter: this.envFrozen, health: this.health, t: Date.now(),
      checkpoint: true, synthetic: true });
  }

  dropHistory() {
    this.drops = (this.drops ?? 0) + 1;
    this.head = 0; this.len = 0; this.packets = [];
    this.zoneFrames.clear();
    this.zoneSpansHeld = 0;
    this.zoneNewest = -1;
  }

  // Keeps the packets the recorder's frames need: from the last registry
  // checkpoint at or before the oldest frame held.
  prune() {
    const oldest = this.oldestFrame();
    let k = -1;
    for (let i = 0; i < this.packets.length; i++) {
      const p = this.packets[i];
      if (p.end > oldest) break;
      if (p.checkpoint) k = i;
    }
    if (k > 0) this.packets.splice(0, k);
    if (this.packets.length > 8192) this.packets.splice(0, this.packets.length - 8192);
  }

  // ---- CPU zones (zones_state.js) and their recorder store -----------------
  // The live zone state, plus the zones of recent frames keyed by frame
  // number for the recorder: each stored frame holds every thread's spans
  // overlapping it (references into the state, so zones still open when it
  // was stored get their end). A frame is stored once the marker two frames
  // later arrived (other threads' blocks may trail the frame thread's); at
  // most `capacity` frames (the samples ring's) and ZONE_SPANS spans are
  // held, oldest out first (none while the recorder is parked).
  resetZones() {
    this.zones = new ZoneState(16);
    this.zoneFrames = new Map(); // frame → {frame, start, end, threads, n}
    this.zoneSpansHeld = 0;
    this.zoneNewest = -1;
    this.zoneLost = this.zoneLost ?? 0; // the client's lost count (zones.js sets it)
  }

  applyZones(z) {
    const zs = this.zones;
    zs.apply(z, this.zoneLost);
    // While parked nothing is evicted (the frame looked at stays), and
    // frames still arriving are stored only while there is room.
    const full = () => this.zoneFrames.size >= this.capacity || this.zoneSpansHeld >= ZONE_SPANS;
    for (let age = Math.min(zs.frames.length, zs.keepFrames) - 1; age >= 2; age--) {
      const f = zs.frame(age);
      if (this.zoneFrames.has(f.frame) || f.frame <= this.zoneNewest) continue;
      if (this.held && full()) break;
      const threads = zs.overlapping(f.start, f.end);
      const n = threads.reduce((a, t) => a + t.spans.length, 0);
      this.zoneFrames.set(f.frame, { ...f, threads, n });
      this.zoneNewest = f.frame;
      this.zoneSpansHeld += n;
    }
    for (const [k, v] of this.zoneFrames) {
      if (this.held || !full()) break;
      this.zoneFrames.delete(k);
      this.zoneSpansHeld -= v.n;
    }
  }

  // The stored zones of frame F, or null.
  zonesAt(frame) { return this.zoneFrames.get(frame) ?? null; }

  applyMsgprof(m) {
    const old = this.msgprof;
    const restart = !old || m.elapsedNs < old.baseElapsed;
    const base = restart ? { elapsed: 0, rows: new Map() } : old.base;
    const dt = m.elapsedNs - base.elapsed;
    const rows = m.types.map((t) => {
      const b = base.rows.get(t.type) ?? { count: 0, bytes: 0 };
      const prev = old && !restart ? old.rows.find((r) => r.type === t.type) : null;
      const rate = dt >= 1e9 || !prev || !old.rolled;
      return { ...t,
        msgsPerS: rate ? (dt ? (t.count - b.count) * 1e9 / dt : 0) : prev.msgsPerS,
        bytesPerS: rate ? (dt ? (t.bytes - b.bytes) * 1e9 / dt : 0) : prev.bytesPerS };
    });
    const roll = dt >= 1e9;
    this.msgprof = {
      ...m, rows, rolled: (old && !restart && old.rolled) || roll,
      baseElapsed: roll ? m.elapsedNs : base.elapsed,
      base: roll ? { elapsed: m.elapsedNs,
        rows: new Map(m.types.map((t) => [t.type, { count: t.count, bytes: t.bytes }])) }
        : base,
    };
  }

  // ---- the samples ring ----------------------------------------------------
  oldestFrame() {
    if (!this.len) return -1;
    return this.key[(this.head - this.len + this.capacity) % this.capacity];
  }
  newestFrame() { return this.len ? this.key[this.idx(0)] : -1; }
  // Ring index of sample `age` back from the newest.
  idx(age) { return (this.head - 1 - age + 2 * this.capacity) % this.capacity; }
  // Ring index of frame F (or the newest sample at or before it), or -1.
  find(frame) {
    let lo = 0, hi = this.len - 1, best = -1;
    while (lo <= hi) { // ages: 0 newest … len−1 oldest; keys descend with age
      const mid = (lo + hi) >> 1;
      const k = this.key[this.idx(mid)];
      if (k <= frame) { best = mid; hi = mid - 1; } else lo = mid + 1;
    }
    return best < 0 ? -1 : this.idx(best);
  }
  counter(c, i) { return this.ctr[c * this.capacity + i]; }

  // Values of one series over the ring, oldest first, up to (and
  // including) frame `upTo` (the recorder's position), last `n` of them.
  series(field, n = this.len, upTo = Infinity) {
    const out = [];
    for (let age = this.len - 1; age >= 0; age--) {
      const i = this.idx(age);
      if (this.key[i] > upTo) break;
      out.push(this.value(field, i));
    }
    return out.length > n ? out.slice(out.length - n) : out;
  }
  value(field, i) {
    if (field === 'fps') return this.fps[i];
    if (field === 'cpu') return this.cpu[i];
    if (field === 'gpu') return this.gpu[i];
    return this.counter(this.counterNames.indexOf(field), i);
  }

  // ---- the recorder: the state as of frame F ----------------------------------
  // {frame, sample index, registry Map, env Map, health, packet} — rebuilt
  // from the nearest checkpoint at or before F plus the deltas after it.
  at(frame) {
    const i = this.find(frame);
    let last = -1;
    for (let k = this.packets.length - 1; k >= 0; k--) {
      if (this.packets[k].end <= frame) { last = k; break; }
    }
    let cp = last;
    while (cp > 0 && !this.packets[cp].checkpoint) cp--;
    const reg = new Map();
    let complete = cp >= 0 && this.packets[cp]?.checkpoint;
    for (let k = Math.max(cp, 0); k <= last; k++) {
      const p = this.packets[k];
      if (p.reg) applyDelta(reg, p.reg, p.t, this.filter, null);
    }
    for (const e of reg.values()) e.hist = null;
    const p = last >= 0 ? this.packets[last] : null;
    return { frame, index: i, registry: reg, env: p ? p.envAfter : new Map(),
      health: p ? p.health : null, packet: p, complete: !!complete,
      packetIndex: last };
  }
}

// min / p50 / mean / p95 / p99 / max and a histogram of `bins` bins.
export function describe(values, bins = 32) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const q = (p) => v[Math.min(v.length - 1, Math.max(0, Math.ceil(p * v.length) - 1))];
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const min = v[0], max = v[v.length - 1];
  const hist = new Array(bins).fill(0);
  const w = (max - min) / bins || 1;
  for (const x of v) hist[Math.min(bins - 1, Math.floor((x - min) / w))]++;
  return { n: v.length, min, p50: q(0.5), mean, p95: q(0.95), p99: q(0.99), max,
    hist, binWidth: w };
}

export { HEALTH_FIELDS, FRAME_CHECKPOINT };
