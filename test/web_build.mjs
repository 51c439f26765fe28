// web_build.mjs — the dashboard's live build view (web/build.js) in a real
// headless Chromium through a real `spyglass serve`: a traced `demo build`
// waits for the page to subscribe, the panel appears by itself, its hook
// counts grow while the build runs, and once the build ends the page's
// per-plugin calls equal the store's (`trace hooks --json`). Run by
// test/web_build.sh (SPY_TOOL, SPY_PW, SPY_OUT, SPY_WORK, SPYGLASS_DIR).
// Every wait is for a condition with a deadline.
import { spawn, execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.SPY_PW);
const TOOL = process.env.SPY_TOOL, OUT = process.env.SPY_OUT, WORK = process.env.SPY_WORK;
const t0 = Date.now();
const procs = new Set();
const step = (what) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);

function start(cmd, args) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  p.out = '';
  p.stdout.on('data', (d) => { p.out += d; });
  p.stderr.on('data', (d) => { p.out += d; });
  procs.add(p);
  p.on('exit', () => procs.delete(p));
  return p;
}
async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

let browser;
async function main() {
  const serve = start(TOOL, ['serve', '--listen', '127.0.0.1:0']);
  const port = Number((await until('serve to listen', () => serve.out.match(/\(port (\d+)\)/)))[1]);
  const name = `web-build-${process.pid}`;
  browser = await chromium.launchPersistentContext(join(WORK, 'profile'), {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1500, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`http://127.0.0.1:${port}/#provider=${name}`);
  const js = (f) => page.evaluate(f);
  assert.equal(await page.$eval('#build', (e) => e.hidden), true, 'no build: no panel');

  const build = start(TOOL, ['demo', 'build', join(WORK, 'src'), '--trace', 'jsonl',
    '--out', join(WORK, 'out'), '--name', name, '--hook-delay-us', '3000',
    '--wait-subscriber', '60']);
  await until('the build panel', async () => !(await page.$eval('#build', (e) => e.hidden)));
  const calls = () => js(() => window.spyglass.build.cur?.hookCalls ?? 0);
  const c1 = await until('hook calls on the page', async () => {
    const c = await calls();
    return c > 0 && !(await js(() => window.spyglass.build.cur.ended)) ? c : null;
  });
  const c2 = await until('hook calls to grow', async () => { const c = await calls(); return c > c1 ? c : null; });
  step(`live build view: ${c1} then ${c2} hook calls`);
  await until('the plugin rows', () => page.$('#build-plugins tr[data-plugin="demo:banner"]'));
  await until('the build to end', () => js(() => window.spyglass.build.cur.ended), 60000);
  if (build.exitCode === null) await new Promise((r) => build.once('exit', r));
  assert.equal(build.exitCode, 0, build.out);
  await until('the done line', async () => (await page.textContent('#build-done')).includes('builds done'));
  assert.match(await page.textContent('#build-head'), /build 1 done: 120\/120 modules/);

  const store = readdirSync(join(WORK, 'out', '.spyglass'))[0];
  const hooks = JSON.parse(execFileSync(TOOL, ['trace', 'hooks', join(WORK, 'out', '.spyglass', store), '--json'],
    { maxBuffer: 1 << 26 }).toString()).hook_calls;
  const stored = {};
  for (const h of hooks) stored[h.plugin] = (stored[h.plugin] ?? 0) + 1;
  const live = await js(() => Object.fromEntries(window.spyglass.build.cur.plugins
    .map((p) => [p.name, p.calls.reduce((a, b) => a + b, 0)])));
  assert.deepEqual(live, stored, 'the page\'s per-plugin calls are the store\'s');
  const shown = await page.$eval('#build-plugins tr[data-plugin="demo:resolver"] td:nth-child(2)', (e) => e.textContent);
  assert.equal(Number(shown), stored['demo:resolver']);
  assert.ok((await page.$$('#build-slow tr')).length > 1, 'slowest calls listed');
  await page.$eval('#build', (e) => e.scrollIntoView());
  await page.screenshot({ path: join(OUT, 'web_build.png') });
  step(`per-plugin calls match the store; screenshot ${join(OUT, 'web_build.png')}`);
  assert.deepEqual(errors, [], 'no page errors');
}

try {
  await main();
  console.log('web_build: ok');
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const p of procs) p.kill('SIGTERM');
}
