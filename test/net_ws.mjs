// net_ws.mjs WS_MODULE_DIR URL MODE — WebSocket checks of `spyglass serve`
// with a client no one here wrote (the `ws` npm package) and raw sockets
// for what a polite client never sends. MODE: "edges" (link over
// WebSocket against a running demo, fragmented message, ping/pong, close
// codes, oversized, garbage, text, unmasked), "flood N" (N connections at
// once beyond --max-clients), "tls CA" (wss with the test's certificate).
// Prints one line per check; exits 1 on the first failure.
import { createRequire } from 'node:module';
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';

const [modDir, url, mode, arg] = process.argv.slice(2);
const WebSocket = createRequire(import.meta.url)(path.resolve(modDir));

function fail(msg) {
  console.error('net_ws: FAIL: ' + msg);
  process.exit(1);
}
function ok(msg) {
  console.log('net_ws: ok: ' + msg);
}
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error('timeout: ' + what)), ms))]);

// ---- link records (docs/wire.md, Links) ----
function rec(op, chan, payload) {
  const b = Buffer.alloc(8 + payload.length);
  b.writeUInt32LE(payload.length, 0);
  b[4] = op;
  b[5] = 0;
  b.writeUInt16LE(chan, 6);
  payload.copy(b, 8);
  return b;
}
function hello(token) {
  const t = Buffer.from(token || '');
  const p = Buffer.alloc(12 + t.length);
  p.writeUInt32LE(0x4c595053, 0);
  p.writeUInt32LE(1, 4);
  p.writeUInt16LE(t.length, 8);
  t.copy(p, 12);
  return rec(1, 0, p);
}
function queryFrame() {
  // header 16 + FRAME section (8 + 8) + PEER section (8 + 16) = 56
  const f = Buffer.alloc(56);
  f.writeUInt32LE(56, 0);
  f.writeUInt32LE(8, 4); // provider:query
  f.writeUInt32LE(Date.now() % 2 ** 32, 8);
  f.writeUInt32LE(0, 16); // FRAME
  f.writeUInt32LE(8, 20);
  f.writeUInt16LE(1, 24); // version; flags 0, seq 0
  f.writeUInt32LE(8, 32); // PEER
  f.writeUInt32LE(16, 36);
  f.writeBigUInt64LE(12345n, 40);
  return f;
}
function frameRec(chan, frame) {
  return rec(6, chan, Buffer.concat([Buffer.alloc(8), frame]));
}
function parseRec(buf) {
  return { len: buf.readUInt32LE(0), op: buf[4], chan: buf.readUInt16LE(6), payload: buf.subarray(8) };
}

function open(opts = {}) {
  return new Promise((res, rej) => {
    const ws = new WebSocket(url, opts);
    ws.binaryType = 'nodebuffer';
    ws.once('open', () => res(ws));
    ws.once('unexpected-response', (_, r) => rej(new Error('HTTP ' + r.statusCode)));
    ws.once('error', rej);
  });
}
function nextMsg(ws, pred = () => true) {
  return new Promise((res) => {
    const on = (d) => {
      const r = parseRec(d);
      if (pred(r)) {
        ws.off('message', on);
        res(r);
      }
    };
    ws.on('message', on);
  });
}
function closed(ws) {
  return new Promise((res) => ws.once('close', (code, reason) => res({ code, reason: String(reason) })));
}

