// app.js — the dashboard's entry point: one client (the protocol), one
// model (state + flight recorder), the panels, the render loop and the
// keyboard. Panels render in requestAnimationFrame at most 10 times a
// second (the reference overlay's rate) and only when something changed
// (no frame is requested otherwise);
// decoding happens as messages arrive, never in the render path.
//
// URL: /?token=T (the bridge's token, when the page is not on loopback),
// #provider=ID_OR_NAME (which provider to watch first). For tests and the
// console, window.spyglass holds {client, model, recorder, log, view()}.
import { Client } from './client.js';
import { Model } from './model.js';
import { Header } from './header.js';
import { Overlay } from './overlay.js';
import { Values } from './values.js';
import { Recorder } from './recorder.js';
import { Log } from './log.js';
import { Health } from './health.js';
import { Zones } from './zones.js';
import { $ } from './dom.js';
import { Buffers } from './buffers.js';
import { Build } from './build.js';

const params = new URLSearchParams(location.search);
const hash = new URLSearchParams(location.hash.slice(1));
const token = params.get('token') || '';
const frames = Math.min(65536, Math.max(16, Number(params.get('frames')) || 1024));
const wsUrl = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/link`;

const client = new Client({ url: wsUrl, token, want: hash.get('provider') });
const model = new Model(frames);
let dirty = true;
let scheduled = false;
let last = 0;
// A render is scheduled (one requestAnimationFrame) only when something
// changed: an idle page asks the browser for no frames at all.
const touch = () => {
  dirty = true;
  if (scheduled) return;
  scheduled = true;
  const wait = Math.max(0, 100 - (performance.now() - last));
  setTimeout(() => requestAnimationFrame(() => { scheduled = false; draw(); }), wait);
};
const recorder = new Recorder(model, () => draw(true));
const header = new Header(client);
const overlay = new Overlay(model, () => draw(true));
const values = new Values(client, model);
const log = new Log(client, recorder, Number(params.get('log')) || 4000);
const health = new Health(client, model);
const zones = new Zones(client, model, () => touch());
const states = [];
const buffers = new Buffers(client);
const build = new Build(); // live build progress (TRACE)
client.on('provider', (info, changed) => { if (changed) build.reset(); });
client.on('data', (f, d) => build.apply(d.build));

client.on('state', (s) => { states.push({ s, t: Date.now() }); touch(); });
client.on('provider', (info, changed) => {
  if (changed) { model.reset(); recorder.live(); }
  touch();
});
client.on('data', (f, d, now) => { model.apply(f, d, now); touch(); });
client.on('clock', touch);
client.on('fatal', (text) => {
  const b = $('#banner');
  b.hidden = false;
  b.textContent = `${text} — open the URL \`spyglass serve\` printed (it carries ?token=…), or pass the right one.`;
  touch();
});

// The state every panel renders: live, or as of the recorder's frame.
let pinned = null;
function view() {
  const frame = recorder.current();
  if (!recorder.parked) {
    return { parked: false, frame, index: model.len ? model.idx(0) : -1,
      registry: model.registry, env: model.env, health: model.health };
  }
  // The parked frame's state is rebuilt once and pinned: new frames do
  // not change it, and it outlives the frame's place in the ring.
  if (!pinned || pinned.frame !== frame || pinned.gen !== model.gen || pinned.filter !== model.filter) {
    pinned = model.pin(frame);
  }
  const out = recorder.scrolledOut();
  return { parked: true, ...pinned, index: out ? -1 : pinned.index, pinned: out ? pinned.sample : null,
    scrolledOut: out };
}

function draw(force = false) {
  const now = performance.now();
  if (!force && !dirty) return;
  last = now;
  dirty = false;
  const v = view();
  header.render(v);
  recorder.render();
  overlay.render(v);
  values.render(v);
  health.render(v, force);
  log.render();
  zones.render(v);
  buffers.render(v);
  build.render();
}
setInterval(touch, 1000); // rates, stale marking, ages

document.addEventListener('keydown', (e) => {
  if (e.target instanceof HTMLInputElement && e.key !== 'Escape') return;
  if (e.key === ' ') { e.preventDefault(); recorder.parked ? recorder.live() : recorder.freeze(); }
  else if (e.key === 'ArrowLeft') { e.preventDefault(); recorder.step(-1); }
  else if (e.key === 'ArrowRight') { e.preventDefault(); recorder.step(1); }
  else if (e.key === 'Escape') { recorder.live(); if (e.target instanceof HTMLInputElement) e.target.blur(); }
  else if (e.key === '/') { e.preventDefault(); $('#filter').focus(); }
  else if (e.key === 'z') zones.toggle();
});

window.spyglass = { client, model, recorder, log, values, view, states, zones, build };
window.spyglass.buffers = buffers;
