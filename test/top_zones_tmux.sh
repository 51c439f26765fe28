#!/usr/bin/env bash
# top_zones_tmux.sh TOOL — `spyglass top`'s zones view as a user sees it:
# top runs in a real terminal (a private tmux server) on a
# `spyglass demo --headless`, the test presses z and reads the screen
# back (tmux capture-pane) until the table shows the demo's locations of
# both threads (frame: update, scene, particles, substep, draw list,
# submit; device: render, rows) with calls > 0, and the threads line names both threads.
set -euo pipefail
tool=$1
fail() { echo "top_zones_tmux: FAIL: $*" >&2; exit 1; }
command -v tmux >/dev/null || fail "tmux is not installed (scripts/deps.sh test)"
work=$(mktemp -d /tmp/spy-topz-XXXXXX)
chmod 700 "$work"
export SPYGLASS_DIR=$work/bus
mkdir -m 700 "$SPYGLASS_DIR"
. "$(dirname "$0")/tmux_lib.sh"
demo_pid=
cleanup() {
  tmux_stop
  [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$tool" demo --headless --seconds 120 --dir "$SPYGLASS_DIR" \
  >"$work/demo.log" 2>&1 &
demo_pid=$!
tmux_pid=$demo_pid # the demo exiting fails a wait
tmux_logs=("$work/top.err" "$work/demo.log")

tmux_start topz \
  "SPYGLASS_DIR='$SPYGLASS_DIR' TERM=xterm-256color '$tool' top --dir '$SPYGLASS_DIR' 2>'$work/top.err'; sleep 30"

echo "== top shows the demo"
wait_screen 60 'FPS|fps'
echo "== z: the zones view"
tmux_keys z
# A row: name, calls (> 0: no leading zero), total, self, max.
row() { printf '^ %s +[1-9][0-9]* +[0-9.]+ +[0-9.]+ +[0-9.]+' "$1"; }
wait_screen 60 ' zones, last second' 'location +calls' \
  "$(row update)" "$(row scene)" "$(row substep)" "$(row 'draw list')" \
  "$(row particles)" "$(row submit)" "$(row render)" "$(row rows)" 'threads:.*frame\([0-9]+\)' \
  'threads:.*device\([0-9]+\)'
screen | sed -n '/ zones, last second/,$p'
echo "== z again: back to the overlay"
tmux_keys z
deadline=$((SECONDS + 30))
while screen | grep -q ' zones, last second'; do
  [ $SECONDS -lt $deadline ] || fail "z did not close the zones view"
  sleep 0.3
done
tmux_keys q
echo "top_zones_tmux: OK"
