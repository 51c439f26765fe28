// buffers.js — the buffer inspector: the provider's named buffers (the
// BUFFERS metadata), a grid of up to 9 selected ones, and the frame's batch
// list and render-pass tree (BATCHES, PASSES).
//
// A buffer streams only once it is selected: the selection is the
// subscription's `buffers` map (client.setBuffers), each entry with its
// mode (stream: VP9 when WebCodecs can decode it; raw: full-size RGBA8;
// thumbnail: RGBA8 at 256 px long edge) and display mode (colors /
// normalize / mono / signed / alpha), which the provider applies: the
// page only draws. VP9 chunks go to a WebCodecs VideoDecoder
// (vp09.00.10.08) from a key frame on; after a decode error, a gap in the
// sequence or a lost part the cell waits for the next key frame and asks
// for one (resync). Without WebCodecs (not a secure context: plain HTTP
// from another machine) a stream is asked for as raw frames, and the
// panel says so.
//
// A cell: wheel zooms 0.5–64× about the cursor, drag pans, double-click
// fits; nearest-neighbour when magnified; the probe shows x, y and the
// displayed RGBA under the cursor and, for a float buffer (r32f, rgba16f,
// rgba32f), the source value the provider read at that pixel.
import * as W from './wire.js';
import { decodeBufferMeta, decodeBufferVariants, decodePixels, PartAssembler, PIXEL_TYPES,
  DISPLAY_MODES, BUFFER_MODES, PASS_ROOT, CODEC, answersRequest, encodeProbe,
  PROBE_STOP } from './wire_pixels.js';
import { $, el } from './dom.js';
import * as R from './recorder_images.js';

export const MAX_CELLS = 9;
const VP9 = 'vp09.00.10.08';
const THUMB_EDGE = 256;
const ZOOM_MIN = 0.5, ZOOM_MAX = 64;
const RESYNC_MIN_MS = 1000;
const PROBE_MIN_MS = 50; // a probe request at most this often per cell
const PROBE_REFRESH_MS = 1000;
const FLOAT_TYPES = new Set([2, 3, 5]); // rgba32f, r32f, rgba16f
// The flight recorder's images: recorder_images.js (the bounds, what is
// evicted when, and what parking keeps).
export { HISTORY_BYTES, HISTORY_IMAGES } from './recorder_images.js';

class Cell {
  constructor(panel, name, mode) {
    this.panel = panel;
    this.name = name;
    this.mode = mode; // 'stream' | 'raw' | 'thumbnail'
    this.display = 0;
    this.asm = new PartAssembler();
    this.src = document.createElement('canvas');
    this.sctx = this.src.getContext('2d', { willReadFrequently: true });
    this.rgba = null; // the raw image's bytes (probe reads them exactly)
    this.w = 0; this.h = 0;
    this.z = 1; this.tx = 0; this.ty = 0; this.fitted = false;
    this.mouse = null;
    this.decoder = null;
    this.needKey = true;
    this.stats = { raw: 0, chunks: 0, decoded: 0, drawn: 0, errors: 0,
      waitedForKey: 0, resyncs: 0, lostParts: 0, lastFrame: -1, codec: null };
    this.hist = []; // [{frame, w, h, rgba}], oldest first (the recorder's)
    this.histBytes = 0;
    this.parked = null; // while the view is parked: the image shown, or {none}
    this.parkSrc = document.createElement('canvas');
    this.pctx = this.parkSrc.getContext('2d', { willReadFrequently: true });
    this.build();
  }

