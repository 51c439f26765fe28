// dom.js — small DOM and formatting helpers shared by the panels.
export const $ = (sel, root = document) => root.querySelector(sel);

export function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
}

export function bytes(n) {
  if (!Number.isFinite(n)) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < 3) { n /= 1024; i++; }
  return i ? `${n.toFixed(1)} ${u[i]}` : `${Math.round(n)} B`;
}

export function num(v, digits = 3) {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return String(v);
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e7) ? v.toExponential(digits) : v.toFixed(digits);
  }
  return String(v);
}

export function value(kind, v) {
  if (v === null || v === undefined) return '–';
  if (Array.isArray(v)) return `(${v.map((x) => num(x)).join(', ')})`;
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (kind === 7) return `0x${v.toString(16)}`;
  return num(v);
}

export function ns(v) {
  if (!Number.isFinite(v)) return '–';
  if (Math.abs(v) >= 1e6) return `${(v / 1e6).toFixed(2)} ms`;
  if (Math.abs(v) >= 1e3) return `${(v / 1e3).toFixed(1)} µs`;
  return `${Math.round(v)} ns`;
}

// Fills a table body with rows of cells (arrays of strings or nodes).
export function rows(tbody, data) {
  tbody.replaceChildren(...data.map((cells) => el('tr', {}, ...cells.map((c) =>
    el('td', {}, c instanceof Node ? c : String(c))))));
}
