// values.js — the named values: one row per registry entry with its value
// as of the frame shown, a chart of its history (numbers as a line, vectors
// one line per component, bools as bits), mean / min / max over that
// history, stale marking, a name filter, and subscribing with a registry
// filter from the UI (only the names matching the filter get values; the
// others still arrive as metadata, so they stay listed).
//
// Stale: a value unchanged is not resent, but a registry checkpoint
// refreshes every value every 5 s; a row is stale when the provider has
// been silent for 2000 ms, or its value was not refreshed for 2000 ms past
// the checkpoint period (the C consumer's rule, spy_state_is_stale).
import { $, el, num, value } from './dom.js';
import { lines, bits } from './chart.js';
import { KIND } from './wire.js';

const STALE_MS = 2000, CHECKPOINT_MS = 5000;
const setText = (e, t) => { if (e.textContent !== t) e.textContent = t; };

export class Values {
  constructor(client, model) {
    this.client = client;
    this.model = model;
    this.filter = '';
    this.rowsByKey = new Map();
    const f = $('#filter');
    f.addEventListener('input', () => { this.filter = f.value.trim(); this.dirty = true; });
    $('#sub-filter').addEventListener('click', () => {
      const names = [...model.registry.keys()].filter((k) => this.match(k));
      model.setFilter(names);
      client.setRegistryFilter(names);
      $('#sub-state').textContent = `subscribed to ${names.length} value${names.length === 1 ? '' : 's'}`;
    });
    $('#sub-all').addEventListener('click', () => {
      model.setFilter(null);
      client.setRegistryFilter(null);
      $('#sub-state').textContent = 'subscribed to every value';
    });
  }

  match(k) { return !this.filter || k.toLowerCase().includes(this.filter.toLowerCase()); }

  row(key) {
    let r = this.rowsByKey.get(key);
    if (r) return r;
    const cells = {
      name: el('td', { text: key, title: key }), kind: el('td'), val: el('td', { class: 'val' }),
      chart: el('td', {}, el('canvas', { class: 'vchart' })),
      mean: el('td'), min: el('td'), max: el('td'),
    };
    r = { tr: el('tr', { 'data-key': key }, ...Object.values(cells)), cells };
    this.rowsByKey.set(key, r);
    return r;
  }

  render(v) {
    const tbody = $('#values-table tbody');
    const now = performance.now();
    const silent = this.client.conn === 'stale' || this.client.conn === 'gone';
    const keys = [...v.registry.keys()].filter((k) => this.match(k)).sort();
    const trs = [];
    for (const k of keys) {
      const e = v.registry.get(k);
      const live = this.model.registry.get(k);
      const r = this.row(k);
      const c = r.cells;
      setText(c.kind, ['', 'float', 'uint', 'int', 'float2', 'float3', 'float4', 'bits', 'bool', 'string', 'blob'][e.kind] ?? '?');
      setText(c.val, e.hasValue ? value(e.kind, e.value) : '(not subscribed)');
      const raw = e.hasValue ? JSON.stringify(e.value instanceof Uint8Array ? [...e.value] : e.value) : '';
      if (c.val.dataset.raw !== raw) c.val.dataset.raw = raw;
      const stale = !v.parked && (silent || (live && now - live.updatedMs > CHECKPOINT_MS + STALE_MS));
      const cls = `${stale ? 'stale' : ''} ${e.hasValue ? '' : 'meta'}`;
      if (r.tr.className !== cls) r.tr.className = cls;
      // history up to the frame shown; the chart and its figures are redrawn
      // only when that history changed
      const hist = (live?.hist ?? []).filter((p) => p.frame <= v.frame);
      const canvas = c.chart.firstChild;
      const sig = hist.length && e.hasValue
        ? `${e.kind}:${hist.length}:${hist[0].frame}:${hist[hist.length - 1].frame}` : '';
      if (sig === r.sig) { trs.push(r.tr); continue; }
      r.sig = sig;
      if (hist.length && e.hasValue) {
        if (e.kind === KIND.BOOL) bits(canvas, hist.map((p) => p.c[0]));
        else {
          const n = hist[hist.length - 1].c.length;
          const series = [];
          for (let j = 0; j < n; j++) series.push(hist.map((p) => p.c[j]));
          lines(canvas, series);
        }
        const n = hist[hist.length - 1].c.length;
        const agg = (fn) => [...Array(n).keys()].map((j) => num(fn(hist.map((p) => p.c[j])), 2)).join(' / ');
        setText(c.mean, agg((a) => a.reduce((x, y) => x + y, 0) / a.length));
        setText(c.min, agg((a) => Math.min(...a)));
        setText(c.max, agg((a) => Math.max(...a)));
      } else {
        canvas.getContext('2d').clearRect(0, 0, canvas.width, canvas.height);
        c.mean.textContent = c.min.textContent = c.max.textContent = '';
      }
      trs.push(r.tr);
    }
    // Same rows in the same order: leave the DOM alone (no relayout).
    const order = keys.join('\n');
    if (order !== this.order) { tbody.replaceChildren(...trs); this.order = order; }
  }
}
