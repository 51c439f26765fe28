// web_browser.mjs — the dashboard in a real browser (Debian's chromium,
// headless, driven by playwright-core) against real providers through a
// real `spyglass serve`. Run by test/web_browser.sh, which passes:
//   SPY_TOOL, SPY_HELPER, SPY_PW (playwright-core's directory), SPY_OUT
//   (where the screenshot goes), SPYGLASS_DIR (a private runtime dir).
// Every wait is for a condition with a deadline, never a fixed sleep.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { procs, start, step, stop, t0, until as untilWithin } from './web_harness.mjs';

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.SPY_PW);
const TOOL = process.env.SPY_TOOL, HELPER = process.env.SPY_HELPER;
const OUT = process.env.SPY_OUT;
const work = mkdtempSync(join(tmpdir(), 'spy-web-'));


const until = (what, fn, ms = 15000) => untilWithin(what, fn, ms);

let browser, serve;
async function main() {
  // The bridge, on a free port.
  const startServe = (listen) => start(TOOL, ['serve', '--listen', listen], 'serve');
  serve = startServe('127.0.0.1:0');
  const port = Number((await until('serve to listen', () => serve.out.match(/\(port (\d+)\)/)))[1]);
  assert.match(serve.out, new RegExp(`dashboard http://127\\.0\\.0\\.1:${port}/`));
  const base = `http://127.0.0.1:${port}/`;
  step(`serve on ${port}`);

  // A fresh profile (--user-data-dir) of our own, removed at the end.
  browser = await chromium.launchPersistentContext(join(work, 'profile'), {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1500, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const ctx = browser;
  const page = await ctx.newPage();
  globalThis.page = page;
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  // No request may leave the bridge: no CDN, no network.
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.host !== `127.0.0.1:${port}`) errors.push(`request to ${r.url()}`);
  });
  const conn = () => page.$eval('#conn', (e) => e.dataset.state);
  const js = (f, arg) => page.evaluate(f, arg);

  // 1. No provider yet: waiting.
  // The recorder records on while parked: a ring of 8192 frames (2 min of
  // det-b) keeps the frames stepped through below in it on a slow machine.
  await page.goto(`${base}?frames=8192`);
  await until('waiting', async () => (await conn()) === 'waiting');
  step('page up, waiting for a provider');

  // 2. A provider starts: the page connects by itself; FPS > 0 and changes.
  const demo = start(TOOL, ['demo', '--headless', '--name', 'demo-a', '--fps-cap', '60'], 'demo');
  await until('live on demo-a', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('demo-a'));
  const fps1 = await until('an FPS figure', async () => {
    const t = await page.textContent('#fps');
    return Number(t) > 0 ? t : null;
  });
  await until('the FPS figure to change', async () => (await page.textContent('#fps')) !== fps1);

  // The clock sync in the bus panel reads as something a user can judge:
  // the round trip, and the uncertainty it allows (half of it); the
  // distance between the two clocks' origins (hours: the bridge's uptime
  // against the page's age) under a name that says so, not as an offset.
  const healthRow = (k) => page.evaluate((key) =>
    document.querySelector(`#health-table tr[data-k="${key}"] td:last-child`)?.textContent ?? null, k);
  const rtt = await until('the clock sync round trip', async () => {
    const t = await healthRow('clock sync round trip');
    return t && t !== '–' ? t : null;
  });
  const toNs = (t) => {
    const m = t.match(/([\d.]+) (ns|µs|ms)/);
    return m ? Number(m[1]) * { ns: 1, 'µs': 1e3, ms: 1e6 }[m[2]] : NaN;
  };
  const unc = await healthRow('clock sync uncertainty');
  assert.match(unc, /^± [\d.]+ (ns|µs|ms)$/);
  assert.ok(Math.abs(toNs(unc) - toNs(rtt) / 2) <= 0.06 * toNs(rtt) + 1, `uncertainty ${unc} = half of ${rtt}`);
  assert.ok(toNs(rtt) < 1e9, `a loopback round trip under a second: ${rtt}`);
  assert.match(await healthRow('clock origins apart (bridge uptime − page age)'), /s$/);
  assert.equal(await healthRow('clock offset (bridge − page)'), null, 'no offset row that reads as a quality');
  step(`clock sync shown: round trip ${rtt}, uncertainty ${unc}`);
  await until('counters', () => page.$('#counters .ctr[data-name="draws"]'));
  await until('a named value', () => page.$('#values-table tr[data-key="scene.time"] td.val'));
  step(`live: FPS ${fps1} then ${await page.textContent('#fps')}, counters and values shown`);

  // 3. A second provider, with values known per frame, and the C consumer
  // recording what its state holds after every data frame.
  const det = start(HELPER, ['provider', 'det-b', '0'], 'det-b');
  const truthFile = join(work, 'truth.jsonl');
  const truth = start(HELPER, ['truth', 'det-b', '60', truthFile], 'truth');
  await until('the picker to list two providers', async () =>
    (await page.$$eval('#picker option', (o) => o.map((x) => x.textContent))).filter((t) => /demo-a|det-b/.test(t)).length === 2);
  const detId = await page.$eval('#picker', (s) => [...s.options].find((o) => o.text.startsWith('det-b')).value);
  await page.selectOption('#picker', detId);
  await until('live on det-b', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('det-b'));
  await until('det values', () => page.$('#values-table tr[data-key="det.frame"] td.val'));
  step('switched to det-b without a reload');

  // 4. The flight recorder: let frames accumulate, freeze, step back.
  await until('a few hundred frames in the recorder', () => js(() => window.spyglass.model.len >= 200), 20000);
  await until('the C consumer to have written its states', () => readFileSync(truthFile, 'utf8').split('\n').length > 20);
  await page.keyboard.press('Space');
  const frozen = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  for (let i = 0; i < 60; i++) await page.keyboard.press('ArrowLeft');
  let F = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  assert.equal(F, frozen - 60, 'each ← is one frame back');
  const states = () => new Map(readFileSync(truthFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).map((s) => [s.frame, s]));
  let checked = 0;
  for (let tries = 0; tries < 120 && checked < 3; tries++) {
    const end = await js(() => window.spyglass.view().packet?.end);
    const truthAt = states().get(end);
    if (truthAt && end === F) {
      // The page shows the frame that ended a data frame the C consumer
      // also held: every value and the counter must match it exactly.
      for (const k of ['det.frame', 'det.neg', 'det.parity', 'det.vec']) {
        const raw = await page.$eval(`#values-table tr[data-key="${k}"] td.val`, (e) => e.dataset.raw);
        assert.deepEqual(JSON.parse(raw), truthAt.values[k], `${k} at frame ${F}`);
      }
      const draws = await page.textContent('#counters .ctr[data-name="draws"]');
      if (draws !== `DRAW ${truthAt.draws}`) {
        console.error('model around the frame:', JSON.stringify(await js((fr) => {
          const m = window.spyglass.model, v = window.spyglass.view();
          const keys = [];
          for (let a = m.len - 1; a >= 0; a--) keys.push(m.key[m.idx(a)]);
          return { fr, index: v.index, len: m.len, oldest: m.oldestFrame(), names: m.counterNames,
            keys: keys.filter((k) => Math.abs(k - fr) < 5 || k === keys[0]),
            ctr: v.index >= 0 ? Array.from({ length: 8 }, (_, c) => m.counter(c, v.index)) : null,
            packets: m.packets.slice(0, 5).map((p) => [p.start, p.end, p.count, p.flags]) };
        }, F)));
      }
      assert.equal(draws, `DRAW ${truthAt.draws}`, `draws at frame ${F}`);
      const live = await js(() => window.spyglass.model.registry.get('det.frame').value);
      assert.notEqual(live, truthAt.values['det.frame'], 'a past frame differs from live');
      checked++;
    } else if (end !== undefined) {
      // Between two data frames: the state is the earlier one's.
      const raw = JSON.parse(await page.$eval('#values-table tr[data-key="det.frame"] td.val', (e) => e.dataset.raw));
      const t = states().get(end);
      if (t) assert.equal(raw, t.values['det.frame'], `det.frame at frame ${F} (data frame ending ${end})`);
    }
    await page.keyboard.press('ArrowLeft');
    F = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  }
  assert.ok(checked >= 3, `compared ${checked} frames with the C consumer's states`);
  step(`recorder: ${checked} past frames equal the C consumer's state`);
  // The recorder kept recording while the view was parked (no gap).
  assert.ok(await js((f) => window.spyglass.model.newestFrame() > f, frozen), 'recording went on while parked');

  // 4b. A small ring (?frames=64): the parked frame scrolls out of it and
  // stays shown (pinned), marked so; ▶ goes on from the oldest frame held.
  {
    const p3 = await ctx.newPage();
    p3.on('pageerror', (e) => errors.push(String(e)));
    await p3.goto(`${base}?frames=64#provider=${detId}`);
    await until('p3 live on det-b', async () => (await p3.$eval('#conn', (e) => e.dataset.state)) === 'live' &&
      (await p3.textContent('#provider-info')).includes('det-b'));
    await until('p3 ring full', () => p3.evaluate(() => window.spyglass.model.len >= 64));
    await p3.keyboard.press('Space');
    await p3.keyboard.press('ArrowLeft');
    const shown = () => p3.evaluate(() => ({
      frame: Number(document.querySelector('#rec-label').dataset.frame),
      out: document.querySelector('#rec-label').dataset.out,
      raw: document.querySelector('#values-table tr[data-key="det.frame"] td.val').dataset.raw,
      fps: document.querySelector('#fps').textContent,
      draws: document.querySelector('#counters .ctr[data-name="draws"]').textContent }));
    const before = await shown();
    assert.equal(before.out, '', 'in the ring at first');
    await until('the parked frame to scroll out', () => p3.evaluate((f) => window.spyglass.model.oldestFrame() > f, before.frame));
    await until('the label to say so', async () => (await shown()).out === '1');
    const after = await shown();
    assert.deepEqual({ ...after, out: '' }, before, 'a scrolled-out frame still shows what it showed');
    assert.match(await p3.textContent('#rec-label'), /scrolled out/);
    await p3.keyboard.press('ArrowRight');
    const next = await shown();
    // (the 64-frame ring moves on within a second: whether that frame is
    // still held by the time it is read is not asserted)
    assert.ok(next.frame > before.frame, `▶ goes on to the oldest frame held (${next.frame})`);
    await p3.close();
    step(`small ring: parked frame ${before.frame} scrolled out and stayed shown; ▶ went to ${next.frame}`);
  }
  // Detail of a series, then a screenshot of the parked view.
  await page.click('#overlay .series[data-series="cpu"]');
  await until('the detail table', () => page.$('#detail-table td[data-stat="p99"]'));
  await page.screenshot({ path: join(OUT, 'web_dashboard.png'), fullPage: true });
  await page.keyboard.press('Escape');
  await until('live again', () => js(() => !window.spyglass.recorder.parked));
  step('screenshot saved');

  // 5. The protocol log has the conversation.
  for (const type of ['subscribe', 'subscribe:ack', 'ack', 'data']) {
    await page.selectOption('#log-type', type);
    await until(`log rows of type ${type}`, () => page.$(`#log-table tr[data-type="${type}"]`));
  }
  await page.selectOption('#log-type', '');
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#log-export')]);
  const exported = JSON.parse(readFileSync(await dl.path(), 'utf8'));
  assert.ok(exported.length > 10 && exported.length <= 4000, `${exported.length} exported`);
  assert.ok(exported.some((e) => e.type === 'data' && e.decoded?.sections?.stats), 'decoded data rows');
  step(`protocol log lists subscribe, subscribe:ack, ack, data; ${exported.length} rows exported`);

  // 5b. A registry filter from the UI: `/` focuses the filter; subscribing
  // to what matches leaves the others listed without values.
  await page.keyboard.press('/');
  await page.keyboard.type('det.fr');
  await page.click('#sub-filter');
  await page.fill('#filter', '');
  await until('det.neg outside the subscription', async () =>
    (await page.textContent('#values-table tr[data-key="det.neg"] td.val')) === '(not subscribed)');
  assert.notEqual(await page.textContent('#values-table tr[data-key="det.frame"] td.val'), '(not subscribed)');
  // The subscribe on the wire carries the filter (decoded from the log).
  const reg = await page.evaluate(async () => {
    const w = await import('/wire.js');
    const e = window.spyglass.log.entries.filter((x) => x.type === 'subscribe' && x.dir === 'out').pop();
    return w.decodeAll(w.decodeFrame(e.raw)).subscription.registry;
  });
  assert.deepEqual(reg, ['det.frame']);
  await page.click('#sub-all');
  await until('det.neg subscribed again', async () =>
    (await page.textContent('#values-table tr[data-key="det.neg"] td.val')) !== '(not subscribed)');
  step('registry filter subscribed from the UI, then every value again');

  // 6. The provider watched is stopped: gone, then the other one.
  const before = await js(() => window.spyglass.states.length);
  await stop(det);
  await until('gone', () => js((n) => window.spyglass.states.slice(n).some((s) => s.s === 'gone'), before));
  await until('live on demo-a again', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('demo-a'));
  await until('demo-a samples', () => js(() => window.spyglass.model.len >= 120));
  await page.click('#overlay .series[data-series="fps"]');
  await page.screenshot({ path: join(OUT, 'web_dashboard_live.png'), fullPage: true });
  step('det-b stopped: gone, then demo-a (screenshot of it live)');

  // 7. The bridge restarts: the page reconnects by itself.
  await stop(serve);
  await until('reconnecting', async () => (await conn()) === 'reconnecting');
  serve = startServe(`127.0.0.1:${port}`);
  await until('live after the bridge restarted', async () => (await conn()) === 'live', 20000);
  step('bridge restarted: reconnected');

  // 8. Every provider gone, then a new one starts: picked up.
  await stop(demo);
  await until('gone or waiting', async () => ['gone', 'waiting', 'subscribing'].includes(await conn()), 15000);
  const det2 = start(HELPER, ['provider', 'det-c', '0'], 'det-c');
  await until('live on det-c', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('det-c'), 20000);
  step('a new provider picked up');

  // 9. A wrong token: a clear message, not a blank page.
  const p2 = await ctx.newPage();
  await p2.goto(`${base}?token=not-the-token`);
  await until('the refusal banner', async () => /wrong token/.test(await p2.textContent('#banner')) &&
    !(await p2.$eval('#banner', (e) => e.hidden)));
  step(`wrong token: "${(await p2.textContent('#banner')).slice(0, 60)}…"`);
  await p2.close();

  // While the bridge was down the browser logs the refused reconnects:
  // expected; anything else is a fault of the page.
  const bad = errors.filter((e) => !/WebSocket connection to .* failed.*ERR_CONNECTION_REFUSED/.test(e));
  assert.deepEqual(bad, [], 'no page errors, no request off the bridge');
  await stop(det2);
  await stop(truth);
}

try {
  await main();
  console.log(`web_browser: all passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
} catch (e) {
  console.error('web_browser: FAILED:', e);
  try {
    console.error('page:', JSON.stringify(await globalThis.page.evaluate(() => ({
      states: window.spyglass.states, drops: window.spyglass.model.drops,
      len: window.spyglass.model.len, parked: window.spyglass.recorder.parked,
      frame: window.spyglass.recorder.frame, provider: window.spyglass.client.provider?.name,
      packets: window.spyglass.model.packets.slice(0, 4).map((p) => [p.start, p.end]) }))));
  } catch { /* no page */ }
  for (const p of procs) console.error(`--- ${p.name} output:\n${p.out.slice(-2000)}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const p of [...procs]) await stop(p, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
