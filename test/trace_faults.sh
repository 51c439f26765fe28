#!/usr/bin/env bash
# trace_faults.sh TOOL — a build traced into SQLite is killed with SIGKILL
# mid-build: the database opens cleanly, passes an integrity check, and
# holds a gap-free prefix of the actions (every committed batch, read
# back through the reader too), in the derived tables too, with every
# payload they name; the
# summary reads it and says the writer did not finish. Then the CLI's
# answers to bad usage and unreadable stores.
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
work=$(mktemp -d /tmp/spy-trace-kill-XXXXXX)
trap 'rm -rf "$work"' EXIT
gen_tree "$work/src" 10 20
"$tool" demo build "$work/src" --trace sqlite --out "$work/out" \
  --hook-delay-us 2000 >"$work/b.txt" 2>&1 &
pid=$!
db=""
for _ in $(seq 500); do
  db=$(ls "$work"/out/.spyglass/*/trace.db 2>/dev/null | head -n 1 || true)
  if [ -n "$db" ]; then
    n=$(sqlite3 "$db" "select coalesce(sum(count),0) from action_batches" 2>/dev/null || echo 0)
    [ "${n:-0}" -gt 100 ] && break
  fi
  sleep 0.02
done
kill -0 "$pid" 2>/dev/null || fail "the build ended before it could be killed"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[ -n "$db" ] || fail "no database"
[ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || fail "integrity"
read -r count lo hi < <(sqlite3 -separator ' ' "$db" \
  "select sum(count), min(first_seq), max(last_seq) from action_batches")
gaps=$(sqlite3 "$db" "select count(*) from action_batches a where first_seq > 1 and
  not exists (select 1 from action_batches b where b.last_seq = a.first_seq - 1)")
echo "after SIGKILL: $count actions committed, seq $lo..$hi"
[ "$count" -gt 100 ] || fail "committed actions missing"
[ "$lo" -eq 1 ] && [ "$hi" -eq "$count" ] && [ "$gaps" -eq 0 ] ||
  fail "a gap in the committed prefix"
# the derived tables hold the same prefix, and every payload they name
[ "$(sqlite3 "$db" "select (select count(*) from hook_transform_call_start) +
  (select count(*) from hook_load_call_start) + (select count(*) from
  hook_resolve_id_call_start) > 0")" -eq 1 ] || fail "no hook rows"
[ "$(sqlite3 "$db" "select max(seq) from (select seq from hook_transform_call_start
  union all select seq from hook_transform_call_end union all select seq from
  hook_load_call_end union all select seq from hook_resolve_id_call_end)")" -le "$hi" ] ||
  fail "rows beyond the committed batches"
missing=$(sqlite3 "$db" "select count(*) from (select content_source_id id from
  hook_transform_call_start union all select content_source_id from
  hook_transform_call_end union all select content_source_id from hook_load_call_end)
  a where id is not null and not exists (select 1 from sources s where s.source_id = a.id)")
[ "$missing" -eq 0 ] || fail "$missing rows name a payload that was not committed"
"$tool" trace summary "$(dirname "$db")" >"$work/s.txt" || fail "summary"
grep -q "^actions     $count in 1 build" "$work/s.txt" || { cat "$work/s.txt"; fail "summary count"; }
grep -q 'not stored  unknown' "$work/s.txt" || fail "summary should say the writer did not finish"

# bad usage and unreadable stores: exit codes and messages
code() { "$@" >/dev/null 2>&1 && echo 0 || echo $?; }
[ "$(code "$tool" demo build)" -eq 2 ] || fail "demo build without SRC_DIR"
[ "$(code "$tool" demo build "$work/src" --trace nosuch)" -eq 2 ] || fail "unknown --trace"
[ "$(code "$tool" trace summary "$work/nosuch")" -eq 1 ] || fail "missing store"
[ "$(code "$tool" trace)" -eq 2 ] || fail "trace without subcommand"
"$tool" demo build --help | grep -q 'SRC_DIR' || fail "demo build --help"
echo "trace_faults: all passed"
