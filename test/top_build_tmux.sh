#!/usr/bin/env bash
# top_build_tmux.sh TOOL — `spyglass top`'s build view as a user sees it:
# a traced `spyglass demo build` of a generated tree, one plugin slowed
# (demo:strip-comments, +20 ms per transform), waits for a subscriber;
# `spyglass top NAME` runs in a real terminal (a private tmux server) and
# the test reads the screen back (tmux capture-pane): the build line with
# modules done rising while it runs, per-plugin calls (> 0) in the plugin
# table, and the slowed plugin's transforms first among the slowest hooks;
# then the build shown done with every module.
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
fail() { echo "top_build_tmux: FAIL: $*" >&2; exit 1; }
command -v tmux >/dev/null || fail "tmux is not installed (scripts/deps.sh test)"
work=$(mktemp -d /tmp/spy-topb-XXXXXX)
chmod 700 "$work"
export SPYGLASS_DIR=$work/bus
mkdir -m 700 "$SPYGLASS_DIR"
. "$(dirname "$0")/tmux_lib.sh"
build_pid=
cleanup() {
  tmux_stop
  [ -n "$build_pid" ] && kill "$build_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  # top (tmux's, not a child) may still write its bus files as it exits
  rm -rf "$work" 2>/dev/null || { sleep 1; rm -rf "$work"; }
}
trap cleanup EXIT
name="topb-$$"
gen_tree "$work/src" 6 20 # 120 modules

"$tool" demo build "$work/src" --trace jsonl --out "$work/out" --name "$name" \
  --slow-plugin demo:strip-comments:20000 --wait-subscriber 60 \
  >"$work/build.log" 2>&1 &
build_pid=$!
deadline=$((SECONDS + 60))
until { "$tool" ls --json 2>/dev/null || true; } | grep -q "$name"; do
  [ $SECONDS -lt $deadline ] || fail "the build's provider never appeared"
  sleep 0.1
done

tmux_logs=("$work/top.err" "$work/build.log")
tmux_start topb \
  "SPYGLASS_DIR='$SPYGLASS_DIR' TERM=xterm-256color '$tool' top '$name' --wait 30000 2>'$work/top.err'; sleep 60"
modules_of() { sed -nE 's/.*build [0-9]+ (running|done): ([0-9]+).*/\2/p' <<<"$1" | head -n 1; }

echo "== the build view while it runs"
wait_screen 90 'build [0-9]+ running: [0-9]+(/120)? modules, [0-9]+ hook calls' \
  'plugin +calls +time ms +max ms'
m1=$(modules_of "$shown")
echo "modules done: $m1"
# a row: name, calls (> 0: no leading zero), time, max
row() { printf '^  %s +[1-9][0-9]* +[0-9.]+ +[0-9.]+$' "$1"; }
deadline=$((SECONDS + 90))
while :; do
  wait_screen 90 'build [0-9]+ (running|done): '
  m2=$(modules_of "$shown")
  [ "$m2" -gt "$m1" ] && break
  [ $SECONDS -lt $deadline ] || fail "modules done did not rise from $m1"
  sleep 0.2
done
echo "modules done: $m1 then $m2"
grep -Eq 'build [0-9]+ running' <<<"$shown" ||
  echo "(the build was done by the second look: rising seen across it)"
echo "== per-plugin calls and the slowest hooks"
wait_screen 90 "$(row 'demo:strip-comments')" "$(row 'demo:resolver')" \
  "$(row 'demo:banner')" '^  slowest hooks' \
  '^ +[0-9]{2,}\.[0-9] ms  transform +demo:strip-comments +d[0-9]+/f[0-9]+\.[ch]'
# the slowest is the slowed plugin's (20 ms above the others' sub-ms)
first=$(sed -n '/slowest hooks/{n;p;}' <<<"$shown")
grep -q 'demo:strip-comments' <<<"$first" || fail "slowest hook is not the slowed plugin's: $first"
printf '%s\n' "$shown" | sed -n '/^  build /,$p' | head -n 20
echo "== done with every module"
wait_screen 90 'build [0-9]+ done: 120/120 modules'
wait "$build_pid" || fail "the build failed: $(cat "$work/build.log")"
build_pid=
tmux_keys q
echo "top_build_tmux: OK"