  build() {
    const modeSel = el('select', { class: 'cell-mode', title: 'what the provider sends' },
      ...['stream', 'raw', 'thumbnail'].map((m) => el('option', { value: m, text: m })));
    modeSel.value = this.mode;
    modeSel.addEventListener('change', () => { this.mode = modeSel.value; this.restart(); });
    const dispSel = el('select', { class: 'cell-display', title: 'display mode (converted by the provider)' },
      ...DISPLAY_MODES.map((m, i) => el('option', { value: String(i), text: m })));
    dispSel.addEventListener('change', () => { this.display = Number(dispSel.value); this.restart(); });
    this.status = el('span', { class: 'dim cell-status' });
    this.view = el('canvas', { class: 'cell-view' });
    this.probe = el('div', { class: 'probe dim', text: '–' });
    this.root = el('div', { class: 'cell', 'data-name': this.name },
      el('div', { class: 'cell-head' }, el('b', { text: this.name }), modeSel, dispSel,
        el('button', { class: 'cell-close', title: 'stop watching', text: '×',
          onclick: () => this.panel.toggle(this.name) })),
      this.view, el('div', { class: 'cell-foot' }, this.probe, this.status));
    const v = this.view;
    v.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = v.getBoundingClientRect();
      this.mouse = { x: e.clientX - r.left, y: e.clientY - r.top };
      this.zoomAt(this.mouse.x, this.mouse.y, Math.exp(-e.deltaY * 0.002));
    }, { passive: false });
    v.addEventListener('mousedown', (e) => { this.drag = { x: e.clientX, y: e.clientY }; e.preventDefault(); });
    this.gone = new AbortController(); // the window listeners go with the cell
    const signal = this.gone.signal;
    window.addEventListener('mouseup', () => { this.drag = null; }, { signal });
    window.addEventListener('mousemove', (e) => {
      if (!this.drag) return;
      this.tx += e.clientX - this.drag.x; this.ty += e.clientY - this.drag.y;
      this.drag = { x: e.clientX, y: e.clientY };
      this.schedule();
    }, { signal });
    v.addEventListener('mousemove', (e) => {
      const r = v.getBoundingClientRect();
      this.mouse = { x: e.clientX - r.left, y: e.clientY - r.top };
      this.updateProbe();
    });
    v.addEventListener('mouseleave', () => {
      this.mouse = null;
      this.updateProbe();
      if (this.probeAt) this.askProbe(PROBE_STOP, PROBE_STOP);
    });
    v.addEventListener('dblclick', () => { this.fitted = false; this.schedule(); });
  }

  // The subscription entry for this cell (wire.js encodeSubscribe).
  request(meta) {
    const full = meta ? Math.max(meta.width, meta.height) : 16384;
    const stream = this.mode === 'stream' && this.panel.webcodecs;
    if (stream) return { name: this.name, mode: 2, display: this.display, longEdge: 0 };
    const edge = this.mode === 'thumbnail' ? THUMB_EDGE : Math.min(full, 16384);
    return { name: this.name, mode: 1, display: this.display, longEdge: edge };
  }

  // A new request: the provider starts every subscription's streams on a
  // key frame, so no resync is needed here.
  restart() {
    this.needKey = true;
    this.closeDecoder();
    this.panel.sync();
  }

  // Asks the provider for a key frame (resync), at most once a second.
  askKey() {
    const now = performance.now();
    if (now - (this.lastAsk ?? -1e9) < RESYNC_MIN_MS) return;
    this.lastAsk = now;
    this.stats.resyncs++;
    this.panel.client.resync();
  }

  zoomAt(mx, my, factor) {
    const z = Math.min(ZOOM_MAX, Math.max(ZOOM_MIN, this.z * factor));
    const ix = (mx - this.tx) / this.z, iy = (my - this.ty) / this.z;
    this.z = z;
    this.tx = mx - ix * z; this.ty = my - iy * z;
    this.fitted = true;
    this.schedule();
    this.updateProbe();
  }

  // Image pixel under a point of the view (CSS px), or null outside.
  pixelAt(mx, my) {
    const x = Math.floor((mx - this.tx) / this.z), y = Math.floor((my - this.ty) / this.z);
    const { w, h } = this.shown();
    if (!w || x < 0 || y < 0 || x >= w || y >= h) return null;
    return { x, y };
  }

  // What the cell shows: the live image, or the parked frame's.
  shown() {
    const p = this.parked;
    if (!p) return { w: this.w, h: this.h, rgba: this.rgba, src: this.src, ctx: this.sctx };
    if (p.none) return { w: 0, h: 0, rgba: null, src: this.parkSrc, ctx: this.pctx };
    return { w: p.w, h: p.h, rgba: p.rgba, src: this.parkSrc, ctx: this.pctx };
  }

  // ---- the flight recorder ----------------------------------------------
  record(frame, w, h, rgba) {
    R.record(this.panel, this, this.panel.cells.values(), frame, w, h, rgba);
  }

  // Parks the cell on frame F: the newest image at or before it.
  park(frame) {
    const img = R.imageAt(this, frame);
    if (!img) {
      if (!this.parked?.none) { this.parked = { none: true, frame }; this.schedule(); }
      this.parked.frame = frame;
      return;
    }
    if (img === this.parked) return;
    const resized = !this.parked || this.parked.none || this.parked.w !== img.w || this.parked.h !== img.h;
    this.parked = img;
    if (this.parkSrc.width !== img.w || this.parkSrc.height !== img.h) {
      this.parkSrc.width = img.w; this.parkSrc.height = img.h;
    }
    this.pctx.putImageData(new ImageData(img.rgba, img.w, img.h), 0, 0);
    if (resized && (img.w !== this.w || img.h !== this.h)) this.fitted = false;
    this.schedule();
  }

  unpark() {
    if (!this.parked) return;
    if (!this.parked.none && (this.parked.w !== this.w || this.parked.h !== this.h)) this.fitted = false;
    this.parked = null;
    this.schedule();
  }

  updateProbe() {
    const p = this.mouse && this.pixelAt(this.mouse.x, this.mouse.y);
    const pr = this.probe;
    if (!p) { pr.textContent = '–'; delete pr.dataset.x; return; }
    let c;
    const sh = this.shown();
    if (sh.rgba) {
      const o = (p.y * sh.w + p.x) * 4;
      c = [sh.rgba[o], sh.rgba[o + 1], sh.rgba[o + 2], sh.rgba[o + 3]];
    } else {
      c = Array.from(sh.ctx.getImageData(p.x, p.y, 1, 1).data);
    }
    pr.dataset.x = p.x; pr.dataset.y = p.y; pr.dataset.rgba = c.join(',');
    let text = `x ${p.x} y ${p.y}  RGBA ${c.join(' ')}`;
    // A float buffer: the source value of the pixel too, read by the
    // provider at its next capture (a buffer:probe request, PROBE answers).
    const src = this.sourcePixel(p);
    delete pr.dataset.source;
    if (src) {
      this.askProbe(src.x, src.y);
      const v = this.srcProbe;
      if (v && v.x === src.x && v.y === src.y) {
        pr.dataset.source = v.source.join(',');
        pr.dataset.sourceFrame = String(v.frame);
        text += `  src ${v.source.map((n) => Number(n.toPrecision(6))).join(' ')}` +
          (src.x !== p.x || src.y !== p.y ? ` @${src.x},${src.y}` : '');
      } else text += '  src …';
    }
    pr.textContent = `${text}  ×${this.z.toFixed(2)}`;
  }

  // The source pixel under a displayed one (a thumbnail maps onto the
  // buffer's own size), or null for a buffer that is not float.
  sourcePixel(p) {
    const m = this.panel.meta.get(this.name);
    if (!m || this.parked || !FLOAT_TYPES.has(m.pixelType) || !this.w || !this.h) return null;
    return { x: Math.min(m.width - 1, Math.floor((p.x + 0.5) * m.width / this.w)),
      y: Math.min(m.height - 1, Math.floor((p.y + 0.5) * m.height / this.h)) };
  }

  // Sends buffer:probe for (x, y) (PROBE_STOP: stop), at most once per
  // PROBE_MIN_MS; the latest point wins.
  // The same point is asked again each PROBE_REFRESH_MS while it is
  // hovered (the provider keeps one point per buffer, the latest asker's,
  // and forgets it when it restarts).
  askProbe(x, y) {
    const same = this.probeAt && this.probeAt.x === x && this.probeAt.y === y;
    if (same && (x === PROBE_STOP || performance.now() - this.probeSent < PROBE_REFRESH_MS)) return;
    this.probeWant = { x, y };
    if (this.probeTimer) return;
    const send = () => {
      this.probeTimer = null;
      const q = this.probeWant, cl = this.panel.client;
      if (!q || !cl.dataChan) return;
      this.probeAt = q;
      this.stats.probes = (this.stats.probes ?? 0) + 1;
      cl.sendFrame(cl.dataChan, encodeProbe(cl.id, this.name, q.x, q.y));
      this.probeSent = performance.now();
    };
    const wait = PROBE_MIN_MS - (performance.now() - (this.probeSent ?? -1e9));
    if (wait <= 0) send(); else this.probeTimer = setTimeout(send, wait);
  }

  onProbe(e) {
    this.srcProbe = e;
    this.updateProbe();
  }

  // ---- pixels in ---------------------------------------------------------
  onPixels(px) {
    const lost = this.asm.dropped;
    const payload = this.asm.push(px);
    if (this.asm.dropped !== lost) {
      this.stats.lostParts++;
      if (px.codec === CODEC.VP9) { this.needKey = true; this.askKey(); }
    }
    if (!payload) return;
    this.stats.lastFrame = px.frame;
    this.stats.codec = px.codec === CODEC.VP9 ? 'vp9' : 'raw';
    if (px.codec === CODEC.RGBA8) {
      this.stats.raw++;
      this.closeDecoder();
      this.setSize(px.width, px.height);
      // The payload is a view into the link's record or the assembler's
      // buffer: keep a copy of our own.
      this.rgba = new Uint8ClampedArray(payload);
      this.sctx.putImageData(new ImageData(this.rgba, px.width, px.height), 0, 0);
      this.record(px.frame, px.width, px.height, this.rgba);
      this.schedule();
      return;
    }
    this.stats.chunks++;
    this.decodeChunk(px, payload);
  }

  decodeChunk(px, payload) {
    if (!this.panel.webcodecs) return;
    if (this.needKey && !px.key) { this.stats.waitedForKey++; this.askKey(); return; }
    if (px.key && (!this.decoder || this.decoder.state === 'closed' ||
        this.dw !== px.width || this.dh !== px.height)) {
      this.closeDecoder();
      this.openDecoder(px.width, px.height);
    }
    if (!this.decoder) return;
    if (!px.key && this.decoder.decodeQueueSize > 8) {
      // The decoder falls behind: drop to the next key frame, never queue
      // without bound.
      this.stats.behind = (this.stats.behind ?? 0) + 1;
      this.needKey = true;
      return;
    }
    this.needKey = false;
    try {
      this.decoder.decode(new EncodedVideoChunk({ type: px.key ? 'key' : 'delta',
        timestamp: px.frame * 1000, data: payload }));
    } catch (e) {
      this.decodeError(e);
    }
  }

  openDecoder(w, h) {
    this.dw = w; this.dh = h;
    const d = new VideoDecoder({
      output: (frame) => {
        if (d !== this.decoder) { frame.close(); return; }
        this.stats.decoded++;
        this.rgba = null;
        this.setSize(frame.displayWidth, frame.displayHeight);
        this.sctx.drawImage(frame, 0, 0);
        const at = Math.round(frame.timestamp / 1000); // the provider frame
        frame.close();
        this.record(at, this.w, this.h, this.sctx.getImageData(0, 0, this.w, this.h).data);
        this.schedule();
      },
      error: (e) => { if (d === this.decoder) this.decodeError(e); },
    });
    d.configure({ codec: VP9, codedWidth: w, codedHeight: h, optimizeForLatency: true });
    this.decoder = d;
  }

  decodeError(e) {
    this.stats.errors++;
    this.lastError = String(e?.message ?? e);
    this.closeDecoder();
    this.needKey = true;
    this.askKey();
  }

  closeDecoder() {
    const d = this.decoder;
    this.decoder = null;
    if (d && d.state !== 'closed') { try { d.close(); } catch { /* closed */ } }
  }

  gap() {
    if (this.decoder || this.stats.codec === 'vp9') this.needKey = true;
  }

  setSize(w, h) {
    if (this.w === w && this.h === h) return;
    this.src.width = w; this.src.height = h;
    this.w = w; this.h = h;
    this.fitted = false;
  }

  // ---- drawing -----------------------------------------------------------
  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  draw() {
    const v = this.view, dpr = window.devicePixelRatio || 1;
    const cw = v.clientWidth, ch = v.clientHeight;
    if (v.width !== Math.round(cw * dpr) || v.height !== Math.round(ch * dpr)) {
      v.width = Math.round(cw * dpr); v.height = Math.round(ch * dpr);
    }
    const { w, h, src } = this.shown();
    if (!this.fitted && w && cw) {
      this.z = Math.min(ZOOM_MAX, Math.max(ZOOM_MIN, Math.min(cw / w, ch / h)));
      this.tx = (cw - w * this.z) / 2; this.ty = (ch - h * this.z) / 2;
      this.fitted = true;
    }
    const ctx = v.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cw, ch);
    if (!w) return;
    ctx.imageSmoothingEnabled = this.z < 1;
    ctx.drawImage(src, this.tx, this.ty, w * this.z, h * this.z);
    this.stats.drawn++;
    this.updateProbe();
  }

  renderStatus(meta) {
    const s = this.stats;
    let t = s.codec ? `${s.codec} ${this.w}×${this.h} frame ${s.lastFrame}` : 'waiting for pixels';
    if (this.needKey && this.mode === 'stream' && this.panel.webcodecs && s.chunks) t += ' · waiting for a key frame';
    if (s.errors) t += ` · ${s.errors} decode errors`;
    if (this.mode === 'stream' && !this.panel.webcodecs) t += ' · raw (no WebCodecs)';
    if (meta && meta.dropped) t += ` · ${meta.dropped} dropped`;
    const p = this.parked;
    if (p) t = p.none ? `parked: no image held at or before frame ${p.frame}` : `parked: the image of frame ${p.frame} (${p.w}×${p.h})`;
    this.status.dataset.parked = p ? (p.none ? 'none' : String(p.frame)) : '';
    this.status.textContent = t;
  }

  close() {
    this.closeDecoder(); this.gone.abort(); this.root.remove();
    R.drop(this.panel, this);
  }
}

