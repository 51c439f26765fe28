#!/usr/bin/env bash
# trace_spill.sh TOOL — the trace spills to disk when its writer cannot
# keep up, and a process killed while spilling loses nothing it spilled.
# The writer is slowed (SPY_TRACE_WRITER_DELAY_US) behind a small queue
# with no memory spill, so a real `demo build` outruns it and its actions
# go to the spill file. (1) Unkilled, into SQLite and JSON-lines: the
# summary names the spill, no spill file is left, and the store answers
# exactly as an unspilled run's does. (2) SIGKILL after the build wrote
# its outputs, while the writer is still reading the spill file: the
# committed prefix is intact, `trace recover` adds the spilled actions
# (none lost, none cut), the counts equal what the build emitted, and the
# answers equal the unspilled run's again. The same against a throw-away
# PostgreSQL server when PostgreSQL is installed (the spill directory is
# <out>/.spyglass/<session>, recovered with --db).
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
work=$(mktemp -d /tmp/spy-trace-spill-XXXXXX)
pid=""
trap 'kill -9 $pid 2>/dev/null || true; pg_cleanup; rm -rf "$work"' EXIT
writers="sqlite jsonl"
if [ -x "$PG_BIN/postgres" ]; then
  pg_start
  writers="$writers pg"
else
  echo "trace_spill: PostgreSQL is not installed: the postgres case is skipped"
fi
gen_tree "$work/src" 8 20

# what the store answers, without times: counts, per-plugin hook calls,
# one module's calls (plugin, bytes in and out) and a source's bytes
answers() { # STORE OUT
  "$tool" trace summary "$1" --json |
    jq -S '{actions, builds, modules, chunks, hook_calls, sources,
            source_bytes, plugins: [.plugins[] | {plugin, hook, calls}] |
            sort_by(.plugin, .hook)}' >"$2"
  "$tool" trace module "$1" d3/f7.h --json |
    jq -S 'walk(if type == "object" then
             with_entries(select(.key | test("us$|_at$|time") | not))
           else . end)' >>"$2"
}

slow=(env SPY_TRACE_QUEUE_BYTES=65536 SPY_TRACE_SPILL_BYTES=1)

