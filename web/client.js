// client.js — the page's consumer: the JS twin of src/consumer over the
// WebSocket link (docs/wire.md, "Links"). One WebSocket to /link carries
// the discovery channel and one provider's data channel. The protocol is
// the C consumer's: provider:query with backoff, subscribe (features,
// registry filter), subscribe:ack, ack every second, resync on a sequence
// gap or a `lost` count, re-subscribe after 5 s of silence and search again
// if that brings nothing, provider:gone; clock rounds over the link
// (median RTT). The link reconnects by itself (250 ms doubling to 2 s).
//
// Events (on(name, fn)): 'state' (the connection state changed),
// 'providers' (the list changed), 'data' (a decoded data frame, applied by
// the model), 'log' (every message in or out), 'clock', 'fatal' (a refusal
// that retrying will not fix: a wrong token), 'pixels' (a buffer:raw or
// buffer:chunk frame, for the buffer inspector), 'gap' (a sequence gap or
// a `lost` count: a stream waits for its next key frame).
import * as W from './wire.js';

const DISC_CHAN = 1;

function randomHex64() {
  const a = new Uint32Array(2);
  crypto.getRandomValues(a);
  return a[0].toString(16).padStart(8, '0') + a[1].toString(16).padStart(8, '0');
}

export const FEATURES_DEFAULT = W.FEAT(W.SEC.STATS) | W.FEAT(W.SEC.ENV) |
  W.FEAT(W.SEC.REGISTRY) | W.FEAT(W.SEC.HEALTH) | W.FEAT(W.SEC.MSGPROF) |
  W.FEAT(W.SEC.TRACE); // TRACE: live build progress (build.js)

export class Client {
  // opts: {url (ws://…/link), token, want (id or name), features, timings}
  constructor(opts) {
    this.o = {
      queryInitialMs: 500, queryMaxMs: 5000, ackMs: 1000, livenessMs: 5000,
      staleMs: 2000, clockRounds: 5, features: FEATURES_DEFAULT, ...opts,
    };
    this.id = randomHex64();
    this.handlers = {};
    this.providers = new Map(); // id → {info, seenMs, round}
    this.want = opts.want || null;
    this.registryFilter = null; // null: everything; array: these names
    this.buffers = []; // the subscription's buffer requests (web/buffers.js)
    this.conn = 'connecting';
    this.linkUp = false;
    this.provider = null; // info of the chosen one
    this.dataChan = 0;
    this.nextChan = 2;
    this.haveSeq = false;
    this.lastSeq = 0;
    this.bytesIn = 0; this.bytesOut = 0;
    this.rate = { inPerS: 0, outPerS: 0, framesPerS: 0 };
    this.meter = { t: performance.now(), bin: 0, bout: 0, frames: 0 };
    this.stats = { frames: 0, lost: 0, resyncs: 0, subscribes: 0,
      malformed: 0, reconnects: 0, dropped: 0 };
    this.clock = null; // {offsetNs, rttNs, rounds, at}
    this.clockPending = null;
    this.backoff = 250;
    this.timer = setInterval(() => this.tick(), 100);
    this.open();
  }

  on(name, fn) { (this.handlers[name] ??= []).push(fn); }
  emit(name, ...a) { for (const f of this.handlers[name] ?? []) f(...a); }
  setConn(c) {
    if (this.conn === c) return;
    this.conn = c;
    this.emit('state', c);
  }

  // ---- the link ----------------------------------------------------------
  open() {
    const u = new URL(this.o.url);
    if (this.o.token) u.searchParams.set('token', this.o.token);
    let ws;
    try {
      ws = new WebSocket(u.href);
    } catch (e) {
      this.emit('fatal', `cannot open ${u.href}: ${e.message}`);
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onopen = () => this.sendRaw(W.encodeHello(this.o.token || ''), 'hello');
    ws.onmessage = (ev) => this.onRecord(new Uint8Array(ev.data));
    ws.onclose = (ev) => this.onClose(ev);
    ws.onerror = () => {};
  }

  async onClose(ev) {
    if (this.ws === null) return;
    this.ws = null;
    this.linkUp = false;
    this.dataChan = 0;
    if (this.conn !== 'connecting') this.stats.reconnects++;
    this.setConn(this.fatalText ? 'denied' : 'reconnecting');
    if (this.fatalText) return;
    // A refused upgrade (403) closes before open without a reason the
    // page can read: ask the server why over plain HTTP.
    if (ev.code === 1006 && !this.everOpen) {
      const why = await this.probe();
      if (why) { this.fatal(why); return; }
    }
    const d = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 2000);
    setTimeout(() => this.open(), d);
  }

