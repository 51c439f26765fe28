#!/usr/bin/env bash
# trace_record.sh TOOL — build traces in recordings (issue 16): `spyglass
# record` beside a traced `demo build` stores the build's totals and
# per-plugin hook time (build, build_hook, hook_call tables) matching the
# store's own hook calls; `spyglass diff` of two recordings of the same
# build exits 0, and of a build where one plugin was made slower exits 1
# naming that plugin (and only it). Each recording holds five builds of
# one session (--builds 5): diff judges a plugin on the median of its
# per-build medians against their spread (IQR), so a plugin preempted in
# one build by a loaded machine is not blamed, and the slowed one is.
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d /tmp/spy-trace-rec-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
export SPYGLASS_DIR="$work/run"
mkdir -m 700 "$work/run"
gen_tree "$work/src" 4 15

# record_build NAME BUILDS [demo build options…]: BUILDS traced builds in
# one session with a recorder subscribed from before the first action to
# the end
record_build() {
  local n=$1 nb=$2
  shift 2
  "$tool" demo build "$work/src" --trace jsonl --out "$work/out-$n" \
    --name "rb-$n-$$" --wait-subscriber 30 --builds "$nb" "$@" >"$work/build-$n.txt" 2>&1 &
  local b=$!
  "$tool" record "rb-$n-$$" -o "$work/$n.db" -s 120 >"$work/rec-$n.txt" 2>&1 &
  local r=$!
  wait "$b" || fail "build $n failed: $(cat "$work/build-$n.txt")"
  # the recorder has the ended builds once their build rows are committed
  local deadline=$((SECONDS + 30))
  until [ "$(sqlite3 "$work/$n.db" 'select count(*) from build' 2>/dev/null || echo 0)" = "$nb" ]; do
    [ $SECONDS -lt $deadline ] || fail "recording $n has no build row"
    sleep 0.2
  done
  kill -INT "$r"
  wait "$r" || fail "recorder $n failed: $(cat "$work/rec-$n.txt")"
}