export class Buffers {
  constructor(client, root = $('#buffers')) {
    this.client = client;
    this.root = root;
    client.o.features |= W.FEAT(W.SEC.BUFFERS) | W.FEAT(15) | W.FEAT(16);
    const params = new URLSearchParams(location.search);
    // VideoDecoder exists only in secure contexts (https, or loopback).
    this.webcodecs = typeof VideoDecoder === 'function' && params.get('webcodecs') !== '0';
    this.whyRaw = this.webcodecs ? '' : (window.isSecureContext
      ? 'this browser has no WebCodecs VideoDecoder: streams come as raw frames'
      : 'not a secure context (plain HTTP from another machine): no WebCodecs, streams come as raw frames');
    if (this.webcodecs) {
      VideoDecoder.isConfigSupported({ codec: VP9, codedWidth: 640, codedHeight: 360 })
        .then((r) => {
          if (r.supported) return;
          this.webcodecs = false;
          this.whyRaw = `WebCodecs cannot decode ${VP9} here: streams come as raw frames`;
          this.sync();
        }).catch(() => {});
    }
    this.meta = new Map(); // name → decoded metadata
    this.variants = new Map(); // name → every variant served (BUFFER_VARIANTS)
    this.cells = new Map(); // name → Cell, in selection order
    this.batches = null; this.passes = null;
    this.collapsed = new Set();
    this.histBytes = 0; // the recorder's images, all cells
    this.parkedFrame = null;
    this.dirty = true;
    this.build();
    client.on('data', (f, d) => this.onData(d));
    client.on('pixels', (f) => this.onPixels(f));
    client.on('gap', () => { for (const c of this.cells.values()) c.gap(); });
    client.on('provider', (info, changed) => { if (changed) this.reset(); });
  }

