// web_harness.mjs — what every browser test (web_browser, web_buffers,
// web_zones, web_firefox) needs around the browser: timestamped steps, the
// processes it starts (kept in `procs` for the test's cleanup), stopping
// one, and waiting for a condition with a deadline.
import { spawn } from 'node:child_process';

export const t0 = Date.now();
export const procs = new Set();

export function step(what) { console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`); }

// Starts cmd; its stdout and stderr gather in p.out.
export function start(cmd, args, name) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  p.out = '';
  p.stdout.on('data', (d) => { p.out += d; });
  p.stderr.on('data', (d) => { p.out += d; });
  p.name = name;
  procs.add(p);
  p.on('exit', () => procs.delete(p));
  return p;
}

export async function stop(p, sig = 'SIGTERM') {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  p.kill(sig);
  await done;
}

// Polls fn every 100 ms until it returns something truthy (returned);
// throws naming `what` and the last value or error after ms.
export async function until(what, fn, ms) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
