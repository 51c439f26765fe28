// web_firefox.mjs — the dashboard in Firefox (Debian's firefox-esr,
// headless, WebDriver BiDi through puppeteer-core) against a real demo
// provider through a real `spyglass serve`: the subset of web_browser.mjs
// that covers what differs between engines (WebSocket + binary frames,
// DataView/typed-array decoding, canvas, keyboard, DOM updates). Run by
// test/web_firefox.sh, which passes SPY_TOOL, SPY_PP (puppeteer-core's
// directory), SPY_OUT (where the screenshot goes) and SPYGLASS_DIR.
// Every wait is for a condition with a deadline, never a fixed sleep.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { procs, start, step, stop, t0, until as untilWithin } from './web_harness.mjs';

const require = createRequire(import.meta.url);
const puppeteer = require(process.env.SPY_PP);
const TOOL = process.env.SPY_TOOL, OUT = process.env.SPY_OUT;
const work = mkdtempSync(join(tmpdir(), 'spy-ff-'));

const until = (what, fn, ms = 20000) => untilWithin(what, fn, ms);

let browser, page;
async function main() {
  const serve = start(TOOL, ['serve', '--listen', '127.0.0.1:0'], 'serve');
  const port = Number((await until('serve to listen', () => serve.out.match(/\(port (\d+)\)/)))[1]);
  const base = `http://127.0.0.1:${port}/`;
  step(`serve on ${port}`);

  // A fresh profile of our own (userDataDir), removed at the end.
  browser = await puppeteer.launch({
    browser: 'firefox', executablePath: '/usr/bin/firefox-esr', headless: true,
    userDataDir: join(work, 'profile'), protocolTimeout: 60000,
    defaultViewport: { width: 1500, height: 1000 },
    extraPrefsFirefox: { 'browser.shell.checkDefaultBrowser': false },
  });
  page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e?.message ?? e}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  const conn = () => page.$eval('#conn', (e) => e.dataset.state);
  const text = (sel) => page.$eval(sel, (e) => e.textContent);
  const js = (f, arg) => page.evaluate(f, arg);
  step(`firefox ${await browser.version()} up`);

  // 1. No provider yet: waiting.
  await page.goto(base);
  await until('waiting', async () => (await conn()) === 'waiting');
  step('page up, waiting for a provider');

  // 2. A provider starts: live; FPS > 0 and changes; counters and a value.
  const demo = start(TOOL, ['demo', '--headless', '--name', 'demo-ff', '--fps-cap', '60'], 'demo');
  await until('live on demo-ff', async () => (await conn()) === 'live' &&
    (await text('#provider-info')).includes('demo-ff'));
  const fps1 = await until('an FPS figure', async () => {
    const t = await text('#fps');
    return Number(t) > 0 ? t : null;
  });
  await until('the FPS figure to change', async () => (await text('#fps')) !== fps1);
  await until('counters', () => page.$('#counters .ctr[data-name="draws"]'));
  await until('a named value', () => page.$('#values-table tr[data-key="scene.time"] td.val'));
  step(`live: FPS ${fps1} then ${await text('#fps')}, counters and values shown`);

  // 3. The flight recorder: freeze, step back, a past frame's value.
  await until('frames in the recorder', () => js(() => window.spyglass.model.len >= 200), 30000);
  await page.keyboard.press(' '); // Space
  await until('parked', () => js(() => window.spyglass.recorder.parked));
  const frozen = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  for (let i = 0; i < 90; i++) await page.keyboard.press('ArrowLeft');
  const F = Number(await page.$eval('#rec-label', (e) => e.dataset.frame));
  assert.equal(F, frozen - 90, 'each ← is one frame back');
  const past = await page.$eval('#values-table tr[data-key="scene.time"] td.val', (e) => e.dataset.raw);
  const live = await js(() => window.spyglass.model.registry.get('scene.time').value);
  assert.ok(Number(JSON.parse(past)) < live, `a past scene.time (${past}) is before live (${live})`);
  // The model agrees with what the panel shows for that frame.
  const atF = await js((fr) => window.spyglass.model.at(fr).registry.get('scene.time')?.value ?? null, F);
  if (atF !== null) assert.equal(JSON.parse(past), atF, 'the panel shows the model at the parked frame');
  await page.click('#overlay .series[data-series="cpu"]');
  await until('the detail table', () => page.$('#detail-table td[data-stat="p99"]'));
  await page.screenshot({ path: join(OUT, 'web_firefox.png'), fullPage: true });
  await page.keyboard.press('Escape');
  await until('live again', () => js(() => !window.spyglass.recorder.parked));
  step(`recorder: parked at ${frozen}, stepped back to ${F} (scene.time ${past} < live ${live}); screenshot saved`);

  // 4. The protocol log has the conversation.
  for (const type of ['subscribe', 'subscribe:ack', 'ack', 'data']) {
    await page.select('#log-type', type);
    await until(`log rows of type ${type}`, () => page.$(`#log-table tr[data-type="${type}"]`));
  }
  await page.select('#log-type', '');
  step('protocol log lists subscribe, subscribe:ack, ack, data');

  // 5. The provider stops: gone.
  await stop(demo);
  await until('gone or waiting', async () => ['gone', 'waiting'].includes(await conn()));
  step(`provider stopped: ${await conn()}`);

  // 6. `spyglass demo --port 0` serves the dashboard on a free port and
  // prints the URL it bound.
  const d2 = start(TOOL, ['demo', '--headless', '--name', 'demo-port', '--port', '0'], 'demo-port');
  const url = await until('the demo URL', () => d2.out.match(/dashboard (http:\/\/127\.0\.0\.1:(\d+)\/)/));
  assert.notEqual(Number(url[2]), 0);
  assert.match(await (await fetch(url[1])).text(), /<html/i, 'the dashboard at the printed URL');
  await stop(d2);
  step(`demo --port 0 served at ${url[1]}`);

  assert.deepEqual(errors, [], 'no page errors');
  await stop(serve);
}

try {
  await main();
  console.log(`web_firefox: all passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
} catch (e) {
  console.error('web_firefox: FAILED:', e);
  try {
    console.error('page:', JSON.stringify(await page.evaluate(() => ({
      states: window.spyglass.states, len: window.spyglass.model.len,
      parked: window.spyglass.recorder.parked, frame: window.spyglass.recorder.frame }))));
  } catch { /* no page */ }
  for (const p of procs) console.error(`--- ${p.name} output:\n${p.out.slice(-2000)}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const p of [...procs]) await stop(p, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