  build() {
    const r = this.root;
    this.note = el('div', { class: 'note', hidden: '' });
    this.listBody = el('tbody');
    this.grid = el('div', { class: 'bufgrid' });
    this.batchBody = el('tbody');
    this.passBody = el('tbody');
    r.append(el('h2', { text: 'buffers' }), this.note,
      el('table', { id: 'buffer-list' }, el('thead', {}, el('tr', {},
        ...['', 'name', 'type', 'size', 'last frame', 'served', 'captured'].map((h) => el('th', { text: h })))),
      this.listBody),
      this.grid,
      el('h3', { id: 'batches-title', text: 'batches' }),
      el('table', { id: 'batch-table' }, el('thead', {}, el('tr', {},
        ...['kind / key', 'instances', 'draws'].map((h) => el('th', { text: h })))), this.batchBody),
      el('h3', { id: 'passes-title', text: 'passes' }),
      el('table', { id: 'pass-table' }, el('thead', {}, el('tr', {},
        ...['pass', 'draws', 'triangles', 'CPU ms'].map((h) => el('th', { text: h })))), this.passBody));
  }

  reset() {
    for (const c of this.cells.values()) c.close();
    this.cells.clear();
    this.meta.clear();
    this.batches = this.passes = null;
    this.client.setBuffers([]);
    this.dirty = true;
  }

