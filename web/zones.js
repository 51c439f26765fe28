// zones.js — the CPU zones panel: a canvas timeline of the last frames per
// thread (thread names, nested spans as stacked bars in their location's
// colour, frame markers as vertical lines with their numbers), wheel to
// zoom around the pointer, drag to pan, double-click to reset, a tooltip
// on hover (name, function, file:line, duration, self time); and a table
// per location (calls, total, self, max over the provider's last second,
// sortable by any column). Parked on a frame (the recorder), the timeline
// shows that frame shaded between its neighbours and the table that
// frame's zones, from the model's store (model.zonesAt).
//
// The panel subscribes to ZONES only while it is open (the `zones` button
// or key z): opening adds the feature bit and re-subscribes, closing takes
// it away again, so a provider measures nothing no one looks at. Times on
// the axis are the page's (performance.now) through the clock offset the
// client measured over the link (server − page); until it is known, 0.
import { $, el, ns } from './dom.js';
import { FEAT, SEC } from './wire.js';

const LIVE_FRAMES = 4; // frames shown live
const ROW = 16; // px per nesting level
const LANE_GAP = 6;
const LABEL_W = 90; // the thread-name column
const AXIS_H = 16;
const PALETTE = ['#5ad1ff', '#ffb454', '#c792ea', '#7fd962', '#ff6b6b',
  '#f2c94c', '#4fc3a1', '#e08fb5', '#8fa8ff', '#d9a066'];

const css = (c) => `#${c.toString(16).padStart(6, '0')}`;
export const locColor = (l, id) => (l && l.color ? css(l.color & 0xffffff) : PALETTE[id % PALETTE.length]);

// The threads of several recorded frames as one list, each span once (a
// span crossing a frame boundary is kept by both frames).
export function mergeThreads(frames) {
  const by = new Map();
  for (const f of frames) {
    for (const t of f.threads) {
      let m = by.get(t.thread);
      if (!m) by.set(t.thread, (m = { ...t, spans: [], seen: new Set() }));
      for (const sp of t.spans) {
        const k = `${sp.start}/${sp.depth}/${sp.loc}`;
        if (m.seen.has(k)) continue;
        m.seen.add(k);
        m.spans.push(sp);
      }
    }
  }
  return [...by.values()].map(({ seen, ...t }) => ({ ...t, spans: t.spans.sort((a, b) => a.start - b.start || a.depth - b.depth) }));
}

// Per-location sums over a list of threads' spans (a parked frame):
// calls, total, self (duration minus the children's), max.
export function frameSums(threads) {
  const out = new Map();
  for (const t of threads) {
    for (const [sp, self] of withSelf(t.spans)) {
      if (!sp.end) continue;
      const d = sp.end - sp.start;
      const s = out.get(sp.loc) ?? { calls: 0, total: 0, self: 0, max: 0 };
      s.calls++; s.total += d; s.self += self; if (d > s.max) s.max = d;
      out.set(sp.loc, s);
    }
  }
  return out;
}

// Self time of every span of one thread (spans in begin order): duration
// minus the durations of the spans directly inside it.
export function withSelf(spans) {
  const res = spans.map((sp) => [sp, sp.end ? sp.end - sp.start : 0]);
  const stack = [];
  for (const r of res) {
    const sp = r[0];
    while (stack.length && stack[stack.length - 1][0].depth >= sp.depth) stack.pop();
    const parent = stack[stack.length - 1];
    if (parent && parent[0].depth === sp.depth - 1 && sp.end) parent[1] -= sp.end - sp.start;
    stack.push(r);
  }
  for (const r of res) if (r[1] < 0) r[1] = 0;
  return res;
}

