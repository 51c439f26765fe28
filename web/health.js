// health.js — bus health (the provider's HEALTH section), the link's own
// counters, the clock sync over the link (round trip, uncertainty, how far
// apart the two clocks' origins are), and the live message
// profile table (per type: count, bytes/s, encode and post p50 / p99).
import { $, el, bytes, num, ns } from './dom.js';
import { HEALTH_FIELDS, msgTypeName } from './wire.js';

// A long signed duration in ns as "−3 h 12 min 4.250 s" (ns() is for short ones).
export function span(v) {
  if (!Number.isFinite(v)) return '–';
  if (Math.abs(v) < 1e9) return ns(v);
  const sign = v < 0 ? '−' : '';
  let s = Math.abs(v) / 1e9;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return `${sign}${h ? `${h} h ` : ''}${h || m ? `${m} min ` : ''}${s.toFixed(3)} s`;
}

export class Health {
  constructor(client, model) { this.client = client; this.model = model; }

  render(v, force = false) {
    const now = performance.now();
    if (!force && now - (this.last ?? 0) < 1000) return; // 1 Hz is plenty
    this.last = now;
    const c = this.client, m = this.model;
    const rows = [];
    const h = v.health;
    for (const k of HEALTH_FIELDS) {
      const x = h ? h[k] : null;
      rows.push([k.replace(/_/g, ' '), x === null ? '–' : k === 'bytes_posted' ? bytes(x) : num(x)]);
    }
    rows.push(['— link', '']);
    rows.push(['frames received', c.stats.frames]);
    rows.push(['frames lost (gaps)', c.stats.lost]);
    rows.push(['resyncs sent', c.stats.resyncs]);
    rows.push(['subscribes sent', c.stats.subscribes]);
    rows.push(['snapshots applied', m.snapshots]);
    rows.push(['samples lost', m.samplesLost]);
    rows.push(['malformed', c.stats.malformed]);
    rows.push(['link reconnects', c.stats.reconnects]);
    rows.push(['frames / s', num(c.rate.framesPerS, 1)]);
    // The clock sync over the link: what a user can judge is the round
    // trip and the bound it puts on the mapping's error (half the round
    // trip, NTP's rule). The offset itself is the distance between two
    // clock origins (the bridge's CLOCK_MONOTONIC, i.e. its uptime, and
    // the page's performance.now(), i.e. the page's age): right for
    // mapping provider times onto the page, hours long, not a quality.
    const k = c.clock;
    rows.push(['clock sync round trip', k ? `${ns(k.rttNs)} (median of ${k.rounds} rounds)` : '–']);
    rows.push(['clock sync uncertainty', k ? `± ${ns(k.rttNs / 2)}` : '–']);
    rows.push(['clock synced', k ? `${Math.max(0, Math.round((Date.now() - k.at) / 1000))} s ago` : '–']);
    rows.push(['clock origins apart (bridge uptime − page age)', k ? span(k.offsetNs) : '–']);
    // The DOM is touched only when a figure changed (a rebuild restyles).
    const sig = rows.map(([a, b]) => `${a}=${b}`).join('|');
    if (sig !== this.sig) {
      this.sig = sig;
      $('#health-table').replaceChildren(...rows.map(([a, b]) =>
        el('tr', { 'data-k': a }, el('td', { text: a }), el('td', { text: String(b) }))));
    }
    const mp = m.msgprof;
    const head = el('tr', {}, ...['type', 'count', 'msg/s', 'bytes/s', 'enc p50', 'enc p99', 'post p50', 'post p99']
      .map((t) => el('th', { text: t })));
    const body = mp ? mp.rows.map((r) => el('tr', {},
      ...[r.type ? msgTypeName(r.type) ?? r.type : 'other', r.count, num(r.msgsPerS, 1), bytes(r.bytesPerS),
        ns(r.encode.p50), ns(r.encode.p99), ns(r.post.p50), ns(r.post.p99)].map((t) => el('td', { text: String(t) }))))
      : [el('tr', {}, el('td', { text: 'no profile yet', colspan: '8' }))];
    const psig = body.map((r) => r.textContent).join('|');
    if (psig !== this.psig) { this.psig = psig; $('#msgprof-table').replaceChildren(head, ...body); }
  }
}