  async probe() {
    try {
      const u = new URL('/healthz', this.o.url.replace(/^ws/, 'http'));
      if (this.o.token) u.searchParams.set('token', this.o.token);
      const r = await fetch(u.href, { cache: 'no-store' });
      if (r.status === 403) return (await r.text()).trim();
    } catch { /* the server is down: keep retrying */ }
    return null;
  }

  fatal(text) {
    this.fatalText = text;
    this.setConn('denied');
    this.emit('fatal', text);
    if (this.ws) { const ws = this.ws; this.ws = null; ws.close(); }
  }

  sendRaw(rec, what, frame) {
    if (!this.ws || this.ws.readyState !== 1) return false;
    this.ws.send(rec);
    this.bytesOut += rec.length;
    this.meter.bout += rec.length;
    if (frame) this.log('out', frame, rec.length);
    else this.emit('log', { t: Date.now(), dir: 'out', type: what, bytes: rec.length, link: true });
    return true;
  }

  sendFrame(chan, frame) {
    return this.sendRaw(W.encodeLinkFrame(chan, frame), null, frame);
  }

  log(dir, frameBytes, bytes, extra = {}) {
    let type = '?', seq = null, fkey = null;
    try {
      const f = W.decodeFrame(frameBytes);
      type = f.typeName; seq = f.seq;
      const st = W.findSection(f, W.SEC.STATS);
      if (st) {
        const dv = f.dv;
        fkey = dv.getUint32(st.off, true) + dv.getUint32(st.off + 4, true) * 4294967296;
        fkey += dv.getUint32(st.off + 8, true) - 1;
      }
    } catch (e) { type = `malformed (${e.code ?? e.message})`; }
    this.emit('log', { t: Date.now(), dir, type, bytes, seq, frame: fkey,
      raw: frameBytes, ...extra });
  }

  onRecord(b) {
    this.bytesIn += b.length;
    this.meter.bin += b.length;
    let r;
    try { r = W.parseLink(b); } catch (e) {
      this.stats.malformed++;
      return;
    }
    switch (r.op) {
      case W.LINK.WELCOME:
        this.linkUp = true;
        this.everOpen = true;
        this.backoff = 250;
        this.emit('log', { t: Date.now(), dir: 'in', type: 'welcome', bytes: b.length, link: true });
        this.sendRaw(W.encodeOpen(DISC_CHAN, 'spyglass'), 'open spyglass');
        this.providers.clear();
        this.startSearch('waiting');
        this.clockStart();
        break;
      case W.LINK.OPENED:
        if (r.chan === DISC_CHAN) this.query();
        else if (r.chan === this.dataChan) this.subscribe();
        break;
      case W.LINK.CLOSE:
        if (r.chan === this.dataChan && this.conn !== 'waiting') this.lose();
        break;
      case W.LINK.ERROR:
        this.emit('log', { t: Date.now(), dir: 'in', type: `error: ${r.text}`, bytes: b.length, link: true });
        if (r.code === -13 /* EACCES */) this.fatal(`refused by the server: ${r.text}`);
        break;
      case W.LINK.CLOCK:
        this.clockReply(r);
        break;
      case W.LINK.FRAME:
        this.log('in', r.frame, b.length, { chan: r.chan, lost: r.lost });
        if (r.chan === DISC_CHAN) this.onDiscovery(r.frame);
        else if (r.chan === this.dataChan) this.onData(r.frame, r.lost);
        break;
      default: break;
    }
  }

  // ---- discovery ---------------------------------------------------------
  startSearch(state) {
    this.setConn(state);
    this.queries = 0;
    this.queryDelay = this.o.queryInitialMs;
    this.nextQuery = 0;
  }

  query() {
    this.round = (this.round ?? 0) + 1;
    this.sendFrame(DISC_CHAN, W.encodePeerMsg(W.MSG.PROVIDER_QUERY, this.id));
  }

  onDiscovery(bytes) {
    let f, info;
    try {
      f = W.decodeFrame(bytes);
      if (f.type !== W.MSG.PROVIDER_ANNOUNCE && f.type !== W.MSG.PROVIDER_GONE) return;
      const s = W.findSection(f, W.SEC.PROVIDER);
      if (!s) return;
      info = W.decodeProvider(f, s);
    } catch { this.stats.malformed++; return; }
    if (f.type === W.MSG.PROVIDER_GONE) {
      this.providers.delete(info.id);
      this.emit('providers', this.providerList());
      if (this.provider && info.id === this.provider.id) this.lose();
      return;
    }
    const had = this.providers.has(info.id);
    this.providers.set(info.id, { info, seenMs: performance.now(), round: this.round });
    if (!had) this.emit('providers', this.providerList());
    if (this.conn === 'waiting' || this.conn === 'gone') this.choose();
  }

