// bench_dashboard.mjs — the browser half of `spyglass bench dashboard`
// (bench/bench_dashboard.c starts the demo and the bridge, then runs this):
// headless Chromium (playwright-core, the system's chromium) on the
// dashboard, measured over the DevTools protocol (Performance.getMetrics):
// main-thread busy time per second while live (wall time of its tasks,
// and its CPU time: ThreadTime, the figure a loaded machine inflates less), the JS heap at the start
// and after the run, and web/wire.js decoding the given frame (the same
// bytes the C decoder was timed on). Prints one JSON object.
// Environment: SPY_PW, SPY_URL, SPY_FRAME (a file), SPY_SECONDS, SPY_PROFILE.
import { copyFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.SPY_PW);
const seconds = Number(process.env.SPY_SECONDS || 10);
const frame = readFileSync(process.env.SPY_FRAME).toString('base64');
// SPY_FRAME_COPY=FILE keeps the frame (to time other decoders on it).
if (process.env.SPY_FRAME_COPY) copyFileSync(process.env.SPY_FRAME, process.env.SPY_FRAME_COPY);

const ctx = await chromium.launchPersistentContext(process.env.SPY_PROFILE, {
  executablePath: '/usr/bin/chromium', viewport: { width: 1500, height: 1000 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await ctx.newPage();
  await page.goto(process.env.SPY_URL);
  const end = Date.now() + 20000;
  while (await page.$eval('#conn', (e) => e.dataset.state) !== 'live') {
    if (Date.now() > end) throw new Error('the page never went live');
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 2000)); // warm up
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Performance.enable');
  const metrics = async () => Object.fromEntries((await cdp.send('Performance.getMetrics'))
    .metrics.map((m) => [m.name, m.value]));
  await cdp.send('HeapProfiler.collectGarbage');
  const a = await metrics();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const b = await metrics();
  await cdp.send('HeapProfiler.collectGarbage');
  const c = await metrics();
  const dt = b.Timestamp - a.Timestamp;
  const decode = await page.evaluate(async (b64) => {
    const w = await import('/wire.js');
    const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
    let n = 0, sink = 0;
    const run = (ms) => {
      const t0 = performance.now();
      do { const f = w.decodeFrame(bytes); sink += w.decodeAll(f).stats.count; n++; }
      while (performance.now() - t0 < ms);
      return (performance.now() - t0) / n;
    };
    run(200); n = 0; // JIT warm-up
    const rounds = [];
    for (let i = 0; i < 5; i++) { n = 0; rounds.push(run(200)); }
    rounds.sort((x, y) => x - y);
    return { ns: rounds[2] * 1e6, sink };
  }, frame);
  const frames = await page.evaluate(() => window.spyglass.client.stats.frames);
  console.log(JSON.stringify({
    seconds: dt, busy_pct: (100 * (b.TaskDuration - a.TaskDuration)) / dt,
    cpu_pct: (100 * (b.ThreadTime - a.ThreadTime)) / dt,
    layout_pct: (100 * (b.LayoutDuration + b.RecalcStyleDuration - a.LayoutDuration - a.RecalcStyleDuration)) / dt,
    script_pct: (100 * (b.ScriptDuration - a.ScriptDuration)) / dt,
    heap_start_mib: a.JSHeapUsedSize / 1048576, heap_end_mib: c.JSHeapUsedSize / 1048576,
    js_decode_ns: decode.ns, frames_received: frames, ring: await page.evaluate(() => window.spyglass.model.len),
  }));
} finally {
  await ctx.close();
}
