// web_buffers.mjs — the dashboard's buffer inspector in a real browser
// (Debian's chromium, headless, playwright-core) through a real `spyglass
// serve`, against a provider of known images (web_helper images: "test"
// 64x48 RGBA8 with pixel (x, y) = (4x, 5y, xy mod 256, 255 − x), "moving"
// 320x240, a batch list and a pass tree with known values) and the demo.
// Run by test/web_buffers.sh (SPY_TOOL, SPY_HELPER, SPY_PW, SPY_OUT,
// SPYGLASS_DIR). Every wait is for a condition with a deadline.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { networkInterfaces, tmpdir } from 'node:os';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { procs, start, step, stop, t0, until as untilWithin } from './web_harness.mjs';

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.SPY_PW);
const TOOL = process.env.SPY_TOOL, HELPER = process.env.SPY_HELPER;
const OUT = process.env.SPY_OUT;
const work = mkdtempSync(join(tmpdir(), 'spy-webbuf-'));

const until = (what, fn, ms = 20000) => untilWithin(what, fn, ms);

// The pixel pattern of web_helper's "test" buffer.
const testPixel = (x, y) => [(4 * x) & 255, (5 * y) & 255, (x * y) & 255, 255 - x];

let browser;
async function main() {
  const serve = start(TOOL, ['serve', '--listen', '127.0.0.1:0'], 'serve');
  const port = Number((await until('serve to listen', () => serve.out.match(/\(port (\d+)\)/)))[1]);
  const base = `http://127.0.0.1:${port}/`;
  start(HELPER, ['images', 'img-a', '0'], 'images');
  browser = await chromium.launchPersistentContext(join(work, 'profile'), {
    executablePath: '/usr/bin/chromium',
    viewport: { width: 1400, height: 1400 }, deviceScaleFactor: 1,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  globalThis.page = page;
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const js = (f, arg) => page.evaluate(f, arg);
  const cell = (name) => js((n) => {
    const c = window.spyglass.buffers.cells.get(n);
    return c && { ...c.stats, w: c.w, h: c.h, z: c.z, tx: c.tx, ty: c.ty, needKey: c.needKey, mouse: c.mouse };
  }, name);
  await page.goto(`${base}#provider=img-a`);
  const webcodecs = await js(async () => ({ fn: typeof VideoDecoder, secure: isSecureContext,
    vp9: typeof VideoDecoder === 'function' ? (await VideoDecoder.isConfigSupported({
      codec: 'vp09.00.10.08', codedWidth: 320, codedHeight: 240 })).supported : false }));
  step(`page up; WebCodecs: VideoDecoder ${webcodecs.fn}, secure context ${webcodecs.secure}, VP9 ${webcodecs.vp9}`);
  assert.ok(webcodecs.vp9, 'headless chromium decodes vp09.00.10.08 with WebCodecs');

  // 1. The buffer list from the BUFFERS metadata; nothing served yet.
  const row = (n) => `#buffer-list tr[data-name="${n}"]`;
  // (Un)ticks a buffer until the page's cells say so: the list re-renders
  // when the metadata changes, and a click on a row being replaced is lost.
  const select = (pg, name, on = true) => until(`${name} ${on ? 'selected' : 'unselected'}`, async () => {
    const has = await pg.evaluate((n) => window.spyglass.buffers.cells.has(n), name);
    if (has === on) return true;
    await pg.click(`${row(name)} input[type=checkbox]`).catch(() => {});
    return false;
  });
  await until('the buffer list', () => page.$(row('test')));
  const cells = await page.$$eval(`${row('test')} td`, (t) => t.map((x) => x.textContent));
  assert.deepEqual(cells.slice(1, 4), ['test', 'rgba8', '64×48']);
  assert.equal(cells[5], 'metadata only');
  assert.ok(await page.$(row('moving')));
  step('buffer list: test rgba8 64×48, moving; metadata only until selected');

  // 2. Select "test", ask for raw frames: the subscription names it.
  await select(page, 'test');
  await page.selectOption('.cell[data-name="test"] .cell-mode', 'raw');
  await until('raw frames of test', async () => { const c = await cell('test'); return c.raw > 1 && c.w === 64; });
  await until('served as raw', async () =>
    /thumbnail raw 64×48 colors/.test(await page.textContent(`${row('test')} td.served`)));
  const sub = await js(async () => {
    const w = await import('/wire.js');
    const e = window.spyglass.log.entries.filter((x) => x.type === 'subscribe' && x.dir === 'out').pop();
    return w.decodeAll(w.decodeFrame(e.raw)).subscription;
  });
  assert.deepEqual(sub.buffers.map((b) => [b.name, b.mode, b.display]), [['test', 1, 0]]);
  assert.ok(sub.features & (1 << 4) && sub.features & (1 << 15) && sub.features & (1 << 16));
  step(`test streams raw after selection (subscription ${JSON.stringify(sub.buffers)})`);

  // 3. Zoom about the cursor, pan, probe a known pixel.
  const view = await page.$('.cell[data-name="test"] canvas.cell-view');
  let box = await view.boundingBox();
  let c = await cell('test');
  // Where a pixel's centre is on the screen now (the box re-measured: the
  // page's layout may move while values and the log fill in).
  const screenOf = async (st, x, y) => {
    box = await view.boundingBox();
    return [box.x + st.tx + (x + 0.5) * st.z, box.y + st.ty + (y + 0.5) * st.z];
  };
  let [sx, sy] = await screenOf(c, 20, 10);
  await page.mouse.move(sx, sy);
  const probe = () => page.$eval('.cell[data-name="test"] .probe', (e) => ({ ...e.dataset }));
  assert.deepEqual(await until('the probe', async () => { const p = await probe(); return p.x && p; }),
    { x: '20', y: '10', rgba: testPixel(20, 10).join(',') });
  const z0 = c.z;
  const c0 = await cell('test'); // the image point under the cursor before
  const ix0 = (c0.mouse.x - c0.tx) / c0.z, iy0 = (c0.mouse.y - c0.ty) / c0.z;
  for (let i = 0; i < 6; i++) await page.mouse.wheel(0, -400);
  c = await until('zoomed in', async () => { const s = await cell('test'); return s.z > z0 * 8 && s; });
  // Anchored: the image point under the cursor stayed there.
  const ix = (c.mouse.x - c.tx) / c.z, iy = (c.mouse.y - c.ty) / c.z;
  assert.ok(Math.abs(ix - ix0) < 1e-6 && Math.abs(iy - iy0) < 1e-6,
    `anchor moved from ${ix0}, ${iy0} to ${ix}, ${iy}`);
  assert.deepEqual(await probe(), { x: '20', y: '10', rgba: testPixel(20, 10).join(',') });
  for (let i = 0; i < 20; i++) await page.mouse.wheel(0, -400);
  c = await until('the zoom clamped at 64×', async () => { const s = await cell('test'); return s.z === 64 && s; });
  for (let i = 0; i < 30; i++) await page.mouse.wheel(0, 400);
  c = await until('the zoom clamped at 0.5×', async () => { const s = await cell('test'); return s.z === 0.5 && s; });
  for (let i = 0; i < 9; i++) await page.mouse.wheel(0, -400); // ≈ 0.5·e^7.2 → 64
  for (let i = 0; i < 2; i++) await page.mouse.wheel(0, 400); // 64·e^−1.6 ≈ 12.9
  c = await cell('test');
  assert.ok(c.z > 8 && c.z < 64, `zoom ${c.z}`);
  // Pan: drag by (−150, −90) moves the image by exactly that.
  await page.mouse.down();
  await page.mouse.move(sx - 75, sy - 45, { steps: 3 });
  await page.mouse.move(sx - 150, sy - 90, { steps: 3 });
  await page.mouse.up();
  const c2 = await cell('test');
  assert.equal(c2.tx, c.tx - 150);
  assert.equal(c2.ty, c.ty - 90);
  // The probe on pixel (37, 21) after zoom and pan reads its exact value.
  [sx, sy] = await screenOf(c2, 37, 21);
  assert.ok(sx > box.x && sx < box.x + box.width && sy > box.y && sy < box.y + box.height,
    'pixel (37, 21) is in view');
  await page.mouse.move(sx, sy);
  const want = testPixel(37, 21);
  assert.deepEqual(await probe(), { x: '37', y: '21', rgba: want.join(',') });
  // What is drawn there is that pixel, nearest-neighbour: the whole
  // magnified square has one colour.
  const drawn = await js(({ x, y, h }) => {
    const v = document.querySelector('.cell[data-name="test"] canvas.cell-view');
    const g = v.getContext('2d').getImageData(Math.round(x - h), Math.round(y - h), Math.round(2 * h), Math.round(2 * h)).data;
    const first = Array.from(g.subarray(0, 4));
    let same = true;
    for (let i = 0; i < g.length; i += 4) if (Math.abs(g[i] - first[0]) > 1 || Math.abs(g[i + 3] - first[3]) > 1) same = false;
    return { first, same };
  }, { x: sx - box.x, y: sy - box.y, h: c2.z * 0.4 });
  assert.ok(drawn.same, 'one colour across the magnified pixel');
  drawn.first.forEach((v, i) => assert.ok(Math.abs(v - want[i]) <= 2, `drawn ${drawn.first} vs ${want}`));
  await page.screenshot({ path: join(OUT, 'web_buffers_probe.png'), fullPage: true });
  step(`zoom ${c2.z.toFixed(2)}× anchored on the cursor, pan (−150, −90), probe (37, 21) = ${want}`);

  // 4. A display mode chosen in the UI is converted by the provider.
  await page.selectOption('.cell[data-name="test"] .cell-display', '3');
  await until('mono served', async () => /mono/.test(await page.textContent(`${row('test')} td.served`)));
  await page.mouse.move(sx + 1, sy);
  await until('the probe in mono', async () => (await probe()).rgba === '148,148,148,255');
  step('display mode mono from the UI: the probe reads 148,148,148,255');

  // 4b. A float buffer's probe shows the source value too: "depthf" (R32F
  // 40×30, pixel (x, y) = 100 y + x / 4 + 0.5), read by the provider at a
  // capture (buffer:probe → PROBE), not the displayed (normalized) RGBA.
  await select(page, 'depthf');
  await page.selectOption('.cell[data-name="depthf"] .cell-mode', 'raw');
  await until('raw frames of depthf', async () => { const s = await cell('depthf'); return s && s.raw > 1 && s.w === 40 && s.drawn > 1; });
  const fview = await page.$('.cell[data-name="depthf"] canvas.cell-view');
  const fprobe = () => page.$eval('.cell[data-name="depthf"] .probe', (e) => ({ ...e.dataset }));
  // The layout may still move (the new cell fits itself): each try
  // re-measures and moves the cursor onto the pixel's centre again.
  const probeAt = (x, y, want) => until(`the source value of depthf (${x}, ${y})`, async () => {
    const st = await cell('depthf'), fb = await fview.boundingBox();
    await page.mouse.move(fb.x + st.tx + (x + 0.5) * st.z, fb.y + st.ty + (y + 0.5) * st.z);
    const p = await fprobe();
    return p.x === String(x) && p.y === String(y) && p.source === want && p;
  });
  const fp = await probeAt(7, 5, '502.25');
  assert.ok(Number(fp.sourceFrame) > 0);
  // and it follows the cursor: (30, 20) = 2008
  await probeAt(30, 20, '2008');
  const ftext = await page.textContent('.cell[data-name="depthf"] .probe');
  assert.match(ftext, /src 2008/);
  step(`float probe: depthf (7, 5) source 502.25, (30, 20) 2008 ("${ftext.trim()}")`);
  await page.mouse.move(0, 0);
  await select(page, 'depthf', false);

  // 5. A VP9 stream decoded by WebCodecs.
  await select(page, 'moving');
  c = await until('decoded VP9 frames of moving', async () => {
    const s = await cell('moving'); return s && s.codec === 'vp9' && s.decoded >= 4 && s;
  }, 30000);
  assert.equal(c.w, 320); assert.equal(c.h, 240);
  await until('served as a vp9 stream', async () =>
    /stream vp9 320×240/.test(await page.textContent(`${row('moving')} td.served`)));
  // The picture is the provider's: a checkerboard of 40 px squares, blue
  // channel 220 or 30 (VP9 is lossy: within a margin).
  const blue = await js(() => {
    const cl = window.spyglass.buffers.cells.get('moving');
    return [cl.sctx.getImageData(60, 20, 1, 1).data[2], cl.sctx.getImageData(20, 20, 1, 1).data[2]];
  });
  assert.ok(blue[0] > 180 && blue[1] < 70, `checkerboard blue ${blue}`);
  // A decode error: the cell waits for a key frame, asks for one (resync),
  // and decodes again.
  const before = await cell('moving');
  await js(() => window.spyglass.buffers.cells.get('moving').decodeError(new Error('injected')));
  c = await until('decoding again after the error', async () => {
    const s = await cell('moving'); return !s.needKey && s.decoded > before.decoded + 2 && s;
  }, 15000);
  assert.ok(c.resyncs > before.resyncs && c.errors === before.errors + 1);
  step(`VP9 320×240: ${c.decoded} frames decoded; after an error a resync and a key frame, decoding again`);

  // 5b. The flight recorder keeps the buffers' images: parked on a frame,
  // a cell shows the image it had then (the newest at or before it), not
  // the live one. "moving" raw: its red at (0, 0) changes every frame; a
  // log of what arrived, kept here apart from the cell, is the truth.
  await page.selectOption('.cell[data-name="moving"] .cell-mode', 'raw');
  await js(async () => {
    const w = await import('/wire.js'), wp = await import('/wire_pixels.js');
    window.__moving = [];
    window.spyglass.client.on('pixels', (f) => {
      const s = w.findSection(f, 10);
      const px = s && wp.decodePixels(f, s);
      if (px && px.name === 'moving' && px.codec === 0 && px.variantMode === 1 && !px.part) {
        window.__moving.push([px.frame, px.data[0]]);
      }
    });
  });
  const log = await until('raw images of moving logged', async () => {
    const l = await js(() => window.__moving); return l.length >= 8 && l;
  }, 30000);
  const parkedOn = async (frame) => {
    await js((f) => window.spyglass.recorder.jump(f), frame);
    return until(`the cell parked on ${frame}`, () => js(() => {
      const cl = window.spyglass.buffers.cells.get('moving');
      const st = document.querySelector('.cell[data-name="moving"] .cell-status').dataset.parked;
      return cl.parked && !cl.parked.none && st && {
        frame: window.spyglass.recorder.current(), shown: Number(st),
        red: cl.pctx.getImageData(0, 0, 1, 1).data[0], w: cl.parkSrc.width };
    }));
  };
  const wantAt = (f) => log.filter(([g]) => g <= f).pop();
  const a = await parkedOn(log[log.length - 5][0] + 1);
  assert.deepEqual([a.shown, a.red], wantAt(a.frame), `parked on ${a.frame}`);
  assert.equal(a.w, 320);
  const b = await parkedOn(log[log.length - 3][0]);
  assert.deepEqual([b.shown, b.red], wantAt(b.frame), `parked on ${b.frame}`);
  assert.notEqual(a.red, b.red, 'another frame, another image');
  // parked, new images arrive and the cell still shows frame b's
  const nLive = (await js(() => window.__moving)).length;
  await until('live images while parked', async () => (await js(() => window.__moving)).length > nLive + 2);
  assert.equal((await parkedOn(b.frame)).shown, b.shown);
  const held = await js(() => {
    const bs = window.spyglass.buffers;
    let sum = 0;
    for (const cl of bs.cells.values()) for (const x of cl.hist) sum += x.w * x.h * 4;
    return { sum, bytes: bs.histBytes, max: 64 * 1024 * 1024, n: bs.cells.get('moving').hist.length };
  });
  assert.equal(held.sum, held.bytes);
  assert.ok(held.bytes <= held.max, `held ${held.bytes} bytes`);
  await page.click('#live');
  await until('live again', () => js(() => !window.spyglass.buffers.cells.get('moving').parked));
  step(`recorder: parked on frame ${a.frame} the cell shows image ${a.shown} (red ${a.red}), on ${b.frame} image ${b.shown} (red ${b.red}); ${held.n} images, ${(held.bytes / 1048576).toFixed(1)} MiB held (≤ 64 MiB)`);

  // 6. Batches grouped by kind, the pass tree with totals, collapsible.
  await until('batches', () => page.$('#batch-table tr.kind[data-kind="mesh"]'));
  const mesh = await page.$$eval('#batch-table tr.kind[data-kind="mesh"] td', (t) => t.map((x) => x.textContent));
  assert.ok(['17', '18'].includes(mesh[1]) && mesh[2] === '5', `mesh ${mesh}`);
  const sprite = await page.$$eval('#batch-table tr.kind[data-kind="sprite"] td', (t) => t.map((x) => x.textContent));
  assert.deepEqual(sprite, ['sprite', '40', '1']);
  const total = await page.$$eval('#pass-table tr.total td', (t) => t.map((x) => x.textContent));
  assert.deepEqual(total.slice(0, 3), ['total', '6', '50000']);
  assert.ok(await page.$('#pass-table tr[data-pass="shadow"]'));
  await page.click('#pass-table tr[data-pass="scene"]');
  await until('shadow folded away', async () => !(await page.$('#pass-table tr[data-pass="shadow"]')));
  await page.click('#pass-table tr[data-pass="scene"]');
  await until('shadow back', () => page.$('#pass-table tr[data-pass="shadow"]'));
  step('batches by kind (mesh 5 draws, sprite 40/1), pass tree scene ▸ shadow, totals 6 / 50000');

  // 7. The demo's framebuffer, a VP9 stream; its depth as a raw thumbnail.
  const demo = start(TOOL, ['demo', '--headless', '--name', 'demo-b', '--fps-cap', '30', '--size', '640x360'], 'demo');
  const demoId = await until('demo-b in the picker', () => page.$eval('#picker', (s) =>
    [...s.options].find((o) => o.text.startsWith('demo-b'))?.value));
  await page.selectOption('#picker', demoId);
  await until('the demo framebuffer listed', () => page.$(row('framebuffer')));
  assert.equal(await js(() => window.spyglass.buffers.cells.size), 0, 'a new provider starts unselected');
  await select(page, 'framebuffer');
  await select(page, 'depth');
  await page.selectOption('.cell[data-name="depth"] .cell-mode', 'thumbnail');
  c = await until('decoded frames of the framebuffer', async () => {
    const s = await cell('framebuffer'); return s && s.decoded >= 2 && s;
  }, 45000);
  await until('a depth thumbnail', async () => { const s = await cell('depth'); return s && s.raw >= 1; });
  // Not a blank picture: the framebuffer has many distinct colours.
  const colours = await js(() => {
    const cl = window.spyglass.buffers.cells.get('framebuffer');
    const d = cl.sctx.getImageData(0, 0, cl.w, cl.h).data, seen = new Set();
    for (let i = 0; i < d.length; i += 4 * 97) seen.add((d[i] >> 4) << 8 | (d[i + 1] >> 4) << 4 | d[i + 2] >> 4);
    return seen.size;
  });
  assert.ok(colours > 20, `${colours} colours in the demo's framebuffer`);
  await page.screenshot({ path: join(OUT, 'web_buffers.png'), fullPage: true });
  step(`demo framebuffer ${c.w}×${c.h} VP9 (${c.decoded} frames, ${colours} colours), depth thumbnail; screenshot saved`);

  // 8. No WebCodecs: a page over plain HTTP from a non-loopback address is
  // not a secure context (no VideoDecoder): a stream is asked for as raw
  // frames, and the panel says so. Without such an address here, the
  // page's ?webcodecs=0 switch stands in for it (said in the log).
  const ip = Object.values(networkInterfaces()).flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  let url2 = `${base}?webcodecs=0#provider=img-a`, serve2 = null;
  if (ip) {
    const tokFile = join(work, 'token');
    writeFileSync(tokFile, 'web-buffers-test-token-0123456789\n');
    serve2 = start(TOOL, ['serve', '--listen', `${ip}:0`, '--token-file', tokFile], 'serve2');
    const port2 = Number((await until('serve on a LAN address', () => serve2.out.match(/\(port (\d+)\)/)))[1]);
    url2 = `http://${ip}:${port2}/?token=web-buffers-test-token-0123456789#provider=img-a`;
  }
  const p2 = await browser.newPage();
  p2.on('pageerror', (e) => errors.push(String(e)));
  await p2.goto(url2);
  const secure2 = await p2.evaluate(() => ({ secure: isSecureContext, fn: typeof VideoDecoder }));
  if (ip) assert.deepEqual(secure2, { secure: false, fn: 'undefined' }, 'plain HTTP from a LAN address');
  await until('the list on the second page', () => p2.$(row('moving')));
  await select(p2, 'moving');
  await until('raw frames instead of a stream', () => p2.evaluate(() => {
    const cl = window.spyglass.buffers.cells.get('moving'); return cl && cl.stats.raw >= 2 && cl.stats.chunks === 0;
  }));
  // the note is drawn by the panel's render: wait for it (a busy machine
  // can delay a background page's frames), then read what it says
  await until('the note shown', () => p2.$eval('#buffers .note', (e) => !e.hidden));
  const note = await p2.textContent('#buffers .note');
  assert.match(note, ip ? /not a secure context.*raw frames/ : /raw frames/);
  step(`${ip ? `plain HTTP from ${ip} (isSecureContext false, no VideoDecoder)` : '?webcodecs=0 (no non-loopback address here)'}: raw frames, the panel says "${note}"`);
  await p2.close();
  if (serve2) await stop(serve2);

  assert.deepEqual(errors, [], 'no page errors');
  await stop(demo);
}

try {
  await main();
  console.log(`web_buffers: all passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
} catch (e) {
  console.error('web_buffers: FAILED:', e);
  try {
    console.error('page:', JSON.stringify(await globalThis.page.evaluate(() => ({
      conn: window.spyglass.client.conn, provider: window.spyglass.client.provider?.name,
      cells: [...window.spyglass.buffers.cells].map(([n, c]) => [n, c.stats, c.lastError, c.probeAt, c.srcProbe && { ...c.srcProbe, value: null }, c.mouse, c.w, c.h]),
      meta: [...window.spyglass.buffers.meta] }))));
  } catch { /* no page */ }
  for (const p of procs) console.error(`--- ${p.name} output:\n${p.out.slice(-2000)}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const p of [...procs]) await stop(p, 'SIGKILL');
  rmSync(work, { recursive: true, force: true });
}
