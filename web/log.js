// log.js — the protocol log: every message in and out (time, provider
// frame, direction, type, bytes, sequence), bounded (the last 4000), with
// filters (text, direction, type, minimum bytes), pause / tail, a row that
// expands to its decoded frame, a jump to that frame in the recorder, and
// an export as JSON.
import { $, el } from './dom.js';
import { decodeFrame, decodeAll } from './wire.js';

const SHOWN = 120; // rows in the DOM at once (the newest matching ones)
const EVERY_MS = 1000; // new rows are put in at most this often

function decoded(raw) {
  try {
    const f = decodeFrame(raw);
    const d = decodeAll(f);
    const { bytes, dv, ...head } = f;
    return JSON.stringify({ ...head, sections: d }, (k, v) => {
      if (v instanceof Float32Array || v instanceof Uint32Array) return Array.from(v);
      if (v instanceof Uint8Array) return `${v.length} bytes`;
      if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
      return v;
    }, 1);
  } catch (e) {
    return `cannot decode: ${e.message}`;
  }
}

export class Log {
  constructor(client, recorder, max = 4000) {
    this.max = max;
    this.entries = [];
    this.total = 0;
    this.paused = false;
    this.types = new Set();
    this.open = new Set(); // expanded entry numbers
    this.recorder = recorder;
    this.dirty = true;
    client.on('log', (e) => this.add(e));
    for (const id of ['#log-text', '#log-dir', '#log-type', '#log-min']) {
      $(id).addEventListener('input', () => { this.dirty = true; this.render(true); });
    }
    $('#log-pause').addEventListener('click', () => {
      this.paused = !this.paused;
      $('#log-pause').textContent = this.paused ? 'tail' : 'pause';
      this.dirty = true;
    });
    $('#log-export').addEventListener('click', () => this.export());
  }

  add(e) {
    e.n = ++this.total;
    this.entries.push(e);
    if (this.entries.length > this.max) this.entries.splice(0, this.entries.length - this.max);
    if (!this.types.has(e.type)) {
      this.types.add(e.type);
      $('#log-type').append(el('option', { text: e.type }));
    }
    if (!this.paused) this.dirty = true;
  }

  filtered() {
    const text = $('#log-text').value.toLowerCase(), dir = $('#log-dir').value;
    const type = $('#log-type').value, min = Number($('#log-min').value) || 0;
    return this.entries.filter((e) => (!dir || e.dir === dir) && (!type || e.type === type) &&
      e.bytes >= min && (!text || `${e.type} ${e.frame ?? ''} ${e.seq ?? ''}`.toLowerCase().includes(text)));
  }

  export() {
    const data = this.filtered().map(({ raw, ...e }) => ({ ...e, time: new Date(e.t).toISOString(),
      decoded: raw ? JSON.parse(decoded(raw).startsWith('{') ? decoded(raw) : '{}') : undefined }));
    const blob = new Blob([JSON.stringify(data, null, 1)], { type: 'application/json' });
    const a = el('a', { href: URL.createObjectURL(blob), download: 'spyglass-log.json' });
    document.body.append(a);
    a.click();
    a.remove();
    this.lastExport = data;
  }

  // One table row (and its decoded row when expanded) for entry e.
  rowsOf(e) {
    const t = new Date(e.t);
    const tr = el('tr', { 'data-type': e.type, 'data-dir': e.dir },
      el('td', { text: `${t.toLocaleTimeString([], { hour12: false })}.${String(t.getMilliseconds()).padStart(3, '0')}` }),
      el('td', {}, e.frame !== null && e.frame !== undefined
        ? el('a', { href: '#', text: String(e.frame), title: 'show this frame',
          onclick: (ev) => { ev.preventDefault(); ev.stopPropagation(); this.recorder.jump(e.frame); } })
        : ''),
      el('td', { class: e.dir, text: e.dir }), el('td', { text: e.type }),
      el('td', { text: String(e.bytes) }), el('td', { text: e.seq ?? '' }));
    tr.addEventListener('click', () => {
      if (this.open.has(e.n)) this.open.delete(e.n); else this.open.add(e.n);
      this.dirty = true;
      this.render(true);
    });
    if (!this.open.has(e.n)) return [tr];
    return [tr, el('tr', { class: 'decoded' }, el('td', { colspan: '6' },
      el('pre', { text: e.raw ? decoded(e.raw) : '(a link record, no frame)' })))];
  }

  // The DOM holds the newest SHOWN matching rows. When only new entries
  // arrived (same filters, nothing expanded or collapsed) they are put on
  // top and the oldest rows taken off: no rebuild, no restyle of the rest.
  render(force = false) {
    if (!this.dirty || this.paused) return;
    const now = performance.now();
    if (!force && now - (this.lastRender ?? 0) < EVERY_MS) return;
    this.lastRender = now;
    this.dirty = false;
    const list = this.filtered();
    const tbody = $('#log-table tbody');
    const sig = `${$('#log-text').value}|${$('#log-dir').value}|${$('#log-type').value}|${$('#log-min').value}|${[...this.open].join()}`;
    const top = this.shownTop ?? 0;
    if (sig === this.sig && !force) {
      const fresh = [];
      for (let k = list.length - 1; k >= 0 && list[k].n > top && fresh.length < SHOWN; k--) fresh.push(list[k]);
      if (fresh.length) {
        tbody.prepend(...fresh.flatMap((e) => this.rowsOf(e)));
        this.shownRows += fresh.length;
        while (this.shownRows > SHOWN && tbody.lastElementChild) {
          const last = tbody.lastElementChild;
          if (!last.classList.contains('decoded')) this.shownRows--;
          last.remove();
        }
      }
    } else {
      const shown = list.slice(-SHOWN).reverse(); // newest on top
      tbody.replaceChildren(...shown.flatMap((e) => this.rowsOf(e)));
      this.shownRows = shown.length;
      this.sig = sig;
    }
    if (list.length) this.shownTop = list[list.length - 1].n;
    const count = `${list.length} shown of ${this.entries.length} kept (${this.total} seen, last ${this.max} kept)`;
    const c = $('#log-count');
    if (c.textContent !== count) c.textContent = count;
  }
}
