// zones_state.js — the page's CPU-zone state, rebuilt from decoded ZONES
// sections (wire_zones.js) exactly as src/consumer/zones_state.c does it:
// per thread, a begin opens a span on the thread's stack, an end closes the
// innermost one (self time = duration minus its children's), frame markers
// go to a ring of the last frames and spans that ended before the oldest
// frame kept are let go. An end with nothing open (a zone begun before the
// page joined) is counted and ignored, which keeps every later span exact.
// Per location: calls, total, self and max in the provider's second in
// progress and the one before (spy_state_zone_last_second).
//
// Spans: {start, end (0 while open), loc, depth, flags (1 = cut: its end
// was lost)} in provider CLOCK_MONOTONIC ns. Span objects are only ever
// completed (end set once), never reused, so the recorder can keep
// references to them (frameSpans).
import { EV, THREAD_NAMED, THREAD_RESET, THREAD_GONE } from './wire_zones.js';

export const SPAN_CUT = 1;
export const FRAMES_MAX = 256;
export const DEPTH_MAX = 1024;
const MAX_THREADS = 1024;

export class ZoneState {
  constructor(keepFrames = 16, keepSpans = 65536) {
    this.keepFrames = Math.min(keepFrames, FRAMES_MAX - 1);
    this.keepSpans = keepSpans;
    this.reset();
  }

  reset() {
    this.locs = new Map(); // id → {id, name, function, file, line, color, second, cur, last}
    this.threads = new Map(); // thread id → thread
    this.frames = []; // [{frame, start}], oldest first, at most FRAMES_MAX
    this.latestNs = 0;
    this.seenLost = 0;
    this.events = 0; this.spans = 0; this.unmatched = 0; this.cut = 0;
    this.dropped = 0;
  }

  thread(id) {
    let t = this.threads.get(id);
    if (t || this.threads.size >= MAX_THREADS) return t ?? null;
    t = { thread: id, osTid: 0, name: '', dropped: 0, gone: false,
      spans: [], open: [], child: [], tooDeep: 0, unmatched: 0 };
    this.threads.set(id, t);
    return t;
  }

  cutOpen(t) {
    for (const sp of t.open) {
      sp.end = this.latestNs > sp.start ? this.latestNs : sp.start;
      sp.flags |= SPAN_CUT;
      this.cut++;
    }
    t.open = []; t.child = []; t.tooDeep = 0;
  }

  // Applies one decoded ZONES section; `lost` is the client's count of
  // lost frames (a change cuts every open zone: its end may be lost).
  apply(z, lost = 0) {
    if (lost !== this.seenLost) {
      this.seenLost = lost;
      for (const t of this.threads.values()) this.cutOpen(t);
    }
    for (const l of z.locs) {
      const old = this.locs.get(l.id);
      this.locs.set(l.id, { second: 0, cur: sums(), last: sums(), ...old, ...l });
    }
    for (const ti of z.threads) {
      const t = this.thread(ti.thread);
      if (!t) continue;
      t.osTid = ti.osTid;
      if (ti.flags & THREAD_NAMED) t.name = ti.name;
      if (ti.flags & THREAD_RESET) this.cutOpen(t);
      if (ti.flags & THREAD_GONE) t.gone = true;
      this.dropped += ti.dropped > t.dropped ? ti.dropped - t.dropped : 0;
      t.dropped = ti.dropped;
      const ev = ti.ev;
      for (let i = 0; i < ev.length; i += 3) {
        const kind = ev[i], ns = ev[i + 1];
        this.events++;
        if (ns > this.latestNs) this.latestNs = ns;
        if (kind === EV.BEGIN) this.begin(t, ns, ev[i + 2]);
        else if (kind === EV.END) this.end(t, ns);
        else this.frameMarker(ev[i + 2], ns);
      }
    }
  }

