#!/usr/bin/env bash
# record.sh — `spyglass record`, `export` and `diff` against real processes:
# `spyglass demo --headless` and test/rec_provider recorded into SQLite
# files and into a PostgreSQL server this script starts (trace_lib.sh);
# exports decoded with protoc against Perfetto's published
# perfetto_trace.proto (test/fixtures) and read by Chrome DevTools' trace
# engine (@paulirish/trace_engine, installed from npm into a scratch dir);
# recorded buffers decoded by vpxdec (and ffprobe when installed) and read
# as PNG by pngcheck and a zlib decode of their pixels.
#
# usage: record.sh SPYGLASS REC_PROVIDER [CASE…]
#   cases: sqlite kill all pg export diff remote buffers packed (default: all)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/trace_lib.sh"
SPY=$1
PROV=$2
shift 2
CASES=${*:-sqlite kill all pg export diff remote buffers packed}
# the SQLite extension that reads packed zones (a recording's `slice`
# view needs it; it is built beside the tool)
EXT=${SPY_SQLEXT:-$(dirname "$SPY")/libspyglass_sqlite}
export SPY_SQLEXT=$EXT

WORK=$(mktemp -d /tmp/spy-rec-XXXXXX)
export SPYGLASS_DIR=$WORK/bus
mkdir -m 700 "$SPYGLASS_DIR"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  pg_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT

q() { sqlite3 -batch -noheader -cmd ".load $EXT" "$1" "$2"; }
q_plain() { sqlite3 -batch -noheader "$1" "$2"; } # without the extension

# wait_until SECONDS CMD…: polls CMD every 0.1 s until it succeeds
wait_until() {
  local t=$1 end
  shift
  end=$(($(date +%s) + t))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.1
  done
}

provider_up() { # NAME: an `ls` line names it
  # (a loaded machine can take longer than ls's default to answer; the
  # callers' deadlines bound the polling)
  "$SPY" ls --wait 1000 | grep -q -- "$1"
}

TABLES="recording process thread track slice counter args frame value zone_loc msgprof"

check_tables() { # DB: every table has rows
  local t n
  for t in $TABLES; do
    n=$(q "$1" "SELECT count(*) FROM $t")
    [ "$n" -gt 0 ] || fail "$1: table $t is empty"
  done
}

