// overlay.js — the stats overlay (FPS, CPU, GPU with their colours, the
// 60-sample CPU sparkline against the dashed 16.7 ms line, counters,
// memory, resolution, adapter, PAUSED / idle, DEBUG) and the stats detail
// of a series on click (min / p50 / mean / p95 / p99 / max + a 32-bin
// histogram over the page's ring, up to the frame shown).
import { $, el, bytes, num } from './dom.js';
import { sparkline, histogram } from './chart.js';
import { describe } from './model.js';

// Thresholds of the reference overlay: FPS green from 55, yellow from 30;
// CPU / GPU green under 8 ms, yellow under 16; PASS yellow above 2, red
// above 7.
export const fpsClass = (f) => (f >= 55 ? 'good' : f >= 30 ? 'warn' : 'bad');
export const msClass = (m) => (m < 8 ? 'good' : m < 16 ? 'warn' : 'bad');
const LABEL = { draws: 'DRAW', passes: 'PASS', mips: 'MIP', objects: 'OBJS',
  particles: 'PTS', dirty: 'DIRTY' };

function envGet(env, k) {
  const e = env.get(k);
  return e && e.hasValue ? e.value : null;
}
const flag = (v) => v === true || (typeof v === 'number' && v !== 0) ||
  (typeof v === 'string' && v !== '' && v !== '0' && v !== 'false');

export class Overlay {
  constructor(model, onSeries) {
    this.model = model;
    this.detail = null;
    for (const s of document.querySelectorAll('#overlay .series')) {
      s.addEventListener('click', () => this.open(s.dataset.series));
    }
    $('#detail-close').addEventListener('click', () => { this.detail = null; $('#detail').hidden = true; });
    this.onSeries = onSeries;
  }

  open(series) {
    this.detail = series;
    $('#detail').hidden = false;
    this.onSeries?.();
  }

  render(v) {
    const m = this.model;
    const i = v.index, pin = v.pinned; // pin: a parked frame scrolled out of the ring
    const has = i >= 0 || !!pin;
    const fps = pin ? pin.fps : has ? m.fps[i] : NaN, cpu = pin ? pin.cpu : has ? m.cpu[i] : NaN;
    const gpu = pin ? pin.gpu : has ? m.gpu[i] : NaN;
    const set = (id, text, cls) => {
      const e = $(id);
      if (e.textContent !== text) e.textContent = text;
      if (e.className !== cls) e.className = cls;
    };
    set('#fps', has ? fps.toFixed(1) : '–', has ? fpsClass(fps) : '');
    set('#cpu', has ? `${cpu.toFixed(2)} ms` : '–', has ? msClass(cpu) : '');
    set('#gpu', !has ? '–' : Number.isNaN(gpu) ? 'n/a' : `${gpu.toFixed(2)} ms`,
      has && !Number.isNaN(gpu) ? msClass(gpu) : 'dim');
    // The sparkline is redrawn only when the samples it shows changed.
    const sparkSig = pin ? `pin:${v.frame}` : `${m.gen}:${m.samples}:${v.frame}:${m.len}`;
    if (sparkSig !== this.sparkSig) {
      sparkline($('#spark'), pin ? pin.spark : m.series('cpu', 60, v.frame), { ref: 16.7 });
      this.sparkSig = sparkSig;
    }
    // counters
    const names = m.counterNames;
    const parts = [];
    const ci = (n) => names.indexOf(n);
    for (let c = 0; c < names.length; c++) {
      const n = names[c];
      if (n === 'fast' || n === 'effect') continue;
      const val = pin ? pin.ctr[c] : has ? m.counter(c, i) : NaN;
      const cls = n === 'passes' ? (val > 7 ? 'bad' : val > 2 ? 'warn' : '') : '';
      parts.push(el('span', { class: `ctr ${cls}`, 'data-name': n, text: `${LABEL[n] ?? n.toUpperCase()} ${num(val)}`,
        onclick: () => this.open(n) }));
    }
    if (ci('fast') >= 0 && ci('effect') >= 0) {
      const ctr = (c) => (pin ? pin.ctr[c] : has ? m.counter(c, i) : NaN);
      const a = ctr(ci('fast')), b = ctr(ci('effect'));
      parts.push(el('span', { class: 'ctr', 'data-name': 'shapes', text: `SHAPES ${num(a)}.${num(b)}` }));
    }
    // Only when the text changed: a rebuild restyles the panel.
    const sig = parts.map((p) => p.className + p.textContent).join('|');
    if (sig !== this.ctrSig) { $('#counters').replaceChildren(...parts); this.ctrSig = sig; }
    // memory, resolution, debug, adapter, paused / idle
    const env = v.env;
    const rss = envGet(env, 'memory.rss_bytes'), heap = envGet(env, 'memory.heap_bytes');
    const w = envGet(env, 'width'), h = envGet(env, 'height'), pr = envGet(env, 'pixel_ratio');
    const dbg = envGet(env, 'debug_mode');
    const line = [];
    line.push(`MEM ${rss !== null ? bytes(rss) : 'n/a'}${heap !== null ? ` heap ${bytes(heap)}` : ''}`);
    if (w !== null) line.push(`RES ${w}×${h}${pr !== null ? ` @${num(pr, 2)}` : ''}`);
    if (dbg) line.push(`DEBUG ${String(dbg).toUpperCase()}`);
    const put = (id, t) => { const e = $(id); if (e.textContent !== t) e.textContent = t; };
    put('#envline', line.join('   '));
    put('#adapter', envGet(env, 'adapter') ? `GPU ${envGet(env, 'adapter')}` : '');
    const flags = [];
    if (flag(envGet(env, 'paused'))) flags.push(el('span', { text: 'PAUSED' }));
    if (flag(envGet(env, 'idle'))) flags.push(el('span', { text: 'idle' }));
    const fsig = flags.map((f) => f.textContent).join();
    if (fsig !== this.flagSig) { $('#flags').replaceChildren(...flags); this.flagSig = fsig; }
    if (this.detail) this.renderDetail(v);
  }

  renderDetail(v) {
    const d = describe(this.model.series(this.detail, Infinity, v.frame));
    $('#detail-name').textContent = `${this.detail} (${d ? d.n : 0} samples)`;
    if (!d) { $('#detail-table').replaceChildren(); return; }
    const f = (x) => num(x, 2);
    $('#detail-table').replaceChildren(
      el('tr', {}, ...['min', 'p50', 'mean', 'p95', 'p99', 'max'].map((k) => el('th', { text: k }))),
      el('tr', {}, ...['min', 'p50', 'mean', 'p95', 'p99', 'max'].map((k) => el('td', { 'data-stat': k, text: f(d[k]) }))));
    histogram($('#detail-hist'), d.hist);
  }
}
