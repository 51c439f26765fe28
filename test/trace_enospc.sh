#!/usr/bin/env bash
# trace_enospc.sh TOOL — a traced `spyglass demo build` whose trace
# directory is a small tmpfs (mounted here; needs root) that fills up
# mid-build, for the SQLite and the JSON-lines writer. The build says how
# many actions were not stored; `trace summary` and the stored rows agree
# with it exactly (stored + not stored = emitted); the failure is
# reported as ENOSPC, once per distinct failure with a count, not once
# per action; the store still reads.
set -euo pipefail
tool=$1
. "$(dirname "$0")/trace_lib.sh"
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: mounting a tmpfs needs root"
  exit 77
fi
work=$(mktemp -d /tmp/spy-trace-enospc-XXXXXX)
mnt="$work/mnt"
trap 'umount "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
gen_tree "$work/src" 30 40

# check_store [repeats]: the build ($rc, b.txt, e.txt) lost actions to
# ENOSPC, and the store in $mnt agrees with what it says (repeats: the
# failure repeated, and was reported once more with its count).
check_store() {
  [ "$rc" -eq 1 ] || { cat "$work/b.txt" "$work/e.txt"; fail "$writer: exit $rc, want 1 (actions not stored)"; }
  read -r emitted lost < <(sed -n 's/^trace: session [^,]*, \([0-9]*\) actions, [0-9]* written, \([0-9]*\) not stored.*/\1 \2/p' "$work/b.txt")
  [ -n "${emitted:-}" ] && [ "$lost" -gt 0 ] || { cat "$work/b.txt"; fail "$writer: no loss reported"; }
  dir=$(ls -d "$mnt"/*/)
  dir=${dir%/}
  "$tool" trace summary "$dir" >"$work/s.txt" || fail "$writer: summary"
  stored=$(sed -n 's/^actions *\([0-9]*\) in.*/\1/p' "$work/s.txt")
  slost=$(sed -n 's/^not stored *\([0-9]*\) actions/\1/p' "$work/s.txt")
  calls=$(sed -n 's/^hook calls *\([0-9]*\)/\1/p' "$work/s.txt")
  echo "$writer: emitted $emitted, stored $stored, not stored $lost (summary: $slost)"
  [ "$stored" -gt 0 ] || fail "$writer: nothing stored at all"
  [ "$slost" = "$lost" ] || { cat "$work/s.txt"; fail "$writer: summary says $slost not stored, the build $lost"; }
  [ $((stored + lost)) -eq "$emitted" ] || fail "$writer: stored $stored + lost $lost != emitted $emitted"
  if [ "$writer" = sqlite ]; then
    db="$dir/trace.db"
    [ "$(sqlite3 "$db" 'pragma integrity_check')" = ok ] || fail "integrity"
    [ "$(sqlite3 "$db" 'select sum(count) from action_batches')" -eq "$stored" ] ||
      fail "action_batches rows disagree with the summary"
    [ "$(sqlite3 "$db" 'select actions || " " || actions_lost from sessions')" = "$stored $lost" ] ||
      fail "sessions row: $(sqlite3 "$db" 'select actions, actions_lost from sessions')"
    ends=$(sqlite3 "$db" "select (select count(*) from hook_transform_call_end) +
      (select count(*) from hook_load_call_end) + (select count(*) from
      hook_resolve_id_call_end) + (select count(*) from hook_render_chunk_end)")
    [ "$ends" -eq "$calls" ] || fail "$ends hook End rows, the summary says $calls hook calls"
    [ ! -e "$dir/trace.db-reserve" ] || fail "the reserve file was left behind"
    # every payload a stored row names is stored (a failed batch's
    # payloads are stored again by the next batch that names them)
    missing=$(sqlite3 "$db" "select count(*) from (select input_source_id id from
      hook_calls union all select output_source_id from hook_calls union all
      select content_source_id from assets) a where id is not null and not
      exists (select 1 from sources s where s.source_id = a.id)")
    [ "$missing" -eq 0 ] || fail "$missing rows name a payload that is not stored"
  else
    n=$(grep -vc '"action":"StringRef"' "$dir/logs.json" || true)
    n=$((n + $(wc -l <"$dir/meta.json")))
    [ "$n" -eq "$stored" ] || fail "jsonl: $n action lines, summary says $stored"
    [ "$(tail -c 1 "$dir/logs.json" | od -An -c | tr -d ' ')" = '\n' ] ||
      fail "jsonl: logs.json ends with a partial line"
    grep -q "\"lost\":$lost" "$dir/spyglass.json" || fail "jsonl: spyglass.json: $(cat "$dir/spyglass.json")"
    python3 - "$dir/logs.json" <<'PY' || fail "jsonl: a payload is named before (or without) its StringRef"
import json, re, sys
seen = set()
for n, line in enumerate(open(sys.argv[1], encoding="utf-8"), 1):
    o = json.loads(line)
    if o.get("action") == "StringRef":
        seen.add(o["id"])
        continue
    for ref in re.findall(r'"\$ref:([0-9a-f]{32})"', line):
        if ref not in seen:
            sys.exit(f"line {n}: $ref:{ref} not stored before")
PY
  fi
  lines=$(grep -c '^spyglass trace:' "$work/e.txt" || true)
  grep -q '(ENOSPC)' "$work/e.txt" || { cat "$work/e.txt"; fail "$writer: ENOSPC not reported as such"; }
  ! grep -q '(EIO)' "$work/e.txt" || { cat "$work/e.txt"; fail "$writer: ENOSPC reported as EIO"; }
  [ "$lines" -le 8 ] || { head "$work/e.txt"; fail "$writer: $lines error lines, want one per distinct failure"; }
  if [ "${1:-}" = repeats ]; then
    grep -q 'times in all' "$work/e.txt" || fail "$writer: repeats not counted"
  fi
}

for writer in sqlite jsonl; do
  mkdir -p "$mnt" "$work/out-$writer"
  mount -t tmpfs -o size=2m,mode=0700 tmpfs "$mnt"
  # the build's own outputs stay on the disk; only the trace is on the tmpfs
  ln -s "$mnt" "$work/out-$writer/.spyglass"
    rc=0
  # small batches: the failure must repeat (several commits fail) to be
  # reported once with its count
  SPY_TRACE_BATCH_ACTIONS=1024 \
    "$tool" demo build "$work/src" --trace "$writer" --out "$work/out-$writer" \
    >"$work/b.txt" 2>"$work/e.txt" || rc=$?
  check_store repeats
  umount "$mnt"
done

# The disk fills mid-build and space comes back before the end: the
# batches after it are stored again, with the payloads the failed ones
# took with them, and the counts still agree. The build races the disk
# filling: one that ends before it fills proves nothing, so it is run
# again with slower hooks. Waits have deadlines in seconds (generous: a
# loaded machine or a sanitizer build is slow), not in loop counts.
# back_once writer delay_us: sets back to ok (ENOSPC came mid-build and
# the store agrees) or early (the build ended before the disk filled).
back_once() {
  local delay=$2 deadline
  writer=$1
  rm -rf "$work/back-$writer"
  mkdir -p "$mnt" "$work/back-$writer"
  mount -t tmpfs -o size=32m,mode=0700 tmpfs "$mnt"
  ln -s "$mnt" "$work/back-$writer/.spyglass"
  "$tool" demo build "$work/src" --trace "$writer" --out "$work/back-$writer" \
    --hook-delay-us "$delay" >"$work/b.txt" 2>"$work/e.txt" &
  pid=$!
  deadline=$((SECONDS + 120))
  # the trace store has its first file: fill the disk under it
  while [ -z "$(ls "$mnt"/*/* 2>/dev/null)" ] && kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" || true
      cat "$work/e.txt"
      fail "$writer: no trace file in $mnt after 120 s of the build"
    fi
    sleep 0.02
  done
  dd if=/dev/zero of="$mnt/fill" bs=4k >/dev/null 2>&1 || true
  while ! grep -q ENOSPC "$work/e.txt" && kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" || true
      cat "$work/e.txt"
      fail "$writer: the disk is full and the build ran 120 s without reporting ENOSPC"
    fi
    sleep 0.02
  done
  rm -f "$mnt/fill"
  rc=0
  wait "$pid" || rc=$?
  if ! grep -q ENOSPC "$work/e.txt"; then
    echo "$writer: the build (exit $rc, hooks delayed $delay us) ended before the disk filled"
    umount "$mnt"
    back=early
    return 0
  fi
  check_store
  [ "$stored" -gt 4096 ] || { cat "$work/e.txt"; fail "$writer: nothing stored after space came back"; }
  umount "$mnt"
  back=ok
}

for writer in sqlite jsonl; do
  for delay in 400 1600 6400; do
    back_once "$writer" "$delay"
    [ "$back" = early ] || break
  done
  [ "$back" = ok ] || fail "$writer: every build ended before the disk filled (hooks delayed up to 6400 us)"
done
echo "trace_enospc: OK"