check_contiguous() { # DB: frame numbers contiguous per process except loss
  local bad
  bad=$(q "$1" "SELECT p.upid FROM process p WHERE
      (SELECT max(frame) - min(frame) + 1 - count(*) FROM frame f
        WHERE f.upid = p.upid) >
      (SELECT coalesce(sum(count), 0) FROM loss l
        WHERE l.upid = p.upid AND l.what = 'samples')")
  [ -z "$bad" ] || fail "$1: frame numbers have gaps without loss (upid $bad)"
}

check_nesting() { # DB: every child slice lies within its parent
  local n
  n=$(q "$1" "SELECT count(*) FROM slice c JOIN slice p ON p.id = c.parent_id
      WHERE c.depth != p.depth + 1 OR c.ts < p.ts OR c.ts + c.dur > p.ts + p.dur")
  [ "$n" = 0 ] || {
    q "$1" "SELECT 'child', c.ts, c.dur, 'parent', p.ts, p.dur FROM slice c
        JOIN slice p ON p.id = c.parent_id WHERE c.ts < p.ts OR
        c.ts + c.dur > p.ts + p.dur LIMIT 5"
    fail "$1: $n children outside their parent"
  }
  # one thread's outermost zones follow each other, never overlap (a
  # recording on two time bases overlaps where the base changes)
  n=$(q "$1" "SELECT count(*) FROM (SELECT ts, max(ts + dur) OVER (PARTITION BY
      track_id ORDER BY ts, id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
      AS prev_end FROM slice WHERE depth = 0) WHERE ts < prev_end")
  [ "$n" = 0 ] || fail "$1: $n outermost zones overlap an earlier one"
}

case_sqlite() {
  echo "== sqlite: demo recorded; tables, frames, values as a consumer saw them"
  # (the demo outlives every wait below; it is killed at the end)
  "$SPY" demo --headless --seconds 120 --name rec-demo >"$WORK/demo.log" 2>&1 &
  local demo=$!
  PIDS+=($demo)
  wait_until 60 provider_up rec-demo || fail "demo did not announce"
  "$SPY" record rec-demo -o "$WORK/run.db" 2>"$WORK/rec.log" &
  local rec=$!
  # a consumer in the same run, after the recorder has started; the
  # recorder stops (SIGINT) only after the consumer's snapshot, so the
  # frame the consumer saw last is in the recording however slow top was
  wait_until 60 frames_over "$WORK/run.db" 50 || fail "no frames recorded"
  "$SPY" top rec-demo --once --json --wait 30000 >"$WORK/top.json" || fail "top --once"
  sleep 1.5 # (the recorder commits the frames after top's last one)
  kill -INT $rec
  wait $rec || { cat "$WORK/rec.log"; fail "record exited $?"; }
  check_tables "$WORK/run.db"
  check_contiguous "$WORK/run.db"
  check_nesting "$WORK/run.db"
  [ "$(q "$WORK/run.db" "PRAGMA integrity_check")" = ok ] || fail "integrity"
  # the consumer's view against the recording (Debian's python3 cannot
  # load extensions: a copy with the packed zones' `slice` as a table)
  cp "$WORK/run.db" "$WORK/flat.db"
  q "$WORK/flat.db" "CREATE TABLE slice_flat AS SELECT * FROM slice; DROP VIEW slice; ALTER TABLE slice_flat RENAME TO slice" ||
    fail "slice through the extension"
  python3 - "$WORK/top.json" "$WORK/flat.db" <<'EOF' || fail "values differ"
import json, sqlite3, sys
top = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
pid, = db.execute("SELECT provider_id FROM process").fetchone()
assert pid == top["provider"]["id"], (pid, top["provider"]["id"])
f = top["last_frame"]
row = db.execute("SELECT cpu_ms, fps FROM frame WHERE frame = ?", (f,)).fetchone()
assert row, f"frame {f} not recorded"
assert abs(row[0] - top["cpu_history"][-1]) < 1e-6, (row, top["cpu_history"][-1])
assert abs(row[1] - top["fps"]) < 0.051, (row, top["fps"])
for name, v in top["counters"].items():
    r = db.execute("""SELECT c.value FROM counter c JOIN track t ON t.id =
        c.track_id JOIN frame fr ON fr.ts = c.ts AND fr.upid = t.upid
        WHERE t.name = ? AND fr.frame = ?""", (name, f)).fetchone()
    assert r and r[0] == v, (name, r, v)
for name, v in top["env"].items():
    if name.startswith("memory."):
        continue  # sampled: changes during the run
    r = db.execute("""SELECT kind, int_value, real_value, string_value FROM
        value WHERE source = 'env' AND name = ? ORDER BY ts DESC LIMIT 1""",
        (name,)).fetchone()
    assert r, name
    got = {"string": r[3], "bool": bool(r[1]) if r[1] is not None else None,
           "uint": r[1], "int": r[1], "float": r[2]}.get(r[0], r[3])
    assert got == v, (name, got, v)
n = db.execute("SELECT count(*) FROM slice WHERE parent_id IS NOT NULL AND "
               "parent_id NOT IN (SELECT id FROM slice)").fetchone()[0]
assert n == 0, f"{n} slices with a parent that is not recorded"
n = db.execute("""SELECT count(*) FROM slice c JOIN slice p ON p.id =
    c.parent_id WHERE c.depth != p.depth + 1 OR c.ts < p.ts OR
    c.ts + c.dur > p.ts + p.dur""").fetchone()[0]
assert n == 0, f"{n} children outside their parent"
# names are interned (slice_data.name_id -> zone_loc.id); the slice view
# joins them back: every zone of the demo has a known location
n = db.execute("SELECT count(*) FROM slice WHERE name_id IS NULL OR "
               "name_id NOT IN (SELECT id FROM zone_loc)").fetchone()[0]
assert n == 0, f"{n} zones without their zone_loc row"
names = {r[0] for r in db.execute("SELECT DISTINCT name FROM slice")}
locs = {r[0] for r in db.execute("SELECT name FROM zone_loc")}
assert names and names <= locs and "?" not in names, (names, locs)
print("  consumer and recording agree on frame", f)
EOF
  cp "$WORK/run.db" "$WORK/demo.db"
  kill $demo 2>/dev/null
  wait $demo 2>/dev/null # (the next cases record every provider)
}

process_frames_over() { # DB NAME N: more than N frames of process NAME
  local n
  [ -f "$1" ] || return 1
  n=$(sqlite3 -readonly "$1" "SELECT count(*) FROM frame f JOIN process p ON
      p.upid = f.upid WHERE p.name = '$2'" 2>/dev/null)
  [ "${n:-0}" -gt "$3" ]
}

chunks_over() { # DB N: more than N chunk rows committed
  local n
  [ -f "$1" ] || return 1
  n=$(sqlite3 -readonly "$1" "SELECT count(*) FROM chunk" 2>/dev/null)
  [ "${n:-0}" -gt "$2" ]
}

frames_over() { # DB N: more than N frames committed
  local n
  [ -f "$1" ] || return 1 # (the sqlite3 shell would create it)
  n=$(sqlite3 -readonly "$1" "SELECT count(*) FROM frame" 2>/dev/null)
  [ "${n:-0}" -gt "$2" ]
}

case_kill() {
  echo "== kill: SIGKILL of the recorder keeps every committed batch"
  "$SPY" demo --headless --seconds 20 --name rec-kill >/dev/null 2>&1 &
  local demo=$!
  PIDS+=($demo)
  wait_until 60 provider_up rec-kill || fail "demo did not announce"
  "$SPY" record rec-kill -o "$WORK/kill.db" 2>/dev/null &
  local rec=$!
  wait_until 60 frames_over "$WORK/kill.db" 100 || fail "no frames committed"
  sleep 1
  local seen
  seen=$(q "$WORK/kill.db" "SELECT count(*) FROM frame")
  kill -KILL $rec
  wait $rec 2>/dev/null
  [ "$(q "$WORK/kill.db" "PRAGMA integrity_check")" = ok ] || fail "integrity after SIGKILL"
  local after
  after=$(q "$WORK/kill.db" "SELECT count(*) FROM frame")
  [ "$after" -ge "$seen" ] || fail "committed frames lost: $seen before, $after after"
  echo "  $seen frames seen committed before the kill, $after in the file"
  # SIGINT / SIGTERM: a clean stop, everything committed, the file whole
  local sig
  for sig in INT TERM; do
    "$SPY" record rec-kill -o "$WORK/$sig.db" 2>"$WORK/$sig.log" &
    rec=$!
    wait_until 60 frames_over "$WORK/$sig.db" 50 || fail "SIG$sig: no frames"
    kill -$sig $rec
    wait $rec || { cat "$WORK/$sig.log"; fail "SIG$sig: exit $?"; }
    [ ! -e "$WORK/$sig.db-wal" ] || fail "SIG$sig: WAL left beside the file"
    [ "$(q "$WORK/$sig.db" "SELECT count(*) FROM recording WHERE ended_ns > started_ns")" = 1 ] ||
      fail "SIG$sig: recording not ended"
    [ "$(q "$WORK/$sig.db" "SELECT count(*) FROM process WHERE end_ts IS NULL")" = 0 ] ||
      fail "SIG$sig: process track not ended"
    [ "$(q "$WORK/$sig.db" "PRAGMA integrity_check")" = ok ] || fail "SIG$sig: integrity"
  done
  # usage errors exit 2 naming the problem
  "$SPY" record -o "$WORK/INT.db" -s 1 2>"$WORK/exists.log"
  [ $? = 2 ] && grep -q exists "$WORK/exists.log" || fail "an existing file: exit 2 naming it"
  "$SPY" record --features stats,bogus -s 1 -o "$WORK/x.db" 2>"$WORK/feat.log"
  [ $? = 2 ] && grep -q bogus "$WORK/feat.log" || fail "a bad feature: exit 2 naming it"
  "$SPY" export "$WORK/INT.db" -f svg -o "$WORK/x.svg" 2>/dev/null
  [ $? = 2 ] || fail "export -f svg: exit 2 wanted"
  kill $demo 2>/dev/null
  wait $demo 2>/dev/null
}

case_all() {
  echo "== all: two providers (one joins later, one dies mid-recording)"
  "$PROV" rec-a 9 100 300 100 0 >/dev/null &
  PIDS+=($!)
  wait_until 60 provider_up rec-a || fail "rec-a did not announce"
  # (nothing else of this script is running now: --all takes every one)
  "$SPY" record --all -o "$WORK/all.db" -s 6 2>"$WORK/all.log" &
  local rec=$!
  sleep 1
  "$PROV" rec-b 2 100 300 100 250 >/dev/null &
  PIDS+=($!)
  wait $rec || { cat "$WORK/all.log"; fail "record --all exited $?"; }
  check_contiguous "$WORK/all.db"
  # rec-b's clock is 250 ms ahead: a sync finishing while one of its
  # zone trees is open must not move the parent against its children
  check_nesting "$WORK/all.db"
  local names
  names=$(q "$WORK/all.db" "SELECT group_concat(name, ',') FROM (SELECT name FROM process ORDER BY name)")
  [ "$names" = "rec-a,rec-b" ] || fail "processes: '$names'"
  local u
  for u in rec-a rec-b; do
    [ "$(q "$WORK/all.db" "SELECT count(*) FROM slice s JOIN track t ON t.id = s.track_id JOIN process p ON p.upid = t.upid WHERE p.name = '$u'")" -gt 50 ] ||
      fail "$u has no slices"
  done
  # frame times on one time base: rec-b's frames from before its clock
  # sync finished are not 250 ms ahead of the ones after it
  local back
  back=$(q "$WORK/all.db" "SELECT count(*) FROM (SELECT ts - lag(ts) OVER (PARTITION BY
      upid ORDER BY frame) AS d FROM frame) WHERE d < 0")
  [ "$back" = 0 ] || fail "$back frame times go back (two time bases)"
  # rec-b answers clock syncs 250 ms ahead (its test hook)
  local off
  off=$(q "$WORK/all.db" "SELECT clock_offset_ns FROM process WHERE name = 'rec-b'")
  [ "$off" -gt 200000000 ] && [ "$off" -lt 300000000 ] || fail "rec-b offset $off"
  # rec-b ended mid-recording; rec-a went on after it
  q "$WORK/all.db" "SELECT 1 FROM process b, frame f JOIN process a ON a.upid = f.upid
      WHERE b.name = 'rec-b' AND a.name = 'rec-a' AND b.end_ts IS NOT NULL AND
      f.ts > b.end_ts + 1000000000 LIMIT 1" | grep -q 1 ||
    fail "rec-b's end or rec-a's frames after it missing"
  echo "  both providers in one file, offsets $(q "$WORK/all.db" "SELECT group_concat(name || '=' || clock_offset_ns, ' ') FROM process")"
}

case_pg() {
  echo "== pg: two recorders into one PostgreSQL database"
  pg_start || fail "postgres did not start"
  "$PROV" rec-pg 8 100 300 100 0 >/dev/null &
  PIDS+=($!)
  wait_until 60 provider_up rec-pg || fail "rec-pg did not announce"
  "$SPY" record rec-pg --db "$PG_URI" -s 3 2>"$WORK/pg1.log" &
  local r1=$!
  "$SPY" record rec-pg --db "$PG_URI" -s 3 2>"$WORK/pg2.log" &
  local r2=$!
  wait $r1 || { cat "$WORK/pg1.log"; fail "pg recorder 1"; }
  wait $r2 || { cat "$WORK/pg2.log"; fail "pg recorder 2"; }
  [ "$(pg_sql "SELECT count(*) FROM recording WHERE ended_ns IS NOT NULL")" = 2 ] ||
    fail "two ended recording rows wanted"
  local t
  for t in process thread track slice counter args frame value zone_loc msgprof; do
    [ "$(pg_sql "SELECT count(DISTINCT recording_id) FROM $t")" = 2 ] ||
      fail "pg table $t lacks rows of both recordings"
  done
  local gaps
  gaps=$(pg_sql "SELECT recording_id FROM frame GROUP BY recording_id, upid
      HAVING max(frame) - min(frame) + 1 - count(*) >
      (SELECT coalesce(sum(count), 0) FROM loss l WHERE l.recording_id = frame.recording_id AND l.what = 'samples')")
  [ -z "$gaps" ] || fail "pg frames have gaps without loss"
  echo "  $(pg_sql "SELECT count(*) FROM slice") slices, $(pg_sql "SELECT count(*) FROM frame") frames in 2 recordings"
  # export and diff read PostgreSQL too (rec_read.c): each recording's
  # slices and frame counters come out, and only that recording's
  local id n x
  for id in $(pg_sql "SELECT id FROM recording ORDER BY id"); do
    "$SPY" export --db "$PG_URI" --recording "$id" -f chrome -o "$WORK/pg$id.json" ||
      fail "export --db --recording $id"
    n=$(pg_sql "SELECT count(*) FROM slice WHERE recording_id = $id")
    x=$(python3 -c "import json,sys; e=json.load(open(sys.argv[1]))['traceEvents']; print(sum(1 for v in e if v['ph'] == 'X'))" "$WORK/pg$id.json") ||
      fail "pg export $id is not JSON"
    [ "$n" -gt 50 ] && [ "$x" = "$n" ] || fail "pg export $id: $x slices, $n in the database"
    "$SPY" export --db "$PG_URI" --recording "$id" -f perfetto -o "$WORK/pg$id.pftrace" ||
      fail "export perfetto --db"
    protoc --proto_path="$HERE/fixtures" --decode=perfetto.protos.Trace \
      perfetto_trace.proto <"$WORK/pg$id.pftrace" >"$WORK/pg$id.txt" || fail "protoc: pg export $id"
    [ "$(grep -c 'type: TYPE_SLICE_BEGIN' "$WORK/pg$id.txt")" = "$n" ] || fail "pg perfetto $id: begins"
  done
  "$SPY" export --db "$PG_URI" --recording 999 -f chrome -o "$WORK/none.json" 2>/dev/null
  [ $? = 2 ] || fail "export of a recording that is not there: exit 2 wanted"
  # two recordings of the same run, one from each side of the database
  "$SPY" diff "$PG_URI#1" "$PG_URI#2" >"$WORK/pgdiff.txt"
  x=$?
  [ $x = 0 ] || { cat "$WORK/pgdiff.txt"; fail "pg diff of one run recorded twice: exit $x"; }
  grep -q "^zone work " "$WORK/pgdiff.txt" || { cat "$WORK/pgdiff.txt"; fail "pg diff: no zones"; }
  "$SPY" diff "$PG_URI#1" "$PG_URI#999" 2>/dev/null
  [ $? = 2 ] || fail "pg diff of a missing recording: exit 2 wanted"
  echo "  export and diff read both PostgreSQL recordings"
}

case_export() {
  echo "== export: Perfetto decodes with protoc, Chrome JSON reads in DevTools' engine"
  [ -f "$WORK/demo.db" ] || case_sqlite
  command -v protoc >/dev/null || fail "protoc missing (scripts/deps.sh)"
  "$SPY" export "$WORK/demo.db" -f perfetto -o "$WORK/t.pftrace" || fail "export perfetto"
  protoc --proto_path="$HERE/fixtures" --decode=perfetto.protos.Trace \
    perfetto_trace.proto <"$WORK/t.pftrace" >"$WORK/t.txt" || fail "protoc cannot decode the trace"
  local slices begins ends counters
  slices=$(q "$WORK/demo.db" "SELECT count(*) FROM slice")
  begins=$(grep -c "type: TYPE_SLICE_BEGIN" "$WORK/t.txt")
  ends=$(grep -c "type: TYPE_SLICE_END" "$WORK/t.txt")
  counters=$(grep -c "type: TYPE_COUNTER" "$WORK/t.txt")
  [ "$begins" = "$slices" ] && [ "$ends" = "$slices" ] ||
    fail "perfetto: $begins begins, $ends ends for $slices slices"
  local crows
  crows=$(q "$WORK/demo.db" "SELECT (SELECT count(*) FROM counter) + (SELECT count(cpu_ms) + count(gpu_ms) + count(fps) FROM frame)")
  [ "$counters" = "$crows" ] || fail "perfetto: $counters counter events for $crows values"
  grep -q 'thread_name: "frame"' "$WORK/t.txt" || fail "perfetto: no frame thread"
  grep -q 'process_name: "rec-demo"' "$WORK/t.txt" || fail "perfetto: no process"
  [ "$(grep -c 'event_names {' "$WORK/t.txt")" = "$(q "$WORK/demo.db" "SELECT count(DISTINCT name) FROM slice")" ] ||
    fail "perfetto: each slice name interned once per sequence wanted"
  # --from/--to: a window holds fewer slices
  "$SPY" export "$WORK/demo.db" -f perfetto -o "$WORK/w.pftrace" --from 1 --to 2 || fail "export window"
  [ "$(stat -c %s "$WORK/w.pftrace")" -lt "$(stat -c %s "$WORK/t.pftrace")" ] || fail "window not smaller"
  echo "  perfetto: $begins slices, $counters counter values decoded"

  "$SPY" export "$WORK/demo.db" -f chrome -o "$WORK/t.json" || fail "export chrome"
  local npmdir=$WORK/npm
  mkdir -p "$npmdir"
  (cd "$npmdir" && npm install --no-audit --no-fund --silent \
    @paulirish/trace_engine@0.0.65 >"$npmdir/log" 2>&1) || { cat "$npmdir/log"; fail "npm install"; }
  local frame_slices
  frame_slices=$(q "$WORK/demo.db" "SELECT count(*) FROM slice s JOIN track t ON t.id = s.track_id WHERE t.name = 'frame'")
  cat >"$npmdir/read.mjs" <<'EOF'
// Reads a Chrome trace with DevTools' trace engine and prints what it saw.
const [file, engine] = process.argv.slice(2);
const {analyzeTrace} = await import(engine + '/analyze-trace.mjs');
const {parsedTrace} = await analyzeTrace(file);
const r = parsedTrace.data.Renderer;
const threads = {};
for (const p of r.processes.values())
  for (const t of p.threads.values())
    threads[t.name] = t.entries.length;
const counters = new Set(parsedTrace.traceEvents.filter(e => e.ph === 'C')
  .map(e => e.name));
console.log(JSON.stringify({threads, counters: [...counters].sort()}));
EOF
  local got
  got=$(cd "$npmdir" && node read.mjs "$WORK/t.json" "$npmdir/node_modules/@paulirish/trace_engine" 2>"$npmdir/err") ||
    { cat "$npmdir/err"; fail "trace engine could not read the Chrome JSON"; }
  python3 - "$got" "$frame_slices" <<'EOF' || fail "trace engine saw other slices/counters: $got"
import json, sys
got = json.loads(sys.argv[1])
assert got["threads"].get("frame") == int(sys.argv[2]), got["threads"]
assert "device" in got["threads"], got["threads"]
for c in ("frame.cpu_ms", "frame.fps", "draws", "health.frames_posted"):
    assert c in got["counters"], c
EOF
  echo "  chrome: trace engine read $got"
}

case_diff() {
  echo "== diff: a slowed zone is a regression, the same run is not"
  # base: one run recorded twice at the same time (two recordings of the
  # same run: the same zones, whatever the load on the machine)
  # The zones busy for thread CPU time: a loaded machine only adds wall
  # time (preemption), so the slowed `work` (4000 us of CPU) can never be
  # under 4 ms, while the base's 200 us needs most of its calls preempted
  # by more than 3.8 ms in a second to reach it; the gap stays wider than
  # the spread load makes. (Each run outlives its recorder's window.)
  "$PROV" rec-base 8 100 200 200 0 >/dev/null &
  local p=$!
  PIDS+=($p)
  wait_until 60 provider_up rec-base || fail "rec-base did not announce"
  "$SPY" record rec-base -o "$WORK/base.db" -s 3.5 --features stats,zones 2>/dev/null &
  local r1=$!
  "$SPY" record rec-base -o "$WORK/base2.db" -s 3.5 --features stats,zones 2>/dev/null &
  local r2=$!
  wait $r1 || fail "record base"
  wait $r2 || fail "record base2"
  kill $p 2>/dev/null
  wait $p 2>/dev/null
  # the same program with its `work` zone twenty times slower
  "$PROV" rec-slow 8 100 4000 200 0 >/dev/null &
  p=$!
  PIDS+=($p)
  wait_until 60 provider_up rec-slow || fail "rec-slow did not announce"
  "$SPY" record rec-slow -o "$WORK/slow.db" -s 3.5 --features stats,zones 2>/dev/null || fail "record slow"
  kill $p 2>/dev/null
  wait $p 2>/dev/null
  local rc
  "$SPY" diff "$WORK/base.db" "$WORK/slow.db" >"$WORK/diff.txt"
  rc=$?
  [ $rc = 1 ] || { cat "$WORK/diff.txt"; fail "slowdown: exit $rc, 1 wanted"; }
  grep -E "^zone work +p50 .*REGRESSED" "$WORK/diff.txt" >/dev/null ||
    { cat "$WORK/diff.txt"; fail "zone work not named"; }
  "$SPY" diff "$WORK/base.db" "$WORK/base.db" >/dev/null
  rc=$?
  [ $rc = 0 ] || fail "the same recording twice: exit $rc"
  "$SPY" diff "$WORK/base.db" "$WORK/base2.db" >"$WORK/diff2.txt"
  rc=$?
  [ $rc = 0 ] || { cat "$WORK/diff2.txt"; fail "two recordings of the same run: exit $rc"; }
  "$SPY" diff "$WORK/base.db" "$WORK/slow.db" --json >"$WORK/diff.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['regressions'] >= 1" "$WORK/diff.json" ||
    fail "diff --json"
  "$SPY" diff "$WORK/base.db" "$WORK/missing.db" 2>/dev/null
  [ $? = 2 ] || fail "a missing file: exit 2 wanted"
  echo "not a database" >"$WORK/bad.db"
  "$SPY" diff "$WORK/base.db" "$WORK/bad.db" 2>/dev/null
  [ $? = 2 ] || fail "a non-recording: exit 2 wanted"
  "$SPY" diff "$WORK/base.db" "$WORK/slow.db" --threshold 5x 2>/dev/null
  [ $? = 2 ] || fail "a bad threshold: exit 2 wanted"
  sed -n '1,2p;/^zone work/p' "$WORK/diff.txt"
}

case_remote() {
  echo "== remote: a provider recorded through \`spyglass serve\` (--connect)"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$SPY" serve --listen "127.0.0.1:$port" >"$WORK/serve.log" 2>&1 &
  local srv=$!
  PIDS+=($srv)
  "$PROV" rec-remote 60 100 300 100 0 >/dev/null &
  local p=$!
  PIDS+=($p)
  wait_until 60 provider_up rec-remote || fail "rec-remote did not announce"
  # another runtime directory: only the link reaches the provider
  mkdir -m 700 "$WORK/elsewhere"
  SPYGLASS_DIR=$WORK/elsewhere "$SPY" record --connect "127.0.0.1:$port" \
    -o "$WORK/remote.db" -s 3 2>"$WORK/remote.log" || { cat "$WORK/remote.log"; fail "record --connect"; }
  [ "$(q "$WORK/remote.db" "SELECT name FROM process")" = rec-remote ] || fail "remote: no process"
  [ "$(q "$WORK/remote.db" "SELECT count(*) FROM slice")" -gt 50 ] || fail "remote: no slices"
  check_contiguous "$WORK/remote.db"
  check_nesting "$WORK/remote.db"
  echo "  $(q "$WORK/remote.db" "SELECT count(*) FROM frame") frames over the link"
  # --all through the bridge: the provider there, and one that starts
  # after the recorder did
  SPYGLASS_DIR=$WORK/elsewhere "$SPY" record --all --connect "127.0.0.1:$port" \
    -o "$WORK/remote-all.db" 2>"$WORK/remote-all.log" &
  local rec=$!
  PIDS+=($rec)
  wait_until 60 frames_over "$WORK/remote-all.db" 20 || fail "record --all --connect: no frames"
  "$PROV" rec-remote2 60 100 300 100 0 >/dev/null &
  local p2=$!
  PIDS+=($p2)
  wait_until 60 process_frames_over "$WORK/remote-all.db" rec-remote2 50 ||
    fail "record --all --connect: the provider that came later was not recorded"
  kill -INT $rec
  wait $rec || { cat "$WORK/remote-all.log"; fail "record --all --connect exited $?"; }
  [ "$(q "$WORK/remote-all.db" "SELECT group_concat(name, ',') FROM (SELECT name FROM process ORDER BY name)")" = \
    "rec-remote,rec-remote2" ] || fail "remote --all: processes $(q "$WORK/remote-all.db" "SELECT name FROM process")"
  local u
  for u in rec-remote rec-remote2; do
    [ "$(q "$WORK/remote-all.db" "SELECT count(*) FROM slice s JOIN track t ON t.id = s.track_id
        JOIN process p ON p.upid = t.upid WHERE p.name = '$u'")" -gt 20 ] || fail "remote --all: $u has no slices"
  done
  check_contiguous "$WORK/remote-all.db"
  check_nesting "$WORK/remote-all.db"
  # a bridge that is not there: exit 1 naming it
  SPYGLASS_DIR=$WORK/elsewhere "$SPY" record --all --connect "127.0.0.1:1" -o "$WORK/x.db" -s 1 2>"$WORK/x.log"
  [ $? = 1 ] && grep -q "127.0.0.1:1" "$WORK/x.log" || fail "--all --connect to nothing: exit 1 naming it"
  kill $srv $p $p2 2>/dev/null
  wait $srv $p $p2 2>/dev/null
  echo "  --all over the link: $(q "$WORK/remote-all.db" "SELECT group_concat(name || ' ' || (SELECT count(*) FROM frame f WHERE f.upid = p.upid) || ' frames', ', ') FROM process p")"
}

# check_chunks ROWS BASE: the chunk rows (tab-separated: buffer, frame,
# width, height, pixel_type, mode, keyframe, codec, path, file_offset, len)
# against the files they name (relative paths from BASE): each IVF file's
# header (size, frame count) and frame headers give exactly its rows'
# offsets and lengths, from a key frame on; each PNG's header has the
# row's size, its length is the file's, and its pixels inflate to
# height rows of 1 + 4 * width bytes. Then vpxdec decodes every IVF file
# to the frame count and size of its rows (ffprobe too, if installed) and
# pngcheck reads every PNG.
check_chunks() {
  python3 - "$1" "$2" <<'PY' || fail "chunk rows do not match the files"
import collections, os, struct, sys, zlib
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
assert rows, "no chunk rows"
files = collections.defaultdict(list)
for r in rows:
    buf, frame, w, h, pt, mode, key, codec, path, off, n = r
    files[path].append((int(off), int(n), int(w), int(h), int(key), codec))
for path, rs in files.items():
    full = path if path.startswith("/") else os.path.join(sys.argv[2], path)
    data = open(full, "rb").read()
    if path.endswith(".ivf"):
        assert data[:4] == b"DKIF" and data[8:12] == b"VP90", path
        ver, hl, _, w, h, rate, scale, count = struct.unpack("<HH4sHHIII", data[4:28])
        assert (ver, hl) == (0, 32), (path, ver, hl)
        assert count == len(rs), f"{path}: header says {count} frames, {len(rs)} rows"
        at, walked = 32, []
        while at < len(data):
            size, = struct.unpack("<I", data[at:at + 4])
            walked.append((at + 12, size))
            at += 12 + size
        assert at == len(data), f"{path}: a torn frame at the end"
        assert walked == sorted((o, n) for o, n, *_ in rs), f"{path}: offsets differ"
        assert all((rw, rh) == (w, h) and c == "vp9" for _, _, rw, rh, _, c in rs), path
        assert min(rs)[4] == 1, f"{path}: does not start at a key frame"
    else:
        assert len(rs) == 1 and rs[0][0] == 0 and rs[0][1] == len(data), path
        assert data[:8] == b"\x89PNG\r\n\x1a\n", path
        w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
        assert (w, h) == tuple(rs[0][2:4]) and (depth, ctype) == (8, 6), (path, w, h)
        at, idat = 8, b""
        while at < len(data):
            n, kind = struct.unpack(">I4s", data[at:at + 8])
            if kind == b"IDAT":
                idat += data[at + 8:at + 8 + n]
            at += 12 + n
        px = zlib.decompress(idat)
        assert len(px) == h * (1 + 4 * w), (path, len(px))
        assert all(px[y * (1 + 4 * w)] <= 4 for y in range(h)), path
print("  %d chunk rows in %d files match them" % (len(rows), len(files)))
PY
  local path n w h got
  while IFS=$'\t' read -r path n w h; do
    case $path in /*) ;; *) path=$2/$path ;; esac
    case $path in
    *.ivf)
      got=$(vpxdec --summary -o "$WORK/dec.y4m" "$path" 2>&1 | grep -o '^[0-9]* decoded frames') ||
        fail "vpxdec cannot decode $path"
      [ "$got" = "$n decoded frames" ] || fail "vpxdec: $path: $got, $n rows"
      head -c 64 "$WORK/dec.y4m" | head -n 1 | grep -q " W$w H$h " ||
        fail "vpxdec: $path is not ${w}x$h"
      if command -v ffprobe >/dev/null; then
        got=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries \
          stream=codec_name,width,height,nb_read_frames -of csv=p=0 "$path")
        [ "$got" = "vp9,$w,$h,$n" ] || fail "ffprobe: $path: $got"
      fi
      ;;
    *.png) pngcheck -q "$path" >/dev/null || fail "pngcheck: $path" ;;
    esac
  done < <(awk -F'\t' '{n[$9]++; w[$9] = $3; h[$9] = $4}
      END {for (p in n) print p "\t" n[p] "\t" w[p] "\t" h[p]}' "$1")
}

CHUNK_COLS="buffer, frame, width, height, pixel_type, mode, keyframe, codec, path, file_offset, len"

case_buffers() {
  echo "== buffers: the demo's framebuffer streamed into IVF, images as PNG"
  command -v vpxdec >/dev/null && command -v pngcheck >/dev/null ||
    fail "vpxdec or pngcheck missing (scripts/deps.sh)"
  "$SPY" demo --headless --seconds 120 --size 320x180 --name rec-buf >"$WORK/buf-demo.log" 2>&1 &
  local demo=$!
  PIDS+=($demo)
  wait_until 60 provider_up rec-buf || {
    kill -0 $demo 2>/dev/null && echo "(the demo runs)" || echo "(the demo exited)"
    tail -n 20 "$WORK/buf-demo.log"
    "$SPY" ls --wait 1000
    fail "demo did not announce"
  }
  # the default mode: the VP9 stream of one buffer; meanwhile `snap`
  # takes the same buffer raw (frames on the same channel the recorder
  # must leave out)
  "$SPY" record rec-buf -o "$WORK/buf.db" --buffers framebuffer 2>"$WORK/buf.log" &
  local rec=$!
  wait_until 60 chunks_over "$WORK/buf.db" 1 || fail "no chunks recorded"
  "$SPY" snap rec-buf framebuffer -o "$WORK/snap.png" --timeout 30000 >/dev/null ||
    fail "snap beside the recorder"
  local before
  before=$(q "$WORK/buf.db" "SELECT count(*) FROM chunk")
  wait_until 60 chunks_over "$WORK/buf.db" $((before + 2)) || fail "no chunks after the snap"
  kill -INT $rec
  wait $rec || { cat "$WORK/buf.log"; fail "record --buffers"; }
  q "$WORK/buf.db" "SELECT $CHUNK_COLS FROM chunk" | tr '|' '\t' >"$WORK/chunks.tsv"
  [ "$(q "$WORK/buf.db" "SELECT count(*) FROM chunk")" -ge 3 ] || fail "fewer than 3 chunks in 4 s"
  [ "$(q "$WORK/buf.db" "SELECT group_concat(DISTINCT buffer || ' ' || mode || ' ' ||
      codec || ' ' || width || 'x' || height || ' ' || pixel_type) FROM chunk")" = \
    "framebuffer stream vp9 320x180 rgba8" ] || fail "chunk rows: $(q "$WORK/buf.db" "SELECT * FROM chunk LIMIT 3")"
  [ -f "$WORK/buf.db.buffers/framebuffer-320x180.ivf" ] || fail "no IVF file beside the database"
  # each chunk was read on a recorded frame
  [ "$(q "$WORK/buf.db" "SELECT count(*) FROM chunk WHERE frame NOT BETWEEN
      (SELECT min(frame) FROM frame) AND (SELECT max(frame) FROM frame)")" = 0 ] ||
    fail "chunks of frames outside the recording"
  check_chunks "$WORK/chunks.tsv" "$WORK"
  # SIGKILL: the IVF file decodes to the count its header says, and every
  # committed row points at a whole chunk in it
  "$SPY" record rec-buf -o "$WORK/bufk.db" --buffers framebuffer 2>/dev/null &
  local rec=$!
  wait_until 60 chunks_over "$WORK/bufk.db" 2 || fail "no chunk rows committed"
  kill -KILL $rec
  wait $rec 2>/dev/null
  q "$WORK/bufk.db" "SELECT file_offset, len FROM chunk" | tr '|' ' ' >"$WORK/bufk.rows"
  local count
  count=$(python3 - "$WORK/bufk.db.buffers/framebuffer-320x180.ivf" "$WORK/bufk.rows" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
count, = struct.unpack("<I", data[24:28])
at, walked = 32, set()
while at + 12 <= len(data):
    size, = struct.unpack("<I", data[at:at + 4])
    if at + 12 + size > len(data):
        break
    walked.add((at + 12, size))
    at += 12 + size
assert count == len(walked), (count, len(walked))
rows = {tuple(map(int, l.split())) for l in open(sys.argv[2]) if l.strip()}
assert rows and rows <= walked, (sorted(rows - walked)[:3])
print(count)
PY
) || fail "after SIGKILL the IVF file and its rows disagree"
  [ "$(vpxdec --summary -o /dev/null "$WORK/bufk.db.buffers/framebuffer-320x180.ivf" 2>&1 |
    grep -o '^[0-9]* decoded')" = "$count decoded" ] || fail "vpxdec after SIGKILL"
  # every buffer the demo declares (learnt from its metadata), as PNG
  # thumbnails
  "$SPY" record rec-buf -o "$WORK/thumb.db" -s 4 --buffers all --buffer-mode thumb \
    --long-edge 100 2>"$WORK/thumb.log" || { cat "$WORK/thumb.log"; fail "record --buffers all"; }
  [ "$(q "$WORK/thumb.db" "SELECT group_concat(b, ',') FROM (SELECT DISTINCT buffer || ' ' ||
      width || 'x' || height || ' ' || mode AS b FROM chunk ORDER BY 1)")" = \
    "depth 100x56 thumb,framebuffer 100x56 thumb,normals 100x56 thumb" ] ||
    fail "thumbnails: $(q "$WORK/thumb.db" "SELECT DISTINCT buffer, width, height, mode FROM chunk")"
  q "$WORK/thumb.db" "SELECT $CHUNK_COLS FROM chunk" | tr '|' '\t' >"$WORK/thumbs.tsv"
  check_chunks "$WORK/thumbs.tsv" "$WORK"
  # PostgreSQL gets the same rows; the files go in --buffers-dir and
  # chunk.path is absolute
  [ -n "${PG_DIR:-}" ] || pg_start || fail "postgres did not start"
  "$SPY" record rec-buf --db "$PG_URI" -s 3 --buffers framebuffer,depth --buffer-mode raw \
    --buffers-dir "$WORK/pgbuf" 2>"$WORK/pgbuf.log" || { cat "$WORK/pgbuf.log"; fail "record --db --buffers"; }
  local id
  id=$(pg_sql "SELECT max(id) FROM recording")
  pg_sql "SELECT $CHUNK_COLS FROM chunk WHERE recording_id = $id" | tr '|' '\t' >"$WORK/pgchunks.tsv"
  [ "$(cut -f1 "$WORK/pgchunks.tsv" | sort -u | tr '\n' ' ')" = "depth framebuffer " ] ||
    fail "pg chunk rows: $(head -3 "$WORK/pgchunks.tsv")"
  ! grep -qv "	320	180	[a-z0-9]*	raw	1	rgba8	$WORK/pgbuf/" "$WORK/pgchunks.tsv" ||
    fail "pg chunk rows: $(head -3 "$WORK/pgchunks.tsv")"
  check_chunks "$WORK/pgchunks.tsv" /nonexistent
  # every chunk's frame has a frame row, also when the recording stops
  # before that frame's stats sample came: each captured frame of this
  # provider stalls 1.5 s after its capture (its image leaves at once, its
  # sample with the flush after it ends), and the recorder is stopped as
  # soon as its second chunk is committed
  "$PROV" rec-stall 120 100 100 100 0 1500 >/dev/null &
  local stall=$!
  PIDS+=($stall)
  wait_until 60 provider_up rec-stall || fail "rec_provider (stalling) did not announce"
  "$SPY" record rec-stall -o "$WORK/stall.db" --buffers frame --buffer-mode raw 2>"$WORK/stall.log" &
  rec=$!
  wait_until 60 chunks_over "$WORK/stall.db" 1 || fail "no chunks of the stalling provider"
  kill -INT $rec
  wait $rec || { cat "$WORK/stall.log"; fail "record the stalling provider"; }
  kill $stall 2>/dev/null
  wait $stall 2>/dev/null
  [ "$(q "$WORK/stall.db" "SELECT count(*) FROM chunk c WHERE NOT EXISTS (SELECT 1 FROM frame f
      WHERE f.upid = c.upid AND f.frame = c.frame)")" = 0 ] ||
    fail "stalled frames: chunks without a frame row: $(q "$WORK/stall.db" "SELECT frame FROM chunk") frames $(q "$WORK/stall.db" "SELECT min(frame), max(frame) FROM frame")"
  check_contiguous "$WORK/stall.db"
  q "$WORK/stall.db" "SELECT $CHUNK_COLS FROM chunk" | tr '|' '\t' >"$WORK/stall.tsv"
  check_chunks "$WORK/stall.tsv" "$WORK"
  # usage errors name the problem, exit 2
  "$SPY" record rec-buf -o "$WORK/b1.db" -s 1 --buffers framebuffer --buffer-mode vp8 2>"$WORK/e.log"
  [ $? = 2 ] && grep -q vp8 "$WORK/e.log" || fail "--buffer-mode vp8: exit 2 naming it"
  "$SPY" record rec-buf -o "$WORK/b2.db" -s 1 --buffers "framebuffer,,depth" 2>"$WORK/e.log"
  [ $? = 2 ] && grep -q "empty buffer name" "$WORK/e.log" && [ ! -e "$WORK/b2.db" ] ||
    fail "--buffers a,,b: exit 2 naming it, no file made"
  "$SPY" record rec-buf -o "$WORK/b3.db" -s 1 --buffers framebuffer --long-edge 64 2>/dev/null
  [ $? = 2 ] || fail "--long-edge without thumb: exit 2 wanted"
  kill $demo 2>/dev/null
  wait $demo 2>/dev/null
}

case_packed() {
  echo "== packed: zone blocks equal the rows of the same run; plain sqlite3 with .load"
  "$SPY" demo --headless --seconds 120 --name pk-demo >"$WORK/pk-demo.log" 2>&1 &
  local demo=$!
  PIDS+=($demo)
  wait_until 60 provider_up pk-demo || fail "demo did not announce"
  # one recorder keeps both forms (the same zones, the same ids); a second
  # one, beside it, rows only
  "$SPY" record pk-demo -o "$WORK/both.db" --zones both 2>"$WORK/both.log" &
  local rb=$!
  "$SPY" record pk-demo -o "$WORK/rows.db" --zones rows 2>"$WORK/rows.log" &
  local rr=$!
  wait_until 60 frames_over "$WORK/both.db" 300 || fail "no frames recorded"
  wait_until 60 frames_over "$WORK/rows.db" 300 || fail "no frames recorded (rows)"
  kill -INT $rb $rr
  wait $rb || { cat "$WORK/both.log"; fail "record --zones both exited $?"; }
  wait $rr || { cat "$WORK/rows.log"; fail "record --zones rows exited $?"; }
  kill $demo 2>/dev/null
  wait $demo 2>/dev/null
  local db=$WORK/both.db n b
  n=$(q "$db" "SELECT count(*) FROM slice_data")
  b=$(q "$db" "SELECT count(*) FROM spyglass_slices")
  [ "$n" -gt 200 ] && [ "$n" = "$b" ] || fail "packed: $b zones in blocks, $n rows"
  local cols="id, ts, dur, track_id, name_id, depth, parent_id, flags"
  [ "$(q "$db" "SELECT count(*) FROM (SELECT $cols FROM spyglass_slices EXCEPT SELECT $cols FROM slice_data)")" = 0 ] &&
    [ "$(q "$db" "SELECT count(*) FROM (SELECT $cols FROM slice_data EXCEPT SELECT $cols FROM spyglass_slices)")" = 0 ] ||
    fail "packed: blocks and rows hold different zones"
  # the same slices out of both forms, byte for byte
  local f
  for f in perfetto chrome; do
    "$SPY" export "$db" -f $f -o "$WORK/pk.$f" --zones packed || fail "export $f packed"
    "$SPY" export "$db" -f $f -o "$WORK/rw.$f" --zones rows || fail "export $f rows"
    cmp -s "$WORK/pk.$f" "$WORK/rw.$f" || fail "export $f: packed and rows differ"
  done
  protoc --proto_path="$HERE/fixtures" --decode=perfetto.protos.Trace \
    perfetto_trace.proto <"$WORK/pk.perfetto" >"$WORK/pk.txt" || fail "protoc: packed export"
  [ "$(grep -c "type: TYPE_SLICE_BEGIN" "$WORK/pk.txt")" = "$n" ] || fail "packed export: slices missing"
  # diff reads the blocks: the same figures as from the rows alone
  cp "$db" "$WORK/only-rows.db"
  q "$WORK/only-rows.db" "DELETE FROM zone_block"
  "$SPY" diff "$WORK/only-rows.db" "$db" --json >"$WORK/pk-diff.json" || fail "diff packed vs rows"
  python3 - "$WORK/pk-diff.json" <<'EOF' || fail "diff: packed and rows give other figures"
import json, sys
d = json.load(open(sys.argv[1]))
zones = [f for f in d["figures"] if not f["figure"].startswith("frame")]
assert zones, "no zone figures"
for f in d["figures"]:
    assert f["base"] == f["new"] and f.get("base_n") == f.get("new_n") and \
        f.get("base_spread") == f.get("new_spread"), f
EOF
  # plain sqlite3: a packed file's `slice` names the table it needs; with
  # .load it answers as the rows do; a --zones rows file needs nothing
  local pk=$WORK/packed.db
  cp "$db" "$pk"
  q "$pk" "DELETE FROM slice_data; DROP VIEW slice; CREATE VIEW slice AS $(q "$WORK/rows.db" "SELECT substr(sql, instr(sql, 'SELECT')) FROM sqlite_schema WHERE name = 'slice'" | sed 's/FROM slice_data s/FROM spyglass_slices s/')"
  local err
  err=$(q_plain "$pk" "SELECT count(*) FROM slice" 2>&1) && fail "packed slice without the extension: $err"
  echo "$err" | grep -q spyglass_slices || fail "packed slice without the extension: $err"
  [ "$(q_plain "$pk" "SELECT count(*) FROM frame")" -gt 300 ] || fail "packed: frame needs no extension"
  [ "$(q "$pk" "SELECT name, count(*), sum(dur) FROM slice GROUP BY 1 ORDER BY 1")" = \
    "$(q "$db" "SELECT name, count(*), sum(dur) FROM slice GROUP BY 1 ORDER BY 1")" ] ||
    fail "packed: slice through the extension differs from the rows"
  [ "$(q_plain "$WORK/rows.db" "SELECT count(*) FROM slice")" -gt 200 ] || fail "rows: slice without the extension"
  [ "$(q_plain "$WORK/rows.db" "SELECT count(*) FROM zone_block")" = 0 ] || fail "rows: blocks written"
  # a damaged block: an error naming it, never a crash
  q "$pk" "UPDATE zone_block SET data = substr(data, 1, length(data) / 2) WHERE rowid = (SELECT min(rowid) FROM zone_block)"
  err=$("$SPY" export "$pk" -f perfetto -o "$WORK/bad.pftrace" 2>&1) && fail "export of a corrupt block succeeded"
  echo "$err" | grep -q corrupt || fail "export of a corrupt block: $err"
  err=$(q "$pk" "SELECT count(*) FROM slice" 2>&1) && fail "a corrupt block read: $err"
  echo "$err" | grep -q corrupt || fail "slice over a corrupt block: $err"
  echo "  $n zones: blocks = rows, exports identical, diff identical, $(q "$db" "SELECT sum(length(data)) FROM zone_block") bytes of blocks"
}

for c in $CASES; do
  "case_$c"
done
echo "record.sh: all passed ($CASES)"