export class Zones {
  constructor(client, model, onChange) {
    this.client = client;
    this.model = model;
    this.onChange = onChange;
    this.open = false;
    this.sort = { key: 'total', dir: -1 };
    this.zoom = 1; // 1: the whole default range
    this.pan = 0; // ns, added to the left edge
    this.boxes = []; // hit boxes of the last draw: {x, y, w, h, sp, self, thread}
    this.btn = el('button', { id: 'zones-btn', title: 'CPU zones: timeline and per-location table (z)',
      onclick: () => this.toggle() }, 'zones');
    const spacer = $('header .spacer');
    if (spacer) spacer.before(this.btn); else $('header')?.append(this.btn);
    this.canvas = el('canvas', { id: 'zones-canvas', style: 'width:100%;height:220px;display:block;cursor:grab' });
    this.tip = el('div', { id: 'zones-tip', hidden: '', style: 'position:fixed;pointer-events:none;z-index:9;background:#0d0f12;border:1px solid #2c323c;padding:4px 6px;font:12px system-ui;white-space:pre;color:#d6dde6' });
    this.info = el('span', { id: 'zones-info', class: 'dim' });
    const head = el('tr', {}, ...[['name', 'location'], ['calls', 'calls'], ['total', 'total'],
      ['self', 'self'], ['max', 'max'], ['where', 'function · file:line']].map(([k, t]) =>
      el('th', { 'data-key': k, style: 'cursor:pointer', onclick: () => this.sortBy(k) }, t)));
    this.tbody = el('tbody');
    this.table = el('table', { id: 'zones-table' }, el('thead', {}, head), this.tbody);
    this.panel = el('section', { id: 'zones', class: 'panel wide', hidden: '' },
      el('h2', {}, 'CPU zones ', this.info),
      this.canvas, el('h3', { id: 'zones-table-title' }, 'per location, last second'), this.table);
    const main = $('main');
    if (main) main.before(this.panel); else document.body.append(this.panel);
    document.body.append(this.tip);
    this.wire();
    client.on('data', () => { model.zoneLost = client.stats.lost; });
  }

  // ---- open / close: the subscription follows ----------------------------
  toggle(on = !this.open) {
    this.open = on;
    this.panel.hidden = !on;
    this.btn.classList.toggle('on', on);
    const bit = FEAT(SEC.ZONES);
    const f = this.client.o.features;
    this.client.o.features = on ? (f | bit) >>> 0 : (f & ~bit) >>> 0;
    if (!on) this.model.resetZones();
    if (this.client.dataChan && this.client.linkUp) this.client.subscribe();
    this.onChange();
  }

  sortBy(k) {
    this.sort = this.sort.key === k ? { key: k, dir: -this.sort.dir } : { key: k, dir: k === 'name' || k === 'where' ? 1 : -1 };
    this.onChange();
  }