  onData(d) {
    if (d.buffers) {
      if (d.buffers.full) {
        const keep = new Set(d.buffers.entries.map((e) => e.key));
        for (const k of [...this.meta.keys()]) if (!keep.has(k)) this.meta.delete(k);
      }
      for (const e of d.buffers.entries) {
        if (e.state === W.DELTA.SET) {
          try { this.meta.set(e.key, decodeBufferMeta(e.value)); } catch { this.client.stats.malformed++; }
        } else if (e.state === W.DELTA.CLEARED) this.meta.delete(e.key);
      }
      this.dirty = true;
    }
    if (d.bufferVariants) { // every variant served (BUFFERS names one)
      if (d.bufferVariants.full) this.variants.clear();
      for (const e of d.bufferVariants.entries) {
        if (e.state === W.DELTA.SET) {
          try { this.variants.set(e.key, decodeBufferVariants(e.value)); } catch { this.client.stats.malformed++; }
        } else if (e.state === W.DELTA.CLEARED) this.variants.delete(e.key);
      }
      this.dirty = true;
    }
    for (const e of d.probe ?? []) this.cells.get(e.name)?.onProbe(e);
    if (d.batches && d.batches.version !== this.batches?.version) { this.batches = d.batches; this.dirty = true; }
    if (d.passes && d.passes.version !== this.passes?.version) { this.passes = d.passes; this.dirty = true; }
  }