# wait_running NAME MIN WHAT: until `top` sees NAME's build running with
# more than MIN hook calls (60 s at most, else fail "WHAT showed no progress")
wait_running() {
  local deadline=$((SECONDS + 60))
  until [ "$("$tool" top "$1" --once --json --wait 30000 2>/dev/null | python3 -c '
import json, sys
b = json.loads(sys.stdin.read()).get("build")
print(b["hook_calls"] if b and not b["ended"] else 0)' 2>/dev/null || echo 0)" -gt "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "$3 showed no progress"
    sleep 0.3
  done
}

# the plugins busy-wait (a sleep's late wake-up on a loaded machine moved
# one plugin's median 304 -> 800 µs between two runs of the same build),
# long enough that the tracer's own emit, which the first transform's
# call pays after the load's end (~50 µs at worst under load), stays
# within one histogram bucket (12.5 %, the diff's spread for one build)
record_build base 5 --hook-spin-us 600
record_build same 5 --hook-spin-us 600
record_build slow 5 --hook-spin-us 600 --slow-plugin demo:strip-comments:3000

# the recording matches the store's hook calls, per plugin and hook
store=$(ls -d "$work"/out-base/.spyglass/*/ | head -n 1)
"$tool" trace hooks "$store" --json >"$work/hooks.json"
sqlite3 -json "$work/base.db" 'select plugin, hook, sum(calls) as calls from build_hook group by plugin, hook' \
  >"$work/bh.json"
python3 - "$work/hooks.json" "$work/bh.json" <<'PY'
import json, sys, collections
stored = collections.Counter((h["plugin"], h["hook"]) for h in json.load(open(sys.argv[1]))["hook_calls"])
rec = {(r["plugin"], r["hook"]): r["calls"] for r in json.load(open(sys.argv[2]))}
assert rec == dict(stored), (rec, dict(stored))
PY
[ "$(sqlite3 "$work/base.db" 'select count(*) from build where modules = 60')" = 5 ] ||
  fail "build row: $(sqlite3 "$work/base.db" 'select * from build')"
[ "$(sqlite3 "$work/base.db" 'select count(*) from hook_call')" -gt 0 ] ||
  fail "no slowest hook calls recorded"

# Judged at a 150 % threshold, not the default 5 %: on a shared machine a
# load change between two recordings made seconds apart moves the
# plugins' wall-clock medians unevenly (in a clean-clone run beside a
# second test suite, three 600 us plugins read +21..+53 % while the
# run-wide median moved +42 %; beside two `yes` loops one plugin alone
# read +52.6 % over five builds), more than 5 % after the diff divides the
# common change out. The slowed plugin is 5x slower (+400..+510 %), so
# the test still fails when the diff misses it or blames another one;
# what it cannot prove on a shared machine is the 5 % resolution itself
# (judging hooks on their thread CPU time would).
set +e
"$tool" diff "$work/base.db" "$work/same.db" --threshold 150 >"$work/d-same.txt"
rc_same=$?
"$tool" diff "$work/base.db" "$work/slow.db" --threshold 150 >"$work/d-slow.txt"
rc_slow=$?
set -e
cat "$work/d-slow.txt"
[ $rc_same = 0 ] || { cat "$work/d-same.txt"; fail "same build: diff exited $rc_same"; }
[ $rc_slow = 1 ] || fail "slower plugin: diff exited $rc_slow"
grep -q '^plugin demo:strip-comments .*REGRESSED' "$work/d-slow.txt" ||
  fail "the slower plugin is not named"
[ "$(grep -c REGRESSED "$work/d-slow.txt")" = 1 ] || fail "other plugins blamed"

# a build still running when the recorder stops is written as it stood,
# marked ended = 0 (ended_us NULL), and diff leaves it out
"$tool" demo build "$work/src" --trace jsonl --out "$work/out-part" \
  --name "rb-part-$$" --wait-subscriber 30 --hook-delay-us 40000 >"$work/build-part.txt" 2>&1 &
part_build=$!
"$tool" record "rb-part-$$" -o "$work/part.db" -s 120 >"$work/rec-part.txt" 2>&1 &
part_rec=$!
# stop once the recorder's own view of the build has hook calls in it
# (a second consumer seeing them means the provider is sending them)
wait_running "rb-part-$$" 10 "the slow build"
sleep 0.5 # (the recorder's state has what top saw)
kill -INT "$part_rec"
wait "$part_rec" || fail "recorder (partial build) failed: $(cat "$work/rec-part.txt")"
kill "$part_build" 2>/dev/null || true
wait "$part_build" 2>/dev/null || true
row=$(sqlite3 "$work/part.db" 'select ended, ended_us is null, hook_calls > 0, modules < 60 from build')
[ "$row" = "0|1|1|1" ] || fail "running build: row '$row' ($(sqlite3 "$work/part.db" 'select * from build'))"
[ "$(sqlite3 "$work/part.db" 'select count(*) from build_hook')" -gt 0 ] ||
  fail "running build: no build_hook rows"
[ "$(sqlite3 "$work/base.db" 'select min(ended) from build')" = 1 ] || fail "an ended build: ended = 1 wanted"
set +e
"$tool" diff "$work/base.db" "$work/part.db" >"$work/d-part.txt"
rc_part=$?
set -e
[ $rc_part = 0 ] || { cat "$work/d-part.txt"; fail "diff against a running build: exit $rc_part"; }
! grep -q '^plugin ' "$work/d-part.txt" || { cat "$work/d-part.txt"; fail "diff judged a running build"; }
# a recorder that joins a build already running writes it partial = 1
# (the provider counted only what happened since), and diff leaves it out
"$tool" demo build "$work/src" --trace jsonl --out "$work/out-late" \
  --name "rb-late-$$" --wait-subscriber 30 --hook-delay-us 20000 >"$work/build-late.txt" 2>&1 &
late_build=$!
# an early watcher starts the build and leaves once it shows progress
wait_running "rb-late-$$" 0 "the late-joined build"
sleep 0.5
"$tool" record "rb-late-$$" -o "$work/late.db" -s 120 >"$work/rec-late.txt" 2>&1 &
late_rec=$!
wait "$late_build" || fail "build late failed: $(cat "$work/build-late.txt")"
deadline=$((SECONDS + 30))
until [ "$(sqlite3 "$work/late.db" 'select count(*) from build' 2>/dev/null || echo 0)" = 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "recording late has no build row"
  sleep 0.2
done
kill -INT "$late_rec"
wait "$late_rec" || fail "recorder (late) failed: $(cat "$work/rec-late.txt")"
whole=$(sqlite3 "$work/base.db" 'select max(hook_calls) from build')
row=$(sqlite3 "$work/late.db" "select ended, partial, hook_calls < $whole from build")
[ "$row" = "1|1|1" ] || fail "late-joined build: row '$row' ($(sqlite3 "$work/late.db" 'select * from build'))"
[ "$(sqlite3 "$work/base.db" 'select max(partial) from build')" = 0 ] || fail "a build seen whole: partial = 0 wanted"
set +e
"$tool" diff "$work/base.db" "$work/late.db" >"$work/d-late.txt"
rc_late=$?
set -e
[ $rc_late = 0 ] || { cat "$work/d-late.txt"; fail "diff against a late-joined build: exit $rc_late"; }
! grep -q '^plugin ' "$work/d-late.txt" || { cat "$work/d-late.txt"; fail "diff judged a late-joined build"; }
# build-only recordings have no frames: diff says so instead of nan
grep -q 'nan' "$work/d-same.txt" && { cat "$work/d-same.txt"; fail "diff printed nan"; }
grep -q '^frame .*no frames' "$work/d-same.txt" || { cat "$work/d-same.txt"; fail "diff: no 'no frames'"; }
echo "trace_record: ok"
