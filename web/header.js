// header.js — the header: provider picker (switches without reload), the
// connection state, bytes in / out per second, the environment popover.
import { $, el, bytes, value } from './dom.js';

const STATE_TEXT = {
  connecting: 'connecting', waiting: 'waiting for a provider',
  subscribing: 'subscribing', live: 'live', stale: 'stale', gone: 'gone',
  reconnecting: 'reconnecting', denied: 'refused',
};

export class Header {
  constructor(client) {
    this.client = client;
    this.picker = $('#picker');
    this.picker.addEventListener('change', () => {
      if (this.picker.value) client.select(this.picker.value);
    });
    this.pop = $('#env-pop');
    $('#env-btn').addEventListener('click', (e) => {
      e.stopPropagation();
      this.pop.hidden = !this.pop.hidden;
    });
    document.addEventListener('click', (e) => {
      if (!this.pop.contains(e.target)) this.pop.hidden = true;
    });
    client.on('providers', (list) => this.providers(list));
    client.on('provider', () => this.providers(client.providerList()));
  }

  providers(list) {
    const cur = this.client.provider?.id ?? '';
    const opts = list.map((p) => el('option', {
      value: p.id, text: `${p.name} · pid ${p.pid}${p.kind ? ' · system' : ''}`,
    }));
    if (!list.length) opts.push(el('option', { value: '', text: 'no provider' }));
    this.picker.replaceChildren(...opts);
    this.picker.value = list.some((p) => p.id === cur) ? cur : '';
  }

  render(v) {
    const c = this.client;
    const conn = $('#conn');
    conn.textContent = STATE_TEXT[c.conn] ?? c.conn;
    conn.className = `badge ${c.conn}`;
    conn.dataset.state = c.conn;
    $('#rates').textContent = `in ${bytes(c.rate.inPerS)}/s · out ${bytes(c.rate.outPerS)}/s`;
    const p = c.provider;
    $('#provider-info').textContent = p ? `${p.name} ${p.id} pid ${p.pid}` : '';
    if (!this.pop.hidden) {
      const keys = [...v.env.keys()].sort();
      $('#env-table').replaceChildren(...keys.map((k) => {
        const e = v.env.get(k);
        return el('tr', {}, el('td', { text: k }), el('td', { text: value(e.kind, e.value) }));
      }));
    }
  }
}
