// rolldown_check.mjs PKG_DIR SESSION_DIR [REQUIRE_ALL]
// Parses a spyglass JSON-lines session with @rolldown/debug's own parser
// (parseToEvents) and checks every event against the action type the
// package declares in dist/generated/*.d.ts: every declared field present,
// of the declared type (recursively through nested types, string-literal
// unions included); StringRef lines before the "$ref:<id>" that uses them.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkgDir, sessionDir, requireAll] = process.argv.slice(2);
const { parseToEvents } = await import(pathToFileURL(path.join(pkgDir, 'dist/index.js')));

// ---- the declared types ------------------------------------------------------
const types = {};
const genDir = path.join(pkgDir, 'dist/generated');
for (const f of fs.readdirSync(genDir).filter((f) => f.endsWith('.d.ts'))) {
  const src = fs.readFileSync(path.join(genDir, f), 'utf8').replace(/\/\*\*[\s\S]*?\*\//g, '');
  for (const m of src.matchAll(/export type (\w+) = \{([\s\S]*?)\n\};/g)) {
    const fields = {};
    for (const line of m[2].split('\n')) {
      const fm = line.match(/^\s+(\w+): (.+);$/);
      if (fm) fields[fm[1]] = fm[2];
    }
    types[m[1]] = fields;
  }
  const u = src.match(/export type Meta = ([^;]+);/);
  if (u) types.__meta = u[1].split('|').map((s) => s.trim());
}
if (!types.__meta || types.__meta.length !== 15) throw new Error('no Meta union in the package');

function splitUnion(t) {
  const out = [];
  let depth = 0, cur = '';
  for (const ch of t) {
    if (ch === '<') depth++;
    if (ch === '>') depth--;
    if (ch === '|' && depth === 0) { out.push(cur.trim()); cur = ''; } else cur += ch;
  }
  out.push(cur.trim());
  return out;
}

function check(v, t, where) {
  const alts = splitUnion(t);
  const errs = [];
  for (const a of alts) {
    if (a === 'null') { if (v === null) return; errs.push('not null'); continue; }
    if (a === 'string' || a === 'number' || a === 'boolean') {
      if (typeof v === a) return; errs.push(`not ${a}`); continue;
    }
    if (a.startsWith("'")) { if (v === a.slice(1, -1)) return; errs.push(`not ${a}`); continue; }
    const arr = a.match(/^Array<(.+)>$/);
    if (arr) {
      if (!Array.isArray(v)) { errs.push('not an array'); continue; }
      v.forEach((x, i) => check(x, arr[1], `${where}[${i}]`));
      return;
    }
    if (types[a]) {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) { errs.push(`not ${a}`); continue; }
      checkObject(v, a, where);
      return;
    }
    throw new Error(`${where}: unknown type ${a}`);
  }
  throw new Error(`${where}: ${JSON.stringify(v)?.slice(0, 80)} is ${errs.join(', ')} (${t})`);
}

function checkObject(o, typeName, where) {
  for (const [k, t] of Object.entries(types[typeName])) {
    if (!(k in o)) throw new Error(`${where}: ${typeName} lacks field ${k}`);
    if (k === 'action') { check(o[k], t, `${where}.${k}`); continue; }
    check(o[k], t, `${where}.${k}`);
  }
}

// ---- the session ------------------------------------------------------------------
const seen = {};
const refs = new Set();
let n = 0;
for (const file of ['meta.json', 'logs.json']) {
  const p = path.join(sessionDir, file);
  if (!fs.existsSync(p)) throw new Error(`${p} missing`);
  const events = parseToEvents(fs.readFileSync(p, 'utf8').trim());
  events.forEach((e, i) => {
    const where = `${file}:${i + 1}`;
    n++;
    if (e.action === 'StringRef') {
      if (typeof e.id !== 'string' || typeof e.content !== 'string') throw new Error(`${where}: bad StringRef`);
      refs.add(e.id);
      return;
    }
    if (typeof e.timestamp !== 'string' || !/^\d+$/.test(e.timestamp)) throw new Error(`${where}: timestamp`);
    if (typeof e.session_id !== 'string') throw new Error(`${where}: session_id`);
    if (!types.__meta.includes(e.action)) throw new Error(`${where}: unknown action ${e.action}`);
    if (file === 'meta.json' && e.action !== 'SessionMeta') throw new Error(`${where}: ${e.action} in meta.json`);
    checkObject(e, e.action, `${where} ${e.action}`);
    const walk = (v) => {
      if (typeof v === 'string' && v.startsWith('$ref:') && !refs.has(v.slice(5)))
        throw new Error(`${where}: ${v} used before its StringRef`);
      if (v && typeof v === 'object') Object.values(v).forEach(walk);
    };
    walk(e);
    seen[e.action] = (seen[e.action] || 0) + 1;
  });
}
if (requireAll === 'all') {
  const missing = types.__meta.filter((a) => !seen[a]);
  if (missing.length) throw new Error(`kinds never seen: ${missing.join(', ')}`);
}
console.log(`rolldown_check: ${n} events valid (${Object.keys(seen).length} kinds, ${refs.size} StringRefs)`);
