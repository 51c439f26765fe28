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
sock=$work/tmux.sock
demo_pid=
cleanup() {
  tmux -S "$sock" kill-server 2>/dev/null || true
  [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$tool" demo --headless --seconds 120 --dir "$SPYGLASS_DIR" \
  >"$work/demo.log" 2>&1 &
demo_pid=$!

# A private server, a fixed-size window, no user configuration.
tmux -S "$sock" -f /dev/null new-session -d -s topz -x 120 -y 50 \
  "SPYGLASS_DIR='$SPYGLASS_DIR' TERM=xterm-256color '$tool' top --dir '$SPYGLASS_DIR' 2>'$work/top.err'; sleep 30"
screen() { tmux -S "$sock" capture-pane -p -t topz; }

# Waits (deadline, not a fixed sleep) until the screen matches all the
# extended regexps given; prints the last screen when it never does.
wait_screen() {
  local deadline=$((SECONDS + 60)) s=
  while [ $SECONDS -lt $deadline ]; do
    s=$(screen)
    local ok=1
    for re in "$@"; do grep -Eq -- "$re" <<<"$s" || { ok=0; break; }; done
    [ $ok = 1 ] && return 0
    kill -0 "$demo_pid" 2>/dev/null || { cat "$work/demo.log" >&2; fail "demo exited"; }
    sleep 0.3
  done
  printf '%s\n' "$s" >&2
  cat "$work/top.err" >&2 || true
  fail "screen never showed: $*"
}

echo "== top shows the demo"
wait_screen 'FPS|fps'
echo "== z: the zones view"
tmux -S "$sock" send-keys -t topz z
# A row: name, calls (> 0: no leading zero), total, self, max.
row() { printf '^ %s +[1-9][0-9]* +[0-9.]+ +[0-9.]+ +[0-9.]+' "$1"; }
wait_screen ' zones, last second' 'location +calls' \
  "$(row update)" "$(row scene)" "$(row substep)" "$(row 'draw list')" \
  "$(row particles)" "$(row submit)" "$(row render)" "$(row rows)" 'threads:.*frame\([0-9]+\)' \
  'threads:.*device\([0-9]+\)'
screen | sed -n '/ zones, last second/,$p'
echo "== z again: back to the overlay"
tmux -S "$sock" send-keys -t topz z
deadline=$((SECONDS + 30))
while screen | grep -q ' zones, last second'; do
  [ $SECONDS -lt $deadline ] || fail "z did not close the zones view"
  sleep 0.3
done
tmux -S "$sock" send-keys -t topz q
echo "top_zones_tmux: OK"
