// build.js — the dashboard's live build view: a traced build's progress
// as the provider's build feed publishes it (BUILD sections, TRACE
// feature): the current build and how far it is (modules done, hook
// calls, time in hooks), per plugin its calls, time, median and slowest
// call with a bar of its share, the slowest hook calls so far, and the
// builds that ended. Hidden until a provider publishes builds.
import { $, el, num } from './dom.js';
import { BUILD_HOOKS } from './wire_trace.js';

const ms = (us) => `${(us / 1000).toFixed(1)} ms`;
const sum = (a) => a.reduce((x, y) => x + y, 0);

export class Build {
  constructor() { this.cur = null; this.done = []; this.sections = 0; this.drawn = -1; }

  reset() { this.cur = null; this.done = []; this.sections = 0; this.drawn = -1; }

  // d.build from wire.decodeAll, or nothing
  apply(b) {
    if (!b) return;
    const prev = this.cur;
    if (prev && prev.build !== b.build && !prev.ended) this.remember(prev);
    if (b.ended && !(prev && prev.build === b.build && prev.ended)) this.remember(b);
    this.cur = b;
    this.sections++;
  }

  remember(b) {
    if (this.done.length && this.done[this.done.length - 1].build === b.build) this.done.pop();
    this.done.push({ build: b.build, modules: b.modulesDone, hookCalls: b.hookCalls,
      ms: b.endedUs > b.startedUs ? (b.endedUs - b.startedUs) / 1000 : null });
    if (this.done.length > 16) this.done.shift();
  }

  render() {
    const panel = $('#build');
    if (!panel) return;
    panel.hidden = !this.cur;
    if (!this.cur || this.drawn === this.sections) return;
    this.drawn = this.sections;
    const b = this.cur;
    const total = b.modulesTotal ? `/${b.modulesTotal}` : '';
    $('#build-head').textContent =
      `build ${b.build} ${b.ended ? 'done' : 'running'}: ${b.modulesDone}${total} modules, ` +
      `${b.hookCalls} hook calls, ${ms(b.hookUs)} in hooks` +
      (b.ended && b.endedUs > b.startedUs && !b.partial ? `, ${ms(b.endedUs - b.startedUs)} wall` : '') +
      // Nobody watched its start: counts from startedUs on (trace_feed.h).
      (b.partial ? ` (joined late: counted since ${new Date(b.startedUs / 1000).toLocaleTimeString()})` : '');
    const pct = b.modulesTotal ? Math.min(100, (100 * b.modulesDone) / b.modulesTotal) : null;
    const bar = $('#build-bar');
    bar.style.width = `${b.ended ? 100 : pct ?? 0}%`;
    bar.classList.toggle('done', b.ended);
    const most = Math.max(1, ...b.plugins.map((p) => sum(p.totalUs)));
    const head = el('tr', {}, ...['plugin', 'calls', 'time', 'p50', 'max', 'share']
      .map((t) => el('th', { text: t })));
    const body = b.plugins.map((p) => {
      const t = sum(p.totalUs);
      const hooks = BUILD_HOOKS.filter((_, h) => p.calls[h]).join(' ');
      const share = el('span', { class: 'hookbar' });
      share.style.width = `${Math.round((100 * t) / most)}%`;
      return el('tr', { 'data-plugin': p.name },
        el('td', { text: p.name, title: hooks }),
        ...[num(sum(p.calls)), ms(t), `${p.p50Us} µs`, ms(p.maxUs)]
          .map((x) => el('td', { text: String(x) })),
        el('td', { class: 'sharecell' }, share));
    });
    $('#build-plugins').replaceChildren(head, ...body);
    const shead = el('tr', {}, ...['time', 'hook', 'plugin', 'module'].map((t) => el('th', { text: t })));
    const srows = b.slow.map((s) => el('tr', {}, ...[ms(s.durUs), BUILD_HOOKS[s.hook],
      b.plugins[s.plugin]?.name ?? '?', s.module].map((x) => el('td', { text: String(x) }))));
    $('#build-slow').replaceChildren(shead, ...srows);
    $('#build-done').textContent = this.done.length
      ? 'builds done: ' + this.done.slice(-6).map((d) =>
        `#${d.build} ${d.modules} modules, ${d.hookCalls} calls${d.ms !== null ? `, ${d.ms.toFixed(0)} ms` : ''}`).join(' · ')
      : '';
  }
}