  // Every live provider: user before system, then by start time.
  providerList() {
    return [...this.providers.values()].map((p) => p.info)
      .sort((a, b) => a.kind - b.kind || a.startMs - b.startMs || (a.id < b.id ? -1 : 1));
  }

  matches(info) {
    return !this.want || info.id === this.want || info.name === this.want;
  }

  choose() {
    const list = this.providerList().filter((p) => this.matches(p));
    if (list.length) this.subscribeTo(list[0]);
  }

  // Switch to another provider without reloading (the picker).
  select(id) {
    this.want = id;
    const p = this.providers.get(id);
    if (p && (!this.provider || this.provider.id !== id)) this.subscribeTo(p.info);
  }

  subscribeTo(info) {
    if (this.dataChan) {
      this.sendFrame(this.dataChan, W.encodePeerMsg(W.MSG.UNSUBSCRIBE, this.id));
      this.sendRaw(W.encodeLink(W.LINK.CLOSE, this.dataChan, new Uint8Array(4)), 'close');
    }
    const changed = !this.provider || this.provider.id !== info.id;
    this.provider = info;
    this.dataChan = this.nextChan;
    this.nextChan = this.nextChan >= 63 ? 2 : this.nextChan + 1;
    this.haveSeq = false;
    this.setConn('subscribing');
    const now = performance.now();
    this.subSent = this.lastAck = this.resubscribed = this.lastMsg = now;
    this.resubAttempts = 0;
    this.emit('provider', info, changed);
    this.sendRaw(W.encodeOpen(this.dataChan, `spyglass:${info.id}`), 'open');
  }

  subscribe() {
    this.stats.subscribes++;
    this.subSent = performance.now();
    this.sendFrame(this.dataChan, W.encodeSubscribe({
      consumer: this.id, features: this.o.features,
      registry: this.registryFilter, buffers: this.buffers,
    }));
  }

  // The buffer requests from the inspector: [{name, mode, display,
  // longEdge}] (wire.js encodeSubscribe); sent at once when live.
  setBuffers(list) {
    this.buffers = list;
    if (this.dataChan && this.linkUp) this.subscribe();
  }

  // The registry filter from the UI: null = every value; a list = these.
  setRegistryFilter(names) {
    this.registryFilter = names;
    if (this.dataChan && this.linkUp) this.subscribe();
  }

  resync() {
    if (!this.dataChan) return;
    this.stats.resyncs++;
    this.sendFrame(this.dataChan, W.encodePeerMsg(W.MSG.RESYNC, this.id));
  }

  lose() {
    if (this.dataChan) {
      this.sendRaw(W.encodeLink(W.LINK.CLOSE, this.dataChan, new Uint8Array(4)), 'close');
    }
    this.dataChan = 0;
    if (this.provider) {
      this.providers.delete(this.provider.id);
      if (this.want === this.provider.id) this.want = null; // the next one
    }
    this.emit('providers', this.providerList());
    this.startSearch('gone');
    // Someone else may be there already: choose at once, query anyway.
    this.choose();
  }

