// chart.js — the few charts the panels draw, on canvas, by hand: a
// sparkline against a dashed reference line (auto-scaled so sub-millisecond
// times stay visible), line charts (one line per vector component), bit
// rows for booleans, and a histogram. Each call sizes the canvas to its CSS
// box × devicePixelRatio and redraws it whole.

export const COLORS = ['#5ad1ff', '#ffb454', '#c792ea', '#7fd962', '#ff6b6b'];

// A canvas's CSS box, measured once (and again after a window resize):
// reading clientWidth after the panels wrote text would force a layout
// on every redraw. A box measured as 0 (a hidden panel) is measured again.
let sizeGen = 0;
if (typeof addEventListener === 'function') addEventListener('resize', () => { sizeGen++; });
function box(canvas) {
  if (canvas.boxGen !== sizeGen || !canvas.boxW) {
    canvas.boxW = canvas.clientWidth;
    canvas.boxH = canvas.clientHeight;
    canvas.boxGen = sizeGen;
  }
  return [canvas.boxW || 120, canvas.boxH || 32];
}

function setup(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const [w, h] = box(canvas);
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

function range(values, extra = []) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  for (const v of extra) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!Number.isFinite(lo)) return [0, 1];
  if (hi - lo < 1e-9) { hi += Math.abs(hi) * 0.1 || 0.5; lo -= Math.abs(lo) * 0.1 || 0.5; }
  return [lo, hi];
}

function path(g, values, w, h, lo, hi, n) {
  const dx = w / Math.max(1, n - 1);
  let pen = false;
  g.beginPath();
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) { pen = false; return; }
    const x = i * dx, y = h - 2 - ((v - lo) / (hi - lo)) * (h - 4);
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  });
  g.stroke();
}

// The CPU sparkline: `values` (ms), the dashed line at `ref` ms. The scale
// is max(values) × 1.2, and includes the reference line only when the
// values come within half of it — so 0.2 ms frames are not a flat line at
// the bottom of a 16.7 ms axis.
export function sparkline(canvas, values, { ref = 16.7, color = COLORS[0], n = 60 } = {}) {
  const { g, w, h } = setup(canvas);
  let hi = 0;
  for (const v of values) if (Number.isFinite(v)) hi = Math.max(hi, v);
  const showRef = hi >= ref / 2;
  hi = Math.max(showRef ? ref * 1.15 : 0, hi * 1.2, 0.01);
  if (showRef) {
    const y = h - 2 - (ref / hi) * (h - 4);
    g.strokeStyle = '#888';
    g.setLineDash([4, 3]);
    g.lineWidth = 1;
    g.beginPath(); g.moveTo(0, y); g.lineTo(w, y); g.stroke();
    g.setLineDash([]);
  }
  g.strokeStyle = color;
  g.lineWidth = 1.5;
  path(g, values, w, h, 0, hi, n);
  g.fillStyle = '#9aa';
  g.font = '9px monospace';
  g.fillText(showRef ? `${ref} ms` : `max ${hi.toFixed(hi < 1 ? 3 : 1)} ms`, 2, 9);
}

// Lines: `series` is an array of arrays (one per component).
export function lines(canvas, series, { markIndex = -1 } = {}) {
  const { g, w, h } = setup(canvas);
  const all = series.flat();
  const [lo, hi] = range(all);
  const n = Math.max(...series.map((s) => s.length), 2);
  series.forEach((s, k) => {
    g.strokeStyle = COLORS[k % COLORS.length];
    g.lineWidth = 1.2;
    path(g, s, w, h, lo, hi, n);
  });
  if (markIndex >= 0) {
    const x = (markIndex / Math.max(1, n - 1)) * w;
    g.strokeStyle = '#ff5'; g.beginPath(); g.moveTo(x, 0); g.lineTo(x, h); g.stroke();
  }
}

// Bits: one row per series of 0/1 (booleans), filled where 1.
export function bits(canvas, values) {
  const { g, w, h } = setup(canvas);
  const n = Math.max(values.length, 2), dx = w / n;
  g.fillStyle = COLORS[3];
  values.forEach((v, i) => { if (v) g.fillRect(i * dx, 3, Math.max(1, dx), h - 6); });
  g.strokeStyle = '#444'; g.strokeRect(0.5, 2.5, w - 1, h - 5);
}

export function histogram(canvas, hist, { color = COLORS[1] } = {}) {
  const { g, w, h } = setup(canvas);
  const m = Math.max(...hist, 1), bw = w / hist.length;
  g.fillStyle = color;
  hist.forEach((c, i) => {
    const bh = (c / m) * (h - 2);
    g.fillRect(i * bw + 0.5, h - bh, Math.max(1, bw - 1), bh);
  });
}
