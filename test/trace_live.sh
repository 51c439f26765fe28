#!/usr/bin/env bash
# trace_live.sh TOOL — live build progress on the bus (issue 17, item 3),
# with real processes: a traced `demo build` of a generated tree publishes
# its progress; a `spyglass top --json` runs beside it for the whole build
# (so the feed sees every action) while two `top --once --json` snapshots
# taken during the build show the hook counts increasing; the last
# progress the watcher saw (build ended) has, per plugin, exactly the hook
# calls the store holds (`trace hooks --json`). A watcher that joins a
# running build after a gap: flagged partial, its counts exactly the
# store's calls from when it began collecting. Then a build nobody
# watches: its feed collected nothing (the demo prints the counter).
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-trace-live-XXXXXX)
watcher=""
build=""
cleanup() {
  [ -n "$watcher" ] && kill "$watcher" 2>/dev/null || true
  [ -n "$build" ] && kill "$build" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export SPYGLASS_DIR="$work/run" # a private bus
mkdir -m 700 "$work/run"
name="live-build-$$"
gen_tree "$work/src" 6 20

"$tool" demo build "$work/src" --trace jsonl --out "$work/out" --name "$name" \
  --hook-delay-us 3000 --wait-subscriber 30 >"$work/build.txt" 2>&1 &
build=$!
# the watcher starts once the build's provider is listed (before, the bus
# may not exist yet in this private runtime dir: top refuses ENOENT)
deadline=$((SECONDS + 60))
until { "$tool" ls --json 2>/dev/null || true; } | grep -q "$name"; do
  [ $SECONDS -lt $deadline ] || fail "the build's provider never appeared"
  sleep 0.1
done
"$tool" top "$name" --json --interval 100 --wait 30000 >"$work/top.jsonl" 2>"$work/top.err" &
watcher=$!

# jq-like helpers in python: the build member of a JSON line
calls_of() { python3 -c 'import json,sys
b=json.loads(sys.stdin.read())["build"]
print(-1 if b is None else b["hook_calls"], 1 if b and b["ended"] else 0)'; }

# the watcher subscribed: the build started; two snapshots while it runs
snap() { "$tool" top "$name" --once --json --wait 30000 | calls_of; }
deadline=$((SECONDS + 60))
while :; do
  read -r c1 e1 < <(snap)
  [ "$c1" -gt 0 ] && break
  [ $SECONDS -lt $deadline ] || fail "no hook calls on the bus within 60 s"
  sleep 0.1
done
[ "$e1" = 0 ] || fail "the build ended before a second snapshot (too fast)"
sleep 0.5
c2=""
deadline=$((SECONDS + 60))
until read -r c2 e2 < <(snap) && [ -n "$c2" ]; do # a loaded machine: retry
  [ $SECONDS -lt $deadline ] || fail "no second snapshot within 60 s"
done
echo "top --once: $c1 then $c2 hook calls (ended: $e2)"
[ "$c2" -gt "$c1" ] || fail "hook counts did not increase: $c1 then $c2"

wait "$build" || fail "the build failed: $(cat "$work/build.txt")"
build=""
# the watcher's last line shows the ended build
deadline=$((SECONDS + 30))
until tail -n 1 "$work/top.jsonl" | calls_of | grep -q ' 1$'; do
  [ $SECONDS -lt $deadline ] || fail "the watcher never saw the build end (top: $(kill -0 "$watcher" 2>/dev/null && echo running || echo exited): $(tail -c 300 "$work/top.err"))"
  sleep 0.1
done
kill "$watcher"
wait "$watcher" 2>/dev/null || true
watcher=""
store=$(ls -d "$work"/out/.spyglass/*/ | head -n 1)
"$tool" trace hooks "$store" --json >"$work/hooks.json"
python3 - "$work/top.jsonl" "$work/hooks.json" <<'PY'
import json, sys, collections
last = None
for line in open(sys.argv[1]):
    b = json.loads(line).get("build")
    if b and b["ended"]:
        last = b
assert last, "no ended build in the watcher's output"
live = {p["name"]: p["calls"] for p in last["plugins"]}
stored = collections.Counter(h["plugin"] for h in json.load(open(sys.argv[2]))["hook_calls"])
print("live:", dict(sorted(live.items())))
print("store:", dict(sorted(stored.items())))
assert live == dict(stored), "per-plugin hook calls differ"
assert last["hook_calls"] == sum(stored.values())
assert last["modules_done"] == 120, last["modules_done"]
assert last["slowest"] and last["slowest"][0]["dur_us"] >= 3000, last["slowest"]
PY
grep -q "bus: [1-9][0-9]* actions collected" "$work/build.txt" ||
  fail "the watched build collected nothing: $(cat "$work/build.txt")"

# A watcher that joins after the build started (an early look that left
# again, then a gap nobody watched): nothing was collected in the gap, so
# its progress is flagged partial, starts at started_us (when collection
# began again), and counts exactly the store's calls that ended from then
# on; the early look, subscribed before the build began, saw it whole.
wait_listed() {
  local deadline=$((SECONDS + 60))
  until { "$tool" ls --json 2>/dev/null || true; } | grep -q "$1"; do
    [ $SECONDS -lt $deadline ] || fail "provider $1 never appeared"
    sleep 0.1
  done
}
late_ok=""
for delay in 6000 20000; do # a loaded machine may finish the first before
  rm -rf "$work/out3"
  "$tool" demo build "$work/src" --trace jsonl --out "$work/out3" \
    --name "$name-3" --hook-delay-us $delay --wait-subscriber 30 \
    >"$work/build3.txt" 2>&1 &
  build=$!
  wait_listed "$name-3"
  "$tool" top "$name-3" --once --json --wait 30000 >"$work/early.json"
  sleep 0.5
  "$tool" top "$name-3" --json --interval 100 --wait 30000 \
    >"$work/late.jsonl" 2>"$work/late.err" &
  watcher=$!
  wait "$build" || fail "the third build failed: $(cat "$work/build3.txt")"
  build=""
  deadline=$((SECONDS + 30))
  until tail -n 1 "$work/late.jsonl" 2>/dev/null | calls_of | grep -q ' 1$'; do
    [ $SECONDS -lt $deadline ] || break
    sleep 0.1
  done
  kill "$watcher" 2>/dev/null || true
  wait "$watcher" 2>/dev/null || true
  watcher=""
  if tail -n 1 "$work/late.jsonl" | calls_of | grep -q ' 1$'; then
    late_ok=1
    break
  fi
  echo "late joiner: the build ended before it joined (hooks $delay us); slower"
done
[ -n "$late_ok" ] || fail "the late watcher never saw a build end: $(tail -c 300 "$work/late.err")"
store3=$(ls -d "$work"/out3/.spyglass/*/ | head -n 1)
"$tool" trace hooks "$store3" --json >"$work/hooks3.json"
python3 - "$work/early.json" "$work/late.jsonl" "$work/hooks3.json" <<'PY'
import json, sys, collections
early = json.load(open(sys.argv[1]))["build"]
assert early and not early["partial"], ("the early look saw the start", early and early["partial"])
last = None
for line in open(sys.argv[2]):
    b = json.loads(line).get("build")
    if b and b["ended"]:
        last = b
assert last, "no ended build in the late watcher's output"
assert last["partial"], "a late joiner's counts are not flagged partial"
since = last["started_us"]
calls = json.load(open(sys.argv[3]))["hook_calls"]
assert since > early["started_us"], (since, early["started_us"])
after = collections.Counter(h["plugin"] for h in calls
                            if h["started_us"] + h["duration_us"] >= since)
live = {p["name"]: p["calls"] for p in last["plugins"]}
print("late live:", dict(sorted(live.items())))
print("store, ended since it joined:", dict(sorted(after.items())), "of", len(calls))
assert live == dict(after), "late joiner's per-plugin calls differ from the store's since started_us"
assert last["hook_calls"] == sum(after.values()) < len(calls), (last["hook_calls"], len(calls))
PY

# nobody subscribed: nothing collected
"$tool" demo build "$work/src" --trace jsonl --out "$work/out2" \
  --name "$name-2" >"$work/build2.txt" 2>&1 || fail "second build failed"
grep -q "bus: 0 actions collected for live viewers, 0 progress" \
  "$work/build2.txt" || fail "an unwatched build collected: $(cat "$work/build2.txt")"
echo "trace_live: ok"