  // ---- data --------------------------------------------------------------
  onData(bytes, lost) {
    let f;
    try { f = W.decodeFrame(bytes); } catch { this.stats.malformed++; return; }
    const fromProvider = f.type === W.MSG.DATA || f.type === W.MSG.PING ||
      f.type === W.MSG.SUBSCRIBE_ACK || f.type === W.MSG.BUFFER_RAW ||
      f.type === W.MSG.BUFFER_CHUNK || f.type === W.MSG.CLOCK;
    if (!fromProvider) return;
    if (f.type === W.MSG.CLOCK) {
      // Only the provider's READY carries its sequence; a consumer's
      // request or result on the channel is not ours to count.
      try {
        const c = W.decodeClock(f, W.findSection(f, W.SEC.CLOCK));
        if (c.op !== 2) return;
      } catch { return; }
    }
    const now = performance.now();
    this.lastMsg = now;
    this.stats.frames++;
    this.meter.frames++;
    const gap = lost > 0 || (this.haveSeq && f.seq !== ((this.lastSeq + 1) >>> 0));
    if (gap && (this.conn === 'live' || this.conn === 'stale')) {
      this.stats.lost += lost || 1;
      this.resync();
      this.emit('gap');
    }
    this.lastSeq = f.seq;
    this.haveSeq = true;
    if (f.type === W.MSG.SUBSCRIBE_ACK) {
      try {
        const p = W.decodePeer(f, W.findSection(f, W.SEC.PEER));
        if (p.id === this.id && this.conn === 'subscribing') this.setConn('live');
      } catch { this.stats.malformed++; }
      return;
    }
    if (f.type === W.MSG.PING && (this.conn === 'live' || this.conn === 'stale') &&
        W.findSection(f, W.SEC.PEER)) {
      // A ping naming us: the provider no longer has us as a subscriber
      // (it judged us dead while others kept the channel busy): subscribe
      // again, as the C consumer does (docs/wire.md, message types).
      try {
        if (W.decodePeer(f, W.findSection(f, W.SEC.PEER)).id === this.id) {
          this.stats.dropped++;
          this.setConn('subscribing');
          this.subscribe();
          return;
        }
      } catch { this.stats.malformed++; }
    }
    if (this.conn === 'stale') this.setConn('live');
    if (f.type === W.MSG.DATA) {
      let d;
      try { d = W.decodeAll(f); } catch { this.stats.malformed++; return; }
      this.emit('data', f, d, now);
    } else if (f.type === W.MSG.BUFFER_RAW || f.type === W.MSG.BUFFER_CHUNK) {
      this.emit('pixels', f, now);
    }
  }

  // ---- clock over the link -----------------------------------------------
  clockStart() {
    this.clockPending = { rounds: [], left: this.o.clockRounds };
    this.clockSend();
  }
  clockSend() {
    const t0 = Math.round(performance.now() * 1e6);
    this.sendRaw(W.encodeClockReq(t0), 'clock');
  }
  clockReply(r) {
    const p = this.clockPending;
    if (!p) return;
    const t3 = performance.now() * 1e6;
    const [t0, t1, t2] = r.t;
    p.rounds.push({ rtt: (t3 - t0) - (t2 - t1), offset: ((t1 - t0) + (t2 - t3)) / 2 });
    if (--p.left > 0) { this.clockSend(); return; }
    const s = p.rounds.slice().sort((a, b) => a.rtt - b.rtt);
    const m = s[Math.floor(s.length / 2)];
    this.clock = { offsetNs: m.offset, rttNs: m.rtt, rounds: s.length, at: Date.now() };
    this.clockPending = null;
    this.emit('clock', this.clock);
  }

  // ---- timers (the C consumer's timers()) ---------------------------------
  tick() {
    const now = performance.now();
    if (now - this.meter.t >= 1000) {
      const dt = (now - this.meter.t) / 1000;
      this.rate = { inPerS: this.meter.bin / dt, outPerS: this.meter.bout / dt,
        framesPerS: this.meter.frames / dt };
      this.meter = { t: now, bin: 0, bout: 0, frames: 0 };
    }
    if (!this.linkUp) return;
    // Discovery: backoff while searching, then every 5 s for the picker.
    if (now >= (this.nextQuery ?? 0)) {
      this.query();
      const searching = this.conn === 'waiting' || this.conn === 'gone';
      this.nextQuery = now + (searching ? this.queryDelay : this.o.queryMaxMs);
      this.queryDelay = Math.min(this.queryDelay * 2, this.o.queryMaxMs);
      // A provider that missed two rounds of queries is gone.
      for (const [id, p] of this.providers) {
        if (this.round - p.round > 2 && (!this.provider || id !== this.provider.id)) {
          this.providers.delete(id);
          this.emit('providers', this.providerList());
        }
      }
    }
    if (!this.dataChan) return;
    if (now - this.lastAck >= this.o.ackMs) {
      this.sendFrame(this.dataChan, W.encodePeerMsg(W.MSG.ACK, this.id, this.o.features));
      this.lastAck = now;
    }
    if (this.conn === 'subscribing' && now - this.subSent >= this.o.ackMs) this.subscribe();
    const silent = now - this.lastMsg;
    if (this.conn === 'live' && silent >= this.o.staleMs) this.setConn('stale');
    if (silent >= this.o.livenessMs && now - this.resubscribed >= this.o.livenessMs) {
      if (this.resubAttempts >= 1) { this.lose(); return; }
      this.resubAttempts++;
      this.resubscribed = now;
      this.setConn('subscribing');
      this.subscribe();
    } else if (silent < this.o.livenessMs) {
      this.resubAttempts = 0;
    }
  }
}