# the store of a run: its session directory, or (postgres) the server,
# whose latest session is the run's; the spill directory
store() { if [ "$w" = pg ]; then echo "$PG_URI"; else echo "$1"; fi; }
spilldir() { ls -d "$1"/.spyglass/*/ 2>/dev/null | head -n 1 || true; }
trace_of() { if [ "$w" = pg ]; then echo "$PG_URI"; else echo "$w"; fi; }
recover() { if [ "$w" = pg ]; then "$tool" trace recover "$1" --db "$PG_URI" "${@:2}"; else "$tool" trace recover "$@"; fi; }

for w in $writers; do
  # the baseline: an unspilled run
  "$tool" demo build "$work/src" --trace "$(trace_of)" --out "$work/base-$w" >"$work/base-$w.txt"
  grep -q "spilled" "$work/base-$w.txt" && fail "$w: the baseline spilled"
  if [ "$w" = pg ]; then bdir=$PG_URI; else
    bdir=$(sed -n 's/^trace: \(\/.*\)$/\1/p' "$work/base-$w.txt")
    [ -d "$bdir" ] || fail "$w: no baseline store"
  fi
  answers "$bdir" "$work/base-$w.json"
  emitted=$(jq -s ".[0].actions" "$work/base-$w.json")

  # (1) spilled to disk, not killed
  "${slow[@]}" SPY_TRACE_WRITER_DELAY_US=300 "$tool" demo build "$work/src" \
    --trace "$(trace_of)" --out "$work/sp-$w" >"$work/sp-$w.txt"
  sdir=$(sed -n 's/^trace: \(\/.*\)$/\1/p' "$work/sp-$w.txt")
  [ "$w" = pg ] && sdir=$work/sp-$w/.spyglass/none
  cat "$work/sp-$w.txt"
  n=$(sed -n 's/.*, \([0-9]*\) to the spill file.*/\1/p' "$work/sp-$w.txt")
  [ "${n:-0}" -gt 0 ] || fail "$w: nothing spilled to the file"
  grep -q "packing them after the build took" "$work/sp-$w.txt" || fail "$w: summary"
  ls "$sdir"/spill-*.bin >/dev/null 2>&1 && fail "$w: a spill file was left"
  # postgres: the directory made for the spill goes with its files
  if [ "$w" = pg ] && [ -e "$work/sp-$w/.spyglass" ]; then
    ls -laR "$work/sp-$w/.spyglass"
    fail "$w: the spill left $work/sp-$w/.spyglass behind"
  fi
  answers "$(store "$sdir")" "$work/sp-$w.json"
  diff "$work/base-$w.json" "$work/sp-$w.json" || fail "$w: spilled store answers differ"

  # (2) killed while the writer reads the spill file back
  "${slow[@]}" SPY_TRACE_WRITER_DELAY_US=3000 "$tool" demo build "$work/src" \
    --trace "$(trace_of)" --out "$work/k-$w" >"$work/k-$w.txt" 2>&1 &
  pid=$!
  nchunks=$(ls "$work/base-$w/dist" | wc -l)
  kdir="" first="" ok=0
  for _ in $(seq 3000); do # the build's outputs, then a spilled record committed
    kill -0 "$pid" 2>/dev/null || break
    [ -n "$kdir" ] || kdir=$(spilldir "$work/k-$w")
    if [ -n "$kdir" ] && [ "$(ls "$work/k-$w/dist" 2>/dev/null | wc -l)" -ge "$nchunks" ]; then
      f=$(ls "$kdir"/spill-*.bin 2>/dev/null | head -n 1 || true)
      # records reach the file when the writer writes the emitter's
      # buffers out (its next batch, or commit): wait for the first one
      if [ -n "$f" ] && [ -z "$first" ] && [ "$(stat -c %s "$f")" -gt 4200 ]; then
        # the first record's seq: header block 4096, record header 8, seq at +8
        first=$(od -An -t u8 -j 4112 -N 8 "$f" | tr -d ' ')
      fi
      if [ -n "$first" ]; then
        c=$("$tool" trace summary "$(store "$kdir")" --json 2>/dev/null | jq .actions || echo 0)
        if [ "${c:-0}" -gt "$first" ]; then ok=1; break; fi
      fi
    fi
    sleep 0.05
  done
  [ "$ok" -eq 1 ] || { cat "$work/k-$w.txt"; fail "$w: the build did not reach the spill file in time"; }
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
  ls "$kdir"/spill-*.bin >/dev/null || fail "$w: no spill file after the kill"
  if [ "$w" = sqlite ]; then
    [ "$(sqlite3 "$kdir/trace.db" 'pragma integrity_check')" = ok ] || fail "integrity"
  fi
  before=$("$tool" trace summary "$(store "$kdir")" --json | jq .actions)
  [ "$before" -lt "$emitted" ] || fail "$w: nothing was left to recover"
  recover "$kdir" --json >"$work/rec-$w.json" || fail "$w: recover"
  cat "$work/rec-$w.json"
  [ "$(jq .committed "$work/rec-$w.json")" -eq "$before" ] || fail "$w: committed prefix"
  [ "$(jq .lost_in_memory "$work/rec-$w.json")" -eq 0 ] || fail "$w: actions lost"
  [ "$(jq .torn "$work/rec-$w.json")" -eq 0 ] || fail "$w: cut records"
  [ "$(jq .recovered "$work/rec-$w.json")" -eq $((emitted - before)) ] ||
    fail "$w: recovered $(jq .recovered "$work/rec-$w.json"), expected $((emitted - before))"
  ls "$kdir"/spill-*.bin >/dev/null 2>&1 && fail "$w: spill files left after recover"
  answers "$(store "$kdir")" "$work/k-$w.json"
  diff "$work/base-$w.json" "$work/k-$w.json" || fail "$w: recovered store answers differ"
  if [ "$w" = sqlite ]; then # the hook_calls table too (readers answer from it)
    ended() { sqlite3 "$1" 'select count(*) from hook_calls where ended_at is not null'; }
    [ "$(ended "$kdir/trace.db")" = "$(ended "$bdir/trace.db")" ] ||
      fail "sqlite: hook_calls after recover: $(ended "$kdir/trace.db") ended calls, not $(ended "$bdir/trace.db")"
  fi
  # a second recover has nothing to do
  recover "$kdir" | grep -q "nothing to recover" || fail "$w: recover twice"
  echo "$w: spilled $n to disk unkilled; killed with $before committed, $(jq .recovered "$work/rec-$w.json") recovered"
done
# (3) SQLite, killed while the build itself still spills (its transforms
# slowed): what was committed plus what the file holds is a gap-free
# prefix of the session, nothing in between lost, at most one record cut
w=sqlite
"${slow[@]}" SPY_TRACE_WRITER_DELAY_US=3000 "$tool" demo build "$work/src" \
  --trace sqlite --hook-delay-us 3000 --out "$work/m" >"$work/m.txt" 2>&1 &
pid=$!
mdir="" first="" ok=0
for _ in $(seq 3000); do
  kill -0 "$pid" 2>/dev/null || break
  [ -n "$mdir" ] || mdir=$(spilldir "$work/m")
  f=$(ls "$mdir"/spill-*.bin 2>/dev/null | head -n 1 || true)
  if [ -n "$f" ] && [ -z "$first" ] && [ "$(stat -c %s "$f")" -gt 4200 ]; then
    first=$(od -An -t u8 -j 4112 -N 8 "$f" | tr -d ' ')
  fi
  if [ -n "$first" ]; then
    c=$("$tool" trace summary "$mdir" --json 2>/dev/null | jq .actions || echo 0)
    if [ "${c:-0}" -gt "$first" ]; then ok=1; break; fi
  fi
  sleep 0.05
done
[ "$ok" -eq 1 ] || { cat "$work/m.txt"; fail "mid-build: no spilled record committed in time"; }
running=$(kill -0 "$pid" 2>/dev/null && [ "$(ls "$work/m/dist" 2>/dev/null | wc -l)" -eq 0 ] && echo yes || echo no)
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=""
before=$("$tool" trace summary "$mdir" --json | jq .actions)
recover "$mdir" --json >"$work/rec-m.json" || fail "mid-build: recover"
cat "$work/rec-m.json"
[ "$(jq .lost_in_memory "$work/rec-m.json")" -eq 0 ] || fail "mid-build: actions lost"
[ "$(jq .torn "$work/rec-m.json")" -le 1 ] || fail "mid-build: more than the last record cut"
r=$(jq .recovered "$work/rec-m.json")
[ "$r" -gt 0 ] || fail "mid-build: nothing recovered"
after=$("$tool" trace summary "$mdir" --json | jq .actions)
[ "$after" -eq $((before + r)) ] || fail "mid-build: $after actions, expected $before + $r"
echo "mid-build kill (build still running: $running): $before committed, $r recovered"
echo "trace_spill: all passed"
