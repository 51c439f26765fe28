// wire_trace.js — the BUILD section (17, docs/wire.md): a traced build's
// live progress as the provider's build feed sends it to TRACE
// subscribers; the JS twin of src/wire/trace.c's spy_get_build, with the
// same bounds and the same error codes.
import { WireError } from './wire.js';

export const SEC_BUILD = 17;
export const FEAT_TRACE = (1 << 11) >>> 0;
export const BUILD_HOOKS = ['transform', 'load', 'resolve_id', 'render_chunk'];
const PLUGINS_MAX = 32, SLOW_MAX = 8, NAME_MAX = 63, MODULE_MAX = 255;
const HEAD = 64, PLUGIN = 8 + 16 * 4 + 8, SLOW = 16;

const fail = (code, off) => { throw new WireError(code, off, 'build'); };
const u64 = (dv, o) => dv.getUint32(o, true) + dv.getUint32(o + 4, true) * 4294967296;
const utf8 = new TextDecoder('utf-8');

export function decodeBuild(f, s) {
  const dv = f.dv, o = s.off, end = s.off + s.len;
  if (s.len < HEAD) fail('EBADSECTION', o);
  const b = {
    build: dv.getUint32(o, true), flags: dv.getUint32(o + 4, true),
    startedUs: u64(dv, o + 8), endedUs: u64(dv, o + 16),
    modulesDone: dv.getUint32(o + 24, true), modulesTotal: dv.getUint32(o + 28, true),
    actions: u64(dv, o + 32), hookCalls: u64(dv, o + 40), hookUs: u64(dv, o + 48),
    plugins: [], slow: [],
  };
  const np = dv.getUint16(o + 56, true), ns = dv.getUint16(o + 58, true);
  if ((b.flags & ~3) || dv.getUint32(o + 60, true) || np > PLUGINS_MAX || ns > SLOW_MAX) {
    fail('EBADVALUE', o);
  }
  b.ended = (b.flags & 1) !== 0;
  b.partial = (b.flags & 2) !== 0; // counts since startedUs only (joined late)
  const bytes = f.bytes;
  let p = o + HEAD;
  for (let i = 0; i < np; i++) {
    if (end - p < PLUGIN) fail('EBADSECTION', p);
    const n = dv.getUint16(p, true);
    if (n > NAME_MAX || dv.getUint16(p + 2, true)) fail('EBADVALUE', p);
    const pl = { p50Us: dv.getUint32(p + 4, true), calls: [], totalUs: [],
      maxUs: u64(dv, p + 8 + 64) };
    for (let h = 0; h < 4; h++) {
      pl.calls.push(u64(dv, p + 8 + 16 * h));
      pl.totalUs.push(u64(dv, p + 16 + 16 * h));
    }
    p += PLUGIN;
    if (end - p < n) fail('EBADSECTION', p);
    pl.name = utf8.decode(bytes.subarray(p, p + n));
    p += n;
    b.plugins.push(pl);
  }
  for (let i = 0; i < ns; i++) {
    if (end - p < SLOW) fail('EBADSECTION', p);
    const hook = dv.getUint8(p), plugin = dv.getUint16(p + 2, true);
    const n = dv.getUint16(p + 4, true);
    if (dv.getUint8(p + 1) || dv.getUint16(p + 6, true) || hook >= 4 || plugin >= np ||
        n > MODULE_MAX) fail('EBADVALUE', p);
    const sl = { hook, plugin, durUs: u64(dv, p + 8) };
    p += SLOW;
    if (end - p < n) fail('EBADSECTION', p);
    sl.module = utf8.decode(bytes.subarray(p, p + n));
    p += n;
    b.slow.push(sl);
  }
  if (p !== end) fail('EBADSECTION', p);
  return b;
}