  onPixels(f) {
    const s = W.findSection(f, 10);
    if (!s) return;
    let px;
    try { px = decodePixels(f, s); } catch { this.client.stats.malformed++; return; }
    const c = this.cells.get(px.name);
    // The channel carries every subscriber's variants of a buffer: a cell
    // keeps only the one it asked for (mode, display, long edge).
    if (c && c.req && answersRequest(c.req, px)) c.onPixels(px);
    else this.ignored = (this.ignored ?? 0) + 1;
  }

  // Select or unselect a buffer (at most MAX_CELLS).
  toggle(name) {
    const c = this.cells.get(name);
    if (c) { c.close(); this.cells.delete(name); }
    else {
      if (this.cells.size >= MAX_CELLS) return false;
      const cell = new Cell(this, name, 'stream');
      this.cells.set(name, cell);
      this.grid.append(cell.root);
    }
    this.sync();
    this.dirty = true;
    return true;
  }

  sync() {
    this.client.setBuffers([...this.cells.values()].map((c) => (c.req = c.request(this.meta.get(c.name)))));
    this.showNote();
    this.dirty = true;
  }

  // The note saying why streams come as raw frames: shown while a cell
  // asks for a stream that this page cannot decode. Kept current on every
  // request change as well as on render, so it never lags a selection.
  showNote() {
    const streaming = [...this.cells.values()].some((c) => c.mode === 'stream');
    this.note.hidden = !(this.whyRaw && streaming);
    this.note.textContent = this.whyRaw;
  }

  // Evicts the oldest recorded images (of any cell) beyond the bound.
  trim() { R.trim(this, this.cells.values()); }

  // v: the view every panel renders (app.js): parked on a frame or live.
  render(v) {
    const parked = v && v.parked ? v.frame : null;
    if (parked !== this.parkedFrame) this.dirty = true;
    this.parkedFrame = parked;
    if (parked === null) this.trim(); // back live: the bound again
    for (const c of this.cells.values()) {
      if (parked === null) c.unpark(); else c.park(parked);
    }
    for (const [n, c] of this.cells) c.renderStatus(this.meta.get(n));
    this.showNote();
    if (!this.dirty) return;
    this.dirty = false;
    this.renderList();
    this.renderBatches();
    this.renderPasses();
  }

