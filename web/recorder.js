// recorder.js — the flight recorder's controls: freeze the view (never
// the program), scrub the last frames with the slider, step ◀ ▶ one frame
// at a time, LIVE / Esc returns. While parked, every panel renders the
// state as of the chosen frame (model.at), rebuilt from the nearest
// registry checkpoint plus the deltas after it. While parked the recorder
// holds still (model.hold): the frame looked at cannot scroll away.
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
      this.model.hold(true);
      this.frame = Number(this.scrub.value);
      this.onChange();
    });
  }

  freeze() {
    if (!this.model.len) return;
    this.parked = true;
    this.model.hold(true);
    this.frame = this.model.newestFrame();
    this.onChange();
  }

  live() {
    this.parked = false;
    this.model.hold(false);
    this.onChange();
  }

  // Jump to a frame (from a log row).
  jump(frame) {
    if (!this.model.len) return;
    this.parked = true;
    this.model.hold(true);
    this.frame = Math.max(this.model.oldestFrame(), Math.min(frame, this.model.newestFrame()));
    this.onChange();
  }

  step(d) {
    if (!this.parked) this.freeze();
    const f = this.frame + d;
    if (f < this.model.oldestFrame() || f > this.model.newestFrame()) return;
    this.frame = f;
    this.onChange();
  }

  // The frame every panel shows now.
  current() { return this.parked ? this.frame : this.model.newestFrame(); }

  render() {
    const m = this.model;
    const lo = m.oldestFrame(), hi = m.newestFrame();
    this.scrub.min = String(Math.max(lo, 0));
    this.scrub.max = String(Math.max(hi, 0));
    if (this.parked && this.frame < lo) this.frame = lo; // fell out of the ring
    this.scrub.value = String(this.current());
    $('#recorder').classList.toggle('parked', this.parked);
    $('#live').classList.toggle('on', !this.parked);
    $('#freeze').textContent = this.parked ? '▶ resume' : '❚❚ freeze';
    const label = $('#rec-label');
    label.dataset.frame = String(this.current());
    label.textContent = m.len
      ? `${this.parked ? 'PARKED at' : 'live'} frame ${this.current()}${this.parked ? ` (${this.current() - hi})` : ''} · ring ${m.len}/${m.capacity} frames`
      : 'no frames yet';
    if (this.parked) label.textContent += ' · recording held';
  }
}