  wire() {
    const c = this.canvas;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = this.range;
      if (!r) return;
      const x = e.offsetX - LABEL_W, w = c.clientWidth - LABEL_W;
      const at = r.lo + (Math.max(0, x) / w) * (r.hi - r.lo);
      const k = e.deltaY < 0 ? 1.25 : 0.8;
      this.zoom = Math.min(1e5, Math.max(0.2, this.zoom * k));
      const span = (r.base.hi - r.base.lo) / this.zoom;
      this.pan = at - (Math.max(0, x) / w) * span - r.base.lo;
      this.onChange();
    }, { passive: false });
    let drag = null;
    c.addEventListener('mousedown', (e) => { drag = { x: e.clientX, pan: this.pan }; c.style.cursor = 'grabbing'; });
    window.addEventListener('mouseup', () => { drag = null; c.style.cursor = 'grab'; });
    c.addEventListener('mousemove', (e) => {
      if (drag && this.range) {
        const r = this.range, w = c.clientWidth - LABEL_W;
        this.pan = drag.pan - ((e.clientX - drag.x) / w) * (r.hi - r.lo);
        this.onChange();
        return;
      }
      this.hover(e);
    });
    c.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    c.addEventListener('dblclick', () => { this.zoom = 1; this.pan = 0; this.onChange(); });
  }

  hover(e) {
    const b = this.boxes.find((q) => e.offsetX >= q.x && e.offsetX < q.x + q.w &&
      e.offsetY >= q.y && e.offsetY < q.y + q.h);
    if (!b) { this.tip.hidden = true; return; }
    const l = this.model.zones.locs.get(b.sp.loc);
    const dur = b.sp.end ? b.sp.end - b.sp.start : NaN;
    this.tip.textContent = `${l ? l.name : `#${b.sp.loc}`}\n${l ? `${l.function} · ${l.file}:${l.line}` : 'location not known yet'}\n` +
      `duration ${b.sp.end ? ns(dur) : 'open'}${b.sp.flags & 1 ? ' (cut)' : ''}\nself ${ns(b.self)}\nthread ${b.thread}, at ${this.pageMs(b.sp.start).toFixed(3)} ms (page clock)`;
    this.tip.hidden = false;
    this.tip.style.left = `${e.clientX + 12}px`;
    this.tip.style.top = `${e.clientY + 12}px`;
    this.hovered = b;
  }

  // Provider ns → page ms (performance.now), with the link's clock offset.
  pageMs(t) { return (t - (this.client.clock?.offsetNs ?? 0)) / 1e6; }

  // What to show: {lo, hi (provider ns), threads: [{thread, name, spans}],
  // frames: [{frame, start}], parked frame or null}.
  content(v) {
    const z = this.model.zones;
    if (v.parked) {
      const zf = this.model.zonesAt(v.frame);
      if (!zf) return { lo: 0, hi: 1, threads: [], frames: [], parked: v.frame, missing: true };
      const end = zf.end || zf.start + 1;
      // The frames on either side too, when the recorder holds them: the
      // parked one is shaded, and the table counts only its zones.
      const parts = [this.model.zonesAt(v.frame - 1), zf, this.model.zonesAt(v.frame + 1)].filter(Boolean);
      const last = parts[parts.length - 1], hi = Math.max(last.end || last.start + 1, end);
      return { lo: parts[0].start, hi, threads: mergeThreads(parts),
        frames: [...parts.map((f) => ({ frame: f.frame, start: f.start })), { frame: last.frame + 1, start: hi }],
        parked: v.frame, focus: { lo: zf.start, hi: end }, tableThreads: zf.threads, zf };
    }
    const n = z.frames.length;
    if (!n) return { lo: 0, hi: 1, threads: [], frames: [], parked: null };
    const first = z.frames[Math.max(0, n - 1 - LIVE_FRAMES)];
    const hi = Math.max(z.latestNs, first.start + 1);
    return { lo: first.start, hi, threads: z.overlapping(first.start, 0),
      frames: z.frames.slice(Math.max(0, n - 1 - LIVE_FRAMES)), parked: null };
  }

  render(v) {
    if (!this.open) return;
    const c = this.content(v);
    this.shown = c;
    const base = { lo: c.lo, hi: c.hi };
    const span = (base.hi - base.lo) / this.zoom;
    const lo = base.lo + this.pan, hi = lo + span;
    this.range = { lo, hi, base };
    this.drawTimeline(c, lo, hi);
    this.drawTable(c);
    const z = this.model.zones;
    this.info.textContent = c.parked !== null
      ? (c.missing ? `frame ${c.parked}: no zones recorded for it` : `frame ${c.parked}`)
      : `live · ${z.threads.size} threads · ${z.locs.size} locations${z.dropped ? ` · ${z.dropped} dropped by the provider` : ''}${z.unmatched ? ` · ${z.unmatched} ends before join` : ''}`;
    this.panel.dataset.frame = c.parked ?? '';
  }

  drawTimeline(c, lo, hi) {
    const cv = this.canvas, dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth || 600;
    const lanes = c.threads.map((t) => ({ ...t, depth: 1 + t.spans.reduce((a, s) => Math.max(a, s.depth), -1) }));
    const h = Math.max(60, AXIS_H + lanes.reduce((a, l) => a + Math.max(1, l.depth) * ROW + LANE_GAP, 0) + 4);
    if (cv.clientHeight !== h) cv.style.height = `${h}px`;
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const pw = w - LABEL_W;
    const X = (t) => LABEL_W + ((t - lo) / (hi - lo)) * pw;
    const zs = this.model.zones;
    this.boxes = [];
    if (c.focus) { // the parked frame among its neighbours
      g.fillStyle = '#1b2230';
      const fx0 = Math.max(LABEL_W, X(c.focus.lo)), fx1 = Math.min(w, X(c.focus.hi));
      if (fx1 > fx0) g.fillRect(fx0, AXIS_H, fx1 - fx0, h - AXIS_H);
    }
    let y = AXIS_H;
    for (const lane of lanes) {
      const lh = Math.max(1, lane.depth) * ROW;
      g.fillStyle = '#7d8896';
      g.fillText(lane.name || `thread ${lane.thread}`, 4, y + ROW / 2);
      g.strokeStyle = '#2c323c';
      g.beginPath(); g.moveTo(LABEL_W, y + lh + LANE_GAP / 2); g.lineTo(w, y + lh + LANE_GAP / 2); g.stroke();
      for (const [sp, self] of withSelf(lane.spans)) {
        const end = sp.end || zs.latestNs;
        if (end < lo || sp.start > hi) continue;
        const x0 = Math.max(LABEL_W, X(sp.start)), x1 = Math.min(w, X(end));
        const bw = Math.max(1, x1 - x0), by = y + sp.depth * ROW;
        const l = zs.locs.get(sp.loc);
        g.fillStyle = locColor(l, sp.loc);
        g.globalAlpha = sp.end ? 0.85 : 0.45;
        g.fillRect(x0, by + 1, bw, ROW - 2);
        g.globalAlpha = 1;
        if (bw > 24) {
          g.save();
          g.beginPath(); g.rect(x0, by, bw, ROW); g.clip();
          g.fillStyle = '#0d0f12';
          g.fillText(l ? l.name : `#${sp.loc}`, x0 + 3, by + ROW / 2);
          g.restore();
        }
        const inFrame = !c.focus || (sp.start >= c.focus.lo && sp.start < c.focus.hi);
        this.boxes.push({ x: x0, y: by, w: bw, h: ROW, sp, self, thread: lane.name || lane.thread, inFrame });
      }
      y += lh + LANE_GAP;
    }
    // Frame markers over the lanes, numbered on the axis.
    g.strokeStyle = '#f2c94c';
    g.fillStyle = '#f2c94c';
    for (const f of c.frames) {
      if (f.start < lo || f.start > hi) continue;
      const x = Math.round(X(f.start)) + 0.5;
      g.beginPath(); g.moveTo(x, AXIS_H - 4); g.lineTo(x, h); g.stroke();
      g.fillText(`#${f.frame}`, x + 3, AXIS_H / 2);
    }
    // The axis: page time, ms relative to the left edge's frame.
    g.fillStyle = '#7d8896';
    const ms = (hi - lo) / 1e6;
    g.fillText(`${this.pageMs(lo).toFixed(1)} ms`, 2, AXIS_H / 2); // page clock
    g.textAlign = 'right';
    g.fillText(`+${ms.toFixed(ms < 1 ? 3 : 1)} ms`, w - 2, h - 8);
    g.textAlign = 'left';
    if (!lanes.length) { g.fillText(c.parked !== null ? 'no zones for this frame' : 'waiting for zones…', LABEL_W + 8, h / 2); }
  }

  drawTable(c) {
    const zs = this.model.zones;
    let rows;
    if (c.parked !== null) {
      $('#zones-table-title', this.panel).textContent = `per location, frame ${c.parked}`;
      rows = [...frameSums(c.tableThreads ?? c.threads)].map(([id, s]) => ({ id, ...s }));
    } else {
      $('#zones-table-title', this.panel).textContent = 'per location, last second';
      rows = [...zs.locs.values()].map((l) => ({ id: l.id, ...zs.lastSecond(l) })).filter((r) => r.calls);
    }
    for (const r of rows) {
      const l = zs.locs.get(r.id);
      r.name = l ? l.name : `#${r.id}`;
      r.where = l ? `${l.function} · ${l.file}:${l.line}` : '';
      r.color = locColor(l, r.id);
    }
    const { key, dir } = this.sort;
    rows.sort((a, b) => (a[key] < b[key] ? -dir : a[key] > b[key] ? dir : a.id - b.id));
    this.rows = rows;
    this.tbody.replaceChildren(...rows.map((r) => el('tr', { 'data-loc': r.id, 'data-name': r.name },
      el('td', {}, el('span', { style: `display:inline-block;width:9px;height:9px;margin-right:5px;background:${r.color}` }), r.name),
      el('td', { 'data-v': r.calls }, String(r.calls)),
      el('td', { 'data-v': r.total }, ns(r.total)),
      el('td', { 'data-v': r.self }, ns(r.self)),
      el('td', { 'data-v': r.max }, ns(r.max)),
      el('td', { class: 'dim' }, r.where))));
  }
}
