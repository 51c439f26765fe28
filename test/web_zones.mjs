// web_zones.mjs — the dashboard's CPU zones panel in headless Chromium
// against real providers through a real `spyglass serve`. Run by
// test/web_zones.sh (SPY_TOOL, SPY_HELPER, SPY_PW, SPY_OUT, SPYGLASS_DIR).
// Proves: no ZONES subscribed until the panel opens; the demo's "frame"
// and "device" threads appear with named spans (screenshot); a provider
// with a known zone sequence, joined late, shows per frame exactly the
// spans (names, nesting, start, duration) the C consumer rebuilt; freeze +
// step back shows the parked frame's zones in the timeline and the table;
// closing the panel unsubscribes ZONES. Every wait has a deadline.
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

const ZBIT = 1 << 14;
let browser, serve;
async function main() {
  serve = start(TOOL, ['serve', '--listen', '127.0.0.1:0'], 'serve');
  const port = Number((await until('serve to listen', () => serve.out.match(/\(port (\d+)\)/)))[1]);
  const base = `http://127.0.0.1:${port}/`;
  browser = await chromium.launchPersistentContext(join(work, 'profile'), {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1500, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  globalThis.page = page;
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const js = (f, arg) => page.evaluate(f, arg);
  const conn = () => page.$eval('#conn', (e) => e.dataset.state);
  const lastSubFeatures = () => js(async () => {
    const w = await import('/wire.js');
    const e = window.spyglass.log.entries.filter((x) => x.type === 'subscribe' && x.dir === 'out').pop();
    return e ? w.decodeAll(w.decodeFrame(e.raw)).subscription.features : null;
  });

  // 1. The demo; the panel closed: ZONES not subscribed, nothing held.
  const demo = start(TOOL, ['demo', '--headless', '--name', 'demo-z', '--fps-cap', '60'], 'demo');
  await page.goto(base);
  await until('live on demo-z', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('demo-z'));
  assert.equal((await lastSubFeatures()) & ZBIT, 0, 'no ZONES while the panel is closed');
  await until('a few data frames', () => js(() => window.spyglass.model.frames > 5));
  assert.equal(await js(() => window.spyglass.model.zones.events), 0, 'no zone events unsubscribed');
  step('demo live, ZONES not subscribed');

  // 2. Open the panel (key z): subscribed; both demo threads with spans.
  await page.keyboard.press('z');
  await until('ZONES in the subscription', async () => ((await lastSubFeatures()) & ZBIT) !== 0);
  const threads = await until('both demo threads with named spans', () => js(() => {
    const z = window.spyglass.model.zones;
    const out = {};
    for (const t of z.threads.values()) {
      const named = t.spans.filter((s) => s.end && z.locs.get(s.loc)?.name);
      if (t.name) out[t.name] = [...new Set(named.map((s) => z.locs.get(s.loc).name))];
    }
    return out.frame?.length && out.device?.length ? out : null;
  }), 20000);
  await until('the timeline to draw both lanes', () => js(() => {
    const b = window.spyglass.zones.boxes;
    return new Set(b.map((x) => x.thread)).size >= 2 && b.length > 5;
  }));
  await until('location table rows', () => page.$('#zones-table tbody tr[data-name]'));
  await page.screenshot({ path: join(OUT, 'web_zones.png'), fullPage: true });
  step(`demo threads: frame [${threads.frame.slice(0, 6)}], device [${threads.device.slice(0, 6)}]; screenshot`);

  // 3. A provider with a known sequence, joined late, and the C consumer.
  const zp = start(HELPER, ['zprovider', 'zp-b', '0'], 'zprovider');
  const truthFile = join(work, 'ztruth.jsonl');
  const truth = start(HELPER, ['ztruth', 'zp-b', '60', truthFile], 'ztruth');
  await until('zp-b in the picker', () => page.$$eval('#picker option', (o) => o.some((x) => x.text.startsWith('zp-b'))));
  const id = await page.$eval('#picker', (s) => [...s.options].find((o) => o.text.startsWith('zp-b')).value);
  await page.selectOption('#picker', id);
  await until('live on zp-b', async () => (await conn()) === 'live' &&
    (await page.textContent('#provider-info')).includes('zp-b'));
  const pageSpans = (F) => js((fr) => {
    const m = window.spyglass.model, zf = m.zonesAt(fr);
    if (!zf) return null;
    const t = zf.threads.find((x) => x.name === 'sim');
    if (!t) return null;
    return t.spans.filter((s) => s.start >= zf.start && s.start < zf.end && s.end)
      .map((s) => [m.zones.locs.get(s.loc)?.name ?? null, s.depth, s.start - zf.start, s.end - s.start]);
  }, F);
  const truthAll = () => new Map(readFileSync(truthFile, 'utf8').trim().split('\n').filter(Boolean)
    .map((l) => JSON.parse(l)).map((x) => [x.frame, x.spans]));
  let matched = 0;
  const deadline = Date.now() + 30000;
  const seen = new Set();
  while (matched < 20 && Date.now() < deadline) {
    const frames = await js(() => [...window.spyglass.model.zoneFrames.keys()]);
    const t = truthAll();
    for (const F of frames) {
      if (seen.has(F) || !t.has(F)) continue;
      const got = await pageSpans(F);
      if (got === null) continue;
      seen.add(F);
      assert.deepEqual(got, t.get(F), `frame ${F}: the page's spans equal the C consumer's`);
      assert.equal(got.length, 9, `frame ${F}: 9 zones`);
      matched++;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.ok(matched >= 20, `compared ${matched} frames with the C consumer`);
  step(`known sequence: ${matched} frames equal the C consumer's spans (names, nesting, start, duration)`);

  // 4. Freeze, step back: the parked frame's zones in timeline and table.
  await page.keyboard.press('Space');
  for (let i = 0; i < 5; i++) await page.keyboard.press('ArrowLeft');
  const F = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  await until('the panel on the parked frame', async () => Number(await page.$eval('#zones', (e) => e.dataset.frame)) === F);
  const want = await until('truth of the parked frame', () => truthAll().get(F));
  await until('the parked frame in the zones store', () => js((fr) => !!window.spyglass.model.zonesAt(fr), F));
  assert.deepEqual(await pageSpans(F), want, `parked frame ${F}`);
  const drawn = await js(() => window.spyglass.zones.boxes.filter((b) => b.thread === 'sim' && b.inFrame).length);
  assert.equal(drawn, 9, 'the timeline draws the parked frame\'s 9 zones');
  // Its neighbours beside it: frames F-1 and F+1 are held (the recorder
  // keeps frames, F is 5 back from live), their markers and zones drawn.
  const around = await js(() => ({ frames: window.spyglass.zones.shown.frames.map((f) => f.frame),
    others: window.spyglass.zones.boxes.filter((b) => b.thread === 'sim' && !b.inFrame).length }));
  assert.deepEqual(around.frames, [F - 1, F, F + 1, F + 2], 'the parked frame between its neighbours');
  assert.ok(around.others >= 18, `the neighbours' 9 zones each drawn too (${around.others})`);
  const table = await page.$$eval('#zones-table tbody tr', (r) => Object.fromEntries(r.map((x) =>
    [x.dataset.name, Number(x.children[1].dataset.v)])));
  assert.deepEqual(table, { frame: 1, update: 1, substep: 3, draw: 1, deep: 3 }, 'the table counts that frame\'s calls');
  const durSub = want.filter((s) => s[0] === 'substep').reduce((a, s) => a + s[3], 0);
  assert.equal(await page.$eval('#zones-table tr[data-name="substep"] td:nth-child(3)', (e) => Number(e.dataset.v)), durSub);
  await page.screenshot({ path: join(OUT, 'web_zones_parked.png'), fullPage: true });
  // One more step back: another frame, its own zones.
  await page.keyboard.press('ArrowLeft');
  await until('the panel on frame F-1', async () => Number(await page.$eval('#zones', (e) => e.dataset.frame)) === F - 1);
  await until('frame F-1 drawn', () => js(() => window.spyglass.zones.boxes.filter((b) => b.thread === 'sim' && b.inFrame).length === 9));
  assert.deepEqual(await pageSpans(F - 1), truthAll().get(F - 1), `parked frame ${F - 1}`);
  // The tooltip, on the parked view (a live one moves under the pointer).
  await until('boxes live', () => js(() => window.spyglass.zones.boxes.length > 0));
  const box = await js(() => { const b = window.spyglass.zones.boxes.find((x) => x.w > 4); return b && { x: b.x + b.w / 2, y: b.y + b.h / 2 }; });
  const cv = await page.$('#zones-canvas');
  const bb = await cv.boundingBox();
  await page.mouse.move(bb.x + box.x, bb.y + box.y);
  await until('the tooltip', async () => /duration .*\nself /.test(await page.textContent('#zones-tip')) &&
    !(await page.$eval('#zones-tip', (e) => e.hidden)));
  await page.keyboard.press('Escape');
  step(`parked on ${F} and ${F - 1}: timeline, table and tooltip show those frames' zones`);

  // 5. Close the panel: ZONES unsubscribed.
  await page.keyboard.press('z');
  await until('ZONES out of the subscription', async () => ((await lastSubFeatures()) & ZBIT) === 0);
  step('panel closed: ZONES unsubscribed');
  assert.deepEqual(errors, [], 'no page errors');
  await stop(truth); await stop(zp); await stop(demo);
}

try {
  await main();
  console.log(`web_zones: all passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
} catch (e) {
  console.error('web_zones: FAILED:', e);
  for (const p of procs) console.error(`--- ${p.name} output:\n${p.out.slice(-1500)}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const p of [...procs]) await stop(p, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