  begin(t, ns, loc) {
    if (t.open.length >= DEPTH_MAX || t.tooDeep) { t.tooDeep++; return; }
    if (t.spans.length >= this.keepSpans) t.spans.shift().evicted = true; // the oldest goes
    const sp = { start: ns, end: 0, loc, depth: t.open.length, flags: 0 };
    t.spans.push(sp);
    t.open.push(sp);
    t.child.push(0);
  }

  end(t, ns) {
    if (t.tooDeep) { t.tooDeep--; return; }
    if (!t.open.length) { t.unmatched++; this.unmatched++; return; }
    const sp = t.open.pop();
    const child = t.child.pop();
    if (sp.evicted) return; // its slot was reused (C: a < first): nothing summed
    sp.end = ns > sp.start ? ns : sp.start;
    const dur = sp.end - sp.start;
    if (t.child.length) t.child[t.child.length - 1] += dur;
    this.addSums(sp.loc, sp.end, dur, dur > child ? dur - child : 0);
    this.spans++;
  }

  addSums(id, endNs, dur, self) {
    const l = this.locs.get(id);
    if (!l) return; // not known yet: its name comes with the next pass
    const sec = Math.floor(endNs / 1e9);
    let to = l.cur;
    if (l.second === undefined || sec > l.second) { // a later second
      l.last = sec === l.second + 1 ? l.cur : sums();
      to = l.cur = sums();
      l.second = sec;
    } else if (sec < l.second) {
      // another thread's block of the section, behind this one in time:
      // it counts in the second before, anything older is not kept
      if (sec + 1 !== l.second) return;
      to = l.last;
    }
    to.calls++;
    to.total += dur;
    to.self += self;
    if (dur > to.max) to.max = dur;
  }

  frameMarker(frame, ns) {
    this.frames.push({ frame, start: ns });
    if (this.frames.length > FRAMES_MAX) this.frames.shift();
    const kf = this.keepFrames;
    if (this.frames.length > kf) {
      const keepNs = this.frames[this.frames.length - kf].start;
      for (const t of this.threads.values()) prune(t, keepNs);
    }
  }

  // The last whole second of a location (spy_state_zone_last_second).
  lastSecond(l) {
    const now = Math.floor(this.latestNs / 1e9);
    if (!l) return sums();
    if (l.second === now) return l.last;
    if (l.second + 1 === now) return l.cur;
    return sums();
  }

  // Frame `age` back from the newest marker: {frame, start, end (0: still
  // running)}, or null.
  frame(age) {
    const n = this.frames.length;
    if (age >= n) return null;
    const f = this.frames[n - 1 - age];
    return { frame: f.frame, start: f.start, end: age ? this.frames[n - age].start : 0 };
  }

  // Every thread's spans overlapping [start, end) (end 0: open-ended), in
  // begin order: [{thread, name, spans}], spans shared with the state (not
  // copied). Walks back from the newest span until 64 in a row ended
  // before `start`; zones still open are added from the thread's stack
  // however old they are.
  overlapping(start, end) {
    const out = [];
    for (const t of this.threads.values()) {
      const spans = [];
      const s = t.spans;
      let miss = 0;
      for (let i = s.length - 1; i >= 0 && miss < 64; i--) {
        const sp = s[i];
        if (end && sp.start >= end) continue;
        if (sp.start >= start || !sp.end || sp.end > start) { spans.push(sp); miss = 0; }
        else miss++;
      }
      const have = new Set(spans);
      for (const sp of t.open) if (!have.has(sp) && (!end || sp.start < end)) spans.push(sp);
      spans.sort((a, b) => a.start - b.start || a.depth - b.depth);
      out.push({ thread: t.thread, name: t.name, spans });
    }
    return out;
  }
}

const sums = () => ({ calls: 0, total: 0, self: 0, max: 0 });

function prune(t, keepNs) {
  let k = 0;
  const s = t.spans;
  while (k < s.length && s[k].end && s[k].end < keepNs) k++;
  if (k) s.splice(0, k);
}