async function edges() {
  // A link over WebSocket: HELLO, WELCOME, open discovery, query, announce.
  let ws = await open();
  const welcome = nextMsg(ws);
  // Fragmented: HELLO in two frames of one message.
  const h = hello();
  ws.send(h.subarray(0, 5), { fin: false, binary: true });
  ws.send(h.subarray(5), { fin: true, binary: true });
  const w = await withTimeout(welcome, 5000, 'WELCOME');
  if (w.op !== 2) fail('expected WELCOME, got op ' + w.op);
  ok('fragmented HELLO answered by WELCOME');
  const opened = nextMsg(ws, (r) => r.op === 4);
  ws.send(rec(3, 1, Buffer.from('spyglass')));
  await withTimeout(opened, 5000, 'OPENED');
  const announce = nextMsg(ws, (r) => r.op === 6 && r.payload.readUInt32LE(8 + 4) === 7);
  ws.send(frameRec(1, queryFrame()));
  const a = await withTimeout(announce, 5000, 'an announce');
  const f = a.payload.subarray(8);
  if (f.readUInt32LE(0) !== f.length) fail('frame not whole');
  ok('provider:announce relayed over WebSocket (' + f.length + ' bytes)');
  // Ping / pong.
  const pong = new Promise((res) => ws.once('pong', (d) => res(String(d))));
  ws.ping('hi');
  if ((await withTimeout(pong, 5000, 'pong')) !== 'hi') fail('pong payload');
  ok('ping answered with its payload');
  // Normal close: the server echoes the code.
  let c = closed(ws);
  ws.close(1000, 'bye');
  let r = await withTimeout(c, 5000, 'close');
  if (r.code !== 1000) fail('close code ' + r.code);
  ok('close 1000 echoed');

  // Oversized message (over the 64 KiB client bound): 1009.
  ws = await open();
  c = closed(ws);
  ws.send(Buffer.alloc(70000));
  r = await withTimeout(c, 5000, 'close after oversize');
  if (r.code !== 1009) fail('oversized: close code ' + r.code);
  ok('oversized message: 1009');
  // Garbage binary: not a link record, 1002.
  ws = await open();
  c = closed(ws);
  ws.send(Buffer.from('this is not a link record at all'));
  r = await withTimeout(c, 5000, 'close after garbage');
  if (r.code !== 1002) fail('garbage: close code ' + r.code);
  ok('garbage record: 1002');
  // Text: 1003.
  ws = await open();
  c = closed(ws);
  ws.send('hello');
  r = await withTimeout(c, 5000, 'close after text');
  if (r.code !== 1003) fail('text: close code ' + r.code);
  ok('text message: 1003');
  // A record other than HELLO first: an ERROR record, then closed.
  ws = await open();
  c = closed(ws);
  const err = nextMsg(ws);
  ws.send(rec(3, 1, Buffer.from('spyglass')));
  const e = await withTimeout(err, 5000, 'ERROR');
  if (e.op !== 8) fail('expected ERROR, got op ' + e.op);
  await withTimeout(c, 5000, 'close after ERROR');
  ok('OPEN before HELLO: ERROR and closed');
  // Unmasked client frame (raw socket): refused, connection closed.
  await unmasked();
  ok('unmasked client frame: refused');
}

function unmasked() {
  const u = new URL(url);
  return withTimeout(
    new Promise((res) => {
      const s = net.connect(+u.port, u.hostname, () => {
        s.write(
          `GET /link HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'
        );
      });
      let buf = Buffer.alloc(0), sent = false;
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        const i = buf.indexOf('\r\n\r\n');
        if (!sent && i >= 0) {
          if (!buf.toString().startsWith('HTTP/1.1 101')) fail('upgrade refused');
          sent = true;
          buf = buf.subarray(i + 4);
          const h = hello();
          s.write(Buffer.concat([Buffer.from([0x82, h.length]), h])); // no mask bit
        } else if (sent && buf.length >= 4) {
          // A close frame 1002 (or nothing but the close itself).
          if (buf[0] === 0x88 && buf.readUInt16BE(2) !== 1002) fail('unmasked: close code ' + buf.readUInt16BE(2));
          if (buf[0] !== 0x88) fail('unmasked frame was answered with opcode ' + (buf[0] & 15));
        }
      });
      s.on('close', () => res());
      s.on('error', () => res());
    }),
    5000,
    'unmasked close'
  );
}

async function flood(n) {
  const results = await Promise.allSettled(
    Array.from({ length: n }, () => withTimeout(open(), 10000, 'connect'))
  );
  const opened = results.filter((r) => r.status === 'fulfilled').map((r) => r.value);
  const refused = results.filter((r) => r.status === 'rejected');
  const why = new Set(refused.map((r) => String(r.reason.message)));
  console.log(`net_ws: ${opened.length} opened, ${refused.length} refused (${[...why].join(', ')})`);
  if (refused.length === 0) fail('no connection refused beyond the limit');
  if ([...why].some((m) => m.startsWith('timeout'))) fail('a refusal was not clear (timed out)');
  await Promise.all(
    opened.map((ws) => {
      const c = closed(ws);
      ws.close(1000);
      return withTimeout(c, 5000, 'close');
    })
  );
  ok('flood of ' + n + ': refusals clear, all closed');
}

async function tls(ca) {
  const ws = await open({ ca: fs.readFileSync(ca), servername: 'localhost' });
  const welcome = nextMsg(ws);
  ws.send(hello());
  const w = await withTimeout(welcome, 5000, 'WELCOME over TLS');
  if (w.op !== 2) fail('TLS: expected WELCOME');
  ws.close(1000);
  ok('wss: link over TLS with the test certificate');
}

try {
  if (mode === 'edges') await edges();
  else if (mode === 'flood') await flood(+arg);
  else if (mode === 'tls') await tls(arg);
  else fail('unknown mode ' + mode);
  process.exit(0);
} catch (e) {
  fail(e.message);
}
