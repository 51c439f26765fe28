// recorder.js — the flight recorder's controls: freeze the view (never
// the program), scrub the last frames with the slider, step ◀ ▶ one frame
// at a time, LIVE / Esc returns. While parked, every panel renders the
// state as of the chosen frame (model.at), rebuilt from the nearest
// registry checkpoint plus the deltas after it. The recorder keeps
// recording while parked; the parked frame is pinned (app.js, model.pin),
// so when it scrolls out of the ring the panels still show it, marked
// "scrolled out", and ▶ goes on from the oldest frame still held.
import { $ } from './dom.js';

export class Recorder {
  constructor(model, onChange) {
    this.model = model;
    this.parked = false;
    this.frame = -1;
    this.onChange = onChange;
    this.scrub = $('#scrub');
    $('#freeze').addEventListener('click', () => (this.parked ? this.live() : this.freeze()));
    $('#back').addEventListener('click', () => this.step(-1));
    $('#fwd').addEventListener('click', () => this.step(1));
    $('#live').addEventListener('click', () => this.live());
    this.scrub.addEventListener('input', () => {
      this.parked = true;
      this.frame = Number(this.scrub.value);
      this.onChange();
    });
  }

  freeze() {
    if (!this.model.len) return;
    this.parked = true;
    this.frame = this.model.newestFrame();
    this.onChange();
  }

  live() {
    this.parked = false;
    this.onChange();
  }

  // Jump to a frame (from a log row).
  jump(frame) {
    if (!this.model.len) return;
    this.parked = true;
    this.frame = Math.max(this.model.oldestFrame(), Math.min(frame, this.model.newestFrame()));
    this.onChange();
  }

  step(d) {
    if (!this.parked) this.freeze();
    const lo = this.model.oldestFrame();
    let f = this.frame + d;
    if (d < 0 && this.frame < lo) return; // scrolled out: nothing older
    if (f < lo) f = lo;
    if (f > this.model.newestFrame()) return;
    this.frame = f;
    this.onChange();
  }

  // The frame every panel shows now.
  current() { return this.parked ? this.frame : this.model.newestFrame(); }
  // Parked on a frame the ring no longer holds (shown from its pin).
  scrolledOut() { return this.parked && this.model.len > 0 && this.frame < this.model.oldestFrame(); }

  render() {
    const m = this.model;
    const lo = m.oldestFrame(), hi = m.newestFrame();
    this.scrub.min = String(Math.max(lo, 0));
    this.scrub.max = String(Math.max(hi, 0));
    this.scrub.value = String(this.current());
    $('#recorder').classList.toggle('parked', this.parked);
    $('#live').classList.toggle('on', !this.parked);
    $('#freeze').textContent = this.parked ? '▶ resume' : '❚❚ freeze';
    const label = $('#rec-label');
    label.dataset.frame = String(this.current());
    label.textContent = m.len
      ? `${this.parked ? 'PARKED at' : 'live'} frame ${this.current()}${this.parked ? ` (${this.current() - hi})` : ''} · ring ${m.len}/${m.capacity} frames`
      : 'no frames yet';
    if (this.scrolledOut()) label.textContent += ' · scrolled out of the ring (pinned)';
    label.dataset.out = this.scrolledOut() ? '1' : '';
  }
}