  renderList() {
    const rows = [];
    for (const [name, m] of [...this.meta].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const sel = this.cells.has(name);
      const box = el('input', { type: 'checkbox', title: 'watch (up to 9)' });
      box.checked = sel;
      box.addEventListener('change', () => { if (!this.toggle(name)) box.checked = false; });
      // Every variant served when the provider lists them (an older one
      // names only one, in the metadata).
      const one = (v) => `${BUFFER_MODES[v.mode]} ${v.codec === CODEC.VP9 ? 'vp9' : 'raw'} ` +
        `${v.servedWidth}×${v.servedHeight} ${DISPLAY_MODES[v.display] ?? v.display}`;
      const vs = this.variants.get(name);
      const served = vs ? (vs.length ? vs.map(one).join(', ') : 'metadata only')
        : m.mode ? one(m) : 'metadata only';
      const tr = el('tr', { 'data-name': name, class: sel ? 'sel' : '' },
        el('td', {}, box), el('td', { text: name }),
        el('td', { text: PIXEL_TYPES[m.pixelType] ?? `type ${m.pixelType}` }),
        el('td', { text: `${m.width}×${m.height}` }),
        el('td', { class: 'last', text: m.lastFrame ? String(m.lastFrame) : '–' }),
        el('td', { class: 'served', text: served }),
        el('td', { text: `${m.captured}${m.dropped ? ` (${m.dropped} dropped)` : ''}` }));
      tr.querySelectorAll('td:not(:first-child)').forEach((td) =>
        td.addEventListener('click', () => { if (this.toggle(name) !== false) this.dirty = true; }));
      rows.push(tr);
    }
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: '7', class: 'dim', text: 'no buffers declared' })));
    this.listBody.replaceChildren(...rows);
  }

  // Batches grouped by kind (instances and draws summed), each kind's keys
  // under it; like `spyglass top`.
  renderBatches() {
    const b = this.batches;
    $('#batches-title', this.root).textContent = b ? `batches (${b.batches.length}, version ${b.version})` : 'batches';
    if (!b) { this.batchBody.replaceChildren(); return; }
    const kinds = new Map();
    for (const x of b.batches) {
      const k = kinds.get(x.kind) ?? { instances: 0, draws: 0, items: [] };
      k.instances += x.instances; k.draws += x.draws; k.items.push(x);
      kinds.set(x.kind, k);
    }
    const rows = [];
    for (const [kind, k] of kinds) {
      rows.push(el('tr', { class: 'kind', 'data-kind': kind }, el('td', { text: kind }),
        el('td', { class: 'inst', text: String(k.instances) }), el('td', { class: 'draws', text: String(k.draws) })));
      for (const x of k.items) {
        rows.push(el('tr', { class: 'dim' }, el('td', { class: 'sub', text: x.key || '(no key)' }),
          el('td', { text: String(x.instances) }), el('td', { text: String(x.draws) })));
      }
    }
    this.batchBody.replaceChildren(...rows);
  }

  // The pass tree, collapsible (click a pass with children), and a totals
  // row over the roots.
  renderPasses() {
    const p = this.passes;
    $('#passes-title', this.root).textContent = p ? `passes (${p.passes.length}, version ${p.version})` : 'passes';
    if (!p) { this.passBody.replaceChildren(); return; }
    const ps = p.passes;
    const kids = ps.map(() => 0);
    ps.forEach((x) => { if (x.parent !== PASS_ROOT) kids[x.parent]++; });
    const hidden = ps.map(() => false), depth = ps.map(() => 0);
    let draws = 0, tris = 0, us = 0;
    const rows = [];
    ps.forEach((x, i) => {
      if (x.parent !== PASS_ROOT) {
        depth[i] = depth[x.parent] + 1;
        hidden[i] = hidden[x.parent] || this.collapsed.has(x.parent);
      } else { draws += x.draws; tris += x.triangles; us += x.cpuUs; }
      if (hidden[i]) return;
      const mark = kids[i] ? (this.collapsed.has(i) ? '▸ ' : '▾ ') : '  ';
      const tr = el('tr', { 'data-pass': x.label, class: kids[i] ? 'parent' : '' },
        el('td', { style: `padding-left:${depth[i] * 1.2}em`, text: `${mark}${x.label}` }),
        el('td', { text: String(x.draws) }), el('td', { text: String(x.triangles) }),
        el('td', { text: (x.cpuUs / 1000).toFixed(2) }));
      if (kids[i]) {
        tr.addEventListener('click', () => {
          if (this.collapsed.has(i)) this.collapsed.delete(i); else this.collapsed.add(i);
          this.dirty = true; this.renderPasses();
        });
      }
      rows.push(tr);
    });
    rows.push(el('tr', { class: 'total' }, el('td', { text: 'total' }),
      el('td', { class: 'draws', text: String(draws) }), el('td', { class: 'tris', text: String(tris) }),
      el('td', { text: (us / 1000).toFixed(2) })));
    this.passBody.replaceChildren(...rows);
  }
}
